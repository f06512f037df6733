/* gemm.c: the matrix multiplies of the transformer ops (linear, matmul, attention), on the backend their tape
 * selects (baton_tape_set_gemm): OpenBLAS sgemm, oneDNN sgemm, or oneDNN's matmul primitive on bf16 operands
 * with f32 accumulation and an f32 result (mixed precision: the master weights and every other tensor stay
 * f32). Row-major throughout: c (M,N) = beta*c + op(a) @ op(b), op(x) = x or x^T.
 *
 * bf16: each operand is rounded to bf16 (nearest even) into a compact copy in its stored orientation (a
 * transpose is passed to oneDNN as strides). A weight (a parameter as operand b) is converted once per forward
 * (at its first use after baton_tape_reset, i.e. after the optimizer step) and the copy reused in the backward;
 * an operand the op marks as kept (BATON__KEEP_A/B: a layer's input, converted in the forward, is the weight
 * gradient's second operand; the output gradient is the first operand of both backward products) is converted
 * once per step into the tape's arena and reused; the rest go through a per-tape scratch buffer. oneDNN primitives are created
 * once per shape (transposes, M, N, K, ldc, beta = 0 or not) and cached process-wide. oneDNN itself is
 * loaded on first use (libs.c): a process that never asks for it never maps it. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/libs.h"
#include "nn/nn_impl.h"
#include "util/util.h"

/* ---- f32 -> bf16 ---------------------------------------------------------------------------------------- */
static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* 16 floats to bf16 with AVX512_BF16's vcvtneps2bf16 (round to nearest even, like to_bf16; it reads input
 * denormals as zero, values below 1.2e-38 that bf16 cannot hold as normals anyway). Used only after oneDNN has
 * reported a bf16 ISA, which implies the instruction; the scalar loop serves other CPUs and builds. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HAVE_CVT_BF16 1
__attribute__((target("avx512f,avx512bf16"))) static void cvt_row_bf16(uint16_t *d, const float *s, int n) {
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + j));
        _mm256_storeu_si256((__m256i *)(d + j), (__m256i)v);
    }
    for (; j < n; j++) d[j] = to_bf16(s[j]);
}
#endif

#ifdef HAVE_CVT_BF16
static int use_cvt(void);   /* the CPU has AVX512_BF16 (oneDNN's ISA said so) */
#endif

static void row_bf16(uint16_t *d, const float *s, int n) {
#ifdef HAVE_CVT_BF16
    if (use_cvt()) {
        cvt_row_bf16(d, s, n);
        return;
    }
#endif
    for (int j = 0; j < n; j++) d[j] = to_bf16(s[j]);
}

/* Rows, or chunks of one long row, split over OpenMP's threads (elementwise: the same bits for any count). */
void baton__to_bf16(uint16_t *dst, const float *src, int rows, int cols, int ld) {
    if (rows == 1) {
        enum { CH = 1 << 14 };
#pragma omp parallel for schedule(static) if (cols >= BATON__PAR_MIN)
        for (int j = 0; j < cols; j += CH) row_bf16(dst + j, src + j, cols - j < CH ? cols - j : CH);
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= BATON__PAR_MIN)
    for (int i = 0; i < rows; i++) row_bf16(dst + (size_t)i * cols, src + (size_t)i * ld, cols);
}

float baton__bf16_round(float f) {
    uint32_t u = (uint32_t)to_bf16(f) << 16;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

/* ---- oneDNN: engine, stream, primitive cache -------------------------------------------------------------- */
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc, bias, cbf, bany;   /* key, with beta; bias: an f32 (n) vector added to
                                                           * every row; cbf: the result is stored as bf16; bany: b
                                                           * in the layout the primitive picks (wmd), a packed weight */
    float beta;
    size_t scratch;   /* the primitive's scratchpad bytes (user-managed: see bf16_exec) */
    dnnl_memory_desc_t wmd;   /* bany: b's layout */
    dnnl_primitive_t prim;
    dnnl_memory_t ma, mb, mc, mbias, ms;
} prim_entry;

