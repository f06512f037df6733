/* train_ckpt.c: the collective checkpoint calls of a data-parallel training loop (see checkpoint.h).
 *
 * Design: the parameters, optimizer state and positions are identical on every rank after a step (DDP
 * keeps the replicas equal), so rank 0 alone writes them; the per-rank part (each rank's dropout RNG)
 * reaches rank 0 through one all-gather of 4 x u64 per rank, and rank 0's result is broadcast so every
 * rank succeeds or fails together. On resume every rank reads the same (shared) directory and the ranks
 * check with one all-gather that they found the same step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "util/util.h"

typedef struct {
    int32_t rc;
    char msg[508];
} save_result;   /* 512 bytes = 128 x i32 */

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
    save_result res = {0};
    if (r->rank == 0) {
        res.rc = baton_ckpt_save(r->dir, r->params, r->opt, st);
        if (res.rc < 0) snprintf(res.msg, sizeof res.msg, "%s", baton_last_error());
    }
    st->ranks = NULL;
    free(all);
    if (r->world > 1 && (rc = baton_broadcast(r->comm, &res, sizeof res / 4, BATON_I32, 0)) < 0)
        return baton__fail_ctx(rc, "checkpoint: hearing from rank 0: ");
    if (res.rc < 0) {
        res.msg[sizeof res.msg - 1] = '\0';
        return baton__fail(res.rc, "%s", res.msg);
    }
    return BATON_OK;
}

int baton_ckpt_run_resume(const baton_ckpt_run *r, baton_ckpt_state *st) {
    int rc = baton_ckpt_load_for(r->dir, r->params, r->opt, r->config, r->world, st);
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
    memcpy(baton_tape_rng(r->tape)->s, st->ranks[r->rank].rng, sizeof st->ranks[r->rank].rng);
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
