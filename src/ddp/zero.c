/* zero.c: ZeRO stages 1 and 2 on top of the data-parallel engine: the rank's shard of the slab, the sharded
 * optimizer step, clipping by the global norm over shards, and the all-gather of the updated parameters.
 * The gradient side of stage 2 (each bucket reduced into the shards during backward) is in ddp.c's
 * run_bucket; see include/baton/ddp.h and docs/zero.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baton/ddp.h"
#include "ddp/ddp_impl.h"
#include "util/util.h"

enum { AG_CHUNK = 1 << 16 };   /* floats per rank per round of the uneven all-gather */

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

void baton__zero_free(baton_ddp *d) {
    free(d->ag_send);
    free(d->ag_recv);
    d->ag_send = d->ag_recv = NULL;
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

int baton_ddp_step(baton_ddp *d, baton_optim *opt, float lr, float max_norm, float *norm) {
    int rc = BATON_OK;
    if (max_norm > 0.0f || norm) rc = clip(d, max_norm, norm);
    if (rc < 0) return baton__fail_ctx(rc, "zero: the gradient norm: ");
    baton_optim_step(opt, lr);
    if (d->cfg.zero == 0 || d->world == 1) return BATON_OK;
    uint64_t t0 = baton__now_ns();
    if ((rc = gather_params(d)) < 0) return baton__fail_ctx(rc, "zero: gathering the updated parameters: ");
    uint64_t t1 = baton__now_ns();
    d->st.comm_ns += t1 - t0;
    d->st.exposed_ns += t1 - t0;   /* nothing overlaps it */
    return BATON_OK;
}

void baton_ddp_get_memory(const baton_ddp *d, const baton_optim *opt, baton_ddp_memory *out) {
    size_t n = baton_params_numel(d->params), lo = 0, hi = n;
    if (opt) baton_optim_shard(opt, &lo, &hi);
    int slots = opt ? baton_optim_kind_slots(baton_optim_kind(opt)) : 0;
    out->param_bytes = (uint64_t)n * sizeof(float);
    out->grad_bytes = (uint64_t)n * sizeof(float);
    out->grad_reduced_bytes = (uint64_t)(d->cfg.zero == 2 ? d->shard_hi - d->shard_lo : n) * sizeof(float);
    out->optim_bytes = (uint64_t)slots * (hi - lo) * sizeof(float);
}
