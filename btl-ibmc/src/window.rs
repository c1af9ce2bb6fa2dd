//! The bounds-checked window operations every backend shares, over a window
//! viewed as atomic words (a slice of a shared mapping, or heap memory in the
//! test fabric). Keeping the checks here means shm and the fabric reject
//! exactly the same accesses.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::TransportError;
use crate::words;

const FLAG_BYTES: usize = std::mem::size_of::<u64>();

/// One rank's window: `len` usable bytes backed by at least `len` bytes of words.
#[derive(Clone, Copy)]
pub(crate) struct Window<'a> {
    words: &'a [AtomicU64],
    len: usize,
}

impl<'a> Window<'a> {
    /// `words` must cover `len` bytes; shorter backing would make every
    /// access past it panic instead of returning `OutOfRange`.
    #[inline]
    pub(crate) fn new(words: &'a [AtomicU64], len: usize) -> Self {
        debug_assert!(words.len() * 8 >= len, "window backing shorter than its length");
        Window { words, len }
    }

    /// The flag word at `offset`, if it is aligned and inside the window.
    #[inline]
    fn flag_word(&self, offset: usize) -> Option<&'a AtomicU64> {
        if !flag_fits(self.len, offset) {
            return None;
        }
        self.words.get(offset / FLAG_BYTES)
    }

    /// The flag word at `offset`; `peer` only labels the error.
    #[inline]
    pub(crate) fn flag(&self, peer: usize, offset: usize) -> Result<&'a AtomicU64, TransportError> {
        match self.flag_word(offset) {
            Some(word) => Ok(word),
            None => Err(bad_flag(peer, offset)),
        }
    }

    /// `Windows::prepare_put` for a put at `offset`: a hint, ignored when
    /// `offset` is outside the window.
    #[inline]
    pub(crate) fn prepare_put(&self, offset: usize) {
        if let Some(word) = self.words.get(offset / FLAG_BYTES).filter(|_| offset < self.len) {
            crate::write_hint::take_line_for_writing(std::ptr::from_ref(word).cast::<u8>());
        }
    }

    #[inline]
    pub(crate) fn check_range(&self, peer: usize, offset: usize, len: usize) -> Result<(), TransportError> {
        check_range_in(self.len, peer, offset, len)
    }

    /// The data-then-flag write of `Windows::put`: nothing is written
    /// unless both the data range and the flag word are valid.
    #[inline]
    pub(crate) fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        let flag_word = self.flag(peer, flag_offset)?;
        self.check_range(peer, offset, data.len())?;
        words::copy_in(self.words, offset, data);
        // Release: a reader whose acquire load sees `flag` sees every byte
        // of the plain copy above (the ordering argument is in `words`).
        flag_word.store(flag, Ordering::Release);
        Ok(())
    }

    #[inline]
    pub(crate) fn store_flag(&self, peer: usize, offset: usize, value: u64) -> Result<(), TransportError> {
        self.flag(peer, offset)?.store(value, Ordering::Release);
        Ok(())
    }

    /// Acquire load of the own window's flag. The trait gives no way to
    /// report a bad offset here, and a caller polling a wrong word would
    /// hang, so a bad offset is a panic naming it.
    #[inline]
    pub(crate) fn load_own_flag(&self, rank: usize, offset: usize) -> u64 {
        match self.flag_word(offset) {
            Some(word) => word.load(Ordering::Acquire),
            None => invalid_local_access(bad_flag(rank, offset)),
        }
    }

    #[inline]
    pub(crate) fn store_own_flag(&self, rank: usize, offset: usize, value: u64) {
        match self.flag_word(offset) {
            Some(word) => word.store(value, Ordering::Release),
            None => invalid_local_access(bad_flag(rank, offset)),
        }
    }

    /// Copies out of the own window (or, for `PeerReads`, a mapped peer's);
    /// a bad range panics like `load_own_flag`. A plain copy: the caller has
    /// acquired the flag that announced these bytes.
    #[inline]
    pub(crate) fn read_own(&self, rank: usize, offset: usize, out: &mut [u8]) {
        if let Err(error) = self.check_range(rank, offset, out.len()) {
            invalid_local_access(error);
        }
        words::copy_out(self.words, offset, out);
    }
}

/// Whether a flag word at `offset` is aligned and inside a window of `len` bytes.
#[inline]
fn flag_fits(len: usize, offset: usize) -> bool {
    offset.is_multiple_of(FLAG_BYTES) && offset < len && len - offset >= FLAG_BYTES
}

/// The checks [`Window::put`] makes, for a backend that carries the write
/// to the target's memory itself (udp): the same accesses are refused with
/// the same errors before anything is sent.
pub(crate) fn check_put(window_len: usize, peer: usize, offset: usize, data_len: usize, flag_offset: usize) -> Result<(), TransportError> {
    if !flag_fits(window_len, flag_offset) {
        return Err(bad_flag(peer, flag_offset));
    }
    check_range_in(window_len, peer, offset, data_len)
}

/// `offset..offset + len` inside a window of `window_len` bytes, or the
/// error every backend reports for it.
#[inline]
fn check_range_in(window_len: usize, peer: usize, offset: usize, len: usize) -> Result<(), TransportError> {
    match offset.checked_add(len) {
        Some(end) if end <= window_len => Ok(()),
        _ => Err(TransportError::OutOfRange { peer, offset, len }),
    }
}

#[cold]
fn bad_flag(peer: usize, offset: usize) -> TransportError {
    if !offset.is_multiple_of(FLAG_BYTES) {
        TransportError::Failed(format!("flag offset {offset} in the window of rank {peer} is not 8-byte aligned"))
    } else {
        TransportError::OutOfRange { peer, offset, len: FLAG_BYTES }
    }
}

#[cold]
#[track_caller]
fn invalid_local_access(error: TransportError) -> ! {
    panic!("invalid access to the local window: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn a_window_whose_length_is_not_a_word_multiple_rejects_a_flag_in_its_last_partial_word() {
        let words = backing(2);
        let window = Window::new(&words, 12);
        assert!(window.store_flag(0, 0, 1).is_ok());
        assert_eq!(window.store_flag(3, 8, 1), Err(TransportError::OutOfRange { peer: 3, offset: 8, len: 8 }));
        assert!(window.put(0, 4, &[1; 8], 0, 1).is_ok());
        assert!(window.put(0, 5, &[1; 8], 0, 1).is_err());
    }

    #[test]
    fn a_put_with_a_bad_flag_writes_no_data() {
        let words = backing(4);
        let window = Window::new(&words, 32);
        assert!(window.put(0, 0, &[9; 16], 30, 1).is_err());
        assert!(window.put(0, 0, &[9; 16], 32, 1).is_err());
        let mut out = [0u8; 16];
        window.read_own(0, 0, &mut out);
        assert_eq!(out, [0; 16]);
    }
}
