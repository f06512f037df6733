/* ops_attn.c: the transformer ops: fused causal multi-head self-attention (scores, causal mask, softmax,
 * weighted sum, forward and backward over sgemm) and the residual add.
 * Shapes: B sequences of T positions, C = H heads x D dims per head; rows are (b, t) pairs, b-major. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "util/util.h"

/* ---- residual add: a + b, same shape -------------------------------------------------------------- */
baton_tensor *baton_add(baton_tape *t, baton_tensor *a, baton_tensor *b) {
    BATON_ASSERT(a->n == b->n);
    baton_tensor *y = baton__tensor_new(t, a->ndim, a->shape, baton__needs_grad(a) || baton__needs_grad(b));
#pragma omp parallel for schedule(static) if (a->n >= BATON__PAR_MIN)
    for (size_t i = 0; i < a->n; i++) y->data[i] = a->data[i] + b->data[i];
    baton_node *nd = baton__tape_push(t, BATON__OP_ADD);
    nd->in[0] = a;
    nd->in[1] = b;
    nd->out = y;
    return y;
}

/* Backward: out's gradient g is final and nothing writes it again (its consumers' backwards ran). An input that
 * only this add uses and that a linear layer without activation or a matmul produced (a residual branch: its
 * backward only reads its output gradient) takes g itself instead of a copy, and under bf16 products g's rounded
 * copy is written for that backward's two products; the other inputs get g copied or added, in one pass. */
static int takes_g(baton_tape *t, baton_tensor *x) {
    int act = 0, op;
    if (x->base != x || x->param >= 0 || x->grad_full || !baton__sole_use(t, x)) return 0;
    op = baton__producer_op(t, x, &act);
    return op == BATON__OP_MATMUL || (op == BATON__OP_LINEAR && act == BATON_ACT_NONE);
}

void baton__bwd_ADD(baton_tape *t, baton_node *nd) {
    float *g = nd->out->grad, *dst[2] = {NULL, NULL}, beta[2] = {0.0f, 0.0f};
    uint16_t *bf = NULL;
    size_t n = nd->out->n;
    for (int k = 0; k < 2; k++) {
        baton_tensor *x = nd->in[k];
        if (!baton__needs_grad(x)) continue;
        if (takes_g(t, x)) {
            baton__grad_begin(x);
            x->grad = g;
            if (!bf) bf = baton__grad_slot(t, x, 0.0f);
        } else {
            beta[k] = baton__grad_begin(x);
            dst[k] = x->grad;
        }
    }
    if (!dst[0] && !dst[1] && !bf) return;
    enum { CH = 1 << 14 };   /* whole 16-float vectors: the same bits for any split */
#pragma omp parallel for schedule(static) if (n >= BATON__PAR_MIN)
    for (size_t i = 0; i < n; i += CH) {
        size_t len = n - i < CH ? n - i : CH;
        for (int k = 0; k < 2; k++) {
            if (!dst[k]) continue;
            if (beta[k] == 0.0f) memcpy(dst[k] + i, g + i, len * sizeof(float));
            else
                for (size_t j = i; j < i + len; j++) dst[k][j] += g[j];
        }
        if (bf) baton__row_to_bf16(bf + i, g + i, (int)len);
    }
}

/* The causal mask makes P lower triangular, so the products run on blocks of ATT_RB query rows (or key
 * columns) and skip the keys a block cannot see: at T = 256 in blocks of 64, 10/16 of the square products'
 * multiply-adds. Entries of a block above the diagonal are computed and then zeroed by the softmax rows. */
enum { ATT_RB = 64 };
/* the end of the block that starts at row (or column) r0 */
static inline int att_block_end(int r0, int tt) { return tt - r0 < ATT_RB ? tt : r0 + ATT_RB; }

/* One (sequence, head): P (T,T) and Y (T,D) from the strided views q, k, v (row stride ld; K and V c columns
 * right of Q) into y (row stride ldy). */
