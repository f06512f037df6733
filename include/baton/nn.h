/* baton/nn.h: baton's small training engine: f32 tensors, a reverse-mode autograd tape, layers, models,
 * optimizers and learning-rate schedules.
 *
 * Memory model. A model's parameters live in ONE contiguous f32 slab and their gradients in a second slab
 * with the same layout; each parameter is a named view (name, shape, offset, count) into both. An
 * optimizer step is one loop over the slab, and a gradient bucket for the data-parallel layer is a
 * contiguous range of the gradient slab. Optimizer state (momentum, Adam moments) lives in slabs of the
 * same layout too. Activations live in the tape's arena, which is recycled by every baton_tape_reset():
 * after the first step at a given batch size, forward and backward allocate nothing.
 *
 * Autograd. Every op called between baton_tape_reset() and baton_tape_backward() appends a node
 * {op, inputs, output, saved} to the tape; backward walks the nodes in reverse with one switch. The first
 * contribution to a gradient buffer is written (GEMM beta = 0), later ones are added (+=), so nothing is
 * zeroed per step; baton_params_zero_grad() only marks the parameter gradients "empty" (O(#params)).
 * Without a zero_grad between two backwards, the second one accumulates (gradient accumulation).
 *
 * Gradient hook. baton_tape_set_grad_hook(tape, fn, ctx) makes backward call fn(ctx, i) the moment
 * parameter i's gradient is final, i.e. right after the node that used it FIRST in forward has run its
 * backward. Gradients therefore become final in the reverse order of first use in forward: for mlp that
 * is fc3.bias/fc3.weight, then fc2.*, then fc1.* (within one layer: in the order the op's inputs are
 * listed: weight, then bias). A parameter not used by this forward is zero-filled (if empty) and reported
 * after the walk. The hook fires exactly once per parameter per backward.
 *
 *   baton_model *m; baton_model_new(&m, &(baton_model_config){.kind = BATON_MODEL_MLP, ...}, seed);
 *   baton_tape *t = baton_tape_new(baton_model_params(m), seed);
 *   baton_optim *o; baton_optim_new(&o, baton_model_params(m), &(baton_optim_config){...});
 *   for (step...) {
 *       baton_tape_reset(t, 1);                                   // training mode
 *       baton_tensor *x = baton_tape_input(t, 2, (int[]){B, 784}, xbuf);
 *       baton_tensor *loss = baton_cross_entropy(t, baton_model_forward(m, t, x), labels);
 *       baton_params_zero_grad(baton_model_params(m));
 *       baton_tape_backward(t, loss, 1.0f);
 *       baton_clip_grad_norm(baton_model_params(m), 1.0f);
 *       baton_optim_step(o, lr);
 *   }
 *
 * Threads: all functions are re-entrant on distinct objects; there is no global mutable state. BLAS
 * threading is process-wide (baton_set_threads). Errors: functions returning int give BATON_OK or a
 * negative baton_status with baton_last_error() set. Op recording functions abort on shape mismatches
 * (programming errors) and never fail otherwise: an arena allocation failure aborts with a message. */
#ifndef BATON_NN_H
#define BATON_NN_H

#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers ---------------------------------------------------------------------------------- */
/* xoshiro256** with an explicit state, so a checkpoint can save it (4 x u64). */
typedef struct {
    uint64_t s[4];
} baton_rng;
void baton_rng_seed(baton_rng *r, uint64_t seed);
uint64_t baton_rng_u64(baton_rng *r);
uint64_t baton_rng_below(baton_rng *r, uint64_t n);   /* uniform in [0, n), n > 0 */
float baton_rng_uniform(baton_rng *r);                /* uniform in [0, 1) */
float baton_rng_normal(baton_rng *r);                 /* standard normal */

/* Sets the number of BLAS threads (and of baton's own elementwise loops, which stay single-threaded). */
void baton_set_threads(int threads);

