//! The environment, parsed once into an immutable `Config`.
//!
//! Every variable is read through one lookup, [`lookup`]: the process environment, then the
//! values the program set before Init with rcclTelemetrySetParam ([`set_param`]), so a
//! variable the library reads is a parameter too, with no code of its own. The environment
//! wins, as NCCL's does over its configuration file: a parameter is the program's default
//! that an operator can still override.
//!
//! Every malformed value (garbage, negative, overflow, empty, not UTF-8, out of range)
//! yields the documented default, or the nearest value in range, plus exactly one
//! diagnostic naming the variable and the value. Nothing here can fail.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use parking_lot::Mutex;

use crate::hw::HwSettings;

pub const ENV_ENABLE: &str = "RCCL_TELEMETRY_ENABLE";
pub const ENV_OUTPUT_DIR: &str = "RCCL_TELEMETRY_OUTPUT_DIR";
pub const ENV_BUCKETS: &str = "RCCL_TELEMETRY_HISTOGRAM_BUCKETS";
pub const ENV_INTERVAL: &str = "RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS";
pub const ENV_SAMPLE: &str = "RCCL_TELEMETRY_LATENCY_SAMPLE";
pub const ENV_HW_COUNTERS: &str = "RCCL_TELEMETRY_HW_COUNTERS";
pub const ENV_SAMPLE_MS: &str = "RCCL_TELEMETRY_SAMPLE_MS";
pub const ENV_DEBUG: &str = "RCCL_TELEMETRY_DEBUG";
pub const ENV_SYSFS_ROOT: &str = "RCCL_TELEMETRY_SYSFS_ROOT";
pub const ENV_TEST_FAULT: &str = "RCCL_TELEMETRY_TEST_FAULT";
pub const ENV_SIGNALS: &str = "RCCL_TELEMETRY_SIGNALS";
pub const ENV_LOG_HISTOGRAM: &str = "RCCL_TELEMETRY_LOG_HISTOGRAM";
pub const ENV_FLUSH_INTERVAL: &str = "RCCL_TELEMETRY_FLUSH_INTERVAL_S";
pub const ENV_SNAPSHOT_SIGNAL: &str = "RCCL_TELEMETRY_SNAPSHOT_SIGNAL";
pub const ENV_PROM_DIR: &str = "RCCL_TELEMETRY_PROMETHEUS_DIR";
pub const ENV_PROM_INTERVAL: &str = "RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S";
pub const ENV_PROM_QP: &str = "RCCL_TELEMETRY_PROMETHEUS_QP";
pub const ENV_STALL_MS: &str = "RCCL_TELEMETRY_STALL_MS";
pub const ENV_SLOW_NS: &str = "RCCL_TELEMETRY_SLOW_NS";
/// RCCL_TELEMETRY_CLOCK=monotonic: time completions with CLOCK_MONOTONIC even where the TSC
/// is invariant (a test's knob, and a way out of a TSC the kernel does not trust).
pub const ENV_CLOCK: &str = "RCCL_TELEMETRY_CLOCK";
/// NCCL's and RCCL's WQE latency monitor variables: the threshold is the default of
/// RCCL_TELEMETRY_SLOW_NS; REPORT=0 turns the per-QP summary lines off.
pub const ENV_NCCL_WQE_THRESHOLD: &str = "NCCL_IB_WQE_LATENCY_THRESHOLD_NS";
pub const ENV_NCCL_WQE_REPORT: &str = "NCCL_IB_WQE_LATENCY_REPORT";

