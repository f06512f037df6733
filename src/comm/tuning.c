/* tuning.c: the calibration file (comm/tuning.h): fitting, prediction, JSON, atomic private save. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "comm/tuning.h"
#include "util/files.h"
#include "util/util.h"

static const char *const link_names[BATON_LINK_COUNT] = {"shm", "tcp", "net"};

const char *baton__link_name(int l) { return l >= 0 && l < BATON_LINK_COUNT ? link_names[l] : "?"; }

int baton__link_parse(const char *s, int *out) {
    for (int i = 0; i < BATON_LINK_COUNT; i++)
        if (s && !strcmp(s, link_names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

void baton__tuning_free(baton_tuning *t) {
    free(t->points);
    free(t->fits);
    memset(t, 0, sizeof *t);
}

int baton__tuning_add(baton_tuning *t, int link, baton_algo algo, int ranks, double bytes, double secs) {
    if (t->npoints >= BATON_TUNING_MAX) return baton__fail(BATON_ERANGE, "calibration: more than %d points", BATON_TUNING_MAX);
    if (!t->points && !(t->points = calloc(BATON_TUNING_MAX, sizeof *t->points)))
        return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    baton_tuning_point p = {link, ranks, algo, bytes, secs};
    t->points[t->npoints++] = p;
    return BATON_OK;
}

/* ---- fitting ---------------------------------------------------------------------------------------- */

/* 2 %: two algorithms a few % apart at a measured size must keep their order in the fits, or --algo auto
 * takes the slower (with 10 %, a ring point at the start of a range, 9 % below the rest, was fitted 5.7 %
 * high, above an rd 5.5 % slower: tests/test_plan.c tuning_fit_keeps_the_order_of_close_algorithms) */
#define FIT_TOL 0.02
#define STALL_GROWTH 3.0
#define STALL_NEAR 0.9
#define STALL_BUMP 1.5

/* Relative least squares of y = a + b x over points [i, j]: minimizes sum ((a + b x - y) / y)^2. */
static void fit_line(const double *x, const double *y, int i, int j, double *a, double *b) {
    double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
    for (int k = i; k <= j; k++) {
        double u = 1 / y[k];
        s11 += u * u, s12 += x[k] * u * u, s22 += x[k] * x[k] * u * u, r1 += u, r2 += x[k] * u;
    }
    double det = s11 * s22 - s12 * s12;
    if (j == i || fabs(det) <= 1e-300 * (s11 * s22)) {
        *a = y[i], *b = 0;
        return;
    }
    *a = (r1 * s22 - r2 * s12) / det;
    *b = (s11 * r2 - s12 * r1) / det;
}

static int line_fits(const double *x, const double *y, int i, int j, double a, double b) {
    for (int k = i; k <= j; k++)
        if (fabs(a + b * x[k] - y[k]) > FIT_TOL * y[k]) return 0;
    return 1;
}

static int cmp_point(const void *pa, const void *pb) {
    const baton_tuning_point *a = pa, *b = pb;
    if (a->link != b->link) return a->link - b->link;
    if (a->algo != b->algo) return (int)a->algo - (int)b->algo;
    if (a->ranks != b->ranks) return a->ranks - b->ranks;
    return (a->bytes > b->bytes) - (a->bytes < b->bytes);
}

static int add_fit(baton_tuning *t, const baton_tuning_point *g, double lo, double hi, double a, double b) {
    if (t->nfits >= BATON_TUNING_MAX) return baton__fail(BATON_ERANGE, "calibration: more than %d fits", BATON_TUNING_MAX);
    baton_tuning_fit f = {g->link, g->ranks, g->algo, lo, hi, a, b};
    t->fits[t->nfits++] = f;
    return BATON_OK;
}

double baton__tuning_cpu_share(const baton_tuning *t, int link, int ranks) {
    if (link == BATON_LINK_NET || t->cpus <= 0 || ranks <= t->cpus) return 1.0;
    return (double)ranks / t->cpus;
}

/* alpha and 1/beta of one link from its ring points: t = share x (2(K-1) alpha + 2(K-1)/K n / beta), relative
 * LS, share = baton__tuning_cpu_share. */
static void fit_link(baton_tuning *t, int link) {
    double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
    int n = 0;
    for (int i = 0; i < t->npoints; i++) {
        const baton_tuning_point *p = &t->points[i];
        if (p->link != link || p->algo != BATON_ALGO_RING || p->ranks < 2) continue;
        double u = baton__tuning_cpu_share(t, link, p->ranks) / p->secs;
        double f1 = 2.0 * (p->ranks - 1) * u, f2 = 2.0 * (p->ranks - 1) / p->ranks * p->bytes * u;
        s11 += f1 * f1, s12 += f1 * f2, s22 += f2 * f2, r1 += f1, r2 += f2;
        n++;
    }
    double det = s11 * s22 - s12 * s12;
    if (n < 2 || det <= 0) return;
    double alpha = (r1 * s22 - r2 * s12) / det, inv_beta = (s11 * r2 - s12 * r1) / det;
    if (inv_beta <= 0) return; /* no bandwidth visible (sizes too small, or noise): no link */
    if (alpha <= 0) alpha = 1e-9;
    t->have_link[link] = 1;
    t->link[link].lat_s = alpha;
    t->link[link].bw_Bps = 1 / inv_beta;
}

