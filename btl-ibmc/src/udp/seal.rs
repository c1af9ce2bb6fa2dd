//! Sealing of udp frames: every frame a rank sends carries an AES-256-GCM
//! tag under its communicator's key, and (by default) its body is
//! encrypted, so that another user of the host or link who joins the
//! group or binds the port reads nothing and can inject nothing.
//!
//! Invariants:
//! - The key is drawn from the OS RNG by rank 0 and reaches the other
//!   ranks only through setup's exchange over Open MPI's own transport
//!   (`establish`); it never crosses the multicast group or a rank's port.
//! - A nonce is never used twice under one key: it is (sender rank u32,
//!   counter u64), and each rank draws its counters from two atomic
//!   streams of its own, one for frames to the group (top bit set) and
//!   one for frames to a single rank. Every send seals afresh, so a
//!   retransmission takes a new counter whether or not its bytes changed.
//! - A frame is authenticated before anything it says is believed: the
//!   header (kind, communicator, counter, sender, flags) is associated
//!   data, the body is encrypted (`Encrypt`) or associated data too
//!   (`Authenticate`). Only then does the receiver decode it, check it
//!   against the socket it came on, and mark its counter in the sender's
//!   replay window (`ReplayWindow`), so that a forged frame changes no state.
//! - `Protection::None` seals nothing: frames carry the job nonce in the
//!   counter's place, as before sealing existed, for a fabric the site trusts.
//!
//! ```text
//! sealed frame: header (24 bytes, its counter field the nonce's counter) | body | tag (16 bytes)
//! GCM nonce:    sender rank u32 LE | counter u64 LE
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use super::frame::{self, Refusal};

/// Bytes of a communicator's key.
pub(crate) const KEY_BYTES: usize = 32;
/// Bytes of the tag a sealed frame ends with.
pub(crate) const TAG_BYTES: usize = 16;
/// AES's block: GCM encrypts and authenticates a body in these.
const AES_BLOCK_BYTES: usize = 16;
/// The counter stream of frames sent to the group; the rest go to one rank.
const GROUP_STREAM: u64 = 1 << 63;

