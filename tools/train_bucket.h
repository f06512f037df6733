/* train_bucket.h: --bucket-mb auto for `baton train` (tools/train_bucket.c).
 *
 *   train_bucket_auto ba;
 *   train_bucket_auto_start(&ba, &ddp, comm, params, tape, opt, &cfg, total_steps);   // rebuilds ddp with the first cap
 *   after each step: train_bucket_auto_step(&ba, exposed_ms);   // may rebuild ddp (between steps)
 *   ba.note: what it tried and what it kept, for the summary and the report */
#ifndef BATON_TOOLS_TRAIN_BUCKET_H
#define BATON_TOOLS_TRAIN_BUCKET_H

#include "baton/ddp.h"
#include "train_metrics.h"

#define TB_MAX_CAPS 8
#define TB_STEPS_PER_CAP 6

typedef struct {
    baton_ddp **ddp;             /* the trainer's engine, rebuilt in place */
    baton_comm *comm;
    baton_params *params;
    baton_tape *tape;
    baton_optim *opt;            /* re-attached to each new engine (without ZeRO: left whole) */
    baton_ddp_config *cfg;
    double caps[TB_MAX_CAPS], med[TB_MAX_CAPS], chosen;
    double samples[TB_MAX_CAPS][TB_STEPS_PER_CAP];
    int n, idx, k, steps_per, active;
    char note[600];
} train_bucket_auto;

/* Negative status (baton_last_error set) if rebuilding the engine failed. */
int train_bucket_auto_start(train_bucket_auto *a, baton_ddp **ddp, baton_comm *comm, baton_params *params,
                            baton_tape *tape, baton_optim *opt, baton_ddp_config *cfg, long total_steps);
int train_bucket_auto_step(train_bucket_auto *a, double exposed_ms);

#endif