#define PRIM_CACHE 512
static struct {
    pthread_mutex_t mu;
    int init;         /* 0 not tried, 1 ready, -1 no CPU engine, -2 the library did not load */
    int bf16;         /* the CPU has AVX512_BF16 or AMX (oneDNN's effective ISA) */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    prim_entry e[PRIM_CACHE];
    int n;
} g_dnnl = {.mu = PTHREAD_MUTEX_INITIALIZER};
static const baton__dnnl_api *dn;   /* set before g_dnnl.init becomes 1 */

static int dnnl_ready(void) {
    pthread_mutex_lock(&g_dnnl.mu);
    if (!g_dnnl.init) {
        g_dnnl.init = -2;
        dn = baton__dnnl();
        if (!dn) goto out;
        g_dnnl.init = -1;
        if (dn->dnnl_engine_create(&g_dnnl.engine, dnnl_cpu, 0) == dnnl_success &&
            dn->dnnl_stream_create(&g_dnnl.stream, g_dnnl.engine, dnnl_stream_default_flags) == dnnl_success)
            g_dnnl.init = 1;
        dnnl_cpu_isa_t isa = dn->dnnl_get_effective_cpu_isa();
        g_dnnl.bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    }
out:;
    int ok = g_dnnl.init == 1;
    pthread_mutex_unlock(&g_dnnl.mu);
    return ok;
}

int baton_gemm_bf16_available(void) { return dnnl_ready() && g_dnnl.bf16; }
#ifdef HAVE_CVT_BF16 /* (clang 14 builds without it: no caller then) */
static int use_cvt(void) { return g_dnnl.init == 1 && g_dnnl.bf16; }
#endif

static int md2(dnnl_memory_desc_t *md, int rows, int cols, int trans, int ld, dnnl_data_type_t dt) {
    /* logical (rows, cols); stored row-major as given (trans: the stored matrix is (cols, rows)) */
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
    return dn->dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) == dnnl_success ? 0 : -1;
}

