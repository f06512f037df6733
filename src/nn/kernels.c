/* kernels.c: the elementwise loops on the training hot path, written with 8-wide vectors (GCC/clang
 * vector extensions) so they vectorize at -O2, and compiled twice on x86-64 (AVX2 and
 * baseline), picked at load time. Each has a plain scalar meaning given in its comment. */
#include <omp.h>
#include <string.h>

#include "nn/nn_impl.h"

/* Not under the sanitizers: ThreadSanitizer cannot run the ifunc resolvers target_clones makes (they run
 * during relocation, before its runtime is up), so those builds get the portable versions only. Not with
 * clang either: clang 14 leaves out the dispatcher of a clone that its own file does not call. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));
#define VW 8
/* Macros, not functions: a function passing 8-wide vectors has a different ABI with and without AVX,
 * which clang rejects in the baseline clone. */
#define ld(p) (__extension__({ vf ld_v_; memcpy(&ld_v_, (p), sizeof ld_v_); ld_v_; }))
#define st(p, v) do { vf st_v_ = (v); memcpy((p), &st_v_, sizeof st_v_); } while (0)
#define splat(x) ((vf){(x), (x), (x), (x), (x), (x), (x), (x)})
#define relu8(v) (__extension__({ vf r_v_ = (v); (vf)((vi)r_v_ & (vi)(r_v_ > splat(0.0f))); }))

