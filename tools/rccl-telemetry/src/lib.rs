//! rccl-telemetry, the analysis tool: reads a directory (or files, or globs) of
//! rccl_telemetry_*.json files written by librccl_telemetry and turns them into answers.
//!
//! The binary's subcommands are thin wrappers around these modules; the library target exists
//! so the tests (and the fuzzing) can call the parser and the analyses directly.

pub mod check;
pub mod export;
pub mod generate;
pub mod hwclass;
pub mod intree;
pub mod layout;
pub mod links;
pub mod load;
pub mod model;
pub mod outliers;
pub mod parquet_export;
pub mod plain;
pub mod promgc;
/// The Prometheus families and their renderer: the library's own files (`src/promtext/`),
/// compiled here too, so the export and the library's live textfile cannot drift.
#[path = "../../../src/promtext/mod.rs"]
pub mod promtext;
pub mod report;
pub mod stalls;
pub mod stats;
pub mod summary;
pub mod waitfor;