static prim_entry *prim_get(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc, float beta, int bias, int cbf,
                            int bany) {
    pthread_mutex_lock(&g_dnnl.mu);
    for (int i = 0; i < g_dnnl.n; i++) {
        prim_entry *e = &g_dnnl.e[i];
        if (e->ta == ta && e->tb == tb && e->m == m && e->n == n && e->k == k && e->lda == lda && e->ldb == ldb &&
            e->ldc == ldc && e->beta == beta && e->bias == bias && e->cbf == cbf && e->bany == bany) {
            pthread_mutex_unlock(&g_dnnl.mu);
            return e;
        }
    }
    if (g_dnnl.n == PRIM_CACHE) {   /* full (many shapes, e.g. generation): start over */
        for (int i = 0; i < g_dnnl.n; i++) {
            dn->dnnl_primitive_destroy(g_dnnl.e[i].prim);
            dn->dnnl_memory_destroy(g_dnnl.e[i].ma);
            dn->dnnl_memory_destroy(g_dnnl.e[i].mb);
            dn->dnnl_memory_destroy(g_dnnl.e[i].mc);
            if (g_dnnl.e[i].mbias) dn->dnnl_memory_destroy(g_dnnl.e[i].mbias);
            dn->dnnl_memory_destroy(g_dnnl.e[i].ms);
        }
        g_dnnl.n = 0;
    }
    prim_entry *e = &g_dnnl.e[g_dnnl.n];
    memset(e, 0, sizeof *e);
    *e = (prim_entry){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .beta = beta,
                      .bias = bias, .cbf = cbf, .bany = bany};
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md, s_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_dims_t b_dims = {k, n};
    int ok = !md2(&a_md, m, k, ta, lda, dnnl_bf16) &&
             (bany ? dn->dnnl_memory_desc_init_by_tag(&b_md, 2, b_dims, dnnl_bf16, dnnl_format_tag_any) == dnnl_success
                   : !md2(&b_md, k, n, tb, ldb, dnnl_bf16)) &&
             !md2(&c_md, m, n, 0, ldc, cbf ? dnnl_bf16 : dnnl_f32) && (!bias || !md2(&bias_md, 1, n, 0, n, dnnl_f32)) &&
             dn->dnnl_matmul_desc_init(&desc, &a_md, &b_md, bias ? &bias_md : NULL, &c_md) == dnnl_success &&
             dn->dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dn->dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && beta != 0.0f)
        ok = dn->dnnl_post_ops_create(&po) == dnnl_success && dn->dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
             dn->dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dn->dnnl_primitive_desc_create(&pd, &desc, attr, g_dnnl.engine, NULL) == dnnl_success &&
         dn->dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    if (ok) {
        s_md = *dn->dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->scratch = dn->dnnl_memory_desc_get_size(&s_md);
        if (bany) b_md = e->wmd = *dn->dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    }
    ok = ok && dn->dnnl_memory_create(&e->ms, &s_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dn->dnnl_memory_create(&e->ma, &a_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dn->dnnl_memory_create(&e->mb, &b_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dn->dnnl_memory_create(&e->mc, &c_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!bias || dn->dnnl_memory_create(&e->mbias, &bias_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success);
    if (pd) dn->dnnl_primitive_desc_destroy(pd);
    if (po) dn->dnnl_post_ops_destroy(po);
    if (attr) dn->dnnl_primitive_attr_destroy(attr);
    if (ok) g_dnnl.n++;
    pthread_mutex_unlock(&g_dnnl.mu);
    if (!ok) {   /* every shape here is a plain 2-D matmul oneDNN implements; failing is a broken install */
        fprintf(stderr, "baton: oneDNN could not create a bf16 matmul (%dx%dx%d); reinstall libdnnl2\n", m, n, k);
        abort();
    }
    return e;
}

/* A buffer that only grows: p if it holds bytes (*cap), else a new 64-byte-aligned one (p freed, *cap updated; out
 * of memory aborts naming what). The tape's operand scratch, the per-thread oneDNN scratchpad and packed weights. */
static void *grown(void *p, size_t *cap, size_t bytes, const char *what) {
    if (bytes <= *cap) return p;
    free(p);
    p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "baton: out of memory for %s (%zu bytes)\n", what, bytes);
        abort();
    }
    *cap = bytes;
    return p;
}

static _Thread_local struct {
    void *p;
    size_t cap;
} t_scratch;

/* beta is part of the primitive (the sum post-op's scale); the ops pass only 0 and 1. bias (NULL or n floats) is
 * added to every row of the f32 accumulator before the store (one f32 addition per element, as a separate pass
 * over c would do: the same bits, without reading and writing c again). cbf: c is bf16 (the f32 result rounded to
 * nearest even at the store, as baton__to_bf16 would round it), else f32. */
static void bf16_exec(prim_entry *e, const uint16_t *a, const void *b, void *c, const float *bias) {
    int m = e->m, n = e->n, k = e->k;
    /* The scratchpad is the caller's (a per-thread buffer that only grows): in oneDNN's default mode the library
     * allocates it at every execution and frees it after, and the GPT step page-faulted about 46 MB of fresh
     * scratchpad per step (11,500 faults, perf: about 20 % of the bf16 step's samples in the kernel). */
    t_scratch.p = grown(t_scratch.p, &t_scratch.cap, e->scratch, "a oneDNN scratchpad");
    dn->dnnl_memory_set_data_handle(e->ma, (void *)a);
    dn->dnnl_memory_set_data_handle(e->mb, (void *)b);
    dn->dnnl_memory_set_data_handle(e->mc, c);
    dn->dnnl_memory_set_data_handle(e->ms, t_scratch.p);
    if (bias) dn->dnnl_memory_set_data_handle(e->mbias, (void *)bias);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, e->ma}, {DNNL_ARG_WEIGHTS, e->mb}, {DNNL_ARG_DST, e->mc},
                               {DNNL_ARG_SCRATCHPAD, e->ms}, {DNNL_ARG_BIAS, e->mbias}};
    if (dn->dnnl_primitive_execute(e->prim, g_dnnl.stream, bias ? 5 : 4, args) != dnnl_success) {
        fprintf(stderr, "baton: oneDNN bf16 matmul failed (%dx%dx%d)\n", m, n, k);
        abort();
    }
}

static void bf16_matmul(int ta, int tb, int m, int n, int k, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                        float beta, void *c, int ldc, const float *bias, int cbf) {
    bf16_exec(prim_get(ta, tb, m, n, k, lda, ldb, ldc, beta, bias != NULL, cbf, 0), a, b, c, bias);
}

