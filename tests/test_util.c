/* test_util.c: status table, the median, strict parsing, deadlines, and the harness itself. */
#include <stdint.h>

#include "harness.h"
#include "util/util.h"

TEST(status_strings_come_from_one_table) {
    ASSERT_STR_EQ(baton_strerror(BATON_OK), "success");
    ASSERT_STR_EQ(baton_strerror(BATON_ETIMEDOUT), "timed out");
    ASSERT_STR_EQ(baton_status_name(BATON_EPEERDEAD), "BATON_EPEERDEAD");
    ASSERT_STR_EQ(baton_strerror(-9999), "unknown status");
}

TEST(fail_records_detail_and_context) {
    int rc = baton__fail(BATON_EPROTO, "key length %u exceeds %u", 300u, 256u);
    ASSERT_EQ_INT(rc, BATON_EPROTO);
    ASSERT_STR_EQ(baton_last_error(), "key length 300 exceeds 256");
    baton__fail_ctx(rc, "store: ");
    ASSERT_STR_EQ(baton_last_error(), "store: key length 300 exceeds 256");
}

TEST(median_of_odd_even_and_empty) {
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};
    ASSERT_NEAR(baton__median(odd, 3), 3.0, 0);
    ASSERT_TRUE(odd[0] == 1 && odd[1] == 3 && odd[2] == 5);   /* sorted in place */
    ASSERT_NEAR(baton__median(even, 4), 2.5, 0);
    ASSERT_NEAR(baton__median(one, 1), 7.0, 0);
    ASSERT_NEAR(baton__median(NULL, 0), 0.0, 0);
}

/* The interleaving of baton bench --rounds and first-use calibration: every round a permutation, every
 * alternative once in each position, and each ordered pair (a right before b) equally often over a full
 * design (n rounds, 2n for odd n). A rotation (round r starting at r mod n) fails the last check: there the
 * same alternative always precedes a given one. */
TEST(round_order_is_a_balanced_latin_square) {
    ASSERT_EQ_INT(baton__round_order(1, 0, 0), 0);
    ASSERT_EQ_INT(baton__round_order(1, 5, 0), 0);
    for (int n = 2; n <= 7; n++) {
        int rounds = n % 2 ? 2 * n : n, pos[8][8] = {{0}}, pair[8][8] = {{0}};
        for (int r = 0; r < rounds; r++) {
            int seen = 0, prev = -1;
            for (int k = 0; k < n; k++) {
                int a = baton__round_order(n, r, k);
                ASSERT_TRUE(a >= 0 && a < n);
                seen |= 1 << a;
                pos[a][k]++;
                if (prev >= 0) pair[prev][a]++;
                prev = a;
            }
            ASSERT_EQ_INT(seen, (1 << n) - 1);
        }
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                ASSERT_EQ_INT(pos[a][b], rounds / n);
                if (a != b) ASSERT_EQ_INT(pair[a][b], n % 2 ? 2 : 1);
            }
        /* a longer run repeats the design */
        for (int k = 0; k < n; k++) ASSERT_EQ_INT(baton__round_order(n, rounds + 1, k), baton__round_order(n, 1, k));
    }
}

/* The calibration's sweeps and passes (tools/plan_calib.c) and bench/plan_floors.sh's: the nearest whole design */
TEST(whole_designs_round_to_the_nearest_balanced_count) {
    ASSERT_EQ_INT(baton__whole_designs(2, 3), 4); /* ring,rd: 3 sweeps put ring first twice */
    ASSERT_EQ_INT(baton__whole_designs(2, 2), 2);
    ASSERT_EQ_INT(baton__whole_designs(2, 1), 2);
    ASSERT_EQ_INT(baton__whole_designs(3, 3), 6); /* a tie rounds up */
    ASSERT_EQ_INT(baton__whole_designs(3, 8), 6);
    ASSERT_EQ_INT(baton__whole_designs(3, 9), 12);
    ASSERT_EQ_INT(baton__whole_designs(4, 5), 4);
    ASSERT_EQ_INT(baton__whole_designs(4, 6), 8);
    ASSERT_EQ_INT(baton__whole_designs(1, 3), 3);
}

