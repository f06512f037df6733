/* train_metrics.h: what `baton train` measures on every step (docs/observe.md), the diagnosis it draws from
 * that (a straggler, a starved input pipeline), and the prefetching input pipeline.
 *
 *   train_metrics m;
 *   train_metrics_open(&m, o.metrics, o.checkpoint, rank);      // resolves the path (rank 0), or off
 *   per step:  double f[TM_NF] = {...}; uint64_t c[TM_NCOLL]; int nc = baton_ddp_coll_times(ddp, c, TM_NCOLL);
 *              train_metrics_step(&m, step, f, c, nc);
 *   per eval:  train_metrics_eval(&m, step, epoch, acc, loss);
 *   end:       train_metrics_finish(&m, comm, world, &info);   // gathers to rank 0, diagnoses, writes
 *   train_metrics_free(&m);
 *
 * Records stay in memory on each rank during the run (nothing is written inside the loop); at the end they
 * are all-gathered, rank 0 writes the file (JSON lines or CSV) atomically and prints the diagnosis. */
#ifndef BATON_TOOLS_TRAIN_METRICS_H
#define BATON_TOOLS_TRAIN_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "baton/comm.h"
#include "baton/data.h"

/* The per-step fields, in milliseconds unless named otherwise. compute = forward + backward + optim. */
enum {
    TM_T0,          /* step start, ms since the job's origin (rank 0's first step start, same clock) */
    TM_STEP,        /* whole step: data + forward + backward + exposed comm + optimizer */
    TM_DATA,        /* blocked waiting for the batch */
    TM_FWD,
    TM_BWD,
    TM_EXPOSED,     /* waiting for the gradient all-reduce after backward (baton_ddp_finish) */
    TM_OPT,         /* clip + optimizer step */
    TM_COMM,        /* all-reduce time, overlapped or not */
    TM_BYTES,       /* bytes this rank handed to the all-reduce */
    TM_LOSS,
    TM_LR,
    TM_EPOCH,
    TM_WAIT,        /* waited for the peers in the step's gradient all-reduces (filled in at the gather, from
                     * every rank's collective times: baton_coll_waits) */
    TM_CPU,         /* CPU time of the training thread over forward + backward: the same work on every rank,
                     * so its ratio between ranks is how fast each rank's core runs it (docs/observe.md) */
    TM_NF
};
/* The fields' names in the metrics files ("t_ms", "step_ms", ...). */
extern const char *const tm_field_names[TM_NF];
/* Collective times kept per step and rank (the buckets'; baton_ddp_coll_times folds later ones into the last). */
#define TM_NCOLL 16

typedef struct {
    long step, epoch;
    double acc, loss;
} tm_eval;

typedef struct {
    int on, csv;
    int rank;
    char path[4096];     /* rank 0: the file to write */
    char dir[4096];      /* rank 0: the directory it is in (for the `baton report` hint) */
    long first_step, n, cap;
    double *rec;         /* n x TM_NF, this rank's steps */
    double *coll;        /* n x TM_NCOLL, this rank's collective times per step (ms) */
    long *stepno;        /* n: the step of each record (consecutive unless BATON_BENCH_METRICS_AB skips some) */
    tm_eval *evals;
    long n_evals, cap_evals;
    uint64_t self_ns;    /* time spent recording (the measured overhead) */
    uint64_t origin_ns;
} train_metrics;

/* The straggler and input diagnosis of a run (rank 0, after train_metrics_finish). */
typedef struct {
    int straggler;       /* rank named as the straggler, -1 if none */
    int last;            /* the rank most often last to arrive at the all-reduces, -1 with one rank */
    double last_pct;     /* % of the steps in which it arrived last */
    double ratio;        /* (the others' work + late_ms) / the others' work: their step as it waits for it */
    double late_ms;      /* median per step of how much longer the others waited in the all-reduces than it did */
    double others_work_ms; /* the other ranks' median work per step (data + forward + backward + optimizer) */
    double cpu_ratio;    /* its CPU time for forward + backward / the others' (same work: > 1 is a slower core) */
    double others_wait_pct; /* % of the others' step spent waiting for it (exposed waits) */
    double data_pct;     /* median % of a step spent blocked on data (median over ranks) */
    int input_bound;     /* 1: the input pipeline is named */
    double compute_pct, exposed_pct;
    double step_ms;      /* median step time over all ranks and steps */
    char text[512];      /* the sentence(s) the summary prints */
} tm_diagnosis;

/* Run-level facts written into the file's first line. */
typedef struct {
    const char *model, *data, *optim;
    long world, batch, accum, steps_per_epoch, params;
    const char *bucket_note;   /* --bucket-mb auto: what it chose and why (NULL: fixed) */
} tm_info;

/* value: --metrics as given (NULL: the default, on), ckpt_dir: --checkpoint (NULL: none). The default goes
 * into ckpt_dir/metrics.jsonl, else into a new run directory under baton's private per-user directory.
 * Returns 0 or an exit code (2: bad value) after printing one line. */
