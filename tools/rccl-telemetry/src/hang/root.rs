//! What the hang analysis names: the roots of a hang and what the graph says about a run.

use serde::Serialize;
use std::collections::BTreeMap;

/// One root of a hang, as `stalls --json` lists it under `roots`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Root {
    /// "rank": waited on, waits on nobody; "cycle": ranks waiting on each other and on nobody
    /// else; "quiet_end": the end common to the links that went quiet first; "quiet_link":
    /// the one link that went quiet first (either end).
    pub kind: &'static str,
    /// "host:pid" of each rank (empty for a peer that is in no file).
    pub ranks: Vec<String>,
    /// "host:device" of its NICs others wait on (or of the quiet links' ends); a NIC in no file
    /// by its address: "gid ... (not in the files)".
    pub nics: Vec<String>,
    /// False when no file of the run is this rank's (frozen, killed, or not collected).
    pub in_files: bool,
    /// QPs waiting on it (towards it, or inside the cycle), and on how many ranks.
    pub waiting_qps: u64,
    pub waiting_ranks: u64,
    pub stalled_qps: u64,
    pub errored_qps: u64,
    /// Ranks that wait on it directly or through others (members of a cycle not counted).
    pub blocked_ranks: u64,
    /// The earliest stall start or first error among those QPs; for the quiet rule, when the
    /// first links went quiet.
    pub since: Option<String>,
    /// Error completions of the waiting QPs by status.
    pub errors_by_status: BTreeMap<String, u64>,
    /// The earliest first error: "STATUS at TIME on host:device QP n".
    pub first_error: Option<String>,
    /// Quiet rule: the links that went quiet first ("a <-> b").
    pub quiet_links: Vec<String>,
    /// The evidence in one sentence.
    pub evidence: String,
}

/// What the graph says about a run.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Hang {
    /// "wait_for" (stalled or errored QPs), "quiet" (last-progress times) or "none".
    pub basis: &'static str,
    /// Ranks read (their latest file) and those with a QP waiting on another.
    pub ranks: usize,
    pub waiting_ranks: usize,
    pub stalled_qps: u64,
    pub errored_qps: u64,
    /// Stalled or errored QPs whose peer could not be resolved (no peer, ambiguous claim).
    pub unresolved_qps: u64,
    pub edges: usize,
    pub roots: Vec<Root>,
    /// Why no root is named, when none is.
    pub no_root: Option<String>,
    /// For each root (same order), the ranks ("host:pid") waiting on it directly or through
    /// others: the outliers fold their stalled and errored QPs into the root's row. Not in the
    /// JSON.
    #[serde(skip)]
    pub behind: Vec<Vec<String>>,
}
