/*
 * comm_lifecycle: barriers on communicators of every kind, created and freed
 * in many orders, with the barrier property checked on each (common.h).
 *
 *   - MPI_COMM_WORLD and MPI_COMM_SELF (size 1: must not be claimed)
 *   - MPI_Comm_split even/odd, interleaved with MPI_COMM_WORLD
 *   - MPI_Comm_split with color = rank (size-1 communicators)
 *   - MPI_Comm_split with MPI_UNDEFINED for some ranks
 *   - MPI_Comm_dup of a dup, the parent freed before the child is used
 *   - MPI_Comm_create from a group, MPI_Comm_idup
 *   - an intercommunicator between the halves (not claimed) and its merge
 *   - several live communicators used round robin, freed in shuffled order
 *   - a loop creating and freeing many communicators (dup, split, create in
 *     turn), each making a few barriers; the first collective on each new
 *     communicator is a barrier
 *
 * Options: -l <loop iterations> (default 1000), -b <barriers per loop
 * communicator> (default 3).
 */
#include "common.h"

static void barriers(tcomm_t *t, int n)
{
    for (int i = 0; i < n; i++) t_barrier(t);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long loops = t_opt(argc, argv, "-l", 1000);
    int per = (int)t_opt(argc, argv, "-b", 3);
    int P = t_wsize, r = t_wrank;
    MPI_Comm c;
    int tag = 100;

    /* MPI_COMM_WORLD and MPI_COMM_SELF */
    barriers(&t_world, 5);
    tcomm_t self;
    t_track_tagged(MPI_COMM_SELF, tag++, &self);
    barriers(&self, 3);

    /* even/odd, interleaved with the world */
    tcomm_t half;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &c));
    t_derive(&t_world, c, &half);
    T_CHECK(half.size == (P + 1 - r % 2) / 2, "half size %d", half.size);
    for (int i = 0; i < 10; i++) {
        t_barrier(&half);
        if (i % 3 == 0) t_barrier(&t_world);
    }

    /* size-1 communicators */
    tcomm_t single;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r, 0, &c));
    t_derive(&t_world, c, &single);
    T_CHECK(single.size == 1, "color=rank split gave size %d", single.size);
    barriers(&single, 5);
    t_free(&single);

    /* MPI_UNDEFINED for every third rank */
    tcomm_t some;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r % 3 == 2 ? MPI_UNDEFINED : 0, r, &some.comm));
    t_derive(&t_world, some.comm, &some);
    T_CHECK((r % 3 == 2) == (some.comm == MPI_COMM_NULL), "MPI_UNDEFINED split");
    barriers(&some, 7);
    t_barrier(&t_world);
    t_free(&some);

    /* dup of a dup; the parent goes first */
    tcomm_t d1, d2;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    t_derive(&t_world, c, &d1);
    T_MPI(MPI_Comm_dup(d1.comm, &c));
    t_derive(&d1, c, &d2);
    barriers(&d1, 2);
    t_free(&d1);
    barriers(&d2, 4);

    /* MPI_Comm_create over the first half of the world */
    tcomm_t created;
    {
        MPI_Group wg, g;
        int range[1][3] = {{0, (P - 1) / 2, 1}};
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_range_incl(wg, 1, range, &g);
        T_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        t_derive(&t_world, c, &created);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        T_CHECK((r <= (P - 1) / 2) == (c != MPI_COMM_NULL), "MPI_Comm_create membership");
        barriers(&created, 6);
    }

    /* MPI_Comm_idup, first collective a barrier */
    tcomm_t idup;
    {
        MPI_Request req;
        T_MPI(MPI_Comm_idup(d2.comm, &c, &req));
        T_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        t_derive(&d2, c, &idup);
        barriers(&idup, 3);
    }

    /* intercommunicator between the halves and its merge */
    if (P >= 2) {
        tcomm_t inter, merged;
        MPI_Comm ic, mc;
        int remote_leader = (r % 2 == 0) ? 1 : 0; /* world rank of the other half's rank 0 */
        T_MPI(MPI_Intercomm_create(half.comm, 0, MPI_COMM_WORLD, remote_leader, 77, &ic));
        t_track_tagged(ic, tag++, &inter);
        barriers(&inter, 4);
        T_MPI(MPI_Intercomm_merge(ic, r % 2, &mc));
        t_track_tagged(mc, tag++, &merged);
        T_CHECK(merged.size == P, "merged size %d", merged.size);
        barriers(&merged, 4);
        t_free(&inter);
        barriers(&merged, 2);
        t_free(&merged);
    }

    /* several live communicators, round robin, freed in a shuffled order */
    {
        enum { LIVE = 6 };
        tcomm_t live[LIVE];
        for (int i = 0; i < LIVE; i++) {
            if (i % 2 == 0)
                T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            else
                T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r % 3, -r, &c));
            t_derive(&t_world, c, &live[i]);
        }
        for (int round = 0; round < 4; round++)
            for (int i = 0; i < LIVE; i++) t_barrier(&live[(i + round) % LIVE]);
        int order[LIVE] = {3, 0, 5, 1, 4, 2};
        for (int i = 0; i < LIVE; i++) {
            t_free(&live[order[i]]);
            for (int j = i + 1; j < LIVE; j++) t_barrier(&live[order[j]]);
        }
    }

    /* many communicators, created and freed */
    double t0 = MPI_Wtime();
    for (long i = 0; i < loops; i++) {
        tcomm_t t;
        switch (i % 4) {
        case 0:
            T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            break;
        case 1:
            T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &c));
            break;
        case 2:
            T_MPI(MPI_Comm_split(MPI_COMM_WORLD, r < P / 2 ? 0 : 1, P - r, &c));
            break;
        default:
            T_MPI(MPI_Comm_dup(half.comm, &c));
            break;
        }
        tcomm_t *parent = (i % 4 == 3) ? &half : &t_world;
        t_derive(parent, c, &t);
        barriers(&t, per);
        if (i % 50 == 0) {
            /* other traffic on the new communicator between its barriers */
            long v = t.rank, sum = 0;
            T_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, t.comm));
            T_CHECK(sum == (long)t.size * (t.size - 1) / 2, "allreduce on loop comm: %ld", sum);
            t_barrier(&t);
        }
        t_free(&t);
        if (i % 100 == 99) t_barrier(&t_world);
    }
    double dt = MPI_Wtime() - t0;
    if (r == 0)
        printf("info: %ld communicators created and freed in %.3f s (%.1f us each)\n", loops,
               dt, loops ? dt / (double)loops * 1e6 : 0.0);

    barriers(&d2, 2);
    t_free(&idup);
    t_free(&created);
    t_free(&d2);
    t_free(&half);
    t_release(&self);
    barriers(&t_world, 3);
    return t_finish("comm_lifecycle");
}
