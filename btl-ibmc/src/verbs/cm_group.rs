//! The rdma_cm side of UD multicast: an event channel and a UDP-port-space
//! id bound to this host's address on the RDMA device, the UD queue pair
//! created on it, the join, and the group's address vector the join
//! reports. Joining goes through rdma_cm because on RoCE it also programs
//! the netdev's multicast filter (IGMP), and on InfiniBand it asks the
//! subnet manager, neither of which plain verbs can do.
//!
//! Ownership gives the teardown order: a membership owns the queue pair it
//! attached (so the group is left before the queue pair is destroyed), the
//! queue pair holds the id, protection domain and completion queues, and
//! the id's device context (see `context`) holds the id, which is
//! destroyed last.

use std::ffi::CStr;
use std::net::Ipv4Addr;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys::{
    ibv_ah, ibv_ah_attr, ibv_context, ibv_create_ah, ibv_destroy_ah, ibv_qp, ibv_qp_init_attr, ibv_qp_type,
    rdma_ack_cm_event, rdma_bind_addr, rdma_cm_event, rdma_cm_event_type, rdma_cm_id, rdma_create_event_channel,
    rdma_create_id, rdma_create_qp, rdma_destroy_event_channel, rdma_destroy_id, rdma_destroy_qp, rdma_event_channel,
    rdma_event_str, rdma_get_cm_event, rdma_join_multicast, rdma_leave_multicast, rdma_port_space,
};

use super::completion::CompletionQueue;
use super::context::ProtectionDomain;
use super::error::VerbsError;
use super::work_request::{RecvRequest, SendRequest};

/// What the join told us about the group: how to address datagrams to it.
#[derive(Clone, Copy)]
pub(crate) struct GroupAddress {
    pub(crate) ah_attr: ibv_ah_attr,
    pub(crate) qp_num: u32,
    pub(crate) qkey: u32,
}

/// An rdma_cm id bound to a local address, with its event channel.
/// Dropping it destroys both; everything made on the id holds it.
pub(crate) struct CmId {
    channel: *mut rdma_event_channel,
    id: *mut rdma_cm_id,
}

// SAFETY: rdma_cm ids and channels may be used from any thread; this
// handle only uses them during setup and teardown.
unsafe impl Send for CmId {}
// SAFETY: shared references only read the id's fields or call rdma_cm
// during setup, from one thread.
unsafe impl Sync for CmId {}

impl CmId {
    /// Creates the channel and id and binds the id to `local`.
    pub(crate) fn bind(local: Ipv4Addr) -> Result<Arc<CmId>, VerbsError> {
        // SAFETY: no preconditions; null is checked.
        let channel = unsafe { rdma_create_event_channel() };
        if channel.is_null() {
            return Err(VerbsError::last_os("rdma_create_event_channel", ""));
        }
        let mut bound = CmId { channel, id: ptr::null_mut() };
        let mut id: *mut rdma_cm_id = ptr::null_mut();
        // SAFETY: the channel is valid and `id` is a valid out-pointer.
        let rc = unsafe { rdma_create_id(channel, &mut id, ptr::null_mut(), rdma_port_space::RDMA_PS_UDP) };
        if rc != 0 || id.is_null() {
            return Err(VerbsError::last_os("rdma_create_id", ""));
        }
        bound.id = id;
        let mut address = socket_address(local);
        // SAFETY: the id is valid; the address is a sockaddr_in, which
        // rdma_cm reads by its family.
        let rc = unsafe { rdma_bind_addr(id, (&mut address as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            return Err(VerbsError::last_os("rdma_bind_addr", format!(" to {local}")));
        }
        bound.set_nonblocking()?;
        Ok(Arc::new(bound))
    }

    /// The verbs context of the device the bound address belongs to (null
    /// if none); it stays open as long as the id.
    pub(crate) fn context(&self) -> *mut ibv_context {
        // SAFETY: the id is valid; binding set its device context.
        unsafe { (*self.id).verbs }
    }

    fn set_nonblocking(&self) -> Result<(), VerbsError> {
        // SAFETY: the channel is valid; its fd belongs to it.
        let fd = unsafe { (*self.channel).fd };
        // SAFETY: fcntl on a valid descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(VerbsError::last_os("fcntl", " making the rdma_cm channel non-blocking"));
        }
        Ok(())
    }

    /// The next event on the channel, waiting at most `timeout` for the
    /// answer to joining `group`.
    fn next_event(&self, group: Ipv4Addr, timeout: Duration) -> Result<*mut rdma_cm_event, VerbsError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut event: *mut rdma_cm_event = ptr::null_mut();
            // SAFETY: the channel is valid and non-blocking; `event` is a
            // valid out-pointer.
            if unsafe { rdma_get_cm_event(self.channel, &mut event) } == 0 && !event.is_null() {
                return Ok(event);
            }
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EAGAIN) && error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(VerbsError::returned("rdma_get_cm_event", format!(" joining {group}"), error.raw_os_error().unwrap_or(0)));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(VerbsError::JoinTimedOut { group, timeout });
            }
            // SAFETY: the channel is valid.
            let mut poller = libc::pollfd { fd: unsafe { (*self.channel).fd }, events: libc::POLLIN, revents: 0 };
            let wait_ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut poller, 1, wait_ms) };
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        if !self.id.is_null() {
            // SAFETY: the id is valid, and its QP is gone: the QP holds the id.
            unsafe { rdma_destroy_id(self.id) };
        }
        // SAFETY: the channel is valid and its only id is gone.
        unsafe { rdma_destroy_event_channel(self.channel) };
    }
}

