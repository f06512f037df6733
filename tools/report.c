/* report.c: `baton report RUN_DIR|METRICS.jsonl -o report.html`: one self-contained HTML page drawn from the
 * metrics of a `baton train` run (docs/observe.md): loss and accuracy curves, throughput over time, the
 * per-rank step-time distribution, the compute / exposed-communication / data split per rank, a timeline of
 * a few steps, and the diagnosis. Inline SVG and CSS only: no script, nothing fetched. Every chart is an
 * <svg class="chart" id="chart-..."> whose drawn marks carry class "mark" (tests/sh/test_report.sh counts
 * them in a real browser); the per-rank table holds the medians the charts show. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "train_metrics.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_METRICS_BYTES (1024ul * 1024 * 1024)
#define W 760                         /* chart width, px */
#define H 220                         /* chart height */
#define ML 60                         /* left margin (axis labels) */
#define MR 20
#define MT 20
#define MB 30
#define MAX_POINTS 400                /* a curve is drawn through at most this many points */

typedef struct {
    int world;
    long n, first_step;
    double *rec;                      /* world blocks of n x TM_NF, like the trainer's gather */
    tm_eval *evals;
    long n_evals;
    char model[64], data[64], optim[32], bucket[256], diag[600];
    long batch, accum, effective_batch, params;
    double metrics_ms;
} run_data;

static int fail(const char *fmt, const char *a) {
    fprintf(stderr, "baton report: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return 2;
}

static double jnum(const cJSON *j, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void jstr(const cJSON *j, const char *k, char *out, size_t n) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, k));
    snprintf(out, n, "%s", s ? s : "");
}


/* Reads the JSON lines written by baton train. Returns 0 or an exit code after one line naming the problem. */
static int load(const char *path, run_data *r) {
    void *buf;
    size_t len;
    memset(r, 0, sizeof *r);
    int rc = baton__read_file(path, MAX_METRICS_BYTES, &buf, &len);
    if (rc < 0) return fail("%s", baton_last_error());
    long lineno = 0, cap_evals = 0;
    int err = 0;
    for (char *line = strtok(buf, "\n"); line && !err; line = strtok(NULL, "\n")) {
        lineno++;
        cJSON *j = cJSON_Parse(line);
        const char *type = j ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type")) : NULL;
        if (!type) {
            fprintf(stderr, "baton report: %s: line %ld is not a metrics record (a JSON object with \"type\"); "
                    "baton report reads the .jsonl file baton train writes\n", path, lineno);
            err = 2;
        } else if (!strcmp(type, "run")) {
            double world = jnum(j, "world_size", 0), steps = jnum(j, "steps", -1), first = jnum(j, "first_step", -1);
            if (r->rec || world < 1 || world > 65536 || steps < 0 || steps > 1e8 || first < 0 || world * steps > 1e8) {
                fprintf(stderr, "baton report: %s: line %ld: bad or repeated run record\n", path, lineno);
                err = 2;
            } else {
                r->world = (int)world;
                r->n = (long)steps;
                r->first_step = (long)first;
                r->rec = calloc((size_t)r->world * (size_t)(r->n ? r->n : 1) * TM_NF, sizeof(double));
                if (!r->rec) err = fail("%s", "out of memory");
                jstr(j, "model", r->model, sizeof r->model);
                jstr(j, "data", r->data, sizeof r->data);
                jstr(j, "optim", r->optim, sizeof r->optim);
                jstr(j, "bucket", r->bucket, sizeof r->bucket);
                r->batch = (long)jnum(j, "batch", 0);
                r->accum = (long)jnum(j, "accum", 1);
                r->effective_batch = (long)jnum(j, "effective_batch", 0);
                r->params = (long)jnum(j, "params", 0);
                r->metrics_ms = jnum(j, "metrics_ms_per_step", 0);
            }
        } else if (!strcmp(type, "step")) {
            double s = jnum(j, "step", -1), k = jnum(j, "rank", -1);
            long i = (long)s - r->first_step;
            if (!r->rec || k < 0 || k >= r->world || i < 0 || i >= r->n) {
                fprintf(stderr, "baton report: %s: line %ld: step record outside the run's steps and ranks\n", path,
                        lineno);
                err = 2;
            } else {
                double *f = r->rec + ((size_t)k * r->n + i) * TM_NF;
                for (int q = 0; q < TM_NF; q++) f[q] = jnum(j, tm_field_names[q], 0.0);
            }
        } else if (!strcmp(type, "eval")) {
            if (r->n_evals == cap_evals) {
                cap_evals = cap_evals ? 2 * cap_evals : 16;
                tm_eval *e = realloc(r->evals, (size_t)cap_evals * sizeof *e);
                if (!e) {
                    err = fail("%s", "out of memory");
                    cJSON_Delete(j);
                    break;
                }
                r->evals = e;
            }
            r->evals[r->n_evals++] = (tm_eval){(long)jnum(j, "step", 0), (long)jnum(j, "epoch", 0),
                                               jnum(j, "test_accuracy", 0), jnum(j, "test_loss", 0)};
        } else if (!strcmp(type, "diagnosis")) {
            jstr(j, "text", r->diag, sizeof r->diag);
        }
        cJSON_Delete(j);
    }
    free(buf);
    if (!err && !r->rec) {
        fprintf(stderr, "baton report: %s: no run record; is it a metrics file of baton train (--metrics "
                "FILE.jsonl)?\n", path);
        err = 2;
    }
    return err;
}

