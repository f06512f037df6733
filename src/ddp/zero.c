/* zero.c: ZeRO stages 1 and 2 on top of the data-parallel engine: the rank's shard of the slab, the sharded
 * optimizer step, clipping by the global norm over shards, and the all-gather of the updated parameters.
 * The gradient side of stage 2 (each bucket reduced into the shards during backward) is in ddp.c's
 * run_bucket; see include/baton/ddp.h and docs/zero.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/ddp.h"
#include "ddp/ddp_impl.h"
#include "util/util.h"

enum { AG_CHUNK = 1 << 16 };   /* floats per rank per round of the uneven all-gather */
enum { ZERO2_SLOTS = 2 };       /* staging slots: backward writes one bucket while the other is reduced */

int baton__zero_init(baton_ddp *d) {
    size_t n = baton_params_numel(d->params);
    d->shard_lo = 0;
    d->shard_hi = n;
    if (d->cfg.zero == 0 || d->world == 1) return BATON_OK;
    long lo, hi;
    baton_shard_range((long)n, d->rank, d->world, &lo, &hi);
    d->shard_lo = (size_t)lo;
    d->shard_hi = (size_t)hi;
    if (n % (size_t)d->world == 0) return BATON_OK;   /* equal shards: the all-gather runs in place */
    d->ag_send = malloc(AG_CHUNK * sizeof(float));
    d->ag_recv = malloc((size_t)d->world * AG_CHUNK * sizeof(float));
    if (!d->ag_send || !d->ag_recv) return baton__fail(BATON_ENOMEM, "zero: out of memory for the all-gather staging");
    return BATON_OK;
}

static void *zalloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}

/* Points parameter views [pfirst, pend) of bucket k at buf (the bucket's start) and zeroes the alignment
 * padding between them, which backward never writes but the reduction and the norm read. */
static void point_bucket(baton_ddp *d, int k, float *buf) {
    const bucket *bk = &d->b[k];
    for (int j = d->pfirst[k]; j < d->pend[k]; j++) {
        const baton_param_info *v = baton_params_info(d->params, j);
        baton_params_set_view_grad(d->params, j, buf + (v->offset - bk->lo));
        size_t e = v->offset + v->count, pe = (e + 15) & ~(size_t)15;
        if (pe > bk->hi) pe = bk->hi;
        if (pe > e) memset(buf + (e - bk->lo), 0, (pe - e) * sizeof(float));
    }
}

/* The tape's need hook: parameter `param` is about to get its first gradient of this backward. Its bucket
 * takes a staging slot: a free one, else the one whose bucket was launched earliest (waiting until that
 * bucket is reduced). The choice depends only on the order of backward, the same on every rank, so every
 * rank stages bucket k at the same offset of its shared staging (which the peers read). When every slot is
 * held by a bucket that is still being written (a weight used at both ends of the model), the bucket gets
 * private staging of its own instead, reduced by an all-reduce (every rank makes the same choice). */
static void zero2_need(void *ctx, int param) {
    baton_ddp *d = ctx;
    int k = d->bucket_of[param];
    if (d->bucket_buf[k]) return;
    int s = -1;
    for (int i = 0; i < d->nslots && s < 0 && d->fixed_at[k] < 0; i++)
        if (d->slot_bucket[i] < 0) s = i;
    if (s < 0 && d->fixed_at[k] < 0)
        for (int i = 0; i < d->nslots; i++)
            if (d->slot_bucket[i] < d->next_launch && (s < 0 || d->slot_bucket[i] < d->slot_bucket[s])) s = i;
    float *buf;
    uint16_t *wire = NULL;
    if (d->fixed_at[k] >= 0) {   /* a small bucket keeps its own place */
        buf = d->stage + d->fixed_at[k];
        if (d->stage_wire) wire = d->stage_wire + d->fixed_at[k];
    } else if (s >= 0) {
        if (d->slot_bucket[s] >= 0) baton__wait_done(d, d->slot_bucket[s] + 1);
        d->slot_bucket[s] = k;
        buf = d->stage + (size_t)s * d->slot_n;
        if (d->stage_wire) wire = d->stage_wire + (size_t)s * d->slot_n;
    } else {
        size_t n = d->b[k].hi - d->b[k].lo;
        if (!d->overflow[k]) {
            d->overflow[k] = zalloc64(n * sizeof(float));
            if (d->stage_wire) d->overflow_wire[k] = zalloc64(n * sizeof(uint16_t));
            if (!d->overflow[k] || (d->stage_wire && !d->overflow_wire[k])) {
                fprintf(stderr, "baton: zero: out of memory for %zu floats of gradient staging\n", n);
                abort();
            }
            d->overflow_bytes += n * (sizeof(float) + (d->stage_wire ? sizeof(uint16_t) : 0));
        }
        buf = d->overflow[k];
        wire = d->overflow_wire[k];
    }
    d->bucket_buf[k] = buf;
    d->bucket_wire[k] = wire;
    point_bucket(d, k, buf);
}

