/* reduce_bench.c: GB/s of the reduction kernels (baton__reduce_n for nsrc 2/4/8 and baton__reduce) for
 * f32 and bf16 sum on every code path this CPU has, beside memcpy as the ceiling. Built and run by
 * bench/reduce_bench.sh against build/libbaton.a; not part of `make test`.
 *
 *   bench/reduce_bench.sh [-s BYTES_PER_BUFFER] [-t SECONDS_PER_CASE] [-m]   (-m: the memcpy row only)
 *
 * Columns: traffic_GBps counts every byte read and written ((nsrc + 1) x buffer for reduce_n, 3 x buffer
 * for reduce's read-modify-write plus the source, 2 x buffer for memcpy); out_GBps counts the output
 * buffer only. Each figure is the median of repeated timed passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/reduce.h"
#include "util/util.h"

static double now_s(void) { return (double)baton__now_ns() * 1e-9; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { MAX_REPS = 401 };

/* Median seconds per call of fn over repeated calls for about `budget` seconds (at least 5 calls). */
typedef void (*bench_fn)(void *ctx);
static double time_median(bench_fn fn, void *ctx, double budget) {
    double t[MAX_REPS];
    int n = 0;
    fn(ctx);  /* warm up: page faults, caches */
    double end = now_s() + budget;
    while (n < MAX_REPS && (n < 5 || now_s() < end)) {
        double t0 = now_s();
        fn(ctx);
        t[n++] = now_s() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

typedef struct {
    void *dst;
    const void *srcs[16];
    int nsrc;
    size_t count;
    size_t bytes;  /* bytes per buffer */
    baton_dtype dt;
} bench_ctx;

static void run_reduce_n(void *p) {
    bench_ctx *c = p;
    baton__reduce_n(c->dst, c->srcs, c->nsrc, c->count, c->dt, BATON_SUM, 0);
}
static void run_reduce(void *p) {
    bench_ctx *c = p;
    baton__reduce(c->dst, c->srcs[0], c->count, c->dt, BATON_SUM);
}
static void run_memcpy(void *p) {
    bench_ctx *c = p;
    memcpy(c->dst, c->srcs[0], c->bytes);
}

static void row(const char *isa, const char *kernel, const char *dt, int nsrc, size_t bytes, double sec,
                double traffic_bytes) {
    printf("%-7s %-9s %-5s %4d %11zu %10.1f %9.2f %12.2f\n", isa, kernel, dt, nsrc, bytes, sec * 1e6,
           (double)bytes / sec * 1e-9, traffic_bytes / sec * 1e-9);
    fflush(stdout);
}

int main(int argc, char **argv) {
    uint64_t bytes = 64ull << 20;
    double budget = 0.4;
    int memcpy_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            if (baton__parse_size(argv[++i], 1ull << 32, &bytes) < 0 || bytes < 64) {
                fprintf(stderr, "reduce_bench: -s wants a size from 64 to 4G (e.g. 32K, 64M), got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            if (baton__parse_double(argv[++i], 0.01, 60, &budget) < 0) {
                fprintf(stderr, "reduce_bench: -t wants seconds per case in [0.01, 60], got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "-m")) {
            memcpy_only = 1;
        } else {
            fprintf(stderr, "usage: reduce_bench [-s BYTES_PER_BUFFER] [-t SECONDS_PER_CASE] [-m]\n");
            return 2;
        }
    }
    bytes &= ~(uint64_t)63;
    enum { NBUF = 9 };
    char *buf[NBUF];
    for (int i = 0; i < NBUF; i++) buf[i] = NULL;
    for (int i = 0; i < (memcpy_only ? 2 : NBUF); i++) {
        buf[i] = aligned_alloc(64, bytes);
        if (!buf[i]) {
            fprintf(stderr, "reduce_bench: out of memory for %d buffers of %llu bytes\n", NBUF,
                    (unsigned long long)bytes);
            return 1;
        }
        for (size_t j = 0; j < bytes / 4; j++) ((float *)(void *)buf[i])[j] = (float)((j + (size_t)i) % 97) * 0.25f;
    }
    printf("# buffer %llu bytes, median of passes over %.2f s per case\n", (unsigned long long)bytes, budget);
    printf("%-7s %-9s %-5s %4s %11s %10s %9s %12s\n", "isa", "kernel", "dtype", "nsrc", "bytes", "time_us",
           "out_GBps", "traffic_GBps");
    bench_ctx c = {.dst = buf[0], .bytes = bytes, .dt = BATON_F32, .count = bytes / 4};
    c.srcs[0] = buf[1];
    row("-", "memcpy", "-", 1, bytes, time_median(run_memcpy, &c, budget), 2.0 * (double)bytes);
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    for (int p = 0; p < 3 && !memcpy_only; p++) {
        if (baton__reduce_force_isa(isas[p]) < 0) continue;
        for (int d = 0; d < 2; d++) {
            c.dt = d ? BATON_BF16 : BATON_F32;
            c.count = bytes / (d ? 2 : 4);
            static const int ns[] = {2, 4, 8};
            for (int k = 0; k < 3; k++) {
                c.nsrc = ns[k];
                c.dst = buf[0];
                for (int s = 0; s < c.nsrc; s++) c.srcs[s] = buf[1 + s];
                row(isas[p], "reduce_n", d ? "bf16" : "f32", c.nsrc, bytes, time_median(run_reduce_n, &c, budget),
                    (double)(c.nsrc + 1) * (double)bytes);
            }
            c.nsrc = 1;
            c.dst = buf[0];
            c.srcs[0] = buf[1];
            row(isas[p], "reduce", d ? "bf16" : "f32", 2, bytes, time_median(run_reduce, &c, budget),
                3.0 * (double)bytes);
        }
    }
    for (int i = 0; i < NBUF; i++) free(buf[i]);
    return 0;
}
