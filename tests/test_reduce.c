/* test_reduce.c: the reduction kernels of src/comm/reduce.h, for every dtype x op x code path (scalar,
 * avx2, avx512 where this CPU has them) against straightforward references written here, so every path is
 * also bit-identical to every other. 16-bit floats are checked against a correctly rounded reference
 * (exact value in double, rounded once by ldexp/nearbyint, encoded by hand). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/reduce.h"
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const ISAS[] = {"scalar", "avx2", "avx512"};
/* Switches the kernels to `isa`; 0 if the CPU lacks it (the case is skipped). */
static int use_isa(const char *isa) {
    int rc = baton__reduce_force_isa(isa);
    if (rc == BATON_EUNSUPPORTED) return 0;
    if (rc < 0) th_fail(__FILE__, __LINE__, "force_isa(%s): %d", isa, rc);
    if (strcmp(baton__reduce_isa(), isa)) th_fail(__FILE__, __LINE__, "isa %s != %s", baton__reduce_isa(), isa);
    return 1;
}

static const char *const DT_NAME[] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
static const char *const OP_NAME[] = {"sum", "avg", "min", "max", "prod"};

static size_t esize(baton_dtype dt) {
    return dt == BATON_F64 || dt == BATON_I64 ? 8 : dt == BATON_F16 || dt == BATON_BF16 ? 2 : 4;
}

/* f16 / bf16 reference decode and correctly rounded encode, independent of the kernels' bit tricks. */
static double ref_h2d(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static double ref_b2d(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
/* Rounds x to a float format with `mb` mantissa bits, min normal exponent emin, max exponent emax,
 * returning the rounded value (nearest-even; +-inf on overflow). */
static double ref_round(double x, int mb, int emin, int emax) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double ax = fabs(x);
    int e;
    frexp(ax, &e);
    int qe = (e - 1 >= emin ? e - 1 : emin) - mb;
    double r = ldexp(nearbyint(ldexp(ax, -qe)), qe);
    if (r >= ldexp(1, emax + 1)) r = INFINITY;
    return x < 0 ? -r : r;
}
static uint16_t ref_d2h(double x) {
    if (isnan(x)) return 0x7e00;
    double r = ref_round(x, 10, -14, 15), ar = fabs(r);
    uint16_t s = signbit(r) ? 0x8000 : 0;
    if (isinf(r)) return s | 0x7c00;
    if (ar < ldexp(1, -14)) return s | (uint16_t)ldexp(ar, 24);
    int e;
    double f = frexp(ar, &e);  /* ar = f 2^e, f in [0.5, 1) */
    return s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((f * 2 - 1) * 1024);
}
static uint16_t ref_d2b(double x) {
    if (isnan(x)) return 0x7fc0;
    float r = (float)ref_round(x, 7, -126, 127);  /* exactly representable: the cast is exact */
    uint32_t u;
    memcpy(&u, &r, 4);
    return (uint16_t)(u >> 16);
}
static double ref_w(baton_dtype dt, uint16_t h) { return dt == BATON_F16 ? ref_h2d(h) : ref_b2d(h); }
static uint16_t ref_n(baton_dtype dt, double x) { return dt == BATON_F16 ? ref_d2h(x) : ref_d2b(x); }

static int is_nan16(baton_dtype dt, uint16_t h) {
    return dt == BATON_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}
static int is_quiet16(baton_dtype dt, uint16_t h) { return dt == BATON_F16 ? (h & 0x200) != 0 : (h & 0x40) != 0; }

/* Element i of got equals want: bit for bit, or both NaN (and a 16-bit NaN result must be quiet). */
static int same_elem(baton_dtype dt, const void *got, const void *want, size_t i) {
    switch (dt) {
    case BATON_F32: { float a = ((const float *)got)[i], b = ((const float *)want)[i];
        return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 4); }
    case BATON_F64: { double a = ((const double *)got)[i], b = ((const double *)want)[i];
        return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 8); }
    case BATON_F16: case BATON_BF16: { uint16_t a = ((const uint16_t *)got)[i], b = ((const uint16_t *)want)[i];
        if (is_nan16(dt, b)) return is_nan16(dt, a) && is_quiet16(dt, a);
        return a == b; }
    case BATON_I32: return ((const uint32_t *)got)[i] == ((const uint32_t *)want)[i];
    default: return ((const uint64_t *)got)[i] == ((const uint64_t *)want)[i];
    }
}
static void expect_same(baton_dtype dt, baton_op op, const char *isa, const void *got, const void *want, size_t n,
                        const char *what, int line) {
    for (size_t i = 0; i < n; i++)
        if (!same_elem(dt, got, want, i)) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * esize(dt), esize(dt));
            memcpy(&w, (const char *)want + i * esize(dt), esize(dt));
            th_fail(__FILE__, line, "%s: %s %s on %s, n=%zu: element %zu is 0x%llx, want 0x%llx", what,
                    DT_NAME[dt], OP_NAME[op], isa, n, i, (unsigned long long)g,
                    (unsigned long long)w);
        }
}

