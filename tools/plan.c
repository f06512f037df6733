/* plan.c: `baton plan SUBCOMMAND`: predicts a data-parallel job before it is launched, from the cost
 * model in src/comm/model.h (formulas and examples in docs/plan.md). This file holds the dispatch, the
 * flag parser every subcommand shares, `plan allreduce` and `plan train`.
 *
 * Every figure is computed from unrounded values and rounded only when printed, so the published examples
 * come out digit for digit (tests/test_plan.c checks them as printed text). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plan.h"

/* ---- flags ------------------------------------------------------------------------------------------ */

int plan_error(const char *sub, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "baton plan %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

static void flag_usage(const char *sub, const plan_flag *flags, int nflags) {
    printf("usage: baton plan %s [options]\n", sub);
    for (int i = 0; i < nflags; i++) {
        const char *arg = flags[i].kind == 'f' ? "" : flags[i].kind == 's' ? " S" : flags[i].kind == 'l' || flags[i].kind == 'k' ? " X,Y,..." : " X";
        char left[64];
        snprintf(left, sizeof left, "%s%s", flags[i].name, arg);
        printf("  %-24s %s\n", left, flags[i].help);
    }
    printf("  %-24s %s\n", "--help", "this text");
}

/* Strict: the whole string is a finite number. */
static int parse_num(const char *s, double *out) {
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int bad_value(const char *sub, const plan_flag *f, const char *val) {
    const char *what = f->kind == 'i' || f->kind == 'k' ? "a whole number" : "a finite number";
    const char *each = f->kind == 'l' || f->kind == 'k' ? "each value must be " : "must be ";
    return plan_error(sub, "bad value '%s' for %s: %s%s from %g to %g (see baton plan %s --help)", val, f->name, each,
                      what, f->min, f->max, sub);
}

static int set_value(const char *sub, const plan_flag *f, const char *val) {
    double v;
    switch (f->kind) {
    case 's':
        if (!*val) return plan_error(sub, "%s needs a non-empty value", f->name);
        *(const char **)f->dst = val;
        return 0;
    case 'd':
    case 'i':
        if (parse_num(val, &v) < 0 || v < f->min || v > f->max || (f->kind == 'i' && v != floor(v)))
            return bad_value(sub, f, val);
        if (f->kind == 'd')
            *(double *)f->dst = v;
        else
            *(int *)f->dst = (int)v;
        return 0;
    case 'l':
    case 'k': {
        plan_list *l = f->dst;
        l->n = 0;
        char buf[1024];
        if (strlen(val) >= sizeof buf) return plan_error(sub, "%s: list too long (at most %d values)", f->name, PLAN_LIST_MAX);
        strcpy(buf, val);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (l->n == PLAN_LIST_MAX) return plan_error(sub, "%s: at most %d values", f->name, PLAN_LIST_MAX);
            if (parse_num(tok, &v) < 0 || v < f->min || v > f->max || (f->kind == 'k' && v != floor(v)))
                return bad_value(sub, f, val);
            l->v[l->n++] = v;
        }
        if (l->n == 0 || val[strlen(val) - 1] == ',' || val[0] == ',' || strstr(val, ",,")) return bad_value(sub, f, val);
        return 0;
    }
    default:
        return -1;
    }
}

int plan_parse(const char *sub, int argc, char **argv, const plan_flag *flags, int nflags, int *seen) {
    for (int i = 0; i < nflags; i++) seen[i] = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            flag_usage(sub, flags, nflags);
            return 1;
        }
        if (strncmp(arg, "--", 2)) return plan_error(sub, "unexpected argument '%s' (see baton plan %s --help)", arg, sub);
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        int k = -1;
        for (int i = 0; i < nflags; i++)
            if (strlen(flags[i].name) == nlen && !strncmp(flags[i].name, arg, nlen)) k = i;
        if (k < 0) return plan_error(sub, "unknown option '%.*s' (see baton plan %s --help)", (int)nlen, arg, sub);
        const plan_flag *f = &flags[k];
        if (seen[k]) return plan_error(sub, "%s given twice", f->name);
        seen[k] = 1;
        if (f->kind == 'f') {
            if (eq) return plan_error(sub, "%s takes no value", f->name);
            *(int *)f->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (a + 1 >= argc) return plan_error(sub, "option %s needs a value (see baton plan %s --help)", f->name, sub);
            val = argv[++a];
        }
        if (set_value(sub, f, val) < 0) return -1;
    }
    return 0;
}

