//! `export --format parquet`: the run as tidy Parquet tables, one file per table, for DuckDB,
//! Spark, Trino and pyarrow.
//!
//! Written with the `parquet` crate's low-level column writers (no arrow): every table is built
//! column by column in memory ([`Table`]), then written as one row group, Snappy-compressed.
//! The schema is versioned ([`SCHEMA_VERSION`], a column of every table and the file metadata
//! key [`SCHEMA_VERSION_KEY`]); the columns are documented in the tool's README ("Parquet
//! export"). Types are the ones every engine reads without a cast: BOOLEAN, INT32, INT64,
//! DOUBLE, UTF8 strings, and INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true) (Spark 3 rejects
//! NANOS timestamps, so the exact nanoseconds are kept in a plain INT64 column beside them).
//! A hardware counter or latency the file gives as -1 ("not available") is NULL, never 0.
//!
//! Each table is one entry in [`TABLES`]: a name and a function that fills it from a group of
//! rank files (and the links `links::join` found between the job's files).

use crate::hwclass::classify;
use crate::links::Link;
use crate::load::{Loaded, Run};
use crate::model::{parse_timestamp_ns, Counters, Device, TelemetryFile};
use crate::summary::Latency;
use ::parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use ::parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::types::Type;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The version of the tables' schema: bumped when a column changes meaning or type, or goes
/// away (adding a column does not bump it).
pub const SCHEMA_VERSION: i32 = 1;
/// The file metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "rccl_telemetry.schema_version";
/// The file metadata key naming the table.
pub const TABLE_KEY: &str = "rccl_telemetry.table";

/// A column's type as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    I32,
    I64,
    F64,
    Str,
    /// INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true).
    TsMicros,
}

impl Kind {
    /// The type as the README's schema tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Bool => "BOOLEAN",
            Kind::I32 => "INT32",
            Kind::I64 => "INT64",
            Kind::F64 => "DOUBLE",
            Kind::Str => "STRING",
            Kind::TsMicros => "TIMESTAMP",
        }
    }
}

/// One column: its name, type, and whether it can be NULL.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
}

const fn col(name: &'static str, kind: Kind) -> Col {
    Col {
        name,
        kind,
        nullable: false,
    }
}
const fn null(name: &'static str, kind: Kind) -> Col {
    Col {
        name,
        kind,
        nullable: true,
    }
}

use Kind::*;

/// The columns every table starts with: they identify the rank (and join the tables).
pub const IDS: &[Col] = &[
    col("schema_version", I32),
    col("job", Str),
    col("host", Str),
    col("pid", I64),
    col("rank_file", Str),
];

const RANKS: &[Col] = &[
    col("process", Str),
    col("source_format", Str),
    null("is_final", Bool),
    null("trigger", Str),
    null("transport", Str),
    null("start_time", TsMicros),
    null("end_time", TsMicros),
    null("duration_s", F64),
    col("start_time_text", Str),
    col("end_time_text", Str),
    col("histogram_interval_ns", I64),
    null("latency_sample_interval", I64),
    col("devices_registered", I32),
    col("devices_used", I32),
    col("hw_samples", I64),
    null("hw_samples_dropped", I64),
];

const DEVICES: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("eth_device", Str),
    col("hw_type", Str),
    col("used", Bool),
    col("tx_bytes", I64),
    col("rx_bytes", I64),
    col("num_cq_errors", I64),
    col("cq_poll_count", I64),
    null("num_channels", I64),
    col("active_channels", I64),
    col("num_qp_untracked", I64),
    col("num_wqe_sent", I64),
    col("num_wqe_completed", I64),
    col("num_slot_miss", I64),
    col("histogram_interval_ns", I64),
    col("latency_samples", I64),
    null("latency_min_ns", I64),
    null("latency_max_ns", I64),
    null("latency_p50_ns", F64),
    null("latency_p90_ns", F64),
    null("latency_p99_ns", F64),
    null("latency_p999_ns", F64),
    col("latency_tail_open", Bool),
    null("log_latency_samples", I64),
    null("log_latency_p50_ns", F64),
    null("log_latency_p90_ns", F64),
    null("log_latency_p99_ns", F64),
    null("log_latency_p999_ns", F64),
];

