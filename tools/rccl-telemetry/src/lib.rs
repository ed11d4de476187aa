//! rccl-telemetry, the analysis tool: reads a directory (or files, or globs) of
//! rccl_telemetry_*.json files written by librccl_telemetry and turns them into answers.
//!
//! The binary's subcommands are thin wrappers around these modules; the library target exists
//! so the tests (and the fuzzing) can call the parser and the analyses directly.

pub mod check;
pub mod completeness;
pub mod export;
pub mod generate;
pub mod hwclass;
pub mod intree;
pub mod jobs;
pub mod layout;
pub mod links;
pub mod load;
pub mod model;
pub mod outliers;
pub mod parquet_export;
pub mod plain;
pub mod promgc;
/// The Prometheus families and their renderer: the format crate's, which the library's live
/// textfile renders with too, so the export and the textfile cannot drift.
pub use rccl_telemetry_format::promtext;
pub mod report;
pub mod stalls;
pub mod stats;
pub mod summary;
pub mod verdict_bench;
pub mod waitfor;
