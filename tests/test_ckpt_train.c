/* test_ckpt_train.c: `baton train --checkpoint/--resume` end to end, each run under a hard timeout.
 * A run killed part-way (BATON_TEST_DIE_AT_STEP makes one rank SIGKILL itself as that step starts) and
 * restarted (by `baton run --max-restarts`, or by hand for one process) with --resume ends with parameters,
 * optimizer state, the whole final checkpoint and the --save file byte-identical to a run never killed:
 * data-parallel with dropout; data-parallel with f16 wire gradients and a dynamic loss scale that skips
 * steps; one process with AdamW and gradient accumulation. Also: the launcher gives up after K restarts and
 * reports every failure, and resuming with other settings, or into a used directory, fails with one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SMALL "--data synthetic --train-samples 1024 --hidden 64,64 --batch 32 --threads 1 --json"

static char *dir_of(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", th_tmpdir(), name);
    return p;
}

/* Runs `cmd` (a shell command) with the environment tests need; returns its status and output. */
static int sh(const char *cmd, double timeout_s, char **out) {
    char full[8192];
    snprintf(full, sizeof full, "export OPENBLAS_NUM_THREADS=1 BATON_FLIGHT_DIR=%s; %s 2>&1", th_tmpdir(), cmd);
    int rc = th_run(full, timeout_s, out, NULL);
    return rc;
}

static void must(const char *cmd, double timeout_s, char **out) {
    int rc = sh(cmd, timeout_s, out);
    if (rc != 0) fprintf(stderr, "%s\n--- exit %d, output:\n%s\n", cmd, rc, *out ? *out : "");
    ASSERT_EQ_INT(rc, 0);
}

/* memcmp of two whole files. */
static void same_bytes(const char *a, const char *b) {
    size_t la, lb;
    void *x = th_slurp(a, &la), *y = th_slurp(b, &lb);
    if (la != lb || memcmp(x, y, la)) th_fail(__FILE__, __LINE__, "%s and %s differ", a, b);
    free(x);
    free(y);
}

/* The final checkpoint (every file) and the --save files of the two runs are byte-identical. */
static void same_final(const char *ref, const char *got, long step) {
    /* ZeRO runs on 2 ranks write the optimizer state as two shards */
    static const char *const files[] = {"model.safetensors", "optim.safetensors", "state.json", "COMMIT",
                                        "optim-0.safetensors", "optim-1.safetensors"};
    char probe[600];
    snprintf(probe, sizeof probe, "%s/step-%ld/optim.safetensors", ref, step);
    int sharded = access(probe, F_OK) != 0;
    for (int i = 0; i < 6; i++) {
        char a[600], b[600];
        if (sharded ? i == 1 : i >= 4) continue;
        snprintf(a, sizeof a, "%s/step-%ld/%s", ref, step, files[i]);
        snprintf(b, sizeof b, "%s/step-%ld/%s", got, step, files[i]);
        same_bytes(a, b);
    }
    char a[600], b[600];
    snprintf(a, sizeof a, "%s.safetensors", ref);
    snprintf(b, sizeof b, "%s.safetensors", got);
    same_bytes(a, b);
}

/* An uninterrupted run into REF and a run whose rank `die_rank` dies as step `die` starts, restarted once by
 * baton run with --resume (every attempt passes --resume: the first finds nothing and starts from 0). */
