/* bench/attn_bench.c: CPU and wall time of one layer's attention (baton_attention forward + backward) at the GPT's
 * shape (batch 16, T 256, C 384, 6 heads), f32 (oneDNN sgemm per head) against bf16 (batched bf16 products per
 * sequence), interleaved; the A/B of the bf16 attention path (docs/gpt.md, issue 13).
 *   cc -std=c11 -O2 -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/attn_bench.c build/libbaton.a \
 *      -lsodium -lcjson -lz -lm -lrt -pthread -o attn_bench
 *   OMP_WAIT_POLICY=PASSIVE ./attn_bench THREADS REPS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include "baton/nn.h"
static double now(clockid_t c) { struct timespec ts; clock_gettime(c, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
enum { B = 16, T = 256, H = 6, C = 384, L = 3 * C };
static void pass(baton_tape *t, const float *x, const int32_t *lab) {
    baton_tape_reset(t, 1);
    baton_tensor *in = baton_tape_tensor(t, 2, (int[]){B * T, L}, 1);
    memcpy(in->data, x, sizeof(float) * B * T * L);
    baton_tape_backward(t, baton_cross_entropy(t, baton_attention(t, in, B, H), lab), 1.0f);
}
int main(int argc, char **argv) {
    int thr = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 10;
    baton_set_threads(thr);
    float *x = malloc(sizeof(float) * B * T * L);
    int32_t *lab = malloc(sizeof(int32_t) * B * T);
    for (int i = 0; i < B * T * L; i++) x[i] = (float)((int)(((long long)i * 7919) % 1000)) / 500.0f - 1.0f;
    for (int i = 0; i < B * T; i++) lab[i] = (i * 31) % C;
    baton_tape *t[2] = {baton_tape_new(NULL, 1), baton_tape_new(NULL, 1)};
    if (baton_tape_set_gemm(t[0], BATON_GEMM_ONEDNN) || baton_tape_set_gemm(t[1], BATON_GEMM_ONEDNN_BF16)) {
        fprintf(stderr, "attn_bench: needs oneDNN with bf16\n");
        return 1;
    }
    double cpu[2] = {0, 0}, wall[2] = {0, 0};
    for (int r = 0; r < reps + 2; r++)
        for (int k = 0; k < 2; k++) {
            double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
            pass(t[k], x, lab);
            if (r >= 2) cpu[k] += now(CLOCK_PROCESS_CPUTIME_ID) - c0, wall[k] += now(CLOCK_MONOTONIC) - w0;
        }
    printf("attention fwd+bwd (+ a cross-entropy on Y), thr %d: f32 cpu %.1f wall %.1f ms; bf16 cpu %.1f wall %.1f ms\n", thr,
           1e3 * cpu[0] / reps, 1e3 * wall[0] / reps, 1e3 * cpu[1] / reps, 1e3 * wall[1] / reps);
    return 0;
}
