/* test_init.c: baton_init() from every launcher's environment, without `baton run`: torchrun's variables
 * (with and without MASTER_ADDR/MASTER_PORT), Open MPI's, MPICH's and Slurm's, where rank 0 hosts the
 * store; and the one-line errors for missing, malformed or inconsistent variables. A launcher that puts the
 * whole job on one node (LOCAL_WORLD_SIZE = WORLD_SIZE) spares the host table, and a rank that never comes
 * is still named. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

/* Starts n workers by hand, each with `vars` (a printf format taking the rank, then n) set. */
static int start_n(int n, const char *vars, char **out) {
    char cmd[2048];
    int len = snprintf(cmd, sizeof cmd, "unset BATON_RANK BATON_STORE_ADDR BATON_SECRET BATON_JOB_ID RANK WORLD_SIZE; ");
    for (int r = 0; r < n; r++) {
        char v[512];
        snprintf(v, sizeof v, vars, r, n);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len,
                        "env %s %s/tests/prog_coll --colls allreduce,broadcast --counts 13,70001 --dtypes f32,bf16 "
                        "--ops sum & ",
                        v, th_build_dir());
    }
    snprintf(cmd + len, sizeof cmd - (size_t)len, "fail=0; for p in $(jobs -p); do wait $p || fail=1; done; exit $fail");
    return th_run(cmd, 60, out, NULL);
}

static void expect_ok(int n, const char *vars) {
    char *out = NULL;
    int rc = start_n(n, vars, &out);
    int passed = 0;
    for (const char *p = out; (p = strstr(p, "checks passed")); p++) passed++;
    if (rc != 0 || passed != n) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(passed, n);
    free(out);
}

TEST(torchrun_variables_single_node) {
    expect_ok(3, "RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=3 BATON_JOB_ID=0a1b2c3d");
}

TEST(openmpi_variables) {
    /* as mpirun.openmpi 4.1 sets them on one machine: NODE_RANK is the per-node process index */
    expect_ok(3, "OMPI_COMM_WORLD_RANK=%1$d OMPI_COMM_WORLD_SIZE=%2$d OMPI_COMM_WORLD_LOCAL_RANK=%1$d "
                 "OMPI_COMM_WORLD_LOCAL_SIZE=%2$d OMPI_COMM_WORLD_NODE_RANK=%1$d OMPI_MCA_orte_num_nodes=1 "
                 "PMIX_RANK=%1$d PMIX_NAMESPACE=ompi-test-1");
}

TEST(mpich_variables) { expect_ok(2, "PMI_RANK=%d PMI_SIZE=%d MPI_LOCALNRANKS=2 PMI_KVSNAME=kvs_test_2"); }

TEST(slurm_variables) {
    /* as srun (Slurm 22.05) sets them for `srun -n 2` on one node */
    expect_ok(2, "SLURM_PROCID=%1$d SLURM_NTASKS=%2$d SLURM_LOCALID=%1$d SLURM_NODEID=0 SLURM_JOB_NUM_NODES=1 "
                 "SLURM_STEP_NUM_NODES=1 SLURM_STEP_TASKS_PER_NODE=%2$d SLURM_JOB_ID=4242 SLURM_STEP_ID=0");
}

TEST(torchrun_with_master_addr_and_secret) {
    char vars[512], *out = NULL;
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    snprintf(vars, sizeof vars,
             "RANK=%%d WORLD_SIZE=%%d MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
             "BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
             port);
    int rc = start_n(2, vars, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    free(out);
}

/* One process, one bad environment: a one-line error naming what was wrong, non-zero exit, quickly. */
static void expect_error(const char *env, const char *needle) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "unset BATON_RANK BATON_STORE_ADDR BATON_SECRET RANK WORLD_SIZE; env %s %s/tests/prog_coll --counts 1", env,
             th_build_dir());
    double el = 0;
    int rc = th_run(cmd, 30, &out, &el);
    if (rc == 0 || !strstr(out, needle)) fprintf(stderr, "%s\n%s\n", cmd, out);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, needle);
    ASSERT_TRUE(el < 10);
    free(out);
}