TEST(parse_long_is_strict) {
    long v = 0;
    ASSERT_OK(baton__parse_long("42", 0, 100, &v));
    ASSERT_EQ_INT(v, 42);
    ASSERT_EQ_INT(baton__parse_long("42x", 0, 100, &v), BATON_EINVAL);
    ASSERT_EQ_INT(baton__parse_long("", 0, 100, &v), BATON_EINVAL);
    ASSERT_EQ_INT(baton__parse_long("101", 0, 100, &v), BATON_ERANGE);
    ASSERT_EQ_INT(baton__parse_long("99999999999999999999999", 0, 100, &v), BATON_EINVAL);
}

TEST(parse_size_accepts_suffixes) {
    uint64_t v = 0;
    ASSERT_OK(baton__parse_size("8", UINT64_MAX, &v));
    ASSERT_EQ_U64(v, 8);
    ASSERT_OK(baton__parse_size("8K", UINT64_MAX, &v));
    ASSERT_EQ_U64(v, 8192);
    ASSERT_OK(baton__parse_size("256M", UINT64_MAX, &v));
    ASSERT_EQ_U64(v, 256ull << 20);
    ASSERT_OK(baton__parse_size("1GB", UINT64_MAX, &v));
    ASSERT_EQ_U64(v, 1ull << 30);
    ASSERT_EQ_INT(baton__parse_size("-1", UINT64_MAX, &v), BATON_EINVAL);
    ASSERT_EQ_INT(baton__parse_size("12Q", UINT64_MAX, &v), BATON_EINVAL);
    ASSERT_EQ_INT(baton__parse_size("2G", 1ull << 30, &v), BATON_ERANGE);
    ASSERT_EQ_INT(baton__parse_size("99999999999999G", UINT64_MAX, &v), BATON_ERANGE);
}

TEST(env_errors_name_the_variable) {
    long v;
    setenv("BATON_TEST_VAR", "abc", 1);
    ASSERT_EQ_INT(baton__env_long("BATON_TEST_VAR", 7, 0, 10, &v), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "BATON_TEST_VAR='abc'");
    ASSERT_EQ_INT(v, 7);
    unsetenv("BATON_TEST_VAR");
    ASSERT_EQ_INT(baton__env_long("BATON_TEST_VAR", 7, 0, 10, &v), BATON_ENOTFOUND);
    ASSERT_EQ_INT(v, 7);
}

TEST(deadline_and_backoff_make_progress) {
    uint64_t t0 = baton__now_ns();
    uint64_t d = baton__deadline_after(0.05);
    baton_backoff b;
    baton__backoff_init(&b);
    while (baton__now_ns() < d) baton__backoff(&b);
    uint64_t dt = baton__now_ns() - t0;
    ASSERT_TRUE(dt >= 50000000ull);
    ASSERT_EQ_U64(baton__deadline_after(0), UINT64_MAX);
}

/* A thread told not to spin (a comm thread sharing its one CPU with the compute) starts its waits at the
 * sched_yield phase: its first call is past the 4000 pause calls; other threads still spin first. */
TEST(backoff_no_spin_skips_the_spin_phase) {
    baton_backoff b;
    baton__backoff_init(&b);
    baton__backoff(&b);
    ASSERT_EQ_INT((int)b.iter, 1);
    baton__backoff_no_spin(BATON__WAIT_YIELD);
    baton__backoff_init(&b);
    baton__backoff(&b);
    ASSERT_TRUE(b.iter > 4000);
    baton__backoff_no_spin(BATON__WAIT_SPIN);
    baton__backoff_init(&b);
    baton__backoff(&b);
    ASSERT_EQ_INT((int)b.iter, 1);
}

TEST(harness_run_captures_output_and_exit_codes) {
    char *out = NULL;
    int rc = th_run("echo hello; echo err >&2; exit 3", 10, &out, NULL);
    ASSERT_EQ_INT(rc, 3);
    ASSERT_CONTAINS(out, "hello");
    ASSERT_CONTAINS(out, "err");
    free(out);
    ASSERT_EQ_INT(th_run("kill -TERM $$", 10, NULL, NULL), 128 + 15);
}

TEST(harness_run_kills_on_timeout) {
    double el = 0;
    int rc = th_run("sleep 30", 0.5, NULL, &el);
    ASSERT_EQ_INT(rc, 124);
    ASSERT_TRUE(el < 5);
}
