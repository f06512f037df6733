/* ddp.c: the data-parallel engine: replica broadcast and check, gradient buckets over the slab, the
 * gradient hook that hands full buckets to the DDP comm thread, the wait + average before the optimizer,
 * 16-bit wire gradients and the loss scaler. See include/baton/ddp.h for the contract.
 *
 * Threads. The main thread runs backward and, from the hook, raises `launched` (buckets handed off, always
 * in bucket order). The comm thread runs buckets [done, launched) one by one with blocking collectives and
 * raises `done`. Both counters are guarded by `mu`; the bucket's memory is the comm thread's from its
 * launch until finish sees it done. Nothing is allocated per step. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/ddp.h"
#include "comm/reduce.h"
#include "ddp/ddp_impl.h"
#include "util/util.h"

baton_ddp_config baton_ddp_defaults(void) {
    baton_ddp_config c = {.bucket_mb = 25.0, .first_bucket_mb = 1.0, .overlap = 1, .grad_dtype = BATON_F32,
                          .loss_scale = BATON_LOSS_SCALE_NONE, .loss_scale_init = 65536.0f,
                          .growth_interval = 2000, .zero_copy = 1, .trace = NULL};
    return c;
}

uint64_t baton_ddp_checksum(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- one bucket's all-reduce ------------------------------------------------------------------------ */
enum { CONV_CHUNK = 1024 };   /* floats converted through a stack buffer at a time (stays in L1) */

/* wire[i] = to16(g[i] * pre) */
static void pack16(uint16_t *wire, const float *g, size_t n, float pre, baton_dtype dt) {
    float tmp[CONV_CHUNK];
    for (size_t i = 0; i < n; i += CONV_CHUNK) {
        size_t m = n - i < CONV_CHUNK ? n - i : CONV_CHUNK;
        for (size_t j = 0; j < m; j++) tmp[j] = g[i + j] * pre;
        (dt == BATON_F16 ? baton__f32_to_f16 : baton__f32_to_bf16)(wire + i, tmp, m);
    }
}

/* g[i] = from16(wire[i]) * post; returns 1 if any value is not finite. */
static int unpack16(float *g, const uint16_t *wire, size_t n, float post, baton_dtype dt) {
    float acc = 0.0f;
    for (size_t i = 0; i < n; i += CONV_CHUNK) {
        size_t m = n - i < CONV_CHUNK ? n - i : CONV_CHUNK;
        (dt == BATON_F16 ? baton__f16_to_f32 : baton__bf16_to_f32)(g + i, wire + i, m);
        if (post != 1.0f)
            for (size_t j = 0; j < m; j++) g[i + j] *= post;
        for (size_t j = 0; j < m; j++) acc += g[i + j] * 0.0f;   /* NaN iff some value is inf or NaN */
    }
    return acc != acc;
}

/* g[i] *= post (when post != 1); returns 1 if any value is not finite. */
static int unscale32(float *g, size_t n, float post) {
    float acc = 0.0f;
    if (post != 1.0f)
        for (size_t i = 0; i < n; i++) g[i] *= post;
    for (size_t i = 0; i < n; i++) acc += g[i] * 0.0f;
    return acc != acc;
}

/* All-reduces bucket k in place and leaves the average (divided by the loss scale) in the slab. ZeRO-2: the
 * bucket is in its staging (zero.c); only the part [a, b) that lies in this rank's shard is reduced, and it
 * goes into the rank's shard of the reduced gradient (added from the second micro-batch of a step on). */
