//! NIC hardware counters: driver detection, netdev mapping, ethtool and IB sysfs
//! readers, one canonical vocabulary, first-use baselines and the sampler's reads.
//!
//! The rest of the library talks to this module only through the items below:
//! - `HwSettings`: what the environment asked for (built by `config`).
//! - `HwDevice::probe` at RegisterDevice (reads links only, never a counter),
//!   `HwDevice::take_baseline` on the device's first SetupChannel,
//!   `HwDevice::final_report` at flush.
//! - `used_devices` and `HwDevice::sample_counters` for the sampler (`crate::sampler`, the
//!   thread of RCCL_TELEMETRY_SAMPLE_MS, a layer above: it adds stall detection's numbers).
//! - `vocabulary()` and `validate_allow_list()` for the configuration and the docs.
//!
//! Nothing here is ever called from the data path.
//!
//! Submodules: `driver` (hw_type), `netdev` (eth_device), `ethtool` (SIOCETHTOOL),
//! `dcb` (the port's PFC and DSCP map over DCB netlink, its active MTU),
//! (the bounded attribute readers are the leaf `crate::sysfs`),
//! `baseline` (snapshots, wrap and reset). The canonical keys and
//! their per-driver sources, as data, are the file format's `vocab`
//! (`rccl_telemetry_format::vocab`, in `format/`), seen here as `vocab`.

mod baseline;
mod dcb;
mod driver;
mod ethtool;
mod netdev;
/// The canonical keys and their per-driver sources: the file format's vocabulary.
use rccl_telemetry_format::vocab;

use crate::sysfs;

use baseline::{Eval, Plan, ReadCtx, Snapshot};
use rccl_telemetry_format::write::PortQosReport;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;
use vocab::{Kind, VOCAB};

/// Hardware-counter settings, parsed once from the environment by `config`.
#[derive(Debug, Clone)]
pub struct HwSettings {
    /// Root of every sysfs path (RCCL_TELEMETRY_SYSFS_ROOT, default "/sys").
    pub sysfs_root: PathBuf,
    /// RCCL_TELEMETRY_HW_COUNTERS: None = every counter; Some(list) = only these canonical names.
    pub allow: Option<Vec<String>>,
    /// RCCL_TELEMETRY_SAMPLE_MS (0 = no sampler).
    pub sample_ms: u64,
    /// RCCL_TELEMETRY_DEBUG.
    pub debug: bool,
}

impl Default for HwSettings {
    fn default() -> Self {
        HwSettings {
            sysfs_root: PathBuf::from("/sys"),
            allow: None,
            sample_ms: 0,
            debug: false,
        }
    }
}

/// One value under "hw_counters" and the object of one device, keys in vocabulary order:
/// the file format's types.
pub use rccl_telemetry_format::write::{HwReport, HwValue};

/// One stderr line with the library's prefix (through the crate's single stderr writer).
pub(crate) fn diag(msg: &str) {
    crate::diag::warn(&msg.replace('\r', " "));
}

/// Every canonical key, in the order `final_report` emits them.
pub fn vocabulary() -> &'static [&'static str] {
    vocab::names()
}

/// Where the list of known counter names is, for the diagnostic (docs/format.md's table is
/// checked against [`VOCAB`] by a test).
pub const KNOWN_COUNTERS_DOC: &str = "docs/format.md, \"Known counters\"";

/// Unknown names a diagnostic shows at most (the rest are counted), and the bytes of each
/// it shows (escaped): the line stays short whatever the variable holds.
const SHOWN_UNKNOWN: usize = 4;
const SHOWN_NAME_CHARS: usize = 48;

/// Checks an RCCL_TELEMETRY_HW_COUNTERS list against the vocabulary and returns the names
/// that are not canonical keys. The unknown names get one stderr line, each name once per
/// process however often it is checked (`probe` checks too, so the caller need not).
pub fn validate_allow_list(list: &[String]) -> Vec<String> {
    static REPORTED: parking_lot::Mutex<Option<HashSet<String>>> = parking_lot::Mutex::new(None);
    let mut unknown = Vec::new();
    for raw in list {
        let name = raw.trim();
        if name.is_empty() || vocab::index_of(name).is_some() {
            continue;
        }
        unknown.push(name.to_owned());
    }
    let fresh: Vec<String> = {
        let mut g = REPORTED.lock();
        let seen = g.get_or_insert_with(HashSet::new);
        unknown
            .iter()
            .filter(|n| seen.insert((*n).clone()))
            .cloned()
            .collect()
    };
    if !fresh.is_empty() {
        diag(&unknown_counters_line(&fresh));
    }
    unknown
}

