//! The layers of `src/` only point down: every module path of the library's own code (a
//! `crate::` path, in code, in a `use` or in a macro's tokens, and the crate root's bare
//! module paths) is an edge between two modules, and each edge must go to the same layer or
//! one below in `rccl_telemetry::LAYERS`, without a circle. The files are parsed with `syn`,
//! so comments and strings are never mistaken for code; test code (`#[cfg(test)]` items) is
//! left out. The checker is tried on fixtures and on a deliberately wrong table, so it is
//! known to fail when it should.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

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

/// Whether attributes make an item test code (`#[cfg(test)]`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Path>()
                .is_ok_and(|p| p.is_ident("test"))
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The first segment after `crate` of every path of a file; in the crate root also the first
/// segment of a path that starts with one of its modules (`config::Config`).
struct Paths<'a> {
    root_modules: Option<&'a BTreeSet<String>>,
    out: Vec<String>,
}

impl Paths<'_> {
    fn note(&mut self, segments: &[String]) {
        match segments {
            [first, second, ..] if first == "crate" && second != "self" && second != "*" => {
                self.out.push(second.clone());
            }
            [first, ..] if first == "crate" => {}
            [first, _, ..] if self.root_modules.is_some_and(|m| m.contains(first)) => {
                self.out.push(first.clone());
            }
            _ => {}
        }
    }

    /// Every path a `use` tree names, each under `prefix`.
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        let mut leaf = |this: &mut Self, last: String| {
            prefix.push(last);
            this.note(prefix);
            prefix.pop();
        };
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => leaf(self, n.ident.to_string()),
            syn::UseTree::Rename(r) => leaf(self, r.ident.to_string()),
            syn::UseTree::Glob(_) => leaf(self, "*".to_owned()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix);
                }
            }
        }
    }

    /// The paths in a macro's tokens, which syn leaves unparsed: `a::b` (and `$crate::b`,
    /// `crate::{a, b::c}`) wherever it starts a path.
    fn tokens(&mut self, tokens: TokenStream) {
        let tt: Vec<TokenTree> = tokens.into_iter().collect();
        for (k, t) in tt.iter().enumerate() {
            let after_colons =
                k > 0 && matches!(&tt[k - 1], TokenTree::Punct(p) if p.as_char() == ':');
            match t {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(first) if !after_colons => {
                    let [TokenTree::Punct(a), TokenTree::Punct(b), next, ..] = &tt[k + 1..] else {
                        continue;
                    };
                    if a.as_char() != ':' || b.as_char() != ':' {
                        continue;
                    }
                    match next {
                        TokenTree::Ident(second) => {
                            self.note(&[first.to_string(), second.to_string()]);
                        }
                        TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                            let items =
                                Punctuated::<syn::UseTree, syn::Token![,]>::parse_terminated
                                    .parse2(g.stream())
                                    .expect("a `{...}` after `::` in a macro is a use group");
                            for tree in &items {
                                self.use_tree(tree, &mut vec![first.to_string()]);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&u.tree, &mut Vec::new());
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }
}

/// Module -> the modules it imports. `crate::item` of an item defined in the crate root
/// (not a module) is an import of `lib`.
fn edges(sources: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in sources {
        let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{m}: {e}"));
        let mut paths = Paths {
            root_modules: (m == "lib").then_some(&modules),
            out: Vec::new(),
        };
        paths.visit_file(&file);
        let set = g.entry(m.clone()).or_default();
        for t in paths.out {
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
        ("sampler", "hw"),
        ("sampler", "stall_detector"),
        ("runtime", "sampler"),
        ("writer", "runtime"),
        ("lifecycle", "writer"),
        ("signals", "writer"),
        ("capi", "runtime"),
        ("lib", "runtime"),
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
        (
            "leaves",
            &["diag", "panics", "hot", "thread", "sysfs", "reserve"],
        ),
        ("hardware", &["hw"]),
        ("state", &["config", "registry"]),
        (
            "hot data",
            &["latency", "loghist", "counters", "qp_ext", "channel_peers"],
        ),
        (
            "observers",
            &["peers", "stall_detector", "cq_errors", "comms"],
        ),
        ("sampler", &["sampler"]),
        ("outputs", &["atomic_file", "rank_file", "textfile"]),
        ("runtime", &["runtime"]),
        ("writer", &["writer"]),
        (
            "entry points",
            &["lib", "lifecycle", "capi", "signals", "inline_abi"],
        ),
    ];
    let v = violations(wrong, &sources(&src_dir()));
    assert!(
        v.iter()
            .any(|l| l.starts_with("registry (state) imports counters (hot data)")),
        "{v:#?}"
    );
    // The writer put below the runtime it calls.
    let swapped: Vec<(&str, &[&str])> = rccl_telemetry::LAYERS
        .iter()
        .map(|&(name, mods)| match name {
            "runtime" => ("writer", &["writer"][..]),
            "writer" => ("runtime", &["runtime"][..]),
            _ => (name, mods),
        })
        .collect();
    let v = violations(&swapped, &sources(&src_dir()));
    assert!(
        v.iter()
            .any(|l| l == "writer (writer) imports runtime (runtime), a layer above it"),
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
        "use crate::b::*;",
        "use crate::b as other;",
        "fn f() { crate::b::g() }",
        "fn f() -> Vec<crate::b::T> { Vec::new() }",
        "fn f() { println!(\"{}\", crate::b::g()); }",
        "fn f() { m!(crate::{a::x, b::y}); }",
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
        "/// [`crate::b::X`]\nfn f() {}",
        "const S: &str = \"crate::b::x\";",
        "fn f() { println!(\"crate::b::g\"); }",
        "#[cfg(test)]\nmod tests { use crate::b::X; }\nfn after() {}",
        "#[cfg(test)]\nuse crate::b::X;",
        "struct S;\nimpl S {\n    #[cfg(test)]\n    fn t() { crate::b::g() }\n}",
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
    // The root's bare module paths are its imports, in code and in a `use`.
    for root in [
        "pub mod a;\nfn g() { a::f(); }",
        "pub mod a;\npub use a::f;",
    ] {
        let v = violations(
            table,
            &fixture(&[
                ("a", "fn f() { crate::init(); }"),
                ("b", ""),
                ("c", ""),
                ("lib", root),
            ]),
        );
        assert_eq!(v, vec!["circle: a -> lib -> a".to_owned()], "{root}");
    }
}

#[test]
#[should_panic(expected = "a: ")]
fn a_file_that_does_not_parse_fails_naming_its_module() {
    edges(&fixture(&[("a", "fn f( {"), ("lib", "")]));
}
