/* test_ddp_train.c: `baton run -n N -- baton train` end to end (each run under a hard timeout):
 * N ranks with per-rank batch B/N save the parameters of one rank with batch B (also with --accum), the
 * sharded evaluation reports the one-process accuracy, the JSON summary carries the data-parallel fields,
 * --lr-scaling linear multiplies the learning rate, --drop-last and padding both run, 16-bit wire
 * gradients train to f32's accuracy on Fashion-MNIST, and bad flags fail with a one-line message. */
#include <math.h>
#include <stdio.h>

#include "baton/nn.h"
#include "ckpt/safetensors.h"
#include "harness.h"

static baton_model *load(const char *path) {
    baton_model *m;
    baton_model_config mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,
                             .hidden = {64, 64}, .n_hidden = 2};
    ASSERT_OK(baton_model_new(&m, &mc, 99));
    ASSERT_OK(baton_st_load_params(path, baton_model_params(m)));
    return m;
}

/* Every parameter within 1e-5 relative (floor: the slab's RMS, see test_ddp.c). */
static void assert_same_model(const char *pa, const char *pb) {
    baton_model *a = load(pa), *b = load(pb);
    const float *x = baton_params_data(baton_model_params(a)), *y = baton_params_data(baton_model_params(b));
    size_t n = baton_params_numel(baton_model_params(a));
    double ss = 0, worst = 0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double rms = sqrt(ss / (double)n);
    for (size_t i = 0; i < n; i++) {
        double s = fabs(x[i]) > rms ? fabs(x[i]) : rms, r = fabs((double)x[i] - y[i]) / s;
        if (r > worst) worst = r;
    }
    fprintf(stderr, "  worst relative difference %.2e\n", worst);
    ASSERT_TRUE(worst <= 1e-5);
    baton_model_free(a);
    baton_model_free(b);
}

#define SMALL "--data synthetic --train-samples 4096 --hidden 64,64 --steps 50 --schedule const --warmup 0"

static void exact(int n, int accum) {
    char args[1024], ref[512], got[512];
    snprintf(ref, sizeof ref, "%s/one.safetensors", th_tmpdir());
    snprintf(got, sizeof got, "%s/many.safetensors", th_tmpdir());
    snprintf(args, sizeof args, SMALL " --batch 64 --save %s", ref);
    char *j1 = th_train_json("", 1, args, 100);
    snprintf(args, sizeof args, SMALL " --batch %d --accum %d --save %s", 64 / n / accum, accum, got);
    char *jn = th_train_json("", n, args, 100);
    assert_same_model(ref, got);
    ASSERT_NEAR(th_jnum(jn, "world_size"), n, 0);
    ASSERT_NEAR(th_jnum(jn, "effective_batch"), 64, 0);
    ASSERT_NEAR(th_jnum(jn, "lr"), th_jnum(j1, "lr"), 0);
    ASSERT_TRUE(th_jnum(jn, "bytes_per_step") > 0);
    ASSERT_TRUE(th_jnum(jn, "comm_exposed_ms") >= 0 && th_jnum(jn, "step_ms") > 0);
    /* sharded evaluation over 10000 test samples: the same count as one process (the weights agree to
     * ~1e-7, so at most a sample on a decision boundary could flip) */
    ASSERT_NEAR(th_jnum(jn, "test_accuracy"), th_jnum(j1, "test_accuracy"), 1.5e-4);
    free(j1);
    free(jn);
}

TEST_T(train_2_ranks_equals_1_rank, 200) { exact(2, 1); }
TEST_T(train_4_ranks_accum_2_equals_1_rank, 200) { exact(4, 2); }

TEST_T(lr_scaling_linear_and_drop_last, 200) {
    char *j = th_train_json("", 2,
                            "--data synthetic --train-samples 1001 --hidden 16,16 --steps 5 --batch 50 --lr 0.01 "
                            "--lr-scaling linear --warmup-steps 2 --drop-last",
                            100);
    ASSERT_NEAR(th_jnum(j, "lr"), 0.02, 1e-12);
    ASSERT_NEAR(th_jnum(j, "effective_batch"), 100, 0);
    free(j);
    j = th_train_json("", 3, "--data synthetic --train-samples 1001 --hidden 16,16 --steps 5 --batch 50 --no-overlap",
                      100);
    ASSERT_NEAR(th_jnum(j, "world_size"), 3, 0);
    ASSERT_EQ_INT(strstr(j, "\"overlap\":false") != NULL, 1);
    free(j);
}

/* bf16 / f16 wire gradients: one epoch of Fashion-MNIST on 2 ranks reaches f32's accuracy within a point.
 * (A 256-wide MLP keeps the test to seconds; bench/ and docs/ddp.md cover the full-size one.) */
TEST_T(grad_dtype_16_bit_converges_like_f32, 300) {
    const char *common = "--hidden 256,256 --epochs 1";
    char args[512];
    snprintf(args, sizeof args, "%s", common);
    char *j32 = th_train_json("", 2, args, 280);
    double acc32 = th_jnum(j32, "test_accuracy");
    const char *dts[] = {"bf16", "f16 --loss-scale dynamic"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --grad-dtype %s", common, dts[i]);
        char *j = th_train_json("", 2, args, 280);
        fprintf(stderr, "  %s: accuracy %.4f vs f32 %.4f\n", dts[i], th_jnum(j, "test_accuracy"), acc32);
        ASSERT_NEAR(th_jnum(j, "test_accuracy"), acc32, 0.01);
        ASSERT_NEAR(th_jnum(j, "bytes_per_step"), th_jnum(j32, "bytes_per_step") / 2, 0);
        free(j);
    }
    ASSERT_TRUE(acc32 > 0.8);
    free(j32);
}

TEST(bad_ddp_flags_fail_with_one_line) {
    const char *bad[] = {"--grad-dtype f8", "--loss-scale sometimes", "--lr-scaling sqrt", "--bucket-mb 0",
                         "--bucket-mb lots"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s train %s", th_baton(), bad[i]);
        ASSERT_EQ_INT(th_run(cmd, 20, &out, NULL), 2);
        ASSERT_CONTAINS(out, "baton train: --");
        free(out);
    }
}
