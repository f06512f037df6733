/* train_summary.h: the lines `baton train` ends with (rank 0, on stderr): wall time, throughput, final and
 * best test accuracy, and where the parameters, checkpoints and trace went. One function prints them all;
 * a part of the trainer with something to add (a diagnosis, a metric) fills a field here and a line in
 * train_summary_print, or, for a one-off, calls train_summary_add.
 *
 *   train_summary s = {.what = "mlp on fashion-mnist", .world = 2, ...};
 *   train_summary_eval(&s, epoch, acc, loss);            // after every evaluation
 *   train_summary_add(&s, "diagnosis", "loss still falling; train longer");
 *   train_summary_print(&s, stderr);
 *
 * Example output:
 *   baton train: done in 41.2 s: mlp on fashion-mnist, 2345 steps (5 epochs) on 2 ranks x 1 thread/rank
 *     training       39.8 s, 15060 samples/s (7530 per rank), 17 ms/step
 *     test accuracy  88.12% at the end, best 88.40% (epoch 4)
 *     test loss      0.3321 at the end
 *     parameters     model.safetensors
 *     checkpoints    ckpt/step-2345 (5 written, the newest 2 kept)
 *     trace          trace.json */
#ifndef BATON_TOOLS_TRAIN_SUMMARY_H
#define BATON_TOOLS_TRAIN_SUMMARY_H

#include <stdio.h>

enum { TRAIN_SUMMARY_EXTRA = 8 };

typedef struct {
    const char *what;          /* "mlp on fashion-mnist" */
    double wall_s;             /* seconds since the command started */
    double train_s;            /* seconds in training steps (the slowest rank's) */
    long steps;                /* steps this run made (a resumed run: since the resume) */
    long resumed_from;         /* step the run resumed from (0: from scratch) */
    long epochs;               /* epochs this run touched */
    long world, threads;       /* ranks, compute threads per rank */
    double samples;            /* samples trained on by all ranks in this run */
    int evaluated;             /* evaluations recorded by train_summary_eval */
    double acc, loss;          /* the last evaluation's test accuracy (0..1) and loss */
    double best_acc;           /* the best evaluation's accuracy, and at which epoch (1-based) */
    long best_epoch;
    const char *save;          /* --save path, or NULL */
    const char *trace;         /* --trace path, or NULL */
    const char *checkpoint;    /* --checkpoint DIR, or NULL */
    long checkpoints;          /* checkpoints written by this run */
    long last_checkpoint;      /* the step of the newest one */
    int n_extra;
    char extra[TRAIN_SUMMARY_EXTRA][2][200];   /* label, text */
} train_summary;

/* Records one evaluation at the end of (1-based) epoch. */
void train_summary_eval(train_summary *s, long epoch, double acc, double loss);
/* Adds a line "label  text" after the standard ones (at most TRAIN_SUMMARY_EXTRA; more are dropped). */
void train_summary_add(train_summary *s, const char *label, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void train_summary_print(const train_summary *s, FILE *f);

#endif
