//! The per-rank file written as it is read: the devices, their channels and the channels'
//! QPs are serialised one at a time, straight from the slots into the file's buffer, so a
//! write holds one device's channel list and one channel's slot reads, never the file's model
//! (which at 262,144 QPs was some 230 MB). The bytes are those of serialising the whole
//! model (`build`), which the tests hold it to. Separate from `build` because this is how the
//! model's pieces are driven through serde, not what they hold.

use std::cell::Cell;
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
    // One view of the channels for the whole file: a communicator finalized meanwhile is in
    // its channels or in its record, never in both or neither.
    let _view = registry::read_view();
    // The stall keys as of now, not of the last tick.
    crate::stall_detector::tick();
    let notes = Notes::default();
    let devices = Devices {
        id,
        notes: &notes,
        passes,
    };
    let report = build::file_report(id, end_wall_ns, samples, is_final, trigger, devices);
    to_writer(&mut *w, &report)?;
    w.write_all(b"\n")?;
    notes.say();
    Ok(())
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
