/* train.h: the pieces of `baton train`'s loop that live in tools/train_parts.c (batches, forward,
 * sharded evaluation, data loading, progress lines), so that tools/train.c reads as the loop itself.
 *
 *   batch_buf bb; train_batch_alloc(&bb, B, ds.dim);
 *   train_next_batch(&ds, &sampler, pos, B, &bb);
 *   baton_tensor *loss = train_forward(model, tape, &ds, &bb, B, &correct);
 *   train_batch_free(&bb); */
#ifndef BATON_TOOLS_TRAIN_H
#define BATON_TOOLS_TRAIN_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "baton/comm.h"
#include "baton/data.h"
#include "baton/ddp.h"
#include "baton/nn.h"
#include "ckpt/checkpoint.h"
#include "train_summary.h"

typedef struct {
    float *x;            /* (B, dim) */
    int32_t *y;          /* (B) */
} batch_buf;

typedef struct {
    int tty;             /* stderr is a terminal: redraw one bar line */
    long log_every;      /* otherwise: one line every log_every steps */
    int by_steps;        /* --steps given: the bar fills against the run's steps, not the epoch's */
    long total;          /* the run's last step (the schedule's length) */
    long first_step;     /* the step this process started at (a resumed run: not 0) */
    uint64_t start_ns;   /* when this process started training (CLOCK_MONOTONIC) */
    uint64_t last_draw_ns;
} progress;

/* Where the run stands after one optimizer step, for the progress line. */
typedef struct {
    long epoch, epochs;                   /* 1-based epoch, of epochs */
    long step_in_epoch, steps_per_epoch;  /* steps done in this epoch (1-based), of steps_per_epoch */
    long step;                            /* steps done in the run (1-based), of progress.total */
    double loss, acc;                     /* the epoch's mean training loss and accuracy (0..1) so far */
    double lr;                            /* the learning rate this step used */
    double sps;                           /* samples per second, all ranks, over this epoch */
} progress_at;

int train_batch_alloc(batch_buf *b, int n, int dim);   /* -1 on out of memory */
void train_batch_free(batch_buf *b);
/* Copies the B samples at position pos of this rank's shard into buf. */
void train_next_batch(const baton_dataset *ds, const baton_dist_sampler *s, long pos, int b, batch_buf *buf);
/* Forward of one batch: the mean loss tensor; *correct gets the batch's correct predictions. */
baton_tensor *train_forward(baton_model *m, baton_tape *t, const baton_dataset *ds, batch_buf *buf, int b,
                            int *correct);
/* This rank's shard of the test set, counts summed over the ranks (comm may be NULL). */
int train_evaluate_all(baton_comm *comm, baton_model *m, baton_tape *t, const baton_dataset *ds, int eb,
                       batch_buf *buf, double *acc, double *loss);
/* --data fashion-mnist|synthetic into train and test. */
int train_load_data(const char *data, const char *data_dir, long train_samples, uint64_t seed, baton_dataset *train,
                    baton_dataset *test);
/* A terminal gets one redrawn line (at most 10 a second, or when force): a bar, loss, accuracy, lr, samples/s,
 * elapsed time and ETA; otherwise one line every log_every steps of the epoch (or when force). */
void train_progress_step(progress *p, const progress_at *at, int force);
/* One output path of baton train: a file (--save, --trace) or a directory (--checkpoint). */
typedef struct {
    const char *flag;    /* "--save" */
    const char *path;    /* NULL: not asked for */
    int is_dir;          /* 1: a directory that exists or can be made in an existing one */
} train_output;
/* Checks each path before the first step: the directory exists and files can be created in it (a probe
 * file is made and removed), a file path is not a directory, a directory path is not a file. Prints one
 * line naming the flag and returns 2 (the exit code) on the first bad one, else 0. (tools/train_out.c) */
int train_check_outputs(const train_output *outs, int n);
/* --save: the parameters (F32, under their names) with metadata that describes the model completely: model,
 * architecture, hidden, channels (cnn), input_shape (C,H,W), classes, data, and for image data input_mean,
 * input_std and input_normalization (docs/pytorch.md rebuilds the model from these). (tools/train_out.c) */
int train_save_model(const char *path, const baton_params *params, const baton_model_config *mc, const char *data);
/* The schedule a resumed run follows: the checkpoint's (ckpt), extended to `total` steps when the command
 * line asks for more; refuses (2) when `done` > total. `how` names the flag ("--steps 40"). On success
 * *cmdline is replaced by the schedule to use. (tools/train_sched.c) */
int train_resume_schedule(int talk, long done, long total, const char *how, baton_lr_schedule *cmdline,
                          const baton_lr_schedule *ckpt);
int train_default_threads(int local_size);
/* tools/train_zero.c: memory per rank (parameters, gradients, optimizer state, peak RSS) in the final JSON and
 * the summary. */
uint64_t train_peak_rss_bytes(void);
/* A resume on another world size or per-rank batch: converts the checkpoint's position (samples of the epoch
 * consumed) to this run's steps and, under --lr-scaling linear, rescales the schedule to the new world size.
 * Prints a note (talk); returns 0, or 2 with a message when the position does not fit. */
int train_resume_geometry(int talk, baton_ckpt_state *pos, long world, long per_step, long steps_per_epoch,
                          int lr_linear);
/* Every rank's resident set (collective; one small all-reduce): a calloc'ed array of world rows of
 * TRAIN_RSS_FIELDS bytes each: the peak so far (VmHWM), and now: the whole, the anonymous, the file-backed
 * and the shared-memory pages (/proc/self/status), and the proportional set (Pss of /proc/self/smaps_rollup:
 * each shared page divided among the processes mapping it). NULL with baton_last_error set. The peak counts the
 * program's code and libraries (file-backed pages, which vary by a few hundred KiB from run to run with the
 * page cache); when it is reached at the end of the run (peak == now), peak - file is the data's part of it. */
enum { TRAIN_RSS_FIELDS = 6 };
double *train_gather_rss(baton_comm *comm, int rank, long world);
/* rss_ranks: train_gather_rss's array, reported as peak_rss_bytes_per_rank, rss_bytes_per_rank,
 * rss_anon_bytes_per_rank, rss_file_bytes_per_rank and rss_shmem_bytes_per_rank; may be NULL */
void train_json_memory(cJSON *j, const baton_ddp *ddp, const baton_optim *opt, int zero, const double *rss_ranks,
                       long world);
void train_memory_summary(train_summary *sum, const baton_ddp *ddp, const baton_optim *opt, int zero);
/* Sets and returns the compute threads: `asked` (--threads; 0: train_default_threads). When asked x the
 * launcher's local ranks exceed the usable cores, local rank 0 warns (the ranks would fight over cores). */
int train_threads(long asked, const baton_launch_env *le);   /* cores / local world size (the launcher's; -1 unknown), at least 1 */
/* tools/train_gpt.c: `baton train --model gpt` (its own options and loop). */
int baton_cmd_train_gpt(int argc, char **argv);

#endif
