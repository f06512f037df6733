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

/* A straggler is the rank the others wait for (docs/observe.md). In each step the rank that waited least in
 * the step's all-reduces arrived last; a rank last in at least STRAGGLER_LAST of the steps is named when the
 * others' work plus the time they wait for it (how much longer they wait in the step's all-reduces than it
 * does, median over steps) is at least STRAGGLER_RATIO times their work. A rank that the scheduler slows now
 * and then is last in some steps and not in others. */
#define STRAGGLER_LAST 0.75
#define STRAGGLER_RATIO 1.35
/* A rank's core is called slow when it needs this much more CPU time than the others for the same work. */
#define SLOW_CORE_RATIO 1.10
/* The input pipeline is named when a median step spends at least this share blocked on data. */
#define INPUT_BOUND_PCT 15.0
#define INPUT_BOUND_MS 0.5   /* ... and at least this long (a thread wake-up is not a slow loader) */



const char *const tm_field_names[TM_NF] = {"t_ms", "step_ms", "data_ms", "forward_ms", "backward_ms",
                                               "comm_exposed_ms", "optim_ms", "comm_ms", "bytes", "loss", "lr",
                                               "epoch", "wait_ms", "cpu_ms"};

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
    m->coll = malloc((size_t)m->cap * TM_NCOLL * sizeof(double));
    m->stepno = malloc((size_t)m->cap * sizeof(long));
    m->evals = malloc((size_t)m->cap_evals * sizeof(tm_eval));
    if (!m->rec || !m->coll || !m->stepno || !m->evals) {
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

void train_metrics_step(train_metrics *m, long step, const double f[TM_NF], const uint64_t *coll_ns, int ncoll) {
    if (!m->on) return;
    uint64_t t = baton__now_ns();
    if (m->first_step < 0) m->first_step = step;
    if (m->n == m->cap) {
        double *r = realloc(m->rec, (size_t)m->cap * 2 * TM_NF * sizeof(double));
        if (r) m->rec = r;
        double *c = r ? realloc(m->coll, (size_t)m->cap * 2 * TM_NCOLL * sizeof(double)) : NULL;
        if (c) m->coll = c;
        long *sn = c ? realloc(m->stepno, (size_t)m->cap * 2 * sizeof(long)) : NULL;
        if (!sn) {   /* keep what we have; the run goes on */
            m->on = 0;
            return;
        }
        m->stepno = sn;
        m->cap *= 2;
    }
    memcpy(m->rec + (size_t)m->n * TM_NF, f, TM_NF * sizeof(double));
    double *c = m->coll + (size_t)m->n * TM_NCOLL;
    memset(c, 0, TM_NCOLL * sizeof(double));
    for (int k = 0; k < ncoll && k < TM_NCOLL; k++) c[k] = (double)coll_ns[k] * 1e-6;
    m->stepno[m->n++] = step;
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
    free(m->coll);
    free(m->stepno);
    free(m->evals);
    memset(m, 0, sizeof *m);
}

/* ---- diagnosis --------------------------------------------------------------------------------------- */

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
    if (q == 0.5 || k == 0) return baton__median(tmp, k);
    baton__median(tmp, k);   /* sorts */
    return tmp[(long)(q * (double)(k - 1))];
}

void tm_fill_waits(double *rec, const double *coll, int world, long n) {
    double *dur = malloc((size_t)world * 2 * sizeof *dur), *w = dur ? dur + world : NULL;
    for (long i = 0; i < n; i++) {
        for (int r = 0; r < world; r++) rec[((size_t)r * n + i) * TM_NF + TM_WAIT] = 0.0;
        for (int q = 0; q < TM_NCOLL && dur; q++) {   /* out of memory: no waits (so no straggler named) */
            for (int r = 0; r < world; r++) dur[r] = coll[((size_t)r * n + i) * TM_NCOLL + q];
            baton_coll_waits(dur, world, 1, w);
            for (int r = 0; r < world; r++) rec[((size_t)r * n + i) * TM_NF + TM_WAIT] += w[r];
        }
    }
    free(dur);
}

