//! NIC hardware counters: driver detection, netdev mapping, ethtool and IB sysfs
//! readers, one canonical vocabulary, first-use baselines and the optional sampler.
//!
//! The rest of the library talks to this module only through the items below:
//! - `HwSettings`: what the environment asked for (built by `config`).
//! - `HwDevice::probe` at RegisterDevice (reads links only, never a counter),
//!   `HwDevice::take_baseline` on the device's first SetupChannel,
//!   `HwDevice::final_report` at flush.
//! - `sampler_start` at Init and `sampler_stop` at flush (RCCL_TELEMETRY_SAMPLE_MS).
//!
//! Nothing here is ever called from the data path.

use std::path::PathBuf;

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
        HwSettings { sysfs_root: PathBuf::from("/sys"), allow: None, sample_ms: 0, debug: false }
    }
}

/// One value under "hw_counters": a scalar, or one of the per-priority arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwValue {
    Scalar(i64),
    PerPrio([i64; 8]),
}

/// The "hw_counters" object of one device, keys in vocabulary order.
pub type HwReport = Vec<(&'static str, HwValue)>;

/// The hardware side of one registered device.
#[derive(Debug)]
pub struct HwDevice {
    device_id: u32,
    roce_device: String,
}

impl HwDevice {
    /// Called once at RegisterDevice: detects the driver and the netdev. Cheap; reads no counter.
    pub fn probe(device_id: u32, roce_device: &str, _settings: &HwSettings) -> HwDevice {
        HwDevice { device_id, roce_device: roce_device.to_owned() }
    }

    /// "mlx5", "thor2", "ainic", "rxe" or "unsupported".
    pub fn hw_type(&self) -> &'static str {
        "unsupported"
    }

    /// The Ethernet netdev behind the RoCE device, "" when there is none.
    pub fn eth_device(&self) -> &str {
        ""
    }

    /// Takes the baseline on the device's first use. Idempotent; later calls do nothing.
    pub fn take_baseline(&'static self) {
        let _ = (self.device_id, &self.roce_device);
    }

    /// Reads the final values and returns the deltas (every key present, -1 where unavailable).
    pub fn final_report(&self) -> HwReport {
        ["delta_tx_bytes", "delta_rx_bytes", "delta_tx_packets", "delta_rx_packets"]
            .into_iter()
            .map(|k| (k, HwValue::Scalar(-1)))
            .collect()
    }
}

/// One row of "hw_samples".
#[derive(Debug, Clone)]
pub struct HwSample {
    pub device_id: u32,
    pub timestamp_ns: u64,
    pub counters: Vec<(&'static str, i64)>,
}

/// What the sampler collected, handed to the report at flush.
#[derive(Debug, Clone, Default)]
pub struct HwSamples {
    pub samples: Vec<HwSample>,
    pub dropped: u64,
}

/// Starts the background sampler when `settings.sample_ms > 0` (called once at Init).
pub fn sampler_start(_settings: &HwSettings) {}

/// The samples so far, leaving the sampler running (for snapshot files); None when it
/// never ran.
pub fn sampler_snapshot() -> Option<HwSamples> {
    None
}

/// Stops and joins the sampler; None when it never ran.
pub fn sampler_stop() -> Option<HwSamples> {
    None
}
