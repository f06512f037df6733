/* ops_dense.c: matmul (sgemm), bias add, activations, the fused linear layer, softmax cross-entropy,
 * log-softmax, dropout, layer norm and embedding: a forward that records a node and its backward.
 * Shapes: M rows (batch), K inputs, N outputs, C classes / features. Backwards write the first
 * contribution to a gradient (beta = 0) and add later ones (see nn_impl.h). */
#include <math.h>
#include <string.h>

#include "nn/libs.h"
#include "nn/nn_impl.h"
#include "util/util.h"

void baton__sgemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                  float beta, float *c, int ldc) {
    baton__blas()->cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                               k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void baton_matmul_naive(float *c, const float *a, const float *b, int m, int n, int k, int ta, int tb,
                        float beta) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int p = 0; p < k; p++) {
                float av = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
                float bv = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
                acc += (double)av * bv;
            }
            float *cij = &c[(size_t)i * n + j];
            *cij = (float)(acc + (beta != 0.0f ? (double)beta * *cij : 0.0));
        }
}

/* dst (n) = or += src, by beta */
static void put(float *dst, const float *src, size_t n, float beta) {
    if (beta == 0.0f) memcpy(dst, src, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static baton_tensor *new2(baton_tape *t, int m, int n, int rg) {
    return baton__tensor_new(t, 2, (int[]){m, n}, rg);
}

/* ---- matmul: x (M,K) @ w (N,K)^T or (K,N) -> (M,N) ---------------------------------------------------- */
baton_tensor *baton_matmul(baton_tape *t, baton_tensor *x, baton_tensor *w, int trans_w) {
    BATON_ASSERT(x->ndim == 2 && w->ndim == 2);
    int m = x->shape[0], k = x->shape[1], n = trans_w ? w->shape[0] : w->shape[1];
    BATON_ASSERT((trans_w ? w->shape[1] : w->shape[0]) == k);
    baton_tensor *y = new2(t, m, n, baton__needs_grad(x) || baton__needs_grad(w));
    baton__gemm(t, 0, trans_w, m, n, k, x->data, k, w->data, trans_w ? k : n, w->base->param, BATON__KEEP_A, 0.0f,
                y->data, n);
    baton_node *nd = baton__tape_push(t, BATON__OP_MATMUL);
    nd->in[0] = x;
    nd->in[1] = w;
    nd->out = y;
    nd->iarg[0] = trans_w;
    return y;
}

void baton__bwd_MATMUL(baton_tape *t, baton_node *nd) {
    baton_tensor *x = nd->in[0], *w = nd->in[1], *y = nd->out;
    int m = x->shape[0], k = x->shape[1], n = y->shape[1], tw = nd->iarg[0];
    if (baton__needs_grad(x))   /* dx (M,K) = dy (M,N) @ w (N,K) | w^T */
        baton__gemm(t, 0, !tw, m, k, n, y->grad, n, w->data, tw ? k : n, w->base->param, BATON__KEEP_A,
                    baton__grad_begin(x), x->grad, k);
    if (baton__needs_grad(w)) {
        if (tw)   /* dw (N,K) = dy^T @ x */
            baton__gemm(t, 1, 0, n, k, m, y->grad, n, x->data, k, -1, BATON__KEEP_A | BATON__KEEP_B,
                        baton__grad_begin(w), w->grad, k);
        else      /* dw (K,N) = x^T @ dy */
            baton__gemm(t, 1, 0, k, n, m, x->data, k, y->grad, n, -1, BATON__KEEP_A | BATON__KEEP_B,
                        baton__grad_begin(w), w->grad, n);
    }
}

/* ---- bias add: x (M,N) + b (N) ------------------------------------------------------------------------ */
baton_tensor *baton_bias_add(baton_tape *t, baton_tensor *x, baton_tensor *b) {
    BATON_ASSERT(x->ndim == 2 && b->n == (size_t)x->shape[1]);
    int m = x->shape[0], n = x->shape[1];
    baton_tensor *y = new2(t, m, n, baton__needs_grad(x) || baton__needs_grad(b));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) y->data[(size_t)i * n + j] = x->data[(size_t)i * n + j] + b->data[j];
    baton_node *nd = baton__tape_push(t, BATON__OP_BIAS_ADD);
    nd->in[0] = x;
    nd->in[1] = b;
    nd->out = y;
    return y;
}

void baton__bwd_BIAS_ADD(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *b = nd->in[1], *y = nd->out;
    if (baton__needs_grad(x)) put(x->grad, y->grad, x->n, baton__grad_begin(x));
    if (baton__needs_grad(b)) baton__colsum(b->grad, y->grad, y->shape[0], y->shape[1], baton__grad_begin(b));
}

/* ---- activations ------------------------------------------------------------------------------------- */
/* GELU (exact, erf form) and its derivative are baton__gelu_fwd / baton__gelu_bwd (kernels_vec.c). */

static baton_tensor *act_forward(baton_tape *t, baton_tensor *x, int op) {
    baton_tensor *y = baton__tensor_new(t, x->ndim, x->shape, baton__needs_grad(x));
    if (op == BATON__OP_RELU) baton__relu_fwd(y->data, x->data, x->n);
    else if (op == BATON__OP_GELU) baton__gelu_fwd(y->data, NULL, x->data, NULL, 1, (int)x->n);
    else for (size_t i = 0; i < x->n; i++) y->data[i] = tanhf(x->data[i]);
    baton_node *nd = baton__tape_push(t, op);
    nd->in[0] = x;
    nd->out = y;
    return y;
}
baton_tensor *baton_relu(baton_tape *t, baton_tensor *x) { return act_forward(t, x, BATON__OP_RELU); }
baton_tensor *baton_gelu(baton_tape *t, baton_tensor *x) { return act_forward(t, x, BATON__OP_GELU); }
baton_tensor *baton_tanh(baton_tape *t, baton_tensor *x) { return act_forward(t, x, BATON__OP_TANH); }

/* g (n) *= act'(.) given the activation's output y (ReLU, tanh) or GELU's derivative dg saved by the forward;
 * bf (NULL or n): g's final values rounded to bf16 */
static void act_backward_inplace(int act, float *g, const float *y, const float *dg, size_t n, uint16_t *bf) {
    switch (act) {
    case BATON_ACT_RELU: baton__relu_mask(g, y, n); break;
    case BATON_ACT_TANH:
        for (size_t i = 0; i < n; i++) g[i] *= 1.0f - y[i] * y[i];
        break;
    case BATON_ACT_GELU: {   /* in chunks of whole 16-float vectors, so the split does not change a bit */
        enum { CH = 1 << 13 };
#pragma omp parallel for schedule(static) if (n >= BATON__PAR_MIN)
        for (size_t i = 0; i < n; i += CH) {
            int len = n - i < CH ? (int)(n - i) : CH;
            for (size_t j = i; j < i + (size_t)len; j++) g[j] *= dg[j];
            if (bf) baton__row_to_bf16(bf + i, g + i, len);
        }
        break;
    }
    default: break;
    }
}

static void act_bwd(baton_node *nd, int act) {
    baton_tensor *x = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(x)) return;
    float beta = baton__grad_begin(x);
    if (act == BATON_ACT_RELU) {   /* kink at 0: derivative taken as 0 */
        baton__relu_bwd(x->grad, y->grad, x->data, x->n, beta);
        return;
    }
    if (act == BATON_ACT_GELU) {
        baton__gelu_bwd(x->grad, y->grad, x->data, x->n, beta);
        return;
    }
    for (size_t i = 0; i < x->n; i++) {
        float gi = y->grad[i] * (1.0f - y->data[i] * y->data[i]);
        x->grad[i] = beta == 0.0f ? gi : x->grad[i] + gi;
    }
}
void baton__bwd_RELU(baton_tape *t, baton_node *nd) { (void)t; act_bwd(nd, BATON_ACT_RELU); }
void baton__bwd_GELU(baton_tape *t, baton_node *nd) { (void)t; act_bwd(nd, BATON_ACT_GELU); }
void baton__bwd_TANH(baton_tape *t, baton_node *nd) { (void)t; act_bwd(nd, BATON_ACT_TANH); }

