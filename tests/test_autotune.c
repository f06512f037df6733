/* test_autotune.c: `baton bench --algo A,B --rounds R` (every algorithm interleaved in one run, medians),
 * and BATON_TUNING=calibrate (a calibration made at first use and cached) (issue 9). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/tuning.h"
#include "harness.h"

/* Runs CMD (stderr too), fails the test on a non-zero exit; returns the output. */
static char *must_run(const char *cmd, double timeout_s) {
    char *o = NULL;
    int rc = th_run(cmd, timeout_s, &o, NULL);
    if (rc != 0) th_fail(__FILE__, __LINE__, "%s: rc %d: %s", cmd, rc, o ? o : "");
    return o;
}

/* `ENV baton run -n 2 -- baton bench allreduce ARGS`, which must succeed; its output (stderr too). */
static char *bench2(const char *env, const char *args, double timeout_s) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s run -n 2 -- %s bench allreduce %s 2>&1", env, th_baton(), th_baton(), args);
    return must_run(cmd, timeout_s);
}

/* Counts the CSV rows of `baton bench` output whose size is `bytes`, whose asked column is `asked`, whose
 * used algorithm starts with `used` (NULL: any) and whose wrong column is 0; -1 if a row has wrong != 0. */
static int rows(const char *out, long bytes, const char *asked, const char *used) {
    int n = 0;
    const char *line = out;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        char buf[512];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = 0;
        long b;
        char algo[32], wrong[32], ask[32];
        double us;
        if (sscanf(buf, "%ld,%*[^,],%*[^,],%*[^,],%31[^,],%lf,%*[^,],%*[^,],%31[^,],%31s", &b, algo, &us, wrong, ask) == 5 &&
            b == bytes && !strcmp(ask, asked)) {
            if (strcmp(wrong, "0") != 0) return -1;
            if (us <= 0) return -1;
            if (!used || !strncmp(algo, used, strlen(used))) n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

TEST_T(bench_runs_a_list_of_algorithms_interleaved_with_medians, 120) {
    char cmd[2048];
    char *o = bench2("BATON_TUNING=off",
                     "--csv -b 8 -e 64K -f 64 -c 1 -w 1 -n 2 --min-time 0 --transport shm --algo auto,ring,rd --rounds 3", 90);
    ASSERT_CONTAINS(o, "size,count,type,op,algo,time_us,algbw_GBps,busbw_GBps,wrong,asked\n");
    const long sizes[] = {8, 512, 32768};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ_INT(rows(o, sizes[i], "auto", "direct"), 1); /* the fixed rule on shared memory */
        ASSERT_EQ_INT(rows(o, sizes[i], "ring", "ring"), 1);
        ASSERT_EQ_INT(rows(o, sizes[i], "rd", "rd"), 1);
    }
    free(o);
    /* one algorithm: the CSV keeps its usual columns */
    o = bench2("", "--csv -b 8 -e 8 -w 1 -n 1 --min-time 0 --rounds 2", 60);
    ASSERT_CONTAINS(o, "busbw_GBps,wrong\n");
    ASSERT_TRUE(strstr(o, "asked") == NULL);
    free(o);
    /* --sweeps: the size range three times over, one row per size and algorithm, printed after the last */
    o = bench2("", "--csv -b 8 -e 512 -f 64 -c 1 -w 1 -n 1 --min-time 0 --transport shm --algo ring,rd --sweeps 3", 60);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ_INT(rows(o, sizes[i], "ring", "ring"), 1);
        ASSERT_EQ_INT(rows(o, sizes[i], "rd", "rd"), 1);
    }
    free(o);
    /* bad lists, rounds and sweeps: one line naming the flag, exit 2, before joining any job */
    const char *bad[][2] = {{"--algo ring,ring", "--algo"}, {"--algo ring,warp", "--algo"}, {"--algo ,", "--algo"},
                            {"--algo auto,ring,rd,direct,hier", "--algo"}, {"--rounds 0", "--rounds"},
                            {"--rounds 100", "--rounds"}, {"--rounds x", "--rounds"}, {"--sweeps 0", "--sweeps"},
                            {"--sweeps 50 --rounds 2", "--sweeps"}, {"-b 1 -e 1G -f 1.01 --sweeps 2", "--sweeps"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *e = NULL;
        snprintf(cmd, sizeof cmd, "%s bench allreduce %s 2>&1", th_baton(), bad[i][0]);
        ASSERT_EQ_INT(th_run(cmd, 30, &e, NULL), 2);
        ASSERT_CONTAINS(e, bad[i][1]);
        free(e);
    }
}

/* When all three timed runs of a size come up short of --min-time (the pace sped up between them), the time
 * is the last run's over its own iteration count. The test knob is a fake clock: runs 1, 2, 3 count 10 ms,
 * 1 ms and 100 us per iteration: 1 iteration (10 ms, short), 3 (3 ms, short), 22 (2.2 ms, short), so
 * 100 us per iteration. Before the fix the row said 10 us: 2.2 ms over the 220 iterations planned for a
 * fourth run that never happens. */
TEST_T(bench_time_is_per_iteration_of_the_run_measured, 60) {
    char *o = bench2("BATON_TEST_BENCH_PACE_US=10000,1000,100", "--csv -b 8 -e 8 -w 0 -n 1 --min-time 0.02 --transport shm", 50);
    const char *row = strstr(o, "\n8,");
    ASSERT_TRUE(row != NULL);
    double us = 0;
    ASSERT_EQ_INT(sscanf(row + 1, "%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%lf", &us), 1);
    if (fabs(us - 100) > 0.01) th_fail(__FILE__, __LINE__, "time_us %.3f, expected 100: %s", us, o);
    free(o);
}

/* The cached calibration a job with XDG_RUNTIME_DIR=dir reads and writes. */
static char *cache_text(const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/baton/tuning.json", dir);
    return th_slurp(path, NULL);
}

TEST_T(first_use_calibrates_once_and_caches_privately, 240) {
    char dir[600], cmd[2048];
    snprintf(dir, sizeof dir, "%s/xdg", th_tmpdir());
    ASSERT_EQ_INT(mkdir(dir, 0700), 0);
    /* a symlink planted at the cache's name is replaced, never written through */
    char victim[700], link[700];
    snprintf(victim, sizeof victim, "%s/victim", th_tmpdir());
    snprintf(link, sizeof link, "%s/baton", dir);
    ASSERT_EQ_INT(mkdir(link, 0700), 0);
    snprintf(link, sizeof link, "%s/baton/tuning.json", dir);
    FILE *f = fopen(victim, "w");
    ASSERT_TRUE(f != NULL);
    fputs("not a calibration", f);
    fclose(f);
    ASSERT_EQ_INT(symlink(victim, link), 0);
    /* first use: no calibration for shm with 2 ranks, so it makes one; auto follows it, every element checked */
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s BATON_TUNING=calibrate %s run -n 2 -- %s bench allreduce --csv -b 8 -e 4096 -f 8 -c 1 "
             "-w 1 -n 1 --min-time 0 --transport shm 2>&1",
             dir, th_baton(), th_baton());
    char *o = must_run(cmd, 120);
    free(o);
    char *v = th_slurp(victim, NULL);
    ASSERT_STR_EQ(v, "not a calibration");
    free(v);
    struct stat st;
    ASSERT_EQ_INT(lstat(link, &st), 0);
    ASSERT_TRUE(S_ISREG(st.st_mode));
    ASSERT_EQ_INT((int)(st.st_mode & 0777), 0600);
    baton_tuning t;
    ASSERT_OK(baton__tuning_load(link, &t));
    double s;
    ASSERT_OK(baton__tuning_predict(&t, BATON_LINK_SHM, BATON_ALGO_DIRECT, 2, 1024, &s));
    ASSERT_OK(baton__tuning_predict(&t, BATON_LINK_SHM, BATON_ALGO_RING, 2, 1 << 20, &s));
    ASSERT_OK(baton__tuning_predict(&t, BATON_LINK_SHM, BATON_ALGO_RD, 2, 4, &s));
    ASSERT_TRUE(t.npoints >= 3 * 10);
    ASSERT_CONTAINS(t.about, "first use");
    baton__tuning_free(&t);
    /* second use: covered, so the cache is left as it is */
    char *before = cache_text(dir);
    o = must_run(cmd, 120);
    free(o);
    char *after = cache_text(dir);
    ASSERT_STR_EQ(before, after);
    free(after);
    /* tcp with 2 ranks is not covered: added, the shm points kept */
    snprintf(cmd, sizeof cmd,
             "XDG_RUNTIME_DIR=%s BATON_TUNING=calibrate %s run -n 2 -- %s bench allreduce --csv -b 8 -e 8 -c 1 -w 1 -n 1 "
             "--min-time 0 --transport tcp 2>&1",
             dir, th_baton(), th_baton());
    o = must_run(cmd, 120);
    free(o);
    ASSERT_OK(baton__tuning_load(link, &t));
    ASSERT_OK(baton__tuning_predict(&t, BATON_LINK_SHM, BATON_ALGO_DIRECT, 2, 1024, &s));
    ASSERT_OK(baton__tuning_predict(&t, BATON_LINK_TCP, BATON_ALGO_RING, 2, 1024, &s));
    baton__tuning_free(&t);
    free(before);
    /* without the knob nothing is measured or written: the cache stays, and a job without one makes none */
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/xdg2", th_tmpdir());
    ASSERT_EQ_INT(mkdir(dir2, 0700), 0);
    snprintf(cmd, sizeof cmd, "XDG_RUNTIME_DIR=%s %s run -n 2 -- %s bench allreduce -b 8 -e 8 -w 1 -n 1 --min-time 0 2>&1", dir2,
             th_baton(), th_baton());
    o = must_run(cmd, 60);
    free(o);
    snprintf(link, sizeof link, "%s/baton/tuning.json", dir2);
    ASSERT_TRUE(access(link, F_OK) != 0);
}