/* ---- tensors ----------------------------------------------------------------------------------------- */
#define BATON_MAX_DIMS 4
typedef struct baton_tensor baton_tensor;
struct baton_tensor {
    float *data;                /* n floats, contiguous, row-major */
    float *grad;                /* n floats, or NULL when no gradient flows here */
    int ndim;                   /* 1..4 */
    int shape[BATON_MAX_DIMS];  /* shape[0..ndim-1] */
    size_t n;                   /* element count: product of shape */
    int param;                  /* parameter index, or -1 for activations and inputs */
    int grad_full;              /* 1 once grad holds a value this backward (then += ; else =) */
    baton_tensor *base;         /* the tensor owning data/grad (itself unless a view such as flatten) */
};

/* ---- parameters ------------------------------------------------------------------------------------- */
typedef struct {
    char name[48];              /* e.g. "fc1.weight" */
    int ndim;
    int shape[BATON_MAX_DIMS];
    size_t offset;              /* element offset into the data and gradient slabs */
    size_t count;               /* element count */
    int decay;                  /* 1 if weight decay applies (matrices / kernels), 0 for biases and norms */
} baton_param_info;

typedef struct baton_params baton_params;
/* Builds the slabs for `count` parameters whose name/shape/decay are given (offset/count are computed;
 * each view starts on a 16-float boundary). Data and gradients start at zero. */
int baton_params_new(baton_params **out, const baton_param_info *infos, int count);
void baton_params_free(baton_params *p);
int baton_params_count(const baton_params *p);
const baton_param_info *baton_params_info(const baton_params *p, int i);
int baton_params_find(const baton_params *p, const char *name);   /* index or -1 */
float *baton_params_data(baton_params *p);                        /* slab of baton_params_numel floats */
/* The gradient slab, same layout; NULL while baton_params_shard_grads holds only a range of it. */
float *baton_params_grad(baton_params *p);
/* The gradient of slab elements [lo, hi): a pointer to element lo (the range must be held). */
float *baton_params_grad_at(baton_params *p, size_t lo, size_t hi);
size_t baton_params_numel(const baton_params *p);                 /* slab length incl. alignment padding */
baton_tensor *baton_params_tensor(baton_params *p, int i);        /* view used by ops */
/* Marks every gradient empty: the next backward writes instead of adding. Padding stays zero. */
void baton_params_zero_grad(baton_params *p);
/* Moves the gradient slab into caller memory (baton_params_numel floats, 64-byte aligned, e.g. a
 * shared-memory buffer from baton_buffer_alloc so that the data-parallel all-reduce is zero-copy): copies
 * the current gradients there and repoints every view. The caller keeps ownership of `slab` and keeps it
 * alive until baton_params_free or the next call; NULL moves the gradients back into memory the params own.
 * Call it between steps (never while a tape recorded with these params is about to run backward). While a
 * caller's slab is in use, the params free their own (it is allocated again, zeroed, when NULL restores it). */
int baton_params_set_grad_slab(baton_params *p, float *slab);
/* Moves the parameter values into caller memory (baton_params_numel floats, 64-byte aligned; e.g. one buffer
 * the ranks of a node share, from baton_buffer_alloc_node, so that ZeRO's ranks update one copy in place):
 * copies the current values of slab elements [lo, hi) there, repoints every view and frees the params' own
 * slab. The rest of `slab` is the caller's to fill (processes that share one slab each copy their own range).
 * The caller keeps ownership and keeps it alive until baton_params_free or the next call; NULL moves the
 * values back into memory the params own (all of them copied; lo and hi are ignored). Call it between steps. */
int baton_params_set_data_slab(baton_params *p, float *slab, size_t lo, size_t hi);
/* ZeRO-2: the params hold the gradient of slab elements [lo, hi) only, in the caller's `shard` (hi - lo floats,
 * 64-byte aligned; the current values of that range are copied there) and free their own slab. Backward then
 * writes each view's gradient wherever baton_params_set_view_grad points it (the caller's staging, recycled
 * during backward through the tape's need hook); the caller points every view before the next forward.
 * baton_params_set_grad_slab(p, NULL) returns to a whole slab of one's own (zero outside [lo, hi)). */
int baton_params_shard_grads(baton_params *p, float *shard, size_t lo, size_t hi);
void baton_params_set_view_grad(baton_params *p, int i, float *grad);

