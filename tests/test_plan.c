/* test_plan.c: `baton plan` reproduces the published figures (issue 9) as printed text, the cost model's
 * algebra holds, and bad input gets one line naming the flag and exit 2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/model.h"
#include "harness.h"

/* Runs `baton plan ARGS`, returns its output with every run of blanks collapsed to one space. */
static char *plan(const char *args, int *rc) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s plan %s", th_baton(), args);
    *rc = th_run(cmd, 30, &out, NULL);
    ASSERT_TRUE(out != NULL);
    char *w = out;
    for (char *r = out; *r; r++) {
        if (*r == '\t') *r = ' ';
        if (*r == ' ' && w > out && w[-1] == ' ') continue;
        *w++ = *r;
    }
    *w = 0;
    return out;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#define PUB "allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --compute-ms 250 "

TEST(published_allreduce_fast_link) {
    int rc;
    char *o = plan(PUB "--bw-gbs 300 --lat-us 1", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "all-reduce of 2.00 GB");
    ASSERT_CONTAINS(o, "the all-reduce takes 11.68 ms (efficiency 95.5 %)");
    free(o);
}

TEST(published_allreduce_slow_link) {
    int rc;
    char *o = plan(PUB "--bw-gbs 12.5 --lat-us 5", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "the all-reduce takes 280.07 ms (efficiency 47.2 %)");
    ASSERT_CONTAINS(o, "bandwidth");
    free(o);
}

TEST(published_allreduce_slowdown_and_points_lost) {
    int rc;
    char *o = plan(PUB "--bw-gbs 300,12.5 --lat-us 1,5", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "11.68 ms");
    ASSERT_CONTAINS(o, "280.07 ms");
    ASSERT_CONTAINS(o, "slowdown 24.0x; 48.4 points of efficiency lost");
    free(o);
}

TEST(published_train_table) {
    int rc;
    char *o = plan("train --params 7e9 --tokens 1e12 --peak-flops 1e15 --mfu 0.4 --ranks 8,64,256,1024", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "4.20e+22 FLOPs");
    ASSERT_CONTAINS(o, "1215.3 days (40.5 months)");
    ASSERT_CONTAINS(o, "\n 8 151.91 89.8 % 169.10 7.2x\n");
    ASSERT_CONTAINS(o, "\n 64 18.99 75.8 % 25.07 48.5x\n");
    ASSERT_CONTAINS(o, "\n 256 4.75 61.0 % 7.79 156.1x\n");
    ASSERT_CONTAINS(o, "\n 1024 1.19 43.9 % 2.71 449.1x\n");
    ASSERT_CONTAINS(o, "Knee: from K = 256 to K = 1024");
    free(o);
}

TEST(allreduce_json_carries_the_same_numbers) {
    int rc;
    char *o = plan(PUB "--bw-gbs 300,12.5 --lat-us 1,5 --json", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "\"command\": \"allreduce\"");
    ASSERT_CONTAINS(o, "\"time_ms\": 11.680666");
    ASSERT_CONTAINS(o, "\"time_ms\": 280.07");
    ASSERT_CONTAINS(o, "\"slowdown\": 23.97");
    free(o);
}

/* ---- the model's algebra ---------------------------------------------------------------------------- */

TEST(model_time_grows_linearly_with_bytes) {
    baton_link_params l = {5e-6, 12.5e9};
    for (int a = 0; a < BATON_MODEL_HIER; a++)
        for (int k = 2; k <= 64; k *= 2) {
            /* within one size range (rd switches to halving-doubling at 32 KiB) */
            double b0 = 1 << 20, t0 = baton__model_flat((baton_model_algo)a, b0, k, l).total_s;
            double t1 = baton__model_flat((baton_model_algo)a, 2 * b0, k, l).total_s;
            double t2 = baton__model_flat((baton_model_algo)a, 3 * b0, k, l).total_s;
            ASSERT_NEAR(t2 - t1, t1 - t0, 1e-15);
            ASSERT_TRUE(t1 > t0);
            /* the latency term does not depend on bytes */
            ASSERT_NEAR(baton__model_flat((baton_model_algo)a, b0, k, l).lat_s,
                        baton__model_flat((baton_model_algo)a, 5 * b0, k, l).lat_s, 1e-18);
        }
}

TEST(ring_bandwidth_term_approaches_twice_bytes_over_bandwidth) {
    baton_link_params l = {1e-6, 300e9};
    double bytes = 2e9, limit = 2 * bytes / l.bw_Bps, prev = 0;
    for (int k = 2; k <= 1 << 20; k *= 2) {
        double bw = baton__model_flat(BATON_MODEL_RING, bytes, k, l).bw_s;
        ASSERT_TRUE(bw > prev && bw < limit);
        ASSERT_NEAR(bw, limit * (k - 1) / k, 1e-12);
        prev = bw;
    }
    ASSERT_TRUE(limit - prev < limit * 1e-5);
    ASSERT_NEAR(baton__model_flat(BATON_MODEL_RING, bytes, 1, l).total_s, 0, 0);
}

