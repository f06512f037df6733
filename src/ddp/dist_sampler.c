/* dist_sampler.c: the distributed sampler (disjoint per-rank shards of one seeded permutation per epoch,
 * padded or truncated to a multiple of the world size) and contiguous shards for evaluation. */
#include <stdlib.h>
#include <string.h>

#include "baton/data.h"
#include "baton/ddp.h"
#include "util/util.h"

int baton_dist_sampler_init(baton_dist_sampler *s, int n, int rank, int world, int shuffle, int drop_last,
                            uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (n < 1 || world < 1 || rank < 0 || rank >= world)
        return baton__fail(BATON_EINVAL, "sampler: bad n=%d rank=%d world=%d", n, rank, world);
    if (drop_last && n < world)
        return baton__fail(BATON_EINVAL, "sampler: --drop-last with %d samples on %d ranks leaves nothing", n, world);
    s->n = n;
    s->rank = rank;
    s->world = world;
    s->drop_last = drop_last;
    s->len = drop_last ? n / world : (int)(((long)n + world - 1) / world);
    baton_sampler *perm = calloc(1, sizeof *perm);
    s->idx = malloc((size_t)s->len * sizeof(int32_t));
    s->perm = perm;
    int rc = perm && s->idx ? baton_sampler_init(perm, n, 0, 1, shuffle, seed)
                            : baton__fail(BATON_ENOMEM, "sampler: out of memory");
    if (rc < 0) {
        baton_dist_sampler_free(s);
        return rc;
    }
    baton_dist_sampler_set_epoch(s, 0);
    return BATON_OK;
}

void baton_dist_sampler_set_epoch(baton_dist_sampler *s, long epoch) {
    baton_sampler *p = s->perm;
    baton_sampler_set_epoch(p, epoch);   /* p->idx is the whole permutation (world 1) */
    for (int k = 0; k < s->len; k++) s->idx[k] = p->idx[((long)k * s->world + s->rank) % s->n];
}

void baton_dist_sampler_free(baton_dist_sampler *s) {
    if (!s) return;
    if (s->perm) baton_sampler_free(s->perm);
    free(s->perm);
    free(s->idx);
    s->perm = NULL;
    s->idx = NULL;
}

void baton_shard_range(long n, int rank, int world, long *lo, long *hi) {
    *lo = (long)((__int128)n * rank / world);
    *hi = (long)((__int128)n * (rank + 1) / world);
}
