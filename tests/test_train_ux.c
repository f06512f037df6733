/* test_train_ux.c: what a person meets using `baton train` (issue 11): every output path checked before
 * the first step; a resume with a longer --steps extends the schedule (never trains at lr 0); the progress
 * line and the final summary; the model configuration and input normalisation in the --save metadata.
 * Every run is one small process (synthetic data) under a hard timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/safetensors.h"
#include "harness.h"

#define SMALL "--data synthetic --train-samples 1024 --hidden 32 --batch 32 --threads 1"

/* Runs `baton train ARGS` with stderr folded into the output; returns the exit status. */
static int train(const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "export OPENBLAS_NUM_THREADS=1 BATON_FLIGHT_DIR=%s; %s train %s 2>&1", th_tmpdir(),
             th_baton(), args);
    return th_run(cmd, 120, out, NULL);
}

static char *path_in_tmp(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", th_tmpdir(), name);
    return p;
}

static void *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) th_fail(__FILE__, __LINE__, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n + 1);
    ASSERT_EQ_INT(fread(buf, 1, (size_t)n, f), n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A bad output path fails at once, naming the flag, before any step (no progress or epoch line). */
static void refused_before_training(const char *flag_and_path, const char *flag, const char *why) {
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, SMALL " --steps 64 --log-every 1 %s", flag_and_path);
    int rc = train(args, &out);
    if (rc != 2) fprintf(stderr, "output:\n%s\n", out ? out : "");
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, flag);
    ASSERT_CONTAINS(out, why);
    ASSERT_TRUE(strstr(out, "step 1/") == NULL);
    ASSERT_TRUE(strstr(out, "epoch 1/") == NULL);
    ASSERT_TRUE(strchr(out, '\n') == strrchr(out, '\n'));   /* one line */
    free(out);
}

TEST_T(train_save_into_missing_directory_fails_before_the_first_step, 120) {
    refused_before_training("--save /nonexistent/dir/x.safetensors", "--save", "/nonexistent/dir");
}

TEST_T(train_trace_into_missing_directory_fails_before_the_first_step, 120) {
    refused_before_training("--trace /nonexistent/t.json", "--trace", "/nonexistent");
}

TEST_T(train_checkpoint_where_nothing_can_be_created_fails_before_the_first_step, 120) {
    refused_before_training("--checkpoint /proc/x --checkpoint-every 64", "--checkpoint", "/proc");
}

TEST_T(train_save_onto_a_directory_fails_before_the_first_step, 120) {
    char arg[600];
    snprintf(arg, sizeof arg, "--save %s", th_tmpdir());
    refused_before_training(arg, "--save", "is a directory");
}

TEST_T(train_checkpoint_onto_a_file_fails_before_the_first_step, 120) {
    char arg[600], *f = path_in_tmp("plain");
    FILE *fp = fopen(f, "w");
    ASSERT_TRUE(fp != NULL);
    fclose(fp);
    snprintf(arg, sizeof arg, "--checkpoint %s", f);
    refused_before_training(arg, "--checkpoint", "not a directory");
}

/* Good paths still work, and the probe leaves nothing behind in the directories it checked. */
TEST_T(train_output_checks_leave_nothing_behind, 120) {
    char args[2048], *out = NULL, *dir = path_in_tmp("out");
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    snprintf(args, sizeof args, SMALL " --steps 3 --save %s/m.safetensors --trace %s/t.json --checkpoint %s/ck", dir,
             dir, dir);
    int rc = train(args, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    free(out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls -A %s | sort | tr '\\n' ' '", dir);
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_STR_EQ(out, "ck m.safetensors t.json ");
    free(out);
}

/* Resuming a finished 20-step run with --steps 40 trains 20 more steps at a learning rate above 0 (lr 0
 * would leave every parameter where it was), says how the schedule continues, and ends where a run that
 * resumes with the same longer schedule twice would: deterministically. */
TEST_T(train_resume_with_more_steps_extends_the_schedule, 180) {
    char args[2048], *out = NULL, *ck = path_in_tmp("ck"), *a = path_in_tmp("a.safetensors"),
                     *b = path_in_tmp("b.safetensors");
    snprintf(args, sizeof args, SMALL " --steps 20 --warmup 5 --checkpoint %s --save %s", ck, a);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, SMALL " --steps 40 --warmup 5 --checkpoint %s --resume --save %s --json", ck, b);
    int rc = train(args, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    size_t la, lb;
    void *x = slurp(a, &la), *y = slurp(b, &lb);
    ASSERT_EQ_INT(la, lb);
    ASSERT_TRUE(memcmp(x, y, la) != 0);   /* the 20 extra steps moved the parameters */
    free(x);
    free(y);
    ASSERT_CONTAINS(out, "extends the checkpoint's schedule from 20 to 40 steps");
    ASSERT_CONTAINS(out, "\"steps\":40");
    free(out);
    char step40[700];
    snprintf(step40, sizeof step40, "%s/step-40/COMMIT", ck);
    struct stat st;
    ASSERT_EQ_INT(stat(step40, &st), 0);
}

/* A command line that asks for fewer steps than the checkpoint already completed is refused, saying what
 * to pass (it used to evaluate, save and exit 0 as if it had trained). */
TEST_T(train_resume_with_fewer_steps_than_done_says_so, 120) {
    char args[2048], *out = NULL, *ck = path_in_tmp("ck");
    snprintf(args, sizeof args, SMALL " --steps 12 --warmup 2 --checkpoint %s", ck);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, SMALL " --steps 6 --warmup 2 --checkpoint %s --resume", ck);
    int rc = train(args, &out);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "--steps 6");
    ASSERT_CONTAINS(out, "already completed 12 steps");
    free(out);
}
