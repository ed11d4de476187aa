//! The text generated from the format crate and kept in the tree: the key tables of
//! docs/format.md (from the writer's key order and the schema's types, versions and
//! descriptions), the hardware-counter tables of docs/format.md and src/hw/README.md and their
//! counts, schema/hw_counters.json (the vocabulary for readers in other languages, such as
//! the e2e checker) and schema/wqe_counts.json (the counter table, likewise). Regions of a document are delimited by BEGIN/END markers.

use crate::schema::{key_order, Schema};
use rccl_telemetry_format::counters::FIELDS;
use rccl_telemetry_format::vocab::{Kind, Src, VOCAB};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// How to regenerate, as the markers and the failure message say it: the one target that
/// regenerates everything generated (it runs this test with `RCCL_TELEMETRY_REGENERATE=1`).
pub const REGENERATE: &str = "make generate";

/// The text between `<!-- BEGIN generated NAME ... -->` and `<!-- END generated NAME -->`
/// replaced by `body`; None when the document has no such region.
pub fn replace_region(doc: &str, name: &str, body: &str) -> Option<String> {
    let begin = format!("<!-- BEGIN generated {name}");
    let end = format!("<!-- END generated {name} -->");
    let b = doc.find(&begin)?;
    let b_end = b + doc[b..].find("-->")? + 3;
    let e = doc[b_end..].find(&end)? + b_end;
    Some(format!(
        "{}<!-- BEGIN generated {name}: {REGENERATE} -->\n{}{}",
        &doc[..b],
        body,
        &doc[e..]
    ))
}

/// Replaces the number in every match of each pattern (a regex-free form: `prefix` then the
/// number then `suffix`, whitespace in them matching any run of whitespace) by `n`.
pub fn replace_counts(doc: &str, counts: &[(&str, &str, usize)]) -> String {
    let mut out = doc.to_owned();
    for (prefix, suffix, n) in counts {
        let mut at = 0;
        while let Some((start, num_start, num_end)) = find_count(&out, at, prefix, suffix) {
            out.replace_range(num_start..num_end, &n.to_string());
            at = start + 1;
        }
    }
    out
}

