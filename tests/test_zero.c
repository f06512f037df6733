/* test_zero.c: ZeRO (`baton train --zero 1|2`) end to end under `baton run -n N` (each run under a hard
 * timeout). After 5 AdamW steps with clipping by global norm, on 2, 3 (uneven shards) and 4 ranks: stage 1
 * saves the very bytes plain data parallelism saves (the same all-reduce, the same elementwise update, then
 * copies), stage 2 every tensor within 1e-5 of its RMS (only the sum of squares of the norm is ordered
 * differently). Stage 2 also without overlap with SGD momentum, with --accum 2, over TCP (where it falls back
 * to an all-reduce), and with bf16 wire gradients and dynamic loss scaling (no clipping: then the very bytes
 * of plain data parallelism, each element being reduced in the same order). The JSON reports the bytes per
 * rank: with 4 ranks the optimizer state is a quarter (both stages) and the reduced gradients kept are a
 * quarter at stage 2, whose gradient memory is that shard plus two bucket-sized staging slots (no whole slab),
 * and `baton plan memory` predicts each figure within 5 %.
 * Checkpoints: an 8-rank ZeRO-2 checkpoint resumed on 3 plain ranks (the same global batch) continues as the
 * 8-rank run does (parameters and Adam moments); `baton ckpt consolidate` writes the parameters byte for
 * byte; a damaged or incomplete shard set is refused with one line. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "baton/nn.h"
#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "harness.h"

static int same_bytes(const char *a, const char *b) {
    size_t la, lb;
    char *x = th_slurp(a, &la), *y = th_slurp(b, &lb);
    int same = la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return same;
}

static baton_model_config g_mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,
                                  .hidden = {64, 40}, .n_hidden = 2};   /* the model the runs train */

static baton_model *load(const char *path) {
    baton_model *m;
    baton_model_config mc = g_mc;
    ASSERT_OK(baton_model_new(&m, &mc, 99));
    ASSERT_OK(baton_st_load_params(path, baton_model_params(m)));
    return m;
}

/* Every tensor of b within 1e-5 of tensor a's RMS; returns the worst ratio. */
static double assert_close_per_tensor(const char *pa, const char *pb) {
    baton_model *a = load(pa), *b = load(pb);
    baton_params *p = baton_model_params(a);
    const float *x = baton_params_data(p), *y = baton_params_data(baton_model_params(b));
    double worst = 0;
    for (int t = 0; t < baton_params_count(p); t++) {
        const baton_param_info *v = baton_params_info(p, t);
        double ss = 0, md = 0;
        for (size_t i = v->offset; i < v->offset + v->count; i++) {
            ss += (double)x[i] * x[i];
            double d = fabs((double)x[i] - y[i]);
            if (d > md) md = d;
        }
        double rms = sqrt(ss / (double)v->count), r = rms > 0 ? md / rms : md;
        if (r > worst) worst = r;
        if (r > 1e-5) fprintf(stderr, "  %s: max difference %.3g, RMS %.3g\n", v->name, md, rms);
    }
    baton_model_free(a);
    baton_model_free(b);
    ASSERT_TRUE(worst <= 1e-5);
    return worst;
}

/* --hidden 64,40: a slab of 53,264 floats, which 2, 4 and 8 ranks divide (in-place all-gather) and 3 do not
 * (shards of 17,755 and 17,754 elements, the staged all-gather) */
#define BASE "--data synthetic --train-samples 4096 --hidden 64,40 --steps 5 --schedule const --warmup 0 --batch 16"

/* plain and the given stages (a bit mask: 2 = stage 1, 4 = stage 2) with the same flags on n ranks; j gets
 * the JSON lines (NULL: freed). Stage 1 must save the same bytes as plain; stage 2 the same bytes when
 * stage2_exact, else every tensor within 1e-5 of its RMS. */