static void ddp_kill_and_compare(const char *args, long steps, int die, long resumed, char **ref_out, char **got_out) {
    char cmd[4096], *ref = dir_of("ref"), *got = dir_of("got");
    snprintf(cmd, sizeof cmd, "%s run -n 2 -- %s train " SMALL " %s --steps %ld --checkpoint %s --save %s.safetensors",
             th_baton(), th_baton(), args, steps, ref, ref);
    must(cmd, 120, ref_out);
    snprintf(cmd, sizeof cmd, "%s run -n 2 --max-restarts 1 -- sh -c 'if [ $BATON_RESTART_COUNT = 0 ]; then export "
             "BATON_TEST_DIE_AT_STEP=%d; fi; exec %s train " SMALL " %s --steps %ld --checkpoint %s --save %s.safetensors "
             "--resume'", th_baton(), die, th_baton(), args, steps, got, got);
    must(cmd, 120, got_out);
    ASSERT_CONTAINS(*got_out, "no complete checkpoint in");
    ASSERT_CONTAINS(*got_out, "attempt 0: rank 1 killed by signal 9 (SIGKILL)");
    ASSERT_CONTAINS(*got_out, "restarting all 2 workers (restart 1 of 1)");
    char want[600];
    snprintf(want, sizeof want, "resuming from %s/step-%ld", got, resumed);
    ASSERT_CONTAINS(*got_out, want);
    ASSERT_NEAR(th_jnum(*got_out, "resumed_from_step"), resumed, 0);
    same_final(ref, got, steps);
    ASSERT_NEAR(th_jnum(*got_out, "test_accuracy"), th_jnum(*ref_out, "test_accuracy"), 0);
}

TEST_T(ckpt_train_ddp_killed_at_step_17_restarts_and_ends_bit_identical, 300) {
    char *a, *b;
    /* 16 steps per epoch: the restart resumes at step 15 of epoch 1 and crosses into epochs 2 and 3 */
    ddp_kill_and_compare("--dropout 0.2 --checkpoint-every 5", 40, 17, 15, &a, &b);
    free(a);
    free(b);
}

TEST_T(ckpt_train_ddp_f16_wire_and_dynamic_loss_scale_resume_bit_identical, 300) {
    char *a, *b;
    /* a 2^24 start overflows f16: the scaler skips steps and halves; resumed mid-epoch at step 20 */
    ddp_kill_and_compare("--grad-dtype f16 --loss-scale dynamic --loss-scale-init 16777216 --optim adamw "
                         "--checkpoint-every 4", 30, 22, 20, &a, &b);
    ASSERT_TRUE(th_jnum(a, "skipped_steps") > 0);
    ASSERT_NEAR(th_jnum(b, "skipped_steps"), th_jnum(a, "skipped_steps"), 0);
    ASSERT_NEAR(th_jnum(b, "loss_scale"), th_jnum(a, "loss_scale"), 0);
    free(a);
    free(b);
}

TEST_T(ckpt_train_zero2_killed_restarts_and_ends_bit_identical, 300) {
    char *a, *b;
    /* each rank writes its optimizer shard; the restart resumes from them at step 8 */
    ddp_kill_and_compare("--zero 2 --optim adamw --clip 0.5 --checkpoint-every 4", 12, 10, 8, &a, &b);
    ASSERT_NEAR(th_jnum(b, "zero"), 2, 0);
    free(a);
    free(b);
}

TEST_T(ckpt_train_one_process_adamw_accum_resume_bit_identical, 300) {
    char cmd[4096], *out, *ref = dir_of("ref"), *got = dir_of("got");
    const char *args = SMALL " --optim adamw --accum 2 --batch 16 --dropout 0.1 --steps 30 --checkpoint-every 7";
    snprintf(cmd, sizeof cmd, "%s train %s --checkpoint %s --save %s.safetensors", th_baton(), args, ref, ref);
    must(cmd, 120, &out);
    free(out);
    snprintf(cmd, sizeof cmd, "BATON_TEST_DIE_AT_STEP=25 %s train %s --checkpoint %s --save %s.safetensors", th_baton(),
             args, got, got);
    ASSERT_EQ_INT(sh(cmd, 120, &out), 128 + 9);   /* SIGKILL */
    free(out);
    snprintf(cmd, sizeof cmd, "%s train %s --checkpoint %s --save %s.safetensors --resume", th_baton(), args, got, got);
    must(cmd, 120, &out);
    char want[600];
    snprintf(want, sizeof want, "resuming from %s/step-21", got);
    ASSERT_CONTAINS(out, want);
    same_final(ref, got, 30);
    free(out);
    /* resuming a finished run takes no step and reports the same accuracy */
    char *again;
    must(cmd, 120, &again);
    ASSERT_NEAR(th_jnum(again, "resumed_from_step"), 30, 0);
    ASSERT_NEAR(th_jnum(again, "steps"), 30, 0);
    ASSERT_TRUE(th_jnum(again, "test_accuracy") > 0.5);
    free(again);
}