/* A calibration file FILE of two fitted lines for 2 ranks on TRANSPORT, every size: algorithm A predicted A_US
 * microseconds + PER_BYTE us a byte, B B_US + PER_BYTE. */
static const char *two_fits(const char *file, const char *transport, const char *a, double a_us, const char *b, double b_us,
                            double per_byte) {
    return th_write_tmp(file, "{\"version\":1,\"links\":[],\"fits\":["
               "{\"transport\":\"%s\",\"algo\":\"%s\",\"ranks\":2,\"lo\":4,\"hi\":1e9,\"a_us\":%g,\"b_us_per_byte\":%g},"
               "{\"transport\":\"%s\",\"algo\":\"%s\",\"ranks\":2,\"lo\":4,\"hi\":1e9,\"a_us\":%g,\"b_us_per_byte\":%g}"
               "],\"points\":[]}", transport, a, a_us, per_byte, transport, b, b_us, per_byte);
}

/* tcp, 2 ranks: rd predicted 10 us + 0.5 ns/B, ring 5 % slower, so the model alone takes rd everywhere */
static const char *close_tuning(void) { return two_fits("close.json", "tcp", "rd", 10, "ring", 10.5, 0.0005); }

/* The algo column (rank 0's algorithm) of a bench following TUNING over TRANSPORT, sizes 8 B to 32 KiB (x64), every
 * element checked, WARMUP untimed calls per size so that a size's probe calls are over before the timed one
 * (close_tuning: a lead-in and 2 candidates x 3 blocks x 16 calls; state_tuning: a lead-in and 2 candidates x 3
 * blocks x 1 call at its predicted times, after the state check's first call). */
