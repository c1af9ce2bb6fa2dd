//! Byte copies into and out of memory that other threads or processes touch
//! concurrently. Every access is an aligned `AtomicU64` operation, so even a
//! caller that breaks the flag protocol (reading bytes a peer is still
//! writing) gets stale or torn bytes, never undefined behaviour. Relaxed
//! ordering suffices: the flag word that follows a copy carries the
//! release/acquire edge.

use std::sync::atomic::{AtomicU64, Ordering};

const WORD: usize = std::mem::size_of::<u64>();

/// Number of words needed to hold `bytes` bytes.
pub(crate) const fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(WORD)
}

/// Writes `data` at byte `offset` of `words`. The caller has checked that
/// `offset + data.len() <= words.len() * 8`; a violation panics.
pub(crate) fn store_bytes(words: &[AtomicU64], offset: usize, data: &[u8]) {
    let mut position = offset;
    let mut rest = data;

    let lead = position % WORD;
    if lead != 0 && !rest.is_empty() {
        let count = rest.len().min(WORD - lead);
        merge_into_word(&words[position / WORD], lead, &rest[..count]);
        position += count;
        rest = &rest[count..];
    }

    let whole = rest.len() / WORD * WORD;
    let (aligned, tail) = rest.split_at(whole);
    let targets = &words[position / WORD..position / WORD + whole / WORD];
    for (word, chunk) in targets.iter().zip(aligned.chunks_exact(WORD)) {
        let mut bytes = [0u8; WORD];
        bytes.copy_from_slice(chunk);
        word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }
    position += whole;

    if !tail.is_empty() {
        merge_into_word(&words[position / WORD], 0, tail);
    }
}

/// Reads `out.len()` bytes starting at byte `offset` of `words`. The caller
/// has checked the range; a violation panics.
pub(crate) fn load_bytes(words: &[AtomicU64], offset: usize, out: &mut [u8]) {
    let mut position = offset;
    let mut rest = out;

    let lead = position % WORD;
    if lead != 0 && !rest.is_empty() {
        let count = rest.len().min(WORD - lead);
        let bytes = words[position / WORD].load(Ordering::Relaxed).to_ne_bytes();
        rest[..count].copy_from_slice(&bytes[lead..lead + count]);
        position += count;
        rest = &mut rest[count..];
    }

    let whole = rest.len() / WORD * WORD;
    let (aligned, tail) = rest.split_at_mut(whole);
    let sources = &words[position / WORD..position / WORD + whole / WORD];
    for (word, chunk) in sources.iter().zip(aligned.chunks_exact_mut(WORD)) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
    position += whole;

    if !tail.is_empty() {
        let bytes = words[position / WORD].load(Ordering::Relaxed).to_ne_bytes();
        tail.copy_from_slice(&bytes[..tail.len()]);
    }
}

/// Replaces some bytes of one word without disturbing its other bytes, which
/// a concurrent put to an adjacent range may be writing.
fn merge_into_word(word: &AtomicU64, first_byte: usize, replacement: &[u8]) {
    let merge = |old: u64| {
        let mut bytes = old.to_ne_bytes();
        bytes[first_byte..first_byte + replacement.len()].copy_from_slice(replacement);
        Some(u64::from_ne_bytes(bytes))
    };
    // The closure never returns None, so the update cannot fail.
    let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, merge);
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
                store_bytes(&words, 0, &[0xEE; 64]);
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + offset + 1) as u8).collect();
                store_bytes(&words, offset, &data);

                let mut all = [0u8; 64];
                load_bytes(&words, 0, &mut all);
                assert!(all[..offset].iter().all(|&b| b == 0xEE), "bytes before offset {offset} len {len} changed");
                assert_eq!(&all[offset..offset + len], &data[..], "offset {offset} len {len}");
                assert!(all[offset + len..].iter().all(|&b| b == 0xEE), "bytes after offset {offset} len {len} changed");

                let mut back = vec![0u8; len];
                load_bytes(&words, offset, &mut back);
                assert_eq!(back, data, "load at offset {offset} len {len}");
            }
        }
    }

    #[test]
    #[should_panic]
    fn an_unchecked_range_past_the_end_panics_rather_than_writing() {
        let words = zeroed(2);
        store_bytes(&words, 12, &[1; 8]);
    }
}