TEST_T(ckpt_train_launcher_gives_up_after_k_restarts_reporting_every_failure, 300) {
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s run -n 2 --max-restarts 2 -- sh -c 'BATON_TEST_DIE_AT_STEP=3 exec %s train " SMALL
             " --steps 20 --checkpoint-every 2 --checkpoint %s --resume'", th_baton(), th_baton(), dir_of("ck"));
    ASSERT_EQ_INT(sh(cmd, 120, &out), 1);
    for (int a = 0; a < 3; a++) {
        char want[128];
        snprintf(want, sizeof want, "attempt %d: rank 1 killed by signal 9 (SIGKILL)", a);
        ASSERT_CONTAINS(out, want);
    }
    ASSERT_CONTAINS(out, "giving up after 2 restart(s); every failure:");
    /* attempts 1 and 2 resumed from the checkpoint of step 2 and died again at step 3 */
    ASSERT_CONTAINS(out, "resuming from");
    free(out);
}

TEST_T(ckpt_train_bad_uses_fail_with_one_line, 300) {
    char cmd[4096], *out, *ck = dir_of("ck");
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 3 --resume", th_baton());
    ASSERT_EQ_INT(sh(cmd, 60, &out), 2);
    ASSERT_CONTAINS(out, "--resume: needs --checkpoint DIR");
    free(out);
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 3 --checkpoint-every 0 --checkpoint %s", th_baton(), ck);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 6 --checkpoint-every 3 --checkpoint %s", th_baton(), ck);
    must(cmd, 60, &out);
    free(out);
    /* a used directory without --resume */
    ASSERT_EQ_INT(sh(cmd, 60, &out), 2);
    ASSERT_CONTAINS(out, "already holds checkpoints; pass --resume");
    free(out);
    /* other settings */
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 9 --seed 2 --checkpoint %s --resume", th_baton(), ck);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 2);
    ASSERT_CONTAINS(out, "was written with seed=1 but this run has seed=2");
    free(out);
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 9 --hidden 32 --checkpoint %s --resume", th_baton(), ck);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 2);
    ASSERT_CONTAINS(out, "hidden=64,64 but this run has hidden=32");
    free(out);
    /* another world size or batch is a conversion, not a refusal: tests/test_zero.c */
    /* a damaged newest checkpoint: warned about, the older one is used */
    char path[600];
    snprintf(path, sizeof path, "%s/step-6/state.json", ck);
    FILE *f = fopen(path, "ab");
    fputs(" ", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s train " SMALL " --steps 9 --checkpoint-every 3 --checkpoint %s --resume", th_baton(), ck);
    must(cmd, 60, &out);
    ASSERT_CONTAINS(out, "skipping");
    ASSERT_CONTAINS(out, "step-6/state.json");
    ASSERT_CONTAINS(out, "resuming from");
    ASSERT_NEAR(th_jnum(out, "resumed_from_step"), 3, 0);
    ASSERT_CONTAINS(out, "--steps 9 extends the checkpoint's schedule from 6 to 9 steps");   /* issue 11: longer runs extend */
    free(out);
    /* the test knob is checked too */
    snprintf(cmd, sizeof cmd, "BATON_TEST_DIE_AT_STEP=soon %s train " SMALL " --steps 3", th_baton());
    ASSERT_EQ_INT(sh(cmd, 60, &out), 1);
    ASSERT_CONTAINS(out, "BATON_TEST_DIE_AT_STEP");
    free(out);
}