int baton__tuning_fit(baton_tuning *t) {
    free(t->fits);
    t->nfits = 0;
    memset(t->have_link, 0, sizeof t->have_link);
    if (!(t->fits = calloc(BATON_TUNING_MAX, sizeof *t->fits))) return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    if (!t->npoints) return BATON_OK;
    qsort(t->points, (size_t)t->npoints, sizeof *t->points, cmp_point);
    double *x = malloc(sizeof(double) * (size_t)t->npoints), *y = malloc(sizeof(double) * (size_t)t->npoints);
    if (!x || !y) {
        free(x), free(y);
        return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    }
    int rc = BATON_OK;
    for (int g0 = 0; g0 < t->npoints && rc >= 0;) {
        const baton_tuning_point *g = &t->points[g0];
        int m = 0, g1 = g0;
        /* one group: same link, algorithm and ranks; duplicate sizes averaged (the caller gives medians) */
        for (; g1 < t->npoints && t->points[g1].link == g->link && t->points[g1].algo == g->algo && t->points[g1].ranks == g->ranks; g1++) {
            if (m && x[m - 1] == t->points[g1].bytes) {
                y[m - 1] = (y[m - 1] + t->points[g1].secs) / 2;
                continue;
            }
            x[m] = t->points[g1].bytes, y[m] = t->points[g1].secs, m++;
        }
        /* On one node a bigger all-reduce with the same algorithm never takes less time; a point slower
         * than a bigger size's is a stall the machine added (a descheduled rank, a late wake-up), not the
         * algorithm: it is fitted at the bigger size's time. Not across nodes: there the network's own
         * behaviour can make a size reproducibly slower than a bigger one (docs/plan.md). */
        for (int k = m - 2; k >= 0 && g->link != BATON_LINK_NET; k--)
            if (y[k] > y[k + 1]) y[k] = y[k + 1];
        /* A stall can also leave a point just below the next size's: where the time grows with the bytes
         * (the next size takes STALL_GROWTH times the previous one's or more, so the line through them is
         * nearly proportional and a size takes at most 0.56 of the next one's time), a point at
         * STALL_NEAR of the next one's or more is a stall: it is fitted on the line between its neighbours.
         * (tcp, 2 ranks: ring at 64 MiB 97.6 ms between 18.5 ms at 32 MiB and 78.5 ms at 128 MiB, in the
         * 09:53 calibration; auto took rd there, ring was 1.32x faster: docs/measurements/plan-history.md,
         * "Calibration".) */
        for (int k = 1; k + 1 < m && g->link != BATON_LINK_NET; k++)
            if (y[k + 1] >= STALL_GROWTH * y[k - 1] && y[k] >= STALL_NEAR * y[k + 1])
                y[k] = y[k - 1] + (y[k + 1] - y[k - 1]) * (x[k] - x[k - 1]) / (x[k + 1] - x[k - 1]);
        /* A stall over several sizes is a bump in the cost per byte: points that cost more than STALL_BUMP
         * times the previous size's per byte, then a bigger size back within STALL_BUMP of it, and every
         * point in between more than STALL_BUMP times that bigger size's per byte too. A real step (a new
         * path, a cache size, a socket buffer) keeps its higher cost per byte on the bigger sizes, or falls
         * back slowly as its latency is amortized, and is kept; the bump is fitted on the line between the
         * points on either side. (tcp, 2 ranks, the 13:08 quiet calibration: ring at 8.6, 61.6, 94.7 and
         * 83.3 ms for 16, 32, 64 and 128 MiB; auto took rd at 32 and 64 MiB and the check, minutes later,
         * measured ring 1.27x and 1.26x faster, at 19.0 and 36.5 ms. Over the nine quiet calibrations in
         * docs/measurements and /work/quiet this rule changes those two points and no other.) */
        for (int k = 1; k < m && g->link != BATON_LINK_NET; k++) {
            double c0 = y[k - 1] / x[k - 1];
            if (y[k] / x[k] <= STALL_BUMP * c0) continue;
            int j = k + 1;
            while (j < m && y[j] / x[j] > STALL_BUMP * c0) j++;
            if (j == m) continue; /* the cost per byte stays high: a step, not a stall */
            int bump = 1;
            for (int q = k; q < j; q++) bump &= y[q] / x[q] > STALL_BUMP * (y[j] / x[j]);
            if (!bump) continue; /* a step whose cost per byte falls back slowly */
            for (int q = k; q < j; q++) y[q] = y[k - 1] + (y[j] - y[k - 1]) * (x[q] - x[k - 1]) / (x[j] - x[k - 1]);
            k = j;
        }
        /* greedy ranges: grow while one line still predicts every point within FIT_TOL */
        for (int i = 0; i < m && rc >= 0;) {
            double a, b;
            int j = i + 1 < m ? i + 1 : i;
            fit_line(x, y, i, j, &a, &b);
            while (j + 1 < m) {
                double a2, b2;
                fit_line(x, y, i, j + 1, &a2, &b2);
                if (!line_fits(x, y, i, j + 1, a2, b2)) break;
                a = a2, b = b2, j++;
            }
            rc = add_fit(t, g, x[i], x[j], a, b);
            if (j == i) break;
            i = j == m - 1 ? m : j;
        }
        g0 = g1;
    }
    free(x), free(y);
    for (int l = 0; l < BATON_LINK_COUNT; l++) fit_link(t, l);
    return rc;
}

/* ---- prediction ------------------------------------------------------------------------------------- */

static baton_model_algo model_of(baton_algo a) {
    return a == BATON_ALGO_RD ? BATON_MODEL_RD : a == BATON_ALGO_DIRECT ? BATON_MODEL_DIRECT : BATON_MODEL_RING;
}

