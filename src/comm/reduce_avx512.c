/* reduce_avx512.c: the reduction kernels for AVX-512 (F, BW, VL, DQ) + F16C (512-bit vectors), compiled
 * for that target here only (no -march flag), used when the CPU has them. The kernels are in
 * reduce_simd.inc. bf16 is rounded with integer arithmetic, not VCVTNEPS2BF16 (which flushes denormal
 * inputs to zero), so the results match the scalar path bit for bit. */
#include "comm/reduce_impl.h"

#ifdef BATON_REDUCE_X86
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")
#endif

#define SIMD_NAME "avx512"
#define SIMD_TABLE baton__reduce_kernels_avx512

#define VF __m512
#define VF_N 16
#define VF_LD(p) _mm512_loadu_ps(p)
#define VF_ST(p, v) _mm512_storeu_ps((p), (v))
#define VF_ADD(a, b) _mm512_add_ps((a), (b))
#define VF_MUL(a, b) _mm512_mul_ps((a), (b))
#define VF_MIN(a, b) _mm512_min_ps((a), (b))
#define VF_MAX(a, b) _mm512_max_ps((a), (b))
#define VF_DIV(a, b) _mm512_div_ps((a), (b))
#define VF_SET1(x) _mm512_set1_ps(x)
#define VF_STNT(p, v) _mm512_stream_ps((p), (v))

#define VD __m512d
#define VD_N 8
#define VD_LD(p) _mm512_loadu_pd(p)
#define VD_ST(p, v) _mm512_storeu_pd((p), (v))
#define VD_ADD(a, b) _mm512_add_pd((a), (b))
#define VD_MUL(a, b) _mm512_mul_pd((a), (b))
#define VD_MIN(a, b) _mm512_min_pd((a), (b))
#define VD_MAX(a, b) _mm512_max_pd((a), (b))
#define VD_DIV(a, b) _mm512_div_pd((a), (b))
#define VD_SET1(x) _mm512_set1_pd(x)
#define VD_STNT(p, v) _mm512_stream_pd((p), (v))

#define VI __m512i
#define VI_ZERO _mm512_setzero_si512()
#define VI_LD(p) _mm512_loadu_si512((const void *)(p))
#define VI_ST(p, v) _mm512_storeu_si512((void *)(p), (v))
#define VI_STNT(p, v) _mm512_stream_si512((void *)(p), (v))
#define I32_ADD(a, b) _mm512_add_epi32((a), (b))
#define I32_MUL(a, b) _mm512_mullo_epi32((a), (b))
#define I32_MIN(a, b) _mm512_min_epi32((a), (b))
#define I32_MAX(a, b) _mm512_max_epi32((a), (b))
#define I64_ADD(a, b) _mm512_add_epi64((a), (b))
#define I64_MUL(a, b) _mm512_mullo_epi64((a), (b))
#define I64_MIN(a, b) _mm512_min_epi64((a), (b))
#define I64_MAX(a, b) _mm512_max_epi64((a), (b))

#define VH_LD(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define VH_ST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define VH_STNT(p, v) _mm256_stream_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))

/* bf16 widen: into the high half. bf16_ldx leaves a signaling NaN signaling: for kernels whose output is
 * rounded back to 16 bits, which sets the quiet bit anyway, so the bits match the scalar path. */
static inline __m512 bf16_ldx(const uint16_t *p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
}
static inline __m512 bf16_ld(const uint16_t *p) {
    __m512 v = bf16_ldx(p);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i x = _mm512_castps_si512(v);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(x, nan, x, _mm512_set1_epi32(0x400000)));
}
/* bf16 narrow: x + 0x7fff + lsb, keep the high half (round to nearest-even, subnormals included);
 * NaN: the high half with the quiet bit. */
static inline __m256i bf16_round(__m512 v) {
    __m512i x = _mm512_castps_si512(v);
    __m512i hi = _mm512_srli_epi32(x, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}
#define VB_LD(p) bf16_ld(p)
#define VB_LDX(p) bf16_ldx(p)
#define VB_ST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), bf16_round(v))
#define VB_STNT(p, v) _mm256_stream_si256((__m256i *)(void *)(p), bf16_round(v))

#include "comm/reduce_simd.inc"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
