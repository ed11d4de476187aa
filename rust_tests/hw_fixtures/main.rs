//! Hardware counters through the public API against fixture sysfs trees, one per driver
//! family (mlx5, thor2 in each bnxt_re naming generation, ainic, rxe), built from the real
//! raw names. Every raw counter changes between the baseline and the flush by its own
//! amount, so each expected delta below names the raw counter it must come from.
//!
//! One test binary (`hw_fixtures`), a module per driver family (mlx5, thor2, ainic, rxe),
//! reading (what is read and when, whatever the driver) and port_qos (the port's active MTU
//! and DCB settings); rig holds the fixture rig and
//! the report check they share. The vocabulary's tables in the docs are generated and
//! checked by the format crate (format/tests/contract/).

#[path = "../fixtures/hw_tree.rs"]
mod hw_tree;

mod rig;

mod ainic;
mod mlx5;
mod port_qos;
mod reading;
mod rxe;
mod thor2;