static void auto_algos(const char *tuning, const char *transport, int warmup, const char *env, char *out, size_t n) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "BATON_TUNING=%s %s %s run -n 2 -- %s bench allreduce --csv --algo auto,ring -b 8 -e 32K -f 64 -c 1 -w %d -n 1 "
             "--min-time 0 --transport %s 2>&1",
             tuning, env, th_baton(), th_baton(), warmup, transport);
    char *o = must_run(cmd, 60);
    out[0] = 0;
    const long sizes[] = {8, 512, 32768};
    for (int i = 0; i < 3; i++) {
        const char *algo = rows(o, sizes[i], "auto", "direct") == 1 ? "direct"
                           : rows(o, sizes[i], "auto", "ring") == 1 ? "ring"
                           : rows(o, sizes[i], "auto", "rd") == 1   ? "rd"
                                                                    : "?";
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "," : "", algo);
    }
    free(o);
}
static void close_algos(const char *env, char *out, size_t n) { auto_algos(close_tuning(), "tcp", 100, env, out, n); }

/* Where the calibration predicts two algorithms within BATON_TUNING_PROBE (here 25 %; off by default) of each other, auto
 * times both on the size's first calls and every rank takes the one the fastest rank's time of each call favours
 * (the rank that entered last: no waiting for the others' arrival in it). The test knob takes 100 ms off every
 * probe call of ring on rank 1 only: rank 0's own clock favours rd (rd is the model's choice, and over TCP the
 * faster one at these sizes), so rank 0 reporting ring shows it took rank 1's measurement (the agreement); a
 * rank choosing alone would run rd on rank 0 and ring on rank 1 and the job would fail its checks or hang. */
