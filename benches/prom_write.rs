//! The live Prometheus textfile's cost (`make bench`, `make bench-quick`): one write at
//! 8 devices x 64 channels x 16 QPs (8192 slots, every one with traffic), at the default depth
//! (device and channel series) and with per-QP series (RCCL_TELEMETRY_PROMETHEUS_QP=1), against
//! the JSON snapshot of the same slots written in the same run (the baseline). Writes run on
//! the writer thread, never on the data path, so the hot-path figures of bench.c do not move.
//!
//!   cargo bench -p rccl-telemetry --bench prom_write [-- --quick]

use std::ffi::CString;
use std::time::Instant;

use rccl_telemetry::capi::*;
use rccl_telemetry_format::promtext::Level;

const DEVICES: i32 = 8;
const CHANNELS: i32 = 64;
const QPS: i32 = 16;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// (median ms, min ms) of `reps` runs of `f`.
fn time(reps: usize, mut f: impl FnMut()) -> (f64, f64) {
    f(); // warm
    let v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    (median(v), min)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 15 };
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = tempfile::tempdir().expect("tempdir");
    for (k, v) in [
        ("RCCL_TELEMETRY_ENABLE", "1"),
        ("RCCL_TELEMETRY_OUTPUT_DIR", dir.path().to_str().unwrap()),
        (
            "RCCL_TELEMETRY_PROMETHEUS_DIR",
            dir.path().to_str().unwrap(),
        ),
        // Only the writes timed here: no periodic write during the run.
        ("RCCL_TELEMETRY_PROMETHEUS_INTERVAL_S", "3600"),
        ("RCCL_TELEMETRY_SYSFS_ROOT", sysfs.path().to_str().unwrap()),
        ("RCCL_TELEMETRY_SIGNALS", "0"),
    ] {
        std::env::set_var(k, v);
    }
    assert_eq!(rcclTelemetryInit(), 0);
    let transport = CString::new("IB-CAST").unwrap();
    for dev in 0..DEVICES {
        let name = CString::new(format!("mlx5_{dev}")).unwrap();
        assert_eq!(
            unsafe { rcclTelemetryRegisterDevice(dev, name.as_ptr(), transport.as_ptr()) },
            dev
        );
        for ch in 0..CHANNELS {
            let mut n = 0;
            let first = unsafe { rcclTelemetrySetupChannel(dev, ch, QPS, &mut n) };
            assert!(
                first >= 0 && n == QPS,
                "SetupChannel {dev}/{ch}: {first} {n}"
            );
            for q in 0..QPS {
                rcclTelemetrySetQpRole(dev, ch, first + q, (q + 1 < QPS) as i32);
                let qp = rcclTelemetryResolveQp(dev, ch, first + q);
                for r in 0..4 {
                    unsafe {
                        let ts = rcclTelemetryPostTs(qp);
                        rcclTelemetryQpSendPosted(qp, r % 2);
                        rcclTelemetryQpRecvPosted(qp);
                        rcclTelemetryQpWqeComplete(qp, ts);
                    }
                }
            }
            unsafe { rcclTelemetryChRequestCompleted(rcclTelemetryResolveChannel(dev, ch)) };
        }
        rcclTelemetryBytes(dev, 1, 1 << 20);
        rcclTelemetryBytes(dev, 0, 1 << 20);
    }
    let slots = DEVICES * CHANNELS * QPS;

    let (json, json_min) = time(reps, || {
        assert_eq!(
            rccl_telemetry::write_file(rccl_telemetry::Trigger::Interval, false),
            0
        )
    });
    let json_bytes = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .map(|e| e.metadata().unwrap().len())
        .sum::<u64>();
    let mut rows = Vec::new();
    for (what, level) in [
        ("device + channel series (default)", Level::Channel),
        ("+ per-QP series (PROMETHEUS_QP=1)", Level::Qp),
    ] {
        let (render, _) = time(reps, || {
            std::hint::black_box(rccl_telemetry::textfile::render_now(level));
        });
        let mut path = None;
        let (write, write_min) = time(reps, || {
            path = Some(rccl_telemetry::textfile::write_at(level).expect("textfile write"))
        });
        let text = std::fs::read_to_string(path.unwrap()).unwrap();
        let series = text.lines().filter(|l| !l.starts_with('#')).count();
        rows.push((what, write, write_min, render, text.len(), series));
    }

    println!("Prometheus textfile, {DEVICES}x{CHANNELS}x{QPS} ({slots} QP slots), {reps} reps, median (min) ms per write;");
    println!("baseline: the JSON snapshot of the same slots in this run ({json:.2} ms ({json_min:.2}), {:.1} MB)", json_bytes as f64 / 1e6);
    println!(
        "{:<36} {:>16} {:>10} {:>9} {:>10} {:>8}",
        "textfile", "write ms", "render ms", "MB", "series", "vs JSON"
    );
    for (what, write, min, render, bytes, series) in &rows {
        println!(
            "{what:<36} {:>16} {render:>10.2} {:>9.2} {series:>10} {:>7.2}x",
            format!("{write:.2} ({min:.2})"),
            *bytes as f64 / 1e6,
            write / json
        );
    }
    // The final file while the directory still exists (it also removes the textfile).
    assert_eq!(rcclTelemetryFlush(), 0);
}
