//! Sealing of datagrams that cross a fabric others can reach (udp's
//! frames, verbs' UD multicast): every frame a rank sends carries a tag
//! of the communicator's AEAD (`Cipher`: AEGIS-128L or AES-256-GCM) under
//! its key and, by default, its body is encrypted, so that another user of the host or the fabric who joins
//! the group reads nothing and can inject nothing. The transports lay
//! their frames out as `header | body` and keep their own header format;
//! this module seals and opens that layout, draws keys and nonces and
//! keeps the replay windows.
//!
//! Invariants:
//! - The key is drawn from the OS RNG by rank 0 and reaches the other
//!   ranks only through the transport's setup exchange over Open MPI's
//!   own transports; it never crosses the fabric it protects.
//! - A nonce is never used twice under one key: it is (sender rank u32,
//!   counter u64), and each rank draws its counters from two atomic
//!   streams of its own, one for frames to the group (top bit set) and
//!   one for frames to a single rank. Every send draws a new counter, so
//!   a retransmission takes a new nonce whether or not its bytes changed.
//! - A frame is authenticated before anything it says is believed: the
//!   header is associated data, the body is encrypted (`Encrypt`) or
//!   associated data too (`Authenticate`); only an opened frame's counter
//!   may enter its sender's replay window (`ReplayWindow`).
//!
//! ```text
//! sealed frame: header (holds the sender and the counter) | body | tag (16 bytes)
//! nonce:        sender rank u32 LE | counter u64 LE (| 0 u32 for AEGIS-128L)
//! ```
//!
//! AEGIS-128L takes a 16-byte key: the first half of the communicator's
//! 32 random bytes (every byte of which is drawn alike, so either half is
//! a uniformly random key). A frame sealed under one cipher never opens
//! under the other: they compute unrelated tags.

use std::sync::atomic::{AtomicU64, Ordering};

use aegis::aegis128l::Aegis128L;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of a communicator's key.
pub(crate) const KEY_BYTES: usize = 32;
/// Bytes of the tag a sealed frame ends with.
pub(crate) const TAG_BYTES: usize = 16;
/// AES's block: GCM encrypts and authenticates a body in these.
const AES_BLOCK_BYTES: usize = 16;
/// The counter stream of frames sent to the group; the rest go to one rank.
const GROUP_STREAM: u64 = 1 << 63;

/// How a transport's frames are protected on the wire; every rank must
/// choose alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protection {
    /// Header and body authenticated, body encrypted.
    #[default]
    Encrypt,
    /// Header and body authenticated, body in the clear.
    Authenticate,
    /// Nothing: anyone who can reach the group or a rank's port can read
    /// and inject frames (a fabric the site trusts).
    None,
}

impl Protection {
    /// Every protection, in the order the parameters' help names them.
    pub const ALL: [Protection; 3] = [Protection::Encrypt, Protection::Authenticate, Protection::None];

    /// What a frame carries beyond its header and body.
    pub fn overhead(self) -> usize {
        match self {
            Protection::None => 0,
            Protection::Encrypt | Protection::Authenticate => TAG_BYTES,
        }
    }

    /// The longest frame body (what follows the header), at most `room`
    /// bytes, that costs no more to seal than its bytes: sealed bodies
    /// end on a whole AES block, since ring's AES-GCM takes whole blocks
    /// in its fused pass and a partial last block apart (an 8-byte tail
    /// made a 1432-byte body cost 6-12 % more to seal or open than a
    /// 1424-byte one, docs/security.md). Unsealed bodies take all the room.
    pub(crate) fn fitted_body(self, room: usize) -> usize {
        match self {
            Protection::None => room,
            Protection::Encrypt | Protection::Authenticate => room - room % AES_BLOCK_BYTES,
        }
    }

    /// The name the MCA parameters take.
    pub fn name(self) -> &'static str {
        match self {
            Protection::Encrypt => "encrypt",
            Protection::Authenticate => "authenticate",
            Protection::None => "none",
        }
    }

    /// Its code in setup records (never 0, so a zeroed record names none).
    pub(crate) fn code(self) -> u8 {
        match self {
            Protection::Encrypt => 1,
            Protection::Authenticate => 2,
            Protection::None => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Protection> {
        Protection::ALL.into_iter().find(|protection| protection.code() == code)
    }
}

/// The AEAD that seals a communicator's frames; every rank must choose
/// alike (docs/security.md says why AEGIS-128L is the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cipher {
    /// AEGIS-128L (RFC 10032) through the `aegis` crate's libaegis, which
    /// picks its AES-NI or VAES code at run time: about half the CPU time
    /// of AES-256-GCM per byte here.
    #[default]
    Aegis128L,
    /// AES-256-GCM through ring.
    Aes256Gcm,
}

