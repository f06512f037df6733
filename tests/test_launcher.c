/* test_launcher.c: `baton run`: the workers' environment, exit codes and signals per rank, stopping the
 * group after a failure, --tag-output, signals to the launcher, restarts, the store handed to workers,
 * shared-memory clean-up, two launchers as two nodes on this machine, and flag errors. */
#include <errno.h>
#include <glob.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "rendezvous/store.h"

static char cmd[8192];

static int run(double timeout_s, char **out, double *elapsed, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int run(double timeout_s, char **out, double *elapsed, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return th_run(cmd, timeout_s, out, elapsed);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static const char *new_secret(void) {
    static char hex[2 * BATON_STORE_SECRET_BYTES + 1];
    uint8_t s[BATON_STORE_SECRET_BYTES];
    ASSERT_OK(baton_secret_generate(s));
    baton_secret_format(s, hex);
    return hex;
}

/* ---- environment and store ------------------------------------------------------------------------- */

TEST(env_vars_are_set_for_every_rank) {
    char *out;
    int rc = run(30, &out, NULL,
                 "%s run -n 3 --timeout 7.5 -- sh -c 'echo \"R=$BATON_RANK $RANK W=$BATON_WORLD_SIZE $WORLD_SIZE "
                 "L=$BATON_LOCAL_RANK $LOCAL_RANK LW=$BATON_LOCAL_WORLD_SIZE $LOCAL_WORLD_SIZE N=$BATON_NODE_RANK "
                 "$GROUP_RANK NN=$BATON_NNODES $GROUP_WORLD_SIZE RC=$BATON_RESTART_COUNT $TORCHELASTIC_RESTART_COUNT "
                 "T=$BATON_TIMEOUT M=$MASTER_ADDR:$MASTER_PORT S=$BATON_STORE_ADDR J=$BATON_JOB_ID K=$BATON_SECRET\"'",
                 th_baton());
    ASSERT_EQ_INT(rc, 0);
    char want[256], job[17] = "", sec[65] = "";
    for (int r = 0; r < 3; r++) {
        snprintf(want, sizeof want, "R=%d %d W=3 3 L=%d %d LW=3 3 N=0 0 NN=1 1 RC=0 0 T=7.5 M=127.0.0.1:", r, r, r, r);
        const char *line = strstr(out, want);
        ASSERT_CONTAINS(out, want);
        char m[64], s[64], j[64], k[128];
        ASSERT_EQ_INT(sscanf(strstr(line, "M="), "M=%63s S=%63s J=%63s K=%127s", m, s, j, k), 4);
        /* MASTER_ADDR:MASTER_PORT is free for torch.distributed's own store, not baton's store */
        ASSERT_TRUE(strcmp(m, s) != 0);
        ASSERT_TRUE(!strncmp(m, "127.0.0.1:", 10));
        ASSERT_EQ_INT(strlen(j), 16);
        ASSERT_EQ_INT(strspn(j, "0123456789abcdef"), 16);
        ASSERT_EQ_INT(strlen(k), 64);
        uint8_t bytes[BATON_STORE_SECRET_BYTES];
        ASSERT_OK(baton_secret_parse(k, bytes));
        if (r == 0) {
            memcpy(job, j, 17);
            memcpy(sec, k, 65);
        }
        ASSERT_STR_EQ(j, job);                     /* one job id and one secret for the whole job */
        ASSERT_STR_EQ(k, sec);
    }
    free(out);
    /* a second job gets another id and secret */
    ASSERT_EQ_INT(run(30, &out, NULL, "%s run -- sh -c 'echo J=$BATON_JOB_ID K=$BATON_SECRET'", th_baton()), 0);
    char j2[64], k2[128];
    ASSERT_EQ_INT(sscanf(strstr(out, "J="), "J=%63s K=%127s", j2, k2), 2);
    ASSERT_TRUE(strcmp(j2, job) != 0 && strcmp(k2, sec) != 0);
    free(out);
}

TEST(workers_reach_the_store_with_the_handed_address_and_secret) {
    char *out;
    int rc = run(60, &out, NULL, "%s run -n 4 -- %s/tests/prog_store_client", th_baton(), th_build_dir());
    ASSERT_EQ_INT(rc, 0);
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d ok world 4 attempt 0", r);
        ASSERT_CONTAINS(out, want);
    }
    free(out);
}

/* ---- failures -------------------------------------------------------------------------------------- */

TEST(exit_codes_and_signals_are_reported_per_rank) {
    char *out;
    int rc = run(30, &out, NULL, "%s run -n 3 -- sh -c 'if [ $RANK = 2 ]; then exit 3; fi; exit 0'", th_baton());
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "baton run: rank 2 exited with code 3");
    ASSERT_EQ_INT(count_of(out, "exited with code"), 1);
    free(out);
    rc = run(30, &out, NULL, "%s run -n 2 -- sh -c 'if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 60'", th_baton());
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "baton run: rank 1 killed by signal 9 (SIGKILL)");
    ASSERT_CONTAINS(out, "baton run: rank 0 stopped by the launcher (killed by signal 15 (SIGTERM))");
    free(out);
    rc = run(30, &out, NULL, "%s run -n 3 -- sh -c 'exit 0'", th_baton());
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(strstr(out, "baton run") == NULL);
    free(out);
    rc = run(30, &out, NULL, "%s run -n 2 -- /nonexistent/program", th_baton());
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "cannot execute '/nonexistent/program'");
    ASSERT_CONTAINS(out, "exited with code 127");
    free(out);
}

