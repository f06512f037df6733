/* ops_conv.c: conv2d (im2col + sgemm, one GEMM per image), max-pool and flatten.
 * Shapes: B batch, C input channels, H x W input, OC output channels, KH x KW kernel,
 * OH x OW output, P = OH*OW output pixels, CKK = C*KH*KW rows of the im2col matrix. */
#include <string.h>

#include "nn/nn_impl.h"
#include "util/util.h"

typedef struct {
    int c, h, w, oc, kh, kw, oh, ow, stride, pad;
} conv_geom;

static conv_geom geom_of(const baton_node *nd) {
    const baton_tensor *x = nd->in[0], *w = nd->in[1];
    conv_geom g = {x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], 0, 0,
                   nd->iarg[0], nd->iarg[1]};
    g.oh = (g.h + 2 * g.pad - g.kh) / g.stride + 1;
    g.ow = (g.w + 2 * g.pad - g.kw) / g.stride + 1;
    return g;
}

/* col (CKK, P) from one image x (C,H,W) */
static void im2col(float *col, const float *x, const conv_geom *g) {
    int p = g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *dst = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * p;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->stride - g->pad + ki;
                    float *d = dst + oy * g->ow;
                    if (iy < 0 || iy >= g->h) {
                        memset(d, 0, (size_t)g->ow * sizeof(float));
                        continue;
                    }
                    const float *src = x + ((size_t)c * g->h + iy) * g->w;
                    if (g->stride == 1) {   /* a shifted row: zeros at the edges, one memcpy inside */
                        int lo = g->pad - kj, hi = g->w + g->pad - kj;   /* valid ox in [lo, hi) */
                        if (lo < 0) lo = 0;
                        if (hi > g->ow) hi = g->ow;
                        for (int ox = 0; ox < lo && ox < g->ow; ox++) d[ox] = 0.0f;
                        if (hi > lo) memcpy(d + lo, src + lo - g->pad + kj, (size_t)(hi - lo) * sizeof(float));
                        for (int ox = hi > lo ? hi : lo; ox < g->ow; ox++) d[ox] = 0.0f;
                        continue;
                    }
                    for (int ox = 0; ox < g->ow; ox++) {
                        int ix = ox * g->stride - g->pad + kj;
                        d[ox] = (ix >= 0 && ix < g->w) ? src[ix] : 0.0f;
                    }
                }
            }
}

/* dx (C,H,W) += scatter of dcol (CKK, P) */
static void col2im_add(float *dx, const float *dcol, const conv_geom *g) {
    int p = g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *src = dcol + ((size_t)(c * g->kh + ki) * g->kw + kj) * p;
                for (int oy = 0; oy < g->oh; oy++) {
                    int iy = oy * g->stride - g->pad + ki;
                    if (iy < 0 || iy >= g->h) continue;
                    float *d = dx + ((size_t)c * g->h + iy) * g->w;
                    for (int ox = 0; ox < g->ow; ox++) {
                        int ix = ox * g->stride - g->pad + kj;
                        if (ix >= 0 && ix < g->w) d[ix] += src[oy * g->ow + ox];
                    }
                }
            }
}

baton_tensor *baton_conv2d(baton_tape *t, baton_tensor *x, baton_tensor *w, baton_tensor *b, int stride,
                           int pad) {
    BATON_ASSERT(x->ndim == 4 && w->ndim == 4 && w->shape[1] == x->shape[1] && stride >= 1 && pad >= 0);
    baton_node *nd = baton__tape_push(t, BATON__OP_CONV2D);
    nd->in[0] = x;
    nd->in[1] = w;
    nd->in[2] = b;
    nd->iarg[0] = stride;
    nd->iarg[1] = pad;
    conv_geom g = geom_of(nd);
    BATON_ASSERT(g.oh > 0 && g.ow > 0);
    if (b) BATON_ASSERT(b->n == (size_t)g.oc);
    int bsz = x->shape[0], p = g.oh * g.ow, ckk = g.c * g.kh * g.kw;
    baton_tensor *y = baton__tensor_new(t, 4, (int[]){bsz, g.oc, g.oh, g.ow},
                                        baton__needs_grad(x) || baton__needs_grad(w) || baton__needs_grad(b));
    float *col = baton__arena_alloc(t, (size_t)ckk * p * sizeof(float) * (y->grad ? 2 : 1));   /* col, dcol */
    for (int i = 0; i < bsz; i++) {
        float *yi = y->data + (size_t)i * g.oc * p;
        im2col(col, x->data + (size_t)i * g.c * g.h * g.w, &g);
        baton__sgemm(0, 0, g.oc, p, ckk, w->data, ckk, col, p, 0.0f, yi, p);   /* (OC,CKK) @ (CKK,P) */
        if (b)
            for (int o = 0; o < g.oc; o++)
                for (int q = 0; q < p; q++) yi[(size_t)o * p + q] += b->data[o];
    }
    nd->out = y;
    nd->saved = col;
    return y;
}