/* ---- tape -------------------------------------------------------------------------------------------- */
typedef struct baton_tape baton_tape;
typedef void (*baton_grad_hook)(void *ctx, int param_index);
/* The tape borrows `params` (may be NULL for tests on plain inputs); `seed` seeds its dropout RNG. */
baton_tape *baton_tape_new(baton_params *params, uint64_t seed);
void baton_tape_free(baton_tape *t);
/* Starts a new forward: forgets all nodes and recycles the arena. training=0 records no gradients and
 * makes dropout the identity. */
void baton_tape_reset(baton_tape *t, int training);
int baton_tape_training(const baton_tape *t);
baton_rng *baton_tape_rng(baton_tape *t);
/* A tensor wrapping caller memory (not copied, no gradient). shape has ndim entries. */
baton_tensor *baton_tape_input(baton_tape *t, int ndim, const int *shape, float *data);
/* A fresh arena tensor (uninitialized data); requires_grad gives it a gradient buffer (tests use this
 * to make inputs that receive gradients). */
baton_tensor *baton_tape_tensor(baton_tape *t, int ndim, const int *shape, int requires_grad);
void baton_tape_set_grad_hook(baton_tape *t, baton_grad_hook hook, void *ctx);
/* fn(ctx, i) runs right before backward first writes (or zero-fills) parameter i's gradient in a backward (its
 * grad_full is 0): a ZeRO-2 engine points the view's gradient at staging memory there. */
void baton_tape_set_grad_need_hook(baton_tape *t, baton_grad_hook hook, void *ctx);
/* Reverse walk from the scalar `loss`, seeding d(loss) = scale (1/K for K accumulation steps). */
void baton_tape_backward(baton_tape *t, baton_tensor *loss, float scale);
size_t baton_tape_arena_bytes(const baton_tape *t);   /* bytes reserved by the arena */
size_t baton_tape_arena_mallocs(const baton_tape *t); /* chunk allocations so far (stable = no malloc) */

/* Matrix-multiply backend of the transformer ops recorded on a tape (linear, matmul, attention; conv2d and
 * the rest always use OpenBLAS). ONEDNN_BF16 rounds both operands to bf16 and accumulates in f32 into an f32
 * result (weights are converted once per forward, master weights stay f32); it needs a CPU with AVX512_BF16
 * or AMX: baton_tape_set_gemm fails (BATON_EINVAL, message in baton_last_error) where there is none. */
typedef enum { BATON_GEMM_OPENBLAS = 0, BATON_GEMM_ONEDNN, BATON_GEMM_ONEDNN_BF16 } baton_gemm_backend;
int baton_tape_set_gemm(baton_tape *t, baton_gemm_backend backend);
int baton_gemm_bf16_available(void);                      /* 1 if ONEDNN_BF16 runs on this CPU */
size_t baton_tape_bf16_conversions(const baton_tape *t);  /* weight f32->bf16 conversions so far */
/* One row-major gemm on a backend (tests, benchmarks): c (M,N) = beta*c + op(a) @ op(b). */
void baton_gemm(baton_gemm_backend backend, int ta, int tb, int m, int n, int k, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);

/* ---- ops (each records a node; shapes in comments use B batch, C channels/features) ------------------ */
enum { BATON_ACT_NONE = 0, BATON_ACT_RELU, BATON_ACT_GELU, BATON_ACT_TANH };
/* x (M,K) @ w -> (M,N): w is (N,K) when trans_w (the PyTorch Linear layout), else (K,N). */
baton_tensor *baton_matmul(baton_tape *t, baton_tensor *x, baton_tensor *w, int trans_w);
baton_tensor *baton_bias_add(baton_tape *t, baton_tensor *x, baton_tensor *b);  /* x (M,N) + b (N) */
baton_tensor *baton_relu(baton_tape *t, baton_tensor *x);
baton_tensor *baton_gelu(baton_tape *t, baton_tensor *x);                       /* exact (erf) GELU */
baton_tensor *baton_tanh(baton_tape *t, baton_tensor *x);
/* Fused y = act(x @ w^T + b): x (M,K), w (N,K), b (N) or NULL. Computes no gradient for x when x has
 * none (e.g. the input images). */
