//! The text generated from the tool's code and kept in the tree: the table of the kinds of
//! finding in the tool README (tools/rccl-telemetry/README.md), from `outliers::Kind`. A region
//! of a document is delimited by BEGIN/END markers, as the format crate's generated text is;
//! `RCCL_TELEMETRY_REGENERATE=1` rewrites a stale one, otherwise the test fails and says how.

use rccl_telemetry_tool::outliers::Kind;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use strum::VariantArray;

/// How to regenerate, as the markers and the failure message say it.
const REGENERATE: &str =
    "RCCL_TELEMETRY_REGENERATE=1 cargo test --release -p rccl-telemetry-tool --test it generated_docs";

/// The text between `<!-- BEGIN generated NAME ... -->` and `<!-- END generated NAME -->`
/// replaced by `body`; None when the document has no such region.
fn replace_region(doc: &str, name: &str, body: &str) -> Option<String> {
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

/// The README's table of kinds: every kind, critical first, then warning, then info (each in
/// the order of `Kind`), with its severity and what it means.
fn kinds_table() -> String {
    let mut kinds = Kind::VARIANTS.to_vec();
    kinds.sort_by_key(|k| k.severity());
    let mut s = String::from("| kind | severity | means |\n| --- | --- | --- |\n");
    for k in kinds {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} |",
            k.as_str(),
            k.severity().as_str(),
            k.meaning().replace('|', "\\|")
        );
    }
    s
}

fn readme() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")
}

#[test]
fn the_generated_text_in_the_tree_is_current() {
    let path = readme();
    let have = std::fs::read_to_string(&path).expect("README");
    let want = replace_region(&have, "kinds", &kinds_table())
        .unwrap_or_else(|| panic!("no region kinds (<!-- BEGIN generated kinds ... -->)"));
    if have == want {
        return;
    }
    let regenerate = std::env::var_os("RCCL_TELEMETRY_REGENERATE").is_some_and(|v| v == "1");
    if regenerate {
        std::fs::write(&path, &want).expect("write README");
        eprintln!("regenerated {}", path.display());
    } else {
        panic!(
            "stale generated text in {}; run {REGENERATE}",
            path.display()
        );
    }
}

#[test]
fn a_region_is_replaced_between_its_markers() {
    let doc = "a\n<!-- BEGIN generated x: old -->\nold body\n<!-- END generated x -->\nb";
    let new = replace_region(doc, "x", "new\n").unwrap();
    assert_eq!(
        new,
        format!("a\n<!-- BEGIN generated x: {REGENERATE} -->\nnew\n<!-- END generated x -->\nb")
    );
    assert!(replace_region(doc, "y", "z").is_none());
}

/// A kind has one spelling: `--json` writes `as_str`, the variant's name in snake_case, the
/// tables print it with spaces, no two kinds share it, and each says what it means.
#[test]
fn every_kind_has_one_spelling() {
    let mut seen = BTreeSet::new();
    for &k in Kind::VARIANTS {
        let name = k.as_str();
        assert!(seen.insert(name), "{name} twice");
        let debug = format!("{k:?}");
        let snake: String = debug
            .chars()
            .enumerate()
            .flat_map(|(i, c)| {
                let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                sep.into_iter()
                    .chain(std::iter::once(c.to_ascii_lowercase()))
            })
            .collect();
        assert_eq!(name, snake, "{debug}");
        assert_eq!(
            serde_json::to_value(k).unwrap(),
            serde_json::Value::from(name)
        );
        assert_eq!(k.to_string(), name);
        assert_eq!(k.label(), name.replace('_', " "));
        assert!(!k.meaning().is_empty(), "{name} says nothing");
    }
}
