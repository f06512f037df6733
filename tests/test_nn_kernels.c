/* test_nn_kernels.c: the vectorized row kernels of src/nn/kernels_vec.c (GELU forward and backward with their own
 * exp and erfc, softmax rows of attention and of the loss, layer norm rows) against double-precision references
 * from libm, over sizes that hit the 16-wide body, the tail and both; and every instruction-set copy (AVX-512,
 * baseline, forced with baton__kernels_set_level) computing the same bits; AdamW against a double reference and
 * its copies bit for bit, and the gradient sum of squares and scale independent of the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "harness.h"
#include "nn/nn_impl.h"

static const int sizes[] = {1, 3, 15, 16, 17, 31, 32, 33, 100, 256, 384};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static double phi_ref(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double gelu_ref(double x) { return x * phi_ref(x); }
static double gelu_d_ref(double x) { return phi_ref(x) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI); }

static void fill(float *x, int n, baton_rng *r, float sd) {
    for (int i = 0; i < n; i++) x[i] = sd * baton_rng_normal(r);
}

/* |got - want| <= abs_tol + rel_tol * |want| */
#define NEAR(got, want, abs_tol, rel_tol) \
    ASSERT_NEAR((got), (want), (abs_tol) + (rel_tol) * fabs((double)(want)))

TEST(gelu_matches_erf_reference) {
    /* a sweep over [-12, 12] (both tails: Phi(-12) ~ 2e-33 has to come out relative-accurate, not as 1 - 1) */
    enum { N = 4801 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *pre = malloc(N * sizeof *pre);
    float *g = malloc(N * sizeof *g), *dx = malloc(N * sizeof *dx);
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    baton__gelu_fwd(y, pre, x, NULL, 1, N);
    for (int i = 0; i < N; i++) {
        ASSERT_TRUE(pre[i] == x[i]);
        /* in the far tail exp(-x^2/2) is taken of a float argument: relative error about 6e-8 x^2 */
        NEAR(y[i], gelu_ref(x[i]), 1e-30, 1e-6 * (1.0 + 0.25 * x[i] * x[i]));
    }
    for (int i = 0; i < N; i++) g[i] = 1.0f + 0.001f * (float)i;
    baton__gelu_bwd(dx, g, x, N, 0.0f);
    for (int i = 0; i < N; i++) NEAR(dx[i], (double)g[i] * gelu_d_ref(x[i]), 1e-7 * g[i], 1e-6);
    memcpy(dx, g, N * sizeof *dx);   /* beta 1 adds; in place (dx = dy) multiplies */
    baton__gelu_bwd(dx, g, x, N, 1.0f);
    for (int i = 0; i < N; i++) NEAR(dx[i], (double)g[i] * (1.0 + gelu_d_ref(x[i])), 1e-7 * g[i], 1e-6);
    memcpy(dx, g, N * sizeof *dx);
    baton__gelu_bwd(dx, dx, x, N, 0.0f);
    for (int i = 0; i < N; i++) NEAR(dx[i], (double)g[i] * gelu_d_ref(x[i]), 1e-7 * g[i], 1e-6);
    /* non-finite inputs: NaN stays NaN, +inf -> +inf, far tails exact */
    float sp[5] = {NAN, INFINITY, -200.0f, 200.0f, 0.0f}, so[5];
    baton__gelu_fwd(so, NULL, sp, NULL, 1, 5);
    ASSERT_TRUE(isnan(so[0]));
    ASSERT_TRUE(isinf(so[1]) && so[1] > 0);
    ASSERT_TRUE(so[2] == 0.0f && so[3] == 200.0f && so[4] == 0.0f);
    free(x), free(y), free(pre), free(g), free(dx);
}

TEST(gelu_rows_with_bias_every_size) {
    baton_rng r;
    baton_rng_seed(&r, 3);
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s], m = 3;
        float *x = malloc((size_t)m * n * sizeof *x), *b = malloc((size_t)n * sizeof *b);
        float *y = malloc((size_t)m * n * sizeof *y), *pre = malloc((size_t)m * n * sizeof *pre);
        fill(x, m * n, &r, 3.0f);
        fill(b, n, &r, 1.0f);
        baton__gelu_fwd(y, pre, x, b, m, n);
        for (int i = 0; i < m * n; i++) {
            double v = (double)x[i] + b[i % n];
            ASSERT_TRUE(pre[i] == x[i] + b[i % n]);
            NEAR(y[i], gelu_ref((float)v), 1e-7, 1e-6);
        }
        free(x), free(b), free(y), free(pre);
    }
}

