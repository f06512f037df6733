/* optim.c: SGD with momentum and AdamW as one loop over the parameter slab, gradient clipping by global
 * norm, and learning-rate schedules (linear warmup, then constant, cosine or step decay). The optimizer
 * state lives in slabs with the parameters' layout, so a checkpoint is a few memcpy's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "util/util.h"

struct baton_optim {
    baton_optim_config cfg;
    baton_params *p;      /* borrowed */
    float *m, *v;         /* state for slab elements [lo, hi) (hi - lo floats); v only for adamw */
    size_t lo, hi;        /* the shard this optimizer updates: [0, numel) unless sharded (ZeRO) */
    long steps;           /* steps taken */
};

static int alloc_state(baton_optim *o, size_t n) {
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    if (!bytes) bytes = 64;
    int two = baton_optim_kind_slots(o->cfg.kind) == 2;
    float *m = aligned_alloc(64, bytes), *v = two ? aligned_alloc(64, bytes) : NULL;
    if (!m || (two && !v)) {
        free(m);
        free(v);
        return baton__fail(BATON_ENOMEM, "optimizer: out of memory for %zu floats of state", n);
    }
    memset(m, 0, bytes);
    if (v) memset(v, 0, bytes);
    free(o->m);
    free(o->v);
    o->m = m;
    o->v = v;
    return BATON_OK;
}

int baton_optim_new(baton_optim **out, baton_params *p, const baton_optim_config *cfg) {
    *out = NULL;
    if (cfg->kind < BATON_OPTIM_SGD || cfg->kind > BATON_OPTIM_LAMB)
        return baton__fail(BATON_EINVAL, "optimizer: unknown kind %d", cfg->kind);
    int two = baton_optim_kind_slots(cfg->kind) == 2;
    if (!(cfg->momentum >= 0.0f && cfg->momentum < 1.0f) || !(cfg->weight_decay >= 0.0f) ||
        !(cfg->trust_coef >= 0.0f) ||
        (two &&
         !(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f && cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f && cfg->eps > 0.0f)))
        return baton__fail(BATON_EINVAL, "optimizer: hyperparameter out of range (momentum/betas in [0,1), "
                                         "weight decay >= 0, eps > 0)");
    baton_optim *o = calloc(1, sizeof *o);
    if (!o) return baton__fail(BATON_ENOMEM, "optimizer: out of memory");
    o->cfg = *cfg;
    o->p = p;
    o->hi = baton_params_numel(p);   /* the state is allocated on first use, so that a ZeRO rank that narrows
                                      * the optimizer to its shard first never touches the whole slab's */
    *out = o;
    return BATON_OK;
}

void baton_optim_free(baton_optim *o) {
    if (!o) return;
    free(o->m);
    free(o->v);
    free(o);
}

int baton_optim_set_shard(baton_optim *o, size_t lo, size_t hi) {
    if (lo > hi || hi > baton_params_numel(o->p))
        return baton__fail(BATON_EINVAL, "optimizer: shard [%zu, %zu) is not inside the %zu-element slab", lo, hi,
                           baton_params_numel(o->p));
    if (lo == o->lo && hi == o->hi) return BATON_OK;
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;   /* allocated (zeroed) on first use */
    o->lo = lo;
    o->hi = hi;
    return BATON_OK;
}

void baton_optim_shard(const baton_optim *o, size_t *lo, size_t *hi) {
    *lo = o->lo;
    *hi = o->hi;
}

static int ensure_state(baton_optim *o) { return o->m ? BATON_OK : alloc_state(o, o->hi - o->lo); }