static void head_fwd(baton_gemm_backend be, int tt, int d, int ld, int c, float scale, const float *q, float *p,
                     float *y, int ldy) {
    const float *k = q + c, *v = q + 2 * c;
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        float *pr = p + (size_t)r0 * tt;
        baton_gemm(be, 0, 1, rb, r1, d, q + (size_t)r0 * ld, ld, k, ld, 0.0f, pr, tt);   /* S[r0:r1, :r1] = Q K^T */
        /* mask j > i; zeros up to the block's last column only: no product reads a row past it */
        for (int i = r0; i < r1; i++) baton__softmax_row(p + (size_t)i * tt, i + 1, r1, scale);
        baton_gemm(be, 0, 0, rb, d, r1, pr, tt, v, ld, 0.0f, y + (size_t)r0 * ldy, ldy);   /* Y[r0:r1] = P[., :r1] V */
    }
}

/* The (sequence, head) pairs are independent: with oneDNN (whose f32 sgemm runs single-threaded inside a
 * parallel region) they are dealt to the OpenMP threads, each product small (T x T x D) and whole on one
 * thread, instead of splitting every small product over the threads. OpenBLAS keeps one pair at a time.
 * Under --precision bf16 these five products stay f32 (oneDNN's sgemm): per head they are too small for the
 * bf16 matmul to beat f32 once both operands are converted (bench/gemm_bench: 37-60 vs 49-52 GFLOP/s on one
 * thread), and the bf16 path's scratch and primitive arguments are per tape, so it could not run the heads in
 * parallel. They are about 11 % of the model's FLOPs at T = 256, C = 384 (docs/gpt.md). */
static baton_gemm_backend attn_backend(const baton_tape *t) {
    return t->gemm == BATON_GEMM_OPENBLAS ? BATON_GEMM_OPENBLAS : BATON_GEMM_ONEDNN;
}
static int heads_parallel(const baton_tape *t, int pairs) { return attn_backend(t) == BATON_GEMM_ONEDNN && pairs > 1; }

/* ---- bf16 products (--precision bf16, a CPU with AVX512_BF16) ----------------------------------------------
 * The five products run in bf16 with f32 accumulation, one batched oneDNN matmul per sequence over its H heads
 * (baton__bmm_bf16: strided views, no copies), the sequences dealt to the threads: each thread's scores stay in
 * its cache between the product, the softmax rows and the next product, as in the f32 path. The operands are
 * rounded where they are produced or read once: the forward rounds the sequence's qkv rows (kept for the
 * backward), the softmax rows write P's bf16 copy beside the f32 P (which dS needs), the backward rounds the
 * sequence's dY rows and the softmax backward rows write dS as bf16 only. Per layer at T = 256, C = 384, batch 16:
 * about 2.5 GFLOP, converting 4 M (qkv), 1.5 M (dY), 4 M (P) and 4 M (dS) values inside those passes. */
static int attn_bf16(const baton_tape *t) {
    return t->gemm == BATON_GEMM_ONEDNN_BF16 && !t->attn_bf16_off && baton__bmm_bf16_available();
}

typedef long long ll;
static void bmm(int hh, int m, int n, int k, const uint16_t *a, ll a0, ll a1, ll a2, const uint16_t *b, ll b0, ll b1,
                ll b2, float beta, float *c, ll c0, ll c1, ll c2) {
    baton__bmm s = {.batch = hh, .m = m, .n = n, .k = k, .as = {a0, a1, a2}, .bs = {b0, b1, b2}, .cs = {c0, c1, c2},
                    .beta = beta};
    baton__bmm_bf16(&s, a, b, c);
}

