//! The memory of a communicator's finished non-blocking runs, kept for
//! its next ones. Every MPI_I* call that outlives its post boxes its run;
//! the allocator's free lists hold few blocks of one size (glibc's thread
//! cache seven), so eight short MPI_Iallreduce calls outstanding made
//! every batch go to the allocator's slow paths: 139 instructions per
//! call in callgrind (np=2, 2 floats), against about 40 for taking and
//! giving back a block here.
//!
//! Invariants:
//! - a spare block was allocated by the global allocator for a `Box` of
//!   the layout stored beside it, holds no value (the run in it was
//!   dropped when the block was kept), and belongs to this store alone
//!   until `boxed` writes a run into it and hands it out as that run's
//!   `Box`, which frees it with the same layout if it is not recycled;
//! - at most `SPARE_BOXES` blocks are kept; the rest are freed as usual.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use btl_ibmc::{SelectedTransport, TransportError};

use crate::schedule::Schedule;
use crate::schedule_queue::Run;

/// Blocks kept at most: the runs of a burst of short calls (`coll_pairs
/// -c iallreduce_8rev` posts 8) with room for a second collective's.
const SPARE_BOXES: usize = 16;

#[derive(Default)]
pub(super) struct SpareBoxes {
    blocks: Vec<(Layout, NonNull<u8>)>,
}

// SAFETY: the blocks hold no values (module invariants): they are plain
// memory of the global allocator, which any thread may reuse or free.
unsafe impl Send for SpareBoxes {}

impl SpareBoxes {
    /// `run` in a box: a kept block of its layout if there is one.
    pub(super) fn boxed<S>(&mut self, run: S) -> Run<'static, SelectedTransport>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        let boxed: Box<S> = Box::write(self.empty_box(), run);
        boxed
    }

    /// A run built straight into its box by `make`, which gets the box's
    /// memory (a kept block of the run's layout if there is one) and
    /// returns the run it wrote there (`made_in`). Where `make` fails the
    /// memory is kept as a spare block again.
    #[inline(always)]
    pub(super) fn boxed_made<S>(
        &mut self,
        make: impl FnOnce(&mut MaybeUninit<S>) -> Result<&mut S, TransportError>,
    ) -> Result<Run<'static, SelectedTransport>, TransportError>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        let mut block = self.empty_box::<S>();
        match made_in(&mut block, make) {
            // SAFETY: `made_in` succeeded, so the block holds a live `S`.
            Ok(()) => Ok(unsafe { block.assume_init() }),
            Err(why) => {
                let layout = Layout::new::<S>();
                if self.has_room_for(layout) {
                    self.keep_empty(layout, Box::into_raw(block).cast());
                }
                Err(why)
            }
        }
    }

    /// Drops the run in `run` and keeps its block for a later `boxed`,
    /// unless the store is full or the run takes no memory.
    pub(super) fn recycle(&mut self, run: Run<'static, SelectedTransport>) {
        let layout = Layout::for_value(&*run);
        if !self.has_room_for(layout) {
            return;
        }
        let place = Box::into_raw(run);
        // SAFETY: `place` is the box's live value, dropped here once; the
        // block is then kept without a value (module invariants), and
        // nothing reads it until `boxed` writes another run into it.
        unsafe { std::ptr::drop_in_place(place) };
        self.keep_empty(layout, place.cast());
    }

    /// A box for an `S` that holds no value yet: a kept block of `S`'s
    /// layout if there is one, else new memory.
    #[inline(always)]
    fn empty_box<S>(&mut self) -> Box<MaybeUninit<S>> {
        let layout = Layout::new::<S>();
        match self.blocks.iter().rposition(|(kept, _)| *kept == layout) {
            // SAFETY: the block was allocated for a box of `S`'s layout and
            // holds no value (module invariants), which is what a box of
            // an uninitialised `S` owns; the box frees it with that layout.
            Some(index) => unsafe { Box::from_raw(self.blocks.swap_remove(index).1.as_ptr().cast::<MaybeUninit<S>>()) },
            None => Box::new_uninit(),
        }
    }

    /// Whether a block of `layout` would be kept: it takes memory, and
    /// the store is not full.
    fn has_room_for(&self, layout: Layout) -> bool {
        layout.size() != 0 && self.blocks.len() < SPARE_BOXES
    }

    /// Keeps `place`, a box's block of `layout` that holds no value.
    fn keep_empty(&mut self, layout: Layout, place: *mut u8) {
        if self.blocks.capacity() == 0 {
            self.blocks.reserve_exact(SPARE_BOXES);
        }
        self.blocks.push((layout, NonNull::new(place).expect("a box's pointer is never null")));
    }
}

/// Runs `make` on `slot`: `Ok` only where `make` returned the run it
/// wrote into `slot` itself, so that `slot` then holds a live `S` (a
/// reference at the slot's own address only writing one there gives).
#[inline(always)]
pub(super) fn made_in<S>(
    slot: &mut MaybeUninit<S>,
    make: impl FnOnce(&mut MaybeUninit<S>) -> Result<&mut S, TransportError>,
) -> Result<(), TransportError> {
    let address = slot.as_ptr();
    if std::ptr::eq(make(slot)?, address) {
        Ok(())
    } else {
        Err(TransportError::Failed("a run was made outside the memory handed to it".into()))
    }
}

impl Drop for SpareBoxes {
    fn drop(&mut self) {
        for (layout, block) in self.blocks.drain(..) {
            // SAFETY: the global allocator allocated the block with this
            // layout, and nothing else owns it (module invariants).
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests;