/// The one line for unknown counter names: each (shortened, control characters escaped) with
/// the nearest known name when one is close, then where the known names are listed. Not the
/// list itself: 48 names make a line nobody reads.
pub fn unknown_counters_line(unknown: &[String]) -> String {
    let mut shown: Vec<String> = unknown
        .iter()
        .take(SHOWN_UNKNOWN)
        .map(|n| {
            let mut shown = String::new();
            let mut cut = false;
            for c in n.chars() {
                let e: String = c.escape_debug().collect();
                if shown.len() + e.len() > SHOWN_NAME_CHARS {
                    cut = true;
                    break;
                }
                shown.push_str(&e);
            }
            let mut s = format!("'{shown}{}'", if cut { "..." } else { "" });
            if let Some(near) = nearest_counter(n) {
                s.push_str(&format!(" (did you mean '{near}'?)"));
            }
            s
        })
        .collect();
    if unknown.len() > SHOWN_UNKNOWN {
        shown.push(format!("and {} more", unknown.len() - SHOWN_UNKNOWN));
    }
    format!(
        "RCCL_TELEMETRY_HW_COUNTERS: unknown counter{} {} ignored; the {} known names are listed in {KNOWN_COUNTERS_DOC}",
        if unknown.len() == 1 { "" } else { "s" },
        shown.join(", "),
        VOCAB.len()
    )
}

/// The known name closest to `name` by edit distance, when it is close enough to be a typo
/// (at most a third of the name's length, and at most 3 edits).
fn nearest_counter(name: &str) -> Option<&'static str> {
    let a: Vec<char> = name.chars().take(SHOWN_NAME_CHARS + 4).collect();
    let limit = (a.len() / 3).clamp(1, 3);
    VOCAB
        .iter()
        .map(|k| (edit_distance(&a, k.name), k.name))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).
fn edit_distance(a: &[char], b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diag_prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = (diag_prev + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag_prev = row[j + 1];
            row[j + 1] = here;
        }
    }
    row[b.len()]
}

/// Which vocabulary keys the allow-list lets through. An absent list, or one with no
/// non-empty name, means every key.
fn allowed_mask(allow: &Option<Vec<String>>) -> Vec<bool> {
    match allow {
        Some(list) if list.iter().any(|s| !s.trim().is_empty()) => {
            validate_allow_list(list);
            let set: HashSet<&str> = list.iter().map(|s| s.trim()).collect();
            VOCAB.iter().map(|k| set.contains(k.name)).collect()
        }
        _ => vec![true; VOCAB.len()],
    }
}

fn minus_one(kind: Kind) -> HwValue {
    match kind {
        Kind::Scalar => HwValue::Scalar(-1),
        Kind::PerPrio => HwValue::PerPrio([-1; 8]),
    }
}

/// The hardware side of one registered device.
#[derive(Debug)]
pub struct HwDevice {
    device_id: u32,
    roce_device: String,
    hw: driver::HwType,
    eth: String,
    port: u32,
    root: PathBuf,
    debug: bool,
    allowed: Vec<bool>,
    plan: Plan,
    sample_plan: Plan,
    baseline: OnceLock<Snapshot>,
    port_qos: OnceLock<PortQosReport>,
}

impl HwDevice {
    /// Called once at RegisterDevice: detects the driver and the netdev. Cheap; reads no counter.
    pub fn probe(device_id: u32, roce_device: &str, settings: &HwSettings) -> HwDevice {
        let root = settings.sysfs_root.clone();
        let (hw, how, port, eth, eth_how) = if sysfs::is_safe_component(roce_device) {
            let (hw, how) = driver::detect(&root, roce_device);
            let port = driver::pick_port(&root, roce_device);
            let (eth, eth_how) = netdev::find(&root, roce_device, port, hw);
            (hw, how, port, eth, eth_how)
        } else {
            (
                driver::HwType::Unsupported,
                "not a valid device name".to_owned(),
                1,
                String::new(),
                "none",
            )
        };
        let allowed = allowed_mask(&settings.allow);
        let (plan, sample_plan) = match hw.table_index() {
            Some(t) => (Plan::new(t, &allowed, false), Plan::new(t, &allowed, true)),
            None => (Plan::default(), Plan::default()),
        };
        if settings.debug {
            diag(&format!(
                "hw device {device_id} '{roce_device}': hw_type {} ({how}), port {port}, eth_device '{eth}' (from {eth_how})",
                hw.as_str()
            ));
        }
        HwDevice {
            device_id,
            roce_device: roce_device.to_owned(),
            hw,
            eth,
            port,
            root,
            debug: settings.debug,
            allowed,
            plan,
            sample_plan,
            baseline: OnceLock::new(),
            port_qos: OnceLock::new(),
        }
    }

