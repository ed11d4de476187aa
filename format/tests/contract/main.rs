//! The per-rank file's contract against the format crate, which writes it:
//!
//! - the JSON Schema, generated from the writer's types (`rccl_telemetry_format::schema`),
//!   holds every key the writer's types emit, with the JSON types they emit, and nothing they
//!   never emit; every property has a description and the format version that added it
//!   ("x-since"), and every object with properties is closed; every file the writer can write
//!   is valid against it;
//! - the text generated from the format crate and kept in the tree is current: the schema
//!   (schema/rccl_telemetry.schema.json), the key tables
//!   and the known-counter table of docs/format.md, the per-driver table of src/hw/README.md,
//!   the counts of keys both spell out, schema/hw_counters.json (the vocabulary the e2e
//!   checker reads) and schema/wqe_counts.json (the counter table, which it reads too). `RCCL_TELEMETRY_REGENERATE=1` writes them instead of failing;
//! - the reader takes back every key the writer emits (`read_back.rs`).
//!
//! A new key is a field of a writer type (format/src/write.rs), its doc comment the key's
//! description; this test names whatever else is missing (the fixtures' value for it, an
//! "x-since" when a later version added it, the regenerated schema and docs).

mod counters;
mod fixture;
mod generated;
mod read_back;
mod schema;

use fixture::{file, Shape};
use rccl_telemetry_format::vocab::{Kind, VOCAB};
use rccl_telemetry_format::{FORMAT_VERSION, READ_VERSIONS};
use schema::{Schema, Seen};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The workspace root (the format crate's parent).
fn root() -> PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().expect("the workspace root").to_path_buf()
}

/// The schema as the format crate generates it from the writer's types (the committed
/// schema/rccl_telemetry.schema.json is this text: `the_generated_text_in_the_tree_is_current`).
fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&rccl_telemetry_format::schema::schema()).unwrap();
    text.push('\n');
    text
}

/// The three files, serialised as the writer serialises them.
fn files() -> Vec<(&'static str, String)> {
    [
        ("full", Shape::Full),
        ("nulls", Shape::Nulls),
        ("bare", Shape::Bare),
    ]
    .into_iter()
    .map(|(n, s)| (n, serde_json::to_string(&file(s)).unwrap()))
    .collect()
}

fn walk_all(s: &Schema) -> Seen {
    let mut seen = Seen::default();
    for (_, text) in files() {
        let v: Value = serde_json::from_str(&text).unwrap();
        s.walk("#", &v, "", &mut seen);
    }
    seen
}

/// A validator of the generated schema.
fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&schema_text()).unwrap();
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

