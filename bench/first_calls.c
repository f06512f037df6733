/* first_calls.c: how long each of a job's first all-reduces takes, one by one (docs/measurements/plan-history.md,
 * "How the candidates are timed"). For every algorithm named on the command line, in that order: 40 consecutive
 * all-reduces of BYTES (f32 sum), each timed alone; rank 0 prints one line per algorithm with the 40 times in microseconds. A page's
 * first touch through a process's mapping is a fault, so the first pass of a shared-memory ring shows here.
 *   cc -std=c11 -O2 -Iinclude -o first_calls bench/first_calls.c -Lbuild -lbaton -Wl,-rpath,$PWD/build
 *   build/baton run -n 2 -- ./first_calls 4096 direct rd ring */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "baton/comm.h"

enum { CALLS = 40 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    long bytes = argc > 2 ? atol(argv[1]) : 0;
    if (bytes < 4) {
        fprintf(stderr, "usage: first_calls BYTES ALGO [ALGO ...]   (BYTES >= 4)\n");
        return 2;
    }
    baton_comm *c;
    if (baton_init(&c, NULL) < 0) {
        fprintf(stderr, "first_calls: %s\n", baton_last_error());
        return 1;
    }
    size_t n = (size_t)bytes / sizeof(float);
    float *send = calloc(n, sizeof *send), *recv = calloc(n, sizeof *recv);
    int rc = send && recv ? 0 : 1;
    for (int a = 2; a < argc && !rc; a++) {
        baton_algo algo;
        if (baton_algo_parse(argv[a], &algo) != 0) {
            fprintf(stderr, "first_calls: unknown algorithm '%s'\n", argv[a]);
            rc = 2;
            break;
        }
        baton_comm_set_algo(c, algo);
        double t[CALLS];
        for (int i = 0; i < CALLS && !rc; i++) {
            double t0 = now_us();
            if (baton_allreduce(c, send, recv, n, BATON_F32, BATON_SUM) < 0) {
                fprintf(stderr, "first_calls: %s\n", baton_last_error());
                rc = 1;
            }
            t[i] = now_us() - t0;
        }
        if (!rc && baton_comm_rank(c) == 0) {
            printf("%s:", argv[a]);
            for (int i = 0; i < CALLS; i++) printf(" %.0f", t[i]);
            printf("\n");
        }
    }
    free(send);
    free(recv);
    baton_comm_free(c);
    return rc;
}