static void zero_vs_plain(const char *env, int n, const char *flags, int stages, int stage2_exact, char *j[3]) {
    char args[1024], path[3][512];
    char *mine[3] = {NULL, NULL, NULL};
    if (!j) j = mine;
    for (int z = 0; z < 3; z++) {
        j[z] = NULL;
        if (z && !(stages & (1 << z))) continue;
        snprintf(path[z], sizeof path[z], "%s/z%d.safetensors", th_tmpdir(), z);
        snprintf(args, sizeof args, BASE " %s --zero %d --save %s", flags, z, path[z]);
        j[z] = th_train_json(env, n, args, 100);
        ASSERT_NEAR(th_jnum(j[z], "zero"), z, 0);
        /* ZeRO on one node shares one parameter slab, unless there is no shared memory to share it in */
        int shared = z > 0 && !strstr(flags, "--no-zero-copy") && !strstr(env, "BATON_TRANSPORT=tcp");
        ASSERT_TRUE(strstr(j[z], shared ? "\"params_shared\":true" : "\"params_shared\":false") != NULL);
    }
    if (j[1]) ASSERT_TRUE(same_bytes(path[0], path[1]));   /* stage 1: bit-identical to plain data parallelism */
    if (j[2] && stage2_exact) ASSERT_TRUE(same_bytes(path[0], path[2]));
    double w = j[2] ? assert_close_per_tensor(path[0], path[2]) : 0;
    fprintf(stderr, "  %d ranks %s: %sstage 2 worst %.2e of a tensor's RMS\n", n, flags, j[1] ? "stage 1 identical, " : "", w);
    /* the same training: the test set sees the same model */
    if (j[2]) ASSERT_NEAR(th_jnum(j[2], "test_accuracy"), th_jnum(j[0], "test_accuracy"), 2e-4);
    for (int z = 0; z < 3; z++)
        if (j == mine) free(j[z]);
}

#define ADAMW_CLIP "--optim adamw --clip 0.05"
TEST_T(zero_equals_plain_dp_2_ranks, 300) { zero_vs_plain("", 2, ADAMW_CLIP, 6, 0, NULL); }
TEST_T(zero_equals_plain_dp_3_ranks, 300) { zero_vs_plain("", 3, ADAMW_CLIP, 6, 0, NULL); }
/* The tests above share one parameter slab (one node, shared memory). Without it (--no-zero-copy, as across
 * nodes) the updated shards are all-gathered: staged, and by cross-memory attach (docs/zero.md; the test
 * model's slab is below BATON_CMA_MIN), in place on 2 ranks and out of place through the uneven path on 3. */
TEST_T(zero_equals_plain_dp_all_gather_3_ranks, 300) { zero_vs_plain("", 3, ADAMW_CLIP " --no-zero-copy", 6, 0, NULL); }
TEST_T(zero_equals_plain_dp_cma_all_gather_2_ranks, 300) {
    zero_vs_plain("BATON_CMA_MIN=0", 2, ADAMW_CLIP " --no-zero-copy", 6, 0, NULL);
}
TEST_T(zero_equals_plain_dp_cma_all_gather_3_ranks, 300) {
    zero_vs_plain("BATON_CMA_MIN=0", 3, ADAMW_CLIP " --no-zero-copy", 2, 0, NULL);
}
TEST_T(zero_equals_plain_dp_no_overlap_sgd, 300) {
    zero_vs_plain("", 2, "--no-overlap --optim sgd --clip 0.05", 4, 0, NULL);
}
TEST_T(zero_equals_plain_dp_accum_2, 300) { zero_vs_plain("", 3, ADAMW_CLIP " --accum 2 --batch 8", 4, 0, NULL); }
TEST_T(zero_equals_plain_dp_bf16_loss_scale, 300) {
    zero_vs_plain("", 2, "--optim adamw --grad-dtype bf16 --loss-scale dynamic --bucket-mb 0.02", 4, 1, NULL);
}
TEST_T(zero_equals_plain_dp_tcp, 300) {
    zero_vs_plain("BATON_TRANSPORT=tcp", 3, ADAMW_CLIP " --bucket-mb 0.02", 4, 0, NULL);
}

/* A model of several buckets (--bucket-mb 0.02: each 512-wide weight alone, 1 to 1.6 MiB; the biases and the
 * last layer small), so stage 2 recycles its two staging slots during backward (a weight waits for the
 * slot of the weight before last to be reduced) and stages the small buckets in their own places: 3 ranks
 * (uneven shards), within 1e-5 as above. */