/* ---- data ------------------------------------------------------------------------------------------ */
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }  /* [0, 1) */

/* Fills n elements with values that exercise each dtype: floats mostly in [-8, 8] with some NaN, +-inf,
 * +-0, subnormals and huge values; 16-bit floats partly random bit patterns; integers full range. */
static void fill(baton_dtype dt, void *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned r = (unsigned)(rnd() % 100);
        double v = rnd_unit() * 16 - 8;
        if (r < 2) v = NAN;
        else if (r < 4) v = (r & 1) ? INFINITY : -INFINITY;
        else if (r < 7) v = (r & 1) ? 0.0 : -0.0;
        switch (dt) {
        case BATON_F32: {
            float f = (float)v;
            if (r >= 7 && r < 9) f = (float)(v * 0x1p-130);   /* subnormal */
            else if (r >= 9 && r < 11) f = (float)(v * 1e37);  /* overflows in sums / products */
            ((float *)buf)[i] = f;
            break;
        }
        case BATON_F64: {
            if (r >= 7 && r < 9) v *= 0x1p-1030;
            else if (r >= 9 && r < 11) v *= 1e307;
            ((double *)buf)[i] = v;
            break;
        }
        case BATON_F16: case BATON_BF16: {
            uint16_t h = r < 30 ? (uint16_t)rnd() : ref_n(dt, v);
            ((uint16_t *)buf)[i] = h;
            break;
        }
        case BATON_I32: {
            uint32_t x = (uint32_t)rnd();
            if (r < 40) x = (uint32_t)(int32_t)(v * 4);
            else if (r < 45) x = r & 1 ? 0x7fffffffu : 0x80000000u;
            ((uint32_t *)buf)[i] = x;
            break;
        }
        default: {
            uint64_t x = rnd();
            if (r < 40) x = (uint64_t)(int64_t)(v * 4);
            else if (r < 45) x = r & 1 ? 0x7fffffffffffffffull : 0x8000000000000000ull;
            ((uint64_t *)buf)[i] = x;
            break;
        }
        }
    }
}

/* ---- references ------------------------------------------------------------------------------------ */
#define REF_OP(op, x, y) ((op) == BATON_PROD ? (x) * (y) : (op) == BATON_MIN ? ((x) < (y) ? (x) : (y)) \
                          : (op) == BATON_MAX ? ((x) > (y) ? (x) : (y)) : (x) + (y))