/* One sequence, its H heads: qb (T, 3C) its qkv rounded; p (H,T,T) P in f32 and pb its bf16 copy; yt (T, C). */
static void seq_fwd_bf16(int tt, int h, int d, int c, float scale, const uint16_t *qb, float *p, uint16_t *pb, float *yt) {
    ll ld = 3 * c, tsq = (ll)tt * tt;
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        /* S_h[r0:r1, :r1] = Q_h[r0:r1] K_h[:r1]^T  (K^T: element (h, e, j) at j*ld + h*D + e) */
        bmm(h, rb, r1, d, qb + r0 * ld, d, ld, 1, qb + c, d, 1, ld, 0.0f, p + (ll)r0 * tt, tsq, tt, 1);
        for (int hi = 0; hi < h; hi++)
            for (int i = r0; i < r1; i++) {
                float *row = p + hi * tsq + (ll)i * tt;
                baton__softmax_row(row, i + 1, r1, scale);
                baton__row_to_bf16(pb + hi * tsq + (ll)i * tt, row, r1);
            }
        /* Y_h[r0:r1] = P_h[r0:r1, :r1] V_h[:r1] */
        bmm(h, rb, d, r1, pb + (ll)r0 * tt, tsq, tt, 1, qb + 2 * c, d, ld, 1, 0.0f, yt + (ll)r0 * c, d, c, 1);
    }
}

/* The backward of one sequence (head_bwd's products, batched over the heads): pb (H,T,T) P in bf16 (the only copy
 * kept: dS is computed from P's rounded values, widened a row at a time into pr (T floats)), dyb (T, C) its dY
 * rounded, dp (H,T,T) f32 scratch, dsb (H,T,T) dS in bf16, dq (T, 3C) its rows of qkv's gradient. */
static void seq_bwd_bf16(int tt, int h, int d, int c, float scale, float beta, const uint16_t *qb, const uint16_t *pb,
                         const uint16_t *dyb, float *dp, uint16_t *dsb, float *pr, float *dq) {
    ll ld = 3 * c, tsq = (ll)tt * tt;
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {   /* dP_h[r0:r1, :r1] = dY_h[r0:r1] V_h[:r1]^T */
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        bmm(h, rb, r1, d, dyb + (ll)r0 * c, d, c, 1, qb + 2 * c, d, 1, ld, 0.0f, dp + (ll)r0 * tt, tsq, tt, 1);
    }
    for (int j0 = 0; j0 < tt; j0 += ATT_RB) {   /* dV_h[j0:j1] = P_h[j0:, j0:j1]^T dY_h[j0:] */
        int jb = att_block_end(j0, tt) - j0;
        bmm(h, jb, d, tt - j0, pb + (ll)j0 * tt + j0, tsq, 1, tt, dyb + (ll)j0 * c, d, c, 1, beta,
            dq + 2 * c + j0 * ld, d, ld, 1);
    }
    for (int hi = 0; hi < h; hi++)   /* dS, rounded up to the end of the row's block (what the products read) */
        for (int i = 0; i < tt; i++) {
            int r1 = att_block_end(i - i % ATT_RB, tt);
            float *row = dp + hi * tsq + (ll)i * tt;
            const uint16_t *prow = pb + hi * tsq + (ll)i * tt;
            for (int j = 0; j <= i; j++) {
                uint32_t u = (uint32_t)prow[j] << 16;
                memcpy(pr + j, &u, sizeof u);
            }
            baton__softmax_bwd_row(row, pr, i + 1, r1, scale);
            baton__row_to_bf16(dsb + hi * tsq + (ll)i * tt, row, r1);
        }
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {   /* dQ_h[r0:r1] = dS_h[r0:r1, :r1] K_h[:r1] */
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        bmm(h, rb, d, r1, dsb + (ll)r0 * tt, tsq, tt, 1, qb + c, d, ld, 1, beta, dq + r0 * ld, d, ld, 1);
    }
    for (int j0 = 0; j0 < tt; j0 += ATT_RB) {   /* dK_h[j0:j1] = dS_h[j0:, j0:j1]^T Q_h[j0:] */
        int jb = att_block_end(j0, tt) - j0;
        bmm(h, jb, d, tt - j0, dsb + (ll)j0 * tt + j0, tsq, 1, tt, qb + j0 * ld, d, ld, 1, beta, dq + c + j0 * ld, d,
            ld, 1);
    }
}

/* The node: saved = P (f32), or on the bf16 path P's bf16 copy and the rounded qkv after it; iarg b, h, bf16 path */
static baton_tensor *push_attention(baton_tape *t, baton_tensor *qkv, baton_tensor *y, float *p_all, int b, int h, int bf16) {
    baton_node *nd = baton__tape_push(t, BATON__OP_ATTENTION);
    nd->in[0] = qkv;
    nd->out = y;
    nd->saved = p_all;
    nd->iarg[0] = b;
    nd->iarg[1] = h;
    nd->iarg[2] = bf16;
    return y;
}

