/* test_nn_grad.c: every op's backward against central finite differences (per-op tolerances), and the
 * sgemm path against the naive reference kernel.
 *
 * Method: for an op y = f(inputs), the test loss is L = sum(y * R) for a fixed random R (computed with a
 * (1,n) @ (n,1) matmul so the tape sees a scalar). Each checked input element is nudged by +-h and
 * (L+ - L-) / 2h is compared with the analytic gradient: |fd - an| <= atol + rtol * |an|.
 * Kinks: ReLU inputs are kept at least 0.05 away from 0 and max-pool windows hold distinct values at
 * least 0.01 apart, so +-h never crosses a kink (h = 1e-3 there). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "harness.h"
#include "nn/nn_impl.h"

#define MAX_IN 3
typedef struct {
    int n_in;
    int ndim[MAX_IN];
    int shape[MAX_IN][4];
    float *data[MAX_IN];       /* host copies of the inputs */
    float *grad[MAX_IN];       /* analytic gradients */
    int grad_of[MAX_IN];       /* 1 = check this input */
    const int32_t *ids;        /* labels / ids */
    int iarg[4];
    float farg;
    float *r;                  /* loss weights, out_n */
    size_t out_n;
} gc_case;

typedef baton_tensor *(*op_fn)(baton_tape *t, baton_tensor **in, gc_case *c);

static size_t numel(const gc_case *c, int i) {
    size_t n = 1;
    for (int d = 0; d < c->ndim[i]; d++) n *= (size_t)c->shape[i][d];
    return n;
}

/* Runs forward (and backward when want_grad) on a fresh tape seeded identically; returns L. */
static double run_case(op_fn fn, gc_case *c, int want_grad) {
    baton_tape *t = baton_tape_new(NULL, 42);
    baton_tape_reset(t, 1);
    baton_tensor *in[MAX_IN];
    for (int i = 0; i < c->n_in; i++) {
        in[i] = baton_tape_tensor(t, c->ndim[i], c->shape[i], c->grad_of[i]);
        memcpy(in[i]->data, c->data[i], numel(c, i) * sizeof(float));
    }
    baton_tensor *y = fn(t, in, c);
    if (!c->r) {
        c->out_n = y->n;
        c->r = malloc(y->n * sizeof(float));
        baton_rng rng;
        baton_rng_seed(&rng, 7);
        for (size_t i = 0; i < y->n; i++) c->r[i] = 2.0f * baton_rng_uniform(&rng) - 1.0f;
    }
    ASSERT_EQ_U64(y->n, c->out_n);
    baton_tensor *yv = baton_tape_tensor(t, 2, (int[]){1, 1}, 0);   /* storage for a (1,n) view of y */
    *yv = *y;
    yv->ndim = 2;
    yv->shape[0] = 1;
    yv->shape[1] = (int)y->n;
    baton_tensor *rr = baton_tape_input(t, 2, (int[]){(int)y->n, 1}, c->r);
    baton_tensor *loss = baton_matmul(t, yv, rr, 0);
    double l = loss->data[0];
    if (want_grad) {
        baton_tape_backward(t, loss, 1.0f);
        for (int i = 0; i < c->n_in; i++)
            if (c->grad_of[i]) memcpy(c->grad[i], in[i]->grad, numel(c, i) * sizeof(float));
    }
    baton_tape_free(t);
    return l;
}

static void add_input(gc_case *c, int ndim, const int *shape, int check, baton_rng *rng, float lo, float hi) {
    int i = c->n_in++;
    c->ndim[i] = ndim;
    memcpy(c->shape[i], shape, (size_t)ndim * sizeof(int));
    size_t n = numel(c, i);
    c->data[i] = malloc(n * sizeof(float));
    c->grad[i] = calloc(n, sizeof(float));
    c->grad_of[i] = check;
    for (size_t k = 0; k < n; k++) c->data[i][k] = lo + (hi - lo) * baton_rng_uniform(rng);
}

static void away_from_zero(float *x, size_t n, float margin) {
    for (size_t k = 0; k < n; k++)
        if (fabsf(x[k]) < margin) x[k] = x[k] < 0 ? -margin - fabsf(x[k]) : margin + x[k];
}