/* out[i] = srcs[0][i] op ... (nsrc sources), divided by div if div > 1 (the semantics of reduce_n). */
static void ref_reduce_n(baton_dtype dt, baton_op op, void *out, const void *const *srcs, int nsrc, size_t n,
                         int div) {
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case BATON_F32: {
            float a = ((const float *)srcs[0])[i];
            for (int k = 1; k < nsrc; k++) { float y = ((const float *)srcs[k])[i]; a = REF_OP(op, a, y); }
            ((float *)out)[i] = div > 1 ? a / (float)div : a;
            break;
        }
        case BATON_F64: {
            double a = ((const double *)srcs[0])[i];
            for (int k = 1; k < nsrc; k++) { double y = ((const double *)srcs[k])[i]; a = REF_OP(op, a, y); }
            ((double *)out)[i] = div > 1 ? a / div : a;
            break;
        }
        case BATON_F16: case BATON_BF16: {
            float a = (float)ref_w(dt, ((const uint16_t *)srcs[0])[i]);
            for (int k = 1; k < nsrc; k++) { float y = (float)ref_w(dt, ((const uint16_t *)srcs[k])[i]); a = REF_OP(op, a, y); }
            ((uint16_t *)out)[i] = ref_n(dt, div > 1 ? (double)a / div : a);
            break;
        }
        case BATON_I32: {
            uint32_t a = ((const uint32_t *)srcs[0])[i];
            for (int k = 1; k < nsrc; k++) {
                uint32_t y = ((const uint32_t *)srcs[k])[i];
                if (op == BATON_PROD) a *= y;
                else if (op == BATON_MIN) a = (int32_t)y < (int32_t)a ? y : a;
                else if (op == BATON_MAX) a = (int32_t)y > (int32_t)a ? y : a;
                else a += y;
            }
            ((int32_t *)out)[i] = div > 1 ? (int32_t)a / div : (int32_t)a;
            break;
        }
        default: {
            uint64_t a = ((const uint64_t *)srcs[0])[i];
            for (int k = 1; k < nsrc; k++) {
                uint64_t y = ((const uint64_t *)srcs[k])[i];
                if (op == BATON_PROD) a *= y;
                else if (op == BATON_MIN) a = (int64_t)y < (int64_t)a ? y : a;
                else if (op == BATON_MAX) a = (int64_t)y > (int64_t)a ? y : a;
                else a += y;
            }
            ((int64_t *)out)[i] = div > 1 ? (int64_t)a / div : (int64_t)a;
            break;
        }
        }
    }
}

/* dst op= src; 16-bit floats: the exact double result rounded once (one operation, so this is also what
 * rounding the f32 result gives). */
static void ref_reduce2(baton_dtype dt, baton_op op, void *dst, const void *src, size_t n) {
    if (dt == BATON_F16 || dt == BATON_BF16) {
        for (size_t i = 0; i < n; i++) {
            double x = ref_w(dt, ((uint16_t *)dst)[i]), y = ref_w(dt, ((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = ref_n(dt, REF_OP(op, x, y));
        }
        return;
    }
    const void *srcs[2] = {dst, src};
    ref_reduce_n(dt, op, dst, srcs, 2, n, 0);
}

static void *xalloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 64 + 63) / 64 * 64);
    ASSERT_TRUE(p != NULL);
    return p;
}

static const size_t LENS[] = {0, 1, 7, 15, 16, 17, 31, 33, 1000, 65537};
#define NLENS (sizeof LENS / sizeof LENS[0])

/* ---- conversions ----------------------------------------------------------------------------------- */
TEST(f16_widen_is_exact_for_all_65536_values) {
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        uint16_t *h = xalloc(65536 * 2 + 2);
        float *f = xalloc(65537 * 4);
        for (uint32_t i = 0; i < 65536; i++) h[i + 1] = (uint16_t)i;
        baton__f16_to_f32(f + 1, h + 1, 65536);  /* unaligned by one element */
        for (uint32_t i = 0; i < 65536; i++) {
            double want = ref_h2d((uint16_t)i);
            float one = baton__f16_to_f32_1((uint16_t)i);
            uint32_t a, b;
            memcpy(&a, &f[i + 1], 4);
            memcpy(&b, &one, 4);
            if (a != b) th_fail(__FILE__, __LINE__, "%s: batch and single widen of 0x%04x differ: %08x %08x", ISAS[p], i, a, b);
            if (isnan(want)) {
                /* quiet NaN, payload kept (F16C's rule): sign, exponent all ones, 0x400000 | m << 13 */
                uint32_t w = ((i & 0x8000u) << 16) | 0x7fc00000u | ((i & 0x3ffu) << 13);
                if (a != w) th_fail(__FILE__, __LINE__, "%s: widen NaN 0x%04x -> %08x, want %08x", ISAS[p], i, a, w);
            } else if (!(f[i + 1] == want && !signbit(f[i + 1]) == !signbit(want))) {
                th_fail(__FILE__, __LINE__, "%s: widen 0x%04x -> %.9g, want %.9g", ISAS[p], i, f[i + 1], want);
            }
        }
        free(h);
        free(f);
    }
}

