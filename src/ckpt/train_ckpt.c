/* train_ckpt.c: the collective checkpoint calls of a data-parallel training loop (see checkpoint.h).
 *
 * Design: the parameters, optimizer state and positions are identical on every rank after a step (DDP
 * keeps the replicas equal), so rank 0 alone writes them; the per-rank part (each rank's dropout RNG)
 * reaches rank 0 through one all-gather of 4 x u64 per rank, and rank 0's result is broadcast so every
 * rank succeeds or fails together. On resume every rank reads the same (shared) directory and the ranks
 * check with one all-gather that they found the same step.
 *
 * ZeRO: each rank holds only its shard of the optimizer state, so each rank writes it (optim-<r>.safetensors)
 * into the step directory rank 0 prepared; the sizes and hashes reach rank 0 by one all-gather, and rank 0
 * writes the rest and the COMMIT that lists every shard. A resume takes from the shards the range its own
 * shard needs, so it works on any number of ranks, with or without ZeRO. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "util/util.h"

typedef struct {
    int32_t rc;
    char msg[508];
} save_result;   /* 512 bytes = 128 x i32 */

/* Rank 0's result (rc, with its message) to every rank: all succeed or fail together. */
static int hear_rank0(const baton_ckpt_run *r, int rc0) {
    save_result res = {0};
    if (r->rank == 0) {
        res.rc = rc0;
        if (rc0 < 0) snprintf(res.msg, sizeof res.msg, "%s", baton_last_error());
    }
    int rc;
    if (r->world > 1 && (rc = baton_broadcast(r->comm, &res, sizeof res / 4, BATON_I32, 0)) < 0)
        return baton__fail_ctx(rc, "checkpoint: hearing from rank 0: ");
    if (res.rc < 0) {
        res.msg[sizeof res.msg - 1] = '\0';
        return baton__fail(res.rc, "%s", res.msg);
    }
    return BATON_OK;
}

typedef struct {
    int64_t rc, len;
    char hex[112];
} shard_record;   /* 128 bytes = 16 x i64 */

/* ZeRO: rank 0 prepares the step directory, every rank writes its optimizer shard, rank 0 commits them all. */
static int save_sharded(const baton_ckpt_run *r, baton_ckpt_state *st) {
    char stepdir[4096];
    int rc0 = BATON_OK;
    if (r->rank == 0) rc0 = baton__ckpt_begin(r->dir, st->step, stepdir, sizeof stepdir);
    int rc = hear_rank0(r, rc0);
    if (rc < 0) return rc;
    if (snprintf(stepdir, sizeof stepdir, "%s/step-%ld", r->dir, st->step) >= (int)sizeof stepdir)
        return baton__fail(BATON_EINVAL, "%s: path too long", r->dir);
    shard_record mine = {0}, *all = calloc((size_t)r->world, sizeof *all);
    size_t *lens = calloc((size_t)r->world, sizeof *lens);
    char(*hex)[65] = calloc((size_t)r->world, 65);
    if (!all || !lens || !hex) {
        free(all);
        free(lens);
        free(hex);
        return baton__fail(BATON_ENOMEM, "checkpoint: out of memory");
    }
    size_t len = 0;
    mine.rc = baton__ckpt_write_shard(stepdir, r->rank, r->params, r->opt, &len, mine.hex);
    mine.len = (int64_t)len;
    if (mine.rc < 0) snprintf(mine.hex, sizeof mine.hex, "%.100s", baton_last_error());
    rc = baton_allgather(r->comm, &mine, all, sizeof mine / 8, BATON_I64);
    if (rc < 0) {
        rc = baton__fail_ctx(rc, "checkpoint: gathering the optimizer shards: ");
    } else {
        if (r->rank == 0) {
            rc0 = BATON_OK;
            for (int q = 0; q < r->world && rc0 >= 0; q++) {
                all[q].hex[sizeof all[q].hex - 1] = '\0';
                if (all[q].rc < 0) rc0 = baton__fail((int)all[q].rc, "rank %d writing its optimizer shard: %s", q, all[q].hex);
                lens[q] = (size_t)all[q].len;
                memcpy(hex[q], all[q].hex, 65);
                hex[q][64] = '\0';
            }
            if (rc0 >= 0) rc0 = baton__ckpt_finish(r->dir, stepdir, r->params, st, r->world, lens, hex);
        }
        rc = hear_rank0(r, rc0);
    }
    free(all);
    free(lens);
    free(hex);
    return rc;
}

