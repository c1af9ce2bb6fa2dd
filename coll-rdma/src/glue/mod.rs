//! Everything that touches Open MPI: the component and module structures
//! it loads, MCA parameters, output, and the per-communicator state that
//! connects a communicator to a transport and to the collectives. The
//! `mpi_<name>` files are the entry points Open MPI calls for MPI_<Name>;
//! the algorithms they run live in `crate::collectives`.

mod agreement;
mod bypass;
mod comm_state;
mod component;
mod components_underneath;
mod datatype;
mod deferred;
mod entry;
mod events;
mod ffi_guard;
mod handover;
mod hierarchy;
mod link;
mod misuse;
mod module;
mod mpi_allreduce;
mod mpi_barrier;
mod mpi_ibarrier;
mod mpi_ibcast;
mod mpi_ireduction;
mod mpi_bcast;
mod mpi_reduce;
mod nested;
mod nonblocking_post;
mod output;
mod own_wait;
mod params;
mod pmix_path;
mod process_facts;
mod progress;
mod reduction_call;
mod reduction_paths;
mod request;
mod request_for;
mod request_pool;
mod run_home;
mod saved;
mod saved_nonblocking;
mod spare_boxes;
mod started_underneath;
mod thread_level;
mod udp_interface;
mod version;
mod wrapped;

