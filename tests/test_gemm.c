/* test_gemm.c: the matrix-multiply backends of the transformer ops (src/nn/gemm.c): every layout (transposes,
 * leading dimensions wider than the matrix, beta 0 and 1) of OpenBLAS, oneDNN f32 and oneDNN bf16 against a
 * double-precision reference; bf16 is exactly "round the operands to bf16, accumulate in f32"; the weight copies
 * are converted once per forward and refreshed after the weights change; a bf16 GPT trains like the f32 one.
 * The libraries are loaded on first use (src/nn/libs.c): nothing maps them before, and neither `baton
 * --version` nor a whole `baton run` job with baton_init and an all-reduce loads them (issue 8, startup). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/gpt.h"
#include "baton/nn.h"
#include "harness.h"
#include "nn/nn_impl.h"

/* 1 when /proc/self/maps has a mapping whose path contains name */
static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT_TRUE(f != NULL);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

static void fill(float *x, size_t n, baton_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = baton_rng_normal(r);
}

/* c (m,n; ldc) = beta*c + op(a) @ op(b) in double; round: operands rounded to bf16 first */
static void reference(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                      double *c, int ldc, int round, double *absum) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0, s = 0.0;
            for (int p = 0; p < k; p++) {
                float av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                float bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                if (round) {
                    av = baton__bf16_round(av);
                    bv = baton__bf16_round(bv);
                }
                acc += (double)av * bv;
                s += fabs((double)av * bv);
            }
            c[(size_t)i * ldc + j] = acc + beta * c[(size_t)i * ldc + j];
            absum[(size_t)i * ldc + j] = s + fabs(beta * c[(size_t)i * ldc + j]);
        }
}

static void check_layouts(baton_gemm_backend be) {
    baton_rng r;
    baton_rng_seed(&r, 11);
    const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 96, 128}, {130, 3, 257}};
    int checked = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;   /* strided views */
                    float beta = (float)bi;
                    float *a = malloc((size_t)(ta ? k : m) * lda * sizeof *a), *b = malloc((size_t)(tb ? n : k) * ldb * sizeof *b);
                    float *c = malloc((size_t)m * ldc * sizeof *c);
                    double *ref = malloc((size_t)m * ldc * sizeof *ref), *abs_ = malloc((size_t)m * ldc * sizeof *abs_);
                    fill(a, (size_t)(ta ? k : m) * lda, &r);
                    fill(b, (size_t)(tb ? n : k) * ldb, &r);
                    fill(c, (size_t)m * ldc, &r);
                    for (size_t i = 0; i < (size_t)m * ldc; i++) ref[i] = c[i];
                    reference(ta, tb, m, n, k, a, lda, b, ldb, beta, ref, ldc, be == BATON_GEMM_ONEDNN_BF16, abs_);
                    float pad = c[n];   /* a column past n in row 0: must not be written */
                    baton_gemm(be, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) {
                            size_t ij = (size_t)i * ldc + j;
                            /* f32 accumulation of k products: error ~ k * 2^-24 * sum |a b| */
                            double tol = 1e-6 + 4.0 * k * 6e-8 * abs_[ij];
                            if (!(fabs(c[ij] - ref[ij]) <= tol))
                                th_fail(__FILE__, __LINE__, "backend %d ta %d tb %d %dx%dx%d beta %g: c[%d,%d] %.9g vs %.9g",
                                        (int)be, ta, tb, m, n, k, (double)beta, i, j, (double)c[ij], ref[ij]);
                        }
                    ASSERT_TRUE(c[n] == pad);
                    checked++;
                    free(a);
                    free(b);
                    free(c);
                    free(ref);
                    free(abs_);
                }
    ASSERT_EQ_INT(checked, 40);
}