TEST(bf16_widen_is_exact_and_quiets_nan) {
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        uint16_t *h = xalloc(65536 * 2);
        float *f = xalloc(65536 * 4);
        for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        baton__bf16_to_f32(f, h, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t a, w = i << 16;
            memcpy(&a, &f[i], 4);
            if ((w & 0x7fffffffu) > 0x7f800000u) w |= 0x400000u;
            if (a != w) th_fail(__FILE__, __LINE__, "%s: bf16 widen 0x%04x -> %08x, want %08x", ISAS[p], i, a, w);
            float one = baton__bf16_to_f32_1((uint16_t)i);
            memcpy(&a, &one, 4);
            ASSERT_EQ_U64(a, w);
        }
        free(h);
        free(f);
    }
}

/* Values that stress rounding to a 16-bit format: every representable value, every midpoint between
 * neighbours (ties), one f32 ulp either side of each midpoint, overflow edges, f32 subnormals, NaNs with
 * payloads, and random f32 bit patterns. */
static size_t narrow_cases(baton_dtype dt, float *out, size_t cap) {
    size_t n = 0;
    for (uint32_t i = 0; i < 65536 && n + 5 <= cap; i++) {
        double v = ref_w(dt, (uint16_t)i), vn = ref_w(dt, (uint16_t)(i + 1));
        if (isnan(v)) continue;
        out[n++] = (float)v;
        if (isnan(vn) || isinf(v) || isinf(vn) || (i & 0x7fff) == 0x7fff || ((i + 1) & 0x7fff) == 0) continue;
        float mid = (float)((v + vn) / 2);  /* exact in f32 */
        out[n++] = mid;
        out[n++] = nextafterf(mid, INFINITY);
        out[n++] = nextafterf(mid, -INFINITY);
    }
    const uint32_t special[] = {0x7f800001u, 0x7fa00000u, 0x7fc00000u, 0xffffffffu, 0x7f802001u, 0x477ff000u,
                                0x477fefffu, 0x477fffffu, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00000001u,
                                0x80400000u, 0x33000000u, 0x33000001u, 0xb3000000u, 0x387fe000u, 0x387ff000u};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) memcpy(&out[n++], &special[i], 4);
    while (n < cap) {
        uint32_t x = (uint32_t)rnd();
        memcpy(&out[n++], &x, 4);
    }
    return n;
}

static void check_narrow(baton_dtype dt) {
    size_t cap = 1u << 19;
    float *in = xalloc(cap * 4 + 4);
    uint16_t *got = xalloc(cap * 2 + 2), *want = xalloc(cap * 2);
    size_t n = narrow_cases(dt, in + 1, cap);  /* in + 1: unaligned */
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, &in[i + 1], 4);
        if ((x & 0x7fffffffu) > 0x7f800000u)  /* the documented NaN rule: quiet, top payload bits kept */
            want[i] = dt == BATON_F16 ? (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu))
                                      : (uint16_t)((x >> 16) | 0x40u);
        else
            want[i] = ref_n(dt, in[i + 1]);
    }
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        if (dt == BATON_F16) baton__f32_to_f16(got + 1, in + 1, n);
        else baton__f32_to_bf16(got + 1, in + 1, n);
        for (size_t i = 0; i < n; i++) {
            uint16_t one = dt == BATON_F16 ? baton__f32_to_f16_1(in[i + 1]) : baton__f32_to_bf16_1(in[i + 1]);
            if (got[i + 1] != want[i] || one != want[i]) {
                uint32_t x;
                memcpy(&x, &in[i + 1], 4);
                th_fail(__FILE__, __LINE__, "%s %s: narrow %08x (%.9g) -> %04x (single %04x), want %04x", ISAS[p],
                        DT_NAME[dt], x, in[i + 1], got[i + 1], one, want[i]);
            }
        }
    }
    free(in);
    free(got);
    free(want);
}

TEST(f32_to_f16_rounds_to_nearest_even) { check_narrow(BATON_F16); }
TEST(f32_to_bf16_rounds_to_nearest_even) { check_narrow(BATON_BF16); }

