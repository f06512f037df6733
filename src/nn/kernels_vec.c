/* kernels_vec.c: the transformer's elementwise and row kernels (GELU forward and backward, softmax rows of
 * attention and of the loss, layer norm rows) in 16-wide vectors with a vectorized exp and erfc, instead of
 * scalar libm calls. The bodies (kernels_vec.inc) are compiled for AVX-512 and for the baseline instruction
 * set; the first call picks the widest the CPU runs (baton__kernels_set_level lets a test force a narrower one).
 * All copies compute the same bits, and every kernel works row by row, so results do not depend on the thread
 * count or on the CPU.
 *
 * Accuracy: exp is a degree-7 polynomial after range reduction (a few ulp; inputs below -86 give 0, a
 * difference under 5e-38); erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), with the Chebyshev fit whose
 * fractional error is below 1.2e-7 (Numerical Recipes' erfcc), so GELU's Phi(x) has no cancellation in either
 * tail. tests/test_nn_kernels.c checks each kernel against a double-precision reference. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
#define VW 16
/* Macros, not functions: a function taking a 64-byte vector has a different ABI per instruction set. */
#define SPL(x) ((vf){0} + (float)(x))
/* n (1..VW) floats at p, the rest of the vector pad; a whole vector is one unaligned load or store */
#define LDN(p, n, pad) (__extension__({                                          \
    vf ldn_;                                                                     \
    if ((n) == VW) memcpy(&ldn_, (p), sizeof ldn_);                              \
    else {                                                                       \
        ldn_ = SPL(pad);                                                         \
        memcpy(&ldn_, (p), (size_t)(n) * sizeof(float));                        \
    }                                                                            \
    ldn_;                                                                        \
}))
#define STN(p, v, n) do {                                                        \
    vf stn_ = (v);                                                               \
    if ((n) == VW) memcpy((p), &stn_, sizeof stn_);                              \
    else memcpy((p), &stn_, (size_t)(n) * sizeof(float));                        \
} while (0)
#define SEL(m, a, b) ((vf)(((vi)(m) & (vi)(a)) | (~(vi)(m) & (vi)(b))))
/* exp(x): x = n ln2 + r, |r| <= ln2/2; e^r by a polynomial; 2^n added to the exponent bits. NaN stays NaN. */
#define VEXP(xin) (__extension__({                                                                             \
    vf ex_ = (xin);                                                                                            \
    vf exc_ = SEL(ex_ < SPL(-86.0f), SPL(-86.0f), ex_);                                                        \
    exc_ = SEL(exc_ > SPL(88.0f), SPL(88.0f), exc_);                                                           \
    vf et_ = exc_ * 1.44269504088896341f + 12582912.0f; /* round(x log2 e) in the low mantissa bits */         \
    vf en_ = et_ - 12582912.0f;                                                                                \
    vi eni_ = (vi)et_ - 0x4B400000;                                                                            \
    vf er_ = exc_ - en_ * 0.693145751953125f - en_ * 1.428606765330187e-6f;                                    \
    vf ep_ = (((((1.9875691500e-4f * er_ + 1.3981999507e-3f) * er_ + 8.3334519073e-3f) * er_ +                 \
               4.1665795894e-2f) * er_ + 1.6666665459e-1f) * er_ + 5.0000001201e-1f) * er_ * er_ + er_ + 1.0f; \
    vf ee_ = (vf)((vi)ep_ + (eni_ << 23));                                                                     \
    ee_ = SEL(ex_ < SPL(-86.0f), SPL(0.0f), ee_);                                                              \
    SEL(ex_ != ex_, ex_, ee_);                                                                                 \
}))
/* Phi(v) = (1 + erf(v / sqrt 2)) / 2 from q = erfc(|v| / sqrt 2): q / 2 for v < 0, 1 - q / 2 otherwise */
#define VPHI(vin) (__extension__({                                                                             \
    vf pv_ = (vin);                                                                                            \
    vf pz_ = (vf)((vi)pv_ & 0x7fffffff) * 0.70710678118654752f;                                                \
    vf pt_ = 1.0f / (1.0f + 0.5f * pz_);                                                                       \
    vf pq_ = pt_ * VEXP(-pz_ * pz_ - 1.26551223f +                                                             \
                        pt_ * (1.00002368f + pt_ * (0.37409196f + pt_ * (0.09678418f +                         \
                        pt_ * (-0.18628806f + pt_ * (0.27886807f + pt_ * (-1.13520398f +                       \
                        pt_ * (1.48851587f + pt_ * (-0.82215223f + pt_ * 0.17087277f))))))))); \
    SEL(pv_ < SPL(0.0f), 0.5f * pq_, 1.0f - 0.5f * pq_);                                                       \
}))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KV_X86 1
#pragma GCC push_options
#pragma GCC target("avx512f")
#include <immintrin.h>
#define KV(name) name##_avx512
#define KV_SQRT(x) ((vf)_mm512_sqrt_ps((__m512)(x)))
#include "nn/kernels_vec.inc"
#undef KV
#undef KV_SQRT
#pragma GCC pop_options
#endif
/* the baseline copy takes square roots lane by lane (IEEE sqrt is correctly rounded: the same bits) */
#define KV_SQRT(x) (__extension__({                      \
    vf sq_ = (x);                                        \
    for (int sl_ = 0; sl_ < VW; sl_++) sq_[sl_] = sqrtf(sq_[sl_]); \
    sq_;                                                 \
}))
#define KV(name) name##_base
#include "nn/kernels_vec.inc"
#undef KV
#undef KV_SQRT