impl Cipher {
    /// Every cipher, in the order the parameters' help names them.
    pub const ALL: [Cipher; 2] = [Cipher::Aegis128L, Cipher::Aes256Gcm];

    /// The name the MCA parameters take.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aegis128L => "aegis-128l",
            Cipher::Aes256Gcm => "aes-256-gcm",
        }
    }

    /// Its code in setup records (never 0, so a zeroed record names none).
    pub(crate) fn code(self) -> u8 {
        match self {
            Cipher::Aegis128L => 1,
            Cipher::Aes256Gcm => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Cipher> {
        Cipher::ALL.into_iter().find(|cipher| cipher.code() == code)
    }
}

/// AEGIS-128L's key: the first half of a communicator's key.
const AEGIS_KEY_BYTES: usize = 16;

/// A communicator's key, ready for its cipher.
enum Keyed {
    Aegis128L([u8; AEGIS_KEY_BYTES]),
    Aes256Gcm(LessSafeKey),
}

impl Keyed {
    fn new(cipher: Cipher, key: &[u8; KEY_BYTES]) -> Keyed {
        match cipher {
            Cipher::Aegis128L => {
                let mut half = [0u8; AEGIS_KEY_BYTES];
                half.copy_from_slice(&key[..AEGIS_KEY_BYTES]);
                Keyed::Aegis128L(half)
            }
            Cipher::Aes256Gcm => {
                Keyed::Aes256Gcm(LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("AES-256-GCM takes a 32-byte key")))
            }
        }
    }

    /// Encrypts `body` in place, authenticating it and `associated`; the tag.
    fn seal(&self, nonce: [u8; 12], associated: &[u8], body: &mut [u8]) -> [u8; TAG_BYTES] {
        match self {
            Keyed::Aegis128L(key) => Aegis128L::<TAG_BYTES>::new(key, &aegis_nonce(nonce)).encrypt_in_place(body, associated),
            Keyed::Aes256Gcm(key) => {
                let tag = key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(associated), body);
                // ring fails only for inputs beyond GCM's 64 GiB, not a datagram.
                let tag = tag.expect("a datagram is within AES-GCM's limits");
                tag.as_ref().try_into().expect("AES-GCM's tag is 16 bytes")
            }
        }
    }

    /// Checks the tag that ends `sealed` over `associated` and the body
    /// before it, and decrypts that body in place.
    fn open(&self, nonce: [u8; 12], associated: &[u8], sealed: &mut [u8]) -> Result<(), Unauthenticated> {
        let body_len = sealed.len().checked_sub(TAG_BYTES).ok_or(Unauthenticated)?;
        match self {
            Keyed::Aegis128L(key) => {
                let (body, tag) = sealed.split_at_mut(body_len);
                let tag: &[u8; TAG_BYTES] = (&*tag).try_into().map_err(|_| Unauthenticated)?;
                Aegis128L::<TAG_BYTES>::new(key, &aegis_nonce(nonce)).decrypt_in_place(body, tag, associated).map_err(|_| Unauthenticated)
            }
            Keyed::Aes256Gcm(key) => {
                key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(associated), sealed).map(|_| ()).map_err(|_| Unauthenticated)
            }
        }
    }

    /// Checks the tag that ends `sealed` over `associated` and the body
    /// before it, and makes `plain` that body decrypted: under AEGIS-128L
    /// in one pass from `sealed` (not decrypted in place, then copied).
    /// On failure `plain` is empty.
    fn open_into(&self, nonce: [u8; 12], associated: &[u8], sealed: &[u8], plain: &mut Vec<u8>) -> Result<(), Unauthenticated> {
        let Some(body_len) = sealed.len().checked_sub(TAG_BYTES) else {
            plain.clear();
            return Err(Unauthenticated);
        };
        let (body, tag) = sealed.split_at(body_len);
        match self {
            Keyed::Aegis128L(key) => {
                let Ok(tag) = <&[u8; TAG_BYTES]>::try_from(tag) else {
                    plain.clear();
                    return Err(Unauthenticated);
                };
                // The one-shot call decrypts into a new buffer (libaegis
                // zeroes it when the tag fails). The crate's incremental
                // decryptor could write into a buffer kept from an earlier
                // frame, but sets up and wipes (byte by byte) a 256-byte
                // state for every call: it measured 17 % more CPU a MiB.
                match Aegis128L::<TAG_BYTES>::new(key, &aegis_nonce(nonce)).decrypt(body, tag, associated) {
                    Ok(opened) => {
                        *plain = opened;
                        Ok(())
                    }
                    Err(_) => {
                        plain.clear();
                        Err(Unauthenticated)
                    }
                }
            }
            Keyed::Aes256Gcm(_) => {
                // ring opens only in place: copy, then open the copy.
                plain.clear();
                plain.extend_from_slice(sealed);
                let opened = self.open(nonce, associated, plain);
                match opened {
                    Ok(()) => {
                        plain.truncate(body_len);
                        Ok(())
                    }
                    Err(refused) => {
                        plain.clear();
                        Err(refused)
                    }
                }
            }
        }
    }
}