/* ---- drawing ----------------------------------------------------------------------------------------- */

static void esc(tm_sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') tm_put(b, "&lt;");
        else if (*s == '>') tm_put(b, "&gt;");
        else if (*s == '&') tm_put(b, "&amp;");
        else if (*s == '"') tm_put(b, "&quot;");
        else tm_put(b, "%c", *s);
    }
}

typedef struct {
    double x0, x1, y0, y1;            /* data range */
    int w, h;
} frame;

static double fx(const frame *f, double x) {
    return ML + (f->x1 > f->x0 ? (x - f->x0) / (f->x1 - f->x0) : 0.5) * (f->w - ML - MR);
}
static double fy(const frame *f, double y) {
    return f->h - MB - (f->y1 > f->y0 ? (y - f->y0) / (f->y1 - f->y0) : 0.5) * (f->h - MT - MB);
}

static void chart_begin(tm_sbuf *b, const char *id, const char *title, const frame *f, const char *xlabel,
                        const char *ylabel) {
    tm_put(b, "<h2>%s</h2>\n<svg class=\"chart\" id=\"chart-%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
              "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"%s\">\n", title, id, f->w, f->h, f->w,
           f->h, title);
    tm_put(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", ML, MT, f->w - ML - MR,
           f->h - MT - MB);
    if (strcmp(ylabel, "rank")) {   /* rank rows are labelled by the rows themselves */
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%.4g</text>", ML - 4, MT + 10, f->y1);
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%.4g</text>", ML - 4, f->h - MB, f->y0);
    }
    if (xlabel) {
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"tick\">%.4g</text>", ML, f->h - MB + 14, f->x0);
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%.4g</text>", f->w - MR, f->h - MB + 14,
               f->x1);
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"label\" text-anchor=\"middle\">%s</text>", (f->w + ML) / 2,
               f->h - 4, xlabel);
    }
    tm_put(b, "<text x=\"12\" y=\"%d\" class=\"label\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">%s"
              "</text>\n", f->h / 2, f->h / 2, ylabel);
}

static void polyline(tm_sbuf *b, const frame *f, const double *x, const double *y, long n, const char *cls) {
    if (n <= 0) return;
    tm_put(b, "<polyline class=\"mark %s\" data-points=\"%ld\" points=\"", cls, n);
    long stride = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
    for (long i = 0; i < n; i += stride) tm_put(b, "%.1f,%.1f ", fx(f, x[i]), fy(f, y[i]));
    if ((n - 1) % stride) tm_put(b, "%.1f,%.1f", fx(f, x[n - 1]), fy(f, y[n - 1]));
    tm_put(b, "\"/>\n");
}

