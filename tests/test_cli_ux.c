/* test_cli_ux.c: the command line as a new user meets it (issue 11): `baton bench` output as nccl-tests
 * prints it and errors that name the flag; torchrun's spellings for `baton run`, --log-dir, --version,
 * the --threads warning; `baton train` argument errors. Every command runs under a hard timeout. */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static int sh(const char *cmd, double timeout_s, char **out) {
    char full[4096];
    snprintf(full, sizeof full, "export OPENBLAS_NUM_THREADS=1 BATON_FLIGHT_DIR=%s; %s 2>&1", th_tmpdir(), cmd);
    return th_run(full, timeout_s, out, NULL);
}

static int run_bench(const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run -n 2 -- %s bench %s", th_baton(), th_baton(), args);
    return sh(cmd, 60, out);
}

/* The last non-empty line of text (in a static buffer). */
static const char *last_line(const char *text) {
    static char buf[512];
    const char *end = text + strlen(text);
    while (end > text && end[-1] == '\n') end--;
    const char *start = end;
    while (start > text && start[-1] != '\n') start--;
    snprintf(buf, sizeof buf, "%.*s", (int)(end - start), start);
    return buf;
}

/* Without -c the wrong column says N/A (nothing was checked), and the output ends with nccl-tests'
 * "# Avg bus bandwidth" line whose value is the mean of the rows' busbw. */
TEST_T(bench_without_check_prints_na_and_the_average_bus_bandwidth, 60) {
    char *out = NULL;
    int rc = run_bench("allreduce -b 1K -e 4K -f 2 -n 2 -w 1 --min-time 0", &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    int rows = 0;
    double sum = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || strstr(line, "busbw_GBps")) {
            if (!strncmp(line, "# Avg bus bandwidth    : ", 25)) {
                ASSERT_EQ_INT(rows, 3);   /* after every row */
                ASSERT_NEAR(atof(line + 25), sum / rows, 1e-3 + 1e-3 * sum / rows);
                rows = 100;
            }
            continue;
        }
        ASSERT_TRUE(rows < 100);   /* the average line is the last */
        char size[32], count[32], type[16], op[16], algo[32], wrong[16];
        double t, algbw, busbw;
        ASSERT_EQ_INT(sscanf(line, "%31s %31s %15s %15s %31s %lf %lf %lf %15s", size, count, type, op, algo, &t, &algbw,
                             &busbw, wrong), 9);
        ASSERT_STR_EQ(wrong, "N/A");
        sum += busbw;
        rows++;
    }
    ASSERT_EQ_INT(rows, 100);
    free(out);
}

/* With -c 1: a count in the wrong column, nccl-tests' "# Out of bounds values : 0 OK" line, then the average. */
TEST_T(bench_with_check_counts_and_ends_like_nccl_tests, 60) {
    char *out = NULL;
    int rc = run_bench("allreduce -b 1K -e 4K -f 4 -n 2 -w 1 -c 1 --min-time 0", &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : ");
    ASSERT_TRUE(strstr(out, "N/A") == NULL);
    ASSERT_CONTAINS(last_line(out), "# Avg bus bandwidth");
    free(out);
}

/* A bad value names the flag it was given for, short or long. */
TEST_T(bench_bad_values_name_the_flag, 60) {
    static const char *const cases[][2] = {{"allreduce -d f8", "bad value 'f8' for -d"},
                                           {"allreduce -o mean", "bad value 'mean' for -o"},
                                           {"allreduce -n 0", "bad value '0' for -n"},
                                           {"allreduce --algo fast", "bad value 'fast' for --algo"},
                                           {"allreduce --min-time=x", "bad value 'x' for --min-time"},
                                           {"allreduce -b", "option -b needs a value"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s bench %s", th_baton(), cases[i][0]);
        ASSERT_EQ_INT(sh(cmd, 30, &out), 2);
        ASSERT_CONTAINS(out, cases[i][1]);
        free(out);
    }
}

/* --runs lists every timed run (rank 0, stderr) in the order it ran: each round in the order of the Williams
 * design (baton__round_order), and no size's runs fault pages in: the buffers are allocated for the largest
 * size and written once before anything runs. Until 2026-11-26 every size allocated fresh buffers, so the first
 * algorithm of each round after a size change faulted in the whole output buffer (256 pages at 1 MiB) and, from
 * 32 MiB, measured 1.2-1.5x slower than the same algorithm later in the round
 * (docs/measurements/plan-history.md, "Same algorithm, two times"). Ring over tcp
 * with 2 ranks, f32, out of place, uses no scratch, so its runs may fault only the odd page. */
TEST_T(bench_runs_lists_every_run_in_order_and_no_size_faults_its_buffers_in, 90) {
    char *out = NULL;
    int rc = run_bench("allreduce --csv --runs --transport tcp --algo ring,rd --rounds 1 --sweeps 3 -b 1M -e 4M -f 2 -w 1 "
                       "-n 1 --min-time 0",
                       &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    int nruns = 0, ring_runs = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "run,", 4)) continue;
        unsigned long long bytes;
        long sweep, round, iters, faults;
        int pos;
        char asked[16], used[16];
        double us;
        ASSERT_EQ_INT(sscanf(line, "run,%llu,%ld,%ld,%d,%15[^,],%15[^,],%lf,%ld,%ld", &bytes, &sweep, &round, &pos, asked,
                             used, &us, &iters, &faults),
                      9);
        /* 3 sweeps x 3 sizes x 2 algorithms, in order: sweep, size, position */
        ASSERT_EQ_INT((long)sweep, nruns / 6);
        ASSERT_EQ_INT((long long)bytes, (1LL << 20) << ((nruns / 2) % 3));
        ASSERT_EQ_INT(round, sweep);
        ASSERT_EQ_INT(pos, nruns % 2);
        ASSERT_STR_EQ(asked, (round + pos) % 2 ? "rd" : "ring");   /* 2 algorithms: round r starts with r mod 2 */
        ASSERT_STR_EQ(asked, used);
        ASSERT_TRUE(us > 0 && iters == 1);
        if (!strcmp(asked, "ring")) {
            if (faults >= 64) fprintf(stderr, "%s\n", line);
            ASSERT_TRUE(faults < 64);
            ring_runs++;
        }
        nruns++;
    }
    ASSERT_EQ_INT(nruns, 18);
    ASSERT_EQ_INT(ring_runs, 9);
    free(out);
}