TEST_T(zero2_recycled_staging_equals_plain_dp_3_ranks, 300) {
    g_mc.hidden[0] = g_mc.hidden[1] = g_mc.hidden[2] = g_mc.hidden[3] = 512;
    g_mc.n_hidden = 4;
    zero_vs_plain("", 3, ADAMW_CLIP " --hidden 512,512,512,512 --bucket-mb 0.02", 4, 0, NULL);
}

/* `baton plan memory --ranks 4 --zero z PLAN_FLAGS` for the run's parameter count predicts, for z = 0, 1, 2,
 * the bytes per rank each run j[z] reports within 5 %: parameters, gradients (kept + staging), the reduced
 * gradients, the staging and the optimizer state. */
static void plan_predicts(char *const j[3], const char *plan_flags) {
    static const char *const pairs[5][2] = {{"params_bytes", "param_bytes"}, {"grads_bytes", "grad_bytes"},
                                            {"grad_reduced_bytes", "grad_reduced_bytes"},
                                            {"grad_staging_bytes", "grad_staging_bytes"}, {"optimizer_bytes", "optim_bytes"}};
    for (int z = 0; z < 3; z++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s plan memory --params %.0f --ranks 4 --zero %d %s --json", th_baton(),
                 th_jnum(j[z], "params"), z, plan_flags);
        ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 0);
        for (int k = 0; k < 5; k++) {
            double want = th_jnum(j[z], pairs[k][1]), got = th_jnum(out, pairs[k][0]);
            if (fabs(got - want) > 0.05 * want)
                fprintf(stderr, "  zero %d: plan %s %.0f vs run %s %.0f\n", z, pairs[k][0], got, pairs[k][1], want);
            ASSERT_TRUE(fabs(got - want) <= 0.05 * want);
        }
        free(out);
    }
}

/* 4 ranks (small buckets, so buckets straddle the shards): exact as above, and the bytes per rank in the JSON:
 * the optimizer state is sharded four ways at both stages, the reduced gradients four ways at stage 2. */
TEST_T(zero_equals_plain_dp_4_ranks_memory, 300) {
    char *j[3];
    zero_vs_plain("", 4, ADAMW_CLIP " --bucket-mb 0.02", 6, 0, j);
    double params = th_jnum(j[0], "param_bytes"), optim = th_jnum(j[0], "optim_bytes");
    ASSERT_NEAR(optim, 2 * params, 0);   /* AdamW: two moments per parameter */
    ASSERT_NEAR(th_jnum(j[0], "grad_reduced_bytes"), params, 0);
    for (int z = 1; z < 3; z++) {
        ASSERT_NEAR(th_jnum(j[z], "param_bytes"), params, 0);
        ASSERT_NEAR(th_jnum(j[z], "optim_bytes"), optim / 4, 8);   /* shards differ by at most one element */
        ASSERT_TRUE(th_jnum(j[z], "peak_rss_bytes") > 0);
    }
    ASSERT_NEAR(th_jnum(j[1], "grad_reduced_bytes"), params, 0);
    ASSERT_NEAR(th_jnum(j[2], "grad_reduced_bytes"), params / 4, 4);
    /* gradient memory: the whole slab without stage 2; at stage 2 the shard plus the staging, here one slot of
     * the one bucket (the first bucket's 1 MiB cap holds this whole model) */
    for (int z = 0; z < 2; z++) {
        ASSERT_NEAR(th_jnum(j[z], "grad_staging_bytes"), 0, 0);
        ASSERT_NEAR(th_jnum(j[z], "grad_bytes"), params, 0);
    }
    ASSERT_NEAR(th_jnum(j[2], "grad_staging_bytes"), params, 0);
    ASSERT_NEAR(th_jnum(j[2], "grad_bytes"), th_jnum(j[2], "grad_reduced_bytes") + params, 0);
    /* baton plan's memory model predicts each stage's bytes per rank within 5 % of what the run reports
     * (stage 2's gradients: the shard and the staging, given the bucket cap and the largest tensor) */
    plan_predicts(j, "--bucket-mb 0.02");
    for (int z = 0; z < 3; z++) free(j[z]);
}

