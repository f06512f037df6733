/* plan_more.c: `baton plan sweep | solve | compare | memory` (see plan.c for allreduce and train). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define MAX_BYTES 1e18
#define MAX_RANKS 1048576

/* Bisection for the size in [lo, hi] where f(bytes) crosses 0 (f(lo) and f(hi) of opposite signs). */
static double bisect(double (*f)(double, const void *), const void *ctx, double lo, double hi) {
    for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; i++) {
        double mid = sqrt(lo * hi);
        if ((f(mid, ctx) > 0) == (f(lo, ctx) > 0))
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* ---- sweep: all-reduce time and efficiency over payload sizes ---------------------------------------- */

typedef struct {
    baton_model_algo algo;
    int ranks;
    baton_link_params link;
    double compute_s, threshold;
} sweep_ctx;

static double sweep_excess(double bytes, const void *p) {
    const sweep_ctx *c = p;
    return baton__model_efficiency(c->compute_s, baton__model_flat(c->algo, bytes, c->ranks, c->link).total_s) - c->threshold;
}

int plan_cmd_sweep(int argc, char **argv) {
    const char *sub = "sweep";
    double from = 8, to = 4e9, factor = 4, bw = 0, lat = 0, compute_ms = 0, threshold = 0.8;
    int ranks = 0, json = 0;
    const char *algo_s = "ring", *plot = NULL;
    plan_flag flags[] = {
        {"--from-bytes", 'd', 1, MAX_BYTES, &from, "smallest payload (default 8)"},
        {"--to-bytes", 'd', 1, MAX_BYTES, &to, "largest payload (default 4e9)"},
        {"--factor", 'd', 1.01, 1e6, &factor, "payload multiplier between rows (default 4)"},
        {"--ranks", 'i', 2, MAX_RANKS, &ranks, "ranks K"},
        {"--bw-gbs", 'd', 1e-6, 1e6, &bw, "link bandwidth, GB/s"},
        {"--lat-us", 'd', 0, 1e7, &lat, "link latency, microseconds"},
        {"--compute-ms", 'd', 1e-6, 1e9, &compute_ms, "compute per step, ms"},
        {"--threshold", 'd', 1e-6, 0.999999, &threshold, "efficiency to report the crossing of (default 0.8)"},
        {"--algo", 's', 0, 0, &algo_s, "ring | tree | rd | direct (default ring)"},
        {"--plot", 's', 0, 0, &plot, "FILE.svg: time against size, efficiency against K"},
        {"--json", 'f', 0, 0, &json, "machine-readable output"},
    };
    enum { F_FROM, F_TO, F_FACTOR, F_RANKS, F_BW, F_LAT, F_COMPUTE };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[32];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (plot && plan_plot_check(sub, plot) < 0) return 2;
    sweep_ctx c = {.threshold = threshold};
    if (baton__model_algo_parse(algo_s, &c.algo) < 0 || c.algo == BATON_MODEL_HIER)
        return plan_error(sub, "bad value '%s' for --algo: expected ring, tree, rd or direct", algo_s), 2;
    if (!seen[F_RANKS] || !seen[F_BW] || !seen[F_LAT] || !seen[F_COMPUTE])
        return plan_error(sub, "give --ranks, --bw-gbs, --lat-us and --compute-ms"), 2;
    if (from > to) return plan_error(sub, "--from-bytes %g is larger than --to-bytes %g", from, to), 2;
    c.ranks = ranks;
    c.link.bw_Bps = bw * 1e9;
    c.link.lat_s = lat * 1e-6;
    c.compute_s = compute_ms * 1e-3;
    int n = 0;
    double xs[512], ts[512], es[512];
    for (double b = from; b <= to * (1 + 1e-12) && n < 512; b *= factor, n++) {
        xs[n] = b;
        ts[n] = baton__model_flat(c.algo, b, ranks, c.link).total_s;
        es[n] = baton__model_efficiency(c.compute_s, ts[n]);
    }
    /* the crossing: efficiency falls as bytes grow, so it is where sweep_excess changes sign */
    double cross = -1;
    if (sweep_excess(from, &c) >= 0 && sweep_excess(to, &c) < 0) cross = bisect(sweep_excess, &c, from, to);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "sweep");
        cJSON_AddStringToObject(j, "algo", baton__model_algo_name(c.algo));
        cJSON_AddNumberToObject(j, "ranks", ranks);
        cJSON *arr = cJSON_AddArrayToObject(j, "rows");
        for (int i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "bytes", xs[i]);
            cJSON_AddNumberToObject(e, "time_ms", ts[i] * 1e3);
            cJSON_AddNumberToObject(e, "efficiency", es[i]);
            cJSON_AddItemToArray(arr, e);
        }
        cJSON_AddNumberToObject(j, "threshold", threshold);
        if (cross > 0) cJSON_AddNumberToObject(j, "crossing_bytes", cross);
        else cJSON_AddNullToObject(j, "crossing_bytes");
        plan_print_json(j);
    } else {
        char b1[32], b2[32];
        printf("%s all-reduce over %d ranks, %g GB/s, %g us, %g ms of compute per step\n\n", baton__model_algo_name(c.algo),
               ranks, bw, lat, compute_ms);
        printf("%14s %12s %11s\n", "payload", "all-reduce", "efficiency");
        for (int i = 0; i < n; i++)
            printf("%14s %12s %9.1f %%%s\n", plan_bytes(xs[i], b1, sizeof b1), plan_secs(ts[i], b2, sizeof b2), 100 * es[i],
                   i > 0 && es[i - 1] >= threshold && es[i] < threshold ? "   <- below threshold" : "");
        if (cross > 0)
            printf("\nEfficiency falls below %.1f %% from %s (%.4g bytes) of gradient per step.\n", 100 * threshold,
                   plan_bytes(cross, b1, sizeof b1), cross);
        else if (sweep_excess(from, &c) < 0)
            printf("\nEfficiency is below %.1f %% over the whole range.\n", 100 * threshold);
        else
            printf("\nEfficiency stays at or above %.1f %% over the whole range.\n", 100 * threshold);
    }
    if (plot) {
        static double ks[16], eks[16];
        int nk = 0;
        for (int k = 2; k <= 65536 && nk < 16; k *= 2, nk++) {
            ks[nk] = k;
            eks[nk] = baton__model_efficiency(c.compute_s, baton__model_flat(c.algo, cross > 0 ? cross : to, k, c.link).total_s);
        }
        plot_panel p[2] = {{.title = "all-reduce time against payload", .xlabel = "bytes", .ylabel = "seconds", .log_x = 1, .log_y = 1,
                            .nseries = 1, .s = {{baton__model_algo_name(c.algo), n, xs, ts, 0}}},
                           {.title = "efficiency against K", .xlabel = "ranks K", .ylabel = "efficiency", .log_x = 1,
                            .nseries = 1, .s = {{"model", nk, ks, eks, 0}}}};
        if (plan_plot_svg(sub, plot, p, 2) < 0) return 1;
    }
    return 0;
}