/* ---- baton run: torchrun's spellings ---------------------------------------------------------------- */

/* Runs `baton run ARGS -- sh -c SCRIPT` (SCRIPT in single quotes); returns the exit status. */
static int run_sh(const char *args, const char *script, char **out) {
    char cmd[3072];
    snprintf(cmd, sizeof cmd, "%s run %s -- sh -c '%s'", th_baton(), args, script);
    return sh(cmd, 60, out);
}

/* torchrun's command lines, as people paste them, start the same workers as baton's own flags. */
TEST_T(run_accepts_torchrun_spellings, 120) {
    static const char *const lines[] = {
        "--nproc_per_node 2 --max_restarts 0", "--nproc_per_node=2 --no_python --rdzv_backend c10d --rdzv_id abc",
        "--nproc-per-node 2 --max-restarts=0", "--standalone --nnodes=1 --node_rank=0 --nproc-per-node=2",
        "--no-python --rdzv-backend=static -n2",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char *out = NULL;
        int rc = run_sh(lines[i], "echo \"rank $RANK of $WORLD_SIZE\"", &out);
        if (rc) fprintf(stderr, "baton run %s:\n%s\n", lines[i], out);
        ASSERT_EQ_INT(rc, 0);
        ASSERT_CONTAINS(out, "rank 0 of 2");
        ASSERT_CONTAINS(out, "rank 1 of 2");
        free(out);
    }
}

/* --rdzv_endpoint / --rdzv-endpoint and --master_addr / --master_port name where the store listens. */
TEST_T(run_rdzv_endpoint_and_master_addr_port_place_the_store, 120) {
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    char args[4][256], want[64];
    snprintf(args[0], sizeof args[0], "--rdzv_endpoint 127.0.0.1:%d -n 2", port);
    snprintf(args[1], sizeof args[1], "--rdzv-endpoint=127.0.0.1:%d -n 2", port);
    snprintf(args[2], sizeof args[2], "--master_addr 127.0.0.1 --master_port %d -n 2", port);
    snprintf(args[3], sizeof args[3], "--master-port=%d --master-addr=127.0.0.1 -n 2", port);
    snprintf(want, sizeof want, "store 127.0.0.1:%d", port);
    for (int i = 0; i < 4; i++) {
        char *out = NULL;
        int rc = run_sh(args[i], "echo store $BATON_STORE_ADDR", &out);
        if (rc) fprintf(stderr, "baton run %s:\n%s\n", args[i], out);
        ASSERT_EQ_INT(rc, 0);
        ASSERT_CONTAINS(out, want);
        free(out);
    }
    char *out = NULL;   /* both ways of naming the store at once is ambiguous */
    snprintf(args[0], sizeof args[0], "--rdzv 127.0.0.1:%d --master_port %d", port, port);
    ASSERT_EQ_INT(run_sh(args[0], "true", &out), 2);
    ASSERT_CONTAINS(out, "pass one of them");
    free(out);
}