TEST(math_libraries_are_mapped_on_first_use_only) {
    /* this test binary links libbaton.a as any program does: no math library at start */
    ASSERT_TRUE(mapped("libc.so") || mapped("libc-"));   /* the check itself reads the right file */
    ASSERT_TRUE(!mapped("libopenblas"));
    ASSERT_TRUE(!mapped("libdnnl"));
    ASSERT_TRUE(!mapped("libgomp"));
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 2, 1, 0, 3}, c[4] = {0};   /* (2,3) @ (3,2) */
    baton_gemm(BATON_GEMM_OPENBLAS, 0, 0, 2, 2, 3, a, 3, b, 2, 0.0f, c, 2);
    ASSERT_TRUE(c[0] == 5 && c[1] == 11 && c[2] == 14 && c[3] == 23);
    ASSERT_TRUE(mapped("libopenblas"));
    ASSERT_TRUE(!mapped("libdnnl"));
    /* asked for, oneDNN is loaded and used (its OpenMP comes with it) */
    baton_tape *t = baton_tape_new(NULL, 1);
    ASSERT_OK(baton_tape_set_gemm(t, BATON_GEMM_ONEDNN));
    baton_tape_free(t);
    ASSERT_TRUE(mapped("libdnnl"));
    memset(c, 0, sizeof c);
    baton_gemm(BATON_GEMM_ONEDNN, 0, 0, 2, 2, 3, a, 3, b, 2, 0.0f, c, 2);
    ASSERT_TRUE(c[0] == 5 && c[1] == 11 && c[2] == 14 && c[3] == 23);
    ASSERT_TRUE(mapped("libgomp"));
}

/* LD_DEBUG=files lists every object the dynamic loader maps, dlopen'ed ones too, in the launcher and in every
 * worker (they inherit the environment) */
TEST(baton_version_and_a_whole_run_load_no_math_library) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "LD_DEBUG=files %s --version 2>&1", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 0);
    ASSERT_CONTAINS(out, "file=libc.so");   /* the listing is there */
    ASSERT_TRUE(!strstr(out, "libdnnl") && !strstr(out, "libopenblas") && !strstr(out, "libgomp"));
    free(out);
    snprintf(cmd, sizeof cmd, "LD_DEBUG=files %s run -n 2 -- %s/tests/prog_topo 2>&1", th_baton(), th_build_dir());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 0);
    ASSERT_CONTAINS(out, "sum OK");
    ASSERT_CONTAINS(out, "needed by ");
    ASSERT_CONTAINS(out, "prog_topo [0]");   /* the workers' listings are there too */
    ASSERT_TRUE(!strstr(out, "libdnnl") && !strstr(out, "libopenblas") && !strstr(out, "libgomp"));
    free(out);
}

TEST(openblas_every_layout_matches_reference) { check_layouts(BATON_GEMM_OPENBLAS); }
TEST(onednn_f32_every_layout_matches_reference) { check_layouts(BATON_GEMM_ONEDNN); }

TEST(onednn_bf16_rounds_operands_and_accumulates_in_f32) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return;
    }
    check_layouts(BATON_GEMM_ONEDNN_BF16);
    /* and it is not f32: an operand with more than 8 significant bits changes the product */
    float a = 1.0f + 1.0f / 512.0f, b = 1.0f, c = 0.0f;
    baton_gemm(BATON_GEMM_ONEDNN_BF16, 0, 0, 1, 1, 1, &a, 1, &b, 1, 0.0f, &c, 1);
    ASSERT_TRUE(c == 1.0f);
    baton_gemm(BATON_GEMM_ONEDNN, 0, 0, 1, 1, 1, &a, 1, &b, 1, 0.0f, &c, 1);
    ASSERT_TRUE(c == a);
}

TEST(bf16_rounding_is_nearest_even) {
    ASSERT_TRUE(baton__bf16_round(1.0f) == 1.0f);
    ASSERT_TRUE(baton__bf16_round(1.0f + 1.0f / 256.0f) == 1.0f);                        /* tie: to even */
    ASSERT_TRUE(baton__bf16_round(1.0f + 3.0f / 256.0f) == 1.0f + 4.0f / 256.0f);         /* tie: to even */
    ASSERT_TRUE(baton__bf16_round(1.0f + 1.0f / 256.0f + 1.0f / 4096.0f) == 1.0f + 2.0f / 256.0f);
    ASSERT_TRUE(baton__bf16_round(-3.0f) == -3.0f);
    ASSERT_TRUE(isinf(baton__bf16_round(INFINITY)));
    ASSERT_TRUE(isnan(baton__bf16_round(NAN)));
}