/* ---- solve: compute per step for a target efficiency, or the bandwidth a compute time needs ---------- */

int plan_cmd_solve(int argc, char **argv) {
    const char *sub = "solve";
    double params = 0, bpp = 0, bytes = 0, bw = 0, lat = 0, target = 0, compute_ms = 0;
    int ranks = 0, json = 0;
    const char *algo_s = "ring";
    plan_flag flags[] = {
        {"--params", 'd', 1, 1e15, &params, "parameters (with --bytes-per-param)"},
        {"--bytes-per-param", 'd', 0.125, 64, &bpp, "bytes per gradient element"},
        {"--bytes", 'd', 1, MAX_BYTES, &bytes, "the all-reduced buffer in bytes (instead of --params)"},
        {"--ranks", 'i', 2, MAX_RANKS, &ranks, "ranks K"},
        {"--target", 'd', 1e-6, 0.999999, &target, "target efficiency, e.g. 0.8"},
        {"--bw-gbs", 'd', 1e-6, 1e6, &bw, "link bandwidth, GB/s: solve for the compute per step"},
        {"--lat-us", 'd', 0, 1e7, &lat, "link latency, microseconds"},
        {"--compute-ms", 'd', 1e-6, 1e9, &compute_ms, "instead of --bw-gbs: solve for the bandwidth this compute needs"},
        {"--algo", 's', 0, 0, &algo_s, "ring | tree | rd | direct (default ring)"},
        {"--json", 'f', 0, 0, &json, "machine-readable output"},
    };
    enum { F_PARAMS, F_BPP, F_BYTES, F_RANKS, F_TARGET, F_BW, F_LAT, F_COMPUTE };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[32];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    baton_model_algo algo;
    if (baton__model_algo_parse(algo_s, &algo) < 0 || algo == BATON_MODEL_HIER)
        return plan_error(sub, "bad value '%s' for --algo: expected ring, tree, rd or direct", algo_s), 2;
    if (seen[F_BYTES] == (seen[F_PARAMS] && seen[F_BPP]) || seen[F_PARAMS] != seen[F_BPP])
        return plan_error(sub, "say how big the gradient is: --params N --bytes-per-param B, or --bytes N"), 2;
    if (!seen[F_BYTES]) bytes = params * bpp;
    if (bytes > MAX_BYTES) return plan_error(sub, "--params x --bytes-per-param is more than %g bytes", MAX_BYTES), 2;
    if (!seen[F_RANKS] || !seen[F_TARGET] || !seen[F_LAT]) return plan_error(sub, "give --ranks, --target and --lat-us"), 2;
    if (seen[F_BW] == seen[F_COMPUTE]) return plan_error(sub, "give one of --bw-gbs (solve for compute) or --compute-ms (solve for bandwidth)"), 2;
    char b1[32], b2[32];
    if (seen[F_BW]) {
        baton_link_params l = {lat * 1e-6, bw * 1e9};
        baton_model_time t = baton__model_flat(algo, bytes, ranks, l);
        double need = baton__model_compute_for(target, t.total_s);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "command", "solve");
            cJSON_AddNumberToObject(j, "allreduce_ms", t.total_s * 1e3);
            cJSON_AddNumberToObject(j, "target", target);
            cJSON_AddNumberToObject(j, "compute_ms", need * 1e3);
            plan_print_json(j);
            return 0;
        }
        printf("A %s %s all-reduce over %d ranks at %g GB/s, %g us takes %s.\n", plan_bytes(bytes, b1, sizeof b1),
               baton__model_algo_name(algo), ranks, bw, lat, plan_secs(t.total_s, b2, sizeof b2));
        printf("To keep %.1f %% efficiency, compute per step must be at least %s (%.2f ms).\n", 100 * target,
               plan_secs(need, b1, sizeof b1), need * 1e3);
        return 0;
    }
    /* The bandwidth: comm may take compute (1 - target) / target; the latency term is fixed, the bandwidth
     * term is (bytes x coefficient) / bw, so bw = bandwidth term at 1 B/s / (budget - latency term). */
    double budget = compute_ms * 1e-3 * (1 - target) / target;
    baton_link_params unit = {lat * 1e-6, 1.0};
    baton_model_time t1 = baton__model_flat(algo, bytes, ranks, unit);
    double need_bw = budget > t1.lat_s ? t1.bw_s / (budget - t1.lat_s) : INFINITY;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "solve");
        cJSON_AddNumberToObject(j, "target", target);
        cJSON_AddNumberToObject(j, "comm_budget_ms", budget * 1e3);
        if (isfinite(need_bw)) cJSON_AddNumberToObject(j, "bw_gbs", need_bw / 1e9);
        else cJSON_AddNullToObject(j, "bw_gbs");
        plan_print_json(j);
        return 0;
    }
    printf("With %g ms of compute, %.1f %% efficiency leaves %s for the all-reduce.\n", compute_ms, 100 * target,
           plan_secs(budget, b1, sizeof b1));
    if (isfinite(need_bw))
        printf("A %s %s all-reduce over %d ranks fits in it from %.3f GB/s of bandwidth (latency %g us).\n",
               plan_bytes(bytes, b2, sizeof b2), baton__model_algo_name(algo), ranks, need_bw / 1e9, lat);
    else
        printf("No bandwidth is enough: the latency term alone (%s) exceeds it; cut the latency or the message count.\n",
               plan_secs(t1.lat_s, b2, sizeof b2));
    return 0;
}

