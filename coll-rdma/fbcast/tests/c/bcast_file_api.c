/* The C API of libcoll_rdma_fbcast under mpirun: return codes identical on
 * every rank, contents checked against a pattern each rank computes itself.
 * usage: bcast_file_api WORKDIR (a directory every rank sees; rank r writes
 * under WORKDIR/r<r>/). Prints PASS/FAIL lines on rank 0; exit status 1 if
 * any case failed. */
#include <coll_rdma_fbcast.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, size, failures;
static char workdir[2048];

static unsigned char pattern_byte(size_t i, unsigned seed) { return (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xff); }

static int write_pattern(const char *path, size_t len, unsigned seed) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (size_t i = 0; i < len; i++) fputc(pattern_byte(i, seed), f);
    return fclose(f);
}

/* 1 when path holds exactly len bytes of the pattern. */
static int holds_pattern(const char *path, size_t len, unsigned seed) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t i = 0;
    int c, ok = 1;
    while ((c = fgetc(f)) != EOF) {
        if (i >= len || c != pattern_byte(i, seed)) ok = 0;
        i++;
    }
    fclose(f);
    return ok && i == len;
}

/* Every rank's code must be `want`; rank 0 prints the verdict. */
static void expect_code(const char *name, int code, int want, int local_ok, const char *local_why) {
    int *codes = malloc(sizeof(int) * size), *oks = malloc(sizeof(int) * size);
    MPI_Allgather(&code, 1, MPI_INT, codes, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgather(&local_ok, 1, MPI_INT, oks, 1, MPI_INT, MPI_COMM_WORLD);
    if (rank == 0) {
        char why[512] = "";
        for (int r = 0; r < size; r++) {
            if (codes[r] != want)
                snprintf(why + strlen(why), sizeof why - strlen(why), " rank %d returned %d (%s), expected %d;", r, codes[r],
                         coll_rdma_bcast_file_strerror(codes[r]), want);
            if (!oks[r]) snprintf(why + strlen(why), sizeof why - strlen(why), " rank %d: %s;", r, local_why);
        }
        if (why[0]) {
            printf("FAIL c-api-%s:%s\n", name, why);
            failures++;
        } else {
            printf("PASS c-api-%s (code %d on all %d ranks)\n", name, want, size);
        }
        fflush(stdout);
    }
    free(codes);
    free(oks);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2) {
        if (rank == 0) fprintf(stderr, "usage: bcast_file_api WORKDIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(workdir, sizeof workdir, "%s", argv[1]);
    char mine[2200], src[2200], dst[2300], missing[2200];
    snprintf(mine, sizeof mine, "%s/r%d", workdir, rank);
    mkdir(mine, 0755);
    snprintf(src, sizeof src, "%s/r%d/src.bin", workdir, rank); /* read on the root only */
    snprintf(dst, sizeof dst, "%s/r%d/copy.bin", workdir, rank);
    snprintf(missing, sizeof missing, "%s/no-such-file", workdir);
    const size_t len = (3u << 20) + 12345; /* not a multiple of any chunk size */
    if (rank == 0) write_pattern(src, len, 1);
    MPI_Barrier(MPI_COMM_WORLD);

    int code = coll_rdma_bcast_file(MPI_COMM_WORLD, 0, src, dst, COLL_RDMA_BCAST_FILE_IF_DIFFERENT);
    expect_code("first-copy", code, COLL_RDMA_BCAST_FILE_OK, rank == 0 || holds_pattern(dst, len, 1), "contents differ from the pattern");

    struct stat before, after;
    int have_before = stat(dst, &before) == 0;
    code = coll_rdma_bcast_file(MPI_COMM_WORLD, 0, src, dst, COLL_RDMA_BCAST_FILE_IF_DIFFERENT);
    int untouched = rank == 0 || (have_before && stat(dst, &after) == 0 && after.st_ino == before.st_ino &&
                                  after.st_mtim.tv_nsec == before.st_mtim.tv_nsec && after.st_mtime == before.st_mtime);
    expect_code("identical-kept", code, COLL_RDMA_BCAST_FILE_OK, untouched, "identical file was rewritten (inode or mtime changed)");

    code = coll_rdma_bcast_file(MPI_COMM_WORLD, 0, missing, dst, 0);
    expect_code("missing-source", code, COLL_RDMA_BCAST_FILE_ERR_SOURCE, rank == 0 || holds_pattern(dst, len, 1),
                "the existing copy changed");

    /* policy never: the last rank holds other contents, the others the same */
    if (rank == size - 1) write_pattern(dst, 100, 9);
    code = coll_rdma_bcast_file(MPI_COMM_WORLD, 0, src, dst, COLL_RDMA_BCAST_FILE_NEVER);
    int kept = rank == 0 || (rank == size - 1 ? holds_pattern(dst, 100, 9) : holds_pattern(dst, len, 1));
    expect_code("never-over-different", code, COLL_RDMA_BCAST_FILE_ERR_EXISTS, kept, "a file changed under policy never");

    code = coll_rdma_bcast_file(MPI_COMM_WORLD, size, src, dst, 0);
    expect_code("root-out-of-range", code, COLL_RDMA_BCAST_FILE_ERR_ARG, 1, "");
    code = coll_rdma_bcast_file(MPI_COMM_WORLD, 0, src, dst, 64);
    expect_code("unknown-flag", code, COLL_RDMA_BCAST_FILE_ERR_ARG, 1, "");

    /* another root, a small chunk, policy always over the different file */
    char src2[2200];
    snprintf(src2, sizeof src2, "%s/r%d/src2.bin", workdir, rank);
    int root = size - 1;
    if (rank == root) write_pattern(src2, len, 2);
    MPI_Barrier(MPI_COMM_WORLD);
    code = coll_rdma_bcast_file_chunked(MPI_COMM_WORLD, root, src2, dst, COLL_RDMA_BCAST_FILE_ALWAYS, 4096);
    expect_code("last-root-4k-chunks-always", code, COLL_RDMA_BCAST_FILE_OK, rank == root || holds_pattern(dst, len, 2),
                "contents differ from the second pattern");

    code = coll_rdma_bcast_file_chunked(MPI_COMM_WORLD, 0, src, dst, 0, 100);
    expect_code("chunk-too-small", code, COLL_RDMA_BCAST_FILE_ERR_ARG, 1, "");

    MPI_Finalize();
    return failures ? 1 : 0;
}
