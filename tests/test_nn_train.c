/* test_nn_train.c: `baton train` end to end: short runs on real and synthetic data whose loss falls and
 * whose --json line parses, --save output, --accum, determinism across runs, and bad command lines. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "ckpt/safetensors.h"
#include "harness.h"

/* Runs baton train with args; returns the parsed last stdout line (the --json object). */
static cJSON *train_json(const char *args, char **log) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s train %s --json 2>/dev/null", th_baton(), args);
    int rc = th_run(cmd, 120, &out, NULL);
    if (rc != 0) th_fail(__FILE__, __LINE__, "'%s' exited %d: %s", cmd, rc, out ? out : "");
    char *last = out, *nl;
    while ((nl = strchr(last, '\n')) && nl[1]) last = nl + 1;
    cJSON *j = cJSON_Parse(last);
    if (!j) th_fail(__FILE__, __LINE__, "last line is not JSON: %s", last);
    if (log) *log = out;
    else free(out);
    return j;
}

static double num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v)) th_fail(__FILE__, __LINE__, "--json lacks number '%s'", key);
    return v->valuedouble;
}

TEST_T(train_mlp_50_steps_on_fashion_mnist_loss_falls, 120) {
    cJSON *j = train_json("--model mlp --data fashion-mnist --steps 50 --threads 1", NULL);
    ASSERT_EQ_INT(num(j, "world_size"), 1);
    ASSERT_EQ_INT(num(j, "steps"), 50);
    ASSERT_EQ_INT(num(j, "comm_exposed_ms"), 0);
    ASSERT_TRUE(num(j, "initial_loss") > 2.0);           /* ~ln 10 at the start */
    ASSERT_TRUE(num(j, "final_loss") < 0.75 * num(j, "initial_loss"));
    ASSERT_TRUE(num(j, "test_accuracy") > 0.6 && num(j, "test_accuracy") <= 1.0);
    ASSERT_TRUE(num(j, "samples_per_sec") > 0);
    ASSERT_TRUE(num(j, "step_ms") > 0);
    cJSON_Delete(j);
}

TEST_T(train_cnn_saves_safetensors_and_accumulates, 120) {
    char args[1024], path[512];
    snprintf(path, sizeof path, "%s/cnn.safetensors", th_tmpdir());
    snprintf(args, sizeof args, "--model cnn --channels 4,8 --hidden 16 --steps 30 --batch 32 --accum 2 --save %s", path);
    cJSON *j = train_json(args, NULL);
    ASSERT_EQ_INT(num(j, "accum"), 2);
    ASSERT_TRUE(num(j, "final_loss") < num(j, "initial_loss"));
    cJSON_Delete(j);
    baton_st_file *f;
    ASSERT_OK(baton_st_open(&f, path));
    ASSERT_EQ_INT(baton_st_count(f), 8);
    const baton_st_entry *e = baton_st_find(f, "conv2.weight");
    ASSERT_TRUE(e && e->ndim == 4 && e->shape[0] == 8 && e->shape[1] == 4 && e->shape[2] == 3);
    e = baton_st_find(f, "fc1.weight");
    ASSERT_TRUE(e && e->shape[0] == 16 && e->shape[1] == 8 * 7 * 7);
    ASSERT_STR_EQ(baton_st_meta(f, "model"), "cnn");
    baton_st_close(f);
}

TEST_T(train_is_deterministic_for_a_seed_and_synthetic_data_learns, 120) {
    char args[1024], a[512], b[512];
    snprintf(a, sizeof a, "%s/a.safetensors", th_tmpdir());
    snprintf(b, sizeof b, "%s/b.safetensors", th_tmpdir());
    const char *base = "--data synthetic --train-samples 3000 --hidden 64 --steps 40 --batch 32 --threads 1 --seed 5";
    snprintf(args, sizeof args, "%s --save %s", base, a);
    cJSON *j = train_json(args, NULL);
    ASSERT_TRUE(num(j, "final_loss") < 0.5 * num(j, "initial_loss"));
    ASSERT_TRUE(num(j, "test_accuracy") > 0.5);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "%s --save %s", base, b);
    cJSON_Delete(train_json(args, NULL));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", a, b);
    ASSERT_EQ_INT(th_run(cmd, 10, NULL, NULL), 0);
}

static void expect_cli_error(const char *args, const char *says) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s train %s", th_baton(), args);
    int rc = th_run(cmd, 60, &out, NULL);
    if (rc == 0 || rc >= 124) th_fail(__FILE__, __LINE__, "'%s' exited %d", args, rc);
    ASSERT_CONTAINS(out, says);
    size_t len = strlen(out);
    ASSERT_TRUE(len > 0 && strchr(out, '\n') == out + len - 1);   /* exactly one line */
    free(out);
}

TEST(train_bad_command_lines_give_one_line_errors) {
    expect_cli_error("--batch abc", "--batch");
    expect_cli_error("--batch 0", "out of range");
    expect_cli_error("--model resnet", "--model");
    expect_cli_error("--optim lion", "--optim");
    expect_cli_error("--frobnicate 3", "unknown option");
    expect_cli_error("--lr", "needs a value");
    expect_cli_error("--bucket-mb 0", "--bucket-mb");   /* data-parallel flags: see test_ddp_train.c */
    expect_cli_error("--grad-dtype f8", "--grad-dtype");
    expect_cli_error("--resume", "needs --checkpoint DIR");   /* checkpoints: see test_ckpt_train.c */
    expect_cli_error("--channels 4,8", "only applies");
    expect_cli_error("--hidden 10,,", "--hidden");
    expect_cli_error("--data-dir /nonexistent --steps 1", "/nonexistent/train-images-idx3-ubyte.gz");
    expect_cli_error("--data synthetic --train-samples 10 --batch 64", "exceeds");
    char *out = NULL;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s train --help", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_CONTAINS(out, "--model");
    free(out);
}