/// How udp frames are protected on the wire; every rank must choose alike.
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

    /// The name the MCA parameter takes.
    pub fn name(self) -> &'static str {
        match self {
            Protection::Encrypt => "encrypt",
            Protection::Authenticate => "authenticate",
            Protection::None => "none",
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Protection::Encrypt => 1,
            Protection::Authenticate => 2,
            Protection::None => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Protection> {
        [Protection::Encrypt, Protection::Authenticate, Protection::None].into_iter().find(|protection| protection.code() == code)
    }
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

/// One rank's sealing and opening of its communicator's frames.
pub(crate) struct Sealer {
    protection: Protection,
    key: LessSafeKey,
    sender: u32,
    /// What `Protection::None` stamps in the counter's place and demands.
    job_nonce: u64,
    next_group: AtomicU64,
    next_unicast: AtomicU64,
}

impl Sealer {
    pub(crate) fn new(protection: Protection, key: &[u8; KEY_BYTES], sender: u32, job_nonce: u64) -> Sealer {
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("AES-256-GCM takes a 32-byte key"));
        Sealer { protection, key, sender, job_nonce, next_group: AtomicU64::new(GROUP_STREAM), next_unicast: AtomicU64::new(0) }
    }

    pub(crate) fn protection(&self) -> Protection {
        self.protection
    }

    /// Seals the frame that fills `buffer[start..]` (encoded with any
    /// counter), appending its tag: frames laid end to end for one
    /// segmented send are sealed one by one.
    pub(crate) fn seal_at(&self, buffer: &mut Vec<u8>, start: usize, to_group: bool) {
        let stream = if to_group { &self.next_group } else { &self.next_unicast };
        let counter = if self.protection == Protection::None { self.job_nonce } else { stream.fetch_add(1, Ordering::Relaxed) };
        frame::set_counter(&mut buffer[start..], counter);
        let nonce = || Nonce::assume_unique_for_key(gcm_nonce(self.sender, counter));
        let sealed = match self.protection {
            Protection::None => return,
            Protection::Encrypt => {
                let (header, body) = buffer[start..].split_at_mut(frame::HEADER_BYTES);
                self.key.seal_in_place_separate_tag(nonce(), Aad::from(&*header), body)
            }
            Protection::Authenticate => self.key.seal_in_place_separate_tag(nonce(), Aad::from(&buffer[start..]), &mut []),
        };
        // ring fails only for inputs beyond GCM's 64 GiB, not a datagram.
        let tag = sealed.expect("a datagram is within AES-GCM's limits");
        buffer.extend_from_slice(tag.as_ref());
    }

    /// Replaces `scratch` with `plain` sealed: for frames kept unsealed
    /// (a reliable fragment, sent again under a new counter).
    pub(crate) fn seal_copy<'a>(&self, plain: &[u8], to_group: bool, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        scratch.clear();
        scratch.extend_from_slice(plain);
        self.seal_at(scratch, 0, to_group);
        scratch
    }

    /// Authenticates (and decrypts, in place) a frame of this backend
    /// whose claimed sender came from that rank's address, before
    /// anything else in it is believed. Returns the frame without its tag
    /// and, when sealed, its counter and stream for the replay check.
    pub(crate) fn open<'a>(&self, bytes: &'a mut [u8], communicator: u32) -> Result<(&'a [u8], Option<Counter>), Refusal> {
        let overhead = self.protection.overhead();
        if bytes.len() < frame::HEADER_BYTES + overhead {
            return Err(Refusal::Malformed);
        }
        if frame::communicator(bytes) != communicator {
            return Err(Refusal::WrongJob);
        }
        let (counter, sender) = (frame::counter(bytes), frame::sender(bytes));
        if self.protection == Protection::None {
            return if counter == self.job_nonce { Ok((bytes, None)) } else { Err(Refusal::WrongJob) };
        }
        let nonce = Nonce::assume_unique_for_key(gcm_nonce(sender, counter));
        let plain_len = bytes.len() - TAG_BYTES;
        let opened = match self.protection {
            Protection::Encrypt => {
                let (header, sealed) = bytes.split_at_mut(frame::HEADER_BYTES);
                self.key.open_in_place(nonce, Aad::from(&*header), sealed).map(|_| ())
            }
            _ => {
                let (plain, tag) = bytes.split_at_mut(plain_len);
                self.key.open_in_place(nonce, Aad::from(&*plain), tag).map(|_| ())
            }
        };
        opened.map_err(|_| Refusal::Unauthenticated)?;
        Ok((&bytes[..plain_len], Some(Counter { to_group: counter & GROUP_STREAM != 0, value: counter & !GROUP_STREAM })))
    }
}

