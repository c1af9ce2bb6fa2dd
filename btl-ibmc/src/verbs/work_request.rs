//! The one place verbs work requests are built: an RDMA write, an RC send,
//! a UD send and a receive, each from typed arguments, and the posting of
//! them. Policy code (what to send, when to ask for a completion) says
//! what it wants here and never fills an `ibv_*_wr` itself.

use std::marker::PhantomData;

use rdma_sys::{ibv_ah, ibv_qp, ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wr_opcode, rdma_t, ud_t};

/// Registered local memory a request reads from or receives into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) address: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

/// The local bytes a send-queue request carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gather<'d> {
    /// Copied into the request while it is posted.
    Inline(&'d [u8]),
    /// Read by the adapter until a completion covers the request.
    Registered(Segment),
}

/// Where in a peer's registered memory an RDMA write lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteTarget {
    pub(crate) address: u64,
    pub(crate) rkey: u32,
}

/// Where a UD datagram goes: an address handle and the destination queue
/// pair and its key (for a multicast group, what the join reported).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdDestination {
    pub(crate) ah: *mut ibv_ah,
    pub(crate) qp_num: u32,
    pub(crate) qkey: u32,
}

/// One send-queue request and its scatter entry, linked to each other
/// (and to the next request of a chain) only when posted. `'d` is the
/// life of inline bytes, which must outlive the post.
pub(crate) struct SendRequest<'d> {
    wr: ibv_send_wr,
    sge: ibv_sge,
    _inline: PhantomData<&'d [u8]>,
}

impl<'d> SendRequest<'d> {
    /// An RDMA write of `source` to `target`.
    pub(crate) fn rdma_write(wr_id: u64, source: Gather<'d>, target: RemoteTarget, signalled: bool) -> Self {
        let mut request = Self::carrying(wr_id, ibv_wr_opcode::IBV_WR_RDMA_WRITE, source, signalled);
        request.wr.wr.rdma = rdma_t { remote_addr: target.address, rkey: target.rkey };
        request
    }

    /// A send of `source` into the peer's next posted receive.
    pub(crate) fn send(wr_id: u64, source: Gather<'d>, signalled: bool) -> Self {
        Self::carrying(wr_id, ibv_wr_opcode::IBV_WR_SEND, source, signalled)
    }

    /// A UD send of `source` to `destination`.
    pub(crate) fn ud_send(wr_id: u64, source: Segment, destination: UdDestination, signalled: bool) -> Self {
        let mut request = Self::carrying(wr_id, ibv_wr_opcode::IBV_WR_SEND, Gather::Registered(source), signalled);
        request.wr.wr.ud = ud_t { ah: destination.ah, remote_qpn: destination.qp_num, remote_qkey: destination.qkey };
        request
    }

