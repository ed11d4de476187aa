//! rccl-telemetry, the analysis tool: reads a directory (or files, or globs) of
//! rccl_telemetry_*.json files written by librccl_telemetry and turns them into answers.
//!
//! The binary's subcommands are thin wrappers around these modules; the library target exists
//! so the tests (and the fuzzing) can call the parser and the analyses directly. The modules
//! fall in four groups: input (reading and checking the files, and the [`context::RunContext`]
//! of one run), analyses, outputs, and synthetic runs.

// Input: finding and reading the files (ours of every version, the in-tree engine's, those
// `import` rebuilds from NCCL/RCCL debug logs), checking them, and the run-level context every
// analysing command takes.
pub mod check;
pub mod completeness;
pub mod context;
pub mod import;
pub mod intree;
pub mod jobs;
pub mod load;
pub mod model;

// Analyses: what the commands compute from a run.
pub mod hang;
pub mod hwclass;
pub mod links;
pub mod outliers;
pub mod stalls;
pub mod stats;
pub mod summary;

// Outputs: the terminal tables, the exports, the report, the textfile cleaner.
pub mod export;
pub mod layout;
pub mod plain;
pub mod promgc;
/// The Prometheus families and their renderer: the format crate's, which the library's live
/// textfile renders with too, so the export and the textfile cannot drift.
pub use rccl_telemetry_format::promtext;
pub mod report;

// Synthetic: generated runs with planted anomalies, and the bench that scores the verdicts
// on them.
pub mod generate;
pub mod verdict_bench;