void plan_print_json(cJSON *j) {
    char *s = cJSON_Print(j);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(j);
}

const char *plan_bytes(double b, char *buf, size_t n) {
    if (b >= 1e12)
        snprintf(buf, n, "%.2f TB", b / 1e12);
    else if (b >= 1e9)
        snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(buf, n, "%.2f kB", b / 1e3);
    else
        snprintf(buf, n, "%.0f B", b);
    return buf;
}

const char *plan_secs(double s, char *buf, size_t n) {
    if (s >= 1)
        snprintf(buf, n, "%.2f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.2f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f us", s * 1e6);
    return buf;
}

/* ---- allreduce -------------------------------------------------------------------------------------- */

#define MAX_BYTES 1e18
#define MAX_RANKS 1048576

typedef struct {
    double params, bpp, bytes, compute_ms, intra_bw, intra_lat;
    int ranks, nodes, rpn, json;
    plan_list bw, lat;
    const char *algo, *calibrated, *link, *plot;
} ar_opts;

static int ar_link(const ar_opts *o, int i, baton_link_params *l) {
    double bw = o->bw.v[o->bw.n == 1 ? 0 : i], lat = o->lat.v[o->lat.n == 1 ? 0 : i];
    l->bw_Bps = bw * 1e9;
    l->lat_s = lat * 1e-6;
    return 0;
}


static baton_model_time ar_time(const ar_opts *o, baton_model_algo algo, baton_link_params intra, int i, double bytes,
                                int ranks) {
    baton_link_params l;
    ar_link(o, i, &l);
    if (algo != BATON_MODEL_HIER) return baton__model_flat(algo, bytes, ranks, l);
    int nodes = ranks / o->rpn;
    return baton__model_hier(bytes, nodes > 0 ? nodes : 1, o->rpn, intra, l);
}

/* Time against size (8 B to 4x the buffer) and efficiency (or time) against K, one curve per link. */
static int ar_plot(const char *sub, const ar_opts *o, baton_model_algo algo, baton_link_params intra, int nlinks,
                   int have_compute) {
    enum { NS = 64, NK = 21 };
    static double xs[8][NS], ts[8][NS], ks[8][NK], es[8][NK];
    static char labels[8][64];
    plot_panel p[2] = {{.title = "all-reduce time against size", .xlabel = "bytes", .ylabel = "seconds", .log_x = 1, .log_y = 1},
                       {.title = have_compute ? "efficiency against K" : "all-reduce time against K", .xlabel = "ranks K",
                        .ylabel = have_compute ? "efficiency" : "seconds", .log_x = 1, .log_y = !have_compute}};
    for (int i = 0; i < nlinks && i < 8; i++) {
        int n = 0, m = 0;
        for (double b = 8; b <= 4 * o->bytes && n < NS; b *= 2, n++)
            xs[i][n] = b, ts[i][n] = ar_time(o, algo, intra, i, b, o->ranks).total_s;
        int step = algo == BATON_MODEL_HIER ? o->rpn : 1;
        for (double k = step > 1 ? step : 2; k <= (double)step * 65536 && k <= MAX_RANKS && m < NK; k *= 2, m++) {
            double t = ar_time(o, algo, intra, i, o->bytes, (int)k).total_s;
            ks[i][m] = k, es[i][m] = have_compute ? baton__model_efficiency(o->compute_ms * 1e-3, t) : t;
        }
        snprintf(labels[i], sizeof labels[i], "%g GB/s, %g us", o->bw.v[o->bw.n == 1 ? 0 : i], o->lat.v[o->lat.n == 1 ? 0 : i]);
        p[0].s[p[0].nseries++] = (plot_series){labels[i], n, xs[i], ts[i], 0};
        p[1].s[p[1].nseries++] = (plot_series){labels[i], m, ks[i], es[i], 0};
    }
    return plan_plot_svg(sub, o->plot, p, 2);
}