/// The UD queue pair rdma_cm created on an id.
pub(crate) struct UdQueuePair {
    qp: *mut ibv_qp,
    id: Arc<CmId>,
    _pd: Arc<ProtectionDomain>,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
}

// SAFETY: posting to a QP is thread-safe in libibverbs; the owner
// serialises the send and receive sides with its own locks.
unsafe impl Send for UdQueuePair {}
// SAFETY: as above.
unsafe impl Sync for UdQueuePair {}

impl UdQueuePair {
    /// Creates the id's UD queue pair in `pd` (which must belong to the
    /// id's context) with one scatter entry per request.
    pub(crate) fn new(
        id: &Arc<CmId>,
        pd: &Arc<ProtectionDomain>,
        send_cq: &Arc<CompletionQueue>,
        recv_cq: &Arc<CompletionQueue>,
        send_depth: u32,
        recv_depth: u32,
    ) -> Result<Self, VerbsError> {
        // SAFETY: ibv_qp_init_attr is plain data for which all-zero is valid.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = send_cq.raw();
        init.recv_cq = recv_cq.raw();
        init.qp_type = ibv_qp_type::IBV_QPT_UD;
        init.cap.max_send_wr = send_depth;
        init.cap.max_recv_wr = recv_depth;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: the id is bound, the PD and CQs belong to its context and
        // outlive the QP (it holds them).
        if unsafe { rdma_create_qp(id.id, pd.raw(), &mut init) } != 0 {
            return Err(VerbsError::last_os("rdma_create_qp", " (UD)"));
        }
        // SAFETY: rdma_create_qp stored the new QP in the id.
        let qp = unsafe { (*id.id).qp };
        Ok(UdQueuePair { qp, id: Arc::clone(id), _pd: Arc::clone(pd), _send_cq: Arc::clone(send_cq), _recv_cq: Arc::clone(recv_cq) })
    }

    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: the QP is valid until drop.
        unsafe { (*self.qp).qp_num }
    }

    /// Posts one datagram.
    ///
    /// # Safety
    /// The request's memory must be registered and unchanged until a
    /// completion covers the request, and its address handle alive.
    pub(crate) unsafe fn post_send(&self, request: &mut SendRequest<'_>) -> Result<(), VerbsError> {
        // SAFETY: the QP is valid until drop; the rest per the caller.
        unsafe { request.post_alone(self.qp) }.map_err(|errno| VerbsError::returned("ibv_post_send", " of a multicast datagram", errno))
    }

    /// Posts one receive.
    ///
    /// # Safety
    /// The request's segment must be registered memory that nothing else
    /// touches until its completion is polled.
    pub(crate) unsafe fn post_recv(&self, request: &mut RecvRequest) -> Result<(), VerbsError> {
        // SAFETY: the QP is valid until drop; the rest per the caller.
        unsafe { request.post(self.qp) }.map_err(|errno| VerbsError::returned("ibv_post_recv", " of a multicast receive", errno))
    }
}