static const double *rec(const run_data *r, int k, long i) { return r->rec + ((size_t)k * r->n + i) * TM_NF; }

static void range(const double *v, long n, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (long i = 0; i < n; i++) {
        if (v[i] < *lo) *lo = v[i];
        if (v[i] > *hi) *hi = v[i];
    }
    if (n == 0) *lo = *hi = 0;
    if (*hi <= *lo) *hi = *lo + 1;
}

/* Loss (the mean over ranks of each step) and the test loss at each evaluation. */
static void chart_loss(tm_sbuf *b, const run_data *r, double *x, double *y) {
    for (long i = 0; i < r->n; i++) {
        x[i] = (double)(r->first_step + i);
        y[i] = 0;
        for (int k = 0; k < r->world; k++) y[i] += rec(r, k, i)[TM_LOSS] / r->world;
    }
    frame f = {.w = W, .h = H};
    range(y, r->n, &f.y0, &f.y1);
    f.y0 = 0;
    for (long e = 0; e < r->n_evals; e++)
        if (r->evals[e].loss > f.y1) f.y1 = r->evals[e].loss;
    f.x0 = (double)r->first_step;
    f.x1 = (double)(r->first_step + (r->n > 1 ? r->n - 1 : 1));
    chart_begin(b, "loss", "Loss", &f, "step", "loss");
    polyline(b, &f, x, y, r->n, "train");
    for (long e = 0; e < r->n_evals; e++)
        tm_put(b, "<circle class=\"mark eval\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" data-step=\"%ld\" data-value=\"%.6f\">"
                  "<title>test loss %.4f at step %ld</title></circle>\n", fx(&f, (double)r->evals[e].step - 1),
               fy(&f, r->evals[e].loss), r->evals[e].step, r->evals[e].loss, r->evals[e].loss, r->evals[e].step);
    tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"legend trn\">train loss (mean of ranks)</text>"
              "<text x=\"%d\" y=\"%d\" class=\"legend evl\">&#9679; test loss</text></svg>\n", W - 300, MT + 14,
           W - 300, MT + 30);
}

static void chart_accuracy(tm_sbuf *b, const run_data *r, double *x, double *y) {
    frame f = {.w = W, .h = H, .y0 = 0, .y1 = 100, .x0 = (double)r->first_step,
               .x1 = (double)(r->first_step + (r->n > 1 ? r->n : 1))};
    for (long e = 0; e < r->n_evals; e++) {
        x[e] = (double)r->evals[e].step;
        y[e] = 100.0 * r->evals[e].acc;
    }
    double lowest = 100.0;
    for (long e = 0; e < r->n_evals; e++)
        if (y[e] < lowest) lowest = y[e];
    f.y0 = floor(lowest / 5.0) * 5.0 - 5.0;   /* zoomed to the accuracies reached */
    if (f.y0 < 0) f.y0 = 0;
    chart_begin(b, "accuracy", "Test accuracy", &f, "step", "accuracy %");
    polyline(b, &f, x, y, r->n_evals, "acc");
    for (long e = 0; e < r->n_evals; e++)
        tm_put(b, "<circle class=\"mark eval\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" data-step=\"%ld\" data-value=\"%.4f\">"
                  "<title>%.2f %% after epoch %ld</title></circle><text x=\"%.1f\" y=\"%.1f\" class=\"tick\">%.1f"
                  "</text>\n", fx(&f, x[e]), fy(&f, y[e]), r->evals[e].step, y[e], y[e], r->evals[e].epoch,
               fx(&f, x[e]) - 10, fy(&f, y[e]) + 16, y[e]);
    tm_put(b, "</svg>\n");
}

/* Training samples per second of the whole job over time: steps grouped into bins of equal step count; a
 * bin's rate = its samples / the sum of its steps' times, each step counted at its slowest rank (so the
 * evaluations between epochs do not count as slow training). */
