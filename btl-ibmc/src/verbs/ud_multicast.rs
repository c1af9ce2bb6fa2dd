//! Unreliable multicast over a UD queue pair attached to a group through
//! rdma_cm. Datagrams carry a header (communicator id, sender rank, nonce
//! counter: `ud_frame`) so a rank can drop its own loopback copies and,
//! cheaply, what another communicator sent to a colliding group address.
//! A datagram is handed up only if the rank its header names really sent
//! it: the completion's source queue pair and the packet's source address
//! must be that rank's, as exchanged at setup (`ud_source`), and, sealed
//! (the default), its tag must verify under the communicator's key and
//! its counter be new (`ud_frame`); the rest is dropped and counted.
//! Datagrams may be lost; reliable multicast above repairs that.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::cm_group::{AddressHandle, CmId, GroupAddress, Membership, UdQueuePair};
use super::completion::{Completion, CompletionQueue};
use super::context::{DeviceContext, ProtectionDomain};
use super::error::VerbsError;
use super::links::Failure;
use super::memory::{LOCAL_ONLY, RegisteredBuffer};
use super::staging::{SendAccount, wait_for_send_room};
use super::ud_frame::{Dropped, UdSeal, claimed, max_body};
use super::ud_source::{GRH_BYTES, UdSource, vouch};
use super::work_request::{RecvRequest, Segment, SendRequest, UdDestination};
use crate::poison::lock;
use crate::seal::{Protection, ReplayWindow};
use crate::transport::TransportError;
use crate::wait::OwnChannel;

/// Send buffers: one per datagram in flight.
const SEND_SLOTS: u32 = 64;
const SEND_SIGNAL_INTERVAL: u32 = 16;

/// What joining needs to know.
pub(crate) struct JoinRequest {
    pub(crate) local_address: Ipv4Addr,
    pub(crate) group: Ipv4Addr,
    pub(crate) communicator: u32,
    pub(crate) rank: u32,
    /// Ranks in the communicator, named with the rank by a send's warnings.
    pub(crate) size: usize,
    /// Largest UD payload (the port's active MTU).
    pub(crate) mtu: usize,
    /// How datagrams will be sealed (the key comes with `admit`).
    pub(crate) protection: Protection,
    pub(crate) receive_slots: u32,
    pub(crate) timeout: Duration,
    /// The device the RC side uses, to warn if rdma_cm picked another.
    pub(crate) device: String,
}

struct SendSide {
    account: SendAccount,
    completions: Vec<Completion>,
    /// The datagram being sealed, before it is copied to its send buffer.
    datagram: Vec<u8>,
}

struct ReceiveSide {
    pending: VecDeque<Completion>,
    completions: Vec<Completion>,
    /// Indexed by rank: the counters taken in from it.
    replay: Vec<ReplayWindow>,
}

/// Datagrams from the ranks' own sources that were dropped, by reason.
#[derive(Default)]
struct Drops {
    unauthenticated: AtomicU64,
    replayed: AtomicU64,
}

/// One rank's multicast endpoint. What verbs needs at teardown follows
/// from ownership: the membership leaves the group before its queue pair
/// is destroyed, and every object holds the protection domain, completion
/// queues and rdma_cm id it was made with (see `cm_group`).
pub(crate) struct UdMulticast {
    group_address: Ipv4Addr,
    local_address: Ipv4Addr,
    communicator: u32,
    rank: u32,
    /// This rank, named by its send waits' warnings.
    waiting: OwnChannel,
    mtu: usize,
    /// Largest body `send` takes: the MTU less the header and the seal.
    max_body: usize,
    send: Mutex<SendSide>,
    receive: Mutex<ReceiveSide>,
    failure: Failure,
    send_waits: AtomicU64,
    /// Indexed by rank: where each rank's datagrams come from. Empty until
    /// `admit`, so nothing is received before setup has finished.
    sources: Vec<UdSource>,
    nonce: u64,
    /// None until `admit` hands the key over: nothing is sent before.
    seal: Option<UdSeal>,
    strangers_dropped: AtomicU64,
    drops: Drops,
    group: GroupAddress,
    membership: Membership,
    ah: AddressHandle,
    send_buffers: RegisteredBuffer,
    receive_buffers: RegisteredBuffer,
    send_cq: Arc<CompletionQueue>,
    recv_cq: Arc<CompletionQueue>,
}

impl UdMulticast {
    /// Bytes registered for the group's sends and receives.
    pub(crate) fn registered_bytes(&self) -> usize {
        self.send_buffers.len() + self.receive_buffers.len()
    }