static void check_grads(const char *what, op_fn fn, gc_case *c, float h, float atol, float rtol) {
    run_case(fn, c, 1);
    for (int i = 0; i < c->n_in; i++) {
        if (!c->grad_of[i]) continue;
        size_t n = numel(c, i), stride = n > 40 ? n / 40 : 1;   /* up to ~40 elements per input */
        for (size_t k = 0; k < n; k += stride) {
            float keep = c->data[i][k];
            c->data[i][k] = keep + h;
            double lp = run_case(fn, c, 0);
            c->data[i][k] = keep - h;
            double lm = run_case(fn, c, 0);
            c->data[i][k] = keep;
            double fd = (lp - lm) / (2.0 * h), an = c->grad[i][k];
            if (!(fabs(fd - an) <= atol + rtol * fabs(an)))
                th_fail(__FILE__, __LINE__, "%s: input %d element %zu: finite difference %.6g vs backward %.6g", what,
                        i, k, fd, an);
        }
    }
    for (int i = 0; i < c->n_in; i++) {
        free(c->data[i]);
        free(c->grad[i]);
    }
    free(c->r);
    memset(c, 0, sizeof *c);
}

/* ---- op wrappers ----------------------------------------------------------------------------------- */
static baton_tensor *f_matmul(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_matmul(t, in[0], in[1], c->iarg[0]); }
static baton_tensor *f_bias(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_bias_add(t, in[0], in[1]); }
static baton_tensor *f_relu(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_relu(t, in[0]); }
static baton_tensor *f_gelu(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_gelu(t, in[0]); }
static baton_tensor *f_tanh(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_tanh(t, in[0]); }
static baton_tensor *f_linear(baton_tape *t, baton_tensor **in, gc_case *c) {
    return baton_linear(t, in[0], in[1], c->n_in > 2 ? in[2] : NULL, c->iarg[0]);
}
static baton_tensor *f_ce(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_cross_entropy(t, in[0], c->ids); }
static baton_tensor *f_logsm(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_log_softmax(t, in[0]); }
static baton_tensor *f_conv(baton_tape *t, baton_tensor **in, gc_case *c) {
    return baton_conv2d(t, in[0], in[1], c->n_in > 2 ? in[2] : NULL, c->iarg[0], c->iarg[1]);
}
static baton_tensor *f_pool(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_maxpool2d(t, in[0], c->iarg[0]); }
static baton_tensor *f_flatten_linear(baton_tape *t, baton_tensor **in, gc_case *c) {
    (void)c;   /* flatten is a view: its gradient must reach the 4-D input through the linear layer */
    return baton_linear(t, baton_flatten(t, in[0]), in[1], NULL, BATON_ACT_NONE);
}
static baton_tensor *f_dropout(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_dropout(t, in[0], c->farg); }
static baton_tensor *f_ln(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_layernorm(t, in[0], in[1], in[2], c->farg); }
static baton_tensor *f_emb(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_embedding(t, c->ids, c->iarg[0], in[0]); }
/* a small chain: tanh(x) used twice (two contributions accumulate into one gradient) */
static baton_tensor *f_reuse(baton_tape *t, baton_tensor **in, gc_case *c) {
    (void)c;
    baton_tensor *h = baton_tanh(t, in[0]);
    return baton_matmul(t, h, baton_gelu(t, h), 1);
}

TEST(grad_matmul_both_layouts) {
    baton_rng r;
    baton_rng_seed(&r, 1);
    for (int tw = 0; tw <= 1; tw++) {
        gc_case c = {0};
        add_input(&c, 2, (int[]){5, 7}, 1, &r, -1, 1);
        add_input(&c, 2, tw ? (int[]){6, 7} : (int[]){7, 6}, 1, &r, -1, 1);
        c.iarg[0] = tw;
        check_grads(tw ? "matmul (trans_w)" : "matmul", f_matmul, &c, 1e-2f, 2e-3f, 1e-2f);
    }
}

TEST(grad_bias_add) {
    baton_rng r;
    baton_rng_seed(&r, 2);
    gc_case c = {0};
    add_input(&c, 2, (int[]){4, 9}, 1, &r, -1, 1);
    add_input(&c, 1, (int[]){9}, 1, &r, -1, 1);
    check_grads("bias_add", f_bias, &c, 1e-2f, 2e-3f, 1e-2f);
}

