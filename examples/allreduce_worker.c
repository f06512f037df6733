/* examples/allreduce_worker.c: a worker program built against an installed baton.
 *
 *   cc allreduce_worker.c $(pkg-config --cflags --libs baton) -o allreduce_worker
 *   baton run -n 2 -- ./allreduce_worker
 *
 * Every rank contributes rank + i to element i; after a sum all-reduce element i holds
 * world * i + world * (world - 1) / 2 on every rank. Exits 0 when every element is right. */
#include <stdio.h>

#include <baton/comm.h>

int main(void) {
    baton_comm *comm;
    if (baton_init(&comm, NULL) < 0) {
        fprintf(stderr, "baton_init: %s\n", baton_last_error());
        return 1;
    }
    int rank = baton_comm_rank(comm), world = baton_comm_size(comm);
    enum { N = 1000 };
    double x[N];
    for (int i = 0; i < N; i++) x[i] = rank + i;
    int rc = baton_allreduce(comm, x, x, N, BATON_F64, BATON_SUM);
    if (rc < 0) {
        fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, baton_strerror(rc), baton_last_error());
        baton_comm_free(comm);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < N; i++)
        if (x[i] != (double)world * i + world * (world - 1) / 2.0) wrong++;
    printf("rank %d of %d: %d of %d elements wrong\n", rank, world, wrong, N);
    baton_comm_free(comm);
    return wrong ? 1 : 0;
}
