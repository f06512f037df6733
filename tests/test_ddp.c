/* test_ddp.c: data-parallel training. In-process: the distributed sampler, shards, buckets, the hook's
 * launch order, the checksum. Across processes (prog_ddp on N ranks, started by a shell loop that sets
 * the torchrun variables, each run under a hard timeout): N ranks with batch B/N end with the parameters
 * of 1 rank with batch B after 50 SGD steps (f32, accumulation, no-overlap, tiny buckets, TCP, staged),
 * replicas that start different are made identical, 16-bit wire gradients still train, the loss scaler
 * skips steps on every rank together, and the trace is valid Chrome JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

#include "baton/data.h"
#include "baton/ddp.h"
#include "baton/nn.h"
#include "harness.h"

/* ---- in-process ------------------------------------------------------------------------------------ */

/* Every index of [0, n) appears in the union of the shards: exactly once (no padding needed), or with
 * `extra` duplicates when padded; with drop_last, n % world indices are missing and none repeats. */
static void check_shards(int n, int world, int drop_last, long epoch) {
    int *seen = calloc((size_t)n, sizeof(int));
    int len = -1, total = 0;
    for (int r = 0; r < world; r++) {
        baton_dist_sampler s;
        ASSERT_OK(baton_dist_sampler_init(&s, n, r, world, 1, drop_last, 42));
        baton_dist_sampler_set_epoch(&s, epoch);
        if (len < 0) len = s.len;
        ASSERT_EQ_INT(s.len, len);   /* every rank runs the same number of steps */
        for (int k = 0; k < s.len; k++) {
            ASSERT_TRUE(s.idx[k] >= 0 && s.idx[k] < n);
            seen[s.idx[k]]++;
            total++;
        }
        baton_dist_sampler_free(&s);
    }
    int missing = 0, dup = 0;
    for (int i = 0; i < n; i++) {
        if (seen[i] == 0) missing++;
        if (seen[i] > 1) dup += seen[i] - 1;
    }
    if (drop_last) {
        ASSERT_EQ_INT(total, n / world * world);
        ASSERT_EQ_INT(missing, n % world);
        ASSERT_EQ_INT(dup, 0);
    } else {
        ASSERT_EQ_INT(total, (n + world - 1) / world * world);
        ASSERT_EQ_INT(missing, 0);
        ASSERT_EQ_INT(dup, total - n);
    }
    free(seen);
}

TEST(sampler_shards_disjoint_union_is_dataset) {
    int ns[] = {1000, 1001, 997, 7, 60000};
    int worlds[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
            if (ns[i] < worlds[w]) continue;
            check_shards(ns[i], worlds[w], 0, 3);
            check_shards(ns[i], worlds[w], 1, 3);
        }
}

TEST(sampler_reshuffles_per_epoch_and_repeats_with_seed) {
    baton_dist_sampler a, b, c;
    ASSERT_OK(baton_dist_sampler_init(&a, 5000, 1, 4, 1, 0, 9));
    ASSERT_OK(baton_dist_sampler_init(&b, 5000, 1, 4, 1, 0, 9));
    ASSERT_OK(baton_dist_sampler_init(&c, 5000, 1, 4, 1, 0, 10));
    int32_t *e0 = malloc((size_t)a.len * sizeof(int32_t));
    memcpy(e0, a.idx, (size_t)a.len * sizeof(int32_t));
    baton_dist_sampler_set_epoch(&a, 1);
    ASSERT_TRUE(memcmp(e0, a.idx, (size_t)a.len * sizeof(int32_t)) != 0);    /* epoch 1 differs */
    ASSERT_TRUE(memcmp(e0, b.idx, (size_t)a.len * sizeof(int32_t)) == 0);    /* same seed, same epoch */
    ASSERT_TRUE(memcmp(e0, c.idx, (size_t)a.len * sizeof(int32_t)) != 0);    /* other seed */
    baton_dist_sampler_set_epoch(&b, 1);
    ASSERT_TRUE(memcmp(a.idx, b.idx, (size_t)a.len * sizeof(int32_t)) == 0);
    baton_dist_sampler_set_epoch(&a, 0);   /* going back reproduces epoch 0 */
    ASSERT_TRUE(memcmp(e0, a.idx, (size_t)a.len * sizeof(int32_t)) == 0);
    free(e0);
    baton_dist_sampler_free(&a);
    baton_dist_sampler_free(&b);
    baton_dist_sampler_free(&c);
    baton_dist_sampler_free(&c);   /* twice is safe */
}

