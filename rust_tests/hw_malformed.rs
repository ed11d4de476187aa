//! Property tests: malformed sysfs attributes and odd ethtool answers never panic, never
//! produce a negative value other than -1, and never turn "unreadable" into a number.

#[path = "fixtures/hw_tree.rs"]
mod hw_tree;

use hw_tree::Tree;
use proptest::prelude::*;
use rccl_telemetry::hw::{self, HwDevice, HwValue};

fn strict(text: &str) -> Option<u64> {
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        None
    } else {
        t.parse().ok()
    }
}

fn attr() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|v| format!("{v}\n")),
        Just("N/A (no PMA)\n".to_owned()),
        Just(String::new()),
        Just("-5\n".to_owned()),
        Just("18446744073709551616\n".to_owned()),
        "[0-9a-zA-Z \\n\\t\\-+.]{0,24}",
        proptest::collection::vec(any::<u8>(), 0..32)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

fn scalar(r: &[(&'static str, HwValue)], k: &str) -> i64 {
    match r.iter().find(|(n, _)| *n == k).unwrap().1 {
        HwValue::Scalar(v) => v,
        HwValue::PerPrio(_) => panic!("{k} is not scalar"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn malformed_rxe_counters(base in attr(), fin in attr(), other_b in attr(), other_f in attr()) {
        let t = Tree::new();
        t.rxe_ibdev("rxe0", "eth0");
        t.hw_text("rxe0", "sent_pkts", &base);
        t.hw_text("rxe0", "rcvd_pkts", &other_b);
        let dev: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(0, "rxe0", &t.settings())));
        dev.take_baseline();
        t.hw_text("rxe0", "sent_pkts", &fin);
        t.hw_text("rxe0", "rcvd_pkts", &other_f);
        let r = dev.final_report();
        prop_assert_eq!(r.len(), hw::vocabulary().len());
        for (_, v) in &r {
            match v {
                HwValue::Scalar(x) => prop_assert!(*x >= -1),
                HwValue::PerPrio(a) => prop_assert!(a.iter().all(|x| *x >= -1)),
            }
        }
        let want = match (strict(&base), strict(&fin)) {
            (Some(b), Some(f)) if f >= b => i64::try_from(f - b).unwrap_or(i64::MAX),
            _ => -1,
        };
        prop_assert_eq!(scalar(&r, "delta_tx_packets"), want);
    }

    #[test]
    fn odd_ethtool_answers(names in proptest::collection::vec("[a-z_ ]{0,12}", 0..20),
                           vals in proptest::collection::vec(any::<u64>(), 0..20),
                           b in any::<u32>(), f in any::<u32>()) {
        let t = Tree::new();
        let nd = "fxodd0";
        t.pci_ibdev("mlx5_9", "mlx5_core", "0000:aa:00.0", nd);
        let mut stats: Vec<(String, u64)> = names.into_iter().zip(vals).collect();
        // The counter under test, duplicated later in the list with another value, and
        // printed with a trailing space: the first occurrence wins, by name.
        stats.insert(0, ("rx_discards_phy ".to_owned(), u64::from(b)));
        stats.push(("rx_discards_phy".to_owned(), 7));
        hw::testing::set_fake_ethtool(nd, Some(stats.clone()));
        let dev: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(0, "mlx5_9", &t.settings())));
        dev.take_baseline();
        stats[0].1 = u64::from(f);
        hw::testing::set_fake_ethtool(nd, Some(stats));
        let r = dev.final_report();
        hw::testing::set_fake_ethtool(nd, None);
        let want = if f >= b { i64::from(f - b) } else { -1 };
        prop_assert_eq!(scalar(&r, "port_rx_discards"), want);
        for (_, v) in &r {
            if let HwValue::Scalar(x) = v { prop_assert!(*x >= -1); }
        }
    }
}
