/* test_launchers.c: every launcher family yields the right topology, asserted rank by rank (node count, local
 * ranks and sizes, transport), not only right results: baton run (one node and two), torchrun's variables set
 * by hand on one host, the real Open MPI mpirun and MPICH mpiexec; and `baton train` joins the job under
 * each instead of running N trainings alone. (Slurm's srun: tests/cluster/test_slurm.sh.)
 *
 * The environments are the real ones: mpirun.openmpi 4.1 sets OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,
 * LOCAL_SIZE,NODE_RANK} (NODE_RANK is the per-node process index, 0 and 1 for `-np 2` on one machine) and
 * OMPI_MCA_orte_num_nodes; mpiexec.mpich sets PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MPIRUN "mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none"

/* Runs cmd and checks that every rank r in [0, world) printed exactly `want(r)`. */
static void expect_topology(const char *cmd, int world, void (*want)(int r, int world, char *buf, size_t n)) {
    char *out = NULL;
    int rc = th_run(cmd, 60, &out, NULL);
    int bad = rc != 0;
    for (int r = 0; r < world && !bad; r++) {
        char line[256];
        want(r, world, line, sizeof line);
        if (!strstr(out, line)) {
            fprintf(stderr, "missing line: %s\n", line);
            bad = 1;
        }
    }
    if (bad) fprintf(stderr, "%s\n--- exit %d:\n%s\n", cmd, rc, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_TRUE(!bad);
    ASSERT_TRUE(!strstr(out, "WRONG"));
    free(out);
}

static const char *launcher_;
static const char *transport_;
static int per_node_;

static void one_node(int r, int world, char *buf, size_t n) {
    snprintf(buf, n, "topo: rank %d/%d local %d/%d node 0/1 transport %s launcher %s sum OK", r, world, r, world,
             transport_, launcher_);
}

static void nodes_of(int r, int world, char *buf, size_t n) {
    snprintf(buf, n, "topo: rank %d/%d local %d/%d node %d/%d transport %s launcher %s sum OK", r, world, r % per_node_,
             per_node_, r / per_node_, world / per_node_, transport_, launcher_);
}

TEST_T(baton_run_one_node, 60) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s run -n 3 -- %s/tests/prog_topo", th_baton(), th_build_dir());
    launcher_ = "baton", transport_ = "shm";
    expect_topology(cmd, 3, one_node);
}

/* Two `baton run` launchers of 2 ranks each on this machine as nodes 0 and 1, meeting at HOST:<a free port>,
 * with ENV exported first. */
static void two_launchers(char *cmd, size_t n, const char *env, const char *host) {
    int port = th_free_port();
    snprintf(cmd, n,
             "export BATON_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff %s; "
             "%s run -n 2 --nnodes 2 --node-rank 0 --rdzv %s:%d -- %s/tests/prog_topo & "
             "%s run -n 2 --nnodes 2 --node-rank 1 --rdzv %s:%d -- %s/tests/prog_topo & "
             "fail=0; for p in $(jobs -p); do wait $p || fail=1; done; exit $fail",
             env, th_baton(), host, port, th_build_dir(), th_baton(), host, port, th_build_dir());
    launcher_ = "baton", transport_ = "tcp", per_node_ = 2;
}

TEST_T(baton_run_two_nodes_on_one_machine, 60) {
    char cmd[2048];
    two_launchers(cmd, sizeof cmd, "", "127.0.0.1");
    expect_topology(cmd, 4, nodes_of);
}

/* The same over IPv6 loopback: the ranks published "[::1]:PORT" but listened on IPv4's wildcard, and every
 * connection between the two "nodes" was refused (found 2026-11-27). */
TEST_T(baton_run_two_nodes_on_one_machine_over_ipv6, 90) {
    char cmd[2048];
    two_launchers(cmd, sizeof cmd, "", "[::1]");
    expect_topology(cmd, 4, nodes_of);
    /* BATON_HOST_ADDR as an IPv6 address without brackets: published as "[::1]:PORT" (it was "::1:PORT") */
    two_launchers(cmd, sizeof cmd, "BATON_HOST_ADDR=::1", "127.0.0.1");
    expect_topology(cmd, 4, nodes_of);
}

