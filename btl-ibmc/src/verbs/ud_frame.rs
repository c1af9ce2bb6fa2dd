//! The bytes of one UD multicast datagram, and their sealing
//! (`crate::seal`, the construction udp's frames use): every datagram
//! names its communicator, sender and nonce counter in clear, carries the
//! body (an rmcast piece or repair) encrypted or authenticated, and ends
//! with a tag under the communicator's key.
//!
//! ```text
//! datagram: [communicator u32 | sender rank u32 | counter u64 | body | tag (16 bytes, sealed only)]
//! ```
//! All integers little-endian. Unsealed datagrams (`Protection::None`)
//! carry the communicator's job nonce in the counter's place.
//!
//! Invariants: a datagram is opened (its tag checked under the key)
//! before its counter enters its sender's replay window or its body is
//! handed up, so a forged, altered, replayed or foreign datagram changes
//! no state but a drop counter. Free of verbs calls, so it is tested
//! anywhere.

use std::ops::Range;

use super::record::{get_u32, get_u64};
use crate::seal::{Cipher, Counter, FrameSealer, KEY_BYTES, Protection, ReplayWindow};

/// Communicator id, sender rank and nonce counter.
pub(crate) const DATAGRAM_HEADER: usize = 16;

/// The largest body a datagram of `mtu` bytes carries under `protection`:
/// the MTU less the header and tag, in whole AES blocks when sealed; 0
/// when the MTU leaves no room.
pub(crate) fn max_body(protection: Protection, mtu: usize) -> usize {
    protection.fitted_body(mtu.saturating_sub(DATAGRAM_HEADER + protection.overhead()))
}

/// The communicator and sender a datagram claims, read before anything
/// else so that the adapter's view of its source can be checked first.
pub(crate) fn claimed(datagram: &[u8]) -> Option<(u32, u32)> {
    (datagram.len() >= DATAGRAM_HEADER).then(|| (get_u32(datagram, 0), get_u32(datagram, 4)))
}

/// Why a datagram from a vouched-for source was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// Its tag does not verify: forged, altered, or another key's.
    Unauthenticated,
    /// Its counter was taken in before, or lies too far behind.
    Replayed,
    /// Unsealed, without this communicator's job nonce.
    WrongJob,
}

/// One rank's sealing and opening of its communicator's datagrams.
pub(crate) struct UdSeal {
    frames: FrameSealer,
    communicator: u32,
    rank: u32,
    /// What `Protection::None` stamps in the counter's place and demands.
    job_nonce: u64,
}

impl UdSeal {
    /// Seals under AES-256-GCM: verbs' setup record names no cipher yet,
    /// so every build must seal UD datagrams alike (udp's record names one).
    pub(crate) fn new(protection: Protection, key: &[u8; KEY_BYTES], communicator: u32, rank: u32, job_nonce: u64) -> UdSeal {
        UdSeal::with_cipher(protection, Cipher::Aes256Gcm, key, communicator, rank, job_nonce)
    }

    pub(crate) fn with_cipher(protection: Protection, cipher: Cipher, key: &[u8; KEY_BYTES], communicator: u32, rank: u32, job_nonce: u64) -> UdSeal {
        UdSeal { frames: FrameSealer::new(protection, cipher, key, rank), communicator, rank, job_nonce }
    }

    pub(crate) fn protection(&self) -> Protection {
        self.frames.protection()
    }

