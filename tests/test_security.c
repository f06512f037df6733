/* test_security.c: the files baton creates cannot be turned against the user by another local user.
 *
 * The attacks are replayed as they were found, by a second user (`nobody`, uid 65534, entered with
 * setuid in a forked child; the tests run as root) in a world-writable sticky directory standing in
 * for /tmp:
 *   - a symlink planted at a flight-recorder dump's predictable name must not make the dump overwrite
 *     the symlink's target;
 *   - the store hand-off file (port and HMAC secret of a launcher-less job) must not be readable through
 *     a file or hard link planted at its predictable temporary name;
 *   - baton's private directory, planted beforehand by the other user, is refused, not used. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton/comm.h"
#include "comm/flight.h"
#include "harness.h"

enum { NOBODY = 65534 };

/* Runs fn(arg) as `nobody` in a forked child; returns its exit code (0 = fn returned 0). */
static int as_nobody(int (*fn)(const void *), const void *arg) {
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0) _exit(99);
        _exit(fn(arg) ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 98;
}

/* A directory like /tmp (world-writable, sticky) inside the test's own temporary directory. */
static const char *shared_tmp(void) {
    static char d[512];
    ASSERT_TRUE(chmod(th_tmpdir(), 0711) == 0); /* nobody may pass through, not list */
    snprintf(d, sizeof d, "%s/shared", th_tmpdir());
    ASSERT_TRUE(mkdir(d, 0777) == 0 && chmod(d, 01777) == 0);
    return d;
}

