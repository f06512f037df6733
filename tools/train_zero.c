/* train_zero.c: what `baton train` reports about memory per rank (parameters, gradients, optimizer state and
 * peak RSS), which is what ZeRO (--zero 1|2, src/ddp/zero.c) changes. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "train.h"
#include "train_summary.h"
#include "util/util.h"

uint64_t train_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;   /* Linux reports KiB */
}

double *train_gather_peak_rss(baton_comm *comm, int rank, long world) {
    double *v = calloc((size_t)world, sizeof(double));
    if (!v) {
        baton__fail(BATON_ENOMEM, "out of memory for %ld ranks' peak RSS", world);
        return NULL;
    }
    v[rank] = (double)train_peak_rss_bytes();
    /* a sum of one-hot rows: a small all-reduce through the slots every rank already touched (the staged
     * all-gather would add staging pages to the very resident sets being reported) */
    if (comm && baton_allreduce(comm, v, v, (size_t)world, BATON_F64, BATON_SUM) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

void train_json_memory(cJSON *j, const baton_ddp *ddp, const baton_optim *opt, int zero, const double *rss_ranks,
                       long world) {
    baton_ddp_memory m;
    baton_ddp_get_memory(ddp, opt, &m);
    cJSON_AddNumberToObject(j, "zero", zero);
    cJSON_AddNumberToObject(j, "param_bytes", (double)m.param_bytes);
    cJSON_AddNumberToObject(j, "grad_bytes", (double)m.grad_bytes);
    cJSON_AddNumberToObject(j, "grad_reduced_bytes", (double)m.grad_reduced_bytes);
    cJSON_AddNumberToObject(j, "grad_staging_bytes", (double)m.grad_staging_bytes);
    cJSON_AddNumberToObject(j, "optim_bytes", (double)m.optim_bytes);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)train_peak_rss_bytes());
    if (rss_ranks) cJSON_AddItemToObject(j, "peak_rss_bytes_per_rank", cJSON_CreateDoubleArray(rss_ranks, (int)world));
}

void train_memory_summary(train_summary *sum, const baton_ddp *ddp, const baton_optim *opt, int zero) {
    baton_ddp_memory m;
    baton_ddp_get_memory(ddp, opt, &m);
    const double mib = 1.0 / 1048576.0;
    train_summary_add(sum, "memory", "per rank (ZeRO-%d): parameters %.1f MiB, gradients %.1f MiB (reduced, kept: %.1f; "
                      "staging: %.1f), optimizer %.1f MiB; peak RSS %.1f MiB (rank 0)", zero, (double)m.param_bytes * mib,
                      (double)m.grad_bytes * mib, (double)m.grad_reduced_bytes * mib, (double)m.grad_staging_bytes * mib,
                      (double)m.optim_bytes * mib, (double)train_peak_rss_bytes() * mib);
}

int train_resume_geometry(int talk, baton_ckpt_state *pos, long world, long per_step, long steps_per_epoch,
                          int lr_linear) {
    long old_per_step = pos->epoch_step ? pos->sample_offset / pos->epoch_step : per_step;
    if (pos->world == world && old_per_step == per_step) return 0;
    /* The epoch's permutation is the same for every world size; the global batches of this run start where
     * the checkpoint's run stopped, rounded down to a whole global batch of this run (at most one batch
     * less than G samples are seen twice). */
    long consumed = pos->sample_offset * pos->world, g = per_step * world;
    long es = consumed / g;
    if (es >= steps_per_epoch) {
        fprintf(stderr, "baton train: --resume: %ld samples of epoch %ld were consumed, more than this run's %ld steps "
                "of %ld per epoch\n", consumed, pos->epoch + 1, steps_per_epoch, g);
        return 2;
    }
    if (talk)
        fprintf(stderr, "baton train: note: the checkpoint was written by %d rank(s) x %ld samples per step, this run has "
                "%ld x %ld: continuing epoch %ld at sample %ld of it (was %ld)%s\n", pos->world, old_per_step, world,
                per_step, pos->epoch + 1, es * g, consumed,
                lr_linear && pos->world != world ? ", learning rate rescaled for --lr-scaling linear" : "");
    pos->epoch_step = es;
    pos->sample_offset = es * per_step;
    if (lr_linear && pos->world != world) {   /* the schedule's lr was lr x old world */
        float k = (float)world / (float)pos->world;
        pos->sched.lr *= k;
        pos->sched.min_lr *= k;
    }
    return 0;
}