TEST(grad_activations) {
    baton_rng r;
    baton_rng_seed(&r, 3);
    gc_case c = {0};
    add_input(&c, 2, (int[]){6, 11}, 1, &r, -2, 2);
    away_from_zero(c.data[0], 66, 0.05f);   /* ReLU kink */
    check_grads("relu", f_relu, &c, 1e-3f, 2e-3f, 1e-2f);
    add_input(&c, 2, (int[]){6, 11}, 1, &r, -3, 3);
    check_grads("gelu", f_gelu, &c, 1e-2f, 2e-3f, 1e-2f);
    add_input(&c, 2, (int[]){6, 11}, 1, &r, -2, 2);
    check_grads("tanh", f_tanh, &c, 1e-2f, 2e-3f, 1e-2f);
}

TEST(grad_linear_fused_each_activation) {
    const char *names[] = {"linear", "linear+relu", "linear+gelu", "linear+tanh"};
    for (int act = BATON_ACT_NONE; act <= BATON_ACT_TANH; act++)
        for (int bias = 0; bias <= 1; bias++) {
            baton_rng r;
            baton_rng_seed(&r, 10 + act);
            gc_case c = {0};
            add_input(&c, 2, (int[]){5, 8}, 1, &r, -1, 1);
            add_input(&c, 2, (int[]){7, 8}, 1, &r, -0.5f, 0.5f);
            if (bias) add_input(&c, 1, (int[]){7}, 1, &r, -0.5f, 0.5f);
            c.iarg[0] = act;
            /* ReLU: pre-activations near 0 would straddle the kink; h small, tolerance as the others */
            float h = act == BATON_ACT_RELU ? 1e-3f : 1e-2f;
            if (act == BATON_ACT_RELU) {
                /* nudge x so that no pre-activation is within 0.02 of zero (checked, not assumed) */
                for (int tries = 0; tries < 50; tries++) {
                    int ok = 1;
                    for (int i = 0; i < 5 && ok; i++)
                        for (int o = 0; o < 7 && ok; o++) {
                            float s = bias ? c.data[2][o] : 0.0f;
                            for (int k = 0; k < 8; k++) s += c.data[0][i * 8 + k] * c.data[1][o * 8 + k];
                            if (fabsf(s) < 0.02f) {
                                ok = 0;
                                c.data[0][i * 8 + (tries % 8)] += 0.1f;
                            }
                        }
                    if (ok) break;
                }
            }
            check_grads(names[act], f_linear, &c, h, 3e-3f, 1e-2f);
        }
}

TEST(grad_cross_entropy_and_log_softmax) {
    baton_rng r;
    baton_rng_seed(&r, 4);
    int32_t labels[6] = {0, 3, 4, 1, 2, 4};
    gc_case c = {0};
    add_input(&c, 2, (int[]){6, 5}, 1, &r, -3, 3);
    c.ids = labels;
    check_grads("cross_entropy", f_ce, &c, 1e-2f, 1e-3f, 1e-2f);
    add_input(&c, 2, (int[]){6, 5}, 1, &r, -3, 3);
    check_grads("log_softmax", f_logsm, &c, 1e-2f, 2e-3f, 1e-2f);
}

TEST(grad_conv2d) {
    int geo[][2] = {{1, 1}, {2, 0}, {1, 0}};   /* (stride, pad) */
    for (int g = 0; g < 3; g++) {
        baton_rng r;
        baton_rng_seed(&r, 5 + g);
        gc_case c = {0};
        add_input(&c, 4, (int[]){2, 3, 6, 6}, 1, &r, -1, 1);
        add_input(&c, 4, (int[]){4, 3, 3, 3}, 1, &r, -0.5f, 0.5f);
        add_input(&c, 1, (int[]){4}, 1, &r, -0.5f, 0.5f);
        c.iarg[0] = geo[g][0];
        c.iarg[1] = geo[g][1];
        check_grads("conv2d", f_conv, &c, 1e-2f, 3e-3f, 1e-2f);
    }
}

TEST(grad_maxpool_and_flatten) {
    baton_rng r;
    baton_rng_seed(&r, 6);
    gc_case c = {0};
    add_input(&c, 4, (int[]){2, 3, 4, 6}, 1, &r, 0, 1);
    /* distinct values 0.01 apart in a shuffled order: no ties, no kink within +-h */
    size_t n = 2 * 3 * 4 * 6;
    for (size_t i = 0; i < n; i++) c.data[0][i] = 0.01f * (float)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = baton_rng_below(&r, i + 1);
        float tmp = c.data[0][i];
        c.data[0][i] = c.data[0][j];
        c.data[0][j] = tmp;
    }
    c.iarg[0] = 2;
    check_grads("maxpool2d", f_pool, &c, 1e-3f, 2e-3f, 1e-2f);
    add_input(&c, 4, (int[]){3, 2, 2, 2}, 1, &r, -1, 1);
    add_input(&c, 2, (int[]){5, 8}, 1, &r, -1, 1);
    check_grads("flatten", f_flatten_linear, &c, 1e-2f, 2e-3f, 1e-2f);
}

