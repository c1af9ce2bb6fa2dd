//! Where everything lives in a communicator's segment. All offsets are
//! derived from (size, window_len) alone, so every rank computes the same
//! layout without exchanging it; the header lets an attaching rank confirm
//! that the creator agreed.
//!
//! ```text
//! [0, 4096)                       header: magic, size, window_len, total length
//! [4096 + r*stride, +window_len)  rank r's window, stride = window_len rounded up to 4096
//! rings_offset + (s*size+d)*RING  the reliable ring from rank s to rank d
//! ```

use super::ring::RING_BYTES;
use super::segment::ShmSegment;

const PAGE: usize = 4096;
const HEADER_BYTES: usize = PAGE;
/// "CRSHM" + layout version 1; bump the version when the layout changes.
const MAGIC: u64 = 0x4352_5348_4D00_0001;

const HEADER_MAGIC: usize = 0;
const HEADER_SIZE: usize = 1;
const HEADER_WINDOW_LEN: usize = 2;
const HEADER_TOTAL_LEN: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentLayout {
    pub(crate) size: usize,
    pub(crate) window_len: usize,
    window_stride: usize,
    rings_offset: usize,
    pub(crate) total_len: usize,
}

impl SegmentLayout {
    /// None if the segment would not fit the address space.
    pub(crate) fn new(size: usize, window_len: usize) -> Option<Self> {
        let window_stride = window_len.checked_next_multiple_of(PAGE)?;
        let rings_offset = size.checked_mul(window_stride)?.checked_add(HEADER_BYTES)?;
        let rings = size.checked_mul(size)?.checked_mul(RING_BYTES)?;
        let total_len = rings_offset.checked_add(rings)?.checked_next_multiple_of(PAGE)?;
        isize::try_from(total_len).ok()?;
        Some(SegmentLayout { size, window_len, window_stride, rings_offset, total_len })
    }

    /// Bytes before the first window.
    pub(crate) fn header_len(&self) -> usize {
        HEADER_BYTES
    }

    /// Bytes from one window to the next: the window rounded up to pages.
    pub(crate) fn window_stride(&self) -> usize {
        self.window_stride
    }

    /// Byte offset of `rank`'s window; `rank < size`.
    #[inline]
    pub(crate) fn window_offset(&self, rank: usize) -> usize {
        HEADER_BYTES + rank * self.window_stride
    }

    /// Byte offset of the ring carrying messages from `sender` to `receiver`.
    #[inline]
    pub(crate) fn ring_offset(&self, sender: usize, receiver: usize) -> usize {
        self.rings_offset + (sender * self.size + receiver) * RING_BYTES
    }


    pub(crate) fn write_header(&self, segment: &ShmSegment) {
        segment.store_word(HEADER_SIZE, self.size as u64);
        segment.store_word(HEADER_WINDOW_LEN, self.window_len as u64);
        segment.store_word(HEADER_TOTAL_LEN, self.total_len as u64);
        segment.store_word(HEADER_MAGIC, MAGIC);
    }

    pub(crate) fn header_matches(&self, segment: &ShmSegment) -> bool {
        segment.load_word(HEADER_MAGIC) == MAGIC
            && segment.load_word(HEADER_SIZE) == self.size as u64
            && segment.load_word(HEADER_WINDOW_LEN) == self.window_len as u64
            && segment.load_word(HEADER_TOTAL_LEN) == self.total_len as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_page_aligned_and_nothing_overlaps() {
        let layout = SegmentLayout::new(3, 5000).unwrap();
        for rank in 0..3 {
            assert_eq!(layout.window_offset(rank) % PAGE, 0);
            assert!(layout.window_offset(rank) + 5000 <= layout.window_offset(rank + 1));
        }
        assert!(layout.window_offset(2) + 5000 <= layout.ring_offset(0, 0));
        assert_eq!(layout.ring_offset(0, 1) - layout.ring_offset(0, 0), RING_BYTES);
        assert_eq!(layout.ring_offset(2, 2) + RING_BYTES, layout.rings_offset + 9 * RING_BYTES);
        assert!(layout.ring_offset(2, 2) + RING_BYTES <= layout.total_len);
        assert_eq!(layout.total_len % PAGE, 0);
        assert_eq!(layout.ring_offset(1, 2) % 8, 0);
        assert!(SegmentLayout::new(usize::MAX / 2, 4096).is_none());
        assert!(SegmentLayout::new(4, usize::MAX - 10).is_none());
    }
}
