/* test_reliability.c: faults are found in seconds and named. Collective mismatches of every kind (count,
 * dtype, op, a skipped call, a different collective, a different root) on 2 and 4 ranks, small and large,
 * over shared memory and TCP: every rank fails well before the collective timeout, and the ones that see it
 * name the collective and both sides. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

static void mismatch(int n, const char *env, const char *kind, const char *count) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_TIMEOUT=60 %s %s run -n %d -- %s/tests/prog_mismatch %s %s", env, th_baton(), n,
             th_build_dir(), kind, count);
    double el = 0;
    int rc = th_run(cmd, 90, &out, &el);
    int errors = 0, misses = 0;
    for (const char *p = out; (p = strstr(p, ": error: ")); p++) errors++;
    for (const char *p = out; (p = strstr(p, ": no error")); p++) misses++;
    if (rc == 0 || misses || !strstr(out, "collective mismatch") || el > 20)
        fprintf(stderr, "%s\n--- exit %d after %.1fs:\n%s\n", cmd, rc, el, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_EQ_INT(misses, 0);
    ASSERT_TRUE(errors >= 1);
    ASSERT_CONTAINS(out, "collective mismatch");
    ASSERT_TRUE(el < 20); /* found by comparing, not by the 60 s timeout */
    free(out);
}

static const char *kinds[] = {"count", "dtype", "op", "skip", "kind", "root", "roots", "zero", "zerokind"};

static void all_kinds(int n, const char *env, const char *count) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) mismatch(n, env, kinds[i], count);
}

TEST_T(mismatch_shm_2_ranks_small, 120) { all_kinds(2, "", "10"); }
TEST_T(mismatch_shm_4_ranks_small, 120) { all_kinds(4, "", "10"); }
TEST_T(mismatch_shm_2_ranks_large, 120) { all_kinds(2, "", "300000"); }
TEST_T(mismatch_shm_4_ranks_large, 120) { all_kinds(4, "", "300000"); }
TEST_T(mismatch_tcp_2_ranks, 120) { all_kinds(2, "BATON_TRANSPORT=tcp", "10"); }
TEST_T(mismatch_tcp_4_ranks, 120) { all_kinds(4, "BATON_TRANSPORT=tcp", "300000"); }
TEST_T(mismatch_shm_ring_4_ranks, 120) { all_kinds(4, "BATON_ALGO=ring", "1000"); }

/* The mismatched collective is the job's last: nothing after it can catch it one call late, so it must be
 * caught in the call itself (issue 15: mismatched broadcast roots over TCP returned 0 on every rank). At
 * least one rank names the mismatch, the job fails, and no rank waits for the 60 s timeout. Ranks that saw
 * only matching peers may return 0 (they hold the data of the root they asked for). */
static void mismatch_last(int n, const char *env, const char *kind, const char *count) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_TIMEOUT=60 %s %s run -n %d -- %s/tests/prog_mismatch %s %s last", env,
             th_baton(), n, th_build_dir(), kind, count);
    double el = 0;
    int rc = th_run(cmd, 90, &out, &el);
    if (rc == 0 || !strstr(out, "collective mismatch") || el > 20)
        fprintf(stderr, "%s\n--- exit %d after %.1fs:\n%s\n", cmd, rc, el, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, "collective mismatch");
    ASSERT_TRUE(el < 20);
    free(out);
}

static const char *last_kinds[] = {"root", "roots", "zero", "zerokind", "count", "kind"};

static void last_all(int n, const char *env, const char *count) {
    for (size_t i = 0; i < sizeof last_kinds / sizeof last_kinds[0]; i++) mismatch_last(n, env, last_kinds[i], count);
}

TEST_T(mismatch_last_tcp_2_ranks, 180) { last_all(2, "BATON_TRANSPORT=tcp", "10"); }
TEST_T(mismatch_last_tcp_4_ranks, 180) { last_all(4, "BATON_TRANSPORT=tcp", "10"); }
TEST_T(mismatch_last_tcp_4_ranks_large, 180) { last_all(4, "BATON_TRANSPORT=tcp", "300000"); }
TEST_T(mismatch_last_shm_2_ranks, 180) { last_all(2, "", "10"); }
TEST_T(mismatch_last_shm_4_ranks, 180) { last_all(4, "", "300000"); }

