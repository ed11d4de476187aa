//! What the verdict benchmark plants in runs with peers (`generate --peers`), and the noise a
//! healthy run carries on real hosts (`--noise`). Separate from fabric.rs (the run's shape:
//! ranks, NICs, QPs, peers) so the problems and the noise are read in one place.
//!
//! Plants (one direction of a link is what its sender measures, `a -> b`):
//! - `slow_link_one_way`: the completions of one NIC towards one peer are 4x slower; the other
//!   direction is normal (a congested or degraded direction: large WRs one way, ACKs back).
//! - `host_side_delay`: one rank's own completions are all 4x slower, towards every peer; its
//!   peers' completions towards it are normal (its proxy polls late: CPU starvation, a
//!   descheduled thread; the network is fine).
//!
//! Noise models (a healthy run with them must name nothing):
//! - `jitter`: heavy-tailed per-process scheduling jitter, as on a shared host. Each process
//!   gets its host's speed (base latency x e^(0.08 N(0,1))) and a hiccup rate: the share of its
//!   completions polled late, 0.3% x a Pareto(1.2) draw, at most 5% (ordinary jitter: beyond
//!   that the host is starved, which is `host_side_delay`). A hiccup adds 1 to 6 times the
//!   base latency (a scheduler tick against a 9 us completion): the six-host run, p99
//!   2.5-3x the run's on some processes, robust z 5-19.
//! - `deschedule`: one rank is descheduled once, for milliseconds: 0.3-0.8% of its completions
//!   wait 200-2,000x the base latency.
//! - `few`: 10 to 50 completions per QP (one count per run, each QP up to a tenth more, as a
//!   collective moves the same to every peer) instead of 300 to 340 (short jobs, few messages).
//! - `--latency-sample N` (not a model of its own): the histograms keep one completion in N.

use super::noise;

/// The noise models `--noise` takes.
pub const NOISE_MODELS: [&str; 3] = ["jitter", "deschedule", "few"];

/// How much slower a planted direction or process is.
pub const VERDICT_FACTOR: f64 = 4.0;

/// The noise of a run, per rank, drawn once from the run's seed.
#[derive(Debug, Clone, Default)]
pub struct Noise {
    /// Per rank: its host's speed (latency multiplier); empty without `jitter`.
    speed: Vec<f64>,
    /// Per rank: the share of its completions polled late; empty without `jitter`.
    hiccup: Vec<f64>,
    /// The descheduled rank and the share of its completions caught in the window.
    descheduled: Option<(usize, f64)>,
    /// `few`: the run's completions per QP (each QP up to a tenth more); None without.
    few: Option<u64>,
}

impl Noise {
    /// The models named in `models` for `ranks` ranks; unknown names are an error.
    pub fn new(models: &[String], ranks: usize, rng: &mut fastrand::Rng) -> Result<Noise, String> {
        for m in models {
            if !NOISE_MODELS.contains(&m.as_str()) {
                return Err(format!(
                    "unknown noise model {m:?} (one of: {})",
                    NOISE_MODELS.join(", ")
                ));
            }
        }
        let has = |m: &str| models.iter().any(|x| x == m);
        let mut n = Noise::default();
        if has("few") {
            n.few = Some(10 + rng.u64(0..41));
        }
        if has("jitter") {
            n.speed = (0..ranks).map(|_| (0.08 * noise(rng)).exp()).collect();
            n.hiccup = (0..ranks)
                .map(|_| {
                    let u = rng.f64().max(1e-9);
                    (0.003 * u.powf(-1.0 / 1.2)).min(0.05)
                })
                .collect();
        }
        if has("deschedule") && ranks > 0 {
            n.descheduled = Some((rng.usize(0..ranks), 0.003 + 0.005 * rng.f64()));
        }
        Ok(n)
    }

    /// Completions on one QP of a link.
    pub fn completions(&self, rng: &mut fastrand::Rng) -> u64 {
        if let Some(k) = self.few {
            k + rng.u64(0..=k / 10)
        } else {
            300 + rng.u64(0..40)
        }
    }

    /// One completion's latency (ns) on a QP of `rank` whose healthy latency is `base_ns`
    /// times `factor` (a planted problem); draws exactly as a run without noise when no model
    /// is on.
    pub fn latency(&self, rng: &mut fastrand::Rng, rank: usize, base_ns: f64, factor: f64) -> u64 {
        let tail = if rng.f64() < 0.001 { 3.0 } else { 1.0 };
        let mut x = base_ns * factor * tail * (0.15 * noise(rng)).exp();
        if let (Some(s), Some(h)) = (self.speed.get(rank), self.hiccup.get(rank)) {
            x *= s;
            if rng.f64() < *h {
                x += base_ns * (1.0 + 5.0 * rng.f64());
            }
        }
        if let Some((r, share)) = self.descheduled {
            if r == rank && rng.f64() < share {
                x += base_ns * (200.0 + 1800.0 * rng.f64());
            }
        }
        x as u64
    }
}

/// The extra factor of one direction `from -> to` (its sender `from`): a planted one-way
/// link, or a planted host-side delay on the sender.
pub fn direction_factor(
    one_way: Option<(usize, usize)>,
    host_side: Option<usize>,
    from: usize,
    to: usize,
) -> f64 {
    let mut f = 1.0;
    if one_way == Some((from, to)) {
        f *= VERDICT_FACTOR;
    }
    if host_side == Some(from) {
        f *= VERDICT_FACTOR;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_model_draws_as_before_and_unknown_models_are_refused() {
        let mut a = fastrand::Rng::with_seed(3);
        let mut b = fastrand::Rng::with_seed(3);
        let n = Noise::new(&[], 8, &mut a).expect("no model");
        let x: Vec<u64> = (0..50).map(|_| n.latency(&mut a, 1, 9000.0, 1.0)).collect();
        let y: Vec<u64> = (0..50)
            .map(|_| {
                let tail = if b.f64() < 0.001 { 3.0 } else { 1.0 };
                (9000.0 * 1.0 * tail * (0.15 * noise(&mut b)).exp()) as u64
            })
            .collect();
        assert_eq!(x, y);
        assert!(Noise::new(&["storm".into()], 8, &mut a).is_err());
    }

    #[test]
    fn jitter_is_heavy_tailed_and_bounded() {
        let mut rng = fastrand::Rng::with_seed(5);
        let n = Noise::new(&["jitter".into()], 4096, &mut rng).expect("jitter");
        let mut h = n.hiccup.clone();
        h.sort_by(f64::total_cmp);
        let med = h[h.len() / 2];
        assert!(med > 0.003 && med < 0.006, "median hiccup rate {med}");
        assert!(h[h.len() - 1] <= 0.05 + 1e-12);
        // Heavy-tailed: some processes are 5x the median and more.
        assert!(
            h.iter().filter(|x| **x >= 5.0 * med).count() > 100,
            "{:?}",
            &h[h.len() - 20..]
        );
    }

    #[test]
    fn directions_are_slow_one_way_and_host_side_on_the_row_only() {
        assert_eq!(direction_factor(Some((1, 2)), None, 1, 2), VERDICT_FACTOR);
        assert_eq!(direction_factor(Some((1, 2)), None, 2, 1), 1.0);
        assert_eq!(direction_factor(None, Some(3), 3, 0), VERDICT_FACTOR);
        assert_eq!(direction_factor(None, Some(3), 0, 3), 1.0);
    }
}