TEST(grad_dropout_layernorm_embedding) {
    baton_rng r;
    baton_rng_seed(&r, 8);
    gc_case c = {0};
    add_input(&c, 2, (int[]){8, 16}, 1, &r, -1, 1);
    c.farg = 0.3f;
    check_grads("dropout", f_dropout, &c, 1e-2f, 2e-3f, 1e-2f);
    add_input(&c, 2, (int[]){5, 12}, 1, &r, -2, 2);
    add_input(&c, 1, (int[]){12}, 1, &r, 0.5f, 1.5f);
    add_input(&c, 1, (int[]){12}, 1, &r, -0.5f, 0.5f);
    c.farg = 1e-5f;
    check_grads("layernorm", f_ln, &c, 1e-2f, 5e-3f, 2e-2f);
    int32_t ids[7] = {2, 0, 2, 5, 1, 5, 5};   /* repeated ids: contributions must add */
    add_input(&c, 2, (int[]){6, 4}, 1, &r, -1, 1);
    c.ids = ids;
    c.iarg[0] = 7;
    check_grads("embedding", f_emb, &c, 1e-2f, 2e-3f, 1e-2f);
}

TEST(grad_accumulates_when_a_tensor_is_used_twice) {
    baton_rng r;
    baton_rng_seed(&r, 9);
    gc_case c = {0};
    add_input(&c, 2, (int[]){4, 6}, 1, &r, -1, 1);
    check_grads("reuse", f_reuse, &c, 1e-2f, 3e-3f, 1e-2f);
}

static baton_tensor *f_attn(baton_tape *t, baton_tensor **in, gc_case *c) { return baton_attention(t, in[0], c->iarg[0], c->iarg[1]); }
static baton_tensor *f_add(baton_tape *t, baton_tensor **in, gc_case *c) { (void)c; return baton_add(t, in[0], in[1]); }
/* the GPT's tied head: the same table embeds ids and, transposed, maps rows back to vocabulary logits */
static baton_tensor *f_tied(baton_tape *t, baton_tensor **in, gc_case *c) {
    baton_tensor *e = baton_embedding(t, c->ids, c->iarg[0], in[0]);
    return baton_matmul(t, baton_add(t, e, in[1]), in[0], 1);
}

TEST(grad_attention_add_and_tied_head) {
    baton_rng r;
    baton_rng_seed(&r, 10);
    gc_case c = {0};
    /* B=2 sequences of T=5, H=2 heads of D=3: qkv (10, 18); values up to 2 so the softmax is not flat */
    add_input(&c, 2, (int[]){10, 18}, 1, &r, -2, 2);
    c.iarg[0] = 2;
    c.iarg[1] = 2;
    check_grads("attention", f_attn, &c, 1e-2f, 3e-3f, 2e-2f);
    add_input(&c, 2, (int[]){1, 12}, 1, &r, -2, 2);   /* T=1: one position attends to itself only */
    c.iarg[0] = 1;
    c.iarg[1] = 2;
    check_grads("attention T=1", f_attn, &c, 1e-2f, 3e-3f, 2e-2f);
    add_input(&c, 2, (int[]){4, 6}, 1, &r, -1, 1);
    add_input(&c, 2, (int[]){4, 6}, 1, &r, -1, 1);
    check_grads("add", f_add, &c, 1e-2f, 2e-3f, 1e-2f);
    int32_t ids[5] = {3, 0, 3, 1, 2};
    add_input(&c, 2, (int[]){4, 6}, 1, &r, -1, 1);    /* table (V=4, C=6) */
    add_input(&c, 2, (int[]){5, 6}, 1, &r, -1, 1);    /* a residual stream added to the embedding */
    c.ids = ids;
    c.iarg[0] = 5;
    check_grads("tied head", f_tied, &c, 1e-2f, 3e-3f, 2e-2f);
}

