//! Walking the JSON Schema beside a file: which property of which schema object each key of
//! the file is, the JSON types a property allows, and each object's keys in file order (for
//! the docs' key tables). Generic over the schema: nothing here names a key.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The schema, with owned pointers for the nodes it resolves.
pub struct Schema {
    pub root: Value,
}

/// What a walk found: per property (the pointer of its "properties" object, the key), the JSON
/// types its values had; per key of an object of the file (the object's path,
/// "devices[].channels[]", and the key), the pointer of its property schema.
#[derive(Default)]
pub struct Seen {
    pub types: BTreeMap<(String, String), BTreeSet<&'static str>>,
    pub props: BTreeMap<(String, String), String>,
    pub errors: Vec<String>,
}

/// The JSON type of a value, as a schema spells it.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Schema {
    pub fn load(text: &str) -> Schema {
        Schema {
            root: serde_json::from_str(text).expect("the schema is JSON"),
        }
    }

    /// The node a pointer names.
    pub fn at(&self, ptr: &str) -> &Value {
        let p = ptr.strip_prefix('#').expect("a local pointer");
        self.root
            .pointer(p)
            .unwrap_or_else(|| panic!("no schema node at {ptr}"))
    }

    /// Follows `$ref`s: (pointer, node) of what `ptr` finally means.
    pub fn resolve(&self, ptr: &str) -> (String, &Value) {
        let mut ptr = ptr.to_owned();
        loop {
            let v = self.at(&ptr);
            match v.get("$ref").and_then(Value::as_str) {
                Some(r) => ptr = r.to_owned(),
                None => return (ptr, v),
            }
        }
    }

    /// The "properties" objects that apply to a node (its own, and its allOf parts'), with
    /// their pointers.
    pub fn properties(&self, ptr: &str) -> Vec<(String, &Map<String, Value>)> {
        let (ptr, v) = self.resolve(ptr);
        let mut out = Vec::new();
        if let Some(p) = v.get("properties").and_then(Value::as_object) {
            out.push((format!("{ptr}/properties"), p));
        }
        if let Some(all) = v.get("allOf").and_then(Value::as_array) {
            for i in 0..all.len() {
                out.extend(self.properties(&format!("{ptr}/allOf/{i}")));
            }
        }
        out
    }

    /// The JSON types a node allows (every type when it says nothing).
    pub fn types(&self, ptr: &str) -> BTreeSet<&'static str> {
        const ALL: [&str; 7] = [
            "null", "boolean", "integer", "number", "string", "array", "object",
        ];
        let name = |s: &str| ALL.iter().copied().find(|t| *t == s);
        let (ptr, v) = self.resolve(ptr);
        if let Some(t) = v.get("type") {
            return match t {
                Value::String(s) => name(s).into_iter().collect(),
                Value::Array(a) => a.iter().filter_map(|s| name(s.as_str()?)).collect(),
                _ => BTreeSet::new(),
            };
        }
        if let Some(e) = v.get("enum").and_then(Value::as_array) {
            return e.iter().map(json_type).collect();
        }
        for k in ["oneOf", "anyOf"] {
            if let Some(alts) = v.get(k).and_then(Value::as_array) {
                return (0..alts.len())
                    .flat_map(|i| self.types(&format!("{ptr}/{k}/{i}")))
                    .collect();
            }
        }
        ALL.into_iter().collect()
    }

    /// Every property the schema defines: (pointer of its "properties" object, key).
    pub fn all_properties(&self) -> BTreeSet<(String, String)> {
        fn walk(v: &Value, ptr: &str, out: &mut BTreeSet<(String, String)>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        let p = format!("{ptr}/{k}");
                        if k == "properties" {
                            if let Value::Object(props) = x {
                                for key in props.keys() {
                                    out.insert((p.clone(), key.clone()));
                                }
                            }
                        }
                        walk(x, &p, out);
                    }
                }
                Value::Array(a) => {
                    for (i, x) in a.iter().enumerate() {
                        walk(x, &format!("{ptr}/{i}"), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.root, "#", &mut out);
        out
    }

    /// Walks `value` (a file, or a part of one at `path`) beside the node at `ptr`.
    pub fn walk(&self, ptr: &str, value: &Value, path: &str, seen: &mut Seen) {
        let (ptr, v) = self.resolve(ptr);
        for k in ["oneOf", "anyOf"] {
            if let Some(alts) = v.get(k).and_then(Value::as_array) {
                for i in 0..alts.len() {
                    let alt = format!("{ptr}/{k}/{i}");
                    if self.types(&alt).contains(json_type(value)) {
                        self.walk(&alt, value, path, seen);
                    }
                }
                return;
            }
        }
        match value {
            Value::Object(m) => {
                let props = self.properties(&ptr);
                if props.is_empty() {
                    return; // a map (hw_counters, cq_errors): its keys are data
                }
                for (k, x) in m {
                    let Some((pp, _)) = props.iter().find(|(_, p)| p.contains_key(k)) else {
                        seen.errors
                            .push(format!("{path}: key {k:?} is not in the schema ({ptr})"));
                        continue;
                    };
                    seen.types
                        .entry((pp.clone(), k.clone()))
                        .or_default()
                        .insert(json_type(x));
                    let prop = format!("{pp}/{k}");
                    seen.props
                        .insert((path.to_owned(), k.clone()), prop.clone());
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    self.walk(&prop, x, &child, seen);
                }
            }
            Value::Array(a) if v.get("items").is_some_and(Value::is_object) => {
                for x in a {
                    self.walk(&format!("{ptr}/items"), x, &format!("{path}[]"), seen);
                }
            }
            _ => {}
        }
    }
}

