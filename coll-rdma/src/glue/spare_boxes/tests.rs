//! A kept block goes to the next run of its layout, and every run's value
//! is dropped exactly once: when it is recycled, when the store is full,
//! or when a box from the store is dropped as any box is. The runs count
//! their drops and name themselves through `awaited` (their `id` as the
//! word's offset), so a box shows which run it holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use btl_ibmc::{SelectedTransport, TransportError};

use super::{SpareBoxes, SPARE_BOXES};
use crate::schedule::{AwaitedWord, Schedule, Step};
use crate::schedule_queue::Run;

/// A run of `N` bytes of payload beside its id and drop counter.
struct CountedRun<const N: usize> {
    id: usize,
    drops: Arc<AtomicUsize>,
    /// Only its size matters: it sets the run's layout.
    _payload: [u8; N],
}

impl<const N: usize> Drop for CountedRun<N> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

impl<const N: usize> Schedule<SelectedTransport> for CountedRun<N> {
    type Error = TransportError;

    fn advance(&mut self, _transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        Some(AwaitedWord { offset: self.id, at_least: 1 })
    }
}

fn run<const N: usize>(id: usize, drops: &Arc<AtomicUsize>) -> CountedRun<N> {
    CountedRun { id, drops: Arc::clone(drops), _payload: [0; N] }
}

fn id_of(run: &Run<'static, SelectedTransport>) -> usize {
    run.awaited().expect("every run here names its id").offset
}

fn block_of(run: &Run<'static, SelectedTransport>) -> *const u8 {
    (&**run as *const dyn Schedule<SelectedTransport, Error = TransportError>).cast::<u8>()
}

#[test]
fn a_recycled_block_holds_the_next_run_of_its_layout_and_no_other() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut spare = SpareBoxes::default();

    let first = spare.boxed(run::<300>(1, &drops));
    let first_block = block_of(&first);
    spare.recycle(first);
    assert_eq!(drops.load(Ordering::Relaxed), 1, "recycling drops the run in the block");

    // Another layout does not take the block.
    let other = spare.boxed(run::<40>(2, &drops));
    assert_ne!(block_of(&other), first_block, "a run of another layout got the kept block");
    assert_eq!(id_of(&other), 2);

    // The same layout does, and holds the new run.
    let second = spare.boxed(run::<300>(3, &drops));
    assert_eq!(block_of(&second), first_block, "the run of the kept block's layout got a fresh box");
    assert_eq!(id_of(&second), 3);

    // Boxes from the store drop as any box does.
    drop(second);
    drop(other);
    assert_eq!(drops.load(Ordering::Relaxed), 3, "every run dropped exactly once");
}

#[test]
fn a_full_store_lets_further_runs_go_and_frees_its_blocks_when_dropped() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut spare = SpareBoxes::default();
    let runs: Vec<_> = (0..SPARE_BOXES + 3).map(|id| spare.boxed(run::<64>(id, &drops))).collect();
    for run in runs {
        spare.recycle(run);
    }
    assert_eq!(drops.load(Ordering::Relaxed), SPARE_BOXES + 3, "every run dropped, kept or not");
    assert_eq!(spare.blocks.len(), SPARE_BOXES, "the store keeps at most SPARE_BOXES blocks");

    // Every kept block serves a run again, each once.
    let again: Vec<_> = (0..SPARE_BOXES).map(|id| spare.boxed(run::<64>(100 + id, &drops))).collect();
    assert!(spare.blocks.is_empty(), "each kept block handed out");
    let mut blocks: Vec<_> = again.iter().map(block_of).collect();
    blocks.sort();
    blocks.dedup();
    assert_eq!(blocks.len(), SPARE_BOXES, "a block handed out twice");
    assert_eq!(again.iter().map(id_of).sum::<usize>(), (100..100 + SPARE_BOXES).sum::<usize>());
    for run in again {
        spare.recycle(run);
    }
    drop(spare);
    assert_eq!(drops.load(Ordering::Relaxed), 2 * SPARE_BOXES + 3, "the store dropped no value twice");
}

/// A run of no size takes no memory: nothing to keep.
struct Nothing;

impl Schedule<SelectedTransport> for Nothing {
    type Error = TransportError;

    fn advance(&mut self, _transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        Ok(Step::Done)
    }
}

#[test]
fn a_run_of_no_size_is_not_kept() {
    let mut spare = SpareBoxes::default();
    let boxed = spare.boxed(Nothing);
    spare.recycle(boxed);
    assert!(spare.blocks.is_empty());
}

#[test]
fn a_run_made_in_place_lands_in_the_kept_block_and_a_failed_make_keeps_the_block() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut spare = SpareBoxes::default();
    let first = spare.boxed(run::<300>(1, &drops));
    let block = block_of(&first);
    spare.recycle(first);

    // The maker gets the kept block itself, and the box holds what it built.
    let mut handed = std::ptr::null();
    let made = spare
        .boxed_made(|slot: &mut std::mem::MaybeUninit<CountedRun<300>>| {
            handed = slot.as_ptr().cast::<u8>();
            Ok(slot.write(run::<300>(2, &drops)))
        })
        .expect("the run is made");
    assert_eq!(handed, block, "the maker was not handed the kept block");
    assert_eq!(block_of(&made), block, "the run is not in the block it was built in");
    assert_eq!(id_of(&made), 2);
    spare.recycle(made);

    // A maker that fails leaves the block kept, with nothing to drop.
    let failed = spare.boxed_made(|_: &mut std::mem::MaybeUninit<CountedRun<300>>| Err(TransportError::Failed("no run".into())));
    assert!(failed.is_err());
    let next = spare.boxed(run::<300>(3, &drops));
    assert_eq!(block_of(&next), block, "the failed make lost the kept block");
    assert_eq!(id_of(&next), 3);

    // A maker that answers with a run outside its block is refused (the
    // only such run a maker can return is one that lives for ever).
    let elsewhere: &'static mut CountedRun<300> = Box::leak(Box::new(run::<300>(4, &drops)));
    let stray = spare.boxed_made(|_: &mut std::mem::MaybeUninit<CountedRun<300>>| Ok(elsewhere));
    assert!(stray.is_err(), "a run made outside the box was accepted");

    drop(next);
    assert_eq!(drops.load(Ordering::Relaxed), 3, "every run but the leaked one dropped exactly once");
}