TEST(softmax_rows_match_reference) {
    baton_rng r;
    baton_rng_seed(&r, 5);
    for (int s = 0; s < NSIZES; s++) {
        int tt = sizes[s] + 5;
        float *row = malloc((size_t)tt * sizeof *row), *orig = malloc((size_t)tt * sizeof *orig);
        float *g = malloc((size_t)tt * sizeof *g), *g0 = malloc((size_t)tt * sizeof *g0);
        for (int len = sizes[s]; len <= tt; len += 5) {
            fill(orig, tt, &r, 4.0f);
            memcpy(row, orig, (size_t)tt * sizeof *row);
            float scale = 0.125f;
            baton__softmax_row(row, len, tt, scale);
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < len; j++) mx = fmax(mx, (double)orig[j] * scale);
            for (int j = 0; j < len; j++) sum += exp((double)orig[j] * scale - mx);
            for (int j = 0; j < len; j++) NEAR(row[j], exp((double)orig[j] * scale - mx) / sum, 1e-9, 2e-6);
            for (int j = len; j < tt; j++) ASSERT_TRUE(row[j] == 0.0f);
            /* backward: g = p * (g - <p, g>) * scale */
            fill(g0, tt, &r, 1.0f);
            memcpy(g, g0, (size_t)tt * sizeof *g);
            baton__softmax_bwd_row(g, row, len, tt, scale);
            double dot = 0.0, mag = 0.0;
            for (int j = 0; j < len; j++) dot += (double)row[j] * g0[j], mag += fabs((double)row[j] * g0[j]);
            for (int j = 0; j < len; j++) NEAR(g[j], row[j] * (g0[j] - dot) * scale, 1e-6 * mag * scale, 1e-6);
            for (int j = len; j < tt; j++) ASSERT_TRUE(g[j] == 0.0f);
            /* the loss's form: max, then exp(x - max) summed */
            ASSERT_TRUE(baton__row_max(orig, len) == (float)(mx / scale));
            float e[400];
            float shift = (float)(mx / scale);
            float es = baton__exp_sum(e, orig, len, 1.0f, shift);
            double want = 0.0;
            for (int j = 0; j < len; j++) {
                double ej = exp((double)(orig[j] - shift));   /* the argument as the kernel rounds it */
                want += ej;
                NEAR(e[j], ej, 1e-30, 2e-7);
            }
            NEAR(es, want, 0.0, 1e-6);
            NEAR(baton__exp_sum(NULL, orig, len, 1.0f, shift), want, 0.0, 1e-6);
        }
        free(row), free(orig), free(g), free(g0);
    }
}

TEST(exp_range_and_special_values) {
    /* every float step of 1/64 over the range the kernels use, and the clamps */
    for (double x = -85.9; x <= 0.0; x += 1.0 / 64) {
        float xf = (float)x;
        float got = baton__exp_sum(NULL, &xf, 1, 1.0f, 0.0f);
        NEAR(got, exp((double)xf), 0.0, 3e-7);
    }
    float sp[4] = {-INFINITY, -1000.0f, NAN, 0.0f};
    ASSERT_TRUE(baton__exp_sum(NULL, sp, 1, 1.0f, 0.0f) == 0.0f);
    ASSERT_TRUE(baton__exp_sum(NULL, sp + 1, 1, 1.0f, 0.0f) == 0.0f);
    ASSERT_TRUE(isnan(baton__exp_sum(NULL, sp + 2, 1, 1.0f, 0.0f)));
    ASSERT_TRUE(baton__exp_sum(NULL, sp + 3, 1, 1.0f, 0.0f) == 1.0f);
}

