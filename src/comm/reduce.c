/* reduce.c: the public reduction entry points of reduce.h and the one-time choice of kernel table
 * (avx512 > avx2 > scalar by CPU features, lowered by BATON_SIMD or baton__reduce_force_isa). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/reduce.h"
#include "comm/reduce_impl.h"
#include "util/util.h"

#ifdef BATON_REDUCE_X86
#include <cpuid.h>
#endif

static _Atomic(const baton__reduce_kernels *) g_kernels;
static _Atomic long g_nt_bytes = -1;  /* BATON_REDUCE_NT_BYTES, read on first use; -1: not read yet */

/* Rank of an ISA name: 0 scalar, 1 avx2, 2 avx512; -1 unknown. */
static int isa_level(const char *name) {
    if (!strcmp(name, "scalar")) return 0;
    if (!strcmp(name, "avx2")) return 1;
    if (!strcmp(name, "avx512")) return 2;
    return -1;
}

/* The best level this CPU (and OS, which must save the vector state) supports. */
static int cpu_level(void) {
#ifdef BATON_REDUCE_X86
    __builtin_cpu_init();
    /* F16C from CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c" */
    unsigned a = 0, b = 0, c = 0, d = 0;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    int avx2 = __builtin_cpu_supports("avx2") && f16c && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? 2 : avx2 ? 1 : 0;
#else
    return 0;
#endif
}

static const baton__reduce_kernels *table_for(int level) {
#ifdef BATON_REDUCE_X86
    if (level >= 2) return &baton__reduce_kernels_avx512;
    if (level == 1) return &baton__reduce_kernels_avx2;
#else
    (void)level;
#endif
    return &baton__reduce_kernels_scalar;
}

static const baton__reduce_kernels *choose(void) {
    int level = cpu_level();

    const char *env = getenv("BATON_SIMD");
    if (env && *env) {
        int want = strlen(env) < 16 ? isa_level(env) : -1;
        if (want < 0)
            BATON_WARN("BATON_SIMD='%.16s' is not one of scalar|avx2|avx512; ignoring it", env);
        else if (want < level)
            level = want;
    }
    return table_for(level);
}

const baton__reduce_kernels *baton__reduce_kernels_get(void) {
    const baton__reduce_kernels *k = atomic_load_explicit(&g_kernels, memory_order_acquire);
    if (k) return k;
    k = choose();  /* idempotent: racing first calls store the same table */
    atomic_store_explicit(&g_kernels, k, memory_order_release);
    return k;
}

int baton__reduce_use_nt(const void *dst, const void *const *srcs, int nsrc, size_t out_bytes) {
    long limit = atomic_load_explicit(&g_nt_bytes, memory_order_relaxed);
    if (limit < 0) {
        long dflt = 4l << 20, v = dflt;
        if (baton__env_long("BATON_REDUCE_NT_BYTES", dflt, 0, 1l << 40, &v) == BATON_EINVAL) {
            BATON_WARN("%s; using the default %ld", baton_last_error(), dflt);
            v = dflt;
        }
        atomic_store_explicit(&g_nt_bytes, v, memory_order_relaxed);  /* racing readers store the same */
        limit = v;
    }
    if (limit == 0 || out_bytes < (size_t)limit) return 0;
    for (int k = 0; k < nsrc; k++)
        if (srcs[k] == dst) return 0;
    return 1;
}

const char *baton__reduce_isa(void) { return baton__reduce_kernels_get()->name; }

int baton__reduce_force_isa(const char *isa) {
    int want = isa ? isa_level(isa) : -1;
    if (want < 0) return baton__fail(BATON_EINVAL, "unknown SIMD path '%s' (use scalar, avx2 or avx512)", isa ? isa : "(null)");
    if (want > cpu_level())
        return baton__fail(BATON_EUNSUPPORTED, "this CPU cannot run the %s reduction kernels", isa);
    atomic_store_explicit(&g_kernels, table_for(want), memory_order_release);
    return BATON_OK;
}

