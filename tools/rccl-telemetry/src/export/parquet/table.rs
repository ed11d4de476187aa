//! A Parquet table in memory: columns of typed values with their definition levels, written
//! as a row group every ROW_GROUP_ROWS rows with the `parquet` crate's column writers.
//! Separate from the builders (tables.rs), which only push values row by row.

use super::*;
use Kind::*;

enum Vals {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<ByteArray>),
}

/// One value pushed into a row (None: NULL).
pub enum V<'a> {
    B(bool),
    I32(i32),
    I64(i64),
    F64(f64),
    S(&'a str),
}

struct Column {
    col: Col,
    vals: Vals,
    /// Definition levels (1 = value, 0 = NULL), for nullable columns.
    defs: Vec<i16>,
    /// The last string pushed: a repeat (the identifiers, row after row) shares its bytes.
    last: Option<ByteArray>,
}

/// Rows of a row group: 122,880 (60 x 2,048), DuckDB's own row-group size and the unit it
/// hands to each scanning thread, so a table of a million rows is read by every core, not
/// one; Spark splits a file at row-group boundaries and reads each group in one task, at
/// this size a few megabytes compressed (the tables are narrow), well inside one task's
/// input and small enough that the writer buffers little (a group per table in memory).
pub const ROW_GROUP_ROWS: usize = 122_880;

struct Sink {
    w: SerializedFileWriter<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
    skip: Vec<&'static str>,
}

/// A table being built row by row: each row pushes one value per column, in column order.
/// Created with [`Table::create`], it writes a row group every [`ROW_GROUP_ROWS`] rows and the
/// rest at [`Table::finish`].
pub struct Table {
    pub name: &'static str,
    cols: Vec<Column>,
    rows: usize,
    buffered: usize,
    cursor: usize,
    sink: Option<Sink>,
    err: Option<String>,
}

impl Table {
    pub fn new(name: &'static str, cols: Vec<Col>) -> Table {
        let cols = cols
            .into_iter()
            .map(|c| Column {
                col: c,
                vals: match c.kind {
                    Bool => Vals::Bool(Vec::new()),
                    I32 => Vals::I32(Vec::new()),
                    I64 | TsMicros => Vals::I64(Vec::new()),
                    F64 => Vals::F64(Vec::new()),
                    Str => Vals::Str(Vec::new()),
                },
                defs: Vec::new(),
                last: None,
            })
            .collect();
        Table {
            name,
            cols,
            rows: 0,
            buffered: 0,
            cursor: 0,
            sink: None,
            err: None,
        }
    }

    /// A table written to `path` as it fills, without the columns in `skip` (those a hive
    /// partition's directory names carry).
    pub fn create(
        name: &'static str,
        cols: Vec<Col>,
        path: &Path,
        skip: &[&'static str],
    ) -> Result<Table, String> {
        let mut t = Table::new(name, cols);
        let schema = Arc::new(t.schema(skip)?);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("rccl-telemetry {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![
                KeyValue::new(SCHEMA_VERSION_KEY.to_string(), SCHEMA_VERSION.to_string()),
                KeyValue::new(TABLE_KEY.to_string(), name.to_string()),
            ]))
            .build();
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let w = SerializedFileWriter::new(std::io::BufWriter::new(file), schema, Arc::new(props))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        t.sink = Some(Sink {
            w,
            path: path.to_path_buf(),
            skip: skip.to_vec(),
        });
        Ok(t)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Pushes the next column's value. A wrong type or a NULL in a required column is a bug
    /// in the table's builder (the tests write every table), so it panics with the column.
    pub fn put(&mut self, v: Option<V<'_>>) -> &mut Table {
        let Some(c) = self.cols.get_mut(self.cursor) else {
            panic!("table {}: more values than columns", self.name)
        };
        self.cursor += 1;
        match v {
            None => {
                assert!(
                    c.col.nullable,
                    "table {}: NULL in required column {}",
                    self.name, c.col.name
                );
                c.defs.push(0);
            }
            Some(v) => {
                if c.col.nullable {
                    c.defs.push(1);
                }
                match (&mut c.vals, v) {
                    (Vals::Bool(a), V::B(x)) => a.push(x),
                    (Vals::I32(a), V::I32(x)) => a.push(x),
                    (Vals::I64(a), V::I64(x)) => a.push(x),
                    (Vals::F64(a), V::F64(x)) => a.push(x),
                    (Vals::Str(a), V::S(x)) => {
                        let v = match &c.last {
                            Some(l) if l.data() == x.as_bytes() => l.clone(),
                            _ => {
                                let v = ByteArray::from(x);
                                c.last = Some(v.clone());
                                v
                            }
                        };
                        a.push(v)
                    }
                    _ => panic!("table {}: wrong type for column {}", self.name, c.col.name),
                }
            }
        }
        self
    }