TEST(a_failing_worker_stops_the_group_within_5_seconds) {
    char *out;
    double dt;
    int rc = run(30, &out, &dt, "%s run -n 4 -- sh -c 'if [ $RANK = 1 ]; then exit 3; fi; exec sleep 60'", th_baton());
    ASSERT_EQ_INT(rc, 1);
    ASSERT_TRUE(dt < 5.0 * th_timeout_scale());
    ASSERT_CONTAINS(out, "baton run: rank 1 exited with code 3");
    ASSERT_CONTAINS(out, "rank 0 stopped by the launcher");
    ASSERT_CONTAINS(out, "rank 2 stopped by the launcher");
    ASSERT_CONTAINS(out, "rank 3 stopped by the launcher");
    free(out);
    /* workers that ignore SIGTERM are killed after the grace period, still within 5 s of the failure
     * (rank 0 fails 0.5 s in, once the others have set their trap) */
    rc = run(30, &out, &dt, "%s run -n 3 -- sh -c 'trap \"\" TERM; if [ $RANK = 0 ]; then sleep 0.5; exit 3; fi; sleep 60'",
             th_baton());
    ASSERT_EQ_INT(rc, 1);
    fprintf(stderr, "    SIGTERM-ignoring workers stopped after %.2f s\n", dt);
    ASSERT_TRUE(dt > 3.0 && dt < 5.5 * th_timeout_scale());
    ASSERT_CONTAINS(out, "rank 0 exited with code 3");
    ASSERT_CONTAINS(out, "rank 1 stopped by the launcher (killed by signal 9 (SIGKILL))");
    free(out);
}

TEST(sigterm_to_the_launcher_stops_the_workers) {
    const char *dir = th_tmpdir();
    char *out;
    double dt;
    int rc = run(30, &out, &dt,
                 "%s run -n 2 -- sh -c 'echo $$ > %s/pid.$RANK; exec sleep 60' & L=$!; "
                 "while [ ! -s %s/pid.0 ] || [ ! -s %s/pid.1 ]; do sleep 0.05; done; "
                 "kill -TERM $L; wait $L; echo launcher_rc=$?",
                 th_baton(), dir, dir, dir);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "launcher_rc=143");
    ASSERT_CONTAINS(out, "got SIGTERM");
    ASSERT_TRUE(dt < 5.0 * th_timeout_scale());
    for (int r = 0; r < 2; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/pid.%d", dir, r);
        FILE *f = fopen(path, "r");
        ASSERT_TRUE(f != NULL);
        int pid = 0;
        ASSERT_EQ_INT(fscanf(f, "%d", &pid), 1);
        fclose(f);
        ASSERT_TRUE(pid > 1);
        ASSERT_TRUE(kill(pid, 0) != 0 && errno == ESRCH);   /* gone, and reaped by the launcher */
    }
    free(out);
}

