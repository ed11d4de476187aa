//! The file's JSON layout: one key per line, arrays on one line. Separate because it is a
//! serde formatter, independent of what is serialised.

use std::io::{self, Write};

use serde::Serialize;

/// Pretty JSON that keeps arrays on one line: objects get one key per line, so a file of
/// thousands of QPs stays readable and greppable, while histograms read as [3, 0, 1, 0, 0].
struct Layout {
    indent: usize,
    has_value: bool,
}

impl serde_json::ser::Formatter for Layout {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.indent += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.indent -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            indent(w, self.indent)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        indent(w, self.indent)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

fn indent<W: ?Sized + Write>(w: &mut W, n: usize) -> io::Result<()> {
    const SPACES: &[u8] = b"                                                                ";
    let mut left = n * 2;
    while left > 0 {
        let k = left.min(SPACES.len());
        w.write_all(&SPACES[..k])?;
        left -= k;
    }
    Ok(())
}

/// Serialises a report in the file's layout.
pub fn to_writer<W: Write, T: Serialize>(w: W, v: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        w,
        Layout {
            indent: 0,
            has_value: false,
        },
    );
    v.serialize(&mut ser).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_valid_json_with_one_line_arrays() {
        #[derive(Serialize)]
        struct T {
            a: Vec<u64>,
            b: Vec<serde_json::Value>,
            c: Option<u32>,
            e: serde_json::Value,
        }
        let v = T {
            a: vec![1, 2, 3],
            b: vec![serde_json::json!({"x": 1}), serde_json::json!({})],
            c: None,
            e: serde_json::json!({}),
        };
        let mut out = Vec::new();
        to_writer(&mut out, &v).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("\"a\": [1, 2, 3]"), "{s}");
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"a": [1,2,3], "b": [{"x": 1}, {}], "c": null, "e": {}})
        );
    }
}