/// The next place from `at` where `prefix` (whitespace-insensitive) is followed by a number
/// and `suffix`: (start, number start, number end).
fn find_count(doc: &str, at: usize, prefix: &str, suffix: &str) -> Option<(usize, usize, usize)> {
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let (pw, sw) = (words(prefix), words(suffix));
    let b = doc.as_bytes();
    let mut i = at;
    while i < b.len() {
        // Without a prefix the number must start at a word's start, not inside a number.
        if pw.is_empty() && i > 0 && b[i - 1].is_ascii_alphanumeric() {
            i += doc[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        // match the prefix's words, each separated by whitespace
        let mut j = i;
        let mut ok = true;
        for (n, w) in pw.iter().enumerate() {
            if n > 0 {
                let k = skip_ws(b, j);
                if k == j {
                    ok = false;
                    break;
                }
                j = k;
            }
            if !doc[j..].starts_with(w.as_str()) {
                ok = false;
                break;
            }
            j += w.len();
        }
        if ok {
            let ns = if pw.is_empty() { j } else { skip_ws(b, j) };
            let ne = ns + b[ns..].iter().take_while(|c| c.is_ascii_digit()).count();
            if ne > ns && (pw.is_empty() || ns > j) {
                let mut k = ne;
                let mut sok = true;
                for w in &sw {
                    let k2 = skip_ws(b, k);
                    if k2 == k || !doc[k2..].starts_with(w.as_str()) {
                        sok = false;
                        break;
                    }
                    k = k2 + w.len();
                }
                if sok {
                    return Some((i, ns, ne));
                }
            }
        }
        i += doc[i..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

fn skip_ws(b: &[u8], mut j: usize) -> usize {
    while j < b.len() && b[j].is_ascii_whitespace() {
        j += 1;
    }
    j
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A human title for an object of the file, by its path.
fn title(path: &str) -> String {
    let known = [
        ("", "The file (top level)"),
        ("devices[]", "A device"),
        (
            "devices[].wqe_size_stats[]",
            "A WQE-size bucket of a device",
        ),
        ("devices[].channels[]", "A channel"),
        ("devices[].channels[].queue_pairs[]", "A queue pair"),
        (
            "devices[].channels[].queue_pairs[].peer",
            "A queue pair's peer",
        ),
        (
            "devices[].channels[].queue_pairs[].first_cq_error",
            "A queue pair's first error completion",
        ),
        ("devices[].peers[]", "A remote NIC of a device"),
        ("hw_samples[]", "A hardware-counter sample"),
    ];
    let name = known.iter().find(|k| k.0 == path).map(|k| k.1);
    match (name, path) {
        (Some(n), "") => n.to_owned(),
        (Some(n), p) => format!("{n}: `{p}`"),
        (None, p) => format!("`{p}`"),
    }
}

/// The JSON a schema node allows, in words; the `$defs` it names as value types go into `defs`.
fn type_text(s: &Schema, ptr: &str, defs: &mut BTreeSet<String>) -> String {
    let v = s.at(ptr);
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let (_, d) = s.resolve(r);
        let name = r.rsplit('/').next().unwrap_or(r).to_owned();
        if d.get("properties").is_some() || d.get("allOf").is_some() {
            return "object (below)".into();
        }
        defs.insert(name.clone());
        return format!("[`{name}`](#value-types)");
    }
    for k in ["oneOf", "anyOf"] {
        if let Some(alts) = v.get(k).and_then(Value::as_array) {
            let parts: Vec<String> = (0..alts.len())
                .map(|i| type_text(s, &format!("{ptr}/{k}/{i}"), defs))
                .collect();
            return parts.join(" or ");
        }
    }
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e.iter().map(|x| format!("`{x}`")).collect();
        return format!("one of {}", vals.join(", ").replace('"', ""));
    }
    let types: Vec<String> = match v.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|t| Some(t.as_str()?.to_owned()))
            .collect(),
        _ => vec![],
    };
    let words: Vec<String> = types
        .iter()
        .map(|t| match t.as_str() {
            "integer" => {
                let lo = v.get("minimum").and_then(Value::as_i64);
                let hi = v.get("maximum").and_then(Value::as_i64);
                match (lo, hi) {
                    (Some(a), Some(b)) => format!("integer {a}..{b}"),
                    (Some(a), None) => format!("integer >= {a}"),
                    (None, Some(b)) => format!("integer <= {b}"),
                    (None, None) => "integer".into(),
                }
            }
            "array" => match v.get("items") {
                Some(_) => match type_text(s, &format!("{ptr}/items"), defs).as_str() {
                    "object (below)" => "array of objects (below)".into(),
                    inner => format!("array of {inner}"),
                },
                None => "array".into(),
            },
            "object" if v.get("properties").is_some() => "object (below)".into(),
            "object" => match v.get("additionalProperties") {
                Some(Value::Object(_)) => {
                    let inner = type_text(s, &format!("{ptr}/additionalProperties"), defs);
                    format!("object: name to {inner}")
                }
                _ => "object".into(),
            },
            t => t.to_owned(),
        })
        .collect();
    if words.is_empty() {
        "any".into()
    } else {
        words.join(" or ")
    }
}

/// The key tables: one per object of the file, in file order, from the writer's `full` file
/// (serialised) and the schema; then the value types they name.
pub fn key_tables(s: &Schema, full_text: &str, props: &dyn Fn(&str, &str) -> String) -> String {
    let mut out = String::new();
    let mut defs = BTreeSet::new();
    for (path, keys) in key_order(full_text) {
        let rows: Vec<&String> = keys
            .iter()
            .filter(|k| !props(&path, k).is_empty())
            .collect();
        if rows.is_empty() {
            continue; // a map's keys (hw_counters, cq_errors): data, not keys
        }
        let _ = writeln!(out, "#### {}\n", title(&path));
        out.push_str("| Key | Type | Since | Meaning |\n|---|---|---:|---|\n");
        for k in rows {
            let ptr = props(&path, k);
            let node = s.at(&ptr);
            let since = node.get("x-since").and_then(Value::as_u64).unwrap_or(0);
            let desc = node
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let _ = writeln!(
                out,
                "| `{k}` | {} | {since} | {} |",
                cell(&type_text(s, &ptr, &mut defs)),
                cell(desc)
            );
        }
        out.push('\n');
    }
    out.push_str("#### Value types\n\n| Type | JSON | Meaning |\n|---|---|---|\n");
    let mut done = BTreeSet::new();
    while let Some(name) = defs.iter().find(|d| !done.contains(*d)).cloned() {
        let ptr = format!("#/$defs/{name}");
        let json = type_text_of_def(s, &ptr, &mut defs);
        let desc = s
            .at(&ptr)
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let _ = writeln!(out, "| `{name}` | {} | {} |", cell(&json), cell(desc));
        done.insert(name);
    }
    out.push('\n');
    out
}

/// A value type's own JSON, with its pattern when it has one.
fn type_text_of_def(s: &Schema, ptr: &str, defs: &mut BTreeSet<String>) -> String {
    let v = s.at(ptr);
    if v.get("prefixItems").is_some() {
        return "array of `[lo_ns, hi_ns or null, count]`".into();
    }
    let mut t = type_text(s, ptr, defs);
    if v.get("type").and_then(Value::as_str) == Some("array") {
        if let Some(items) = v.get("items") {
            if items.get("prefixItems").is_some() {
                t = "array of `[lo_ns, hi_ns or null, count]`".into();
            }
        }
        let lo = v.get("minItems").and_then(Value::as_u64);
        let hi = v.get("maxItems").and_then(Value::as_u64);
        if let (Some(a), Some(b)) = (lo, hi) {
            t = format!("{t}, {a} to {b} items");
        }
    }
    if let Some(p) = v.get("pattern").and_then(Value::as_str) {
        t = format!("{t} matching `{p}`");
    }
    t
}

fn kind_text(k: Kind) -> &'static str {
    match k {
        Kind::Scalar => "scalar",
        Kind::PerPrio => "per priority (8)",
    }
}

/// docs/format.md's "Known counters" table.
pub fn known_counters() -> String {
    let mut s = String::from("| Key | Kind | Unit | Meaning |\n|---|---|---|---|\n");
    for k in VOCAB {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} |",
            k.name,
            kind_text(k.kind),
            k.unit,
            k.meaning
        );
    }
    s
}

