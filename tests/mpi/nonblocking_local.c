/*
 * nonblocking_local: a non-blocking collective's post and MPI_Start of a
 * persistent one are local calls (MPI 4.1, 6.12 and 7.13: they return
 * without waiting for the other processes), so a rank that posts and then
 * sends must reach its send before any other rank has posted. Here rank
 * r > 0 posts only once it has received rank r - 1's message, which rank
 * r - 1 sends right after its own post; the message is -m bytes (default
 * 1 MiB, above the shared-memory eager limit, so the send itself waits for
 * its receive). A post that waits for other ranks hangs (the runner's
 * timeout ends the job). Kinds, each -n rounds (default 10): MPI_Ibarrier;
 * MPI_Ibcast from root 0 and from the last rank; MPI_Iallreduce and
 * MPI_Ireduce (root the last rank) of int64 sums, of 1 element and of -c
 * elements (default 1024, 8 KiB: the tree's lengths, between the
 * exchange's and the parallel reduction's); and the persistent barrier, bcast,
 * allreduce and reduce (made before the rounds, as *_init is nonlocal)
 * started. Every result is compared with what each rank computes from the
 * formula every contribution follows; every message's bytes are checked.
 * Run with coll_rdma_autotune 1 too: the allreduce's degree trial runs
 * blocking barriers once per communicator, before its first tree-length
 * allreduce, so it must never be a post or a start that runs it.
 * With -F 1 each duplicate fails before its rounds, after *_init: a
 * blocking MPI_Bcast on it must return an error (run with
 * coll_rdma_test_panic_at=bcast:1), and every later call, the starts of
 * the persistent requests coll rdma made included, goes to the module
 * underneath and must stay local there too.
 */
#include "common.h"
#include <stdint.h>

enum { NL_IBARRIER, NL_IBCAST_FIRST, NL_IBCAST_LAST, NL_IALLREDUCE, NL_IREDUCE,
       NL_BARRIER_INIT, NL_BCAST_INIT, NL_ALLREDUCE_INIT, NL_REDUCE_INIT, NL_KINDS };
static const char *nl_names[NL_KINDS] = {"ibarrier", "ibcast root 0", "ibcast last root", "iallreduce", "ireduce",
                                         "barrier_init", "bcast_init", "allreduce_init", "reduce_init"};

static int64_t nl_value(int rank, long round, int kind, int i)
{
    return (int64_t)(t_mix(((uint64_t)round << 40) ^ ((uint64_t)kind << 32) ^ ((uint64_t)rank << 20) ^ (uint64_t)i) >> 8);
}

static unsigned char nl_byte(int from, long round, long at)
{
    return (unsigned char)(t_mix(((uint64_t)round << 40) ^ ((uint64_t)from << 32) ^ (uint64_t)at) & 0xff);
}

typedef struct {
    MPI_Comm comm;
    int rank, size, count;
    int64_t *send, *recv;
    MPI_Request persistent[NL_KINDS];
} nl_state_t;

/* Fills this rank's contribution for KIND and clears the result. */
static void nl_fill(nl_state_t *s, int kind, long round)
{
    for (int i = 0; i < s->count; i++) {
        s->send[i] = nl_value(s->rank, round, kind, i);
        s->recv[i] = -1;
    }
}

static MPI_Request nl_post(nl_state_t *s, int kind)
{
    MPI_Request rq = MPI_REQUEST_NULL;
    int last = s->size - 1;
    switch (kind) {
    case NL_IBARRIER: T_MPI(MPI_Ibarrier(s->comm, &rq)); break;
    case NL_IBCAST_FIRST: T_MPI(MPI_Ibcast(s->rank == 0 ? s->send : s->recv, s->count, MPI_INT64_T, 0, s->comm, &rq)); break;
    case NL_IBCAST_LAST: T_MPI(MPI_Ibcast(s->rank == last ? s->send : s->recv, s->count, MPI_INT64_T, last, s->comm, &rq)); break;
    case NL_IALLREDUCE: T_MPI(MPI_Iallreduce(s->send, s->recv, s->count, MPI_INT64_T, MPI_SUM, s->comm, &rq)); break;
    case NL_IREDUCE: T_MPI(MPI_Ireduce(s->send, s->recv, s->count, MPI_INT64_T, MPI_SUM, last, s->comm, &rq)); break;
    default:
        rq = s->persistent[kind];
        T_MPI(MPI_Start(&rq));
    }
    return rq;
}

/* Which rank's contribution a bcast carries, or -1 for a sum, -2 for none. */
static int nl_source(nl_state_t *s, int kind)
{
    switch (kind) {
    case NL_IBCAST_FIRST: case NL_BCAST_INIT: return 0;
    case NL_IBCAST_LAST: return s->size - 1;
    case NL_IALLREDUCE: case NL_ALLREDUCE_INIT: return -1;
    case NL_IREDUCE: case NL_REDUCE_INIT: return s->rank == s->size - 1 ? -1 : -2;
    default: return -2;
    }
}

