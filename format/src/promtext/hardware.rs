//! The NICs' hardware counters: one family per counter (its values converted to base units),
//! then the availability gauge. Separate because their names come from the data, not from
//! the family table.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::data::{Device, Hw};
use super::families::{Kind, HW_AVAILABLE, PORT_QOS, QP_SETTINGS};
use super::names::hw_metric;
use super::syntax::{escape_into, header, prom_f64, sample};

/// One family per hardware counter (available values only), then the availability gauge.
pub(super) fn hw_families(out: &mut String, devs: &[(usize, &Device, String)]) {
    // By name: the library holds them in its vocabulary's order, a parsed file sorted.
    let mut order: Vec<&str> = devs
        .iter()
        .flat_map(|(_, d, _)| d.hw.iter().map(|(n, _)| n.as_str()))
        .collect();
    order.sort_unstable();
    order.dedup();
    let mut names_taken = HashSet::new();
    for counter in &order {
        let (name, help, scale) = hw_metric(counter);
        if !names_taken.insert(name.clone()) {
            continue; // two counter names that sanitise alike: the first wins
        }
        let mut wrote = false;
        for (_, d, l) in devs {
            for (_, v) in d.hw.iter().filter(|(n, _)| n == counter) {
                let mut emit = |extra: &str, x: i64| {
                    if x < 0 {
                        return;
                    }
                    if !wrote {
                        header(out, &name, &help, Kind::Counter);
                        wrote = true;
                    }
                    if scale == 1.0 {
                        sample(out, &name, l, extra, x);
                    } else {
                        sample(out, &name, l, extra, prom_f64(x as f64 * scale));
                    }
                };
                match v {
                    Hw::Scalar(x) => emit("", *x),
                    Hw::PerPrio(a) => {
                        for (p, x) in a.iter().enumerate() {
                            emit(&format!("priority=\"{p}\""), *x);
                        }
                    }
                }
            }
        }
    }
    if order.is_empty() {
        return;
    }
    let name = HW_AVAILABLE.name();
    header(out, &name, HW_AVAILABLE.help, HW_AVAILABLE.kind);
    let mut extra = String::new();
    for (_, d, l) in devs {
        let mut hw: Vec<&(String, Hw)> = d.hw.iter().collect();
        hw.sort_by(|a, b| a.0.cmp(&b.0));
        for (n, v) in hw {
            extra.clear();
            extra.push_str("counter=\"");
            escape_into(&mut extra, n);
            extra.push('"');
            match v {
                Hw::Scalar(x) => sample(out, &name, l, &extra, u8::from(*x >= 0)),
                Hw::PerPrio(a) => {
                    let base = extra.clone();
                    for (p, x) in a.iter().enumerate() {
                        sample(
                            out,
                            &name,
                            l,
                            &format!("{base},priority=\"{p}\""),
                            u8::from(*x >= 0),
                        );
                    }
                }
            }
        }
    }
}

/// The devices' QP settings, one info-style series per distinct combination (a family only
/// when some device has QPs that told theirs).
pub(super) fn qp_settings_family(out: &mut String, devs: &[(usize, &Device, String)]) {
    if devs.iter().all(|(_, d, _)| d.qp_settings.is_empty()) {
        return;
    }
    let name = QP_SETTINGS.name();
    header(out, &name, QP_SETTINGS.help, QP_SETTINGS.kind);
    let mut extra = String::new();
    for (_, d, l) in devs {
        for (s, n) in &d.qp_settings {
            extra.clear();
            for (i, (k, v)) in QP_SETTINGS.extra.iter().zip(s.values()).enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let v = v.map(|v| v.to_string()).unwrap_or_default();
                let _ = write!(extra, "{sep}{k}=\"{v}\"");
            }
            sample(out, &name, l, &extra, *n);
        }
    }
}

/// The ports' active MTU and DCB settings, one info-style series per device that has any (a
/// family only when some device has).
pub(super) fn port_qos_family(out: &mut String, devs: &[(usize, &Device, String)]) {
    if !devs.iter().any(|(_, d, _)| d.port_qos.is_known()) {
        return;
    }
    let name = PORT_QOS.name();
    header(out, &name, PORT_QOS.help, PORT_QOS.kind);
    let mut extra = String::new();
    for (_, d, l) in devs.iter().filter(|(_, d, _)| d.port_qos.is_known()) {
        extra.clear();
        for (i, (k, v)) in PORT_QOS.extra.iter().zip(d.port_qos.values()).enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(extra, "{sep}{k}=\"");
            escape_into(&mut extra, &v);
            extra.push('"');
        }
        sample(out, &name, l, &extra, 1u8);
    }
}

#[cfg(test)]
mod tests {
    use super::super::families::Level;
    use super::super::fixtures::lines;

    #[test]
    fn the_port_qos_series_carries_mtu_pfc_and_the_dscp_map() {
        let l = lines(Level::Device);
        let qos: Vec<&String> = l
            .iter()
            .filter(|x| x.starts_with("rccl_telemetry_port_qos{"))
            .collect();
        // One per used device of each distinct rank (the unused device is left out).
        assert_eq!(qos.len(), 2, "{qos:?}");
        assert!(
            qos[0].ends_with(r#"active_mtu="4096",pfc_enabled="3",dscp_priority="26:3,46:5"} 1"#),
            "{}",
            qos[0]
        );
        let none = super::super::data::PortQos {
            pfc_enabled: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(none.values(), ["", "none", ""]);
        assert!(!super::super::data::PortQos::default().is_known());
    }

    #[test]
    fn unavailable_hardware_counters_are_absent_and_flagged() {
        let l = lines(Level::Device);
        assert!(!l.iter().any(|x| !x.starts_with('#') && x.ends_with(" -1")));
        assert!(l
            .iter()
            .any(|x| x.starts_with("rccl_telemetry_hw_cnp_sent_total{") && x.ends_with(" 7")));
        assert!(l.iter().any(|x| x
            .starts_with("rccl_telemetry_hw_pfc_rx_pause_duration_seconds_total{")
            && x.contains("priority=\"1\"")
            && x.ends_with(" 0.000003")));
        assert!(!l
            .iter()
            .any(|x| x.contains("priority=\"0\"") && x.starts_with("rccl_telemetry_hw_pfc")));
        assert!(!l
            .iter()
            .any(|x| x.starts_with("rccl_telemetry_hw_rx_fcs_errors_total")));
        assert!(l
            .iter()
            .any(|x| x.contains("counter=\"rx_fcs_errors\"") && x.ends_with(" 0")));
        assert!(l
            .iter()
            .any(|x| x.contains("counter=\"cnp_sent\"") && x.ends_with(" 1")));
        // Device level has no channel or QP series.
        assert!(!l.iter().any(|x| x.contains("channel=")));
    }
}