int baton_ckpt_run_save(const baton_ckpt_run *r, baton_ckpt_state *st) {
    baton_ckpt_rank mine, *all = calloc((size_t)r->world, sizeof *all);
    if (!all) return baton__fail(BATON_ENOMEM, "checkpoint: out of memory");
    memcpy(mine.rng, baton_tape_rng(r->tape)->s, sizeof mine.rng);
    int rc = BATON_OK;
    if (r->world > 1) rc = baton_allgather(r->comm, mine.rng, all, 4, BATON_I64);
    else all[0] = mine;
    if (rc < 0) {
        free(all);
        return baton__fail_ctx(rc, "checkpoint: gathering the ranks' RNG states: ");
    }
    st->optim_steps = baton_optim_steps(r->opt);
    st->loss_scale = r->loss_scale;
    baton_ddp_get_scaler(r->ddp, &st->scaler);
    snprintf(st->config, sizeof st->config, "%s", r->config);
    st->world = r->world;
    st->ranks = all;
    size_t lo, hi;
    baton_optim_shard(r->opt, &lo, &hi);
    if (r->world > 1 && (lo != 0 || hi != baton_params_numel(r->params)))
        rc = save_sharded(r, st);
    else
        rc = hear_rank0(r, r->rank == 0 ? baton_ckpt_save(r->dir, r->params, r->opt, st) : BATON_OK);
    st->ranks = NULL;
    free(all);
    return rc;
}

int baton_ckpt_run_resume(const baton_ckpt_run *r, baton_ckpt_state *st) {
    /* any world size: the caller converts the position (see docs/checkpoints.md) */
    int rc = baton_ckpt_load_for(r->dir, r->params, r->opt, r->config, 0, st);
    if (r->world > 1) {   /* every rank must have found the same checkpoint (or none), or all fail together */
        char mine_err[512];
        snprintf(mine_err, sizeof mine_err, "%s", baton_last_error());
        int64_t mine = rc >= 0 ? st->step : rc == BATON_ENOTFOUND ? -1 : -2, *all = calloc((size_t)r->world, sizeof *all);
        int crc = all ? baton_allgather(r->comm, &mine, all, 1, BATON_I64) : baton__fail(BATON_ENOMEM, "out of memory");
        int bad = -1;
        for (int i = 0; crc >= 0 && i < r->world; i++)
            if ((all[i] != all[0] || all[i] == -2) && bad < 0) bad = i;
        if (crc >= 0 && bad >= 0) {
            if (rc < 0 && rc != BATON_ENOTFOUND) crc = baton__fail(rc, "%s", mine_err);
            else if (all[bad] == -2) crc = baton__fail(BATON_EIO, "rank %d could not load the checkpoint (see its message)", bad);
            else crc = baton__fail(BATON_EMISMATCH, "%s: rank 0 found the checkpoint of step %lld but rank %d found %lld "
                                   "(-1 = none): the ranks must share the checkpoint directory", r->dir,
                                   (long long)all[0], bad, (long long)all[bad]);
        }
        free(all);
        if (crc < 0) {
            baton_ckpt_state_free(st);
            return crc;
        }
    }
    if (rc < 0) return rc;   /* BATON_ENOTFOUND, or (one process) the load's error */
    /* a rank the writing run did not have keeps its fresh (seeded) RNG */
    if (r->rank < st->world) memcpy(baton_tape_rng(r->tape)->s, st->ranks[r->rank].rng, sizeof st->ranks[r->rank].rng);
    if (st->loss_scale == r->loss_scale) {
        rc = baton_ddp_set_scaler(r->ddp, &st->scaler);
    } else if (r->rank == 0) {
        static const char *const names[] = {"none", "static", "dynamic"};
        fprintf(stderr, "baton train: note: the checkpoint used --loss-scale %s, this run %s: the scaler starts fresh\n",
                names[st->loss_scale], names[r->loss_scale]);
    }
    baton_ckpt_state_free(st);
    return rc;
}