/* Per-rank batch b on W ranks: step s's batches together are exactly the one-rank batch b*W of step s. */
TEST(sampler_step_union_equals_one_rank_batch) {
    int n = 1200, W = 3, b = 16;
    baton_dist_sampler one, r[3];
    ASSERT_OK(baton_dist_sampler_init(&one, n, 0, 1, 1, 0, 5));
    for (int q = 0; q < W; q++) ASSERT_OK(baton_dist_sampler_init(&r[q], n, q, W, 1, 0, 5));
    for (long epoch = 0; epoch < 2; epoch++) {
        baton_dist_sampler_set_epoch(&one, epoch);
        for (int q = 0; q < W; q++) baton_dist_sampler_set_epoch(&r[q], epoch);
        for (int s = 0; s < n / (b * W); s++) {
            int count[1200] = {0};
            for (int j = 0; j < b * W; j++) count[one.idx[s * b * W + j]]++;
            for (int q = 0; q < W; q++)
                for (int j = 0; j < b; j++) count[r[q].idx[s * b + j]]--;
            for (int i = 0; i < n; i++) ASSERT_EQ_INT(count[i], 0);
        }
    }
    baton_dist_sampler_free(&one);
    for (int q = 0; q < W; q++) baton_dist_sampler_free(&r[q]);
}

TEST(sampler_rejects_bad_arguments) {
    baton_dist_sampler s;
    ASSERT_EQ_INT(baton_dist_sampler_init(&s, 0, 0, 1, 1, 0, 1), BATON_EINVAL);
    ASSERT_EQ_INT(baton_dist_sampler_init(&s, 10, 2, 2, 1, 0, 1), BATON_EINVAL);
    ASSERT_EQ_INT(baton_dist_sampler_init(&s, 3, 0, 4, 1, 1, 1), BATON_EINVAL);   /* drop_last leaves nothing */
    ASSERT_OK(baton_dist_sampler_init(&s, 3, 3, 4, 1, 0, 1));                      /* padded: one index */
    ASSERT_EQ_INT(s.len, 1);
    baton_dist_sampler_free(&s);
}

TEST(shard_range_covers_without_overlap) {
    long ns[] = {0, 1, 7, 10000, 10001};
    for (size_t i = 0; i < 5; i++)
        for (int w = 1; w <= 9; w++) {
            long prev = 0;
            for (int r = 0; r < w; r++) {
                long lo, hi;
                baton_shard_range(ns[i], r, w, &lo, &hi);
                ASSERT_EQ_INT(lo, prev);
                ASSERT_TRUE(hi - lo == ns[i] / w || hi - lo == ns[i] / w + 1);
                prev = hi;
            }
            ASSERT_EQ_INT(prev, ns[i]);
        }
}

static baton_model *mlp(int h1, int h2) {
    baton_model *m;
    baton_model_config mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,
                             .hidden = {h1, h2}, .n_hidden = 2};
    ASSERT_OK(baton_model_new(&m, &mc, 1));
    return m;
}

/* Buckets tile the slab from its end, hold whole parameters, respect the caps (a parameter larger than a
 * cap gets a bucket of its own), and one process needs no communicator. */
TEST(buckets_tile_slab_in_reverse_with_caps) {
    baton_model *m = mlp(1024, 1024);   /* fc1.w 3.2 MB, fc2.w 4 MB, fc3.w 40 KB */
    baton_params *p = baton_model_params(m);
    baton_ddp_config dc = baton_ddp_defaults();
    baton_ddp *d;
    ASSERT_OK(baton_ddp_new(&d, NULL, p, NULL, &dc));
    size_t lo, hi, prev_lo = baton_params_numel(p);
    int nb = baton_ddp_bucket(d, 0, &lo, &hi);
    /* [fc3.b fc3.w fc2.b] under 1 MiB (fc2.w would pass it); [fc2.w fc1.b fc1.w] (7.2 MB) under 25 MiB */
    ASSERT_EQ_INT(nb, 2);
    ASSERT_EQ_U64(lo, baton_params_info(p, baton_params_find(p, "fc2.bias"))->offset);
    for (int k = 0; k < nb; k++) {
        baton_ddp_bucket(d, k, &lo, &hi);
        ASSERT_EQ_U64(hi, prev_lo);
        ASSERT_TRUE(lo < hi);
        prev_lo = lo;
    }
    ASSERT_EQ_U64(prev_lo, 0);
    baton_ddp_free(d);

    dc.bucket_mb = 2.0;   /* fc2.w and fc1.w each exceed it: a bucket of their own */
    ASSERT_OK(baton_ddp_new(&d, NULL, p, NULL, &dc));
    nb = baton_ddp_bucket(d, 1, &lo, &hi);
    ASSERT_EQ_INT(nb, 4);   /* [fc3.b fc3.w fc2.b] [fc2.w] [fc1.b] [fc1.w] */
    ASSERT_EQ_U64(lo, baton_params_info(p, baton_params_find(p, "fc2.weight"))->offset);
    ASSERT_EQ_U64(hi, baton_params_info(p, baton_params_find(p, "fc2.bias"))->offset);
    baton_ddp_free(d);
    baton_model_free(m);
}

