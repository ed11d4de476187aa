//! `links`: joins every QP to its peer's QP in another file of the run, by the peer's (GID, QPN)
//! against the QP's own (GID, QPN) (format version 3; GIDs compared as 128-bit addresses, so
//! `::ffff:10.1.0.1` meets its 8-group form; by LID where the GID finds no QP, a QP's LID being
//! its own port's), and folds the matched QPs into links: ordered pairs of NICs (host and
//! device on each side). The addresses are `load::addr`, the join `links::join`.
//!
//! A link `A -> B` carries the QPs of NIC A whose peer QP is on NIC B: the WRs A posted on them,
//! what B's matched QPs received, and the completion latency seen at A (the sending side). The
//! latency comes from A's per-peer log-scale histogram (`peers[].wqe_completion_log_histogram`,
//! relative error <= 1/8) when the file has one, else from the link's QPs' linear histograms
//! (error one bucket width). Bytes per link are not in the format (it counts bytes per device):
//! `tx_bytes_est` shares the device's tx_bytes out by the link's part of its sent WRs, and says so.
//! A QP whose peer is in no file is counted as unmatched (grouped by its NIC and the remote
//! NIC); a QP whose peer identity is claimed by two QPs is joined to the one whose own peer
//! names it back (subnets that repeat a LID), and is ambiguous, joined to neither, when not one.
//!
//! What the join finds is a [`LinkReport`] (`links::report`); the table for people is printed by
//! `links::text`.

mod join;
pub mod matrix;
mod report;
pub mod text;

pub use join::join;
pub use matrix::LinkMatrix;
pub use report::{Ambiguous, End, Link, LinkLatency, LinkReport, Nic, Unmatched};
pub use text::render_text;