/* ---- reduce (dst op= src) ---------------------------------------------------------------------------- */
TEST(reduce_every_dtype_op_path_length_alignment) {
    static const size_t offs[][2] = {{0, 0}, {1, 1}, {1, 3}, {3, 0}};  /* dst, src offsets in elements */
    size_t maxn = 65537 + 4;
    for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
        size_t es = esize((baton_dtype)dt);
        char *dst0 = xalloc(maxn * es), *src = xalloc(maxn * es), *want = xalloc(maxn * es), *got = xalloc(maxn * es);
        for (int op = 0; op < BATON_OP_COUNT; op++)
            for (size_t li = 0; li < NLENS; li++)
                for (size_t oi = 0; oi < 4; oi++) {
                    size_t n = LENS[li], od = offs[oi][0] * es, os = offs[oi][1] * es;
                    if (n > 10000 && oi > 1) continue;
                    fill((baton_dtype)dt, dst0 + od, n);
                    fill((baton_dtype)dt, src + os, n);
                    memcpy(want, dst0 + od, n * es);
                    ref_reduce2((baton_dtype)dt, (baton_op)op, want, src + os, n);
                    for (size_t p = 0; p < 3; p++) {
                        if (!use_isa(ISAS[p])) continue;
                        memcpy(got + od, dst0 + od, n * es);
                        baton__reduce(got + od, src + os, n, (baton_dtype)dt, (baton_op)op);
                        expect_same((baton_dtype)dt, (baton_op)op, ISAS[p], got + od, want, n, "reduce", __LINE__);
                    }
                }
        free(dst0);
        free(src);
        free(want);
        free(got);
    }
}

/* ---- reduce_n --------------------------------------------------------------------------------------- */
TEST(reduce_n_1_to_16_sources_every_dtype_op_path) {
    static const size_t lens[] = {0, 1, 17, 67, 1000, 5003};
    enum { MAXN = 5003 + 4 };
    for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
        size_t es = esize((baton_dtype)dt);
        char *src[16], *want = xalloc(MAXN * es), *got = xalloc(MAXN * es);
        for (int k = 0; k < 16; k++) src[k] = xalloc(MAXN * es);
        for (int op = 0; op < BATON_OP_COUNT; op++)
            for (int nsrc = 1; nsrc <= 16; nsrc++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                    size_t n = lens[li], off = (size_t)(nsrc % 3) * es;  /* misaligned for some nsrc */
                    const void *srcs[16];
                    for (int k = 0; k < nsrc; k++) {
                        fill((baton_dtype)dt, src[k] + off, n);
                        srcs[k] = src[k] + off;
                    }
                    int div = op == BATON_AVG && nsrc > 1 ? nsrc : 0;
                    ref_reduce_n((baton_dtype)dt, (baton_op)op, want, srcs, nsrc, n, div);
                    for (size_t p = 0; p < 3; p++) {
                        if (!use_isa(ISAS[p])) continue;
                        baton__reduce_n(got + es, srcs, nsrc, n, (baton_dtype)dt, (baton_op)op, div);
                        expect_same((baton_dtype)dt, (baton_op)op, ISAS[p], got + es, want, n, "reduce_n", __LINE__);
                    }
                }
        for (int k = 0; k < 16; k++) free(src[k]);
        free(want);
        free(got);
    }
}

TEST(reduce_n_dst_may_alias_any_source) {
    enum { N = 4099 };
    for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
        size_t es = esize((baton_dtype)dt);
        char *orig[5], *src[5], *want = xalloc(N * es);
        for (int k = 0; k < 5; k++) { orig[k] = xalloc(N * es); src[k] = xalloc(N * es); }
        for (int op = 0; op < BATON_OP_COUNT; op++)
            for (int nsrc = 1; nsrc <= 5; nsrc++)
                for (int alias = 0; alias < nsrc; alias++) {
                    const void *srcs[5];
                    for (int k = 0; k < nsrc; k++) { fill((baton_dtype)dt, orig[k], N); srcs[k] = orig[k]; }
                    ref_reduce_n((baton_dtype)dt, (baton_op)op, want, srcs, nsrc, N, op == BATON_AVG ? 3 : 0);
                    for (size_t p = 0; p < 3; p++) {
                        if (!use_isa(ISAS[p])) continue;
                        for (int k = 0; k < nsrc; k++) { memcpy(src[k], orig[k], N * es); srcs[k] = src[k]; }
                        baton__reduce_n(src[alias], srcs, nsrc, N, (baton_dtype)dt, (baton_op)op, op == BATON_AVG ? 3 : 0);
                        expect_same((baton_dtype)dt, (baton_op)op, ISAS[p], src[alias], want, N, "reduce_n alias", __LINE__);
                    }
                }
        for (int k = 0; k < 5; k++) { free(orig[k]); free(src[k]); }
        free(want);
    }
}

