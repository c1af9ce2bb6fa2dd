//! Models and choices behind coll rdma's automatic parameters. Pure
//! arithmetic, no MPI: every choice can be explained in one sentence and
//! checked in a unit test.

pub mod allreduce;
pub mod bench_log;
pub mod bcast;
pub mod bcast_limit;
pub mod dissemination;
pub mod tree;

pub use allreduce::{
    choose_allreduce_degree, choose_allreduce_plan, choose_degree_for_range, choose_exchange_max_bytes,
    choose_oversubscribed_reduce_degree, AllreduceModel, AllreducePlan, DegreeChoice, ExchangeChoice, RangeDegreeChoice, EXCHANGE_LIMIT_BYTES, MAX_ALLREDUCE_DEGREE, RANGE_TOP_BYTES,
    OVERSUBSCRIBED_STEP_LATENCY_NS,
};
pub use bcast::{choose_co_roots, CoRootChoice, CoRootModel};
pub use bcast_limit::{choose_bcast_max_bytes, BcastLimitChoice, BcastStreamModel, WindowedBcast, SMALLEST_DEFAULT_LIMIT};
pub use dissemination::{choose_barrier_radix, round_distances, round_fanouts, BarrierModel, RadixChoice, MAX_BARRIER_RADIX};
pub use tree::{Link, TreeLinks};
