/* startup_mpi.c: the smallest MPI job, the peer of startup_baton.c in bench/startup.sh: MPI_Init, one 4-byte
 * MPI_Allreduce (f32 sum, checked), MPI_Finalize. Built with mpicc.openmpi and mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, w;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &w);
    float x = (float)(r + 1), sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (sum != (float)w * (float)(w + 1) / 2) {
        fprintf(stderr, "startup_mpi: wrong sum\n");
        return 1;
    }
    return 0;
}
