/* test_train_ux.c: what a person meets using `baton train` (issue 11): every output path checked before
 * the first step; a resume with a longer --steps extends the schedule (never trains at lr 0); the progress
 * line and the final summary; the model configuration and input normalisation in the --save metadata.
 * Every run is one small process (synthetic data) under a hard timeout. */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "harness.h"

/* A small IDX data set in the test's directory (1024 training and 256 test images of 4x4, two classes: dark
 * and bright), written on first use; small() returns the flags that train on it: 32 steps per epoch. (Much
 * cheaper than --data synthetic, whose 10000 test samples of 28x28 are generated and evaluated every run.) */
static const char *small(void) {
    static char flags[700];
    char dir[600];
    snprintf(dir, sizeof dir, "%s/idx", th_tmpdir());
    snprintf(flags, sizeof flags, "--data-dir %s --hidden 32 --batch 32 --threads 1", dir);
    struct stat st;
    if (stat(dir, &st) == 0) return flags;
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    static const char *const names[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                                            {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
    for (int set = 0; set < 2; set++) {
        unsigned n = set ? 256 : 1024;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[set][0]);
        FILE *img = fopen(path, "wb");
        snprintf(path, sizeof path, "%s/%s", dir, names[set][1]);
        FILE *lbl = fopen(path, "wb");
        ASSERT_TRUE(img && lbl);
        unsigned char ih[16] = {0, 0, 8, 3, 0, 0, (unsigned char)(n >> 8), (unsigned char)n, 0, 0, 0, 4, 0, 0, 0, 4};
        unsigned char lh[8] = {0, 0, 8, 1, 0, 0, (unsigned char)(n >> 8), (unsigned char)n};
        fwrite(ih, 1, sizeof ih, img);
        fwrite(lh, 1, sizeof lh, lbl);
        for (unsigned k = 0; k < n; k++) {
            int label = (int)((k * 7 + set) % 2);
            fputc(label, lbl);
            for (int px = 0; px < 16; px++) fputc((label ? 140 : 60) + (int)((k * 31 + (unsigned)px * 17) % 90), img);
        }
        fclose(img);
        fclose(lbl);
    }
    return flags;
}

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

/* A bad output path fails at once, naming the flag, before any step (no progress or epoch line). */
static void refused_before_training(const char *flag_and_path, const char *flag, const char *why) {
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "%s --steps 64 --log-every 1 %s", small(), flag_and_path);
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
    snprintf(args, sizeof args, "%s --steps 3 --save %s/m.safetensors --trace %s/t.json --checkpoint %s/ck", small(), dir,
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
    snprintf(args, sizeof args, "%s --steps 20 --warmup 5 --checkpoint %s --save %s", small(), ck, a);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "%s --steps 40 --warmup 5 --checkpoint %s --resume --save %s --json", small(), ck, b);
    int rc = train(args, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    size_t la, lb;
    void *x = th_slurp(a, &la), *y = th_slurp(b, &lb);
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
    snprintf(args, sizeof args, "%s --steps 12 --warmup 2 --checkpoint %s", small(), ck);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "%s --steps 6 --warmup 2 --checkpoint %s --resume", small(), ck);
    int rc = train(args, &out);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "--steps 6");
    ASSERT_CONTAINS(out, "already completed 12 steps");
    free(out);
}

/* ---- what a person sees: the progress line and the summary (item 5) -------------------------------- */

/* Runs `baton train ARGS` on a pseudo-terminal (so stderr is a tty and the bar is drawn) and returns all it
 * wrote, with its exit status in *status. */
static char *train_on_a_terminal(const char *args, int *status) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec %s train %s", th_baton(), args);
    int master;
    struct winsize ws = {.ws_row = 40, .ws_col = 200};
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        struct termios t;   /* "\n" stays "\n" (a terminal's default turns it into "\r\n") */
        if (tcgetattr(0, &t) == 0) {
            t.c_oflag &= ~(tcflag_t)ONLCR;
            tcsetattr(0, TCSANOW, &t);
        }
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    for (;;) {   /* until the child closes the terminal (EIO on Linux) */
        struct pollfd p = {.fd = master, .events = POLLIN};
        if (poll(&p, 1, 60000) <= 0) {
            kill(pid, SIGKILL);
            th_fail(__FILE__, __LINE__, "no output from baton train on the terminal for 60 s");
        }
        ssize_t r = read(master, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
        if (len + 1 >= cap) break;
    }
    buf[len] = '\0';
    close(master);
    ASSERT_EQ_INT(waitpid(pid, status, 0), pid);
    return buf;
}

