//! The agreements: each rank votes [error, data needed, root's source
//! failed] and an MPI_Allreduce(MAX) makes the outcome common. Invariant:
//! every rank reaches the same agreements in the same order and returns the
//! code `agreed_ok_after` derives from the same agreed vote, so no rank
//! waits for a broadcast the others skipped.

use super::Session;
use crate::error::{ErrorCode, Failure};

/// A rank's contribution to an agreement.
#[derive(Clone, Copy, Default)]
pub(super) struct Vote {
    pub(super) error: i32,
    pub(super) needs_data: bool,
    /// Set by the root when it could not send the file as announced (a
    /// read error, or the source changed while it was sent): the copies
    /// then cannot match the hash, and every rank reports SOURCE, not the
    /// receivers' CORRUPT.
    pub(super) root_source_failed: bool,
}

impl Session<'_, '_> {
    /// Records a local failure; returns its code for the vote.
    pub(super) fn fail(&mut self, failure: Failure) -> i32 {
        let code = failure.code as i32;
        self.local.failure.get_or_insert(failure);
        code
    }

    pub(super) fn agree(&self, vote: Vote) -> Result<Vote, ErrorCode> {
        let mut values = [vote.error, vote.needs_data as i32, vote.root_source_failed as i32];
        self.comm.allreduce_max(&mut values).map_err(|_| ErrorCode::Mpi)?;
        Ok(Vote { error: values[0], needs_data: values[1] != 0, root_source_failed: values[2] != 0 })
    }

    pub(super) fn agreed_ok(&self, vote: Vote) -> Result<Vote, ErrorCode> {
        self.agreed_ok_after(self.agree(vote)?)
    }

    /// The agreed vote, or the code every rank returns.
    pub(super) fn agreed_ok_after(&self, agreed: Vote) -> Result<Vote, ErrorCode> {
        if agreed.root_source_failed {
            return Err(ErrorCode::Source);
        }
        match ErrorCode::from_i32(agreed.error) {
            None => Ok(agreed),
            Some(code) => Err(code),
        }
    }
}