/* The vector conversion (AVX512_BF16's vcvtneps2bf16, parallel over rows and over chunks of one long row)
 * gives the scalar rounding's bits for normal numbers, ties, infinities, and keeps NaN a NaN; also transposed
 * (the dW products' first operand), through a whole bf16 product against the rounded reference. */
TEST(bf16_vector_conversion_matches_the_scalar_rounding) {
    baton_gemm_bf16_available();   /* oneDNN's ISA decides whether the vector path runs */
    int n = 3 * 65536 + 7;         /* one row over BATON__PAR_MIN: chunks and a scalar tail */
    float *src = malloc((size_t)n * sizeof *src);
    uint16_t *dst = malloc((size_t)n * sizeof *dst);
    baton_rng r;
    baton_rng_seed(&r, 3);
    for (int i = 0; i < n; i++) {
        float v = baton_rng_normal(&r) * powf(2.0f, (float)(i % 60 - 30));
        if (i % 5 == 0) {   /* exact ties: the bit below bf16's last one set, nothing under it */
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            u = (u & 0xffff0000u) | 0x8000u;
            memcpy(&v, &u, sizeof u);
        }
        src[i] = v;
    }
    src[1] = INFINITY;
    src[2] = -INFINITY;
    src[3] = NAN;
    src[4] = -0.0f;
    baton__to_bf16(dst, src, 1, n, n);
    for (int i = 0; i < n; i++) {
        uint32_t u = (uint32_t)dst[i] << 16;
        float got;
        memcpy(&got, &u, sizeof got);
        float want = baton__bf16_round(src[i]);
        if (i == 3) ASSERT_TRUE(isnan(got));
        else if (memcmp(&got, &want, sizeof got))
            th_fail(__FILE__, __LINE__, "element %d: %.9g rounds to %.9g, want %.9g", i, src[i], got, want);
    }
    baton__to_bf16(dst, src, 97, 1000, 1003);   /* rows with a leading dimension */
    for (int i = 0; i < 97; i++)
        for (int j = 0; j < 1000; j += 37) {
            uint32_t u = (uint32_t)dst[i * 1000 + j] << 16;
            float got, want = baton__bf16_round(src[i * 1003 + j]);
            memcpy(&got, &u, sizeof got);
            ASSERT_TRUE(!memcmp(&got, &want, sizeof got));
        }
    free(src);
    free(dst);
}

static const char text[] =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light.";

static void windows(int32_t *w, int b, int tl, int off) {
    for (int i = 0; i < b; i++)
        for (int j = 0; j <= tl; j++) w[i * (tl + 1) + j] = (unsigned char)text[(off + i * 13 + j) % (sizeof text - 1)];
}

/* The 2-layer GPT of the bf16 tests, or NULL (skipped) on a CPU without bf16 */
static baton_gpt *small_bf16_gpt(void) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return NULL;
    }
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = 16, .layers = 2, .heads = 2, .dim = 32};
    ASSERT_OK(baton_gpt_new(&g, &c, 5));
    return g;
}