/* The last redraw of the bar before text (the last "\r..." before the first '\n' after it). */
static void last_bar_before(const char *out, const char *before, char *bar, size_t cap) {
    const char *end = strstr(out, before);
    ASSERT_TRUE(end != NULL);
    const char *start = end;
    while (start > out && start[-1] != '\r') start--;
    ASSERT_TRUE(start > out);
    const char *nl = memchr(start, '\n', (size_t)(end - start) + 1);
    size_t n = (size_t)((nl ? nl : end) - start);
    snprintf(bar, cap, "%.*s", (int)(n < cap ? n : cap - 1), start);
}

/* On a terminal, with --steps, the bar fills against the run's steps (it filled against each epoch, so a
 * run of 40 steps over 32-step epochs ended on a bar of 8/32), and shows lr, elapsed time and ETA. */
TEST_T(train_progress_bar_fills_against_steps_with_lr_elapsed_and_eta, 120) {
    int st;
    char args[1024], bar[512];
    snprintf(args, sizeof args, "%s --steps 40", small());
    char *out = train_on_a_terminal(args, &st);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fprintf(stderr, "%s\n", out);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    last_bar_before(out, "epoch 2/2: train loss", bar, sizeof bar);
    ASSERT_CONTAINS(bar, "step [########################] 40/40 (epoch 2/2)");
    ASSERT_CONTAINS(bar, "  lr 9.51e-05  ");   /* cosine, 100 warmup steps capped to 4: the last step's lr */
    ASSERT_CONTAINS(bar, " elapsed  ETA 0:00");
    last_bar_before(out, "epoch 1/2: train loss", bar, sizeof bar);
    ASSERT_CONTAINS(bar, "step [###################.....] 32/40 (epoch 1/2)");
    free(out);
    /* without --steps the bar is the epoch's */
    snprintf(args, sizeof args, "%s --epochs 1", small());
    out = train_on_a_terminal(args, &st);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    last_bar_before(out, "epoch 1/1: train loss", bar, sizeof bar);
    ASSERT_CONTAINS(bar, "epoch 1/1 [########################] 32/32  loss ");
    ASSERT_CONTAINS(bar, " elapsed  ETA 0:00");
    free(out);
}

/* The run ends with a summary: wall time, throughput, final and best accuracy, and where the parameters,
 * checkpoints and trace went; singular where there is one of a thing. */
TEST_T(train_ends_with_a_summary, 120) {
    char args[2048], *out = NULL, *dir = path_in_tmp("out");
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    snprintf(args, sizeof args, "%s --steps 40 --save %s/m.safetensors --trace %s/t.json --checkpoint %s/ck "
             "--checkpoint-every 16", small(), dir, dir, dir);
    int rc = train(args, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    const char *sum = strstr(out, "baton train: done in ");
    ASSERT_TRUE(sum != NULL);
    ASSERT_CONTAINS(sum, "s: mlp on fashion-mnist, 40 steps (2 epochs) on 1 rank x 1 thread/rank\n");
    ASSERT_CONTAINS(sum, "\n  training       ");
    ASSERT_CONTAINS(sum, " samples/s, ");
    ASSERT_CONTAINS(sum, "\n  test accuracy  ");
    ASSERT_CONTAINS(sum, "% at the end, best ");
    char want[1024];
    snprintf(want, sizeof want, "\n  parameters     %s/m.safetensors\n", dir);
    ASSERT_CONTAINS(sum, want);
    snprintf(want, sizeof want, "\n  checkpoints    %s/ck/step-40 (3 written, the newest 2 kept)\n", dir);
    ASSERT_CONTAINS(sum, want);
    snprintf(want, sizeof want, "\n  trace          %s/t.json", dir);
    ASSERT_CONTAINS(sum, want);
    free(out);
    /* one step, one epoch: singular words in the banner and the summary; not on a terminal, the progress
     * lines carry lr, elapsed time and ETA too */
    snprintf(args, sizeof args, "%s --steps 1 --schedule const --lr 0.01", small());
    ASSERT_EQ_INT(train(args, &out), 0);
    ASSERT_CONTAINS(out, ", 1 step (1 epoch x 32), 1 rank x batch 32 x accum 1 = effective batch 32, sgd lr 0.01, "
                         "1 thread/rank\n");
    ASSERT_CONTAINS(out, "\nstep 1/1 (epoch 1/1)  loss ");
    ASSERT_CONTAINS(out, "  lr 0.01  ");
    ASSERT_CONTAINS(out, " elapsed  ETA 0:00\n");
    ASSERT_CONTAINS(out, "s: mlp on fashion-mnist, 1 step (1 epoch) on 1 rank x 1 thread/rank\n");
    ASSERT_CONTAINS(out, "% at the end\n");   /* one evaluation: no "best" */
    free(out);
}

/* Two ranks: the summary counts every rank's samples and says per rank. */
TEST_T(train_summary_of_two_ranks, 120) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "export OPENBLAS_NUM_THREADS=1; %s run -n 2 -- %s train %s --steps 4 2>&1",
             th_baton(), th_baton(), small());
    ASSERT_EQ_INT(th_run(cmd, 120, &out, NULL), 0);
    ASSERT_CONTAINS(out, "s: mlp on fashion-mnist, 4 steps (1 epoch) on 2 ranks x 1 thread/rank\n");
    ASSERT_CONTAINS(out, " per rank), ");
    const char *first = strstr(out, "baton train: done in ");
    ASSERT_TRUE(first && !strstr(first + 1, "baton train: done in "));   /* rank 0 only */
    free(out);
}