TEST(a_sigkilled_launcher_takes_its_workers_along) {
    const char *dir = th_tmpdir();
    char *out;
    int rc = run(30, &out, NULL,
                 "%s run -n 2 -- sh -c 'echo $$ > %s/pid.$RANK; exec sleep 60' & L=$!; "
                 "while [ ! -s %s/pid.0 ] || [ ! -s %s/pid.1 ]; do sleep 0.05; done; "
                 "kill -KILL $L; wait $L; sleep 0.3; for r in 0 1; do "
                 "s=$(awk \'/^State/{print $2}\' /proc/$(cat %s/pid.$r)/status 2>/dev/null); "
                 "[ -n \"$s\" ] && [ \"$s\" != Z ] && echo alive $s; done; "
                 "echo checked",
                 th_baton(), dir, dir, dir, dir);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "checked");
    ASSERT_TRUE(strstr(out, "alive") == NULL);
    free(out);
}

/* (orphans are reparented to PID 1, which may not reap them in a container: a zombie counts as gone) */

/* ---- output ---------------------------------------------------------------------------------------- */

TEST(tag_output_prefixes_every_line) {
    char *out;
    int rc = run(30, &out, NULL,
                 "%s run -n 2 --tag-output -- sh -c 'echo out $RANK; echo err $RANK >&2; printf \"tail $RANK\"'",
                 th_baton());
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "[rank 0] out 0\n");
    ASSERT_CONTAINS(out, "[rank 1] out 1\n");
    ASSERT_CONTAINS(out, "[rank 0] err 0\n");
    ASSERT_CONTAINS(out, "[rank 1] err 1\n");
    ASSERT_CONTAINS(out, "[rank 0] tail 0\n");   /* partial last line flushed, with a newline */
    ASSERT_CONTAINS(out, "[rank 1] tail 1\n");
    free(out);
    /* many long lines from three ranks at once: every line arrives whole, with its own rank's prefix */
    rc = run(60, &out, NULL,
             "%s run -n 3 --tag-output -- sh -c 'l=$(printf \"%%0700d\" 0 | tr 0 $RANK); i=0; "
             "while [ $i -lt 300 ]; do echo \"$l\"; i=$((i+1)); done'",
             th_baton());
    ASSERT_EQ_INT(rc, 0);
    int lines = 0;
    for (char *p = out, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        int r = -1, n = 0;
        ASSERT_TRUE(sscanf(p, "[rank %d] %n", &r, &n) == 1 && n == 9);
        ASSERT_TRUE(r >= 0 && r < 3);
        ASSERT_EQ_INT(nl - p - n, 700);
        for (int k = 0; k < 700; k++) ASSERT_EQ_INT(p[n + k], '0' + r);
        lines++;
    }
    ASSERT_EQ_INT(lines, 900);
    free(out);
}

/* ---- restarts -------------------------------------------------------------------------------------- */

TEST(max_restarts_restarts_then_gives_up_reporting_every_failure) {
    char *out;
    double dt;
    int rc = run(60, &out, &dt,
                 "%s run -n 2 --max-restarts 2 -- sh -c 'echo attempt $BATON_RESTART_COUNT "
                 "$TORCHELASTIC_RESTART_COUNT rank $RANK store $BATON_STORE_ADDR; if [ $RANK = 1 ]; then sleep 0.2; exit 4; fi; "
                 "exec sleep 60'",
                 th_baton());
    ASSERT_EQ_INT(rc, 1);
    for (int a = 0; a < 3; a++) {
        char want[64];
        snprintf(want, sizeof want, "attempt %d %d rank 1", a, a);
        ASSERT_CONTAINS(out, want);
        snprintf(want, sizeof want, "attempt %d: rank 1 exited with code 4", a);
        ASSERT_EQ_INT(count_of(out, want), 2);   /* when it happens, and in the final summary */
    }
    ASSERT_TRUE(strstr(out, "attempt 3") == NULL);
    ASSERT_CONTAINS(out, "restarting all 2 workers (restart 1 of 2)");
    ASSERT_CONTAINS(out, "giving up after 2 restart(s)");
    ASSERT_TRUE(dt < 15.0 * th_timeout_scale());
    free(out);
}

