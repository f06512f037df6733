/* reduce.h: reduction kernels for every dtype x op. Vectorized (AVX2 / AVX-512, F16C) when the CPU has
 * them, chosen once at run time; a portable scalar path gives bit-identical results (tests compare them).
 *
 * Semantics (all kernels):
 * - SUM and AVG add (AVG is divided by the world size only by baton__finish_avg); PROD multiplies; MIN/MAX
 *   compare (for floats: x < y ? x : y, so results are the same on every rank for the same inputs).
 * - Integers wrap (two's complement) on overflow.
 * - F16 / BF16 are widened to f32, combined in f32 and rounded to nearest-even once, on output.
 * - Sources are combined in the order given, so every rank that reduces the same inputs gets the same bits. */
#ifndef BATON_REDUCE_H
#define BATON_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "baton/comm.h"

/* dst[i] = dst[i] op src[i] for i < count (dst and src in dtype dt; 16-bit types rounded per call). */
void baton__reduce(void *dst, const void *src, size_t count, baton_dtype dt, baton_op op);

/* dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i]; nsrc >= 1; dst may alias any source.
 * 16-bit types are accumulated in f32 over all sources and rounded once. If avg_div > 0 and op is AVG,
 * the result is divided by avg_div before it is stored (floats: the f32/f64 sum / avg_div rounded once to
 * the dtype; integers: truncated toward zero). */
void baton__reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, baton_dtype dt, baton_op op,
                     int avg_div);

/* For 16-bit dtypes carried in f32 partials (ring algorithms): acc[i] = acc[i] op widen(src[i]). */
void baton__reduce_f32_acc16(float *acc, const uint16_t *src, size_t count, baton_dtype dt16, baton_op op);

/* Divide every element by n (AVG's final step): floats rounded once, integers truncated toward zero. */
void baton__finish_avg(void *buf, size_t count, baton_dtype dt, int n);
/* Same for f32 partials of a 16-bit dtype: out16[i] = round16(acc[i] / n) (n == 1: just round). */
void baton__f32_to_16_avg(uint16_t *out, const float *acc, size_t count, baton_dtype dt16, int n);

/* Conversions, round to nearest-even, NaN preserved as a quiet NaN. */
void baton__f16_to_f32(float *dst, const uint16_t *src, size_t n);
void baton__f32_to_f16(uint16_t *dst, const float *src, size_t n);
void baton__bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void baton__f32_to_bf16(uint16_t *dst, const float *src, size_t n);
float baton__f16_to_f32_1(uint16_t h);
uint16_t baton__f32_to_f16_1(float f);
float baton__bf16_to_f32_1(uint16_t h);
uint16_t baton__f32_to_bf16_1(float f);
/* Element i of a buffer of dtype dt as a double, and a double rounded once into element i (integers
 * truncated toward zero). For tests and benchmarks that fill and check buffers of any dtype. */
double baton__dtype_get(baton_dtype dt, const void *p, size_t i);
void baton__dtype_put(baton_dtype dt, void *p, size_t i, double v);

/* Which code path the kernels use: "avx512", "avx2" or "scalar". BATON_SIMD=scalar|avx2|avx512 (env)
 * lowers it (never above what the CPU has); tests call baton__reduce_force_isa to compare paths. */
const char *baton__reduce_isa(void);
int baton__reduce_force_isa(const char *isa);  /* BATON_OK, or BATON_EUNSUPPORTED if the CPU lacks it */

#endif