/// src/hw/README.md's table: each key with each driver's sources.
pub fn driver_table() -> String {
    let mut s = String::from(
        "| Key | Meaning (unit) | mlx5 | thor2 (bnxt_re / bnxt_en) | ainic (ionic) | rxe (Soft-RoCE) |\n|---|---|---|---|---|---|\n",
    );
    for k in VOCAB {
        let col = |d: usize| -> String {
            let alts: Vec<String> = k.map[d]
                .iter()
                .map(|alt| {
                    alt.iter()
                        .map(|t| {
                            let w = if t.wrap32 { " (32b)" } else { "" };
                            let sc = if t.scale != 1 {
                                format!(" ×{}", t.scale)
                            } else {
                                String::new()
                            };
                            format!("{} `{}`{sc}{w}", t.src.label(), t.name)
                        })
                        .collect::<Vec<_>>()
                        .join(" + ")
                })
                .collect();
            if alts.is_empty() {
                "—".to_owned()
            } else {
                alts.join(", else ")
            }
        };
        let _ = writeln!(
            s,
            "| `{}` | {} ({}) | {} | {} | {} | {} |",
            k.name,
            k.meaning,
            k.unit,
            col(0),
            col(1),
            col(2),
            col(3)
        );
    }
    s
}

fn src_name(s: Src) -> &'static str {
    match s {
        Src::Ethtool => "ethtool",
        Src::HwCounters => "hw_counters",
        Src::PmaCounters => "counters",
        Src::NetStat => "net_statistics",
        Src::NetAttr => "net",
    }
}

/// schema/hw_counters.json: the vocabulary as data.
pub fn vocabulary_json() -> String {
    let drivers = ["mlx5", "thor2", "ainic", "rxe"];
    let counters: Vec<Value> = VOCAB
        .iter()
        .map(|k| {
            let mut sources = serde_json::Map::new();
            for (d, name) in drivers.iter().enumerate() {
                let alts: Vec<Value> = k.map[d]
                    .iter()
                    .map(|alt| {
                        Value::Array(
                            alt.iter()
                                .map(|t| {
                                    json!({"src": src_name(t.src), "name": t.name,
                                           "scale": t.scale, "wrap32": t.wrap32})
                                })
                                .collect(),
                        )
                    })
                    .collect();
                sources.insert((*name).to_owned(), Value::Array(alts));
            }
            json!({
                "name": k.name,
                "kind": match k.kind { Kind::Scalar => "scalar", Kind::PerPrio => "per_priority" },
                "unit": k.unit,
                "meaning": k.meaning,
                "sampled": k.sampled,
                "since": k.since,
                "sources": sources,
            })
        })
        .collect();
    let doc = json!({
        "description": format!("The keys of a device's hw_counters, in file order, with the first file version that has each (since) and where each driver exposes them: each driver's list of alternatives, the first one read wins, an alternative the sum of its terms (src: ethtool, hw_counters and counters under class/infiniband/<dev>/ports/<p>/, net_statistics and net under class/net/<netdev>/; a name with {{p}} or {{c}} is a per-priority template). Generated from format/src/vocab.rs: {REGENERATE}."),
        "counters": counters,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON");
    text.push('\n');
    text
}

/// schema/wqe_counts.json: the counter table as data (the e2e checker reads its keys).
pub fn counters_json() -> String {
    let rows: Vec<Value> = FIELDS
        .iter()
        .map(|r| {
            json!({
                "key": r.key,
                "optional": r.optional,
                "since": r.since,
                "description": r.description(),
                "prometheus": r.prom.map(|p| match (p.label, p.family.extra.first()) {
                    (Some(v), Some(k)) => format!("{}{{{k}=\"{v}\"}}", p.family.name()),
                    _ => p.family.name(),
                }),
            })
        })
        .collect();
    let doc = json!({
        "description": format!("The software counters every channel, queue pair and finalized communicator's record carries, in file order: the key; optional: present only sometimes (else always); since: the format version that added it; prometheus: its device-level series (the channel_ and qp_ families alike), null when it has none of its own. Generated from format/src/counters.rs: {REGENERATE}."),
        "counters": rows,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON");
    text.push('\n');
    text
}
