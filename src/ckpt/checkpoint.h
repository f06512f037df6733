/* checkpoint.h: crash-safe training checkpoints (docs/checkpoints.md has the format and the argument).
 *
 * A checkpoint directory DIR holds one sub-directory per saved step:
 *   DIR/step-<N>/model.safetensors   the parameters (F32, by name, the layout of baton train --save)
 *   DIR/step-<N>/optim.safetensors   optimizer state slabs per parameter (<name>.momentum_buffer for sgd;
 *                                    <name>.exp_avg and <name>.exp_avg_sq for adamw)
 *   DIR/step-<N>/state.json          step, sampler epoch and offset, lr schedule, optimizer step count,
 *                                    loss-scaler state, the run's config fingerprint, per-rank RNG states
 *   DIR/step-<N>/COMMIT              written last: the size and BLAKE2b-256 of each of the three files
 * Every file is written as FILE.tmp, fsynced, renamed into place, and the directory fsynced; COMMIT goes
 * last, so a step directory without a COMMIT (or whose files do not match it) is a torn write that the
 * loader skips. After a commit, only the newest two complete checkpoints are kept.
 *
 *   baton_ckpt_state st = {.step = 20, .epoch = 1, .epoch_step = 4, ..., .world = 1, .ranks = &me};
 *   if (baton_ckpt_save("ckpt", params, opt, &st) < 0) ... baton_last_error() ...
 *   baton_ckpt_state got;
 *   int rc = baton_ckpt_load("ckpt", params, opt, &got);   // BATON_ENOTFOUND: no complete checkpoint
 *   ... got.step, got.ranks[rank].rng ...
 *   baton_ckpt_state_free(&got);
 *
 * Loading trusts nothing: files are size-limited, checksummed against COMMIT, parsed with the hardened
 * safetensors reader and cJSON, and every field is type- and range-checked; damage gives a one-line error
 * naming the file. */
#ifndef BATON_CKPT_CHECKPOINT_H
#define BATON_CKPT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "baton/ddp.h"
#include "baton/nn.h"

#define BATON_CKPT_KEEP 2                        /* complete checkpoints kept after each commit */
#define BATON_CKPT_MAX_STATE (16u << 20)         /* bytes: state.json limit */
#define BATON_CKPT_MAX_COMMIT (64u << 10)        /* bytes: COMMIT limit */
#define BATON_CKPT_MAX_WORLD (1 << 20)           /* ranks in one state.json */
#define BATON_CKPT_CONFIG_LEN 1024               /* bytes of the config fingerprint, NUL included */

typedef struct {
    uint64_t rng[4];             /* the rank's dropout RNG (xoshiro256** state of its training tape) */
} baton_ckpt_rank;

typedef struct {
    long step;                   /* optimizer steps completed = index of the next step */
    long epoch;                  /* sampler epoch of the next step (the shuffle is seeded by seed, epoch) */
    long epoch_step;             /* steps of that epoch already taken */
    long sample_offset;          /* the same as a position in the rank's shard: epoch_step x batch x accum */
    baton_lr_schedule sched;     /* the schedule in use (the position is `step`) */
    long optim_steps;            /* the optimizer's step counter (AdamW bias correction) */
    int loss_scale;              /* BATON_LOSS_SCALE_* of the run that wrote it */
    baton_ddp_scaler scaler;     /* scale, clean steps, skipped steps */
    char config[BATON_CKPT_CONFIG_LEN];   /* "key=value ..." settings a resume must share */
    int world;                   /* ranks */
    baton_ckpt_rank *ranks;      /* [world]: borrowed by save; malloc'ed by load (baton_ckpt_state_free) */
} baton_ckpt_state;

/* Writes DIR/step-<st->step> (creating DIR if needed) and commits it, then deletes all but the newest
 * BATON_CKPT_KEEP complete checkpoints up to this step and any torn ones older than it. A step directory
 * that already exists (a torn or replaced checkpoint) is removed first. */
int baton_ckpt_save(const char *dir, baton_params *p, baton_optim *o, const baton_ckpt_state *st);

/* Finds the newest complete checkpoint in DIR whose files match its COMMIT, copies parameters and optimizer
 * state into p and o (sets the optimizer's step counter) and fills *st. Torn checkpoints (no COMMIT) are
 * skipped silently, damaged ones (files that do not match COMMIT) with a warning. Returns BATON_ENOTFOUND
 * when DIR holds no complete checkpoint and no damaged one; BATON_EFORMAT when a checkpoint was committed
 * but none verifies, or when the newest verified one has bad content; BATON_EMISMATCH when it does not fit
 * the model / optimizer. p and o are untouched on failure. *st is zeroed first. */