impl Drop for Keyed {
    fn drop(&mut self) {
        if let Keyed::Aegis128L(key) = self {
            scrub(key);
        }
    }
}

/// AEGIS-128L's 16-byte nonce: the 12 of AES-GCM's, then zeros.
fn aegis_nonce(nonce: [u8; 12]) -> [u8; 16] {
    let mut wide = [0u8; 16];
    wide[..12].copy_from_slice(&nonce);
    wide
}

/// A fresh communicator key from the OS RNG (getrandom).
pub(crate) fn draw_key() -> Result<[u8; KEY_BYTES], String> {
    let mut key = [0u8; KEY_BYTES];
    SystemRandom::new().fill(&mut key).map_err(|_| "the OS random number generator failed".to_string())?;
    Ok(key)
}

/// Overwrites a copy of a key with zeros once the sealer holds it, so
/// that it does not linger in memory freed or reused later. Best effort:
/// copies the compiler makes on its own (registers, spills) are beyond it.
pub(crate) fn scrub(copy: &mut [u8]) {
    copy.fill(0);
    // The optimiser must assume the zeros are read, so it keeps the stores.
    std::hint::black_box(copy);
}

/// A frame that failed to open: forged, altered on the way, cut short, or
/// sealed under another key (another communicator's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unauthenticated;

/// One rank's sealing and opening of its communicator's frames, whatever
/// their header's layout: the transport writes the counter this hands out
/// into its header, and reads the sender and counter back from a received
/// header to open it.
pub(crate) struct FrameSealer {
    protection: Protection,
    cipher: Cipher,
    key: Keyed,
    sender: u32,
    next_group: AtomicU64,
    next_unicast: AtomicU64,
}

impl FrameSealer {
    pub(crate) fn new(protection: Protection, cipher: Cipher, key: &[u8; KEY_BYTES], sender: u32) -> FrameSealer {
        let key = Keyed::new(cipher, key);
        FrameSealer { protection, cipher, key, sender, next_group: AtomicU64::new(GROUP_STREAM), next_unicast: AtomicU64::new(0) }
    }

    pub(crate) fn protection(&self) -> Protection {
        self.protection
    }

    pub(crate) fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The counter the next frame of a stream goes under: never the same
    /// twice in this sealer's life.
    pub(crate) fn next_counter(&self, to_group: bool) -> u64 {
        let stream = if to_group { &self.next_group } else { &self.next_unicast };
        stream.fetch_add(1, Ordering::Relaxed)
    }

    /// Seals the frame in `buffer[start..]`, whose first `header_len`
    /// bytes are its header (already holding `counter`, from
    /// `next_counter`), and appends its tag; nothing under `None`.
    pub(crate) fn seal_tail(&self, buffer: &mut Vec<u8>, start: usize, header_len: usize, counter: u64) {
        let nonce = frame_nonce(self.sender, counter);
        let tag = match self.protection {
            Protection::None => return,
            Protection::Encrypt => {
                let (header, body) = buffer[start..].split_at_mut(header_len);
                self.key.seal(nonce, header, body)
            }
            // The whole frame as associated data: AEGIS absorbs it at its
            // encryption's speed (docs/security.md compares its MAC mode).
            Protection::Authenticate => self.key.seal(nonce, &buffer[start..], &mut []),
        };
        buffer.extend_from_slice(&tag);
    }

    /// Authenticates (and decrypts, in place) `frame`: `header_len` bytes
    /// of header naming `sender` and `counter`, the body, the tag. Returns
    /// the frame's length without its tag. Under `None` every frame opens
    /// as it is; the caller checks what it can.
    pub(crate) fn open(&self, frame: &mut [u8], header_len: usize, sender: u32, counter: u64) -> Result<usize, Unauthenticated> {
        if self.protection == Protection::None {
            return Ok(frame.len());
        }
        let plain_len = frame.len().checked_sub(TAG_BYTES).filter(|&len| len >= header_len).ok_or(Unauthenticated)?;
        let nonce = frame_nonce(sender, counter);
        let split = if self.protection == Protection::Encrypt { header_len } else { plain_len };
        let (associated, sealed) = frame.split_at_mut(split);
        self.key.open(nonce, associated, sealed).map(|()| plain_len)
    }

