/* test_mpi.c: --transport mpi under the real Open MPI mpirun (the plugin build/libbaton-mpi.so, built when
 * libopenmpi-dev is installed). Several "nodes" on one machine: each rank gets a host identity
 * (BATON_HOST_ID=host<k>) the way tests/test_launchers.c fakes a hostfile, so shared memory carries the
 * traffic inside a node and MPI point-to-point the traffic between nodes. The collective matrix on 2, 3 and
 * 4 nodes and 2 x 2 hierarchical, 64 MiB, mismatches, a stopped rank named within the timeout, a killed rank
 * ending the job, refusals outside Open MPI, and a build without MPI. Across network namespaces:
 * tests/cluster/test_mpi_netns.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Under `make asan`, leak checking is off in the MPI ranks only: Open MPI's own allocations and the components
 * it unloads at MPI_Finalize are reported as leaks (a known Open MPI property); ASan and UBSan check the rest. */
#define MPIRUN                                                                                                  \
    "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" timeout 200 mpirun.openmpi --allow-run-as-root --oversubscribe " \
    "--bind-to none"

static void need_plugin(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/libbaton-mpi.so", th_build_dir());
    if (access(path, R_OK) != 0) th_fail(__FILE__, __LINE__, "%s is not built (apt-get install libopenmpi-dev; make)", path);
}

/* mpirun -np n, rank r on host r / per_node, running the shell command prog with --transport mpi. */
static int mpi_job(int n, int per_node, const char *env, const char *prog, double timeout_s, char **out, double *el) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             MPIRUN " -np %d sh -c 'export BATON_TRANSPORT=mpi BATON_HOST_ID=host$((OMPI_COMM_WORLD_RANK / %d)) %s; "
                    "%s' 2>&1",
             n, per_node, env, prog);
    int rc = th_run(cmd, timeout_s, out, el);
    if (rc != 0 && getenv("TEST_VERBOSE")) fprintf(stderr, "%s\n%s\n", cmd, *out);
    return rc;
}