void baton__zero2_begin(baton_ddp *d) {
    for (int i = 0; i < d->nslots; i++) d->slot_bucket[i] = -1;
    for (int k = 0; k < d->nb; k++) d->bucket_buf[k] = NULL;
    baton_params_zero_grad(d->params);   /* staging is recycled: every gradient is written afresh */
}

static void *stage_alloc(baton_ddp *d, size_t bytes, int *shm) {
    void *p = d->cfg.zero_copy ? baton_buffer_alloc(d->comm, bytes) : NULL;
    *shm = p != NULL;
    return p ? p : zalloc64(bytes);
}

int baton__zero2_init(baton_ddp *d) {
    if (!d->tape)
        return baton__fail(BATON_EINVAL, "zero: stage 2 needs the tape (backward binds each bucket's staging "
                           "through its need hook); pass it to baton_ddp_new");
    d->z2 = 1;
    size_t len = d->shard_hi - d->shard_lo, big = 0;
    for (int k = 0; k < d->nb; k++)
        if (d->b[k].hi - d->b[k].lo > big) big = d->b[k].hi - d->b[k].lo;
    d->slot_n = (big + 15) & ~(size_t)15;
    d->nslots = d->nb < ZERO2_SLOTS ? d->nb : ZERO2_SLOTS;
    d->fixed_at = malloc((size_t)d->nb * sizeof(long));
    if (!d->fixed_at) return baton__fail(BATON_ENOMEM, "zero: out of memory for the gradient shard");
    /* Buckets of at most 1/8 of a slot (biases between two big weights, the small last layer) keep places of
     * their own after the slots, up to one slot in all: a node writing a bias and a big weight of different
     * buckets would otherwise wait for a whole slot to be reduced before it starts. */
    d->fixed_n = 0;
    for (int k = 0; k < d->nb; k++) {
        size_t n = (d->b[k].hi - d->b[k].lo + 15) & ~(size_t)15;
        d->fixed_at[k] = -1;
        if (d->nb > d->nslots && n <= d->slot_n / 8 && d->fixed_n + n <= d->slot_n) {
            d->fixed_at[k] = (long)((size_t)d->nslots * d->slot_n + d->fixed_n);
            d->fixed_n += n;
        }
    }
    d->gshard = zalloc64(len * sizeof(float));
    d->slot_bucket = malloc((size_t)d->nslots * sizeof(int));
    d->bucket_buf = calloc((size_t)d->nb, sizeof(float *));
    d->bucket_wire = calloc((size_t)d->nb, sizeof(uint16_t *));
    d->overflow = calloc((size_t)d->nb, sizeof(float *));
    d->overflow_wire = calloc((size_t)d->nb, sizeof(uint16_t *));
    d->pfirst = malloc((size_t)d->nb * sizeof(int));
    d->pend = calloc((size_t)d->nb, sizeof(int));
    if (!d->gshard || !d->slot_bucket || !d->bucket_buf || !d->bucket_wire || !d->overflow || !d->overflow_wire ||
        !d->pfirst || !d->pend)
        return baton__fail(BATON_ENOMEM, "zero: out of memory for the gradient shard");
    for (int k = 0; k < d->nb; k++) d->pfirst[k] = baton_params_count(d->params);
    for (int j = 0; j < baton_params_count(d->params); j++) {
        int k = d->bucket_of[j];
        if (j < d->pfirst[k]) d->pfirst[k] = j;
        if (j + 1 > d->pend[k]) d->pend[k] = j + 1;
    }
    /* Collective (the same sizes on every rank, in the same order). */
    size_t total = (size_t)d->nslots * d->slot_n + d->fixed_n;
    d->stage = stage_alloc(d, total * sizeof(float), &d->stage_shm);
    if (d->stage && d->cfg.grad_dtype != BATON_F32)
        d->stage_wire = stage_alloc(d, total * sizeof(uint16_t), &d->stage_wire_shm);
    if (!d->stage || (d->cfg.grad_dtype != BATON_F32 && !d->stage_wire))
        return baton__fail(BATON_ENOMEM, "zero: out of memory for %d gradient staging slots of %zu floats", d->nslots,
                           d->slot_n);
    int rc = baton_params_shard_grads(d->params, d->gshard, d->shard_lo, d->shard_hi);
    if (rc < 0) return rc;
    /* every view points at valid memory before the first forward (the need hook rebinds it in backward) */
    for (int k = 0; k < d->nb; k++) point_bucket(d, k, d->stage);
    baton__zero2_begin(d);
    if (d->tape) baton_tape_set_grad_need_hook(d->tape, zero2_need, d);
    return BATON_OK;
}

