//! Reliable-connected queue pairs: creation, the INIT → RTR → RTS
//! transitions with the peer's address, and posting. One RC queue pair per
//! remote peer carries both the one-sided writes and the reliable channel's
//! sends, so a peer sees them in the order they were posted.

use std::sync::Arc;

use rdma_sys::{
    ibv_access_flags, ibv_ah_attr, ibv_create_qp, ibv_destroy_qp, ibv_modify_qp, ibv_qp, ibv_qp_attr, ibv_qp_attr_mask,
    ibv_qp_init_attr, ibv_qp_state, ibv_qp_type,
};

use super::completion::CompletionQueue;
use super::context::ProtectionDomain;
use super::error::{VerbsError, VerbsSetupError};
use super::work_request::{RecvRequest, SendChain};

/// The RC timeout exponent: 4.096 us * 2^14 = 67 ms per try.
const ACK_TIMEOUT: u8 = 14;
/// Retries of an unacknowledged packet before the queue pair fails.
const RETRY_COUNT: u8 = 7;
/// 7 = retry forever while the receiver has no receive posted: the reliable
/// channel relies on this instead of credits.
const RNR_RETRY_FOREVER: u8 = 7;
/// Minimal RNR NAK delay the receiver asks for (12 = 0.64 ms).
const MIN_RNR_TIMER: u8 = 12;
const HOP_LIMIT: u8 = 64;

/// How this rank's end of a connection is addressed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalPort {
    pub(crate) port: u8,
    pub(crate) gid_index: u8,
    pub(crate) global_routing: bool,
    pub(crate) mtu_code: u8,
}

/// The other end of a connection, from the peer's setup record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RemoteQp {
    pub(crate) qp_num: u32,
    pub(crate) psn: u32,
    pub(crate) gid: [u8; 16],
    pub(crate) lid: u16,
    pub(crate) mtu_code: u8,
}

/// An RC queue pair; it holds the protection domain and completion
/// queues it was created with, so they outlive it.
pub(crate) struct RcQueuePair {
    qp: *mut ibv_qp,
    max_inline: usize,
    _pd: Arc<ProtectionDomain>,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
}

// SAFETY: posting to and modifying a QP are thread-safe in libibverbs; the
// owner serialises posting with its own locks.
unsafe impl Send for RcQueuePair {}
// SAFETY: as above.
unsafe impl Sync for RcQueuePair {}