impl Drop for UdQueuePair {
    fn drop(&mut self) {
        // SAFETY: the QP was created on this id by rdma_create_qp, is
        // destroyed once, and no group it was attached to is joined any
        // more (a membership owns its queue pair).
        unsafe { rdma_destroy_qp(self.id.id) };
    }
}

/// Membership of a multicast group, with the queue pair attached to it;
/// dropping it leaves the group, then destroys the queue pair.
pub(crate) struct Membership {
    group: Ipv4Addr,
    queue_pair: UdQueuePair,
}

impl Membership {
    /// Joins `group` with the id of `queue_pair` and waits up to `timeout`
    /// for the join to complete.
    pub(crate) fn join(queue_pair: UdQueuePair, group: Ipv4Addr, timeout: Duration) -> Result<(Membership, GroupAddress), VerbsError> {
        let id = Arc::clone(&queue_pair.id);
        let mut address = socket_address(group);
        // SAFETY: the id is valid and bound; the address is a sockaddr_in.
        let rc = unsafe { rdma_join_multicast(id.id, (&mut address as *mut libc::sockaddr_in).cast(), ptr::null_mut()) };
        if rc != 0 {
            return Err(VerbsError::last_os("rdma_join_multicast", format!(" {group}")));
        }
        // From here on, every way out leaves the group again.
        let membership = Membership { group, queue_pair };
        let event = id.next_event(group, timeout)?;
        // SAFETY: rdma_get_cm_event returned a valid event, acknowledged
        // below only after its fields were copied.
        let (kind, status, ud) = unsafe { ((*event).event, (*event).status, (*event).param.ud) };
        // SAFETY: the event came from rdma_get_cm_event and is acked once.
        unsafe { rdma_ack_cm_event(event) };
        if kind != rdma_cm_event_type::RDMA_CM_EVENT_MULTICAST_JOIN {
            return Err(VerbsError::JoinRefused { group, event: event_name(kind), status });
        }
        Ok((membership, GroupAddress { ah_attr: ud.ah_attr, qp_num: ud.qp_num, qkey: ud.qkey }))
    }

    pub(crate) fn queue_pair(&self) -> &UdQueuePair {
        &self.queue_pair
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let group = self.group;
        let mut address = socket_address(group);
        // SAFETY: the id is valid and joined to `group`.
        let rc = unsafe { rdma_leave_multicast(self.queue_pair.id.id, (&mut address as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            tracing::debug!("verbs: leaving multicast group {group} failed: {}", std::io::Error::last_os_error());
        }
    }
}

/// An address handle for sending to a group; it holds its protection domain.
pub(crate) struct AddressHandle {
    ah: *mut ibv_ah,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: an address handle is only read by the adapter once created; it
// is destroyed once, on drop.
unsafe impl Send for AddressHandle {}
// SAFETY: as above.
unsafe impl Sync for AddressHandle {}

impl AddressHandle {
    pub(crate) fn new(pd: &Arc<ProtectionDomain>, group: Ipv4Addr, address: &GroupAddress) -> Result<Self, VerbsError> {
        let mut ah_attr = address.ah_attr;
        // SAFETY: the PD is valid; the attributes come from the join event.
        let ah = unsafe { ibv_create_ah(pd.raw(), &mut ah_attr) };
        if ah.is_null() {
            return Err(VerbsError::last_os("ibv_create_ah", format!(" for group {group}")));
        }
        Ok(AddressHandle { ah, _pd: Arc::clone(pd) })
    }

    pub(crate) fn raw(&self) -> *mut ibv_ah {
        self.ah
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: the AH was created in `new`, is destroyed once, and the
        // owner posts no more sends with it.
        unsafe { ibv_destroy_ah(self.ah) };
    }
}

fn socket_address(address: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(address.octets()) },
        sin_zero: [0; 8],
    }
}

fn event_name(kind: rdma_cm_event_type::Type) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    let text = unsafe { rdma_event_str(kind) };
    if text.is_null() {
        return format!("event {kind}");
    }
    // SAFETY: checked non-null; static and NUL-terminated.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}
