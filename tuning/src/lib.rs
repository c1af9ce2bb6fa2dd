//! Models and choices behind coll rdma's automatic parameters. Pure
//! arithmetic, no MPI: every choice can be explained in one sentence and
//! checked in a unit test.

pub mod dissemination;

pub use dissemination::{choose_barrier_radix, round_fanouts, BarrierModel, RadixChoice, MAX_BARRIER_RADIX};