/* ---- batched bf16 products on strided views, one OpenMP thread each (attention) ------------------------------
 * Attention's per-head products are small (T x T x D); its bf16 path runs one product per sequence over that
 * sequence's H heads as one batched matmul, inside the parallel loop over the sequences, so that each thread keeps
 * its sequence's scores in cache. oneDNN 2.6 fixes a primitive's thread split when it is created: a primitive
 * created inside the parallel region is a 1-thread one, and one created outside is not run inside it (the key
 * holds omp_in_parallel()). Each OS thread has its own slot (stream, primitives, memory objects and a user-managed
 * scratchpad) in thread-local storage, so no two threads share a mutable oneDNN object, whichever team or OpenMP
 * thread number they run as (two of the user's threads may each run a parallel region). OpenMP's pool threads live
 * as long as the process, and so do their slots. */
typedef struct {
    baton__bmm key;
    int par;
    dnnl_primitive_t prim;
    dnnl_memory_t ma, mb, mc, ms;
} bmm_entry;
enum { BMM_CACHE = 128 };
typedef struct {
    dnnl_stream_t stream;
    bmm_entry e[BMM_CACHE];
    int n;
    void *scratch;
    size_t scratch_cap;
} bmm_slot;
static _Thread_local bmm_slot *t_bmm;

static int md3(dnnl_memory_desc_t *md, int batch, int rows, int cols, const long long st[3], dnnl_data_type_t dt) {
    dnnl_dims_t dims = {batch, rows, cols}, strides = {st[0], st[1], st[2]};
    return dn->dnnl_memory_desc_init_by_strides(md, 3, dims, dt, strides) == dnnl_success ? 0 : -1;
}

static void bmm_fail(const baton__bmm *s, const char *what) {
    fprintf(stderr, "baton: oneDNN %s a batched bf16 matmul (%d x %dx%dx%d); reinstall libdnnl2\n", what, s->batch, s->m,
            s->n, s->k);
    abort();
}

