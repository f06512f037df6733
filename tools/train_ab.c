/* train_ab.c: the in-run A/B measurement of what the per-step metrics cost (BATON_BENCH_METRICS_AB, read by
 * bench/metrics_overhead.sh; docs/observe.md). Runs of the same job differ by far more than 1 % on a shared
 * machine; blocks of a few steps inside one run, on and off in turn, differ by what the recording costs plus
 * short-term noise, which pairs of neighbouring blocks cancel. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "train_metrics.h"
#include "util/util.h"

#define TM_AB_MAX_STEPS (1L << 20)

/* Block b: on in pairs 0, 2, 4, ... first, off first in pairs 1, 3, 5, ... (on, off, off, on, on, off, ...). */
static int block_on(long b) { return ((b / 2) % 2 == 0) == (b % 2 == 0); }

int tm_ab_start(tm_ab *ab, long first_step, long total) {
    long k = 0;
    int rc = baton__env_long("BATON_BENCH_METRICS_AB", 0, 1, 100000, &k);
    if (rc == BATON_EINVAL) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        return -1;
    }
    if (rc < 0 || k == 0) return 0;
    long n = total - first_step;
    if (n > TM_AB_MAX_STEPS) n = TM_AB_MAX_STEPS;
    if (n < 1) n = 1;
    ab->ms = calloc((size_t)n, sizeof *ab->ms);
    if (!ab->ms) {
        fprintf(stderr, "baton train: BATON_BENCH_METRICS_AB: out of memory\n");
        return -1;
    }
    ab->k = k;
    ab->first = first_step + TM_AB_WARMUP;
    ab->cap = n;
    return 0;
}

int tm_ab_recording(const tm_ab *ab, long step) {
    if (!ab->k || step < ab->first) return 1;
    return block_on((step - ab->first) / ab->k);
}

void tm_ab_step(tm_ab *ab, long step, uint64_t ns) {
    if (step < ab->first || ab->n >= ab->cap || step - ab->first != ab->n) return;
    ab->ms[ab->n++] = (double)ns * 1e-6;
}

long tm_ab_pairs(const tm_ab *ab, double *on, double *off, long max) {
    if (!ab->k) return 0;
    long pairs = ab->n / (2 * ab->k);
    if (pairs > max) pairs = max;
    for (long p = 0; p < pairs; p++) {
        double sum[2] = {0, 0};   /* [0] off, [1] on */
        for (long b = 2 * p; b < 2 * p + 2; b++)
            for (long i = b * ab->k; i < (b + 1) * ab->k; i++) sum[block_on(b)] += ab->ms[i];
        on[p] = sum[1] / (double)ab->k;
        off[p] = sum[0] / (double)ab->k;
    }
    return pairs;
}

void train_ab_json(cJSON *j, const tm_ab *ab) {
    long max = ab->n / (2 * (ab->k ? ab->k : 1)) + 1;
    double *v = malloc((size_t)max * 2 * sizeof *v);
    if (!v) return;
    long pairs = tm_ab_pairs(ab, v, v + max, max);
    cJSON *o = cJSON_AddObjectToObject(j, "metrics_ab");
    if (o) {
        cJSON_AddNumberToObject(o, "block_steps", (double)ab->k);
        cJSON *on = cJSON_AddArrayToObject(o, "on_ms"), *off = cJSON_AddArrayToObject(o, "off_ms");
        for (long p = 0; on && off && p < pairs; p++) {
            cJSON_AddItemToArray(on, cJSON_CreateNumber(v[p]));
            cJSON_AddItemToArray(off, cJSON_CreateNumber(v[max + p]));
        }
        /* every step of the complete pairs, in order (block b holds steps [b K, (b + 1) K)) */
        cJSON *steps = cJSON_AddArrayToObject(o, "step_ms");
        for (long i = 0; steps && i < pairs * 2 * ab->k; i++) cJSON_AddItemToArray(steps, cJSON_CreateNumber(ab->ms[i]));
    }
    free(v);
}

void tm_ab_free(tm_ab *ab) {
    free(ab->ms);
    ab->ms = NULL;
    ab->k = 0;
}
