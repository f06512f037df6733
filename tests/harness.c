/* harness.c: runs each registered test in a forked child with a hard timeout and reports the totals. */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton/status.h"

enum { MAX_TESTS = 512 };
static struct {
    const char *name;
    void (*fn)(void);
    int timeout_s;
} tests[MAX_TESTS];
static int ntests;
static char tmpdir[256];

void th_register(const char *name, void (*fn)(void), int timeout_s) {
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        exit(2);
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    tests[ntests].timeout_s = timeout_s;
    ntests++;
}

void th_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "    %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

const char *th_errdetail(void) { return baton_last_error(); }

const char *th_build_dir(void) {
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

const char *th_baton(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/baton", th_build_dir());
    return path;
}

const char *th_tmpdir(void) {
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/baton-test-XXXXXX");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            _exit(1);
        }
    }
    return tmpdir;
}

int th_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double th_timeout_scale(void) {
    const char *s = getenv("TH_TIMEOUT_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 0 ? v : 1.0;
}

int th_run(const char *cmd, double timeout_s, char **out, double *elapsed_s) {
    int pfd[2];
    if (pipe(pfd) != 0) return 125;
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) return 125;
    if (pid == 0) {
        setpgid(0, 0);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(pfd[1]);
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    int status = 0, done = 0, eof = 0, timed_out = 0;
    double limit = timeout_s * th_timeout_scale();
    for (;;) {
        for (;;) {
            char tmp[65536];
            ssize_t r = read(pfd[0], tmp, sizeof tmp);
            if (r > 0) {
                size_t take = (size_t)r < cap - len ? (size_t)r : cap - len;
                if (buf) memcpy(buf + len, tmp, take);
                len += take;
                continue;
            }
            if (r == 0) eof = 1;
            break;
        }
        if (!done && waitpid(pid, &status, WNOHANG) == pid) done = 1;
        if (done && eof) break;
        if (now_s() - t0 > limit) {
            /* a leader still running is a timeout; one that exited but left children holding the
             * pipe open is not, its children are killed below */
            kill(-pid, SIGKILL);
            if (!done) {
                waitpid(pid, &status, 0);
                timed_out = 1;
            }
            break;
        }
        usleep(2000);
    }
    kill(-pid, SIGKILL); /* leftovers of the group, if any */
    close(pfd[0]);
    if (buf) buf[len] = '\0';
    if (out) *out = buf; else free(buf);
    if (elapsed_s) *elapsed_s = now_s() - t0;
    if (timed_out) return 124;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 125;
}

static void rm_rf(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", dir);
}

/* Kills whatever a test left running, wherever it sits: th_run puts each command in a process group of its own
 * and `baton run` its workers in another, so the test's group alone does not hold them, and a test killed at
 * its time limit never reaches th_run's own clean-up. The runner is a child subreaper (main), so every orphan
 * of a test is reparented to it: each pass kills and reaps its children, whose own children then come to it
 * for the next pass. Bounded in passes. */
static void kill_descendants(void) {
    for (int pass = 0; pass < 50; pass++) {
        int found = 0;
        DIR *d = opendir("/proc");
        if (!d) return;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            size_t r = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[r] = '\0';
            const char *rp = strrchr(buf, ')');
            int ppid = 0;
            char st = 0;
            if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2 || ppid != (int)getpid()) continue;
            if (st != 'Z') kill((pid_t)atoi(e->d_name), SIGKILL);
            found = 1;
        }
        closedir(d);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        if (!found) return;
        usleep(2000);
    }
}

/* The names of /dev/shm/baton-* (shared-memory segments of jobs that are joining: baton unlinks the name once
 * every local rank has attached), as one string "\nname\nname...\n" (malloc'ed; NULL if none or unreadable). */
static char *shm_names(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return NULL;
    size_t cap = 1, len = 0;
    char *all = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "baton-", 6)) continue;
        size_t n = strlen(e->d_name);
        char *nb = realloc(all, cap + n + 2);
        if (!nb) break;
        all = nb;
        if (!len) all[len++] = '\n';
        memcpy(all + len, e->d_name, n);
        len += n;
        all[len++] = '\n';
        all[len] = '\0';
        cap = len + 1;
    }
    closedir(d);
    return all;
}

/* After a test killed at its time limit: its workers died by SIGKILL before unlinking the segment they were
 * joining, so the names that appeared during the test are removed (a test that ends on its own must clean up
 * itself; nothing is removed then). */