TEST(bf16_weights_are_converted_once_per_forward_and_refreshed) {
    baton_gpt *g = small_bf16_gpt();
    if (!g) return;
    baton_params *p = baton_gpt_params(g);
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, BATON_GEMM_ONEDNN_BF16));
    int32_t w[4 * 17];
    windows(w, 4, 16, 0);
    baton_tape_reset(t, 1);
    baton_tensor *loss = baton_gpt_loss(g, t, w, 4, 16);
    baton_params_zero_grad(p);
    baton_tape_backward(t, loss, 1.0f);
    /* weights used as gemm operands: 4 matrices per block and the tied head, once each for forward+backward */
    ASSERT_EQ_U64(baton_tape_bf16_conversions(t), 4 * 2 + 1);
    /* and every other operand once per step: each of the 9 products' input (forward, reused by the weight
     * gradient) and output gradient (reused by the input gradient), not once per product (4 each). The inputs
     * (layer norms', attention's, GELU's outputs) are written in bf16 by the ops that produce them, and so are
     * the output gradients: GELU's backward, attention's (the qkv layers'), the residual adds' (the projections')
     * and cross-entropy's (the head's): nothing is left to convert. Each block's qkv layer also stores its output
     * as bf16 only (one kept entry more per block), which attention's bf16 products read */
    ASSERT_EQ_U64(t->kept_conversions, 0);
    ASSERT_EQ_INT(t->n_kept, 2 * (4 * 2 + 1) + 2);
    /* every kept copy, producer-written or converted, is its source's final value rounded (no stale or partly
     * written rows: the attention output's copy is written head by head) */
    ASSERT_EQ_INT(baton__kept_stale(t), 0);
    /* the check can fail: a copy paired with another tensor (two kept copies whose source was written) */
    int e0 = -1, e1 = -1;
    for (int i = 0; i < t->n_kept && e1 < 0; i++)
        for (int j = i + 1; j < t->n_kept && e1 < 0; j++)
            if (!t->kept[i].only && !t->kept[j].only && t->kept[i].rows == t->kept[j].rows &&
                t->kept[i].cols == t->kept[j].cols)
                e0 = i, e1 = j;
    ASSERT_TRUE(e1 >= 0);
    t->kept[e0].src = t->kept[e1].src;
    ASSERT_TRUE(baton__kept_stale(t) > 0);
    baton_tape_reset(t, 0);
    ASSERT_EQ_INT(baton__kept_stale(t), 0);
    float l1 = loss->data[0];
    /* the same weights again: same loss; change the head (tied embedding): a new forward sees the change */
    baton_tape_reset(t, 0);
    ASSERT_TRUE(baton_gpt_loss(g, t, w, 4, 16)->data[0] == l1);
    ASSERT_EQ_U64(baton_tape_bf16_conversions(t), 2 * (4 * 2 + 1));
    baton_tensor *wte = baton_params_tensor(p, 0);
    for (size_t i = 0; i < wte->n; i++) wte->data[i] *= 3.0f;
    baton_tape_reset(t, 0);
    float l2 = baton_gpt_loss(g, t, w, 4, 16)->data[0];
    ASSERT_TRUE(fabsf(l2 - l1) > 1e-3f);
    /* and it equals what a fresh tape computes */
    baton_tape *t2 = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t2, BATON_GEMM_ONEDNN_BF16));
    baton_tape_reset(t2, 0);
    ASSERT_TRUE(baton_gpt_loss(g, t2, w, 4, 16)->data[0] == l2);
    baton_tape_free(t2);
    baton_tape_free(t);
    baton_gpt_free(g);
}

/* AdamW steps of a small GPT on one backend; returns the losses */
static void train(baton_gemm_backend be, double *losses, int steps) {
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = 32, .layers = 2, .heads = 2, .dim = 64};
    ASSERT_OK(baton_gpt_new(&g, &c, 9));
    baton_params *p = baton_gpt_params(g);
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, be));
    baton_optim *opt;
    baton_optim_config oc = {.kind = BATON_OPTIM_ADAMW, .weight_decay = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
    ASSERT_OK(baton_optim_new(&opt, p, &oc));
    int32_t w[8 * 33];
    for (int s = 0; s < steps; s++) {
        windows(w, 8, 32, s * 7);
        baton_tape_reset(t, 1);
        baton_tensor *loss = baton_gpt_loss(g, t, w, 8, 32);
        baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 1.0f);
        baton_optim_step(opt, 3e-3f);
        losses[s] = loss->data[0];
    }
    baton_optim_free(opt);
    baton_tape_free(t);
    baton_gpt_free(g);
}

/* A product's output gradient gets its bf16 copy from the op that writes it only when that write is final: here
 * y feeds two adds, so the second add's backward (the first to run) must not round y's gradient, which the first
 * add's backward then changes; s feeds one add, which writes its copy. */