TEST(layernorm_rows_match_reference) {
    baton_rng r;
    baton_rng_seed(&r, 7);
    for (int s = 0; s < NSIZES; s++) {
        int c = sizes[s];
        float *x = malloc((size_t)c * sizeof *x), *gm = malloc((size_t)c * sizeof *gm), *bt = malloc((size_t)c * sizeof *bt);
        float *y = malloc((size_t)c * sizeof *y), *gy = malloc((size_t)c * sizeof *gy), *dx = malloc((size_t)c * sizeof *dx);
        fill(x, c, &r, 2.0f);
        for (int j = 0; j < c; j++) x[j] += 5.0f;   /* an offset, as residual streams have */
        fill(gm, c, &r, 1.0f);
        fill(bt, c, &r, 1.0f);
        fill(gy, c, &r, 1.0f);
        float mean, rstd, eps = 1e-5f;
        baton__ln_fwd_row(y, x, gm, bt, c, eps, &mean, &rstd);
        double mu = 0.0, var = 0.0;
        for (int j = 0; j < c; j++) mu += x[j];
        mu /= c;
        for (int j = 0; j < c; j++) var += (x[j] - mu) * (x[j] - mu);
        var /= c;
        double rs = 1.0 / sqrt(var + eps);
        NEAR(mean, mu, 1e-6, 1e-6);
        NEAR(rstd, rs, 0.0, 1e-5);
        for (int j = 0; j < c; j++) NEAR(y[j], (x[j] - mu) * rs * gm[j] + bt[j], 2e-5, 1e-5);
        /* backward against the double formula with the same stats */
        double s1 = 0.0, s2 = 0.0;
        for (int j = 0; j < c; j++) {
            double xh = (x[j] - (double)mean) * rstd, d = (double)gy[j] * gm[j];
            s1 += d;
            s2 += d * xh;
        }
        s1 /= c;
        s2 /= c;
        for (int beta = 0; beta < 2; beta++) {
            for (int j = 0; j < c; j++) dx[j] = 0.5f;
            baton__ln_bwd_row(dx, x, gy, gm, c, mean, rstd, (float)beta);
            for (int j = 0; j < c; j++) {
                double xh = (x[j] - (double)mean) * rstd;
                NEAR(dx[j], 0.5 * beta + rstd * ((double)gy[j] * gm[j] - s1 - xh * s2), 2e-5 * rstd, 1e-5);
            }
        }
        free(x), free(gm), free(bt), free(y), free(gy), free(dx);
    }
}

TEST(layernorm_parameter_gradients_match_reference) {
    baton_rng r;
    baton_rng_seed(&r, 8);
    int m = 37, c = 45;   /* blocks of 16 columns and a tail of 13 */
    float *x = malloc((size_t)m * c * sizeof *x), *gy = malloc((size_t)m * c * sizeof *gy), stats[2 * 37];
    fill(x, m * c, &r, 2.0f);
    fill(gy, m * c, &r, 1.0f);
    for (int i = 0; i < m; i++) stats[2 * i] = 0.1f * (float)i, stats[2 * i + 1] = 1.0f + 0.01f * (float)i;
    for (int j0 = 0; j0 < c; j0 += 16) {
        int w = c - j0 < 16 ? c - j0 : 16;
        float sg[16], sb[16];
        for (int j = 0; j < w; j++) sg[j] = 1.0f, sb[j] = -1.0f;
        baton__ln_param_cols(sg, sb, x, gy, stats, (size_t)m, c, j0, w);
        for (int j = 0; j < w; j++) {
            double wg = 1.0, wb = -1.0, mag = 1.0;
            for (int i = 0; i < m; i++) {
                double g = gy[i * c + j0 + j];
                wg += g * ((x[i * c + j0 + j] - (double)stats[2 * i]) * stats[2 * i + 1]);
                wb += g;
                mag += fabs(g) * (1.0 + fabs(x[i * c + j0 + j]));
            }
            NEAR(sg[j], wg, 1e-6 * mag, 0.0);
            NEAR(sb[j], wb, 1e-6 * mag, 0.0);
        }
    }
    free(x), free(gy);
}

