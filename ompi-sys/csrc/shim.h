/* Entry points for Open MPI macros and static inline functions, which
 * bindgen cannot turn into callable symbols. Each is a one-line forward. */
#ifndef COLL_RDMA_SHIM_H
#define COLL_RDMA_SHIM_H

#include <stddef.h>
#include <stdint.h>

struct opal_class_t;
struct opal_object_t;
struct ompi_communicator_t;

struct opal_object_t *coll_rdma_shim_obj_new(struct opal_class_t *cls);
void coll_rdma_shim_obj_retain(struct opal_object_t *obj);
void coll_rdma_shim_obj_release(struct opal_object_t *obj);

int coll_rdma_shim_comm_rank(struct ompi_communicator_t *comm);
int coll_rdma_shim_comm_size(struct ompi_communicator_t *comm);
int coll_rdma_shim_comm_is_inter(struct ompi_communicator_t *comm);
uint32_t coll_rdma_shim_comm_cid(struct ompi_communicator_t *comm);
const char *coll_rdma_shim_comm_name(struct ompi_communicator_t *comm);

/* Prints one preformatted line on an opal_output stream. */
void coll_rdma_shim_output(int stream, const char *line);

/* The MPI_Datatype handle of MPI_BYTE, for exchanges through saved collectives. */
void *coll_rdma_shim_mpi_byte(void);

#endif