/* Stage 2 keeps no whole gradient slab: on 4 ranks, with five layers of about 1 Mi floats in buckets of one
 * tensor each, a rank's gradient memory is its quarter of the reduced gradient plus two staging slots of the
 * largest bucket (a 1024 x 1024 weight) and the small buckets' own places, less than the whole slab plain DP
 * and stage 1 keep; the optimizer state is a quarter at both stages; `baton plan memory` predicts every figure
 * within 5 %. */
TEST_T(zero2_gradient_memory_is_shard_plus_two_bucket_slots, 300) {
    char *j[3];
    for (int z = 0; z < 3; z++) {
        char args[512];
        snprintf(args, sizeof args, "--data synthetic --train-samples 256 --hidden 1024,1024,1024,1024 --steps 2 "
                 "--warmup 0 --batch 8 --optim adamw --bucket-mb 0.02 --zero %d", z);
        j[z] = th_train_json("", 4, args, 100);
    }
    double params = th_jnum(j[0], "param_bytes"), slot = 1024 * 1024 * 4, shard = params / 4;
    for (int z = 0; z < 2; z++) {
        ASSERT_NEAR(th_jnum(j[z], "grad_bytes"), params, 0);
        ASSERT_NEAR(th_jnum(j[z], "grad_reduced_bytes"), params, 0);
    }
    ASSERT_NEAR(th_jnum(j[2], "grad_reduced_bytes"), shard, 4);
    /* two slots, and places of their own for the small buckets (the biases, the last layer): 14,352 floats */
    ASSERT_NEAR(th_jnum(j[2], "grad_staging_bytes"), 2 * slot + 14352 * 4, 0);
    ASSERT_NEAR(th_jnum(j[2], "grad_bytes"),
                th_jnum(j[2], "grad_reduced_bytes") + th_jnum(j[2], "grad_staging_bytes"), 0);
    ASSERT_TRUE(th_jnum(j[2], "grad_bytes") < 0.8 * params);
    for (int z = 1; z < 3; z++) ASSERT_NEAR(th_jnum(j[z], "optim_bytes"), th_jnum(j[0], "optim_bytes") / 4, 8);
    /* Every rank's resident set at the end: the peak is at least the resident set of that moment (getrusage's
     * ru_maxrss, which the summary used to report, lags it: the kernel raises that mark only when pages are
     * unmapped), the resident set is its anonymous, file-backed and shared-memory parts, and stage 1 holds
     * fewer anonymous pages than plain DP by at least the optimizer state it sheds (to 1 %: the program's
     * code and libraries, whose resident pages vary with the page cache, are not anonymous), and a smaller
     * proportional set by that plus the parameters the node's ranks now share. */
    double shed = th_jnum(j[0], "optim_bytes") - th_jnum(j[1], "optim_bytes");
    for (int r = 0; r < 4; r++) {
        for (int z = 0; z < 3; z++) {
            double peak = th_jarr(j[z], "peak_rss_bytes_per_rank", r), now = th_jarr(j[z], "rss_bytes_per_rank", r);
            ASSERT_TRUE(peak >= now && now > 0);
            ASSERT_NEAR(now, th_jarr(j[z], "rss_anon_bytes_per_rank", r) + th_jarr(j[z], "rss_file_bytes_per_rank", r) +
                        th_jarr(j[z], "rss_shmem_bytes_per_rank", r), 0);
        }
        double anon_saved = th_jarr(j[0], "rss_anon_bytes_per_rank", r) - th_jarr(j[1], "rss_anon_bytes_per_rank", r);
        if (!(anon_saved >= 0.99 * shed))
            th_fail(__FILE__, __LINE__, "rank %d: ZeRO-1 holds %.0f KiB fewer anonymous pages, less than the %.0f KiB "
                    "of optimizer state it sheds", r, anon_saved / 1024, shed / 1024);
        /* the proportional set also drops by three quarters of the parameters: the node's 4 ranks share one slab */
        double pss_saved = th_jarr(j[0], "pss_bytes_per_rank", r) - th_jarr(j[1], "pss_bytes_per_rank", r);
        if (!(pss_saved >= 0.99 * (shed + 0.75 * params)))
            th_fail(__FILE__, __LINE__, "rank %d: ZeRO-1's proportional set is %.0f KiB below plain DP's, less than the "
                    "%.0f KiB of optimizer state plus 3/4 of the parameters", r, pss_saved / 1024,
                    (shed + 0.75 * params) / 1024);
    }
    fprintf(stderr, "  gradients per rank: %.1f MiB plain, %.1f MiB ZeRO-2 (shard %.1f + staging %.1f); peak RSS %.0f / %.0f / "
            "%.0f MiB\n", params / 1048576, th_jnum(j[2], "grad_bytes") / 1048576, th_jnum(j[2], "grad_reduced_bytes") / 1048576,
            2 * slot / 1048576, th_jnum(j[0], "peak_rss_bytes") / 1048576, th_jnum(j[1], "peak_rss_bytes") / 1048576,
            th_jnum(j[2], "peak_rss_bytes") / 1048576);
    plan_predicts(j, "--bucket-mb 0.02 --largest-param 1048576");
    for (int z = 0; z < 3; z++) free(j[z]);
}