/* Outputs at least BATON_REDUCE_NT_BYTES long go through streaming stores after an aligned head. */
TEST(reduce_n_streaming_stores_give_the_same_bits) {
    setenv("BATON_REDUCE_NT_BYTES", "256", 1);  /* read on first use in this forked child */
    enum { N = 3001 };
    for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
        size_t es = esize((baton_dtype)dt);
        char *src[3], *want = xalloc(N * es), *got = xalloc(N * es + 64);
        for (int k = 0; k < 3; k++) src[k] = xalloc(N * es);
        for (int op = 0; op < BATON_OP_COUNT; op++)
            for (int nsrc = 2; nsrc <= 3; nsrc++)
                for (size_t doff = 0; doff < 4; doff++) {
                    const void *srcs[3];
                    for (int k = 0; k < nsrc; k++) { fill((baton_dtype)dt, src[k], N); srcs[k] = src[k]; }
                    size_t n = N - doff * 7;
                    ref_reduce_n((baton_dtype)dt, (baton_op)op, want, srcs, nsrc, n, op == BATON_AVG ? nsrc : 0);
                    for (size_t p = 0; p < 3; p++) {
                        if (!use_isa(ISAS[p])) continue;
                        baton__reduce_n(got + doff * es, srcs, nsrc, n, (baton_dtype)dt, (baton_op)op,
                                        op == BATON_AVG ? nsrc : 0);
                        expect_same((baton_dtype)dt, (baton_op)op, ISAS[p], got + doff * es, want, n, "reduce_n nt", __LINE__);
                    }
                }
        for (int k = 0; k < 3; k++) free(src[k]);
        free(want);
        free(got);
    }
}

TEST(reduce_n_avg_div_rounds_once_and_truncates_integers) {
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        int32_t a[3] = {-7, 7, 5}, b[3] = {0, 0, 0}, out[3];
        const void *s32[2] = {a, b};
        baton__reduce_n(out, s32, 2, 3, BATON_I32, BATON_AVG, 2);
        ASSERT_EQ_INT(out[0], -3);  /* toward zero, not -4 */
        ASSERT_EQ_INT(out[1], 3);
        ASSERT_EQ_INT(out[2], 2);
        float f1[1] = {1.0f}, f2[1] = {1.0f}, f3[1] = {0.0f}, fo[1];
        const void *sf[3] = {f1, f2, f3};
        baton__reduce_n(fo, sf, 3, 1, BATON_F32, BATON_AVG, 3);
        ASSERT_TRUE(fo[0] == 2.0f / 3.0f);
        baton__reduce_n(fo, sf, 3, 1, BATON_F32, BATON_SUM, 3);  /* avg_div only applies to AVG */
        ASSERT_TRUE(fo[0] == 2.0f);
        baton__reduce_n(fo, sf, 3, 1, BATON_F32, BATON_AVG, 0);  /* 0: no division */
        ASSERT_TRUE(fo[0] == 2.0f);
        /* bf16: 1 + 1 + 1 = 3, / 3 = 1 exactly; f16 2/3 rounds to 0x3955 (0.66650390625) */
        uint16_t h1[1] = {0x3c00}, h0[1] = {0}, ho[1];
        const void *sh[3] = {h1, h1, h0};
        baton__reduce_n(ho, sh, 3, 1, BATON_F16, BATON_AVG, 3);
        ASSERT_EQ_INT(ho[0], 0x3955);
        uint16_t b1[1] = {0x3f80}, bo[1];
        const void *sb[3] = {b1, b1, b1};
        baton__reduce_n(bo, sb, 3, 1, BATON_BF16, BATON_AVG, 3);
        ASSERT_EQ_INT(bo[0], 0x3f80);
    }
}