static void nl_check(nl_state_t *s, int kind, long round)
{
    int source = nl_source(s, kind);
    if (source == -2) return;
    /* a bcast's root keeps its buffer: only the others' results count */
    if (source >= 0 && source == s->rank) return;
    for (int i = 0; i < s->count; i++) {
        int64_t want = 0;
        if (source >= 0) want = nl_value(source, round, kind, i);
        else
            for (int r = 0; r < s->size; r++) want += nl_value(r, round, kind, i);
        if (s->recv[i] != want) {
            T_FAIL("%s of %d element(s), round %ld: element %d is %lld, want %lld", nl_names[kind], s->count, round, i,
                   (long long)s->recv[i], (long long)want);
            return;
        }
    }
}

/* The chain: receive from the rank before, post, send to the rank after. */
static void nl_round(nl_state_t *s, int kind, long round, unsigned char *msg, long msg_bytes)
{
    const int tag = 4242;
    nl_fill(s, kind, round);
    if (s->rank > 0) {
        T_MPI(MPI_Recv(msg, (int)msg_bytes, MPI_BYTE, s->rank - 1, tag, s->comm, MPI_STATUS_IGNORE));
        for (long at = 0; at < msg_bytes; at += 4093) {
            if (msg[at] != nl_byte(s->rank - 1, round, at)) {
                T_FAIL("%s round %ld: byte %ld of rank %d's message is wrong", nl_names[kind], round, at, s->rank - 1);
                break;
            }
        }
    }
    MPI_Request rq = nl_post(s, kind);
    if (s->rank < s->size - 1) {
        for (long at = 0; at < msg_bytes; at++) msg[at] = nl_byte(s->rank, round, at);
        T_MPI(MPI_Send(msg, (int)msg_bytes, MPI_BYTE, s->rank + 1, tag, s->comm));
    }
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    nl_check(s, kind, round);
}

static void nl_make_persistent(nl_state_t *s)
{
    int last = s->size - 1;
    T_MPI(T_BARRIER_INIT(s->comm, MPI_INFO_NULL, &s->persistent[NL_BARRIER_INIT]));
    T_MPI(T_BCAST_INIT(s->rank == 0 ? s->send : s->recv, s->count, MPI_INT64_T, 0, s->comm, MPI_INFO_NULL,
                       &s->persistent[NL_BCAST_INIT]));
    T_MPI(T_ALLREDUCE_INIT(s->send, s->recv, s->count, MPI_INT64_T, MPI_SUM, s->comm, MPI_INFO_NULL,
                           &s->persistent[NL_ALLREDUCE_INIT]));
    T_MPI(T_REDUCE_INIT(s->send, s->recv, s->count, MPI_INT64_T, MPI_SUM, last, s->comm, MPI_INFO_NULL,
                        &s->persistent[NL_REDUCE_INIT]));
}

static void nl_free_persistent(nl_state_t *s)
{
    for (int kind = NL_BARRIER_INIT; kind < NL_KINDS; kind++) T_MPI(MPI_Request_free(&s->persistent[kind]));
}

/* Every kind, -n rounds, on a fresh set-up duplicate of MPI_COMM_WORLD
 * whose first tree-length allreduce is this length's. */
static void nl_count(int count, long rounds, unsigned char *msg, long msg_bytes, int fail)
{
    nl_state_t s = {.count = count};
    tcomm_t dup;
    T_MPI(MPI_Comm_dup(t_world.comm, &s.comm));
    t_derive(&t_world, s.comm, &dup);
    MPI_Comm_rank(s.comm, &s.rank);
    MPI_Comm_size(s.comm, &s.size);
    s.send = calloc((size_t)count, sizeof(int64_t));
    s.recv = calloc((size_t)count, sizeof(int64_t));
    t_barrier(&dup); /* sets the communicator up */
    nl_make_persistent(&s);
    if (fail) {
        MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
        int64_t word = s.rank;
        int rc = MPI_Bcast(&word, 1, MPI_INT64_T, 0, s.comm);
        T_CHECK(rc != MPI_SUCCESS, "-F 1: the MPI_Bcast meant to fail succeeded (run with coll_rdma_test_panic_at=bcast:1)");
        MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_ARE_FATAL);
    }
    for (long round = 0; round < rounds; round++)
        for (int kind = 0; kind < NL_KINDS; kind++) nl_round(&s, kind, round, msg, msg_bytes);
    nl_free_persistent(&s);
    free(s.send);
    free(s.recv);
    t_free(&dup);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-n", 10);
    int count = (int)t_opt(argc, argv, "-c", 1024);
    long msg_bytes = t_opt(argc, argv, "-m", 1 << 20);
    int fail = (int)t_opt(argc, argv, "-F", 0);
    unsigned char *msg = malloc((size_t)msg_bytes);
    nl_count(count, rounds, msg, msg_bytes, fail);
    nl_count(1, rounds, msg, msg_bytes, fail);
    free(msg);
    return t_finish("nonblocking_local");
}
