//! A persistent request's storage keeps one kind of run at a time: a start
//! of that kind takes over the previous run's scratch, a start of another
//! kind replaces the storage, and the queue's handle is always the run just
//! placed. The runs here name themselves through `awaited` (their `id` as
//! the word's offset), so the handle shows which run it points at.

use btl_ibmc::{SelectedTransport, TransportError};

use super::RunStorage;
use crate::schedule::{AwaitedWord, Schedule, Step};

/// A run of kind `K`, with a scratch buffer a later run of its kind takes
/// over, noting whose it was.
struct TestRun<const K: u8> {
    id: usize,
    scratch: Vec<u8>,
    took_from: Option<usize>,
}

type Scratchy = TestRun<0>;
type Plain = TestRun<1>;

fn run<const K: u8>(id: usize, scratch: Vec<u8>) -> TestRun<K> {
    TestRun { id, scratch, took_from: None }
}

impl<const K: u8> Schedule<SelectedTransport> for TestRun<K> {
    type Error = TransportError;

    fn advance(&mut self, _transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        Some(AwaitedWord { offset: self.id, at_least: 1 })
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        self.scratch = std::mem::take(&mut finished.scratch);
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
    assert_eq!(id_behind(storage.keep(run::<0>(1, scratch))), 1);

    let second = storage.keep(run::<0>(2, Vec::new()));
    assert_eq!(id_behind(second), 2, "the handle is the run just kept, not the previous one");
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Scratchy>>().expect("a slot of the first kind").as_ref().expect("a run kept");
    assert_eq!((kept.id, kept.scratch.as_ptr(), kept.scratch.capacity()), (2, scratch_at, 64), "the second run took the first one's buffer");

    // Another kind (the plan changed): the storage is made again, and the
    // runs of that kind hand on to each other.
    assert_eq!(id_behind(storage.keep(run::<1>(3, Vec::new()))), 3);
    assert_eq!(id_behind(storage.keep(run::<1>(4, Vec::new()))), 4);
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Plain>>().expect("a slot of the second kind").as_ref().expect("a run kept");
    assert_eq!(kept.took_from, Some(3), "the second run of the new kind took the first one's storage");

    // Back to the first kind: a fresh slot, nothing left of runs 1 and 2.
    assert_eq!(id_behind(storage.keep(run::<0>(5, Vec::new()))), 5);
    let Some((_, slot)) = &storage.0 else { panic!("storage kept") };
    let kept = slot.downcast_ref::<Option<Scratchy>>().expect("a slot of the first kind").as_ref().expect("a run kept");
    assert_eq!(kept.scratch.capacity(), 0, "a replaced storage hands nothing on");
}

#[test]
fn a_kept_run_restarts_in_place_only_as_its_own_kind_and_when_its_maker_agrees() {
    let mut storage = RunStorage::default();
    assert!(storage.restart_kept(|_: &mut Scratchy| panic!("nothing kept")).expect("no restart tried").is_none());
    storage.keep(run::<0>(1, Vec::new()));
    assert!(storage.restart_kept(|_: &mut Plain| panic!("a run of another kind")).expect("no restart tried").is_none());
    assert!(storage.restart_kept(|run: &mut Scratchy| Ok(run.id == 2)).expect("declined").is_none(), "declined");
    let failed = storage.restart_kept(|_: &mut Scratchy| Err(TransportError::Failed("no numbers".to_string())));
    assert!(matches!(failed, Err(TransportError::Failed(why)) if why == "no numbers"), "a restart's error is the caller's");
    let Ok(Some(super::QueuedRun::Kept(handle))) = storage.restart_kept(|run: &mut Scratchy| {
        run.id = 7;
        Ok(true)
    }) else {
        panic!("a kept run of the kind, restarted: its handle")
    };
    assert_eq!(id_behind(handle), 7, "the handle is the run restarted in place");
    assert_eq!(id_behind(storage.keep(run::<0>(8, Vec::new()))), 8, "and the storage goes on as before");
}