static long usable_cores(void) {
    cpu_set_t set;
    ASSERT_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

/* -n auto and -n cpu: one worker per core this launcher may use; -n gpu says what to do instead. */
TEST_T(run_n_auto_and_cpu_start_one_worker_per_core, 120) {
    static const char *const forms[] = {"-n auto", "--nproc_per_node=cpu", "--nproc-per-node auto"};
    char want[64];
    snprintf(want, sizeof want, "world %ld\n", usable_cores());
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *out = NULL;
        ASSERT_EQ_INT(run_sh(forms[i], "[ $RANK = 0 ] && echo world $WORLD_SIZE; true", &out), 0);
        ASSERT_CONTAINS(out, want);
        free(out);
    }
    char *out = NULL;
    ASSERT_EQ_INT(run_sh("-n gpu", "true", &out), 2);
    ASSERT_CONTAINS(out, "-n auto");
    free(out);
    ASSERT_EQ_INT(run_sh("--standalone --nnodes 2 --rdzv 127.0.0.1:1", "true", &out), 2);
    ASSERT_CONTAINS(out, "--standalone runs one node");
    free(out);
}

/* The one directory directly under dir (the job's), in out; fails unless there is exactly one. */
static void only_entry(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    ASSERT_TRUE(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(out, cap, "%s", e->d_name);
            n++;
        }
    closedir(d);
    ASSERT_EQ_INT(n, 1);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) th_fail(__FILE__, __LINE__, "cannot open %s", path);
    static char buf[8][4096];
    static int k;
    char *b = buf[k++ % 8];
    size_t n = fread(b, 1, 4095, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static void assert_mode(const char *path, unsigned mode) {
    struct stat st;
    ASSERT_EQ_INT(lstat(path, &st), 0);
    ASSERT_EQ_INT(st.st_mode & 07777, mode);
}

/* --log-dir DIR: each rank's stdout and stderr in DIR/<id>_<job>/attempt_K/<rank>/{stdout,stderr}.log as
 * torchrun lays them out, private (0700 / 0600), one attempt directory per restart; the terminal gets
 * none of the workers' output, but the end of a failed rank's stderr.log. */
TEST_T(run_log_dir_writes_each_ranks_output_as_torchrun_does, 120) {
    char dir[512], job[256], path[1024];
    snprintf(dir, sizeof dir, "%s/logs", th_tmpdir());
    char args[1200], *out = NULL;
    snprintf(args, sizeof args, "--log_dir %s --rdzv-id exp1 -n 2 --max-restarts 1", dir);
    /* attempt 0: rank 1 fails; attempt 1: both succeed */
    int rc = run_sh(args, "echo out$RANK.$BATON_RESTART_COUNT; echo err$RANK.$BATON_RESTART_COUNT >&2; "
                          "[ $RANK$BATON_RESTART_COUNT = 10 ] && exit 3; exit 0", &out);
    if (rc) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(strstr(out, "out0.0") == NULL);   /* nothing of theirs on the terminal ... */
    ASSERT_TRUE(strstr(out, "out1.1") == NULL);
    ASSERT_CONTAINS(out, "stderr.log:\n    err1.0\n");   /* ... but the failed rank's last words */
    only_entry(dir, job, sizeof job);
    ASSERT_TRUE(!strncmp(job, "exp1_", 5) && strlen(job) == 5 + 16);
    assert_mode(dir, 0700);
    for (int attempt = 0; attempt < 2; attempt++)
        for (int rank = 0; rank < 2; rank++) {
            char want[32];
            snprintf(path, sizeof path, "%s/%s/attempt_%d/%d", dir, job, attempt, rank);
            assert_mode(path, 0700);
            snprintf(path, sizeof path, "%s/%s/attempt_%d/%d/stdout.log", dir, job, attempt, rank);
            assert_mode(path, 0600);
            snprintf(want, sizeof want, "out%d.%d\n", rank, attempt);
            ASSERT_STR_EQ(read_text(path), want);
            snprintf(path, sizeof path, "%s/%s/attempt_%d/%d/stderr.log", dir, job, attempt, rank);
            assert_mode(path, 0600);
            snprintf(want, sizeof want, "err%d.%d\n", rank, attempt);
            ASSERT_STR_EQ(read_text(path), want);
        }
    free(out);
    /* a second job in the same DIR gets its own directory (no --rdzv-id: the job id alone) */
    snprintf(args, sizeof args, "--log-dir=%s -n 1", dir);
    ASSERT_EQ_INT(run_sh(args, "echo second", &out), 0);
    free(out);
    DIR *d = opendir(dir);
    int jobs = 0;
    for (struct dirent *e; (e = readdir(d));) jobs += e->d_name[0] != '.';
    closedir(d);
    ASSERT_EQ_INT(jobs, 2);
    /* a DIR that is a file is refused before anything starts */
    snprintf(path, sizeof path, "%s/file", th_tmpdir());
    FILE *f = fopen(path, "w");
    fclose(f);
    snprintf(args, sizeof args, "--log-dir %s -n 1", path);
    ASSERT_EQ_INT(run_sh(args, "echo started", &out), 1);
    ASSERT_CONTAINS(out, "--log-dir");
    ASSERT_TRUE(strstr(out, "started") == NULL);
    free(out);
}

TEST(version_prints_the_version) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s --version", th_baton());
    ASSERT_EQ_INT(sh(cmd, 30, &out), 0);
    int a, b, c;
    char nl;
    ASSERT_EQ_INT(sscanf(out, "baton %d.%d.%d%c", &a, &b, &c, &nl), 4);
    ASSERT_EQ_INT(nl, '\n');
    free(out);
}