/* The prediction of the fits of exactly this (link, algo, ranks); ENOTFOUND if there are none. */
static int predict_exact(const baton_tuning *t, int link, baton_algo algo, int ranks, double bytes, double *secs) {
    const baton_tuning_fit *first = NULL, *last = NULL;
    for (int i = 0; i < t->nfits; i++) {
        const baton_tuning_fit *f = &t->fits[i];
        if (f->link != link || f->algo != algo || f->ranks != ranks) continue;
        if (!first || f->lo < first->lo) first = f;
        if (!last || f->hi > last->hi) last = f;
        if (bytes >= f->lo && bytes <= f->hi) {
            double v = f->a_s + f->b_s * bytes;
            *secs = v > 0 ? v : f->a_s + f->b_s * f->lo;
            if (*secs <= 0) *secs = 1e-9;
            return BATON_OK;
        }
    }
    if (!first) return BATON_ENOTFOUND;
    /* below the measured range: the smallest size's time (latency-bound) */
    if (bytes < first->lo) {
        double v = first->a_s + first->b_s * first->lo;
        *secs = v > 0 ? v : 1e-9;
        return BATON_OK;
    }
    /* above it: the largest size's time plus the extra bytes at the alpha-beta link's cost per byte (the
     * last line's own slope is noise-prone when it spans few points); the last line's slope without a link */
    double top = last->a_s + last->b_s * last->hi, slope = last->b_s;
    if (t->have_link[link])
        slope = baton__model_flat(model_of(algo), bytes, ranks, t->link[link]).bw_s / bytes * baton__tuning_cpu_share(t, link, ranks);
    if (top <= 0) top = 1e-9;
    *secs = slope > 0 ? top + slope * (bytes - last->hi) : top * bytes / last->hi;
    return BATON_OK;
}

int baton__tuning_predict(const baton_tuning *t, int link, baton_algo algo, int ranks, double bytes, double *secs) {
    if (predict_exact(t, link, algo, ranks, bytes, secs) == BATON_OK) return BATON_OK;
    /* the nearest measured world size, scaled by the model's ratio */
    int best = -1;
    for (int i = 0; i < t->nfits; i++) {
        const baton_tuning_fit *f = &t->fits[i];
        if (f->link != link || f->algo != algo) continue;
        if (best < 0 || abs(f->ranks - ranks) < abs(best - ranks) || (abs(f->ranks - ranks) == abs(best - ranks) && f->ranks > best))
            best = f->ranks;
    }
    if (best < 0) return BATON_ENOTFOUND;
    double base;
    predict_exact(t, link, algo, best, bytes, &base);
    if (t->have_link[link]) {
        double num = baton__model_flat(model_of(algo), bytes, ranks, t->link[link]).total_s;
        double den = baton__model_flat(model_of(algo), bytes, best, t->link[link]).total_s;
        if (num > 0 && den > 0) base *= num / den;
    }
    base *= baton__tuning_cpu_share(t, link, ranks) / baton__tuning_cpu_share(t, link, best);
    *secs = base;
    return BATON_OK;
}

baton_algo baton__tuning_best(const baton_tuning *t, int link, const baton_algo *cands, int n, int ranks, double bytes) {
    baton_algo best = BATON_ALGO_AUTO;
    double best_s = INFINITY;
    for (int i = 0; i < n; i++) {
        double s;
        if (baton__tuning_predict(t, link, cands[i], ranks, bytes, &s) == BATON_OK && s < best_s) best = cands[i], best_s = s;
    }
    return best;
}

/* ---- the file --------------------------------------------------------------------------------------- */

