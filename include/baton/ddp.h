/* baton/ddp.h: synchronous data-parallel training. Every rank holds a full replica of the model, trains on
 * its own shard of each global batch, and all-reduces the gradient before every optimizer step, so all
 * replicas take the same step: the average of the ranks' gradients over equal shards is the gradient of
 * the whole batch.
 *
 * Buckets. The gradient slab (include/baton/nn.h) is cut into buckets: contiguous ranges of whole
 * parameters, taken from the END of the slab (the last layer, whose gradients are ready first) toward its
 * start, the first bucket capped at first_bucket_mb (so communication starts early), the others at
 * bucket_mb. A bucket is a view of the slab: nothing is copied before an f32 all-reduce. When the slab
 * lives in shared memory (zero_copy, the default) the in-place all-reduce skips the staging copy too.
 *
 * Overlap. baton_ddp installs a gradient hook on the tape: when the last gradient of bucket k is final,
 * bucket k (and any later ones already complete, always in bucket order, the same on every rank) is
 * handed to the DDP comm thread, which all-reduces it while backward continues. baton_ddp_finish waits
 * for every bucket: the time spent there is the exposed communication. overlap = 0 all-reduces every
 * bucket on the calling thread after backward instead.
 *
 * 16-bit wire. grad_dtype BF16/F16: the comm thread converts a bucket to 16 bits, pre-divided by the world
 * size (so an f16 sum cannot overflow where the average would not), all-reduces it (accumulated in f32,
 * rounded once), and converts it back into the f32 slab; master weights stay f32. With a loss scale the
 * loss is multiplied by S before backward (baton_ddp_backward_scale) and the gradients are divided by S on
 * the way back; a non-finite gradient on any rank makes every rank skip the step together; a dynamic
 * scale halves on such a step and doubles after growth_interval clean steps.
 *
 *   baton_ddp *d;
 *   baton_ddp_config dc = baton_ddp_defaults();
 *   if (baton_ddp_new(&d, comm, params, tape, &dc) < 0) ...      // broadcasts rank 0's replica, checks it
 *   for (step...) {
 *       for (k = 0; k < K; k++) {
 *           forward...; if (k == 0) baton_params_zero_grad(params);
 *           baton_ddp_prepare(d, k == K - 1);                    // sync only on the last micro-batch
 *           baton_tape_backward(tape, loss, baton_ddp_backward_scale(d) / K);   // buckets launch here
 *       }
 *       int skip;
 *       if (baton_ddp_finish(d, &skip) < 0) ...                 // wait + average (+ unscale, overflow)
 *       if (!skip) { clip; baton_optim_step(opt, lr); }
 *   }
 *   baton_ddp_free(d);
 *
 * Threads: baton_ddp uses the communicator from its comm thread between the first bucket launch and the
 * return of baton_ddp_finish; the caller must not use the communicator in that window. Errors: functions
 * returning int give BATON_OK or a negative baton_status with baton_last_error() set. A failed all-reduce
 * leaves the communicator (and the engine) unusable. */
#ifndef BATON_DDP_H
#define BATON_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "baton/comm.h"
#include "baton/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- timeline (Chrome trace event format, loads in Perfetto / chrome://tracing) ---------------------- */
typedef enum {
    BATON_EV_STEP = 0, BATON_EV_DATA, BATON_EV_FORWARD, BATON_EV_BACKWARD, BATON_EV_ALLREDUCE,  /* arg: bucket */
    BATON_EV_WAIT, BATON_EV_OPTIM, BATON_EV_EVAL, BATON_EV_BROADCAST, BATON_EV_CONVERT,        /* arg: bucket */
    BATON_EV_BARRIER, BATON_EV_ALLGATHER,   /* ZeRO's step, traced: waiting for every rank, then the gather */
    BATON_EV_COUNT
} baton_event;
enum { BATON_TRACK_MAIN = 0, BATON_TRACK_COMM = 1 };

typedef struct baton_trace baton_trace;
/* Keeps up to max_events spans per track (later ones are counted and dropped). NULL on out of memory. */
baton_trace *baton_trace_new(size_t max_events);
void baton_trace_free(baton_trace *t);
/* Records a span [t0_ns, t1_ns) (baton__now_ns clock) on a track. Each track has one writer thread. */
void baton_trace_span(baton_trace *t, int track, baton_event ev, int arg, uint64_t t0_ns, uint64_t t1_ns);
/* Collective: gathers every rank's spans to rank 0, which writes `path` (pid = rank, one thread for the
 * main loop and one for the comm thread). comm may be NULL for a one-process run. Times are relative to
 * the earliest span of the job (clocks agree on one node; across nodes they are only roughly aligned). */
