//! Bookkeeping of the send side, free of verbs calls so it can be tested
//! anywhere: which work requests on a queue pair ask for a completion, how
//! many are outstanding, and which parts of the staging ring they still
//! read from.
//!
//! Most work requests are posted unsignalled; every `interval`-th asks for a
//! completion, and because a queue pair completes its send queue in order,
//! that completion covers every request posted on it before. Staging bytes
//! are leased to the request that reads them and come back when a
//! completion covering that request has been polled.

use std::collections::VecDeque;
use crate::transport::TransportError;
use crate::wait::{OwnChannel, Waiter};

/// Smallest staging ring accepted.
pub(crate) const MIN_STAGING_BYTES: usize = 64 * 1024;
/// Leases start on cache-line boundaries.
const LEASE_ALIGN: usize = 64;

/// The send-queue accounting of one queue pair. Sequence numbers start at 1.
#[derive(Clone, Debug)]
pub(crate) struct SendAccount {
    posted: u64,
    completed: u64,
    last_signalled: u64,
    interval: u64,
    depth: u64,
}

impl SendAccount {
    pub(crate) fn new(interval: u32, depth: u32) -> Self {
        SendAccount { posted: 0, completed: 0, last_signalled: 0, interval: u64::from(interval.max(1)), depth: u64::from(depth) }
    }

    /// An account whose first `posted` requests have all completed, to
    /// test the counters near a wrap without posting that many.
    #[cfg(test)]
    pub(crate) fn after(posted: u64, interval: u32, depth: u32) -> Self {
        SendAccount { posted, completed: posted, last_signalled: posted, ..SendAccount::new(interval, depth) }
    }

    /// Requests posted whose completion has not been seen yet.
    pub(crate) fn outstanding(&self) -> u64 {
        self.posted - self.completed
    }

    /// Whether `count` more requests fit in the send queue now.
    pub(crate) fn has_room_for(&self, count: u64) -> bool {
        self.outstanding() + count <= self.depth
    }

    /// Numbers the next request and says whether it must be signalled.
    pub(crate) fn next(&mut self, force_signal: bool) -> (u64, bool) {
        let seq = self.posted + 1;
        let signalled = force_signal || seq - self.last_signalled >= self.interval;
        if signalled {
            self.last_signalled = seq;
        }
        self.posted = seq;
        (seq, signalled)
    }

    /// A signalled request completed: it and all before it are done.
    pub(crate) fn complete_through(&mut self, seq: u64) {
        self.completed = self.completed.max(seq.min(self.posted));
    }

    /// As `complete_through`, for a completion that names its request by
    /// the low `bits` of its sequence number only (a work-request id
    /// shares its 64 bits with the peer).
    pub(crate) fn complete_through_low_bits(&mut self, low: u64, bits: u32) {
        self.complete_through(widen_sequence(low, bits, self.posted));
    }

    pub(crate) fn completed(&self) -> u64 {
        self.completed
    }

    pub(crate) fn posted(&self) -> u64 {
        self.posted
    }

    /// Whether a signalled request is still to complete, so polling will
    /// eventually advance `completed`.
    pub(crate) fn awaits_signal(&self) -> bool {
        self.last_signalled > self.completed
    }

    /// Whether request `seq` will be covered by a completion already asked for.
    pub(crate) fn is_covered(&self, seq: u64) -> bool {
        self.last_signalled >= seq
    }
}

/// The full sequence number whose low `bits` bits are `low`: the latest
/// one posted so far (at most `posted`) that ends in those bits. A
/// completion names a request still outstanding, and far fewer than
/// 2^bits are (the send queue's depth), so that one is the request.
pub(crate) fn widen_sequence(low: u64, bits: u32, posted: u64) -> u64 {
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let back = posted.wrapping_sub(low) & mask;
    posted.saturating_sub(back)
}