/* With --trace, each ZeRO step shows the wait for every rank ("barrier") apart from the parameter all-gather
 * ("allgather"), once per step on each rank's main track; sharing one slab, the two barriers around the update
 * and no all-gather; plain DP has neither. */
TEST_T(zero_trace_shows_barrier_and_allgather, 120) {
    static const struct { int zero; const char *flags; int barriers, gathers; } run[] = {
        {0, "", 0, 0}, {1, "--no-zero-copy", 3, 3}, {1, "", 6, 0}};
    for (int z = 0; z < 3; z++) {
        char path[512], args[900];
        snprintf(path, sizeof path, "%s/trace%d.json", th_tmpdir(), z);
        snprintf(args, sizeof args, "--data synthetic --train-samples 256 --hidden 64 --steps 3 --warmup 0 --batch 8 "
                 "--optim adamw --zero %d %s --trace %s", run[z].zero, run[z].flags, path);
        free(th_train_json("", 2, args, 100));
        char *text = th_slurp(path, NULL);
        cJSON *j = cJSON_Parse(text);
        ASSERT_TRUE(j != NULL);
        int n[2][2] = {{0, 0}, {0, 0}};   /* [rank][barrier, allgather] */
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
            cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
            if (!name || !pid || !tid) continue;
            int k = !strcmp(name, "barrier") ? 0 : !strcmp(name, "allgather") ? 1 : -1;
            if (k < 0) continue;
            ASSERT_TRUE(pid->valueint == 0 || pid->valueint == 1);
            ASSERT_EQ_INT(tid->valueint, 0);   /* the main thread's track */
            n[pid->valueint][k]++;
        }
        for (int r = 0; r < 2; r++) {
            ASSERT_EQ_INT(n[r][0], run[z].barriers);
            ASSERT_EQ_INT(n[r][1], run[z].gathers);
        }
        cJSON_Delete(j);
        free(text);
    }
}

/* `baton SUB ARGS` for each ARGS: exit 2 with one line containing `needle`. */
static void one_line_refusals(const char *sub, const char *const *bad, size_t n, const char *needle) {
    for (size_t i = 0; i < n; i++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s %s %s", th_baton(), sub, bad[i]);
        ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 2);
        ASSERT_CONTAINS(out, needle);
        ASSERT_EQ_INT(strchr(out, '\n') == out + strlen(out) - 1, 1);
        free(out);
    }
}

TEST(bad_zero_flag_fails_with_one_line) {
    const char *bad[] = {"--zero 3", "--zero -1", "--zero one"};
    one_line_refusals("train", bad, 3, "--zero");
}

/* Parameters and optimizer state of DIR's newest checkpoint, loaded into a full (unsharded) AdamW. */
typedef struct {
    baton_model *m;
    baton_optim *o;
    long step;
} loaded;

static loaded load_ckpt(const char *dir) {
    loaded l;
    baton_model_config mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,
                             .hidden = {64, 40}, .n_hidden = 2};
    ASSERT_OK(baton_model_new(&l.m, &mc, 99));
    baton_optim_config oc = {.kind = BATON_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    ASSERT_OK(baton_optim_new(&l.o, baton_model_params(l.m), &oc));
    baton_ckpt_state st;
    ASSERT_OK(baton_ckpt_load(dir, baton_model_params(l.m), l.o, &st));
    l.step = st.step;
    baton_ckpt_state_free(&st);
    return l;
}