TEST(bad_config_is_rejected) {
    baton_model *m = mlp(8, 8);
    baton_ddp *d;
    baton_ddp_config dc = baton_ddp_defaults();
    dc.bucket_mb = 0;
    ASSERT_EQ_INT(baton_ddp_new(&d, NULL, baton_model_params(m), NULL, &dc), BATON_EINVAL);
    dc = baton_ddp_defaults();
    dc.grad_dtype = BATON_I32;
    ASSERT_EQ_INT(baton_ddp_new(&d, NULL, baton_model_params(m), NULL, &dc), BATON_EINVAL);
    dc = baton_ddp_defaults();
    dc.loss_scale = BATON_LOSS_SCALE_DYNAMIC;
    dc.loss_scale_init = 0.5f;
    ASSERT_EQ_INT(baton_ddp_new(&d, NULL, baton_model_params(m), NULL, &dc), BATON_EINVAL);
    baton_ddp_free(NULL);
    baton_model_free(m);
}

/* One process with a dynamic loss scale: backward is seeded with the scale, finish divides it back out,
 * an infinite gradient skips the step and halves the scale, clean steps double it after the interval. */
TEST(loss_scaler_one_process) {
    baton_model *m = mlp(16, 16);
    baton_params *p = baton_model_params(m);
    baton_tape *t = baton_tape_new(p, 1);
    baton_ddp_config dc = baton_ddp_defaults();
    dc.loss_scale = BATON_LOSS_SCALE_DYNAMIC;
    dc.loss_scale_init = 1024.0f;
    dc.growth_interval = 2;
    baton_ddp *d;
    ASSERT_OK(baton_ddp_new(&d, NULL, p, t, &dc));
    float x[4 * 784];
    int32_t y[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4 * 784; i++) x[i] = (float)((i * 37) % 11) / 11.0f;
    float *ref = malloc(baton_params_numel(p) * sizeof(float));
    for (int step = 0; step < 4; step++) {
        baton_tape_reset(t, 1);
        baton_tensor *loss = baton_cross_entropy(t, baton_model_forward(m, t, baton_tape_input(t, 2, (int[]){4, 784}, x)), y);
        baton_params_zero_grad(p);
        baton_ddp_prepare(d, 1);
        float s = baton_ddp_backward_scale(d);
        baton_tape_backward(t, loss, s);
        if (step == 0) {   /* reference: the unscaled gradient */
            memcpy(ref, baton_params_grad(p), baton_params_numel(p) * sizeof(float));
            for (size_t i = 0; i < baton_params_numel(p); i++) ref[i] /= s;
        }
        if (step == 2) baton_params_grad(p)[5] = INFINITY;
        int skip;
        ASSERT_OK(baton_ddp_finish(d, &skip));
        if (step == 0)
            for (size_t i = 0; i < baton_params_numel(p); i++)
                ASSERT_NEAR(baton_params_grad(p)[i], ref[i], 1e-6 * fabs(ref[i]) + 1e-12);
        ASSERT_EQ_INT(skip, step == 2);
        baton_ddp_stats st;
        baton_ddp_get_stats(d, &st);
        float want[] = {1024.0f, 2048.0f, 1024.0f, 1024.0f};   /* grows after 2 clean; halves on overflow */
        ASSERT_NEAR(st.loss_scale, want[step], 0);
    }
    free(ref);
    baton_ddp_free(d);
    baton_tape_free(t);
    baton_model_free(m);
}

TEST(checksum_sees_one_bit) {
    float a[100] = {0}, b[100] = {0};
    ASSERT_EQ_U64(baton_ddp_checksum(a, 100), baton_ddp_checksum(b, 100));
    b[99] = 1e-45f;   /* smallest subnormal: one bit */
    ASSERT_TRUE(baton_ddp_checksum(a, 100) != baton_ddp_checksum(b, 100));
}

/* ---- across processes -------------------------------------------------------------------------------- */