TEST(a_restart_gets_a_fresh_store_and_can_succeed) {
    char *out;
    int rc = run(60, &out, NULL, "%s run -n 2 --max-restarts 1 -- %s/tests/prog_store_client restart", th_baton(),
                 th_build_dir());
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "rank 0 failing on purpose in attempt 0");
    ASSERT_CONTAINS(out, "attempt 0: rank 0 exited with code 5");
    ASSERT_CONTAINS(out, "rank 0 ok world 2 attempt 1");
    ASSERT_CONTAINS(out, "rank 1 ok world 2 attempt 1");
    ASSERT_TRUE(strstr(out, "older attempt") == NULL);
    free(out);
}

/* ---- shared memory --------------------------------------------------------------------------------- */

static int shm_count(const char *job) {
    char pat[128];
    snprintf(pat, sizeof pat, "/dev/shm/baton-%s-*", job);
    glob_t g;
    int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

TEST(shared_memory_leftovers_are_removed) {
    char other[128];   /* another job's segment (unique per test process) */
    snprintf(other, sizeof other, "/dev/shm/baton-0123456789abcdef-not-ours-%d", (int)getpid());
    FILE *f = fopen(other, "w");
    ASSERT_TRUE(f != NULL);
    fclose(f);
    char *out;
    int rc = run(30, &out, NULL,
                 "%s run -n 3 -- sh -c 'echo x > /dev/shm/baton-$BATON_JOB_ID-seg$RANK; echo JOB=$BATON_JOB_ID; "
                 "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 60'",
                 th_baton());
    ASSERT_EQ_INT(rc, 1);
    char job[64];
    ASSERT_EQ_INT(sscanf(strstr(out, "JOB="), "JOB=%63s", job), 1);
    ASSERT_EQ_INT(strlen(job), 16);
    ASSERT_EQ_INT(shm_count(job), 0);
    struct stat sb;
    ASSERT_EQ_INT(stat(other, &sb), 0);   /* another job's segment is left alone */
    unlink(other);
    free(out);
    /* and after a clean exit */
    rc = run(30, &out, NULL, "%s run -n 2 -- sh -c 'echo x > /dev/shm/baton-$BATON_JOB_ID-seg$RANK; echo JOB=$BATON_JOB_ID'",
             th_baton());
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(sscanf(strstr(out, "JOB="), "JOB=%63s", job), 1);
    ASSERT_EQ_INT(shm_count(job), 0);
    free(out);
}

/* ---- two launchers as two nodes -------------------------------------------------------------------- */

/* Runs node 1 in the background and node 0 in the foreground, prints both exit codes. */
static int two_nodes(char **out, double *dt, const char *n0, const char *n1, const char *prog0, const char *prog1) {
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    return run(60, out, dt,
               "export BATON_SECRET=%s; export BATON_RDZV_TIMEOUT=20; "
               "%s run %s --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:%d -- %s & P=$!; "
               "%s run %s --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:%d -- %s; r0=$?; wait $P; r1=$?; "
               "echo rc0=$r0 rc1=$r1",
               new_secret(), th_baton(), n1, port, prog1, th_baton(), n0, port, prog0);
}

TEST(two_launchers_on_one_machine_set_global_ranks) {
    char *out;
    const char *prog = "sh -c 'echo G $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $BATON_NODE_RANK "
                       "$BATON_NNODES $BATON_STORE_ADDR $BATON_JOB_ID'";
    ASSERT_EQ_INT(two_nodes(&out, NULL, "-n 2", "-n 2", prog, prog), 0);
    ASSERT_CONTAINS(out, "rc0=0 rc1=0");
    char job[64] = "";
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "G %d 4 %d 2 %d %d 2 127.0.0.1:", r, r % 2, r / 2, r / 2);
        ASSERT_CONTAINS(out, want);
        char addr[64], j[64];
        ASSERT_EQ_INT(sscanf(strstr(out, want) + strlen(want) - strlen("127.0.0.1:"), "%63s %63s", addr, j), 2);
        if (!job[0]) snprintf(job, sizeof job, "%s", j);
        ASSERT_STR_EQ(j, job);   /* one job id on both nodes */
    }
    free(out);
}