/* The saved buffer of the bf16 path: P's bf16 copy, then the rounded qkv, per sequence (training); P in f32 is a
 * per-thread scratch (the backward's dS reads the bf16 copy). When qkv's producer wrote its bf16 copy (the GPT's qkv
 * layer stores its output as bf16 only: baton__bf16_kept finds it), the sequences' rows are read from that copy,
 * in the forward and the backward, and none is saved. */
static baton_tensor *attention_bf16(baton_tape *t, baton_tensor *qkv, int b, int h) {
    int tt = qkv->shape[0] / b, c = qkv->shape[1] / 3, d = c / h, ld = 3 * c;
    float scale = 1.0f / sqrtf((float)d);
    int rg = baton__needs_grad(qkv), par = b > 1, nthr = par ? omp_get_max_threads() : 1, slots = rg ? b : nthr;
    const uint16_t *qk = baton__bf16_kept(t, qkv->data, b * tt, ld);
    baton_tensor *y = baton__tensor_new(t, 2, (int[]){b * tt, c}, rg);
    size_t hsq = (size_t)h * tt * tt, np = (size_t)slots * hsq;
    uint16_t *pb_all = baton__arena_alloc(t, np * sizeof(uint16_t) + (qk ? 0 : (size_t)slots * tt * ld * sizeof(uint16_t)));
    uint16_t *qb_all = pb_all + np;
    float *p_all = baton__arena_alloc(t, (size_t)nthr * hsq * sizeof(float));
    float *yt_all = baton__arena_alloc(t, (size_t)nthr * tt * c * sizeof(float));
    int only = 0;
    uint16_t *bf = baton__bf16_out(t, y->data, b * tt, c, &only);
#pragma omp parallel for schedule(static) num_threads(nthr) if (par)
    for (int bi = 0; bi < b; bi++) {
        int th = omp_get_thread_num(), sl = rg ? bi : th;
        const uint16_t *qb = qk ? qk + (size_t)bi * tt * ld : qb_all + (size_t)sl * tt * ld;
        float *yt = yt_all + (size_t)th * tt * c;
        for (int i = 0; !qk && i < tt; i++)
            baton__row_to_bf16(qb_all + ((size_t)sl * tt + i) * ld, qkv->data + ((size_t)bi * tt + i) * ld, ld);
        seq_fwd_bf16(tt, h, d, c, scale, qb, p_all + th * hsq, pb_all + sl * hsq, yt);
        for (int i = 0; i < tt; i++) {
            size_t o = ((size_t)bi * tt + i) * c;
            if (bf) baton__row_to_bf16(bf + o, yt + (size_t)i * c, c);
            if (!only) memcpy(y->data + o, yt + (size_t)i * c, (size_t)c * sizeof(float));
        }
    }
    return push_attention(t, qkv, y, (float *)pb_all, b, h, 1);
}