/// The software counters channels and queue pairs share.
const COUNTERS: &[Col] = &[
    col("num_wqe_sent", I64),
    col("num_recv_wqe", I64),
    col("num_wqe_rcvd", I64),
    col("num_wqe_completed", I64),
    null("num_wqe_sampled", I64),
    col("num_cts_sent", I64),
    col("num_cts_sent_signalled", I64),
    col("num_cts_sent_unsignalled", I64),
    col("num_slot_miss", I64),
    col("num_write_wqe", I64),
    col("num_write_imm_wqe", I64),
    null("wqe_completion_ns_min", I64),
    null("wqe_completion_ns_max", I64),
];

const CHANNEL_IDS: &[Col] = &[
    col("device_id", I32),
    null("channel", I64),
    col("channel_index", I32),
];

const CHANNELS: &[Col] = &[
    col("num_req_completed", I64),
    col("num_data_qp", I64),
    col("num_cts_qp", I64),
    col("num_qp_untracked", I64),
    col("num_qps", I32),
];

const QPS: &[Col] = &[col("qp", I64), null("role", Str)];

const HW_COUNTERS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("counter", Str),
    col("category", Str),
    null("priority", I32),
    null("value", I64),
];

const HW_SAMPLES: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    null("timestamp", TsMicros),
    col("timestamp_ns", I64),
    col("counter", Str),
    col("category", Str),
    null("value", I64),
];

const HISTOGRAMS: &[Col] = &[
    col("device_id", I32),
    null("channel", I64),
    null("channel_index", I32),
    null("qp", I64),
    col("level", Str),
    col("scale", Str),
    col("bucket", I32),
    col("lower_ns", I64),
    null("upper_ns", I64),
    col("count", I64),
];

/// The columns the links table starts with: a link belongs to a job and to its sending host.
pub const LINK_IDS: &[Col] = &[
    col("schema_version", I32),
    col("job", Str),
    col("host", Str),
];

const LINKS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    col("pids", Str),
    null("gid", Str),
    null("lid", I64),
    col("dst_host", Str),
    col("dst_device_id", I32),
    col("dst_roce_device", Str),
    col("dst_pids", Str),
    null("dst_gid", Str),
    null("dst_lid", I64),
    col("qps", I64),
    col("wrs_sent", I64),
    col("wrs_completed", I64),
    col("wrs_received_by_dst", I64),
    col("tx_bytes_est", I64),
    null("latency_source", Str),
    null("latency_samples", I64),
    null("latency_p50_ns", F64),
    null("latency_p90_ns", F64),
    null("latency_p99_ns", F64),
    null("latency_p99_open", Bool),
    null("latency_max_ns", I64),
    null("retired_unsignalled", I64),
    null("wrs_outstanding", I64),
    null("qps_stalled", I64),
    null("longest_stall_ms", I64),
];

const STALLS: &[Col] = &[
    col("device_id", I32),
    col("roce_device", Str),
    null("channel", I64),
    col("channel_index", I32),
    col("qp", I64),
    null("qp_num", I64),
    null("peer_gid", Str),
    null("peer_lid", I64),
    null("peer_qp_num", I64),
    null("stalled", Bool),
    null("stalled_since", TsMicros),
    null("num_wqe_outstanding", I64),
    null("oldest_outstanding_ms", I64),
    null("longest_stall_ms", I64),
    null("longest_stall_start", TsMicros),
];

