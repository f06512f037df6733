/* test_coll.c: the collective matrix across processes. Each test starts `baton run -n N prog_coll ...`
 * with a hard timeout; every rank checks its own results element by element (see prog_coll.c).
 * Sweeps world sizes 1, 2, 3, 4, 8 (8 ranks oversubscribe the 2 cores) x counts 0, 1, odd, not divisible
 * by the world size, larger than a staging chunk / pipeline segment x all dtypes x all ops x in place and
 * out of place x algorithms x shm and tcp; plus 64 MiB on 2 ranks. */
#include <stdio.h>

#include "harness.h"

/* Runs prog_coll on n ranks with extra environment and arguments; asserts every rank passed. */
static void run_matrix(int n, const char *env, const char *args, double timeout_s) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s run -n %d -- %s/tests/prog_coll %s", env, th_baton(), n, th_build_dir(), args);
    char *out = NULL;
    int rc = th_run(cmd, timeout_s, &out, NULL);
    if (rc != 0) fprintf(stderr, "%s\n--- exit %d, output:\n%s\n", cmd, rc, out ? out : "");
    ASSERT_EQ_INT(rc, 0);
    int passed = 0;
    for (const char *p = out; (p = strstr(p, "checks passed")); p++) passed++;
    ASSERT_EQ_INT(passed, n);
    free(out);
}

#define COUNTS "0,1,13,37W+1,200003"

TEST_T(shm_world_1, 120) { run_matrix(1, "", "--algos auto --counts " COUNTS, 100); }
TEST_T(shm_world_2_all_algos, 300) { run_matrix(2, "", "--algos auto,ring,rd --counts " COUNTS " --shmbuf", 280); }
TEST_T(shm_world_3_all_algos, 300) { run_matrix(3, "", "--algos auto,ring,rd --counts " COUNTS, 280); }
TEST_T(shm_world_4, 300) { run_matrix(4, "", "--algos auto,ring --counts " COUNTS " --shmbuf", 280); }
TEST_T(shm_world_8, 300) { run_matrix(8, "", "--algos auto,rd --counts 0,1,13,37W+1,70001", 280); }
TEST_T(tcp_world_2, 300) { run_matrix(2, "BATON_TRANSPORT=tcp", "--algos auto,ring,rd --counts " COUNTS, 280); }
TEST_T(tcp_world_3, 300) { run_matrix(3, "BATON_TRANSPORT=tcp", "--algos ring,rd --counts " COUNTS, 280); }
TEST_T(tcp_world_4, 300) { run_matrix(4, "BATON_TRANSPORT=tcp", "--algos auto --counts " COUNTS, 280); }
TEST_T(tcp_world_8, 300) { run_matrix(8, "BATON_TRANSPORT=tcp", "--algos ring,rd --counts 0,1,13,37W+1,70001", 280); }
TEST_T(big_64mib_2_ranks_shm, 300) {
    run_matrix(2, "", "--colls allreduce --counts 1 --dtypes f32 --ops sum --big --shmbuf", 280);
}
TEST_T(big_64mib_2_ranks_tcp, 300) {
    run_matrix(2, "BATON_TRANSPORT=tcp", "--colls allreduce --counts 1 --dtypes f32 --ops sum --big", 280);
}
