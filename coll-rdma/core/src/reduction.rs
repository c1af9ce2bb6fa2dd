//! What the reduction collectives need to know about an MPI operation on a
//! datatype. The glue implements it over Open MPI's op machinery; tests
//! implement it in pure Rust.

/// An MPI reduction on contiguous elements. Implemented by the glue over
/// Open MPI's op machinery, and by tests in pure Rust.
pub trait Reduction {
    /// Bytes per element (a multiple of this is always passed).
    fn element_size(&self) -> usize;
    fn is_commutative(&self) -> bool;
    /// higher[i] = lower[i] ∘ higher[i] for every element: `lower` holds the
    /// contribution of the lower-ranked ranks (this matches Open MPI's
    /// ompi_op_reduce(op, source, target): target = source op target).
    fn combine(&self, lower: &[u8], higher: &mut [u8]);
}

/// A run that owns its operation (`AllreduceRun`, `ReduceRun`) can also be
/// lent one, as the blocking calls and the tests do.
impl<R: Reduction + ?Sized> Reduction for &R {
    fn element_size(&self) -> usize {
        (**self).element_size()
    }

    fn is_commutative(&self) -> bool {
        (**self).is_commutative()
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        (**self).combine(lower, higher)
    }
}