/* ---- fused linear: y = act(x (M,K) @ w (N,K)^T + b (N)) ---------------------------------------------- */
baton_tensor *baton_linear(baton_tape *t, baton_tensor *x, baton_tensor *w, baton_tensor *b, int act) {
    BATON_ASSERT(x->ndim == 2 && w->ndim == 2 && w->shape[1] == x->shape[1]);
    BATON_ASSERT(act >= BATON_ACT_NONE && act <= BATON_ACT_TANH);
    int m = x->shape[0], k = x->shape[1], n = w->shape[0];
    if (b) BATON_ASSERT(b->n == (size_t)n);
    baton_tensor *y = new2(t, m, n, baton__needs_grad(x) || baton__needs_grad(w) || baton__needs_grad(b));
    /* Under bf16 products a layer without activation adds its bias inside the product (no pass over y); when its
     * output feeds products only (baton__feeds_products: the GPT's qkv layer, read by attention's bf16 products),
     * the product stores that output as bf16 only. */
    int ob_only = 0;
    uint16_t *ob = act == BATON_ACT_NONE && b && t->products_only_next && !t->gemm_bias_off
                       ? baton__bf16_out(t, y->data, m, n, &ob_only)
                       : NULL;
    int fused = act == BATON_ACT_NONE && b &&
                baton__gemm_bias(t, 0, 1, m, n, k, x->data, k, w->data, k, w->base->param, BATON__KEEP_A, b->data, y->data,
                                 ob_only ? ob : NULL, n);
    BATON_ASSERT(fused || !ob);
    if (ob && !ob_only) baton__to_bf16(ob, y->data, m, n, n);   /* tests: the f32 output written too */
    if (!fused)
        baton__gemm(t, 0, 1, m, n, k, x->data, k, w->data, k, w->base->param, BATON__KEEP_A, 0.0f, y->data, n);
    /* a GELU layer's output is the next linear layer's input (the MLP): under bf16 its rounded copy is written
     * here. When it feeds products only (baton__feeds_products), the copy is all that is written: the activation
     * goes through a row on the stack, and y's data takes the derivative the backward needs, so no separate
     * buffer is written either. Training saves GELU's derivative (not the pre-activation): the backward is then a
     * product, the same bits as evaluating the derivative there. */
    int only = 0;
    uint16_t *bf = act == BATON_ACT_GELU ? baton__bf16_out(t, y->data, m, n, &only) : NULL;
    float *dg = NULL;
    if (act == BATON_ACT_GELU && y->grad) dg = only ? y->data : baton__arena_alloc(t, y->n * sizeof(float));
    if (act != BATON_ACT_GELU) t->products_only_next = 0;
#pragma omp parallel for schedule(static) if (y->n >= BATON__PAR_MIN)
    for (int i = 0; i < (fused ? 0 : m); i++) {   /* one pass: bias + activation (+ the bf16 copy) */
        float *row = y->data + (size_t)i * n, stage[only ? n : 1], *out = only ? stage : row;
        const float *bb = b ? b->data : NULL;
        switch (act) {
        case BATON_ACT_NONE:
        case BATON_ACT_RELU: baton__bias_act_rows(row, bb, 1, n, act == BATON_ACT_RELU); break;
        case BATON_ACT_GELU:
            if (dg) baton__gelu_fwd_d(out, dg + (size_t)i * n, row, bb, 1, n);
            else baton__gelu_fwd(out, NULL, row, bb, 1, n);
            break;
        case BATON_ACT_TANH:
            for (int j = 0; j < n; j++) row[j] = tanhf(row[j] + (bb ? bb[j] : 0.0f));
            break;
        }
        if (bf) baton__row_to_bf16(bf + (size_t)i * n, out, n);
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_LINEAR);
    nd->in[0] = x;
    nd->in[1] = w;
    nd->in[2] = b;
    nd->out = y;
    nd->saved = dg;
    nd->iarg[0] = act;
    return y;
}

