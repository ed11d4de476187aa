//! The layers of `src/` only point down (issue 24): every `crate::` path (and `super::` out
//! of a submodule, and the crate root's bare module paths) of the library's own code is an
//! edge between two modules, and each edge must go to the same layer or one below in
//! `rccl_telemetry::LAYERS`, without a circle. Test code (`#[cfg(test)]` items) and comments
//! are left out. The checker is tried on fixtures and on a deliberately wrong table, so it
//! is known to fail when it should.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Table<'a> = &'a [(&'a str, &'a [&'a str])];

/// The module a file of `src/` belongs to: `src/x.rs` and `src/x/...` are `x`, `src/lib.rs`
/// is `lib`.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    if rel.components().count() > 1 {
        return Some(first);
    }
    first.strip_suffix(".rs").map(str::to_owned)
}

/// Every `.rs` file of `src/` as (module, text).
fn sources(src: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let m = module_of(p.strip_prefix(root).unwrap()).unwrap();
                out.push((m, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(src, src, &mut out);
    out
}

/// The text without comments (line and block) and without string contents, so that only code
/// is searched.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            // A plain or raw string: its body is dropped (r#"..."# ends at "#).
            let raw_hashes = {
                let mut j = i;
                let mut n = 0;
                while j > 0 && b[j - 1] == b'#' {
                    n += 1;
                    j -= 1;
                }
                if j > 0 && b[j - 1] == b'r' {
                    Some(n)
                } else {
                    None
                }
            };
            out.push('"');
            i += 1;
            while i < b.len() {
                match raw_hashes {
                    None if b[i] == b'\\' => i += 2,
                    None if b[i] == b'"' => break,
                    Some(n)
                        if b[i] == b'"'
                            && b[i + 1..].iter().take(n).filter(|&&c| c == b'#').count() == n =>
                    {
                        break
                    }
                    _ => i += 1,
                }
            }
            out.push('"');
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The code without `#[cfg(test)]` items (a `mod tests { ... }`, a test-only fn or use).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its first `;` outside braces, or at the brace closing its body.
        let mut depth = 0i32;
        let mut end = after.len();
        for (k, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn ident_at(s: &str) -> &str {
    let s = s.trim_start();
    let n = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..n]
}

/// The first path segments named after `prefix` (`crate::x`, `crate::{x, y::z}`).
fn segments_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        // `prefix` must start a path: not the tail of another identifier (`$crate` counts).
        if prefix.starts_with(|c: char| c.is_ascii_alphabetic())
            && code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let tail = code[at + prefix.len()..].trim_start();
        if let Some(group) = tail.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let mut depth = 0;
            let mut item_start = 0;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident_at(&group[item_start..k]).to_owned());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident_at(&group[item_start..k]).to_owned());
                        item_start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident_at(tail).to_owned());
        }
    }
    out.retain(|s| !s.is_empty() && s != "self");
    out
}

/// Module -> the modules it imports. `crate::item` of an item defined in the crate root
/// (not a module) is an import of `lib`.
fn edges(sources: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in sources {
        let code = without_tests(&code_only(text));
        let mut to = segments_after(&code, "crate::");
        if m == "lib" {
            // The root names its modules without `crate::` (`config::Config`).
            for other in &modules {
                if code.match_indices(&format!("{other}::")).any(|(at, _)| {
                    !code[..at]
                        .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                }) {
                    to.push(other.clone());
                }
            }
        }
        let set = g.entry(m.clone()).or_default();
        for t in to {
            let t = if modules.contains(&t) {
                t
            } else {
                "lib".to_owned()
            };
            if t != *m {
                set.insert(t);
            }
        }
    }
    g
}

/// Every way `sources` break `table`: a module in no layer (or in two), a layer entry with
/// no source, an import of a higher layer, a circle.
fn violations(table: Table, sources: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (_, mods)) in table.iter().enumerate() {
        for m in *mods {
            if layer_of.insert(m, i).is_some() {
                out.push(format!("{m} is in two layers"));
            }
        }
    }
    let g = edges(sources);
    for m in g.keys() {
        if !layer_of.contains_key(m.as_str()) {
            out.push(format!("module {m} is in no layer of the table"));
        }
    }
    for m in layer_of.keys() {
        if !g.contains_key(*m) {
            out.push(format!("layer table names {m}, which has no source"));
        }
    }
    for (from, tos) in &g {
        let Some(&lf) = layer_of.get(from.as_str()) else {
            continue;
        };
        for to in tos {
            let Some(&lt) = layer_of.get(to.as_str()) else {
                continue;
            };
            if lt > lf {
                out.push(format!(
                    "{from} ({}) imports {to} ({}), a layer above it",
                    table[lf].0, table[lt].0
                ));
            }
        }
    }
    // A circle: depth-first search for a back edge.
    fn visit<'a>(
        m: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
        out: &mut Vec<String>,
    ) {
        state.insert(m, 1);
        path.push(m);
        for to in g.get(m).into_iter().flatten() {
            match state.get(to.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == to).unwrap();
                    out.push(format!("circle: {} -> {to}", path[from..].join(" -> ")));
                }
                Some(_) => {}
                None => visit(to, g, state, path, out),
            }
        }
        path.pop();
        state.insert(m, 2);
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if !state.contains_key(m.as_str()) {
            visit(m, &g, &mut state, &mut Vec::new(), &mut out);
        }
    }
    out
}

