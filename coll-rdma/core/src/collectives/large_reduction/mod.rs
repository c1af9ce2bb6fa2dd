//! The long-message reductions allreduce and reduce share: the parallel
//! reduction (`parallel`, each rank reducing a slice read from every
//! peer, with its `read_tree` gathering to one root; `parallel_run` and
//! `read_tree_run` their steps, resumable), the `ring` for
//! commutative ops where peers' memory cannot be read (`ring_run` its
//! steps, resumable), and the `buffers`
//! they take from their caller. Which one serves a call is
//! `crate::select`'s choice.

pub mod buffers;
pub mod parallel;
pub mod parallel_run;
pub mod read_tree;
pub mod read_tree_run;
pub mod ring;
pub mod ring_run;