static bmm_entry *bmm_get(bmm_slot *sl, const baton__bmm *s, int par) {
    for (int i = 0; i < sl->n; i++)
        if (sl->e[i].par == par && !memcmp(&sl->e[i].key, s, sizeof *s)) return &sl->e[i];
    if (sl->n == BMM_CACHE) {   /* many shapes (e.g. generation's growing context): start over */
        for (int i = 0; i < sl->n; i++) {
            bmm_entry *e = &sl->e[i];
            dn->dnnl_primitive_destroy(e->prim);
            dn->dnnl_memory_destroy(e->ma);
            dn->dnnl_memory_destroy(e->mb);
            dn->dnnl_memory_destroy(e->mc);
            dn->dnnl_memory_destroy(e->ms);
        }
        sl->n = 0;
    }
    bmm_entry *e = &sl->e[sl->n];
    memset(e, 0, sizeof *e);
    e->key = *s;
    e->par = par;
    dnnl_memory_desc_t a_md, b_md, c_md, s_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = !md3(&a_md, s->batch, s->m, s->k, s->as, dnnl_bf16) && !md3(&b_md, s->batch, s->k, s->n, s->bs, dnnl_bf16) &&
             !md3(&c_md, s->batch, s->m, s->n, s->cs, dnnl_f32) &&
             dn->dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md) == dnnl_success &&
             dn->dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dn->dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && s->beta != 0.0f)
        ok = dn->dnnl_post_ops_create(&po) == dnnl_success && dn->dnnl_post_ops_append_sum(po, s->beta) == dnnl_success &&
             dn->dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dn->dnnl_primitive_desc_create(&pd, &desc, attr, g_dnnl.engine, NULL) == dnnl_success &&
         dn->dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    if (ok) {
        s_md = *dn->dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        size_t need = dn->dnnl_memory_desc_get_size(&s_md);
        if (need > sl->scratch_cap) {
            free(sl->scratch);
            sl->scratch = malloc(need);
            sl->scratch_cap = sl->scratch ? need : 0;
            ok = sl->scratch != NULL;
        }
        ok = ok && dn->dnnl_memory_create(&e->ma, &a_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dn->dnnl_memory_create(&e->mb, &b_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dn->dnnl_memory_create(&e->mc, &c_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dn->dnnl_memory_create(&e->ms, &s_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success;
    }
    if (pd) dn->dnnl_primitive_desc_destroy(pd);
    if (po) dn->dnnl_post_ops_destroy(po);
    if (attr) dn->dnnl_primitive_attr_destroy(attr);
    if (!ok) bmm_fail(s, "could not create");
    sl->n++;
    return e;
}

int baton__bmm_bf16_available(void) { return dnnl_ready() && g_dnnl.bf16; }

void baton__bmm_bf16(const baton__bmm *s, const uint16_t *a, const uint16_t *b, float *c) {
    int par = omp_in_parallel();
    BATON_ASSERT(g_dnnl.init == 1 && g_dnnl.bf16);
    bmm_slot *sl = t_bmm;
    if (!sl) {   /* this thread's first call */
        sl = calloc(1, sizeof *sl);
        if (!sl || dn->dnnl_stream_create(&sl->stream, g_dnnl.engine, dnnl_stream_default_flags) != dnnl_success)
            bmm_fail(s, "could not create a stream for");
        t_bmm = sl;
    }
    bmm_entry *e = bmm_get(sl, s, par);
    dn->dnnl_memory_set_data_handle(e->ma, (void *)a);
    dn->dnnl_memory_set_data_handle(e->mb, (void *)b);
    dn->dnnl_memory_set_data_handle(e->mc, c);
    dn->dnnl_memory_set_data_handle(e->ms, sl->scratch);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->ma}, {DNNL_ARG_WEIGHTS, e->mb}, {DNNL_ARG_DST, e->mc},
                               {DNNL_ARG_SCRATCHPAD, e->ms}};
    if (dn->dnnl_primitive_execute(e->prim, sl->stream, 4, args) != dnnl_success) bmm_fail(s, "failed to run");
}

/* ---- scratch and the per-tape weight cache ------------------------------------------------------------------ */
static uint16_t *scratch_get(baton_tape *t, int which, size_t n) {
    return t->bf16_scratch[which] = grown(t->bf16_scratch[which], &t->bf16_scratch_cap[which], n * sizeof(uint16_t),
                                          "bf16 operand values");
}

/* The bf16 copy of parameter p's data, converted at its first use since the tape's last reset. */
static const uint16_t *weight_bf16(baton_tape *t, int p) {
    baton_tensor *w = baton_params_tensor(t->params, p);
    if (!t->wbf) {
        t->wbf = calloc((size_t)t->cap_params, sizeof *t->wbf);
        t->wbf_stamp = calloc((size_t)t->cap_params, sizeof *t->wbf_stamp);
        if (!t->wbf || !t->wbf_stamp) {
            fprintf(stderr, "baton: out of memory for the bf16 weight cache\n");
            abort();
        }
    }
    if (!t->wbf[p]) {
        t->wbf[p] = malloc(w->n * sizeof(uint16_t));
        if (!t->wbf[p]) {
            fprintf(stderr, "baton: out of memory for the bf16 weight cache\n");
            abort();
        }
    }
    if (t->wbf_stamp[p] != t->stamp) {
        baton__to_bf16(t->wbf[p], w->data, 1, (int)w->n, (int)w->n);
        t->wbf_stamp[p] = t->stamp;
        t->wbf_conversions++;
    }
    return t->wbf[p];
}

/* ---- packed weights -------------------------------------------------------------------------------------------
 * A weight as the second operand of a product (the forward's x W^T, the input gradient's dY W) is given to oneDNN in
 * the layout its primitive picks (format_tag any), converted from the f32 parameter by a oneDNN reorder once per
 * step and orientation (the reorder rounds to nearest even, as baton__to_bf16 does). With a plain bf16 weight the
 * brgemm kernels repack it at every execution; bench/onednn_matmul_bench.c measured the GPT's forward and
 * input-gradient shapes 5-15 % faster with packed weights. The layout may depend on the product's M (another batch
 * or context), so a slot remembers the layout it holds and repacks when a product asks for another. */
struct baton__wpack {
    dnnl_memory_desc_t md;      /* the packed layout held */
    const float *from;          /* of this f32 matrix */
    void *buf;
    size_t cap;
    unsigned stamp, counted;    /* packed at this stamp; counted as this step's conversion of the parameter */
    dnnl_primitive_t reorder;   /* the f32 parameter (as stored) -> md */
    dnnl_memory_t src, dst;
};

static void wpack_clear(struct baton__wpack *s) {
    if (!s->reorder) return;
    dn->dnnl_primitive_destroy(s->reorder);
    dn->dnnl_memory_destroy(s->src);
    dn->dnnl_memory_destroy(s->dst);
    s->reorder = NULL;
}

/* Parameter p's data b (stored (k,n) row-major with ld ldb, or transposed: tb) packed in e's layout for this step. */
static const void *weight_packed(baton_tape *t, int p, const float *b, int tb, int ldb, const prim_entry *e) {
    if (!t->wpack) {
        t->wpack = calloc(2 * (size_t)t->cap_params, sizeof *t->wpack);
        if (!t->wpack) {
            fprintf(stderr, "baton: out of memory for the packed weights\n");
            abort();
        }
    }
    struct baton__wpack *s = &t->wpack[2 * p + (tb != 0)], *o = &t->wpack[2 * p + (tb == 0)];
    int same = s->reorder && dn->dnnl_memory_desc_equal(&s->md, &e->wmd);
    if (same && s->stamp == t->stamp && s->from == b) return s->buf;
    if (!same) {
        wpack_clear(s);
        s->buf = grown(s->buf, &s->cap, dn->dnnl_memory_desc_get_size(&e->wmd), "a packed weight");
        dnnl_memory_desc_t src_md;
        dnnl_primitive_desc_t pd = NULL;
        int ok = !md2(&src_md, e->k, e->n, tb, ldb, dnnl_f32) &&
                 dn->dnnl_reorder_primitive_desc_create(&pd, &src_md, g_dnnl.engine, &e->wmd, g_dnnl.engine, NULL) ==
                     dnnl_success &&
                 dn->dnnl_primitive_create(&s->reorder, pd) == dnnl_success &&
                 dn->dnnl_memory_create(&s->src, &src_md, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success &&
                 dn->dnnl_memory_create(&s->dst, &e->wmd, g_dnnl.engine, DNNL_MEMORY_NONE) == dnnl_success;
        if (pd) dn->dnnl_primitive_desc_destroy(pd);
        if (!ok) {
            fprintf(stderr, "baton: oneDNN could not pack a %dx%d bf16 weight; reinstall libdnnl2\n", e->k, e->n);
            abort();
        }
        s->md = e->wmd;
    }
    dn->dnnl_memory_set_data_handle(s->src, (void *)b);
    dn->dnnl_memory_set_data_handle(s->dst, s->buf);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->src}, {DNNL_ARG_TO, s->dst}};
    if (dn->dnnl_primitive_execute(s->reorder, g_dnnl.stream, 2, args) != dnnl_success) {
        fprintf(stderr, "baton: oneDNN failed to pack a %dx%d bf16 weight\n", e->k, e->n);
        abort();
    }
    s->stamp = t->stamp;
    s->from = b;
    if (s->counted != t->stamp && o->counted != t->stamp) t->wbf_conversions++;
    s->counted = t->stamp;
    return s->buf;
}