baton_tensor *baton_linear(baton_tape *t, baton_tensor *x, baton_tensor *w, baton_tensor *b, int act);
/* Mean softmax cross-entropy over rows: logits (M,C), labels M ints in [0,C). Returns a scalar (n = 1). */
baton_tensor *baton_cross_entropy(baton_tape *t, baton_tensor *logits, const int32_t *labels);
baton_tensor *baton_log_softmax(baton_tape *t, baton_tensor *x);                /* over the last dim */
/* x (B,C,H,W), w (OC,C,KH,KW), b (OC) or NULL -> (B,OC,OH,OW); im2col + sgemm. */
baton_tensor *baton_conv2d(baton_tape *t, baton_tensor *x, baton_tensor *w, baton_tensor *b, int stride,
                           int pad);
/* x (B,C,H,W) -> (B,C,H/k,W/k) with a k x k window and stride k (H, W divisible by k). */
baton_tensor *baton_maxpool2d(baton_tape *t, baton_tensor *x, int k);
baton_tensor *baton_flatten(baton_tape *t, baton_tensor *x);                    /* (B,...) -> (B,rest) */
/* Inverted dropout with probability p (identity when not training or p == 0). */
baton_tensor *baton_dropout(baton_tape *t, baton_tensor *x, float p);
/* Layer norm over the last dim: x (M,C), gamma/beta (C). */
baton_tensor *baton_layernorm(baton_tape *t, baton_tensor *x, baton_tensor *gamma, baton_tensor *beta,
                              float eps);
/* ids: M ints in [0,V); table (V,C) -> (M,C). */
baton_tensor *baton_embedding(baton_tape *t, const int32_t *ids, int m, baton_tensor *table);

/* a + b (same element count; shape of a): the residual connection. */
baton_tensor *baton_add(baton_tape *t, baton_tensor *a, baton_tensor *b);
/* Fused causal multi-head self-attention (src/nn/ops_attn.c): qkv (B*T, 3C) holds [q | k | v] per row
 * (row b*T+i = position i of sequence b; head h at columns h*D.. of each part, C = heads*D) -> (B*T, C):
 * per sequence and head softmax(Q K^T / sqrt(D), positions j > i masked) @ V. */
baton_tensor *baton_attention(baton_tape *t, baton_tensor *qkv, int batch, int heads);

/* Reference kernel (naive triple loop), the oracle for the BLAS path in tests:
 * c (M,N) = beta*c + a (M,K, or K,M if ta) @ b (K,N, or N,K if tb). */
void baton_matmul_naive(float *c, const float *a, const float *b, int m, int n, int k, int ta, int tb,
                        float beta);

/* ---- models ------------------------------------------------------------------------------------------ */
enum { BATON_MODEL_MLP = 0, BATON_MODEL_CNN = 1 };
#define BATON_MAX_LAYERS 8
typedef struct {
    int kind;                          /* BATON_MODEL_* */
    int in_c, in_h, in_w;              /* input image: 1, 28, 28 */
    int classes;                       /* 10 */
    int hidden[BATON_MAX_LAYERS];      /* mlp: hidden widths (1024,1024); cnn: linear width (128) */
    int n_hidden;
    int channels[BATON_MAX_LAYERS];    /* cnn: conv channels per block (32,64); 3x3 conv, pad 1, pool 2 */
    int n_channels;
    float dropout;                     /* dropout before the last linear layer (0 = none) */
} baton_model_config;
typedef struct baton_model baton_model;
/* Validates the config (sizes in range, image divisible by the pools) and initializes the parameters
 * deterministically from `seed` (He-uniform weights, zero biases). */
int baton_model_new(baton_model **out, const baton_model_config *cfg, uint64_t seed);
void baton_model_free(baton_model *m);
baton_params *baton_model_params(baton_model *m);
const baton_model_config *baton_model_cfg(const baton_model *m);
/* x (B, in_c*in_h*in_w) -> logits (B, classes) */
baton_tensor *baton_model_forward(baton_model *m, baton_tape *t, baton_tensor *x);
/* Rows of logits (M,C) whose argmax equals the label. */
int baton_count_correct(const float *logits, const int32_t *labels, int m, int c);

