use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::*;

const LEVELS: [Threads; 2] = [Threads::OneAtATime, Threads::Concurrent];

#[test]
fn a_claim_takes_a_free_word_and_reports_a_taken_one_at_either_level() {
    for threads in LEVELS {
        let word = AtomicU64::new(0);
        assert_eq!(threads.claim(&word, 0, 6), Ok(()), "{threads:?}");
        assert_eq!(word.load(Ordering::Relaxed), 6);
        assert_eq!(threads.claim(&word, 0, 8), Err(6), "{threads:?}: a taken word stays its holder's");
        assert_eq!(word.load(Ordering::Relaxed), 6);
    }
}

#[test]
fn a_count_goes_up_and_down_at_either_level() {
    for threads in LEVELS {
        let count = AtomicUsize::new(0);
        threads.increment(&count);
        threads.increment(&count);
        threads.decrement(&count);
        assert_eq!(count.load(Ordering::Relaxed), 1, "{threads:?}");
    }
}

#[test]
fn a_held_lock_is_refused_until_its_guard_goes_at_either_level() {
    for threads in LEVELS {
        let lock = TryLock::new(vec![1]);
        let mut guard = lock.try_lock_as(threads).expect("a free lock");
        guard.push(2);
        assert!(lock.try_lock_as(threads).is_none(), "{threads:?}: a second guard while the first lives");
        drop(guard);
        assert_eq!(*lock.try_lock_as(threads).expect("free again"), [1, 2]);
    }
}

#[test]
fn concurrent_threads_never_share_the_value() {
    let lock = Arc::new(TryLock::new(0u64));
    let (inside, taken) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (lock, inside, taken) = (Arc::clone(&lock), Arc::clone(&inside), Arc::clone(&taken));
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if let Some(mut value) = lock.try_lock_as(Threads::Concurrent) {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two guards at once");
                        // A plain read-modify-write: lost updates would show.
                        *value += 1;
                        taken.fetch_add(1, Ordering::Relaxed);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no thread panicked");
    }
    let value = *lock.try_lock_as(Threads::Concurrent).expect("free at the end");
    assert_eq!(value, taken.load(Ordering::Relaxed) as u64);
    assert!(value > 0);
}
