//! librccl_telemetry_preload.so on the host, over the fake libibverbs.so.1
//! (c_tests/preload/fake_verbs_*.c): the scenarios of c_tests/preload/verbs_app*.c, run with
//! the program linked against libibverbs and loading it the way NCCL's ibvwrap does
//! (dlopen + dlvsym), each file validated against the schema and checked for exact counts.
//! `make test` builds the programs (`make preload preload-test-bins`) before running this.
//!
//! One test binary (`interposer`), its scenarios split by concern: cq_errors (every error
//! status, per QP), data_path (posts,
//! completions, SRQ), ex_wrappers (ibv_qp_ex/ibv_cq_ex), fork, lifecycle (destroy, reopen,
//! churn), loading (disabled, static, dlsym), peers (modify_qp), stalls; common holds the
//! runner and the assertions they share.

#[path = "../../../rust_tests/skip.rs"]
mod skip;

mod common;

mod cq_errors;
mod data_path;
mod ex_wrappers;
mod fork;
mod lifecycle;
mod loading;
mod peers;
mod stalls;
