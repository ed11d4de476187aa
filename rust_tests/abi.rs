//! The exported names and their symbol versions: every `#[no_mangle]` item of `src/` is
//! listed in the version script (src/librccl_telemetry.map) and nothing else is, and the
//! shared object `make lib` linked exports exactly those names, each at a version node of the
//! script, plus the nodes themselves.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The names `#[no_mangle]` exports from the Rust sources under `dir` (recursively).
fn no_mangle_names(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            no_mangle_names(&p, out);
            continue;
        }
        if p.extension().map_or(true, |x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let mut armed = false;
        for line in text.lines().map(str::trim) {
            if line == "#[no_mangle]" || line == "#[unsafe(no_mangle)]" {
                armed = true;
                continue;
            }
            if !armed || line.starts_with("#[") || line.starts_with("//") {
                continue;
            }
            // The item's line: `pub [unsafe] extern "C" fn NAME(` or `pub static NAME:`.
            let name = ["fn ", "static "].iter().find_map(|k| {
                let rest = &line[line.find(k)? + k.len()..];
                let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
                Some(rest[..end].to_owned())
            });
            out.insert(name.unwrap_or_else(|| panic!("{}: no name in {line:?}", p.display())));
            armed = false;
        }
    }
}

/// (node, name) of every global of the version script, in order.
fn script() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(common::root().join("src/librccl_telemetry.map")).unwrap();
    // Comments out, then tokens.
    let mut clean = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("/*") {
        clean.push_str(&rest[..i]);
        rest = &rest[i + rest[i..].find("*/").expect("closed comment") + 2..];
    }
    clean.push_str(rest);
    let mut out = Vec::new();
    let (mut node, mut global) = (String::new(), false);
    for tok in clean
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|t| !t.is_empty())
    {
        match tok {
            "{" => {}
            "global:" => global = true,
            "local:" => global = false,
            t if t.starts_with('}') => global = false,
            t if t.starts_with("RCCL_TELEMETRY_") && !global => node = t.to_owned(),
            t if global => out.push((node.clone(), t.to_owned())),
            _ => {}
        }
    }
    out
}

#[test]
fn every_export_is_in_the_version_script() {
    let mut exported = BTreeSet::new();
    no_mangle_names(&common::root().join("src"), &mut exported);
    assert!(exported.contains("rcclTelemetryInit") && exported.contains("rcclTelemetryHotV3"));
    let listed: BTreeSet<String> = script().into_iter().map(|(_, n)| n).collect();
    let missing: Vec<_> = exported.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "exported from src/ but not in src/librccl_telemetry.map (add each to the newest node, one line): {missing:?}"
    );
    let stale: Vec<_> = listed.difference(&exported).collect();
    assert!(
        stale.is_empty(),
        "listed in src/librccl_telemetry.map but not exported from src/: {stale:?}"
    );
}

#[test]
fn the_version_script_names_each_symbol_once_in_a_versioned_node() {
    let s = script();
    let mut seen = BTreeSet::new();
    for (node, name) in &s {
        assert!(
            node.starts_with("RCCL_TELEMETRY_"),
            "{name} is outside a version node"
        );
        assert!(seen.insert(name), "{name} is listed twice");
    }
}

#[test]
fn the_library_exports_exactly_the_script_at_its_versions() {
    let so = common::lib_dir().join("librccl_telemetry.so");
    let out = Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(&so)
        .output()
        .expect("readelf (binutils) is needed");
    assert!(out.status.success());
    let mut got = BTreeSet::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Num: Value Size Type Bind Vis Ndx Name: defined globals only.
        if f.len() < 8 || f[6] == "UND" || f[4] != "GLOBAL" {
            continue;
        }
        got.insert(f[7].to_owned());
    }
    let mut want = BTreeSet::new();
    for (node, name) in script() {
        want.insert(format!("{name}@@{node}"));
        want.insert(node);
    }
    assert_eq!(
        got,
        want,
        "{} exports other names or versions than src/librccl_telemetry.map",
        so.display()
    );
}
