/*
 * coll_mix: barriers interleaved with other collectives and point-to-point
 * traffic, on MPI_COMM_WORLD, the even/odd halves and a communicator with the
 * ranks reversed. Every result is checked, and every barrier is checked with
 * the counters of common.h.
 *
 * Per iteration and communicator: barrier, bcast (root and length vary),
 * allreduce (sum, max, in place), barrier, allgather, alltoall, reduce (root
 * varies), a non-blocking allreduce left pending across a barrier, a ring of
 * non-blocking sends/receives left pending across a barrier.
 *
 * Options: -i <iterations> (default 300).
 */
#include "common.h"


static void one_round(tcomm_t *t, long it)
{
    if (t->comm == MPI_COMM_NULL) return;
    MPI_Comm comm = t->comm;
    int n = t->size, me = t->rank;
    static const int lens[] = {1, 17, 1000, 4096};
    int len = lens[it % 4];
    int root = (int)(it % n);

    t_barrier(t);

    /* bcast */
    int *buf = malloc(sizeof(int) * (size_t)len);
    for (int j = 0; j < len; j++) buf[j] = me == root ? (int)(it * 31 + j) : -1;
    T_MPI(MPI_Bcast(buf, len, MPI_INT, root, comm));
    for (int j = 0; j < len; j++)
        if (buf[j] != (int)(it * 31 + j)) {
            T_FAIL("bcast comm %d it %ld root %d: element %d is %d, expected %d", t->cid, it,
                   root, j, buf[j], (int)(it * 31 + j));
            break;
        }
    free(buf);

    /* allreduce: sum, max, in place */
    long v[3] = {me + it, me * 2, 1}, s[3];
    T_MPI(MPI_Allreduce(v, s, 3, MPI_LONG, MPI_SUM, comm));
    long n_ = n;
    T_CHECK(s[0] == n_ * (n_ - 1) / 2 + n_ * it && s[1] == n_ * (n_ - 1) && s[2] == n_,
            "allreduce sum comm %d it %ld: %ld %ld %ld", t->cid, it, s[0], s[1], s[2]);
    int mx = me * 7 + (int)(it % 5);
    int mres;
    T_MPI(MPI_Allreduce(&mx, &mres, 1, MPI_INT, MPI_MAX, comm));
    T_CHECK(mres == (n - 1) * 7 + (int)(it % 5), "allreduce max comm %d it %ld: %d", t->cid,
            it, mres);
    double d = 0.5 * me;
    T_MPI(MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_SUM, comm));
    T_CHECK(d == 0.25 * n * (n - 1), "allreduce in place comm %d it %ld: %g", t->cid, it, d);

    t_barrier(t);

    /* allgather */
    int mine = me * 1000 + (int)(it % 1000);
    int *all = malloc(sizeof(int) * (size_t)n);
    T_MPI(MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm));
    for (int j = 0; j < n; j++)
        if (all[j] != j * 1000 + (int)(it % 1000)) {
            T_FAIL("allgather comm %d it %ld: slot %d is %d", t->cid, it, j, all[j]);
            break;
        }

    /* alltoall */
    int *snd = malloc(sizeof(int) * (size_t)n), *rcv = malloc(sizeof(int) * (size_t)n);
    for (int j = 0; j < n; j++) snd[j] = me * 10000 + j * 10 + (int)(it % 10);
    T_MPI(MPI_Alltoall(snd, 1, MPI_INT, rcv, 1, MPI_INT, comm));
    for (int j = 0; j < n; j++)
        if (rcv[j] != j * 10000 + me * 10 + (int)(it % 10)) {
            T_FAIL("alltoall comm %d it %ld: from %d got %d", t->cid, it, j, rcv[j]);
            break;
        }
    free(snd);
    free(rcv);

    /* reduce */
    double x = (double)(me + 1), y = -1.0;
    T_MPI(MPI_Reduce(&x, &y, 1, MPI_DOUBLE, MPI_PROD, root, comm));
    if (me == root) {
        double f = 1.0;
        for (int j = 2; j <= n; j++) f *= j;
        T_CHECK(y == f, "reduce prod comm %d it %ld root %d: %g, expected %g", t->cid, it, root,
                y, f);
    }

    /* a non-blocking allreduce pending across a barrier */
    long nv = it + me, ns = -1;
    MPI_Request rq;
    T_MPI(MPI_Iallreduce(&nv, &ns, 1, MPI_LONG, MPI_SUM, comm, &rq));
    t_barrier(t);
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    T_CHECK(ns == n_ * it + n_ * (n_ - 1) / 2, "iallreduce comm %d it %ld: %ld", t->cid, it, ns);

    /* ring exchange pending across a barrier (larger messages now and then) */
    int cnt = (it % 10 == 0) ? 65536 : 8;
    int *out = malloc(sizeof(int) * (size_t)cnt), *in = malloc(sizeof(int) * (size_t)cnt);
    for (int j = 0; j < cnt; j++) out[j] = me * 3 + j;
    MPI_Request rr[2];
    T_MPI(MPI_Irecv(in, cnt, MPI_INT, (me + n - 1) % n, 5, comm, &rr[0]));
    T_MPI(MPI_Isend(out, cnt, MPI_INT, (me + 1) % n, 5, comm, &rr[1]));
    t_barrier(t);
    T_MPI(MPI_Waitall(2, rr, MPI_STATUSES_IGNORE));
    int from = (me + n - 1) % n;
    for (int j = 0; j < cnt; j++)
        if (in[j] != from * 3 + j) {
            T_FAIL("ring comm %d it %ld: element %d is %d", t->cid, it, j, in[j]);
            break;
        }
    free(out);
    free(in);
    free(all);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long iters = t_opt(argc, argv, "-i", 300);
    MPI_Comm c;
    tcomm_t half, rev;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_wrank % 2, t_wrank, &c));
    t_derive(&t_world, c, &half);
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -t_wrank, &c));
    t_derive(&t_world, c, &rev);

    double t0 = MPI_Wtime();
    for (long it = 0; it < iters; it++) {
        one_round(&t_world, it);
        one_round(&half, it);
        one_round(&rev, it);
    }
    if (t_wrank == 0)
        printf("info: %ld rounds on 3 communicators in %.3f s\n", iters, MPI_Wtime() - t0);

    t_free(&half);
    t_free(&rev);
    return t_finish("coll_mix");
}