/* ZeRO with every rank on one node: the ranks' parameter values move into one slab of the node. Each rank
 * copies its shard of the (identical, just synced) replica there, repoints its views and frees its own copy;
 * the barrier makes the slab whole before anyone reads it. A failure to share is not an error: the all-gather
 * remains. */
int baton__zero_share_params(baton_ddp *d) {
    if (d->cfg.zero == 0 || !d->cfg.zero_copy || baton_comm_num_nodes(d->comm) != 1) return BATON_OK;
    size_t n = baton_params_numel(d->params);
    baton__clear_error();
    float *slab = baton_buffer_alloc_node(d->comm, n * sizeof(float));
    if (!slab) {
        if (*baton_last_error()) BATON_WARN("zero: the ranks keep a parameter copy each (%s)", baton_last_error());
        return BATON_OK;
    }
    /* my shard goes in, the views move; nobody reads the slab before the barrier (on a failure baton_ddp_free
     * gives the params a copy of their own back) */
    int rc = baton_params_set_data_slab(d->params, slab, d->shard_lo, d->shard_hi);
    BATON_ASSERT(rc == BATON_OK);   /* the mapping is page-aligned and the range inside the slab */
    d->node_params = slab;
    if ((rc = baton_barrier(d->comm)) < 0) return baton__fail_ctx(rc, "zero: sharing the parameter slab: ");
    return BATON_OK;
}

void baton__zero_free(baton_ddp *d) {
    free(d->ag_send);
    free(d->ag_recv);
    d->ag_send = d->ag_recv = NULL;
    if (d->tape && d->z2) baton_tape_set_grad_need_hook(d->tape, NULL, NULL);
    if (d->gshard) baton_params_set_grad_slab(d->params, NULL);   /* a whole slab of the params' own again */
    if (d->node_params) {   /* every rank takes a copy of the shared values, then lets the slab go */
        if (baton_params_set_data_slab(d->params, NULL, 0, 0) < 0) {
            fprintf(stderr, "baton: zero: %s\n", baton_last_error());
            abort();
        }
        baton_buffer_free(d->comm, d->node_params);
        d->node_params = NULL;
    }
    free(d->gshard);
    if (d->stage_shm) baton_buffer_free(d->comm, d->stage);
    else free(d->stage);
    if (d->stage_wire_shm) baton_buffer_free(d->comm, d->stage_wire);
    else free(d->stage_wire);
    for (int k = 0; d->overflow && k < d->nb; k++) {
        free(d->overflow[k]);
        if (d->overflow_wire) free(d->overflow_wire[k]);
    }
    free(d->overflow);
    free(d->overflow_wire);
    free(d->slot_bucket);
    free(d->fixed_at);
    free(d->bucket_buf);
    free(d->bucket_wire);
    free(d->pfirst);
    free(d->pend);
}