/// The keys of every object of a serialised file in the order the text has them, per object
/// path ("devices[].channels[]"), objects in the order they first appear. (serde_json's
/// `Value` sorts keys; the writer's order is the file's, so it is read from the text.)
pub fn key_order(text: &str) -> Vec<(String, Vec<String>)> {
    struct P<'a> {
        b: &'a [u8],
        i: usize,
        out: Vec<(String, Vec<String>)>,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.b[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn string(&mut self) -> String {
            let start = self.i;
            self.i += 1;
            while self.b[self.i] != b'"' {
                self.i += if self.b[self.i] == b'\\' { 2 } else { 1 };
            }
            self.i += 1;
            serde_json::from_slice(&self.b[start..self.i]).expect("a JSON string")
        }
        fn value(&mut self, path: &str) {
            self.ws();
            match self.b[self.i] {
                b'{' => {
                    self.i += 1;
                    let at = match self.out.iter().position(|o| o.0 == path) {
                        Some(i) => i,
                        None => {
                            self.out.push((path.to_owned(), Vec::new()));
                            self.out.len() - 1
                        }
                    };
                    loop {
                        self.ws();
                        if self.b[self.i] == b'}' {
                            self.i += 1;
                            return;
                        }
                        let k = self.string();
                        if !self.out[at].1.contains(&k) {
                            self.out[at].1.push(k.clone());
                        }
                        self.ws();
                        self.i += 1; // ':'
                        let child = if path.is_empty() {
                            k
                        } else {
                            format!("{path}.{k}")
                        };
                        self.value(&child);
                        self.ws();
                        if self.b[self.i] == b',' {
                            self.i += 1;
                        }
                    }
                }
                b'[' => {
                    self.i += 1;
                    loop {
                        self.ws();
                        if self.b[self.i] == b']' {
                            self.i += 1;
                            return;
                        }
                        self.value(&format!("{path}[]"));
                        self.ws();
                        if self.b[self.i] == b',' {
                            self.i += 1;
                        }
                    }
                }
                b'"' => {
                    self.string();
                }
                _ => {
                    while !matches!(self.b[self.i], b',' | b'}' | b']') {
                        self.i += 1;
                    }
                }
            }
        }
    }
    let mut p = P {
        b: text.as_bytes(),
        i: 0,
        out: Vec::new(),
    };
    p.value("");
    p.out
}
