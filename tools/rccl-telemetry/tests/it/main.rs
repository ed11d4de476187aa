//! The tool's integration tests, in one binary so the release profile links once.

mod common;

mod bad_input;
mod check_violations;
mod communicators;
mod counter_table;
mod demo_job;
mod export_formats;
mod export_versions;
mod finalized_runs;
mod fleet_scale;
mod fuzz;
mod generated_docs;
mod generated_runs;
mod hang_roots;
mod import_logs;
mod intree_files;
mod library_files;
mod links_fabric;
mod mixed_formats;
mod parquet_export;
mod prom_gc_units;
mod prom_shared;
mod pruned_reads;
mod qp_lint;
mod report_axes;
mod report_layout;
mod report_log_axis;
mod report_render;
mod report_scale;
mod run_completeness;
mod stalls_cmd;
mod terminal_tables;
mod verdict;
mod wqe_monitor_keys;
