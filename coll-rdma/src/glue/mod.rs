//! Everything that touches Open MPI: the component and module structures
//! it loads, MCA parameters, output, and the per-communicator state that
//! connects a communicator to a transport and to the collectives.

mod agreement;
mod allreduce;
mod barrier;
mod bcast;
mod bypass;
mod comm_state;
mod component;
mod datatype;
mod ffi_guard;
mod handover;
mod link;
mod module;
mod output;
mod params;
mod progress;
mod reduce;
mod reduction_call;
mod saved;
mod version;

