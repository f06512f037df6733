/* train_bucket.c: --bucket-mb auto (docs/observe.md). The first steps of the run try a ladder of bucket caps,
 * a few steps each, measuring the exposed communication of every step (the time baton_ddp_finish waits after
 * backward); the ranks agree on the slowest rank's median for each cap (the job waits for the slowest), and
 * the cap with the least is kept for the rest of the run. The first bucket stays at its default (1 MiB), so
 * communication starts as early as before. Changing the cap rebuilds the DDP engine between two steps (the
 * replicas are identical then, so the rebuild's broadcast changes nothing; the loss scaler is carried over).
 * Not with ZeRO (baton train refuses the combination): re-attaching the optimizer would re-shard its state. */
#include <stdio.h>
#include <string.h>

#include "train_bucket.h"
#include "util/util.h"

static int rebuild(train_bucket_auto *a, double cap) {
    baton_ddp_scaler sc;
    baton_ddp_get_scaler(*a->ddp, &sc);
    baton_ddp_free(*a->ddp);
    *a->ddp = NULL;
    a->cfg->bucket_mb = cap;
    int rc = baton_ddp_new(a->ddp, a->comm, a->params, a->tape, a->cfg);
    if (rc < 0 || (rc = baton_ddp_attach_optim(*a->ddp, a->opt)) < 0) return rc;
    return baton_ddp_set_scaler(*a->ddp, &sc);
}

int train_bucket_auto_start(train_bucket_auto *a, baton_ddp **ddp, baton_comm *comm, baton_params *params,
                            baton_tape *tape, baton_optim *opt, baton_ddp_config *cfg, long total_steps) {
    memset(a, 0, sizeof *a);
    a->ddp = ddp;
    a->comm = comm;
    a->params = params;
    a->tape = tape;
    a->opt = opt;
    a->cfg = cfg;
    double total_mb = (double)baton_params_numel(params) * sizeof(float) / (1024.0 * 1024.0);
    static const double ladder[] = {0.25, 1, 4, 16, 64, 256};
    for (size_t i = 0; i < sizeof ladder / sizeof ladder[0] && a->n < TB_MAX_CAPS - 1; i++)
        if (ladder[i] < total_mb) a->caps[a->n++] = ladder[i];
    a->caps[a->n++] = total_mb > 0.001 ? total_mb : 0.001;   /* one bucket for the whole gradient (after the first) */
    a->steps_per = TB_STEPS_PER_CAP;
    if (!comm || baton_comm_size(comm) < 2 || total_steps < (long)a->n * a->steps_per * 2) {
        snprintf(a->note, sizeof a->note, "auto: %s; kept %g MiB", !comm || baton_comm_size(comm) < 2
                 ? "one rank, nothing to communicate" : "too few steps to try caps", cfg->bucket_mb);
        return 0;
    }
    a->active = 1;
    return rebuild(a, a->caps[0]);
}

int train_bucket_auto_step(train_bucket_auto *a, double exposed_ms) {
    if (!a->active) return 0;
    a->samples[a->idx][a->k++] = exposed_ms;
    if (a->k < a->steps_per) return 0;
    a->k = 0;
    if (++a->idx < a->n) return rebuild(a, a->caps[a->idx]);
    /* every cap tried: the slowest rank's median for each (its first step left out: a new engine warms up) */
    double med[TB_MAX_CAPS];
    for (int c = 0; c < a->n; c++) med[c] = baton__median(a->samples[c] + 1, a->steps_per - 1);
    int rc = baton_allreduce(a->comm, med, med, (size_t)a->n, BATON_F64, BATON_MAX);
    if (rc < 0) return rc;
    int best = 0;
    for (int c = 1; c < a->n; c++)
        if (med[c] < med[best]) best = c;
    a->active = 0;
    a->chosen = a->caps[best];
    size_t len = (size_t)snprintf(a->note, sizeof a->note, "auto: tried");
    for (int c = 0; c < a->n && len < sizeof a->note; c++)
        len += (size_t)snprintf(a->note + len, sizeof a->note - len, "%s %.3g MiB (%.2f ms exposed)", c ? "," : "",
                                a->caps[c], med[c]);
    if (len < sizeof a->note)
        snprintf(a->note + len, sizeof a->note - len, "; kept %.3g MiB: least exposed communication per step "
                 "(slowest rank's median of %d steps each)", a->chosen, a->steps_per - 1);
    memcpy(a->med, med, sizeof med);
    return rebuild(a, a->chosen);
}
