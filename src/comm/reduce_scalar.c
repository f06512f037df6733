/* reduce_scalar.c: the portable reduction kernels. They define the exact results: the vector kernels
 * (reduce_avx2.c, reduce_avx512.c) must give the same bits, and they use these for their tails.
 *
 * Floats: MIN is x < y ? x : y and MAX is x > y ? x : y with x the running value, y the next source
 * (what MINPS/MAXPS compute). Integers are combined as unsigned (two's complement wrap, no UB) and
 * compared as signed. 16-bit floats are widened exactly, combined in f32, rounded once on output. */
#include "comm/reduce_impl.h"

enum { RS_BLOCK = 512 };  /* elements per block of reduce_n: the accumulator stays in L1 */

#define RS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* One loop per op over x[i] = x[i] OP y(i), where the caller defines how y(i) is loaded. */
#define RS_OPLOOP(op, n, X, Y)                                                                     \
    switch (op) {                                                                                  \
    case BATON_SUM: case BATON_AVG: for (size_t i = 0; i < (n); i++) X = X + (Y); break;           \
    case BATON_PROD: for (size_t i = 0; i < (n); i++) X = X * (Y); break;                          \
    case BATON_MIN: for (size_t i = 0; i < (n); i++) { __typeof__(X) y_ = (Y); X = RS_MIN(X, y_); } break; \
    case BATON_MAX: for (size_t i = 0; i < (n); i++) { __typeof__(X) y_ = (Y); X = RS_MAX(X, y_); } break; \
    default: break;                                                                                \
    }

/* Integers: the signed compare needs the signed type. */
#define RS_IOPLOOP(op, n, UT, ST, X, Y)                                                            \
    switch (op) {                                                                                  \
    case BATON_SUM: case BATON_AVG: for (size_t i = 0; i < (n); i++) X = (UT)(X + (UT)(Y)); break; \
    case BATON_PROD: for (size_t i = 0; i < (n); i++) X = (UT)(X * (UT)(Y)); break;                \
    case BATON_MIN: for (size_t i = 0; i < (n); i++) { UT y_ = (UT)(Y); if ((ST)y_ < (ST)X) X = y_; } break; \
    case BATON_MAX: for (size_t i = 0; i < (n); i++) { UT y_ = (UT)(Y); if ((ST)y_ > (ST)X) X = y_; } break; \
    default: break;                                                                                \
    }

void baton__rs_reduce(void *dst, const void *src, size_t n, baton_dtype dt, baton_op op) {
    switch (dt) {
    case BATON_F32: { float *d = dst; const float *s = src; RS_OPLOOP(op, n, d[i], s[i]); break; }
    case BATON_F64: { double *d = dst; const double *s = src; RS_OPLOOP(op, n, d[i], s[i]); break; }
    case BATON_I32: { uint32_t *d = dst; const uint32_t *s = src; RS_IOPLOOP(op, n, uint32_t, int32_t, d[i], s[i]); break; }
    case BATON_I64: { uint64_t *d = dst; const uint64_t *s = src; RS_IOPLOOP(op, n, uint64_t, int64_t, d[i], s[i]); break; }
    case BATON_F16: case BATON_BF16: {
        uint16_t *d = dst;
        const uint16_t *s = src;
        float acc[RS_BLOCK];
        for (size_t b = 0; b < n; b += RS_BLOCK) {
            size_t m = n - b < RS_BLOCK ? n - b : RS_BLOCK;
            if (dt == BATON_F16) {
                for (size_t i = 0; i < m; i++) acc[i] = baton__h2f(d[b + i]);
                RS_OPLOOP(op, m, acc[i], baton__h2f(s[b + i]));
                for (size_t i = 0; i < m; i++) d[b + i] = baton__f2h(acc[i]);
            } else {
                for (size_t i = 0; i < m; i++) acc[i] = baton__b2f(d[b + i]);
                RS_OPLOOP(op, m, acc[i], baton__b2f(s[b + i]));
                for (size_t i = 0; i < m; i++) d[b + i] = baton__f2b(acc[i]);
            }
        }
        break;
    }
    default: break;
    }
}