TEST(two_launchers_share_one_store) {
    char *out, prog[512];
    snprintf(prog, sizeof prog, "%s/tests/prog_store_client", th_build_dir());
    ASSERT_EQ_INT(two_nodes(&out, NULL, "-n 2", "-n 2", prog, prog), 0);
    ASSERT_CONTAINS(out, "rc0=0 rc1=0");
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d ok world 4", r);
        ASSERT_CONTAINS(out, want);
    }
    free(out);
}

TEST(two_launchers_failure_on_one_node_stops_the_other) {
    char *out;
    double dt;
    const char *sleeper = "sh -c 'exec sleep 60'";
    const char *failer = "sh -c 'if [ $RANK = 3 ]; then sleep 0.5; exit 7; fi; exec sleep 60'";
    ASSERT_EQ_INT(two_nodes(&out, &dt, "-n 2", "-n 2", sleeper, failer), 0);
    ASSERT_CONTAINS(out, "rc0=1 rc1=1");
    ASSERT_CONTAINS(out, "baton run: rank 3 exited with code 7");
    ASSERT_CONTAINS(out, "stopped because of another node: node 1: rank 3 exited with code 7");
    ASSERT_CONTAINS(out, "rank 0 stopped by the launcher");
    ASSERT_TRUE(dt < 8.0 * th_timeout_scale());
    free(out);
}

/* Node 0's worker fails after node 1's finished: node 1's launcher, waiting at the end for node 0, must learn that
 * the job failed and exit non-zero. Node 0 used to leave (and take the store) as soon as it had counted itself
 * done, so node 1 often never read the failure and exited 0. Five runs: the old race lost most of them. */
TEST(a_node_whose_workers_succeeded_exits_1_when_node_0_failed) {
    for (int i = 0; i < 5; i++) {
        char *out;
        ASSERT_EQ_INT(two_nodes(&out, NULL, "-n 1", "-n 1", "sh -c 'sleep 0.5; exit 3'", "true"), 0);
        ASSERT_CONTAINS(out, "rc0=1 rc1=1");
        ASSERT_CONTAINS(out, "this node's workers succeeded but the job failed elsewhere: node 0: rank 0 exited with code 3");
        free(out);
    }
}

/* A rank that exits 0 without calling baton_init while the others are joining: the job can never form. The
 * launcher stops it at once, naming the rank, instead of letting the others wait out BATON_JOIN_TIMEOUT (120 s)
 * and blame a rank that "may be stopped, hung or still starting". A rank that exits 0 while the others run
 * something that does not use baton is no failure. */