/* ---- activations and gradients kept for the step ------------------------------------------------------------ */
enum { KEPT_MAX = 256 };   /* a 6-layer GPT keeps 50 per step; past the cap, operands are converted per product */

/* The table of kept copies, emptied when the tape was reset since its last use (the arena and its copies are gone) */
static void kept_table(baton_tape *t) {
    if (!t->kept) {
        t->kept = calloc(KEPT_MAX, sizeof *t->kept);
        if (!t->kept) {
            fprintf(stderr, "baton: out of memory for the bf16 operand table\n");
            abort();
        }
    }
    if (t->kept_stamp != t->stamp) {
        t->n_kept = 0;
        t->kept_stamp = t->stamp;
    }
}

/* A new kept entry for src (rows, cols; ld) and its arena copy, or NULL when the table is full */
static uint16_t *kept_new(baton_tape *t, const float *src, int rows, int cols, int ld) {
    kept_table(t);
    if (t->n_kept >= KEPT_MAX) return NULL;
    uint16_t *d = baton__arena_alloc(t, (size_t)rows * cols * sizeof *d);
    t->kept[t->n_kept++] = (struct baton__kept_bf16){.src = src, .rows = rows, .cols = cols, .ld = ld, .bf = d};
    return d;
}

/* The kept bf16 copy of src (rows, cols; ld) made since the tape's last reset, or NULL (the newest first). */
static uint16_t *kept_find(const baton_tape *t, const float *src, int rows, int cols, int ld) {
    if (!t->kept || t->kept_stamp != t->stamp) return NULL;
    for (int i = t->n_kept - 1; i >= 0; i--) {
        const struct baton__kept_bf16 *e = &t->kept[i];
        if (e->src == src && e->rows == rows && e->cols == cols && e->ld == ld) return e->bf;
    }
    return NULL;
}

