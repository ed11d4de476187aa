//! The stall detector's cost per tick (`make bench`, `make bench-quick`): one tick over every
//! QP slot at 8 devices x 64 channels x 16 QPs (8192 slots) and at 32 x 512 x 16 (262144),
//! every slot with traffic, 1 in 64 of them with a WRITE_WITH_IMM outstanding (stalled after
//! the first ticks). Ticks run on the writer thread every RCCL_TELEMETRY_STALL_MS / 2, never on
//! the data path, so the hot-path figures of bench.c do not move. The clock is injected
//! (`stall_detector::manual_clock`), so the writer thread's own ticks do not run meanwhile.
//!
//!   cargo bench -p rccl-telemetry --bench stall_tick [-- --quick]

use std::ffi::CString;
use std::time::Instant;

use rccl_telemetry::capi::*;
use rccl_telemetry::stall_detector;

const QPS: i32 = 16;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn populate(devices: std::ops::Range<i32>, channels: i32) {
    let transport = CString::new("IB-CAST").unwrap();
    for dev in devices {
        let name = CString::new(format!("mlx5_{dev}")).unwrap();
        assert_eq!(
            unsafe { rcclTelemetryRegisterDevice(dev, name.as_ptr(), transport.as_ptr()) },
            dev
        );
        for ch in 0..channels {
            let mut n = 0;
            let first = unsafe { rcclTelemetrySetupChannel(dev, ch, QPS, &mut n) };
            assert!(
                first >= 0 && n == QPS,
                "SetupChannel {dev}/{ch}: {first} {n}"
            );
            for q in 0..QPS {
                let qp = rcclTelemetryResolveQp(dev, ch, first + q);
                unsafe {
                    let ts = rcclTelemetryPostTs(qp);
                    rcclTelemetryQpSendPosted(qp, 1);
                    if (ch * QPS + q) % 64 != 7 {
                        rcclTelemetryQpWqeComplete(qp, ts);
                    }
                }
            }
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let ticks = if quick { 5 } else { 25 };
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = tempfile::tempdir().expect("tempdir");
    for (k, v) in [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_SYSFS_ROOT", sysfs.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_SIGNALS", "0"),
        ("RCCL_TELEMETRY_STALL_MS", "1000"),
    ] {
        std::env::set_var(k, v);
    }
    stall_detector::manual_clock();
    assert_eq!(rcclTelemetryInit(), 0);
    println!("stall detector, one tick over every QP slot ({ticks} ticks after 3 warm-up ticks that detect the stalls), median (min) ms:");
    println!(
        "{:<24} {:>10} {:>18} {:>14} {:>10}",
        "slots", "QP slots", "tick ms", "ns per slot", "stalled"
    );
    let mut now = 1_000_000_000u64;
    for (label, devs, channels) in [("8x64x16", 0..8, 64), ("32x512x16", 8..32, 512)] {
        if label == "32x512x16" {
            // The first 8 devices' 64 channels are there already: fill them up to 512.
            for dev in 0..8 {
                for ch in 64..512 {
                    let mut n = 0;
                    let first = unsafe { rcclTelemetrySetupChannel(dev, ch, QPS, &mut n) };
                    assert!(first >= 0 && n == QPS);
                    for q in 0..QPS {
                        let qp = rcclTelemetryResolveQp(dev, ch, first + q);
                        unsafe {
                            let ts = rcclTelemetryPostTs(qp);
                            rcclTelemetryQpSendPosted(qp, 1);
                            if (ch * QPS + q) % 64 != 7 {
                                rcclTelemetryQpWqeComplete(qp, ts);
                            }
                        }
                    }
                }
            }
        }
        populate(devs.clone(), channels);
        let slots = (devs.end as u64) * channels as u64 * QPS as u64;
        for _ in 0..3 {
            now += 600_000_000;
            stall_detector::tick_at(now, now);
        }
        let v: Vec<f64> = (0..ticks)
            .map(|_| {
                now += 500_000_000;
                let t = Instant::now();
                stall_detector::tick_at(now, now);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let med = median(v);
        let stalled: u64 = (0..devs.end as u32)
            .filter_map(stall_detector::device_summary)
            .map(|(_, s)| s)
            .sum();
        assert_eq!(stalled, slots / 64, "1 in 64 QPs is stalled");
        println!(
            "{label:<24} {slots:>10} {:>18} {:>14.1} {stalled:>10}",
            format!("{med:.2} ({min:.2})"),
            med * 1e6 / slots as f64
        );
    }
    assert_eq!(rcclTelemetryFlush(), 0);
}