    /// Binds, creates the UD queue pair and its buffers, posts receives and
    /// joins the group. Every failure is a reason to go without multicast.
    pub(crate) fn join(request: &JoinRequest) -> Result<UdMulticast, VerbsError> {
        let id = CmId::bind(request.local_address)?;
        let context = DeviceContext::of_cm_id(&id).ok_or(VerbsError::NotAnRdmaAddress(request.local_address))?;
        let device = context.device_name();
        if device != request.device {
            tracing::warn!("verbs: {} belongs to {device}, not {}; multicast runs on {device}", request.local_address, request.device);
        }
        let receive_slots = request.receive_slots.max(1);
        let pd = ProtectionDomain::alloc(&context, "for multicast")?;
        let send_cq = CompletionQueue::new(&context, SEND_SLOTS, "multicast sends")?;
        let recv_cq = CompletionQueue::new(&context, receive_slots, "multicast receives")?;
        let queue_pair = UdQueuePair::new(&id, &pd, &send_cq, &recv_cq, SEND_SLOTS, receive_slots)?;

        let slot_bytes = receive_slot_bytes(request.mtu);
        let receive_buffers = RegisteredBuffer::new(&pd, slot_bytes * receive_slots as usize, LOCAL_ONLY, "multicast receive buffers")?;
        let send_buffers = RegisteredBuffer::new(&pd, request.mtu * SEND_SLOTS as usize, LOCAL_ONLY, "multicast send buffers")?;
        for slot in 0..receive_slots as usize {
            post_receive(&queue_pair, &receive_buffers, slot, slot_bytes)?;
        }
        let (membership, group) = Membership::join(queue_pair, request.group, request.timeout)?;
        let ah = AddressHandle::new(&pd, request.group, &group)?;
        Ok(UdMulticast {
            group_address: request.group,
            local_address: request.local_address,
            communicator: request.communicator,
            rank: request.rank,
            waiting: OwnChannel { rank: request.rank as usize, size: request.size },
            mtu: request.mtu,
            max_body: max_body(request.protection, request.mtu),
            send: Mutex::new(SendSide {
                account: SendAccount::new(SEND_SIGNAL_INTERVAL, SEND_SLOTS),
                completions: Vec::new(),
                datagram: Vec::with_capacity(request.mtu),
            }),
            receive: Mutex::new(ReceiveSide { pending: VecDeque::new(), completions: Vec::new(), replay: Vec::new() }),
            failure: Failure::default(),
            send_waits: AtomicU64::new(0),
            sources: Vec::new(),
            nonce: 0,
            seal: None,
            strangers_dropped: AtomicU64::new(0),
            drops: Drops::default(),
            group,
            membership,
            ah,
            send_buffers,
            receive_buffers,
            send_cq,
            recv_cq,
        })
    }

    pub(crate) fn group_address(&self) -> Ipv4Addr {
        self.group_address
    }

    /// The IPv4 address the UD queue pair sends from.
    pub(crate) fn local_address(&self) -> Ipv4Addr {
        self.local_address
    }

    /// This rank's UD queue pair number, for the setup records.
    pub(crate) fn qp_num(&self) -> u32 {
        self.membership.queue_pair().qp_num()
    }

    /// Where every rank's datagrams come from, the communicator's nonce
    /// and its datagrams' seal, once setup has agreed on them.
    pub(crate) fn admit(&mut self, sources: Vec<UdSource>, nonce: u64, seal: UdSeal) {
        lock(&self.receive).replay = sources.iter().map(|_| ReplayWindow::new()).collect();
        self.sources = sources;
        self.nonce = nonce;
        self.seal = Some(seal);
    }

    /// How this communicator's datagrams are sealed (before `admit`: not yet).
    pub(crate) fn protection(&self) -> Option<Protection> {
        self.seal.as_ref().map(UdSeal::protection)
    }

    pub(crate) fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Datagrams dropped because no rank of this communicator sent them.
    pub(crate) fn strangers_dropped(&self) -> u64 {
        self.strangers_dropped.load(Ordering::Relaxed)
    }

    /// Datagrams from a rank's own source whose tag did not verify under
    /// the communicator's key (forged, altered, another key's).
    pub(crate) fn unauthenticated_dropped(&self) -> u64 {
        self.drops.unauthenticated.load(Ordering::Relaxed)
    }

    /// Authenticated datagrams whose counter was taken in before or lay
    /// too far behind (a replay).
    pub(crate) fn replays_dropped(&self) -> u64 {
        self.drops.replayed.load(Ordering::Relaxed)
    }

