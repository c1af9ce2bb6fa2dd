#include "ompi_config.h"
#include "mpi.h"
#include "opal/class/opal_object.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "shim.h"

struct opal_object_t *coll_rdma_shim_obj_new(struct opal_class_t *cls)
{
    return opal_obj_new(cls);
}

void coll_rdma_shim_obj_retain(struct opal_object_t *obj)
{
    OBJ_RETAIN(obj);
}

void coll_rdma_shim_obj_release(struct opal_object_t *obj)
{
    OBJ_RELEASE(obj);
}

int coll_rdma_shim_comm_rank(struct ompi_communicator_t *comm)
{
    return ompi_comm_rank(comm);
}

int coll_rdma_shim_comm_size(struct ompi_communicator_t *comm)
{
    return ompi_comm_size(comm);
}

int coll_rdma_shim_comm_is_inter(struct ompi_communicator_t *comm)
{
    return OMPI_COMM_IS_INTER(comm) ? 1 : 0;
}

uint32_t coll_rdma_shim_comm_cid(struct ompi_communicator_t *comm)
{
    return ompi_comm_get_cid(comm);
}

const char *coll_rdma_shim_comm_name(struct ompi_communicator_t *comm)
{
    return comm->c_name;
}

void coll_rdma_shim_output(int stream, const char *line)
{
    opal_output(stream, "%s", line);
}

void *coll_rdma_shim_mpi_byte(void)
{
    return (void *) MPI_BYTE;
}
