//! The per-rank file written as it is read: the devices, their channels and the channels'
//! QPs are serialised one at a time, straight from the slots, so a write holds one device's
//! channel list, one channel's slot reads and at most [`SPOOL_MAX`] bytes of the file, never
//! the file's model (which at 262,144 QPs was some 230 MB). The bytes are those of serialising the whole
//! model (`build`), which the tests hold it to. Separate from `build` because this is how the
//! model's pieces are driven through serde, not what they hold.
//!
//! The reading holds `registry::read_view` (a communicator finalized meanwhile is in its
//! channels or in its record, never in both or neither), and rcclTelemetryCommFinalize waits
//! for it. The bytes go to disk once it is released ([`Spool`]), so a finalization waits for
//! the reading, not the disk; a file larger than [`SPOOL_MAX`] writes the rest as it reads
//! (its memory stays bounded), and a finalization then waits for those writes too, never for
//! the fsync and the rename.

use std::cell::Cell;
use std::io::Write;
use std::path::Path;

use serde::ser::{Error as _, SerializeSeq, Serializer};
use serde::Serialize;

use super::build::{channel_totals, device_plan, read_channel, ChannelPlan, DevicePlan, Rows};
use super::*;
use crate::registry::{self, Channel};
use crate::sampler::HwSamples;

/// What a write had to do differently (said in one line once it is written).
#[derive(Default)]
struct Notes {
    /// Channels whose slot reads could not be held: their totals and their rows were read
    /// in two passes.
    reread: Cell<u64>,
    /// The most QPs such a channel had.
    reread_qps: Cell<u64>,
}

impl Notes {
    fn say(&self) {
        let n = self.reread.get();
        if n > 0 {
            crate::diag::warn(&format!(
                "telemetry file: not enough memory to hold one read of the QPs of {n} channel(s) (up to {} QPs); their totals and rows were read in two passes and may differ by what was counted in between",
                self.reread_qps.get()
            ));
        }
    }
}

/// How a channel's rows are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Passes {
    /// One read of each slot, held while the channel is written (two passes only when it
    /// cannot be held).
    One,
    /// Always two passes (the tests' way to hold that path to the same bytes).
    Two,
}

/// The file's "devices", read device by device as they are written.
struct Devices<'a> {
    id: &'a Identity,
    notes: &'a Notes,
    passes: Passes,
}

impl Serialize for Devices<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for d in registry::devices() {
            let hw = d.hw.final_report();
            let plan = device_plan(d, self.id).map_err(|e| {
                S::Error::custom(format!("out of memory reading device {}: {e}", d.id))
            })?;
            let channels = Channels {
                plan: &plan,
                notes: self.notes,
                passes: self.passes,
            };
            seq.serialize_element(&plan.report(hw, channels))?;
        }
        seq.end()
    }
}

/// A device's "channels", each read once as it is written.
struct Channels<'a> {
    plan: &'a DevicePlan,
    notes: &'a Notes,
    passes: Passes,
}

impl Serialize for Channels<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rows = &self.plan.rows;
        let mut seq = s.serialize_seq(Some(self.plan.channels.len()))?;
        for p in &self.plan.channels {
            let read = match self.passes {
                Passes::One => read_channel(rows, p).ok(),
                Passes::Two => None,
            };
            match read {
                Some(read) => {
                    let qps = Qps {
                        rows,
                        p,
                        stall: rows.stall_states(p.c),
                        reads: Reads::Held(&read.reads),
                    };
                    seq.serialize_element(&rows.channel_report(p, &read.totals, qps))?;
                }
                None => {
                    let totals = channel_totals(rows, p);
                    let n = &self.notes;
                    n.reread
                        .set(n.reread.get() + u64::from(self.passes == Passes::One));
                    n.reread_qps.set(n.reread_qps.get().max(totals.qps));
                    let qps = Qps {
                        rows,
                        p,
                        stall: rows.stall_states(p.c),
                        reads: Reads::Again(totals.qps),
                    };
                    seq.serialize_element(&rows.channel_report(p, &totals, qps))?;
                }
            }
        }
        seq.end()
    }
}

/// Where a channel's rows come from: the reads its totals were summed from, or (when those
/// could not be held) a second read of its first n slots.
enum Reads<'a> {
    Held(&'a [build::SlotRead]),
    Again(u64),
}

/// A channel's "queue_pairs", one row at a time.
struct Qps<'a> {
    rows: &'a Rows,
    p: &'a ChannelPlan,
    stall: build::ChannelStall,
    reads: Reads<'a>,
}

impl Serialize for Qps<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c: &Channel = self.p.c;
        match self.reads {
            Reads::Held(reads) => {
                let mut seq = s.serialize_seq(Some(reads.len()))?;
                for r in reads {
                    seq.serialize_element(&self.rows.qp_row(c, &self.stall, r))?;
                }
                seq.end()
            }
            Reads::Again(n) => {
                let mut seq = s.serialize_seq(None)?;
                for (i, slot) in c.slots.iter().take(n as usize) {
                    let r = self.rows.read(c, i, slot);
                    seq.serialize_element(&self.rows.qp_row(c, &self.stall, &r))?;
                }
                seq.end()
            }
        }
    }
}

