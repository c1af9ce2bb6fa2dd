//! Cutting one call's message into segments that each fit a slot. Every
//! rank cuts the same message the same way, since count, datatype and
//! configuration agree across the communicator.

use std::ops::Range;

use btl_ibmc::TransportError;

use crate::reduction::Reduction;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Segments {
    total: usize,
    full: usize,
}

impl Segments {
    /// Segments of at most `limit` bytes holding whole elements of `element_size`.
    #[inline]
    pub(crate) fn new(total: usize, element_size: usize, limit: usize) -> Result<Self, TransportError> {
        let full = limit / element_size * element_size;
        if full == 0 {
            return Err(TransportError::TooLarge { len: element_size, max: limit });
        }
        Ok(Segments { total, full })
    }

    /// Bytes of the largest segment (every one but possibly the last).
    #[inline]
    pub(crate) fn full_len(&self) -> usize {
        self.full.min(self.total)
    }

    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.total.div_ceil(self.full)
    }

    #[inline]
    pub(crate) fn range(&self, index: usize) -> Range<usize> {
        let start = index * self.full;
        start..(start + self.full).min(self.total)
    }
}

/// Rejects buffers the reduction cannot be applied to, identically on
/// every rank, before anything is sent.
pub(crate) fn check_message<R: Reduction + ?Sized>(
    op: &R,
    send: &[u8],
    recv_len: Option<usize>,
) -> Result<(), TransportError> {
    let element_size = op.element_size();
    if send.len().checked_rem(element_size) != Some(0) {
        return Err(TransportError::Failed(format!(
            "a message of {} bytes is not a whole number of {element_size}-byte elements",
            send.len()
        )));
    }
    match recv_len {
        Some(len) if len != send.len() => {
            Err(TransportError::Failed(format!("receive buffer of {len} bytes for a {}-byte message", send.len())))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_message_in_whole_elements() {
        for total in (0..200).step_by(12) {
            for limit in [12, 13, 40, 1000] {
                let segments = Segments::new(total, 12, limit).unwrap();
                let mut next = 0;
                for index in 0..segments.count() {
                    let range = segments.range(index);
                    assert_eq!(range.start, next);
                    assert!(range.len() <= limit && range.len().checked_rem(12) == Some(0) && !range.is_empty());
                    next = range.end;
                }
                assert_eq!(next, total);
            }
        }
        assert!(Segments::new(64, 32, 31).is_err());
    }
}
