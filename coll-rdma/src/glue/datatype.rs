//! What the reduction entry points need to know about an MPI datatype used
//! `count` times, and the Open MPI op machinery as a `Reduction`.

use std::ffi::c_int;

use ompi_sys as sys;

use crate::reduction::Reduction;

/// A buffer of `count` elements that occupies one gap-free byte range.
#[derive(Clone, Copy, Debug)]
pub struct ContiguousSpan {
    /// Offset of the first data byte from the buffer address (the true lower bound).
    pub start: isize,
    /// Data bytes: count × type size.
    pub bytes: usize,
    /// Bytes per element as the op sees them.
    pub element_bytes: usize,
}

pub use crate::select::NotContiguous;

/// The span of `count` elements of `dtype`, if it is contiguous.
///
/// MPI requires the same datatype and count on every rank of a reduction,
/// so every rank reaches the same verdict and takes the same path.
pub fn contiguous_span(dtype: *mut sys::ompi_datatype_t, count: usize) -> Result<ContiguousSpan, NotContiguous> {
    let mut facts = sys::coll_rdma_shim_dtype_facts::default();
    // SAFETY: `dtype` is the caller's valid datatype handle; `facts` is a
    // plain struct the shim fills.
    let rc = unsafe { sys::coll_rdma_shim_dtype_facts(dtype, count, &mut facts) };
    if rc != sys::OMPI_SUCCESS as c_int {
        return Err(NotContiguous::Query(rc));
    }
    // A contiguous element with padding (size < extent) still leaves gaps
    // between consecutive elements.
    if facts.contiguous == 0 || facts.type_size as isize != facts.extent {
        return Err(NotContiguous::Gaps);
    }
    Ok(ContiguousSpan { start: facts.true_lb, bytes: facts.type_size * count, element_bytes: facts.type_size })
}

/// Data bytes in `count` elements of `dtype` (its type signature's size):
/// the same on every rank of a collective, whatever datatype each uses.
pub fn signature_bytes(dtype: *mut sys::ompi_datatype_t, count: usize) -> Result<usize, NotContiguous> {
    let mut facts = sys::coll_rdma_shim_dtype_facts::default();
    // SAFETY: as in `contiguous_span`.
    let rc = unsafe { sys::coll_rdma_shim_dtype_facts(dtype, count, &mut facts) };
    if rc != sys::OMPI_SUCCESS as c_int {
        return Err(NotContiguous::Query(rc));
    }
    Ok(facts.type_size * count)
}

/// An MPI op on a datatype, applied by Open MPI's own machinery (which
/// also runs user-defined functions).
pub struct OmpiReduction {
    op: *mut sys::ompi_op_t,
    dtype: *mut sys::ompi_datatype_t,
    element_bytes: usize,
    commutative: bool,
}

impl OmpiReduction {
    pub fn new(op: *mut sys::ompi_op_t, dtype: *mut sys::ompi_datatype_t, element_bytes: usize) -> Self {
        OmpiReduction { op, dtype, element_bytes, commutative: op_is_commutative(op) }
    }
}

/// Whether `op` is commutative: every predefined op is; a user op is what
/// MPI_Op_create's `commute` said.
pub fn op_is_commutative(op: *mut sys::ompi_op_t) -> bool {
    // SAFETY: a valid op handle from the MPI call; the shim only reads its flags.
    unsafe { sys::coll_rdma_shim_op_is_commute(op) != 0 }
}

impl Reduction for OmpiReduction {
    fn element_size(&self) -> usize {
        self.element_bytes
    }

    fn is_commutative(&self) -> bool {
        self.commutative
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        assert_eq!(lower.len(), higher.len(), "reduction operands differ in length");
        assert_eq!(higher.len() % self.element_bytes, 0, "reduction operand is not whole elements");
        let count = higher.len() / self.element_bytes;
        // SAFETY: both slices hold `count` whole elements of `dtype`
        // (checked above); the op only reads `lower` and writes `higher`.
        unsafe {
            sys::coll_rdma_shim_op_reduce(self.op, lower.as_ptr().cast(), higher.as_mut_ptr().cast(), count, self.dtype)
        };
    }
}