/// A table's columns, in order (without the identifiers a partition takes away).
pub fn columns(table: &str) -> Vec<Col> {
    let parts: &[&[Col]] = match table {
        "ranks" => &[IDS, RANKS],
        "devices" => &[IDS, DEVICES],
        "channels" => &[IDS, CHANNEL_IDS, COUNTERS, CHANNELS],
        "qps" => &[IDS, CHANNEL_IDS, QPS, COUNTERS],
        "hw_counters" => &[IDS, HW_COUNTERS],
        "hw_samples" => &[IDS, HW_SAMPLES],
        "histograms" => &[IDS, HISTOGRAMS],
        "links" => &[LINK_IDS, LINKS],
        "stalls" => &[IDS, STALLS],
        _ => &[],
    };
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

// ---------------------------------------------------------------------------------------------
// Tables in memory

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

/// Rows buffered before they are written as a row group: bounds the memory of a big table.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

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

// ---------------------------------------------------------------------------------------------
// Building the tables

/// One rank file and the identifiers its rows carry.
pub struct Rank<'a> {
    pub job: &'a str,
    pub rank_file: String,
    pub loaded: &'a Loaded,
}

impl Rank<'_> {
    fn f(&self) -> &TelemetryFile {
        &self.loaded.file
    }

    fn ids(&self, t: &mut Table) {
        t.i32(SCHEMA_VERSION as i64)
            .s(self.job)
            .s(&self.f().host_name)
            .i64(self.f().process_id)
            .s(&self.rank_file);
    }

    fn wall_ns(&self, s: &str) -> Option<i128> {
        if self.f().format.has_wall_clock() {
            parse_timestamp_ns(s)
        } else {
            None
        }
    }
}

/// The rank files of one output file (a partition, or the whole run) and the links whose
/// sending NIC is on them, each with its job.
#[derive(Default)]
pub struct Group<'a> {
    pub ranks: Vec<Rank<'a>>,
    pub links: Vec<(&'a str, &'a Link)>,
}

/// Fills one table (made with the table's [`columns`]) from a group.
pub type Builder = fn(&Group<'_>, &mut Table);

/// Every table the export writes, in order; a new table is one more entry here.
pub const TABLES: &[(&str, Builder)] = &[
    ("ranks", |g, t| ranks(&g.ranks, t)),
    ("devices", |g, t| devices(&g.ranks, t)),
    ("channels", |g, t| channels(&g.ranks, t)),
    ("qps", |g, t| qps(&g.ranks, t)),
    ("hw_counters", |g, t| hw_counters(&g.ranks, t)),
    ("hw_samples", |g, t| hw_samples(&g.ranks, t)),
    ("histograms", |g, t| histograms(&g.ranks, t)),
    ("links", |g, t| links(&g.links, t)),
    ("stalls", |g, t| stalls(&g.ranks, t)),
];

fn ranks(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        r.ids(t);
        let (start, end) = (r.wall_ns(&f.start_time), r.wall_ns(&f.end_time));
        t.s(&f.process_name)
            .s(f.format.label())
            .ob(f.is_final)
            .os(f.trigger.as_deref())
            .os(f.transport.as_deref());
        t.ts(start)
            .ts(end)
            .f64(start.zip(end).map(|(s, e)| (e - s) as f64 / 1e9));
        t.s(&f.start_time)
            .s(&f.end_time)
            .u64(f.histogram_interval_ns)
            .ou64(f.latency_sample_interval);
        t.i32(f.devices.len() as i64)
            .i32(f.devices.iter().filter(|d| d.is_used()).count() as i64);
        t.u64(f.hw_samples.as_ref().map_or(0, |s| s.len() as u64))
            .ou64(f.hw_samples_dropped);
        t.end_row();
    }
}

fn percentiles(t: &mut Table, l: Option<&Latency>) {
    for q in crate::summary::QUANTILES {
        t.f64(l.and_then(|l| l.get(q)).map(|p| p.estimate_ns));
    }
}