    /// "mlx5", "thor2", "ainic", "rxe" or "unsupported".
    pub fn hw_type(&self) -> &'static str {
        self.hw.as_str()
    }

    /// The Ethernet netdev behind the RoCE device, "" when there is none.
    pub fn eth_device(&self) -> &str {
        &self.eth
    }

    fn ctx(&self) -> ReadCtx<'_> {
        ReadCtx {
            root: &self.root,
            ibdev: &self.roce_device,
            port: self.port,
            netdev: &self.eth,
        }
    }

    fn read(&self, plan: &Plan, what: &str) -> Snapshot {
        if plan.is_empty() {
            return Snapshot::default();
        }
        let (snap, notes) = baseline::read(&self.ctx(), plan);
        if self.debug {
            for n in notes {
                diag(&format!(
                    "hw device {} '{}' {what}: {n}",
                    self.device_id, self.roce_device
                ));
            }
            diag(&format!(
                "hw device {} '{}' {what}: {} raw counters read",
                self.device_id,
                self.roce_device,
                snap.count()
            ));
        }
        snap
    }

    /// Takes the baseline on the device's first use. Idempotent; later calls do nothing.
    /// Concurrent first calls read the device once; the others wait for that read.
    pub fn take_baseline(&'static self) {
        let mut first = false;
        self.baseline.get_or_init(|| {
            first = true;
            self.read(&self.plan, "baseline")
        });
        if first {
            self.port_qos.get_or_init(|| self.read_port_qos());
            USED.lock().push(self);
        }
    }

    /// The port's active MTU and DCB settings, read once at the device's first use: each
    /// absent where the system does not expose it (no netdev, a netdev without DCB).
    fn read_port_qos(&self) -> PortQosReport {
        let mut q = PortQosReport {
            active_mtu: dcb::active_mtu(&self.root, &self.eth, self.hw),
            ..PortQosReport::default()
        };
        if self.eth.is_empty() {
            return q;
        }
        match dcb::query(&self.eth) {
            dcb::Answer::Dcb(d) => {
                q.pfc_enabled = d.pfc_enabled;
                q.dscp_priority = Some(d.dscp_prio.into_iter().collect());
            }
            other => {
                if self.debug {
                    diag(&format!(
                        "hw device {} '{}': no DCB settings on {}: {other:?}",
                        self.device_id, self.roce_device, self.eth
                    ));
                }
            }
        }
        q
    }

    /// The port's active MTU and DCB settings as read at the device's first use; all absent
    /// for a device never used.
    pub fn port_qos(&self) -> PortQosReport {
        self.port_qos.get().cloned().unwrap_or_default()
    }

    /// The id the device was registered under.
    pub fn device_id(&self) -> u32 {
        self.device_id
    }

    /// Whether the sampler has keys to read on this device (IB sysfs counters of its driver
    /// that the allow-list lets through).
    pub fn samples_anything(&self) -> bool {
        !self.sample_plan.is_empty()
    }

    /// Reads the final values and returns the deltas (every key present, -1 where unavailable).
    pub fn final_report(&self) -> HwReport {
        let (Some(base), Some(table)) = (self.baseline.get(), self.hw.table_index()) else {
            return VOCAB.iter().map(|k| (k.name, minus_one(k.kind))).collect();
        };
        let fin = self.read(&self.plan, "final");
        let mut out = Vec::with_capacity(VOCAB.len());
        for (i, key) in VOCAB.iter().enumerate() {
            if !self.allowed[i] {
                out.push((key.name, minus_one(key.kind)));
                continue;
            }
            let value = match key.kind {
                Kind::Scalar => HwValue::Scalar(self.judge(
                    key.name,
                    baseline::evaluate(key, table, None, base, &fin, false),
                )),
                Kind::PerPrio => {
                    let mut a = [-1i64; 8];
                    for (p, slot) in a.iter_mut().enumerate() {
                        *slot = self.judge(
                            key.name,
                            baseline::evaluate(key, table, Some(p), base, &fin, false),
                        );
                    }
                    HwValue::PerPrio(a)
                }
            };
            out.push((key.name, value));
        }
        out
    }

    fn judge(&self, key: &str, e: Eval) -> i64 {
        if let Eval::Reset(why) = &e {
            if self.debug {
                diag(&format!(
                    "hw device {} '{}': {key}: {why}",
                    self.device_id, self.roce_device
                ));
            }
        }
        e.value()
    }

    /// One sampler row: deltas since the baseline of the sampled keys this driver exposes
    /// through IB sysfs. None before the baseline or when nothing is sampleable.
    pub fn sample_counters(&self) -> Option<Vec<(&'static str, i64)>> {
        let base = self.baseline.get()?;
        let table = self.hw.table_index()?;
        let cur = baseline::read(&self.ctx(), &self.sample_plan).0;
        let row: Vec<(&'static str, i64)> = VOCAB
            .iter()
            .enumerate()
            .filter(|(i, k)| self.allowed[*i] && baseline::sampleable(k, table))
            .map(|(_, k)| {
                (
                    k.name,
                    baseline::evaluate(k, table, None, base, &cur, true).value(),
                )
            })
            .collect();
        if row.is_empty() {
            None
        } else {
            Some(row)
        }
    }
}