pub const DEFAULT_OUTPUT_DIR: &str = "/tmp";
pub const DEFAULT_BUCKETS: u32 = 5;
pub const MAX_BUCKETS: u32 = 16;
pub const DEFAULT_INTERVAL_NS: u64 = 30_000;
/// Largest accepted RCCL_TELEMETRY_LATENCY_SAMPLE: one WQE in 65536.
pub const MAX_LATENCY_SAMPLE: u64 = 1 << 16;
/// Largest accepted RCCL_TELEMETRY_SAMPLE_MS: one hour.
pub const MAX_SAMPLE_MS: u64 = 3_600_000;
pub const DEFAULT_SYSFS_ROOT: &str = "/sys";
/// Largest accepted RCCL_TELEMETRY_FLUSH_INTERVAL_S: one day.
pub const MAX_FLUSH_INTERVAL_S: u64 = 86_400;
/// RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S: the default (node_exporter's usual scrape period),
/// and its bounds: 1 s, and one hour (a textfile older than that is no live view).
pub const DEFAULT_PROM_INTERVAL_S: u64 = 15;
pub const MAX_PROM_INTERVAL_S: u64 = 3_600;
/// RCCL_TELEMETRY_STALL_MS: the default (see docs/operators.md, "Stalled queue pairs": far above any completion
/// latency of a healthy fabric, well below the transport's retry exhaustion), and the
/// largest accepted value (one day). 0 turns stall detection off.
pub const DEFAULT_STALL_MS: u64 = 1_000;
pub const MAX_STALL_MS: u64 = 86_400_000;
/// Largest accepted RCCL_TELEMETRY_SLOW_NS (and NCCL_IB_WQE_LATENCY_THRESHOLD_NS): one hour.
pub const MAX_SLOW_NS: u64 = 3_600_000_000_000;
/// The termination signals whose arrival writes the file (RCCL_TELEMETRY_SIGNALS).
pub const TERMINATION_SIGNALS: [i32; 4] =
    [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Internal failures that a test can force, to prove they are contained
/// (RCCL_TELEMETRY_TEST_FAULT; never set in production).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Init reports that it cannot start.
    InitError,
    /// Init panics half-way.
    InitPanic,
    /// SetupChannel panics.
    SetupPanic,
    /// Flush panics while building the file.
    FlushPanic,
    /// SIGTERM raised on the thread inside rcclTelemetryCommFinalize's exclusive section.
    FinalizeSigterm,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub output_dir: PathBuf,
    pub histogram_buckets: u32,
    pub histogram_interval_ns: u64,
    /// N in effect: a power of two in 1..=MAX_LATENCY_SAMPLE.
    pub latency_sample: u64,
    pub hw: HwSettings,
    pub debug: bool,
    pub fault: Fault,
    /// RCCL_TELEMETRY_SIGNALS: write the file when a termination signal arrives.
    pub signals: bool,
    /// RCCL_TELEMETRY_LOG_HISTOGRAM: record the log-scale completion histogram (default 1).
    pub log_histogram: bool,
    /// RCCL_TELEMETRY_FLUSH_INTERVAL_S: rewrite a snapshot every N seconds (0 = never).
    pub flush_interval_s: u64,
    /// RCCL_TELEMETRY_SNAPSHOT_SIGNAL: the signal that asks for a snapshot (None = off).
    pub snapshot_signal: Option<i32>,
    /// RCCL_TELEMETRY_PROMETHEUS_DIR: where the live node_exporter textfile goes (None = off).
    pub prometheus_dir: Option<PathBuf>,
    /// RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S: seconds between rewrites of the textfile.
    pub prometheus_interval_s: u64,
    /// RCCL_TELEMETRY_PROMETHEUS_QP=1: per-QP series in the textfile too.
    pub prometheus_qp: bool,
    /// RCCL_TELEMETRY_STALL_MS: a QP with work outstanding and no completion for this long is
    /// stalled (0 = detection off).
    pub stall_ms: u64,
    /// RCCL_TELEMETRY_SLOW_NS, else NCCL_IB_WQE_LATENCY_THRESHOLD_NS: the WQE latency
    /// monitor's threshold in ns (0 = the monitor is off).
    pub slow_ns: u64,
    /// NCCL_IB_WQE_LATENCY_REPORT (default 1): the monitor's per-QP summary lines.
    pub wqe_latency_report: bool,
    /// RCCL_TELEMETRY_CLOCK=monotonic: never the TSC.
    pub clock_monotonic: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            output_dir: PathBuf::from(DEFAULT_OUTPUT_DIR),
            histogram_buckets: DEFAULT_BUCKETS,
            histogram_interval_ns: DEFAULT_INTERVAL_NS,
            latency_sample: 1,
            hw: HwSettings::default(),
            debug: false,
            fault: Fault::None,
            signals: true,
            log_histogram: true,
            flush_interval_s: 0,
            snapshot_signal: None,
            prometheus_dir: None,
            prometheus_interval_s: DEFAULT_PROM_INTERVAL_S,
            prometheus_qp: false,
            stall_ms: DEFAULT_STALL_MS,
            slow_ns: 0,
            wqe_latency_report: true,
            clock_monotonic: false,
        }
    }
}

/// How every variable's value is read: surrounding ASCII whitespace is no part of it (" 1" is
/// "1"), for the switches as for the numbers.
fn trimmed(v: &OsStr) -> Option<&str> {
    v.to_str()
        .map(|s| s.trim_matches(|c: char| c.is_ascii_whitespace()))
}

/// Whether RCCL_TELEMETRY_ENABLE asks for telemetry. Only "1" enables; any other
/// value (besides unset, "" and "0") earns one line saying telemetry stays off.
pub fn enabled_from(value: Option<&OsStr>) -> (bool, Option<String>) {
    match value {
        None => (false, None),
        Some(v) if trimmed(v) == Some("1") => (true, None),
        Some(v) if matches!(trimmed(v), Some("" | "0")) => (false, None),
        Some(v) => (
            false,
            Some(format!(
                "{ENV_ENABLE}={} is not \"1\"; telemetry stays off",
                show(v)
            )),
        ),
    }
}

