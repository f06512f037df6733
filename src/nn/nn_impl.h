/* nn_impl.h: internals shared by the files of src/nn: the tape's node list and arena, the op enum with one
 * backward function per op, and the gradient-buffer helpers every op uses.
 *
 * Gradient writes: the first contribution to a tensor's gradient overwrites it (beta = 0 / "="), later
 * ones add. grad_begin(x) returns 0.0f for "overwrite" or 1.0f for "add" and marks x full. */
#ifndef BATON_NN_IMPL_H
#define BATON_NN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "baton/nn.h"

/* X(name): one entry per op; the backward table in tape.c is built from the same list. */
#define BATON_OP_MAP(X) \
    X(MATMUL)           \
    X(BIAS_ADD)         \
    X(RELU)             \
    X(GELU)             \
    X(TANH)             \
    X(LINEAR)           \
    X(CROSS_ENTROPY)    \
    X(LOG_SOFTMAX)      \
    X(CONV2D)           \
    X(MAXPOOL2D)        \
    X(FLATTEN)          \
    X(DROPOUT)          \
    X(LAYERNORM)        \
    X(EMBEDDING)        \
    X(ADD)              \
    X(ATTENTION)

enum {
#define BATON_OP_ENUM_(name) BATON__OP_##name,
    BATON_OP_MAP(BATON_OP_ENUM_)
#undef BATON_OP_ENUM_
    BATON__OP_COUNT
};

#define BATON_NODE_INPUTS 3
typedef struct {
    int op;                                /* BATON__OP_* */
    baton_tensor *in[BATON_NODE_INPUTS];   /* inputs (NULL if unused) */
    baton_tensor *out;
    void *saved;                           /* op-specific saved buffer in the arena (mask, stats, ...) */
    const int32_t *idx;                    /* labels / ids borrowed from the caller */
    int iarg[4];                           /* op-specific integers (trans, act, stride, pad, ...) */
    float farg;                            /* op-specific float (dropout p, eps) */
} baton_node;

/* Arena: 64-byte aligned bump allocation in chunks, kept in allocation order and reused from the first at
 * every reset (so a step after the first touches no new memory). */
typedef struct baton_chunk baton_chunk;
struct baton_chunk {
    baton_chunk *next;
    size_t cap, used;
    _Alignas(64) unsigned char data[];
};

struct baton_tape {
    baton_params *params;    /* borrowed; may be NULL */
    int training;
    baton_rng rng;           /* dropout */
    baton_chunk *chunks;     /* first chunk; the list is in allocation order */
    baton_chunk *cur;        /* the chunk allocations come from now */
    size_t mallocs;          /* chunk allocations so far */
    baton_node *nodes;       /* node list (grows geometrically; stable once warm) */
    int n_nodes, cap_nodes;
    int *first_use;          /* per parameter: index of the first node using it this forward, or -1 */
    int cap_params;
    baton_grad_hook hook;
    void *hook_ctx;
    baton_grad_hook need;    /* before a parameter's first gradient write of a backward (ZeRO-2 staging) */
    void *need_ctx;
    int gemm;                /* baton_gemm_backend of the transformer ops (gemm.c) */
    unsigned stamp;          /* incremented by every reset: a bf16 weight copy is fresh if its stamp matches */
    uint16_t **wbf;          /* per parameter: bf16 copy of its data, or NULL (allocated on first use) */
    unsigned *wbf_stamp;
    size_t wbf_conversions;  /* weight conversions so far (tests: once per forward) */
    struct baton__wpack *wpack;      /* per parameter x 2 (as the forward's and as dX's operand): packed bf16 (gemm.c) */
    int wpack_off;                   /* tests and benchmarks: weights as plain bf16 copies, not packed */
    int gelu_colsum_off;             /* tests: the GELU layer's bias gradient in a separate pass (bf16 products) */
    uint16_t *bf16_scratch[2];
    size_t bf16_scratch_cap[2];
    struct baton__kept_bf16 *kept;   /* bf16 copies of activations and gradients kept for this step (gemm.c) */
    int n_kept;
    unsigned kept_stamp;             /* the stamp the kept copies belong to */
    size_t kept_conversions;         /* operand conversions so far (tests) */
    int products_only_next;          /* baton__feeds_products: the next op's output feeds bf16 products only */
    int products_only_off;           /* tests: write the f32 outputs anyway (the bits must not change) */
    int attn_bf16_off;               /* tests and benchmarks: attention's products in f32 under bf16 products */
    int gemm_bias_off;               /* tests and benchmarks: linear layers add their bias in a separate pass */
    size_t bf16_only_outputs;        /* outputs written as bf16 copies only, so far (tests) */
};

