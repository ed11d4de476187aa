//! The anomalies `generate` can plant (`--plant`): each one's name, the kind of run it belongs
//! to and what `outliers` must say about it, in one table (`plants!` below, read through
//! [`Plant::spec`]) that the command line, the generators, planted.json and the tests of the
//! planted runs all take them from.

use crate::outliers::Kind;
use clap::builder::PossibleValue;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::LazyLock;
use strum::VariantArray;

/// The kind of run a plant belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// One file per rank and no peers (format version 1): `generate`.
    Flat,
    /// Ranks with their own NIC and QPs to their peers (version 3): `generate --peers`.
    Fabric,
    /// A job that hangs or recovers (version 4): `generate --peers`, the plant alone.
    Hang,
}

/// What a plant is: its row of the table below.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Its name: in `--plant`, and planted.json's `kind`.
    pub name: &'static str,
    pub run: RunKind,
    /// The kind of finding `outliers` must report on the planted culprit; None when the plant
    /// is not a finding (it shapes the join or the hang analysis, or is a recovered one).
    pub finding: Option<Kind>,
    /// The counter the anomaly shows in (planted.json's `counter`, the finding's metric).
    pub counter: Option<&'static str>,
    /// Whether `--plant all` plants it: every plant of its kind of run but those that change
    /// what the others look like (a stall makes every file a snapshot; the verdict benchmark's
    /// one direction and late poller change the matrix the others are named from).
    pub in_all: bool,
    /// What is planted, in a few words (`generate --help`): the variant's doc.
    pub about: &'static str,
}

