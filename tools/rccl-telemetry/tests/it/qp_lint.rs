//! QP lint through `outliers`: runs with peers whose QPs carry their settings (`generate
//! --plant qp_tclass` / `qp_mtu`), each kind planted on one NIC and named there only; the same
//! runs made uniform name nothing of these kinds, and uniform on traffic class 0 only a note;
//! an errored QP carries its mismatch and the transport's give-up time into its error finding;
//! `outliers --json` and the report show each NIC's settings and the QPs that differ. The
//! ports' side (format 5's device `active_mtu`, `pfc_enabled`, `dscp_priority` and per-priority
//! counters) is planted into the same healthy files, as an operator's scenario would edit them:
//! a class mapped to a priority without PFC, RoCE counted there, a path MTU below both ports';
//! without those keys nothing of these is named.

use rccl_telemetry_tool::generate::{generate_fabric, GenOptions, Plant, Planted};
use rccl_telemetry_tool::load::load_run;
use rccl_telemetry_tool::outliers::{self, Finding, Kind, Severity};
use serde_json::Value;
use std::path::Path;

const LINT: [Kind; 5] = [
    Kind::QpConfigMismatch,
    Kind::MtuMismatch,
    Kind::RnrInfiniteRetry,
    Kind::QpConfigUnusual,
    Kind::LossyClassTraffic,
];

fn run(plant: Plant) -> (tempfile::TempDir, Planted) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = GenOptions {
        ranks: 12,
        ranks_per_host: 2,
        devices_per_rank: 2,
        seed: 11,
        plants: vec![plant],
        ..Default::default()
    };
    let planted = generate_fabric(dir.path(), &o, 2).expect("generate");
    let p = planted
        .into_iter()
        .find(|p| p.kind == plant)
        .expect("planted");
    (dir, p)
}

fn lint_findings(dir: &Path) -> Vec<Finding> {
    outliers::find(&load_run(&[dir.to_path_buf()]), &Default::default())
        .findings
        .into_iter()
        .filter(|f| LINT.contains(&f.kind))
        .collect()
}

fn nic(p: &Planted) -> String {
    format!("{}:mlx5_{}", p.host, p.device_id)
}

/// Rewrites every QP of the run's files with `edit(file name, QP)`.
fn edit_qps(dir: &Path, edit: impl Fn(&str, &mut Value)) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.starts_with("rccl_telemetry_") {
            continue;
        }
        let mut f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for d in f["devices"].as_array_mut().unwrap() {
            for c in d["channels"].as_array_mut().unwrap() {
                for q in c["queue_pairs"].as_array_mut().unwrap() {
                    edit(&name, q);
                }
            }
        }
        std::fs::write(&path, serde_json::to_string_pretty(&f).unwrap()).unwrap();
    }
}

#[test]
fn a_qp_on_another_traffic_class_is_named_on_its_nic_only() {
    let (dir, p) = run(Plant::QpTclass);
    let f = lint_findings(dir.path());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].culprit.as_str()),
        (Kind::QpConfigMismatch, nic(&p).as_str())
    );
    assert_eq!(f[0].severity, Severity::Warning);
    let qpn = p.counter.as_deref().unwrap().trim_start_matches("qp_num ");
    assert!(
        f[0].evidence.contains(&format!("(QPN {qpn})"))
            && f[0].evidence.contains("traffic class 0; this NIC's other ")
            && f[0].evidence.contains("QPs use 106, its peer 106"),
        "{}",
        f[0].evidence
    );
}

#[test]
fn a_path_mtu_the_peer_does_not_share_is_named_on_the_odd_end() {
    let (dir, p) = run(Plant::QpMtu);
    let f = lint_findings(dir.path());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].culprit.as_str()),
        (Kind::MtuMismatch, nic(&p).as_str())
    );
    assert!(
        f[0].evidence.contains("path MTU 1024, its peer 4096"),
        "{}",
        f[0].evidence
    );
}

#[test]
fn uniform_settings_name_nothing_and_uniform_class_0_is_only_a_note() {
    let (dir, _) = run(Plant::QpMtu);
    edit_qps(dir.path(), |_, q| q["attrs"]["path_mtu"] = 4096.into());
    assert!(lint_findings(dir.path()).is_empty());
    edit_qps(dir.path(), |_, q| q["attrs"]["traffic_class"] = 0.into());
    let f = lint_findings(dir.path());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].severity),
        (Kind::QpConfigUnusual, Severity::Info)
    );
    assert!(
        f[0].evidence.contains("traffic class 0"),
        "{}",
        f[0].evidence
    );
}