uint16_t *baton__bf16_slot(baton_tape *t, const float *src, int rows, int cols) {
    if (!t || t->gemm != BATON_GEMM_ONEDNN_BF16 || rows <= 0 || cols <= 0 || !dnnl_ready() || !g_dnnl.bf16) return NULL;
    return kept_new(t, src, rows, cols, cols);
}

void baton__feeds_products(baton_tape *t) { t->products_only_next = 1; }

uint16_t *baton__bf16_out(baton_tape *t, const float *src, int rows, int cols, int *only) {
    int want = t && t->products_only_next && !t->products_only_off && cols <= BATON__ROW_MAX;
    if (t) t->products_only_next = 0;
    uint16_t *d = baton__bf16_slot(t, src, rows, cols);
    *only = d && want;
    if (*only) {
        t->kept[t->n_kept - 1].only = 1;
        t->bf16_only_outputs++;
    }
    return d;
}

uint16_t *baton__grad_slot(baton_tape *t, baton_tensor *x, float beta) {
    int act = 0, op;
    if (beta != 0.0f || !t || t->gemm != BATON_GEMM_ONEDNN_BF16 || x->ndim != 2 || !baton__sole_use(t, x)) return NULL;
    op = baton__producer_op(t, x, &act);
    if (op != BATON__OP_MATMUL && !(op == BATON__OP_LINEAR && act == BATON_ACT_NONE)) return NULL;
    return baton__bf16_slot(t, x->grad, x->shape[0], x->shape[1]);
}

void baton__row_to_bf16(uint16_t *dst, const float *src, int n) { row_bf16(dst, src, n); }

const uint16_t *baton__bf16_kept(baton_tape *t, const float *src, int rows, int cols) {
    if (!t || t->gemm != BATON_GEMM_ONEDNN_BF16) return NULL;
    return kept_find(t, src, rows, cols, cols);
}

int baton__kept_stale(baton_tape *t) {
    if (!t->kept || t->kept_stamp != t->stamp) return 0;
    int bad = 0;
    for (int i = 0; i < t->n_kept; i++) {
        const struct baton__kept_bf16 *e = &t->kept[i];
        for (int r = 0; r < e->rows && !e->only; r++)
            for (int j = 0; j < e->cols; j++)
                if (e->bf[(size_t)r * e->cols + j] != to_bf16(e->src[(size_t)r * e->ld + j])) {
                    bad++;
                    r = e->rows;
                    break;
                }
    }
    return bad;
}

/* The compact bf16 copy of the stored matrix src (rows, cols; ld): a kept one (converted by an earlier product of
 * this step, or now into the arena), or a fresh conversion into scratch buffer `which`. */
static const uint16_t *operand_bf16(baton_tape *t, const float *src, int rows, int cols, int ld, int keep, int which) {
    size_t n = (size_t)rows * cols;
    if (!t) {
        uint16_t *d = malloc(n * sizeof *d);
        BATON_ASSERT(d);
        baton__to_bf16(d, src, rows, cols, ld);
        return d;
    }
    if (keep) {
        kept_table(t);
        const uint16_t *hit = kept_find(t, src, rows, cols, ld);
        if (hit) return hit;
    }
    uint16_t *d = keep ? kept_new(t, src, rows, cols, ld) : NULL;
    if (!d) d = scratch_get(t, which, n);
    baton__to_bf16(d, src, rows, cols, ld);
    t->kept_conversions++;
    return d;
}

/* ---- the entry points ------------------------------------------------------------------------------------- */
static int bf16_ok(int backend, int k) { return backend == BATON_GEMM_ONEDNN_BF16 && k > 0 && dnnl_ready() && g_dnnl.bf16; }