TEST(bf16_gradient_copies_only_from_final_writes) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return;
    }
    enum { M = 32, K = 8, N = 16 };
    baton_param_info v[2] = {{.name = "w", .ndim = 2, .shape = {N, K}}, {.name = "u", .ndim = 2, .shape = {N, K}}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 2));
    for (int i = 0; i < 2; i++) {
        baton_tensor *w = baton_params_tensor(p, i);
        for (size_t j = 0; j < w->n; j++) w->data[j] = 0.3f * sinf(0.7f * (float)j + (float)i);
    }
    float x[M * K];
    int32_t labels[M];
    for (int i = 0; i < M * K; i++) x[i] = cosf(0.37f * (float)i);
    for (int i = 0; i < M; i++) labels[i] = (i * 5) % N;
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, BATON_GEMM_ONEDNN_BF16));
    baton_tape_reset(t, 1);
    baton_tensor *xi = baton_tape_input(t, 2, (int[]){M, K}, x);
    baton_tensor *y = baton_matmul(t, xi, baton_params_tensor(p, 0), 1);
    baton_tensor *s = baton_matmul(t, xi, baton_params_tensor(p, 1), 1);
    baton_tensor *loss = baton_cross_entropy(t, baton_add(t, baton_add(t, y, s), y), labels);
    baton_params_zero_grad(p);
    baton_tape_backward(t, loss, 1.0f);
    /* converted: x (in the forward, reused by both weight gradients) and y's gradient; s's copy came from its add */
    ASSERT_EQ_U64(t->kept_conversions, 2);
    ASSERT_EQ_INT(t->n_kept, 3);
    ASSERT_EQ_INT(baton__kept_stale(t), 0);
    baton_tape_free(t);
    baton_params_free(p);
}

/* One bf16 step of a 2-layer GPT (loss, every parameter gradient) with the f32 outputs that only products read
 * written or not (baton__feeds_products: layer norms, the qkv layers, attention, the GELU layer write only their
 * bf16 copies), and with the linear layers' bias fused into the product or added in a separate pass. */
static int g_wpack_off;   /* gpt_step_bf16's weights as plain bf16 copies, not packed (baton_tape's wpack_off) */
static int g_colsum_off;  /* and the GELU layers' bias gradients in a separate pass (gelu_colsum_off) */
static void gpt_step_bf16(baton_gpt *g, int only_off, int bias_off, int poison, float *loss_out, float *grads,
                          size_t *only_n) {
    baton_params *p = baton_gpt_params(g);
    const baton_gpt_config *c = baton_gpt_cfg(g);
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, BATON_GEMM_ONEDNN_BF16));
    t->products_only_off = only_off;
    t->gemm_bias_off = bias_off;
    t->wpack_off = g_wpack_off;
    t->gelu_colsum_off = g_colsum_off;
    int32_t w[4 * 17];
    windows(w, 4, 16, 3);
    for (int rep = 0; rep < 2; rep++) {   /* the second step reuses the arena: stale f32 data would be there */
        baton_tape_reset(t, 1);
        baton_tensor *loss = baton_gpt_loss(g, t, w, 4, 16);
        /* the f32 tensors of the layer norms', the qkv layers' and attention's outputs (C and 3C wide) are not read:
         * NaN them */
        for (int i = 0; poison && i < t->n_kept; i++)
            if (t->kept[i].only && (t->kept[i].cols == c->dim || t->kept[i].cols == 3 * c->dim))
                for (size_t j = 0; j < (size_t)t->kept[i].rows * t->kept[i].cols; j++) ((float *)t->kept[i].src)[j] = NAN;
        baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 1.0f);
        *loss_out = loss->data[0];
    }
    size_t off = 0;
    for (int i = 0; i < baton_params_count(p); i++) {
        baton_tensor *x = baton_params_tensor(p, i);
        memcpy(grads + off, x->grad, x->n * sizeof(float));
        off += x->n;
    }
    ASSERT_EQ_INT(baton__kept_stale(t), 0);
    *only_n = t->bf16_only_outputs;
    /* evaluation too: the same loss bits as the training forward */
    baton_tape_reset(t, 0);
    ASSERT_TRUE(baton_gpt_loss(g, t, w, 4, 16)->data[0] == *loss_out);
    baton_tape_free(t);
}

