//! Serving the communicator's bcast while another collective on it waits.
//! Over datagram multicast a root returns before its pieces are
//! acknowledged; if it then waits in, say, an allreduce for a rank that is
//! still missing a lost piece, only the root's retransmission can unblock
//! that rank. The progress callback cannot do it (the module is busy with
//! the allreduce), so the allreduce's own waits must: they are given this
//! as their side progress. Public so that the fabric tests run the
//! collectives as the glue does.

use std::cell::RefCell;

use btl_ibmc::{SideProgress, Transport};

use crate::collectives::bcast::Bcast;

pub struct BcastProgress<'a, T: Transport + ?Sized> {
    transport: &'a T,
    bcast: RefCell<&'a mut Bcast>,
}

impl<'a, T: Transport + ?Sized> BcastProgress<'a, T> {
    /// Serves the bcast at every yielding poll, whether or not it has
    /// work left (the fabric tests' choice).
    pub fn new(transport: &'a T, bcast: &'a mut Bcast) -> Self {
        BcastProgress { transport, bcast: RefCell::new(bcast) }
    }

    /// What the glue's collectives serve: the bcast, if it left work
    /// behind ([`Bcast::has_background_work`]); otherwise nothing.
    pub fn if_pending(transport: &'a T, bcast: &'a mut Bcast) -> Option<Self> {
        bcast.has_background_work(transport).then(|| Self::new(transport, bcast))
    }
}

impl<T: Transport + ?Sized> SideProgress for BcastProgress<'_, T> {
    fn progress_others(&self) {
        // Not re-entrant: the bcast's own waits serve nothing besides it.
        if let Ok(mut bcast) = self.bcast.try_borrow_mut()
            && let Err(why) = bcast.progress(self.transport)
        {
            tracing::warn!("bcast progress during another collective failed: {why}");
        }
    }
}