/* y (M,N) = relu?(y + b (N)) */
HOT void baton__bias_act_rows(float *y, const float *b, int m, int n, int relu) {
    for (int i = 0; i < m; i++) {
        float *row = y + (size_t)i * n;
        int j = 0;
        if (b && relu) for (; j + VW <= n; j += VW) st(row + j, relu8(ld(row + j) + ld(b + j)));
        else if (b) for (; j + VW <= n; j += VW) st(row + j, ld(row + j) + ld(b + j));
        else if (relu) for (; j + VW <= n; j += VW) st(row + j, relu8(ld(row + j)));
        for (; j < n; j++) {
            float v = row[j] + (b ? b[j] : 0.0f);
            row[j] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* g[i] = y[i] > 0 ? g[i] : 0 */
HOT void baton__relu_mask(float *g, const float *y, size_t n) {
    size_t i = 0;
    for (; i + VW <= n; i += VW) st(g + i, (vf)((vi)ld(g + i) & (vi)(ld(y + i) > splat(0.0f))));
    for (; i < n; i++) g[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

/* db[j0:j1] += column sums of g (M,N) over those columns, rows in order */
HOT static void colsum_cols(float *db, const float *g, int m, int n, int j0, int j1) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {   /* four rows per pass over db, added one after another: the same bits */
        const float *r = g + (size_t)i * n;
        int j = j0;
        for (; j + VW <= j1; j += VW)
            st(db + j, ((ld(db + j) + ld(r + j)) + ld(r + n + j)) + ld(r + 2 * (size_t)n + j) + ld(r + 3 * (size_t)n + j));
        for (; j < j1; j++) db[j] = (((db[j] + r[j]) + r[n + j]) + r[2 * (size_t)n + j]) + r[3 * (size_t)n + j];
    }
    for (; i < m; i++) {
        const float *row = g + (size_t)i * n;
        int j = j0;
        for (; j + VW <= j1; j += VW) st(db + j, ld(db + j) + ld(row + j));
        for (; j < j1; j++) db[j] += row[j];
    }
}

/* db (N) = (beta ? db : 0) + column sums of g (M,N). One block of columns per thread, each column's rows added
 * in order on one thread (as the serial loop did): the same bits for any thread count. (It was serial: a linear
 * layer's bias gradient, 1 % of a GPT step with the other thread idle.) The blocks are as wide as the threads
 * allow, not 64 columns: a thread then walks long runs of each row, which the hardware prefetches; with 64
 * columns (256 bytes of a 1.5-6 KB row) it missed the cache on every row, 2-3x slower on the GPT's gradients
 * (4096 rows, 384-1536 columns, 2 threads; docs/gpt.md). */
enum { COLSUM_CB_MIN = 64 };
/* The column blocks of baton__colsum (and of baton__gelu_grad_colsum, which must sum in the same order): their
 * width, and *par: whether they run on several threads. */
static int colsum_block(int m, int n, int *par) {
    *par = (size_t)m * n >= BATON__PAR_MIN && n > COLSUM_CB_MIN;
    int nt = *par ? omp_get_max_threads() : 1;
    int cb = ((n + nt - 1) / nt + 15) / 16 * 16;   /* whole 64-byte lines per block */
    return cb < COLSUM_CB_MIN ? COLSUM_CB_MIN : cb;
}

void baton__colsum(float *db, const float *g, int m, int n, float beta) {
    if (beta == 0.0f) memset(db, 0, (size_t)n * sizeof(float));
    int par, cb = colsum_block(m, n, &par);
#pragma omp parallel for schedule(static) if (par)
    for (int j0 = 0; j0 < n; j0 += cb) colsum_cols(db, g, m, n, j0, n - j0 < cb ? n : j0 + cb);
}

/* The GELU layer's backward under bf16 products in one pass over g (M,N): g *= dg (the derivative the forward
 * saved), bf (M,N) g's rounded copy, and db (N) = (beta ? db : 0) + the column sums of the final g. The bits of
 * act_backward_inplace's multiply and rounding followed by baton__colsum (the same column blocks, each column's rows
 * in the same order, four at a time), with g read once instead of twice (25 MB per layer of the 6 x 384 GPT). */
HOT void baton__gelu_grad_colsum(float *g, const float *dg, uint16_t *bf, float *db, int m, int n, float beta) {
    if (beta == 0.0f) memset(db, 0, (size_t)n * sizeof(float));
    int par, cb = colsum_block(m, n, &par);
#pragma omp parallel for schedule(static) if (par)
    for (int j0 = 0; j0 < n; j0 += cb) {
        int j1 = n - j0 < cb ? n : j0 + cb;
        for (int i = 0; i < m; i += 4) {
            int rows = m - i < 4 ? m - i : 4;
            for (int q = i; q < i + rows; q++) {
                float *row = g + (size_t)q * n;
                const float *d = dg + (size_t)q * n;
                int j = j0;
                for (; j + VW <= j1; j += VW) st(row + j, ld(row + j) * ld(d + j));
                for (; j < j1; j++) row[j] *= d[j];
                baton__row_to_bf16(bf + (size_t)q * n + j0, row + j0, j1 - j0);
            }
            colsum_cols(db, g + (size_t)i * n, rows, n, j0, j1);
        }
    }
}

/* m = mu*m + g + wd*w; w -= lr*m */
HOT void baton__sgd(float *w, const float *g, float *m, size_t n, float lr, float mu, float wd) {
    size_t i = 0;
    vf vmu = splat(mu), vwd = splat(wd), vlr = splat(lr);
    for (; i + VW <= n; i += VW) {
        vf wi = ld(w + i), mi = vmu * ld(m + i) + ld(g + i) + vwd * wi;
        st(m + i, mi);
        st(w + i, wi - vlr * mi);
    }
    for (; i < n; i++) {
        float mi = mu * m[i] + g[i] + wd * w[i];
        m[i] = mi;
        w[i] -= lr * mi;
    }
}

/* sum of g[i]^2 for one block */
HOT static double sumsq_block(const float *g, size_t n) {
    vf a0 = splat(0.0f), a1 = splat(0.0f);
    size_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        vf x = ld(g + i), y = ld(g + i + VW);
        a0 += x * x;
        a1 += y * y;
    }
    a0 += a1;
    double s = 0.0;
    for (int j = 0; j < VW; j++) s += a0[j];
    for (; i < n; i++) s += (double)g[i] * g[i];
    return s;
}

/* sum of g[i]^2: blocks of a size that depends on n only (at least 32768, at most 1024 blocks), each summed in
 * float lanes then double, the blocks' sums added in order: the same bits for any thread count */
double baton__sumsq(const float *g, size_t n) {
    enum { MAXB = 1024 };
    size_t blk = 32768;
    if (n > blk * MAXB) blk = ((n + MAXB - 1) / MAXB + 15) / 16 * 16;
    size_t nb = (n + blk - 1) / blk;
    if (nb == 1) return sumsq_block(g, n);
    double part[MAXB];
#pragma omp parallel for schedule(static) if (n >= 4 * (size_t)BATON__PAR_MIN)
    for (size_t b = 0; b < nb; b++) part[b] = sumsq_block(g + b * blk, n - b * blk < blk ? n - b * blk : blk);
    double s = 0.0;
    for (size_t b = 0; b < nb; b++) s += part[b];
    return s;
}

/* x[i] *= k for one block */
HOT static void scale_block(float *x, size_t n, float k) {
    size_t i = 0;
    for (; i + VW <= n; i += VW) st(x + i, ld(x + i) * splat(k));
    for (; i < n; i++) x[i] *= k;
}

/* x[i] *= k, blocks of 32768 over the threads (elementwise: the same bits for any count) */
void baton__scale(float *x, size_t n, float k) {
    size_t blk = 32768, nb = (n + blk - 1) / blk;
    if (nb == 1) {   /* no parallel region for a row (the loss calls this per row, inside its own) */
        scale_block(x, n, k);
        return;
    }
#pragma omp parallel for schedule(static) if (n >= 4 * (size_t)BATON__PAR_MIN)
    for (size_t b = 0; b < nb; b++) scale_block(x + b * blk, n - b * blk < blk ? n - b * blk : blk, k);
}

/* y[i] = max(x[i], 0) */
HOT void baton__relu_fwd(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + VW <= n; i += VW) st(y + i, relu8(ld(x + i)));
    for (; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx[i] = (beta ? dx[i] : 0) + (x[i] > 0 ? dy[i] : 0) */
HOT void baton__relu_bwd(float *dx, const float *dy, const float *x, size_t n, float beta) {
    size_t i = 0;
    if (beta == 0.0f) {
        for (; i + VW <= n; i += VW) st(dx + i, (vf)((vi)ld(dy + i) & (vi)(ld(x + i) > splat(0.0f))));
    } else {
        for (; i + VW <= n; i += VW) st(dx + i, ld(dx + i) + (vf)((vi)ld(dy + i) & (vi)(ld(x + i) > splat(0.0f))));
    }
    for (; i < n; i++) dx[i] = (beta == 0.0f ? 0.0f : dx[i]) + (x[i] > 0.0f ? dy[i] : 0.0f);
}