TEST(bf16_only_outputs_change_no_bit) {
    baton_gpt *g = small_bf16_gpt();
    if (!g) return;
    size_t np = 0;
    for (int i = 0; i < baton_params_count(baton_gpt_params(g)); i++) np += baton_params_tensor(baton_gpt_params(g), i)->n;
    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float)), *gc = malloc(np * sizeof(float)), la, lb, lc;
    size_t na, nb, nc;
    ASSERT_TRUE(ga && gb && gc);
    gpt_step_bf16(g, 1, 0, 0, &la, ga, &na);   /* every output written in f32 too */
    gpt_step_bf16(g, 0, 0, 0, &lb, gb, &nb);
    gpt_step_bf16(g, 0, 0, 1, &lc, gc, &nc);   /* and with those f32 tensors poisoned */
    ASSERT_EQ_U64(na, 0);
    /* per block: two layer norms, the qkv layer, attention, the GELU layer; then the final layer norm; two steps */
    ASSERT_EQ_U64(nb, 2 * (5 * 2 + 1));
    ASSERT_EQ_U64(nc, nb);
    ASSERT_TRUE(isfinite(la) && !memcmp(&la, &lb, sizeof la) && !memcmp(&la, &lc, sizeof la));
    ASSERT_TRUE(!memcmp(ga, gb, np * sizeof(float)) && !memcmp(ga, gc, np * sizeof(float)));
    free(ga);
    free(gb);
    free(gc);
    baton_gpt_free(g);
}

/* Under bf16 products the linear layers without activation (qkv, proj, fc2) add their bias inside oneDNN's
 * product (baton__gemm_bias) instead of a pass over the output: one f32 addition to the f32 accumulator either
 * way, so a whole GPT step gives the same bits with the fused bias as with the separate pass. */
TEST(bf16_fused_bias_changes_no_bit) {
    baton_gpt *g = small_bf16_gpt();
    if (!g) return;
    /* nonzero biases (a fresh GPT's are zero, which would hide a missing or doubled bias) */
    baton_rng r;
    baton_rng_seed(&r, 5);
    for (int i = 0; i < baton_params_count(baton_gpt_params(g)); i++) {
        baton_tensor *x = baton_params_tensor(baton_gpt_params(g), i);
        if (x->ndim == 1)
            for (size_t j = 0; j < x->n; j++) x->data[j] += 0.1f * baton_rng_normal(&r);
    }
    size_t np = 0;
    for (int i = 0; i < baton_params_count(baton_gpt_params(g)); i++) np += baton_params_tensor(baton_gpt_params(g), i)->n;
    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float)), la, lb;
    size_t na, nb;
    ASSERT_TRUE(ga && gb);
    gpt_step_bf16(g, 0, 1, 0, &la, ga, &na);   /* the bias in a separate pass */
    gpt_step_bf16(g, 0, 0, 0, &lb, gb, &nb);   /* fused */
    ASSERT_TRUE(isfinite(la) && !memcmp(&la, &lb, sizeof la));
    ASSERT_TRUE(!memcmp(ga, gb, np * sizeof(float)));
    free(ga);
    free(gb);
    baton_gpt_free(g);
}

/* A bf16 GPT step (small_bf16_gpt) with the test knob *off set, then cleared: the loss and every gradient must be
 * the same bits. */
static void bf16_step_same_bits_with_knob_off(int *off) {
    baton_gpt *g = small_bf16_gpt();
    if (!g) return;
    size_t np = 0;
    for (int i = 0; i < baton_params_count(baton_gpt_params(g)); i++) np += baton_params_tensor(baton_gpt_params(g), i)->n;
    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float)), la, lb;
    size_t na, nb;
    ASSERT_TRUE(ga && gb);
    *off = 1;
    gpt_step_bf16(g, 0, 0, 0, &la, ga, &na);
    *off = 0;
    gpt_step_bf16(g, 0, 0, 0, &lb, gb, &nb);
    ASSERT_TRUE(isfinite(la) && !memcmp(&la, &lb, sizeof la));
    ASSERT_TRUE(!memcmp(ga, gb, np * sizeof(float)));
    free(ga);
    free(gb);
    baton_gpt_free(g);
}

/* Weights given to oneDNN in the layout its primitive picks (packed by a reorder once per step and orientation)
 * against plain bf16 copies: the same rounding of the same values, so a whole GPT step gives the same bits. */
TEST(bf16_packed_weights_change_no_bit) {
    bf16_step_same_bits_with_knob_off(&g_wpack_off);
}

