/* The predefined MPI handles are macros in mpi.h (addresses of internal
 * objects in Open MPI), which bindgen cannot translate: these functions hand
 * them to Rust. Public API only. */
#include <mpi.h>

MPI_Comm coll_rdma_fbcast_comm_world(void) { return MPI_COMM_WORLD; }
MPI_Datatype coll_rdma_fbcast_type_byte(void) { return MPI_BYTE; }
MPI_Datatype coll_rdma_fbcast_type_int(void) { return MPI_INT; }
MPI_Op coll_rdma_fbcast_op_max(void) { return MPI_MAX; }
MPI_Errhandler coll_rdma_fbcast_errors_return(void) { return MPI_ERRORS_RETURN; }
