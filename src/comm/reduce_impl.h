/* reduce_impl.h: internals shared by the reduction kernel files (reduce.c: dispatch, conversions and the
 * portable scalar kernels; reduce_avx2.c / reduce_avx512.c: the same kernels vectorized).
 *
 * Each ISA fills one kernel table; reduce.c picks a table once (CPU features, BATON_SIMD) and every public
 * entry point of reduce.h goes through it. The vector kernels hand their tails and the rare combinations they
 * do not vectorize (integer AVG division, i64 PROD on AVX2, ...) to the scalar kernels below, which produce
 * bit-identical results element by element, so mixing them inside one call is safe.
 *
 *   const baton__reduce_kernels *k = baton__reduce_kernels_get();
 *   k->reduce_n(dst, srcs, nsrc, 0, count, BATON_F32, BATON_SUM, 0);                                  */
#ifndef BATON_REDUCE_IMPL_H
#define BATON_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "baton/comm.h"

typedef struct {
    const char *name;  /* "scalar", "avx2", "avx512" */
    /* dst[i] op= src[i], i < count. */
    void (*reduce)(void *dst, const void *src, size_t count, baton_dtype dt, baton_op op);
    /* dst[off + i] = srcs[0][off + i] op ... op srcs[nsrc-1][off + i], i < count (off in elements);
     * avg_div > 1 with AVG divides before the store. nsrc >= 1. */
    void (*reduce_n)(void *dst, const void *const *srcs, int nsrc, size_t off, size_t count, baton_dtype dt,
                     baton_op op, int avg_div);
    /* acc[i] = acc[i] op widen16(src[i]). */
    void (*acc16)(float *acc, const uint16_t *src, size_t count, baton_dtype dt16, baton_op op);
    /* out[i] = round16(acc[i] / n); n == 1 only rounds. */
    void (*to16_div)(uint16_t *out, const float *acc, size_t count, baton_dtype dt16, int n);
    /* buf[i] /= n for f32 / f64 / f16 / bf16 (n >= 2; integers go to the scalar kernel). */
    void (*div_float)(void *buf, size_t count, baton_dtype dt, int n);
    /* Plain conversions (dt16 is BATON_F16 or BATON_BF16). */
    void (*widen16)(float *dst, const uint16_t *src, size_t count, baton_dtype dt16);
    void (*narrow16)(uint16_t *dst, const float *src, size_t count, baton_dtype dt16);
} baton__reduce_kernels;

extern const baton__reduce_kernels baton__reduce_kernels_scalar;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BATON_REDUCE_X86 1
extern const baton__reduce_kernels baton__reduce_kernels_avx2;
extern const baton__reduce_kernels baton__reduce_kernels_avx512;
#endif

/* Whether reduce_n should write its output with streaming (non-temporal) stores: only when the output is
 * large (>= BATON_REDUCE_NT_BYTES, default 4 MiB, read once; 0 disables) and is not one of the sources,
 * so the stores skip reading the destination lines first. */
int baton__reduce_use_nt(const void *dst, const void *const *srcs, int nsrc, size_t out_bytes);

/* The table in use (chosen on first call). */
const baton__reduce_kernels *baton__reduce_kernels_get(void);

/* The scalar kernels, callable from the vector files for tails and uncommon combinations. */
void baton__rs_reduce(void *dst, const void *src, size_t count, baton_dtype dt, baton_op op);
void baton__rs_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t off, size_t count, baton_dtype dt,
                        baton_op op, int avg_div);
void baton__rs_acc16(float *acc, const uint16_t *src, size_t count, baton_dtype dt16, baton_op op);
void baton__rs_to16_div(uint16_t *out, const float *acc, size_t count, baton_dtype dt16, int n);
void baton__rs_div(void *buf, size_t count, baton_dtype dt, int n);

/* Bytes per element of a dtype (0 for an invalid one). */
static inline size_t baton__reduce_esize(baton_dtype dt) {
    switch (dt) {
    case BATON_F32: case BATON_I32: return 4;
    case BATON_F64: case BATON_I64: return 8;
    case BATON_F16: case BATON_BF16: return 2;
    default: return 0;
    }
}

/* ---- scalar 16-bit conversions (exact; the vector paths give the same bits) -------------------------- */
static inline uint32_t baton__f2u(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float baton__u2f(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }

/* IEEE half -> float: exact; a NaN keeps its payload and gets the quiet bit (as F16C's VCVTPH2PS does). */
static inline float baton__h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return baton__u2f(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e == 0) return baton__u2f(baton__f2u((float)m * 0x1p-24f) | sign);  /* zero / subnormal: exact */
    return baton__u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* float -> IEEE half, round to nearest-even, overflow to infinity, subnormals exact; a NaN keeps the top
 * payload bits and gets the quiet bit (as F16C's VCVTPS2PH with imm 0 does). */
static inline uint16_t baton__f2h(float f) {
    uint32_t x = baton__f2u(f), ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000u) {                                    /* normal half: >= 2^-14 */
        uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    uint32_t e = ax >> 23;
    if (e < 102) return sign;                                   /* < 2^-25: rounds to zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;  /* value = m * 2^-shift half-subnormal units */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* bfloat16 -> float: exact; a signaling NaN gets the quiet bit. */
static inline float baton__b2f(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u;
    return baton__u2f(x);
}

/* float -> bfloat16, round to nearest-even (subnormals too), NaN quieted. */
static inline uint16_t baton__f2b(float f) {
    uint32_t x = baton__f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif
