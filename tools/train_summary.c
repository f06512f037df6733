/* train_summary.c: see train_summary.h. */
#include <stdarg.h>
#include <stdio.h>

#include "ckpt/checkpoint.h"
#include "cli.h"
#include "train_summary.h"

void train_summary_eval(train_summary *s, long epoch, double acc, double loss) {
    if (!s->evaluated || acc > s->best_acc) {
        s->best_acc = acc;
        s->best_epoch = epoch;
    }
    s->acc = acc;
    s->loss = loss;
    s->evaluated++;
}

void train_summary_add(train_summary *s, const char *label, const char *fmt, ...) {
    if (s->n_extra >= TRAIN_SUMMARY_EXTRA) return;
    snprintf(s->extra[s->n_extra][0], sizeof s->extra[0][0], "%s", label);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->extra[s->n_extra][1], sizeof s->extra[0][1], fmt, ap);
    va_end(ap);
    s->n_extra++;
}

#define LINE(f, label, ...)                  \
    do {                                     \
        fprintf(f, "  %-14s ", label);       \
        fprintf(f, __VA_ARGS__);             \
        fputc('\n', f);                      \
    } while (0)

void train_summary_print(const train_summary *s, FILE *f) {
    fprintf(f, "baton train: done in %.1f s: %s, %ld %s", s->wall_s, s->what, s->steps, cli_plural(s->steps, "step", "steps"));
    if (s->resumed_from) fprintf(f, " (resumed at step %ld)", s->resumed_from);
    else fprintf(f, " (%ld %s)", s->epochs, cli_plural(s->epochs, "epoch", "epochs"));
    fprintf(f, " on %ld %s x %ld %s\n", s->world, cli_plural(s->world, "rank", "ranks"), s->threads,
            cli_plural(s->threads, "thread/rank", "threads/rank"));
    if (s->steps > 0 && s->train_s > 0) {
        double sps = s->samples / s->train_s;
        if (s->world > 1)
            LINE(f, "training", "%.*f s, %.0f samples/s (%.0f per rank), %.3g ms/step", s->train_s < 10 ? 2 : 1,
                 s->train_s, sps, sps / (double)s->world, 1e3 * s->train_s / (double)s->steps);
        else
            LINE(f, "training", "%.*f s, %.0f samples/s, %.3g ms/step", s->train_s < 10 ? 2 : 1, s->train_s, sps,
                 1e3 * s->train_s / (double)s->steps);
    }
    if (s->evaluated > 1)
        LINE(f, "test accuracy", "%.2f%% at the end, best %.2f%% (epoch %ld)", 100.0 * s->acc, 100.0 * s->best_acc,
             s->best_epoch);
    else if (s->evaluated)
        LINE(f, "test accuracy", "%.2f%% at the end", 100.0 * s->acc);
    if (s->evaluated) LINE(f, "test loss", "%.4f at the end", s->loss);
    if (s->save) LINE(f, "parameters", "%s", s->save);
    if (s->checkpoint && s->checkpoints > BATON_CKPT_KEEP)
        LINE(f, "checkpoints", "%s/step-%ld (%ld written, the newest %d kept)", s->checkpoint, s->last_checkpoint,
             s->checkpoints, BATON_CKPT_KEEP);
    else if (s->checkpoint && s->checkpoints)
        LINE(f, "checkpoints", "%s/step-%ld (%ld written)", s->checkpoint, s->last_checkpoint, s->checkpoints);
    else if (s->checkpoint)
        LINE(f, "checkpoints", "none written by this run (%s)", s->checkpoint);
    if (s->trace) LINE(f, "trace", "%s (open in https://ui.perfetto.dev or chrome://tracing)", s->trace);
    for (int i = 0; i < s->n_extra; i++) LINE(f, s->extra[i][0], "%s", s->extra[i][1]);
}