/// Waits until `account` has room for one more request, calling `poll`
/// (which takes completions into the account) between checks. However
/// late the adapter gives buffers back, the request is sent: dropping the
/// sender's own data would only make receivers ask for it again. Only a
/// failure `poll` reports, or the process's fault timeout, ends the wait;
/// the wait warns about one that looks like a hang first. Returns whether
/// it had to wait at all.
pub(crate) fn wait_for_send_room(
    account: &mut SendAccount,
    waiting: OwnChannel,
    mut poll: impl FnMut(&mut SendAccount) -> Result<(), TransportError>,
) -> Result<bool, TransportError> {
    if account.has_room_for(1) {
        return Ok(false);
    }
    let mut waiter = Waiter::for_process();
    loop {
        poll(account)?;
        if account.has_room_for(1) {
            return Ok(true);
        }
        let outstanding = account.outstanding();
        waiter.pause(&waiting, || format!("a multicast send buffer to come back ({outstanding} datagrams in flight)"))?;
    }
}

/// A staging region handed to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// Byte offset in the staging buffer.
    pub(crate) offset: usize,
    /// Ring position just past it (padding included), for the lease.
    pub(crate) end: u64,
}

#[derive(Clone, Copy, Debug)]
struct Lease {
    end: u64,
    peer: usize,
    seq: u64,
}

/// A byte ring of contiguous regions released in the order they were taken.
#[derive(Debug)]
pub(crate) struct StagingRing {
    capacity: usize,
    /// Bytes ever handed out, padding included.
    head: u64,
    /// Bytes ever given back.
    tail: u64,
    leases: VecDeque<Lease>,
}

impl StagingRing {
    pub(crate) fn new(capacity: usize) -> Self {
        StagingRing { capacity, head: 0, tail: 0, leases: VecDeque::new() }
    }

    /// Largest region one request should take, so that several requests
    /// can be in flight at once.
    pub(crate) fn max_chunk(&self) -> usize {
        self.capacity / 4
    }