float *baton_optim_state(baton_optim *o, int slot) {
    if (ensure_state(o) < 0) return NULL;
    return slot == 0 ? o->m : slot == 1 ? o->v : NULL;
}
long baton_optim_steps(const baton_optim *o) { return o->steps; }
void baton_optim_set_steps(baton_optim *o, long steps) { o->steps = steps; }
int baton_optim_kind(const baton_optim *o) { return o->cfg.kind; }
const char *baton_optim_kind_name(int kind) {
    static const char *const names[] = {"sgd", "adamw", "lars", "lamb"};
    return kind >= 0 && kind <= BATON_OPTIM_LAMB ? names[kind] : "?";
}
int baton_optim_kind_slots(int kind) { return kind == BATON_OPTIM_ADAMW || kind == BATON_OPTIM_LAMB ? 2 : 1; }

void baton_optim_step(baton_optim *o, float lr) {
    baton_params *p = o->p;
    float *w = baton_params_data(p);
    const baton_optim_config *c = &o->cfg;
    if (ensure_state(o) < 0) BATON_ASSERT(!"optimizer: out of memory for the state");
    o->steps++;
    float c1 = 1.0f / (1.0f - powf(c->beta1, (float)o->steps)), c2 = 1.0f / (1.0f - powf(c->beta2, (float)o->steps));
    /* One loop per view (decay differs per view); views are contiguous in the slab. */
    for (int i = 0, np = baton_params_count(p); i < np; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        size_t off = v->offset, end = v->offset + v->count;   /* the view's part of this optimizer's shard */
        if (off < o->lo) off = o->lo;
        if (end > o->hi) end = o->hi;
        if (off >= end) continue;
        size_t n = end - off, s = off - o->lo;
        float wd = v->decay ? c->weight_decay : 0.0f;
        const float *g = baton_params_grad_at(p, off, end);   /* the gradient of element off */
        if (c->kind == BATON_OPTIM_SGD) baton__sgd(w + off, g, o->m + s, n, lr, c->momentum, wd);
        else if (c->kind == BATON_OPTIM_LARS)   /* the trust ratio needs whole views: not under ZeRO (refused) */
            baton__lars(w + off, g, o->m + s, n, lr, c->momentum, wd, c->trust_coef > 0 ? c->trust_coef : 0.001f,
                        v->decay);
        else if (c->kind == BATON_OPTIM_LAMB)
            baton__lamb(w + off, g, o->m + s, o->v + s, n, lr, wd, c->beta1, c->beta2, c->eps, c1, c2, v->decay);
        else baton__adamw(w + off, g, o->m + s, o->v + s, n, lr, wd, c->beta1, c->beta2, c->eps, c1, c2);
    }
}

float baton_clip_grad_norm(baton_params *p, float max_norm) {
    const float *g = baton_params_grad(p);
    size_t n = baton_params_numel(p);   /* padding is zero, so it does not count */
    double s = baton__sumsq(g, n);
    float norm = (float)sqrt(s);
    if (max_norm > 0.0f && norm > max_norm) {
        float k = max_norm / (norm + 1e-6f);
        baton__scale(baton_params_grad(p), n, k);
    }
    return norm;
}

double baton_grad_sumsq(baton_params *p, size_t lo, size_t hi) {
    return hi > lo ? baton__sumsq(baton_params_grad_at(p, lo, hi), hi - lo) : 0.0;
}

void baton_grad_scale(baton_params *p, size_t lo, size_t hi, float k) {
    if (hi > lo) baton__scale(baton_params_grad_at(p, lo, hi), hi - lo, k);
}

float baton_lr_at(const baton_lr_schedule *s, long step) {
    if (s->warmup > 0 && step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    long t = step - (s->warmup > 0 ? s->warmup : 0);
    switch (s->kind) {
    case BATON_SCHED_COSINE: {
        long span = s->total - (s->warmup > 0 ? s->warmup : 0);
        if (span <= 0) return s->lr;
        double frac = (double)t / (double)span;
        if (frac > 1.0) frac = 1.0;
        return s->min_lr + (s->lr - s->min_lr) * (float)(0.5 * (1.0 + cos(3.14159265358979323846 * frac)));
    }
    case BATON_SCHED_STEP:
        if (s->step_every <= 0) return s->lr;
        return s->lr * powf(s->gamma, (float)(t / s->step_every));
    default: return s->lr;
    }
}
