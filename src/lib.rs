//! librccl_telemetry: per device / channel / QP network telemetry for RCCL's IB-CAST transport.
pub mod hw;