/// Serialises the file, read from the registry as it goes, into `w` (in the file's layout,
/// with its final newline).
pub fn write_to(
    w: &mut dyn std::io::Write,
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> std::io::Result<()> {
    stream(w, id, end_wall_ns, samples, is_final, trigger, Passes::One)
}

/// [`write_to`], with every channel's rows read in a second pass (what it does for a channel
/// whose reads cannot be held): for the tests.
#[doc(hidden)]
pub fn write_to_two_passes(
    w: &mut dyn std::io::Write,
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> std::io::Result<()> {
    stream(w, id, end_wall_ns, samples, is_final, trigger, Passes::Two)
}

fn stream(
    w: &mut dyn std::io::Write,
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
    passes: Passes,
) -> std::io::Result<()> {
    let mut spool = Spool::new(w, SPOOL_MAX);
    let notes = Notes::default();
    {
        // One view of the channels for the whole reading: a communicator finalized meanwhile
        // is in its channels or in its record, never in both or neither.
        let _view = registry::read_view();
        // The stall keys as of now, not of the last tick.
        crate::stall_detector::tick();
        let devices = Devices {
            id,
            notes: &notes,
            passes,
        };
        let report = build::file_report(id, end_wall_ns, samples, is_final, trigger, devices);
        to_writer(&mut spool, &report)?;
        spool.write_all(b"\n")?;
    }
    // The view is released: a finalization waiting for it goes on while the bytes go out.
    spool.drain()?;
    notes.say();
    Ok(())
}

/// Bytes of the file a write holds in memory while it reads (see [`Spool`]): a file of some
/// 35,000 QPs.
pub const SPOOL_MAX: usize = 32 << 20;
/// The size of one held piece.
const SPOOL_CHUNK: usize = 1 << 20;

/// The file's bytes as they are serialised from the registry: held in memory, in pieces
/// allocated fallibly, up to a bound, and written to `out` by [`Spool::drain`] once the
/// registry's view is released, so that a finalization waits for the reading but never for
/// the disk. Past the bound, or when memory runs out, what is held goes to `out` and the rest
/// follows as it is serialised (the write's memory stays bounded whatever the file's size).
struct Spool<'a> {
    out: &'a mut dyn std::io::Write,
    pieces: Vec<Vec<u8>>,
    held: usize,
    max: usize,
    /// Set once bytes went straight to `out`: the rest follows them.
    through: bool,
}

impl<'a> Spool<'a> {
    fn new(out: &'a mut dyn std::io::Write, max: usize) -> Spool<'a> {
        Spool {
            out,
            pieces: Vec::new(),
            held: 0,
            max,
            through: false,
        }
    }

    /// Holds what it can of `data`; returns how many bytes it held.
    fn hold(&mut self, data: &[u8]) -> usize {
        let mut n = 0;
        while n < data.len() && self.held < self.max {
            if self.pieces.last().map_or(true, |p| p.len() == p.capacity()) {
                let mut p = Vec::new();
                if self.pieces.try_reserve(1).is_err() || p.try_reserve_exact(SPOOL_CHUNK).is_err()
                {
                    break;
                }
                self.pieces.push(p);
            }
            let Some(p) = self.pieces.last_mut() else {
                break;
            };
            let take = (p.capacity() - p.len())
                .min(data.len() - n)
                .min(self.max - self.held);
            p.extend_from_slice(&data[n..n + take]); // within the capacity: no allocation
            n += take;
            self.held += take;
        }
        n
    }

    /// Writes what is held to `out`, freeing each piece once it is written.
    fn drain(&mut self) -> std::io::Result<()> {
        self.held = 0;
        for p in std::mem::take(&mut self.pieces) {
            self.out.write_all(&p)?;
        }
        Ok(())
    }
}

impl std::io::Write for Spool<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        let mut rest = data;
        if !self.through {
            rest = &rest[self.hold(rest)..];
            if rest.is_empty() {
                return Ok(());
            }
            self.through = true;
            self.drain()?;
        }
        self.out.write_all(rest)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(()) // the caller's writer is flushed by its owner, after the drain
    }
}