    /// Datagrams `send` had to wait for a send buffer to come back.
    pub(crate) fn send_waits(&self) -> u64 {
        self.send_waits.load(Ordering::Relaxed)
    }

    /// Largest payload `send` accepts.
    pub(crate) fn max_datagram(&self) -> usize {
        self.max_body
    }

    fn receive_slot_bytes(&self) -> usize {
        receive_slot_bytes(self.mtu)
    }

    /// Sends one datagram to the group.
    pub(crate) fn send(&self, datagram: &[u8]) -> Result<(), TransportError> {
        self.failure.check()?;
        let max = self.max_datagram();
        if datagram.len() > max {
            return Err(TransportError::TooLarge { len: datagram.len(), max });
        }
        let Some(seal) = &self.seal else {
            return Err(TransportError::Failed("a multicast send before setup handed the key over".into()));
        };
        let buffers = &self.send_buffers;
        let mut side = lock(&self.send);
        let SendSide { account, completions, .. } = &mut *side;
        // Only this rank's own adapter returns the buffers (a UD send needs
        // nothing from the receivers), so waiting cannot depend on a peer.
        if wait_for_send_room(account, self.waiting, |account| self.poll_sends(account, completions))? {
            self.send_waits.fetch_add(1, Ordering::Relaxed);
        }
        let (seq, signalled) = side.account.next(false);
        let offset = (seq % u64::from(SEND_SLOTS)) as usize * self.mtu;
        // Sealed in ordinary memory, then copied: the adapter may still
        // read other slots of the registered buffer meanwhile.
        seal.encode(datagram, &mut side.datagram);
        buffers.write_at(offset, &side.datagram);

        let datagram_bytes = Segment { address: buffers.address() + offset as u64, len: side.datagram.len() as u32, lkey: buffers.lkey() };
        let destination = UdDestination { ah: self.ah.raw(), qp_num: self.group.qp_num, qkey: self.group.qkey };
        let mut request = SendRequest::ud_send(seq, datagram_bytes, destination, signalled);
        // SAFETY: the AH lives as long as `self`; the slot is registered and
        // not reused before a completion covering this request is polled.
        if let Err(why) = unsafe { self.membership.queue_pair().post_send(&mut request) } {
            self.failure.record(&why);
            return Err(TransportError::Failed(why.to_string()));
        }
        Ok(())
    }

    /// Polls send completions so buffers come back.
    pub(crate) fn progress(&self) {
        // Whoever holds the lock is polling already: a send waiting for a
        // buffer may run the progress engine, which comes back here.
        if let Ok(mut side) = self.send.try_lock() {
            let SendSide { account, completions, .. } = &mut *side;
            // A failure is recorded and answered by the next send.
            let _ = self.poll_sends(account, completions);
        }
    }

    fn poll_sends(&self, account: &mut SendAccount, completions: &mut Vec<Completion>) -> Result<(), TransportError> {
        if let Err(why) = self.send_cq.poll(completions) {
            self.failure.record(why);
        }
        for completion in completions.iter() {
            if completion.succeeded() {
                account.complete_through(completion.wr_id);
            } else {
                self.failure.record(format!("a multicast send failed: {}", completion.status_text()));
            }
        }
        self.failure.check()
    }

    /// Takes one datagram from another rank of this communicator into
    /// `out` and returns that rank.
    pub(crate) fn receive(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.receive_taking(out, |buffers, slot, completion, replay, out| self.take_datagram(buffers, slot, completion, replay, out))
    }

    /// Test hook: takes any datagram that reached the group into `out` as
    /// it came off the wire (header, body and tag; whoever sent it), as an
    /// eavesdropper who joined the group would read it.
    #[cfg(any(test, feature = "fabric"))]
    pub(crate) fn receive_raw(&self, out: &mut Vec<u8>) -> bool {
        let copy_raw = |buffers: &RegisteredBuffer, slot: usize, completion: &Completion, _: &mut [ReplayWindow], out: &mut Vec<u8>| {
            out.resize((completion.byte_len as usize).saturating_sub(GRH_BYTES).min(self.mtu), 0);
            buffers.read_at(slot * self.receive_slot_bytes() + GRH_BYTES, out);
            Some(0)
        };
        self.receive_taking(out, copy_raw).is_some()
    }