TEST(a_rank_that_exits_without_joining_stops_the_job_and_is_named) {
    char *out, bench[512];
    double dt;
    snprintf(bench, sizeof bench, "%s bench allreduce -b 1K -e 1K -n 2 -w 1", th_baton());
    int rc = run(60, &out, &dt, "BATON_JOIN_TIMEOUT=100 %s run -n 3 -- sh -c 'if [ $RANK = 1 ]; then exit 0; fi; exec %s'",
                 th_baton(), bench);
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "rank 1 exited with code 0 without joining the job, so rank ");
    ASSERT_CONTAINS(out, "every rank must call baton_init, or none");
    ASSERT_TRUE(dt < 20.0 * th_timeout_scale());
    free(out);
    /* the rank that waits joins later than the one that left */
    rc = run(60, &out, &dt, "BATON_JOIN_TIMEOUT=100 %s run -n 2 -- sh -c 'if [ $RANK = 0 ]; then exit 0; fi; sleep 1; exec %s'",
             th_baton(), bench);
    ASSERT_EQ_INT(rc, 1);
    ASSERT_CONTAINS(out, "rank 0 exited with code 0 without joining the job, so rank 1, which is joining it");
    ASSERT_TRUE(dt < 20.0 * th_timeout_scale());
    free(out);
    /* across nodes: node 1's only rank leaves, node 0's joins */
    ASSERT_EQ_INT(two_nodes(&out, &dt, "-n 1", "-n 1", bench, "true"), 0);
    ASSERT_CONTAINS(out, "rc0=1 rc1=1");
    ASSERT_CONTAINS(out, "rank 1 exited with code 0 without joining the job, so rank 0, which is joining it");
    ASSERT_TRUE(dt < 20.0 * th_timeout_scale());
    free(out);
    /* no baton in the workers: an early clean exit is fine */
    rc = run(60, &out, NULL, "%s run -n 2 -- sh -c 'if [ $RANK = 1 ]; then exit 0; fi; sleep 1'", th_baton());
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(strstr(out, "baton run") == NULL);
    free(out);
}

/* A rendezvous that times out says why when it can: the node ranks nobody claimed, a rank claimed twice, and
 * connections refused for a wrong secret (node 0 hosts the store and counts them). */
TEST(a_rendezvous_that_times_out_names_the_missing_ranks_a_duplicate_and_a_wrong_secret) {
    char *out, s0[80];
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    snprintf(s0, sizeof s0, "%s", new_secret());
    int rc = run(60, &out, NULL,
                 "export BATON_RDZV_TIMEOUT=3; "
                 "BATON_SECRET=%s %s run --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:%d -- true & P=$!; "
                 "BATON_SECRET=%s %s run --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:%d -- true; r0=$?; wait $P; "
                 "echo rc0=$r0 rc1=$?",
                 new_secret(), th_baton(), port, s0, th_baton(), port);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "rc0=1 rc1=1");
    ASSERT_CONTAINS(out, "only 1 of 2 launchers joined the rendezvous at 127.0.0.1:");
    ASSERT_CONTAINS(out, "(missing: node rank 1)");
    ASSERT_CONTAINS(out, "connection(s) to the store failed to authenticate: is BATON_SECRET the same on every launcher?");
    free(out);
    /* two launchers claim node rank 1, nobody node rank 2 */
    port = th_free_port();
    ASSERT_TRUE(port > 0);
    rc = run(60, &out, NULL,
             "export BATON_SECRET=%s BATON_RDZV_TIMEOUT=3; B=%s; "
             "$B run --nnodes 3 --node-rank 1 --rdzv 127.0.0.1:%d -- true & Q=$!; "
             "$B run --nnodes 3 --node-rank 1 --rdzv 127.0.0.1:%d -- true & R=$!; "
             "$B run --nnodes 3 --node-rank 0 --rdzv 127.0.0.1:%d -- true; r0=$?; wait $Q; q=$?; wait $R; "
             "echo rc0=$r0 rc1=$q,$?",
             new_secret(), th_baton(), port, port, port);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "rc0=1 rc1=1,1");
    ASSERT_CONTAINS(out, "node rank 1 is already taken by another launcher");
    ASSERT_CONTAINS(out, "(missing: node rank 2) (node rank 1 was claimed by two launchers)");
    free(out);
}

TEST(two_launchers_with_different_nproc_fail_clearly) {
    char *out;
    ASSERT_EQ_INT(two_nodes(&out, NULL, "-n 2", "-n 3", "true", "true"), 0);
    ASSERT_CONTAINS(out, "rc0=1 rc1=1");
    ASSERT_CONTAINS(out, "the same --nproc-per-node");
    free(out);
}