impl RcQueuePair {
    /// Creates a queue pair in RESET and moves it to INIT. Asks for
    /// `inline_wanted` bytes of inline data and settles for less (64, then
    /// none) if the device refuses.
    pub(crate) fn new(
        pd: &Arc<ProtectionDomain>,
        send_cq: &Arc<CompletionQueue>,
        recv_cq: &Arc<CompletionQueue>,
        send_depth: u32,
        recv_depth: u32,
        inline_wanted: u32,
        port: u8,
    ) -> Result<Self, VerbsSetupError> {
        let mut last_error = None;
        for inline in [inline_wanted, inline_wanted.min(64), 0] {
            // SAFETY: ibv_qp_init_attr is plain data for which all-zero is valid.
            let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            init.send_cq = send_cq.raw();
            init.recv_cq = recv_cq.raw();
            init.qp_type = ibv_qp_type::IBV_QPT_RC;
            init.sq_sig_all = 0;
            init.cap.max_send_wr = send_depth;
            init.cap.max_recv_wr = recv_depth.max(1);
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = inline;
            // SAFETY: the PD and CQs are valid and outlive the QP (it holds
            // them); `init` is a valid in/out pointer.
            let qp = unsafe { ibv_create_qp(pd.raw(), &mut init) };
            if qp.is_null() {
                last_error = Some(VerbsSetupError::last_os("ibv_create_qp", format!("(RC, {send_depth} send / {recv_depth} receive entries, {inline} inline bytes)")));
                continue;
            }
            let queue_pair = RcQueuePair {
                qp,
                max_inline: init.cap.max_inline_data as usize,
                _pd: Arc::clone(pd),
                _send_cq: Arc::clone(send_cq),
                _recv_cq: Arc::clone(recv_cq),
            };
            queue_pair.to_init(port)?;
            return Ok(queue_pair);
        }
        Err(last_error.unwrap_or_else(|| VerbsSetupError::InvalidArguments("no queue pair attempt was made".into())))
    }

    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: the QP is valid until drop.
        unsafe { (*self.qp).qp_num }
    }

    pub(crate) fn max_inline(&self) -> usize {
        self.max_inline
    }

    fn to_init(&self, port: u8) -> Result<(), VerbsSetupError> {
        let mut attr = zeroed_attr();
        attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = port;
        attr.qp_access_flags = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ)
            .0;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ibv_qp_attr_mask::IBV_QP_PORT
            | ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut attr, mask, "to INIT")
    }

    /// Connects to `remote`: RTR (receive from it) then RTS (send to it).
    pub(crate) fn connect(&self, local: &LocalPort, remote: &RemoteQp, own_psn: u32) -> Result<(), VerbsSetupError> {
        let mut attr = zeroed_attr();
        attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
        attr.path_mtu = u32::from(local.mtu_code.min(remote.mtu_code));
        attr.dest_qp_num = remote.qp_num;
        attr.rq_psn = remote.psn;
        attr.max_dest_rd_atomic = 1;
        attr.min_rnr_timer = MIN_RNR_TIMER;
        attr.ah_attr = address_of(local, remote);
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_AV
            | ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut attr, mask, "to RTR")?;

        let mut attr = zeroed_attr();
        attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
        attr.timeout = ACK_TIMEOUT;
        attr.retry_cnt = RETRY_COUNT;
        attr.rnr_retry = RNR_RETRY_FOREVER;
        attr.sq_psn = own_psn;
        attr.max_rd_atomic = 1;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_TIMEOUT
            | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
            | ibv_qp_attr_mask::IBV_QP_RNR_RETRY
            | ibv_qp_attr_mask::IBV_QP_SQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut attr, mask, "to RTS")
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask, step: &str) -> Result<(), VerbsSetupError> {
        let mask_bits = i32::try_from(mask.0).unwrap_or(i32::MAX);
        // SAFETY: the QP is valid and `attr` is fully initialised.
        let rc = unsafe { ibv_modify_qp(self.qp, attr, mask_bits) };
        if rc != 0 {
            return Err(VerbsSetupError::returned("ibv_modify_qp", rc, format!("moving RC QP {} {step}", self.qp_num())));
        }
        Ok(())
    }

    /// Posts a chain of work requests.
    ///
    /// # Safety
    /// Every registered segment must stay valid and unchanged until a
    /// completion covers its request (inline bytes are copied during the call).
    pub(crate) unsafe fn post_send(&self, chain: &mut SendChain<'_>) -> Result<(), VerbsError> {
        // SAFETY: the QP is valid until drop; the rest per the caller.
        unsafe { chain.post(self.qp) }.map_err(|errno| VerbsError::returned("ibv_post_send", format!(" on QP {}", self.qp_num()), errno))
    }

    /// Posts one receive request.
    ///
    /// # Safety
    /// The request's segment must be registered memory that nothing else
    /// touches until the request completes.
    pub(crate) unsafe fn post_recv(&self, request: &mut RecvRequest) -> Result<(), VerbsError> {
        // SAFETY: the QP is valid until drop; the rest per the caller.
        unsafe { request.post(self.qp) }.map_err(|errno| VerbsError::returned("ibv_post_recv", format!(" on QP {}", self.qp_num()), errno))
    }
}

impl Drop for RcQueuePair {
    fn drop(&mut self) {
        // SAFETY: the QP was created in `new` and is destroyed once, before
        // the PD and CQs it holds.
        let rc = unsafe { ibv_destroy_qp(self.qp) };
        if rc != 0 {
            tracing::warn!("verbs: ibv_destroy_qp failed ({rc})");
        }
    }
}

fn zeroed_attr() -> ibv_qp_attr {
    // SAFETY: ibv_qp_attr is plain data for which all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// The address vector of `remote`: routed by GID on RoCE (and whenever a
/// GID is what identifies the peer), by LID on InfiniBand.
fn address_of(local: &LocalPort, remote: &RemoteQp) -> ibv_ah_attr {
    // SAFETY: ibv_ah_attr is plain data for which all-zero is valid.
    let mut ah: ibv_ah_attr = unsafe { std::mem::zeroed() };
    ah.dlid = remote.lid;
    ah.sl = 0;
    ah.src_path_bits = 0;
    ah.port_num = local.port;
    if local.global_routing {
        ah.is_global = 1;
        ah.grh.dgid.raw = remote.gid;
        ah.grh.sgid_index = local.gid_index;
        ah.grh.hop_limit = HOP_LIMIT;
        ah.grh.traffic_class = 0;
        ah.grh.flow_label = 0;
    }
    ah
}