/// The prefix of every variable the library reads, and so of every parameter it takes.
pub const PARAM_PREFIX: &str = "RCCL_TELEMETRY_";

/// The values set with rcclTelemetrySetParam, in the order set (a name set again replaces
/// its value in place).
static PARAMS: Mutex<Vec<(String, OsString)>> = Mutex::new(Vec::new());

/// Sets (Some) or removes (None) the parameter `name`. Refused, with the reason: a name that
/// is not RCCL_TELEMETRY_<NAME> (letters, digits and underscores), or memory that could not
/// be had. Whether Init has run is the caller's check (lifecycle::set_param).
pub fn set_param(name: &str, value: Option<OsString>) -> Result<(), String> {
    let rest = name.strip_prefix(PARAM_PREFIX).unwrap_or("");
    if rest.is_empty()
        || !rest
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "{} is not a parameter name ({PARAM_PREFIX}<NAME>, upper case)",
            show(OsStr::new(name))
        ));
    }
    let mut params = PARAMS.lock();
    let at = params.iter().position(|(n, _)| n == name);
    match (at, value) {
        (Some(i), Some(v)) => params[i].1 = v,
        (Some(i), None) => {
            params.remove(i);
        }
        (None, Some(v)) => {
            let mut owned = String::new();
            if params.try_reserve(1).is_err() || owned.try_reserve(name.len()).is_err() {
                return Err(format!("{name}: out of memory"));
            }
            owned.push_str(name);
            params.push((owned, v));
        }
        (None, None) => {}
    }
    Ok(())
}

/// A variable's value: the environment's, else the parameter's, else None.
pub fn lookup(name: &str) -> Option<OsString> {
    std::env::var_os(name).or_else(|| param(name))
}