/* ---- optimizers and schedules ----------------------------------------------------------------------- */
enum { BATON_OPTIM_SGD = 0, BATON_OPTIM_ADAMW = 1, BATON_OPTIM_LARS = 2, BATON_OPTIM_LAMB = 3 };
typedef struct {
    int kind;            /* BATON_OPTIM_* */
    float momentum;      /* sgd: 0.9 (0 = plain SGD) */
    float weight_decay;  /* sgd: L2 added to the gradient; adamw: decoupled; only params with decay=1 */
    float beta1, beta2;  /* adamw: 0.9, 0.999 */
    float eps;           /* adamw, lamb: 1e-8 (lamb: 1e-6 is usual) */
    float trust_coef;    /* lars: eta in the trust ratio (0: 0.001) */
} baton_optim_config;
typedef struct baton_optim baton_optim;
int baton_optim_new(baton_optim **out, baton_params *p, const baton_optim_config *cfg);
void baton_optim_free(baton_optim *o);
/* One step over the whole slab with learning rate lr:
 *   sgd:   g += wd*w; m = momentum*m + g; w -= lr*m
 *   adamw: w -= lr*wd*w; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr*mhat/(sqrt(vhat)+eps)
 * The large-batch optimizers (src/nn/optim_large.c) take a layer-wise trust ratio per parameter view; views
 * with decay = 0 (biases, norms) get neither weight decay nor the ratio (it is 1):
 *   lars:  u = g + wd*w; r = eta*|w| / |u| (1 if |w| or |u| is 0); m = momentum*m + r*u; w -= lr*m
 *   lamb:  m, v as adamw; u = mhat/(sqrt(vhat)+eps) + wd*w; r = |w| / |u| (1 if either is 0); w -= lr*r*u */
void baton_optim_step(baton_optim *o, float lr);
/* State slabs for checkpoints: slot 0 = momentum / first moment, slot 1 = second moment (NULL for sgd).
 * Each covers the optimizer's shard [lo, hi) of the slab (hi - lo floats; element i is slab element lo + i):
 * the whole slab, baton_params_numel floats, unless baton_optim_set_shard narrowed it. */
float *baton_optim_state(baton_optim *o, int slot);
/* ZeRO: keep state for, and update, only slab elements [lo, hi). The state restarts at zero. */
int baton_optim_set_shard(baton_optim *o, size_t lo, size_t hi);
void baton_optim_shard(const baton_optim *o, size_t *lo, size_t *hi);
long baton_optim_steps(const baton_optim *o);
/* Restores the step counter (AdamW's bias correction depends on it) when resuming from a checkpoint. */
void baton_optim_set_steps(baton_optim *o, long steps);
int baton_optim_kind(const baton_optim *o);   /* BATON_OPTIM_* */
const char *baton_optim_kind_name(int kind);  /* "sgd", "adamw", "lars", "lamb" ("?" otherwise) */
int baton_optim_kind_slots(int kind);         /* state slabs: 1 (sgd, lars) or 2 (adamw, lamb) */

/* Global L2 norm of the gradient slab; when max_norm > 0 and the norm exceeds it, scales the gradients
 * by max_norm / norm. Returns the norm before clipping. */
float baton_clip_grad_norm(baton_params *p, float max_norm);
/* The pieces of it for a range [lo, hi) of the gradient slab (a ZeRO shard): the sum of squares in f64, and
 * the scaling. */
double baton_grad_sumsq(baton_params *p, size_t lo, size_t hi);
void baton_grad_scale(baton_params *p, size_t lo, size_t hi, float k);

enum { BATON_SCHED_CONST = 0, BATON_SCHED_COSINE = 1, BATON_SCHED_STEP = 2 };
typedef struct {
    int kind;            /* BATON_SCHED_* */
    float lr;            /* peak learning rate */
    long warmup;         /* linear warmup steps from lr/warmup to lr (0 = none) */
    long total;          /* cosine: steps at which lr reaches min_lr */
    float min_lr;        /* cosine floor */
    long step_every;     /* step decay: multiply by gamma every step_every steps after warmup */
    float gamma;
} baton_lr_schedule;
float baton_lr_at(const baton_lr_schedule *s, long step);   /* step counts from 0 */

#ifdef __cplusplus
}
#endif

#endif