int train_metrics_open(train_metrics *m, const char *value, const char *ckpt_dir, int rank);
/* Checks a --metrics value without side effects: NULL when fine, else why not. */
const char *train_metrics_check_value(const char *value);
/* coll_ns: the step's collective times (baton_ddp_coll_times; ncoll of them, 0 with one rank). */
void train_metrics_step(train_metrics *m, long step, const double f[TM_NF], const uint64_t *coll_ns, int ncoll);
void train_metrics_eval(train_metrics *m, long step, long epoch, double acc, double loss);
/* Collective (every rank calls it, comm may be NULL). Rank 0 fills *d and writes the file. Returns 0 or -1
 * (message printed). */
int train_metrics_finish(train_metrics *m, baton_comm *comm, int world, const tm_info *info, tm_diagnosis *d);
void train_metrics_free(train_metrics *m);
/* Milliseconds per recorded step spent in the recorder itself. */
double train_metrics_ms_per_step(const train_metrics *m);

/* A growing text buffer (oom set when an append failed). */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} tm_sbuf;
void tm_put(tm_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define TM_WARMUP_STEPS 2              /* steps left out of the medians (first touches, thread start) */

/* The diagnosis from every rank's records (rec: world blocks of n x TM_NF, TM_WAIT filled in). */
void tm_diagnose(const double *rec, int world, long n, tm_diagnosis *d);
/* Fills TM_WAIT of every record from the collective times (coll: world blocks of n x TM_NCOLL). */
void tm_fill_waits(double *rec, const double *coll, int world, long n);

/* ---- the in-run A/B measurement of what the metrics cost (tools/train_ab.c; bench/metrics_overhead.sh) --- */
/* Bench knob BATON_BENCH_METRICS_AB=K (steps per block; inert unless set, and only with metrics on): after
 * TM_AB_WARMUP steps the recording is switched off and on in blocks of K steps, in pairs ordered on/off,
 * off/on, on/off, ... (so a drift of the machine favours neither side). A step not recorded takes no phase
 * clock readings, no DDP statistics and no record (tools/train.c: `record`, `timing`). Every step's whole time
 * (from its start to the end of its bookkeeping, the recorder included; evaluations fall between steps and
 * are left out) is kept, and the --json line gets each complete pair's mean step time on and off:
 * "metrics_ab":{"block_steps":K,"on_ms":[...],"off_ms":[...],"step_ms":[...]} (step_ms: every step of those
 * pairs in order, block b being steps [bK, (b+1)K)). The metrics file holds the recorded steps. */
#define TM_AB_WARMUP 4
typedef struct {
    long k;          /* steps per block; 0: off */
    long first;      /* the first step of the first block */
    long n, cap;     /* steps timed so far (from `first`, in order) */
    double *ms;
} tm_ab;
/* Reads the knob; returns 0 (on or off) or -1 after printing one line. */
int tm_ab_start(tm_ab *ab, long first_step, long total);
/* 1: record this step (always, unless the knob is set and the step is in an off block). */
int tm_ab_recording(const tm_ab *ab, long step);
void tm_ab_step(tm_ab *ab, long step, uint64_t ns);
/* Complete pairs so far; on[p], off[p]: mean step time (ms) of pair p's on and off blocks (max pairs). */
long tm_ab_pairs(const tm_ab *ab, double *on, double *off, long max);
struct cJSON;
void train_ab_json(struct cJSON *j, const tm_ab *ab);
void tm_ab_free(tm_ab *ab);

/* ---- the prefetching input pipeline (tools/train_prefetch.c) ----------------------------------------- */
/* One batch ahead on a thread: train_prefetch_request copies the batch's indices and returns at once; the
 * thread gathers the samples; train_prefetch_take waits for them and swaps the filled buffers with the
 * caller's (so no copy). The batches are the ones a synchronous gather would produce, byte for byte.
 * Test knob: BATON_TEST_SLOW_DATA_MS=M sleeps M ms on the loader thread per batch (a slow input pipeline). */
typedef struct {
    const baton_dataset *ds;
    int b;
    int32_t *idx;              /* (b) indices of the requested batch */
    float *x;                  /* (b, dim) the batch being filled */
    int32_t *y;
    int pending, ready, stop;
    long slow_ms;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, threaded;
} train_prefetch;

/* threaded = 0 (--no-prefetch): no thread, take gathers synchronously. -1: message printed. */
int train_prefetch_start(train_prefetch *p, const baton_dataset *ds, int b, int threaded);
void train_prefetch_request(train_prefetch *p, const int32_t *idx);
/* Waits for the requested batch and swaps it into (*x, *y). */
void train_prefetch_take(train_prefetch *p, float **x, int32_t **y);
void train_prefetch_stop(train_prefetch *p);

#endif