void tm_diagnose(const double *rec, int world, long n, tm_diagnosis *d) {
    memset(d, 0, sizeof *d);
    d->straggler = d->last = -1;
    if (n <= 0 || world <= 0) {
        snprintf(d->text, sizeof d->text, "no steps recorded");
        return;
    }
    long lo = n > TM_WARMUP_STEPS + 2 ? TM_WARMUP_STEPS : 0;
    /* tmp holds one rank's steps, or one value per rank */
    double *tmp = malloc((size_t)(n > world ? n : world) * sizeof *tmp), *work = malloc((size_t)world * 7 * sizeof *work);
    if (!tmp || !work) {
        free(tmp);
        free(work);
        snprintf(d->text, sizeof d->text, "out of memory for the diagnosis");
        return;
    }
    double *step = work + world, *data = work + 2 * world, *exposed = work + 3 * world, *waited = work + 4 * world,
           *last = work + 5 * world, *cpu = work + 6 * world;
    static const int f_comp[] = {TM_FWD, TM_BWD, TM_OPT}, f_work[] = {TM_DATA, TM_FWD, TM_BWD, TM_OPT},
                     f_step[] = {TM_STEP}, f_data[] = {TM_DATA}, f_exp[] = {TM_EXPOSED}, f_cpu[] = {TM_CPU};
#define F(r, i) (rec + ((size_t)(r) * n + (i)) * TM_NF)
    /* What a rank lost waiting for its peers in a step: its waits in the collectives, but no more than the
     * time its main thread was held after backward (waits on the comm thread during backward cost nothing). */
#define LOST(f) ((f)[TM_WAIT] < (f)[TM_EXPOSED] ? (f)[TM_WAIT] : (f)[TM_EXPOSED])
    for (int r = 0; r < world; r++) {
        long k = 0;
        for (long i = lo; i < n; i++) tmp[k++] = LOST(F(r, i));
        waited[r] = baton__median(tmp, k);
        work[r] = rank_quantile(rec, n, lo, r, f_work, 4, tmp, 0.5);   /* its own work: data + compute */
        step[r] = rank_quantile(rec, n, lo, r, f_step, 1, tmp, 0.5);
        data[r] = rank_quantile(rec, n, lo, r, f_data, 1, tmp, 0.5);
        exposed[r] = rank_quantile(rec, n, lo, r, f_exp, 1, tmp, 0.5);
        cpu[r] = rank_quantile(rec, n, lo, r, f_cpu, 1, tmp, 0.5);
        last[r] = 0;
    }
    if (world > 1) {
        /* who arrived last in each step: the rank that waited least in its collectives */
        for (long i = lo; i < n; i++) {
            int l = 0;
            for (int r = 1; r < world; r++)
                if (F(r, i)[TM_WAIT] < F(l, i)[TM_WAIT]) l = r;
            last[l] += 1.0;
        }
        int slow = 0;
        for (int r = 1; r < world; r++)
            if (last[r] > last[slow]) slow = r;
        /* How late it is: per step, how much longer the other ranks (their median) waited in the step's
         * all-reduces than it did; the median over the steps. */
        double *others = malloc((size_t)world * sizeof *others);
        long k = 0;
        for (long i = lo; i < n && others; i++) {
            int m = 0;
            for (int r = 0; r < world; r++)
                if (r != slow) others[m++] = F(r, i)[TM_WAIT];
            tmp[k++] = baton__median(others, m) - F(slow, i)[TM_WAIT];
        }
        free(others);
        d->late_ms = k ? baton__median(tmp, k) : 0.0;
        k = 0;
        for (int r = 0; r < world; r++)
            if (r != slow) tmp[k++] = work[r];
        d->others_work_ms = baton__median(tmp, k);
        k = 0;
        for (int r = 0; r < world; r++)
            if (r != slow) tmp[k++] = cpu[r];
        double others_cpu = baton__median(tmp, k);
        d->cpu_ratio = others_cpu > 0 ? cpu[slow] / others_cpu : 0.0;
        k = 0;
        for (int r = 0; r < world; r++)
            if (r != slow) tmp[k++] = step[r] > 0 ? 100.0 * waited[r] / step[r] : 0.0;
        d->others_wait_pct = baton__median(tmp, k);
        d->last = slow;
        d->last_pct = 100.0 * last[slow] / (double)(n - lo);
        /* its work as the others see it: their own work plus the time they wait for it */
        d->ratio = d->others_work_ms > 0 ? (d->others_work_ms + d->late_ms) / d->others_work_ms : 0.0;
        if (d->last_pct >= 100.0 * STRAGGLER_LAST && d->ratio >= STRAGGLER_RATIO) d->straggler = slow;
    }
#undef LOST
#undef F
    for (int r = 0; r < world; r++) tmp[r] = step[r] > 0 ? 100.0 * data[r] / step[r] : 0.0;
    d->data_pct = baton__median(tmp, world);
    d->input_bound = d->data_pct >= INPUT_BOUND_PCT && baton__median(data, world) >= INPUT_BOUND_MS;
    double c = 0, e = 0, s = 0;
    for (int r = 0; r < world; r++) {
        c += rank_quantile(rec, n, lo, r, f_comp, 3, tmp, 0.5);
        e += exposed[r];
        s += step[r];
    }
    d->compute_pct = s > 0 ? 100.0 * c / s : 0.0;
    d->exposed_pct = s > 0 ? 100.0 * e / s : 0.0;
    for (int r = 0; r < world; r++) tmp[r] = step[r];
    d->step_ms = baton__median(tmp, world);

    size_t len = 0;
#define SAY(...) len += (size_t)snprintf(d->text + len, len < sizeof d->text ? sizeof d->text - len : 0, __VA_ARGS__)
    if (d->straggler >= 0)
        SAY("straggler: rank %d is %.2fx slower than the median rank (last to reach the gradient all-reduces in "
            "%.0f %% of the steps; the others wait %.2f ms per step longer in them than it does, on %.2f ms of "
            "their own work); the others spend %.0f %% of each step waiting for it. ", d->straggler, d->ratio,
            d->last_pct, d->late_ms, d->others_work_ms, d->others_wait_pct);
    /* A core that runs the same forward and backward in more CPU time is slower hardware (or shared with
     * something that thrashes its caches), not more work: said, whether or not the rank is named. */
    if (world > 1 && d->cpu_ratio >= SLOW_CORE_RATIO)
        SAY("rank %d's core is slow: it ran the same forward and backward in %.2fx the CPU time of the others. ",
            d->last, d->cpu_ratio);
    if (d->input_bound)
        SAY("input pipeline: the ranks wait %.0f %% of each step for batches (median %.1f ms of %.1f ms); the loader "
            "cannot keep up with the step. ", d->data_pct, baton__median(data, world), d->step_ms);
    if (d->straggler < 0 && !d->input_bound) {
        if (world > 1)
            SAY("no straggler (the rank most often last, rank %d, was last in %.0f %% of the steps and is %.2fx the "
                "median), input not limiting (%.1f %% of a step on data). ", d->last, d->last_pct, d->ratio,
                d->data_pct);
        else
            SAY("no straggler (one rank), input not limiting (%.1f %% of a step on data). ", d->data_pct);
    }
    SAY("Median step %.1f ms: compute %.0f %%, exposed communication %.0f %%, data %.0f %%.", d->step_ms,
        d->compute_pct, d->exposed_pct, d->data_pct);
#undef SAY
    free(tmp);
    free(work);
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
            tm_put(b, "{\"type\":\"step\",\"step\":%ld,\"rank\":%d", m->stepno[i], r);
            for (int j = 0; j < TM_NF; j++) {
                if (j == TM_EPOCH || j == TM_BYTES) tm_put(b, ",\"%s\":%.0f", tm_field_names[j], f[j]);
                else if (j == TM_LOSS || j == TM_LR) tm_put(b, ",\"%s\":%.9g", tm_field_names[j], f[j]);
                else tm_put(b, ",\"%s\":%.4f", tm_field_names[j], f[j]);
            }
            tm_put(b, "}\n");
        }
    for (long i = 0; i < m->n_evals; i++)
        tm_put(b, "{\"type\":\"eval\",\"step\":%ld,\"epoch\":%ld,\"test_accuracy\":%.6f,\"test_loss\":%.6f}\n",
            m->evals[i].step, m->evals[i].epoch, m->evals[i].acc, m->evals[i].loss);
    tm_put(b, "{\"type\":\"diagnosis\",\"straggler_rank\":%d,\"straggler_ratio\":%.4f,\"last_rank\":%d,"
           "\"last_pct\":%.1f,\"others_wait_pct\":%.2f,\"input_bound\":%s,\"data_pct\":%.2f,\"compute_pct\":%.2f,"
           "\"exposed_pct\":%.2f,\"step_ms\":%.4f,\"late_ms\":%.4f,\"others_work_ms\":%.4f,\"cpu_ratio\":%.4f,"
           "\"text\":",
        d->straggler, d->ratio, d->last, d->last_pct, d->others_wait_pct, d->input_bound ? "true" : "false",
        d->data_pct, d->compute_pct, d->exposed_pct, d->step_ms, d->late_ms, d->others_work_ms, d->cpu_ratio);
    put_json_str(b, d->text);
    tm_put(b, "}\n");
}