TEST(multi_node_needs_a_secret_and_rdzv) {
    char *out;
    int rc = run(30, &out, NULL, "unset BATON_SECRET; %s run --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:1 -- true",
                 th_baton());
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "BATON_SECRET");
    free(out);
    rc = run(30, &out, NULL, "BATON_SECRET=abc %s run --nnodes 2 --rdzv 127.0.0.1:1 -- true", th_baton());
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "BATON_SECRET: secret has 3 characters");
    free(out);
    rc = run(30, &out, NULL, "%s run --nnodes 2 -- true", th_baton());
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "--rdzv HOST:PORT");
    free(out);
}

/* BATON_NODE_TIMEOUT (the launchers' heartbeat, tools/run_alive.c): a bad value is one line naming it, exit 2,
 * before anything listens or connects */
TEST(multi_node_rejects_a_bad_node_timeout) {
    const char *bad[] = {"abc", "0", "-5", "1e9", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        int rc = run(30, &out, NULL, "BATON_SECRET=%s BATON_NODE_TIMEOUT=%s %s run --nnodes 2 --node-rank 0 "
                     "--rdzv 127.0.0.1:1 -- true", new_secret(), bad[i], th_baton());
        ASSERT_EQ_INT(rc, 2);
        ASSERT_CONTAINS(out, "BATON_NODE_TIMEOUT");
        ASSERT_EQ_INT(count_of(out, "\n"), 1);
        free(out);
    }
}

/* ---- flags ----------------------------------------------------------------------------------------- */

TEST(bad_flags_get_one_line_naming_the_flag_and_exit_2) {
    static const struct { const char *args, *want; } cases[] = {
        {"-n 0 -- true", "-n/--nproc-per-node '0'"},
        {"-n abc -- true", "-n/--nproc-per-node 'abc'"},
        {"--nproc-per-node=-3 true", "-n/--nproc-per-node '-3'"},
        {"--nnodes 0 -- true", "--nnodes '0'"},
        {"--nnodes 2 --node-rank 2 --rdzv 127.0.0.1:5 -- true", "--node-rank 2 must be below --nnodes 2"},
        {"--rdzv nohostport -- true", "--rdzv 'nohostport'"},
        {"--rdzv 127.0.0.1:99999 -- true", "--rdzv '127.0.0.1:99999'"},
        {"--max-restarts -1 -- true", "--max-restarts '-1'"},
        {"--timeout 0 -- true", "--timeout '0'"},
        {"--timeout soon -- true", "--timeout 'soon'"},
        {"--bogus -- true", "unknown option '--bogus'"},
        {"-n", "-n needs a value"},
        {"-n 2", "no program given"},
        {"", "no program given"},
        {"--nnodes 2 --rdzv 127.0.0.1:5 --max-restarts 1 -- true", "--max-restarts works on a single node only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        int rc = run(10, &out, NULL, "BATON_SECRET= %s run %s", th_baton(), cases[i].args);
        if (rc != 2 || !strstr(out, cases[i].want) || count_of(out, "\n") != 1)
            th_fail(__FILE__, __LINE__, "baton run %s: rc %d, output: %s", cases[i].args, rc, out);
        ASSERT_CONTAINS(out, "baton run: ");
        free(out);
    }
    char *out;
    ASSERT_EQ_INT(run(10, &out, NULL, "%s run --help", th_baton()), 0);
    ASSERT_CONTAINS(out, "usage: baton run [options] [--] PROGRAM [ARGS...]");
    ASSERT_CONTAINS(out, "--max-restarts");
    free(out);
    /* a program whose own flags look like ours is not parsed after PROGRAM */
    ASSERT_EQ_INT(run(10, &out, NULL, "%s run -n 1 sh -c 'echo args: \"$@\"' x -n 5 --bogus", th_baton()), 0);
    ASSERT_CONTAINS(out, "args: -n 5 --bogus");
    free(out);
}
