/* prog_mismatch.c: a worker that disagrees with the others on purpose, for test_reliability.c.
 *
 *   prog_mismatch KIND COUNT [last]
 *   KIND: count | dtype | op | skip | kind | root | roots | zero | zerokind | leave
 *
 * Every rank first runs two matching all-reduces; then rank 1 (the odd one) differs in KIND ("roots":
 * every rank broadcasts from itself; "zero": rank 1 all-reduces 0 elements; "zerokind": all move 0
 * elements, rank 1 in an allgather; "leave": rank 1 exits 0, the others all-reduce once more). Then every rank runs a barrier, unless "last" is given: then the
 * mismatched collective is the job's last one. Each rank prints "rank R: error: <detail>" and exits 3 when
 * a collective failed, or "rank R: no error" and exits 0, which the test counts as a miss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/comm.h"

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "last"))) {
        fprintf(stderr, "usage: prog_mismatch count|dtype|op|skip|kind|root|roots|zero|zerokind|leave COUNT [last]\n");
        return 2;
    }
    const char *kind = argv[1];
    size_t n = (size_t)strtoull(argv[2], NULL, 10);
    baton_comm *c;
    if (baton_init(&c, NULL) < 0) {
        fprintf(stderr, "prog_mismatch: %s\n", baton_last_error());
        return 1;
    }
    int rank = baton_comm_rank(c), odd = rank == 1;
    double *buf = calloc(2 * n + 16, sizeof(double));
    int rc = baton_allreduce(c, buf, buf, n, BATON_F32, BATON_SUM);
    if (rc == 0) rc = baton_allreduce(c, buf, buf, n, BATON_F32, BATON_SUM);
    if (rc == 0) {
        if (!strcmp(kind, "count"))
            rc = baton_allreduce(c, buf, buf, odd ? 2 * n : n, BATON_F32, BATON_SUM);
        else if (!strcmp(kind, "dtype"))
            rc = baton_allreduce(c, buf, buf, n, odd ? BATON_F64 : BATON_F32, BATON_SUM);
        else if (!strcmp(kind, "op"))
            rc = baton_allreduce(c, buf, buf, n, BATON_F32, odd ? BATON_MAX : BATON_SUM);
        else if (!strcmp(kind, "skip")) { /* the odd rank skips one call */
            if (!odd) rc = baton_allreduce(c, buf, buf, n, BATON_F32, BATON_SUM);
            if (rc == 0) rc = baton_allreduce(c, buf, buf, n, BATON_I32, BATON_SUM);
        } else if (!strcmp(kind, "kind"))
            rc = odd ? baton_barrier(c) : baton_allreduce(c, buf, buf, n, BATON_F32, BATON_SUM);
        else if (!strcmp(kind, "root"))
            rc = baton_broadcast(c, buf, n, BATON_F32, odd ? 1 : 0);
        else if (!strcmp(kind, "roots"))
            rc = baton_broadcast(c, buf, n, BATON_F32, rank);
        else if (!strcmp(kind, "zero"))
            rc = baton_allreduce(c, buf, buf, odd ? 0 : n, BATON_F32, BATON_SUM);
        else if (!strcmp(kind, "leave")) { /* the odd rank leaves, exit 0, while the others call once more */
            if (odd) {
                printf("rank %d: left\n", rank);
                baton_comm_free(c);
                free(buf);
                return 0;
            }
            rc = baton_allreduce(c, buf, buf, n, BATON_F32, BATON_SUM);
        } else if (!strcmp(kind, "zerokind"))
            rc = odd ? baton_allgather(c, buf, buf, 0, BATON_F32) : baton_allreduce(c, buf, buf, 0, BATON_F32, BATON_SUM);
        else {
            fprintf(stderr, "prog_mismatch: unknown kind %s\n", kind);
            return 2;
        }
    }
    /* a rank whose own call happened to match may only learn of the failure in its next collective */
    if (rc == 0 && argc == 3) rc = baton_barrier(c);
    if (rc < 0) {
        printf("rank %d: error: %s: %s\n", rank, baton_strerror(rc), baton_last_error());
        fflush(stdout);
        baton_comm_free(c);
        free(buf);
        return 3;
    }
    printf("rank %d: no error\n", rank);
    baton_comm_free(c);
    free(buf);
    return 0;
}