void baton__bwd_CONV2D(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *w = nd->in[1], *b = nd->in[2], *y = nd->out;
    conv_geom g = geom_of(nd);
    int bsz = x->shape[0], p = g.oh * g.ow, ckk = g.c * g.kh * g.kw;
    size_t img = (size_t)g.c * g.h * g.w;
    float *col = nd->saved, *dcol = col + (size_t)ckk * p;
    float bw = baton__needs_grad(w) ? baton__grad_begin(w) : 0.0f;
    if (baton__needs_grad(b) && baton__grad_begin(b) == 0.0f) memset(b->grad, 0, (size_t)g.oc * sizeof(float));
    if (baton__needs_grad(x) && baton__grad_begin(x) == 0.0f) memset(x->grad, 0, x->n * sizeof(float));
    for (int i = 0; i < bsz; i++) {
        const float *gy = y->grad + (size_t)i * g.oc * p;
        if (baton__needs_grad(b))
            for (int o = 0; o < g.oc; o++) {
                float s = 0.0f;
                for (int q = 0; q < p; q++) s += gy[(size_t)o * p + q];
                b->grad[o] += s;
            }
        if (baton__needs_grad(w)) {   /* dw (OC,CKK) += gy (OC,P) @ col^T */
            im2col(col, x->data + i * img, &g);
            baton__sgemm(0, 1, g.oc, ckk, p, gy, p, col, p, i == 0 ? bw : 1.0f, w->grad, ckk);
        }
        if (baton__needs_grad(x)) {   /* dcol (CKK,P) = w^T @ gy; dx += col2im(dcol) */
            baton__sgemm(1, 0, ckk, p, g.oc, w->data, ckk, gy, p, 0.0f, dcol, p);
            col2im_add(x->grad + i * img, dcol, &g);
        }
    }
}

/* ---- max-pool: x (B,C,H,W) -> (B,C,H/k,W/k), window k, stride k -------------------------------------- */
baton_tensor *baton_maxpool2d(baton_tape *t, baton_tensor *x, int k) {
    BATON_ASSERT(x->ndim == 4 && k >= 1 && x->shape[2] % k == 0 && x->shape[3] % k == 0);
    int bsz = x->shape[0], c = x->shape[1], h = x->shape[2], w = x->shape[3], oh = h / k, ow = w / k;
    baton_tensor *y = baton__tensor_new(t, 4, (int[]){bsz, c, oh, ow}, baton__needs_grad(x));
    int32_t *arg = y->grad ? baton__arena_alloc(t, y->n * sizeof(int32_t)) : NULL;   /* argmax in plane */
    for (size_t pl = 0; pl < (size_t)bsz * c; pl++) {
        const float *src = x->data + pl * h * w;
        float *dst = y->data + pl * oh * ow;
        int32_t *am = arg ? arg + pl * oh * ow : NULL;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int best = oy * k * w + ox * k;
                if (k == 2) {   /* the common case, unrolled; ties: first in scan order wins */
                    int q1 = best + 1, q2 = best + w, q3 = best + w + 1;
                    if (src[q1] > src[best]) best = q1;
                    if (src[q2] > src[best]) best = q2;
                    if (src[q3] > src[best]) best = q3;
                } else {
                    for (int dy = 0; dy < k; dy++)
                        for (int dx = 0; dx < k; dx++) {
                            int q = (oy * k + dy) * w + ox * k + dx;
                            if (src[q] > src[best]) best = q;
                        }
                }
                dst[oy * ow + ox] = src[best];
                if (am) am[oy * ow + ox] = best;
            }
    }
    baton_node *nd = baton__tape_push(t, BATON__OP_MAXPOOL2D);
    nd->in[0] = x;
    nd->out = y;
    nd->saved = arg;
    nd->iarg[0] = k;
    return y;
}

void baton__bwd_MAXPOOL2D(baton_tape *t, baton_node *nd) {
    (void)t;
    baton_tensor *x = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(x)) return;
    const int32_t *arg = nd->saved;
    size_t planes = (size_t)x->shape[0] * x->shape[1], in = (size_t)x->shape[2] * x->shape[3],
           out = (size_t)y->shape[2] * y->shape[3];
    if (baton__grad_begin(x) == 0.0f) memset(x->grad, 0, x->n * sizeof(float));
    for (size_t pl = 0; pl < planes; pl++)
        for (size_t q = 0; q < out; q++) x->grad[pl * in + arg[pl * out + q]] += y->grad[pl * out + q];
}

/* ---- flatten: a view (B, rest) sharing data and gradient with x; backward has nothing to do ----------- */
baton_tensor *baton_flatten(baton_tape *t, baton_tensor *x) {
    baton_tensor *y = baton__arena_alloc(t, sizeof *y);
    *y = *x;
    y->ndim = 2;
    y->shape[1] = (int)(x->n / (size_t)x->shape[0]);
    y->shape[2] = y->shape[3] = 0;
    y->param = -1;
    y->base = x->base;
    baton_node *nd = baton__tape_push(t, BATON__OP_FLATTEN);
    nd->in[0] = x;
    nd->out = y;
    return y;
}

void baton__bwd_FLATTEN(baton_tape *t, baton_node *nd) {
    (void)t;
    (void)nd;
}