/* 1 AVX-512, 0 baseline; -1 not chosen yet. No AVX2 copy: GCC 12 lowers these 16-wide vectors for AVX2 into
 * spills to the stack, slower than the baseline copy (measured: GELU forward 7.1 against 5.6 ns an element). */
static int g_level = -1;

static int cpu_level(void) {
#ifdef KV_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 1;
#endif
    return 0;
}

static int level(void) {
    int l = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = cpu_level();
        __atomic_store_n(&g_level, l, __ATOMIC_RELAXED);
    }
    return l;
}

int baton__kernels_set_level(int max) {
    int l = cpu_level();
    if (max >= 0 && max < l) l = max;
    __atomic_store_n(&g_level, l, __ATOMIC_RELAXED);
    return l;
}

#ifdef KV_X86
#define DISPATCH(name, args)                          \
    switch (level()) {                                \
    case 1: return name##_avx512 args;                \
    default: return name##_base args;                 \
    }
#else
#define DISPATCH(name, args) \
    (void)level;                 \
    return name##_base args;
#endif

void baton__gelu_fwd(float *y, float *pre, const float *x, const float *b, int m, int n) {
    DISPATCH(gelu_fwd, (y, pre, x, b, m, n))
}
void baton__gelu_fwd_d(float *y, float *d, const float *x, const float *b, int m, int n) {
    DISPATCH(gelu_fwd_d, (y, d, x, b, m, n))
}
void baton__gelu_bwd(float *dx, const float *dy, const float *pre, size_t n, float beta) {
    DISPATCH(gelu_bwd, (dx, dy, pre, n, beta))
}
float baton__row_max(const float *x, int n) { DISPATCH(row_max, (x, n)) }
float baton__exp_sum(float *out, const float *x, int n, float scale, float shift) {
    DISPATCH(exp_sum, (out, x, n, scale, shift))
}
void baton__softmax_row(float *row, int len, int tt, float scale) { DISPATCH(softmax_row, (row, len, tt, scale)) }
void baton__softmax_bwd_row(float *g, const float *p, int len, int tt, float scale) {
    DISPATCH(softmax_bwd_row, (g, p, len, tt, scale))
}
void baton__ln_fwd_row(float *y, const float *x, const float *gm, const float *bt, int c, float eps, float *mean,
                       float *rstd) {
    DISPATCH(ln_fwd_row, (y, x, gm, bt, c, eps, mean, rstd))
}
void baton__ln_param_cols(float *sg, float *sb, const float *x, const float *gy, const float *stats, size_t m, int c,
                          int j0, int w) {
    DISPATCH(ln_param_cols, (sg, sb, x, gy, stats, m, c, j0, w))
}
void baton__ln_bwd_row(float *dx, const float *x, const float *gy, const float *gm, int c, float mean, float rstd,
                       float beta) {
    DISPATCH(ln_bwd_row, (dx, x, gy, gm, c, mean, rstd, beta))
}

static void adamw_block(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
                        float eps, float c1, float c2) {
    DISPATCH(adamw, (w, g, m, v, n, lr, wd, b1, b2, eps, c1, c2))
}

/* Elementwise, in blocks of 4096 over the threads: the same bits for any thread count. */
void baton__adamw(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
                  float eps, float c1, float c2) {
    enum { BLOCK = 4096 };
    size_t nb = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if (n >= BATON__PAR_MIN)
    for (size_t i = 0; i < nb; i++) {
        size_t lo = i * BLOCK, len = n - lo < BLOCK ? n - lo : BLOCK;
        adamw_block(w + lo, g + lo, m + lo, v + lo, len, lr, wd, b1, b2, eps, c1, c2);
    }
}
