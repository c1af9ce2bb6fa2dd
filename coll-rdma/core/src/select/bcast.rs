//! MPI_Bcast's path: nothing to do, single copy from the root's buffer,
//! the window (multicast, put tree or their two-level stages), or the
//! module underneath. MPI lets ranks describe the same bytes with
//! different datatypes, so the only facts every rank shares are the
//! message's length (its signature's size) and root: every choice rests on
//! those. A rank whose datatype is not contiguous packs (root) or unpacks
//! (receiver) around the native path. Above 2^31 - 1 bytes, which MPI_Pack
//! cannot count, the ranks first agree whether any of them would pack.

use std::ffi::c_int;

use super::{count_of, CallShape, Choice, DataShape, Handover, Plan};

/// A native bcast: the route, and what this rank does around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BcastPath {
    Empty,
    Send {
        /// The message's length (its signature's size, the same everywhere).
        bytes: usize,
        route: BcastRoute,
        /// This rank's datatype is not contiguous: it goes through a packed copy.
        packs: bool,
        /// More than MPI_Pack counts: the ranks first agree (through the
        /// communicator's allreduce) whether any of them would pack, and
        /// hand over if one would (`Handover::AbovePackLimit`).
        agree_on_packing: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BcastRoute {
    /// Receivers read the root's buffer.
    SingleCopy,
    /// Copied into and out of the window.
    Window,
}

/// Why a bcast above MPI_Pack's counts is handed over where the allreduce
/// the ranks would agree through is not served natively.
pub const AGREEMENT_RUNS_FLAT: &str =
    "a bcast of more than 2^31 - 1 bytes needs the ranks to agree through the allreduce, which runs flat on this communicator";

pub fn select(shape: &CallShape, plan: &Plan) -> Choice<BcastPath> {
    if let Err(why) = count_of(shape) {
        return Choice::HandOver(why);
    }
    let (bytes, packs) = match shape.data {
        DataShape::Contiguous { bytes, .. } => (bytes, false),
        DataShape::Packable { bytes, .. } => (bytes, true),
        DataShape::Unreadable(why) => return Choice::HandOver(Handover::Datatype(why)),
    };
    if bytes == 0 {
        return Choice::Native(BcastPath::Empty);
    }
    if let Some(Err(why)) = plan.leaders_only.as_ref().map(|leaders| leaders.bcast()) {
        return Choice::HandOver(why);
    }
    let route = match native_route(bytes, plan) {
        Ok(route) => route,
        Err(why) => return Choice::HandOver(why),
    };
    let agree_on_packing = above_pack_counts(bytes);
    if agree_on_packing && let Some(Err(_)) = plan.leaders_only.as_ref().map(|leaders| leaders.allreduce()) {
        return Choice::HandOver(Handover::OnlyLeadersConnected(AGREEMENT_RUNS_FLAT));
    }
    Choice::Native(BcastPath::Send { bytes, route, packs, agree_on_packing })
}

/// Each route has its own limit: the window's comes from the model for the
/// transport in use (or the user), single copy's from the user only.
fn native_route(bytes: usize, plan: &Plan) -> Result<BcastRoute, Handover> {
    let bcast = &plan.bcast;
    let single_copy = bcast.single_copy_from.is_some_and(|from| bytes >= from);
    let (route, limit, parameter) = if single_copy {
        (BcastRoute::SingleCopy, bcast.single_copy_max_bytes, "bcast_single_copy_max_bytes")
    } else {
        (BcastRoute::Window, bcast.window_max_bytes, "bcast_max_bytes")
    };
    if let Some(limit) = limit.filter(|&limit| bytes > limit) {
        return Err(Handover::AboveLimit { bytes, parameter, limit });
    }
    if route == BcastRoute::Window && bytes > bcast.window_serves_up_to {
        return Err(Handover::AboveWindow { bytes });
    }
    Ok(route)
}

/// Whether a rank with a datatype that is not contiguous could not pack or
/// unpack the message: MPI_Pack and MPI_Unpack count bytes in a C int.
fn above_pack_counts(bytes: usize) -> bool {
    bytes > c_int::MAX as usize
}

#[cfg(test)]
mod tests {
    use super::super::tests::{contiguous, plan, shape};
    use super::super::{FlatSchedules, LeadersOnly, NotContiguous};
    use super::*;
    use btl_ibmc::shm::NodeGroups;

    use BcastRoute::*;

    fn send(bytes: usize, route: BcastRoute, packs: bool, agree_on_packing: bool) -> Choice<BcastPath> {
        Choice::Native(BcastPath::Send { bytes, route, packs, agree_on_packing })
    }

    fn packable(bytes: usize) -> DataShape {
        DataShape::Packable { bytes, why: NotContiguous::Gaps }
    }

    // The test plan (see `select::tests::plan`): the window up to 64 KiB
    // by bcast_max_bytes and 1 MiB by its protocol, single copy from
    // 256 KiB, unlimited.
    #[test]
    fn each_row_takes_the_path_written_beside_it() {
        let over_pack = c_int::MAX as usize + 1;
        let rows: Vec<(&str, CallShape, Choice<BcastPath>)> = vec![
            ("no data", shape(0, contiguous(0, 1), false), Choice::Native(BcastPath::Empty)),
            ("an empty datatype", shape(5, contiguous(0, 0), false), Choice::Native(BcastPath::Empty)),
            ("short", shape(100, contiguous(100, 1), false), send(100, Window, false, false)),
            ("short, packed", shape(10, packable(100), false), send(100, Window, true, false)),
            ("the window's limit", shape(65536, contiguous(65536, 1), false), send(65536, Window, false, false)),
            (
                "above the window's limit",
                shape(65537, contiguous(65537, 1), false),
                Choice::HandOver(Handover::AboveLimit { bytes: 65537, parameter: "bcast_max_bytes", limit: 65536 }),
            ),
            ("single copy", shape(1 << 18, contiguous(1 << 18, 1), false), send(1 << 18, SingleCopy, false, false)),
            ("single copy, packed", shape(1, packable(1 << 18), false), send(1 << 18, SingleCopy, true, false)),
            ("single copy, past the window", shape(1 << 21, contiguous(1 << 21, 1), false), send(1 << 21, SingleCopy, false, false)),
            ("above MPI_Pack's counts", shape(1 << 30, contiguous(over_pack, 2), false), send(over_pack, SingleCopy, false, true)),
            ("negative count", shape(-7, contiguous(0, 1), false), Choice::HandOver(Handover::NegativeCount(-7))),
            (
                "unreadable",
                shape(1, DataShape::Unreadable(NotContiguous::Query(3)), false),
                Choice::HandOver(Handover::Datatype(NotContiguous::Query(3))),
            ),
        ];
        for (name, shape, expected) in rows {
            assert_eq!(select(&shape, &plan()), expected, "{name}");
        }
    }

    #[test]
    fn without_single_copy_the_window_and_its_protocol_bound_the_length() {
        let mut window_only = plan();
        window_only.bcast.single_copy_from = None;
        window_only.bcast.window_max_bytes = None;
        assert_eq!(select(&shape(1 << 20, contiguous(1 << 20, 1), false), &window_only), send(1 << 20, Window, false, false));
        assert_eq!(
            select(&shape((1 << 20) + 1, contiguous((1 << 20) + 1, 1), false), &window_only),
            Choice::HandOver(Handover::AboveWindow { bytes: (1 << 20) + 1 })
        );
        let mut bounded = plan();
        bounded.bcast.single_copy_max_bytes = Some(1 << 20);
        assert_eq!(
            select(&shape((1 << 20) + 1, contiguous((1 << 20) + 1, 1), false), &bounded),
            Choice::HandOver(Handover::AboveLimit { bytes: (1 << 20) + 1, parameter: "bcast_single_copy_max_bytes", limit: 1 << 20 })
        );
    }

    #[test]
    fn where_only_leaders_connect_a_flat_bcast_or_agreement_is_handed_over() {
        let mut leaders = plan();
        let nodes = NodeGroups::from_keys(&[0, 0, 1, 1]);
        leaders.leaders_only = Some(LeadersOnly { nodes, flat: FlatSchedules { allreduce: true, ..Default::default() } });
        let over_pack = c_int::MAX as usize + 1;
        assert_eq!(select(&shape(100, contiguous(100, 1), false), &leaders), send(100, Window, false, false));
        assert_eq!(
            select(&shape(1 << 30, contiguous(over_pack, 2), false), &leaders),
            Choice::HandOver(Handover::OnlyLeadersConnected(AGREEMENT_RUNS_FLAT))
        );
        leaders.leaders_only.as_mut().unwrap().flat.bcast = true;
        assert_eq!(
            select(&shape(100, contiguous(100, 1), false), &leaders),
            Choice::HandOver(Handover::OnlyLeadersConnected("bcast runs flat on this communicator"))
        );
    }
}
