//! A rank's bookkeeping while it plays scripts of runs on several
//! communicators in a random interleaving (the run fabric tests): per
//! communicator its schedule queue and how many calls it posted and saw
//! finish, and the draw that picks each move. Invariant: `finished[c] <=
//! posted[c]`; a test's own calls (what to post, the blocking ones) stay
//! in the test.

use std::time::{Duration, Instant};

use btl_ibmc::fabric::FabricEndpoint;
use coll_rdma_core::schedule_queue::{Lane, Run, ScheduleQueue};

use super::XorShift;

pub struct Turns<'b> {
    pub rank: usize,
    pub queues: Vec<ScheduleQueue<'b, FabricEndpoint>>,
    pub posted: Vec<usize>,
    pub finished: Vec<usize>,
    pub rng: XorShift,
    /// Calls in each communicator's script.
    lengths: Vec<usize>,
}

impl<'b> Turns<'b> {
    pub fn new(rank: usize, seed: u64, lengths: Vec<usize>) -> Self {
        let communicators = lengths.len();
        Turns {
            rank,
            queues: (0..communicators).map(|_| ScheduleQueue::default()).collect(),
            posted: vec![0; communicators],
            finished: vec![0; communicators],
            rng: XorShift::new(seed ^ (rank as u64 + 1).wrapping_mul(0x9E37_79B9)),
            lengths,
        }
    }

    pub fn done(&self) -> bool {
        self.finished.iter().sum::<usize>() == self.lengths.iter().sum::<usize>()
    }

    pub fn where_it_is(&self) -> String {
        format!("rank {}: posted {:?}, finished {:?}", self.rank, self.posted, self.finished)
    }

    /// The next move: a random communicator, and whether to post its next
    /// call (one is left and fewer than `max_outstanding` are queued, on a
    /// coin toss) rather than advance its queue.
    pub fn draw(&mut self, max_outstanding: usize) -> (usize, bool) {
        let comm = self.rng.below(self.lengths.len());
        let may_post = self.posted[comm] < self.lengths[comm] && self.queues[comm].len() < max_outstanding;
        (comm, may_post && self.rng.below(2) == 0)
    }

    pub fn post(&mut self, comm: usize, lane: Lane, run: Run<'b, FabricEndpoint>) {
        self.queues[comm].post(lane, run);
        self.posted[comm] += 1;
    }

    /// One advance of `comm`'s queue; the first failed run's error.
    ///
    /// Also checks the word the queue names as awaited (what MPI_Wait
    /// polls alone between advances, `ScheduleQueue::sole_lane_awaits`):
    /// an advance made while that word is still missing, before and after,
    /// must change nothing a waiter sees (the run still pending, the same
    /// word named). A run naming a word that does not hold it back would
    /// keep its waiter polling while it could move.
    pub fn advance(&mut self, comm: usize, transport: &mut FabricEndpoint) -> Result<(), String> {
        let rank = self.rank;
        let mut failure = None;
        let finished = &mut self.finished[comm];
        let finished_before = *finished;
        let queue = &mut self.queues[comm];
        let watched = queue.sole_lane_awaits().filter(|word| !word.arrived(&*transport));
        queue.advance(transport, |ticket, outcome| {
            *finished += 1;
            if let Err(why) = outcome {
                failure.get_or_insert(format!("rank {rank} comm {comm} call {}: {why}", ticket.0));
            }
        });
        if let Some(word) = watched.filter(|word| !word.arrived(&*transport))
            && failure.is_none()
            && (*finished != finished_before || queue.sole_lane_awaits() != Some(word))
        {
            return Err(format!(
                "rank {rank} comm {comm}: the queue named {word:?} as awaited, but an advance while it was missing moved it \
                 (finished {} -> {}, now awaiting {:?})",
                finished_before,
                *finished,
                queue.sole_lane_awaits()
            ));
        }
        failure.map_or(Ok(()), Err)
    }
}

/// A rank of a run fabric test: its bookkeeping and its next move.
pub trait TakesTurns<'b> {
    fn turns(&self) -> &Turns<'b>;
    /// One move (post, advance or a blocking call); the first failure.
    fn take_turn(&mut self) -> Result<(), String>;
}

/// Every rank on the calling thread, a random one moving at a time, until
/// all scripts are played: a run that waited inside `advance` for a peer
/// would wait for a rank that cannot move, and fail `deadline`.
pub fn play_on_one_thread<'b, P: TakesTurns<'b>>(players: &mut [P], seed: u64, deadline: Duration) {
    let mut rng = XorShift::new(seed);
    let started = Instant::now();
    while !players.iter().all(|player| player.turns().done()) {
        let positions = || players.iter().map(|player| player.turns().where_it_is()).collect::<Vec<_>>();
        assert!(started.elapsed() < deadline, "seed {seed}: {:?}", positions());
        let player = rng.below(players.len());
        players[player].take_turn().unwrap_or_else(|why| panic!("seed {seed}: {why}"));
    }
}