    /// Polls for received datagrams and hands each to `take` (which
    /// copies what it accepts into `out`) until one is taken.
    fn receive_taking(
        &self,
        out: &mut Vec<u8>,
        take: impl Fn(&RegisteredBuffer, usize, &Completion, &mut [ReplayWindow], &mut Vec<u8>) -> Option<usize>,
    ) -> Option<usize> {
        out.clear();
        let (cq, buffers) = (&self.recv_cq, &self.receive_buffers);
        if self.failure.is_set() {
            return None;
        }
        let mut side = lock(&self.receive);
        loop {
            if side.pending.is_empty() {
                let ReceiveSide { pending, completions, .. } = &mut *side;
                if let Err(why) = cq.poll(completions) {
                    self.failure.record(why);
                    return None;
                }
                if completions.is_empty() {
                    return None;
                }
                pending.extend(completions.iter().copied());
            }
            let Some(completion) = side.pending.pop_front() else { return None };
            if !completion.succeeded() {
                // The queue pair is in error: reposting would only produce
                // flushed completions again, so stop receiving.
                self.failure.record(format!("a multicast receive failed: {}", completion.status_text()));
                side.pending.clear();
                return None;
            }
            let slot = completion.wr_id as usize;
            let sender = take(buffers, slot, &completion, &mut side.replay, out);
            if let Err(why) = post_receive(self.membership.queue_pair(), buffers, slot, self.receive_slot_bytes()) {
                self.failure.record(why);
                return None;
            }
            if sender.is_some() {
                return sender;
            }
            out.clear();
        }
    }

    /// Copies a received datagram's body into `out` and returns its
    /// sender, unless it is our own loopback copy, another communicator's,
    /// not sent by the rank it names, or (sealed) fails its tag or replay
    /// check: those are dropped and counted.
    fn take_datagram(
        &self,
        buffers: &RegisteredBuffer,
        slot: usize,
        completion: &Completion,
        replay: &mut [ReplayWindow],
        out: &mut Vec<u8>,
    ) -> Option<usize> {
        let datagram_len = (completion.byte_len as usize).checked_sub(GRH_BYTES)?.min(self.mtu);
        let slot_start = slot * self.receive_slot_bytes();
        let start = slot_start + GRH_BYTES;
        out.resize(datagram_len, 0);
        buffers.read_at(start, out);
        let Some((communicator, claimed)) = claimed(out) else {
            self.strangers_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        if claimed == self.rank {
            return None;
        }
        let grh = completion.has_grh.then(|| {
            let mut grh = [0u8; GRH_BYTES];
            buffers.read_at(slot_start, &mut grh);
            grh
        });
        let sender = (communicator == self.communicator)
            .then(|| vouch(claimed, self.rank as usize, &self.sources, completion.src_qp, grh.as_ref()))
            .flatten();
        let (Some(sender), Some(seal)) = (sender, &self.seal) else {
            self.strangers_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let counted = match seal.take_body(out, &mut replay[sender]) {
            Ok(()) => return Some(sender),
            Err(Dropped::Unauthenticated) => &self.drops.unauthenticated,
            Err(Dropped::Replayed) => &self.drops.replayed,
            Err(Dropped::WrongJob) => &self.strangers_dropped,
        };
        counted.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Bytes of one receive slot: the GRH the adapter puts first, then an
/// MTU, rounded up to cache lines.
fn receive_slot_bytes(mtu: usize) -> usize {
    (GRH_BYTES + mtu).next_multiple_of(64)
}

/// Posts receive slot `slot` of `buffers`.
fn post_receive(queue_pair: &UdQueuePair, buffers: &RegisteredBuffer, slot: usize, slot_bytes: usize) -> Result<(), VerbsError> {
    let into = Segment { address: buffers.address() + (slot * slot_bytes) as u64, len: slot_bytes as u32, lkey: buffers.lkey() };
    // SAFETY: the slot is registered and untouched until its completion is polled.
    unsafe { queue_pair.post_recv(&mut RecvRequest::new(slot as u64, into)) }
}

impl Drop for UdMulticast {
    fn drop(&mut self) {
        let strangers = self.strangers_dropped();
        if strangers > 0 {
            tracing::info!(
                "verbs: rank {} dropped {strangers} datagram(s) on group {} that no rank of this communicator sent",
                self.rank,
                self.group_address
            );
        }
        let (unauthenticated, replays) = (self.unauthenticated_dropped(), self.replays_dropped());
        if unauthenticated + replays > 0 {
            tracing::info!(
                "verbs: rank {} dropped {unauthenticated} datagram(s) on group {} that failed authentication and {replays} replayed one(s)",
                self.rank,
                self.group_address
            );
        }
    }
}
