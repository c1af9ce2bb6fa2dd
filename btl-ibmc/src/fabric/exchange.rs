//! The fabric's allgather: a barrier counted by generation, so the same
//! ranks can run any number of exchanges back to back. A round's result is
//! kept until the next round completes, which needs every rank to have
//! arrived again, so no rank can overwrite a result a slow rank has not
//! yet copied.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::poison::lock;
use crate::transport::TransportError;

/// Long enough for any test, short enough that a rank that died turns a
/// hang into a failure.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct AllgatherBarrier {
    size: usize,
    state: Mutex<Round>,
    round_done: Condvar,
}

struct Round {
    generation: u64,
    arrived: usize,
    contributions: Vec<Option<Vec<u8>>>,
    /// The last completed round's concatenation, or why it failed.
    result: Result<Vec<u8>, String>,
}

impl AllgatherBarrier {
    pub(crate) fn new(size: usize) -> Self {
        AllgatherBarrier {
            size,
            state: Mutex::new(Round { generation: 0, arrived: 0, contributions: vec![None; size], result: Ok(Vec::new()) }),
            round_done: Condvar::new(),
        }
    }

    /// Contributes `mine` for `rank`, waits for every rank, and fills `all`
    /// with the contributions in rank order.
    pub(crate) fn allgather(&self, rank: usize, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let mut round = lock(&self.state);
        let generation = round.generation;
        round.contributions[rank] = Some(mine.to_vec());
        round.arrived += 1;
        if round.arrived == self.size {
            round.result = concatenate(&mut round.contributions);
            round.arrived = 0;
            round.generation += 1;
            self.round_done.notify_all();
        } else {
            let (waited, timeout) = self
                .round_done
                .wait_timeout_while(round, EXCHANGE_TIMEOUT, |round| round.generation == generation)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            round = waited;
            if timeout.timed_out() {
                return Err(TransportError::Failed(format!(
                    "fabric exchange: rank {rank} waited {} s, only {} of {} ranks arrived",
                    EXCHANGE_TIMEOUT.as_secs(),
                    round.arrived,
                    self.size
                )));
            }
        }
        let gathered = round.result.as_ref().map_err(|why| TransportError::Failed(why.clone()))?;
        if gathered.len() != all.len() {
            return Err(TransportError::Failed(format!(
                "fabric exchange: rank {rank} expected {} bytes in all, {} were gathered",
                all.len(),
                gathered.len()
            )));
        }
        all.copy_from_slice(gathered);
        Ok(())
    }
}

fn concatenate(contributions: &mut [Option<Vec<u8>>]) -> Result<Vec<u8>, String> {
    let parts: Vec<Vec<u8>> = contributions.iter_mut().map(|slot| slot.take().unwrap_or_default()).collect();
    let first_len = parts[0].len();
    if let Some(rank) = parts.iter().position(|part| part.len() != first_len) {
        return Err(format!(
            "fabric exchange: rank {rank} contributed {} bytes but rank 0 contributed {first_len}",
            parts[rank].len()
        ));
    }
    Ok(parts.concat())
}