/* The GELU layers' backward under bf16 products computes the bias gradient in the pass that multiplies by GELU's
 * derivative and rounds (baton__gelu_grad_colsum): the same bits as that pass followed by baton__colsum. Nonzero
 * biases, a 2-layer GPT step, loss and every gradient. */
TEST(bf16_gelu_bias_gradient_in_one_pass_changes_no_bit) {
    bf16_step_same_bits_with_knob_off(&g_colsum_off);
}

/* The kernel alone: rows not a multiple of four, one and several column blocks (threads), beta 0 and 1, against the
 * multiply, baton__row_to_bf16 and baton__colsum run one after the other. */
TEST(gelu_grad_colsum_matches_the_separate_passes) {
    const int shapes[][2] = {{203, 200}, {7, 50}, {64, 1536}};
    baton_rng r;
    baton_rng_seed(&r, 21);
    for (int s = 0; s < 3; s++) {
        int m = shapes[s][0], n = shapes[s][1];
        size_t mn = (size_t)m * n;
        float *g = malloc(mn * sizeof(float)), *g2 = malloc(mn * sizeof(float)), *dg = malloc(mn * sizeof(float));
        float *db = malloc(n * sizeof(float)), *db2 = malloc(n * sizeof(float));
        uint16_t *bf = malloc(mn * sizeof(uint16_t)), *bf2 = malloc(mn * sizeof(uint16_t));
        ASSERT_TRUE(g && g2 && dg && db && db2 && bf && bf2);
        for (int beta = 0; beta < 2; beta++) {
            fill(g, mn, &r);
            fill(dg, mn, &r);
            fill(db, n, &r);
            memcpy(g2, g, mn * sizeof(float));
            memcpy(db2, db, n * sizeof(float));
            baton__gelu_grad_colsum(g, dg, bf, db, m, n, (float)beta);
            for (size_t i = 0; i < mn; i++) g2[i] *= dg[i];
            for (int i = 0; i < m; i++) baton__row_to_bf16(bf2 + (size_t)i * n, g2 + (size_t)i * n, n);
            baton__colsum(db2, g2, m, n, (float)beta);
            ASSERT_TRUE(!memcmp(g, g2, mn * sizeof(float)) && !memcmp(bf, bf2, mn * sizeof(uint16_t)));
            ASSERT_TRUE(!memcmp(db, db2, n * sizeof(float)));
        }
        free(g);
        free(g2);
        free(dg);
        free(db);
        free(db2);
        free(bf);
        free(bf2);
    }
}

/* A packed weight is repacked when a product of another shape asks for another layout (the layout may depend on
 * M), within a step and after the parameter changed: each product equals the one on a plain bf16 copy. */
TEST(bf16_packed_weight_follows_shapes_and_updates) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return;
    }
    enum { K = 96, N = 80, MMAX = 600 };
    baton_param_info v[1] = {{.name = "w", .ndim = 2, .shape = {N, K}}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 1));
    baton_rng r;
    baton_rng_seed(&r, 11);
    baton_tensor *w = baton_params_tensor(p, 0);
    float *x = malloc(sizeof(float) * MMAX * K);
    ASSERT_TRUE(x != NULL);
    fill(x, MMAX * K, &r);
    baton_tape *tp = baton_tape_new(p, 1), *tq = baton_tape_new(p, 1);   /* packed, plain */
    ASSERT_OK(baton_tape_set_gemm(tp, BATON_GEMM_ONEDNN_BF16));
    ASSERT_OK(baton_tape_set_gemm(tq, BATON_GEMM_ONEDNN_BF16));
    tq->wpack_off = 1;
    const int ms[] = {37, 1, MMAX, 37};
    for (int step = 0; step < 2; step++) {
        fill(w->data, w->n, &r);   /* an optimizer step: the packed copy must be refreshed */
        baton_tape_reset(tp, 0);
        baton_tape_reset(tq, 0);
        for (int i = 0; i < 4; i++) {
            baton_tensor *y = baton_matmul(tp, baton_tape_input(tp, 2, (int[]){ms[i], K}, x), w, 1);
            baton_tensor *z = baton_matmul(tq, baton_tape_input(tq, 2, (int[]){ms[i], K}, x), w, 1);
            ASSERT_TRUE(!memcmp(y->data, z->data, y->n * sizeof(float)));
        }
    }
    ASSERT_EQ_U64(baton_tape_bf16_conversions(tp), 2);   /* once per step */
    baton_tape_free(tp);
    baton_tape_free(tq);
    baton_params_free(p);
    free(x);
}