/* ---- 16-bit rounding in the kernels: ties, subnormals, overflow ----------------------------------------- */
TEST(sixteen_bit_sums_round_ties_to_even_and_overflow_to_inf) {
    static const struct { baton_dtype dt; uint16_t a, b, want; } cases[] = {
        {BATON_F16, 0x3c00, 0x1000, 0x3c00},  /* 1 + 2^-11: tie, stays at even 1.0 */
        {BATON_F16, 0x3c00, 0x1600, 0x3c02},  /* 1 + 3*2^-11: tie, up to even 1 + 2^-9 */
        {BATON_F16, 0x3c01, 0x1000, 0x3c02},  /* (1 + 2^-10) + 2^-11: tie, up to even */
        {BATON_F16, 0x7bff, 0x4c00, 0x7c00},  /* 65504 + 16 = 65520: tie, rounds to inf */
        {BATON_F16, 0x7bff, 0x4800, 0x7bff},  /* 65504 + 8: below the midpoint */
        {BATON_F16, 0x0001, 0x0001, 0x0002},  /* subnormals add exactly */
        {BATON_F16, 0x03ff, 0x0001, 0x0400},  /* largest subnormal + min subnormal = min normal */
        {BATON_F16, 0x7c00, 0xfc00, 0x7e00},  /* inf - inf = NaN (quiet) */
        {BATON_BF16, 0x3f80, 0x3b80, 0x3f80}, /* 1 + 2^-8: tie to even */
        {BATON_BF16, 0x3f80, 0x3c40, 0x3f82}, /* 1 + 3*2^-8: tie, up */
        {BATON_BF16, 0x7f7f, 0x7f7f, 0x7f80}, /* overflow to inf */
        {BATON_BF16, 0x0001, 0x0001, 0x0002}, /* subnormal (no flush to zero) */
    };
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            /* 40 copies so the vector loop, not only the scalar tail, sees the case */
            uint16_t d[40], s[40], o[40];
            for (int i = 0; i < 40; i++) { d[i] = cases[c].a; s[i] = cases[c].b; }
            const void *srcs[2] = {d, s};
            baton__reduce_n(o, srcs, 2, 40, cases[c].dt, BATON_SUM, 0);
            baton__reduce(d, s, 40, cases[c].dt, BATON_SUM);
            for (int i = 0; i < 40; i++) {
                uint16_t w = cases[c].want;
                int nan = is_nan16(cases[c].dt, w);
                if (nan ? !(is_nan16(cases[c].dt, d[i]) && is_quiet16(cases[c].dt, d[i]) && is_nan16(cases[c].dt, o[i]))
                        : (d[i] != w || o[i] != w))
                    th_fail(__FILE__, __LINE__, "%s %s case %zu: %04x + %04x = %04x / %04x, want %04x", ISAS[p],
                            DT_NAME[cases[c].dt], c, cases[c].a, cases[c].b, d[i], o[i], cases[c].want);
            }
        }
    }
}

TEST(min_max_follow_x_lt_y_semantics_for_nan_and_signed_zero) {
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        float x[32], y[32], o[32];
        for (int i = 0; i < 32; i++) {
            x[i] = (i % 4 == 0) ? NAN : (i % 4 == 1) ? 1.0f : (i % 4 == 2) ? -0.0f : 0.0f;
            y[i] = (i % 4 == 0) ? 1.0f : (i % 4 == 1) ? NAN : (i % 4 == 2) ? 0.0f : -0.0f;
        }
        const void *s[2] = {x, y};
        baton__reduce_n(o, s, 2, 32, BATON_F32, BATON_MIN, 0);
        for (int i = 0; i < 32; i += 4) {
            ASSERT_TRUE(o[i] == 1.0f);                  /* min(NaN, 1): NaN < 1 is false -> 1 */
            ASSERT_TRUE(isnan(o[i + 1]));               /* min(1, NaN) -> NaN */
            ASSERT_TRUE(o[i + 2] == 0 && !signbit(o[i + 2]));  /* min(-0, +0) -> +0 (the second) */
            ASSERT_TRUE(o[i + 3] == 0 && signbit(o[i + 3]));
        }
        baton__reduce_n(o, s, 2, 32, BATON_F32, BATON_MAX, 0);
        for (int i = 0; i < 32; i += 4) {
            ASSERT_TRUE(o[i] == 1.0f);
            ASSERT_TRUE(isnan(o[i + 1]));
        }
    }
}

