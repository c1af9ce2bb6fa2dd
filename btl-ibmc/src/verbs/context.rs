//! The roots every other verbs object hangs from: a device context and the
//! protection domains allocated in it. Each object holds an `Arc` of what
//! it was created in (a queue pair its protection domain and completion
//! queues, a registration its protection domain, a protection domain or
//! completion queue its context), so whatever order the owners drop their
//! handles in, verbs destroys children before parents.

use std::sync::Arc;

use rdma_sys::{ibv_alloc_pd, ibv_close_device, ibv_context, ibv_dealloc_pd, ibv_pd};

use super::cm_group::CmId;
use super::device::context_name;
use super::error::VerbsSetupError;

/// An open verbs context.
pub(crate) struct DeviceContext {
    raw: *mut ibv_context,
    closer: Closer,
}

/// Who closes a context.
enum Closer {
    /// Opened with `ibv_open_device`: closed on drop.
    Ours,
    /// The context of the device an rdma_cm id is bound to, which rdma_cm
    /// closes: held open by holding the id.
    CmId { _bound: Arc<CmId> },
}

// SAFETY: libibverbs contexts may be used from any thread (the library
// locks internally); this handle only closes it on drop.
unsafe impl Send for DeviceContext {}
// SAFETY: as above; shared use only passes the pointer to thread-safe calls.
unsafe impl Sync for DeviceContext {}

impl DeviceContext {
    /// Takes over a context opened with `ibv_open_device`.
    ///
    /// # Safety
    /// `raw` must be an open context that nothing else closes.
    pub(crate) unsafe fn opened(raw: *mut ibv_context) -> Arc<Self> {
        Arc::new(DeviceContext { raw, closer: Closer::Ours })
    }

    /// The context of the device `id` is bound to, if it is bound to one.
    pub(crate) fn of_cm_id(id: &Arc<CmId>) -> Option<Arc<Self>> {
        let raw = id.context();
        (!raw.is_null()).then(|| Arc::new(DeviceContext { raw, closer: Closer::CmId { _bound: Arc::clone(id) } }))
    }

    pub(crate) fn raw(&self) -> *mut ibv_context {
        self.raw
    }

    /// The device's name, for messages.
    pub(crate) fn device_name(&self) -> String {
        // SAFETY: the context is open for as long as `self` lives.
        unsafe { context_name(self.raw) }
    }
}

impl Drop for DeviceContext {
    fn drop(&mut self) {
        if let Closer::Ours = self.closer {
            let name = self.device_name();
            // SAFETY: the context was opened with ibv_open_device, nothing
            // created in it is left (each child holds this context), and it
            // is closed once.
            let rc = unsafe { ibv_close_device(self.raw) };
            if rc != 0 {
                tracing::warn!("verbs: ibv_close_device on {name} failed ({rc})");
            }
        }
    }
}

/// A protection domain; it keeps its context open.
pub(crate) struct ProtectionDomain {
    raw: *mut ibv_pd,
    context: Arc<DeviceContext>,
}

// SAFETY: protection domains may be used from any thread; this handle only
// frees it on drop.
unsafe impl Send for ProtectionDomain {}
// SAFETY: as above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// Allocates a protection domain in `context`; `what` names its use in errors.
    pub(crate) fn alloc(context: &Arc<DeviceContext>, what: &str) -> Result<Arc<Self>, VerbsSetupError> {
        // SAFETY: the context is open; the PD is freed in drop.
        let raw = unsafe { ibv_alloc_pd(context.raw()) };
        if raw.is_null() {
            return Err(VerbsSetupError::last_os("ibv_alloc_pd", what.to_owned()));
        }
        Ok(Arc::new(ProtectionDomain { raw, context: Arc::clone(context) }))
    }

    pub(crate) fn raw(&self) -> *mut ibv_pd {
        self.raw
    }

    pub(crate) fn context(&self) -> &Arc<DeviceContext> {
        &self.context
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: the PD was allocated in `alloc`, every object created in
        // it holds this PD and so is gone, and it is freed once.
        let rc = unsafe { ibv_dealloc_pd(self.raw) };
        if rc != 0 {
            tracing::warn!("verbs: ibv_dealloc_pd on {} failed ({rc}); something still uses it", self.context.device_name());
        }
    }
}