/* ---- compare: hierarchical against flat ------------------------------------------------------------- */

typedef struct {
    int nodes, rpn;
    baton_link_params intra, inter;
} cmp_ctx;

static double cmp_diff(double bytes, const void *p) {
    const cmp_ctx *c = p;
    return baton__model_hier(bytes, c->nodes, c->rpn, c->intra, c->inter).total_s -
           baton__model_flat_ring_cluster(bytes, c->nodes, c->rpn, c->intra, c->inter).total_s;
}

int plan_cmd_compare(int argc, char **argv) {
    const char *sub = "compare";
    double params = 0, bpp = 0, bytes = 0, bw = 0, lat = 0, ibw = 0, ilat = 0;
    int nodes = 0, rpn = 0, json = 0;
    plan_flag flags[] = {
        {"--params", 'd', 1, 1e15, &params, "parameters (with --bytes-per-param)"},
        {"--bytes-per-param", 'd', 0.125, 64, &bpp, "bytes per gradient element"},
        {"--bytes", 'd', 1, MAX_BYTES, &bytes, "the all-reduced buffer in bytes (instead of --params)"},
        {"--nodes", 'i', 2, MAX_RANKS, &nodes, "nodes M"},
        {"--ranks-per-node", 'i', 1, 4096, &rpn, "ranks per node L"},
        {"--bw-gbs", 'd', 1e-6, 1e6, &bw, "inter-node bandwidth, GB/s"},
        {"--lat-us", 'd', 0, 1e7, &lat, "inter-node latency, microseconds"},
        {"--intra-bw-gbs", 'd', 1e-6, 1e6, &ibw, "intra-node bandwidth, GB/s"},
        {"--intra-lat-us", 'd', 0, 1e7, &ilat, "intra-node latency, microseconds"},
        {"--json", 'f', 0, 0, &json, "machine-readable output"},
    };
    enum { F_PARAMS, F_BPP, F_BYTES, F_NODES, F_RPN, F_BW, F_LAT, F_IBW, F_ILAT };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[32];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (seen[F_BYTES] == (seen[F_PARAMS] && seen[F_BPP]) || seen[F_PARAMS] != seen[F_BPP])
        return plan_error(sub, "say how big the gradient is: --params N --bytes-per-param B, or --bytes N"), 2;
    if (!seen[F_BYTES]) bytes = params * bpp;
    if (bytes > MAX_BYTES) return plan_error(sub, "--params x --bytes-per-param is more than %g bytes", MAX_BYTES), 2;
    if (!seen[F_NODES] || !seen[F_RPN] || !seen[F_BW] || !seen[F_LAT] || !seen[F_IBW] || !seen[F_ILAT])
        return plan_error(sub, "give --nodes, --ranks-per-node, --bw-gbs, --lat-us, --intra-bw-gbs and --intra-lat-us"), 2;
    if ((double)nodes * rpn > MAX_RANKS) return plan_error(sub, "--nodes x --ranks-per-node is more than %d ranks", MAX_RANKS), 2;
    cmp_ctx c = {nodes, rpn, {ilat * 1e-6, ibw * 1e9}, {lat * 1e-6, bw * 1e9}};
    baton_model_time h = baton__model_hier(bytes, nodes, rpn, c.intra, c.inter);
    baton_model_time f = baton__model_flat_ring_cluster(bytes, nodes, rpn, c.intra, c.inter);
    /* where they cross, if they do between 1 byte and 1 TB */
    double cross = -1, lo = 1, hi = 1e12;
    if ((cmp_diff(lo, &c) > 0) != (cmp_diff(hi, &c) > 0)) cross = bisect(cmp_diff, &c, lo, hi);
    int hier_wins = h.total_s < f.total_s;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "compare");
        cJSON_AddNumberToObject(j, "bytes", bytes);
        cJSON_AddNumberToObject(j, "hier_ms", h.total_s * 1e3);
        cJSON_AddNumberToObject(j, "flat_ms", f.total_s * 1e3);
        cJSON_AddStringToObject(j, "faster", hier_wins ? "hier" : "flat");
        if (cross > 0) cJSON_AddNumberToObject(j, "crossover_bytes", cross);
        else cJSON_AddNullToObject(j, "crossover_bytes");
        plan_print_json(j);
        return 0;
    }
    char b1[32], b2[32], b3[32];
    printf("All-reduce of %s over %d nodes x %d ranks (inside a node %g GB/s, %g us; across %g GB/s, %g us)\n\n",
           plan_bytes(bytes, b1, sizeof b1), nodes, rpn, ibw, ilat, bw, lat);
    printf("%-36s %12s %12s %12s\n", "", "total", "latency", "bandwidth");
    printf("%-36s %12s %12s %12s\n", bytes < BATON_MODEL_HIER_MIN_BYTES || rpn < 2 ? "hierarchical (leaders, bcast)" : "hierarchical (pipelined)", plan_secs(h.total_s, b1, sizeof b1),
           plan_secs(h.lat_s, b2, sizeof b2), plan_secs(h.bw_s, b3, sizeof b3));
    printf("%-36s %12s %12s %12s\n", "flat ring over all ranks", plan_secs(f.total_s, b1, sizeof b1),
           plan_secs(f.lat_s, b2, sizeof b2), plan_secs(f.bw_s, b3, sizeof b3));
    double fast = hier_wins ? h.total_s : f.total_s, slow = hier_wins ? f.total_s : h.total_s;
    printf("\n%s is faster, by %.2fx.", hier_wins ? "hierarchical" : "flat", fast > 0 ? slow / fast : 1.0);
    if (cross > 0)
        printf(" They cross at %s (%.4g bytes): %s below it, %s above.", plan_bytes(cross, b1, sizeof b1), cross,
               cmp_diff(cross / 2, &c) < 0 ? "hierarchical" : "flat", cmp_diff(cross * 2, &c) < 0 ? "hierarchical" : "flat");
    printf("\n");
    return 0;
}

