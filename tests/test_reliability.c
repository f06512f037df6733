/* test_reliability.c: faults are found in seconds and named. Collective mismatches of every kind (count,
 * dtype, op, a skipped call, a different collective, a different root) on 2 and 4 ranks, small and large,
 * over shared memory and TCP: every rank fails well before the collective timeout, and the ones that see it
 * name the collective and both sides. */
#include <stdio.h>
#include <stdlib.h>

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

static const char *kinds[] = {"count", "dtype", "op", "skip", "kind", "root"};

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