fn gcm_nonce(sender: u32, counter: u64) -> [u8; 12] {
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

/// Counters behind a sender's newest that a replay window still tells
/// apart: frames reordered further back are dropped as replays (a loss,
/// which the reliable channel and rmcast repair with a fresh frame).
const REPLAY_SPAN: u64 = 2048;

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
mod tests {
    use super::*;
    use crate::udp::frame::{Body, Stamp, decode, encode_ack, encode_multicast};

    const STAMP: Stamp = Stamp { communicator: 77, nonce: 0x1234, sender: 3 };

    fn sealer(protection: Protection, key_byte: u8) -> Sealer {
        Sealer::new(protection, &[key_byte; KEY_BYTES], STAMP.sender, STAMP.nonce)
    }

    #[test]
    fn sealed_frames_open_only_whole_and_under_their_key() {
        for protection in [Protection::Encrypt, Protection::Authenticate] {
            let (ours, theirs) = (sealer(protection, 1), sealer(protection, 2));
            let mut frame = Vec::new();
            encode_multicast(STAMP, b"the payload", &mut frame);
            ours.seal_at(&mut frame, 0, true);
            assert_eq!(frame.len(), frame::HEADER_BYTES + 11 + TAG_BYTES);
            let in_clear = frame.windows(11).any(|window| window == b"the payload");
            assert_eq!(in_clear, protection == Protection::Authenticate, "{protection:?}");
            // Every bit matters: header, body and tag.
            for bit in 0..frame.len() * 8 {
                let mut flipped = frame.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert!(ours.open(&mut flipped, STAMP.communicator).is_err(), "{protection:?}: bit {bit} flipped passed");
            }
            assert_eq!(theirs.open(&mut frame.clone(), STAMP.communicator).err(), Some(Refusal::Unauthenticated));
            assert_eq!(ours.open(&mut frame.clone(), 78).err(), Some(Refusal::WrongJob));
            let mut copy = frame.clone();
            let (plain, counter) = ours.open(&mut copy, STAMP.communicator).expect("a genuine frame opens");
            assert_eq!(decode(plain), Ok(Body::Multicast(b"the payload")));
            assert_eq!(counter, Some(Counter { to_group: true, value: 0 }));
        }
    }

    #[test]
    fn sealed_bodies_end_on_a_whole_block_and_unsealed_ones_fill_the_room() {
        for room in [0, 15, 16, 17, 1432, 1440] {
            assert_eq!(Protection::None.fitted_body(room), room);
            for sealed in [Protection::Encrypt, Protection::Authenticate] {
                let body = sealed.fitted_body(room);
                assert!(body <= room && room - body < 16 && body % 16 == 0, "{sealed:?}: {body} of {room}");
            }
        }
        assert_eq!(Protection::Encrypt.fitted_body(1432), 1424, "a 1500-byte MTU's multicast body");
    }

    #[test]
    fn every_send_takes_a_new_nonce_in_its_stream() {
        let sealer = sealer(Protection::Encrypt, 1);
        let mut plain = Vec::new();
        encode_ack(STAMP, 5, 0, &mut plain);
        let (mut first, mut again) = (Vec::new(), Vec::new());
        let first = sealer.seal_copy(&plain, false, &mut first).to_vec();
        let again = sealer.seal_copy(&plain, false, &mut again).to_vec();
        assert_ne!(first, again, "the same frame sent twice went under one nonce");
        let counters: Vec<_> = [first, again].into_iter().map(|mut bytes| sealer.open(&mut bytes, STAMP.communicator).map(|(_, c)| c)).collect();
        assert_eq!(counters, [Ok(Some(Counter { to_group: false, value: 0 })), Ok(Some(Counter { to_group: false, value: 1 }))]);
    }

    #[test]
    fn unprotected_frames_carry_and_demand_the_job_nonce() {
        let sealer = sealer(Protection::None, 1);
        let mut frame = Vec::new();
        encode_multicast(STAMP, b"clear", &mut frame);
        sealer.seal_at(&mut frame, 0, true);
        assert_eq!(frame.len(), frame::HEADER_BYTES + 5);
        assert_eq!(sealer.open(&mut frame.clone(), STAMP.communicator).map(|(plain, c)| (plain.to_vec(), c)), Ok((frame.clone(), None)));
        let other_job = Sealer::new(Protection::None, &[1; KEY_BYTES], 3, STAMP.nonce ^ 1);
        assert_eq!(other_job.open(&mut frame, STAMP.communicator).err(), Some(Refusal::WrongJob));
    }

    #[test]
    fn the_replay_window_takes_each_counter_once_and_drops_the_too_old() {
        let mut window = ReplayWindow::new();
        let taken: Vec<bool> = [0, 2, 1, 2, 0, 5000, 5000 - REPLAY_SPAN, 5000 - REPLAY_SPAN + 1, 4999, 3].iter().map(|&c| window.admit(c)).collect();
        assert_eq!(taken, [true, true, true, false, false, true, false, true, true, false]);
        // Counters skipped by a jump are not mistaken for seen ones.
        let mut window = ReplayWindow::new();
        assert!(window.admit(12) && window.admit(13 + REPLAY_SPAN));
        assert!(window.admit(12 + REPLAY_SPAN) && !window.admit(12 + REPLAY_SPAN));
    }

    /// Not a check: what one seal and one open cost by frame size, with
    /// the communicator's cipher and with AES-128-GCM beside it, and how
    /// much of a frame's cost is fixed (the line through the smallest and
    /// largest size: a call's setup and tag, against the bytes' share).
    /// `cargo test --release -p btl-ibmc --no-default-features --lib
    /// udp::seal::tests::cost -- --ignored --nocapture`
    #[test]
    #[ignore = "measurement, not a check: run alone, in release, with --ignored --nocapture"]
    fn cost_of_sealing_and_opening_one_frame_by_size() {
        use ring::aead::{AES_128_GCM, Algorithm};
        use std::time::Instant;
        // Multicast bodies of a 1500-byte and a 9000-byte MTU, whole blocks and not, and the largest.
        let sizes = [64usize, 1424, 1432, 8928, 8932, 65_443];
        // The best of 5 passes: the machine is shared, and only slowdowns are noise.
        fn best_ns_per_call(iterations: usize, mut call: impl FnMut()) -> f64 {
            let pass = |call: &mut dyn FnMut()| {
                let started = Instant::now();
                (0..iterations).for_each(|_| call());
                started.elapsed().as_nanos() as f64 / iterations as f64
            };
            (0..5).map(|_| pass(&mut call)).fold(f64::MAX, f64::min)
        }
        let measure = |algorithm: &'static Algorithm, len: usize| -> (f64, f64) {
            let key = LessSafeKey::new(UnboundKey::new(algorithm, &vec![7; algorithm.key_len()]).expect("a key of the algorithm's length"));
            let header = [3u8; frame::HEADER_BYTES];
            let mut body = vec![1u8; len];
            let iterations = (16 << 20) / len + 1000;
            let mut counter = 0u64;
            let seal_ns = best_ns_per_call(iterations, || {
                counter += 1;
                let nonce = Nonce::assume_unique_for_key(gcm_nonce(1, counter));
                let tag = key.seal_in_place_separate_tag(nonce, Aad::from(&header), &mut body).expect("sealed");
                std::hint::black_box(tag.as_ref()[0]);
            });
            // Opening fails its tag check on every pass but the first (the
            // body is decrypted in place each time), after the same work.
            let mut sealed = vec![1u8; len];
            let tag = key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(gcm_nonce(1, 0)), Aad::from(&header), &mut sealed).expect("sealed");
            sealed.extend_from_slice(tag.as_ref());
            let open_ns = best_ns_per_call(iterations, || {
                let nonce = Nonce::assume_unique_for_key(gcm_nonce(1, 0));
                std::hint::black_box(key.open_in_place(nonce, Aad::from(&header), &mut sealed).is_ok());
            });
            (seal_ns, open_ns)
        };
        println!("ns per seal / open of one frame body, {}-byte header as associated data (best of 5 passes)", frame::HEADER_BYTES);
        for (name, algorithm) in [("AES-256-GCM (ours)", &AES_256_GCM), ("AES-128-GCM", &AES_128_GCM)] {
            let costs: Vec<(f64, f64)> = sizes.iter().map(|&len| measure(algorithm, len)).collect();
            let cells: Vec<String> = sizes
                .iter()
                .zip(&costs)
                .map(|(&len, &(seal, open))| format!("{len} B {seal:.0}/{open:.0} ({:.2} GB/s open)", len as f64 / open))
                .collect();
            let (small, large) = (costs[0].1, costs[costs.len() - 1].1);
            let per_byte = (large - small) / (sizes[sizes.len() - 1] - sizes[0]) as f64;
            let fixed = small - per_byte * sizes[0] as f64;
            println!("  {name}: {}", cells.join(", "));
            println!("    open: {fixed:.0} ns a frame + {:.3} ns a byte: the fixed part is {:.0} % of a 1432-byte frame's", per_byte, 100.0 * fixed / (fixed + per_byte * 1432.0));
        }
    }

    /// The window against the plain rule it implements, kept as a set of
    /// every counter taken in: new beyond the newest, or within the span
    /// behind it and not yet taken.
    #[test]
    fn the_replay_window_agrees_with_a_set_of_every_counter_taken() {
        let mut rng = crate::rng::Rng::new(0x5EA1);
        let mut window = ReplayWindow::new();
        let (mut taken, mut end) = (std::collections::HashSet::new(), 0u64);
        for step in 0..60_000 {
            let value = match rng.below(8) {
                // Forward: the next, a short skip, a skip across words, up to past the span.
                0 | 1 => end,
                2 => end + rng.below(70),
                3 => end + rng.below(REPLAY_SPAN + 200),
                4 => end + REPLAY_SPAN - 1 + rng.below(3),
                // Backward: recent counters (taken or skipped), and around the span's edge.
                5 | 6 => end.saturating_sub(1 + rng.below(300)),
                _ => end.saturating_sub(REPLAY_SPAN - 2 + rng.below(5)),
            };
            let expected = if value >= end || (end - value <= REPLAY_SPAN && !taken.contains(&value)) {
                taken.insert(value);
                end = end.max(value + 1);
                true
            } else {
                false
            };
            assert_eq!(window.admit(value), expected, "step {step}: counter {value}, newest before it {}", end.wrapping_sub(1));
        }
        assert!(end > 20 * REPLAY_SPAN, "the sequence should travel far past the span (reached {end})");
    }
}
