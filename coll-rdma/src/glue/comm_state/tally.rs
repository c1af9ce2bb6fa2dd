//! The counts kept per communicator, apart from the state they describe:
//! calls served natively or handed over per collective, calls entered (for
//! the testing-only fault injection), and whether a call failed midway.
//! Only counting happens here; `report.rs` says what the counts mean.

pub(in crate::glue) use crate::select::Collective;

/// Calls of one collective: served natively or handed over.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tally {
    pub served: u64,
    pub handed_over: u64,
}

/// Every count of one communicator.
#[derive(Default)]
pub(super) struct Tallies {
    /// Indexed by `Collective as usize`.
    outcomes: [Tally; Collective::ALL.len()],
    /// Calls entered per collective, whatever became of them.
    calls: [u64; Collective::ALL.len()],
    /// A call failed midway: the protocols' state is not to be trusted, so
    /// teardown skips their closing steps (the module hands every later call
    /// over).
    failed: bool,
    /// Calls the module handed over without the state once it had failed.
    handed_over_after_failure: u64,
    /// MPI_Iallreduce calls of the shape of Open MPI's own agreements
    /// (context ids, MPIX_Comm_iagree), left to the module underneath as a rule, not for a
    /// reason of this communicator's (`mpi_ireduction.rs`): not in
    /// `outcomes`.
    agreements_underneath: u64,
}

impl Tallies {
    #[inline]
    pub(super) fn served(&mut self, collective: Collective) {
        self.outcomes[collective as usize].served += 1;
    }

    pub(super) fn handed_over(&mut self, collective: Collective) {
        self.outcomes[collective as usize].handed_over += 1;
    }

    /// Counts one entered call and returns how many there have been.
    #[inline]
    pub(super) fn entered(&mut self, collective: Collective) -> u64 {
        let calls = &mut self.calls[collective as usize];
        *calls += 1;
        *calls
    }

    pub(super) fn of(&self, collective: Collective) -> Tally {
        self.outcomes[collective as usize]
    }

    /// The counts the reports give, in `Collective::ALL`'s order: every
    /// blocking collective's, and a non-blocking or persistent kind's only
    /// where it was called.
    pub(super) fn reported(&self) -> impl Iterator<Item = (Collective, Tally)> + '_ {
        Collective::ALL
            .into_iter()
            .map(|collective| (collective, self.of(collective)))
            .filter(|(collective, tally)| collective.is_blocking() || *tally != Tally::default())
    }

    pub(super) fn mark_failed(&mut self) {
        self.failed = true;
    }

    #[inline]
    pub(super) fn has_failed(&self) -> bool {
        self.failed
    }

    pub(super) fn note_handed_over_after_failure(&mut self, calls: u64) {
        self.handed_over_after_failure = calls;
    }

    pub(super) fn handed_over_after_failure(&self) -> u64 {
        self.handed_over_after_failure
    }

    pub(super) fn agreement_underneath(&mut self) {
        self.agreements_underneath += 1;
    }

    pub(super) fn note_agreements_underneath(&mut self, calls: u64) {
        self.agreements_underneath += calls;
    }

    pub(super) fn agreements_underneath(&self) -> u64 {
        self.agreements_underneath
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_collective_counts_apart() {
        let mut tallies = Tallies::default();
        tallies.served(Collective::Bcast);
        tallies.served(Collective::Bcast);
        tallies.handed_over(Collective::Reduce);
        assert_eq!(tallies.entered(Collective::Barrier), 1);
        assert_eq!(tallies.entered(Collective::Barrier), 2);
        assert_eq!(tallies.entered(Collective::Allreduce), 1);
        tallies.served(Collective::Ibarrier);
        tallies.handed_over(Collective::ReduceInit);
        let counted: Vec<Tally> = Collective::ALL.iter().map(|&collective| tallies.of(collective)).collect();
        let expected = [(0, 0), (0, 0), (0, 1), (2, 0), (1, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 1)]
            .map(|(served, handed_over)| Tally { served, handed_over });
        assert_eq!(counted, expected);
        // The reports: the four blocking kinds, and of the others those called.
        let reported: Vec<Collective> = tallies.reported().map(|(collective, _)| collective).collect();
        let called = [Collective::Barrier, Collective::Allreduce, Collective::Reduce, Collective::Bcast, Collective::Ibarrier, Collective::ReduceInit];
        assert_eq!(reported, called);
        assert!(!tallies.has_failed());
        tallies.mark_failed();
        assert!(tallies.has_failed());
    }
}
