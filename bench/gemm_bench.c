/* gemm_bench.c: GFLOP/s of the GPT's matrix multiplies (6 layers x dim 384 x context 256, batch 16 windows on one
 * rank, or -m ROWS) on each backend of src/nn/gemm.c: OpenBLAS sgemm, oneDNN sgemm, oneDNN bf16 matmul.
 * Every shape and layout the forward and backward of one block and the head run, plus the per-head attention
 * products; the total is weighted by how often a training step runs each. Threads: -t (default 1).
 * bf16 runs through a tape (baton__gemm), as in training: its scratch buffers are reused, so a call pays for
 * rounding both operands but not for allocating them (baton_gemm without a tape mallocs two buffers per call).
 *   bench/gemm_bench.sh        (builds this, runs it under each OPENBLAS_CORETYPE setting) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton/nn.h"
#include "nn/nn_impl.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *what;
    int ta, tb, m, n, k, per_step;   /* per_step: calls per training step */
} shape;

static baton_tape *tape;   /* for the bf16 backend */

static void mm(int bk, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *c,
               int ldc) {
    if (bk == BATON_GEMM_ONEDNN_BF16) baton__gemm(tape, ta, tb, m, n, k, a, lda, b, ldb, -1, 0, 0.0f, c, ldc);
    else baton_gemm(bk, ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc);
}

int main(int argc, char **argv) {
    int rows = 16 * 256, c = 384, t = 256, d = 64, heads = 6, layers = 6, threads = 1;
    double min_s = 0.5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) min_s = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: gemm_bench [-m ROWS] [-t THREADS] [-s SECONDS_PER_CASE]\n");
            return 2;
        }
    }
    if (rows < 1 || threads < 1 || min_s <= 0) {
        fprintf(stderr, "gemm_bench: -m, -t and -s must be positive\n");
        return 2;
    }
    baton_set_threads(threads);
    int seqs = rows / t > 0 ? rows / t : 1;
    shape sh[] = {
        {"qkv fwd", 0, 1, rows, 3 * c, c, layers},      {"qkv dW", 1, 0, 3 * c, c, rows, layers},
        {"qkv dX", 0, 0, rows, c, 3 * c, layers},       {"proj fwd", 0, 1, rows, c, c, layers},
        {"proj dW", 1, 0, c, c, rows, layers},          {"proj dX", 0, 0, rows, c, c, layers},
        {"fc fwd", 0, 1, rows, 4 * c, c, layers},       {"fc dW", 1, 0, 4 * c, c, rows, layers},
        {"fc dX", 0, 0, rows, c, 4 * c, layers},        {"fc2 fwd", 0, 1, rows, c, 4 * c, layers},
        {"fc2 dW", 1, 0, c, 4 * c, rows, layers},       {"fc2 dX", 0, 0, rows, 4 * c, c, layers},
        {"head fwd", 0, 1, rows, 256, c, 1},            {"head dW", 1, 0, 256, c, rows, 1},
        {"head dX", 0, 0, rows, c, 256, 1},
        {"attn QK^T", 0, 1, t, t, d, 2 * layers * heads * seqs},   /* forward S and backward dP */
        {"attn PV", 0, 0, t, d, t, 2 * layers * heads * seqs},     /* forward Y and backward dQ */
        {"attn P^T dY", 1, 0, t, d, t, 2 * layers * heads * seqs}, /* backward dV and dK */
    };
    int ns = (int)(sizeof sh / sizeof sh[0]);
    const char *names[] = {"openblas", "onednn_f32", "onednn_bf16"};
    int nb = baton_gemm_bf16_available() ? 3 : 2;
    tape = baton_tape_new(NULL, 1);
    if (!tape || (nb == 3 && baton_tape_set_gemm(tape, BATON_GEMM_ONEDNN_BF16) != BATON_OK)) return 1;
    size_t cap = (size_t)rows * 4 * c > (size_t)1536 * 1536 ? (size_t)rows * 4 * c : (size_t)1536 * 1536;
    float *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b), *out = malloc(cap * sizeof *out);
    if (!a || !b || !out) return 1;
    baton_rng r;
    baton_rng_seed(&r, 1);
    for (size_t i = 0; i < cap; i++) {
        a[i] = baton_rng_normal(&r);
        b[i] = baton_rng_normal(&r);
    }
    printf("# rows %d (batch x context), dim %d, threads %d, OPENBLAS_CORETYPE=%s, bf16 %s\n", rows, c, threads,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)", nb == 3 ? "yes" : "no (CPU)");
    printf("%-12s %5s %5s %5s %2s%2s", "shape", "M", "N", "K", "T", "T");
    for (int bk = 0; bk < nb; bk++) printf(" %12s", names[bk]);
    printf("   GFLOP/s\n");
    double step_s[3] = {0, 0, 0}, step_flop = 0;
    for (int s = 0; s < ns; s++) {
        shape *x = &sh[s];
        double fl = 2.0 * x->m * x->n * x->k;
        step_flop += fl * x->per_step;
        printf("%-12s %5d %5d %5d %2d%2d", x->what, x->m, x->n, x->k, x->ta, x->tb);
        for (int bk = 0; bk < nb; bk++) {
            int lda = x->ta ? x->m : x->k, ldb = x->tb ? x->k : x->n;
            mm(bk, x->ta, x->tb, x->m, x->n, x->k, a, lda, b, ldb, out, x->n);   /* warm-up */
            int reps = 0;
            double t0 = now(), el;
            do {
                mm(bk, x->ta, x->tb, x->m, x->n, x->k, a, lda, b, ldb, out, x->n);
                reps++;
            } while ((el = now() - t0) < min_s);
            double per = el / reps;
            step_s[bk] += per * x->per_step;
            printf(" %12.1f", fl / per * 1e-9);
        }
        printf("\n");
    }
    /* the machine's peak: a large square product (the MFU denominator of bench/gpt_vs_torch.sh) */
    int sq = 1536;
    printf("%-12s %5d %5d %5d %2d%2d", "peak square", sq, sq, sq, 0, 0);
    for (int bk = 0; bk < nb; bk++) {
        int reps = 0;
        double t0 = now(), el;
        mm(bk, 0, 0, sq, sq, sq, a, sq, b, sq, out, sq);
        t0 = now();
        do {
            mm(bk, 0, 0, sq, sq, sq, a, sq, b, sq, out, sq);
            reps++;
        } while ((el = now() - t0) < min_s);
        printf(" %12.1f", 2.0 * sq * sq * sq * reps / el * 1e-9);
    }
    printf("\n");
    printf("%-12s %23s", "step total", "");
    for (int bk = 0; bk < nb; bk++) printf(" %12.1f", step_flop / step_s[bk] * 1e-9);
    printf("   (weighted by calls per step: %.1f GFLOP)\n", step_flop * 1e-9);
    baton_tape_free(tape);
    free(a);
    free(b);
    free(out);
    return 0;
}