static int run_bucket(baton_ddp *d, int k, int track) {
    bucket *bk = &d->b[k];
    float *g = d->z2 ? d->bucket_buf[k] : baton_params_grad(d->params) + bk->lo;
    size_t n = bk->hi - bk->lo, a = 0, b = n;
    if (d->cfg.zero == 2) {   /* the bucket's part of the shard, relative to the bucket */
        a = d->shard_lo > bk->lo ? d->shard_lo - bk->lo : 0;
        b = d->shard_hi < bk->hi ? (d->shard_hi > bk->lo ? d->shard_hi - bk->lo : 0) : n;
        if (a > b) a = b = 0;
    }
    float post = 1.0f / d->scale;
    int scaled = d->cfg.loss_scale != BATON_LOSS_SCALE_NONE, rc = BATON_OK, bad = 0;
    uint64_t t0 = baton__now_ns();
    if (d->world == 1) {
        if (scaled) bad = unscale32(g, n, post);
    } else if (d->cfg.grad_dtype == BATON_F32) {
        rc = d->cfg.zero == 2 ? baton_reduce_range(d->comm, g, n, BATON_F32, BATON_AVG, a, b)
                              : baton_allreduce(d->comm, g, g, n, BATON_F32, BATON_AVG);
        d->coll_ns[k] = baton_comm_last_ns(d->comm);
        if (rc >= 0 && scaled) bad = unscale32(g + a, b - a, post);
    } else {
        /* pre-divide by the world size so a 16-bit sum stays in range wherever the average does */
        uint16_t *w = d->z2 ? d->bucket_wire[k] : d->wire + bk->lo;
        pack16(w, g, n, 1.0f / (float)d->world, d->cfg.grad_dtype);
        uint64_t t1 = baton__now_ns();
        rc = d->cfg.zero == 2 ? baton_reduce_range(d->comm, w, n, d->cfg.grad_dtype, BATON_SUM, a, b)
                              : baton_allreduce(d->comm, w, w, n, d->cfg.grad_dtype, BATON_SUM);
        uint64_t t2 = baton__now_ns();
        d->coll_ns[k] = baton_comm_last_ns(d->comm);
        if (rc >= 0) bad = unpack16(g + a, w + a, b - a, post, d->cfg.grad_dtype);
        if (d->cfg.trace) {
            baton_trace_span(d->cfg.trace, track, BATON_EV_CONVERT, k, t0, t1);
            baton_trace_span(d->cfg.trace, track, BATON_EV_ALLREDUCE, k, t1, t2);
            baton_trace_span(d->cfg.trace, track, BATON_EV_CONVERT, k, t2, baton__now_ns());
        }
    }
    if (rc >= 0 && d->z2 && b > a) {   /* into the shard; later micro-batches of the step add */
        float *dst = baton_params_grad_at(d->params, bk->lo + a, bk->lo + b);
        if (d->micro == 0) memcpy(dst, g + a, (b - a) * sizeof(float));
        else
            for (size_t i = 0; i < b - a; i++) dst[i] += g[a + i];
    }
    uint64_t t3 = baton__now_ns();
    if (d->cfg.trace && (d->cfg.grad_dtype == BATON_F32 || d->world == 1))
        baton_trace_span(d->cfg.trace, track, BATON_EV_ALLREDUCE, k, t0, t3);
    d->st.comm_ns += t3 - t0;   /* written by the one thread that runs buckets this step */
    if (bad) d->nonfinite = 1;
    return rc;
}

