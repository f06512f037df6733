/* reduce_avx2.c: the reduction kernels for AVX2 + F16C (256-bit vectors), compiled for that target here
 * only (no -march flag), used when the CPU has them. The kernels themselves are in reduce_simd.inc.
 * i64 PROD has no AVX2 instruction and stays scalar; i64 MIN/MAX use compare + blend. */
#include "comm/reduce_impl.h"

#ifdef BATON_REDUCE_X86
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif

#define SIMD_NAME "avx2"
#define SIMD_TABLE baton__reduce_kernels_avx2

#define VF __m256
#define VF_N 8
#define VF_LD(p) _mm256_loadu_ps(p)
#define VF_ST(p, v) _mm256_storeu_ps((p), (v))
#define VF_ADD(a, b) _mm256_add_ps((a), (b))
#define VF_MUL(a, b) _mm256_mul_ps((a), (b))
#define VF_MIN(a, b) _mm256_min_ps((a), (b))
#define VF_MAX(a, b) _mm256_max_ps((a), (b))
#define VF_DIV(a, b) _mm256_div_ps((a), (b))
#define VF_SET1(x) _mm256_set1_ps(x)
#define VF_STNT(p, v) _mm256_stream_ps((p), (v))

#define VD __m256d
#define VD_N 4
#define VD_LD(p) _mm256_loadu_pd(p)
#define VD_ST(p, v) _mm256_storeu_pd((p), (v))
#define VD_ADD(a, b) _mm256_add_pd((a), (b))
#define VD_MUL(a, b) _mm256_mul_pd((a), (b))
#define VD_MIN(a, b) _mm256_min_pd((a), (b))
#define VD_MAX(a, b) _mm256_max_pd((a), (b))
#define VD_DIV(a, b) _mm256_div_pd((a), (b))
#define VD_SET1(x) _mm256_set1_pd(x)
#define VD_STNT(p, v) _mm256_stream_pd((p), (v))

#define VI __m256i
#define VI_ZERO _mm256_setzero_si256()
#define VI_LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define VI_ST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
#define VI_STNT(p, v) _mm256_stream_si256((__m256i *)(void *)(p), (v))
#define I32_ADD(a, b) _mm256_add_epi32((a), (b))
#define I32_MUL(a, b) _mm256_mullo_epi32((a), (b))
#define I32_MIN(a, b) _mm256_min_epi32((a), (b))
#define I32_MAX(a, b) _mm256_max_epi32((a), (b))
#define I64_ADD(a, b) _mm256_add_epi64((a), (b))
#define I64_MIN(a, b) i64_min((a), (b))
#define I64_MAX(a, b) i64_max((a), (b))

static inline __m256i i64_min(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
static inline __m256i i64_max(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }

/* f16: F16C converts exactly (widen) and with round to nearest-even (narrow), NaN as the scalar code. */
#define VH_LD(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define VH_ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define VH_STNT(p, v) _mm_stream_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))

/* bf16 widen: into the high half. bf16_ldx leaves a signaling NaN signaling: for kernels whose output is
 * rounded back to 16 bits, which sets the quiet bit anyway, so the bits match the scalar path. */
static inline __m256 bf16_ldx(const uint16_t *p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
}
static inline __m256 bf16_ld(const uint16_t *p) {
    __m256 v = bf16_ldx(p);
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_or_ps(v, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x400000))));
}
/* bf16 narrow: x + 0x7fff + lsb, keep the high half (round to nearest-even, subnormals included);
 * NaN: the high half with the quiet bit. */
static inline __m128i bf16_round(__m256 v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
#define VB_LD(p) bf16_ld(p)
#define VB_LDX(p) bf16_ldx(p)
#define VB_ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), bf16_round(v))
#define VB_STNT(p, v) _mm_stream_si128((__m128i *)(void *)(p), bf16_round(v))

#include "comm/reduce_simd.inc"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
