//! A persistent request's storage keeps one kind of run at a time: a start
//! of that kind takes over the previous run's scratch, a start of another
//! kind replaces the storage, and the queue's handle is always the run just
//! placed. The runs here name themselves through `awaited` (their `id` as
//! the word's offset), so the handle shows which run it points at.

use btl_ibmc::{SelectedTransport, TransportError};

use super::RunStorage;
use crate::schedule::{AwaitedWord, Schedule, Step};

/// A run of one kind, with a scratch buffer a later run of its kind takes.
struct Scratchy {
    id: usize,
    scratch: Vec<u8>,
}

/// A run of another kind, which notes whose storage it took.
struct Plain {
    id: usize,
    took_from: Option<usize>,
}

impl Schedule<SelectedTransport> for Scratchy {
    type Error = TransportError;

    fn advance(&mut self, _transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        Some(AwaitedWord { offset: self.id, at_least: 1 })
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        self.scratch = std::mem::take(&mut finished.scratch);
    }
}

impl Schedule<SelectedTransport> for Plain {
    type Error = TransportError;

    fn advance(&mut self, _transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        Some(AwaitedWord { offset: self.id, at_least: 1 })
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        self.took_from = Some(finished.id);
    }
}

fn id_behind(handle: std::ptr::NonNull<super::DynRun>) -> usize {
    // SAFETY: the handle points into the storage, alive and untouched
    // since `keep` returned it.
    unsafe { handle.as_ref() }.awaited().expect("every run here names its id").offset
}

#[test]
fn a_start_of_the_same_kind_takes_the_scratch_and_another_kind_replaces_the_storage() {
    let mut storage = RunStorage::default();
    let scratch = Vec::with_capacity(64);
    let scratch_at = scratch.as_ptr();
    assert_eq!(id_behind(storage.keep(Scratchy { id: 1, scratch })), 1);

    let second = storage.keep(Scratchy { id: 2, scratch: Vec::new() });
    assert_eq!(id_behind(second), 2, "the handle is the run just kept, not the previous one");
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Scratchy>>().expect("a slot of the first kind").as_ref().expect("a run kept");
    assert_eq!((kept.id, kept.scratch.as_ptr(), kept.scratch.capacity()), (2, scratch_at, 64), "the second run took the first one's buffer");

    // Another kind (the plan changed): the storage is made again, and the
    // runs of that kind hand on to each other.
    assert_eq!(id_behind(storage.keep(Plain { id: 3, took_from: None })), 3);
    assert_eq!(id_behind(storage.keep(Plain { id: 4, took_from: None })), 4);
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Plain>>().expect("a slot of the second kind").as_ref().expect("a run kept");
    assert_eq!(kept.took_from, Some(3), "the second run of the new kind took the first one's storage");

    // Back to the first kind: a fresh slot, nothing left of runs 1 and 2.
    assert_eq!(id_behind(storage.keep(Scratchy { id: 5, scratch: Vec::new() })), 5);
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Scratchy>>().expect("a slot of the first kind").as_ref().expect("a run kept");
    assert_eq!(kept.scratch.capacity(), 0, "a replaced storage hands nothing on");
}

#[test]
fn a_kept_run_restarts_in_place_only_as_its_own_kind_and_when_its_maker_agrees() {
    let mut storage = RunStorage::default();
    assert!(storage.restart_kept(|_: &mut Scratchy| panic!("nothing kept")).is_none());
    storage.keep(Scratchy { id: 1, scratch: Vec::new() });
    assert!(storage.restart_kept(|_: &mut Plain| panic!("a run of another kind")).is_none());
    assert!(storage.restart_kept(|run: &mut Scratchy| run.id == 2).is_none(), "declined");
    let Some(super::QueuedRun::Kept(handle)) = storage.restart_kept(|run: &mut Scratchy| {
        run.id = 7;
        true
    }) else {
        panic!("a kept run of the kind, restarted: its handle")
    };
    assert_eq!(id_behind(handle), 7, "the handle is the run restarted in place");
    assert_eq!(id_behind(storage.keep(Scratchy { id: 8, scratch: Vec::new() })), 8, "and the storage goes on as before");
}