TEST(bad_environments_are_named) {
    expect_error("RANK=0", "RANK is set but WORLD_SIZE is not");
    expect_error("RANK=4 WORLD_SIZE=4", "RANK='4' must be a rank in [0, 4)");
    expect_error("RANK=x WORLD_SIZE=2", "RANK='x'");
    expect_error("RANK=0 WORLD_SIZE=two", "WORLD_SIZE='two'");
    expect_error("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    expect_error("SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=5 SLURM_STEP_ID=0", "SLURM_LOCALID");
    expect_error("BATON_WORLD_SIZE=-3", "BATON_WORLD_SIZE='-3' is set but BATON_RANK is not");
    expect_error("BATON_RANK=0 BATON_WORLD_SIZE=2 BATON_STORE_ADDR=127.0.0.1:1", "BATON_SECRET is not");
    expect_error("BATON_RANK=0 BATON_WORLD_SIZE=2 BATON_STORE_ADDR=nowhere "
                 "BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                 "BATON_STORE_ADDR='nowhere'");
    expect_error("BATON_RANK=0 BATON_WORLD_SIZE=2 BATON_STORE_ADDR=127.0.0.1:9 BATON_SECRET=xyz", "BATON_SECRET must be");
    expect_error("RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1", "needs MASTER_ADDR and MASTER_PORT");
    expect_error("RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999", "MASTER_PORT='99999'");
    expect_error("BATON_TIMEOUT=-3", "BATON_TIMEOUT");
    expect_error("BATON_TRANSPORT=carrier-pigeon", "BATON_TRANSPORT='carrier-pigeon'");
    expect_error("BATON_BIND=sideways RANK=0 WORLD_SIZE=1", "BATON_BIND='sideways'");
}

/* A rank whose peers never come fails at the join timeout with a message that says what it waited for. */
TEST(missing_peers_fail_at_the_join_timeout) {
    char *out = NULL;
    double el = 0;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "unset BATON_RANK BATON_STORE_ADDR; RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 BATON_JOB_ID=dead1 "
             "BATON_JOIN_TIMEOUT=1 %s/tests/prog_coll --counts 1",
             th_build_dir());
    int rc = th_run(cmd, 20, &out, &el);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, "rank 0 did not publish the store");
    ASSERT_TRUE(el < 8);
    free(out);
}

/* One launcher, one node: no host table (rank 0 would gather it in W + 1 store round trips), same topology;
 * BATON_HOST_ID (how tests fake nodes) keeps the table; a rank that never comes is named at the timeout. */
TEST(one_node_by_the_launchers_word_skips_the_host_table) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_LOG_LEVEL=debug %s run -n 3 -- %s/tests/prog_topo 2>&1", th_baton(), th_build_dir());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 0);
    ASSERT_CONTAINS(out, "one node by the launcher's word (LOCAL_WORLD_SIZE = WORLD_SIZE = 3): no host table");
    ASSERT_CONTAINS(out, "topo: rank 2/3 local 2/3 node 0/1 transport shm launcher baton sum OK");
    free(out);
    snprintf(cmd, sizeof cmd, "BATON_HOST_ID=h BATON_LOG_LEVEL=debug %s run -n 3 -- %s/tests/prog_topo 2>&1", th_baton(),
             th_build_dir());
    ASSERT_EQ_INT(th_run(cmd, 60, &out, NULL), 0);
    ASSERT_TRUE(!strstr(out, "no host table"));
    ASSERT_CONTAINS(out, "topo: rank 2/3 local 2/3 node 0/1 transport shm launcher baton sum OK");
    free(out);
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    snprintf(cmd, sizeof cmd, "unset BATON_RANK BATON_STORE_ADDR BATON_SECRET; RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 "
             "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d BATON_JOIN_TIMEOUT=1 %s/tests/prog_topo 2>&1", port, th_build_dir());
    double el = 0;
    ASSERT_NE_INT(th_run(cmd, 30, &out, &el), 0);
    ASSERT_CONTAINS(out, "timed out waiting for rank 1 to join");
    ASSERT_TRUE(el < 15);
    free(out);
}