char *baton__tuning_to_json(const baton_tuning *t) {
    cJSON *j = cJSON_CreateObject(), *links = cJSON_AddArrayToObject(j, "links"), *fits, *pts;
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddStringToObject(j, "about", t->about);
    if (t->cpus > 0) cJSON_AddNumberToObject(j, "cpus", t->cpus);
    for (int l = 0; l < BATON_LINK_COUNT; l++) {
        if (!t->have_link[l]) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "transport", link_names[l]);
        cJSON_AddNumberToObject(e, "lat_us", t->link[l].lat_s * 1e6);
        cJSON_AddNumberToObject(e, "bw_gbs", t->link[l].bw_Bps / 1e9);
        cJSON_AddItemToArray(links, e);
    }
    fits = cJSON_AddArrayToObject(j, "fits");
    for (int i = 0; i < t->nfits; i++) {
        const baton_tuning_fit *f = &t->fits[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "transport", link_names[f->link]);
        cJSON_AddStringToObject(e, "algo", baton_algo_name(f->algo));
        cJSON_AddNumberToObject(e, "ranks", f->ranks);
        cJSON_AddNumberToObject(e, "lo", f->lo);
        cJSON_AddNumberToObject(e, "hi", f->hi);
        cJSON_AddNumberToObject(e, "a_us", f->a_s * 1e6);
        cJSON_AddNumberToObject(e, "b_us_per_byte", f->b_s * 1e6);
        cJSON_AddItemToArray(fits, e);
    }
    pts = cJSON_AddArrayToObject(j, "points");
    for (int i = 0; i < t->npoints; i++) {
        const baton_tuning_point *p = &t->points[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "transport", link_names[p->link]);
        cJSON_AddStringToObject(e, "algo", baton_algo_name(p->algo));
        cJSON_AddNumberToObject(e, "ranks", p->ranks);
        cJSON_AddNumberToObject(e, "bytes", p->bytes);
        cJSON_AddNumberToObject(e, "us", p->secs * 1e6);
        cJSON_AddItemToArray(pts, e);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static int get_num(const cJSON *o, const char *k, double lo, double hi, double *out, const char *what, int i) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return baton__fail(BATON_EFORMAT, "calibration: %s[%d].%s is missing or not a number in [%g, %g]", what, i, k, lo, hi);
    *out = v->valuedouble;
    return BATON_OK;
}

/* transport, algo, ranks of entry i */
static int get_key(const cJSON *o, const char *what, int i, int *link, baton_algo *algo, int *ranks) {
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(o, "transport");
    if (!cJSON_IsString(tr) || baton__link_parse(tr->valuestring, link) < 0)
        return baton__fail(BATON_EFORMAT, "calibration: %s[%d].transport is not shm, tcp or net", what, i);
    if (!algo) return BATON_OK;
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(o, "algo");
    if (!cJSON_IsString(al) || baton_algo_parse(al->valuestring, algo) < 0 || *algo == BATON_ALGO_AUTO)
        return baton__fail(BATON_EFORMAT, "calibration: %s[%d].algo is not ring, rd, direct or hier", what, i);
    double r;
    int rc = get_num(o, "ranks", 1, 1 << 20, &r, what, i);
    if (rc < 0) return rc;
    if (r != floor(r)) return baton__fail(BATON_EFORMAT, "calibration: %s[%d].ranks is not a whole number", what, i);
    *ranks = (int)r;
    return BATON_OK;
}