    /// Replaces `out` with the datagram carrying `body`, sealed under a
    /// counter no datagram of this rank had before.
    pub(crate) fn encode(&self, body: &[u8], out: &mut Vec<u8>) {
        let counter = if self.protection() == Protection::None { self.job_nonce } else { self.frames.next_counter(true) };
        out.clear();
        out.extend_from_slice(&self.communicator.to_le_bytes());
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&counter.to_le_bytes());
        out.extend_from_slice(body);
        self.frames.seal_tail(out, 0, DATAGRAM_HEADER, counter);
    }

    /// Opens `datagram` in place (its sender already vouched for by the
    /// adapter's view of its source) and takes its counter into
    /// `replay`, that sender's window: where its body lies, or why it
    /// was dropped, with nothing changed.
    pub(crate) fn open(&self, datagram: &mut [u8], replay: &mut ReplayWindow) -> Result<Range<usize>, Dropped> {
        let Some((_, sender)) = claimed(datagram) else { return Err(Dropped::Unauthenticated) };
        let counter = get_u64(datagram, 8);
        if self.protection() == Protection::None {
            return if counter == self.job_nonce { Ok(DATAGRAM_HEADER..datagram.len()) } else { Err(Dropped::WrongJob) };
        }
        let plain_len = self.frames.open(datagram, DATAGRAM_HEADER, sender, counter).map_err(|_| Dropped::Unauthenticated)?;
        // Every datagram goes to the group: a counter of the other stream
        // was never sealed by this backend.
        let Counter { to_group, value } = Counter::of(counter);
        if !to_group || !replay.admit(value) {
            return Err(Dropped::Replayed);
        }
        Ok(DATAGRAM_HEADER..plain_len)
    }

    /// `open`, then leaves only the body in `datagram`: what a receiver
    /// hands up to rmcast.
    pub(crate) fn take_body(&self, datagram: &mut Vec<u8>, replay: &mut ReplayWindow) -> Result<(), Dropped> {
        let body = self.open(datagram, replay)?;
        datagram.copy_within(body.clone(), 0);
        datagram.truncate(body.len());
        Ok(())
    }
}

