/* train_metrics.c: per-step metrics of `baton train`, gathered at the end, written by rank 0 (JSON lines or
 * CSV), and the diagnosis drawn from them: a straggler, a starved input pipeline (docs/observe.md). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train_metrics.h"
#include "util/files.h"
#include "util/util.h"

/* A straggler: its median compute time is at least this many times the other ranks' median. Compute
 * (forward + backward + optimizer) is what a slow rank does slowly; the waits inside collectives are not
 * used, since on shared cores the waiting ranks' spinning comm threads slow the slow rank itself. */
#define STRAGGLER_RATIO 1.35
/* ... compared at this quantile of each rank's per-step compute (its fast steps), not the median. */
#define STRAGGLER_QUANTILE 0.2
/* The input pipeline is named when a median step spends at least this share blocked on data. */
#define INPUT_BOUND_PCT 15.0
#define INPUT_BOUND_MS 0.5   /* ... and at least this long (a thread wake-up is not a slow loader) */



static const char *const field_names[TM_NF] = {"t_ms", "step_ms", "data_ms", "forward_ms", "backward_ms",
                                               "comm_exposed_ms", "optim_ms", "comm_ms", "bytes", "loss", "lr",
                                               "epoch"};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

const char *train_metrics_check_value(const char *value) {
    if (!value || !strcmp(value, "none")) return NULL;
    if (!*value) return "empty path; give FILE.jsonl, FILE.csv or none";
    if (!ends_with(value, ".jsonl") && !ends_with(value, ".csv"))
        return "expects a file name ending in .jsonl or .csv, or none";
    return NULL;
}