TEST(integers_wrap_on_overflow) {
    for (size_t p = 0; p < 3; p++) {
        if (!use_isa(ISAS[p])) continue;
        int32_t a[20], b[20];
        int64_t c[20], d[20];
        for (int i = 0; i < 20; i++) { a[i] = INT32_MAX; b[i] = 1; c[i] = INT64_MAX; d[i] = 2; }
        baton__reduce(a, b, 20, BATON_I32, BATON_SUM);
        baton__reduce(c, d, 20, BATON_I64, BATON_PROD);
        for (int i = 0; i < 20; i++) {
            ASSERT_EQ_INT(a[i], INT32_MIN);
            ASSERT_EQ_INT(c[i], -2);
        }
        for (int i = 0; i < 20; i++) { a[i] = 65536; b[i] = 65536; }
        baton__reduce(a, b, 20, BATON_I32, BATON_PROD);
        for (int i = 0; i < 20; i++) ASSERT_EQ_INT(a[i], 0);
    }
}

/* ---- 16-bit partials in f32, finish_avg ------------------------------------------------------------------ */
TEST(acc16_and_f32_to_16_avg) {
    enum { N = 1037 };
    float *acc0 = xalloc(N * 4), *acc = xalloc(N * 4), *want = xalloc(N * 4);
    uint16_t *src = xalloc(N * 2), *out = xalloc(N * 2);
    for (int dt = BATON_F16; dt <= BATON_BF16; dt++)
        for (int op = 0; op < BATON_OP_COUNT; op++) {
            fill(BATON_F32, acc0, N);
            fill((baton_dtype)dt, src, N);
            for (size_t i = 0; i < N; i++) {
                float y = (float)ref_w((baton_dtype)dt, src[i]);
                want[i] = REF_OP(op, acc0[i], y);
            }
            for (size_t p = 0; p < 3; p++) {
                if (!use_isa(ISAS[p])) continue;
                memcpy(acc, acc0, N * 4);
                baton__reduce_f32_acc16(acc, src, N, (baton_dtype)dt, (baton_op)op);
                expect_same(BATON_F32, (baton_op)op, ISAS[p], acc, want, N, "acc16", __LINE__);
                for (int n = 1; n <= 4; n++) {
                    baton__f32_to_16_avg(out, acc, N, (baton_dtype)dt, n);
                    for (size_t i = 0; i < N; i++) {
                        uint16_t w = ref_n((baton_dtype)dt, (double)acc[i] / n);
                        if (!(out[i] == w || (is_nan16((baton_dtype)dt, w) && is_nan16((baton_dtype)dt, out[i]))))
                            th_fail(__FILE__, __LINE__, "%s %s: round16(%.9g / %d) = %04x, want %04x", ISAS[p],
                                    DT_NAME[dt], acc[i], n, out[i], w);
                    }
                }
            }
        }
    free(acc0);
    free(acc);
    free(want);
    free(src);
    free(out);
}

TEST(finish_avg_every_dtype) {
    enum { N = 1001 };
    for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
        size_t es = esize((baton_dtype)dt);
        char *orig = xalloc(N * es + es), *buf = xalloc(N * es + es), *want = xalloc(N * es);
        for (int n = 1; n <= 5; n += 2) {
            fill((baton_dtype)dt, orig + es, N);
            const void *srcs[1] = {orig + es};
            ref_reduce_n((baton_dtype)dt, BATON_AVG, want, srcs, 1, N, n);
            for (size_t p = 0; p < 3; p++) {
                if (!use_isa(ISAS[p])) continue;
                memcpy(buf + es, orig + es, N * es);
                baton__finish_avg(buf + es, N, (baton_dtype)dt, n);
                if (n == 1 && (dt == BATON_F16 || dt == BATON_BF16)) continue;  /* n == 1 leaves bits as they are */
                expect_same((baton_dtype)dt, BATON_AVG, ISAS[p], buf + es, want, N, "finish_avg", __LINE__);
            }
        }
        free(orig);
        free(buf);
        free(want);
    }
}

/* ---- path selection ------------------------------------------------------------------------------------- */
TEST(isa_can_be_forced_by_name) {
    ASSERT_EQ_INT(baton__reduce_force_isa("sse9"), BATON_EINVAL);
    ASSERT_OK(baton__reduce_force_isa("scalar"));
    ASSERT_STR_EQ(baton__reduce_isa(), "scalar");
}

TEST(baton_simd_env_lowers_the_path) {
    setenv("BATON_SIMD", "scalar", 1);
    ASSERT_STR_EQ(baton__reduce_isa(), "scalar");  /* first call in this forked child: reads the env */
}
