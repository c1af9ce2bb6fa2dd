#include <mpi.h>
MPI_Comm coll_rdma_fbcast_comm_world(void);
MPI_Datatype coll_rdma_fbcast_type_byte(void);
MPI_Datatype coll_rdma_fbcast_type_int(void);
MPI_Op coll_rdma_fbcast_op_max(void);
MPI_Errhandler coll_rdma_fbcast_errors_return(void);