/// The devices whose baselines were taken, in the order of their first use (the order of
/// the sampler's rows).
static USED: parking_lot::Mutex<Vec<&'static HwDevice>> = parking_lot::Mutex::new(Vec::new());

/// Every device in use so far (its baseline taken), in the order of first use.
pub fn used_devices() -> Vec<&'static HwDevice> {
    USED.lock().clone()
}

/// A small sysfs text attribute under the same rules as the counters (non-blocking open,
/// regular files only, one page at most); None when unavailable.
pub fn sysfs_text(path: &std::path::Path) -> Option<String> {
    sysfs::read_text(path)
}

/// Hooks for tests and fixtures; not part of the stable interface.
#[doc(hidden)]
pub mod testing {
    /// Makes ethtool reads of `ifname` answer with `stats` (kernel order, kernel spelling)
    /// instead of the ioctl; `None` removes it. For fixture trees whose netdevs do not exist.
    pub fn set_fake_ethtool(ifname: &str, stats: Option<Vec<(String, u64)>>) {
        super::ethtool::set_fake(ifname, stats);
    }

    /// Makes the DCB netlink query of `ifname` answer with `reply` (netlink messages of
    /// sequence number 1) instead of asking the kernel; `None` removes it.
    pub fn set_fake_dcb(ifname: &str, reply: Option<Vec<u8>>) {
        super::dcb::set_fake(ifname, reply);
    }

    /// The kernel's reply for a port with PFC on priority 3 and every DSCP d mapped to d >> 3
    /// (mlx5's default map in DSCP trust), for `set_fake_dcb`.
    pub fn dcb_reply_lossless_prio3(ifname: &str) -> Vec<u8> {
        super::dcb::fixture::lossless_prio3(ifname)
    }

    /// Asks the kernel for `ifname`'s DCB settings: (PFC-enabled priorities, DSCP map), or
    /// Err with why there are none.
    #[allow(clippy::type_complexity)]
    pub fn dcb_query(ifname: &str) -> Result<(Option<Vec<u8>>, Vec<(u8, u8)>), String> {
        match super::dcb::query(ifname) {
            super::dcb::Answer::Dcb(d) => Ok((d.pfc_enabled, d.dscp_prio)),
            other => Err(format!("{other:?}")),
        }
    }

