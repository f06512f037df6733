/* test_cli_ux.c: the command line as a new user meets it (issue 11): `baton bench` output as nccl-tests
 * prints it and errors that name the flag; torchrun's spellings for `baton run`, --log-dir, --version,
 * the --threads warning; `baton train` argument errors. Every command runs under a hard timeout. */
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
