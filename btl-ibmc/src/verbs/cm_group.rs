//! The rdma_cm side of UD multicast: an event channel and a UDP-port-space
//! id bound to this host's address on the RDMA device, the join, and the
//! group's address vector the join reports. Joining goes through rdma_cm
//! because on RoCE it also programs the netdev's multicast filter (IGMP),
//! and on InfiniBand it asks the subnet manager, neither of which plain
//! verbs can do.

use std::ffi::CStr;
use std::net::Ipv4Addr;
use std::ptr;
use std::time::{Duration, Instant};

use rdma_sys::{
    ibv_ah_attr, ibv_context, rdma_ack_cm_event, rdma_bind_addr, rdma_cm_event, rdma_cm_event_type, rdma_cm_id,
    rdma_create_event_channel, rdma_create_id, rdma_destroy_event_channel, rdma_destroy_id, rdma_event_channel,
    rdma_event_str, rdma_get_cm_event, rdma_join_multicast, rdma_leave_multicast, rdma_port_space,
};

/// What the join told us about the group: how to address datagrams to it.
#[derive(Clone, Copy)]
pub(crate) struct GroupAddress {
    pub(crate) ah_attr: ibv_ah_attr,
    pub(crate) qp_num: u32,
    pub(crate) qkey: u32,
}

/// An rdma_cm id bound to a local address, possibly joined to a group.
/// Dropping it leaves the group and destroys the id and channel; the
/// owner must destroy the id's queue pair first.
pub(crate) struct CmGroup {
    channel: *mut rdma_event_channel,
    id: *mut rdma_cm_id,
    joined: Option<Ipv4Addr>,
}

// SAFETY: rdma_cm ids and channels may be used from any thread; this
// handle only uses them during setup and teardown.
unsafe impl Send for CmGroup {}
// SAFETY: shared references never call into rdma_cm.
unsafe impl Sync for CmGroup {}

impl CmGroup {
    /// Creates the channel and id and binds the id to `local`.
    pub(crate) fn bind(local: Ipv4Addr) -> Result<CmGroup, String> {
        // SAFETY: no preconditions; null is checked.
        let channel = unsafe { rdma_create_event_channel() };
        if channel.is_null() {
            return Err(format!("rdma_create_event_channel failed: {} (is rdma_ucm loaded?)", std::io::Error::last_os_error()));
        }
        let mut group = CmGroup { channel, id: ptr::null_mut(), joined: None };
        let mut id: *mut rdma_cm_id = ptr::null_mut();
        // SAFETY: the channel is valid and `id` is a valid out-pointer.
        let rc = unsafe { rdma_create_id(channel, &mut id, ptr::null_mut(), rdma_port_space::RDMA_PS_UDP) };
        if rc != 0 || id.is_null() {
            return Err(format!("rdma_create_id failed: {}", std::io::Error::last_os_error()));
        }
        group.id = id;
        let mut address = socket_address(local);
        // SAFETY: the id is valid; the address is a sockaddr_in, which
        // rdma_cm reads by its family.
        let rc = unsafe { rdma_bind_addr(id, (&mut address as *mut libc::sockaddr_in).cast()) };
        if rc != 0 {
            return Err(format!("rdma_bind_addr to {local} failed: {}", std::io::Error::last_os_error()));
        }
        group.set_nonblocking()?;
        Ok(group)
    }

    pub(crate) fn id(&self) -> *mut rdma_cm_id {
        self.id
    }

    /// The verbs context of the device the bound address belongs to.
    pub(crate) fn context(&self) -> *mut ibv_context {
        // SAFETY: the id is valid; binding set its device context.
        unsafe { (*self.id).verbs }
    }

    /// Joins `group` and waits up to `timeout` for the join to complete.
    pub(crate) fn join(&mut self, group: Ipv4Addr, timeout: Duration) -> Result<GroupAddress, String> {
        let mut address = socket_address(group);
        // SAFETY: the id is valid and bound; the address is a sockaddr_in.
        let rc = unsafe { rdma_join_multicast(self.id, (&mut address as *mut libc::sockaddr_in).cast(), ptr::null_mut()) };
        if rc != 0 {
            return Err(format!("rdma_join_multicast {group} failed: {}", std::io::Error::last_os_error()));
        }
        self.joined = Some(group);
        let event = self.next_event(timeout).map_err(|why| format!("joining {group}: {why}"))?;
        // SAFETY: rdma_get_cm_event returned a valid event, acknowledged
        // below only after its fields were copied.
        let (kind, status, ud) = unsafe { ((*event).event, (*event).status, (*event).param.ud) };
        // SAFETY: the event came from rdma_get_cm_event and is acked once.
        unsafe { rdma_ack_cm_event(event) };
        if kind != rdma_cm_event_type::RDMA_CM_EVENT_MULTICAST_JOIN {
            return Err(format!("joining {group}: got {} (status {status})", event_name(kind)));
        }
        Ok(GroupAddress { ah_attr: ud.ah_attr, qp_num: ud.qp_num, qkey: ud.qkey })
    }

    fn set_nonblocking(&self) -> Result<(), String> {
        // SAFETY: the channel is valid; its fd belongs to it.
        let fd = unsafe { (*self.channel).fd };
        // SAFETY: fcntl on a valid descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(format!("making the rdma_cm channel non-blocking failed: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The next event on the channel, waiting at most `timeout`.
    fn next_event(&self, timeout: Duration) -> Result<*mut rdma_cm_event, String> {
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
                return Err(format!("rdma_get_cm_event failed: {error}"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no answer within {timeout:?}"));
            }
            // SAFETY: the channel is valid.
            let mut poller = libc::pollfd { fd: unsafe { (*self.channel).fd }, events: libc::POLLIN, revents: 0 };
            let wait_ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut poller, 1, wait_ms) };
        }
    }
}

impl CmGroup {
    /// Leaves the group, if joined; called before the queue pair attached
    /// to it is destroyed, and again (harmlessly) on drop.
    pub(crate) fn leave(&mut self) {
        if let Some(group) = self.joined.take() {
            let mut address = socket_address(group);
            // SAFETY: the id is valid and joined to `group`.
            let rc = unsafe { rdma_leave_multicast(self.id, (&mut address as *mut libc::sockaddr_in).cast()) };
            if rc != 0 {
                tracing::debug!("verbs: leaving multicast group {group} failed: {}", std::io::Error::last_os_error());
            }
        }
    }
}

impl Drop for CmGroup {
    fn drop(&mut self) {
        self.leave();
        if !self.id.is_null() {
            // SAFETY: the id is valid; its QP was destroyed by the owner.
            unsafe { rdma_destroy_id(self.id) };
        }
        // SAFETY: the channel is valid and its only id is gone.
        unsafe { rdma_destroy_event_channel(self.channel) };
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
