//! The sending side of the RC queue pairs: puts (data writes then the flag
//! write on the same queue pair, which the adapter places in order), flag
//! writes, and the reliable channel's sends. Small payloads go inline;
//! larger ones are copied into the staging ring, so every call returns as
//! soon as the caller's buffer may be reused, without waiting for the wire.

use std::time::{Duration, Instant};

use super::RELIABLE_MAX;
use super::completion::Completion;
use super::links::{Failure, Links};
use super::reliable_frame;
use super::staging::{Reservation, SendAccount, StagingRing};
use super::work_request::{Gather, RemoteTarget, Segment, SendChain, SendRequest};
use crate::transport::TransportError;
use crate::wait::{OwnChannel, Waiter};

/// Work-request ids carry the peer above this bit and the sequence below.
const PEER_SHIFT: u32 = 40;
const SEQ_MASK: u64 = (1 << PEER_SHIFT) - 1;
const FLAG_BYTES: usize = 8;

fn encode_wr_id(peer: usize, seq: u64) -> u64 {
    ((peer as u64) << PEER_SHIFT) | (seq & SEQ_MASK)
}

fn decode_wr_id(wr_id: u64) -> (usize, u64) {
    ((wr_id >> PEER_SHIFT) as usize, wr_id & SEQ_MASK)
}

/// Advances the peer's account for a successful completion of `wr_id`,
/// whose id keeps only the low bits of the sequence number.
fn complete_request(accounts: &mut [SendAccount], wr_id: u64) {
    let (peer, low) = decode_wr_id(wr_id);
    if let Some(account) = accounts.get_mut(peer) {
        account.complete_through_low_bits(low, PEER_SHIFT);
    }
}

/// Where a request's local bytes are.
#[derive(Clone, Copy)]
enum Source<'d> {
    /// Copied into the request while posting.
    Inline(&'d [u8]),
    /// In the staging ring until a completion covers the request.
    Staged { reservation: Reservation, len: usize },
    /// The local completion sink (content irrelevant).
    Sink,
}

/// What a request does with its bytes.
#[derive(Clone, Copy)]
enum Action {
    /// An RDMA write into a peer's registered memory.
    Write(RemoteTarget),
    /// A send into the peer's next reliable-channel receive buffer.
    Send,
}

#[derive(Clone, Copy)]
struct Request<'d> {
    action: Action,
    source: Source<'d>,
    force_signal: bool,
}

impl<'d> Request<'d> {
    fn write(source: Source<'d>, address: u64, rkey: u32, force_signal: bool) -> Self {
        Request { action: Action::Write(RemoteTarget { address, rkey }), source, force_signal }
    }
}

pub(crate) struct SendPath {
    /// This rank, named by its waits' warnings.
    waiting: OwnChannel,
    staging: StagingRing,
    /// Indexed by peer; this rank's entry stays unused.
    accounts: Vec<SendAccount>,
    completions: Vec<Completion>,
    /// The reliable message being sent, sealed with its length and CRC.
    sealed: Vec<u8>,
}

impl SendPath {
    pub(crate) fn new(rank: usize, size: usize, staging_bytes: usize, signal_interval: u32, send_queue_depth: u32) -> Self {
        SendPath {
            waiting: OwnChannel { rank, size },
            staging: StagingRing::new(staging_bytes),
            accounts: (0..size).map(|_| SendAccount::new(signal_interval, send_queue_depth)).collect(),
            completions: Vec::new(),
            sealed: Vec::new(),
        }
    }

