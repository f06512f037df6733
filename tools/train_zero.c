/* train_zero.c: what `baton train` reports about memory per rank (parameters, gradients, optimizer state and
 * peak RSS), which is what ZeRO (--zero 1|2, src/ddp/zero.c) changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "train.h"
#include "train_summary.h"
#include "util/util.h"

/* Lines of a /proc/self file in kB: out[i] = key[i]'s value in bytes, 0 when the kernel does not report it. */
static void proc_kb(const char *path, const char *const *key, int n, double *out) {
    for (int i = 0; i < n; i++) out[i] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        for (int i = 0; i < n; i++) {
            size_t k = strlen(key[i]);
            unsigned long long kb;
            if (strncmp(line, key[i], k) == 0 && sscanf(line + k, "%llu", &kb) == 1) out[i] = (double)kb * 1024.0;
        }
    fclose(f);
}

/* VmHWM, not getrusage's ru_maxrss: the kernel updates the high-water mark that getrusage reads only when
 * pages are unmapped, so while the process lives it can be below the resident set of this very moment;
 * VmHWM is the larger of that mark and the current resident set. */
uint64_t train_peak_rss_bytes(void) {
    static const char *const key[1] = {"VmHWM:"};
    double hwm;
    proc_kb("/proc/self/status", key, 1, &hwm);
    if (hwm > 0) return (uint64_t)hwm;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;   /* Linux reports KiB */
}

double *train_gather_rss(baton_comm *comm, int rank, long world) {
    double *v = calloc((size_t)world * TRAIN_RSS_FIELDS, sizeof(double));
    if (!v) {
        baton__fail(BATON_ENOMEM, "out of memory for %ld ranks' resident sets", world);
        return NULL;
    }
    double *mine = v + (size_t)rank * TRAIN_RSS_FIELDS;
    /* one read of the status file: the peak and its parts come from the same moment */
    static const char *const key[TRAIN_RSS_FIELDS - 1] = {"VmHWM:", "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:"};
    proc_kb("/proc/self/status", key, TRAIN_RSS_FIELDS - 1, mine);
    /* and the proportional set: shared pages divided among the processes that map them (ZeRO's node slab) */
    static const char *const pss[1] = {"Pss:"};
    proc_kb("/proc/self/smaps_rollup", pss, 1, mine + TRAIN_RSS_FIELDS - 1);
    if (mine[0] <= 0) mine[0] = (double)train_peak_rss_bytes();
    /* a sum of one-hot rows: a small all-reduce through the slots every rank already touched (the staged
     * all-gather would add staging pages to the very resident sets being reported) */
    if (comm && baton_allreduce(comm, v, v, (size_t)world * TRAIN_RSS_FIELDS, BATON_F64, BATON_SUM) < 0) {
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
    cJSON_AddBoolToObject(j, "params_shared", m.params_shared);
    cJSON_AddNumberToObject(j, "grad_bytes", (double)m.grad_bytes);
    cJSON_AddNumberToObject(j, "grad_reduced_bytes", (double)m.grad_reduced_bytes);
    cJSON_AddNumberToObject(j, "grad_staging_bytes", (double)m.grad_staging_bytes);
    cJSON_AddNumberToObject(j, "optim_bytes", (double)m.optim_bytes);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)train_peak_rss_bytes());
    static const char *const name[TRAIN_RSS_FIELDS] = {"peak_rss_bytes_per_rank", "rss_bytes_per_rank",
                                                       "rss_anon_bytes_per_rank", "rss_file_bytes_per_rank",
                                                       "rss_shmem_bytes_per_rank", "pss_bytes_per_rank"};
    for (int f = 0; rss_ranks && f < TRAIN_RSS_FIELDS; f++) {
        cJSON *a = cJSON_AddArrayToObject(j, name[f]);
        for (long r = 0; a && r < world; r++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(rss_ranks[(size_t)r * TRAIN_RSS_FIELDS + (size_t)f]));
    }
}

void train_memory_summary(train_summary *sum, const baton_ddp *ddp, const baton_optim *opt, int zero) {
    baton_ddp_memory m;
    baton_ddp_get_memory(ddp, opt, &m);
    const double mib = 1.0 / 1048576.0;
    train_summary_add(sum, "memory", "per rank (ZeRO-%d): parameters %.1f MiB%s, gradients %.1f MiB (reduced, kept: %.1f; "
                      "staging: %.1f), optimizer %.1f MiB; peak RSS %.1f MiB (rank 0)", zero, (double)m.param_bytes * mib,
                      m.params_shared ? " (one copy the node's ranks share)" : "",
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
