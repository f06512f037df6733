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
};

/* zero.c */
int baton__zero_init(baton_ddp *d);
void baton__zero_free(baton_ddp *d);


#endif
