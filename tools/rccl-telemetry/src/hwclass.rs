//! Classifies hardware-counter names by pattern, not by a fixed list, so a change in the
//! library's vocabulary does not break the tool.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// delta_tx_bytes, delta_rx_packets ...: traffic volume, not a problem indicator.
    Traffic,
    Cnp,
    Ecn,
    Pfc,
    Retransmit,
    OutOfSequence,
    Drop,
    Error,
    Other,
}

impl Category {
    pub fn label(self) -> &'static str {
        match self {
            Category::Traffic => "traffic",
            Category::Cnp => "CNP",
            Category::Ecn => "ECN",
            Category::Pfc => "PFC pause",
            Category::Retransmit => "retransmit",
            Category::OutOfSequence => "out-of-sequence",
            Category::Drop => "drop",
            Category::Error => "error",
            Category::Other => "other",
        }
    }

    /// Categories whose counters indicate congestion or loss: more is worse.
    pub fn is_problem(self) -> bool {
        !matches!(self, Category::Traffic | Category::Other)
    }
}

/// The category of a counter name (case-insensitive, first matching rule wins).
pub fn classify(name: &str) -> Category {
    let n = name.to_ascii_lowercase();
    let has = |p: &str| n.contains(p);
    // Short stems match only at the start of a '_'-separated word: "ack_deferred" holds "err"
    // but is no error; a duplicate is "dup"/"dups"/"duplicate*", never "duplex".
    let word = |p: &str| n.split('_').any(|t| t.starts_with(p));
    if has("cnp") {
        Category::Cnp
    } else if has("ecn") || has("congestion_mark") || has("ce_mark") {
        Category::Ecn
    } else if has("pfc") || has("pause") {
        Category::Pfc
    } else if has("retrans")
        || has("retry")
        || has("timeout")
        || has("rnr_nak")
        || word("duplicate")
        || n.split('_').any(|t| t == "dup" || t == "dups")
    {
        Category::Retransmit
    } else if has("seq") {
        Category::OutOfSequence
    } else if has("discard")
        || has("drop")
        || has("out_of_buffer")
        || has("out_of_buf")
        || has("no_buf")
    {
        Category::Drop
    } else if word("err") || word("fail") || word("invalid") || word("bad") || has("link_down") {
        Category::Error
    } else if has("bytes") || has("packets") || has("pkts") || has("octets") || has("frames") {
        Category::Traffic
    } else {
        Category::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_usual_vocabulary() {
        assert_eq!(classify("cnp_sent"), Category::Cnp);
        assert_eq!(classify("np_cnp_sent"), Category::Cnp);
        assert_eq!(classify("rp_cnp_handled"), Category::Cnp);
        assert_eq!(classify("ecn_marked_pkts"), Category::Ecn);
        assert_eq!(classify("np_ecn_marked_roce_packets"), Category::Ecn);
        assert_eq!(classify("pfc_rx_pause_prio"), Category::Pfc);
        assert_eq!(classify("rx_pause_ctrl_phy"), Category::Pfc);
        assert_eq!(classify("local_ack_timeout_err"), Category::Retransmit);
        assert_eq!(classify("retry_exceeded"), Category::Retransmit);
        assert_eq!(classify("packet_seq_err"), Category::OutOfSequence);
        assert_eq!(classify("out_of_sequence"), Category::OutOfSequence);
        assert_eq!(classify("out_of_buffer"), Category::Drop);
        assert_eq!(classify("rx_discards_phy"), Category::Drop);
        assert_eq!(classify("rx_icrc_encapsulated"), Category::Other);
        assert_eq!(classify("req_remote_access_errors"), Category::Error);
        assert_eq!(classify("delta_tx_bytes"), Category::Traffic);
        assert_eq!(classify("delta_rx_packets"), Category::Traffic);
        // The library's canonical vocabulary (src/hw/README.md).
        assert_eq!(classify("port_rx_bytes"), Category::Traffic);
        assert_eq!(classify("retransmitted_pkts"), Category::Retransmit);
        assert_eq!(classify("duplicate_request"), Category::Retransmit);
        assert_eq!(classify("implied_nak_seq_err"), Category::OutOfSequence);
        assert_eq!(classify("rx_roce_discards"), Category::Drop);
        assert_eq!(classify("port_rx_discards"), Category::Drop);
        assert_eq!(classify("pfc_rx_frames_total"), Category::Pfc);
        assert_eq!(classify("pfc_tx_pause_duration_us"), Category::Pfc);
        assert_eq!(classify("pause_storm_events"), Category::Pfc);
        assert_eq!(classify("link_down_events"), Category::Error);
        assert_eq!(classify("rx_fcs_errors"), Category::Error);
        assert_eq!(classify("tx_roce_errors"), Category::Error);
        assert_eq!(classify("rdma_sends"), Category::Other);
        assert_eq!(classify("ack_deferred"), Category::Other);
        assert_eq!(classify("half_duplex_frames"), Category::Traffic);
        assert_eq!(classify("res_cmp_err"), Category::Error);
        assert_eq!(classify("req_cqe_error"), Category::Error);
    }
}
