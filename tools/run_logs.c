/* run_logs.c: `baton run --log-dir DIR`: each rank's stdout and stderr go to files laid out as torchrun's
 * (torch/distributed/elastic: <log_dir>/<run id>_<random>/attempt_<restart>/<rank>/{stdout,stderr}.log):
 *
 *   DIR/JOB/attempt_K/RANK/stdout.log, stderr.log     JOB = the job id, or ID_<job id> with --rdzv-id ID
 *
 * RANK is the global rank (torchrun's is the local one; the same on one node), so the launchers of several
 * nodes can share one DIR on a shared file system without colliding. DIR is made if missing; everything
 * under it is private (directories 0700, files 0600). The JOB and attempt directories may exist already
 * (another node made them on a shared DIR) if they are real directories of this user; every RANK directory
 * and file is new (O_EXCL, no symlink followed), and each level is opened relative to its parent's
 * descriptor, so nothing planted in DIR is written through. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

int run_log_name_check(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64 || !strcmp(s, ".") || !strcmp(s, "..")) return -1;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return -1;
    return 0;
}

/* Opens (making it if missing, when may_exist) the directory name under parent (a dirfd, or AT_FDCWD). An
 * existing one must be a real directory owned by this user. Returns the fd or -1 after a message. */
static int open_subdir(int parent, const char *shown, const char *name, int may_exist) {
    if (mkdirat(parent, name, 0700) != 0 && !(errno == EEXIST && may_exist)) {
        fprintf(stderr, "baton run: --log-dir: cannot create %s: %s\n", shown, strerror(errno));
        return -1;
    }
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        fprintf(stderr, "baton run: --log-dir: %s is not a directory of this user%s%s\n", shown, fd < 0 ? ": " : "",
                fd < 0 ? strerror(errno) : "");
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

void run_logs_job_dir(const char *dir, const char *rdzv_id, const char *job_id, int attempt, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s%s%s/attempt_%d", dir, rdzv_id ? rdzv_id : "", rdzv_id ? "_" : "", job_id, attempt);
}

int run_logs_open(const char *dir, const char *rdzv_id, const char *job_id, int attempt, int n, const int *ranks,
                  int *fds) {
    for (int i = 0; i < 2 * n; i++) fds[i] = -1;
    char job[160], att[32], shown[4500];
    snprintf(job, sizeof job, "%s%s%s", rdzv_id ? rdzv_id : "", rdzv_id ? "_" : "", job_id);
    snprintf(att, sizeof att, "attempt_%d", attempt);
    int base = open_subdir(AT_FDCWD, dir, dir, 1), jfd = -1, afd = -1, ok = 0;
    snprintf(shown, sizeof shown, "%s/%s", dir, job);
    if (base >= 0) jfd = open_subdir(base, shown, job, 1);
    snprintf(shown, sizeof shown, "%s/%s/%s", dir, job, att);
    if (jfd >= 0) afd = open_subdir(jfd, shown, att, 1);
    for (int i = 0; afd >= 0 && i < n; i++) {
        char r[16];
        snprintf(r, sizeof r, "%d", ranks[i]);
        snprintf(shown, sizeof shown, "%s/%s/%s/%s", dir, job, att, r);
        int rfd = open_subdir(afd, shown, r, 0);
        if (rfd < 0) goto out;
        for (int s = 0; s < 2; s++) {
            const char *file = s ? "stderr.log" : "stdout.log";
            fds[2 * i + s] = openat(rfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_APPEND, 0600);
            if (fds[2 * i + s] < 0) {
                fprintf(stderr, "baton run: --log-dir: cannot create %s/%s: %s\n", shown, file, strerror(errno));
                close(rfd);
                goto out;
            }
        }
        close(rfd);
    }
    ok = afd >= 0;
out:
    if (base >= 0) close(base);
    if (jfd >= 0) close(jfd);
    if (afd >= 0) close(afd);
    if (!ok) run_logs_close(fds, n);
    return ok ? 0 : -1;
}

void run_logs_close(int *fds, int n) {
    for (int i = 0; fds && i < 2 * n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

void run_logs_show_tail(const char *path, int lines) {
    char buf[4096];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    ssize_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t from = st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0;
        got = pread(fd, buf, sizeof buf - 1, from);
    }
    close(fd);
    if (got <= 0) return;
    while (got > 0 && buf[got - 1] == '\n') got--;
    buf[got] = '\0';
    char *start = buf + got;
    for (int k = 0; start > buf; start--)
        if (start[-1] == '\n' && ++k == lines) break;
    for (char *line = strtok(start, "\n"); line; line = strtok(NULL, "\n")) fprintf(stderr, "    %s\n", line);
}
