#include "ompi_config.h"
#include "mpi.h"
#include "opal/class/opal_object.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/errhandler/errhandler.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
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

int coll_rdma_shim_obj_drop_reference(struct opal_object_t *obj)
{
    return opal_obj_update(obj, -1);
}

void coll_rdma_shim_obj_revive(struct opal_object_t *obj)
{
    obj->obj_reference_count = 1;
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

/* Only used to label log lines. Open MPI 5 replaced the context id with a
 * 128-bit extended id and a per-process index; the index labels just as well. */
uint32_t coll_rdma_shim_comm_cid(struct ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    return ompi_comm_get_local_cid(comm);
#else
    return ompi_comm_get_cid(comm);
#endif
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

void coll_rdma_shim_op_reduce(struct ompi_op_t *op, const void *source, void *target,
                              size_t count, struct ompi_datatype_t *dtype)
{
    /* ompi_op_reduce only reads `source`; its prototype lacks the const. */
    ompi_op_reduce(op, (void *) source, target, count, dtype);
}

int coll_rdma_shim_op_is_commute(struct ompi_op_t *op)
{
    return ompi_op_is_commute(op) ? 1 : 0;
}

int coll_rdma_shim_op_and_dtype_are_predefined(struct ompi_op_t *op, struct ompi_datatype_t *dtype)
{
    /* Neither can be freed (MPI forbids it), so a call need not retain
     * them; Open MPI's own retain (ompi_coll_base_retain_op) skips them. */
    return ompi_op_is_intrinsic(op) && ompi_datatype_is_predefined(dtype) ? 1 : 0;
}

int coll_rdma_shim_has_agreement_shape(const void *send, int count,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    /* Open MPI's context-id agreement (comm_cid.c: the new id's MPI_MAX,
     * the check's and the activation's MPI_MIN) passes two buffers, never
     * MPI_IN_PLACE; MPIX_Comm_iagree without coll ftagree (coll base's
     * agreement without fault tolerance) is MPI_BAND in place. */
    if (1 != count || MPI_INT != dtype) return 0;
    if (MPI_IN_PLACE == send) return MPI_BAND == op ? 1 : 0;
    return MPI_MAX == op || MPI_MIN == op ? 1 : 0;
}

int coll_rdma_shim_dtype_facts(struct ompi_datatype_t *dtype, size_t count,
                               struct coll_rdma_shim_dtype_facts *facts)
{
    int rc = ompi_datatype_type_size(dtype, &facts->type_size);
    if (OMPI_SUCCESS == rc) {
        rc = ompi_datatype_get_extent(dtype, &facts->lb, &facts->extent);
    }
    if (OMPI_SUCCESS == rc) {
        rc = ompi_datatype_get_true_extent(dtype, &facts->true_lb, &facts->true_extent);
    }
    facts->contiguous = ompi_datatype_is_contiguous_memory_layout(dtype, count) ? 1 : 0;
    return rc;
}

void coll_rdma_shim_request_init(struct ompi_request_t *request, struct ompi_communicator_t *comm, int persistent)
{
    OMPI_REQUEST_INIT(request, persistent != 0);
    request->req_type = OMPI_REQUEST_COLL;
    request->req_mpi_object.comm = comm;
}

void coll_rdma_shim_request_activate(struct ompi_request_t *request)
{
    request->req_status.MPI_ERROR = MPI_SUCCESS;
    request->req_status._cancelled = 0;
    request->req_complete = REQUEST_PENDING;
    request->req_state = OMPI_REQUEST_ACTIVE;
}

void coll_rdma_shim_request_complete(struct ompi_request_t *request, int error)
{
    request->req_status.MPI_ERROR = error;
    ompi_request_complete(request, true);
}

coll_rdma_shim_wait_fn coll_rdma_shim_request_wait_fn(void)
{
    return __atomic_load_n(&ompi_request_functions.req_wait, __ATOMIC_ACQUIRE);
}

int coll_rdma_shim_request_wait_replace(coll_rdma_shim_wait_fn expected, coll_rdma_shim_wait_fn replacement)
{
    ompi_request_wait_fn_t current = expected;
    return __atomic_compare_exchange_n(&ompi_request_functions.req_wait, &current, replacement, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 1 : 0;
}

int coll_rdma_shim_request_is_complete(struct ompi_request_t *request)
{
    return REQUEST_COMPLETE(request) ? 1 : 0;
}

int coll_rdma_shim_request_is_active(struct ompi_request_t *request)
{
    return request->req_state == OMPI_REQUEST_ACTIVE ? 1 : 0;
}

int coll_rdma_shim_comm_raise(struct ompi_communicator_t *comm, int err_class, const char *function)
{
    return OMPI_ERRHANDLER_INVOKE(comm, err_class, function);
}

void coll_rdma_shim_request_fini(struct ompi_request_t *request)
{
    OMPI_REQUEST_FINI(request);
}

void coll_rdma_shim_request_set_null(struct ompi_request_t **request)
{
    *request = MPI_REQUEST_NULL;
}

struct ompi_request_t *coll_rdma_shim_request_empty(void)
{
    return &ompi_request_empty;
}

int coll_rdma_shim_request_test(struct ompi_request_t **request)
{
    int completed = 0;
    int rc = ompi_request_test(request, &completed, MPI_STATUS_IGNORE);
    if (OMPI_SUCCESS != rc) {
        return rc < 0 ? rc : -rc;
    }
    return completed ? 1 : 0;
}

int coll_rdma_shim_request_free(struct ompi_request_t **request)
{
    return ompi_request_free(request);
}