fn src_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn src_imports_only_its_own_layer_or_below_without_a_circle() {
    let v = violations(rccl_telemetry::LAYERS, &sources(&src_dir()));
    assert!(
        v.is_empty(),
        "src/ breaks its layers (lib.rs, LAYERS):\n{}",
        v.join("\n")
    );
}

#[test]
fn the_graph_has_the_edges_the_layers_are_about() {
    // Guards the parser: were it to find nothing, the test above would pass vacuously.
    let g = edges(&sources(&src_dir()));
    for (from, to) in [
        ("registry", "counters"),
        ("registry", "hw"),
        ("rank_file", "registry"),
        ("textfile", "rank_file"),
        ("capi", "lib"),
        ("lib", "writer"),
        ("latency", "sysfs"),
        ("loghist", "thread"),
    ] {
        assert!(
            g[from].contains(to),
            "{from} -> {to} not seen; {from} imports {:?}",
            g[from]
        );
    }
    assert!(g.values().map(BTreeSet::len).sum::<usize>() > 40);
}

fn fixture(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(m, t)| ((*m).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn a_wrong_table_fails_on_the_real_sources() {
    // The hot data put above the registry: the registry's imports of it now point up.
    let wrong: Table = &[
        ("leaves", &["diag", "panics", "hot", "thread", "sysfs"]),
        ("hardware", &["hw"]),
        ("state", &["config", "registry"]),
        (
            "hot data",
            &["latency", "loghist", "counters", "channel_peers"],
        ),
        ("observers", &["peers", "stall_detector"]),
        (
            "outputs",
            &["atomic_file", "rank_file", "textfile", "writer"],
        ),
        ("entry points", &["lib", "capi", "signals", "inline_abi"]),
    ];
    let v = violations(wrong, &sources(&src_dir()));
    assert!(
        v.iter()
            .any(|l| l.starts_with("registry (state) imports counters (hot data)")),
        "{v:#?}"
    );
    // A module left out of the table is named.
    let short: Table = &rccl_telemetry::LAYERS[..rccl_telemetry::LAYERS.len() - 1];
    let v = violations(short, &sources(&src_dir()));
    assert!(
        v.iter()
            .any(|l| l == "module capi is in no layer of the table"),
        "{v:#?}"
    );
}

#[test]
fn upward_imports_in_every_spelling_are_caught() {
    let table: Table = &[("low", &["a"]), ("high", &["b", "lib"])];
    for up in [
        "use crate::b::Thing;",
        "use crate::{b, a::Y};",
        "use crate::{a::{y, z}, b::W};",
        "fn f() { crate::b::g() }",
        "macro_rules! m { () => { $crate::b::g() } }",
        "fn f() { crate::is_on(); }", // a root item: lib
    ] {
        let v = violations(table, &fixture(&[("a", up), ("b", ""), ("lib", "")]));
        assert_eq!(v.len(), 1, "{up}: {v:?}");
    }
    // Down and sideways are fine; comments, strings and test code do not count.
    for fine in [
        "// use crate::b::X;",
        "/* crate::b */ fn f() {}",
        "const S: &str = \"crate::b::x\";",
        "#[cfg(test)]\nmod tests { use crate::b::X; }\nfn after() {}",
        "#[cfg(test)]\nuse crate::b::X;",
    ] {
        assert_eq!(
            violations(
                table,
                &fixture(&[("a", fine), ("b", "use crate::a::Y;"), ("lib", "")])
            ),
            Vec::<String>::new(),
            "{fine}"
        );
    }
    // Code after a test module still counts.
    let v = violations(
        table,
        &fixture(&[
            (
                "a",
                "#[cfg(test)]\nmod tests { fn t() {} }\nuse crate::b::X;",
            ),
            ("b", ""),
            ("lib", ""),
        ]),
    );
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn a_circle_within_a_layer_is_caught() {
    let table: Table = &[("one", &["a", "b", "c", "lib"])];
    let v = violations(
        table,
        &fixture(&[
            ("a", "use crate::b::X;"),
            ("b", "use crate::c::Y;"),
            ("c", "use crate::a::Z;"),
            ("lib", ""),
        ]),
    );
    assert_eq!(v, vec!["circle: a -> b -> c -> a".to_owned()]);
    // The root's bare module paths are its imports.
    let v = violations(
        table,
        &fixture(&[
            ("a", "fn f() { crate::init(); }"),
            ("b", ""),
            ("c", ""),
            ("lib", "pub mod a;\nfn g() { a::f(); }"),
        ]),
    );
    assert_eq!(v, vec!["circle: a -> lib -> a".to_owned()]);
}