static void chart_throughput(tm_sbuf *b, const run_data *r) {
    int bins = r->n < 60 ? (int)r->n : 60;
    if (bins < 1) return;
    double rate[60], mid[60];
    for (int q = 0; q < bins; q++) {
        long lo = r->n * q / bins, hi = r->n * (q + 1) / bins;
        double busy = 0, t0 = INFINITY, t1 = 0;
        for (long i = lo; i < hi; i++) {
            double slowest = 0;
            for (int k = 0; k < r->world; k++) {
                const double *g = rec(r, k, i);
                if (g[TM_STEP] > slowest) slowest = g[TM_STEP];
                if (g[TM_T0] < t0) t0 = g[TM_T0];
                if (g[TM_T0] + g[TM_STEP] > t1) t1 = g[TM_T0] + g[TM_STEP];
            }
            busy += slowest;
        }
        rate[q] = busy > 0 ? (double)(hi - lo) * r->effective_batch / (busy * 1e-3) : 0;
        mid[q] = 0.5 * (t0 + t1) * 1e-3;
    }
    frame f = {.w = W, .h = H};
    range(rate, bins, &f.y0, &f.y1);
    f.y0 = 0;
    range(mid, bins, &f.x0, &f.x1);
    double bw = (double)(W - ML - MR) / bins;
    chart_begin(b, "throughput", "Throughput over time", &f, "seconds since the first step", "samples/s");
    for (int q = 0; q < bins; q++)
        tm_put(b, "<rect class=\"mark bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" data-value=\"%.1f\">"
                  "<title>%.0f samples/s at %.1f s</title></rect>\n", ML + q * bw + 0.5, fy(&f, rate[q]),
               bw > 2 ? bw - 1 : bw, fy(&f, 0) - fy(&f, rate[q]), rate[q], rate[q], mid[q]);
    tm_put(b, "</svg>\n");
}

typedef struct {
    double step, compute, exposed, data, wait, p10, p25, p75, p90;
} rank_stats;

static double pct(const double *sorted, long n, double p) {
    if (n <= 0) return 0;
    double k = p * (double)(n - 1);
    long i = (long)k;
    return i + 1 < n ? sorted[i] + (k - (double)i) * (sorted[i + 1] - sorted[i]) : sorted[n - 1];
}

/* Medians (and step-time percentiles) of rank k over the steps after the warm-up ones. */
static void stats_of(const run_data *r, int k, double *tmp, rank_stats *s) {
    long lo = r->n > TM_WARMUP_STEPS + 2 ? TM_WARMUP_STEPS : 0, m = r->n - lo;
    static const int fields[][3] = {{TM_STEP, -1, -1}, {TM_FWD, TM_BWD, TM_OPT}, {TM_EXPOSED, -1, -1},
                                    {TM_DATA, -1, -1}, {TM_WAIT, -1, -1}};
    double *out[] = {&s->step, &s->compute, &s->exposed, &s->data, &s->wait};
    for (int q = 0; q < 5; q++) {
        for (long i = 0; i < m; i++) {
            const double *f = rec(r, k, lo + i);
            tmp[i] = 0;
            for (int z = 0; z < 3 && fields[q][z] >= 0; z++) tmp[i] += f[fields[q][z]];
        }
        *out[q] = baton__median(tmp, m);
        if (q == 0) {   /* tmp is sorted now */
            s->p10 = pct(tmp, m, 0.10);
            s->p25 = pct(tmp, m, 0.25);
            s->p75 = pct(tmp, m, 0.75);
            s->p90 = pct(tmp, m, 0.90);
        }
    }
}