TEST_T(auto_confirms_close_candidates_online_and_every_rank_agrees, 150) {
    char algos[64];
    close_algos("BATON_TUNING_PROBE=0.25 BATON_TEST_TUNE_PROBE=1:ring:-100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "ring,ring,ring");
    /* ring slowed on every rank: rd */
    close_algos("BATON_TUNING_PROBE=0.25 BATON_TEST_TUNE_PROBE=-1:ring:100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "rd,rd,rd");
    /* a slowdown on one rank's clock alone is not the call's time (the other rank's is): rd. Ring is slowed on
     * every rank by half as much, so the choice does not hang on the two algorithms' real times (rd's counts
     * rank 0's clock only, with its wait for rank 1's arrival, against the faster rank's for ring: that picked
     * ring at 32 KiB about once in 25 runs): taking rank 1's slowed rd time (the slowest rank's) would pick ring */
    close_algos("BATON_TUNING_PROBE=0.25 BATON_TEST_TUNE_PROBE=1:rd:100000,-1:ring:50000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "rd,rd,rd");
    /* ranks that take turns to wait: rd's calls slowed by 100 ms on rank 0's even calls and rank 1's odd ones. Every
     * call has one rank that was not slowed, but every rank's run of rd calls is half slowed, as a loop of them
     * would be: ring. Taking each call's time on its fastest rank (until 2026-11-27) saw no slowdown and kept rd. */
    close_algos("BATON_TUNING_PROBE=0.25 BATON_TEST_TUNE_PROBE=0:rd:100000:even,1:rd:100000:odd", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "ring,ring,ring");
    /* no confirmation: by default over tcp (off there; on shared memory with 2 ranks, below), off, or a margin
     * below the 5 % between the two: the model's choice stands */
    close_algos("BATON_TEST_TUNE_PROBE=1:ring:-100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "rd,rd,rd");
    close_algos("BATON_TUNING_PROBE=off BATON_TEST_TUNE_PROBE=1:ring:-100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "rd,rd,rd");
    close_algos("BATON_TUNING_PROBE=0.01 BATON_TEST_TUNE_PROBE=1:ring:-100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "rd,rd,rd");
    /* a bad setting: one line naming it, a non-zero exit */
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd, "BATON_TUNING=%s BATON_TUNING_PROBE=2 %s run -n 2 -- %s bench allreduce -b 8 -e 8 --transport tcp 2>&1",
             close_tuning(), th_baton(), th_baton());
    ASSERT_TRUE(th_run(cmd, 60, &o, NULL) != 0);
    ASSERT_CONTAINS(o, "BATON_TUNING_PROBE=2");
    free(o);
}

/* shm, 2 ranks: direct predicted 10 us + 0.5 ns/B, ring 5 % slower: the model alone takes direct everywhere. */
static const char *close_shm_tuning(void) { return two_fits("close_shm.json", "shm", "direct", 10, "ring", 10.5, 0.0005); }

/* By default (BATON_TUNING_PROBE unset or auto) auto times close candidates on shared memory with 2 ranks (docs/plan.md:
 * there the calibration's order did not hold from job to job), and not over tcp (the close test above). The state
 * check is off here: the synthetic times are not this machine's, and it would time every candidate anyway. With
 * ring's probe calls made 100 ms faster: ring by default and with auto, the model's direct with off. */
TEST_T(auto_times_close_candidates_by_default_on_shm_with_2_ranks, 150) {
    char algos[64];
    auto_algos(close_shm_tuning(), "shm", 100, "BATON_TUNING_STATE=off BATON_TEST_TUNE_PROBE=-1:ring:-100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "ring,ring,ring");
    auto_algos(close_shm_tuning(), "shm", 100, "BATON_TUNING_STATE=off BATON_TUNING_PROBE=auto BATON_TEST_TUNE_PROBE=-1:ring:-100000",
               algos, sizeof algos);
    ASSERT_STR_EQ(algos, "ring,ring,ring");
    auto_algos(close_shm_tuning(), "shm", 100, "BATON_TUNING_STATE=off BATON_TUNING_PROBE=off BATON_TEST_TUNE_PROBE=-1:ring:-100000",
               algos, sizeof algos);
    ASSERT_STR_EQ(algos, "direct,direct,direct");
}

/* shm, 2 ranks: direct predicted 20 ms a call, ring 20.5: long calls (a probe block of one call), close. */
static const char *long_shm_tuning(void) { return two_fits("long_shm.json", "shm", "direct", 20000, "ring", 20500, 0); }

/* How many times rank 0 logged a probe's decision for BYTES (BATON_LOG_LEVEL=debug). */
static int decisions(const char *out, long bytes) {
    char key[64];
    snprintf(key, sizeof key, "[rank 0] debug: --algo auto, %ld bytes:", bytes);
    int n = 0;
    for (const char *p = strstr(out, key); p; p = strstr(p + 1, key)) n++;
    return n;
}

/* A size is chosen (and probed) once per job, whatever other sizes come between its calls: baton bench runs an
 * 8-byte all-reduce (the slowest rank's time) after every timed run, and 8 bytes and 128 KiB shared a slot of
 * the directly mapped cache, so every sweep of 128 KiB chose it again and probed it again (3 sweeps: 3
 * decisions; now 1). */
TEST_T(auto_chooses_each_size_once_when_sizes_share_a_cache_slot, 90) {
    char env[1024];
    snprintf(env, sizeof env, "BATON_TUNING=%s BATON_TUNING_PROBE=0.25 BATON_LOG_LEVEL=debug", close_tuning());
    char *o = bench2(env, "--csv --transport tcp --algo auto --sweeps 3 -b 128K -e 128K -c 1 -w 100 -n 1 --min-time 0", 60);
    ASSERT_CONTAINS(o, "131072,32768,f32,sum,");
    ASSERT_EQ_INT(decisions(o, 131072), 1);
    free(o);
}

/* Where calls are long (predicted 6.7 ms or more: one call a block), the first such size's probe decides for the
 * job's later long sizes: the job's mode orders direct and ring alike at every size from 32 MiB
 * (docs/measurements/plan-history.md, "How the candidates are timed: blocks, medians, mapped pages"),
 * and there the probe's calls cost the most. Sizes 8 B, 512 B and 32 KiB predicted 20 ms each: one decision (8 B,
 * ring, its probe calls made 100 ms faster), and ring at all three. */
TEST_T(auto_probes_long_calls_once_per_job, 90) {
    char env[1024];
    snprintf(env, sizeof env, "BATON_TUNING=%s BATON_TUNING_STATE=off BATON_LOG_LEVEL=debug BATON_TEST_TUNE_PROBE=-1:ring:-100000",
             long_shm_tuning());
    char *o = bench2(env, "--csv --transport shm --algo auto,ring -b 8 -e 32K -f 64 -c 1 -w 20 -n 1 --min-time 0", 60);
    ASSERT_EQ_INT(decisions(o, 8), 1);
    ASSERT_EQ_INT(decisions(o, 512), 0);
    ASSERT_EQ_INT(decisions(o, 32768), 0);
    const long sizes[] = {8, 512, 32768};
    for (int i = 0; i < 3; i++) ASSERT_EQ_INT(rows(o, sizes[i], "auto", "ring"), 1);
    free(o);
}

/* shm, 2 ranks: direct predicted 20 ms + 0.1 ns/B everywhere, ring 1.5x and rd 2x that: far apart, so no probe
 * margin would time them; the model alone takes direct at every size. 20 ms: far above what an 8-byte all-reduce
 * takes on a loaded machine, so only the test knob's marker decides the state. */
static const char *state_tuning(void) {
    return th_write_tmp("state.json", "{\"version\":1,\"links\":[],\"fits\":["
               "{\"transport\":\"shm\",\"algo\":\"direct\",\"ranks\":2,\"lo\":4,\"hi\":1e9,\"a_us\":20000,\"b_us_per_byte\":0.0001},"
               "{\"transport\":\"shm\",\"algo\":\"ring\",\"ranks\":2,\"lo\":4,\"hi\":1e9,\"a_us\":30000,\"b_us_per_byte\":0.0001},"
               "{\"transport\":\"shm\",\"algo\":\"rd\",\"ranks\":2,\"lo\":4,\"hi\":1e9,\"a_us\":40000,\"b_us_per_byte\":0.0001}"
               "],\"points\":[]}");
}

static void state_algos(const char *env, char *out, size_t n) { auto_algos(state_tuning(), "shm", 20, env, out, n); }

/* After the first auto all-reduce, every rank times 8-byte direct all-reduces and all take the slowest rank's
 * median; outside 1.6x of the calibration's prediction for it (the machine in another state than when it was
 * calibrated), every size's first calls time every candidate. The state knob sets rank 1's marker; the probe
 * knob adds 100 ms to every rank's timed probe calls of direct. Same state (rank 1 at the predicted 20 ms; rank 0's
 * own marker, microseconds, would say "another state" alone, so direct at every size also shows
 * the agreement): the model's direct. Another state (200 ms): direct is timed and, slowed, left for ring or
 * rd at every size, though the model predicts those 1.5-2x slower; the same with BATON_TUNING_STATE=auto (the default,
 * on for 2 ranks) and =on. BATON_TUNING_STATE=off: the model alone. */
TEST_T(auto_times_every_candidate_when_the_machine_left_the_calibrations_state, 150) {
    char algos[64];
    state_algos("BATON_TEST_TUNE_STATE=1:20000 BATON_TEST_TUNE_PROBE=-1:direct:100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "direct,direct,direct");
    state_algos("BATON_TEST_TUNE_STATE=1:200000 BATON_TEST_TUNE_PROBE=-1:direct:100000", algos, sizeof algos);
    ASSERT_TRUE(strstr(algos, "direct") == NULL && strstr(algos, "?") == NULL);
    state_algos("BATON_TUNING_STATE=auto BATON_TEST_TUNE_STATE=1:200000 BATON_TEST_TUNE_PROBE=-1:direct:100000", algos, sizeof algos);
    ASSERT_TRUE(strstr(algos, "direct") == NULL && strstr(algos, "?") == NULL); /* auto: on for 2 ranks */
    state_algos("BATON_TUNING_STATE=on BATON_TEST_TUNE_STATE=1:200000 BATON_TEST_TUNE_PROBE=-1:direct:100000", algos, sizeof algos);
    ASSERT_TRUE(strstr(algos, "direct") == NULL && strstr(algos, "?") == NULL);
    state_algos("BATON_TUNING_STATE=off BATON_TEST_TUNE_STATE=1:200000 BATON_TEST_TUNE_PROBE=-1:direct:100000", algos, sizeof algos);
    ASSERT_STR_EQ(algos, "direct,direct,direct");
    /* a bad setting: one line naming it, a non-zero exit */
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd, "BATON_TUNING=%s BATON_TUNING_STATE=maybe %s run -n 2 -- %s bench allreduce -b 8 -e 8 --transport shm 2>&1",
             state_tuning(), th_baton(), th_baton());
    ASSERT_TRUE(th_run(cmd, 60, &o, NULL) != 0);
    ASSERT_CONTAINS(o, "BATON_TUNING_STATE=maybe");
    free(o);
}