/* Changing qkv rows of later positions never changes an earlier position's output. */
TEST(attention_is_causal) {
    int b = 2, tt = 6, h = 2, c3 = 3 * 8;
    float x[2 * 6 * 24], x2[2 * 6 * 24], y1[2 * 6 * 8];
    baton_rng r;
    baton_rng_seed(&r, 11);
    for (int i = 0; i < b * tt * c3; i++) x[i] = x2[i] = 2.0f * baton_rng_uniform(&r) - 1.0f;
    baton_tape *t = baton_tape_new(NULL, 1);
    for (int cut = 0; cut < tt; cut++) {
        baton_tape_reset(t, 0);
        baton_tensor *y = baton_attention(t, baton_tape_input(t, 2, (int[]){b * tt, c3}, x), b, h);
        memcpy(y1, y->data, sizeof y1);
        memcpy(x2, x, sizeof x2);
        for (int bi = 0; bi < b; bi++)
            for (int i = cut + 1; i < tt; i++)
                for (int j = 0; j < c3; j++) x2[(bi * tt + i) * c3 + j] += 1.5f;
        baton_tape_reset(t, 0);
        y = baton_attention(t, baton_tape_input(t, 2, (int[]){b * tt, c3}, x2), b, h);
        int later_changed = 0;
        for (int bi = 0; bi < b; bi++)
            for (int i = 0; i < tt; i++)
                for (int j = 0; j < 8; j++) {
                    float d = fabsf(y->data[(bi * tt + i) * 8 + j] - y1[(bi * tt + i) * 8 + j]);
                    if (i <= cut) ASSERT_TRUE(d == 0.0f);
                    else later_changed |= d > 1e-4f;
                }
        ASSERT_TRUE(cut == tt - 1 || later_changed);
    }
    baton_tape_free(t);
}

/* Attention over several causal row blocks (src/nn/ops_attn.c runs the products on blocks of 64 query rows and
 * key columns, skipping the keys a block cannot see): T = 131 is two whole blocks and a tail of 3. Y and the
 * gradient of qkv against the formulas in double, for both f32 backends. */