/* Starts prog_ddp on n ranks (the torchrun variables; rank 0 hosts the store). Returns the exit status;
 * *out gets the output. */
static int launch(int n, const char *env, const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "n=%d; pids=''; for r in $(seq 0 $((n - 1))); do "
             "%s RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n %s/tests/prog_ddp %s & pids=\"$pids $!\"; "
             "done; rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc",
             n, env, th_build_dir(), args);
    int rc = th_run(cmd, 100, out, NULL);
    if (rc != 0) fprintf(stderr, "%s\n--- exit %d, output:\n%s\n", cmd, rc, *out ? *out : "");
    return rc;
}

static int count_ok(const char *out) {
    int k = 0;
    for (const char *p = out; (p = strstr(p, "ddp ok rank")); p++) k++;
    return k;
}

static float *read_params(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)bytes);
    ASSERT_EQ_INT(fread(x, 1, (size_t)bytes, f), bytes);
    fclose(f);
    *n = (size_t)bytes / sizeof(float);
    return x;
}

/* Every parameter of b within 1e-5 relative of a's (relative to the larger of |a| and the slab's RMS, so
 * near-zero values are judged on the model's scale rather than on their own rounding). */
static void assert_params_close(const char *pa, const char *pb) {
    size_t na, nb;
    float *a = read_params(pa, &na), *b = read_params(pb, &nb);
    ASSERT_EQ_U64(na, nb);
    double ss = 0.0, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < na; i++) ss += (double)a[i] * a[i];
    double rms = sqrt(ss / (double)na);
    ASSERT_TRUE(rms > 1e-3);
    for (size_t i = 0; i < na; i++) {
        double scale = fabs(a[i]) > rms ? fabs(a[i]) : rms, rel = fabs((double)a[i] - b[i]) / scale;
        if (rel > worst) worst = rel, at = i;
    }
    fprintf(stderr, "  %s vs %s: worst relative difference %.2e (element %zu: %.9g vs %.9g)\n", pa, pb, worst, at,
            a[at], b[at]);
    ASSERT_TRUE(worst <= 1e-5);
    free(a);
    free(b);
}

/* The single-process reference (batch 64, 50 SGD steps), written to <tmp>/ref.bin. */
static const char *reference(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/ref.bin", th_tmpdir());
    char args[600], *out = NULL;
    snprintf(args, sizeof args, "--steps 50 --batch 64 --out %s", path);
    ASSERT_EQ_INT(launch(1, "", args, &out), 0);
    free(out);
    return path;
}

static void exact_vs_one_rank(int n, const char *env, const char *extra) {
    const char *ref = reference();
    char path[512], args[1024], *out = NULL;
    snprintf(path, sizeof path, "%s/ddp.bin", th_tmpdir());
    snprintf(args, sizeof args, "--steps 50 --batch 64 --out %s %s", path, extra);
    ASSERT_EQ_INT(launch(n, env, args, &out), 0);
    ASSERT_EQ_INT(count_ok(out), n);
    free(out);
    assert_params_close(ref, path);
}

TEST_T(exact_2_ranks, 120) { exact_vs_one_rank(2, "", ""); }
TEST_T(exact_4_ranks, 120) { exact_vs_one_rank(4, "", ""); }
TEST_T(exact_2_ranks_accum_2, 120) { exact_vs_one_rank(2, "", "--accum 2"); }
TEST_T(exact_4_ranks_accum_2, 120) { exact_vs_one_rank(4, "", "--accum 2"); }
/* many small buckets launched from the hook while backward runs, and the same without overlap */
TEST_T(exact_4_ranks_small_buckets, 120) { exact_vs_one_rank(4, "", "--bucket-mb 0.004 --first-bucket-mb 0.001"); }
TEST_T(exact_2_ranks_no_overlap, 120) { exact_vs_one_rank(2, "", "--no-overlap --bucket-mb 0.004"); }
TEST_T(exact_2_ranks_staged_not_zero_copy, 120) { exact_vs_one_rank(2, "", "--no-zero-copy --accum 4"); }
TEST_T(exact_4_ranks_tcp, 120) { exact_vs_one_rank(4, "BATON_TRANSPORT=tcp", "--bucket-mb 0.004"); }
/* ranks that start from different weights are made identical (rank 0's) before the first step */
TEST_T(exact_4_ranks_different_init_broadcast, 120) { exact_vs_one_rank(4, "", "--diverge-init"); }