fn devices(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        for d in &f.devices {
            r.ids(t);
            let (mn, mx) = d.latency_min_max();
            let lat = Latency::of(&d.histogram(), f.histogram_interval_ns, mn, mx);
            let log = d.log_histogram().map(|h| Latency::of_log(&h, mn, mx));
            t.i32(d.device_id as i64)
                .s(&d.roce_device)
                .s(&d.eth_device)
                .s(&d.hw_type)
                .b(d.is_used());
            t.u64(d.tx_bytes)
                .u64(d.rx_bytes)
                .u64(d.num_cq_errors)
                .u64(d.cq_poll_count)
                .ou64(d.num_channels);
            t.u64(d.active_channels).u64(d.num_qp_untracked);
            t.u64(d.sum_channels(|c| c.counters.num_wqe_sent))
                .u64(d.sum_channels(|c| c.counters.num_wqe_completed));
            t.u64(d.sum_channels(|c| c.counters.num_slot_miss))
                .u64(f.histogram_interval_ns);
            t.u64(lat.samples).oi64(mn).oi64(mx);
            percentiles(t, Some(&lat));
            t.b(lat.percentiles.iter().any(|p| p.open_bucket));
            t.ou64(log.as_ref().map(|l| l.samples));
            percentiles(t, log.as_ref());
            t.end_row();
        }
    }
}

fn counters(t: &mut Table, c: &Counters) {
    t.u64(c.num_wqe_sent)
        .u64(c.num_recv_wqe)
        .u64(c.num_wqe_rcvd)
        .u64(c.num_wqe_completed)
        .ou64(c.num_wqe_sampled);
    t.u64(c.num_cts_sent)
        .u64(c.num_cts_sent_signalled)
        .u64(c.num_cts_sent_unsignalled)
        .u64(c.num_slot_miss);
    t.u64(c.num_write_wqe)
        .u64(c.num_write_imm_wqe)
        .avail(c.wqe_completion_ns_min)
        .avail(c.wqe_completion_ns_max);
}

fn channels(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                r.ids(t);
                t.i32(d.device_id as i64).ou64(c.id).i32(i as i64);
                counters(t, &c.counters);
                t.u64(c.num_req_completed)
                    .u64(c.num_data_qp)
                    .u64(c.num_cts_qp)
                    .u64(c.num_qp_untracked)
                    .i32(c.queue_pairs.len() as i64);
                t.end_row();
            }
        }
    }
}

fn qps(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                for q in &c.queue_pairs {
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .ou64(c.id)
                        .i32(i as i64)
                        .u64(q.id)
                        .os(q.role.as_deref());
                    counters(t, &q.counters);
                    t.end_row();
                }
            }
        }
    }
}

fn category(name: &str) -> &'static str {
    // The snake_case names of hwclass::Category (as summary --json writes them).
    match classify(name) {
        crate::hwclass::Category::Traffic => "traffic",
        crate::hwclass::Category::Cnp => "cnp",
        crate::hwclass::Category::Ecn => "ecn",
        crate::hwclass::Category::Pfc => "pfc",
        crate::hwclass::Category::Retransmit => "retransmit",
        crate::hwclass::Category::OutOfSequence => "out_of_sequence",
        crate::hwclass::Category::Drop => "drop",
        crate::hwclass::Category::Error => "error",
        crate::hwclass::Category::Other => "other",
    }
}

fn hw_counters(group: &[Rank<'_>], t: &mut Table) {
    use crate::model::HwValue;
    for r in group {
        for d in &r.f().devices {
            for (name, v) in &d.hw_counters {
                let vals: Vec<(Option<i64>, i64)> = match v {
                    HwValue::Scalar(x) => vec![(None, *x)],
                    HwValue::PerPrio(a) => a
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (Some(i as i64), *x))
                        .collect(),
                };
                for (prio, x) in vals {
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .s(&d.roce_device)
                        .s(name)
                        .s(category(name))
                        .oi32(prio)
                        .avail(x);
                    t.end_row();
                }
            }
        }
    }
}

fn device_name(f: &TelemetryFile, id: u32) -> &str {
    f.devices
        .iter()
        .find(|d| d.device_id == id)
        .map_or("", |d| d.roce_device.as_str())
}