    /// `open`, for a frame whose body the caller keeps apart from the
    /// frame: authenticates `frame` (`header_len` bytes of header naming
    /// `sender` and `counter`, the body, the tag) and makes `body` its
    /// body in clear (under `Encrypt` with AEGIS-128L, decrypted from the
    /// frame in one pass). Returns the frame's length without its tag. On
    /// failure `body` is left empty: nothing of a frame that failed to
    /// open reaches it.
    pub(crate) fn open_body_into(&self, frame: &mut [u8], header_len: usize, sender: u32, counter: u64, body: &mut Vec<u8>) -> Result<usize, Unauthenticated> {
        body.clear();
        if self.protection != Protection::Encrypt {
            let plain_len = self.open(frame, header_len, sender, counter)?;
            body.extend_from_slice(&frame[header_len..plain_len]);
            return Ok(plain_len);
        }
        let plain_len = frame.len().checked_sub(TAG_BYTES).filter(|&len| len >= header_len).ok_or(Unauthenticated)?;
        let (header, sealed) = frame.split_at(header_len);
        self.key.open_into(frame_nonce(sender, counter), header, sealed, body).map(|()| plain_len)
    }
}

/// The 12 bytes that make a frame's nonce unique under its key.
pub(crate) fn frame_nonce(sender: u32, counter: u64) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&sender.to_le_bytes());
    nonce[4..].copy_from_slice(&counter.to_le_bytes());
    nonce
}
/// Where an authenticated frame's counter lies among its sender's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counter {
    pub(crate) to_group: bool,
    pub(crate) value: u64,
}

impl Counter {
    /// The stream and place of a counter `FrameSealer::next_counter` gave.
    pub(crate) fn of(counter: u64) -> Counter {
        Counter { to_group: counter & GROUP_STREAM != 0, value: counter & !GROUP_STREAM }
    }
}

/// Counters behind a sender's newest that a replay window still tells
/// apart: frames reordered further back are dropped as replays (a loss,
/// which the protocols above repair with a fresh frame).
pub(crate) const REPLAY_SPAN: u64 = 2048;

/// Which of one sender's recent counters in one stream were taken in.
pub(crate) struct ReplayWindow {
    /// One past the newest counter taken in (0: none yet).
    end: u64,
    /// Bit `c % REPLAY_SPAN` set: counter `c` (within the span below `end`) taken in.
    seen: [u64; (REPLAY_SPAN / 64) as usize],
}

impl ReplayWindow {
    pub(crate) fn new() -> Self {
        ReplayWindow { end: 0, seen: [0; (REPLAY_SPAN / 64) as usize] }
    }

    /// Takes counter `value` in, unless it was taken in before or lies
    /// too far behind the newest to tell: then false, and nothing changes.
    pub(crate) fn admit(&mut self, value: u64) -> bool {
        if value >= self.end {
            // Counters skipped over were never seen: clear their bits, a
            // word at a time (a forward jump costs at most the array).
            let skipped = value - self.end;
            if skipped >= REPLAY_SPAN {
                self.seen = [0; (REPLAY_SPAN / 64) as usize];
            } else {
                let from = self.end % REPLAY_SPAN;
                let to = from + skipped;
                // The skipped bits may wrap past the array's end.
                self.clear_bits(from, to.min(REPLAY_SPAN));
                self.clear_bits(0, to.saturating_sub(REPLAY_SPAN));
            }
            self.end = value + 1;
            self.mark(value);
            return true;
        }
        if self.end - value > REPLAY_SPAN || self.get(value) {
            return false;
        }
        self.mark(value);
        true
    }

    /// Clears bit positions `from..to` (`to <= REPLAY_SPAN`; empty if
    /// `from >= to`): whole words, with masks at the two edges.
    fn clear_bits(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let (first, last) = (from / 64, (to - 1) / 64);
        for word in first..=last {
            let low = if word == first { from % 64 } else { 0 };
            let high = if word == last { (to - 1) % 64 + 1 } else { 64 };
            let mask = (u64::MAX >> (64 - (high - low))) << low;
            self.seen[word as usize] &= !mask;
        }
    }

    fn get(&self, counter: u64) -> bool {
        let bit = counter % REPLAY_SPAN;
        self.seen[(bit / 64) as usize] >> (bit % 64) & 1 == 1
    }

    fn mark(&mut self, counter: u64) {
        let bit = counter % REPLAY_SPAN;
        self.seen[(bit / 64) as usize] |= 1 << (bit % 64);
    }
}

#[cfg(test)]
mod tests;