void *baton__arena_alloc(baton_tape *t, size_t bytes);       /* aborts on out-of-memory */
baton_node *baton__tape_push(baton_tape *t, int op);
/* New activation tensor; has a gradient buffer when training and requires_grad. */
baton_tensor *baton__tensor_new(baton_tape *t, int ndim, const int *shape, int requires_grad);
static inline int baton__needs_grad(const baton_tensor *x) { return x && x->grad != NULL; }
static inline float baton__grad_begin(baton_tensor *x) {
    baton_tensor *b = x->base;
    float beta = b->grad_full ? 1.0f : 0.0f;
    b->grad_full = 1;
    return beta;
}

/* Whether x (or a view of its base) is the input of exactly one node of the tape: then that node's backward, when
 * it writes x's gradient with beta 0, leaves it final (no other contribution follows). */
int baton__sole_use(const baton_tape *t, const baton_tensor *x);
/* The op of the node that produced x (its iarg[0] into *iarg0 if not NULL), or -1 for a parameter or an input. */
int baton__producer_op(const baton_tape *t, const baton_tensor *x, int *iarg0);

/* Row loops with at least this many elements run on OpenMP's threads (`#pragma omp parallel for
 * if(n >= BATON__PAR_MIN)`): each row on one thread, no reduction split, so results never depend on the
 * thread count; smaller ones stay serial (a parallel region costs a few microseconds). */
#define BATON__PAR_MIN 32768

/* One backward per op, defined in ops_dense.c and ops_conv.c. */
#define BATON_OP_DECL_(name) void baton__bwd_##name(baton_tape *t, baton_node *n);
BATON_OP_MAP(BATON_OP_DECL_)
#undef BATON_OP_DECL_

/* sgemm wrapper, row-major: c (M,N) = beta*c + op(a) @ op(b). */
void baton__sgemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                  float beta, float *c, int ldc);

/* Backend-selected gemm of the transformer ops (gemm.c), same convention as baton__sgemm; b_param is the
 * parameter index of b (a weight whose bf16 copy is cached per forward) or -1. keep: BATON__KEEP_A and/or
 * BATON__KEEP_B for an operand that is a tape tensor's data or gradient and does not change until the tape's
 * next reset (an activation, or a gradient whose node's backward is running): under bf16 its rounded copy is
 * kept in the arena and the other product of the same step that uses it reuses the copy. */
enum { BATON__KEEP_A = 1, BATON__KEEP_B = 2 };
void baton__gemm(baton_tape *t, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                 int b_param, int keep, float beta, float *c, int ldc);
/* c = op(a) @ op(b) + bias (n, added to every row) in one bf16 product, when the tape runs bf16 products (and
 * t->gemm_bias_off is 0): returns 1. Otherwise returns 0 and does nothing: the caller runs baton__gemm and adds the
 * bias itself (the f32 paths keep their separate pass, so their bits do not change). cb (NULL or m x ldc): the
 * result is stored there in bf16 only (rounded to nearest even, the bits baton__to_bf16 gives the f32 result), and c
 * is not written. */
int baton__gemm_bias(baton_tape *t, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                     int b_param, int keep, const float *bias, float *c, uint16_t *cb, int ldc);
void baton__to_bf16(uint16_t *dst, const float *src, int rows, int cols, int ld);   /* round to nearest even */
float baton__bf16_round(float f);
/* Producer-written bf16 copies: under bf16 products, an op whose output (or final gradient) src (rows, cols,
 * compact) will be a product's operand gets an arena copy registered as kept (as if a product had converted it)
 * and fills it row by row with baton__row_to_bf16 (no threading inside) while the rows are in cache; the products
 * then skip the separate conversion pass. NULL (nothing to fill) unless the tape runs bf16 products. src must not
 * change after it is filled until the tape's next reset. */
uint16_t *baton__bf16_slot(baton_tape *t, const float *src, int rows, int cols);
/* bf16-only outputs. A model that knows an op's output is read by bf16 products only (the GPT: layer norms,
 * attention and the GELU layer feed linear layers or the tied head, whose forward and backward find the kept copy
 * and never read the f32 tensor) calls baton__feeds_products(t) right before that op. The op then asks
 * baton__bf16_out for its slot: *only = 1 when the products run in bf16 and a slot exists (the flag is consumed
 * either way), and the op writes the bf16 copy and not the f32 data, which stays undefined until the tape's next
 * reset (about 270 MB of f32 stores a step less for the 6 x 384 GPT at batch 16). Rows longer than
 * BATON__ROW_MAX are never bf16-only (the ops stage a row on the stack). Without the flag, baton__bf16_slot. */
enum { BATON__ROW_MAX = 4096 };
void baton__feeds_products(baton_tape *t);
uint16_t *baton__bf16_out(baton_tape *t, const float *src, int rows, int cols, int *only);
void baton__row_to_bf16(uint16_t *dst, const float *src, int n);
/* The bf16 copy of src (rows, cols, compact) kept this step (registered by baton__bf16_slot/_out or a product), or
 * NULL: lets an op read the copy its input's producer wrote instead of rounding the input again. */
