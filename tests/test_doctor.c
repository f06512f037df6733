/* test_doctor.c: `baton doctor` reads one job at a time and stays bounded on hostile dumps; the flight
 * recorder keeps the dumps of the newest jobs only; inputs that are FIFOs are refused instead of blocking. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "baton/comm.h"
#include "comm/flight.h"
#include "ckpt/safetensors.h"
#include "harness.h"
#include "util/files.h"

static const char *path_in(const char *name) {
    static char p[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", th_tmpdir(), name);
    return p[k];
}

/* Writes a dump of `job` for `rank`, its entries given as "seq:count" pairs, with mtime `age_s` in the past. */
static void write_dump(const char *job, int rank, long long world, const char *entries_json, int age_s) {
    char name[256], text[8192];
    snprintf(name, sizeof name, "baton-flight-%s-rank%d.json", job, rank);
    snprintf(text, sizeof text, "{\"version\":1,\"rank\":%d,\"world\":%lld,\"job\":\"%s\",\"error\":\"e%d\",\"entries\":[%s]}",
             rank, world, job, rank, entries_json);
    FILE *f = fopen(path_in(name), "w");
    ASSERT_TRUE(f != NULL);
    fputs(text, f);
    fclose(f);
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= age_s;
    tv[1] = tv[0];
    ASSERT_TRUE(utimes(path_in(name), tv) == 0);
}

static const char *E(long long seq, int count) {
    static char b[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(b[k], sizeof b[k],
             "{\"seq\":%lld,\"coll\":\"allreduce\",\"count\":%d,\"dtype\":\"f32\",\"op\":\"sum\",\"root\":0,"
             "\"algo\":\"direct\",\"state\":\"done\",\"start_us\":1,\"end_us\":2}",
             seq, count);
    return b[k];
}

static char *doctor(const char *args, int *rc) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "BATON_FLIGHT_DIR=%s %s doctor %s", th_tmpdir(), th_baton(), args);
    *rc = th_run(cmd, 30, &out, NULL);
    return out;
}

TEST(doctor_diagnoses_the_newest_job_and_lists_the_others) {
    char e[1024];
    /* old job: ranks agree; new job: rank 1 ran a different count at #2 */
    snprintf(e, sizeof e, "%s,%s", E(1, 10), E(2, 10));
    write_dump("0ld", 0, 2, e, 3600);
    write_dump("0ld", 1, 2, e, 3600);
    write_dump("11e", 0, 2, e, 10);
    snprintf(e, sizeof e, "%s,%s", E(1, 10), E(2, 20));
    write_dump("11e", 1, 2, e, 10);
    int rc;
    char *out = doctor("", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "dumps of 2 jobs; diagnosing the newest job 11e");
    ASSERT_CONTAINS(out, "job 11e: 2 dump(s), world size 2");
    ASSERT_CONTAINS(out, "DIVERGED at collective #2");
    free(out);
    out = doctor("--job 0ld", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "job 0ld: 2 dump(s)");
    ASSERT_CONTAINS(out, "no divergence and no lag");
    free(out);
    out = doctor("--list", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "0ld");
    ASSERT_CONTAINS(out, "11e");
    free(out);
    out = doctor("--job nope", &rc);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "no dumps of job 'nope'");
    free(out);
}

TEST(doctor_is_bounded_on_hostile_dumps) {
    int rc;
    char e[1024], *out;
    /* sequence numbers that jump to 1e18: visited as recorded, not counted through */
    snprintf(e, sizeof e, "%s,%s", E(1, 10), E(1000000000000000000LL, 10));
    write_dump("5ee", 0, 2, e, 0);
    snprintf(e, sizeof e, "%s,%s", E(1, 10), E(2, 10));
    write_dump("5ee", 1, 2, e, 0);
    out = doctor("", &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "LAGGED: rank 1");
    free(out);
    /* an absurd world size is refused, not allocated */
    write_dump("b1g", 0, 2000000000LL, E(1, 1), 0);
    char args[700];
    snprintf(args, sizeof args, "%s", path_in("baton-flight-b1g-rank0.json"));
    out = doctor(args, &rc);
    ASSERT_EQ_INT(rc, 2);
    ASSERT_CONTAINS(out, "world must be 1 to");
    free(out);
    /* 400,000 entries: sorted once, not searched quadratically (this took over 20 s before) */
    FILE *f = fopen(path_in("baton-flight-1a7-rank0.json"), "w");
    ASSERT_TRUE(f != NULL);
    fputs("{\"rank\":0,\"world\":2,\"job\":\"1a7\",\"entries\":[", f);
    for (int i = 1; i <= 400000; i++) fprintf(f, "%s{\"seq\":%d,\"count\":1,\"root\":0}", i > 1 ? "," : "", i);
    fputs("]}", f);
    fclose(f);
    snprintf(args, sizeof args, "%s %s", path_in("baton-flight-1a7-rank0.json"), path_in("baton-flight-1a7-rank0.json"));
    out = doctor(args, &rc);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_CONTAINS(out, "job 1a7: 1 dump(s)");
    free(out);
}