#[test]
fn an_infinite_rnr_retry_with_the_longest_timer_is_named() {
    let (dir, p) = run(Plant::QpTclass);
    let qpn: u64 = p.counter.as_deref().unwrap()["qp_num ".len()..]
        .parse()
        .unwrap();
    edit_qps(dir.path(), |name, q| {
        q["attrs"]["traffic_class"] = 106.into();
        if name == p.file && q["qp_num"] == qpn {
            q["attrs"]["min_rnr_timer"] = 0.into();
        }
    });
    let f = lint_findings(dir.path());
    let rnr: Vec<&Finding> = f
        .iter()
        .filter(|f| f.kind == Kind::RnrInfiniteRetry)
        .collect();
    assert_eq!(rnr.len(), 1, "{f:#?}");
    assert_eq!(rnr[0].culprit, nic(&p));
    assert!(rnr[0].evidence.contains("655"), "{}", rnr[0].evidence);
}

/// Gives the planted QP a RETRY_EXC_ERR (its peer's end saw nothing: no error there).
fn plant_retry_error(dir: &Path, p: &Planted) {
    let path = dir.join(&p.file);
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let qpn: u64 = p.counter.as_deref().unwrap()["qp_num ".len()..]
        .parse()
        .unwrap();
    let d = &mut f["devices"][0];
    d["num_cq_errors"] = 1.into();
    for c in d["channels"].as_array_mut().unwrap() {
        for q in c["queue_pairs"].as_array_mut().unwrap() {
            if q["qp_num"] == qpn {
                q["cq_errors"] = serde_json::json!({"RETRY_EXC_ERR": 1});
                q["first_cq_error"] = serde_json::json!({"status": "RETRY_EXC_ERR", "status_code": 12,
                    "vendor_err": 129, "time": "2026-12-02T11:00:30.000000000Z"});
                q["qp_state"] = "ERR".into();
            }
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&f).unwrap()).unwrap();
}

#[test]
fn an_errored_qp_carries_its_mismatch_and_the_give_up_time() {
    let (dir, p) = run(Plant::QpTclass);
    plant_retry_error(dir.path(), &p);
    let r = outliers::find(&load_run(&[dir.path().to_path_buf()]), &Default::default());
    let e = r
        .findings
        .iter()
        .find(|f| f.kind == Kind::CqErrors)
        .expect("the error finding");
    assert_eq!(e.culprit, nic(&p));
    assert!(
        e.evidence
            .contains("its settings differ: traffic class 0; this NIC's other ")
            && e.evidence.contains(
                "the transport gives up after 8 tries of 4.096 us x 2^20 = 4.3 s: 34.4 s"
            ),
        "{}",
        e.evidence
    );
}

#[test]
fn an_errored_qp_whose_settings_differ_makes_its_peer_no_root_of_a_hang() {
    // The QP failed on its own settings (the e2e traffic class scenario: its class dropped on
    // the way): its healthy peer is no root, and the hang says why none is named.
    let (dir, p) = run(Plant::QpTclass);
    plant_retry_error(dir.path(), &p);
    let r = outliers::find(&load_run(&[dir.path().to_path_buf()]), &Default::default());
    let roots: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.kind == Kind::HangRoot)
        .collect();
    assert!(roots.is_empty(), "{roots:#?}");
    assert!(
        r.caveats.iter().any(|c| c.evidence.contains(
            "1 stalled or errored QP whose settings differ from its NIC's other QPs' (qp_config_mismatch): its settings, not its peer, explain the wait"
        )),
        "{:#?}",
        r.caveats
    );
    // The same error on a QP that agrees with its NIC still waits on its peer, the root.
    edit_qps(dir.path(), |_, q| q["attrs"]["traffic_class"] = 106.into());
    let r = outliers::find(&load_run(&[dir.path().to_path_buf()]), &Default::default());
    let roots: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.kind == Kind::HangRoot)
        .collect();
    assert_eq!(roots.len(), 1, "{:#?}", r.findings);
    assert_ne!(roots[0].host, p.host, "{:#?}", roots[0]);
}