/// The plants, one row each: the variant (its doc says what is planted), its name, its kind of
/// run, the finding it must produce, the counter it shows in, and whether `--plant all`
/// plants it (`all`) or leaves it out (`alone`).
macro_rules! plants {
    ($(#[doc = $about:literal] $variant:ident = $name:literal, $run:ident, $finding:expr,
       $counter:expr, $all:ident;)*) => {
        /// An anomaly the generator plants, each on its own rank (or link, or host).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, VariantArray)]
        pub enum Plant {
            $(#[doc = $about] $variant,)*
        }

        impl Plant {
            /// The plant's row.
            pub const fn spec(self) -> Spec {
                match self {
                    $(Plant::$variant => Spec {
                        name: $name,
                        run: RunKind::$run,
                        finding: $finding,
                        counter: $counter,
                        in_all: plants!(@all $all),
                        about: $about,
                    },)*
                }
            }
        }
    };
    (@all all) => { true };
    (@all alone) => { false };
}

plants! {
    /// 5x the CNP counters
    Cnp = "cnp", Flat, Some(Kind::HwCounter), Some("cnp_sent"), all;
    /// a heavy completion-latency tail
    Tail = "tail", Flat, Some(Kind::LatencyTail), None, all;
    /// 1.6x the tx bytes (and the send WQEs behind them)
    Skew = "skew", Flat, Some(Kind::TxByteSkew), None, all;
    /// completions with an error status
    CqErrors = "cq_errors", Flat, Some(Kind::CqErrors), None, all;
    /// one hw counter reads -1 on this rank only
    Unavailable = "unavailable", Flat, Some(Kind::CounterUnavailable), Some("out_of_sequence"), all;
    /// QPs that got no stats slot
    Untracked = "untracked", Flat, Some(Kind::UntrackedQps), None, all;
    /// 10x the CTS FIFO slot misses
    SlotMiss = "slot_miss", Flat, Some(Kind::SlotMiss), None, all;
    /// 8x the PFC pause frames
    Pfc = "pfc", Flat, Some(Kind::HwCounter), Some("pfc_rx_frames"), all;
    /// rx discards where every other rank has none
    Drops = "drops", Flat, Some(Kind::HwCounter), Some("port_rx_discards"), all;
    /// local ACK timeouts where every other rank has none
    Retransmit = "retransmit", Flat, Some(Kind::HwCounter), Some("local_ack_timeout_err"), all;
    /// 20x the out-of-sequence packets
    OutOfSequence = "out_of_sequence", Flat, Some(Kind::HwCounter), Some("out_of_sequence"), all;
    /// the sampler's buffer overflowed (needs --samples)
    SamplesDropped = "samples_dropped", Flat, Some(Kind::SamplesDropped), None, all;
    /// the rank was killed: its file is a SIGTERM snapshot half-way through
    Snapshot = "snapshot", Flat, Some(Kind::Snapshot), None, all;
    /// one NIC: 4x the completion latency of every QP it is an end of
    SlowNic = "slow_nic", Fabric, Some(Kind::SlowNic), None, all;
    /// one NIC pair (two hosts): 4x on the QPs between them, both ways
    SlowLink = "slow_link", Fabric, Some(Kind::SlowLink), None, all;
    /// every NIC of one host: 4x
    SlowHost = "slow_host", Fabric, Some(Kind::SlowHost), None, all;
    /// one rank's file is not written: its peers' QPs stay unmatched
    MissingPeer = "missing_peer", Fabric, None, None, all;
    /// a second file claims the GID and QPN of one QP
    AmbiguousPeer = "ambiguous_peer", Fabric, None, None, all;
    /// one host's NICs have no GID (InfiniBand without GRH): joined by LID
    LidOnly = "lid_only", Fabric, None, None, all;
    /// a snapshot during a hang: the QPs of one link are stalled now
    Stall = "stall", Fabric, Some(Kind::StalledQps), None, alone;
    /// final files; the QPs of one link had a long stall that ended
    RecoveredStall = "recovered_stall", Fabric, None, None, all;
    /// one NIC's completions towards one peer 4x, the other direction normal
    SlowLinkOneWay = "slow_link_one_way", Fabric, Some(Kind::SlowLinkOneWay), None, alone;
    /// one rank's own completions 4x towards every peer, its peers' towards it normal
    HostSideDelay = "host_side_delay", Fabric, Some(Kind::HostSideDelay), None, alone;
    /// every QP carries its settings; one QP of one rank rides traffic class 0, the rest 106
    QpTclass = "qp_tclass", Fabric, Some(Kind::QpConfigMismatch), None, all;
    /// every QP carries its settings; one QP of one rank has path MTU 1024, its peer 4096
    QpMtu = "qp_mtu", Fabric, Some(Kind::MtuMismatch), None, all;
    /// a frozen receiver: its peers' QPs stall towards it (RNR), its file predates them
    FrozenRank = "frozen_rank", Hang, Some(Kind::HangRoot), None, alone;
    /// a rank stops posting: nothing stalls, its links go quiet first
    StoppedPosting = "stopped_posting", Hang, Some(Kind::HangRoot), None, alone;
    /// a dead path: RETRY_EXC_ERR then WR_FLUSH_ERR at both ends of one link
    DeadLink = "dead_link", Hang, Some(Kind::HangRoot), None, alone;
    /// two frozen receivers that share no peer
    TwoHangs = "two_hangs", Hang, Some(Kind::HangRoot), None, alone;
    /// final files: the QPs towards one rank stalled 7.5 s on RNR and recovered
    RecoveredHang = "recovered_hang", Hang, None, None, alone;
    /// a healthy job snapshotted while idle: every link went quiet at once
    Idle = "idle", Hang, None, None, alone;
}

impl Plant {
    /// The name in `--plant` and planted.json: `"slow_nic"`.
    pub const fn as_str(self) -> &'static str {
        self.spec().name
    }

    pub const fn run(self) -> RunKind {
        self.spec().run
    }

    /// The kind of finding `outliers` must report on the planted culprit.
    pub const fn finding(self) -> Option<Kind> {
        self.spec().finding
    }

    /// The counter the anomaly shows in, when it shows in one.
    pub const fn counter(self) -> Option<&'static str> {
        self.spec().counter
    }

    /// Every plant of a kind of run, in the order `--help` lists them.
    pub fn of(run: RunKind) -> Vec<Plant> {
        Plant::VARIANTS
            .iter()
            .copied()
            .filter(|p| p.run() == run)
            .collect()
    }

    /// What `--plant all` plants: every plant of the kind of run (`--peers`: the fabric's)
    /// that goes beside the others, and the dropped samples only when the sampler ran.
    pub fn all(peers: bool, samples: usize) -> Vec<Plant> {
        let run = if peers {
            RunKind::Fabric
        } else {
            RunKind::Flat
        };
        Plant::of(run)
            .into_iter()
            .filter(|p| p.spec().in_all && (samples > 0 || *p != Plant::SamplesDropped))
            .collect()
    }

    /// The names of `plants`, comma separated: "cnp, tail".
    pub fn names(plants: &[Plant]) -> String {
        plants
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The plant of a name, None for a name that is none.
    pub fn from_name(name: &str) -> Option<Plant> {
        Plant::VARIANTS.iter().copied().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for Plant {
    /// The name, padded as the format asks (`{:<16}`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Plant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Plant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Plant::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown plant {name:?}")))
    }
}

impl clap::ValueEnum for Plant {
    fn value_variants<'a>() -> &'a [Self] {
        Plant::VARIANTS
    }

    /// The name, and for `--help` what is planted and with which options.
    fn to_possible_value(&self) -> Option<PossibleValue> {
        let about = self.spec().about.trim();
        let help = match self.run() {
            RunKind::Flat => about.to_string(),
            RunKind::Fabric => format!("--peers: {about}"),
            RunKind::Hang => format!("--peers, alone: {about}"),
        };
        Some(PossibleValue::new(self.as_str()).help(help))
    }
}

/// A value of `--plant`: "all", or one plant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantArg {
    All,
    One(Plant),
}

