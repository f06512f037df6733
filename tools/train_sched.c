/* train_sched.c: which learning-rate schedule a resumed `baton train` follows (docs/checkpoints.md,
 * "Training longer"). The checkpoint's schedule wins over the command line's, except for its length:
 *   - the command line asks for more steps than the checkpoint's schedule had: the schedule is extended, i.e.
 *     the checkpoint's schedule (kind, peak lr, warmup, min lr, step decay) with the new total, evaluated at
 *     the resumed step as if the run had been started with the new total. A step or constant schedule goes
 *     on unchanged; a cosine one is stretched, so its lr rises from where it was (say, 0 at its end) to the
 *     stretched curve's value at that step, and decays to min lr at the new end. A note says so, with both lrs.
 *   - fewer steps than the checkpoint already completed: refused (exit 2), saying what to pass.
 * So a resumed run never trains on past its schedule's end at lr 0 without a word. */
#include <stdio.h>
#include <string.h>

#include "train.h"

int train_resume_schedule(int talk, long done, long total, const char *how, baton_lr_schedule *cmdline,
                          const baton_lr_schedule *ckpt) {
    if (done > total) {
        fprintf(stderr, "baton train: --resume: the checkpoint already completed %ld steps, more than the %ld this "
                "command line asks for (%s); pass --steps %ld or more to go on, or use a new --checkpoint directory "
                "to start over\n", done, total, how, done);
        return 2;
    }
    const baton_lr_schedule *c = ckpt;
    int same = c->kind == cmdline->kind && c->lr == cmdline->lr && c->warmup == cmdline->warmup &&
               c->min_lr == cmdline->min_lr && c->step_every == cmdline->step_every && c->gamma == cmdline->gamma;
    if (talk && !same)
        fprintf(stderr, "baton train: note: the learning-rate schedule of the checkpoint (lr %g, %ld warmup steps) "
                "replaces this command line's (lr %g, %ld warmup steps)\n", (double)c->lr, c->warmup,
                (double)cmdline->lr, cmdline->warmup);
    baton_lr_schedule s = *c;
    if (total > c->total) {
        s.total = total;
        if (talk)
            fprintf(stderr, "baton train: note: %s extends the checkpoint's schedule from %ld to %ld steps: the same "
                    "schedule as if the run had been started with %ld steps, so the lr at step %ld is %.4g (it was "
                    "%.4g) and reaches its end at step %ld (docs/checkpoints.md)\n", how, c->total, total, total, done,
                    (double)baton_lr_at(&s, done), (double)baton_lr_at(c, done), total);
    } else if (total < c->total && talk) {
        fprintf(stderr, "baton train: note: stopping at step %ld of the checkpoint's %ld-step schedule (%s)\n", total,
                c->total, how);
    }
    *cmdline = s;
    return 0;
}