/* torchrun's variables by hand on one host, without LOCAL_WORLD_SIZE: a loopback MASTER_ADDR is one node
 * (this was refused as "multi-node ... needs BATON_SECRET"). */
TEST_T(torchrun_variables_by_hand_with_loopback_master, 60) {
    char cmd[2048];
    int port = th_free_port();
    snprintf(cmd, sizeof cmd,
             "unset BATON_RANK BATON_WORLD_SIZE BATON_STORE_ADDR BATON_SECRET LOCAL_WORLD_SIZE; "
             "for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
             "%s/tests/prog_topo & done; fail=0; for p in $(jobs -p); do wait $p || fail=1; done; exit $fail",
             port, th_build_dir());
    launcher_ = "torchrun", transport_ = "shm";
    expect_topology(cmd, 2, one_node);
}

/* Open MPI on one machine: one node over shared memory (it was one node per rank, over TCP). */
TEST_T(openmpi_mpirun_one_node, 60) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MPIRUN " -np 3 %s/tests/prog_topo", th_build_dir());
    launcher_ = "openmpi", transport_ = "shm";
    expect_topology(cmd, 3, one_node);
}

/* The same, with two host identities standing in for two machines (mpirun with a hostfile). */
TEST_T(openmpi_mpirun_two_hosts, 60) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             MPIRUN " -np 4 sh -c 'BATON_HOST_ID=host$((OMPI_COMM_WORLD_RANK / 2)) exec %s/tests/prog_topo'",
             th_build_dir());
    launcher_ = "openmpi", transport_ = "tcp", per_node_ = 2;
    expect_topology(cmd, 4, nodes_of);
}

TEST_T(mpich_mpiexec_one_node, 60) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mpiexec.mpich -np 3 %s/tests/prog_topo", th_build_dir());
    launcher_ = "mpich", transport_ = "shm";
    expect_topology(cmd, 3, one_node);
}

/* `baton train` joins the job under every launcher (it ran one training per process under mpirun before). */
static void train_joins(const char *launch, int n) {
    char cmd[2048], *out = NULL, want[64];
    snprintf(cmd, sizeof cmd,
             "%s %s train --data synthetic --train-samples 512 --hidden 16 --batch 32 --steps 2 --threads 1 2>&1",
             launch, th_baton());
    int rc = th_run(cmd, 60, &out, NULL);
    snprintf(want, sizeof want, "%d %s x batch 32", n, n == 1 ? "rank" : "ranks");
    int banners = 0;
    for (const char *p = out; (p = strstr(p, "baton train: mlp on")); p++) banners++;
    if (rc != 0 || !strstr(out, want) || banners != 1) fprintf(stderr, "%s\n%s\n", cmd, out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, want);
    ASSERT_EQ_INT(banners, 1); /* one job, reported once by rank 0 */
    free(out);
}

TEST_T(train_joins_under_openmpi, 60) { train_joins(MPIRUN " -np 2", 2); }
TEST_T(train_joins_under_mpich, 60) { train_joins("mpiexec.mpich -np 2", 2); }

/* Malformed launcher variables stop `baton train` with the variable named (it trained alone, exit 0). */
TEST(train_refuses_malformed_launcher_variables) {
    const char *cases[][2] = {{"WORLD_SIZE=abc RANK=0", "WORLD_SIZE"},
                              {"BATON_WORLD_SIZE=-3", "BATON_WORLD_SIZE"},
                              {"RANK=5 WORLD_SIZE=2", "RANK"}};
    for (int i = 0; i < 3; i++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd,
                 "unset BATON_RANK BATON_WORLD_SIZE RANK WORLD_SIZE; env %s %s train --data synthetic --steps 1 2>&1",
                 cases[i][0], th_baton());
        int rc = th_run(cmd, 30, &out, NULL);
        if (rc != 2) fprintf(stderr, "%s\n%s\n", cmd, out);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_CONTAINS(out, cases[i][1]);
        ASSERT_TRUE(!strstr(out, "epoch"));
        free(out);
    }
}