    /// Reads `ifname`'s ethtool statistics through the real ioctl path.
    pub fn ethtool_stats(ifname: &str) -> Result<std::collections::HashMap<String, u64>, String> {
        super::ethtool::read_stats(ifname).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_device_reads_nothing_and_reports_minus_one() {
        let d = tempfile::tempdir().unwrap();
        let s = HwSettings {
            sysfs_root: d.path().to_path_buf(),
            ..Default::default()
        };
        let dev: &'static HwDevice = Box::leak(Box::new(HwDevice::probe(0, "nonexistent0", &s)));
        assert_eq!(dev.hw_type(), "unsupported");
        assert_eq!(dev.eth_device(), "");
        dev.take_baseline();
        let r = dev.final_report();
        assert_eq!(r.len(), VOCAB.len());
        for (k, v) in &r {
            match v {
                HwValue::Scalar(x) => assert_eq!(*x, -1, "{k}"),
                HwValue::PerPrio(a) => assert!(a.iter().all(|x| *x == -1), "{k}"),
            }
        }
    }

    #[test]
    fn hostile_device_names_are_unsupported() {
        let s = HwSettings::default();
        for n in ["../../etc", "", "a/b", ".."] {
            let d = HwDevice::probe(1, n, &s);
            assert_eq!(d.hw_type(), "unsupported", "{n:?}");
        }
    }

    #[test]
    fn allow_mask_and_unknown_names() {
        assert!(allowed_mask(&None).iter().all(|b| *b));
        assert!(allowed_mask(&Some(vec![" ".into(), "".into()]))
            .iter()
            .all(|b| *b));
        let m = allowed_mask(&Some(vec![
            "cnp_sent".into(),
            " out_of_buffer ".into(),
            "bogus_counter".into(),
        ]));
        assert_eq!(m.iter().filter(|b| **b).count(), 2);
        assert_eq!(
            validate_allow_list(&["bogus_counter".into(), "cnp_sent".into()]),
            vec!["bogus_counter".to_owned()]
        );
    }

    #[test]
    fn unknown_counter_line_names_the_name_and_points_to_the_list() {
        let line = unknown_counters_line(&["cnp_snet".into()]);
        assert!(line.contains("unknown counter 'cnp_snet'"), "{line}");
        assert!(line.contains("did you mean 'cnp_sent'?"), "{line}");
        assert!(line.contains(KNOWN_COUNTERS_DOC), "{line}");
        // Not the vocabulary itself.
        assert!(!line.contains("delta_rx_bytes"), "{line}");
        assert!(line.len() < 200, "{} bytes: {line}", line.len());
        // Nothing near: no guess.
        let line = unknown_counters_line(&["bogus_counter_xyz".into()]);
        assert!(!line.contains("did you mean"), "{line}");
        // Several: one line, all named, the surplus counted.
        let many: Vec<String> = (0..7).map(|i| format!("nope{i}")).collect();
        let line = unknown_counters_line(&many);
        assert!(line.contains("unknown counters 'nope0'"), "{line}");
        assert!(
            line.contains("'nope3'") && !line.contains("'nope4'"),
            "{line}"
        );
        assert!(line.contains("and 3 more"), "{line}");
        // A hostile name is escaped and shortened.
        let line = unknown_counters_line(&[format!("a\nb\x1b{}", "z".repeat(500))]);
        assert!(!line.contains('\n') && !line.contains('\x1b'), "{line:?}");
        assert!(
            line.contains("'a\\nb\\u{1b}zz") && line.contains("...'"),
            "{line}"
        );
    }

    #[test]
    fn edit_distance_counts_edits() {
        let d = |a: &str, b: &str| edit_distance(&a.chars().collect::<Vec<_>>(), b);
        assert_eq!(d("cnp_sent", "cnp_sent"), 0);
        assert_eq!(d("cnp_snet", "cnp_sent"), 2);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(nearest_counter("out_of_bufer"), Some("out_of_buffer"));
        assert_eq!(nearest_counter("x"), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever the variable holds: one line, bounded, naming the first unknown name.
            #[test]
            fn unknown_counter_line_is_one_bounded_line(
                names in proptest::collection::vec(
                    prop_oneof![
                        ".{0,200}",
                        proptest::sample::select(vocab::names().to_vec())
                            .prop_map(|n| format!("{n}x")),
                    ],
                    1..12,
                )
            ) {
                let line = unknown_counters_line(&names);
                prop_assert!(!line.contains('\n'));
                prop_assert!(line.len() <= 640, "{} bytes: {}", line.len(), line);
                let first: String =
                    names[0].chars().flat_map(char::escape_debug).take(8).collect();
                prop_assert!(line.contains(&format!("'{first}")), "{}", line);
            }
        }
    }

    #[test]
    fn vocabulary_is_exposed_in_order() {
        assert_eq!(vocabulary().len(), VOCAB.len());
        assert_eq!(vocabulary()[0], "delta_tx_bytes");
    }
}
