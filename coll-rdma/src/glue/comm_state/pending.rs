//! The non-blocking barriers (MPI_Ibarrier, started persistent barriers) a
//! communicator has under way, each with the request it completes.
//!
//! Invariants: runs advance strictly in the order they were posted (a run
//! writes into the slots the earlier ones wrote, and a slot's value must
//! only grow: see `collectives::barrier::run`), so only the oldest one is
//! ever advanced, and a later one takes its first step once all earlier
//! ones are done; the queue is empty before a blocking barrier runs on the
//! same slots (`drain`). A run that fails completes its request and every
//! later one with an error.

use std::collections::VecDeque;
use std::ffi::c_int;

use btl_ibmc::{TransportError, Windows};
use ompi_sys as sys;

use crate::collectives::barrier::run::BarrierRun;
use crate::schedule::{Schedule, Step};
use super::super::request::RequestRef;

/// Polls of a drain between yields of the core (ranks may share cores).
const DRAIN_SPINS_BEFORE_YIELD: u32 = 64;

#[derive(Default)]
pub(in crate::glue) struct PendingBarriers {
    runs: VecDeque<(BarrierRun, RequestRef)>,
}

impl PendingBarriers {
    pub(in crate::glue) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub(in crate::glue) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Drops every run; their requests complete with an error.
    pub(in crate::glue) fn abandon(&mut self) {
        self.runs.clear();
    }

    /// Queues `run` behind the earlier ones; takes its first step now (its
    /// arrival) if there are none.
    pub(in crate::glue) fn post<T: Windows + ?Sized>(
        &mut self,
        run: BarrierRun,
        request: RequestRef,
        transport: &mut T,
    ) -> Result<(), TransportError> {
        self.runs.push_back((run, request));
        if self.runs.len() == 1 { self.advance(transport) } else { Ok(()) }
    }

    /// Advances the oldest run, and each next one once it is done, until
    /// one must wait. An error ends every pending run with it.
    pub(in crate::glue) fn advance<T: Windows + ?Sized>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        while let Some((run, _)) = self.runs.front_mut() {
            match run.advance(transport) {
                Ok(Step::Pending) => return Ok(()),
                Ok(Step::Done) => {
                    if let Some((_, request)) = self.runs.pop_front() {
                        request.finish(sys::MPI_SUCCESS as c_int);
                    }
                }
                Err(why) => {
                    self.abandon();
                    return Err(why);
                }
            }
        }
        Ok(())
    }

    /// Runs every pending barrier to its end (before a blocking barrier or
    /// the communicator's teardown). Bounded: each run fails after the
    /// fault timeout.
    pub(in crate::glue) fn drain<T: Windows + ?Sized>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        let mut polls = 0u32;
        loop {
            self.advance(transport)?;
            if self.runs.is_empty() {
                return Ok(());
            }
            polls += 1;
            if polls % DRAIN_SPINS_BEFORE_YIELD == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
