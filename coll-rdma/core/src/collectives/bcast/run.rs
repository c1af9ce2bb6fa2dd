//! The resumable run of one bcast (`Bcast::start`): the path the blocking
//! call's choice names, as a `Schedule`.

use btl_ibmc::{PeerReads, TransportError};

use super::put_tree::PutTreeRun;
use super::single_copy_run::SingleCopyRun;
use crate::schedule::{Schedule, Step};

pub enum BcastRun<'a> {
    PutTree(PutTreeRun<'a>),
    SingleCopy(SingleCopyRun<'a>),
}

impl<T: PeerReads + ?Sized> Schedule<T> for BcastRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        match self {
            BcastRun::PutTree(run) => run.advance(transport),
            BcastRun::SingleCopy(run) => run.advance(transport),
        }
    }
}