/* --threads x local ranks above the cores: a warning saying what to pass; none when it fits. (A missing
 * --data-dir stops each run after the warning, before any step.) */
#define NO_STEP "train --data-dir /nonexistent/baton-data"
TEST_T(train_warns_when_threads_exceed_the_cores, 120) {
    char cmd[2048], *out = NULL, want[64];
    long cores = usable_cores();
    snprintf(cmd, sizeof cmd, "%s " NO_STEP " --threads %ld", th_baton(), cores + 1);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 1);
    snprintf(want, sizeof want, "warning: --threads %ld x 1 local rank =", cores + 1);
    ASSERT_CONTAINS(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s " NO_STEP " --threads %ld", th_baton(), cores);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 1);
    ASSERT_TRUE(strstr(out, "warning") == NULL);
    free(out);
    /* under a launcher the local ranks count (2 ranks x cores threads > cores); said once, by local rank 0 */
    snprintf(cmd, sizeof cmd, "%s run -n 2 -- %s " NO_STEP " --threads %ld", th_baton(), th_baton(), cores);
    ASSERT_EQ_INT(sh(cmd, 60, &out), 1);
    snprintf(want, sizeof want, "warning: --threads %ld x 2 local ranks =", cores);
    ASSERT_CONTAINS(out, want);
    ASSERT_TRUE(strstr(strstr(out, want) + 1, "warning") == NULL);
    free(out);
}

/* An unknown option is "unknown option" wherever it stands, the last argument included. */
TEST(train_unknown_last_option_says_unknown) {
    static const char *const cases[] = {"--bogus", "--epochs 1 --bogus", "--model gpt --bogus", "--bogus=1"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s train %s", th_baton(), cases[i]);
        ASSERT_EQ_INT(sh(cmd, 30, &out), 2);
        ASSERT_CONTAINS(out, "--bogus: unknown option");
        free(out);
    }
}

/* Every subcommand built on tools/cli.c's option walker: a switch given a value, a value missing at the end,
 * a bad number and a stray argument are each one line naming the flag, exit 2; --flag=value and
 * --flag value are the same option (generate takes its model file as the one positional argument). */
TEST(option_walker_errors_name_the_flag) {
    static const struct { const char *args, *want; } cases[] = {
        {"train --json=1", "--json: takes no value"},
        {"train --model gpt --no-overlap=0", "--no-overlap: takes no value"},
        {"train --steps", "--steps: needs a value"},
        {"train --steps=0", "--steps: 0 is out of range"},
        {"train --model gpt --heads x", "--heads: 'x' is not an integer"},
        {"train stray", "stray: unexpected argument"},
        {"generate --seed=1k m.safetensors", "--seed: expects a non-negative integer"},
        {"generate a.safetensors b.safetensors", "b.safetensors: one model file only"},
        {"generate --tokens", "--tokens: needs a value"},
        {"generate --top-k=3 --tokens 5 --bogus 1 m.safetensors", "--bogus: unknown option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s %s", th_baton(), cases[i].args);
        ASSERT_EQ_INT(sh(cmd, 30, &out), 2);
        ASSERT_CONTAINS(out, cases[i].want);
        ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);   /* one line */
        free(out);
    }
    /* --flag=value reaches the same check as --flag value: a missing model file is named, after the flags */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s generate --top-k=3 --temperature=0.5 --seed=7 --prompt=hi", th_baton());
    ASSERT_EQ_INT(sh(cmd, 30, &out), 2);
    ASSERT_CONTAINS(out, "MODEL.safetensors: missing");
    free(out);
}
