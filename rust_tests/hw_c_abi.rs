//! Hardware counters end to end through the C ABI: c_tests/ibcast_sim.c registers mlx5_0
//! and mlx5_1, RCCL_TELEMETRY_SYSFS_ROOT points at a fixture tree for them, and the file
//! it writes must satisfy the schema with the full vocabulary under hw_counters.

mod common;
#[path = "fixtures/hw_tree.rs"]
mod hw_tree;

use common::{ibcast_sim, load_valid, run, stderr, telemetry_files};
use hw_tree::{names, Tree};
use rccl_telemetry::hw;
use serde_json::Value;

fn fixture() -> Tree {
    let t = Tree::new();
    for (i, ib) in ["mlx5_0", "mlx5_1"].iter().enumerate() {
        let nd = format!("nohostnet{i}");
        t.pci_ibdev(ib, "mlx5_core", &format!("0000:17:00.{i}"), &nd);
        t.gid_ndev(ib, 1, 0, &nd);
        for n in names("mlx5_ib_hw_counters") {
            t.hw(ib, &n, 1000);
        }
        for n in names("mlx5_ib_counters") {
            t.pma(ib, &n, 50);
        }
    }
    t
}

/// Runs ibcast_sim on two devices against the fixture tree, telemetry on, with `extra` env;
/// returns the output directory (holding the file) and the run's output.
fn run_on_fixture(t: &Tree, extra: &[(&str, &str)]) -> (tempfile::TempDir, std::process::Output) {
    let out = tempfile::tempdir().unwrap();
    let tally = out.path().join("tally.json");
    let mut env = vec![
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", out.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_SYSFS_ROOT", t.root().to_str().unwrap()),
    ];
    env.extend_from_slice(extra);
    let o = run(
        ibcast_sim(),
        &[tally.to_str().unwrap(), "--devices", "2"],
        &env,
    );
    assert!(o.status.success(), "ibcast_sim failed: {}", stderr(&o));
    (out, o)
}

#[test]
fn hw_counters_and_samples_in_the_json_file() {
    let t = fixture();
    let (out, _) = run_on_fixture(&t, &[("RCCL_TELEMETRY_SAMPLE_MS", "1")]);
    let files = telemetry_files(out.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let v = load_valid(&files[0]);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d["hw_type"], "mlx5");
        assert_eq!(d["eth_device"], format!("nohostnet{i}"));
        let hc = d["hw_counters"].as_object().unwrap();
        assert_eq!(hc.len(), hw::vocabulary().len());
        for k in hw::vocabulary() {
            assert!(hc.contains_key(*k), "missing {k}");
        }
        // Static fixture: every sysfs-backed delta is 0; the netdev does not exist on this
        // machine, so ethtool-backed keys are -1 and the byte delta falls back to PMA words.
        assert_eq!(hc["delta_tx_bytes"], 0);
        assert_eq!(hc["cnp_sent"], 0);
        assert_eq!(hc["out_of_buffer"], 0);
        assert_eq!(hc["port_tx_bytes"], -1);
        assert_eq!(hc["pfc_rx_frames"], Value::from(vec![-1; 8]));
    }
    // Key order in the file is the vocabulary order.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let start = text.find("\"hw_counters\"").unwrap();
    let mut last = start;
    for k in hw::vocabulary() {
        let at = start + text[start..].find(&format!("\"{k}\"")).unwrap();
        assert!(at > last, "{k} out of order");
        last = at;
    }
    assert!(v["hw_samples_dropped"].as_u64().is_some());
    for s in v["hw_samples"].as_array().unwrap() {
        assert!(s["device_id"].as_u64().unwrap() < 2);
        assert_eq!(s["counters"]["cnp_sent"], 0);
    }
}

#[test]
fn unknown_allow_list_name_is_one_line_and_unread_keys_stay() {
    let t = fixture();
    let (out, o) = run_on_fixture(
        &t,
        &[("RCCL_TELEMETRY_HW_COUNTERS", "cnp_sent,not_a_counter")],
    );
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("not_a_counter"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("rccl-telemetry: "));
    let v = load_valid(&telemetry_files(out.path())[0]);
    assert!(v.get("hw_samples").is_none(), "no sampler asked for");
    for d in v["devices"].as_array().unwrap() {
        let hc = d["hw_counters"].as_object().unwrap();
        assert_eq!(hc.len(), hw::vocabulary().len());
        assert_eq!(hc["cnp_sent"], 0);
        assert_eq!(hc["delta_tx_bytes"], -1, "not in the allow-list: not read");
        assert_eq!(hc["out_of_buffer"], -1);
    }
}

#[test]
fn debug_lines_explain_detection_and_reads() {
    let t = fixture();
    let (_out, o) = run_on_fixture(&t, &[("RCCL_TELEMETRY_DEBUG", "1")]);
    let err = stderr(&o);
    assert!(err.contains("hw device 0 'mlx5_0': hw_type mlx5 (device/driver -> mlx5_core), port 1, eth_device 'nohostnet0'"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("'mlx5_1' baseline:") && l.contains("ethtool on nohostnet1")),
        "{err}"
    );
    assert!(
        err.lines()
            .filter(|l| !l.starts_with("ibcast_sim"))
            .all(|l| l.starts_with("rccl-telemetry: ")),
        "{err}"
    );
}
