//! The module's holders over the entry lock: a progress pass that finds
//! the state held must leave it held (`entry/tests.rs` checks the lock
//! itself; this checks what the module builds on it).

use super::*;

/// A module as `construct` leaves it, before any enable: no state, so
/// only the entry is ever touched.
fn constructed_module() -> Box<RdmaModule> {
    let mut module = Box::<RdmaModule>::new_zeroed();
    // SAFETY: a zeroed allocation of the module's size stands for Open
    // MPI's (the base module is plain C data, valid zeroed); `construct`
    // writes every field of ours.
    unsafe {
        construct(module.as_mut_ptr() as *mut sys::opal_object_t);
        module.assume_init()
    }
}

/// The route found in np4-bcast over udp under loss: a collective holds
/// the state and has background work left; its own wait runs the progress
/// callback, which must skip the state, every time.
#[test]
fn a_progress_pass_that_finds_the_state_held_leaves_it_held() {
    let mut module = constructed_module();
    let module: *mut RdmaModule = &mut *module;
    let collective = thread_token();
    // SAFETY: `module` lives until the end of the test; nothing else
    // uses it.
    let held = unsafe { Held::enter_collective(module, collective) }.expect("a free state");
    // SAFETY: as above.
    let entry = unsafe { &(*module).entry };
    let _ = entry.note_background_work(true);
    // Checked with the hold out of the way: a panic while `held` lives
    // would unwind through its drop, which reaches the (absent) state,
    // and a pass that went in would reach it too: stop at the first loss.
    let mut skipped_passes = Vec::new();
    for _ in 0..3 {
        // SAFETY: as above; the pass finds the state held, so it never
        // reaches the state behind it.
        let finished = unsafe { progress_state(module) };
        skipped_passes.push((finished, entry.held_by_thread(collective)));
        if !entry.held_by_thread(collective) {
            break;
        }
    }
    // Another thread's pass is skipped alike.
    let other = std::thread::spawn(thread_token).join().expect("a thread");
    // SAFETY: as above.
    let other_went_in = unsafe { Held::try_enter_progress(module, other) }.map(std::mem::forget).is_some();
    let still_held = entry.held_by_thread(collective);
    if skipped_passes.len() < 3 || !still_held {
        std::mem::forget(held);
    } else {
        let _ = entry.note_background_work(false);
        drop(held);
    }
    assert_eq!(skipped_passes, [(false, true); 3], "(work reported finished, collective still holding) after each pass");
    assert!(!other_went_in, "another thread's pass went in beside the collective");
    assert!(still_held, "another thread's skipped pass released the collective's hold");
    // SAFETY: as above.
    let progress = unsafe { Held::try_enter_progress(module, other) }.expect("the state, once the collective left");
    assert!(entry.held_by_thread(other));
    drop(progress);
    assert!(!entry.held_by_thread(other) && !entry.held_by_thread(collective), "left held after both holders went");
}
