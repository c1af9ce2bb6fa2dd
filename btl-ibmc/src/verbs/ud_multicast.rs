//! Unreliable multicast over a UD queue pair attached to a group through
//! rdma_cm. Datagrams carry an 8-byte header (communicator id, sender rank)
//! so a rank can drop its own loopback copies and, cheaply, what another
//! communicator sent to a colliding group address. A datagram is handed
//! up only if the rank its header names really sent it: the completion's
//! source queue pair and the packet's source address must be that rank's,
//! as exchanged at setup (`ud_source`); the rest is dropped and counted.
//! Datagrams may be lost; reliable multicast above repairs that.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdma_sys::{
    ibv_ah, ibv_alloc_pd, ibv_create_ah, ibv_dealloc_pd, ibv_destroy_ah, ibv_pd, ibv_qp, ibv_qp_init_attr, ibv_qp_type,
    ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wr_opcode, rdma_create_qp, rdma_destroy_qp, ud_t,
};

use super::cm_group::{CmGroup, GroupAddress};
use super::completion::{Completion, CompletionQueue};
use super::links::Failure;
use super::memory::{LOCAL_ONLY, RegisteredBuffer};
use super::staging::{SendAccount, wait_for_send_room};
use super::ud_source::{GRH_BYTES, UdSource, vouch};
use crate::poison::lock;
use crate::transport::TransportError;

/// Communicator id and sender rank, little-endian u32 each.
pub(crate) const DATAGRAM_HEADER: usize = 8;
/// Send buffers: one per datagram in flight.
const SEND_SLOTS: u32 = 64;
const SEND_SIGNAL_INTERVAL: u32 = 16;

/// What joining needs to know.
pub(crate) struct JoinRequest {
    pub(crate) local_address: Ipv4Addr,
    pub(crate) group: Ipv4Addr,
    pub(crate) communicator: u32,
    pub(crate) rank: u32,
    /// Largest UD payload (the port's active MTU).
    pub(crate) mtu: usize,
    pub(crate) receive_slots: u32,
    pub(crate) timeout: Duration,
    /// The device the RC side uses, to warn if rdma_cm picked another.
    pub(crate) device: String,
}

struct SendSide {
    account: SendAccount,
    completions: Vec<Completion>,
}

struct ReceiveSide {
    pending: VecDeque<Completion>,
    completions: Vec<Completion>,
}

pub(crate) struct UdMulticast {
    group_address: Ipv4Addr,
    local_address: Ipv4Addr,
    communicator: u32,
    rank: u32,
    mtu: usize,
    receive_slots: u32,
    send: Mutex<SendSide>,
    receive: Mutex<ReceiveSide>,
    failure: Failure,
    send_waits: AtomicU64,
    /// Indexed by rank: where each rank's datagrams come from. Empty until
    /// `admit`, so nothing is received before setup has finished.
    sources: Vec<UdSource>,
    nonce: u64,
    strangers_dropped: AtomicU64,
    // Teardown order (see Drop): leave the group, address handle, queue pair, buffers,
    // completion queues, protection domain, then the rdma_cm id.
    ah: *mut ibv_ah,
    group: Option<GroupAddress>,
    qp: *mut ibv_qp,
    send_buffers: Option<RegisteredBuffer>,
    receive_buffers: Option<RegisteredBuffer>,
    send_cq: Option<CompletionQueue>,
    recv_cq: Option<CompletionQueue>,
    pd: *mut ibv_pd,
    cm: Option<CmGroup>,
}

// SAFETY: verbs objects are thread-safe; the send and receive sides are
// serialised by their mutexes, and the rest is read-only after setup.
unsafe impl Send for UdMulticast {}
// SAFETY: as above.
unsafe impl Sync for UdMulticast {}

impl UdMulticast {
    /// Binds, creates the UD queue pair and its buffers, posts receives and
    /// joins the group. Every failure is a reason to go without multicast.
    pub(crate) fn join(request: &JoinRequest) -> Result<UdMulticast, String> {
        let cm = CmGroup::bind(request.local_address)?;
        let context = cm.context();
        if context.is_null() {
            return Err(format!("{} is not the address of an RDMA device", request.local_address));
        }
        let mut multicast = UdMulticast {
            group_address: request.group,
            local_address: request.local_address,
            communicator: request.communicator,
            rank: request.rank,
            mtu: request.mtu,
            receive_slots: request.receive_slots.max(1),
            send: Mutex::new(SendSide { account: SendAccount::new(SEND_SIGNAL_INTERVAL, SEND_SLOTS), completions: Vec::new() }),
            receive: Mutex::new(ReceiveSide { pending: VecDeque::new(), completions: Vec::new() }),
            failure: Failure::default(),
            send_waits: AtomicU64::new(0),
            sources: Vec::new(),
            nonce: 0,
            strangers_dropped: AtomicU64::new(0),
            ah: std::ptr::null_mut(),
            group: None,
            qp: std::ptr::null_mut(),
            send_buffers: None,
            receive_buffers: None,
            send_cq: None,
            recv_cq: None,
            pd: std::ptr::null_mut(),
            cm: Some(cm),
        };
        // SAFETY: the context belongs to the bound id and lives as long as it.
        let device = unsafe { super::device::context_name(context) };
        if device != request.device {
            tracing::warn!("verbs: {} belongs to {device}, not {}; multicast runs on {device}", request.local_address, request.device);
        }
        multicast.build(context)?;
        let group = multicast.cm.as_mut().map(|cm| cm.join(request.group, request.timeout)).transpose()?;
        let Some(group) = group else { return Err("the rdma_cm id is gone".into()) };
        let mut ah_attr = group.ah_attr;
        // SAFETY: the PD is valid; the attributes come from the join event.
        let ah = unsafe { ibv_create_ah(multicast.pd, &mut ah_attr) };
        if ah.is_null() {
            return Err(format!("ibv_create_ah for group {} failed: {}", request.group, std::io::Error::last_os_error()));
        }
        multicast.ah = ah;
        multicast.group = Some(group);
        Ok(multicast)
    }