#[test]
fn the_operators_view_lists_each_nics_settings_and_the_qps_that_differ() {
    let (dir, p) = run(Plant::QpTclass);
    let arg = dir.path().to_str().unwrap();
    let o = crate::common::run(&["outliers", "--json", arg]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("outliers --json");
    let nics = v["qp_settings"].as_array().expect("qp_settings");
    assert_eq!(nics.len(), 12);
    for n in nics {
        let planted = n["nic"] == nic(&p).as_str();
        let settings = n["settings"].as_array().unwrap();
        assert_eq!(settings.len(), if planted { 2 } else { 1 }, "{n}");
        assert_eq!(
            n["differing"].as_array().unwrap().len(),
            usize::from(planted),
            "{n}"
        );
        assert!(settings
            .iter()
            .all(|s| s["qps"].as_u64().unwrap() > 0 && s["path_mtu"] == 4096));
    }
    let html = dir.path().join("r.html");
    let o = crate::common::run(&["report", "-o", html.to_str().unwrap(), arg]);
    assert!(o.status.code().is_some(), "{o:?}");
    let h = std::fs::read_to_string(&html).unwrap();
    let at = h
        .find("<h2 id=\"qp-settings\">QP settings</h2>")
        .expect("the section");
    let section = &h[at..];
    assert!(
        section.contains(&format!("<tr><td>{}</td>", nic(&p)))
            && section.contains("traffic class 0; this NIC&#39;s other"),
        "{}",
        &section[..section.len().min(3000)]
    );
}

#[test]
fn a_stalled_qp_carries_its_mismatch_into_the_stall_finding() {
    let (dir, p) = run(Plant::QpTclass);
    let qpn: u64 = p.counter.as_deref().unwrap()["qp_num ".len()..]
        .parse()
        .unwrap();
    edit_qps(dir.path(), |name, q| {
        if name == p.file && q["qp_num"] == qpn {
            q["stalled"] = true.into();
            q["num_wqe_outstanding"] = 12.into();
            q["stalled_since"] = "2026-12-02T11:00:30.000000000Z".into();
        }
    });
    let r = outliers::find(&load_run(&[dir.path().to_path_buf()]), &Default::default());
    let s = r
        .findings
        .iter()
        .find(|f| f.kind == Kind::StalledQps)
        .expect("the stall finding");
    assert!(
        s.evidence
            .contains("its settings differ: traffic class 0; this NIC's other ")
            && s.evidence.contains("the transport gives up after 8 tries"),
        "{}",
        s.evidence
    );
    // Its settings explain the wait (its class dropped on the way, still retrying): its peer,
    // which answers everything else, is no root of the hang.
    assert!(
        !r.findings.iter().any(|f| f.kind == Kind::HangRoot),
        "{:#?}",
        r.findings
    );
}

/// Rewrites every device of the run's files with `edit(file name, device)`.
fn edit_devices(dir: &Path, edit: impl Fn(&str, &mut Value)) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.starts_with("rccl_telemetry_") {
            continue;
        }
        let mut f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for d in f["devices"].as_array_mut().unwrap() {
            edit(&name, d);
        }
        std::fs::write(&path, serde_json::to_string_pretty(&f).unwrap()).unwrap();
    }
}

/// Every port configured as the vendors' lossless-RoCE guides do: PFC on priority 3, DSCP d on
/// priority d >> 3 (DSCP 26, traffic class 106, on 3), MTU 9000 (active MTU 4096).
fn lossless_ports(dir: &Path) {
    let map: serde_json::Map<String, Value> =
        (0..64).map(|d| (d.to_string(), (d >> 3).into())).collect();
    edit_devices(dir, |_, d| {
        d["active_mtu"] = 4096.into();
        d["pfc_enabled"] = serde_json::json!([3]);
        d["dscp_priority"] = Value::Object(map.clone());
    });
}

fn planted_qpn(p: &Planted) -> u64 {
    p.counter.as_deref().unwrap()["qp_num ".len()..]
        .parse()
        .unwrap()
}

#[test]
fn a_qp_whose_class_maps_to_a_priority_without_pfc_is_named() {
    let (dir, p) = run(Plant::QpTclass);
    lossless_ports(dir.path());
    let f = lint_findings(dir.path());
    let lossy: Vec<&Finding> = f
        .iter()
        .filter(|f| f.kind == Kind::LossyClassTraffic)
        .collect();
    assert_eq!(lossy.len(), 1, "{f:#?}");
    assert_eq!(lossy[0].culprit, nic(&p));
    assert_eq!(lossy[0].severity, Severity::Warning);
    let qpn = planted_qpn(&p);
    assert!(
        lossy[0].evidence.contains(&format!("(QPN {qpn})"))
            && lossy[0].evidence.contains(
                "traffic class 0 (DSCP 0) maps to priority 0, which has no PFC; this NIC's other "
            )
            && lossy[0]
                .evidence
                .contains("QPs ride priority 3 (PFC enabled: 3)"),
        "{}",
        lossy[0].evidence
    );
    // Beside the class mismatch itself, on the same NIC, and nothing else.
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f.iter().all(|f| f.culprit == nic(&p)), "{f:#?}");
}