/* A rank that stops responding (SIGSTOP) makes the others fail after the timeout, naming it. */
static void stopped_rank(const char *env) {
    char cmd[1024], *out = NULL;
    int stop_s = (int)(th_timeout_scale() + 0.5); /* 1 s, later under sanitizers: after init */
    snprintf(cmd, sizeof cmd,
             "%s BATON_STALL_WARN=0 BATON_FLIGHT_DIR=%s %s run -n 4 --timeout 2 -- sh -c "
             "'if [ $BATON_RANK = 2 ]; then (sleep %d; kill -STOP $$) & fi; "
             "exec %s bench allreduce -b 1K -e 1K -n 10000000 -w 1 --min-time 60'",
             env, th_tmpdir(), th_baton(), stop_s, th_baton());
    double el = 0;
    int rc = th_run(cmd, 60, &out, &el);
    int naming = 0;
    for (const char *p = out; (p = strstr(p, "timed out waiting for rank 2")); p++) naming++;
    if (rc == 0 || naming < 1 || el > stop_s + 4 + 1) fprintf(stderr, "%s\n--- exit %d after %.1fs:\n%s\n", cmd, rc, el, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_TRUE(naming >= 1);
    /* stopped at ~stop_s, timeout 2 s: the others are gone within 4 s of the stop (launcher included) */
    ASSERT_TRUE(el < stop_s + (4 + 0.5) * th_timeout_scale());
    free(out);
}

TEST_T(sigstop_rank_times_out_named_shm, 60) { stopped_rank(""); }
TEST_T(sigstop_rank_times_out_named_tcp, 60) { stopped_rank("BATON_TRANSPORT=tcp"); }

/* The stall warning names the rank that has not arrived, and the job goes on. */
TEST_T(stall_warning_names_the_late_rank_and_job_continues, 60) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "BATON_STALL_WARN=0.5 %s run -n 3 -- sh -c "
             "'if [ $BATON_RANK = 1 ]; then (sleep %d; kill -STOP $$; sleep 2; kill -CONT $$) & fi; "
             "exec %s bench allreduce -b 1K -e 1K -n 100 -w 1 --min-time %d'",
             th_baton(), (int)(th_timeout_scale() + 0.5), th_baton(), (int)(3 * th_timeout_scale() + 0.5));
    int rc = th_run(cmd, 50, &out, NULL);
    if (rc != 0 || !strstr(out, "not reached by rank 1")) fprintf(stderr, "%s\n%s\n", cmd, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "has waited");
    ASSERT_CONTAINS(out, "not reached by rank 1 (at #");
    free(out);
}

/* Every failing rank writes its flight recorder; baton doctor says where the ranks diverged. */
TEST_T(doctor_finds_the_divergence, 60) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_FLIGHT_DIR=%s %s run -n 3 -- %s/tests/prog_mismatch count 10; %s doctor %s/baton-flight-*",
             th_tmpdir(), th_baton(), th_build_dir(), th_baton(), th_tmpdir());
    int rc = th_run(cmd, 50, &out, NULL);
    if (rc != 0 || !strstr(out, "DIVERGED at collective #3")) fprintf(stderr, "%s\n%s\n", cmd, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, ": 3 dump(s), world size 3");
    ASSERT_CONTAINS(out, "DIVERGED at collective #3");
    ASSERT_CONTAINS(out, "(20 x f32, sum, root 0)");
    free(out);
}

TEST(doctor_rejects_bad_files) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "echo 'not json' > %s/x.json; %s doctor %s/x.json", th_tmpdir(), th_baton(), th_tmpdir());
    int rc = th_run(cmd, 20, &out, NULL);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "is not a flight-recorder dump");
    free(out);
    snprintf(cmd, sizeof cmd, "%s doctor %s/missing.json", th_baton(), th_tmpdir());
    rc = th_run(cmd, 20, &out, NULL);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "cannot read");
    free(out);
}

/* However a job ends, /dev/shm holds nothing of it afterwards. */
TEST_T(no_shared_memory_left_behind, 60) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "BATON_JOB_ID=feedf00d%04x %s run -n 4 -- sh -c 'if [ $BATON_RANK = 1 ]; then (sleep 1; kill -9 $$) & fi; "
             "exec %s bench allreduce -b 64M -e 64M --buffers both -n 100000 -w 1 --min-time 60'; "
             "ls /dev/shm | grep -c feedf00d%04x",
             (unsigned)getpid() & 0xffff, th_baton(), th_baton(), (unsigned)getpid() & 0xffff);
    th_run(cmd, 50, &out, NULL);
    char *last = strrchr(out, '\n');
    while (last && last > out && last[1] == '\0') {
        *last = '\0';
        last = strrchr(out, '\n');
    }
    const char *count = last ? last + 1 : out;
    if (strcmp(count, "0")) fprintf(stderr, "%s\n%s\n", cmd, out);
    ASSERT_STR_EQ(count, "0");
    free(out);
}
