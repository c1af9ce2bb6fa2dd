//! MPI_Barrier's path: the two-level barrier where the communicator spans
//! nodes, otherwise the dissemination barrier (whose autotune, if on,
//! picks the radix inside it). A barrier has no data, so nothing about the
//! call hands it over: only a communicator without a transport does, which
//! the adapter finds before there is a plan.

use super::{CallShape, Choice, Plan};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierPath {
    TwoLevel,
    Dissemination,
}

pub fn select(_shape: &CallShape, plan: &Plan) -> Choice<BarrierPath> {
    Choice::Native(if plan.two_level_barrier { BarrierPath::TwoLevel } else { BarrierPath::Dissemination })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{contiguous, plan, shape};
    use super::*;

    #[test]
    fn a_communicator_across_nodes_takes_the_two_level_barrier() {
        let call = shape(0, contiguous(0, 0), false);
        assert_eq!(select(&call, &plan()), Choice::Native(BarrierPath::Dissemination));
        assert_eq!(select(&call, &Plan { two_level_barrier: true, ..plan() }), Choice::Native(BarrierPath::TwoLevel));
    }
}