/// Writes the rank's file to `dir/name` as it is read (see [`write_to`]), atomically (see
/// [`write_atomic`]). Returns where it went, or one line with the path and the reason.
pub fn write_file(
    dir: &Path,
    name: &str,
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> Result<crate::atomic_file::Written, String> {
    crate::atomic_file::write_atomic_with(&dir.join(name), |w| {
        write_to(w, id, end_wall_ns, samples, is_final, trigger)
    })
    .map_err(|e| e.replacen("cannot write ", "cannot write telemetry file ", 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A writer that records what reaches it, failing after `fail_after` bytes.
    struct Sink {
        bytes: Vec<u8>,
        writes: usize,
        fail_after: usize,
    }

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.bytes.len() + b.len() > self.fail_after {
                return Err(std::io::Error::other("full"));
            }
            self.writes += 1;
            self.bytes.extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn sink() -> Sink {
        Sink {
            bytes: Vec::new(),
            writes: 0,
            fail_after: usize::MAX,
        }
    }

    #[test]
    fn a_spool_holds_up_to_its_bound_then_writes_through_in_order() {
        let data: Vec<u8> = (0..3 * SPOOL_CHUNK + 17).map(|i| (i % 251) as u8).collect();
        // Within the bound: nothing reaches the writer before the drain.
        let mut out = sink();
        let mut s = Spool::new(&mut out, data.len());
        for part in data.chunks(1000) {
            s.write_all(part).unwrap();
        }
        assert!(!s.through);
        s.drain().unwrap();
        assert_eq!(out.bytes, data);
        // Past it: what was held goes first, the rest follows as it comes, the same bytes.
        let mut out = sink();
        let mut s = Spool::new(&mut out, SPOOL_CHUNK + 5);
        for part in data.chunks(1000) {
            s.write_all(part).unwrap();
        }
        assert!(s.through && s.pieces.is_empty());
        s.drain().unwrap();
        assert_eq!(out.bytes, data);
        // A writer's error reaches the caller.
        let mut out = Sink {
            fail_after: 10,
            ..sink()
        };
        let mut s = Spool::new(&mut out, 4);
        assert!(s.write_all(&data[..100]).is_err());
    }

    /// A writer whose first write tells `entered`, then waits for `go`: the disk part of a
    /// write blocked (a slow file system, a full pipe).
    struct Gate {
        entered: Option<mpsc::Sender<()>>,
        go: mpsc::Receiver<()>,
        bytes: Vec<u8>,
    }

    impl Write for Gate {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if let Some(e) = self.entered.take() {
                e.send(()).unwrap();
                self.go.recv().unwrap();
            }
            self.bytes.extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn test_identity() -> Identity {
        Identity {
            pid: std::process::id(),
            host_name: "h".into(),
            process_name: "p".into(),
            start_wall_ns: 0,
            histogram_buckets: 1,
            histogram_interval_ns: 1,
            latency_sample: 1,
            log_histogram: true,
            rank: None,
        }
    }

    #[test]
    fn a_finalization_does_not_wait_for_the_disk_part_of_a_write() {
        const DEV: i32 = 30;
        let hw = crate::hw::HwSettings {
            sysfs_root: "/nonexistent-sysfs".into(),
            ..Default::default()
        };
        registry::register(DEV, "stream_test_30", "IB-CAST", &hw).unwrap();
        let (h, comm) = registry::comm::create(0x5b0015, 0, 2, 1).unwrap();
        assert_eq!(
            comm.setup_channel(DEV, 0, 1, &crate::comms::usable),
            Some((0, 1))
        );
        let q = comm.qp(DEV, 0, 0).unwrap();
        for _ in 0..7 {
            q.send_posted(true);
        }
        let id = test_identity();
        let (entered_tx, entered) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let writer = std::thread::spawn(move || {
            let mut g = Gate {
                entered: Some(entered_tx),
                go: go_rx,
                bytes: Vec::new(),
            };
            write_to(&mut g, &id, 0, None, false, "test").unwrap();
            g.bytes
        });
        // The write has read everything and is blocked in its first write to the disk.
        entered.recv().unwrap();
        // Finalize, on a thread of its own, while that write stays blocked; the wait is only
        // the test's bound on a finalization held behind the write, which would never return.
        let (done_tx, done) = mpsc::channel();
        let fin = std::thread::spawn(move || done_tx.send(crate::comms::finalize(h)).unwrap());
        let finalized = done.recv_timeout(std::time::Duration::from_secs(300));
        go.send(()).unwrap();
        assert_eq!(
            finalized,
            Ok(true),
            "the finalization waited for the write's disk part"
        );
        fin.join().unwrap();
        // The file was read before the finalization: the communicator's counts are in its
        // channel, once, and not in a record.
        let v: serde_json::Value = serde_json::from_slice(&writer.join().unwrap()).unwrap();
        let d = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["device_id"] == DEV)
            .unwrap();
        let chs: Vec<_> = d["channels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["comm"]["hash"] == "0x5b0015")
            .collect();
        assert_eq!(chs.len(), 1, "{d}");
        assert_eq!(chs[0]["num_wqe_sent"], 7, "{d}");
        assert!(d["finalized_comms"]
            .as_array()
            .map_or(true, |f| f.iter().all(|r| r["comm"]["hash"] != "0x5b0015")));
        // The next file has it in its record.
        let mut after = Vec::new();
        write_to(&mut after, &test_identity(), 0, None, false, "test").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&after).unwrap();
        let d = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["device_id"] == DEV)
            .unwrap();
        assert!(d["channels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["comm"]["hash"] != "0x5b0015"));
        let rec: Vec<_> = d["finalized_comms"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["comm"]["hash"] == "0x5b0015")
            .collect();
        assert_eq!(rec.len(), 1, "{d}");
        assert_eq!(rec[0]["num_wqe_sent"], 7, "{d}");
    }
}
