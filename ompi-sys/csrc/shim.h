/* Entry points for Open MPI macros and static inline functions, which
 * bindgen cannot turn into callable symbols. Those in shim.c are one-line
 * forwards; the coll framework's list access is in coll_framework.c. */
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
/* Gives up one reference without destroying the object at zero: returns
 * the count left (0: nobody else holds it, the caller may reuse it). */
int coll_rdma_shim_obj_drop_reference(struct opal_object_t *obj);
/* Gives an object nobody holds (count 0, constructed) one reference again. */
void coll_rdma_shim_obj_revive(struct opal_object_t *obj);

int coll_rdma_shim_comm_rank(struct ompi_communicator_t *comm);
int coll_rdma_shim_comm_size(struct ompi_communicator_t *comm);
int coll_rdma_shim_comm_is_inter(struct ompi_communicator_t *comm);
uint32_t coll_rdma_shim_comm_cid(struct ompi_communicator_t *comm);
const char *coll_rdma_shim_comm_name(struct ompi_communicator_t *comm);

/* Prints one preformatted line on an opal_output stream. */
void coll_rdma_shim_output(int stream, const char *line);

/* The MPI_Datatype handle of MPI_BYTE, for exchanges through saved collectives. */
void *coll_rdma_shim_mpi_byte(void);

struct ompi_datatype_t;
struct ompi_op_t;

/* target[i] = source[i] op target[i] for `count` elements of `dtype`. */
void coll_rdma_shim_op_reduce(struct ompi_op_t *op, const void *source, void *target,
                              size_t count, struct ompi_datatype_t *dtype);
int coll_rdma_shim_op_is_commute(struct ompi_op_t *op);
/* 1 if `op` is intrinsic and `dtype` predefined: neither can be freed. */
int coll_rdma_shim_op_and_dtype_are_predefined(struct ompi_op_t *op, struct ompi_datatype_t *dtype);

/* 1 if an allreduce of these arguments has the shape of one of Open MPI's
 * own agreements: one MPI_INT, MPI_MAX or MPI_MIN not in place (a context
 * id), or MPI_BAND in place (MPIX_Comm_iagree without coll ftagree). */
int coll_rdma_shim_has_agreement_shape(const void *send, int count,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op);

/* Facts about a datatype used `count` times; returns 0 on success. */
struct coll_rdma_shim_dtype_facts {
    size_t type_size;       /* bytes of data in one element */
    ptrdiff_t lb, extent;
    ptrdiff_t true_lb, true_extent;
    int contiguous;         /* count elements occupy one gap-free byte range */
};
int coll_rdma_shim_dtype_facts(struct ompi_datatype_t *dtype, size_t count,
                               struct coll_rdma_shim_dtype_facts *facts);

/* Requests of non-blocking and persistent collectives: the fields and
 * macros of ompi/request/request.h, set the same way on every release. */
struct ompi_request_t;

/* A fresh request of the coll kind on `comm`; a persistent one starts
 * inactive and complete, as MPI_Wait expects of a request never started. */
void coll_rdma_shim_request_init(struct ompi_request_t *request, struct ompi_communicator_t *comm, int persistent);
/* Marks the request started: pending, active, no error yet. */
void coll_rdma_shim_request_activate(struct ompi_request_t *request);
/* Completes the request with `error` (MPI_SUCCESS or an MPI error class),
 * waking whoever waits on it. */
void coll_rdma_shim_request_complete(struct ompi_request_t *request, int error);
/* Takes the request out of the Fortran handle table before it goes away. */
void coll_rdma_shim_request_fini(struct ompi_request_t *request);
/* *request = MPI_REQUEST_NULL. */
void coll_rdma_shim_request_set_null(struct ompi_request_t **request);
/* Open MPI's completed request of no operation (ompi_request_empty): shared
 * by every caller, never written after initialisation; waiting for it,
 * testing it or freeing it sets the caller's handle to MPI_REQUEST_NULL. */
struct ompi_request_t *coll_rdma_shim_request_empty(void);
/* MPI_Wait's implementation: Open MPI's ompi_request_functions.req_wait,
 * one table for every kind of request, through which MPI_Wait calls. */
struct ompi_status_public_t;
typedef int (*coll_rdma_shim_wait_fn)(struct ompi_request_t **request, struct ompi_status_public_t *status);
coll_rdma_shim_wait_fn coll_rdma_shim_request_wait_fn(void);
/* Puts `replacement` into req_wait if `expected` is still there (atomically);
 * 1 if it did. */
int coll_rdma_shim_request_wait_replace(coll_rdma_shim_wait_fn expected, coll_rdma_shim_wait_fn replacement);
/* REQUEST_COMPLETE: 1 once the request completed, and for an inactive
 * persistent one. */
int coll_rdma_shim_request_is_complete(struct ompi_request_t *request);
/* Whether a persistent request was started and not yet completed by the
 * application's wait or test (which make it inactive again). */
int coll_rdma_shim_request_is_active(struct ompi_request_t *request);
/* Raises MPI error class err_class on comm as an MPI function named
 * function would: the communicator's error handler runs (aborting the job
 * under MPI_ERRORS_ARE_FATAL); returns the code to give the caller. */
int coll_rdma_shim_comm_raise(struct ompi_communicator_t *comm, int err_class, const char *function);
/* Whether a request of another module (the module underneath's
 * non-blocking collective) has completed; progresses once when it has not
 * (ompi_request_test). 1 completed, 0 not yet; a negative value is the
 * error Open MPI returned. */
int coll_rdma_shim_request_test(struct ompi_request_t **request);
/* Releases a completed request of another module (ompi_request_free). */
int coll_rdma_shim_request_free(struct ompi_request_t **request);

/* The coll framework's component list (coll_framework.c). Open MPI keeps in
 * it the components the `coll` MCA parameter let through; these let coll
 * rdma put the installed ones that parameter left out back underneath it. */
struct mca_base_component_2_1_0_t;

/* The value of the `coll` MCA parameter, or NULL when unset. */
const char *coll_rdma_shim_coll_selection(void);

/* Calls visit(context, name) for every coll component Open MPI could load:
 * the statically linked ones and those in the component path. */
void coll_rdma_shim_coll_each_installed(void (*visit)(void *context, const char *name), void *context);

/* Calls visit(context, name) for every component in the framework's list. */
void coll_rdma_shim_coll_each_listed(void (*visit)(void *context, const char *name), void *context);

/* Loads the installed coll component `name` (not yet in the list) and puts
 * it into the list just before `anchor`, which the framework's open loop is
 * visiting, so that loop does not reach it. NULL when it cannot be loaded. */
const struct mca_base_component_2_1_0_t *coll_rdma_shim_coll_load_before(const char *name,
                                                                   const struct mca_base_component_2_1_0_t *anchor);

/* Takes a component loaded by coll_rdma_shim_coll_load_before out of the
 * list again and unloads it; calls its close function first if `opened`. */
void coll_rdma_shim_coll_unload(const struct mca_base_component_2_1_0_t *component, int opened);

#endif
