/*
 * bcast_huge: MPI_Bcast of more than 2 GiB (more bytes than a C int counts).
 *
 * Phases (3 ranks or more; every receiver's every element is checked against
 * the value the root wrote, computed again from the element's index, and the
 * root's buffer must be unchanged):
 *   contiguous: 2^29 + 1024 MPI_INT from rank 1, then 2^19 + 1 elements of a
 *               4096-byte contiguous type from the last rank: contiguous
 *               buffers everywhere, which coll rdma serves at any length;
 *   mixed:      2^29 + 1024 MPI_INT from rank 0, with rank 1 receiving them
 *               as blocks of 1024 ints spaced 1025 ints apart (a datatype
 *               that is not contiguous): MPI_Pack cannot count that many
 *               bytes, so coll rdma must hand the call over, on every rank
 *               alike; the ints between rank 1's blocks must keep their
 *               value.
 *
 * Needs one buffer of about 2.2 GB per rank at a time.
 * Output: "result: rank R failures F barriers 0", "FAIL: ..." per problem.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_INTS 1024
#define STRIDE_INTS 1025
#define GAP_VALUE (-7)

static int me, n;
static long failures;

static int value_at(size_t index, int root)
{
    uint64_t x = (uint64_t)index * 0x9e3779b97f4a7c15ull ^ (uint64_t)(root + 1) * 0xbf58476d1ce4e5b9ull;
    return (int)(x >> 33);
}

static void fail(const char *what, size_t index, int got, int want)
{
    if (failures++ < 5)
        printf("FAIL: rank %d: %s: int %zu is %d, wants %d\n", me, what, index, got, want);
}

/* Every int of a contiguous buffer of `ints` ints from `root`. */
static void check_contiguous(const char *what, const int *buf, size_t ints, int root)
{
    for (size_t i = 0; i < ints; i++)
        if (buf[i] != value_at(i, root)) fail(what, i, buf[i], value_at(i, root));
}

static int *alloc_ints(size_t ints)
{
    int *buf = malloc(ints * sizeof(int));
    if (!buf) {
        printf("FAIL: rank %d: cannot allocate %zu bytes\n", me, ints * sizeof(int));
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return buf;
}

/* `ints` ints as `count` elements of `dtype` (contiguous), from `root`. */
static void contiguous_phase(const char *what, size_t ints, int count, MPI_Datatype dtype, int root)
{
    int *buf = alloc_ints(ints);
    for (size_t i = 0; i < ints; i++) buf[i] = me == root ? value_at(i, root) : GAP_VALUE;
    double t0 = MPI_Wtime();
    int rc = MPI_Bcast(buf, count, dtype, root, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) {
        printf("FAIL: rank %d: %s: MPI_Bcast returned %d\n", me, what, rc);
        failures++;
    }
    check_contiguous(what, buf, ints, root);
    if (me == root) printf("info: %s: %zu bytes from root %d in %.3f s\n", what, ints * sizeof(int), root, dt);
    free(buf);
}

static void mixed_phase(void)
{
    const size_t ints = ((size_t)1 << 29) + BLOCK_INTS;
    const int root = 0, blocks = (int)(ints / BLOCK_INTS);
    const char *what = "mixed";
    if (me == 1) {
        MPI_Datatype block, spaced;
        MPI_Type_contiguous(BLOCK_INTS, MPI_INT, &block);
        MPI_Type_create_resized(block, 0, (MPI_Aint)(STRIDE_INTS * sizeof(int)), &spaced);
        MPI_Type_commit(&spaced);
        size_t span = (size_t)blocks * STRIDE_INTS;
        int *buf = alloc_ints(span);
        for (size_t i = 0; i < span; i++) buf[i] = GAP_VALUE;
        int rc = MPI_Bcast(buf, blocks, spaced, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            printf("FAIL: rank %d: %s: MPI_Bcast returned %d\n", me, what, rc);
            failures++;
        }
        for (size_t b = 0; b < (size_t)blocks; b++) {
            for (size_t k = 0; k < BLOCK_INTS; k++) {
                size_t at = b * STRIDE_INTS + k, index = b * BLOCK_INTS + k;
                if (buf[at] != value_at(index, root)) fail(what, index, buf[at], value_at(index, root));
            }
            size_t gap = b * STRIDE_INTS + BLOCK_INTS;
            if (buf[gap] != GAP_VALUE) fail("mixed (gap between blocks)", gap, buf[gap], GAP_VALUE);
        }
        free(buf);
        MPI_Type_free(&block);
        MPI_Type_free(&spaced);
    } else {
        contiguous_phase(what, ints, (int)ints, MPI_INT, root);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 3) {
        if (me == 0) printf("FAIL: rank 0: bcast_huge needs 3 ranks or more\n");
        failures++;
    } else {
        contiguous_phase("contiguous ints", ((size_t)1 << 29) + BLOCK_INTS, (1 << 29) + BLOCK_INTS, MPI_INT, 1);
        MPI_Datatype page;
        MPI_Type_contiguous(4096, MPI_BYTE, &page);
        MPI_Type_commit(&page);
        contiguous_phase("contiguous pages", ((size_t)(1 << 19) + 1) * 1024, (1 << 19) + 1, page, n - 1);
        MPI_Type_free(&page);
        mixed_phase();
    }
    printf("result: rank %d failures %ld barriers 0\n", me, failures);
    long all = 0;
    MPI_Reduce(&failures, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) printf("bcast_huge: %s on %d rank(s), %ld failure(s) in total\n", all ? "FAILED" : "passed", n, all);
    MPI_Finalize();
    return all != 0;
}