/* Parses "key V" after "ddp ok rank R" lines: every rank must report the same value; returns it. */
static double same_on_all(const char *out, const char *key, int n) {
    double v0 = 0;
    int k = 0;
    for (const char *p = out; (p = strstr(p, "ddp ok rank")); p++, k++) {
        const char *q = strstr(p, key);
        ASSERT_TRUE(q != NULL);
        double v = atof(q + strlen(key));
        if (k == 0) v0 = v;
        ASSERT_NEAR(v, v0, 0);
    }
    ASSERT_EQ_INT(k, n);
    return v0;
}

/* 16-bit wire gradients: half the bytes, replicas stay identical (prog_ddp checks), accuracy within one
 * point of f32 after 200 steps, parameters close to f32's. */
TEST_T(bf16_and_f16_wire_train_like_f32, 180) {
    char *out = NULL;
    const char *common = "--steps 200 --batch 64 --lr 0.02";
    char args[512];
    snprintf(args, sizeof args, "%s", common);
    ASSERT_EQ_INT(launch(2, "", args, &out), 0);
    double acc32 = same_on_all(out, " acc ", 2), bytes32 = same_on_all(out, " bytes ", 2);
    free(out);
    const char *dts[] = {"bf16", "f16"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --grad-dtype %s --bucket-mb 0.004", common, dts[i]);
        ASSERT_EQ_INT(launch(2, "", args, &out), 0);
        double acc = same_on_all(out, " acc ", 2);
        fprintf(stderr, "  %s: accuracy %.4f vs f32 %.4f\n", dts[i], acc, acc32);
        ASSERT_NEAR(acc, acc32, 0.01);
        ASSERT_NEAR(same_on_all(out, " bytes ", 2), bytes32 / 2, 0);
        free(out);
    }
}

/* f16 with a dynamic loss scale that starts far too high: the first steps overflow, every rank skips
 * them together and halves the scale, then training proceeds and matches f32's accuracy. */
TEST_T(f16_dynamic_loss_scale_skips_together, 120) {
    char *out = NULL;
    ASSERT_EQ_INT(launch(4, "", "--steps 100 --batch 64 --grad-dtype f16 --loss-scale dynamic --scale-init 16777216",
                         &out), 0);
    double skipped = same_on_all(out, " skipped ", 4), scale = same_on_all(out, " scale ", 4);
    fprintf(stderr, "  skipped %g steps, final scale %g\n", skipped, scale);
    ASSERT_TRUE(skipped >= 1 && skipped < 20);
    ASSERT_NEAR(scale, 16777216.0 / pow(2.0, skipped), 0);
    ASSERT_TRUE(same_on_all(out, " acc ", 4) > 0.8);
    free(out);
}

/* Evaluation shards the test set: the counts add up to the whole set exactly once. */
TEST_T(sharded_eval_counts_each_sample_once, 60) {
    char *out = NULL;
    ASSERT_EQ_INT(launch(3, "", "--steps 1 --batch 63", &out), 0);
    ASSERT_NEAR(same_on_all(out, " evalcount ", 3), 1000, 0);
    free(out);
}

TEST_T(trace_is_chrome_json_with_comm_track, 60) {
    char path[512], args[700], *out = NULL;
    snprintf(path, sizeof path, "%s/trace.json", th_tmpdir());
    snprintf(args, sizeof args, "--steps 5 --batch 64 --bucket-mb 0.004 --first-bucket-mb 0.001 --trace %s", path);
    ASSERT_EQ_INT(launch(2, "", args, &out), 0);
    free(out);
    FILE *f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    char *text = calloc(1, 1 << 22);
    size_t len = fread(text, 1, (1 << 22) - 1, f);
    fclose(f);
    ASSERT_TRUE(len > 0);
    cJSON *j = cJSON_Parse(text);
    ASSERT_TRUE(j != NULL);
    cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    ASSERT_TRUE(cJSON_IsArray(ev));
    int allreduce[2] = {0, 0}, waits[2] = {0, 0};
    cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        int pid = cJSON_GetObjectItem(e, "pid")->valueint;
        ASSERT_TRUE(pid == 0 || pid == 1);
        if (!strncmp(name, "allreduce ", 10)) {
            ASSERT_EQ_INT(cJSON_GetObjectItem(e, "tid")->valueint, 1);   /* on the comm thread's track */
            ASSERT_TRUE(cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
            allreduce[pid]++;
        }
        if (!strcmp(name, "wait")) waits[pid]++;
    }
    for (int r = 0; r < 2; r++) {
        ASSERT_TRUE(allreduce[r] >= 5 * 2);   /* several buckets per step */
        ASSERT_EQ_INT(waits[r], 5);
    }
    cJSON_Delete(j);
    free(text);
}