TEST(hierarchical_beats_flat_exactly_when_the_model_says) {
    baton_link_params intra = {1e-6, 300e9};
    int hier_wins = 0, flat_wins = 0;
    for (double bytes = 8; bytes <= 4e9; bytes *= 4)
        for (int m = 2; m <= 16; m *= 2)
            for (int l = 1; l <= 8; l *= 2)
                for (double lat = 1e-6; lat <= 1e-3; lat *= 10) {
                    baton_link_params inter = {lat, 12.5e9};
                    baton_model_time h = baton__model_hier(bytes, m, l, intra, inter);
                    baton_model_time f = baton__model_flat_ring_cluster(bytes, m, l, intra, inter);
                    /* by the formulas: hier pays M-1 inter steps on the whole buffer, flat 2(ML-1) inter
                     * latencies on 1/(ML) slices */
                    double hier = 2 * intra.lat_s + 2.0 * (l - 1) / l * bytes / intra.bw_Bps + (l > 1) * (intra.lat_s + bytes / intra.bw_Bps) +
                                  2.0 * (m - 1) * lat + 2.0 * (m - 1) / m * bytes / inter.bw_Bps;
                    if (l == 1) hier -= 2 * intra.lat_s;
                    int k = m * l;
                    double flat = 2.0 * (k - 1) * lat + 2.0 * (k - 1) / k * bytes / inter.bw_Bps;
                    ASSERT_NEAR(h.total_s, hier, 1e-12 * hier + 1e-15);
                    ASSERT_NEAR(f.total_s, flat, 1e-12 * flat);
                    if (h.total_s < f.total_s) hier_wins++;
                    else flat_wins++;
                }
    /* both outcomes occur on this grid: small buffers on slow-latency links favour hier, 1 rank per node
     * and big buffers favour the flat ring's smaller per-step slices */
    ASSERT_TRUE(hier_wins > 0 && flat_wins > 0);
    int rc;
    char *o = plan("compare --bytes 8192 --nodes 4 --ranks-per-node 8 --bw-gbs 12.5 --lat-us 50 --intra-bw-gbs 300 --intra-lat-us 1", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "hierarchical is faster");
    free(o);
    o = plan("compare --bytes 2e9 --nodes 4 --ranks-per-node 4 --bw-gbs 12.5 --lat-us 5 --intra-bw-gbs 1 --intra-lat-us 1", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(o, "flat is faster");
    free(o);
}

TEST(efficiency_and_compute_for_are_inverse) {
    for (double t = 0.05; t < 1; t += 0.05) {
        double c = baton__model_compute_for(t, 0.28007);
        ASSERT_NEAR(baton__model_efficiency(c, 0.28007), t, 1e-12);
    }
}

TEST(memory_per_rank_adamw_and_zero) {
    baton_model_memory m = baton__model_memory(1e9, 8, 0);
    ASSERT_NEAR(m.total_B, 16e9, 0);
    m = baton__model_memory(1e9, 8, 1);
    ASSERT_NEAR(m.optim_B, 8e9 / 8, 0);
    ASSERT_NEAR(m.total_B, 8e9 + 1e9, 0);
    m = baton__model_memory(1e9, 8, 2);
    ASSERT_NEAR(m.total_B, 4e9 + 0.5e9 + 1e9, 0);
    m = baton__model_memory(10, 3, 1); /* shards of 4, 3, 3 elements: the largest counts */
    ASSERT_NEAR(m.optim_B, 32, 0);
}

/* ---- bad input -------------------------------------------------------------------------------------- */

static void refused(const char *args, const char *needle) {
    int rc;
    char *o = plan(args, &rc);
    if (rc != 2 || count_lines(o) != 1 || !strstr(o, needle))
        th_fail(__FILE__, __LINE__, "baton plan %s: rc %d, expected one line with '%s', got: %s", args, rc, needle, o);
    free(o);
}

TEST(bad_input_names_the_flag) {
    const char *base = "allreduce --params 1e9 --bytes-per-param 2 --bw-gbs 300 --lat-us 1 ";
    char a[512];
    const char *bad_ranks[] = {"-1", "0", "nan", "inf", "1e30", "2.5", "eight", ""};
    for (size_t i = 0; i < sizeof bad_ranks / sizeof *bad_ranks; i++) {
        snprintf(a, sizeof a, "%s--ranks '%s'", base, bad_ranks[i]);
        refused(a, "--ranks");
    }
    refused("allreduce --params -5 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us 1", "--params");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 0 --lat-us 1", "--bw-gbs");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300,NaN --lat-us 1", "--bw-gbs");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us -1", "--lat-us");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us 1 --compute-ms inf", "--compute-ms");
    refused("allreduce --params 1e300 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us 1", "--params");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us 1 --frobnicate 3", "--frobnicate");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us 1 --algo warp", "--algo");
    refused("allreduce --params 1e9 --bytes-per-param 2 --ranks 8 --bw-gbs 300 --lat-us", "--lat-us");
    refused("allreduce --params 1e9 --ranks 8 --bw-gbs 300 --lat-us 1", "--bytes-per-param");
    refused("train --params 7e9 --tokens 1e12 --peak-flops 1e15 --mfu 1.5", "--mfu");
    refused("train --params 7e9 --tokens 1e12 --peak-flops 1e15 --mfu 0.4 --ranks 8,,64", "--ranks");
    refused("train --params 7e9 --tokens 1e12 --peak-flops 1e15 --mfu 0.4 --ranks 8,-64", "--ranks");
    refused("frobnicate", "frobnicate");
}