static void attention_bwd_bf16(baton_tape *t, baton_node *nd) {
    baton_tensor *qkv = nd->in[0], *y = nd->out;
    int b = nd->iarg[0], h = nd->iarg[1];
    int tt = qkv->shape[0] / b, c = qkv->shape[1] / 3, d = c / h, ld = 3 * c;
    int par = b > 1, nthr = par ? omp_get_max_threads() : 1;
    float scale = 1.0f / sqrtf((float)d), beta = baton__grad_begin(qkv);
    size_t hsq = (size_t)h * tt * tt, np = (size_t)b * hsq;
    const uint16_t *pb_all = (const uint16_t *)nd->saved, *qb_all = baton__bf16_kept(t, qkv->data, b * tt, ld);
    if (!qb_all) qb_all = pb_all + np;
    float *dp_all = baton__arena_alloc(t, (size_t)nthr * (hsq + tt) * sizeof(float));   /* per thread: dP, a P row */
    uint16_t *ds_all = baton__arena_alloc(t, (size_t)nthr * (hsq + (size_t)tt * c) * sizeof(uint16_t));
    uint16_t *bf = baton__grad_slot(t, qkv, beta);
#pragma omp parallel for schedule(static) num_threads(nthr) if (par)
    for (int bi = 0; bi < b; bi++) {
        int th = omp_get_thread_num();
        uint16_t *dsb = ds_all + (size_t)th * (hsq + (size_t)tt * c), *dyb = dsb + hsq;
        float *dq = qkv->grad + (size_t)bi * tt * ld;
        for (int i = 0; i < tt; i++) baton__row_to_bf16(dyb + (size_t)i * c, y->grad + ((size_t)bi * tt + i) * c, c);
        float *dp = dp_all + th * (hsq + tt);
        seq_bwd_bf16(tt, h, d, c, scale, beta, qb_all + (size_t)bi * tt * ld, pb_all + bi * hsq, dyb, dp, dsb, dp + hsq,
                     dq);
        for (int i = 0; bf && i < tt; i++)
            baton__row_to_bf16(bf + ((size_t)bi * tt + i) * ld, dq + (size_t)i * ld, ld);
    }
}

baton_tensor *baton_attention(baton_tape *t, baton_tensor *qkv, int b, int h) {
    BATON_ASSERT(qkv->ndim == 2 && b > 0 && h > 0 && qkv->shape[0] % b == 0 && qkv->shape[1] % (3 * h) == 0);
    if (attn_bf16(t)) return attention_bf16(t, qkv, b, h);
    int tt = qkv->shape[0] / b, c = qkv->shape[1] / 3, d = c / h, ld = 3 * c;
    float scale = 1.0f / sqrtf((float)d);
    int rg = baton__needs_grad(qkv), par = heads_parallel(t, b * h), nthr = par ? omp_get_max_threads() : 1;
    baton_tensor *y = baton__tensor_new(t, 2, (int[]){b * tt, c}, rg);
    size_t tsq = (size_t)tt * tt;
    /* training: P for every (b,h); evaluation: one P per thread, reused */
    float *p_all = baton__arena_alloc(t, (rg ? (size_t)b * h : (size_t)nthr) * tsq * sizeof(float));
    /* the output is the projection's input: under bf16 each head writes its block's rounded copy; when the output
     * feeds products only (baton__feeds_products), a head's Y goes to a per-thread (T,D) buffer, not to y */
    int only = 0;
    uint16_t *bf = baton__bf16_out(t, y->data, b * tt, c, &only);
    float *ybuf = only ? baton__arena_alloc(t, (size_t)nthr * tt * d * sizeof(float)) : NULL;
#pragma omp parallel for schedule(static) num_threads(nthr) if (par)
    for (int bh = 0; bh < b * h; bh++) {
        int bi = bh / h, hi = bh % h, th = omp_get_thread_num();
        float *p = p_all + (rg ? (size_t)bh : (size_t)th) * tsq;
        size_t yo = (size_t)bi * tt * c + (size_t)hi * d;
        float *yh = only ? ybuf + (size_t)th * tt * d : y->data + yo;
        int ldy = only ? d : c;
        head_fwd(attn_backend(t), tt, d, ld, c, scale, qkv->data + (size_t)bi * tt * ld + (size_t)hi * d, p, yh, ldy);
        if (bf)
            for (int i = 0; i < tt; i++) baton__row_to_bf16(bf + yo + (size_t)i * c, yh + (size_t)i * ldy, d);
    }
    return push_attention(t, qkv, y, p_all, b, h, 0);
}

/* Per (b,h), given dY (T,D) (columns hi*D of y->grad):
 *   dP = dY V^T;  dV = P^T dY;  dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik) / sqrt(D);  dQ = dS K;  dK = dS^T Q
 * The Q, K, V blocks of all (b,h) tile qkv->grad exactly once, so one beta serves every write. */
