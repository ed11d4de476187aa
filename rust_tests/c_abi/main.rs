//! The library driven through its C ABI by c_tests/ibcast_sim.c, an IB-CAST-shaped
//! simulation that keeps its own tally: every value in the file is checked against it.
//!
//! One test binary (`c_abi`), its tests split by concern: counts (every counter against the
//! tally), inline (the header's hooks against the library), config, failures, key_order,
//! modes (the header's stubs and its loader against a linked build);
//! sim runs the simulation and checks a file against its tally for all of them.

#[path = "../common/mod.rs"]
mod common;

mod sim;

mod config;
mod counts;
mod failures;
mod inline;
mod key_order;
mod modes;
