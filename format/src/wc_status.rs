//! `enum ibv_wc_status` as the file and the textfile name it: the enum's names without their
//! `IBV_WC_` prefix, by value, and the order both list statuses in (the enum's).

/// `enum ibv_wc_status` without its `IBV_WC_` prefix, by value (`<infiniband/verbs.h>`).
/// What every status name matches (the enum's names and `UNKNOWN_<n>`).
pub const STATUS_NAME_PATTERN: &str = "^[A-Z0-9_-]+$";

pub const STATUS_NAMES: [&str; 24] = [
    "SUCCESS",
    "LOC_LEN_ERR",
    "LOC_QP_OP_ERR",
    "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",
    "WR_FLUSH_ERR",
    "MW_BIND_ERR",
    "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",
    "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR",
    "REM_OP_ERR",
    "RETRY_EXC_ERR",
    "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",
    "INV_EECN_ERR",
    "INV_EEC_STATE_ERR",
    "FATAL_ERR",
    "RESP_TIMEOUT_ERR",
    "GENERAL_ERR",
    "TM_ERR",
    "TM_RNDV_INCOMPLETE",
];

/// The name of a status value: the enum's name, or `UNKNOWN_<n>` for a value it lacks.
pub fn status_name(status: i32) -> String {
    usize::try_from(status)
        .ok()
        .and_then(|i| STATUS_NAMES.get(i))
        .map_or_else(|| format!("UNKNOWN_{status}"), |n| (*n).to_owned())
}

/// Where a status name sorts: the enum's order, names it lacks (`UNKNOWN_<n>`, or a newer
/// writer's) after every known one, by name.
pub fn order_key(name: &str) -> (usize, &str) {
    let at = STATUS_NAMES.iter().position(|n| *n == name);
    (at.unwrap_or(STATUS_NAMES.len()), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_enum_and_sort_in_its_order() {
        assert_eq!(status_name(12), "RETRY_EXC_ERR");
        assert_eq!(status_name(24), "UNKNOWN_24");
        let mut v = vec!["WR_FLUSH_ERR", "UNKNOWN_99", "RETRY_EXC_ERR", "LOC_LEN_ERR"];
        v.sort_by_key(|n| order_key(n));
        assert_eq!(
            v,
            ["LOC_LEN_ERR", "WR_FLUSH_ERR", "RETRY_EXC_ERR", "UNKNOWN_99"]
        );
    }
}