/* One box per rank: 25-75 % box, median line, 10-90 % whiskers. */
static void chart_steptime(tm_sbuf *b, const run_data *r, const rank_stats *rs) {
    int rowh = 26, h = MT + MB + rowh * r->world;
    frame f = {.w = W, .h = h, .x0 = 0, .x1 = 0, .y0 = 0, .y1 = 1};
    for (int k = 0; k < r->world; k++)
        if (rs[k].p90 > f.x1) f.x1 = rs[k].p90;
    f.x1 = f.x1 > 0 ? f.x1 * 1.05 : 1;
    chart_begin(b, "steptime", "Step time per rank (10, 25, 50, 75, 90th percentiles)", &f, "ms per step", "rank");
    for (int k = 0; k < r->world; k++) {
        double y = MT + rowh * k + 4;
        tm_put(b, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%d</text>", ML - 4, y + 14, k);
        tm_put(b, "<line class=\"whisker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", fx(&f, rs[k].p10),
               fx(&f, rs[k].p90), y + 9, y + 9);
        tm_put(b, "<rect class=\"mark box\" data-rank=\"%d\" data-median=\"%.3f\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"18\"><title>rank %d: median %.2f ms</title></rect>", k, rs[k].step, fx(&f, rs[k].p25), y,
               fx(&f, rs[k].p75) - fx(&f, rs[k].p25) + 1, k, rs[k].step);
        tm_put(b, "<line class=\"median\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", fx(&f, rs[k].step),
               fx(&f, rs[k].step), y, y + 18);
    }
    tm_put(b, "</svg>\n");
}

/* Stacked bars: compute, exposed communication, data (median ms per step of each rank). */
static void chart_split(tm_sbuf *b, const run_data *r, const rank_stats *rs) {
    int rowh = 26, h = MT + MB + rowh * r->world;
    frame f = {.w = W, .h = h, .x0 = 0, .x1 = 0, .y0 = 0, .y1 = 1};
    for (int k = 0; k < r->world; k++) {
        double t = rs[k].compute + rs[k].exposed + rs[k].data;
        if (t > f.x1) f.x1 = t;
    }
    f.x1 = f.x1 > 0 ? f.x1 * 1.05 : 1;
    chart_begin(b, "split", "Where each rank's step goes (median ms)", &f, "ms per step", "rank");
    static const char *const cls[] = {"compute", "exposed", "data"};
    for (int k = 0; k < r->world; k++) {
        double y = MT + rowh * k + 4, v[3] = {rs[k].compute, rs[k].exposed, rs[k].data}, x = 0;
        tm_put(b, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%d</text>", ML - 4, y + 14, k);
        for (int q = 0; q < 3; q++) {
            tm_put(b, "<rect class=\"mark %s\" data-rank=\"%d\" data-value=\"%.3f\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                      "height=\"18\"><title>rank %d %s %.2f ms</title></rect>", cls[q], k, v[q], fx(&f, x), y,
                   fx(&f, x + v[q]) - fx(&f, x), k, cls[q], v[q]);
            x += v[q];
        }
        tm_put(b, "\n");
    }
    tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"legend compute\">&#9632; compute</text><text x=\"%d\" y=\"%d\" "
              "class=\"legend exposed\">&#9632; exposed communication</text><text x=\"%d\" y=\"%d\" class=\"legend "
              "data\">&#9632; data wait</text></svg>\n", ML, MT - 6, ML + 110, MT - 6, ML + 330, MT - 6);
}

/* The phases of a few consecutive steps (from the middle of the run) on every rank, on one time axis. */
static void chart_timeline(tm_sbuf *b, const run_data *r) {
    long show = r->n < 4 ? r->n : 4, lo = (r->n - show) / 2;
    if (show <= 0) return;
    int rowh = 26, h = MT + MB + rowh * r->world;
    frame f = {.w = W, .h = h, .x0 = INFINITY, .x1 = 0, .y0 = 0, .y1 = 1};
    for (int k = 0; k < r->world; k++)
        for (long i = lo; i < lo + show; i++) {
            const double *g = rec(r, k, i);
            if (g[TM_T0] < f.x0) f.x0 = g[TM_T0];
            if (g[TM_T0] + g[TM_STEP] > f.x1) f.x1 = g[TM_T0] + g[TM_STEP];
        }
    chart_begin(b, "timeline", "Timeline of a few steps (ms since the first step)", &f, "ms", "rank");
    static const int order[] = {TM_DATA, TM_FWD, TM_BWD, TM_EXPOSED, TM_OPT};
    static const char *const cls[] = {"data", "forward", "backward", "exposed", "optim"};
    for (int k = 0; k < r->world; k++) {
        double y = MT + rowh * k + 4;
        tm_put(b, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%d</text>", ML - 4, y + 14, k);
        for (long i = lo; i < lo + show; i++) {
            const double *g = rec(r, k, i);
            double t = g[TM_T0];
            for (int q = 0; q < 5; q++) {
                double d = g[order[q]];
                tm_put(b, "<rect class=\"mark %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"18\"><title>rank %d "
                          "step %ld %s %.2f ms</title></rect>", cls[q], fx(&f, t), y, fx(&f, t + d) - fx(&f, t), k,
                       r->first_step + i, cls[q], d);
                t += d;
            }
        }
        tm_put(b, "\n");
    }
    int lx = ML;
    for (int q = 0; q < 5; q++, lx += 110)
        tm_put(b, "<text x=\"%d\" y=\"%d\" class=\"legend %s\">&#9632; %s</text>", lx, MT - 6, cls[q], cls[q]);
    tm_put(b, "</svg>\n");
}

static const char style[] =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:820px}h1{font-size:22px}h2{font-size:16px;"
    "margin:22px 0 4px}.diag{background:#fff4d6;border-left:4px solid #e0a000;padding:10px 14px}"
    "svg{display:block;background:#fff}.frame{fill:none;stroke:#999}.tick{font-size:11px;fill:#555}"
    ".label{font-size:12px;fill:#333}polyline.mark{fill:none;stroke-width:1.5}.train{stroke:#1f77b4;fill:#1f77b4}"
    ".acc{stroke:#2ca02c}circle.eval{fill:#d62728}.legend{font-size:12px}.legend.evl{fill:#d62728}.legend.trn{fill:#1f77b4}"
    ".bar{fill:#1f77b4}.box{fill:#9ecae1;stroke:#1f77b4}.median{stroke:#08306b;stroke-width:2}"
    ".whisker{stroke:#555}.compute,.forward{fill:#1f77b4}.backward{fill:#6baed6}.exposed{fill:#d62728}"
    ".data{fill:#ff7f0e}.optim{fill:#2ca02c}table{border-collapse:collapse;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}";

static int render(const run_data *r, const char *source, tm_sbuf *b) {
    long cap = r->n > r->n_evals ? r->n : r->n_evals;
    double *x = malloc((size_t)(cap + 1) * sizeof *x), *y = malloc((size_t)(cap + 1) * sizeof *y);
    rank_stats *rs = calloc((size_t)r->world, sizeof *rs);
    if (!x || !y || !rs) {
        free(x);
        free(y);
        free(rs);
        return -1;
    }
    tm_put(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>baton run report</title>"
              "<style>%s</style></head><body>\n<h1>baton run report</h1>\n<p id=\"summary\">", style);
    esc(b, r->model);
    tm_put(b, " on ");
    esc(b, r->data);
    tm_put(b, ", ");
    esc(b, r->optim);
    tm_put(b, ", %ld parameters, %d rank(s), effective batch %ld, %ld steps from step %ld", r->params, r->world,
           r->effective_batch, r->n, r->first_step);
    if (r->n_evals)
        tm_put(b, "; final test accuracy <b id=\"final-acc\">%.2f %%</b>", 100.0 * r->evals[r->n_evals - 1].acc);
    tm_put(b, ". Metrics recording cost %.4f ms per step. Source: ", r->metrics_ms);
    esc(b, source);
    tm_put(b, "</p>\n<h2>Diagnosis</h2>\n<p class=\"diag\" id=\"diagnosis\">");
    esc(b, r->diag[0] ? r->diag : "(the metrics file holds no diagnosis)");
    tm_put(b, "</p>\n");
    if (r->bucket[0]) {
        tm_put(b, "<p id=\"bucket\">Gradient buckets: ");
        esc(b, r->bucket);
        tm_put(b, "</p>\n");
    }
    chart_loss(b, r, x, y);
    chart_accuracy(b, r, x, y);
    chart_throughput(b, r);
    for (int k = 0; k < r->world; k++) stats_of(r, k, x, &rs[k]);
    chart_steptime(b, r, rs);
    chart_split(b, r, rs);
    chart_timeline(b, r);
    tm_put(b, "<h2>Per rank (medians over steps %ld and later, ms)</h2>\n<table id=\"ranks\"><tr><th>rank</th>"
              "<th>step</th><th>compute</th><th>exposed comm</th><th>data wait</th><th>waited for peers</th></tr>\n",
           r->first_step + (r->n > TM_WARMUP_STEPS + 2 ? TM_WARMUP_STEPS : 0));
    for (int k = 0; k < r->world; k++)
        tm_put(b, "<tr class=\"rank\"><td>%d</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                  "</tr>\n", k, rs[k].step, rs[k].compute, rs[k].exposed, rs[k].data, rs[k].wait);
    tm_put(b, "</table>\n</body></html>\n");
    free(x);
    free(y);
    free(rs);
    return 0;
}

static const char usage_text[] =
    "usage: baton report RUN_DIR|METRICS.jsonl [-o report.html]\n"
    "  Draws the metrics of a baton train run (RUN_DIR/metrics.jsonl, written by default) as one self-contained\n"
    "  HTML page: curves, throughput, per-rank step times and their split, a timeline, the diagnosis.\n"
    "  -o FILE    where to write it (default RUN_DIR/report.html, or next to the metrics file)\n";

int baton_cmd_report(int argc, char **argv) {
    const char *in = NULL, *outp = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) return fail("%s: needs a file name (baton report RUN_DIR -o report.html)", argv[i]);
            outp = argv[++i];
        } else if (argv[i][0] == '-') {
            return fail("%s: unknown option (see baton report --help)", argv[i]);
        } else if (in) {
            return fail("%s: one run directory or metrics file only", argv[i]);
        } else {
            in = argv[i];
        }
    }
    if (!in) return fail("%s", "usage: baton report RUN_DIR|METRICS.jsonl [-o report.html]");
    char path[4200], out[4200];
    struct stat st;
    int is_dir = stat(in, &st) == 0 && S_ISDIR(st.st_mode);
    if (strlen(in) > 4000 || (outp && strlen(outp) > 4000)) return fail("%s", "path too long");
    if (is_dir) snprintf(path, sizeof path, "%s/metrics.jsonl", in);
    else snprintf(path, sizeof path, "%s", in);
    if (is_dir && stat(path, &st) != 0) {
        const char *csv = "";
        char p2[4300];
        snprintf(p2, sizeof p2, "%s/metrics.csv", in);
        if (stat(p2, &st) == 0) csv = " (it holds metrics.csv: baton report reads the JSON-lines form; train with "
                                      "--metrics FILE.jsonl)";
        fprintf(stderr, "baton report: %s: no metrics.jsonl in this directory%s\n", in, csv);
        return 2;
    }
    if (!is_dir && strlen(path) > 4 && !strcmp(path + strlen(path) - 4, ".csv"))
        return fail("%s: baton report reads the JSON-lines metrics (train with --metrics FILE.jsonl)", in);
    if (outp) {
        snprintf(out, sizeof out, "%s", outp);
    } else if (is_dir) {
        snprintf(out, sizeof out, "%s/report.html", in);
    } else {
        const char *slash = strrchr(in, '/');
        snprintf(out, sizeof out, "%.*sreport.html", slash ? (int)(slash - in + 1) : 0, in);
    }
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) return fail("-o %s: is a directory; name a file in it", out);
    run_data r;
    int rc = load(path, &r);
    if (rc) {
        free(r.rec);
        free(r.evals);
        return rc;
    }
    tm_sbuf b = {0};
    rc = render(&r, path, &b) < 0 || b.oom ? fail("%s", "out of memory") : 0;
    if (!rc && baton__write_atomic(out, b.p, b.len, 0) < 0) rc = fail("-o: %s", baton_last_error());
    if (!rc) printf("baton report: wrote %s (%zu bytes)\n", out, b.len);
    free(b.p);
    free(r.rec);
    free(r.evals);
    return rc;
}
