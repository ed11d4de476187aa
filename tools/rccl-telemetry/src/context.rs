//! The run every analysing command takes: the files the load read (one per rank, pruned to what
//! the command reads: `load::Keep`), and what more than one analysis reads of them, each built
//! once per command and only when first asked for: the latest file of each rank, the run's QP
//! address index, the link join and the hang's wait-for graph.
//!
//! `outliers` reads the links (its fabric rules) and the hang (its hang rules, which also look
//! up the stalled QPs' peers); `report` the outliers, the links (its matrix) and the hang (its
//! hang line); `stalls` and `summary` the QP index (the stalled QPs' peers) and the hang. Each
//! command builds one context and hands it to every analysis, so none of these is built twice.
//! The analyses themselves (`links::join`, `hang::analyse_with`) take their inputs as
//! arguments and know nothing of the context.

use crate::hang::Hang;
use crate::links::LinkReport;
use crate::load::addr::QpIndex;
use crate::load::Run;
use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::collections::BTreeMap;

/// How many times each shared part of a context was built: at most once each.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Builds {
    pub latest: u32,
    pub qp_index: u32,
    pub links: u32,
    pub hang: u32,
}

/// One run and its shared analyses, built on first use.
pub struct RunContext<'r> {
    run: &'r Run,
    latest: OnceCell<BTreeMap<crate::load::ranks::RankKey, usize>>,
    qp_index: OnceCell<Cow<'r, QpIndex>>,
    links: OnceCell<LinkReport>,
    hang: OnceCell<Hang>,
    jobs: OnceCell<Option<crate::jobs::Jobs>>,
    builds: Cell<Builds>,
}

impl<'r> RunContext<'r> {
    pub fn new(run: &'r Run) -> RunContext<'r> {
        RunContext {
            run,
            latest: OnceCell::new(),
            qp_index: OnceCell::new(),
            links: OnceCell::new(),
            hang: OnceCell::new(),
            jobs: OnceCell::new(),
            builds: Cell::new(Builds::default()),
        }
    }

    /// The files read.
    pub fn run(&self) -> &'r Run {
        self.run
    }

    fn built(&self, part: impl FnOnce(&mut Builds)) {
        let mut b = self.builds.get();
        part(&mut b);
        self.builds.set(b);
    }

    /// What was built so far, and how many times.
    pub fn builds(&self) -> Builds {
        self.builds.get()
    }

    /// The file each rank (host, pid) is read from: its latest ([`crate::load::latest_per_rank`]).
    pub fn latest(&self) -> &BTreeMap<crate::load::ranks::RankKey, usize> {
        self.latest.get_or_init(|| {
            self.built(|b| b.latest += 1);
            crate::load::latest_per_rank(&self.run.files)
        })
    }

    /// Who holds each (GID or LID, QPN) of the run ([`crate::load::qp_index`]: the index a
    /// pruned read built, else one built from the QPs).
    pub fn qp_index(&self) -> &QpIndex {
        self.qp_index.get_or_init(|| {
            self.built(|b| b.qp_index += 1);
            crate::load::qp_index(self.run)
        })
    }

    /// The run's QPs joined into links ([`crate::links::join`]).
    pub fn links(&self) -> &LinkReport {
        self.links.get_or_init(|| {
            self.built(|b| b.links += 1);
            crate::links::join(self.run)
        })
    }

    /// The link join and the hang, built if they were not yet, and nothing else: the QP index
    /// and the latest files are given back first, for a reader that needs only these two (the
    /// report's page, drawn after every analysis has run).
    pub fn into_links_and_hang(self) -> (LinkReport, Hang) {
        self.hang();
        self.links();
        (
            self.links.into_inner().unwrap_or_default(),
            self.hang.into_inner().unwrap_or_default(),
        )
    }

    /// The jobs the files are of, when more than one ([`crate::jobs::detect`]).
    pub fn jobs(&self) -> Option<&crate::jobs::Jobs> {
        self.jobs
            .get_or_init(|| crate::jobs::detect(self.run))
            .as_ref()
    }

    /// The wait-for graph of the run and its roots ([`crate::hang::analyse_with`]); of each
    /// job on its own when the files are of several ([`crate::hang::of_jobs`]: one job's end
    /// is not another's quiet link, and their ranks do not wait on each other).
    pub fn hang(&self) -> &Hang {
        self.hang.get_or_init(|| {
            let h = match self.jobs() {
                None => crate::hang::analyse_with(self.run, self.qp_index(), self.latest()),
                Some(jobs) => crate::hang::of_jobs(self.run, self.qp_index(), self.latest(), jobs),
            };
            self.built(|b| b.hang += 1);
            h
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate_fabric, GenOptions, Plant};
    use crate::load::{load_run_keeping, Keep};
    use crate::{outliers, report, stalls, summary};

    /// A run of eight ranks with peers and a frozen rank: stalled QPs, a hang root, links.
    fn frozen(dir: &std::path::Path) {
        let o = GenOptions {
            ranks: 8,
            ranks_per_host: 4,
            devices_per_rank: 4,
            plants: vec![Plant::FrozenRank],
            ..Default::default()
        };
        generate_fabric(dir, &o, 2).expect("generate");
    }

    const ONCE: Builds = Builds {
        latest: 1,
        qp_index: 1,
        links: 1,
        hang: 1,
    };

    /// `report` (the summary, the outliers and the page) and `outliers` read the links, the QP
    /// index, the latest files and the hang many times over; each is built once. Nothing is
    /// built before it is asked for.
    #[test]
    fn each_shared_part_is_built_once_per_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        frozen(dir.path());
        let run = load_run_keeping(&[dir.path().to_path_buf()], Keep::Links);
        let cx = RunContext::new(&run);
        assert_eq!(cx.builds(), Builds::default());
        let s = summary::summarize(&run, false);
        let o = outliers::find_in(&cx, &outliers::Options::default());
        assert!(!o.findings.is_empty() && !cx.hang().roots.is_empty());
        assert_eq!(cx.builds(), ONCE, "outliers");
        // The page reads the links and the hang again, from the context it then drops.
        let _ = cx.links();
        let _ = cx.hang();
        assert_eq!(cx.builds(), ONCE, "report");
        let page = report::render(cx, &s, &o, 16);
        assert!(page.contains("Hang"));
        // `stalls` and `summary` read the run pruned for the hang: the index the read built.
        let run = load_run_keeping(&[dir.path().to_path_buf()], Keep::Hang);
        let cx = RunContext::new(&run);
        let st = stalls::find_in(&cx, &[]);
        assert!(st.found() && stalls::one_line(&st).is_some());
        assert_eq!(cx.builds(), Builds { links: 0, ..ONCE }, "stalls");
    }
}