/* ---- memory: bytes per rank for data-parallel AdamW, with ZeRO stages ------------------------------- */

int plan_cmd_memory(int argc, char **argv) {
    const char *sub = "memory";
    double params = 0, bucket_mb = 25, largest = 0;
    int ranks = 1, zero = 0, json = 0;
    plan_flag flags[] = {
        {"--params", 'd', 1, 1e15, &params, "model parameters"},
        {"--ranks", 'i', 1, MAX_RANKS, &ranks, "data-parallel ranks K (default 1)"},
        {"--zero", 'i', 0, 2, &zero, "0: replicate everything; 1: shard AdamW state; 2: also gradients (default 0)"},
        {"--json", 'f', 0, 0, &json, "machine-readable output"},
        {"--bucket-mb", 'd', 0.001, 4096, &bucket_mb, "ZeRO-2 staging: the DDP bucket cap, MiB (default 25)"},
        {"--largest-param", 'd', 0, 1e15, &largest, "ZeRO-2 staging: elements of the largest parameter tensor"},
    };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[8];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (!seen[0]) return plan_error(sub, "give --params N"), 2;
    baton_model_memory m[3];
    for (int z = 0; z < 3; z++) m[z] = baton__model_memory(params, ranks, z);
    if (ranks > 1) {   /* stage 2's bucket staging (src/ddp/zero.c); one rank runs without ZeRO */
        m[2].staging_B = baton__model_zero2_staging(params, bucket_mb, largest);
        m[2].grads_B += m[2].staging_B;
        m[2].total_B += m[2].staging_B;
    }
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "memory");
        cJSON_AddNumberToObject(j, "params", params);
        cJSON_AddNumberToObject(j, "ranks", ranks);
        cJSON_AddNumberToObject(j, "zero", zero);
        cJSON_AddNumberToObject(j, "params_bytes", m[zero].params_B);
        cJSON_AddNumberToObject(j, "grads_bytes", m[zero].grads_B);
        cJSON_AddNumberToObject(j, "grad_reduced_bytes", m[zero].grads_B - m[zero].staging_B);
        cJSON_AddNumberToObject(j, "grad_staging_bytes", m[zero].staging_B);
        cJSON_AddNumberToObject(j, "optimizer_bytes", m[zero].optim_B);
        cJSON_AddNumberToObject(j, "total_bytes", m[zero].total_B);
        cJSON_AddNumberToObject(j, "saved_bytes", m[0].total_B - m[zero].total_B);
        plan_print_json(j);
        return 0;
    }
    char b[4][32];
    printf("AdamW, f32 parameters, f32 gradients, two f32 moments: %g parameters over %d ranks\n\n", params, ranks);
    printf("%-7s %12s %12s %12s %12s %14s\n", "zero", "parameters", "gradients", "AdamW state", "per rank", "bytes/param");
    for (int z = 0; z < 3; z++)
        printf("%-7d %12s %12s %12s %12s %14.2f%s\n", z, plan_bytes(m[z].params_B, b[0], 32), plan_bytes(m[z].grads_B, b[1], 32),
               plan_bytes(m[z].optim_B, b[2], 32), plan_bytes(m[z].total_B, b[3], 32), m[z].total_B / params,
               z == zero ? "   <-" : "");
    if (m[2].staging_B > 0)
        printf("\nZeRO-2 gradients include %s of bucket staging (two slots of the largest bucket: --bucket-mb, "
               "--largest-param).\n", plan_bytes(m[2].staging_B, b[0], 32));
    printf("\nZeRO stage %d: %s per rank, %s (%.1f %%) less than replicating everything.\n", zero,
           plan_bytes(m[zero].total_B, b[0], 32), plan_bytes(m[0].total_B - m[zero].total_B, b[1], 32),
           100 * (m[0].total_B - m[zero].total_B) / m[0].total_B);
    return 0;
}