int baton__tuning_parse(const char *text, size_t len, baton_tuning *t) {
    memset(t, 0, sizeof *t);
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) return baton__fail(BATON_EFORMAT, "calibration: not JSON");
    int rc = BATON_OK;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version"), *about = cJSON_GetObjectItemCaseSensitive(j, "about");
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(j, "links"), *fits = cJSON_GetObjectItemCaseSensitive(j, "fits");
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(j, "points");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        rc = baton__fail(BATON_EFORMAT, "calibration: version is not 1 (remake it with baton plan calibrate)");
        goto out;
    }
    if (!cJSON_IsArray(links) || !cJSON_IsArray(fits) || !cJSON_IsArray(pts)) {
        rc = baton__fail(BATON_EFORMAT, "calibration: links, fits and points must be arrays");
        goto out;
    }
    if (cJSON_GetArraySize(fits) > BATON_TUNING_MAX || cJSON_GetArraySize(pts) > BATON_TUNING_MAX) {
        rc = baton__fail(BATON_EFORMAT, "calibration: more than %d fits or points", BATON_TUNING_MAX);
        goto out;
    }
    if (cJSON_IsString(about)) snprintf(t->about, sizeof t->about, "%s", about->valuestring);
    const cJSON *cpus = cJSON_GetObjectItemCaseSensitive(j, "cpus");
    if (cpus) {
        if (!cJSON_IsNumber(cpus) || cpus->valuedouble < 1 || cpus->valuedouble > 1 << 20 || cpus->valuedouble != floor(cpus->valuedouble)) {
            rc = baton__fail(BATON_EFORMAT, "calibration: cpus is not a whole number in [1, %d]", 1 << 20);
            goto out;
        }
        t->cpus = (int)cpus->valuedouble;
    }
    t->fits = calloc(BATON_TUNING_MAX, sizeof *t->fits);
    t->points = calloc(BATON_TUNING_MAX, sizeof *t->points);
    if (!t->fits || !t->points) {
        rc = baton__fail(BATON_ENOMEM, "calibration: out of memory");
        goto out;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, links) {
        int l;
        double lat, bw;
        if ((rc = get_key(e, "links", i, &l, NULL, NULL)) < 0 || (rc = get_num(e, "lat_us", 0, 1e9, &lat, "links", i)) < 0 ||
            (rc = get_num(e, "bw_gbs", 1e-12, 1e9, &bw, "links", i)) < 0)
            goto out;
        t->have_link[l] = 1;
        t->link[l].lat_s = lat * 1e-6;
        t->link[l].bw_Bps = bw * 1e9;
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(e, fits) {
        baton_tuning_fit *f = &t->fits[t->nfits];
        double a, b;
        if ((rc = get_key(e, "fits", i, &f->link, &f->algo, &f->ranks)) < 0 || (rc = get_num(e, "lo", 0, 1e18, &f->lo, "fits", i)) < 0 ||
            (rc = get_num(e, "hi", f->lo, 1e18, &f->hi, "fits", i)) < 0 || (rc = get_num(e, "a_us", -1e12, 1e12, &a, "fits", i)) < 0 ||
            (rc = get_num(e, "b_us_per_byte", -1e6, 1e6, &b, "fits", i)) < 0)
            goto out;
        f->a_s = a * 1e-6, f->b_s = b * 1e-6;
        t->nfits++, i++;
    }
    i = 0;
    cJSON_ArrayForEach(e, pts) {
        baton_tuning_point *p = &t->points[t->npoints];
        double us;
        if ((rc = get_key(e, "points", i, &p->link, &p->algo, &p->ranks)) < 0 ||
            (rc = get_num(e, "bytes", 0, 1e18, &p->bytes, "points", i)) < 0 || (rc = get_num(e, "us", 1e-6, 1e15, &us, "points", i)) < 0)
            goto out;
        p->secs = us * 1e-6;
        t->npoints++, i++;
    }
out:
    cJSON_Delete(j);
    if (rc < 0) baton__tuning_free(t);
    return rc;
}

int baton__tuning_load(const char *path, baton_tuning *t) {
    void *buf;
    size_t len;
    int rc = baton__read_file(path, (size_t)16 << 20, &buf, &len);
    if (rc < 0) return rc == BATON_ENOTFOUND ? baton__fail(rc, "calibration file %s does not exist (make one with baton plan calibrate)", path) : rc;
    rc = baton__tuning_parse(buf, len, t);
    free(buf);
    if (rc < 0) return baton__fail_ctx(rc, "%s: ", path);
    return BATON_OK;
}

int baton__tuning_save(const char *path, const baton_tuning *t) {
    char *s = baton__tuning_to_json(t);
    if (!s) return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    int rc = baton__write_atomic(path, s, strlen(s), BATON_FILE_PRIVATE);
    free(s);
    return rc;
}

int baton__tuning_default_path(char *out, size_t n) {
    char dir[512];
    int rc = baton__private_dir(dir, sizeof dir);
    if (rc < 0) return rc;
    if ((size_t)snprintf(out, n, "%s/tuning.json", dir) >= n) return baton__fail(BATON_ERANGE, "calibration path too long");
    return BATON_OK;
}