#[cfg(test)]
mod rmcast_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::TAG_BYTES;

    const COMMUNICATOR: u32 = 0xC0FF_EE01;
    const JOB_NONCE: u64 = 0x5EED;

    fn seal(protection: Protection, key_byte: u8, rank: u32) -> UdSeal {
        UdSeal::new(protection, &[key_byte; KEY_BYTES], COMMUNICATOR, rank, JOB_NONCE)
    }

    /// The shared seal works alike under either cipher; verbs ships AES-256-GCM.
    fn seal_by(protection: Protection, cipher: Cipher, key_byte: u8, rank: u32) -> UdSeal {
        UdSeal::with_cipher(protection, cipher, &[key_byte; KEY_BYTES], COMMUNICATOR, rank, JOB_NONCE)
    }

    #[test]
    fn verbs_seals_under_aes_256_gcm_whatever_udp_defaults_to() {
        let mut datagram = Vec::new();
        seal(Protection::Encrypt, 1, 2).encode(b"sealed the way every build of verbs seals", &mut datagram);
        let mut replay = ReplayWindow::new();
        let by = |cipher| receive(&seal_by(Protection::Encrypt, cipher, 1, 0), &datagram, &mut ReplayWindow::new());
        assert!(by(Cipher::Aes256Gcm).is_ok() && by(Cipher::Aegis128L) == Err(Dropped::Unauthenticated));
        assert!(receive(&seal(Protection::Encrypt, 1, 0), &datagram, &mut replay).is_ok());
    }

    /// What a receiver hands up: the body, or why it dropped the datagram.
    fn receive(receiver: &UdSeal, datagram: &[u8], replay: &mut ReplayWindow) -> Result<Vec<u8>, Dropped> {
        let mut copy = datagram.to_vec();
        let body = receiver.open(&mut copy, replay)?;
        Ok(copy[body].to_vec())
    }

    #[test]
    fn a_datagram_fits_the_mtu_with_its_header_and_tag_in_whole_blocks() {
        // Soft-RoCE's path MTUs (1024 at a 1500-byte Ethernet, 4096 at 9000).
        assert_eq!(max_body(Protection::Encrypt, 1024), 992);
        assert_eq!(max_body(Protection::Authenticate, 4096), 4064);
        assert_eq!(max_body(Protection::None, 1024), 1008);
        assert_eq!(max_body(Protection::Encrypt, 2000), 1968 - 1968 % 16);
        assert_eq!(max_body(Protection::Encrypt, 31), 0, "no room: no datagram");
        for protection in Protection::ALL {
            for mtu in [256, 1024, 2000, 4096] {
                let mut out = Vec::new();
                seal(protection, 1, 0).encode(&vec![7; max_body(protection, mtu)], &mut out);
                assert!(out.len() <= mtu, "{protection:?}: a {}-byte datagram for a {mtu}-byte MTU", out.len());
            }
        }
    }

    #[test]
    fn sealed_datagrams_hide_the_body_and_reach_the_other_ranks_once() {
        let body: Vec<u8> = (0..200u8).collect();
        let kinds = Cipher::ALL.into_iter().flat_map(|cipher| [Protection::Encrypt, Protection::Authenticate].map(|protection| (protection, cipher)));
        for (protection, cipher) in kinds {
            let (sender, receiver) = (seal_by(protection, cipher, 1, 2), seal_by(protection, cipher, 1, 0));
            let protection = (protection, cipher);
            let mut datagram = Vec::new();
            sender.encode(&body, &mut datagram);
            assert_eq!(datagram.len(), DATAGRAM_HEADER + body.len() + TAG_BYTES);
            assert_eq!(claimed(&datagram), Some((COMMUNICATOR, 2)));
            let in_clear = datagram.windows(16).any(|window| window == &body[100..116]);
            assert_eq!(in_clear, protection.0 == Protection::Authenticate, "{protection:?}");
            let mut replay = ReplayWindow::new();
            assert_eq!(receive(&receiver, &datagram, &mut replay), Ok(body.clone()), "{protection:?}");
            assert_eq!(receive(&receiver, &datagram, &mut replay), Err(Dropped::Replayed), "{protection:?}: the same datagram again");
        }
    }

    #[test]
    fn forged_altered_and_foreign_datagrams_are_dropped_and_change_nothing() {
        for cipher in Cipher::ALL {
            forgeries_are_dropped_under(cipher);
        }
    }

    fn forgeries_are_dropped_under(cipher: Cipher) {
        let seal = |protection, key_byte, rank| seal_by(protection, cipher, key_byte, rank);
        let (sender, receiver) = (seal(Protection::Encrypt, 1, 2), seal(Protection::Encrypt, 1, 0));
        let mut genuine = Vec::new();
        sender.encode(b"a genuine piece of sixteen*2 byte", &mut genuine);
        let mut replay = ReplayWindow::new();
        // A stranger who learned the group, the communicator id and a
        // rank's counter (all in clear) but not the key: its own seal.
        let mut forged = Vec::new();
        seal(Protection::Encrypt, 9, 2).encode(b"a forged piece of sixteen*2 byte", &mut forged);
        // The same, unsealed, with the nonce guessed: the pre-seal format.
        let mut unsealed = Vec::new();
        seal(Protection::None, 1, 2).encode(b"an unsealed piece", &mut unsealed);
        assert_eq!(receive(&receiver, &forged, &mut replay), Err(Dropped::Unauthenticated));
        assert_eq!(receive(&receiver, &unsealed, &mut replay), Err(Dropped::Unauthenticated));
        for bit in 0..genuine.len() * 8 {
            let mut flipped = genuine.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(receive(&receiver, &flipped, &mut replay).is_err(), "{cipher:?}: bit {bit} flipped passed");
        }
        for cut in 1..=DATAGRAM_HEADER + TAG_BYTES {
            assert!(receive(&receiver, &genuine[..genuine.len() - cut], &mut replay).is_err(), "{cut} bytes cut passed");
        }
        // None of the above took the genuine datagram's counter.
        assert_eq!(receive(&receiver, &genuine, &mut replay).as_deref(), Ok(&b"a genuine piece of sixteen*2 byte"[..]));
    }

    #[test]
    fn unsealed_datagrams_carry_and_demand_the_job_nonce() {
        let mut datagram = Vec::new();
        seal(Protection::None, 1, 1).encode(b"clear", &mut datagram);
        assert_eq!(datagram.len(), DATAGRAM_HEADER + 5);
        assert!(datagram.ends_with(b"clear"));
        let mut replay = ReplayWindow::new();
        assert_eq!(receive(&seal(Protection::None, 2, 0), &datagram, &mut replay).as_deref(), Ok(&b"clear"[..]));
        let other_job = UdSeal::new(Protection::None, &[1; KEY_BYTES], COMMUNICATOR, 0, JOB_NONCE ^ 1);
        assert_eq!(receive(&other_job, &datagram, &mut replay), Err(Dropped::WrongJob));
    }
}
