/* Tiny MPI check for the Soft-RoCE test bed: every rank contributes rank+1 to
   an MPI_Allreduce(SUM) and checks the result. Built by ci/rxe/selftest.sh. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0, name_len;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &name_len);
    int v = rank + 1;
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int expect = size * (size + 1) / 2;
    printf("rank %d/%d on %s: allreduce sum %d (expect %d) %s\n", rank, size, name, sum, expect, sum == expect ? "OK" : "BAD");
    MPI_Finalize();
    return sum == expect ? 0 : 1;
}
