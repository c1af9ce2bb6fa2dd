//! Puts into slots the writer owns up to a word boundary.
//!
//! A put whose length is not a multiple of 8 ends in a partial word, which
//! the window must merge into the bytes around it with a read-modify-write.
//! When the reader is polling a flag in the same cache line, that read pulls
//! the line over once and the write pulls it over again: for a 4-byte
//! reduction or a 1-byte bcast this doubles the cost of the transfer. A
//! writer that owns the rest of the word (a per-sender slot) can instead
//! write whole words, padding with zeros, which costs a single transfer.

use crate::transport::{TransportError, Windows};

const WORD: usize = 8;

/// Small payloads are padded on the stack; beyond this the merge of the
/// last word is a small part of the copy and is left to the window.
pub const PADDED_PUT_MAX: usize = 64;

/// `Windows::put` of `data` at the word-aligned `offset`, writing whole
/// words: the bytes between the end of `data` and the next word boundary
/// are overwritten with zeros. The caller must own those bytes (they are in
/// its own slot, which it reads back only as `data.len()` bytes).
pub fn put_word_padded<T: Windows + ?Sized>(
    transport: &T,
    peer: usize,
    offset: usize,
    data: &[u8],
    flag_offset: usize,
    flag: u64,
) -> Result<(), TransportError> {
    let tail = data.len() % WORD;
    if tail == 0 || data.len() > PADDED_PUT_MAX || offset % WORD != 0 {
        return transport.put(peer, offset, data, flag_offset, flag);
    }
    let mut padded = [0u8; PADDED_PUT_MAX];
    padded[..data.len()].copy_from_slice(data);
    transport.put(peer, offset, &padded[..data.len().next_multiple_of(WORD)], flag_offset, flag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{Fabric, FabricConfig};

    #[test]
    fn a_padded_put_delivers_the_data_and_zeroes_only_the_rest_of_its_last_word() {
        for len in 0..=PADDED_PUT_MAX + 9 {
            let endpoints = Fabric::new(2, 256, FabricConfig::default());
            let (writer, reader) = (&endpoints[0], &endpoints[1]);
            writer.put(1, 0, &[0xEE; 200], 248, 1).unwrap();
            let data: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5A).collect();
            put_word_padded(writer, 1, 8, &data, 248, 2).unwrap();
            assert_eq!(reader.local_flag(248), 2);

            let mut window = [0u8; 200];
            reader.read_local(0, &mut window);
            let padded_end = if len <= PADDED_PUT_MAX { 8 + len.next_multiple_of(WORD) } else { 8 + len };
            assert!(window[..8].iter().all(|&b| b == 0xEE), "len {len}: bytes before the slot changed");
            assert_eq!(&window[8..8 + len], &data[..], "len {len}");
            assert!(window[8 + len..padded_end].iter().all(|&b| b == 0), "len {len}: padding not zero");
            assert!(window[padded_end..].iter().all(|&b| b == 0xEE), "len {len}: bytes past the word changed");
        }
    }
}