int baton_trace_write(baton_trace *t, baton_comm *comm, const char *path);
const char *baton_event_name(baton_event ev);

/* ---- the engine -------------------------------------------------------------------------------------- */
enum { BATON_LOSS_SCALE_NONE = 0, BATON_LOSS_SCALE_STATIC = 1, BATON_LOSS_SCALE_DYNAMIC = 2 };

typedef struct {
    double bucket_mb;        /* cap of every bucket but the first, MiB (default 25) */
    double first_bucket_mb;  /* cap of the first bucket, MiB (default 1) */
    int overlap;             /* 1: all-reduce buckets from the gradient hook during backward (default) */
    baton_dtype grad_dtype;  /* BATON_F32 (default), BATON_BF16 or BATON_F16 on the wire */
    int loss_scale;          /* BATON_LOSS_SCALE_*: default NONE */
    float loss_scale_init;   /* initial (dynamic) or fixed (static) scale; default 65536 */
    int growth_interval;     /* dynamic: double the scale after this many clean steps (default 2000) */
    int zero_copy;           /* 1: move the gradient slab into shared memory (default 1), and with ZeRO on
                                one node the parameter values into one slab the node's ranks share */
    baton_trace *trace;      /* spans of the comm thread and of the waits (NULL: none) */
    int zero;                /* ZeRO stage: 0 (default) plain, 1 shard the optimizer state, 2 also the
                                reduced gradients (see baton_ddp_step) */
} baton_ddp_config;

typedef struct {
    long steps;              /* synchronized steps (finish calls) */
    long skipped;            /* steps skipped for a non-finite gradient */
    uint64_t exposed_ns;     /* total time finish waited for communication */
    uint64_t comm_ns;        /* total time spent in all-reduces (comm thread or inline) */
    uint64_t bytes_per_step; /* bytes each rank hands to the all-reduce per step (wire dtype) */
    int buckets;             /* number of buckets */
    float loss_scale;        /* current scale (1 when none) */
} baton_ddp_stats;

typedef struct baton_ddp baton_ddp;

baton_ddp_config baton_ddp_defaults(void);
/* Broadcasts rank 0's parameters to every rank (in buckets), checks a checksum of every replica against
 * rank 0's (BATON_EINVAL naming the ranks that differ), builds the buckets, installs the hook on `tape`
 * and, with overlap, starts the comm thread. The engine borrows comm, params and tape. */
int baton_ddp_new(baton_ddp **out, baton_comm *comm, baton_params *params, baton_tape *tape,
                  const baton_ddp_config *cfg);
void baton_ddp_free(baton_ddp *d);   /* NULL is a no-op; restores the gradient slab to private memory */
/* Call before each backward: sync = 1 on the micro-batch whose backward completes the step's gradient
 * (the last of --accum K), 0 on the others (no communication: gradients just accumulate). */
void baton_ddp_prepare(baton_ddp *d, int sync);
/* The seed for d(loss) in backward: the loss scale (1 without loss scaling). Divide by K for accumulation. */
float baton_ddp_backward_scale(const baton_ddp *d);
/* Waits for every bucket, leaves the averaged (and unscaled) gradient in the slab, and sets *skip = 1 when
 * the step must be skipped (a non-finite gradient somewhere; every rank agrees). */
int baton_ddp_finish(baton_ddp *d, int *skip);
void baton_ddp_get_stats(const baton_ddp *d, baton_ddp_stats *out);
/* Loss-scaler state, saved in checkpoints so a resumed run scales (and skips) exactly like an uninterrupted
 * one: the current scale, the clean steps since it last changed, and the steps skipped so far. */
typedef struct {
    float scale;             /* 1 without loss scaling */
    long good_steps;         /* dynamic: clean steps since the last change (doubles at growth_interval) */
    long skipped;            /* steps skipped for non-finite gradients so far */
} baton_ddp_scaler;
void baton_ddp_get_scaler(const baton_ddp *d, baton_ddp_scaler *out);
/* BATON_EINVAL when the state does not fit the engine's config (scale outside [1, 2^24], negative counts,
 * a scale other than 1 without loss scaling). Call between steps. */
int baton_ddp_set_scaler(baton_ddp *d, const baton_ddp_scaler *s);
/* The last finished step's collective time of each bucket on this rank (ns, launch order, as the communicator
 * measured it: baton_comm_last_ns), into ns[0..max) (buckets past max - 1 are added into ns[max - 1]);
 * returns how many it wrote (0 with one rank). Compared
 * across ranks with baton_coll_waits, it says how long each rank waited in each bucket for its peers. */