void baton__bwd_LINEAR(baton_tape *t, baton_node *nd) {
    baton_tensor *x = nd->in[0], *w = nd->in[1], *b = nd->in[2], *y = nd->out;
    int m = x->shape[0], k = x->shape[1], n = w->shape[0];
    float *g = y->grad;   /* final here (all consumers ran), so the activation mask is applied in place */
    /* under bf16 the GELU pass also writes g's rounded copy, which both products below read */
    uint16_t *bf = nd->iarg[0] == BATON_ACT_GELU ? baton__bf16_slot(t, g, m, n) : NULL;
    /* with the bias gradient in the same pass (the same bits; g read once) when the GELU pass writes the copy */
    int db_fused = bf && nd->saved && baton__needs_grad(b) && !t->gelu_colsum_off;
    if (db_fused) baton__gelu_grad_colsum(g, nd->saved, bf, b->grad, m, n, baton__grad_begin(b));
    else act_backward_inplace(nd->iarg[0], g, y->data, nd->saved, y->n, bf);
    if (baton__needs_grad(w))
        baton__gemm(t, 1, 0, n, k, m, g, n, x->data, k, -1, BATON__KEEP_A | BATON__KEEP_B, baton__grad_begin(w), w->grad,
                    k);
    if (baton__needs_grad(b) && !db_fused) baton__colsum(b->grad, g, m, n, baton__grad_begin(b));
    if (baton__needs_grad(x))
        baton__gemm(t, 0, 0, m, k, n, g, n, w->data, k, w->base->param, BATON__KEEP_A, baton__grad_begin(x), x->grad, k);
}