static void head_bwd(baton_gemm_backend be, int tt, int d, int ld, int c, float scale, float beta, const float *q,
                     float *dq, const float *p, const float *dy, float *dp) {
    const float *k = q + c, *v = q + 2 * c;
    float *dk = dq + c, *dv = dq + 2 * c;
    /* row blocks r0..r1 see keys < r1; column blocks j0..j1 are seen by rows >= j0 only (P and dS are zero above
     * the diagonal; dP's entries right of a row block are never read: the softmax rows stop at i + 1) */
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {   /* dP[r0:r1, :r1] = dY V^T */
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        baton_gemm(be, 0, 1, rb, r1, d, dy + (size_t)r0 * c, c, v, ld, 0.0f, dp + (size_t)r0 * tt, tt);
    }
    for (int j0 = 0; j0 < tt; j0 += ATT_RB) {   /* dV[j0:j1] = P[j0:, j0:j1]^T dY[j0:] */
        int jb = att_block_end(j0, tt) - j0;
        baton_gemm(be, 1, 0, jb, d, tt - j0, p + (size_t)j0 * tt + j0, tt, dy + (size_t)j0 * c, c, beta,
                   dv + (size_t)j0 * ld, ld);
    }
    for (int i = 0; i < tt; i++) {   /* dS, in place of dP, zeros up to the end of the row's block (as P) */
        int r1 = att_block_end(i - i % ATT_RB, tt);
        baton__softmax_bwd_row(dp + (size_t)i * tt, p + (size_t)i * tt, i + 1, r1, scale);
    }
    for (int r0 = 0; r0 < tt; r0 += ATT_RB) {   /* dQ[r0:r1] = dS[r0:r1, :r1] K[:r1] */
        int r1 = att_block_end(r0, tt), rb = r1 - r0;
        baton_gemm(be, 0, 0, rb, d, r1, dp + (size_t)r0 * tt, tt, k, ld, beta, dq + (size_t)r0 * ld, ld);
    }
    for (int j0 = 0; j0 < tt; j0 += ATT_RB) {   /* dK[j0:j1] = dS[j0:, j0:j1]^T Q[j0:] */
        int jb = att_block_end(j0, tt) - j0;
        baton_gemm(be, 1, 0, jb, d, tt - j0, dp + (size_t)j0 * tt + j0, tt, q + (size_t)j0 * ld, ld, beta,
                   dk + (size_t)j0 * ld, ld);
    }
}

void baton__bwd_ATTENTION(baton_tape *t, baton_node *nd) {
    baton_tensor *qkv = nd->in[0], *y = nd->out;
    if (!baton__needs_grad(qkv)) return;
    if (nd->iarg[2]) {
        attention_bwd_bf16(t, nd);
        return;
    }
    int b = nd->iarg[0], h = nd->iarg[1];
    int tt = qkv->shape[0] / b, c = qkv->shape[1] / 3, d = c / h, ld = 3 * c;
    int par = heads_parallel(t, b * h), nthr = par ? omp_get_max_threads() : 1;
    float scale = 1.0f / sqrtf((float)d), beta = baton__grad_begin(qkv);
    size_t tsq = (size_t)tt * tt;
    float *p_all = nd->saved, *dp_all = baton__arena_alloc(t, (size_t)nthr * tsq * sizeof(float));   /* per thread */
    /* qkv's gradient is the qkv layer's output gradient, both its products' operand: when this op writes its
     * final value, each head rounds its Q, K and V columns to bf16 while they are in cache (bf16 products) */
    uint16_t *bf = baton__grad_slot(t, qkv, beta);
#pragma omp parallel for schedule(static) num_threads(nthr) if (par)
    for (int bh = 0; bh < b * h; bh++) {
        int bi = bh / h, hi = bh % h;
        size_t off = (size_t)bi * tt * ld + (size_t)hi * d;
        head_bwd(attn_backend(t), tt, d, ld, c, scale, beta, qkv->data + off, qkv->grad + off, p_all + (size_t)bh * tsq,
                 y->grad + (size_t)bi * tt * c + (size_t)hi * d, dp_all + (size_t)omp_get_thread_num() * tsq);
        for (int i = 0; bf && i < tt; i++)
            for (int part = 0; part < 3; part++) {
                size_t o = off + (size_t)i * ld + (size_t)part * c;
                baton__row_to_bf16(bf + o, qkv->grad + o, d);
            }
    }
}