static int plan_allreduce(int argc, char **argv) {
    const char *sub = "allreduce";
    ar_opts o = {.bpp = 0, .algo = "ring"};
    plan_flag flags[] = {
        {"--params", 'd', 1, 1e15, &o.params, "parameters in the gradient (with --bytes-per-param)"},
        {"--bytes-per-param", 'd', 0.125, 64, &o.bpp, "bytes per gradient element (2 for fp16/bf16, 4 for fp32)"},
        {"--bytes", 'd', 1, MAX_BYTES, &o.bytes, "the all-reduced buffer in bytes (instead of --params)"},
        {"--ranks", 'i', 1, MAX_RANKS, &o.ranks, "ranks K (flat algorithms)"},
        {"--bw-gbs", 'l', 1e-6, 1e6, &o.bw, "link bandwidth(s) in GB/s (10^9 bytes/s); hier: the inter-node link"},
        {"--lat-us", 'l', 0, 1e7, &o.lat, "link latency(ies) in microseconds, one per --bw-gbs (or one for all)"},
        {"--compute-ms", 'd', 1e-6, 1e9, &o.compute_ms, "compute per step in ms: gives the efficiency"},
        {"--algo", 's', 0, 0, &o.algo, "ring | tree | rd | direct | hier (default ring)"},
        {"--nodes", 'i', 1, MAX_RANKS, &o.nodes, "hier: nodes M"},
        {"--ranks-per-node", 'i', 1, 4096, &o.rpn, "hier: ranks per node L"},
        {"--intra-bw-gbs", 'd', 1e-6, 1e6, &o.intra_bw, "hier: intra-node bandwidth, GB/s"},
        {"--intra-lat-us", 'd', 0, 1e7, &o.intra_lat, "hier: intra-node latency, microseconds"},
        {"--calibrated", 's', 0, 0, &o.calibrated, "FILE from `baton plan calibrate`: predict baton bench on this machine"},
        {"--link", 's', 0, 0, &o.link, "with --calibrated: shm | tcp (default shm)"},
        {"--plot", 's', 0, 0, &o.plot, "FILE.svg: time against size and efficiency against K (calibrated: measured points overlaid)"},
        {"--json", 'f', 0, 0, &o.json, "machine-readable output"},
    };
    enum { F_PARAMS, F_BPP, F_BYTES, F_RANKS, F_BW, F_LAT, F_COMPUTE, F_ALGO, F_NODES, F_RPN, F_IBW, F_ILAT, F_CAL, F_LINK, F_PLOT };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[32];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (seen[F_BYTES] && (seen[F_PARAMS] || seen[F_BPP]))
        return plan_error(sub, "give either --bytes or --params with --bytes-per-param, not both"), 2;
    if (!seen[F_BYTES]) {
        if (!seen[F_PARAMS] || !seen[F_BPP])
            return plan_error(sub, "say how big the gradient is: --params N --bytes-per-param B, or --bytes N"), 2;
        o.bytes = o.params * o.bpp;
        if (o.bytes > MAX_BYTES) return plan_error(sub, "--params x --bytes-per-param is %g bytes, more than %g", o.bytes, MAX_BYTES), 2;
    }
    if (o.plot && plan_plot_check(sub, o.plot) < 0) return 2;
    if (seen[F_CAL]) {
        if (!seen[F_RANKS]) return plan_error(sub, "--calibrated needs --ranks"), 2;
        if (seen[F_BW] || seen[F_LAT] || seen[F_ALGO] || seen[F_NODES])
            return plan_error(sub, "--calibrated takes the link from the file: drop --bw-gbs, --lat-us, --algo and --nodes"), 2;
        return plan_cmd_calibrated(sub, o.calibrated, seen[F_LINK] ? o.link : "shm", o.ranks, o.bytes, o.json, o.plot);
    }
    if (seen[F_LINK]) return plan_error(sub, "--link goes with --calibrated FILE"), 2;
    baton_model_algo algo;
    if (baton__model_algo_parse(o.algo, &algo) < 0)
        return plan_error(sub, "bad value '%s' for --algo: expected ring, tree, rd, direct or hier", o.algo), 2;
    if (!seen[F_BW] || !seen[F_LAT]) return plan_error(sub, "give the link: --bw-gbs GB/s and --lat-us microseconds"), 2;
    if (o.bw.n > 1 && o.lat.n > 1 && o.bw.n != o.lat.n)
        return plan_error(sub, "--bw-gbs has %d values and --lat-us %d: give as many of each, or one latency for all", o.bw.n, o.lat.n), 2;
    int nlinks = o.bw.n > o.lat.n ? o.bw.n : o.lat.n;
    if (algo == BATON_MODEL_HIER) {
        if (!seen[F_NODES] || !seen[F_RPN] || !seen[F_IBW] || !seen[F_ILAT])
            return plan_error(sub, "--algo hier needs --nodes, --ranks-per-node, --intra-bw-gbs and --intra-lat-us"), 2;
        if (seen[F_RANKS] && o.ranks != o.nodes * o.rpn)
            return plan_error(sub, "--ranks %d is not --nodes x --ranks-per-node = %d", o.ranks, o.nodes * o.rpn), 2;
        if ((double)o.nodes * o.rpn > MAX_RANKS) return plan_error(sub, "--nodes x --ranks-per-node is more than %d ranks", MAX_RANKS), 2;
        o.ranks = o.nodes * o.rpn;
    } else {
        if (seen[F_NODES] || seen[F_RPN] || seen[F_IBW] || seen[F_ILAT])
            return plan_error(sub, "--nodes, --ranks-per-node, --intra-bw-gbs and --intra-lat-us go with --algo hier"), 2;
        if (!seen[F_RANKS]) return plan_error(sub, "give the number of ranks: --ranks K"), 2;
    }
    int have_compute = seen[F_COMPUTE];
    double compute_s = o.compute_ms * 1e-3;
    baton_link_params intra = {o.intra_lat * 1e-6, o.intra_bw * 1e9};

    baton_model_time t[PLAN_LIST_MAX];
    double eff[PLAN_LIST_MAX];
    for (int i = 0; i < nlinks; i++) {
        baton_link_params l;
        ar_link(&o, i, &l);
        t[i] = algo == BATON_MODEL_HIER ? baton__model_hier(o.bytes, o.nodes, o.rpn, intra, l)
                                        : baton__model_flat(algo, o.bytes, o.ranks, l);
        eff[i] = baton__model_efficiency(compute_s, t[i].total_s);
    }
    char b1[64], b2[64], b3[64], b4[64];
    if (o.plot && ar_plot(sub, &o, algo, intra, nlinks, have_compute) < 0) return 1;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "allreduce");
        cJSON_AddStringToObject(j, "algo", baton__model_algo_name(algo));
        cJSON_AddNumberToObject(j, "bytes", o.bytes);
        cJSON_AddNumberToObject(j, "ranks", o.ranks);
        if (algo == BATON_MODEL_HIER) {
            cJSON_AddNumberToObject(j, "nodes", o.nodes);
            cJSON_AddNumberToObject(j, "ranks_per_node", o.rpn);
        }
        if (have_compute) cJSON_AddNumberToObject(j, "compute_ms", o.compute_ms);
        cJSON *arr = cJSON_AddArrayToObject(j, "links");
        for (int i = 0; i < nlinks; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "bw_gbs", o.bw.v[o.bw.n == 1 ? 0 : i]);
            cJSON_AddNumberToObject(e, "lat_us", o.lat.v[o.lat.n == 1 ? 0 : i]);
            cJSON_AddNumberToObject(e, "time_ms", t[i].total_s * 1e3);
            cJSON_AddNumberToObject(e, "latency_term_ms", t[i].lat_s * 1e3);
            cJSON_AddNumberToObject(e, "bandwidth_term_ms", t[i].bw_s * 1e3);
            cJSON_AddStringToObject(e, "bottleneck", t[i].bw_s >= t[i].lat_s ? "bandwidth" : "latency");
            if (have_compute) cJSON_AddNumberToObject(e, "efficiency", eff[i]);
            cJSON_AddItemToArray(arr, e);
        }
        if (nlinks > 1) {
            cJSON_AddNumberToObject(j, "slowdown", t[nlinks - 1].total_s / t[0].total_s);
            if (have_compute) cJSON_AddNumberToObject(j, "efficiency_points_lost", 100 * (eff[0] - eff[nlinks - 1]));
        }
        plan_print_json(j);
        return 0;
    }
    if (o.params > 0)
        printf("all-reduce of %s (%g parameters x %g bytes) over %d ranks, %s", plan_bytes(o.bytes, b1, sizeof b1), o.params,
               o.bpp, o.ranks, baton__model_algo_name(algo));
    else
        printf("all-reduce of %s over %d ranks, %s", plan_bytes(o.bytes, b1, sizeof b1), o.ranks, baton__model_algo_name(algo));
    if (algo == BATON_MODEL_HIER)
        printf(" (%d nodes x %d ranks; inside a node %g GB/s, %g us)", o.nodes, o.rpn, o.intra_bw, o.intra_lat);
    if (have_compute) printf(", %s of compute per step", plan_secs(compute_s, b1, sizeof b1));
    printf("\n\n%-22s %12s %12s %12s %11s  %s\n", algo == BATON_MODEL_HIER ? "inter-node link" : "link", "all-reduce",
           "latency", "bandwidth", have_compute ? "efficiency" : "", "bottleneck");
    for (int i = 0; i < nlinks; i++) {
        char name[64], effs[32] = "";
        snprintf(name, sizeof name, "%g GB/s, %g us", o.bw.v[o.bw.n == 1 ? 0 : i], o.lat.v[o.lat.n == 1 ? 0 : i]);
        if (have_compute) snprintf(effs, sizeof effs, "%.1f %%", 100 * eff[i]);
        printf("%-22s %12s %12s %12s %11s  %s (%.1f %% of the all-reduce)\n", name, plan_secs(t[i].total_s, b1, sizeof b1),
               plan_secs(t[i].lat_s, b2, sizeof b2), plan_secs(t[i].bw_s, b3, sizeof b3), effs,
               t[i].bw_s >= t[i].lat_s ? "bandwidth" : "latency",
               100 * (t[i].bw_s >= t[i].lat_s ? t[i].bw_s : t[i].lat_s) / (t[i].total_s > 0 ? t[i].total_s : 1));
    }
    printf("\n");
    for (int i = 0; i < nlinks; i++) {
        printf("Over %g GB/s with %g us latency the all-reduce takes %s", o.bw.v[o.bw.n == 1 ? 0 : i],
               o.lat.v[o.lat.n == 1 ? 0 : i], plan_secs(t[i].total_s, b1, sizeof b1));
        if (have_compute) printf(" (efficiency %.1f %%)", 100 * eff[i]);
        printf(".");
        if (t[i].total_s > 0)
            printf(" Compute of at least %s per step keeps 90 %%.",
                   plan_secs(baton__model_compute_for(0.9, t[i].total_s), b4, sizeof b4));
        printf("\n");
    }
    if (nlinks > 1 && t[0].total_s > 0) {
        printf("Link %d against link 1: slowdown %.1fx", nlinks, t[nlinks - 1].total_s / t[0].total_s);
        if (have_compute) printf("; %.1f points of efficiency lost", 100 * (eff[0] - eff[nlinks - 1]));
        printf(".\n");
    }
    return 0;
}