static void run(int backend, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                float beta, float *c, int ldc, baton_tape *t, int b_param, int keep, const float *bias, uint16_t *cb) {
    if (m == 0 || n == 0) return;
    if (bf16_ok(backend, k)) {
        /* compact bf16 copies of each operand in its stored orientation, (m,k) or (k,m) for a, (k,n) or (n,k)
         * for b; oneDNN's matmul takes the transposes as strides (its brgemm kernels ran the GPT's transposed
         * first operands, K = 4096, within 5 % of untransposed ones: docs/gpt.md) */
        const uint16_t *ab = operand_bf16(t, a, ta ? k : m, ta ? m : k, lda, keep & BATON__KEEP_A, 0), *bb;
        int alda = ta ? m : k, bld = tb ? k : n;
        if (t && t->params && b_param >= 0 && !t->wpack_off) {
            prim_entry *e = prim_get(ta, tb, m, n, k, alda, 0, ldc, beta, bias != NULL, cb != NULL, 1);
            bf16_exec(e, ab, weight_packed(t, b_param, b, tb, ldb, e), cb ? (void *)cb : (void *)c, bias);
            return;
        }
        if (t && t->params && b_param >= 0) {
            bb = weight_bf16(t, b_param);
            bld = ldb;   /* the whole parameter, row length ldb */
        } else {
            bb = operand_bf16(t, b, tb ? n : k, tb ? k : n, ldb, keep & BATON__KEEP_B, 1);
        }
        bf16_matmul(ta, tb, m, n, k, ab, alda, bb, bld, beta, cb ? (void *)cb : (void *)c, ldc, bias, cb != NULL);
        if (!t) {
            free((void *)ab);
            free((void *)bb);
        }
        return;
    }
    if (backend != BATON_GEMM_OPENBLAS && dnnl_ready()) {
        dn->dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    baton__sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void baton__gemm(baton_tape *t, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                 int b_param, int keep, float beta, float *c, int ldc) {
    run(t->gemm, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, t, b_param, keep, NULL, NULL);
}

int baton__gemm_bias(baton_tape *t, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                     int b_param, int keep, const float *bias, float *c, uint16_t *cb, int ldc) {
    if (!bias || t->gemm_bias_off || !bf16_ok(t->gemm, k)) return 0;
    run(t->gemm, ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc, t, b_param, keep, bias, cb);
    return 1;
}

void baton_gemm(baton_gemm_backend backend, int ta, int tb, int m, int n, int k, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc) {
    run(backend, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, NULL, -1, 0, NULL, NULL);
}

int baton_tape_set_gemm(baton_tape *t, baton_gemm_backend backend) {
    if (backend < BATON_GEMM_OPENBLAS || backend > BATON_GEMM_ONEDNN_BF16)
        return baton__fail(BATON_EINVAL, "gemm backend %d unknown", (int)backend);
    if (backend != BATON_GEMM_OPENBLAS && !dnnl_ready()) {
        char why[512];
        if (g_dnnl.init == -2) return baton__fail(BATON_EINVAL, "%s, or use OpenBLAS", baton__dnnl_error(why, sizeof why));
        return baton__fail(BATON_EINVAL, "oneDNN could not create a CPU engine");
    }
    if (backend == BATON_GEMM_ONEDNN_BF16 && !g_dnnl.bf16)
        return baton__fail(BATON_EINVAL, "this CPU has neither AVX512_BF16 nor AMX (oneDNN's ISA: %#x)",
                           (unsigned)dn->dnnl_get_effective_cpu_isa());
    t->gemm = backend;
    return BATON_OK;
}

size_t baton_tape_bf16_conversions(const baton_tape *t) { return t->wbf_conversions; }

void baton__gemm_threads(int threads) { baton__omp()->omp_set_num_threads(threads < 1 ? 1 : threads); }

void baton__tape_gemm_free(baton_tape *t) {
    for (int i = 0; t->wbf && i < t->cap_params; i++) free(t->wbf[i]);
    free(t->wbf);
    free(t->wbf_stamp);
    for (int i = 0; t->wpack && i < 2 * t->cap_params; i++) {
        wpack_clear(&t->wpack[i]);
        free(t->wpack[i].buf);
    }
    free(t->wpack);
    free(t->bf16_scratch[0]);
    free(t->bf16_scratch[1]);
    free(t->kept);
}
