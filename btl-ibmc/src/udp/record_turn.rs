//! Whose turn it is to send a record on one transport. The receiver joins
//! a peer's fragments in order, so the fragments of two records must never
//! interleave: one holder sends a record whole. A wait for room inside a
//! record runs the process's idle hook (Open MPI's progress engine), which
//! can reach this very transport again on this very thread, e.g. a bcast's
//! NACK served while the same bcast's retransmission waits. That nested
//! record must not wait for the turn its own thread holds (it would wait
//! for ever) nor go out in the middle of the held record: it is deferred,
//! and the holder sends it right after its own record.
//!
//! Invariants:
//! - `holder` is `NOBODY` or the token of the thread holding `turn`.
//! - Deferred records go out in the order they were deferred, after the
//!   record under way when they were deferred and before any record whose
//!   turn starts later (every holder sends what is deferred first).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::poison::lock;
use crate::thread_token::thread_token;

/// No thread: `thread_token` is never 0.
const NOBODY: u64 = 0;

pub(super) struct RecordTurn {
    turn: Mutex<()>,
    holder: AtomicU64,
    /// Records for (peer, bytes) that came while their thread held the turn.
    deferred: Mutex<VecDeque<(usize, Vec<u8>)>>,
}

/// The turn, held: released (holder first) when dropped.
pub(super) struct HeldTurn<'a> {
    owner: &'a RecordTurn,
    _turn: MutexGuard<'a, ()>,
}

impl RecordTurn {
    pub(super) fn new() -> Self {
        RecordTurn { turn: Mutex::new(()), holder: AtomicU64::new(NOBODY), deferred: Mutex::new(VecDeque::new()) }
    }

    /// Takes the turn, waiting for another thread's record; `None` when
    /// this thread holds it already (a nested call).
    pub(super) fn take(&self) -> Option<HeldTurn<'_>> {
        let me = thread_token();
        // Only this thread can have stored its own token, so this read is
        // exact for the question asked.
        if self.holder.load(Ordering::Acquire) == me {
            return None;
        }
        let guard = lock(&self.turn);
        self.holder.store(me, Ordering::Release);
        Some(HeldTurn { owner: self, _turn: guard })
    }

    /// Takes the turn for `record` to `peer`, or, when this thread holds
    /// it already, defers the record to the holder and returns `None`.
    pub(super) fn take_or_defer(&self, peer: usize, record: &[u8]) -> Option<HeldTurn<'_>> {
        let held = self.take();
        if held.is_none() {
            lock(&self.deferred).push_back((peer, record.to_vec()));
        }
        held
    }

    #[cfg(test)]
    pub(super) fn deferred_len(&self) -> usize {
        lock(&self.deferred).len()
    }
}

impl HeldTurn<'_> {
    /// The oldest deferred record, for the holder to send.
    pub(super) fn next_deferred(&self) -> Option<(usize, Vec<u8>)> {
        lock(&self.owner.deferred).pop_front()
    }
}

impl Drop for HeldTurn<'_> {
    fn drop(&mut self) {
        // Before the guard (dropped after this body): nobody else can take
        // the turn and store its token before this clears ours.
        self.owner.holder.store(NOBODY, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_take_on_the_holding_thread_defers_and_the_holder_gets_the_record() {
        let turn = RecordTurn::new();
        let held = turn.take_or_defer(1, b"outer").expect("the first take gets the turn");
        assert!(turn.take_or_defer(2, b"nested").is_none(), "the holder's own nested record must not wait for the turn");
        assert_eq!(turn.deferred_len(), 1);
        assert_eq!(held.next_deferred(), Some((2, b"nested".to_vec())));
        assert_eq!(held.next_deferred(), None);
        drop(held);
        let again = turn.take_or_defer(3, b"later").expect("the turn is free again once released");
        assert_eq!(again.next_deferred(), None);
    }

    #[test]
    fn another_thread_waits_for_the_turn_instead_of_deferring() {
        let turn = RecordTurn::new();
        let held = turn.take().expect("turn");
        std::thread::scope(|scope| {
            let other = scope.spawn(|| turn.take_or_defer(1, b"other").is_some());
            // The other thread either waits on the turn or has not started:
            // either way it gets the turn only once this one lets go.
            drop(held);
            assert!(other.join().expect("the other thread"), "another thread's record waits for the turn, never defers");
        });
        assert_eq!(turn.deferred_len(), 0);
    }
}