/* A new run directory <private>/runs/train-YYYYmmdd-HHMMSS-PID (0700). */
static int make_run_dir(char *out, size_t n) {
    char base[4096];
    if (baton__private_dir(base, sizeof base) < 0) return -1;
    char runs[4200];
    snprintf(runs, sizeof runs, "%s/runs", base);
    if (mkdir(runs, 0700) < 0 && errno != EEXIST) return baton__fail(BATON_ESYS, "cannot create %s: %s", runs, strerror(errno));
    struct stat st;
    if (lstat(runs, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return baton__fail(BATON_ESYS, "%s is not a directory of this user", runs);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    if ((size_t)snprintf(out, n, "%s/train-%s-%ld", runs, stamp, (long)getpid()) >= n)
        return baton__fail(BATON_EINVAL, "run directory path too long");
    if (mkdir(out, 0700) < 0) return baton__fail(BATON_ESYS, "cannot create %s: %s", out, strerror(errno));
    return 0;
}

int train_metrics_open(train_metrics *m, const char *value, const char *ckpt_dir, int rank) {
    memset(m, 0, sizeof *m);
    m->rank = rank;
    const char *why = train_metrics_check_value(value);
    if (why) {
        fprintf(stderr, "baton train: --metrics: %s\n", why);
        return 2;
    }
    if (value && !strcmp(value, "none")) return 0;
    m->on = 1;
    m->cap = 1024;
    m->cap_evals = 16;
    m->rec = malloc((size_t)m->cap * TM_NF * sizeof(double));
    m->evals = malloc((size_t)m->cap_evals * sizeof(tm_eval));
    if (!m->rec || !m->evals) {
        fprintf(stderr, "baton train: out of memory for --metrics\n");
        return 1;
    }
    m->first_step = -1;
    if (rank != 0) return 0;
    if (value) {
        snprintf(m->path, sizeof m->path, "%s", value);
        m->csv = ends_with(value, ".csv");
        const char *slash = strrchr(value, '/');
        if (!slash) snprintf(m->dir, sizeof m->dir, ".");
        else snprintf(m->dir, sizeof m->dir, "%.*s", (int)(slash - value), value);
        return 0;
    }
    if (ckpt_dir) {
        snprintf(m->dir, sizeof m->dir, "%s", ckpt_dir);
    } else if (make_run_dir(m->dir, sizeof m->dir) < 0) {
        fprintf(stderr, "baton train: metrics run directory: %s (or pass --metrics FILE.jsonl or --metrics none)\n",
                baton_last_error());
        return 1;
    }
    if ((size_t)snprintf(m->path, sizeof m->path, "%s/metrics.jsonl", m->dir) >= sizeof m->path) {
        fprintf(stderr, "baton train: --checkpoint: path too long for the metrics file\n");
        return 2;
    }
    return 0;
}

void train_metrics_step(train_metrics *m, long step, const double f[TM_NF]) {
    if (!m->on) return;
    uint64_t t = baton__now_ns();
    if (m->first_step < 0) m->first_step = step;
    if (m->n == m->cap) {
        double *r = realloc(m->rec, (size_t)m->cap * 2 * TM_NF * sizeof(double));
        if (!r) {   /* keep what we have; the run goes on */
            m->on = 0;
            return;
        }
        m->rec = r;
        m->cap *= 2;
    }
    memcpy(m->rec + (size_t)m->n * TM_NF, f, TM_NF * sizeof(double));
    m->n++;
    m->self_ns += baton__now_ns() - t;
}

void train_metrics_eval(train_metrics *m, long step, long epoch, double acc, double loss) {
    if (!m->on) return;
    if (m->n_evals == m->cap_evals) {
        tm_eval *e = realloc(m->evals, (size_t)m->cap_evals * 2 * sizeof *e);
        if (!e) return;
        m->evals = e;
        m->cap_evals *= 2;
    }
    m->evals[m->n_evals++] = (tm_eval){step, epoch, acc, loss};
}

double train_metrics_ms_per_step(const train_metrics *m) {
    return m->n ? (double)m->self_ns * 1e-6 / (double)m->n : 0.0;
}

void train_metrics_free(train_metrics *m) {
    free(m->rec);
    free(m->evals);
    memset(m, 0, sizeof *m);
}

/* ---- diagnosis --------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tm_median(double *v, long n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Quantile q (0.5: the median) over steps [lo, n) of rank r of the sum of the given fields. */
static double rank_quantile(const double *rec, long n, long lo, int r, const int *fields, int nf, double *tmp,
                            double q) {
    long k = 0;
    for (long i = lo; i < n; i++) {
        const double *f = rec + ((size_t)r * n + i) * TM_NF;
        double s = 0.0;
        for (int j = 0; j < nf; j++) s += f[fields[j]];
        tmp[k++] = s;
    }
    if (q == 0.5 || k == 0) return tm_median(tmp, k);
    tm_median(tmp, k);   /* sorts */
    return tmp[(long)(q * (double)(k - 1))];
}

void tm_diagnose(const double *rec, int world, long n, tm_diagnosis *d) {
    memset(d, 0, sizeof *d);
    d->straggler = -1;
    if (n <= 0 || world <= 0) {
        snprintf(d->text, sizeof d->text, "no steps recorded");
        return;
    }
    long lo = n > TM_WARMUP_STEPS + 2 ? TM_WARMUP_STEPS : 0;
    /* tmp holds one rank's steps, or one value per rank */
    double *tmp = malloc((size_t)(n > world ? n : world) * sizeof *tmp), *comp = malloc((size_t)world * 4 * sizeof *comp);
    if (!tmp || !comp) {
        free(tmp);
        free(comp);
        snprintf(d->text, sizeof d->text, "out of memory for the diagnosis");
        return;
    }
    double *step = comp + world, *data = comp + 2 * world, *exposed = comp + 3 * world;
    static const int f_comp[] = {TM_FWD, TM_BWD, TM_OPT}, f_step[] = {TM_STEP}, f_data[] = {TM_DATA},
                     f_exp[] = {TM_EXPOSED};
    for (int r = 0; r < world; r++) {
        /* a straggler is slow even in its fast steps; a rank that other jobs' load slows now and then is not */
        comp[r] = rank_quantile(rec, n, lo, r, f_comp, 3, tmp, STRAGGLER_QUANTILE);
        step[r] = rank_quantile(rec, n, lo, r, f_step, 1, tmp, 0.5);
        data[r] = rank_quantile(rec, n, lo, r, f_data, 1, tmp, 0.5);
        exposed[r] = rank_quantile(rec, n, lo, r, f_exp, 1, tmp, 0.5);
    }
    /* The slowest rank against the median of the others' medians. */
    int slow = 0;
    for (int r = 1; r < world; r++)
        if (comp[r] > comp[slow]) slow = r;
    double others = 0.0, others_wait = 0.0;
    if (world > 1) {
        long k = 0;
        for (int r = 0; r < world; r++)
            if (r != slow) tmp[k++] = comp[r];
        others = tm_median(tmp, k);
        k = 0;
        for (int r = 0; r < world; r++)
            if (r != slow) tmp[k++] = step[r] > 0 ? 100.0 * exposed[r] / step[r] : 0.0;
        others_wait = tm_median(tmp, k);
        d->ratio = others > 0 ? comp[slow] / others : 0.0;
        d->others_wait_pct = others_wait;
        if (d->ratio >= STRAGGLER_RATIO) d->straggler = slow;
    }
    for (int r = 0; r < world; r++) tmp[r] = step[r] > 0 ? 100.0 * data[r] / step[r] : 0.0;
    d->data_pct = tm_median(tmp, world);
    d->input_bound = d->data_pct >= INPUT_BOUND_PCT && tm_median(data, world) >= INPUT_BOUND_MS;
    double c = 0, e = 0, s = 0;
    for (int r = 0; r < world; r++) {
        c += rank_quantile(rec, n, lo, r, f_comp, 3, tmp, 0.5);
        e += exposed[r];
        s += step[r];
    }
    d->compute_pct = s > 0 ? 100.0 * c / s : 0.0;
    d->exposed_pct = s > 0 ? 100.0 * e / s : 0.0;
    for (int r = 0; r < world; r++) tmp[r] = step[r];
    d->step_ms = tm_median(tmp, world);

    size_t len = 0;
#define SAY(...) len += (size_t)snprintf(d->text + len, len < sizeof d->text ? sizeof d->text - len : 0, __VA_ARGS__)
    if (d->straggler >= 0)
        SAY("straggler: rank %d is %.2fx slower than the median rank (compute %.1f ms vs %.1f ms per step, 20th "
            "percentiles); the others "
            "spend %.0f %% of each step waiting for it. ", slow, d->ratio, comp[slow], others, others_wait);
    if (d->input_bound)
        SAY("input pipeline: the ranks wait %.0f %% of each step for batches (median %.1f ms of %.1f ms); the loader "
            "cannot keep up with the step. ", d->data_pct, tm_median(data, world), d->step_ms);
    if (d->straggler < 0 && !d->input_bound)
        SAY("no straggler (slowest rank %.2fx the median), input not limiting (%.1f %% of a step on data). ",
            world > 1 ? d->ratio : 1.0, d->data_pct);
    SAY("Median step %.1f ms: compute %.0f %%, exposed communication %.0f %%, data %.0f %%.", d->step_ms,
        d->compute_pct, d->exposed_pct, d->data_pct);
#undef SAY
    free(tmp);
    free(comp);
}

/* ---- writing ----------------------------------------------------------------------------------------- */

void tm_put(tm_sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && (size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap - b->len <= (size_t)k) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* A JSON string body: the few characters that need escaping in our texts. */
static void put_json_str(tm_sbuf *b, const char *s) {
    tm_put(b, "\"");
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') tm_put(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) tm_put(b, "\\u%04x", *s);
        else tm_put(b, "%c", *s);
    }
    tm_put(b, "\"");
}

static void write_jsonl(tm_sbuf *b, const train_metrics *m, const double *all, int world, const tm_info *info,
                        const tm_diagnosis *d) {
    tm_put(b, "{\"type\":\"run\",\"model\":");
    put_json_str(b, info->model);
    tm_put(b, ",\"data\":");
    put_json_str(b, info->data);
    tm_put(b, ",\"optim\":");
    put_json_str(b, info->optim);
    tm_put(b, ",\"world_size\":%d,\"batch\":%ld,\"accum\":%ld,\"effective_batch\":%ld,\"steps_per_epoch\":%ld,"
           "\"params\":%ld,\"first_step\":%ld,\"steps\":%ld,\"metrics_ms_per_step\":%.6f", world, info->batch,
        info->accum, info->batch * info->accum * world, info->steps_per_epoch, info->params, m->first_step, m->n,
        train_metrics_ms_per_step(m));
    if (info->bucket_note) {
        tm_put(b, ",\"bucket\":");
        put_json_str(b, info->bucket_note);
    }
    tm_put(b, "}\n");
    for (long i = 0; i < m->n; i++)
        for (int r = 0; r < world; r++) {
            const double *f = all + ((size_t)r * m->n + i) * TM_NF;
            tm_put(b, "{\"type\":\"step\",\"step\":%ld,\"rank\":%d", m->first_step + i, r);
            for (int j = 0; j < TM_NF; j++) {
                if (j == TM_EPOCH || j == TM_BYTES) tm_put(b, ",\"%s\":%.0f", field_names[j], f[j]);
                else if (j == TM_LOSS || j == TM_LR) tm_put(b, ",\"%s\":%.9g", field_names[j], f[j]);
                else tm_put(b, ",\"%s\":%.4f", field_names[j], f[j]);
            }
            tm_put(b, "}\n");
        }
    for (long i = 0; i < m->n_evals; i++)
        tm_put(b, "{\"type\":\"eval\",\"step\":%ld,\"epoch\":%ld,\"test_accuracy\":%.6f,\"test_loss\":%.6f}\n",
            m->evals[i].step, m->evals[i].epoch, m->evals[i].acc, m->evals[i].loss);
    tm_put(b, "{\"type\":\"diagnosis\",\"straggler_rank\":%d,\"straggler_ratio\":%.4f,\"others_wait_pct\":%.2f,"
           "\"input_bound\":%s,\"data_pct\":%.2f,\"compute_pct\":%.2f,\"exposed_pct\":%.2f,\"step_ms\":%.4f,\"text\":",
        d->straggler, d->ratio, d->others_wait_pct, d->input_bound ? "true" : "false", d->data_pct, d->compute_pct,
        d->exposed_pct, d->step_ms);
    put_json_str(b, d->text);
    tm_put(b, "}\n");
}

/* CSV: one row per step and rank, then one per evaluation (type column says which); no run line. */
static void write_csv(tm_sbuf *b, const train_metrics *m, const double *all, int world) {
    tm_put(b, "type,step,rank");
    for (int j = 0; j < TM_NF; j++) tm_put(b, ",%s", field_names[j]);
    tm_put(b, ",test_accuracy,test_loss\n");
    for (long i = 0; i < m->n; i++)
        for (int r = 0; r < world; r++) {
            const double *f = all + ((size_t)r * m->n + i) * TM_NF;
            tm_put(b, "step,%ld,%d", m->first_step + i, r);
            for (int j = 0; j < TM_NF; j++) tm_put(b, ",%.9g", f[j]);
            tm_put(b, ",,\n");
        }
    for (long i = 0; i < m->n_evals; i++) {
        tm_put(b, "eval,%ld,", m->evals[i].step);
        for (int j = 0; j < TM_NF; j++) tm_put(b, j == TM_EPOCH ? ",%ld" : ",", m->evals[i].epoch);
        tm_put(b, ",%.6f,%.6f\n", m->evals[i].acc, m->evals[i].loss);
    }
}

int train_metrics_finish(train_metrics *m, baton_comm *comm, int world, const tm_info *info, tm_diagnosis *d) {
    memset(d, 0, sizeof *d);
    d->straggler = -1;
    /* Every rank took the same steps; agree on the count (a failed realloc turns a rank's recording off). */
    double cnt[2] = {m->on ? (double)m->n : 0.0, m->on ? -(double)m->n : 0.0};
    if (comm && world > 1 && baton_allreduce(comm, cnt, cnt, 2, BATON_F64, BATON_MIN) < 0) {
        fprintf(stderr, "baton train: metrics: %s\n", baton_last_error());
        return -1;
    }
    long n = (long)cnt[0];
    if (n != (long)-cnt[1] || n == 0) {   /* off somewhere, or nothing to say */
        if (m->on && m->rank == 0 && n != (long)-cnt[1]) fprintf(stderr, "baton train: metrics: recording stopped (out of memory)\n");
        m->on = 0;
        return 0;
    }
    m->n = n;
    double *all = malloc((size_t)world * n * TM_NF * sizeof(double));
    int fail = !all;
    if (comm && world > 1) {
        double f = fail;
        if (baton_allreduce(comm, &f, &f, 1, BATON_F64, BATON_MAX) < 0) {
            free(all);
            fprintf(stderr, "baton train: metrics: %s\n", baton_last_error());
            return -1;
        }
        if (f > 0) {
            free(all);
            if (m->rank == 0) fprintf(stderr, "baton train: metrics: out of memory gathering the ranks' records\n");
            return 0;
        }
        if (baton_allgather(comm, m->rec, all, (size_t)n * TM_NF, BATON_F64) < 0) {
            free(all);
            fprintf(stderr, "baton train: metrics: %s\n", baton_last_error());
            return -1;
        }
    } else if (!fail) {
        memcpy(all, m->rec, (size_t)n * TM_NF * sizeof(double));
    } else {
        fprintf(stderr, "baton train: metrics: out of memory\n");
        return 0;
    }
    if (m->rank != 0) {
        free(all);
        return 0;
    }
    /* step start times relative to the earliest step of the job (one clock on one node) */
    double origin = all[TM_T0];
    for (long i = 0; i < (long)world * n; i++)
        if (all[(size_t)i * TM_NF + TM_T0] < origin) origin = all[(size_t)i * TM_NF + TM_T0];
    for (long i = 0; i < (long)world * n; i++) all[(size_t)i * TM_NF + TM_T0] -= origin;
    tm_diagnose(all, world, n, d);
    tm_sbuf b = {0};
    if (m->csv) write_csv(&b, m, all, world);
    else write_jsonl(&b, m, all, world, info, d);
    free(all);
    int rc = 0;
    if (b.oom) {
        fprintf(stderr, "baton train: metrics: out of memory writing %s\n", m->path);
        rc = -1;
    } else if (baton__write_atomic(m->path, b.p, b.len, 0) < 0) {
        fprintf(stderr, "baton train: --metrics: %s\n", baton_last_error());
        rc = -1;
    }
    free(b.p);
    return rc;
}