    pub fn end_row(&mut self) {
        assert_eq!(
            self.cursor,
            self.cols.len(),
            "table {}: row has {} of {} values",
            self.name,
            self.cursor,
            self.cols.len()
        );
        self.cursor = 0;
        self.rows += 1;
        self.buffered += 1;
        if self.buffered >= ROW_GROUP_ROWS && self.sink.is_some() && self.err.is_none() {
            if let Err(e) = self.flush() {
                self.err = Some(e);
            }
        }
    }

    // Shorthands.
    pub fn s(&mut self, v: &str) -> &mut Table {
        self.put(Some(V::S(v)))
    }
    pub fn os(&mut self, v: Option<&str>) -> &mut Table {
        self.put(v.map(V::S))
    }
    pub fn i32(&mut self, v: i64) -> &mut Table {
        self.put(Some(V::I32(
            v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
        )))
    }
    pub fn oi32(&mut self, v: Option<i64>) -> &mut Table {
        self.put(v.map(|v| V::I32(v.clamp(i32::MIN as i64, i32::MAX as i64) as i32)))
    }
    pub fn i64(&mut self, v: i64) -> &mut Table {
        self.put(Some(V::I64(v)))
    }
    pub fn oi64(&mut self, v: Option<i64>) -> &mut Table {
        self.put(v.map(V::I64))
    }
    /// An unsigned count; saturates at i64::MAX (no real counter gets there).
    pub fn u64(&mut self, v: u64) -> &mut Table {
        self.i64(i64::try_from(v).unwrap_or(i64::MAX))
    }
    pub fn ou64(&mut self, v: Option<u64>) -> &mut Table {
        self.oi64(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
    }
    /// A value of the files where -1 means "not available": NULL then.
    pub fn avail(&mut self, v: i64) -> &mut Table {
        self.oi64((v >= 0).then_some(v))
    }
    pub fn f64(&mut self, v: Option<f64>) -> &mut Table {
        self.put(v.filter(|x| x.is_finite()).map(V::F64))
    }
    pub fn b(&mut self, v: bool) -> &mut Table {
        self.put(Some(V::B(v)))
    }
    pub fn ob(&mut self, v: Option<bool>) -> &mut Table {
        self.put(v.map(V::B))
    }
    /// Unix nanoseconds written as a microsecond timestamp (truncated toward the past).
    pub fn ts(&mut self, ns: Option<i128>) -> &mut Table {
        self.oi64(ns.and_then(|n| i64::try_from(n.div_euclid(1000)).ok()))
    }

    fn schema(&self, skip: &[&str]) -> Result<Type, String> {
        let mut fields = Vec::new();
        for c in self.cols.iter().filter(|c| !skip.contains(&c.col.name)) {
            let (phys, logical) = match c.col.kind {
                Bool => (Physical::BOOLEAN, None),
                I32 => (Physical::INT32, None),
                I64 => (Physical::INT64, None),
                F64 => (Physical::DOUBLE, None),
                Str => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
                TsMicros => (
                    Physical::INT64,
                    Some(LogicalType::timestamp(true, TimeUnit::MICROS)),
                ),
            };
            let t = Type::primitive_type_builder(c.col.name, phys)
                .with_repetition(if c.col.nullable {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                })
                .with_logical_type(logical)
                .build()
                .map_err(|e| format!("column {}: {e}", c.col.name))?;
            fields.push(Arc::new(t));
        }
        Type::group_type_builder("rccl_telemetry")
            .with_fields(fields)
            .build()
            .map_err(|e| e.to_string())
    }

    /// Writes the buffered rows as one row group and empties the buffers.
    fn flush(&mut self) -> Result<(), String> {
        let Table {
            cols,
            sink,
            buffered,
            ..
        } = self;
        let Some(sink) = sink else { return Ok(()) };
        if *buffered == 0 {
            return Ok(());
        }
        let path = sink.path.display().to_string();
        let err = |e: ::parquet::errors::ParquetError| format!("{path}: {e}");
        let mut rg = sink.w.next_row_group().map_err(err)?;
        for c in cols.iter_mut() {
            if !sink.skip.contains(&c.col.name) {
                let Some(mut cw) = rg.next_column().map_err(err)? else {
                    return Err(format!("{path}: fewer columns than the schema"));
                };
                let defs = c.col.nullable.then_some(c.defs.as_slice());
                match &c.vals {
                    Vals::Bool(v) => cw.typed::<BoolType>().write_batch(v, defs, None),
                    Vals::I32(v) => cw.typed::<Int32Type>().write_batch(v, defs, None),
                    Vals::I64(v) => cw.typed::<Int64Type>().write_batch(v, defs, None),
                    Vals::F64(v) => cw.typed::<DoubleType>().write_batch(v, defs, None),
                    Vals::Str(v) => cw.typed::<ByteArrayType>().write_batch(v, defs, None),
                }
                .map_err(err)?;
                cw.close().map_err(err)?;
            }
            match &mut c.vals {
                Vals::Bool(v) => v.clear(),
                Vals::I32(v) => v.clear(),
                Vals::I64(v) => v.clear(),
                Vals::F64(v) => v.clear(),
                Vals::Str(v) => v.clear(),
            }
            c.defs.clear();
            c.last = None;
        }
        rg.close().map_err(err)?;
        *buffered = 0;
        Ok(())
    }

    /// Writes what is left and closes the file; returns the number of rows.
    pub fn finish(mut self) -> Result<usize, String> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.flush()?;
        if let Some(sink) = self.sink.take() {
            sink.w
                .close()
                .map_err(|e| format!("{}: {e}", sink.path.display()))?;
        }
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{col, null};
    use super::*;

    #[test]
    #[should_panic(expected = "NULL in required column")]
    fn a_null_in_a_required_column_is_caught() {
        let mut t = Table::new("t", vec![col("a", I64)]);
        t.oi64(None);
    }

    #[test]
    fn unavailable_is_null_not_zero() {
        let mut t = Table::new("t", vec![null("a", I64)]);
        t.avail(-1).end_row();
        t.avail(0).end_row();
        let Vals::I64(v) = &t.cols[0].vals else {
            panic!()
        };
        assert_eq!(v, &[0]);
        assert_eq!(t.cols[0].defs, [0, 1]);
    }

    #[test]
    fn a_big_table_is_written_in_row_groups_and_reads_back() {
        use ::parquet::file::reader::{FileReader, SerializedFileReader};
        use ::parquet::record::RowAccessor;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let n = 2 * ROW_GROUP_ROWS + 5;
        let mut t = Table::create("t", vec![col("s", Str), null("v", I64)], &path, &[]).unwrap();
        for i in 0..n {
            t.s(if i % 3 == 0 { "a" } else { "bb" })
                .avail(if i % 7 == 0 { -1 } else { i as i64 })
                .end_row();
        }
        assert_eq!(t.finish().unwrap(), n);
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let md = r.metadata();
        assert_eq!(md.num_row_groups(), 3);
        assert_eq!(md.file_metadata().num_rows(), n as i64);
        let kv = md.file_metadata().key_value_metadata().unwrap();
        assert!(kv
            .iter()
            .any(|k| k.key == SCHEMA_VERSION_KEY && k.value.as_deref() == Some("1")));
        let (mut nulls, mut sum, mut a) = (0, 0i64, 0);
        for (i, row) in r.get_row_iter(None).unwrap().enumerate() {
            let row = row.unwrap();
            match row.get_long(1) {
                Ok(v) => sum += v,
                Err(_) => nulls += 1,
            }
            a += usize::from(row.get_string(0).unwrap() == "a");
            assert_eq!(row.get_string(0).unwrap() == "a", i % 3 == 0);
        }
        assert_eq!(nulls, (0..n).filter(|i| i % 7 == 0).count());
        assert_eq!(sum, (0..n as i64).filter(|i| i % 7 != 0).sum::<i64>());
        assert_eq!(a, (0..n).filter(|i| i % 3 == 0).count());
    }
}