/// Every way `v` violates the schema, one line each with where.
fn violations(validator: &jsonschema::Validator, v: &Value) -> Vec<String> {
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

#[test]
fn every_file_the_writer_can_write_is_valid() {
    let validator = validator();
    for (name, text) in files() {
        let v: Value = serde_json::from_str(&text).unwrap();
        let errors = violations(&validator, &v);
        assert!(
            errors.is_empty(),
            "the writer's {name} file violates the schema:\n{}",
            errors.join("\n")
        );
    }
}

#[test]
fn the_schema_has_every_key_the_writer_emits_with_its_types_and_no_other() {
    let s = Schema::load(&schema_text());
    let seen = walk_all(&s);
    assert!(seen.errors.is_empty(), "{}", seen.errors.join("\n"));
    let mut problems = Vec::new();
    // The reverse: every property is one the writer emits.
    for (at, key) in s.all_properties() {
        if !seen.types.contains_key(&(at.clone(), key.clone())) {
            problems.push(format!(
                "{at}/{key}: in the schema but no writer type emits it (or the fixtures in format/tests/contract/fixture.rs do not set it)"
            ));
        }
    }
    // The types: each property allows exactly the JSON types the writer emits for it.
    for ((at, key), emitted) in &seen.types {
        let allowed = s.types(&format!("{at}/{key}"));
        let emitted_as_allowed: BTreeSet<&str> = emitted
            .iter()
            .map(|t| {
                if *t == "integer" && !allowed.contains("integer") {
                    "number"
                } else {
                    *t
                }
            })
            .collect();
        if !emitted_as_allowed.is_subset(&allowed) {
            problems.push(format!(
                "{at}/{key}: the writer emits {emitted:?}, the schema allows {allowed:?}"
            ));
        }
        let unused: Vec<&&str> = allowed
            .iter()
            .filter(|t| !emitted_as_allowed.contains(**t))
            .collect();
        if !unused.is_empty() && allowed.len() < 7 {
            problems.push(format!(
                "{at}/{key}: the schema allows {unused:?}, which the writer never emits ({emitted:?})"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_property_says_what_it_is_and_since_when() {
    let s = Schema::load(&schema_text());
    let mut problems = Vec::new();
    for (at, key) in s.all_properties() {
        let p = &s.at(&at)[&key];
        if p.get("description")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            problems.push(format!("{at}/{key}: no description"));
        }
        match p.get("x-since").and_then(Value::as_u64) {
            Some(v) if (1..=u64::from(FORMAT_VERSION)).contains(&v) => {}
            other => problems.push(format!(
                "{at}/{key}: \"x-since\" {other:?}: the format version that added it (1..={FORMAT_VERSION})"
            )),
        }
        // An object with properties of its own is closed: an unknown key is an error.
        let (_, r) = s.resolve(&format!("{at}/{key}"));
        if r.get("properties").is_some()
            && r.get("additionalProperties") != Some(&Value::Bool(false))
            && r.get("unevaluatedProperties") != Some(&Value::Bool(false))
        {
            problems.push(format!("{at}/{key}: an object that is not closed"));
        }
    }
    // Every value type the tables name says what it is.
    for (name, d) in s.root["$defs"].as_object().unwrap() {
        let object = d.get("properties").is_some() || d.get("allOf").is_some();
        if !object
            && d.get("description")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            problems.push(format!(
                "#/$defs/{name}: a value type without a description"
            ));
        }
    }
    // The versions a reader takes are the ones the schema admits.
    let versions: Vec<u64> = s.at("#/properties/version")["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let read: Vec<u64> = READ_VERSIONS.iter().map(|v| u64::from(*v)).collect();
    if versions != read {
        problems.push(format!(
            "the schema's versions {versions:?} are not READ_VERSIONS {read:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// (file, its text as generated from the committed one)
fn generated_files() -> Vec<(PathBuf, String)> {
    let s = Schema::load(&schema_text());
    let seen = walk_all(&s);
    let props: BTreeMap<(String, String), String> = seen.props;
    let lookup = |path: &str, key: &str| {
        props
            .get(&(path.to_owned(), key.to_owned()))
            .cloned()
            .unwrap_or_default()
    };
    let full = serde_json::to_string(&file(Shape::Full)).unwrap();
    let scalars = VOCAB.iter().filter(|k| k.kind == Kind::Scalar).count();
    let counts: [(&str, &str, usize); 4] = [
        ("same", "keys", VOCAB.len()),
        ("", "scalars", scalars),
        ("The", "keys of `hw_counters`", VOCAB.len()),
        ("listing all", "", VOCAB.len()),
    ];
    let region = |doc: &str, name: &str, body: &str| {
        generated::replace_region(doc, name, body)
            .unwrap_or_else(|| panic!("no region {name} (<!-- BEGIN generated {name} ... -->)"))
    };
    let format_md = root().join("docs/format.md");
    let mut doc = std::fs::read_to_string(&format_md).unwrap();
    doc = region(
        &doc,
        "key-tables",
        &generated::key_tables(&s, &full, &lookup),
    );
    doc = region(&doc, "known-counters", &generated::known_counters());
    doc = generated::replace_counts(&doc, &counts);
    let hw_md = root().join("src/hw/README.md");
    let mut hw = std::fs::read_to_string(&hw_md).unwrap();
    hw = region(&hw, "driver-table", &generated::driver_table());
    hw = generated::replace_counts(&hw, &counts);
    vec![
        (
            root().join("schema/rccl_telemetry.schema.json"),
            schema_text(),
        ),
        (format_md, doc),
        (hw_md, hw),
        (
            root().join("schema/hw_counters.json"),
            generated::vocabulary_json(),
        ),
        (
            root().join("schema/wqe_counts.json"),
            generated::counters_json(),
        ),
    ]
}

#[test]
fn the_generated_text_in_the_tree_is_current() {
    let regenerate = std::env::var_os("RCCL_TELEMETRY_REGENERATE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, want) in generated_files() {
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            continue;
        }
        if regenerate {
            std::fs::write(&path, &want).unwrap();
            eprintln!("regenerated {}", path.display());
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated text in {}; run {}",
        stale.join(", "),
        generated::REGENERATE
    );
}

#[test]
fn counts_and_regions_are_found_where_they_are_written() {
    let doc = "a\n<!-- BEGIN generated x: old -->\nold body\n<!-- END generated x -->\nb";
    let new = generated::replace_region(doc, "x", "new\n").unwrap();
    assert!(
        new.contains("-->\nnew\n<!-- END generated x -->\nb"),
        "{new}"
    );
    assert!(generated::replace_region(doc, "y", "z").is_none());
    let text =
        "holds the same 47 keys:\n45\nscalars; The 47 keys of `hw_counters`, listing all 47.";
    let out = generated::replace_counts(
        text,
        &[
            ("same", "keys", 48),
            ("", "scalars", 44),
            ("The", "keys of `hw_counters`", 48),
            ("listing all", "", 48),
        ],
    );
    assert_eq!(
        out,
        "holds the same 48 keys:\n44\nscalars; The 48 keys of `hw_counters`, listing all 48."
    );
}

/// Files an older writer wrote (`older/v<N>_<shape>.json`: the contract's own fixture shapes,
/// serialised by the format crate of the version's last commit, v4 at a8e12a3) are still valid
/// and still read: a key a later version added must carry its "x-since", or `check` rejects
/// every file of the fleet's older libraries.
#[test]
fn files_an_older_writer_wrote_are_valid_and_read() {
    let validator = validator();
    let dir = root().join("format/tests/contract/older");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let version = v["version"].as_u64().unwrap();
        assert!(
            version < u64::from(FORMAT_VERSION),
            "{}: an older file",
            path.display()
        );
        let errors = violations(&validator, &v);
        assert!(
            errors.is_empty(),
            "{} (version {version}) violates the schema:\n{}",
            path.display(),
            errors.join("\n")
        );
        let _: rccl_telemetry_format::read::TelemetryFile = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} does not read: {e}", path.display()));
        n += 1;
    }
    assert!(n >= 2, "the older files are in {}", dir.display());
}
