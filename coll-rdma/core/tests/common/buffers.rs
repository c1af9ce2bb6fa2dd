//! Every rank's send and receive buffers for scripts of reductions (the
//! run fabric tests of the parallel reduction and the ring). Invariant:
//! one `Buffers` per call of each script, in script order; `recv` starts
//! as the input where the call is in place on the rank, as a marker where
//! the rank gathers the result, and empty where it receives nothing.

/// One call's buffers on one rank.
pub struct Buffers {
    pub send: Vec<u8>,
    pub recv: Vec<u8>,
}

/// What `rank_buffers` needs to know of a test's call.
pub trait ReductionCall {
    /// Bytes of one rank's contribution.
    fn len(&self) -> usize;
    fn in_place_at(&self, rank: usize) -> bool;
    /// Whether `rank` receives the result.
    fn gathers_at(&self, rank: usize) -> bool;
}

/// Rank `rank`'s buffers for every call of every script; `input(comm,
/// index, rank, call)` is the contribution.
pub fn rank_buffers<C: ReductionCall>(rank: usize, scripts: &[Vec<C>], input: impl Fn(usize, usize, usize, &C) -> Vec<u8>) -> Vec<Vec<Buffers>> {
    let buffers_of = |comm: usize, index: usize, call: &C| {
        let send = input(comm, index, rank, call);
        let recv = if call.in_place_at(rank) {
            send.clone()
        } else if call.gathers_at(rank) {
            vec![0xEE; call.len()]
        } else {
            Vec::new()
        };
        Buffers { send, recv }
    };
    scripts.iter().enumerate().map(|(comm, script)| script.iter().enumerate().map(|(index, call)| buffers_of(comm, index, call)).collect()).collect()
}
