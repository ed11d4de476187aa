//! The JSON Schema of the per-rank file, generated from the writer's types ([`crate::write`]):
//! each key's description is its field's doc comment, its JSON type comes from its Rust type,
//! and what a type cannot say is an attribute beside the field (`x-since` for a key a later
//! version added, a range, a value type below). Built only with the feature "schema" (the
//! contract test turns it on and keeps `schema/rccl_telemetry.schema.json` equal to
//! [`schema`]); the library and the tool never build it.
//!
//! What the generation adds to what schemars derives, in [`schema`]:
//! - a key without `x-since` has its object's version (the file's is 1), and an object's is
//!   the version of the first key that holds it;
//! - a key a later version added than its object's is not required (older files lack it), and
//!   a key the writer skips when it has nothing (`skip_serializing_if`) is never required;
//! - every object with properties is closed (an unknown key is an error);
//! - a u64 key without a bound of its own is the `u64` value type, and integer formats are
//!   dropped (JSON Schema validators do not know them).

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::vocab::{HW_TYPES, SEED_KEYS, VOCAB};
use crate::wc_status::STATUS_NAME_PATTERN;
use crate::write::{
    FileReport, GidIp, GidText, HwCounters, LogBuckets, SampleCounters, StatusCounts, ROLES,
};
use crate::READ_VERSIONS;

/// Where the committed schema says it lives.
pub const SCHEMA_ID: &str =
    "https://github.com/rccl-telemetry/rccl-telemetry/schema/rccl_telemetry.schema.json";