fn param(name: &str) -> Option<OsString> {
    PARAMS
        .lock()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

impl Config {
    /// Reads the process environment and the parameters ([`lookup`]).
    pub fn from_env() -> (Config, Vec<String>) {
        Config::from_lookup(lookup)
    }

    /// Parses with any variable lookup (tests pass a map). Returns the config and the
    /// diagnostics to print, one per malformed variable.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> (Config, Vec<String>) {
        let mut diags = Vec::new();
        let mut c = Config::default();
        c.read_output_and_latency(&get, &mut diags);
        c.read_hw(&get, &mut diags);
        c.read_writes(&get, &mut diags);
        c.read_prometheus(&get, &mut diags);
        c.read_stall_and_debug(&get, &mut diags);
        (c, diags)
    }

    /// The output directory, the latency histogram and its sampling.
    fn read_output_and_latency(
        &mut self,
        get: &impl Fn(&str) -> Option<OsString>,
        diags: &mut Vec<String>,
    ) {
        if let Some(v) = get(ENV_OUTPUT_DIR) {
            if v.is_empty() {
                diags.push(format!(
                    "{ENV_OUTPUT_DIR} is empty; using {DEFAULT_OUTPUT_DIR}"
                ));
            } else {
                self.output_dir = PathBuf::from(v);
            }
        }

        self.histogram_buckets = parse_u64(
            get,
            ENV_BUCKETS,
            DEFAULT_BUCKETS as u64,
            1,
            MAX_BUCKETS as u64,
            diags,
        ) as u32;
        self.histogram_interval_ns =
            parse_u64(get, ENV_INTERVAL, DEFAULT_INTERVAL_NS, 1, u64::MAX, diags);

        let asked = parse_u64(get, ENV_SAMPLE, 1, 1, MAX_LATENCY_SAMPLE, diags);
        self.latency_sample = asked.next_power_of_two();
        if self.latency_sample != asked {
            diags.push(format!(
                "{ENV_SAMPLE}={asked} is not a power of two; measuring 1 WQE in {} instead",
                self.latency_sample
            ));
        }
    }

    /// The hardware counters: the sampler's period, the allow-list, the sysfs root.
    fn read_hw(&mut self, get: &impl Fn(&str) -> Option<OsString>, diags: &mut Vec<String>) {
        self.hw.sample_ms = parse_u64(get, ENV_SAMPLE_MS, 0, 0, MAX_SAMPLE_MS, diags);

        if let Some(v) = get(ENV_HW_COUNTERS) {
            match v.to_str() {
                Some(s) => {
                    let names: Vec<String> = s
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned)
                        .collect();
                    self.hw.allow = if names.is_empty() { None } else { Some(names) };
                }
                None => diags.push(format!(
                    "{ENV_HW_COUNTERS}={} is not UTF-8; collecting every counter",
                    show(&v)
                )),
            }
        }

        if let Some(v) = get(ENV_SYSFS_ROOT) {
            if v.is_empty() {
                diags.push(format!(
                    "{ENV_SYSFS_ROOT} is empty; using {DEFAULT_SYSFS_ROOT}"
                ));
            } else {
                self.hw.sysfs_root = PathBuf::from(v);
            }
        }
    }

    /// When files are written (interval, termination and snapshot signals) and whether they
    /// carry the log histogram.
    fn read_writes(&mut self, get: &impl Fn(&str) -> Option<OsString>, diags: &mut Vec<String>) {
        self.flush_interval_s =
            parse_u64(get, ENV_FLUSH_INTERVAL, 0, 0, MAX_FLUSH_INTERVAL_S, diags);

        self.signals = parse_switch(get, ENV_SIGNALS, true, "", diags);
        self.log_histogram = parse_switch(get, ENV_LOG_HISTOGRAM, true, "", diags);

        if let Some(v) = get(ENV_SNAPSHOT_SIGNAL) {
            match v.to_str().map(parse_signal) {
                Some(Some(sig)) if TERMINATION_SIGNALS.contains(&sig) || sig == libc::SIGKILL || sig == libc::SIGSTOP => {
                    diags.push(format!("{ENV_SNAPSHOT_SIGNAL}={} cannot be used for snapshots; snapshots on demand are off", show(&v)))
                }
                Some(Some(sig)) => self.snapshot_signal = Some(sig),
                Some(None) if v.is_empty() => {}
                _ => diags.push(format!("{ENV_SNAPSHOT_SIGNAL}={} is not a signal name or number; snapshots on demand are off", show(&v))),
            }
        }
    }

    /// The live Prometheus textfile: its directory, interval and per-QP series.
    fn read_prometheus(
        &mut self,
        get: &impl Fn(&str) -> Option<OsString>,
        diags: &mut Vec<String>,
    ) {
        if let Some(v) = get(ENV_PROM_DIR) {
            if v.is_empty() {
                diags.push(format!(
                    "{ENV_PROM_DIR} is empty; no Prometheus textfile is written"
                ));
            } else {
                self.prometheus_dir = Some(PathBuf::from(v));
            }
        }
        self.prometheus_interval_s = parse_u64(
            get,
            ENV_PROM_INTERVAL,
            DEFAULT_PROM_INTERVAL_S,
            1,
            MAX_PROM_INTERVAL_S,
            diags,
        );
        self.prometheus_qp = parse_switch(get, ENV_PROM_QP, false, " (no per-QP series)", diags);
    }

    /// Stall detection, debug lines and the test faults.
    fn read_stall_and_debug(
        &mut self,
        get: &impl Fn(&str) -> Option<OsString>,
        diags: &mut Vec<String>,
    ) {
        self.stall_ms = parse_u64(get, ENV_STALL_MS, DEFAULT_STALL_MS, 0, MAX_STALL_MS, diags);
        let nccl_slow = parse_u64(get, ENV_NCCL_WQE_THRESHOLD, 0, 0, MAX_SLOW_NS, diags);
        self.slow_ns = parse_u64(get, ENV_SLOW_NS, nccl_slow, 0, MAX_SLOW_NS, diags);
        self.wqe_latency_report = parse_u64(get, ENV_NCCL_WQE_REPORT, 1, 0, u64::MAX, diags) != 0;

        self.clock_monotonic = get(ENV_CLOCK).is_some_and(|v| v == "monotonic");
        // Set to anything but "0" (an empty value too): a flag, not a switch.
        self.debug = matches!(get(ENV_DEBUG), Some(v) if trimmed(&v) != Some("0"));
        self.hw.debug = self.debug;

        if let Some(v) = get(ENV_TEST_FAULT) {
            self.fault = match v.to_str() {
                Some("init_error") => Fault::InitError,
                Some("init_panic") => Fault::InitPanic,
                Some("setup_panic") => Fault::SetupPanic,
                Some("flush_panic") => Fault::FlushPanic,
                Some("finalize_sigterm") => Fault::FinalizeSigterm,
                Some("") => Fault::None,
                _ => {
                    diags.push(format!(
                        "{ENV_TEST_FAULT}={} is not a known fault; ignored",
                        show(&v)
                    ));
                    Fault::None
                }
            };
        }
    }
}

