//! Parsing a file into a JSON value while noting every key an object repeats. serde_json
//! keeps the last of two equal keys without a word, and so does every reader of the typed
//! model; a writer never repeats one, so `check` names each (as a JSON Pointer to the second).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// At most this many repeated keys are named per file.
pub const MAX_NAMED: usize = 64;

/// The value and the pointers to the repeated keys (the second and later of each).
pub fn parse(bytes: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut dups = Vec::new();
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Seed {
        path: &mut path,
        dups: &mut dups,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((v, dups))
}

struct Seed<'a> {
    path: &'a mut String,
    dups: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        let len = self.path.len();
        loop {
            self.path.push_str(&format!("/{}", out.len()));
            let next = seq.next_element_seed(Seed {
                path: self.path,
                dups: self.dups,
            })?;
            self.path.truncate(len);
            match next {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let len = self.path.len();
        while let Some(k) = map.next_key::<String>()? {
            self.path.push('/');
            self.path.push_str(&k.replace('~', "~0").replace('/', "~1"));
            if out.contains_key(&k) && self.dups.len() < MAX_NAMED {
                self.dups.push(self.path.clone());
            }
            let v = map.next_value_seed(Seed {
                path: self.path,
                dups: self.dups,
            })?;
            self.path.truncate(len);
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_named_by_pointer_and_the_last_wins() {
        let (v, d) =
            parse(br#"{"a": 1, "b": [{"x": 1, "x": 2}, {"y/z": 0, "y/z": 3}], "a": 5}"#).unwrap();
        assert_eq!(d, vec!["/b/0/x", "/b/1/y~1z", "/a"]);
        assert_eq!(v["a"], 5);
        assert_eq!(v["b"][0]["x"], 2);
    }

    #[test]
    fn a_file_without_repeats_is_the_same_value_serde_json_reads() {
        let text = br#"{"v": [1, -2, 3.5, "s", null, true, {"k": {}}], "e": []}"#;
        let (v, d) = parse(text).unwrap();
        assert!(d.is_empty());
        assert_eq!(v, serde_json::from_slice::<Value>(text).unwrap());
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        assert!(parse(b"{} x").is_err());
    }
}
