//! Counters by name as read (a device's "hw_counters", a hardware sample's "counters"):
//! (name, value) pairs sorted by name in one exact-size list, each name the run's shared copy
//! of it ([`Text`]).
//!
//! A device lists about 50 counters. In a `BTreeMap<String, HwValue>` they took about 7 KB a
//! device (tree nodes of 11 slots, a string allocated per name), most of the memory of a run
//! without links: 4,096 ranks of 8 devices held 157 of their 221 MiB of heap there. Here a
//! device's counter is 40 bytes (its name's pointer and the value), a sample's 24, and a name
//! is held once per reading thread. Reads, iterates and writes as the map did: sorted by name,
//! a name given twice in an object keeping its last value.

use super::{text, HwValue, Text};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::Index;

/// Values by name, sorted by name, each name once.
#[derive(Clone, PartialEq, Eq)]
pub struct Named<V>(Vec<(Text, V)>);

/// A device's "hw_counters".
pub type HwCounters = Named<HwValue>;

impl<V> Default for Named<V> {
    fn default() -> Self {
        Named(Vec::new())
    }
}

impl<V> Named<V> {
    /// The value of counter `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// (name, value) by name.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> + Clone {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// From pairs in any order: sorted by name, the last value of a name given twice kept.
    fn from_pairs(mut v: Vec<(Text, V)>) -> Named<V> {
        // Reversed and sorted stably, a name's last value comes first among its equals.
        v.reverse();
        // By the name's text (a key closure cannot return the borrowed `str`).
        #[allow(clippy::unnecessary_sort_by)]
        v.sort_by(|a, b| (*a.0).cmp(&*b.0));
        v.dedup_by(|later, first| later.0 == first.0);
        v.shrink_to_fit();
        Named(v)
    }
}

/// `named["x"]`, as on a map: panics when there is no such name.
impl<V> Index<&str> for Named<V> {
    type Output = V;
    fn index(&self, name: &str) -> &V {
        self.get(name)
            .unwrap_or_else(|| panic!("no counter named {name:?}"))
    }
}

impl<'a, V> IntoIterator for &'a Named<V> {
    type Item = (&'a str, &'a V);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (Text, V)>, fn(&'a (Text, V)) -> (&'a str, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (&**k, v))
    }
}

impl<S: AsRef<str>, V> FromIterator<(S, V)> for Named<V> {
    fn from_iter<I: IntoIterator<Item = (S, V)>>(it: I) -> Named<V> {
        Named::from_pairs(it.into_iter().map(|(k, v)| (text(k.as_ref()), v)).collect())
    }
}

impl<V> From<std::collections::BTreeMap<String, V>> for Named<V> {
    fn from(m: std::collections::BTreeMap<String, V>) -> Named<V> {
        m.into_iter().collect()
    }
}

impl<V: fmt::Debug> fmt::Debug for Named<V> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for Named<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Named<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Named<V>, D::Error> {
        struct Vis<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<V> {
            type Value = Named<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of counters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Named<V>, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0).min(256));
                while let Some(e) = m.next_entry::<Text, V>()? {
                    v.push(e);
                }
                Ok(Named::from_pairs(v))
            }
        }
        d.deserialize_map(Vis(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// It reads, looks up, iterates and writes as the map it replaces did, a duplicate name
    /// keeping its last value.
    #[test]
    fn reads_and_writes_as_the_map_did() {
        let json = r#"{"z":1,"a":[1,-1],"m":-1,"a":[2,3],"b":7}"#;
        let ours: HwCounters = serde_json::from_str(json).unwrap();
        let map: BTreeMap<String, HwValue> = serde_json::from_str(json).unwrap();
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(ours.len(), map.len());
        assert!(ours.iter().eq(map.iter().map(|(k, v)| (k.as_str(), v))));
        for k in ["a", "b", "m", "z", "c", ""] {
            assert_eq!(ours.get(k), map.get(k), "{k}");
        }
        assert_eq!(ours.get("a"), Some(&HwValue::PerPrio(vec![2, 3])));
        assert_eq!(ours.keys().collect::<Vec<_>>(), ["a", "b", "m", "z"]);
        let collected: HwCounters = map.clone().into_iter().collect();
        assert_eq!(collected, ours);
        assert!(serde_json::from_str::<HwCounters>("[1]").is_err());
    }

    #[test]
    fn a_counter_is_forty_bytes_and_a_sample_value_twenty_four() {
        assert!(std::mem::size_of::<(Text, HwValue)>() <= 40);
        assert!(std::mem::size_of::<(Text, i64)>() <= 24);
        let s: Named<i64> = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!((s["a"], s["b"]), (1, 2));
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"{"a":1,"b":2}"#);
    }
}
