//! Models and choices behind coll rdma's automatic parameters. Pure
//! arithmetic, no MPI: every choice can be explained in one sentence and
//! checked in a unit test.

pub mod allreduce;
pub mod bcast;
pub mod bcast_limit;
pub mod dissemination;

pub use allreduce::{
    choose_allreduce_degree, choose_degree_for_range, choose_exchange_max_bytes, AllreduceModel, DegreeChoice,
    ExchangeChoice, RangeDegreeChoice, MAX_ALLREDUCE_DEGREE,
};
pub use bcast::{choose_co_roots, CoRootChoice, CoRootModel};
pub use bcast_limit::{choose_bcast_max_bytes, BcastLimitChoice, BcastStreamModel, WindowedBcast, SMALLEST_DEFAULT_LIMIT};
pub use dissemination::{choose_barrier_radix, round_fanouts, BarrierModel, RadixChoice, MAX_BARRIER_RADIX};