static int valid(baton_dtype dt, baton_op op) {
    return baton__reduce_esize(dt) != 0 && (unsigned)op < BATON_OP_COUNT;
}

void baton__reduce(void *dst, const void *src, size_t count, baton_dtype dt, baton_op op) {
    BATON_ASSERT(valid(dt, op));
    if (count == 0) return;
    baton__reduce_kernels_get()->reduce(dst, src, count, dt, op);
}

void baton__reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, baton_dtype dt, baton_op op,
                     int avg_div) {
    BATON_ASSERT(valid(dt, op) && nsrc >= 1);
    if (count == 0) return;
    baton__reduce_kernels_get()->reduce_n(dst, srcs, nsrc, 0, count, dt, op, avg_div);
}

void baton__reduce_f32_acc16(float *acc, const uint16_t *src, size_t count, baton_dtype dt16, baton_op op) {
    BATON_ASSERT((dt16 == BATON_F16 || dt16 == BATON_BF16) && (unsigned)op < BATON_OP_COUNT);
    if (count == 0) return;
    baton__reduce_kernels_get()->acc16(acc, src, count, dt16, op);
}

void baton__finish_avg(void *buf, size_t count, baton_dtype dt, int n) {
    BATON_ASSERT(baton__reduce_esize(dt) != 0 && n >= 1);
    if (count == 0 || n == 1) return;
    if (dt == BATON_I32 || dt == BATON_I64)
        baton__rs_div(buf, count, dt, n);
    else
        baton__reduce_kernels_get()->div_float(buf, count, dt, n);
}

void baton__f32_to_16_avg(uint16_t *out, const float *acc, size_t count, baton_dtype dt16, int n) {
    BATON_ASSERT((dt16 == BATON_F16 || dt16 == BATON_BF16) && n >= 1);
    if (count == 0) return;
    baton__reduce_kernels_get()->to16_div(out, acc, count, dt16, n);
}

void baton__f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    if (n) baton__reduce_kernels_get()->widen16(dst, src, n, BATON_F16);
}
void baton__f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    if (n) baton__reduce_kernels_get()->narrow16(dst, src, n, BATON_F16);
}
void baton__bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    if (n) baton__reduce_kernels_get()->widen16(dst, src, n, BATON_BF16);
}
void baton__f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    if (n) baton__reduce_kernels_get()->narrow16(dst, src, n, BATON_BF16);
}

float baton__f16_to_f32_1(uint16_t h) { return baton__h2f(h); }
uint16_t baton__f32_to_f16_1(float f) { return baton__f2h(f); }

double baton__dtype_get(baton_dtype dt, const void *p, size_t i) {
    switch (dt) {
    case BATON_F32: return ((const float *)p)[i];
    case BATON_F64: return ((const double *)p)[i];
    case BATON_F16: return baton__f16_to_f32_1(((const uint16_t *)p)[i]);
    case BATON_BF16: return baton__bf16_to_f32_1(((const uint16_t *)p)[i]);
    case BATON_I32: return ((const int32_t *)p)[i];
    case BATON_I64: return (double)((const int64_t *)p)[i];
    default: return 0;
    }
}

void baton__dtype_put(baton_dtype dt, void *p, size_t i, double v) {
    switch (dt) {
    case BATON_F32: ((float *)p)[i] = (float)v; break;
    case BATON_F64: ((double *)p)[i] = v; break;
    case BATON_F16: ((uint16_t *)p)[i] = baton__f32_to_f16_1((float)v); break;
    case BATON_BF16: ((uint16_t *)p)[i] = baton__f32_to_bf16_1((float)v); break;
    case BATON_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case BATON_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: break;
    }
}
float baton__bf16_to_f32_1(uint16_t h) { return baton__b2f(h); }
uint16_t baton__f32_to_bf16_1(float f) { return baton__f2b(f); }