/* One bf16 linear layer with a bias: the fused product against a double reference of the rounded operands plus
 * the bias (and a second, different bias on the same cached primitive: the bias is read per call) */
TEST(bf16_linear_with_fused_bias_matches_a_double_reference) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return;
    }
    enum { M = 37, K = 70, N = 45 };
    baton_param_info v[2] = {{.name = "w", .ndim = 2, .shape = {N, K}}, {.name = "b", .ndim = 1, .shape = {N}}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 2));
    baton_rng r;
    baton_rng_seed(&r, 9);
    baton_tensor *w = baton_params_tensor(p, 0), *b = baton_params_tensor(p, 1);
    float x[M * K];
    fill(x, M * K, &r);
    fill(w->data, w->n, &r);
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, BATON_GEMM_ONEDNN_BF16));
    for (int rep = 0; rep < 2; rep++) {
        fill(b->data, b->n, &r);
        baton_tape_reset(t, 0);
        baton_tensor *y = baton_linear(t, baton_tape_input(t, 2, (int[]){M, K}, x), w, b, BATON_ACT_NONE);
        double ref[M * N], mag[M * N];
        reference(0, 1, M, N, K, x, K, w->data, K, 0.0f, ref, N, 1, mag);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                ASSERT_NEAR(y->data[i * N + j], ref[i * N + j] + b->data[j], 1e-5 * (mag[i * N + j] + fabs(b->data[j])));
    }
    baton_tape_free(t);
    baton_params_free(p);
}

TEST(bf16_training_tracks_f32) {
    if (!baton_gemm_bf16_available()) {
        printf("skip: this CPU has neither AVX512_BF16 nor AMX\n");
        return;
    }
    enum { S = 15 };
    double f[S], h[S], o[S];
    train(BATON_GEMM_OPENBLAS, o, S);
    train(BATON_GEMM_ONEDNN, f, S);
    train(BATON_GEMM_ONEDNN_BF16, h, S);
    ASSERT_TRUE(h[S - 1] < 0.6 * h[0]);   /* it learns */
    for (int s = 0; s < S; s++) {
        ASSERT_NEAR(f[s], o[s], 1e-3 * o[s]);   /* the two f32 libraries agree to rounding */
        ASSERT_NEAR(h[s], f[s], 0.02 * f[s]);   /* bf16 compute tracks f32 within 2 % */
    }
    ASSERT_TRUE(h[S - 1] != f[S - 1]);         /* and it really ran in bf16 */
}

/* A CPU without AVX512_BF16/AMX (simulated: oneDNN's DNNL_MAX_CPU_ISA caps the ISA it may use) gets one note
 * and trains in f32; bad --precision / --gemm values are refused with one line. */
TEST(bf16_on_a_cpu_without_it_says_so_and_runs_f32) {
    char cmd[1024], path[512], *out = NULL;
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/text.txt", tmp ? tmp : "/tmp");
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "DNNL_MAX_CPU_ISA=AVX512_CORE %s train --model gpt --layers 1 --heads 1 --dim 8 --context 8 "
             "--batch 1 --steps 1 --threads 1 --precision bf16 --data text:%s --json 2>&1", th_baton(), path);
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 0);
    ASSERT_CONTAINS(out, "note: --precision bf16: this CPU has neither AVX512_BF16 nor AMX; running f32\n");
    ASSERT_CONTAINS(out, "\"precision\":\"f32\"");
    free(out);
    unlink(path);
    snprintf(cmd, sizeof cmd, "%s train --model gpt --precision fp8 2>&1", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 2);
    ASSERT_CONTAINS(out, "--precision: expects f32 or bf16");
    free(out);
    snprintf(cmd, sizeof cmd, "%s train --model gpt --gemm mkl 2>&1", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 2);
    ASSERT_CONTAINS(out, "--gemm: expects onednn or openblas");
    free(out);
}