void baton_ddp_shard(const baton_ddp *d, size_t *lo, size_t *hi) {
    *lo = d->shard_lo;
    *hi = d->shard_hi;
}

int baton_ddp_attach_optim(baton_ddp *d, baton_optim *opt) {
    int rc = baton_optim_set_shard(opt, d->shard_lo, d->shard_hi);
    if (rc < 0) return rc;
    return baton_optim_state(opt, 0) ? BATON_OK : BATON_ENOMEM;   /* allocated now: fail here, not mid-run */
}

/* Every rank's updated shard to everyone. Equal shards: one in-place all-gather of the slab. Otherwise rounds
 * of AG_CHUNK floats per rank through staging (shard sizes differ by one, the last round is padded). */
static int gather_params(baton_ddp *d) {
    float *w = baton_params_data(d->params);
    size_t n = baton_params_numel(d->params);
    if (!d->ag_send) {
        size_t q = n / (size_t)d->world;
        return baton_allgather(d->comm, w + d->shard_lo, w, q, BATON_F32);
    }
    size_t qmax = (n + (size_t)d->world - 1) / (size_t)d->world;
    for (size_t off = 0; off < qmax; off += AG_CHUNK) {
        size_t mine = d->shard_hi - d->shard_lo;
        size_t m = mine > off ? (mine - off < AG_CHUNK ? mine - off : AG_CHUNK) : 0;
        memcpy(d->ag_send, w + d->shard_lo + off, m * sizeof(float));
        memset(d->ag_send + m, 0, (AG_CHUNK - m) * sizeof(float));
        size_t cnt = qmax - off < AG_CHUNK ? qmax - off : AG_CHUNK;
        int rc = baton_allgather(d->comm, d->ag_send, d->ag_recv, cnt, BATON_F32);
        if (rc < 0) return rc;
        /* the staging was cnt floats per rank this round: rank r's piece sits at r * cnt */
        for (int r = 0; r < d->world; r++) {
            if (r == d->rank) continue;
            long lo, hi;
            baton_shard_range((long)n, r, d->world, &lo, &hi);
            size_t len = (size_t)(hi - lo);
            size_t mr = len > off ? (len - off < cnt ? len - off : cnt) : 0;
            memcpy(w + (size_t)lo + off, d->ag_recv + (size_t)r * cnt, mr * sizeof(float));
        }
    }
    return BATON_OK;
}

/* Clipping. Without ZeRO-2 every rank holds the whole reduced gradient and clips it locally (the same bits
 * as a one-process clip). At stage 2 a rank holds its shard only: the squares of the shards are summed with
 * one f64 all-reduce, and each rank scales its shard. */
static int clip(baton_ddp *d, float max_norm, float *norm) {
    if (d->cfg.zero != 2 || d->world == 1) {
        float nm = baton_clip_grad_norm(d->params, max_norm);
        if (norm) *norm = nm;
        return BATON_OK;
    }
    double s = baton_grad_sumsq(d->params, d->shard_lo, d->shard_hi);
    int rc = baton_allreduce(d->comm, &s, &s, 1, BATON_F64, BATON_SUM);
    if (rc < 0) return rc;
    float nm = (float)sqrt(s);
    if (max_norm > 0.0f && nm > max_norm) baton_grad_scale(d->params, d->shard_lo, d->shard_hi, max_norm / (nm + 1e-6f));
    if (norm) *norm = nm;
    return BATON_OK;
}