    pub(crate) fn in_use(&self) -> usize {
        (self.head - self.tail) as usize
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// A contiguous region of `len` bytes, if there is room now. A region
    /// never wraps: the bytes left before the end are skipped instead.
    pub(crate) fn reserve(&mut self, len: usize) -> Option<Reservation> {
        let (offset, needed) = self.fit(len)?;
        self.head += needed as u64;
        Some(Reservation { offset, end: self.head })
    }

    /// Whether `reserve(len)` would find room now.
    pub(crate) fn can_reserve(&self, len: usize) -> bool {
        self.fit(len).is_some()
    }

    /// Where a region of `len` bytes would start, and the bytes it would
    /// take with the skipped end of the ring; None without room.
    fn fit(&self, len: usize) -> Option<(usize, usize)> {
        let rounded = len.max(1).checked_next_multiple_of(LEASE_ALIGN)?;
        if rounded > self.capacity {
            return None;
        }
        let position = (self.head % self.capacity as u64) as usize;
        let free = self.capacity - self.in_use();
        let (offset, needed) =
            if position + rounded <= self.capacity { (position, rounded) } else { (0, self.capacity - position + rounded) };
        (needed <= free).then_some((offset, needed))
    }

    /// Ties a reservation to the request reading it.
    pub(crate) fn lease(&mut self, reservation: Reservation, peer: usize, seq: u64) {
        self.leases.push_back(Lease { end: reservation.end, peer, seq });
    }

    /// The request holding the oldest lease, which must complete before
    /// anything else is given back.
    pub(crate) fn oldest(&self) -> Option<(usize, u64)> {
        self.leases.front().map(|lease| (lease.peer, lease.seq))
    }

    /// Gives back leases, oldest first, while `completed(peer)` covers them.
    pub(crate) fn release(&mut self, completed: impl Fn(usize) -> u64) {
        while let Some(lease) = self.leases.front() {
            if lease.seq > completed(lease.peer) {
                break;
            }
            self.tail = lease.end;
            self.leases.pop_front();
        }
        if self.leases.is_empty() && self.head == self.tail {
            // Nothing in flight or reserved: restart at the beginning so the
            // next large request does not have to skip the ring's end.
            self.head = 0;
            self.tail = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_interval_th_request_is_signalled_and_covers_those_before() {
        let mut account = SendAccount::new(4, 16);
        let signalled: Vec<bool> = (0..9).map(|_| account.next(false).1).collect();
        assert_eq!(signalled, [false, false, false, true, false, false, false, true, false]);
        assert_eq!(account.outstanding(), 9);
        assert!(account.is_covered(8) && !account.is_covered(9));
        account.complete_through(8);
        assert_eq!(account.outstanding(), 1);
        assert!(!account.awaits_signal());
        assert_eq!(account.next(true), (10, true));
        assert!(account.awaits_signal());
        assert!(account.has_room_for(14) && !account.has_room_for(15));
    }

    #[test]
    fn sequences_widen_to_the_latest_posted_request_with_those_low_bits() {
        const BITS: u32 = 40;
        let wrap = 1u64 << BITS;
        for (seq, posted) in [(1, 1), (5, 9), (wrap - 1, wrap + 3), (wrap, wrap + 3), (wrap + 3, wrap + 3), (7 * wrap + 2, 7 * wrap + 60)] {
            assert_eq!(widen_sequence(seq & (wrap - 1), BITS, posted), seq, "seq {seq} with {posted} posted");
        }
        assert_eq!(widen_sequence(12, 64, 99), 12);
    }

    /// An adapter slow to give send buffers back (a busy machine, a slow
    /// link): the sender must wait for them, not give up on its datagram.
    #[test]
    fn a_full_send_queue_waits_for_its_completions_however_late() {
        let mut account = SendAccount::new(2, 4);
        let mut signalled = Vec::new();
        while account.has_room_for(1) {
            let (seq, signal) = account.next(false);
            if signal {
                signalled.push(seq);
            }
        }
        assert_eq!(signalled, [2, 4]);
        let mut polls = 0;
        let late_adapter = |account: &mut SendAccount| {
            polls += 1;
            // The first completion comes back only after 50 ms, far beyond
            // any spin budget; then the rest.
            if polls == 1 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            } else if polls == 3 {
                account.complete_through(2);
            }
            Ok(())
        };
        assert_eq!(wait_for_send_room(&mut account, OwnChannel { rank: 1, size: 2 }, late_adapter), Ok(true));
        assert!(account.has_room_for(2) && !account.has_room_for(3));

        let failing_adapter = |_: &mut SendAccount| Err(TransportError::Failed("a multicast send failed: flushed".into()));
        let mut full = SendAccount::new(1, 1);
        full.next(false);
        assert!(matches!(wait_for_send_room(&mut full, OwnChannel { rank: 1, size: 2 }, failing_adapter), Err(TransportError::Failed(why)) if why.contains("flushed")));
    }

    #[test]
    fn regions_are_contiguous_skip_the_end_and_come_back_in_order() {
        let mut ring = StagingRing::new(1024);
        let first = ring.reserve(600).expect("room at the start");
        assert_eq!(first.offset, 0);
        ring.lease(first, 1, 1);
        let second = ring.reserve(300).expect("room after the first");
        assert_eq!(second.offset, 640);
        ring.lease(second, 2, 1);
        assert!(ring.can_reserve(64) && !ring.can_reserve(200), "64 bytes fit before the end, 200 only over the first region");
        assert_eq!(ring.reserve(200), None, "would need to wrap over the first region");

        ring.release(|peer| if peer == 1 { 1 } else { 0 });
        assert_eq!(ring.oldest(), Some((2, 1)));
        assert!(ring.can_reserve(200), "the first region came back");
        let third = ring.reserve(200).expect("the first region came back");
        assert_eq!(third.offset, 0, "the 64 bytes left at the end are skipped");
        ring.lease(third, 1, 2);
        assert_eq!(ring.in_use(), 320 + 64 + 256, "second region, skipped end, third region");

        ring.release(|_| 5);
        assert_eq!(ring.in_use(), 0);
        assert_eq!(ring.oldest(), None);
        assert_eq!(ring.reserve(1024).map(|region| region.offset), Some(0));
        assert_eq!(ring.reserve(1), None);
    }
}