fn hw_samples(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        for s in f.hw_samples.iter().flatten() {
            let wall = f.format.has_wall_clock().then_some(s.timestamp_ns as i128);
            for (name, v) in &s.counters {
                r.ids(t);
                t.i32(s.device_id as i64)
                    .s(device_name(f, s.device_id))
                    .ts(wall)
                    .u64(s.timestamp_ns)
                    .s(name)
                    .s(category(name))
                    .avail(*v);
                t.end_row();
            }
        }
    }
}

/// Where a histogram belongs: (channel id, channel index, qp) or none of them for the device.
type HistAt = (Option<u64>, Option<usize>, Option<u64>);

fn linear_rows(t: &mut Table, r: &Rank<'_>, d: &Device, at: HistAt, level: &str, h: &[u64]) {
    let w = r.f().histogram_interval_ns;
    for (b, n) in h.iter().enumerate().filter(|(_, n)| **n > 0) {
        let open = b + 1 == h.len();
        r.ids(t);
        t.i32(d.device_id as i64)
            .ou64(at.0)
            .oi32(at.1.map(|i| i as i64))
            .ou64(at.2)
            .s(level)
            .s("linear")
            .i32(b as i64);
        t.u64((b as u64).saturating_mul(w))
            .ou64((!open).then(|| (b as u64 + 1).saturating_mul(w)))
            .u64(*n);
        t.end_row();
    }
}

fn log_rows(
    t: &mut Table,
    r: &Rank<'_>,
    d: &Device,
    at: HistAt,
    level: &str,
    h: &[crate::model::LogBucket],
) {
    for (b, (lo, hi, n)) in h.iter().enumerate() {
        r.ids(t);
        t.i32(d.device_id as i64)
            .ou64(at.0)
            .oi32(at.1.map(|i| i as i64))
            .ou64(at.2)
            .s(level)
            .s("log")
            .i32(b as i64);
        t.u64(*lo).ou64(hi.map(|h| h.saturating_add(1))).u64(*n);
        t.end_row();
    }
}

fn histograms(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            linear_rows(t, r, d, (None, None, None), "device", &d.histogram());
            if let Some(h) = d.log_histogram() {
                log_rows(t, r, d, (None, None, None), "device", &h);
            }
            for (i, c) in d.channels.iter().enumerate() {
                linear_rows(
                    t,
                    r,
                    d,
                    (c.id, Some(i), None),
                    "channel",
                    &c.counters.wqe_completion_histogram,
                );
                if let Some(h) = &c.wqe_completion_log_histogram {
                    log_rows(t, r, d, (c.id, Some(i), None), "channel", h);
                }
                for q in &c.queue_pairs {
                    linear_rows(
                        t,
                        r,
                        d,
                        (c.id, Some(i), Some(q.id)),
                        "qp",
                        &q.counters.wqe_completion_histogram,
                    );
                }
            }
        }
    }
}