/* Every tensor of slab y within 1e-5 of the RMS of the same tensor of slab x; returns the worst ratio. */
static double close_slabs(baton_params *p, const float *x, const float *y) {
    double worst = 0;
    for (int t = 0; t < baton_params_count(p); t++) {
        const baton_param_info *v = baton_params_info(p, t);
        double ss = 0, md = 0;
        for (size_t i = v->offset; i < v->offset + v->count; i++) {
            ss += (double)x[i] * x[i];
            if (fabs((double)x[i] - y[i]) > md) md = fabs((double)x[i] - y[i]);
        }
        double rms = sqrt(ss / (double)v->count), r = rms > 0 ? md / rms : md;
        if (r > worst) worst = r;
    }
    ASSERT_TRUE(worst <= 1e-5);
    return worst;
}

static void sh_ok(const char *cmd, double timeout) {
    char *out = NULL;
    int rc = th_run(cmd, timeout, &out, NULL);
    if (rc != 0) fprintf(stderr, "%s\n--- exit %d:\n%s\n", cmd, rc, out ? out : "");
    ASSERT_EQ_INT(rc, 0);
    free(out);
}

#define CKPT_ARGS "--data synthetic --train-samples 4096 --hidden 64,40 --schedule const --warmup 0 --optim adamw " \
                  "--clip 0.05 --threads 1 --steps 4 --checkpoint-every 2"

TEST_T(zero_checkpoint_8_ranks_resumed_on_3_plain_ranks, 400) {
    char cmd[4096], a[512], b[512], out[512];
    snprintf(a, sizeof a, "%s/a", th_tmpdir());
    snprintf(b, sizeof b, "%s/b", th_tmpdir());
    /* 8 ranks x batch 3 with ZeRO-2, checkpoints at steps 2 and 4 (each rank writes its optimizer shard) */
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s run -n 8 -- %s train " CKPT_ARGS " --zero 2 --batch 3 "
             "--checkpoint %s", th_baton(), th_baton(), a);
    sh_ok(cmd, 300);
    char shard[600];
    snprintf(shard, sizeof shard, "%s/step-2/optim-7.safetensors", a);
    ASSERT_EQ_INT(access(shard, F_OK), 0);
    /* only step 2 of it, resumed by 3 plain ranks x batch 8 (the same global batch of 24) */
    snprintf(cmd, sizeof cmd, "mkdir %s && cp -r %s/step-2 %s/ && OPENBLAS_NUM_THREADS=1 %s run -n 3 -- %s train "
             CKPT_ARGS " --batch 8 --checkpoint %s --resume", b, a, b, th_baton(), th_baton(), b);
    char *o = NULL;
    ASSERT_EQ_INT(th_run(cmd, 300, &o, NULL), 0);
    ASSERT_CONTAINS(o, "the checkpoint was written by 8 rank(s) x 3 samples per step, this run has 3 x 8");
    free(o);
    loaded x = load_ckpt(a), y = load_ckpt(b);
    ASSERT_EQ_INT(x.step, 4);
    ASSERT_EQ_INT(y.step, 4);
    baton_params *p = baton_model_params(x.m);
    double wp = close_slabs(p, baton_params_data(p), baton_params_data(baton_model_params(y.m)));
    double wm = close_slabs(p, baton_optim_state(x.o, 0), baton_optim_state(y.o, 0));
    double wv = close_slabs(p, baton_optim_state(x.o, 1), baton_optim_state(y.o, 1));
    fprintf(stderr, "  8 ranks ZeRO-2 vs resumed on 3 plain: parameters %.2e, exp_avg %.2e, exp_avg_sq %.2e\n", wp, wm, wv);
    ASSERT_EQ_INT(baton_optim_steps(y.o), 4);

    /* consolidate: one ordinary safetensors file with the parameters, byte for byte */
    snprintf(out, sizeof out, "%s/model.safetensors", th_tmpdir());
    snprintf(cmd, sizeof cmd, "%s ckpt consolidate %s -o %s", th_baton(), a, out);
    sh_ok(cmd, 60);
    baton_model *c;
    baton_model_config mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,
                             .hidden = {64, 40}, .n_hidden = 2};
    ASSERT_OK(baton_model_new(&c, &mc, 5));
    ASSERT_OK(baton_st_load_params(out, baton_model_params(c)));
    ASSERT_TRUE(!memcmp(baton_params_data(baton_model_params(c)), baton_params_data(p), baton_params_numel(p) * 4));
    baton_model_free(c);

    /* a shard set with a missing shard: the newest checkpoint is skipped (warned), then none is left */
    snprintf(cmd, sizeof cmd, "rm %s/step-4/optim-3.safetensors && rm -r %s/step-2", a, a);
    sh_ok(cmd, 20);
    snprintf(cmd, sizeof cmd, "%s ckpt consolidate %s -o %s.2 2>&1", th_baton(), a, out);
    o = NULL;
    ASSERT_EQ_INT(th_run(cmd, 60, &o, NULL), 1);
    ASSERT_CONTAINS(o, "optim-3.safetensors");
    ASSERT_CONTAINS(o, "no complete checkpoint verifies");
    free(o);
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s train " CKPT_ARGS " --batch 24 --checkpoint %s --resume 2>&1",
             th_baton(), a);
    o = NULL;
    ASSERT_EQ_INT(th_run(cmd, 60, &o, NULL), 1);
    ASSERT_CONTAINS(o, "no complete checkpoint verifies");
    free(o);
    baton_model_free(x.m);
    baton_model_free(y.m);
    baton_optim_free(x.o);
    baton_optim_free(y.o);
}

