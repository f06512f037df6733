/* ddp_impl.h: the engine's state, shared by ddp.c (buckets, the comm thread, the loss scaler) and zero.c
 * (ZeRO shards: the optimizer step, clipping and the parameter all-gather). */
#ifndef BATON_DDP_IMPL_H
#define BATON_DDP_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/ddp.h"

typedef struct {
    size_t lo, hi;         /* element range of the gradient slab */
    int nparams;           /* parameters in the bucket */
    int remaining;         /* parameters whose gradient is not final yet this backward */
} bucket;

struct baton_ddp {
    baton_comm *comm;      /* NULL or world 1: no communication */
    baton_params *params;
    baton_tape *tape;
    baton_ddp_config cfg;
    int rank, world;

    int nb;                /* buckets */
    bucket *b;             /* [nb] in launch order */
    int *bucket_of;        /* [params] bucket index of each parameter */
    uint64_t *coll_ns;     /* [nb] this step's collective time of each bucket (baton_ddp_coll_times) */
    float *shm_grad;       /* the gradient slab in shared memory, or NULL */
    uint16_t *wire;        /* 16-bit wire copy of the slab (numel), or NULL for f32 */
    int wire_shm;          /* wire came from baton_buffer_alloc */

    int sync;              /* this backward completes the step: buckets launch */
    int next_launch;       /* main thread: buckets handed off so far this step */
    float scale;           /* loss scale of the current step (1 without scaling) */
    long good_steps;       /* dynamic scaler: clean steps since the last change */

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int launched, done;    /* guarded by mu */
    int stop;              /* guarded by mu */
    int status;            /* first failure of the comm thread (guarded by mu) */
    char err[512];         /* its detail */
    int nonfinite;         /* a reduced gradient was inf/nan this step (written by whoever runs buckets) */

    baton_ddp_stats st;

    /* ZeRO (zero.c) */
    size_t shard_lo, shard_hi;   /* this rank's shard of the slab */
    float *ag_send, *ag_recv;    /* uneven shards: chunked all-gather staging (NULL when the slab divides) */
    float *node_params;          /* the parameter slab the node's ranks share (no all-gather), or NULL */

    /* ZeRO-2 gradients (zero.c): the params hold only the shard's reduced gradient (gshard); backward writes
     * each bucket into a staging slot bound to it at its first gradient write (the tape's need hook) and
     * freed once the bucket is reduced into the shards, so a step needs nslots slots whatever the model. */
    int z2;                      /* stage 2 with more than one rank */
    float *gshard;               /* shard_hi - shard_lo floats: this rank's reduced gradient */
    float *stage;                /* nslots x slot_n floats (shared memory when possible: peers read it) */
    uint16_t *stage_wire;        /* nslots x slot_n 16-bit wire staging, or NULL for f32 */
    int stage_shm, stage_wire_shm;
    size_t slot_n;               /* floats per slot: the largest bucket, rounded up to 16 */
    int nslots;
    int *slot_bucket;            /* [nslots] the bucket bound to each slot this backward, or -1 */
    long *fixed_at;              /* [nb] small buckets: their own place in stage after the slots, or -1 */
    size_t fixed_n;              /* floats of those places */
    float **bucket_buf;          /* [nb] each bucket's staging this backward, or NULL (not bound yet) */
    uint16_t **bucket_wire;      /* [nb] its 16-bit staging */
    float **overflow;            /* [nb] private staging of a bucket that found every slot held by a bucket */
    uint16_t **overflow_wire;    /*      still being written (tied weights); allocated on first need, kept */
    uint64_t overflow_bytes;
    int *pfirst, *pend;          /* [nb] each bucket's parameters: indices [pfirst, pend) */
    int micro;                   /* micro-batches of this step already reduced into gshard */
    int in_step;                 /* a micro-batch of the current step was prepared */
};

/* zero.c */
int baton__zero_init(baton_ddp *d);
int baton__zero2_init(baton_ddp *d);   /* collective (shared-memory staging), after the replicas are synced */
int baton__zero_share_params(baton_ddp *d); /* collective, after the replicas are synced */
void baton__zero2_begin(baton_ddp *d); /* before each backward: every view's staging is unbound */
void baton__zero_free(baton_ddp *d);
/* ddp.c: blocks until buckets [0, upto) are reduced (their staging is free again) */
void baton__wait_done(baton_ddp *d, int upto);


#endif