    fn build(&mut self, context: *mut rdma_sys::ibv_context) -> Result<(), String> {
        // SAFETY: the context is valid; the PD is freed in drop.
        self.pd = unsafe { ibv_alloc_pd(context) };
        if self.pd.is_null() {
            return Err(format!("ibv_alloc_pd for multicast failed: {}", std::io::Error::last_os_error()));
        }
        let send_cq = CompletionQueue::new(context, SEND_SLOTS, "multicast sends").map_err(|error| error.to_string())?;
        let recv_cq = CompletionQueue::new(context, self.receive_slots, "multicast receives").map_err(|error| error.to_string())?;
        // SAFETY: ibv_qp_init_attr is plain data for which all-zero is valid.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = send_cq.raw();
        init.recv_cq = recv_cq.raw();
        init.qp_type = ibv_qp_type::IBV_QPT_UD;
        init.cap.max_send_wr = SEND_SLOTS;
        init.cap.max_recv_wr = self.receive_slots;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        self.send_cq = Some(send_cq);
        self.recv_cq = Some(recv_cq);
        let id = self.cm.as_ref().map_or(std::ptr::null_mut(), CmGroup::id);
        // SAFETY: the id is bound, the PD and CQs belong to its context and
        // outlive the QP (destroyed first in drop).
        if unsafe { rdma_create_qp(id, self.pd, &mut init) } != 0 {
            return Err(format!("rdma_create_qp (UD) failed: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: rdma_create_qp stored the new QP in the id.
        self.qp = unsafe { (*id).qp };

        let slot = self.receive_slot_bytes();
        let receive_len = slot * self.receive_slots as usize;
        self.receive_buffers =
            Some(RegisteredBuffer::new(self.pd, receive_len, LOCAL_ONLY, "multicast receive buffers").map_err(|error| error.to_string())?);
        self.send_buffers = Some(
            RegisteredBuffer::new(self.pd, self.mtu * SEND_SLOTS as usize, LOCAL_ONLY, "multicast send buffers")
                .map_err(|error| error.to_string())?,
        );
        for slot in 0..self.receive_slots {
            self.post_receive(slot as usize)?;
        }
        Ok(())
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
        // SAFETY: the QP was created in `build` and lives until drop.
        if self.qp.is_null() { 0 } else { unsafe { (*self.qp).qp_num } }
    }

    /// Where every rank's datagrams come from, and the communicator's
    /// nonce, once setup has agreed on them.
    pub(crate) fn admit(&mut self, sources: Vec<UdSource>, nonce: u64) {
        self.sources = sources;
        self.nonce = nonce;
    }

    pub(crate) fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Datagrams dropped because no rank of this communicator sent them.
    pub(crate) fn strangers_dropped(&self) -> u64 {
        self.strangers_dropped.load(Ordering::Relaxed)
    }

    /// Datagrams `send` had to wait for a send buffer to come back.
    pub(crate) fn send_waits(&self) -> u64 {
        self.send_waits.load(Ordering::Relaxed)
    }

    /// Largest payload `send` accepts.
    pub(crate) fn max_datagram(&self) -> usize {
        self.mtu - DATAGRAM_HEADER
    }

    fn receive_slot_bytes(&self) -> usize {
        (GRH_BYTES + self.mtu).next_multiple_of(64)
    }

    /// Sends one datagram to the group.
    pub(crate) fn send(&self, datagram: &[u8]) -> Result<(), TransportError> {
        self.failure.check()?;
        let max = self.max_datagram();
        if datagram.len() > max {
            return Err(TransportError::TooLarge { len: datagram.len(), max });
        }
        let (Some(group), Some(buffers)) = (self.group, self.send_buffers.as_ref()) else {
            return Err(TransportError::Unsupported("multicast without a joined group"));
        };
        let mut side = lock(&self.send);
        let SendSide { account, completions } = &mut *side;
        // Only this rank's own adapter returns the buffers (a UD send needs
        // nothing from the receivers), so waiting cannot depend on a peer.
        if wait_for_send_room(account, |account| self.poll_sends(account, completions))? {
            self.send_waits.fetch_add(1, Ordering::Relaxed);
        }
        let (seq, signalled) = side.account.next(false);
        let offset = (seq % u64::from(SEND_SLOTS)) as usize * self.mtu;
        let mut header = [0u8; DATAGRAM_HEADER];
        header[..4].copy_from_slice(&self.communicator.to_le_bytes());
        header[4..].copy_from_slice(&self.rank.to_le_bytes());
        buffers.write_at(offset, &header);
        buffers.write_at(offset + DATAGRAM_HEADER, datagram);

        let mut sge = ibv_sge {
            addr: buffers.address() + offset as u64,
            length: (DATAGRAM_HEADER + datagram.len()) as u32,
            lkey: buffers.lkey(),
        };
        // SAFETY: ibv_send_wr is plain data for which all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = seq;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = if signalled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
        wr.wr.ud = ud_t { ah: self.ah, remote_qpn: group.qp_num, remote_qkey: group.qkey };
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: the QP and AH are valid; the slot is registered and not
        // reused before a completion covering this request is polled.
        let rc = unsafe { rdma_sys::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            let why = format!("posting a multicast datagram failed: {}", std::io::Error::from_raw_os_error(rc));
            self.failure.record(why.clone());
            return Err(TransportError::Failed(why));
        }
        Ok(())
    }

    /// Polls send completions so buffers come back.
    pub(crate) fn progress(&self) {
        // Whoever holds the lock is polling already: a send waiting for a
        // buffer may run the progress engine, which comes back here.
        if let Ok(mut side) = self.send.try_lock() {
            let SendSide { account, completions } = &mut *side;
            // A failure is recorded and answered by the next send.
            let _ = self.poll_sends(account, completions);
        }
    }

    fn poll_sends(&self, account: &mut SendAccount, completions: &mut Vec<Completion>) -> Result<(), TransportError> {
        let Some(cq) = self.send_cq.as_ref() else { return Ok(()) };
        if let Err(why) = cq.poll(completions) {
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
        out.clear();
        let (Some(cq), Some(buffers)) = (self.recv_cq.as_ref(), self.receive_buffers.as_ref()) else { return None };
        if self.failure.is_set() {
            return None;
        }
        let mut side = lock(&self.receive);
        loop {
            if side.pending.is_empty() {
                let ReceiveSide { pending, completions } = &mut *side;
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
            let sender = self.copy_datagram(buffers, slot, &completion, out);
            if let Err(why) = self.post_receive(slot) {
                self.failure.record(why);
                return None;
            }
            if sender.is_some() {
                return sender;
            }
            out.clear();
        }
    }

    /// Copies a received datagram's payload into `out` and returns its
    /// sender, unless it is our own loopback copy, another communicator's,
    /// or not sent by the rank it names.
    fn copy_datagram(&self, buffers: &RegisteredBuffer, slot: usize, completion: &Completion, out: &mut Vec<u8>) -> Option<usize> {
        let payload_len = (completion.byte_len as usize).checked_sub(GRH_BYTES + DATAGRAM_HEADER)?;
        let slot_start = slot * self.receive_slot_bytes();
        let start = slot_start + GRH_BYTES;
        let mut header = [0u8; DATAGRAM_HEADER];
        buffers.read_at(start, &mut header);
        let communicator = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let claimed = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
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
        if sender.is_none() {
            self.strangers_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        out.resize(payload_len.min(self.max_datagram()), 0);
        buffers.read_at(start + DATAGRAM_HEADER, out);
        sender
    }

    fn post_receive(&self, slot: usize) -> Result<(), String> {
        let Some(buffers) = self.receive_buffers.as_ref() else { return Err("no multicast receive buffers".into()) };
        let slot_bytes = self.receive_slot_bytes();
        let mut sge = ibv_sge { addr: buffers.address() + (slot * slot_bytes) as u64, length: slot_bytes as u32, lkey: buffers.lkey() };
        let mut wr = ibv_recv_wr { wr_id: slot as u64, next: std::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: the QP is valid; the slot is registered and untouched
        // until its completion is polled.
        let rc = unsafe { rdma_sys::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(format!("reposting a multicast receive failed: {}", std::io::Error::from_raw_os_error(rc)));
        }
        Ok(())
    }
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
        if let Some(cm) = self.cm.as_mut() {
            cm.leave();
        }
        if !self.ah.is_null() {
            // SAFETY: the AH was created in `join` and no send uses it now.
            unsafe { ibv_destroy_ah(self.ah) };
        }
        if !self.qp.is_null() {
            if let Some(cm) = self.cm.as_ref() {
                // SAFETY: the QP was created on this id by rdma_create_qp.
                unsafe { rdma_destroy_qp(cm.id()) };
            }
        }
        self.send_buffers = None;
        self.receive_buffers = None;
        self.send_cq = None;
        self.recv_cq = None;
        if !self.pd.is_null() {
            // SAFETY: everything created in the PD is gone.
            unsafe { ibv_dealloc_pd(self.pd) };
        }
        // Leaves the group and destroys the id and channel.
        self.cm = None;
    }
}