/// A value type of the file: a named entry of the schema's `$defs`, which the docs' key tables
/// link to ("Value types").
macro_rules! value_type {
    ($(#[$doc:meta])* $t:ident = $name:literal, $schema:tt) => {
        $(#[$doc])*
        pub struct $t;
        value_type!(impl $t = $name, $schema);
    };
    (impl $t:ident = $name:literal, $schema:tt) => {
        impl JsonSchema for $t {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

value_type!(
    /// A count, bytes, ns or ms.
    U64 = "u64",
    {"description": "An integer >= 0 (a count, bytes, ns or ms).", "type": "integer", "minimum": 0}
);
value_type!(
    /// A hardware counter's delta.
    HwValue = "hw_value",
    {"description": "A hardware counter's delta; -1: not available (never zero events).",
     "type": "integer", "minimum": -1}
);
value_type!(
    /// A wall-clock time (`rank_file::rfc3339`).
    Timestamp = "timestamp",
    {"description": "UTC wall-clock time, RFC 3339 with nanoseconds, e.g. 2026-12-02T11:15:31.123456789Z",
     "type": "string",
     "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{9}Z$"}
);
value_type!(
    /// A latency extreme.
    LatencyNs = "latency_ns",
    {"description": "Completion latency in ns over the sampled completions; -1 when nothing was sampled.",
     "type": "integer", "minimum": -1}
);
value_type!(
    /// An InfiniBand LID (`Option<Lid>`: null when 0 or unknown).
    Lid = "lid",
    {"description": "An InfiniBand LID (a key of this type is null when the LID is 0 or unknown, as on RoCE).",
     "type": "integer", "minimum": 1, "maximum": 65535}
);
value_type!(
    /// The linear latency histogram.
    Histogram = "histogram",
    {"description": "A linear histogram: counts per bucket of histogram_interval_ns, 1 to 16 buckets, the last one open.",
     "type": "array", "minItems": 1, "maxItems": 16, "items": {"$ref": "#/$defs/u64"}}
);
value_type!(
    /// A communicator's hash as RCCL's log lines print it.
    CommHash = "comm_hash",
    {"description": "RCCL's commHash: \"0x\" and up to 16 lower-case hex digits, as RCCL's own log lines print it.",
     "type": "string", "pattern": "^0x[0-9a-f]{1,16}$"}
);

value_type!(
    /// A priority (PCP, 0..7).
    Priority = "priority",
    {"description": "An IEEE 802.1p priority, 0..7.", "type": "integer", "minimum": 0, "maximum": 7}
);
value_type!(
    /// A DSCP-to-priority map.
    DscpMap = "dscp_map",
    {"description": "DSCP (a string key, \"0\" .. \"63\") to the priority (0..7) the port gives it.",
     "type": "object",
     "propertyNames": {"pattern": "^([0-9]|[1-5][0-9]|6[0-3])$"},
     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 7}}
);

value_type!(impl GidText = "gid", {
    "description": "A GID as ibv_devinfo prints it: 8 groups of 4 lower-case hex digits joined by ':'.",
    "type": "string",
    "pattern": "^[0-9a-f]{4}(:[0-9a-f]{4}){7}$"
});

value_type!(impl GidIp = "gid_ip", {
    "description": "The address a GID encodes: an IPv4 dotted quad for an IPv4-mapped GID (::ffff:a.b.c.d), else the IPv6 form.",
    "type": "string"
});

value_type!(impl LogBuckets = "log_histogram", {
    "description": "Log-scale completion latency histogram (version 2): every sampled completion, in buckets at most 1/8 of their lower bound wide (exact below 16 ns). Only the non-empty buckets, in increasing order, each [lo_ns, hi_ns, count] with inclusive bounds in ns; hi_ns is null for the last bucket (from 16106127360 ns), which also holds every longer latency.",
    "type": "array",
    "items": {
        "type": "array",
        "prefixItems": [
            {"$ref": "#/$defs/u64"},
            {"anyOf": [{"$ref": "#/$defs/u64"}, {"type": "null"}]},
            {"type": "integer", "minimum": 1}
        ],
        "items": false,
        "minItems": 3
    }
});

value_type!(impl StatusCounts = "status_counts", {
    "description": "Error completions by status: the status name (enum ibv_wc_status without IBV_WC_, UNKNOWN_<n> for a value it lacks) to its count, in the enum's order; {} when none.",
    "type": "object",
    "propertyNames": {"pattern": STATUS_NAME_PATTERN},
    "additionalProperties": {"type": "integer", "minimum": 1}
});

impl JsonSchema for HwCounters {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "hw_counters".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let value = g.subschema_for::<HwValue>();
        let seed: Vec<&str> = VOCAB[..SEED_KEYS].iter().map(|k| k.name).collect();
        json_schema!({
            "type": "object",
            "required": seed,
            "additionalProperties": {
                "oneOf": [
                    value,
                    {"type": "array", "minItems": 8, "maxItems": 8, "items": value}
                ]
            }
        })
    }
}

impl JsonSchema for SampleCounters {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "sample_counters".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let value = g.subschema_for::<HwValue>();
        json_schema!({"type": "object", "additionalProperties": value})
    }
}

/// A key whose values are listed (inline where it is used, not a value type).
macro_rules! one_of {
    ($(#[$doc:meta])* $t:ident = $name:literal, $values:expr) => {
        $(#[$doc])*
        pub struct $t;
        impl JsonSchema for $t {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({"enum": $values})
            }
        }
    };
}

one_of!(
    /// `version`: the versions a reader takes ([`READ_VERSIONS`]).
    Version = "version",
    READ_VERSIONS
);
one_of!(
    /// `hw_type`: the driver families ([`HW_TYPES`]).
    HwType = "hw_type",
    HW_TYPES
);
one_of!(
    /// A queue pair's `role`: one of [`ROLES`], or null when the transport did not say.
    Role = "role",
    ROLES.iter().map(|r| json!(r)).chain([Value::Null]).collect::<Vec<_>>()
);
one_of!(
    /// `source`: what wrote a file the library did not ([`crate::write::SOURCES`]).
    Source = "source",
    crate::write::SOURCES
);

/// The schema of the per-rank file, as `schema/rccl_telemetry.schema.json` holds it.
pub fn schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut root = generator.into_root_schema_for::<FileReport>().to_value();
    let Value::Object(top) = &mut root else {
        unreachable!("an object schema")
    };
    let mut defs = match top.remove("$defs") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    for d in defs.values_mut() {
        tidy(d);
    }
    let u64_def = U64::json_schema(&mut SchemaGenerator::default()).to_value();
    defs.insert("u64".into(), u64_def);
    tidy_object(top);
    set_versions(top, &mut defs);
    let mut out = Map::new();
    out.insert(
        "$schema".into(),
        top.remove("$schema")
            .unwrap_or(json!("https://json-schema.org/draft/2020-12/schema")),
    );
    out.insert("$id".into(), json!(SCHEMA_ID));
    for (k, v) in std::mem::take(top) {
        out.insert(k, v);
    }
    out.insert("$defs".into(), Value::Object(defs));
    Value::Object(out)
}

/// Versions: the file's top level is 1; a definition takes the lowest of the keys that hold
/// it. First each definition's version, visiting definitions as their holders are until
/// nothing lowers; then every key's, written in.
fn set_versions(top: &mut Map<String, Value>, defs: &mut Map<String, Value>) {
    let mut since: BTreeMap<String, u64> = BTreeMap::new();
    versions(top, 1, &mut since, false);
    loop {
        let before = since.clone();
        for (name, v) in before.clone() {
            if let Some(Value::Object(d)) = defs.get_mut(&name) {
                versions(d, v, &mut since, false);
            }
        }
        if since == before {
            break;
        }
    }
    versions(top, 1, &mut since.clone(), true);
    for (name, v) in &since {
        if let Some(Value::Object(d)) = defs.get_mut(name) {
            versions(d, *v, &mut since.clone(), true);
        }
    }
}

/// Closes objects, makes u64 keys the u64 value type and drops integer formats, everywhere
/// under `v`.
fn tidy(v: &mut Value) {
    match v {
        Value::Object(m) => tidy_object(m),
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn tidy_object(m: &mut Map<String, Value>) {
    // A doc comment's lines are one paragraph.
    if let Some(Value::String(d)) = m.get_mut("description") {
        *d = d.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    if m.contains_key("properties") && !m.contains_key("additionalProperties") {
        m.insert("additionalProperties".into(), json!(false));
    }
    // A u64 is the u64 value type, unless an attribute bounds it; other formats go.
    if let Some(Value::String(f)) = m.remove("format") {
        if f == "uint64"
            && m.get("type") == Some(&json!("integer"))
            && !m.contains_key("maximum")
            && m.get("minimum") == Some(&json!(0))
        {
            m.remove("type");
            m.remove("minimum");
            m.insert("$ref".into(), json!("#/$defs/u64"));
        }
    }
    for v in m.values_mut() {
        tidy(v);
    }
}

/// A flattened field's schema (`schemars(with = "Since<T, V>")`): `T`'s, each key it adds
/// version `V`'s at the earliest, as `x-since` says for a single key (schemars drops a
/// flattened field's own `extend`).
pub(crate) struct Since<T, const V: u64>(std::marker::PhantomData<T>);

impl<T: JsonSchema, const V: u64> JsonSchema for Since<T, V> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}_since_{V}", T::schema_name()).into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let mut s = T::json_schema(g);
        if let Some(Value::Object(props)) = s.get_mut("properties") {
            for p in props.values_mut() {
                if let Value::Object(p) = p {
                    let pv = p.get("x-since").and_then(Value::as_u64).unwrap_or(0).max(V);
                    p.insert("x-since".into(), json!(pv));
                }
            }
        }
        s
    }
}

/// The version of each property of the object `m` (of version `v`): records the version of
/// each definition a property holds (the lowest seen) and, with `apply`, writes each
/// property's "x-since" and drops from "required" the keys a later version added.
fn versions(m: &mut Map<String, Value>, v: u64, since: &mut BTreeMap<String, u64>, apply: bool) {
    let mut later = Vec::new();
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for (k, p) in props.iter_mut() {
            let Value::Object(p) = p else { continue };
            let pv = p.get("x-since").and_then(Value::as_u64).unwrap_or(v).max(v);
            if apply {
                p.insert("x-since".into(), json!(pv));
            }
            if pv > v {
                later.push(k.clone());
            }
            held(p, pv, since, apply);
        }
    }
    if apply {
        if let Some(Value::Array(req)) = m.get_mut("required") {
            req.retain(|k| !later.iter().any(|l| k == l));
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(Value::Object(x)) = m.get_mut(k) {
            held(x, v, since, apply);
        }
    }
}

/// The definitions a property's schema refers to (directly, as items, or as an alternative)
/// are held at version `v`; an inline object under it gets its keys' versions.
fn held(p: &mut Map<String, Value>, v: u64, since: &mut BTreeMap<String, u64>, apply: bool) {
    if let Some(Value::String(r)) = p.get("$ref") {
        if let Some(name) = r.strip_prefix("#/$defs/") {
            let e = since.entry(name.to_owned()).or_insert(v);
            *e = (*e).min(v);
        }
    }
    if p.contains_key("properties") {
        versions(p, v, since, apply);
        return;
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = p.get_mut(k) {
            for a in alts {
                if let Value::Object(a) = a {
                    held(a, v, since, apply);
                }
            }
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(Value::Object(x)) = p.get_mut(k) {
            held(x, v, since, apply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_has_the_lowest_version_of_the_keys_holding_it_whatever_their_order() {
        // "x" is held at version 4 by "a_late", found first, and at version 3 by "b_early",
        // found only through "c_mid": its keys are of version 3 all the same.
        let mut top = json!({
            "properties": {
                "late": {"$ref": "#/$defs/a_late", "x-since": 4},
                "mid": {"$ref": "#/$defs/c_mid"}
            },
            "required": ["late", "mid"]
        });
        let mut defs = json!({
            "a_late": {"properties": {"p": {"$ref": "#/$defs/x"}}, "required": ["p"]},
            "b_early": {"properties": {"q": {"$ref": "#/$defs/x", "x-since": 3}}, "required": ["q"]},
            "c_mid": {"properties": {"r": {"$ref": "#/$defs/b_early"}}, "required": ["r"]},
            "x": {"properties": {"k": {"type": "integer"}}, "required": ["k"]}
        });
        let (Value::Object(t), Value::Object(d)) = (&mut top, &mut defs) else {
            unreachable!()
        };
        set_versions(t, d);
        assert_eq!(
            top["required"],
            json!(["mid"]),
            "a later key is not required"
        );
        assert_eq!(top["properties"]["mid"]["x-since"], json!(1));
        assert_eq!(defs["a_late"]["properties"]["p"]["x-since"], json!(4));
        assert_eq!(defs["a_late"]["required"], json!(["p"]));
        assert_eq!(defs["b_early"]["properties"]["q"]["x-since"], json!(3));
        assert_eq!(defs["b_early"]["required"], json!([]));
        assert_eq!(defs["x"]["properties"]["k"]["x-since"], json!(3));
        assert_eq!(defs["x"]["required"], json!(["k"]));
    }
}
