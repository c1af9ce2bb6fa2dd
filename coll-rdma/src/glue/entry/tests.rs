//! The entry protocol hammered by many std threads: collectives (one
//! thread per communicator, as MPI requires) and progress passes (any
//! thread, several at once) on shared communicators.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;

use super::*;
use crate::glue::thread_level::Threads;

/// A communicator's state as the protocol sees it: units of background
/// work, and how many holders are inside (must never exceed one).
#[derive(Default)]
struct FakeComm {
    lock: EntryLock,
    /// Written only inside; relaxed, since the lock orders the accesses.
    pending_work: AtomicU32,
    inside: AtomicU32,
}

impl Default for EntryLock {
    fn default() -> Self {
        EntryLock::new(Threads::Concurrent)
    }
}

/// The registry's count of states with work, as `progress.rs` keeps it.
fn apply(change: WorkChange, states_with_work: &AtomicI64) {
    match change {
        WorkChange::Added => {
            states_with_work.fetch_add(1, Ordering::AcqRel);
        }
        WorkChange::Finished => {
            states_with_work.fetch_sub(1, Ordering::AcqRel);
        }
        WorkChange::Unchanged => {}
    }
}

fn inside(comm: &FakeComm) {
    let before = comm.inside.fetch_add(1, Ordering::AcqRel);
    assert_eq!(before, 0, "two holders inside one state");
}

fn outside(comm: &FakeComm) {
    comm.inside.fetch_sub(1, Ordering::AcqRel);
}

/// A collective: leaves one more unit of work every third call, as a bcast
/// root leaves unacknowledged messages.
fn collective(comm: &FakeComm, call: u32, states_with_work: &AtomicI64) {
    let token = thread_token();
    comm.lock.enter_collective(token).expect("only this thread runs collectives on its communicator");
    inside(comm);
    if call.is_multiple_of(3) {
        comm.pending_work.fetch_add(1, Ordering::Relaxed);
    }
    if call.is_multiple_of(128) {
        // Preempted while inside, as a collective that waits for its peers:
        // the progress passes must skip it, not wait or get in.
        thread::yield_now();
    }
    let has_work = comm.pending_work.load(Ordering::Relaxed) > 0;
    outside(comm);
    apply(comm.lock.note_background_work(has_work), states_with_work);
    comm.lock.leave();
}

/// One progress pass over `comm`, as `progress_state` makes it: serves
/// one unit of work if it gets in.
fn progress_pass(comm: &FakeComm, states_with_work: &AtomicI64) {
    if !comm.lock.needs_progress() || !comm.lock.try_enter_progress(thread_token()) {
        return;
    }
    inside(comm);
    let left = comm.pending_work.load(Ordering::Relaxed).saturating_sub(1);
    comm.pending_work.store(left, Ordering::Relaxed);
    outside(comm);
    apply(comm.lock.note_background_work(left > 0), states_with_work);
    comm.lock.leave();
}

