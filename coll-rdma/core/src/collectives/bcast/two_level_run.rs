//! One two-level bcast as a resumable run (`Schedule`): the blocking
//! call's stages (`two_level`) in its order, each stage the flat run
//! (`FlatBcastRun`: put tree, single copy or, among the leaders over a
//! datagram multicast, the datagram run, as the stage's own `start`
//! picks) over the stage's subset.
//!
//! # States
//!
//! `stages` holds the stages this rank takes part in, in the blocking
//! order: the root's node (if this rank is on it), the leaders' (if it
//! leads), its own node from its leader (if it is not on the root's
//! node). `current` is the stage advancing; the stages before it are
//! done. All are started at post, so every stage numbers its calls in
//! the communicator's post order, whichever order they later run in;
//! the message buffer is lent to one stage at a time (`take_buffer`,
//! `lend_buffer`), the current one, and handed on when it is done.
//!
//! A stage that fails (a fault timeout, a peer that died, an abandoned
//! message) fails the run, but first every later stage this rank roots
//! tells its receivers that the message will not come (`abandon_at_root`
//! of the stage's path, driven like any stage): as the blocking call's
//! `abandon_leaders_stage`, so that no rank of a later stage waits for a
//! message that will not come (the fault timeout is off by default).
//!
//! The stage runs keep their own waits' fault timeout; a run advances
//! only as its lane's oldest (`schedule_queue`), so a rank's stages of
//! call e+1 begin after all of its stages of call e ended, as in the
//! blocking call.
//!
//! The leaders' stage over datagram multicast (verbs UD multicast) ends,
//! at the root's leader, once its last piece is sent, as the flat
//! datagram run does; unlike the blocking call it does not settle there
//! (wait for every leader's ACK). The blocking call settles because the
//! waits of its node stages serve only those stages, so a root leader
//! that went on would never resend a lost piece; a run returns to the
//! progress loop instead of waiting, and the bcast's side progress
//! (`Bcast::progress`, which serves the leaders' stage) runs at every
//! pass while runs are pending and at every pass of the drain before a
//! blocking call (the glue's `ReadyComm`; `multicast_run` for the flat
//! run). Settling inside a run would hold the root leader's request
//! until the slowest leader acknowledged, where MPI asks only that the
//! message be out of the application's buffer (it is in the window).

use std::sync::Arc;

use btl_ibmc::{Subset, Transport, TransportError};

use super::run::FlatBcastRun;
use crate::schedule::{Schedule, Step};

/// One stage of one call: its run, over `subset`.
pub(super) struct StageRun<'a> {
    pub(super) subset: Arc<Subset>,
    pub(super) run: FlatBcastRun<'a>,
    /// This rank roots the stage (sends the message in it).
    pub(super) as_root: bool,
}

/// One rank's part of one two-level bcast; made by `TwoLevelBcast::start`.
pub struct TwoLevelBcastRun<'a> {
    stages: Vec<StageRun<'a>>,
    current: usize,
    /// The message buffer while no stage holds it (before the first
    /// stage's first advance, between stages, at the end).
    buf: Option<&'a mut [u8]>,
    /// The first stage's failure, kept while later stages abandon.
    failure: Option<TransportError>,
}

impl<'a> TwoLevelBcastRun<'a> {
    /// `stages` were started in order, each parked right after (its buffer
    /// taken back into `buf`).
    pub(super) fn new(stages: Vec<StageRun<'a>>, buf: &'a mut [u8]) -> Self {
        TwoLevelBcastRun { stages, current: 0, buf: Some(buf), failure: None }
    }

    /// After stage `current` failed with `why`: the later stages this rank
    /// roots abandon their message, the others are dropped unadvanced.
    fn fail_from_here(&mut self, why: TransportError) {
        self.failure = Some(why);
        let later = self.stages.split_off(self.current + 1);
        self.stages.extend(later.into_iter().filter(|stage| stage.as_root).map(|mut stage| {
            stage.run.abandon_at_root();
            stage
        }));
    }
}

impl<T: Transport + ?Sized> Schedule<T> for TwoLevelBcastRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        let transport = &*transport;
        while let Some(stage) = self.stages.get_mut(self.current) {
            if let Some(buf) = self.buf.take() {
                stage.run.lend_buffer(buf);
            }
            let mut view = stage.subset.view(transport);
            match stage.run.advance(&mut view) {
                Ok(Step::Pending) => return Ok(Step::Pending),
                Ok(Step::Done) => {
                    self.buf = Some(stage.run.take_buffer());
                    self.current += 1;
                }
                // An abandoning stage ends in an error too: the first
                // failure is the one to report.
                Err(_) if self.failure.is_some() => self.current += 1,
                Err(why) => {
                    self.buf = Some(stage.run.take_buffer());
                    self.fail_from_here(why);
                    self.current += 1;
                }
            }
        }
        match self.failure.take() {
            Some(why) => Err(why),
            None => Ok(Step::Done),
        }
    }
}