const uint16_t *baton__bf16_kept(baton_tape *t, const float *src, int rows, int cols);
/* The slot for x's gradient when the op about to write it gives its final value (beta 0 and x used by that op
 * only) and x is the output of a linear layer without activation or of a matmul, whose backward reads that
 * gradient as both products' operand; NULL otherwise (or without bf16 products). The op fills it elementwise. */
uint16_t *baton__grad_slot(baton_tape *t, baton_tensor *x, float beta);
struct baton__kept_bf16 {   /* an operand's kept copy */
    const float *src;
    int rows, cols, ld;   /* the stored matrix */
    uint16_t *bf;         /* its compact bf16 copy, in the tape's arena */
    int only;             /* src was not written (a bf16-only output): the copy is the value */
};
int baton__kept_stale(baton_tape *t);   /* tests: kept copies that differ from their source rounded now (bf16-only
                                         * outputs, whose source is undefined, are skipped) */
/* Batched bf16 product on strided views (gemm.c): for i < batch, c_i (m,n) = beta*c_i + a_i (m,k) @ b_i (k,n), f32
 * accumulation into f32 c; each operand's strides in elements (batch, row, column), so any transpose is a view.
 * Callable from inside an OpenMP parallel region (each thread runs its own 1-thread primitives) or outside it. Only
 * when baton__bmm_bf16_available(). */
typedef struct {
    int batch, m, n, k;
    long long as[3], bs[3], cs[3];
    float beta;
    int pad_;   /* zero: the key is compared with memcmp */
} baton__bmm;
int baton__bmm_bf16_available(void);
void baton__bmm_bf16(const baton__bmm *s, const uint16_t *a, const uint16_t *b, float *c);
void baton__gemm_threads(int threads);       /* oneDNN's OpenMP threads */
void baton__tape_gemm_free(baton_tape *t);   /* the tape's bf16 caches */

/* Vectorized hot loops (kernels.c). */
void baton__bias_act_rows(float *y, const float *b, int m, int n, int relu);
void baton__relu_mask(float *g, const float *y, size_t n);
void baton__colsum(float *db, const float *g, int m, int n, float beta);
/* g (m,n) *= dg, bf its bf16 copy, db (n) = (beta ? db : 0) + column sums of g: act_backward_inplace + colsum's bits */
void baton__gelu_grad_colsum(float *g, const float *dg, uint16_t *bf, float *db, int m, int n, float beta);
void baton__sgd(float *w, const float *g, float *m, size_t n, float lr, float mu, float wd);
/* The large-batch optimizers on one parameter view (src/nn/optim_large.c); adapt = 0: no decay, ratio 1. */
void baton__lars(float *w, const float *g, float *m, size_t n, float lr, float mu, float wd, float eta, int adapt);
void baton__lamb(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
                 float eps, float c1, float c2, int adapt);
double baton__sumsq(const float *g, size_t n);
void baton__scale(float *x, size_t n, float k);
void baton__relu_fwd(float *y, const float *x, size_t n);
void baton__relu_bwd(float *dx, const float *dy, const float *x, size_t n, float beta);

/* The transformer's row kernels with a vectorized exp and erfc (kernels_vec.c; contracts there). */
void baton__gelu_fwd(float *y, float *pre, const float *x, const float *b, int m, int n);
void baton__gelu_bwd(float *dx, const float *dy, const float *pre, size_t n, float beta);
/* gelu(x + b) into y and its derivative into d (d may alias x): dy * d equals baton__gelu_bwd's result bit for bit */
void baton__gelu_fwd_d(float *y, float *d, const float *x, const float *b, int m, int n);
float baton__row_max(const float *x, int n);
float baton__exp_sum(float *out, const float *x, int n, float scale, float shift);
void baton__softmax_row(float *row, int len, int tt, float scale);
void baton__softmax_bwd_row(float *g, const float *p, int len, int tt, float scale);
void baton__ln_fwd_row(float *y, const float *x, const float *gm, const float *bt, int c, float eps, float *mean,
                       float *rstd);
void baton__ln_param_cols(float *sg, float *sb, const float *x, const float *gy, const float *stats, size_t m, int c,
                          int j0, int w);
void baton__ln_bwd_row(float *dx, const float *x, const float *gy, const float *gm, int c, float mean, float rstd,
                       float beta);
/* Caps the instruction set of those kernels (1 AVX-512, 0 baseline; -1: the CPU's best) and returns
 * the level now used. For tests (the baseline path on an AVX-512 machine); the same bits either way. */
int baton__kernels_set_level(int max);
/* AdamW's update of n elements (m, v its moments; c1, c2 the bias corrections), over the threads */
void baton__adamw(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
                  float eps, float c1, float c2);

#endif