/* CSV: one row per step and rank, then one per evaluation (type column says which); no run line. */
static void write_csv(tm_sbuf *b, const train_metrics *m, const double *all, int world) {
    tm_put(b, "type,step,rank");
    for (int j = 0; j < TM_NF; j++) tm_put(b, ",%s", tm_field_names[j]);
    tm_put(b, ",test_accuracy,test_loss\n");
    for (long i = 0; i < m->n; i++)
        for (int r = 0; r < world; r++) {
            const double *f = all + ((size_t)r * m->n + i) * TM_NF;
            tm_put(b, "step,%ld,%d", m->stepno[i], r);
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
    double *coll = malloc((size_t)world * n * TM_NCOLL * sizeof(double));
    int fail = !all || !coll;
    if (comm && world > 1) {
        double f = fail;
        if (baton_allreduce(comm, &f, &f, 1, BATON_F64, BATON_MAX) < 0) {
            free(all);
            free(coll);
            fprintf(stderr, "baton train: metrics: %s\n", baton_last_error());
            return -1;
        }
        if (f > 0) {
            free(all);
            free(coll);
            if (m->rank == 0) fprintf(stderr, "baton train: metrics: out of memory gathering the ranks' records\n");
            return 0;
        }
        if (baton_allgather(comm, m->rec, all, (size_t)n * TM_NF, BATON_F64) < 0 ||
            baton_allgather(comm, m->coll, coll, (size_t)n * TM_NCOLL, BATON_F64) < 0) {
            free(all);
            free(coll);
            fprintf(stderr, "baton train: metrics: %s\n", baton_last_error());
            return -1;
        }
    } else if (!fail) {
        memcpy(all, m->rec, (size_t)n * TM_NF * sizeof(double));
        memcpy(coll, m->coll, (size_t)n * TM_NCOLL * sizeof(double));
    } else {
        free(all);
        free(coll);
        fprintf(stderr, "baton train: metrics: out of memory\n");
        return 0;
    }
    if (m->rank != 0) {
        free(all);
        free(coll);
        return 0;
    }
    tm_fill_waits(all, coll, world, n);
    free(coll);
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