/* ---- softmax cross-entropy: logits (M,C), labels (M) -> mean loss (1) --------------------------------- */
baton_tensor *baton_cross_entropy(baton_tape *t, baton_tensor *logits, const int32_t *labels) {
    BATON_ASSERT(logits->ndim == 2);
    int m = logits->shape[0], c = logits->shape[1];
    int rg = baton__needs_grad(logits);
    baton_tensor *loss = baton__tensor_new(t, 1, (int[]){1}, rg);
    float *probs = rg ? baton__arena_alloc(t, logits->n * sizeof(float)) : NULL;
    double *row_loss = baton__arena_alloc(t, (size_t)m * sizeof(double));   /* summed in row order below */
    for (int i = 0; i < m; i++) BATON_ASSERT(labels[i] >= 0 && labels[i] < c);
#pragma omp parallel for schedule(static) if (logits->n >= BATON__PAR_MIN)
    for (int i = 0; i < m; i++) {
        const float *row = logits->data + (size_t)i * c;
        float mx = baton__row_max(row, c);
        float sum = baton__exp_sum(probs ? probs + (size_t)i * c : NULL, row, c, 1.0f, mx);
        if (probs) baton__scale(probs + (size_t)i * c, (size_t)c, 1.0f / sum);
        row_loss[i] = (double)logf(sum) + mx - row[labels[i]];
    }
    double total = 0.0;
    for (int i = 0; i < m; i++) total += row_loss[i];
    loss->data[0] = (float)(total / m);
    baton_node *nd = baton__tape_push(t, BATON__OP_CROSS_ENTROPY);
    nd->in[0] = logits;
    nd->out = loss;
    nd->saved = probs;
    nd->idx = labels;
    return loss;
}

void baton__bwd_CROSS_ENTROPY(baton_tape *t, baton_node *nd) {
    baton_tensor *x = nd->in[0];
    if (!baton__needs_grad(x)) return;
    int m = x->shape[0], c = x->shape[1];
    const float *p = nd->saved;
    float s = nd->out->grad[0] / (float)m, beta = baton__grad_begin(x);
    uint16_t *bf = baton__grad_slot(t, x, beta);   /* the head's output gradient, under bf16 products */
#pragma omp parallel for schedule(static) if (x->n >= BATON__PAR_MIN)
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < c; j++) {
            size_t q = (size_t)i * c + j;
            float gi = s * (p[q] - (j == nd->idx[i] ? 1.0f : 0.0f));
            x->grad[q] = beta == 0.0f ? gi : x->grad[q] + gi;
        }
        if (bf) baton__row_to_bf16(bf + (size_t)i * c, x->grad + (size_t)i * c, c);
    }
}

