/* sampler.c: the synthetic dataset, batch gathering and the seeded, shardable epoch sampler. */
#include <stdlib.h>
#include <string.h>

#include "baton/data.h"
#include "baton/nn.h"
#include "util/util.h"

int baton_dataset_synthetic(baton_dataset *ds, int n, int c, int h, int w, int classes, uint64_t seed) {
    memset(ds, 0, sizeof *ds);
    if (n < 1 || n > 100000000 || c < 1 || c > 64 || h < 1 || h > 4096 || w < 1 || w > 4096 || classes < 2 ||
        classes > 100000)
        return baton__fail(BATON_EINVAL, "synthetic: bad size n=%d image=%dx%dx%d classes=%d", n, c, h, w, classes);
    size_t dim = (size_t)c * h * w, total;
    if (!baton__mul_ok(dim, (size_t)n, &total) || total > ((size_t)1 << 31))
        return baton__fail(BATON_EINVAL, "synthetic: %d samples of %zu floats is too large (max 2^31 floats)", n, dim);
    float *proto = malloc((size_t)classes * dim * sizeof(float));
    ds->x = malloc(total * sizeof(float));
    ds->y = malloc((size_t)n * sizeof(int32_t));
    if (!proto || !ds->x || !ds->y) {
        free(proto);
        baton_dataset_free(ds);
        return baton__fail(BATON_ENOMEM, "synthetic: out of memory for %d samples", n);
    }
    ds->n = n;
    ds->c = c;
    ds->h = h;
    ds->w = w;
    ds->dim = (int)dim;
    ds->classes = classes;
    baton_rng r;
    baton_rng_seed(&r, seed ^ 0x73796e7468657469ull);
    for (size_t i = 0; i < (size_t)classes * dim; i++) proto[i] = baton_rng_normal(&r);
    for (int i = 0; i < n; i++) {
        int y = (int)baton_rng_below(&r, (uint64_t)classes);
        ds->y[i] = y;
        float *x = ds->x + (size_t)i * dim;
        const float *p = proto + (size_t)y * dim;
        for (size_t j = 0; j < dim; j++) x[j] = 0.5f * p[j] + baton_rng_normal(&r);
    }
    free(proto);
    return BATON_OK;
}

void baton_dataset_gather(const baton_dataset *ds, const int32_t *idx, int count, float *x, int32_t *y) {
    for (int i = 0; i < count; i++) {
        BATON_ASSERT(idx[i] >= 0 && idx[i] < ds->n);
        memcpy(x + (size_t)i * ds->dim, ds->x + (size_t)idx[i] * ds->dim, (size_t)ds->dim * sizeof(float));
        y[i] = ds->y[idx[i]];
    }
}

int baton_sampler_init(baton_sampler *s, int n, int rank, int world, int shuffle, uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (n < 1 || world < 1 || rank < 0 || rank >= world)
        return baton__fail(BATON_EINVAL, "sampler: bad n=%d rank=%d world=%d", n, rank, world);
    s->n = n;
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->seed = seed;
    s->len = (int)(((long)n + world - 1) / world);
    s->idx = malloc((size_t)s->len * sizeof(int32_t));
    s->perm = malloc((size_t)n * sizeof(int32_t));
    if (!s->idx || !s->perm) {
        baton_sampler_free(s);
        return baton__fail(BATON_ENOMEM, "sampler: out of memory");
    }
    baton_sampler_set_epoch(s, 0);
    return BATON_OK;
}

void baton_sampler_set_epoch(baton_sampler *s, long epoch) {
    for (int i = 0; i < s->n; i++) s->perm[i] = i;
    if (s->shuffle) {   /* Fisher-Yates, seeded by (seed, epoch): identical on every rank */
        baton_rng r;
        baton_rng_seed(&r, s->seed * 0x9e3779b97f4a7c15ull + (uint64_t)epoch + 1);
        for (int i = s->n - 1; i > 0; i--) {
            int j = (int)baton_rng_below(&r, (uint64_t)i + 1);
            int32_t tmp = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = tmp;
        }
    }
    for (int k = 0; k < s->len; k++) s->idx[k] = s->perm[((long)k * s->world + s->rank) % s->n];
}

void baton_sampler_free(baton_sampler *s) {
    if (!s) return;
    free(s->idx);
    free(s->perm);
    s->idx = s->perm = NULL;
}
