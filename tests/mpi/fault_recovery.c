/*
 * fault_recovery: collectives with MPI_ERRORS_RETURN, every result checked,
 * for the runs that inject a fault into coll rdma (coll_rdma_test_panic_at,
 * coll_rdma_test_pack_failure_at). The calls the fault hits must return an
 * error on every rank (-e: how many per rank), all others must succeed with
 * the right result, and no call may hang.
 *
 * Per iteration: barrier, allreduce (sum), bcast of ints from a varying
 * root, bcast of a strided (non-contiguous) vector from rank 0 (so only
 * rank 0 packs), reduce to a varying root.
 *
 * Options: -i <iterations> (default 20), -e <expected failing calls> (0).
 * Output: "result: rank R failures F barriers B" (F counts wrong results and
 * a number of failing calls other than -e), "FAIL: ..." per problem.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int me, n, failures, errors;

#define FAIL(...) do { printf("FAIL: rank %d: ", me); printf(__VA_ARGS__); printf("\n"); failures++; } while (0)

/* Runs one call; an error is counted, not fatal. Returns whether it worked. */
static int call_ok(int rc, const char *what, int it)
{
    if (rc == MPI_SUCCESS) return 1;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    printf("info: rank %d: %s of iteration %d returned an error: %s\n", me, what, it, text);
    errors++;
    return 0;
}

int main(int argc, char **argv)
{
    int iterations = 20, expected_errors = 0, opt;
    while ((opt = getopt(argc, argv, "i:e:")) != -1) {
        if (opt == 'i') iterations = atoi(optarg);
        else if (opt == 'e') expected_errors = atoi(optarg);
        else { fprintf(stderr, "usage: %s [-i iterations] [-e expected errors]\n", argv[0]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    enum { LEN = 100, STRIDE = 3 };
    MPI_Datatype strided;
    MPI_Type_vector(LEN, 1, STRIDE, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    int barriers = 0;
    for (int it = 0; it < iterations; it++) {
        if (call_ok(MPI_Barrier(MPI_COMM_WORLD), "barrier", it)) barriers++;

        long mine = me + it, sum = -1;
        if (call_ok(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), "allreduce", it) &&
            sum != (long)n * (n - 1) / 2 + (long)n * it)
            FAIL("allreduce of iteration %d: %ld", it, sum);

        int root = it % n, ints[LEN];
        for (int j = 0; j < LEN; j++) ints[j] = me == root ? it * 1000 + j : -1;
        if (call_ok(MPI_Bcast(ints, LEN, MPI_INT, root, MPI_COMM_WORLD), "bcast", it))
            for (int j = 0; j < LEN; j++)
                if (ints[j] != it * 1000 + j) { FAIL("bcast of iteration %d: element %d is %d", it, j, ints[j]); break; }

        int spread[LEN * STRIDE];
        for (int j = 0; j < LEN * STRIDE; j++) spread[j] = me == 0 || j % STRIDE ? it * 7 + j : -1;
        if (call_ok(MPI_Bcast(spread, 1, strided, 0, MPI_COMM_WORLD), "strided bcast", it))
            for (int j = 0; j < LEN * STRIDE; j++)
                if (spread[j] != it * 7 + j) { FAIL("strided bcast of iteration %d: element %d is %d", it, j, spread[j]); break; }

        double x = me + 1.0, total = -1.0;
        if (call_ok(MPI_Reduce(&x, &total, 1, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD), "reduce", it) && me == root &&
            total != 0.5 * n * (n + 1))
            FAIL("reduce of iteration %d: %g", it, total);
    }
    if (errors != expected_errors)
        FAIL("%d call(s) returned an error, expected %d", errors, expected_errors);
    MPI_Type_free(&strided);
    printf("result: rank %d failures %d barriers %d\n", me, failures, barriers);
    MPI_Finalize();
    return failures ? 1 : 0;
}