static void write_text(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ_INT(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
}

static char *read_text(const char *path) {
    static char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void one_entry(baton_flight *f) {
    memset(f, 0, sizeof *f);
    baton_coll_desc d = {.seq = 1, .kind = 0, .count = 10, .dtype = BATON_F32, .op = BATON_SUM};
    baton__flight_start(f, &d, 1);
}

/* ---- flight-recorder dumps ---------------------------------------------------------------------------- */

typedef struct {
    const char *dir, *victim;
    int pid;
} plant_args;

static int plant_dump_links(const void *p) {
    const plant_args *a = p;
    char name[1024];
    const char *suffixes[] = {"", ".tmp", ".%d.tmp"};
    for (int i = 0; i < 3; i++) {
        char suf[64];
        snprintf(suf, sizeof suf, suffixes[i], a->pid);
        snprintf(name, sizeof name, "%s/baton-flight-job7-rank0.json%s", a->dir, suf);
        if (symlink(a->victim, name) != 0) return 1;
    }
    return 0;
}

TEST(flight_dump_does_not_write_through_a_planted_symlink) {
    const char *shared = shared_tmp();
    char victim[600], path[1024];
    snprintf(victim, sizeof victim, "%s/victim", th_tmpdir());
    write_text(victim, "precious", 0600);
    plant_args a = {shared, victim, (int)getpid()};
    ASSERT_EQ_INT(as_nobody(plant_dump_links, &a), 0);
    setenv("BATON_FLIGHT_DIR", shared, 1);
    baton_flight f;
    one_entry(&f);
    int rc = baton__flight_dump(&f, 0, 2, "job7", "boom", path, sizeof path);
    ASSERT_STR_EQ(read_text(victim), "precious");
    ASSERT_OK(rc);
    struct stat st;
    ASSERT_TRUE(lstat(path, &st) == 0);
    ASSERT_TRUE(S_ISREG(st.st_mode)); /* the dump replaced the planted link; it did not follow it */
    ASSERT_EQ_INT(st.st_mode & 0777, 0600);
    ASSERT_EQ_INT(st.st_uid, getuid());
}

static int try_read(const void *p) { return read_text(p) != NULL; } /* 0 = could not read */

TEST(flight_dump_goes_to_a_private_directory_by_default) {
    const char *shared = shared_tmp();
    unsetenv("BATON_FLIGHT_DIR");
    unsetenv("XDG_RUNTIME_DIR");
    setenv("TMPDIR", shared, 1);
    baton_flight f;
    one_entry(&f);
    char path[1024], want[600];
    ASSERT_OK(baton__flight_dump(&f, 1, 2, "job/../8", "boom", path, sizeof path));
    snprintf(want, sizeof want, "%s/baton-%u/baton-flight-job_.._8-rank1.json", shared, (unsigned)getuid());
    ASSERT_STR_EQ(path, want); /* the job id cannot steer the name out of the directory */
    struct stat st;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/baton-%u", shared, (unsigned)getuid());
    ASSERT_TRUE(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    ASSERT_EQ_INT(st.st_mode & 0777, 0700);
    ASSERT_TRUE(lstat(path, &st) == 0);
    ASSERT_EQ_INT(st.st_mode & 0777, 0600);
    ASSERT_EQ_INT(as_nobody(try_read, path), 0);
    ASSERT_TRUE(read_text(path) && strstr(read_text(path), "\"error\""));
}

static int plant_dir(const void *p) { return mkdir(p, 0777) != 0 || chmod(p, 0777) != 0; }
static int plant_dir_link(const void *p) {
    char target[600];
    snprintf(target, sizeof target, "%s-mine", (const char *)p);
    return mkdir(target, 0777) != 0 || chmod(target, 0777) != 0 || symlink(target, p) != 0;
}

static void expect_planted_dir_refused(int (*plant)(const void *), const char *what) {
    const char *shared = shared_tmp();
    char dir[600], path[1024];
    snprintf(dir, sizeof dir, "%s/baton-%u", shared, (unsigned)getuid());
    ASSERT_EQ_INT(as_nobody(plant, dir), 0);
    unsetenv("BATON_FLIGHT_DIR");
    unsetenv("XDG_RUNTIME_DIR");
    setenv("TMPDIR", shared, 1);
    baton_flight f;
    one_entry(&f);
    int rc = baton__flight_dump(&f, 0, 2, "job9", "boom", path, sizeof path);
    ASSERT_EQ_INT(rc, BATON_ESYS);
    ASSERT_CONTAINS(baton_last_error(), dir);
    ASSERT_CONTAINS(baton_last_error(), what);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "find -L '%s' -type f | wc -l", dir);
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_EQ_INT(atoi(out), 0); /* nothing was written into the other user's directory */
    free(out);
}

TEST(private_directory_planted_by_another_user_is_refused) {
    expect_planted_dir_refused(plant_dir, "belongs to uid 65534");
}

TEST(private_directory_planted_as_a_symlink_is_refused) { expect_planted_dir_refused(plant_dir_link, "symlink"); }

/* ---- the store hand-off file of a launcher-less job ------------------------------------------------------- */

typedef struct {
    char names[2][1024]; /* planted at the temporary names the writer used before the fix: /tmp and TMPDIR */
    char links[2][1024];
} handoff_plant;

static int plant_handoff(const void *p) {
    const handoff_plant *h = p;
    for (int i = 0; i < 2; i++) {
        int fd = open(h->names[i], O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0) return 1;
        fchmod(fd, 0666);
        close(fd);
        if (link(h->names[i], h->links[i]) != 0) return 1;
    }
    return 0;
}

static int read_planted(const void *p) {
    const handoff_plant *h = p;
    for (int i = 0; i < 2; i++) {
        const char *t = read_text(h->links[i]);
        if (t && *t) return 1; /* the other user got something: the port and the secret */
    }
    return 0;
}

TEST_T(store_handoff_secret_is_not_readable_by_another_user, 60) {
    const char *shared = shared_tmp();
    int port = th_free_port();
    ASSERT_TRUE(port > 0);
    char env_common[1024];
    snprintf(env_common, sizeof env_common, "%d", port);
    int go[2];
    ASSERT_TRUE(pipe(go) == 0);
    pid_t r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = fork();
        if (r[i] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) != 1) _exit(97);
            char rank[8];
            snprintf(rank, sizeof rank, "%d", i);
            unsetenv("BATON_SECRET");
            unsetenv("BATON_STORE_ADDR");
            unsetenv("XDG_RUNTIME_DIR");
            setenv("TMPDIR", shared, 1);
            setenv("RANK", rank, 1);
            setenv("WORLD_SIZE", "2", 1);
            setenv("LOCAL_WORLD_SIZE", "2", 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", env_common, 1);
            setenv("BATON_JOB_ID", "5ec1", 1);
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            char prog[600];
            snprintf(prog, sizeof prog, "%s/tests/prog_coll", th_build_dir());
            execl(prog, prog, "--colls", "allreduce", "--counts", "13", "--dtypes", "f32", "--ops", "sum", (char *)NULL);
            _exit(127);
        }
    }
    close(go[0]);
    /* The names the hand-off was written under before the fix: /tmp/baton-<uid>-<key>.store.<pid>.tmp. */
    handoff_plant h;
    const char *bases[2] = {"/tmp", shared};
    for (int i = 0; i < 2; i++) {
        snprintf(h.names[i], sizeof h.names[i], "%s/baton-%u-j5ec1.store.%d.tmp", bases[i], (unsigned)getuid(), (int)r[0]);
        snprintf(h.links[i], sizeof h.links[i], "%s/stolen-%d-%d", shared, i, (int)r[0]);
    }
    int planted = as_nobody(plant_handoff, &h);
    ASSERT_TRUE(write(go[1], "gg", 2) == 2);
    close(go[1]);
    int st[2];
    for (int i = 0; i < 2; i++) { /* bounded: a rank that hangs is killed and fails the test below */
        int done = 0;
        for (int k = 0; k < 300 && !(done = waitpid(r[i], &st[i], WNOHANG) == r[i]); k++) usleep(100000);
        if (!done) {
            kill(r[i], SIGKILL);
            waitpid(r[i], &st[i], 0);
        }
    }
    int leaked = as_nobody(read_planted, &h);
    unlink(h.names[0]); /* the one in the real /tmp */
    ASSERT_EQ_INT(planted, 0);
    ASSERT_EQ_INT(leaked, 0);
    for (int i = 0; i < 2; i++) ASSERT_TRUE(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0);
    /* the hand-off file is gone once every rank joined; the private directory stays private */
    char dir[600], cmd[1024], *out = NULL;
    snprintf(dir, sizeof dir, "%s/baton-%u", shared, (unsigned)getuid());
    struct stat sd;
    ASSERT_TRUE(lstat(dir, &sd) == 0 && (sd.st_mode & 0777) == 0700);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_EQ_INT(atoi(out), 0);
    free(out);
}