/* Every kernel on every instruction-set level the CPU has; the outputs concatenated */
static size_t run_all(float *out, int c) {
    baton_rng r;
    baton_rng_seed(&r, 9);
    float x[400], b[400], p[400], g[400];
    size_t k = 0;
    fill(x, c, &r, 3.0f);
    fill(b, c, &r, 1.0f);
    fill(g, c, &r, 1.0f);
    baton__gelu_fwd(out + k, out + k + c, x, b, 1, c);
    k += 2 * (size_t)c;
    memcpy(out + k, g, (size_t)c * sizeof *g);
    baton__gelu_bwd(out + k, out + k, x, (size_t)c, 1.0f);
    k += (size_t)c;
    memcpy(p, x, sizeof p);
    baton__softmax_row(p, c, c, 0.3f);
    memcpy(out + k, p, (size_t)c * sizeof *p);
    k += (size_t)c;
    memcpy(out + k, g, (size_t)c * sizeof *g);
    baton__softmax_bwd_row(out + k, p, c, c, 0.3f);
    k += (size_t)c;
    out[k] = baton__exp_sum(out + k + 1, x, c, 1.0f, 0.5f);
    k += (size_t)c + 1;
    baton__ln_fwd_row(out + k, x, b, g, c, 1e-5f, &out[k + c], &out[k + c + 1]);
    k += (size_t)c + 2;
    memcpy(out + k, g, (size_t)c * sizeof *g);
    baton__ln_bwd_row(out + k, x, g, b, c, 0.1f, 1.3f, 1.0f);
    k += (size_t)c;
    float st[2] = {0.2f, 1.1f};
    for (int j0 = 0; j0 < c; j0 += 16, k += 32) {
        int w = c - j0 < 16 ? c - j0 : 16;
        memcpy(out + k, g + j0, (size_t)w * sizeof *g);
        memcpy(out + k + 16, b + j0, (size_t)w * sizeof *b);
        baton__ln_param_cols(out + k, out + k + 16, x, g, st, 1, c, j0, w);
    }
    return k;
}

TEST(instruction_sets_compute_the_same_bits) {
    int best = baton__kernels_set_level(-1);
    ASSERT_TRUE(best == 0 || best == 1);
    ASSERT_EQ_INT(baton__kernels_set_level(0), 0);
    for (int s = 0; s < NSIZES; s++) {
        int c = sizes[s];
        static float ref[6000], got[6000];
        baton__kernels_set_level(0);
        size_t n = run_all(ref, c);
        for (int l = 1; l <= best; l++) {
            ASSERT_EQ_INT(baton__kernels_set_level(l), l);
            ASSERT_EQ_INT(run_all(got, c), n);
            ASSERT_TRUE(memcmp(ref, got, n * sizeof *ref) == 0);
        }
    }
    ASSERT_EQ_INT(baton__kernels_set_level(-1), best);
}

/* AdamW over n elements from fixed inputs, into w, m, v */
static void adamw_case(float *w, float *m, float *v, const float *g, const float *w0, const float *m0,
                       const float *v0, size_t n) {
    memcpy(w, w0, n * sizeof *w);
    memcpy(m, m0, n * sizeof *m);
    memcpy(v, v0, n * sizeof *v);
    baton__adamw(w, g, m, v, n, 3e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f / (1.0f - 0.9f), 1.0f / (1.0f - 0.95f));
}