/// A signal given by number ("10"), name ("SIGUSR1") or short name ("usr1"); also SIGRTMIN+n.
pub fn parse_signal(s: &str) -> Option<i32> {
    let t = s.trim();
    if let Ok(n) = t.parse::<i32>() {
        return (1..=libc::SIGRTMAX()).contains(&n).then_some(n);
    }
    let up = t.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    if let Some(rest) = name.strip_prefix("RTMIN+") {
        let n: i32 = rest.parse().ok()?;
        let sig = libc::SIGRTMIN() + n;
        return (sig <= libc::SIGRTMAX()).then_some(sig);
    }
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        "STOP" => libc::SIGSTOP,
        "ALRM" => libc::SIGALRM,
        "CONT" => libc::SIGCONT,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        "PWR" => libc::SIGPWR,
        "RTMIN" => libc::SIGRTMIN(),
        _ => return None,
    })
}

/// A signal's name for files and messages.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGALRM => "SIGALRM".into(),
        libc::SIGWINCH => "SIGWINCH".into(),
        libc::SIGURG => "SIGURG".into(),
        libc::SIGPWR => "SIGPWR".into(),
        libc::SIGCONT => "SIGCONT".into(),
        s if s >= libc::SIGRTMIN() && s <= libc::SIGRTMAX() => {
            format!("SIGRTMIN+{}", s - libc::SIGRTMIN())
        }
        s => format!("signal {s}"),
    }
}

/// Parses a switch: "1" on, "0" off (see [`trimmed`]); unset or empty, the default; anything
/// else, the default and one line (`what` says what the default means).
fn parse_switch(
    get: &impl Fn(&str) -> Option<OsString>,
    name: &str,
    default: bool,
    what: &str,
    diags: &mut Vec<String>,
) -> bool {
    let Some(raw) = get(name) else { return default };
    match trimmed(&raw) {
        Some("1") => true,
        Some("0") => false,
        Some("") => default,
        _ => {
            diags.push(format!(
                "{name}={} is not 0 or 1; using the default {}{what}",
                show(&raw),
                u8::from(default)
            ));
            default
        }
    }
}

/// Parses an unsigned decimal in [lo, hi]. Garbage, empty or non-UTF-8 values give the
/// default; values out of range are clamped to the nearest bound. One line each.
fn parse_u64(
    get: &impl Fn(&str) -> Option<OsString>,
    name: &str,
    default: u64,
    lo: u64,
    hi: u64,
    diags: &mut Vec<String>,
) -> u64 {
    let Some(raw) = get(name) else { return default };
    let Some(s) = raw.to_str() else {
        diags.push(format!(
            "{name}={} is not UTF-8; using the default {default}",
            show(&raw)
        ));
        return default;
    };
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    let shown = show(&raw);
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<u64>() {
            Ok(v) if v < lo => {
                diags.push(format!(
                    "{name}={shown} is below the minimum {lo}; using {lo}"
                ));
                lo
            }
            Ok(v) if v > hi => {
                diags.push(format!(
                    "{name}={shown} is above the maximum {hi}; using {hi}"
                ));
                hi
            }
            Ok(v) => v,
            Err(_) => {
                diags.push(format!("{name}={shown} overflows; using the maximum {hi}"));
                hi
            }
        };
    }
    if t.starts_with('-') && t.len() > 1 && t[1..].bytes().all(|b| b.is_ascii_digit()) {
        diags.push(format!(
            "{name}={shown} is negative; using the default {default}"
        ));
    } else {
        diags.push(format!(
            "{name}={shown} is not a whole number; using the default {default}"
        ));
    }
    default
}