/* Waits for every rank; traced as a barrier span. */
static int traced_barrier(baton_ddp *d) {
    uint64_t t0 = baton__now_ns();
    int rc = baton_barrier(d->comm);
    uint64_t t1 = baton__now_ns();
    if (d->cfg.trace) baton_trace_span(d->cfg.trace, BATON_TRACK_MAIN, BATON_EV_BARRIER, -1, t0, t1);
    d->st.comm_ns += t1 - t0;
    d->st.exposed_ns += t1 - t0;
    return rc;
}

/* The shared slab: nobody may read the values while a rank updates its shard, so the update sits between two
 * barriers (the first: every rank's backward is over; the second: every shard is updated). */
static int step_shared(baton_ddp *d, baton_optim *opt, float lr) {
    int rc = traced_barrier(d);
    if (rc < 0) return baton__fail_ctx(rc, "zero: the barrier before the update: ");
    baton_optim_step(opt, lr);
    if ((rc = traced_barrier(d)) < 0) return baton__fail_ctx(rc, "zero: the barrier after the update: ");
    return BATON_OK;
}

int baton_ddp_step(baton_ddp *d, baton_optim *opt, float lr, float max_norm, float *norm) {
    int rc = BATON_OK;
    if (max_norm > 0.0f || norm) rc = clip(d, max_norm, norm);
    if (rc < 0) return baton__fail_ctx(rc, "zero: the gradient norm: ");
    if (d->node_params) return step_shared(d, opt, lr);
    baton_optim_step(opt, lr);
    if (d->cfg.zero == 0 || d->world == 1) return BATON_OK;
    uint64_t t0 = baton__now_ns(), tg = t0;
    if (d->cfg.trace) {
        /* traced only: a barrier first, so the timeline shows the wait for the slowest rank apart from the
         * gather itself (untraced, the gather's own first wait does both) */
        if ((rc = baton_barrier(d->comm)) < 0) return baton__fail_ctx(rc, "zero: the barrier before the gather: ");
        tg = baton__now_ns();
        baton_trace_span(d->cfg.trace, BATON_TRACK_MAIN, BATON_EV_BARRIER, -1, t0, tg);
    }
    if ((rc = gather_params(d)) < 0) return baton__fail_ctx(rc, "zero: gathering the updated parameters: ");
    uint64_t t1 = baton__now_ns();
    if (d->cfg.trace) baton_trace_span(d->cfg.trace, BATON_TRACK_MAIN, BATON_EV_ALLGATHER, -1, tg, t1);
    d->st.comm_ns += t1 - t0;
    d->st.exposed_ns += t1 - t0;   /* nothing overlaps it */
    return BATON_OK;
}

void baton_ddp_get_memory(const baton_ddp *d, const baton_optim *opt, baton_ddp_memory *out) {
    size_t n = baton_params_numel(d->params), lo = 0, hi = n;
    if (opt) baton_optim_shard(opt, &lo, &hi);
    int slots = opt ? baton_optim_kind_slots(baton_optim_kind(opt)) : 0;
    size_t wire = d->cfg.grad_dtype != BATON_F32 && d->world > 1 ? sizeof(uint16_t) : 0;
    out->param_bytes = (uint64_t)n * sizeof(float);
    if (d->z2) {
        out->grad_reduced_bytes = (uint64_t)(d->shard_hi - d->shard_lo) * sizeof(float);
        out->grad_staging_bytes = ((uint64_t)d->nslots * d->slot_n + d->fixed_n) * (sizeof(float) + wire) + d->overflow_bytes;
    } else {   /* the whole slab backward writes and the reduction averages in place (+ its 16-bit copy) */
        out->grad_reduced_bytes = (uint64_t)n * sizeof(float);
        out->grad_staging_bytes = (uint64_t)n * wire;
    }
    out->grad_bytes = out->grad_reduced_bytes + out->grad_staging_bytes;
    out->optim_bytes = (uint64_t)slots * (hi - lo) * sizeof(float);
    out->params_shared = d->node_params != NULL;
}