TEST_T(store_handoff_refuses_a_planted_private_directory, 60) {
    const char *shared = shared_tmp();
    char dir[600], cmd[2048], *out = NULL;
    snprintf(dir, sizeof dir, "%s/baton-%u", shared, (unsigned)getuid());
    ASSERT_EQ_INT(as_nobody(plant_dir, dir), 0);
    int port = th_free_port();
    snprintf(cmd, sizeof cmd,
             "unset BATON_SECRET BATON_STORE_ADDR XDG_RUNTIME_DIR; export TMPDIR=%s RANK=0 WORLD_SIZE=2 "
             "LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d BATON_JOB_ID=5ec2 BATON_JOIN_TIMEOUT=5; "
             "%s/tests/prog_coll --colls allreduce --counts 13 --dtypes f32 --ops sum",
             shared, port, th_build_dir());
    int rc = th_run(cmd, 30, &out, NULL);
    ASSERT_NE_INT(rc, 0);
    ASSERT_CONTAINS(out, "belongs to uid 65534");
    free(out);
    snprintf(cmd, sizeof cmd, "find '%s' -type f | wc -l", dir);
    ASSERT_EQ_INT(th_run(cmd, 10, &out, NULL), 0);
    ASSERT_EQ_INT(atoi(out), 0);
    free(out);
}

/* ---- outputs the user names, in a shared directory --------------------------------------------------- */

static int plant_link(const void *p) {
    const plant_args *a = p;
    char name[1024];
    snprintf(name, sizeof name, "%s/trace.json", a->dir);
    if (symlink(a->victim, name) != 0) return 1;
    snprintf(name, sizeof name, "%s/trace.json.tmp", a->dir);
    return symlink(a->victim, name) != 0;
}

TEST_T(trace_output_does_not_write_through_a_planted_symlink, 60) {
    const char *shared = shared_tmp();
    char victim[600], cmd[2048], *out = NULL, trace[700];
    snprintf(victim, sizeof victim, "%s/victim", th_tmpdir());
    write_text(victim, "precious", 0600);
    plant_args a = {shared, victim, 0};
    ASSERT_EQ_INT(as_nobody(plant_link, &a), 0);
    snprintf(trace, sizeof trace, "%s/trace.json", shared);
    snprintf(cmd, sizeof cmd,
             "OPENBLAS_NUM_THREADS=1 %s run -n 2 -- %s train --data synthetic --train-samples 256 --hidden 16 "
             "--batch 32 --threads 1 --steps 2 --trace %s 2>&1",
             th_baton(), th_baton(), trace);
    int rc = th_run(cmd, 50, &out, NULL);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_STR_EQ(read_text(victim), "precious");
    struct stat st;
    ASSERT_TRUE(lstat(trace, &st) == 0 && S_ISREG(st.st_mode));
    free(out);
}