TEST(adamw_matches_reference_every_size_and_level) {
    /* body and tail sizes, and sizes over several 4096 blocks (and over BATON__PAR_MIN: the threaded path) */
    static const size_t ns[] = {1, 15, 16, 17, 33, 4095, 4096, 4097, 70001};
    enum { NMAX = 70001 };
    float *g = malloc(NMAX * sizeof *g), *w0 = malloc(NMAX * sizeof *w0), *m0 = malloc(NMAX * sizeof *m0);
    float *v0 = malloc(NMAX * sizeof *v0), *w = malloc(NMAX * sizeof *w), *m = malloc(NMAX * sizeof *m);
    float *v = malloc(NMAX * sizeof *v), *wr = malloc(NMAX * sizeof *wr);
    baton_rng r;
    baton_rng_seed(&r, 11);
    fill(g, NMAX, &r, 1.0f);
    fill(w0, NMAX, &r, 0.5f);
    fill(m0, NMAX, &r, 0.1f);
    for (int i = 0; i < NMAX; i++) v0[i] = fabsf(0.01f * baton_rng_normal(&r));
    g[3] = 0.0f, v0[3] = 0.0f;   /* v = 0: the update is m c1 / eps */
    int best = baton__kernels_set_level(-1);
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        size_t n = ns[s];
        baton__kernels_set_level(0);   /* the baseline copy: the reference bits */
        adamw_case(wr, m, v, g, w0, m0, v0, n);
        for (size_t i = 0; i < n; i++) {
            double c1 = 1.0 / (1.0 - 0.9f), c2 = 1.0 / (1.0 - 0.95f);
            double mi = 0.9f * (double)m0[i] + (1.0 - 0.9f) * g[i];
            double vi = 0.95f * (double)v0[i] + (1.0 - 0.95f) * (double)g[i] * g[i];
            double upd = 3e-3f * (0.1f * (double)w0[i] + mi * c1 / (sqrt(vi * c2) + 1e-8f));
            /* float rounding relative to the terms' magnitudes (m and w are differences) */
            NEAR(m[i], mi, 1e-6 * (fabs(0.9 * m0[i]) + fabs(0.1 * g[i])), 0.0);
            NEAR(v[i], vi, 1e-12, 1e-6);
            NEAR(wr[i], (double)w0[i] - upd, 1e-6 * (fabs(w0[i]) + fabs(upd)), 0.0);
        }
        for (int l = 1; l <= best; l++) {
            baton__kernels_set_level(l);
            adamw_case(w, m, v, g, w0, m0, v0, n);
            ASSERT_TRUE(memcmp(w, wr, n * sizeof *w) == 0);
        }
    }
    baton__kernels_set_level(-1);
    free(g), free(w0), free(m0), free(v0), free(w), free(m), free(v), free(wr);
}

TEST(sumsq_and_scale_do_not_depend_on_the_thread_count) {
    /* sizes of one block, several 32768 blocks with a tail, and past 1024 blocks (a larger block) */
    static const size_t ns[] = {5, 32768, 4 * 32768 + 7, 1024 * 32768 + 100};
    float *x = malloc((1024 * 32768 + 100) * sizeof *x), *y = malloc((1024 * 32768 + 100) * sizeof *y);
    baton_rng r;
    baton_rng_seed(&r, 12);
    for (size_t i = 0; i < 1024 * 32768 + 100; i++) x[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    fill(x, 1000, &r, 1.0f);
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        size_t n = ns[s];
        double want = 0.0;
        for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
        baton_set_threads(1);
        double one = baton__sumsq(x, n);
        memcpy(y, x, n * sizeof *y);
        baton__scale(y, n, 0.75f);
        baton_set_threads(2);
        ASSERT_TRUE(baton__sumsq(x, n) == one);
        NEAR(one, want, 0.0, 1e-6);
        for (size_t i = 0; i < n; i++) ASSERT_TRUE(y[i] == x[i] * 0.75f);
        memcpy(y, x, n * sizeof *y);
        baton__scale(y, n, 0.75f);
        for (size_t i = 0; i < n; i++) ASSERT_TRUE(y[i] == x[i] * 0.75f);
    }
    free(x), free(y);
}