/* ---- log-softmax over the last dim ------------------------------------------------------------------- */
baton_tensor *baton_log_softmax(baton_tape *t, baton_tensor *x) {
    int c = x->shape[x->ndim - 1];
    size_t rows = x->n / (size_t)c;
    baton_tensor *y = baton__tensor_new(t, x->ndim, x->shape, baton__needs_grad(x));
    for (size_t i = 0; i < rows; i++) {
        const float *r = x->data + i * c;
        float *o = y->data + i * c, mx = r[0], sum = 0.0f;
        for (int j = 1; j < c; j++) mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < c; j++) sum += expf(r[j] - mx);
        float lse = mx + logf(sum);
        for (int j = 0; j < c; j++) o[j] = r[j] - lse;
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_LOG_SOFTMAX);
    nd->in[0] = x;
    nd->out = y;
    return y;
}

void baton__bwd_LOG_SOFTMAX(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(x)) return;
    int c = x->shape[x->ndim - 1];
    size_t rows = x->n / (size_t)c;
    float beta = baton__grad_begin(x);
    for (size_t i = 0; i < rows; i++) {   /* dx = dy - softmax * sum(dy) */
        const float *gy = y->grad + i * c, *yy = y->data + i * c;
        float *gx = x->grad + i * c, s = 0.0f;
        for (int j = 0; j < c; j++) s += gy[j];
        for (int j = 0; j < c; j++) {
            float gi = gy[j] - expf(yy[j]) * s;
            gx[j] = beta == 0.0f ? gi : gx[j] + gi;
        }
    }
}

/* ---- dropout ---------------------------------------------------------------------------------------- */
baton_tensor *baton_dropout(baton_tape *t, baton_tensor *x, float p) {
    BATON_ASSERT(p >= 0.0f && p < 1.0f);
    if (!t->training || p == 0.0f) return x;
    baton_tensor *y = baton__tensor_new(t, x->ndim, x->shape, baton__needs_grad(x));
    float *mask = baton__arena_alloc(t, x->n * sizeof(float)), keep = 1.0f / (1.0f - p);
    for (size_t i = 0; i < x->n; i++) {
        mask[i] = baton_rng_uniform(&t->rng) < p ? 0.0f : keep;
        y->data[i] = x->data[i] * mask[i];
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_DROPOUT);
    nd->in[0] = x;
    nd->out = y;
    nd->saved = mask;
    nd->farg = p;
    return y;
}

void baton__bwd_DROPOUT(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(x)) return;
    const float *mask = nd->saved;
    float beta = baton__grad_begin(x);
    for (size_t i = 0; i < x->n; i++) {
        float gi = y->grad[i] * mask[i];
        x->grad[i] = beta == 0.0f ? gi : x->grad[i] + gi;
    }
}

/* ---- layer norm over the last dim: x (M,C) ----------------------------------------------------------- */
baton_tensor *baton_layernorm(baton_tape *t, baton_tensor *x, baton_tensor *gamma, baton_tensor *beta,
                              float eps) {
    int c = x->shape[x->ndim - 1];
    size_t m = x->n / (size_t)c;
    BATON_ASSERT(gamma->n == (size_t)c && beta->n == (size_t)c);
    baton_tensor *y = baton__tensor_new(t, x->ndim, x->shape,
                                        baton__needs_grad(x) || baton__needs_grad(gamma) || baton__needs_grad(beta));
    float *stats = baton__arena_alloc(t, 2 * m * sizeof(float));   /* mean, rstd per row */
    /* a layer norm's output is a linear layer's input in the GPT: under bf16 its rounded copy is written here,
     * and only that copy when the model said the output feeds products only (each row staged on the stack) */
    int only = 0;
    uint16_t *bf = baton__bf16_out(t, y->data, y->ndim == 2 ? (int)m : 0, c, &only);
#pragma omp parallel for schedule(static) if (x->n >= BATON__PAR_MIN)
    for (size_t i = 0; i < m; i++) {
        float row[only ? c : 1], *yr = only ? row : y->data + i * c;
        baton__ln_fwd_row(yr, x->data + i * c, gamma->data, beta->data, c, eps, &stats[2 * i], &stats[2 * i + 1]);
        if (bf) baton__row_to_bf16(bf + i * c, yr, c);
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_LAYERNORM);
    nd->in[0] = x;
    nd->in[1] = gamma;
    nd->in[2] = beta;
    nd->out = y;
    nd->saved = stats;
    nd->farg = eps;
    return y;
}

