//! Payload copies into and out of memory that other threads or processes
//! touch concurrently (shared-memory windows and rings, a verbs window, the
//! test fabric's windows), all of it viewed as `AtomicU64` words.
//!
//! Payload moves with plain memory copies (`memcpy`), never word by word:
//! the flag protocol, not the copy, makes the bytes coherent. Every user
//! follows one of two shapes, and both order every payload access:
//!
//! * writer: [`copy_in`] the payload, then a release store of the flag
//!   word (or ring tail) that announces it;
//! * reader: an acquire load that sees that flag, then [`copy_out`].
//!
//! The release store is ordered after the copy, and the acquire load before
//! the reader's copy, so the writer's copy happens before the reader's: the
//! copies never race. Reuse runs the same argument the other way (the
//! reader's release of the slot, the writer's acquire of it before it
//! copies again), which each protocol proves beside its own slots. Flags,
//! lengths and counters stay `AtomicU64` operations; only payload bytes are
//! copied plainly, and no word is ever both.
//!
//! A peer process that broke its protocol could only make a reader see
//! stale or torn bytes: the copy lands in a `u8` buffer, where every bit
//! pattern is valid, and the compiler cannot assume anything about bytes
//! another process (or an adapter's DMA) writes. Readers that can afford it
//! check the flag again after copying (the shared-window multicast does).

use std::sync::atomic::AtomicU64;

const WORD: usize = std::mem::size_of::<u64>();

/// Number of words needed to hold `bytes` bytes.
pub(crate) const fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(WORD)
}

/// Writes `data` at byte `offset` of `words`. The caller has checked that
/// `offset + data.len() <= words.len() * 8`; a violation panics.
#[inline]
pub(crate) fn copy_in(words: &[AtomicU64], offset: usize, data: &[u8]) {
    let base = byte_range_start(words, offset, data.len());
    // SAFETY: `byte_range_start` checked that the range lies inside `words`.
    // `AtomicU64` is an `UnsafeCell`, so writing through a pointer derived
    // from the shared borrow is permitted. `data` is the caller's own
    // buffer, never a borrow of window memory (no `&[u8]` is ever made of
    // it), so the ranges do not overlap. No other access to these bytes runs
    // concurrently: the module's flag protocol orders them (see above).
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base, data.len()) }
}

/// Reads `out.len()` bytes starting at byte `offset` of `words`. The caller
/// has checked the range; a violation panics.
#[inline]
pub(crate) fn copy_out(words: &[AtomicU64], offset: usize, out: &mut [u8]) {
    let base = byte_range_start(words, offset, out.len());
    // SAFETY: the range lies inside `words` (checked), `out` is an exclusive
    // borrow of other memory, so they do not overlap, and the flag the
    // caller acquired orders the writer's copy before this one.
    unsafe { std::ptr::copy_nonoverlapping(base.cast_const(), out.as_mut_ptr(), out.len()) }
}

/// The address of byte `offset` of `words`, after checking that `len` bytes
/// from there lie inside them.
#[inline]
fn byte_range_start(words: &[AtomicU64], offset: usize, len: usize) -> *mut u8 {
    let fits = offset.checked_add(len).is_some_and(|end| end <= words.len() * WORD);
    if !fits {
        out_of_range(offset, len, words.len() * WORD);
    }
    // `wrapping_add` keeps this safe; the check above makes it in bounds.
    words.as_ptr().cast::<u8>().cast_mut().wrapping_add(offset)
}

#[cold]
#[track_caller]
fn out_of_range(offset: usize, len: usize, available: usize) -> ! {
    panic!("payload copy of {len} bytes at offset {offset} runs past the {available} bytes of its words")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn every_offset_and_length_round_trips_without_touching_neighbours() {
        let words = zeroed(8);
        for offset in 0..24 {
            for len in 0..=(64 - offset - 8) {
                copy_in(&words, 0, &[0xEE; 64]);
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + offset + 1) as u8).collect();
                copy_in(&words, offset, &data);

                let mut all = [0u8; 64];
                copy_out(&words, 0, &mut all);
                assert!(all[..offset].iter().all(|&b| b == 0xEE), "bytes before offset {offset} len {len} changed");
                assert_eq!(&all[offset..offset + len], &data[..], "offset {offset} len {len}");
                assert!(all[offset + len..].iter().all(|&b| b == 0xEE), "bytes after offset {offset} len {len} changed");

                let mut back = vec![0u8; len];
                copy_out(&words, offset, &mut back);
                assert_eq!(back, data, "load at offset {offset} len {len}");
            }
        }
    }

    #[test]
    #[should_panic]
    fn an_unchecked_range_past_the_end_panics_rather_than_writing() {
        let words = zeroed(2);
        copy_in(&words, 12, &[1; 8]);
    }

    #[test]
    #[should_panic]
    fn an_unchecked_read_past_the_end_panics_rather_than_reading() {
        let words = zeroed(2);
        copy_out(&words, 9, &mut [0; 8]);
    }

    #[test]
    fn an_offset_that_overflows_panics_rather_than_wrapping() {
        let words = zeroed(2);
        let outcome = std::panic::catch_unwind(|| copy_out(&words, usize::MAX, &mut [0; 2]));
        assert!(outcome.is_err());
    }
}