/// A value as it can be shown in one diagnostic line.
fn show(v: &OsStr) -> String {
    let s = v.to_string_lossy();
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect();
    format!("\"{s}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStringExt;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|n| m.get(n).cloned())
    }

    #[test]
    fn defaults_without_environment() {
        let (c, d) = parse(&[]);
        assert!(d.is_empty());
        assert_eq!(c.output_dir, PathBuf::from("/tmp"));
        assert_eq!(
            (
                c.histogram_buckets,
                c.histogram_interval_ns,
                c.latency_sample
            ),
            (5, 30_000, 1)
        );
        assert_eq!(
            (c.hw.sample_ms, c.hw.allow.clone(), c.debug),
            (0, None, false)
        );
        assert_eq!(c.hw.sysfs_root, PathBuf::from("/sys"));
    }

    #[test]
    fn only_one_enables() {
        assert_eq!(enabled_from(Some(OsStr::new("1"))), (true, None));
        assert_eq!(enabled_from(None), (false, None));
        assert_eq!(enabled_from(Some(OsStr::new("0"))), (false, None));
        assert_eq!(enabled_from(Some(OsStr::new(" 1"))), (true, None));
        for v in ["true", "yes", "2", "-1", "01"] {
            let (on, d) = enabled_from(Some(OsStr::new(v)));
            assert!(!on, "{v}");
            assert!(d.unwrap().contains(ENV_ENABLE));
        }
    }

    #[test]
    fn buckets_range_and_garbage() {
        for (v, want) in [
            ("1", 1),
            ("16", 16),
            ("0", 1),
            ("17", 16),
            ("abc", 5),
            ("-3", 5),
            ("", 5),
            ("99999999999999999999999", 16),
            (" 7 ", 7),
        ] {
            let (c, d) = parse(&[(ENV_BUCKETS, v)]);
            assert_eq!(c.histogram_buckets, want, "value {v:?}");
            let expect_diag = !matches!(v, "1" | "16" | " 7 ");
            assert_eq!(d.len(), usize::from(expect_diag), "value {v:?}: {d:?}");
            if expect_diag {
                assert!(d[0].contains(ENV_BUCKETS), "{d:?}");
            }
        }
    }

    #[test]
    fn interval_must_be_positive() {
        let (c, d) = parse(&[(ENV_INTERVAL, "0")]);
        assert_eq!(c.histogram_interval_ns, 1);
        assert_eq!(d.len(), 1);
        let (c, d) = parse(&[(ENV_INTERVAL, "1000")]);
        assert_eq!((c.histogram_interval_ns, d.len()), (1000, 0));
    }

    #[test]
    fn sampling_rounds_up_to_a_power_of_two_and_says_so() {
        for (v, want, lines) in [
            ("1", 1, 0),
            ("16", 16, 0),
            ("3", 4, 1),
            ("17", 32, 1),
            ("0", 1, 1),
            ("-4", 1, 1),
            ("65536", 65536, 0),
            ("65537", 65536, 1),
            ("x", 1, 1),
        ] {
            let (c, d) = parse(&[(ENV_SAMPLE, v)]);
            assert_eq!(c.latency_sample, want, "{v}");
            assert_eq!(d.len(), lines, "{v}: {d:?}");
        }
        let (_, d) = parse(&[(ENV_SAMPLE, "12")]);
        assert!(d[0].contains("12") && d[0].contains("16"), "{d:?}");
    }

    #[test]
    fn hw_counters_is_a_comma_list() {
        let (c, d) = parse(&[(ENV_HW_COUNTERS, " cnp_sent, ,ecn_marked_pkts ,")]);
        assert!(d.is_empty());
        assert_eq!(
            c.hw.allow,
            Some(vec!["cnp_sent".to_string(), "ecn_marked_pkts".to_string()])
        );
        let (c, _) = parse(&[(ENV_HW_COUNTERS, "")]);
        assert_eq!(c.hw.allow, None);
    }

    #[test]
    fn non_utf8_values_get_defaults() {
        let bad = OsString::from_vec(vec![0x66, 0xff, 0x31]);
        let (c, d) = Config::from_lookup(|n| {
            (n == ENV_BUCKETS || n == ENV_HW_COUNTERS).then(|| bad.clone())
        });
        assert_eq!(c.histogram_buckets, 5);
        assert_eq!(c.hw.allow, None);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn sample_ms_and_debug() {
        let (c, d) = parse(&[(ENV_SAMPLE_MS, "5"), (ENV_DEBUG, "")]);
        assert_eq!(
            (c.hw.sample_ms, c.debug, c.hw.debug, d.len()),
            (5, true, true, 0)
        );
        let (c, d) = parse(&[(ENV_SAMPLE_MS, "-1"), (ENV_DEBUG, "0")]);
        assert_eq!((c.hw.sample_ms, c.debug, d.len()), (0, false, 1));
    }

    #[test]
    fn signal_settings() {
        let (c, d) = parse(&[]);
        assert!(
            d.is_empty() && c.signals && c.flush_interval_s == 0 && c.snapshot_signal.is_none()
        );
        let (c, d) = parse(&[
            (ENV_SIGNALS, "0"),
            (ENV_FLUSH_INTERVAL, "30"),
            (ENV_SNAPSHOT_SIGNAL, "SIGUSR1"),
        ]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            (c.signals, c.flush_interval_s, c.snapshot_signal),
            (false, 30, Some(libc::SIGUSR1))
        );
        for (v, want) in [
            ("usr2", Some(libc::SIGUSR2)),
            ("10", Some(10)),
            ("SIGRTMIN+2", Some(libc::SIGRTMIN() + 2)),
            ("TERM", None),
            ("9", None),
            ("bogus", None),
            ("0", None),
            ("999", None),
        ] {
            let (c, d) = parse(&[(ENV_SNAPSHOT_SIGNAL, v)]);
            assert_eq!(c.snapshot_signal, want, "{v}");
            assert_eq!(d.len(), usize::from(want.is_none()), "{v}: {d:?}");
        }
        let (c, d) = parse(&[(ENV_SIGNALS, "yes"), (ENV_FLUSH_INTERVAL, "-1")]);
        assert!(c.signals && c.flush_interval_s == 0);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn prometheus_settings() {
        let (c, d) = parse(&[]);
        assert!(
            d.is_empty()
                && c.prometheus_dir.is_none()
                && c.prometheus_interval_s == 15
                && !c.prometheus_qp
        );
        let (c, d) = parse(&[
            (ENV_PROM_DIR, "/var/lib/node"),
            (ENV_PROM_INTERVAL, "60"),
            (ENV_PROM_QP, "1"),
        ]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            (c.prometheus_dir, c.prometheus_interval_s, c.prometheus_qp),
            (Some(PathBuf::from("/var/lib/node")), 60, true)
        );
        for (v, want) in [
            ("0", 1),
            ("1", 1),
            ("3600", 3600),
            ("3601", 3600),
            ("x", 15),
            ("-5", 15),
            ("", 15),
            ("99999999999999999999999", 3600),
        ] {
            let (c, d) = parse(&[(ENV_PROM_INTERVAL, v)]);
            assert_eq!(c.prometheus_interval_s, want, "{v}");
            assert_eq!(
                d.len(),
                usize::from(!matches!(v, "1" | "3600")),
                "{v}: {d:?}"
            );
            assert!(
                d.iter()
                    .all(|l| l.contains(ENV_PROM_INTERVAL) && !l.contains('\n')),
                "{d:?}"
            );
        }
        let (c, d) = parse(&[(ENV_PROM_DIR, ""), (ENV_PROM_QP, "yes")]);
        assert!(c.prometheus_dir.is_none() && !c.prometheus_qp);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].contains(ENV_PROM_DIR) && d[1].contains(ENV_PROM_QP),
            "{d:?}"
        );
    }

    #[test]
    fn stall_ms_setting() {
        let (c, d) = parse(&[]);
        assert_eq!((c.stall_ms, d.len()), (DEFAULT_STALL_MS, 0));
        let (c, d) = parse(&[(ENV_STALL_MS, "0")]);
        assert_eq!((c.stall_ms, d.len()), (0, 0));
        let (c, d) = parse(&[(ENV_STALL_MS, "250")]);
        assert_eq!((c.stall_ms, d.len()), (250, 0));
        for bad in ["x", "-5", "1.5", ""] {
            let (c, d) = parse(&[(ENV_STALL_MS, bad)]);
            assert_eq!(c.stall_ms, DEFAULT_STALL_MS, "{bad}");
            assert!(d.len() == 1 && d[0].contains(ENV_STALL_MS), "{bad}: {d:?}");
        }
        let (c, d) = parse(&[(ENV_STALL_MS, "99999999999")]);
        assert_eq!((c.stall_ms, d.len()), (MAX_STALL_MS, 1));
    }

    #[test]
    fn slow_ns_defaults_to_nccls_threshold_and_ours_wins() {
        let (c, d) = parse(&[]);
        assert_eq!((c.slow_ns, c.wqe_latency_report, d.len()), (0, true, 0));
        let (c, d) = parse(&[(ENV_NCCL_WQE_THRESHOLD, "200000")]);
        assert_eq!((c.slow_ns, d.len()), (200_000, 0));
        let (c, d) = parse(&[(ENV_NCCL_WQE_THRESHOLD, "200000"), (ENV_SLOW_NS, "50000")]);
        assert_eq!((c.slow_ns, d.len()), (50_000, 0));
        let (c, d) = parse(&[(ENV_NCCL_WQE_THRESHOLD, "200000"), (ENV_SLOW_NS, "0")]);
        assert_eq!(
            (c.slow_ns, d.len()),
            (0, 0),
            "ours set to 0 turns the monitor off"
        );
        let (c, d) = parse(&[(ENV_SLOW_NS, "fast")]);
        assert!(
            c.slow_ns == 0 && d.len() == 1 && d[0].contains(ENV_SLOW_NS),
            "{d:?}"
        );
        let (c, d) = parse(&[(ENV_NCCL_WQE_REPORT, "0")]);
        assert_eq!((c.wqe_latency_report, d.len()), (false, 0));
    }

    #[test]
    fn log_histogram_setting() {
        let (c, d) = parse(&[]);
        assert!(d.is_empty() && c.log_histogram);
        let (c, d) = parse(&[(ENV_LOG_HISTOGRAM, "0")]);
        assert!(d.is_empty() && !c.log_histogram);
        let (c, d) = parse(&[(ENV_LOG_HISTOGRAM, "off")]);
        assert!(c.log_histogram);
        assert!(
            d.len() == 1 && d[0].contains("RCCL_TELEMETRY_LOG_HISTOGRAM=\"off\" is not 0 or 1"),
            "{d:?}"
        );
    }

    #[test]
    fn empty_output_dir_gets_default() {
        let (c, d) = parse(&[(ENV_OUTPUT_DIR, "")]);
        assert_eq!(c.output_dir, PathBuf::from("/tmp"));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_parameter_is_read_where_the_environment_is_not_set() {
        // Names of this test's own: the unit tests share the process's parameters.
        let (a, b) = ("RCCL_TELEMETRY_UNIT_PARAM_A", "RCCL_TELEMETRY_UNIT_PARAM_B");
        assert_eq!(lookup(a), None);
        set_param(a, Some("5".into())).unwrap();
        assert_eq!(lookup(a), Some("5".into()));
        set_param(a, Some("6".into())).unwrap();
        assert_eq!(
            lookup(a),
            Some("6".into()),
            "a name set twice keeps the later value"
        );
        set_param(a, None).unwrap();
        assert_eq!(lookup(a), None, "None removes it");
        // The environment wins.
        set_param(b, Some("param".into())).unwrap();
        std::env::set_var(b, "env");
        assert_eq!(lookup(b), Some("env".into()));
        std::env::remove_var(b);
        assert_eq!(lookup(b), Some("param".into()));
        set_param(b, None).unwrap();
        // The configuration reads through the same lookup: a parameter is a variable.
        set_param(a, Some("250".into())).unwrap();
        let (c, d) = Config::from_lookup(|n| if n == ENV_STALL_MS { lookup(a) } else { None });
        assert_eq!((c.stall_ms, d.len()), (250, 0));
        set_param(a, None).unwrap();
    }

    #[test]
    fn a_parameter_name_is_one_of_the_library_s() {
        for bad in [
            "",
            "RCCL_TELEMETRY_",
            "NCCL_DEBUG",
            "rccl_telemetry_signals",
            "RCCL_TELEMETRY_A=B",
            "RCCL_TELEMETRY_A B",
        ] {
            let e = set_param(bad, Some("1".into())).unwrap_err();
            assert!(
                e.contains("is not a parameter name") && !e.contains('\n'),
                "{e}"
            );
            assert_eq!(lookup(bad), None);
        }
    }

    /// Every switch and whole-number variable reads " 1", "-1" and "0" the same way: " 1" is
    /// "1"; "-1" is refused (the default, one line naming the variable), except by
    /// RCCL_TELEMETRY_DEBUG, a flag that anything but "0" sets; "0" is a value, or the
    /// minimum's line where 0 is below it; " 0 " is "0".
    #[test]
    fn switches_and_numbers_read_spaces_signs_and_zero_alike() {
        let vars = [
            ENV_BUCKETS,
            ENV_INTERVAL,
            ENV_SAMPLE,
            ENV_SAMPLE_MS,
            ENV_SIGNALS,
            ENV_LOG_HISTOGRAM,
            ENV_FLUSH_INTERVAL,
            ENV_PROM_INTERVAL,
            ENV_PROM_QP,
            ENV_STALL_MS,
            ENV_DEBUG,
        ];
        // The configuration and its lines (which quote the value as given).
        let config = |name: &str, v: &str| {
            let (c, d) = parse(&[(name, v)]);
            (format!("{c:?}"), d)
        };
        let same = |name: &str, a: &str, b: &str| {
            let ((ca, da), (cb, db)) = (config(name, a), config(name, b));
            assert_eq!((ca, da.len()), (cb, db.len()), "{name}: {a:?} and {b:?}");
        };
        let default = format!("{:?}", parse(&[]).0);
        for name in vars {
            same(name, "1", " 1");
            same(name, "1", "1 ");
            let (c, d) = config(name, "-1");
            if name == ENV_DEBUG {
                assert_eq!((c, d.len()), (config(name, "1").0, 0), "{name}");
            } else {
                assert_eq!(c, default, "{name}: -1 keeps the default");
                assert!(d.len() == 1 && d[0].contains(name), "{name}: {d:?}");
            }
            let (_, d) = config(name, "0");
            assert!(
                d.is_empty() || (d.len() == 1 && d[0].contains("below the minimum")),
                "{name}: {d:?}"
            );
            same(name, "0", " 0 ");
        }
        assert_eq!(enabled_from(Some(OsStr::new(" 1"))), (true, None));
        assert_eq!(enabled_from(Some(OsStr::new(" 0 "))), (false, None));
        let (on, d) = enabled_from(Some(OsStr::new("-1")));
        assert!(!on && d.unwrap().contains(ENV_ENABLE));
    }

    #[test]
    fn diagnostics_are_single_lines() {
        let (_, d) = parse(&[(ENV_BUCKETS, "a\nb"), (ENV_SAMPLE, "x\ry")]);
        assert_eq!(d.len(), 2);
        for line in d {
            assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
        }
    }
}