void baton__bwd_LAYERNORM(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *gm = nd->in[1], *bt = nd->in[2], *y = nd->out;
    int c = x->shape[x->ndim - 1];
    size_t m = x->n / (size_t)c;
    const float *stats = nd->saved;
    float bx = baton__needs_grad(x) ? baton__grad_begin(x) : 0.0f;
    float bg = baton__needs_grad(gm) ? baton__grad_begin(gm) : 1.0f;
    float bb = baton__needs_grad(bt) ? baton__grad_begin(bt) : 1.0f;
    int ng = baton__needs_grad(gm), nb = baton__needs_grad(bt);
    if (ng && bg == 0.0f) memset(gm->grad, 0, (size_t)c * sizeof(float));
    if (nb && bb == 0.0f) memset(bt->grad, 0, (size_t)c * sizeof(float));
    /* gamma and beta: sums over rows, each column on one thread, rows in order (as a serial loop would), in
     * blocks of 16 columns so a block's rows stay in cache */
    enum { CB = 16 };
#pragma omp parallel for schedule(static) if (x->n >= BATON__PAR_MIN && (ng || nb))
    for (int j0 = 0; j0 < c; j0 += CB) {
        int w = c - j0 < CB ? c - j0 : CB;
        float sg[CB], sb[CB];
        for (int j = 0; j < w; j++) {
            sg[j] = ng ? gm->grad[j0 + j] : 0.0f;
            sb[j] = nb ? bt->grad[j0 + j] : 0.0f;
        }
        baton__ln_param_cols(sg, sb, x->data, y->grad, stats, m, c, j0, w);
        for (int j = 0; j < w; j++) {
            if (ng) gm->grad[j0 + j] = sg[j];
            if (nb) bt->grad[j0 + j] = sb[j];
        }
    }
    if (!baton__needs_grad(x)) return;
#pragma omp parallel for schedule(static) if (x->n >= BATON__PAR_MIN)
    for (size_t i = 0; i < m; i++)
        baton__ln_bwd_row(x->grad + i * c, x->data + i * c, y->grad + i * c, gm->data, c, stats[2 * i],
                          stats[2 * i + 1], bx);
}

/* ---- embedding: ids (M) into table (V,C) -> (M,C) ---------------------------------------------------- */
baton_tensor *baton_embedding(baton_tape *t, const int32_t *ids, int m, baton_tensor *table) {
    BATON_ASSERT(table->ndim == 2 && m > 0);
    int v = table->shape[0], c = table->shape[1];
    baton_tensor *y = new2(t, m, c, baton__needs_grad(table));
    for (int i = 0; i < m; i++) BATON_ASSERT(ids[i] >= 0 && ids[i] < v);
#pragma omp parallel for schedule(static) if (y->n >= BATON__PAR_MIN)
    for (int i = 0; i < m; i++) {
        memcpy(y->data + (size_t)i * c, table->data + (size_t)ids[i] * c, (size_t)c * sizeof(float));
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_EMBEDDING);
    nd->in[0] = table;
    nd->out = y;
    nd->idx = ids;
    return y;
}

void baton__bwd_EMBEDDING(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *tb = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(tb)) return;
    int m = y->shape[0], c = y->shape[1];
    if (baton__grad_begin(tb) == 0.0f) memset(tb->grad, 0, tb->n * sizeof(float));
    /* Columns in blocks of 64 over the threads, rows in order within each: every table element sums its rows in
     * the serial order, so the bits do not depend on the thread count. */
    int nb = (c + 63) / 64;
#pragma omp parallel for schedule(static) if (y->n >= BATON__PAR_MIN && nb > 1)
    for (int b = 0; b < nb; b++) {
        int j0 = b * 64, j1 = j0 + 64 < c ? j0 + 64 : c;
        for (int i = 0; i < m; i++) {
            float *dst = tb->grad + (size_t)nd->idx[i] * c;
            const float *src = y->grad + (size_t)i * c;
            for (int j = j0; j < j1; j++) dst[j] += src[j];
        }
    }
}