fn links(group: &[(&str, &Link)], t: &mut Table) {
    let pids = |p: &[i64]| {
        p.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for (job, l) in group {
        t.i32(SCHEMA_VERSION as i64).s(job).s(&l.src.host);
        t.i32(l.src.device_id as i64)
            .s(&l.src.device)
            .s(&pids(&l.src.pids))
            .os(l.src.gid.as_deref())
            .ou64(l.src.lid);
        t.s(&l.dst.host)
            .i32(l.dst.device_id as i64)
            .s(&l.dst.device)
            .s(&pids(&l.dst.pids))
            .os(l.dst.gid.as_deref())
            .ou64(l.dst.lid);
        t.u64(l.qps)
            .u64(l.wrs_sent)
            .u64(l.wrs_completed)
            .u64(l.wrs_received_by_dst)
            .u64(l.tx_bytes_est);
        let lat = l.latency.as_ref();
        t.os(lat.map(|x| x.source)).ou64(lat.map(|x| x.samples));
        t.f64(lat.and_then(|x| x.p50_ns))
            .f64(lat.and_then(|x| x.p90_ns))
            .f64(lat.and_then(|x| x.p99_ns));
        t.ob(lat.map(|x| x.p99_open))
            .oi64(lat.and_then(|x| x.max_ns));
        t.ou64(l.retired_unsignalled)
            .ou64(l.wrs_outstanding)
            .ou64(l.qps_stalled)
            .ou64(l.longest_stall_ms);
        t.end_row();
    }
}

/// The QPs stalled when the file was written, or that had a stall that ended (version 3 with
/// stall detection on).
fn stalls(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                for q in &c.queue_pairs {
                    if q.stalled != Some(true) && q.longest_stall_ms.unwrap_or(0) == 0 {
                        continue;
                    }
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .s(&d.roce_device)
                        .ou64(c.id)
                        .i32(i as i64)
                        .u64(q.id)
                        .ou64(q.qp_num);
                    let peer = q.peer.as_ref();
                    t.os(peer.and_then(|p| p.gid.as_deref()))
                        .ou64(peer.and_then(|p| p.lid))
                        .ou64(peer.map(|p| p.qp_num));
                    t.ob(q.stalled)
                        .ts(q.stalled_since.as_deref().and_then(|s| r.wall_ns(s)));
                    t.ou64(q.num_wqe_outstanding)
                        .ou64(q.oldest_outstanding_ms)
                        .ou64(q.longest_stall_ms);
                    t.ts(q.longest_stall_start.as_deref().and_then(|s| r.wall_ns(s)));
                    t.end_row();
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs, partitions, files

/// The columns `--partition` can split the dataset by.
pub const PARTITION_KEYS: &[&str] = &["job", "host"];

/// The job a rank file belongs to: the name of the directory holding it.
pub fn job_of(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    abs.parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// A value as a hive directory name's right-hand side: letters, digits, '.', '_' and '-' as
/// they are, any other byte as %XX (as Hive and Spark escape partition values).
pub fn hive_escape(s: &str) -> String {
    if s.is_empty() {
        return "__HIVE_DEFAULT_PARTITION__".into();
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What `export --format parquet` was asked for.
pub struct Options {
    pub dir: PathBuf,
    /// The job of every file (default: each file's directory name).
    pub job: Option<String>,
    /// Partition keys, in directory order (a subset of [`PARTITION_KEYS`]).
    pub partition: Vec<String>,
}

/// What was written.
#[derive(Debug, Default)]
pub struct Written {
    pub files: Vec<PathBuf>,
    /// Rows per table, summed over the partitions.
    pub rows: BTreeMap<&'static str, usize>,
}

/// Writes the tables. Without partitions: DIR/<table>.parquet. With `--partition job,host`:
/// DIR/<table>/job=<job>/host=<host>/<table>.parquet, so each table is a hive-partitioned
/// dataset of its own (what Spark, Trino and DuckDB expect) and several jobs exported into one
/// DIR form one dataset; exporting a job again replaces its files.
pub fn write(run: &Run, o: &Options) -> Result<Written, String> {
    let files = &run.files;
    let mut keys: Vec<&'static str> = Vec::new();
    for p in &o.partition {
        let Some(k) = PARTITION_KEYS.iter().find(|k| **k == p.as_str()) else {
            return Err(format!(
                "--partition {p}: not a partition key (use job, host or job,host)"
            ));
        };
        if keys.contains(k) {
            return Err(format!("--partition names {p} twice"));
        }
        keys.push(k);
    }
    if o.dir.exists() && !o.dir.is_dir() {
        return Err(format!("{} exists and is not a directory", o.dir.display()));
    }
    let jobs: Vec<String> = files
        .iter()
        .map(|l| o.job.clone().unwrap_or_else(|| job_of(&l.path)))
        .collect();
    // The links of each job: QPs are joined within a job, never across jobs.
    let job_names: std::collections::BTreeSet<&String> = jobs.iter().collect();
    let reports: BTreeMap<&String, crate::links::LinkReport> = if job_names.len() <= 1 {
        job_names
            .iter()
            .map(|j| (*j, crate::links::join(run)))
            .collect()
    } else {
        job_names
            .iter()
            .map(|j| {
                let files: Vec<Loaded> = files
                    .iter()
                    .zip(&jobs)
                    .filter(|(_, jj)| jj == j)
                    .map(|(l, _)| l.clone())
                    .collect();
                (
                    *j,
                    crate::links::join(&Run {
                        files,
                        bad: Vec::new(),
                        found: 0,
                    }),
                )
            })
            .collect()
    };
    let key_of = |job: &String, host: &String| -> Vec<String> {
        keys.iter()
            .map(|k| {
                if *k == "job" {
                    job.clone()
                } else {
                    host.clone()
                }
            })
            .collect()
    };
    // Group the files by their partition values (one group without partitions).
    let mut groups: BTreeMap<Vec<String>, Group<'_>> = BTreeMap::new();
    for (l, job) in files.iter().zip(&jobs) {
        let rank_file = l.path.file_name().map_or_else(
            || l.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        groups
            .entry(key_of(job, &l.file.host_name))
            .or_default()
            .ranks
            .push(Rank {
                job,
                rank_file,
                loaded: l,
            });
    }
    for (job, rep) in &reports {
        for link in &rep.links {
            // A link goes with its sending host's files.
            groups
                .entry(key_of(job, &link.src.host))
                .or_default()
                .links
                .push((job.as_str(), link));
        }
    }
    if groups.is_empty() && keys.is_empty() {
        // No rank file: the tables still get written, empty, with their schema.
        groups.insert(Vec::new(), Group::default());
    }
    let tasks: Vec<(&Vec<String>, &Group<'_>, &(&str, Builder))> = groups
        .iter()
        .flat_map(|(k, g)| TABLES.iter().map(move |t| (k, g, t)))
        .collect();
    let results: Vec<Result<(PathBuf, &'static str, usize), String>> = tasks
        .par_iter()
        .map(|(key, group, (name, build))| {
            let path = if keys.is_empty() {
                o.dir.join(format!("{name}.parquet"))
            } else {
                let mut d = o.dir.join(name);
                for (k, v) in keys.iter().zip(key.iter()) {
                    d.push(format!("{k}={}", hive_escape(v)));
                }
                d.join(format!("{name}.parquet"))
            };
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let mut table = Table::create(name, columns(name), &path, &keys)?;
            build(group, &mut table);
            let rows = table.finish()?;
            Ok((path, *name, rows))
        })
        .collect();
    let mut w = Written::default();
    for r in results {
        let (p, name, rows) = r?;
        w.files.push(p);
        *w.rows.entry(name).or_default() += rows;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_the_identifiers_first_and_unique_names() {
        for (name, _) in TABLES {
            let cols = columns(name);
            let ids = if *name == "links" { LINK_IDS } else { IDS };
            assert!(cols.len() > ids.len(), "{name}");
            for (c, id) in cols.iter().zip(ids) {
                assert_eq!(c.name, id.name, "{name}");
            }
            let mut names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            names.sort();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "{name} repeats a column");
        }
    }

    #[test]
    fn hive_values_escape_what_a_path_cannot_hold() {
        assert_eq!(hive_escape("node-01.cluster_a"), "node-01.cluster_a");
        assert_eq!(hive_escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(hive_escape(""), "__HIVE_DEFAULT_PARTITION__");
    }

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

    #[test]
    fn bad_partition_keys_are_refused() {
        let dir = std::env::temp_dir().join("rccl-telemetry-parquet-unit");
        for p in [vec!["rank".to_string()], vec!["job".into(), "job".into()]] {
            let o = Options {
                dir: dir.clone(),
                job: None,
                partition: p,
            };
            assert!(write(&Run::default(), &o).is_err());
        }
    }
}
