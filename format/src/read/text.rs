//! Short texts that repeat across a run's QPs (a peer's GID and IP, a QP's role, its own GID,
//! type and state), read once per reading thread and shared: an all-to-all run names each
//! NIC's GID in every QP and every device's peer list towards it, two million copies at 1,024
//! ranks.

use serde::de::{Deserialize, Deserializer, Visitor};
use serde::{Serialize, Serializer};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared, immutable text of the model: reads as a `&str` (`as_deref()` on an option),
/// reads and writes as a JSON string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Text(Arc<str>);

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        text(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        text(&s)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// A string is read as its shared copy; nothing is allocated for a text already seen.
impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, s: &str) -> Result<Text, E> {
                Ok(text(s))
            }
        }
        d.deserialize_str(V)
    }
}

/// Distinct texts a reading thread keeps before it starts over (a file of random GIDs costs
/// a bounded table; what the model holds stays valid, as each value owns its share).
const MAX_KEPT: usize = 1 << 16;

thread_local! {
    static KEPT: RefCell<HashSet<Arc<str>>> = RefCell::new(HashSet::new());
}

/// The shared copy of `s`.
pub fn text(s: &str) -> Text {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        if let Some(t) = k.get(s) {
            return Text(t.clone());
        }
        if k.len() >= MAX_KEPT {
            k.clear();
        }
        let t: Arc<str> = Arc::from(s);
        k.insert(t.clone());
        Text(t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_is_one_copy_and_null_is_none() {
        let a = text("fe80::1");
        let b = text("fe80::1");
        assert!(Arc::ptr_eq(&a.0, &b.0));
        let v: Option<Text> = serde_json::from_str("\"x\\u0041\"").unwrap();
        assert_eq!(v.as_deref(), Some("xA"));
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"xA\"");
        let n: Option<Text> = serde_json::from_str("null").unwrap();
        assert_eq!(n, None);
        assert!(serde_json::from_str::<Option<Text>>("7").is_err());
    }

    #[test]
    fn the_table_starts_over_past_its_bound_and_values_stay_valid() {
        let first = text("kept-0");
        for i in 1..=MAX_KEPT + 1 {
            text(&format!("kept-{i}"));
        }
        KEPT.with(|k| assert!(k.borrow().len() <= MAX_KEPT));
        assert_eq!(&*first, "kept-0");
    }
}
