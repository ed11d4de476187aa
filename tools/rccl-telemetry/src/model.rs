//! The per-rank file as typed data: the format crate's reader model
//! (`rccl_telemetry_format::read`, versions 1 to 5, lenient where the format may grow),
//! under the name the tool's modules use. The in-tree engine's files are mapped onto it by
//! `intree`.

pub use rccl_telemetry_format::read::*;