    fn carrying(wr_id: u64, opcode: ibv_wr_opcode::Type, source: Gather<'d>, signalled: bool) -> Self {
        let (sge, inline) = match source {
            Gather::Inline(bytes) => (ibv_sge { addr: bytes.as_ptr() as u64, length: bytes.len() as u32, lkey: 0 }, true),
            Gather::Registered(segment) => (ibv_sge { addr: segment.address, length: segment.len, lkey: segment.lkey }, false),
        };
        // SAFETY: ibv_send_wr is plain data (integers, pointers and unions
        // of them) for which all-zero is valid: no chain, no scatter list.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = opcode;
        wr.num_sge = i32::from(sge.length > 0);
        let mut flags = 0;
        if signalled {
            flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        if inline {
            flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        wr.send_flags = flags;
        SendRequest { wr, sge, _inline: PhantomData }
    }

    /// Posts this request alone to `qp` (no chain to build); Err carries
    /// the errno.
    ///
    /// # Safety
    /// As for [`SendChain::post`].
    pub(crate) unsafe fn post_alone(&mut self, qp: *mut ibv_qp) -> Result<(), i32> {
        self.wr.sg_list = &raw mut self.sge;
        self.wr.next = std::ptr::null_mut();
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: the request points at its own scatter entry, both borrowed
        // for the call; the rest is the caller's promise.
        let rc = unsafe { rdma_sys::ibv_post_send(qp, &mut self.wr, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }
}

/// Requests posted together, in order, with one call.
pub(crate) struct SendChain<'d> {
    requests: Vec<SendRequest<'d>>,
}

impl<'d> SendChain<'d> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        SendChain { requests: Vec::with_capacity(capacity) }
    }

    pub(crate) fn push(&mut self, request: SendRequest<'d>) {
        self.requests.push(request);
    }

    /// Points each request at its scatter entry and at the next request;
    /// the pointers stay valid while the chain is neither moved nor
    /// changed. Null for an empty chain.
    fn link(&mut self) -> *mut ibv_send_wr {
        let count = self.requests.len();
        let base = self.requests.as_mut_ptr();
        for index in 0..count {
            // SAFETY: `index` and `index + 1` (when linked) are inside the
            // vector, which is borrowed mutably here and not resized.
            unsafe {
                let request = base.add(index);
                (*request).wr.sg_list = &raw mut (*request).sge;
                (*request).wr.next = if index + 1 < count { &raw mut (*base.add(index + 1)).wr } else { std::ptr::null_mut() };
            }
        }
        if count == 0 { std::ptr::null_mut() } else { &raw mut self.requests[0].wr }
    }

    /// Posts the chain to `qp`; Err carries the errno.
    ///
    /// # Safety
    /// `qp` must be a live queue pair, and every registered segment must
    /// stay valid and unchanged until a completion covers its request.
    pub(crate) unsafe fn post(&mut self, qp: *mut ibv_qp) -> Result<(), i32> {
        let first = self.link();
        if first.is_null() {
            return Ok(());
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: the chain was just linked and is not touched until the
        // call returns; the rest is the caller's promise.
        let rc = unsafe { rdma_sys::ibv_post_send(qp, first, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }
}

/// One receive request: the adapter places the next arriving message in
/// `into`.
pub(crate) struct RecvRequest {
    wr: ibv_recv_wr,
    sge: ibv_sge,
}

impl RecvRequest {
    pub(crate) fn new(wr_id: u64, into: Segment) -> Self {
        RecvRequest {
            wr: ibv_recv_wr { wr_id, next: std::ptr::null_mut(), sg_list: std::ptr::null_mut(), num_sge: 1 },
            sge: ibv_sge { addr: into.address, length: into.len, lkey: into.lkey },
        }
    }

    /// Posts the request to `qp`; Err carries the errno.
    ///
    /// # Safety
    /// `qp` must be a live queue pair, and the segment registered memory
    /// nothing else touches until the request's completion is polled.
    pub(crate) unsafe fn post(&mut self, qp: *mut ibv_qp) -> Result<(), i32> {
        self.wr.sg_list = &raw mut self.sge;
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: the request points at its own scatter entry, both borrowed
        // for the call; the rest is the caller's promise.
        let rc = unsafe { rdma_sys::ibv_post_recv(qp, &mut self.wr, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNALED: u32 = ibv_send_flags::IBV_SEND_SIGNALED.0;
    const INLINE: u32 = ibv_send_flags::IBV_SEND_INLINE.0;

    fn remote_of(request: &SendRequest<'_>) -> (u64, u32) {
        // SAFETY: reading plain integers out of the union; every bit
        // pattern is valid for them.
        let rdma = unsafe { request.wr.wr.rdma };
        (rdma.remote_addr, rdma.rkey)
    }

    #[test]
    fn an_inline_write_carries_the_callers_bytes_and_its_target() {
        let data = [7u8; 40];
        let request = SendRequest::rdma_write(42, Gather::Inline(&data), RemoteTarget { address: 0x1000, rkey: 9 }, false);
        assert_eq!(request.wr.wr_id, 42);
        assert_eq!(request.wr.opcode, ibv_wr_opcode::IBV_WR_RDMA_WRITE);
        assert_eq!(request.wr.send_flags, INLINE);
        assert_eq!(request.wr.num_sge, 1);
        assert_eq!((request.sge.addr, request.sge.length, request.sge.lkey), (data.as_ptr() as u64, 40, 0));
        assert_eq!(remote_of(&request), (0x1000, 9));
    }

    #[test]
    fn a_signalled_registered_write_names_its_lkey_and_is_not_inline() {
        let segment = Segment { address: 0xA000, len: 8, lkey: 77 };
        let request = SendRequest::rdma_write(1, Gather::Registered(segment), RemoteTarget { address: 0xB008, rkey: 5 }, true);
        assert_eq!(request.wr.send_flags, SIGNALED);
        assert_eq!((request.sge.addr, request.sge.length, request.sge.lkey), (0xA000, 8, 77));
        assert_eq!(remote_of(&request), (0xB008, 5));
    }

    #[test]
    fn sends_have_the_send_opcode_and_no_remote_address() {
        let bytes = [1u8, 2, 3];
        let request = SendRequest::send(3, Gather::Inline(&bytes), true);
        assert_eq!(request.wr.opcode, ibv_wr_opcode::IBV_WR_SEND);
        assert_eq!(request.wr.send_flags, SIGNALED | INLINE);
        assert_eq!(remote_of(&request), (0, 0));

        let empty = SendRequest::send(4, Gather::Inline(&[]), false);
        assert_eq!(empty.wr.num_sge, 0, "nothing to gather");
    }

    #[test]
    fn a_ud_send_names_the_group() {
        let destination = UdDestination { ah: std::ptr::null_mut(), qp_num: 0xFF_FFFF, qkey: 0x1234 };
        let request = SendRequest::ud_send(9, Segment { address: 0x3000, len: 100, lkey: 2 }, destination, false);
        assert_eq!(request.wr.opcode, ibv_wr_opcode::IBV_WR_SEND);
        assert_eq!(request.wr.send_flags, 0);
        // SAFETY: plain integers and a pointer out of the union.
        let ud = unsafe { request.wr.wr.ud };
        assert_eq!((ud.remote_qpn, ud.remote_qkey), (0xFF_FFFF, 0x1234));
        assert_eq!((request.sge.addr, request.sge.length, request.sge.lkey), (0x3000, 100, 2));
    }

    #[test]
    fn a_chain_links_each_request_to_its_entry_and_the_next() {
        let data = [0u8; 16];
        let mut chain = SendChain::with_capacity(2);
        chain.push(SendRequest::rdma_write(1, Gather::Inline(&data), RemoteTarget { address: 0x10, rkey: 1 }, false));
        chain.push(SendRequest::rdma_write(2, Gather::Inline(&data[..8]), RemoteTarget { address: 0x20, rkey: 1 }, true));
        let first = chain.link();
        let (head, second) = (&raw mut chain.requests[0].wr, &raw mut chain.requests[1].wr);
        assert_eq!(first, head);
        assert_eq!(chain.requests[0].wr.next, second);
        assert!(chain.requests[1].wr.next.is_null());
        for request in &mut chain.requests {
            let entry = &raw mut request.sge;
            assert_eq!(request.wr.sg_list, entry);
        }
        assert!(SendChain::with_capacity(0).link().is_null());
    }

    #[test]
    fn a_receive_takes_one_entry_into_its_segment() {
        let request = RecvRequest::new(12, Segment { address: 0x5000, len: 4096, lkey: 3 });
        assert_eq!((request.wr.wr_id, request.wr.num_sge), (12, 1));
        assert!(request.wr.next.is_null());
        assert_eq!((request.sge.addr, request.sge.length, request.sge.lkey), (0x5000, 4096, 3));
    }
}