/* ---- train ------------------------------------------------------------------------------------------ */

static int plan_train(int argc, char **argv) {
    const char *sub = "train";
    double params = 0, tokens = 0, peak = 0, mfu = 0, c = 0.04, gbpp = 0, bw = 0, lat = 0, step_tokens = 0;
    plan_list ranks = {0};
    int json = 0;
    const char *algo_s = "ring", *plot = NULL;
    plan_flag flags[] = {
        {"--params", 'd', 1, 1e15, &params, "model parameters"},
        {"--tokens", 'd', 1, 1e18, &tokens, "training tokens"},
        {"--peak-flops", 'd', 1, 1e21, &peak, "peak FLOP/s of one device"},
        {"--mfu", 'd', 1e-6, 1, &mfu, "model FLOPs utilization, 0 < MFU <= 1"},
        {"--ranks", 'k', 1, MAX_RANKS, &ranks, "device counts K to tabulate, e.g. 8,64,256,1024"},
        {"--eff-c", 'd', 0, 1e6, &c, "efficiency 1/(1 + c sqrt(K)) (default c = 0.04)"},
        {"--grad-bytes-per-param", 'd', 0.125, 64, &gbpp, "efficiency from the all-reduce model instead: gradient bytes per parameter"},
        {"--tokens-per-step", 'd', 1, 1e15, &step_tokens, "... the global batch in tokens (compute per step = 6 N T / (K peak MFU))"},
        {"--bw-gbs", 'd', 1e-6, 1e6, &bw, "... link bandwidth, GB/s"},
        {"--lat-us", 'd', 0, 1e7, &lat, "... link latency, microseconds"},
        {"--algo", 's', 0, 0, &algo_s, "... ring | tree | rd | direct (default ring)"},
        {"--plot", 's', 0, 0, &plot, "FILE.svg: efficiency and speedup against K"},
        {"--json", 'f', 0, 0, &json, "machine-readable output"},
    };
    enum { F_PARAMS, F_TOKENS, F_PEAK, F_MFU, F_RANKS, F_C, F_GBPP, F_STEP, F_BW, F_LAT, F_ALGO };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[32];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (!seen[F_PARAMS] || !seen[F_TOKENS] || !seen[F_PEAK] || !seen[F_MFU])
        return plan_error(sub, "give --params, --tokens, --peak-flops and --mfu"), 2;
    if (!seen[F_RANKS]) ranks.n = 1, ranks.v[0] = 1;
    if (plot && plan_plot_check(sub, plot) < 0) return 2;
    int allreduce_model = seen[F_GBPP] || seen[F_STEP] || seen[F_BW] || seen[F_LAT] || seen[F_ALGO];
    baton_model_algo algo = BATON_MODEL_RING;
    if (allreduce_model) {
        if (!seen[F_GBPP] || !seen[F_STEP] || !seen[F_BW] || !seen[F_LAT])
            return plan_error(sub, "the all-reduce efficiency model needs --grad-bytes-per-param, --tokens-per-step, --bw-gbs and --lat-us"), 2;
        if (seen[F_C]) return plan_error(sub, "--eff-c is the other efficiency model: drop it or the all-reduce flags"), 2;
        if (baton__model_algo_parse(algo_s, &algo) < 0 || algo == BATON_MODEL_HIER)
            return plan_error(sub, "bad value '%s' for --algo: expected ring, tree, rd or direct", algo_s), 2;
    }
    baton_model_train tr = baton__model_train(params, tokens, peak, mfu);
    double day = 86400, days1 = tr.one_device_s / day;
    double ideal[PLAN_LIST_MAX], eff[PLAN_LIST_MAX], actual[PLAN_LIST_MAX], speed[PLAN_LIST_MAX];
    for (int i = 0; i < ranks.n; i++) {
        int k = (int)ranks.v[i];
        ideal[i] = days1 / k;
        if (allreduce_model) {
            double compute = 6.0 * params * step_tokens / (k * peak * mfu);
            baton_link_params l = {lat * 1e-6, bw * 1e9};
            eff[i] = baton__model_efficiency(compute, baton__model_flat(algo, params * gbpp, k, l).total_s);
        } else {
            eff[i] = baton__model_sqrt_efficiency(c, k);
        }
        actual[i] = ideal[i] / eff[i];
        speed[i] = k * eff[i];
    }
    if (plot) {
        plot_panel p[2] = {{.title = "efficiency against K", .xlabel = "devices K", .ylabel = "efficiency", .log_x = 1, .nseries = 1,
                            .s = {{"model", ranks.n, ranks.v, eff, 0}}},
                           {.title = "speedup against K", .xlabel = "devices K", .ylabel = "speedup", .log_x = 1, .log_y = 1,
                            .nseries = 2, .s = {{"model", ranks.n, ranks.v, speed, 0}, {"ideal", ranks.n, ranks.v, ranks.v, 0}}}};
        if (plan_plot_svg(sub, plot, p, 2) < 0) return 1;
    }
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "train");
        cJSON_AddNumberToObject(j, "flops", tr.flops);
        cJSON_AddNumberToObject(j, "one_device_days", days1);
        cJSON_AddNumberToObject(j, "one_device_months", days1 / 30);
        cJSON_AddStringToObject(j, "efficiency_model", allreduce_model ? "allreduce" : "sqrt");
        cJSON *arr = cJSON_AddArrayToObject(j, "ranks");
        for (int i = 0; i < ranks.n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "k", ranks.v[i]);
            cJSON_AddNumberToObject(e, "ideal_days", ideal[i]);
            cJSON_AddNumberToObject(e, "efficiency", eff[i]);
            cJSON_AddNumberToObject(e, "days", actual[i]);
            cJSON_AddNumberToObject(e, "speedup", speed[i]);
            cJSON_AddItemToArray(arr, e);
        }
        plan_print_json(j);
        return 0;
    }
    printf("%g parameters x %g tokens x 6 = %.2e FLOPs\n", params, tokens, tr.flops);
    printf("One device at %g FLOP/s and %.0f %% MFU: %.1f days (%.1f months)\n", peak, 100 * mfu, days1, days1 / 30);
    if (allreduce_model)
        printf("Efficiency: compute / (compute + %s all-reduce of %g bytes per parameter over %g GB/s, %g us), %g tokens per step\n",
               baton__model_algo_name(algo), gbpp, bw, lat, step_tokens);
    else
        printf("Efficiency: 1/(1 + %g sqrt(K))\n", c);
    printf("\n%8s %12s %11s %12s %9s\n", "K", "ideal days", "efficiency", "days", "speedup");
    for (int i = 0; i < ranks.n; i++)
        printf("%8.0f %12.2f %9.1f %% %12.2f %8.1fx\n", ranks.v[i], ideal[i], 100 * eff[i], actual[i], speed[i]);
    /* The knee: the first step along the list where an added device adds less than half a device. */
    for (int i = 1; i < ranks.n; i++) {
        if (ranks.v[i] <= ranks.v[i - 1]) continue;
        double marginal = (speed[i] - speed[i - 1]) / (ranks.v[i] - ranks.v[i - 1]);
        if (marginal < 0.5) {
            printf("\nKnee: from K = %.0f to K = %.0f each added device adds %.2f of a device (efficiency %.1f %% at K = %.0f).\n",
                   ranks.v[i - 1], ranks.v[i], marginal, 100 * eff[i], ranks.v[i]);
            return 0;
        }
    }
    if (ranks.n > 1) printf("\nNo knee in this range: every added device still adds at least half a device.\n");
    return 0;
}

/* ---- dispatch --------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} subs[] = {
    {"allreduce", plan_allreduce, "time and efficiency of a gradient all-reduce on a given link and topology"},
    {"train", plan_train, "wall-clock of a training run on K devices (FLOPs = 6 x params x tokens)"},
    {"sweep", plan_cmd_sweep, "all-reduce time and efficiency over payload sizes; where efficiency falls below a threshold"},
    {"solve", plan_cmd_solve, "the compute per step (or the bandwidth) that reaches a target efficiency"},
    {"compare", plan_cmd_compare, "hierarchical against flat all-reduce for a cluster"},
    {"calibrate", plan_cmd_calibrate, "measure this machine's all-reduces (shm, tcp) and fit the model to them"},
    {"memory", plan_cmd_memory, "bytes per rank for parameters, gradients and AdamW state, with ZeRO stages 1-2"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: baton plan SUBCOMMAND [options]   (predicts a job before it is launched; docs/plan.md)\n\n");
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].help);
    fprintf(f, "\nEvery subcommand takes --json and --help.\n");
}

int baton_cmd_plan(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "baton plan: unknown subcommand '%s' (try: baton plan --help)\n", argv[1]);
    return 2;
}