int baton_ddp_coll_times(const baton_ddp *d, uint64_t *ns, int max);
/* Bucket k's element range [*lo, *hi) of the slab, in launch order; returns the bucket count. */
int baton_ddp_bucket(const baton_ddp *d, int k, size_t *lo, size_t *hi);

/* ---- ZeRO (src/ddp/zero.c) ---------------------------------------------------------------------------
 * Rank r owns the contiguous shard baton_shard_range(numel, r, world) of the parameter slab (sizes differ by
 * at most one element). Stage 1: gradients are all-reduced as without ZeRO; the optimizer keeps state for, and
 * updates, the own shard only; the updated shards are all-gathered. When the whole job is on one node (and
 * zero_copy is on) the ranks share one parameter slab instead: each updates its shard in place between two
 * barriers, and nothing is gathered (the params' values then live in that slab; baton_ddp_free gives each
 * rank a copy of its own again). Stage 2: each bucket is reduced straight
 * into the ranks' shards during backward (baton_reduce_range: each rank gets only its part of the bucket), so
 * the reduced gradient of a rank is its shard; clipping sums the shards' squares with one f64 all-reduce. At
 * stage 2 the params keep no whole gradient slab: backward writes into two bucket-sized staging slots bound
 * through the tape's need hook and recycled as buckets are reduced (docs/zero.md), every micro-batch of a
 * step is reduced, and after baton_ddp_finish the gradient is baton_params_grad_at(params, lo, hi) of the
 * rank's shard only (baton_params_grad is NULL).
 * Without ZeRO baton_ddp_step is clip + optimizer step, as before. */
/* The rank's shard [*lo, *hi) of the slab (the whole slab without ZeRO or with one rank). */
void baton_ddp_shard(const baton_ddp *d, size_t *lo, size_t *hi);
/* Narrows the optimizer to the rank's shard (ZeRO) or leaves it whole. Call once, before loading state. */
int baton_ddp_attach_optim(baton_ddp *d, baton_optim *opt);
/* After baton_ddp_finish (when it did not ask to skip): clip to the global norm max_norm (0 = off), take the
 * optimizer step with lr, and with ZeRO all-gather the updated parameters (or, sharing one slab, wait for every
 * rank before and after the update). Returns BATON_OK or a failure
 * of the all-gather / the norm's all-reduce (the communicator is then unusable). *norm (may be NULL) gets
 * the global gradient norm before clipping, the same on every rank. */
int baton_ddp_step(baton_ddp *d, baton_optim *opt, float lr, float max_norm, float *norm);
/* Bytes per rank: parameters; gradients = the reduced gradients the rank keeps (its shard at stage 2, else the
 * whole slab) + staging (stage 2: the bucket slots backward writes into and the reduction reads, about two of
 * the largest bucket; else the 16-bit wire copy of the slab, if any); optimizer state. */
typedef struct {
    uint64_t param_bytes, grad_bytes, grad_reduced_bytes, grad_staging_bytes, optim_bytes;
    int params_shared;       /* the parameter values are one slab the node's ranks share (ZeRO on one node) */
} baton_ddp_memory;
void baton_ddp_get_memory(const baton_ddp *d, const baton_optim *opt, baton_ddp_memory *out);

/* 64-bit checksum (FNV-1a over the bytes) of n floats. */
uint64_t baton_ddp_checksum(const float *x, size_t n);

/* Splits n items into `world` contiguous shards: rank's shard is [*lo, *hi) (sizes differ by at most 1). */
void baton_shard_range(long n, int rank, int world, long *lo, long *hi);

/* ---- distributed sampler ---------------------------------------------------------------------------- */
/* Each epoch is a permutation of [0, n) seeded by (seed, epoch), the same on every rank (and the same as
 * baton_sampler's). It is cut to a multiple of world: padded by repeating its start (default) or, with
 * drop_last, truncated. Rank r takes positions r, r + world, r + 2 world, ...: consecutive per-rank
 * batches of b samples are, together, the consecutive global batches of b x world samples. */
typedef struct {
    int n;                 /* dataset size */
    int rank, world;
    int drop_last;         /* 1: drop the n % world tail; 0: pad with the permutation's first items */
    int len;               /* indices per rank per epoch */
    int32_t *idx;          /* (len) this rank's indices for the current epoch */
    void *perm;            /* the one-rank baton_sampler that makes the permutation */
} baton_dist_sampler;
int baton_dist_sampler_init(baton_dist_sampler *s, int n, int rank, int world, int shuffle, int drop_last,
                            uint64_t seed);
void baton_dist_sampler_set_epoch(baton_dist_sampler *s, long epoch);
void baton_dist_sampler_free(baton_dist_sampler *s);   /* safe on a zeroed or freed sampler */

#ifdef __cplusplus
}
#endif

#endif
