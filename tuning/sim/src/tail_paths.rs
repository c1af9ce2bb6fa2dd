//! Where a lossy bcast's latency tail comes from (issue 36): bcasts drawn
//! at random on the loss-free timeline of `bcast::Schedule`, each lost
//! piece repaired the way the datagram flavour repairs it, and the path
//! that finished the bcast last recorded.
//!
//! `bcast::multicast` computes the exact distribution when only the
//! multicast loses (NACKs and repairs never). Here a NACK and a repair may
//! be lost too (`Rules::control_loss`, as udp's injected loss does), and
//! then the leaf repeats its NACK after its RTO, doubling, so the paths
//! are sampled rather than summed. Paths, for one lost piece at one leaf:
//! a later piece (or the copy of one) arrives and reveals the gap, and the
//! leaf NACKs at once; no later piece arrives (a lost tail) and the leaf,
//! having a piece of the message, NACKs the missing end after the wait of
//! `btl_ibmc::rmcast::repair::tail_nack_wait` (the same function the leaf
//! runs); or the collector's timeout resends it. Whichever comes first
//! repairs the piece. Congestion control's back-off is not modelled
//! (the loss tolerance keeps isolated random loss from shrinking the
//! window, docs/rmcast-congestion.md), nor a receiver's scheduling.

use std::time::Duration;

use btl_ibmc::rmcast::repair::tail_nack_wait;

use crate::bcast::{component_co_roots, Schedule};
use crate::ranks::Ranks;

/// How the piece that finished a receiver last got there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Path {
    /// No piece lost, or every lost one repaired before the last original.
    Original,
    /// The copy of a repeated piece (`RmcastConfig::tail_repeat`).
    Copy,
    /// A NACK at the gap a later piece revealed.
    Nack,
    /// The same after a lost NACK or repair: the leaf asked again.
    NackRepeated,
    /// The leaf's NACK of a lost tail, after the stream fell silent.
    TailNack,
    TailNackRepeated,
    /// The collector's timeout.
    Timeout,
}

impl Path {
    pub const ALL: [Path; 7] = [Path::Original, Path::Copy, Path::Nack, Path::NackRepeated, Path::TailNack, Path::TailNackRepeated, Path::Timeout];

    pub fn name(&self) -> &'static str {
        match self {
            Path::Original => "no repair",
            Path::Copy => "copy",
            Path::Nack => "NACK at a gap",
            Path::NackRepeated => "NACK repeated (NACK or repair lost)",
            Path::TailNack => "tail NACK",
            Path::TailNackRepeated => "tail NACK repeated",
            Path::Timeout => "collector timeout",
        }
    }
}

/// The repair rules and their timers.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Loss per datagram and receiver.
    pub loss: f64,
    /// Whether NACKs and unicast repairs are lost at `loss` too (udp's
    /// injected loss) rather than carried by a reliable channel.
    pub control_loss: bool,
    /// Whether the root multicasts a NACKed piece besides resending it
    /// (congestion control does, over udp): a repair is then lost only
    /// if both copies are.
    pub multicast_repairs: bool,
    /// Whether a leaf NACKs a lost tail (`RmcastConfig::tail_nack`).
    pub tail_nack: bool,
    /// The leaf's NACK RTO, and the ceiling its doubling stops at.
    pub leaf_rto_ns: f64,
    /// The explicit-ACK delay, the least wait before a tail NACK.
    pub ack_delay_ns: f64,
    pub repeat_ceiling_ns: f64,
    /// The collector's timeout.
    pub timeout_ns: f64,
}

impl Rules {
    /// The component's defaults on `ranks`: the leaf's RTO at its floor
    /// (`nack_retry_floor`) or three NACK round trips, the collector's
    /// configured timeout, repeats up to the RTO ceiling; with
    /// `control_loss` (udp), congestion control's multicast repairs.
    pub fn component(ranks: &Ranks, loss: f64, control_loss: bool, tail_nack: bool) -> Rules {
        let config = btl_ibmc::RmcastConfig::default();
        let floor = config.nack_retry_floor.map_or(0.0, |floor| floor.as_nanos() as f64);
        let nack_round_trip = 2.0 * ranks.hop(0, ranks.size().max(2) - 1).arrival_after_ns(64);
        Rules {
            loss,
            control_loss,
            multicast_repairs: control_loss,
            tail_nack,
            leaf_rto_ns: floor.max(3.0 * nack_round_trip),
            ack_delay_ns: ranks.calibration.rmcast.ack_delay_ns,
            repeat_ceiling_ns: config.congestion.rto_ceiling.as_nanos() as f64,
            timeout_ns: ranks.calibration.rmcast.timeout_ns,
        }
    }
}

