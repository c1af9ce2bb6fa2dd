//! Serving the communicator's bcast while another collective on it waits.
//! Over datagram multicast a root returns before its pieces are
//! acknowledged; if it then waits in, say, an allreduce for a rank that is
//! still missing a lost piece, only the root's retransmission can unblock
//! that rank. The progress callback cannot do it (the module is busy with
//! the allreduce), so the allreduce's own waits must: they are given this
//! as their side progress. Public so that the fabric tests run the
//! collectives as the glue does, with the same rule.

use std::cell::RefCell;

use btl_ibmc::{SideProgress, Transport};

use crate::collectives::bcast::Bcast;

pub struct BcastProgress<'a, T: Transport + ?Sized> {
    transport: &'a T,
    bcast: RefCell<&'a mut Bcast>,
}

impl<'a, T: Transport + ?Sized> BcastProgress<'a, T> {
    /// What another collective's waits serve, in the glue and in the
    /// tests alike: the bcast, where it needs serving outside its own calls
    /// ([`Bcast::needs_side_progress`]: on datagram transports, even while
    /// this rank owes nothing); otherwise nothing.
    pub fn if_needed(transport: &'a T, bcast: &'a mut Bcast) -> Option<Self> {
        bcast.needs_side_progress(transport).then(|| BcastProgress { transport, bcast: RefCell::new(bcast) })
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
