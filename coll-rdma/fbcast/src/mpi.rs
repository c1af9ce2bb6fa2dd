//! The few public MPI calls the protocol needs, over a communicator handle
//! the caller owns. Every call returns `Err(MpiError)` when MPI reports an
//! error (only possible under MPI_ERRORS_RETURN; the default handler aborts).

mod ffi {
    #![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/mpi_bindings.rs"));
}

pub use ffi::MPI_Comm;
use std::ffi::c_void;
use std::os::raw::c_int;

/// An MPI call returned this error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiError(pub c_int);

fn check(rc: c_int) -> Result<(), MpiError> {
    if rc == ffi::MPI_SUCCESS as c_int { Ok(()) } else { Err(MpiError(rc)) }
}

/// A communicator handle borrowed from the caller, who keeps it valid for
/// as long as this value lives.
#[derive(Clone, Copy, Debug)]
pub struct Comm {
    raw: MPI_Comm,
}

impl Comm {
    /// # Safety
    /// `raw` must be a valid intracommunicator for the lifetime of the value.
    pub unsafe fn from_raw(raw: MPI_Comm) -> Comm {
        Comm { raw }
    }

    pub fn world() -> Comm {
        // SAFETY: returns a predefined handle; valid between MPI_Init and MPI_Finalize.
        Comm { raw: unsafe { ffi::coll_rdma_fbcast_comm_world() } }
    }

    pub fn raw(&self) -> MPI_Comm {
        self.raw
    }

    pub fn rank(&self) -> Result<i32, MpiError> {
        let mut rank: c_int = -1;
        // SAFETY: valid communicator (constructor contract), out-pointer to a live local.
        check(unsafe { ffi::MPI_Comm_rank(self.raw, &mut rank) })?;
        Ok(rank)
    }

    pub fn size(&self) -> Result<i32, MpiError> {
        let mut size: c_int = 0;
        // SAFETY: as in rank().
        check(unsafe { ffi::MPI_Comm_size(self.raw, &mut size) })?;
        Ok(size)
    }

    /// MPI errors on this communicator come back as return codes instead
    /// of ending the job (so that temporaries are removed on the way out).
    pub fn set_errors_return(&self) -> Result<(), MpiError> {
        // SAFETY: valid communicator; MPI_ERRORS_RETURN is a predefined handler.
        check(unsafe { ffi::MPI_Comm_set_errhandler(self.raw, ffi::coll_rdma_fbcast_errors_return()) })
    }

    pub fn barrier(&self) -> Result<(), MpiError> {
        // SAFETY: valid communicator (constructor contract).
        check(unsafe { ffi::MPI_Barrier(self.raw) })
    }

    /// MPI_Bcast of `buf` as bytes; every rank passes the same length.
    pub fn bcast_bytes(&self, buf: &mut [u8], root: i32) -> Result<(), MpiError> {
        let count = c_int::try_from(buf.len()).expect("bcast chunk above INT_MAX bytes");
        // SAFETY: buf is a live, exclusively borrowed byte slice of `count` bytes.
        check(unsafe {
            ffi::MPI_Bcast(buf.as_mut_ptr() as *mut c_void, count, ffi::coll_rdma_fbcast_type_byte(), root, self.raw)
        })
    }

    /// Element-wise maximum of `values` over all ranks, in place.
    pub fn allreduce_max(&self, values: &mut [i32]) -> Result<(), MpiError> {
        let send = values.to_vec();
        let count = c_int::try_from(values.len()).expect("short array");
        // SAFETY: send and values are distinct live buffers of `count` ints each.
        check(unsafe {
            ffi::MPI_Allreduce(
                send.as_ptr() as *const c_void,
                values.as_mut_ptr() as *mut c_void,
                count,
                ffi::coll_rdma_fbcast_type_int(),
                ffi::coll_rdma_fbcast_op_max(),
                self.raw,
            )
        })
    }

    /// Every rank's `mine` (all the same length), concatenated in rank order.
    pub fn allgather_bytes(&self, mine: &[u8]) -> Result<Vec<u8>, MpiError> {
        let size = self.size()? as usize;
        let mut all = vec![0u8; mine.len() * size];
        let count = c_int::try_from(mine.len()).expect("short record");
        // SAFETY: mine holds `count` bytes, all holds `count` bytes per rank.
        check(unsafe {
            ffi::MPI_Allgather(
                mine.as_ptr() as *const c_void,
                count,
                ffi::coll_rdma_fbcast_type_byte(),
                all.as_mut_ptr() as *mut c_void,
                count,
                ffi::coll_rdma_fbcast_type_byte(),
                self.raw,
            )
        })?;
        Ok(all)
    }

    /// Every rank's `mine` (all the same length) at `root`, in rank order;
    /// empty elsewhere.
    pub fn gather_bytes(&self, mine: &[u8], root: i32) -> Result<Vec<u8>, MpiError> {
        let at_root = self.rank()? == root;
        let size = self.size()? as usize;
        let mut all = if at_root { vec![0u8; mine.len() * size] } else { Vec::new() };
        let count = c_int::try_from(mine.len()).expect("short record");
        // SAFETY: mine holds `count` bytes; the receive buffer (read at the
        // root only) holds `count` bytes per rank there.
        check(unsafe {
            ffi::MPI_Gather(
                mine.as_ptr() as *const c_void,
                count,
                ffi::coll_rdma_fbcast_type_byte(),
                all.as_mut_ptr() as *mut c_void,
                count,
                ffi::coll_rdma_fbcast_type_byte(),
                root,
                self.raw,
            )
        })?;
        Ok(all)
    }
}

/// MPI_Init unless already initialised; `true` when this call initialised it.
pub fn init() -> Result<bool, MpiError> {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time.
    check(unsafe { ffi::MPI_Initialized(&mut flag) })?;
    if flag != 0 {
        return Ok(false);
    }
    // SAFETY: MPI is not initialised yet; NULL argc/argv is allowed.
    check(unsafe { ffi::MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) })?;
    Ok(true)
}

pub fn finalize() -> Result<(), MpiError> {
    // SAFETY: called once, after init(), with no communication pending.
    check(unsafe { ffi::MPI_Finalize() })
}

/// Ends the whole job (after a failure that leaves ranks out of step).
pub fn abort(comm: &Comm, code: i32) -> ! {
    // SAFETY: valid communicator; MPI_Abort does not return.
    unsafe { ffi::MPI_Abort(comm.raw, code) };
    std::process::exit(code)
}