#[test]
fn roce_counted_on_a_priority_without_pfc_is_named() {
    let (dir, p) = run(Plant::QpMtu);
    edit_qps(dir.path(), |_, q| q["attrs"]["path_mtu"] = 4096.into());
    lossless_ports(dir.path());
    // Every port: 10 GB of RoCE on priority 3, 1 GB of other traffic on priority 0; the
    // planted NIC's RoCE went out on priority 0 instead.
    let gb: i64 = 1 << 30;
    let dev_id = p.device_id;
    edit_devices(dir.path(), |name, d| {
        let odd = name == p.file && d["device_id"] == dev_id;
        let hw = &mut d["hw_counters"];
        hw["port_tx_bytes"] = (11 * gb).into();
        hw["delta_tx_bytes"] = (10 * gb).into();
        hw["prio_tx_bytes"] = if odd {
            serde_json::json!([11 * gb, 0, 0, 0, 0, 0, 0, 0])
        } else {
            serde_json::json!([gb, 0, 0, 10 * gb, 0, 0, 0, 0])
        };
    });
    let f = lint_findings(dir.path());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].culprit.as_str()),
        (Kind::LossyClassTraffic, nic(&p).as_str())
    );
    assert!(
        f[0].evidence.contains(
            "sent: priority 0 (no PFC) carried 11.00 GiB of the port's 11.00 GiB, more than all its non-RDMA traffic (1.00 GiB): at least 10.00 GiB of RoCE rode it"
        ),
        "{}",
        f[0].evidence
    );
}

#[test]
fn a_path_mtu_below_both_ports_is_named_on_both_ends() {
    let (dir, p) = run(Plant::QpMtu);
    lossless_ports(dir.path());
    // The planted QP has 1024, its peer 4096: give the peer 1024 too, so the ends agree.
    let qpn = planted_qpn(&p);
    let path = dir.path().join(&p.file);
    let f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let peer = f["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["channels"].as_array().unwrap())
        .flat_map(|c| c["queue_pairs"].as_array().unwrap())
        .find(|q| q["qp_num"] == qpn)
        .expect("the planted QP")["peer"]
        .clone();
    let peer_gid = peer["gid"].as_str().expect("a peer GID").to_owned();
    let peer_qpn = peer["qp_num"].as_u64().unwrap();
    edit_devices(dir.path(), |_, d| {
        if d["gid"] != peer_gid.as_str() {
            return;
        }
        for c in d["channels"].as_array_mut().unwrap() {
            for q in c["queue_pairs"].as_array_mut().unwrap() {
                if q["qp_num"] == peer_qpn {
                    q["attrs"]["path_mtu"] = 1024.into();
                }
            }
        }
    });
    let f = lint_findings(dir.path());
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f.iter().any(|f| f.culprit == nic(&p)), "{f:#?}");
    for x in &f {
        assert_eq!(x.kind, Kind::MtuMismatch);
        assert!(
            x.evidence.contains(
                "path MTU 1024, below both ports' active MTU (this port 4096, its peer's 4096)"
            ) && !x.evidence.contains("its peer 4096;"),
            "{}",
            x.evidence
        );
    }
    // One end's active MTU unknown: nothing to compare the pair with.
    edit_devices(dir.path(), |name, d| {
        if name == p.file && d["device_id"] == p.device_id {
            d.as_object_mut().unwrap().remove("active_mtu");
        }
    });
    assert!(lint_findings(dir.path()).is_empty());
}

#[test]
fn a_run_without_dcb_settings_names_nothing_of_the_ports() {
    let (dir, p) = run(Plant::QpMtu);
    edit_qps(dir.path(), |_, q| q["attrs"]["path_mtu"] = 1024.into());
    // Traffic on priority 0 only and no PFC settings, map or active MTU (Soft-RoCE, a VM):
    // nothing to say.
    let gb: i64 = 1 << 30;
    edit_devices(dir.path(), |_, d| {
        let hw = &mut d["hw_counters"];
        hw["port_tx_bytes"] = (11 * gb).into();
        hw["delta_tx_bytes"] = (10 * gb).into();
        hw["prio_tx_bytes"] = serde_json::json!([11 * gb, 0, 0, 0, 0, 0, 0, 0]);
    });
    assert!(lint_findings(dir.path()).is_empty());
    // The same with the ports' settings on a uniform, healthy run: nothing either.
    lossless_ports(dir.path());
    edit_qps(dir.path(), |_, q| q["attrs"]["path_mtu"] = 4096.into());
    edit_devices(dir.path(), |_, d| {
        d["hw_counters"]["prio_tx_bytes"] = serde_json::json!([gb, 0, 0, 10 * gb, 0, 0, 0, 0]);
    });
    assert!(lint_findings(dir.path()).is_empty(), "{:#?}", p.file);
}