/// The sampled distribution and the paths of its slowest bcasts.
#[derive(Clone, Debug)]
pub struct PathStudy {
    pub samples: usize,
    pub lossless_ns: f64,
    pub mean_ns: f64,
    pub median_ns: f64,
    pub p99_ns: f64,
    /// Among the slowest `SLOW_SHARE` of the bcasts: how many ended with
    /// each path, in `Path::ALL`'s order.
    pub slow_paths: Vec<(Path, usize)>,
    /// Among all bcasts, the same.
    pub all_paths: Vec<(Path, usize)>,
}

/// The share of the slowest bcasts whose paths are counted.
pub const SLOW_SHARE: f64 = 0.05;

/// splitmix64: reproducible draws without a dependency.
struct Draws(u64);

impl Draws {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn lost(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// `samples` bcasts of `bytes` from rank 0 with the component's co-roots;
/// None when nothing is sent (fewer than 2 ranks, no bytes).
pub fn study(ranks: &Ranks, bytes: usize, rules: &Rules, samples: usize, seed: u64) -> Option<PathStudy> {
    let schedule = Schedule::new(ranks, bytes, component_co_roots(ranks.size()))?;
    let resend: Vec<f64> = (0..schedule.pieces.len()).map(|j| schedule.resend_ns(ranks, j) - schedule.copy_ns(j)).collect();
    let mut draws = Draws(seed);
    let mut outcomes: Vec<(f64, Path)> = (0..samples.max(1))
        .map(|_| {
            let mut worst = (schedule.co_root_done, Path::Original);
            for (c, &leaves) in schedule.leaves.iter().enumerate() {
                for _ in 0..leaves {
                    let done = receiver_done(&schedule, &resend, c, rules, &mut draws);
                    if done.0 > worst.0 {
                        worst = done;
                    }
                }
            }
            worst
        })
        .collect();
    outcomes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = outcomes.len();
    let quantile = |q: f64| outcomes[((n as f64 * q) as usize).min(n - 1)].0;
    let tally = |slice: &[(f64, Path)]| Path::ALL.iter().map(|&path| (path, slice.iter().filter(|o| o.1 == path).count())).collect();
    let slow_from = n - ((n as f64 * SLOW_SHARE).ceil() as usize).clamp(1, n);
    Some(PathStudy {
        samples: n,
        lossless_ns: schedule.lossless_ns(),
        mean_ns: outcomes.iter().map(|o| o.0).sum::<f64>() / n as f64,
        median_ns: quantile(0.5),
        p99_ns: quantile(0.99),
        slow_paths: tally(&outcomes[slow_from..]),
        all_paths: tally(&outcomes),
    })
}

/// When one leaf of replica index `c` has delivered the whole message,
/// and how its last piece got there.
fn receiver_done(schedule: &Schedule, resend: &[f64], c: usize, rules: &Rules, draws: &mut Draws) -> (f64, Path) {
    let count = schedule.pieces.len();
    let taken_in = |at: f64| at + schedule.net_receive_ns;
    // When each piece first came by multicast, and by which.
    let got: Vec<Option<(f64, Path)>> = (0..count)
        .map(|j| {
            let original = (!draws.lost(rules.loss)).then(|| (taken_in(schedule.arrival[c][j]), Path::Original));
            let copy = schedule.copy_delivered(c, j).filter(|_| !draws.lost(rules.loss)).map(|at| (at - schedule.copy_ns(j), Path::Copy));
            original.into_iter().chain(copy).min_by(|a, b| a.0.total_cmp(&b.0))
        })
        .collect();
    // The first arrival after each piece: what reveals its loss.
    let mut revealed_at = vec![None::<f64>; count];
    let mut next: Option<f64> = None;
    for j in (0..count).rev() {
        revealed_at[j] = next;
        if let Some((at, _)) = got[j] {
            next = Some(next.map_or(at, |n: f64| n.min(at)));
        }
    }
    let last_arrival = got.iter().flatten().map(|g| g.0).reduce(f64::max);
    let (mut delivered, mut last) = (0.0f64, (0.0f64, Path::Original));
    for j in 0..count {
        let have = got[j].unwrap_or_else(|| repaired(schedule, resend, j, revealed_at[j], last_arrival, rules, draws));
        if have.0 >= last.0 {
            last = have;
        }
        delivered = delivered.max(have.0) + schedule.copy_ns(j);
    }
    (delivered, last.1)
}

/// When a lost piece `j` is taken in, by the first of the leaf's NACKs
/// (at the gap, or at the tail) and the collector's timeout.
fn repaired(schedule: &Schedule, resend: &[f64], j: usize, revealed: Option<f64>, last_arrival: Option<f64>, rules: &Rules, draws: &mut Draws) -> (f64, Path) {
    let round = schedule.control_ns + resend[j];
    let control_loss = if rules.control_loss { rules.loss } else { 0.0 };
    let wait = tail_nack_wait(Duration::from_nanos(rules.leaf_rto_ns as u64), Duration::from_nanos(rules.ack_delay_ns as u64));
    let by_nack = match (revealed, last_arrival) {
        (Some(at), _) => Some((at, Path::Nack, Path::NackRepeated)),
        (None, Some(silent_from)) if rules.tail_nack => {
            Some((silent_from + wait.as_nanos() as f64, Path::TailNack, Path::TailNackRepeated))
        }
        _ => None,
    };
    let by_nack = by_nack.map(|(first, path, repeated)| {
        // Asked again at the leaf's RTO, doubling, until the NACK and its
        // repair both get through.
        let (mut at, mut interval, mut times) = (first, rules.leaf_rto_ns, 0);
        let repair_lost = |draws: &mut Draws| draws.lost(control_loss) && (!rules.multicast_repairs || draws.lost(rules.loss));
        while draws.lost(control_loss) || repair_lost(draws) {
            at += interval;
            interval = (2.0 * interval).min(rules.repeat_ceiling_ns);
            times += 1;
        }
        (at + round, if times == 0 { path } else { repeated })
    });
    // The collector's timer, doubling for a member that stays silent.
    let (mut at, mut interval) = (schedule.posted[j] + rules.timeout_ns, rules.timeout_ns);
    while draws.lost(control_loss) {
        at += interval;
        interval *= 2.0;
    }
    let by_timeout = (at + resend[j], Path::Timeout);
    by_nack.filter(|n| n.0 <= by_timeout.0).unwrap_or(by_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{Calibration, Level, Multicast};

    fn calibration() -> Calibration {
        let level = Level { latency_ns: 1000.0, ..Level::default() };
        let mut calibration = Calibration { shm: level, net: level, multicast: Multicast { latency_ns: 2000.0, ..Multicast::default() }, ..Calibration::default() };
        calibration.rmcast.fragment_bytes = 100;
        calibration
    }

    fn rules(loss: f64, tail_nack: bool) -> Rules {
        Rules { loss, control_loss: false, multicast_repairs: false, tail_nack, leaf_rto_ns: 50_000.0, ack_delay_ns: 20_000.0, repeat_ceiling_ns: 1e9, timeout_ns: 1e6 }
    }

    #[test]
    fn without_loss_every_bcast_takes_the_loss_free_time_and_no_repair() {
        let calibration = calibration();
        let ranks = Ranks::new(8, 1, &calibration);
        let study = study(&ranks, 1000, &rules(0.0, true), 50, 1).expect("sent");
        assert_eq!((study.mean_ns, study.median_ns, study.p99_ns), (study.lossless_ns, study.lossless_ns, study.lossless_ns));
        assert_eq!(study.all_paths[0], (Path::Original, 50));
    }

    /// One receiver, 10 pieces, the last and its copy lost half the time
    /// each: with the tail NACK a quarter of the bcasts end by it (both
    /// lost, an earlier piece arrived), at the last arrival + the leaf's
    /// RTO + NACK and resend; without it, the same quarter by the timeout.
    #[test]
    fn a_tail_lost_with_its_copy_ends_by_the_tail_nack_or_else_the_timeout() {
        let calibration = calibration();
        let ranks = Ranks::new(2, 1, &calibration);
        for (tail_nack, path) in [(true, Path::TailNack), (false, Path::Timeout)] {
            let study = study(&ranks, 1000, &rules(0.5, tail_nack), 4000, 7).expect("sent");
            let share = study.all_paths.iter().find(|p| p.0 == path).expect("counted").1 as f64 / 4000.0;
            // P(last and its copy lost) = 1/4; P(every piece lost) is 2^-11.
            assert!((share - 0.25).abs() < 0.03, "tail NACK {tail_nack}: {share} of the bcasts by {path:?}");
            assert!(study.all_paths.iter().all(|p| p.1 == 0 || [Path::Original, Path::Copy, Path::Nack, path].contains(&p.0)), "{:?}", study.all_paths);
        }
        let with = study(&ranks, 1000, &rules(0.5, true), 4000, 7).expect("sent");
        let without = study(&ranks, 1000, &rules(0.5, false), 4000, 7).expect("sent");
        assert!(with.mean_ns < without.mean_ns, "{} vs {}", with.mean_ns, without.mean_ns);
    }

    /// With NACKs and repairs lost as well, the leaf asks again: some
    /// bcasts end by a repeated NACK, none by the timeout when the leaf's
    /// repeats come well before it.
    #[test]
    fn lost_nacks_and_repairs_are_asked_again_before_the_timeout() {
        let calibration = calibration();
        let ranks = Ranks::new(4, 1, &calibration);
        let rules = Rules { control_loss: true, timeout_ns: 1e9, ..rules(0.2, true) };
        let study = study(&ranks, 1000, &rules, 2000, 3).expect("sent");
        let count = |path: Path| study.all_paths.iter().find(|p| p.0 == path).map_or(0, |p| p.1);
        assert!(count(Path::NackRepeated) + count(Path::TailNackRepeated) > 0, "{:?}", study.all_paths);
        assert_eq!(count(Path::Timeout), 0, "{:?}", study.all_paths);
    }
}