impl PlantArg {
    /// The plants the values of `--plant` name: with "all" among them, [`Plant::all`].
    pub fn plants(args: &[PlantArg], peers: bool, samples: usize) -> Vec<Plant> {
        if args.contains(&PlantArg::All) {
            return Plant::all(peers, samples);
        }
        args.iter()
            .filter_map(|a| match a {
                PlantArg::One(p) => Some(*p),
                PlantArg::All => None,
            })
            .collect()
    }
}

impl clap::ValueEnum for PlantArg {
    fn value_variants<'a>() -> &'a [Self] {
        static VALUES: LazyLock<Vec<PlantArg>> = LazyLock::new(|| {
            std::iter::once(PlantArg::All)
                .chain(Plant::VARIANTS.iter().map(|p| PlantArg::One(*p)))
                .collect()
        });
        &VALUES
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            PlantArg::All => Some(PossibleValue::new("all").help(
                "every plant of the kind of run (with --peers, the fabric's) that goes beside the others",
            )),
            PlantArg::One(p) => p.to_possible_value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Every plant's name is unique, snake_case, the Debug name's spelling, read back by
    /// `--plant` and by planted.json.
    #[test]
    fn every_plant_has_one_name_that_reads_back() {
        let mut seen = std::collections::BTreeSet::new();
        for &p in Plant::VARIANTS {
            let name = p.as_str();
            assert!(seen.insert(name), "{name} twice");
            let debug = format!("{p:?}");
            let snake: String = debug
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter()
                        .chain(std::iter::once(c.to_ascii_lowercase()))
                })
                .collect();
            assert_eq!(name, snake, "{debug}");
            assert_eq!(Plant::from_name(name), Some(p));
            assert_eq!(Plant::from_str(name, false), Ok(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Plant>(&json).unwrap(), p);
            assert_eq!(format!("{p:<16}|"), format!("{name:<16}|"));
        }
        assert!(Plant::from_name("bogus").is_none());
    }

    /// `--plant all`: the flat run's thirteen in order (the dropped samples only with
    /// samples), the fabric's nine that go beside the others, never a hang.
    #[test]
    fn all_is_every_plant_that_goes_beside_the_others() {
        assert_eq!(Plant::all(false, 1), Plant::of(RunKind::Flat));
        assert_eq!(Plant::all(false, 1).len(), 13);
        assert!(!Plant::all(false, 0).contains(&Plant::SamplesDropped));
        assert_eq!(
            Plant::names(&Plant::all(true, 0)),
            "slow_nic, slow_link, slow_host, missing_peer, ambiguous_peer, lid_only, recovered_stall, qp_tclass, qp_mtu"
        );
        assert!(Plant::of(RunKind::Hang).iter().all(|p| !p.spec().in_all));
        let args = [PlantArg::One(Plant::Tail), PlantArg::All];
        assert_eq!(PlantArg::plants(&args, false, 0), Plant::all(false, 0));
        let args = [PlantArg::One(Plant::Tail), PlantArg::One(Plant::Tail)];
        assert_eq!(
            PlantArg::plants(&args, false, 0),
            [Plant::Tail, Plant::Tail]
        );
    }

    /// A plant with a counter is found as that counter: a hardware counter, or one that reads
    /// -1 where the others read.
    #[test]
    fn a_counter_is_the_metric_of_a_counter_finding() {
        for &p in Plant::VARIANTS {
            if p.counter().is_some() {
                assert!(
                    matches!(
                        p.finding(),
                        Some(Kind::HwCounter | Kind::CounterUnavailable)
                    ),
                    "{p}"
                );
            }
        }
    }
}