static void remove_new_shm(const char *before) {
    char *now = shm_names();
    for (char *p = now; p && *p;) {
        char *end = strchr(p + 1, '\n');
        if (!end) break;
        *end = '\0';
        char want[300];
        snprintf(want, sizeof want, "\n%s\n", p + 1);
        if (p[1] && (!before || !strstr(before, want))) {
            char path[320];
            snprintf(path, sizeof path, "/dev/shm/%s", p + 1);
            unlink(path);
        }
        *end = '\n';
        p = end;
    }
    free(now);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);   /* a test's orphans come to the runner (kill_descendants) */
    for (int i = 0; i < ntests; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        double t0 = now_s();
        fflush(stdout);
        fflush(stderr);
        char dir[256];
        snprintf(dir, sizeof dir, "/tmp/baton-test-XXXXXX");
        if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
        char *shm_before = shm_names();
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            snprintf(tmpdir, sizeof tmpdir, "%s", dir);
            /* baton's private per-user directory (store hand-offs, flight-recorder dumps) lands inside the
             * test's own directory, which is removed after the test: tests leave nothing in /tmp. */
            setenv("TMPDIR", dir, 1);
            unsetenv("XDG_RUNTIME_DIR");
            tests[i].fn();
            fflush(stdout);
            fflush(stderr);
            _exit(0);
        }
        setpgid(pid, pid);
        double limit = tests[i].timeout_s * th_timeout_scale();
        int status = 0, timed_out = 0;
        for (;;) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) break;
            if (now_s() - t0 > limit) {
                kill(-pid, SIGKILL);
                waitpid(pid, &status, 0);
                timed_out = 1;
                break;
            }
            usleep(5000);
        }
        kill(-pid, SIGKILL); /* anything the test left running */
        kill_descendants();
        if (timed_out) remove_new_shm(shm_before);
        free(shm_before);
        rm_rf(dir);
        double dt = now_s() - t0;
        if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("PASS %s (%.2fs)\n", tests[i].name, dt);
            passed++;
        } else if (timed_out) {
            printf("FAIL %s: timed out after %.0fs\n", tests[i].name, limit);
            failed++;
        } else if (WIFSIGNALED(status)) {
            printf("FAIL %s: killed by signal %d (%.2fs)\n", tests[i].name, WTERMSIG(status), dt);
            failed++;
        } else {
            printf("FAIL %s (%.2fs)\n", tests[i].name, dt);
            failed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

char *th_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) th_fail(__FILE__, __LINE__, "cannot open %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) th_fail(__FILE__, __LINE__, "out of memory reading %s", path);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) th_fail(__FILE__, __LINE__, "cannot read %s", path);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

const char *th_write_tmp(const char *name, const char *fmt, ...) {
    static char paths[8][600];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", th_tmpdir(), name);
    FILE *f = fopen(path, "w");
    if (!f) th_fail(__FILE__, __LINE__, "cannot create %s: %s", path, strerror(errno));
    va_list ap;
    va_start(ap, fmt);
    int bad = vfprintf(f, fmt, ap) < 0;
    va_end(ap);
    bad |= fclose(f) != 0;
    if (bad) th_fail(__FILE__, __LINE__, "cannot write %s", path);
    return path;
}

char *th_train_json(const char *env, int n, const char *args, double timeout_s) {
    char cmd[4096], *out = NULL;
    int len = snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s %s run -n %d -- %s train --threads 1 --json %s 2>&1",
                       env, th_baton(), n, th_baton(), args);
    if (len < 0 || (size_t)len >= sizeof cmd) th_fail(__FILE__, __LINE__, "train command too long: %s", args);
    int rc = th_run(cmd, timeout_s, &out, NULL);
    if (rc != 0) th_fail(__FILE__, __LINE__, "%s\n--- exit %d, output:\n%s", cmd, rc, out ? out : "");
    const char *j = out ? strstr(out, "{\"model\"") : NULL;
    if (!j) th_fail(__FILE__, __LINE__, "no --json line from %s:\n%s", cmd, out ? out : "");
    char *line = strndup(j, strcspn(j, "\n"));
    free(out);
    if (!line) th_fail(__FILE__, __LINE__, "out of memory");
    return line;
}

double th_jnum(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) th_fail(__FILE__, __LINE__, "no %s in: %s", key, json);
    return atof(p + strlen(pat));
}

double th_jarr(const char *json, const char *key, int i) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":[", key);
    const char *p = strstr(json, pat);
    if (!p) th_fail(__FILE__, __LINE__, "no array %s in: %s", key, json);
    p += strlen(pat);
    for (int k = 0;; k++) {
        char *end;
        double v = strtod(p, &end);
        if (end == p) th_fail(__FILE__, __LINE__, "%s has no element %d in: %s", key, i, json);
        if (k == i) return v;
        p = end;
        if (*p != ',') th_fail(__FILE__, __LINE__, "%s has no element %d in: %s", key, i, json);
        p++;
    }
}