/* Resuming into ZeRO on one node: every rank loads the checkpoint's parameters into the one slab the node's
 * ranks share, then each takes its optimizer shard. A 3-rank plain run's step-2 checkpoint resumed by 2 ZeRO-1
 * ranks (the same global batch) ends at step 4 where the plain run did, within 1e-5 of each tensor's RMS. */
TEST_T(zero_resumes_plain_checkpoint_into_shared_slab, 300) {
    char cmd[4096], a[512], b[512];
    snprintf(a, sizeof a, "%s/a", th_tmpdir());
    snprintf(b, sizeof b, "%s/b", th_tmpdir());
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s run -n 3 -- %s train " CKPT_ARGS " --batch 8 --checkpoint %s",
             th_baton(), th_baton(), a);
    sh_ok(cmd, 200);
    char *o = NULL;
    snprintf(cmd, sizeof cmd, "mkdir %s && cp -r %s/step-2 %s/ && OPENBLAS_NUM_THREADS=1 %s run -n 2 -- %s train "
             CKPT_ARGS " --batch 12 --zero 1 --json --checkpoint %s --resume", b, a, b, th_baton(), th_baton(), b);
    ASSERT_EQ_INT(th_run(cmd, 200, &o, NULL), 0);
    ASSERT_CONTAINS(o, "\"params_shared\":true");
    free(o);
    loaded x = load_ckpt(a), y = load_ckpt(b);
    ASSERT_EQ_INT(y.step, 4);
    baton_params *p = baton_model_params(x.m);
    double wp = close_slabs(p, baton_params_data(p), baton_params_data(baton_model_params(y.m)));
    double wm = close_slabs(p, baton_optim_state(x.o, 0), baton_optim_state(y.o, 0));
    fprintf(stderr, "  3 plain ranks vs resumed on 2 ZeRO-1 ranks: parameters %.2e, exp_avg %.2e\n", wp, wm);
    baton_model_free(x.m);
    baton_model_free(y.m);
    baton_optim_free(x.o);
    baton_optim_free(y.o);
}

TEST(ckpt_consolidate_bad_usage_one_line) {
    const char *bad[] = {"", "merge x", "consolidate", "consolidate dir", "consolidate dir -o", "consolidate -x"};
    one_line_refusals("ckpt", bad, 6, "baton ckpt");
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s ckpt consolidate %s/none -o %s/x.safetensors", th_baton(), th_tmpdir(), th_tmpdir());
    ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 2);
    ASSERT_CONTAINS(out, "no complete checkpoint");
    free(out);
}