    /// `Windows::put` to a remote peer; the caller checked the ranges.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &mut self,
        links: &Links,
        failure: &Failure,
        peer: usize,
        offset: usize,
        data: &[u8],
        flag_offset: usize,
        flag: u64,
        on_wait: &dyn Fn(),
    ) -> Result<(), TransportError> {
        failure.check()?;
        reachable(links, peer)?;
        let remote = links.remotes[peer];
        let flag_bytes = flag.to_ne_bytes();
        let flag_address = remote.window_address + flag_offset as u64;
        if data.len() <= links.max_inline {
            let mut requests = Vec::with_capacity(2);
            if !data.is_empty() {
                requests.push(Request::write(Source::Inline(data), remote.window_address + offset as u64, remote.window_rkey, false));
            }
            let flag_source = self.small_source(links, failure, &flag_bytes, on_wait)?;
            requests.push(Request::write(flag_source, flag_address, remote.window_rkey, false));
            return self.post(links, failure, peer, &requests, on_wait);
        }

        // At least a byte, should an entry keep `RemoteWindow::default()`.
        let chunk_len = self.staging.max_chunk().min(remote.write_max_bytes.max(1));
        let chunks = data.len().div_ceil(chunk_len);
        for (index, chunk) in data.chunks(chunk_len).enumerate() {
            let reservation = self.reserve(links, failure, chunk.len(), on_wait)?;
            links.staging.write_at(reservation.offset, chunk);
            // Ask for a completion while much of the ring is in flight, so
            // that it comes back in time for the next large put.
            let force_signal = self.staging.in_use() * 2 > self.staging.capacity();
            let chunk_address = remote.window_address + (offset + index * chunk_len) as u64;
            let write = Request::write(Source::Staged { reservation, len: chunk.len() }, chunk_address, remote.window_rkey, force_signal);
            if index + 1 < chunks {
                self.post(links, failure, peer, &[write], on_wait)?;
            } else {
                let flag_source = self.small_source(links, failure, &flag_bytes, on_wait)?;
                let flag_write = Request::write(flag_source, flag_address, remote.window_rkey, false);
                self.post(links, failure, peer, &[write, flag_write], on_wait)?;
            }
        }
        Ok(())
    }

    /// `Windows::put_flag` to a remote peer.
    pub(crate) fn put_flag(
        &mut self,
        links: &Links,
        failure: &Failure,
        peer: usize,
        flag_offset: usize,
        value: u64,
        on_wait: &dyn Fn(),
    ) -> Result<(), TransportError> {
        failure.check()?;
        reachable(links, peer)?;
        let remote = links.remotes[peer];
        let bytes = value.to_ne_bytes();
        let source = self.small_source(links, failure, &bytes, on_wait)?;
        let flag_write = Request::write(source, remote.window_address + flag_offset as u64, remote.window_rkey, false);
        self.post(links, failure, peer, &[flag_write], on_wait)
    }

    /// `ReliableChannel::send_reliable` to a remote peer; the caller checked the size.
    pub(crate) fn send(&mut self, links: &Links, failure: &Failure, peer: usize, message: &[u8], on_wait: &dyn Fn()) -> Result<(), TransportError> {
        failure.check()?;
        reachable(links, peer)?;
        debug_assert!(message.len() <= RELIABLE_MAX);
        let mut sealed = std::mem::take(&mut self.sealed);
        reliable_frame::seal(message, &mut sealed);
        let outcome = self.small_source(links, failure, &sealed, on_wait).and_then(|source| {
            self.post(links, failure, peer, &[Request { action: Action::Send, source, force_signal: false }], on_wait)
        });
        self.sealed = sealed;
        outcome
    }

    /// Whether a reliable message of `len` bytes to `peer` would be posted
    /// at once: room in its send queue (and for the signalled write a wait
    /// may add), staging for it unless it goes inline, and fewer requests
    /// outstanding to the peer than it has receive buffers. Beyond those a
    /// message may wait for the peer's CPU to repost them (the adapter's
    /// RNR retries) while it holds its send-queue entry and staging.
    pub(crate) fn has_room_for_message(&self, links: &Links, peer: usize, len: usize) -> bool {
        let Some(account) = self.accounts.get(peer) else { return true };
        let sealed = len + reliable_frame::TRAILER_BYTES;
        account.has_room_for(2)
            && account.outstanding() < links.reliable_slots as u64
            && (sealed <= links.max_inline || self.staging.can_reserve(sealed.max(FLAG_BYTES)))
    }

    /// Waits until every request posted so far has completed (or failed).
    pub(crate) fn quiesce(&mut self, links: &Links, failure: &Failure, on_wait: &dyn Fn()) -> Result<(), TransportError> {
        let mut waiter = Waiter::for_process();
        while self.accounts.iter().any(|account| account.outstanding() > 0) {
            self.cover_unsignalled_tails(links, failure);
            self.poll(links, failure)?;
            on_wait();
            waiter.pause(&self.waiting, || "the completion of every write in flight".into())?;
        }
        failure.check()
    }

    /// Polls completions and gives staging back.
    pub(crate) fn progress(&mut self, links: &Links, failure: &Failure) {
        // A failure is recorded in `failure` and answered by the next call.
        let _ = self.poll(links, failure);
    }

    /// Makes every posted request complete (asking for a completion where
    /// none is due), so that nothing is lost when the queue pairs are
    /// destroyed. Gives up after `patience`.
    pub(crate) fn flush(&mut self, links: &Links, failure: &Failure, patience: Duration) {
        let deadline = Instant::now() + patience;
        // On failure the queue pairs are in error and nothing more completes.
        while !failure.is_set() && self.accounts.iter().any(|account| account.outstanding() > 0) {
            if Instant::now() >= deadline {
                let waiting = self.accounts.iter().filter(|account| account.outstanding() > 0).count();
                tracing::info!("verbs: {waiting} queue pair(s) still had writes in flight after {patience:?}; tearing down anyway");
                return;
            }
            self.cover_unsignalled_tails(links, failure);
            if self.poll(links, failure).is_err() {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Asks for a completion on every queue pair whose last requests no
    /// completion would cover, where the send queue has room for it.
    fn cover_unsignalled_tails(&mut self, links: &Links, failure: &Failure) {
        for peer in 0..self.accounts.len() {
            let account = &self.accounts[peer];
            if account.outstanding() > 0 && !account.is_covered(account.posted()) && account.has_room_for(1) {
                // A failure is recorded in `failure`, which the caller checks.
                let _ = self.post_now(links, failure, peer, &[self.sink_request(links, peer)]);
            }
        }
    }

    /// Inline if the queue pairs take `bytes` inline, else staged.
    fn small_source<'d>(&mut self, links: &Links, failure: &Failure, bytes: &'d [u8], on_wait: &dyn Fn()) -> Result<Source<'d>, TransportError> {
        if bytes.len() <= links.max_inline {
            return Ok(Source::Inline(bytes));
        }
        let reservation = self.reserve(links, failure, bytes.len().max(FLAG_BYTES), on_wait)?;
        links.staging.write_at(reservation.offset, bytes);
        Ok(Source::Staged { reservation, len: bytes.len() })
    }

    fn sink_request(&self, links: &Links, peer: usize) -> Request<'static> {
        let remote = links.remotes[peer];
        Request::write(Source::Sink, remote.sink_address, remote.sink_rkey, true)
    }

    /// A staging region of `len` bytes, waiting for completions if the
    /// ring is full.
    fn reserve(&mut self, links: &Links, failure: &Failure, len: usize, on_wait: &dyn Fn()) -> Result<Reservation, TransportError> {
        let mut waiter = Waiter::for_process();
        loop {
            if let Some(reservation) = self.staging.reserve(len) {
                return Ok(reservation);
            }
            // The oldest lease comes back only with a completion covering
            // its request; ask for one if none is due.
            if let Some((peer, seq)) = self.staging.oldest() {
                let account = &self.accounts[peer];
                if !account.is_covered(seq) && account.has_room_for(1) {
                    self.post(links, failure, peer, &[self.sink_request(links, peer)], on_wait)?;
                }
            }
            self.poll(links, failure)?;
            on_wait();
            let in_use = self.staging.in_use();
            waiter.pause(&self.waiting, || format!("{len} bytes of verbs staging ({in_use} of {} in flight)", self.staging.capacity()))?;
        }
    }

    /// Waits until `count` more requests fit in `peer`'s send queue.
    fn wait_for_room(&mut self, links: &Links, failure: &Failure, peer: usize, count: u64, on_wait: &dyn Fn()) -> Result<(), TransportError> {
        let mut waiter = Waiter::for_process();
        while !self.accounts[peer].has_room_for(count) {
            if !self.accounts[peer].awaits_signal() && self.accounts[peer].has_room_for(1) {
                self.post_now(links, failure, peer, &[self.sink_request(links, peer)])?;
            }
            self.poll(links, failure)?;
            on_wait();
            waiter.pause(&self.waiting, || format!("room in the send queue to rank {peer}"))?;
        }
        Ok(())
    }

    /// Posts `requests` as one chain once the send queue has room for them.
    fn post(&mut self, links: &Links, failure: &Failure, peer: usize, requests: &[Request<'_>], on_wait: &dyn Fn()) -> Result<(), TransportError> {
        self.wait_for_room(links, failure, peer, requests.len() as u64, on_wait)?;
        self.post_now(links, failure, peer, requests)
    }

    fn post_now(&mut self, links: &Links, failure: &Failure, peer: usize, requests: &[Request<'_>]) -> Result<(), TransportError> {
        let Some(queue_pair) = links.queue_pair(peer) else {
            return Err(TransportError::OutOfRange { peer, offset: 0, len: 0 });
        };
        let mut chain = SendChain::with_capacity(requests.len());
        let mut seqs = Vec::with_capacity(requests.len());
        let account = &mut self.accounts[peer];
        for request in requests {
            let (seq, signalled) = account.next(request.force_signal);
            seqs.push(seq);
            let source = match request.source {
                Source::Inline(bytes) => Gather::Inline(bytes),
                Source::Staged { reservation, len } => Gather::Registered(Segment {
                    address: links.staging.address() + reservation.offset as u64,
                    len: len as u32,
                    lkey: links.staging.lkey(),
                }),
                Source::Sink => Gather::Registered(Segment { address: links.sink.address(), len: FLAG_BYTES as u32, lkey: links.sink.lkey() }),
            };
            let wr_id = encode_wr_id(peer, seq);
            chain.push(match request.action {
                Action::Write(target) => SendRequest::rdma_write(wr_id, source, target, signalled),
                Action::Send => SendRequest::send(wr_id, source, signalled),
            });
        }
        // SAFETY: inline sources are copied during the call; staged and sink
        // sources are registered memory that stays untouched until a
        // completion covering the request gives it back.
        let posted = unsafe { queue_pair.post_send(&mut chain) };
        for (request, &seq) in requests.iter().zip(&seqs) {
            if let Source::Staged { reservation, .. } = request.source {
                self.staging.lease(reservation, peer, seq);
            }
        }
        posted.map_err(|why| {
            failure.record(format!("posting to rank {peer}: {why}"));
            TransportError::Failed(why.to_string())
        })
    }

    /// Takes completions, advances the accounts and gives staging back.
    fn poll(&mut self, links: &Links, failure: &Failure) -> Result<(), TransportError> {
        if let Err(why) = links.send_cq.poll(&mut self.completions) {
            failure.record(why);
        }
        for completion in &self.completions {
            if completion.succeeded() {
                complete_request(&mut self.accounts, completion.wr_id);
            } else {
                let (peer, _) = decode_wr_id(completion.wr_id);
                failure.record(format!("an RDMA write or send to rank {peer} failed: {}", completion.status_text()));
            }
        }
        let accounts = &self.accounts;
        self.staging.release(|peer| accounts[peer].completed());
        failure.check()
    }
}

/// Refuses a peer this rank holds no queue pair to before anything is
/// staged: where only the nodes' leaders connect, a schedule that still
/// wrote across nodes from another rank fails at once, saying why.
fn reachable(links: &Links, peer: usize) -> Result<(), TransportError> {
    match links.queue_pair(peer) {
        Some(_) => Ok(()),
        None => Err(TransportError::Unsupported("writing or sending to a rank on another node without a queue pair to it (only the nodes' leaders connect)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_request_ids_round_trip() {
        for (peer, seq) in [(0, 1), (5, 123_456), (1 << 20, SEQ_MASK)] {
            assert_eq!(decode_wr_id(encode_wr_id(peer, seq)), (peer, seq));
        }
    }

    /// Streams requests to one peer across 2^40 (the sequence bits a
    /// work-request id keeps), completing each signalled one through its
    /// id, as `poll` does: the send queue must keep its room.
    #[test]
    fn completions_keep_freeing_the_send_queue_past_the_id_wrap() {
        const DEPTH: u32 = 16;
        let peer = 3;
        let mut accounts: Vec<SendAccount> = (0..5).map(|_| SendAccount::new(4, DEPTH)).collect();
        accounts[peer] = SendAccount::after(SEQ_MASK - 40, 4, DEPTH);
        for _ in 0..200 {
            assert!(accounts[peer].has_room_for(1), "send queue full after {} requests", accounts[peer].posted());
            let (seq, signalled) = accounts[peer].next(false);
            if signalled {
                complete_request(&mut accounts, encode_wr_id(peer, seq));
                assert_eq!(accounts[peer].completed(), seq, "a completion of request {seq}");
            }
        }
        assert!(accounts[peer].posted() > SEQ_MASK + 100);
        assert!(accounts.iter().enumerate().all(|(rank, account)| rank == peer || account.posted() == 0));
    }
}