void baton__rs_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t off, size_t n, baton_dtype dt,
                        baton_op op, int avg_div) {
    int div = (op == BATON_AVG && avg_div > 1) ? avg_div : 0;
    for (size_t b = off; b < off + n; b += RS_BLOCK) {
        size_t m = off + n - b < RS_BLOCK ? off + n - b : RS_BLOCK;
        switch (dt) {
        case BATON_F32: {
            float acc[RS_BLOCK];
            const float *s0 = (const float *)srcs[0] + b;
            for (size_t i = 0; i < m; i++) acc[i] = s0[i];
            for (int k = 1; k < nsrc; k++) { const float *s = (const float *)srcs[k] + b; RS_OPLOOP(op, m, acc[i], s[i]); }
            if (div) for (size_t i = 0; i < m; i++) acc[i] = acc[i] / (float)div;
            float *d = (float *)dst + b;
            for (size_t i = 0; i < m; i++) d[i] = acc[i];
            break;
        }
        case BATON_F64: {
            double acc[RS_BLOCK];
            const double *s0 = (const double *)srcs[0] + b;
            for (size_t i = 0; i < m; i++) acc[i] = s0[i];
            for (int k = 1; k < nsrc; k++) { const double *s = (const double *)srcs[k] + b; RS_OPLOOP(op, m, acc[i], s[i]); }
            if (div) for (size_t i = 0; i < m; i++) acc[i] = acc[i] / (double)div;
            double *d = (double *)dst + b;
            for (size_t i = 0; i < m; i++) d[i] = acc[i];
            break;
        }
        case BATON_I32: {
            uint32_t acc[RS_BLOCK];
            const uint32_t *s0 = (const uint32_t *)srcs[0] + b;
            for (size_t i = 0; i < m; i++) acc[i] = s0[i];
            for (int k = 1; k < nsrc; k++) {
                const uint32_t *s = (const uint32_t *)srcs[k] + b;
                RS_IOPLOOP(op, m, uint32_t, int32_t, acc[i], s[i]);
            }
            int32_t *d = (int32_t *)dst + b;
            if (div) for (size_t i = 0; i < m; i++) d[i] = (int32_t)acc[i] / div;  /* truncates toward 0 */
            else for (size_t i = 0; i < m; i++) d[i] = (int32_t)acc[i];
            break;
        }
        case BATON_I64: {
            uint64_t acc[RS_BLOCK];
            const uint64_t *s0 = (const uint64_t *)srcs[0] + b;
            for (size_t i = 0; i < m; i++) acc[i] = s0[i];
            for (int k = 1; k < nsrc; k++) {
                const uint64_t *s = (const uint64_t *)srcs[k] + b;
                RS_IOPLOOP(op, m, uint64_t, int64_t, acc[i], s[i]);
            }
            int64_t *d = (int64_t *)dst + b;
            if (div) for (size_t i = 0; i < m; i++) d[i] = (int64_t)acc[i] / div;
            else for (size_t i = 0; i < m; i++) d[i] = (int64_t)acc[i];
            break;
        }
        case BATON_F16: case BATON_BF16: {
            float acc[RS_BLOCK];
            const uint16_t *s0 = (const uint16_t *)srcs[0] + b;
            int h = dt == BATON_F16;
            for (size_t i = 0; i < m; i++) acc[i] = h ? baton__h2f(s0[i]) : baton__b2f(s0[i]);
            for (int k = 1; k < nsrc; k++) {
                const uint16_t *s = (const uint16_t *)srcs[k] + b;
                if (h) { RS_OPLOOP(op, m, acc[i], baton__h2f(s[i])); }
                else { RS_OPLOOP(op, m, acc[i], baton__b2f(s[i])); }
            }
            if (div) for (size_t i = 0; i < m; i++) acc[i] = acc[i] / (float)div;
            uint16_t *d = (uint16_t *)dst + b;
            if (h) for (size_t i = 0; i < m; i++) d[i] = baton__f2h(acc[i]);
            else for (size_t i = 0; i < m; i++) d[i] = baton__f2b(acc[i]);
            break;
        }
        default: return;
        }
    }
}

void baton__rs_acc16(float *acc, const uint16_t *src, size_t n, baton_dtype dt16, baton_op op) {
    if (dt16 == BATON_F16) { RS_OPLOOP(op, n, acc[i], baton__h2f(src[i])); }
    else { RS_OPLOOP(op, n, acc[i], baton__b2f(src[i])); }
}

void baton__rs_to16_div(uint16_t *out, const float *acc, size_t n, baton_dtype dt16, int div) {
    float dv = (float)div;
    if (dt16 == BATON_F16) {
        if (div > 1) for (size_t i = 0; i < n; i++) out[i] = baton__f2h(acc[i] / dv);
        else for (size_t i = 0; i < n; i++) out[i] = baton__f2h(acc[i]);
    } else {
        if (div > 1) for (size_t i = 0; i < n; i++) out[i] = baton__f2b(acc[i] / dv);
        else for (size_t i = 0; i < n; i++) out[i] = baton__f2b(acc[i]);
    }
}

void baton__rs_div(void *buf, size_t n, baton_dtype dt, int div) {
    switch (dt) {
    case BATON_F32: { float *p = buf, dv = (float)div; for (size_t i = 0; i < n; i++) p[i] = p[i] / dv; break; }
    case BATON_F64: { double *p = buf, dv = (double)div; for (size_t i = 0; i < n; i++) p[i] = p[i] / dv; break; }
    case BATON_I32: { int32_t *p = buf; for (size_t i = 0; i < n; i++) p[i] = p[i] / div; break; }
    case BATON_I64: { int64_t *p = buf; for (size_t i = 0; i < n; i++) p[i] = p[i] / div; break; }
    case BATON_F16: { uint16_t *p = buf; float dv = (float)div; for (size_t i = 0; i < n; i++) p[i] = baton__f2h(baton__h2f(p[i]) / dv); break; }
    case BATON_BF16: { uint16_t *p = buf; float dv = (float)div; for (size_t i = 0; i < n; i++) p[i] = baton__f2b(baton__b2f(p[i]) / dv); break; }
    default: break;
    }
}

static void rs_widen16(float *dst, const uint16_t *src, size_t n, baton_dtype dt16) {
    if (dt16 == BATON_F16) for (size_t i = 0; i < n; i++) dst[i] = baton__h2f(src[i]);
    else for (size_t i = 0; i < n; i++) dst[i] = baton__b2f(src[i]);
}

static void rs_narrow16(uint16_t *dst, const float *src, size_t n, baton_dtype dt16) {
    baton__rs_to16_div(dst, src, n, dt16, 1);
}

const baton__reduce_kernels baton__reduce_kernels_scalar = {
    .name = "scalar",
    .reduce = baton__rs_reduce,
    .reduce_n = baton__rs_reduce_n,
    .acc16 = baton__rs_acc16,
    .to16_div = baton__rs_to16_div,
    .div_float = baton__rs_div,
    .widen16 = rs_widen16,
    .narrow16 = rs_narrow16,
};