int baton_ckpt_load(const char *dir, baton_params *p, baton_optim *o, baton_ckpt_state *st);
/* The same, first checking (before the model and optimizer files) that the checkpoint was written with this
 * config fingerprint (NULL: any) and world size (0: any): BATON_EMISMATCH naming the first difference. */
int baton_ckpt_load_for(const char *dir, baton_params *p, baton_optim *o, const char *config, int world,
                        baton_ckpt_state *st);
void baton_ckpt_state_free(baton_ckpt_state *st);   /* frees ranks; safe on a zeroed state */

/* Steps of DIR's checkpoints: *committed gets how many step directories have a COMMIT, *newest the step of
 * the newest complete one that verifies (-1 if none). A missing DIR counts as empty. */
int baton_ckpt_scan(const char *dir, int *committed, long *newest);

/* `baton ckpt consolidate`: writes the parameters of DIR's newest complete checkpoint (every file, optimizer
 * shards included, verified against its COMMIT) to `out` as one ordinary safetensors file (the committed
 * model.safetensors, byte for byte; ZeRO runs write it whole too, every rank holding all parameters after
 * the step's all-gather). *step gets the step. BATON_ENOTFOUND / BATON_EFORMAT as baton_ckpt_load. */
int baton_ckpt_consolidate(const char *dir, const char *out, long *step);

/* ---- pieces, exposed for tests --------------------------------------------------------------------- */
/* Parses a state.json image (len bytes; `what` names it in errors) into *st (ranks malloc'ed). */
int baton__ckpt_parse_state(const char *json, size_t len, const char *what, baton_ckpt_state *st);
/* The state as a state.json image (malloc'ed, cJSON_Print; caller frees), or NULL when out of memory. */
char *baton__ckpt_state_json(const baton_ckpt_state *st);
/* (Re)writes STEPDIR/COMMIT from the three files as they are now (tests use it to make a committed
 * checkpoint with hostile content). */
int baton__ckpt_commit(const char *stepdir, long step);

/* The pieces of baton_ckpt_save when every rank writes its optimizer shard (ZeRO, train_ckpt.c): rank 0
 * prepares DIR/step-N (stepdir gets its path); each rank writes stepdir/optim-<shard>.safetensors (the
 * optimizer's range as flat F32 tensors per slot, metadata offset and slab length) and gets its size and
 * BLAKE2b-256 hex; rank 0 writes model.safetensors and state.json and the COMMIT listing every shard. */
int baton__ckpt_begin(const char *dir, long step, char *stepdir, size_t cap);
int baton__ckpt_write_shard(const char *stepdir, int shard, baton_params *p, baton_optim *o, size_t *len,
                            char hex[65]);
int baton__ckpt_finish(const char *dir, const char *stepdir, baton_params *p, const baton_ckpt_state *st, int nshards,
                       const size_t *slen, char (*shex)[65]);

/* ---- training glue (train_ckpt.c): the collective calls baton train makes -------------------------- */
typedef struct {
    const char *dir;             /* --checkpoint DIR */
    baton_comm *comm;            /* NULL for one process */
    int rank, world;
    baton_params *params;
    baton_optim *opt;
    baton_tape *tape;            /* training tape: its RNG is the per-rank state */
    baton_ddp *ddp;              /* loss scaler */
    int loss_scale;              /* BATON_LOSS_SCALE_* of this run */
    const char *config;          /* fingerprint of this run */
} baton_ckpt_run;

/* Collective. Every rank contributes its RNG state (all-gather); rank 0 writes the checkpoint; every rank
 * returns rank 0's result (broadcast), so a failed write fails everywhere with the same message. st holds
 * the shared fields (step, epoch, epoch_step, sample_offset, sched); the rest is filled in here. */
int baton_ckpt_run_save(const baton_ckpt_run *r, baton_ckpt_state *st);
/* Collective. Every rank loads the newest complete checkpoint (a shared directory) and restores params,
 * optimizer, its RNG and the loss scaler; *st gets the positions (st->ranks freed before returning).
 * Returns BATON_ENOTFOUND when there is none (nothing changed), BATON_EMISMATCH when the checkpoint's
 * config fingerprint or world size differ from this run's (naming the first difference) or when the
 * ranks found different checkpoints. */
int baton_ckpt_run_resume(const baton_ckpt_run *r, baton_ckpt_state *st);

#endif