#[test]
fn many_threads_never_share_a_state_and_never_lose_work() {
    const COMMS: usize = 4;
    const PROGRESS_THREADS: usize = 3;
    const CALLS: u32 = 10_000;
    let comms: Arc<Vec<FakeComm>> = Arc::new((0..COMMS).map(|_| FakeComm::default()).collect());
    let states_with_work = Arc::new(AtomicI64::new(0));
    let collectives_done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(COMMS + PROGRESS_THREADS));

    let progressers: Vec<_> = (0..PROGRESS_THREADS)
        .map(|_| {
            let (comms, count, done, start) = (comms.clone(), states_with_work.clone(), collectives_done.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                while !done.load(Ordering::Acquire) {
                    for comm in comms.iter() {
                        progress_pass(comm, &count);
                    }
                }
            })
        })
        .collect();
    let callers: Vec<_> = (0..COMMS)
        .map(|index| {
            let (comms, count, start) = (comms.clone(), states_with_work.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for call in 0..CALLS {
                    collective(&comms[index], call, &count);
                    // A collective's own waits progress other communicators.
                    progress_pass(&comms[(index + 1) % COMMS], &count);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().expect("a collective thread failed");
    }
    collectives_done.store(true, Ordering::Release);
    for progresser in progressers {
        progresser.join().expect("a progress thread failed");
    }

    // Quiescent: every state's flag says exactly whether work is left (no
    // lost wakeup), and the registry counts exactly the flags set.
    let flagged = comms.iter().filter(|comm| comm.lock.needs_progress()).count() as i64;
    for (index, comm) in comms.iter().enumerate() {
        assert_eq!(comm.lock.needs_progress(), comm.pending_work.load(Ordering::Relaxed) > 0, "comm {index}: flag and work disagree");
    }
    assert_eq!(states_with_work.load(Ordering::Acquire), flagged);

    // Passes alone finish what is left, and the count comes back to zero.
    let mut passes = 0;
    while comms.iter().any(|comm| comm.lock.needs_progress()) {
        for comm in comms.iter() {
            progress_pass(comm, &states_with_work);
        }
        passes += 1;
        assert!(passes <= CALLS, "progress passes do not finish the work");
    }
    assert!(comms.iter().all(|comm| comm.pending_work.load(Ordering::Relaxed) == 0));
    assert_eq!(states_with_work.load(Ordering::Acquire), 0);
}

#[test]
fn a_second_thread_collective_on_a_held_state_is_refused_naming_the_holder() {
    let comm = Arc::new(FakeComm::default());
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let comm = comm.clone();
        thread::spawn(move || {
            let token = thread_token();
            comm.lock.enter_collective(token).expect("the state is free");
            entered_tx.send(token).expect("main waits");
            release_rx.recv().expect("main releases");
            comm.lock.leave();
        })
    };
    let holder_token = entered_rx.recv().expect("the holder entered");
    assert_ne!(holder_token, thread_token());
    assert_eq!(comm.lock.enter_collective(thread_token()), Err(ConcurrentCollective { holder_token }));
    assert!(!comm.lock.try_enter_progress(thread_token()), "a progress pass got into a held state");
    assert!(!comm.lock.held_by_thread(thread_token()));
    release_tx.send(()).expect("the holder waits");
    holder.join().expect("the holder failed");
    assert_eq!(comm.lock.enter_collective(thread_token()), Ok(()));
    assert!(comm.lock.held_by_thread(thread_token()));
    comm.lock.leave();
}

#[test]
fn a_collective_waits_behind_a_progress_pass_instead_of_refusing() {
    let comm = Arc::new(FakeComm::default());
    assert!(comm.lock.try_enter_progress(thread_token()));
    let (entered_tx, entered_rx) = mpsc::channel();
    let caller = {
        let comm = comm.clone();
        thread::spawn(move || {
            let outcome = comm.lock.enter_collective(thread_token());
            entered_tx.send(()).expect("main waits");
            comm.lock.leave();
            outcome
        })
    };
    // Still waiting while the pass is inside (bounded: a short look).
    assert!(entered_rx.recv_timeout(std::time::Duration::from_millis(50)).is_err(), "entered while a pass was inside");
    comm.lock.leave();
    entered_rx.recv().expect("the collective got in once the pass left");
    assert_eq!(caller.join().expect("the caller failed"), Ok(()));
}

#[test]
fn one_thread_at_a_time_gets_the_same_answers_without_a_locked_instruction() {
    let (mine, other) = (3, 5);
    for threads in [Threads::OneAtATime, Threads::Concurrent] {
        let lock = EntryLock::new(threads);
        lock.enter_collective(mine).expect("a free state");
        assert!(lock.held_by_thread(mine), "{threads:?}");
        assert!(!lock.try_enter_progress(mine), "{threads:?}: a progress pass nested in the collective skips the state");
        assert_eq!(lock.enter_collective(other), Err(ConcurrentCollective { holder_token: mine }), "{threads:?}");
        assert_eq!(lock.note_background_work(true), WorkChange::Added);
        lock.leave();
        assert!(!lock.held_by_thread(mine));
        assert!(lock.try_enter_progress(other), "{threads:?}: a free state takes a progress pass");
        assert!(lock.needs_progress(), "{threads:?}: the flag the collective left");
        assert_eq!(lock.note_background_work(false), WorkChange::Finished);
        lock.leave();
        lock.enter_collective(mine).expect("free again");
        lock.leave();
    }
}
