//! How a run holds its collective's plan (streams, slots): a resumable run
//! shares it (`Arc`), since it may outlive any borrow of the communicator;
//! a blocking call's run borrows it, which spares every call the two
//! atomic reference-count updates (measured: docs/nonblocking.md).

use std::ops::Deref;
use std::sync::Arc;

pub(crate) enum PlanRef<'a, P> {
    Shared(Arc<P>),
    Lent(&'a P),
}

impl<P> Deref for PlanRef<'_, P> {
    type Target = P;

    #[inline]
    fn deref(&self) -> &P {
        match self {
            PlanRef::Shared(plan) => plan,
            PlanRef::Lent(plan) => plan,
        }
    }
}