/* ---- the comm thread ---------------------------------------------------------------------------------- */
static void *comm_thread(void *arg) {
    baton_ddp *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->done == d->launched && !d->stop) pthread_cond_wait(&d->cv_work, &d->mu);
        if (d->done == d->launched) break;   /* stopping with nothing left */
        int k = d->done, failed = d->status < 0;
        pthread_mutex_unlock(&d->mu);
        /* After a failure the communicator is unusable: skip the rest (finish reports the first error). */
        int rc = failed ? BATON_OK : run_bucket(d, k, BATON_TRACK_COMM);
        pthread_mutex_lock(&d->mu);
        if (rc < 0 && d->status == 0) {
            d->status = rc;
            snprintf(d->err, sizeof d->err, "%s", baton_last_error());
        }
        d->done++;
        pthread_cond_signal(&d->cv_done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Hands buckets [.., upto) to the comm thread. */
static void launch_upto(baton_ddp *d, int upto) {
    pthread_mutex_lock(&d->mu);
    d->launched = upto;
    pthread_cond_signal(&d->cv_work);
    pthread_mutex_unlock(&d->mu);
}

/* Without the comm thread: runs buckets [done, upto) here (the first failure is kept, the rest skipped). */
static void run_inline(baton_ddp *d, int upto) {
    for (; d->done < upto; d->done++) {
        int rc = d->status < 0 ? BATON_OK : run_bucket(d, d->done, BATON_TRACK_MAIN);
        if (rc < 0 && d->status == 0) {
            d->status = rc;
            snprintf(d->err, sizeof d->err, "%s", baton_last_error());
        }
    }
    d->launched = d->done;
}

void baton__wait_done(baton_ddp *d, int upto) {
    if (!d->thread_started) {
        run_inline(d, upto);
        return;
    }
    pthread_mutex_lock(&d->mu);
    while (d->done < upto) pthread_cond_wait(&d->cv_done, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static void grad_hook(void *ctx, int param) {
    baton_ddp *d = ctx;
    if (!d->sync) return;
    bucket *bk = &d->b[d->bucket_of[param]];
    BATON_ASSERT(bk->remaining > 0);
    if (--bk->remaining > 0) return;
    int k = d->next_launch;
    while (k < d->nb && d->b[k].remaining == 0) k++;   /* launch in bucket order only */
    if (k == d->next_launch) return;
    d->next_launch = k;
    if (d->cfg.overlap && d->thread_started) launch_upto(d, k);
    else if (d->z2) run_inline(d, k);   /* stage 2 recycles the staging during backward */
}

/* ---- set-up ------------------------------------------------------------------------------------------- */
static int build_buckets(baton_ddp *d) {
    baton_params *p = d->params;
    int np = baton_params_count(p);
    d->bucket_of = malloc((size_t)np * sizeof(int));
    d->b = calloc((size_t)np, sizeof(bucket));   /* at most one bucket per parameter */
    d->coll_ns = calloc((size_t)np, sizeof(uint64_t));
    int *order = malloc((size_t)np * sizeof(int));
    if (!d->bucket_of || !d->b || !d->coll_ns || !order) {
        free(order);
        return baton__fail(BATON_ENOMEM, "ddp: out of memory for buckets");
    }
    /* parameters by descending offset: the last layer (ready first) comes first */
    for (int i = 0; i < np; i++) order[i] = i;
    for (int i = 1; i < np; i++)
        for (int j = i; j > 0 && baton_params_info(p, order[j])->offset > baton_params_info(p, order[j - 1])->offset; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t hi = baton_params_numel(p), bytes = 0;
    int nb = 0;
    for (int j = 0; j < np; j++) {
        const baton_param_info *v = baton_params_info(p, order[j]);
        double cap = (nb == 0 ? d->cfg.first_bucket_mb : d->cfg.bucket_mb) * 1048576.0;
        size_t pb = v->count * sizeof(float);
        if (d->b[nb].nparams > 0 && (double)(bytes + pb) > cap) {   /* close bucket nb */
            hi = d->b[nb].lo;
            nb++;
            bytes = 0;
        }
        bucket *bk = &d->b[nb];
        if (bk->nparams == 0) bk->hi = hi;
        bk->lo = v->offset;
        bk->nparams++;
        bytes += pb;
        d->bucket_of[order[j]] = nb;
    }
    d->nb = nb + 1;
    d->b[d->nb - 1].lo = 0;   /* the lowest parameter starts the slab; cover everything */
    free(order);
    return BATON_OK;
}

/* Rank 0's parameters to everyone, in buckets of bucket_mb, then every replica's checksum against rank 0's. */
static int sync_replicas(baton_ddp *d) {
    float *w = baton_params_data(d->params);
    size_t n = baton_params_numel(d->params);
    size_t chunk = (size_t)(d->cfg.bucket_mb * 1048576.0 / sizeof(float));
    if (chunk < 1024) chunk = 1024;
    uint64_t t0 = baton__now_ns();
    for (size_t off = 0; off < n; off += chunk) {
        int rc = baton_broadcast(d->comm, w + off, n - off < chunk ? n - off : chunk, BATON_F32, 0);
        if (rc < 0) return baton__fail_ctx(rc, "ddp: broadcasting rank 0's parameters: ");
    }
    if (d->cfg.trace) baton_trace_span(d->cfg.trace, BATON_TRACK_MAIN, BATON_EV_BROADCAST, 0, t0, baton__now_ns());
    int64_t mine = (int64_t)baton_ddp_checksum(w, n);
    int64_t *all = malloc((size_t)d->world * sizeof *all);
    if (!all) return baton__fail(BATON_ENOMEM, "ddp: out of memory");
    int rc = baton_allgather(d->comm, &mine, all, 1, BATON_I64);
    if (rc < 0) {
        free(all);
        return baton__fail_ctx(rc, "ddp: gathering replica checksums: ");
    }
    char bad[256] = "";
    int nbad = 0;
    for (int r = 1; r < d->world; r++)
        if (all[r] != all[0] && nbad++ < 16) snprintf(bad + strlen(bad), sizeof bad - strlen(bad), " %d", r);
    free(all);
    if (nbad)
        return baton__fail(BATON_EINVAL, "ddp: after the broadcast, %d replica(s) differ from rank 0's (ranks%s): "
                           "the model shapes or the parameter layout differ between ranks", nbad, bad);
    return BATON_OK;
}

static int check_cfg(const baton_ddp_config *c) {
    if (!(c->bucket_mb > 0.0 && c->bucket_mb <= 4096.0) || !(c->first_bucket_mb > 0.0 && c->first_bucket_mb <= 4096.0))
        return baton__fail(BATON_EINVAL, "ddp: bucket caps must be in (0, 4096] MiB (got %g and first %g)",
                           c->bucket_mb, c->first_bucket_mb);
    if (c->grad_dtype != BATON_F32 && c->grad_dtype != BATON_BF16 && c->grad_dtype != BATON_F16)
        return baton__fail(BATON_EINVAL, "ddp: gradient wire dtype must be f32, bf16 or f16");
    if (c->loss_scale < BATON_LOSS_SCALE_NONE || c->loss_scale > BATON_LOSS_SCALE_DYNAMIC)
        return baton__fail(BATON_EINVAL, "ddp: unknown loss scaling %d", c->loss_scale);
    if (c->loss_scale != BATON_LOSS_SCALE_NONE && !(c->loss_scale_init >= 1.0f && c->loss_scale_init <= 16777216.0f))
        return baton__fail(BATON_EINVAL, "ddp: the loss scale must be in [1, 2^24] (got %g)", c->loss_scale_init);
    if (c->zero < 0 || c->zero > 2) return baton__fail(BATON_EINVAL, "ddp: the ZeRO stage must be 0, 1 or 2 (got %d)", c->zero);
    if (c->loss_scale == BATON_LOSS_SCALE_DYNAMIC && c->growth_interval < 1)
        return baton__fail(BATON_EINVAL, "ddp: the loss-scale growth interval must be >= 1 step");
    return BATON_OK;
}

int baton_ddp_new(baton_ddp **out, baton_comm *comm, baton_params *params, baton_tape *tape,
                  const baton_ddp_config *cfg) {
    *out = NULL;
    baton_ddp_config c = cfg ? *cfg : baton_ddp_defaults();
    int rc = check_cfg(&c);
    if (rc < 0) return rc;
    baton_ddp *d = calloc(1, sizeof *d);
    if (!d) return baton__fail(BATON_ENOMEM, "ddp: out of memory");
    d->comm = comm;
    d->params = params;
    d->tape = tape;
    d->cfg = c;
    d->rank = comm ? baton_comm_rank(comm) : 0;
    d->world = comm ? baton_comm_size(comm) : 1;
    d->scale = c.loss_scale != BATON_LOSS_SCALE_NONE ? c.loss_scale_init : 1.0f;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv_work, NULL);
    pthread_cond_init(&d->cv_done, NULL);
    size_t n = baton_params_numel(params);
    if ((rc = build_buckets(d)) < 0 || (rc = baton__zero_init(d)) < 0) goto fail;
    if (d->world > 1) {
        if ((rc = sync_replicas(d)) < 0) goto fail;
        /* Collective decisions below depend only on the config, which every rank shares. */
        if ((rc = baton__zero_share_params(d)) < 0) goto fail;
        if (c.zero == 2) {
            if ((rc = baton__zero2_init(d)) < 0) goto fail;
        } else if (c.zero_copy) {
            d->shm_grad = baton_buffer_alloc(comm, n * sizeof(float));
            if (d->shm_grad) {
                int moved = baton_params_set_grad_slab(params, d->shm_grad);
                BATON_ASSERT(moved == BATON_OK);   /* the mapping is page-aligned */
            } else {
                BATON_WARN("ddp: no shared-memory gradient slab (%s); all-reduces will stage", baton_last_error());
            }
        }
        if (c.grad_dtype != BATON_F32 && !d->z2) {
            d->wire = c.zero_copy ? baton_buffer_alloc(comm, n * sizeof(uint16_t)) : NULL;
            d->wire_shm = d->wire != NULL;
            if (!d->wire) d->wire = aligned_alloc(64, ((n * sizeof(uint16_t)) + 63) & ~(size_t)63);
            if (!d->wire) {
                rc = baton__fail(BATON_ENOMEM, "ddp: out of memory for the 16-bit wire buffer");
                goto fail;
            }
        }
        if (c.overlap) {
            if (pthread_create(&d->thread, NULL, comm_thread, d) != 0) {
                rc = baton__fail(BATON_ESYS, "ddp: cannot start the comm thread");
                goto fail;
            }
            d->thread_started = 1;
        }
    }
    d->st.buckets = d->nb;
    size_t esz = d->world > 1 ? baton_dtype_size(c.grad_dtype) : 0;
    d->st.bytes_per_step = (uint64_t)n * esz;
    if (tape) baton_tape_set_grad_hook(tape, grad_hook, d);
    *out = d;
    return BATON_OK;
fail:
    baton_ddp_free(d);
    return rc;
}

void baton_ddp_free(baton_ddp *d) {
    if (!d) return;
    if (d->thread_started) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_signal(&d->cv_work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    if (d->tape) baton_tape_set_grad_hook(d->tape, NULL, NULL);
    if (d->shm_grad) {
        baton_params_set_grad_slab(d->params, NULL);
        baton_buffer_free(d->comm, d->shm_grad);
    }
    if (d->wire_shm)
        baton_buffer_free(d->comm, d->wire);
    else
        free(d->wire);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv_work);
    pthread_cond_destroy(&d->cv_done);
    baton__zero_free(d);
    free(d->b);
    free(d->coll_ns);
    free(d->bucket_of);
    free(d);
}

/* ---- per step ------------------------------------------------------------------------------------------ */
/* Hands every bucket not launched yet to the comm thread (or runs it) and waits for all; returns the first
 * failure of the step. */
static int wait_all(baton_ddp *d) {
    int rc = BATON_OK;
    if (d->thread_started) {
        if (d->next_launch < d->nb) launch_upto(d, d->next_launch = d->nb);
        pthread_mutex_lock(&d->mu);
        while (d->done < d->nb) pthread_cond_wait(&d->cv_done, &d->mu);
        if ((rc = d->status) < 0) baton__fail(rc, "%s", d->err);
        pthread_mutex_unlock(&d->mu);
    } else {
        run_inline(d, d->next_launch = d->nb);
        if ((rc = d->status) < 0) baton__fail(rc, "%s", d->err);
    }
    return rc;
}

void baton_ddp_prepare(baton_ddp *d, int sync) {
    int more = 0;   /* ZeRO-2: a micro-batch of this step was reduced into the shard already */
    if (d->z2) {
        /* Every micro-batch is reduced (into the shard, where they add up): staging holds one backward. */
        more = d->in_step;
        if (more) {
            (void)wait_all(d);   /* a failure stays in status: finish reports it */
            d->micro++;
        } else {
            d->micro = 0;
        }
        d->in_step = 1;
        baton__zero2_begin(d);
        sync = 1;
    }
    d->sync = sync;
    if (!sync) return;
    for (int k = 0; k < d->nb; k++) d->b[k].remaining = d->b[k].nparams;
    d->next_launch = 0;
    if (!more) d->nonfinite = 0;
    pthread_mutex_lock(&d->mu);
    BATON_ASSERT(d->done == d->launched);   /* the previous step was finished */
    d->launched = d->done = 0;
    pthread_mutex_unlock(&d->mu);
}

float baton_ddp_backward_scale(const baton_ddp *d) { return d->scale; }

int baton_ddp_finish(baton_ddp *d, int *skip) {
    *skip = 0;
    BATON_ASSERT(d->sync);   /* baton_ddp_prepare(d, 1) must precede the step's last backward */
    d->sync = 0;
    uint64_t t0 = baton__now_ns();
    /* Buckets the hook did not launch (none, unless backward was skipped; all of them without overlap) go
     * now, in order. */
    int rc = wait_all(d);
    d->in_step = 0;
    uint64_t t1 = baton__now_ns();
    d->st.exposed_ns += t1 - t0;
    if (d->cfg.trace && d->thread_started) baton_trace_span(d->cfg.trace, BATON_TRACK_MAIN, BATON_EV_WAIT, 0, t0, t1);
    if (rc < 0) return rc;
    d->st.steps++;
    if (d->cfg.loss_scale == BATON_LOSS_SCALE_NONE) return BATON_OK;
    /* Every rank reduced the same bits, but agree explicitly: one rank's skip is everyone's. */
    int32_t flag = d->nonfinite, any = flag;
    if (d->world > 1 && (rc = baton_allreduce(d->comm, &flag, &any, 1, BATON_I32, BATON_MAX)) < 0) return rc;
    if (any) {
        *skip = 1;
        d->st.skipped++;
        d->good_steps = 0;
        if (d->cfg.loss_scale == BATON_LOSS_SCALE_DYNAMIC && d->scale > 1.0f) d->scale *= 0.5f;
    } else if (d->cfg.loss_scale == BATON_LOSS_SCALE_DYNAMIC && ++d->good_steps >= d->cfg.growth_interval) {
        d->good_steps = 0;
        if (d->scale < 16777216.0f) d->scale *= 2.0f;
    }
    return BATON_OK;
}

void baton_ddp_get_stats(const baton_ddp *d, baton_ddp_stats *out) {
    *out = d->st;
    out->loss_scale = d->scale;
}

void baton_ddp_get_scaler(const baton_ddp *d, baton_ddp_scaler *out) {
    out->scale = d->scale;
    out->good_steps = d->good_steps;
    out->skipped = d->st.skipped;
}

int baton_ddp_set_scaler(baton_ddp *d, const baton_ddp_scaler *s) {
    int none = d->cfg.loss_scale == BATON_LOSS_SCALE_NONE;
    if (!(s->scale >= 1.0f && s->scale <= 16777216.0f) || (none && s->scale != 1.0f) || s->good_steps < 0 ||
        s->skipped < 0 || (d->cfg.loss_scale == BATON_LOSS_SCALE_DYNAMIC && s->good_steps >= d->cfg.growth_interval))
        return baton__fail(BATON_EINVAL, "ddp: loss-scaler state (scale %g, %ld clean steps, %ld skipped) does not "
                           "fit this run's loss scaling", (double)s->scale, s->good_steps, s->skipped);
    d->scale = s->scale;
    d->good_steps = s->good_steps;
    d->st.skipped = s->skipped;
    return BATON_OK;
}

int baton_ddp_coll_times(const baton_ddp *d, uint64_t *ns, int max) {
    if (d->world == 1 || max <= 0) return 0;
    for (int k = 0; k < d->nb; k++) {
        if (k < max) ns[k] = 0;
        ns[k < max ? k : max - 1] += d->coll_ns[k];
    }
    return d->nb < max ? d->nb : max;
}

int baton_ddp_bucket(const baton_ddp *d, int k, size_t *lo, size_t *hi) {
    if (k >= 0 && k < d->nb) {
        *lo = d->b[k].lo;
        *hi = d->b[k].hi;
    }
    return d->nb;
}
