/* prog_async.c: asynchronous collectives under `baton run`, for test_coll.c. Keeps up to 8 all-reduces and
 * broadcasts in flight, mixes in blocking calls (which must run after the queued ones, in issue order),
 * polls with baton_test, and checks every result exactly. Prints "prog_async: rank R: ok", and before it the
 * CPUs the rank may run on and the scheduler slice its comm thread set (BATON_COMM_SLICE_US). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/comm.h"
#include "comm/comm_internal.h"

enum { INFLIGHT = 8, ROUNDS = 40 };

static int fail(int rank, const char *what, int rc) {
    fprintf(stderr, "prog_async: rank %d: %s: %s: %s\n", rank, what, baton_strerror(rc), baton_last_error());
    return 1;
}

int main(void) {
    baton_comm *c;
    if (baton_init(&c, NULL) < 0) {
        fprintf(stderr, "prog_async: %s\n", baton_last_error());
        return 1;
    }
    int rank = baton_comm_rank(c), n = baton_comm_size(c), rc;
    size_t sizes[INFLIGHT] = {1, 7, 100, 1000, 10000, 100000, 300001, 33};
    float *bufs[INFLIGHT];
    for (int i = 0; i < INFLIGHT; i++) bufs[i] = malloc(sizes[i] * sizeof(float));
    long bad = 0;
    for (int round = 0; round < ROUNDS; round++) {
        baton_work *w[INFLIGHT];
        for (int i = 0; i < INFLIGHT; i++) {
            for (size_t k = 0; k < sizes[i]; k++) bufs[i][k] = (float)(rank + 1 + (int)((k + (size_t)round + (size_t)i) % 7));
            if (i == 3) /* one broadcast among the all-reduces */
                rc = baton_broadcast_start(c, bufs[i], sizes[i], BATON_F32, round % n, &w[i]);
            else
                rc = baton_allreduce_start(c, bufs[i], bufs[i], sizes[i], BATON_F32, BATON_SUM, &w[i]);
            if (rc < 0) return fail(rank, "start", rc);
        }
        /* a blocking call while work is queued: it runs after the queued ones */
        int64_t one = 1, all = 0;
        if ((rc = baton_allreduce(c, &one, &all, 1, BATON_I64, BATON_SUM)) < 0) return fail(rank, "blocking", rc);
        if (all != n) bad++;
        for (int i = INFLIGHT - 1; i >= 0; i--) { /* waited in reverse order, polled first */
            int done = 0;
            if ((rc = baton_test(w[i], &done)) < 0) return fail(rank, "test", rc);
            if ((rc = baton_wait(w[i])) < 0) return fail(rank, "wait", rc);
            for (size_t k = 0; k < sizes[i]; k++) {
                float want;
                if (i == 3)
                    want = (float)(round % n + 1 + (int)((k + (size_t)round + (size_t)i) % 7));
                else
                    want = (float)(n * (n + 1) / 2 + n * (int)((k + (size_t)round + (size_t)i) % 7));
                if (bufs[i][k] != want && bad++ < 5)
                    fprintf(stderr, "prog_async: rank %d: round %d buffer %d element %zu: %g, expected %g\n", rank, round,
                            i, k, bufs[i][k], want);
            }
        }
    }
    for (int i = 0; i < INFLIGHT; i++) free(bufs[i]);
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    printf("prog_async: rank %d: cpus %d comm slice %llu ns\n", rank, cpus,
           (unsigned long long)baton__comm_thread_slice_ns(c));
    baton_comm_free(c);
    if (bad) return 1;
    printf("prog_async: rank %d: ok\n", rank);
    return 0;
}