/* The bias gradient's column sums run in one block of columns per thread, four rows per pass over the block:
 * every column's rows are added in order, so the bits are a serial float loop's, for 1, 2 and 3 threads (blocks
 * of 336 columns for 1003), beta 0 and 1, widths with a partial block and a tail that is not a whole vector, row
 * counts that are not a multiple of four, and sizes below the threading threshold. */
TEST(colsum_matches_the_serial_sum_for_any_thread_count) {
    static const int shapes[][2] = {{400, 1003}, {4096, 96}, {64, 1536}, {7, 5}, {4099, 1152}};
    baton_rng r;
    baton_rng_seed(&r, 21);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1];
        float *g = malloc((size_t)m * n * sizeof *g), *want = malloc((size_t)n * sizeof *want);
        float *db = malloc((size_t)n * sizeof *db);
        fill(g, m * n, &r, 1.0f);
        for (int beta = 0; beta <= 1; beta++)
            for (int thr = 1; thr <= 3; thr++) {
                for (int j = 0; j < n; j++) {
                    volatile float acc = beta ? 0.25f * (float)j : 0.0f;
                    for (int i = 0; i < m; i++) acc += g[(size_t)i * n + j];
                    want[j] = acc;
                    db[j] = beta ? 0.25f * (float)j : 12345.0f;
                }
                baton_set_threads(thr);
                baton__colsum(db, g, m, n, beta ? 1.0f : 0.0f);
                ASSERT_TRUE(!memcmp(db, want, (size_t)n * sizeof *db));
            }
        free(g), free(want), free(db);
    }
    baton_set_threads(1);
}

/* The fused linear layer saves GELU's derivative in the forward (baton__gelu_fwd_d) and its backward multiplies:
 * the activation and dy * derivative must be the bits of baton__gelu_fwd and baton__gelu_bwd, at every size and
 * instruction set, also with the derivative written over the input. */
TEST(gelu_saved_derivative_gives_the_backward_bits) {
    baton_rng r;
    baton_rng_seed(&r, 31);
    for (int lv = 1; lv >= 0; lv--) {
        baton__kernels_set_level(lv);
        for (int s = 0; s < NSIZES; s++) {
            int n = sizes[s], m = 3;
            float *x = malloc((size_t)m * n * sizeof *x), *b = malloc((size_t)n * sizeof *b);
            float *y = malloc((size_t)m * n * sizeof *y), *pre = malloc((size_t)m * n * sizeof *pre);
            float *y2 = malloc((size_t)m * n * sizeof *y2), *d = malloc((size_t)m * n * sizeof *d);
            float *dy = malloc((size_t)m * n * sizeof *dy), *dx = malloc((size_t)m * n * sizeof *dx);
            fill(x, m * n, &r, 3.0f);
            fill(b, n, &r, 1.0f);
            fill(dy, m * n, &r, 1.0f);
            baton__gelu_fwd(y, pre, x, b, m, n);
            baton__gelu_bwd(dx, dy, pre, (size_t)m * n, 0.0f);
            memcpy(d, x, (size_t)m * n * sizeof *d);
            baton__gelu_fwd_d(y2, d, d, b, m, n);   /* in place over the input, as the bf16-only path does */
            ASSERT_TRUE(!memcmp(y, y2, (size_t)m * n * sizeof *y));
            for (int i = 0; i < m * n; i++) {
                float g = dy[i] * d[i];
                ASSERT_TRUE(!memcmp(&g, &dx[i], sizeof g));
            }
            free(x), free(b), free(y), free(pre), free(y2), free(d), free(dy), free(dx);
        }
    }
    baton__kernels_set_level(-1);
}