TEST(attention_row_blocks_match_a_double_reference) {
    enum { B = 2, T = 131, H = 2, D = 4, C = H * D, L = 3 * C };
    float *x = malloc(B * T * L * sizeof *x), *gy = malloc(B * T * C * sizeof *gy);
    double *y = calloc(B * T * C, sizeof *y), *dx = calloc(B * T * L, sizeof *dx);
    double *p = malloc(T * T * sizeof *p), *dp = malloc(T * T * sizeof *dp);
    baton_rng r;
    baton_rng_seed(&r, 21);
    for (int i = 0; i < B * T * L; i++) x[i] = 2.0f * baton_rng_uniform(&r) - 1.0f;
    for (int i = 0; i < B * T * C; i++) gy[i] = 2.0f * baton_rng_uniform(&r) - 1.0f;
    double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = x + (size_t)b * T * L + h * D, *k = q + C, *v = q + 2 * C;
            double *dq = dx + (size_t)b * T * L + h * D, *dk = dq + C, *dv = dq + 2 * C;
            const float *g = gy + (size_t)b * T * C + h * D;
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (int e = 0; e < D; e++) s += (double)q[i * L + e] * k[j * L + e];
                    p[i * T + j] = s * scale;
                    mx = fmax(mx, s * scale);
                }
                for (int j = 0; j <= i; j++) sum += p[i * T + j] = exp(p[i * T + j] - mx);
                for (int j = 0; j <= i; j++) {
                    p[i * T + j] /= sum;
                    for (int e = 0; e < D; e++) y[((size_t)b * T + i) * C + h * D + e] += p[i * T + j] * v[j * L + e];
                }
                double dot = 0.0;
                for (int j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (int e = 0; e < D; e++) s += (double)g[i * C + e] * v[j * L + e];
                    dp[i * T + j] = s;
                    dot += p[i * T + j] * s;
                    for (int e = 0; e < D; e++) dv[j * L + e] += p[i * T + j] * g[i * C + e];
                }
                for (int j = 0; j <= i; j++) {
                    double ds = p[i * T + j] * (dp[i * T + j] - dot) * scale;
                    for (int e = 0; e < D; e++) {
                        dq[i * L + e] += ds * k[j * L + e];
                        dk[j * L + e] += ds * q[i * L + e];
                    }
                }
            }
        }
    /* bf16 (--precision bf16 on a CPU with AVX512_BF16): the products on rounded operands, each sequence's heads
     * batched on its own thread (2 threads, 2 sequences); within a bf16 tolerance of the reference, and not the f32
     * path's result (which would mean the bf16 products did not run) */
    float *y32 = malloc(B * T * C * sizeof *y32);
    baton_set_threads(2);
    for (int be = BATON_GEMM_OPENBLAS; be <= BATON_GEMM_ONEDNN_BF16; be++) {
        if (be == BATON_GEMM_ONEDNN_BF16 && !baton_gemm_bf16_available()) break;
        baton_tape *t = baton_tape_new(NULL, 1);
        ASSERT_OK(baton_tape_set_gemm(t, (baton_gemm_backend)be));
        baton_tape_reset(t, 1);
        baton_tensor *in = baton_tape_tensor(t, 2, (int[]){B * T, L}, 1);
        memcpy(in->data, x, B * T * L * sizeof *x);
        baton_tensor *out = baton_attention(t, in, B, H);
        double tol = be == BATON_GEMM_ONEDNN_BF16 ? 2e-2 : 1e-5, ymax = 0, dxmax = 0, ydiff = 0;
        for (int i = 0; i < B * T * C; i++) ymax = fmax(ymax, fabs(y[i]));
        for (int i = 0; i < B * T * L; i++) dxmax = fmax(dxmax, fabs(dx[i]));
        for (int i = 0; i < B * T * C; i++) ASSERT_NEAR(out->data[i], y[i], tol * (tol > 1e-4 ? ymax : 1.0));
        if (be == BATON_GEMM_ONEDNN) memcpy(y32, out->data, B * T * C * sizeof *y32);
        for (int i = 0; i < B * T * C; i++) ydiff = fmax(ydiff, fabs(out->data[i] - y32[i]));
        if (be == BATON_GEMM_ONEDNN_BF16) ASSERT_TRUE(ydiff > 1e-6 * ymax);
        /* loss = <Y, gy> as a (1, n) x (n, 1) product, so dY = gy */
        baton_tensor *yv = baton_tape_tensor(t, 2, (int[]){1, 1}, 0);
        *yv = *out;
        yv->shape[0] = 1;
        yv->shape[1] = B * T * C;
        baton_tensor *loss = baton_matmul(t, yv, baton_tape_input(t, 2, (int[]){B * T * C, 1}, gy), 0);
        baton_tape_backward(t, loss, 1.0f);
        for (int i = 0; i < B * T * L; i++) ASSERT_NEAR(in->grad[i], dx[i], tol * (tol > 1e-4 ? dxmax : 1.0));
        baton_tape_free(t);
    }
    free(x), free(gy), free(y), free(dx), free(p), free(dp), free(y32);
}

TEST(dropout_is_identity_when_evaluating_and_scales_when_training) {
    baton_tape *t = baton_tape_new(NULL, 3);
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = 1.0f;
    baton_tape_reset(t, 0);
    baton_tensor *in = baton_tape_input(t, 2, (int[]){10, 100}, x);
    ASSERT_TRUE(baton_dropout(t, in, 0.5f) == in);
    baton_tape_reset(t, 1);
    in = baton_tape_input(t, 2, (int[]){10, 100}, x);
    baton_tensor *y = baton_dropout(t, in, 0.5f);
    int zeros = 0;
    for (int i = 0; i < 1000; i++) {
        ASSERT_TRUE(y->data[i] == 0.0f || y->data[i] == 2.0f);
        zeros += y->data[i] == 0.0f;
    }
    ASSERT_TRUE(zeros > 400 && zeros < 600);
    baton_tape_free(t);
}

TEST(sgemm_matches_naive_reference_all_layouts) {
    baton_rng r;
    baton_rng_seed(&r, 11);
    int dims[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 70, 65}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                int m = dims[d][0], n = dims[d][1], k = dims[d][2];
                float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
                float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
                for (int i = 0; i < m * k; i++) a[i] = baton_rng_normal(&r);
                for (int i = 0; i < k * n; i++) b[i] = baton_rng_normal(&r);
                for (int i = 0; i < m * n; i++) c1[i] = c2[i] = baton_rng_normal(&r);
                baton_matmul_naive(c1, a, b, m, n, k, ta, tb, 1.0f);
                baton__sgemm(ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n, 1.0f, c2, n);
                for (int i = 0; i < m * n; i++) ASSERT_NEAR(c1[i], c2[i], 1e-4 * (1 + k));
                free(a);
                free(b);
                free(c1);
                free(c2);
            }
}