static void matrix(int n, int per_node, const char *args) {
    need_plugin();
    char prog[1024], *out = NULL;
    snprintf(prog, sizeof prog, "exec %s/tests/prog_coll %s", th_build_dir(), args);
    int rc = mpi_job(n, per_node, "", prog, 280, &out, NULL);
    int passed = 0;
    for (const char *p = out; (p = strstr(p, "checks passed")); p++) passed++;
    if (rc != 0 || passed != n) fprintf(stderr, "--- exit %d, output:\n%s\n", rc, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(passed, n);
    free(out);
}

/* The topology each rank found: n / per_node nodes over MPI, per_node local ranks sharing memory. */
TEST_T(topology_2x2_transport_mpi, 120) {
    need_plugin();
    char prog[512], *out = NULL;
    snprintf(prog, sizeof prog, "exec %s/tests/prog_topo", th_build_dir());
    int rc = mpi_job(4, 2, "", prog, 100, &out, NULL);
    for (int r = 0; r < 4; r++) {
        char want[256];
        snprintf(want, sizeof want, "topo: rank %d/4 local %d/2 node %d/2 transport mpi launcher openmpi sum OK", r,
                 r % 2, r / 2);
        if (!strstr(out, want)) fprintf(stderr, "missing: %s\n%s\n", want, out);
        ASSERT_CONTAINS(out, want);
    }
    ASSERT_EQ_INT(rc, 0);
    free(out);
}

#define SMALL_MATRIX "--counts 0,1,13,37W+1,70001 --dtypes f32,bf16,i64 --ops sum,max,avg"
#define TINY_MATRIX "--counts 0,1,37W+1,70001 --dtypes f32,bf16 --ops sum,avg"
TEST_T(matrix_2_nodes, 300) { matrix(2, 1, "--algos auto,ring,rd " SMALL_MATRIX); }
TEST_T(matrix_3_nodes, 300) { matrix(3, 1, "--algos auto,ring,rd " TINY_MATRIX); }
TEST_T(matrix_4_nodes, 300) { matrix(4, 1, "--algos auto " TINY_MATRIX); }
TEST_T(matrix_2x2_hierarchical, 300) { matrix(4, 2, "--algos auto,hier " TINY_MATRIX); }
/* One node: everything over MPI (as --transport tcp puts everything over TCP). */
TEST_T(matrix_one_node_flat_mpi, 300) { matrix(2, 2, "--algos auto,rd --counts 1,37W+1,70001 --dtypes f32 --ops sum"); }
TEST_T(big_64mib_2_nodes, 300) { matrix(2, 1, "--colls allreduce --counts 1 --dtypes f32 --ops sum --big"); }

/* A collective mismatch is caught by the message header over MPI, as over TCP, not by the timeout. */
TEST_T(mismatches_detected, 300) {
    need_plugin();
    const char *kinds[] = {"count", "dtype"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char prog[512], *out = NULL;
        snprintf(prog, sizeof prog, "exec %s/tests/prog_mismatch %s %s", th_build_dir(), kinds[i], i % 2 ? "300000" : "10");
        double el = 0;
        int rc = mpi_job(2, 1, "BATON_TIMEOUT=60", prog, 90, &out, &el);
        int misses = 0;
        for (const char *p = out; (p = strstr(p, ": no error")); p++) misses++;
        if (rc == 0 || misses || !strstr(out, "collective mismatch") || el > 40)
            fprintf(stderr, "%s --- exit %d after %.1fs:\n%s\n", kinds[i], rc, el, out);
        ASSERT_NE_INT(rc, 0);
        ASSERT_EQ_INT(misses, 0);
        ASSERT_CONTAINS(out, "collective mismatch");
        ASSERT_TRUE(el < 40); /* found by comparing headers, not by the 60 s timeout */
        free(out);
    }
}

/* How a wait polls before it naps: 1 ms (50 us made waits that once ran into their naps wake late, and
 * their peers' waits then too: 8-byte all-reduces of 2 ranks took 150-220 us instead of 1), between
 * sched_yield calls when the node's ranks outnumber its CPUs (a pure spin held the CPU the awaited rank
 * shared: 3 ranks on 2 cores, 368-425 us instead of 33-39); 50 us on a comm thread whose waits nap. taskset
 * makes the CPU count the same on any machine of 2 CPUs or more. */
static void wait_mode(int n, const char *cpus, const char *env, const char *want) {
    need_plugin();
    char prog[1024], *out = NULL;
    snprintf(prog, sizeof prog, "exec taskset -c %s %s bench allreduce -b 8 -e 8 -n 20 -w 2", cpus, th_baton());
    char e[256];
    snprintf(e, sizeof e, "BATON_LOG_LEVEL=debug %s", env);
    int rc = mpi_job(n, n, e, prog, 100, &out, NULL);
    int seen = 0;
    for (const char *p = out; (p = strstr(p, want)); p++) seen++;
    if (rc != 0 || seen != n) fprintf(stderr, "--- exit %d, want %d x '%s':\n%s\n", rc, n, want, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(seen, n);
    free(out);
}
TEST_T(waits_yield_when_ranks_outnumber_cpus, 120) {
    wait_mode(2, "0", "", "mpi: a wait polls for 1000 us, busy for the first 0 and then between sched_yield calls "
                          "(50 us on a thread whose waits nap), then naps");
}
TEST_T(waits_spin_1ms_when_every_rank_has_a_cpu, 120) {
    wait_mode(2, "0,1", "", "mpi: a wait polls for 1000 us, busy for the first 50 and then between sched_yield calls "
                            "(50 us on a thread whose waits nap), then naps\n");
}
/* Open MPI's progress yields by itself when it knows its ranks outnumber its slots (mpi_yield_when_idle,
 * read through MPI_T); the wait then leaves the yielding to it (both doubled the context switches: 3 ranks
 * on 2 cores, 8 bytes, 36 us against 15.5). Set here the way mpirun -x or --mca would. */
TEST_T(wait_leaves_yielding_to_mpi_when_mpi_yields, 120) {
    wait_mode(2, "0,1", "OMPI_MCA_mpi_yield_when_idle=1",
              "then naps; MPI yields in its own progress, so the poll does not");
}
TEST_T(wait_spin_set_by_the_user_is_kept, 120) {
    wait_mode(2, "0", "BATON_MPI_SPIN_US=70", "mpi: a wait polls for 70 us, busy for the first 0 and then between "
                                              "sched_yield calls (70 us on a thread whose waits nap), then naps");
}

/* A rank stopped (SIGSTOP) in the middle of a stream of all-reduces is named by its peer when the collective
 * timeout runs out, and the job ends. */
TEST_T(stopped_rank_named_within_timeout, 120) {
    need_plugin();
    char prog[1024], *out = NULL;
    snprintf(prog, sizeof prog,
             "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then (sleep %d; kill -STOP $$) & fi; "
             "exec %s bench allreduce -b 1M -e 1M -n 100000 -w 1 --min-time 60",
             (int)(2 * th_timeout_scale() + 0.5), th_baton()); /* after MPI_Init, also under sanitizers */
    double el = 0;
    int rc = mpi_job(2, 1, "BATON_TIMEOUT=4", prog, 100, &out, &el);
    if (rc == 0 || !strstr(out, "timed out waiting for rank 1")) fprintf(stderr, "exit %d:\n%s\n", rc, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, "timed out waiting for rank 1");
    ASSERT_TRUE(el < 60);
    free(out);
}

/* A rank killed (SIGKILL) mid-job ends the whole job (mpirun tears it down), instead of leaving it hanging. */
TEST_T(killed_rank_ends_the_job, 120) {
    need_plugin();
    char prog[1024], *out = NULL;
    snprintf(prog, sizeof prog,
             "if [ $OMPI_COMM_WORLD_RANK = 2 ]; then (sleep %d; kill -9 $$) & fi; "
             "exec %s bench allreduce -b 1M -e 1M -n 100000 -w 1 --min-time 60",
             (int)(2 * th_timeout_scale() + 0.5), th_baton());
    double el = 0;
    int rc = mpi_job(4, 2, "BATON_TIMEOUT=60", prog, 100, &out, &el);
    if (rc == 0 || rc == 124 || el > 40 || !strstr(out, "signal 9")) fprintf(stderr, "exit %d after %.1f s:\n%s\n", rc, el, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, "signal 9"); /* mpirun: "... exited on signal 9 (Killed)" */
    ASSERT_NE_INT(rc, 124);     /* not ended by the test's own timeout */
    ASSERT_TRUE(el < 40);       /* well before the 60 s collective timeout */
    free(out);
}

static void refused(const char *cmd, const char *want) {
    char *out = NULL;
    int rc = th_run(cmd, 60, &out, NULL);
    if (rc == 0 || !strstr(out, want)) fprintf(stderr, "%s\n--- exit %d:\n%s\n", cmd, rc, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_NE_INT(rc, 124);
    ASSERT_CONTAINS(out, want);
    free(out);
}

/* Outside Open MPI's mpirun, --transport mpi is refused with one line saying what to do. */
TEST_T(refused_outside_openmpi, 120) {
    need_plugin();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s bench allreduce --transport mpi -b 8 -e 8 2>&1", th_baton());
    refused(cmd, "--transport mpi needs a job started by Open MPI's mpirun (this one was started by no launcher)");
    snprintf(cmd, sizeof cmd, "%s run -n 2 -- %s bench allreduce --transport mpi -b 8 -e 8 2>&1", th_baton(), th_baton());
    refused(cmd, "(this one was started by baton)");
    snprintf(cmd, sizeof cmd, "timeout 60 mpiexec.mpich -np 2 %s bench allreduce --transport mpi -b 8 -e 8 2>&1",
             th_baton());
    refused(cmd, "--transport mpi is built against Open MPI and cannot run under MPICH's mpiexec");
}

/* Without the plugin (a build without libopenmpi-dev) --transport mpi says how to get it; baton itself never
 * links libmpi; and `make MPICC=` builds no plugin. */
TEST_T(without_the_plugin, 120) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "BATON_MPI_PLUGIN=%s/no-such-plugin.so " MPIRUN " -np 2 -x BATON_MPI_PLUGIN %s bench allreduce "
             "--transport mpi -b 8 -e 8 2>&1",
             th_tmpdir(), th_baton());
    refused(cmd, "no-such-plugin.so' cannot be loaded (no such file)");
    /* a copy of the program in a directory without the plugin (and none installed under PREFIX/lib) */
    snprintf(cmd, sizeof cmd,
             "cp %s %s/baton && cd %s && " MPIRUN " -np 2 ./baton bench allreduce --transport mpi -b 8 -e 8 2>&1",
             th_baton(), th_tmpdir(), th_tmpdir());
    refused(cmd, "apt-get install libopenmpi-dev");
    snprintf(cmd, sizeof cmd, "ldd %s", th_baton());
    ASSERT_EQ_INT(th_run(cmd, 30, &out, NULL), 0);
    ASSERT_TRUE(!strstr(out, "libmpi"));
    free(out);
    ASSERT_EQ_INT(th_run("make -n MPICC= BUILD=build-nompi-dryrun all 2>&1 | grep -c 'libbaton-mpi.so' ; true", 60, &out,
                         NULL), 0);
    ASSERT_TRUE(atoi(out) == 0);
    free(out);
    ASSERT_EQ_INT(th_run("make -n BUILD=build-nompi-dryrun all 2>&1 | grep -c 'mpicc.openmpi.*libbaton-mpi.so'; true",
                         60, &out, NULL), 0);
    ASSERT_TRUE(atoi(out) >= 1); /* the dry run itself can fail: with MPICC it plans the plugin */
    free(out);
}