TEST(flight_recorder_keeps_the_newest_jobs_only) {
    setenv("BATON_FLIGHT_DIR", th_tmpdir(), 1);
    baton_flight f;
    memset(&f, 0, sizeof f);
    char path[1024], job[32];
    for (int j = 0; j < BATON_FLIGHT_KEEP_JOBS + 4; j++) {
        snprintf(job, sizeof job, "a%02d", j);
        for (int r = 0; r < 2; r++) ASSERT_OK(baton__flight_dump(&f, r, 2, job, "x", path, sizeof path));
        struct timeval tv[2]; /* make the order of the jobs unambiguous whatever the file system's clock */
        gettimeofday(&tv[0], NULL);
        tv[0].tv_sec -= 1000 - j;
        tv[1] = tv[0];
        for (int r = 0; r < 2; r++) {
            char p[700];
            snprintf(p, sizeof p, "%s/baton-flight-%s-rank%d.json", th_tmpdir(), job, r);
            utimes(p, tv);
        }
    }
    char cmd[700], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^baton-flight-'; ls %s", th_tmpdir(), th_tmpdir());
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_EQ_INT(atoi(out), 2 * BATON_FLIGHT_KEEP_JOBS);
    ASSERT_TRUE(!strstr(out, "-a00-") && !strstr(out, "-a03-"));
    ASSERT_CONTAINS(out, "baton-flight-a11-rank1.json");
    ASSERT_CONTAINS(out, "baton-flight-a04-rank0.json");
    free(out);
}

TEST(fifo_in_place_of_a_file_is_refused_not_waited_on) {
    const char *p = path_in("fifo");
    ASSERT_TRUE(mkfifo(p, 0600) == 0);
    void *buf = NULL;
    size_t len = 0;
    ASSERT_EQ_INT(baton__read_file(p, 1 << 20, &buf, &len), BATON_EIO);
    ASSERT_CONTAINS(baton_last_error(), "not a regular file");
    baton_st_file *st = NULL;
    ASSERT_TRUE(baton_st_open(&st, p) < 0);
    ASSERT_CONTAINS(baton_last_error(), "not a regular file");
}

TEST_T(resume_with_a_fifo_for_a_checkpoint_file_does_not_hang, 120) {
    char cmd[4096], *out = NULL;
    const char *ck = path_in("ck");
    snprintf(cmd, sizeof cmd,
             "export OPENBLAS_NUM_THREADS=1; B=%s; D=%s; "
             "$B train --data synthetic --train-samples 256 --hidden 16 --batch 32 --threads 1 --steps 4 "
             "--checkpoint $D --checkpoint-every 2 >/dev/null 2>&1 || exit 90; "
             "for f in COMMIT model.safetensors; do rm -f $D/step-4/$f; mkfifo $D/step-4/$f; done; "
             "$B train --data synthetic --train-samples 256 --hidden 16 --batch 32 --threads 1 --steps 4 "
             "--checkpoint $D --resume 2>&1",
             th_baton(), ck);
    int rc = th_run(cmd, 60, &out, NULL);
    if (rc == 124 || rc == 90) fprintf(stderr, "%s\n", out);
    ASSERT_NE_INT(rc, 124); /* did not block on the FIFO */
    ASSERT_NE_INT(rc, 90);
    /* the damaged newest checkpoint is passed over (step 2 is resumed) or refused with a message */
    ASSERT_TRUE(strstr(out, "step 2") || strstr(out, "not a regular file"));
    free(out);
}
