//! Prometheus text exposition (format 0.0.4): the one definition of every metric family
//! (name, type, help text, labels) and the one renderer, shared by the library's live
//! textfile (`RCCL_TELEMETRY_PROMETHEUS_DIR`) and the tool's
//! `rccl-telemetry export --format prometheus`, which both depend on this crate, so the two
//! cannot drift.
//!
//! Plain data in, text out: std only, and of the rest of the crate only the counter table
//! (`crate::counters`), whose rows name the families of the software counters. Each side
//! converts what it has (the library its live slots, the tool a parsed JSON file) into
//! [`Rank`]s.
//!
//! Conventions: every series carries the rank's identity (`host`, `pid`, and `rank` when the
//! launcher told it); device series add `device` and `hw_type`; channel series add `channel`,
//! QP series `channel`, `qp` and `role`. Device, channel and QP series are separate families
//! (`rccl_telemetry_*`, `rccl_telemetry_channel_*`, `rccl_telemetry_qp_*`) so that a `sum()`
//! over one family never counts a WQE twice. Hardware counters are deltas since the rank's
//! first use of the device; a counter the NIC does not expose (-1 in the JSON file) has no
//! sample, and `rccl_telemetry_hw_available` says which are there. Devices the rank
//! never drove are left out. Times are seconds, sizes bytes.
//!
//! One concern per file: `families` (the table of every family: name, type, help, labels),
//! `names` (metric names and base units of hardware counters), `syntax` (escaping, sample
//! lines), `data` (what each side converts into), `render` (the software counters and
//! histograms at each scope), `hardware` (the NICs' counters), `stalls` (stall detection's
//! families), `errors` (error completions by status, per device and per errored QP).
//! Everything public is re-exported here, so callers write `promtext::X`.
//! Every file of this directory keeps to the rule above: `super::` paths only, and
//! `crate::counters`, the counter table whose rows name their families.

mod data;
mod errors;
mod families;
#[cfg(test)]
mod fixtures;
mod hardware;
mod names;
mod render;
mod stalls;
mod syntax;

pub use data::*;
pub use errors::*;
pub use families::*;
pub use names::*;
pub use render::render;
pub use stalls::*;
pub use syntax::{prom_f64, write_simple};