/* ---- saved models describe themselves (item 7) -------------------------------------------------------- */

/* The metadata entry key of f equals want (a missing one fails, naming the key). */
#define ASSERT_META(f, key, want)                                                                           \
    do {                                                                                                    \
        const char *th_m = baton_st_meta(f, key);                                                           \
        if (!th_m) th_fail(__FILE__, __LINE__, "no metadata entry \"%s\"", key);                           \
        ASSERT_STR_EQ(th_m, want);                                                                          \
    } while (0)

/* --save records the model's whole configuration and, for image data, the input normalisation: the CNN's
 * channels were missing, and so was the normalisation without which a reader loses ~15 points. */
TEST_T(train_save_records_the_model_configuration, 120) {
    char args[2048], *out = NULL, *cnn = path_in_tmp("cnn.safetensors"), *mlp = path_in_tmp("mlp.safetensors");
    snprintf(args, sizeof args, "%s --steps 1 --model cnn --channels 2,3 --hidden 8 --save %s", small(), cnn);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "%s --steps 1 --hidden 16,8 --save %s", small(), mlp);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    baton_st_file *f;
    ASSERT_OK(baton_st_open(&f, cnn));
    ASSERT_META(f, "model", "cnn");
    ASSERT_META(f, "channels", "2,3");
    ASSERT_META(f, "hidden", "8");
    ASSERT_META(f, "input_shape", "1,4,4");
    ASSERT_META(f, "classes", "10");
    ASSERT_CONTAINS(baton_st_meta(f, "architecture"), "Conv2d(3x3, stride 1, padding 1) + ReLU + MaxPool2d(2)");
    ASSERT_META(f, "data", "fashion-mnist");   /* IDX images: the loader's normalisation */
    ASSERT_META(f, "input_mean", "0.2860");
    ASSERT_META(f, "input_std", "0.3530");
    ASSERT_META(f, "input_normalization", "x = (pixel / 255 - 0.2860) / 0.3530");
    baton_st_close(f);
    ASSERT_OK(baton_st_open(&f, mlp));
    ASSERT_META(f, "model", "mlp");
    ASSERT_META(f, "hidden", "16,8");
    ASSERT_TRUE(baton_st_meta(f, "channels") == NULL);
    ASSERT_META(f, "input_shape", "1,4,4");
    baton_st_close(f);
}

/* Synthetic inputs are not pixels: no normalisation is recorded, and the file says so. */
TEST_T(train_save_of_synthetic_data_records_no_pixel_normalization, 120) {
    char args[2048], *out = NULL, *m = path_in_tmp("m.safetensors");
    snprintf(args, sizeof args, "--data synthetic --train-samples 64 --hidden 4 --batch 32 --steps 1 --threads 1 "
             "--save %s", m);
    ASSERT_EQ_INT(train(args, &out), 0);
    free(out);
    baton_st_file *f;
    ASSERT_OK(baton_st_open(&f, m));
    ASSERT_META(f, "data", "synthetic");
    ASSERT_META(f, "input_shape", "1,28,28");
    ASSERT_TRUE(baton_st_meta(f, "input_mean") == NULL);
    ASSERT_CONTAINS(baton_st_meta(f, "input_normalization"), "none");
    baton_st_close(f);
}
