/* run_group.c: one attempt's local workers for `baton run`.
 *
 * Workers are started with vfork (no copy of the launcher's page tables, no copy-on-write faults in the
 * launcher and its store thread afterwards: a few milliseconds per worker on a virtual machine, issue 8's
 * startup floor) into one new process group (the first worker leads it), with stdin from /dev/null,
 * every signal unblocked and PR_SET_PDEATHSIG(SIGKILL), so a launcher that is itself SIGKILLed does not
 * leave workers behind. The child shares the launcher's memory until it execs: it only makes system calls
 * and writes to its own stack (no malloc, no stdio, no locale: the store thread keeps running). The launcher signals the group (and each worker pid, in case one left the group)
 * only while at least one worker is unreaped, so the group id cannot have been reused.
 *
 * One poll loop watches the launcher's signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP), the relay pipes of
 * --tag-output and the deadlines: the first failure (non-zero exit or death by signal) or a received
 * signal starts the stop (SIGTERM, or the received signal, to the group; SIGKILL RUN_GRACE_MS later, or at
 * once on a second SIGINT / SIGTERM). Workers still running when the stop began are reported as stopped,
 * apart from the root causes. With --tag-output each line is written with one write() as "[rank R] line";
 * a line longer than 64 KiB is cut into 64 KiB pieces; a last line without newline gets one at EOF. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rendezvous/store.h"
#include "run.h"
#include "util/util.h"

enum { LINE_CAP = 64 * 1024, POLL_REMOTE_MS = 250, DRAIN_MS = 500 };

static const char *sig_name(int sig) {
    const char *s = sigabbrev_np(sig);
    return s ? s : "?";
}

void run_describe_status(int status, char *out, size_t len) {
    if (WIFEXITED(status)) snprintf(out, len, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (SIG%s)%s", WTERMSIG(status), sig_name(WTERMSIG(status)),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else snprintf(out, len, "ended with wait status 0x%x", (unsigned)status);
}

static int failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

/* ---- spawning -------------------------------------------------------------------------------------- */

/* Appends s to buf (of cap bytes, *len used), truncating; only copies: safe between vfork and exec. */
static void child_append(char *buf, size_t cap, size_t *len, const char *s) {
    while (*s && *len + 1 < cap) buf[(*len)++] = *s++;
}

static _Noreturn void child_exec(pid_t launcher, pid_t pgid, int devnull, const int out[2], char *const argv[],
                                 char *const env[]) {
    setpgid(0, pgid);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(127);   /* the launcher died before prctl took effect */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL);
    dup2(devnull, 0);
    if (out[0] >= 0) dup2(out[0], 1);
    if (out[1] >= 0) dup2(out[1], 2);
    execvpe(argv[0], argv, env);
    int e = errno;
    /* one write, so that the lines of several failing workers do not interleave */
    char msg[1024];
    size_t n = 0;
    child_append(msg, sizeof msg, &n, "baton run: cannot execute '");
    child_append(msg, sizeof msg, &n, argv[0]);
    child_append(msg, sizeof msg, &n, "': ");
    const char *what = strerrordesc_np(e);   /* not strerror: no translation, no allocation */
    child_append(msg, sizeof msg, &n, what ? what : "error");
    child_append(msg, sizeof msg, &n, e == ENOENT ? " (check the program path or PATH)\n" : "\n");
    ssize_t r = write(2, msg, n);
    (void)r;
    _exit(e == ENOENT ? 127 : 126);
}

/* vfork + child_exec in a frame of their own: the child returns from nothing and the caller's variables
 * stay in the caller's frame. */
static __attribute__((noinline)) pid_t spawn_one(pid_t launcher, pid_t pgid, int devnull, const int out[2],
                                                 char *const argv[], char *const env[]) {
    pid_t pid = vfork();
    if (pid == 0) child_exec(launcher, pgid, devnull, out, argv, env);
    return pid;
}

/* Sends sig to the workers; a catchable stop signal is followed by SIGCONT, so that a stopped worker
 * (SIGSTOP, a debugger's break) receives it now rather than only at SIGKILL time. */
static void signal_group(run_group *g, int sig) {
    if (g->running <= 0) return;
    if (g->pgid > 0) kill(-g->pgid, sig);
    for (int i = 0; i < g->n; i++)
        if (g->w[i].running) kill(g->w[i].pid, sig);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
        if (g->pgid > 0) kill(-g->pgid, SIGCONT);
        for (int i = 0; i < g->n; i++)
            if (g->w[i].running) kill(g->w[i].pid, SIGCONT);
    }
}

static void reap_all(run_group *g) {
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (int i = 0; i < g->n; i++)
            if (g->w[i].running && g->w[i].pid == pid) {
                g->w[i].running = 0;
                g->w[i].status = st;
                g->w[i].ended_ns = baton__now_ns();
                g->running--;
            }
}

int run_group_spawn(run_group *g, int n, const int *ranks, char *const argv[], char **const envs[], int tag,
                    const int *log_fds) {
    memset(g, 0, sizeof *g);
    g->n = n;
    if (log_fds) tag = 0;   /* --log-dir: each worker writes its own files, nothing to relay */
    g->tag = tag;
    g->w = calloc((size_t)n, sizeof *g->w);
    if (!g->w) {
        fprintf(stderr, "baton run: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n; i++) g->w[i].fd[0] = g->w[i].fd[1] = -1;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) {
        fprintf(stderr, "baton run: cannot open /dev/null: %s\n", strerror(errno));
        return -1;
    }
    pid_t self = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < n; i++) {
        run_worker *w = &g->w[i];
        w->rank = ranks[i];
        w->fail_peer = -1;
        int child_out[2] = {-1, -1};
        const int *own = log_fds ? log_fds + 2 * i : NULL;   /* the launcher keeps and closes these */
        if (tag) {
            for (int s = 0; s < 2; s++) {
                int p[2];
                if (pipe2(p, O_CLOEXEC) != 0) goto fail_sys;
                fcntl(p[0], F_SETFL, O_NONBLOCK);
                w->fd[s] = p[0];
                child_out[s] = p[1];
                w->lb[s].cap = LINE_CAP;
                w->lb[s].buf = malloc(LINE_CAP);
                if (!w->lb[s].buf) goto fail_sys;
            }
        }
        pid_t pid = spawn_one(self, g->pgid, devnull, own ? own : child_out, argv, envs[i]);
        if (pid < 0) goto fail_sys;
        if (g->pgid == 0) g->pgid = pid;
        setpgid(pid, g->pgid);   /* also done by the child; whichever runs first wins, the other is a no-op */
        w->pid = pid;
        w->running = 1;
        g->running++;
        for (int s = 0; s < 2; s++)
            if (child_out[s] >= 0) close(child_out[s]);
        continue;
    fail_sys:
        fprintf(stderr, "baton run: cannot start worker for rank %d: %s\n", ranks[i], strerror(errno));
        for (int s = 0; s < 2; s++)
            if (child_out[s] >= 0) close(child_out[s]);
        signal_group(g, SIGKILL);
        while (g->running > 0) {
            int st;
            pid_t p = waitpid(-1, &st, 0);
            if (p < 0 && errno != EINTR) break;
            for (int k = 0; k < g->n; k++)
                if (g->w[k].running && g->w[k].pid == p) {
                    g->w[k].running = 0;
                    g->running--;
                }
        }
        close(devnull);
        return -1;
    }
    close(devnull);
    return 0;
}

/* ---- output relay ---------------------------------------------------------------------------------- */

static void emit(const run_worker *w, int s, const char *line, int len) {
    char prefix[32];
    int pl = snprintf(prefix, sizeof prefix, "[rank %d] ", w->rank);
    char *buf = malloc((size_t)pl + (size_t)len + 1);
    if (!buf) return;
    memcpy(buf, prefix, (size_t)pl);
    memcpy(buf + pl, line, (size_t)len);
    buf[pl + len] = '\n';
    baton__write_full(s == 0 ? 1 : 2, buf, (size_t)pl + (size_t)len + 1);
    free(buf);
}

/* Reads what is there; emits complete lines. Returns 0, or -1 at EOF (the pipe is closed). */
static int relay(run_worker *w, int s) {
    run_linebuf *lb = &w->lb[s];
    for (;;) {
        ssize_t r = read(w->fd[s], lb->buf + lb->len, (size_t)(lb->cap - lb->len));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (r <= 0) {
            if (lb->len) emit(w, s, lb->buf, lb->len);
            lb->len = 0;
            close(w->fd[s]);
            w->fd[s] = -1;
            return -1;
        }
        lb->len += (int)r;
        int start = 0;
        for (int i = lb->len - (int)r; i < lb->len; i++)
            if (lb->buf[i] == '\n') {
                emit(w, s, lb->buf + start, i - start);
                start = i + 1;
            }
        if (start == 0 && lb->len == lb->cap) {   /* a line longer than the buffer: pass it on in pieces */
            emit(w, s, lb->buf, lb->len);
            lb->len = 0;
        } else if (start > 0) {
            memmove(lb->buf, lb->buf + start, (size_t)(lb->len - start));
            lb->len -= start;
        }
    }
}

/* ---- a rank that leaves before joining ------------------------------------------------------------- */

/* A job's ranks join together: baton_init returns on no rank until every rank has reached it. A rank that
 * exits without having begun to join (no "baton/host/R" in the store: it never got to baton_init's rendezvous)
 * can never join, so a rank that has begun would wait for it until its join timeout (BATON_JOIN_TIMEOUT, 120 s)
 * and then name a rank that "may be stopped, hung or still starting". A clean exit is no failure by itself
 * (workers that do not use baton, torch over gloo, say, set no such key), so the launcher that reaps it only
 * notes it in the store ("job/unjoined": the rank); every launcher looks for that note, and stops the job once
 * one of its own running workers has begun joining. The rank that left and the one that waits may be on
 * different nodes. Any store error turns the watch off (losing the store is poll_abort's business). */
enum { JOIN_WATCH_MS = 250 };

static int host_entry(baton_store *st, int rank, int *exists) {
    char key[48];
    snprintf(key, sizeof key, "baton/host/%d", rank);
    return baton_store_check(st, key, exists);
}

static void note_left_unjoined(run_group *g) {
    for (int i = 0; g->st && i < g->n; i++) {
        run_worker *w = &g->w[i];
        if (w->running || w->join_checked || failed(w->status)) continue;
        w->join_checked = 1;
        int exists = 0;
        char v[16];
        int len = snprintf(v, sizeof v, "%d", w->rank);
        if (host_entry(g->st, w->rank, &exists) < 0 || (!exists && baton_store_set(g->st, "job/unjoined", v, (size_t)len) < 0))
            g->st = NULL;
    }
}

/* 1 (why filled) when a rank left without joining and a running worker of this group has begun to join */
static int join_cannot_complete(run_group *g, char *why, size_t len) {
    int exists = 0;
    if (baton_store_check(g->st, "job/unjoined", &exists) < 0) goto off;
    if (!exists) return 0;
    for (int i = 0; i < g->n; i++) {
        if (!g->w[i].running) continue;
        if (host_entry(g->st, g->w[i].rank, &exists) < 0) goto off;
        if (!exists) continue;
        void *v = NULL;
        size_t n = 0;
        if (baton_store_get(g->st, "job/unjoined", &v, &n, 1.0) < 0) goto off;
        char rank[16] = "?";
        if (n > 0 && n < sizeof rank) {
            memcpy(rank, v, n);
            rank[n] = '\0';
            if (strspn(rank, "0123456789") != n) snprintf(rank, sizeof rank, "?");
        }
        free(v);
        snprintf(why, len, "rank %s exited with code 0 without joining the job, so rank %d, which is joining it "
                           "(baton_init), would wait for it in vain: every rank must call baton_init, or none",
                 rank, g->w[i].rank);
        return 1;
    }
    return 0;
off:
    g->st = NULL;
    return 0;
}

/* ---- the wait loop --------------------------------------------------------------------------------- */

/* 1 if pid, or a process descended from it, is in the stopped state ('T' or 't' in /proc/PID/stat). */
static int stopped_under(pid_t root) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    enum { MAXP = 65536 };
    static pid_t pids[MAXP], ppids[MAXP];
    static char states[MAXP];
    int n = 0;
    for (struct dirent *e; n < MAXP && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0) continue;
        buf[r] = '\0';
        const char *rp = strrchr(buf, ')'); /* "pid (comm) S ppid ...": comm may hold spaces and parens */
        int ppid;
        char st;
        if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2) continue;
        pids[n] = (pid_t)atoi(buf);
        ppids[n] = (pid_t)ppid;
        states[n++] = st;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        if (states[i] != 'T' && states[i] != 't') continue;
        pid_t p = pids[i];
        for (int hops = 0; p > 1 && hops < 64; hops++) { /* walk up to root, bounded */
            if (p == root) return 1;
            int k = 0;
            while (k < n && pids[k] != p) k++;
            if (k == n) break;
            p = ppids[k];
        }
    }
    return 0;
}

static void begin_stop(run_group *g, int sig, int *stopping, uint64_t *kill_at) {
    *stopping = 1;
    for (int i = 0; i < g->n; i++)
        if (g->w[i].running) {
            g->w[i].stopped = 1;
            g->w[i].frozen = stopped_under(g->w[i].pid);
        }
    signal_group(g, sig);
    *kill_at = baton__now_ns() + (uint64_t)RUN_GRACE_MS * 1000000ull;
}

run_outcome run_group_wait(run_group *g, int sigfd, run_poll_fn poll_remote, void *ctx) {
    run_outcome o;
    memset(&o, 0, sizeof o);
    int stopping = 0, killed = 0;
    uint64_t kill_at = UINT64_MAX, drain_until = 0, settle_until = 0;
    uint64_t next_poll = baton__now_ns() + POLL_REMOTE_MS * 1000000ull;
    struct pollfd *pfd = calloc((size_t)(2 * g->n + 1), sizeof *pfd);
    int *who = calloc((size_t)(2 * g->n + 1), sizeof *who);
    if (!pfd || !who) {
        fprintf(stderr, "baton run: out of memory; stopping the workers\n");
        signal_group(g, SIGKILL);
        while (g->running > 0 && waitpid(-1, NULL, 0) > 0) g->running--;
        o.result = RUN_FAILED;
        free(pfd);
        free(who);
        return o;
    }
    for (;;) {
        uint64_t now = baton__now_ns();
        int nfd = 0;
        pfd[nfd++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
        for (int i = 0; i < g->n; i++)
            for (int s = 0; s < 2; s++)
                if (g->w[i].fd[s] >= 0) {
                    who[nfd] = 2 * i + s;
                    pfd[nfd++] = (struct pollfd){.fd = g->w[i].fd[s], .events = POLLIN};
                }
        if (g->running == 0) {
            if (!drain_until) drain_until = now + DRAIN_MS * 1000000ull;
            if (nfd == 1 || now >= drain_until) break;   /* a grandchild may hold a pipe open: don't wait on it */
        }
        uint64_t wake = UINT64_MAX;
        if (stopping && !killed) wake = kill_at;
        if (settle_until && !stopping && settle_until < wake) wake = settle_until;
        if (poll_remote && !stopping && g->running > 0 && next_poll < wake) wake = next_poll;
        if (g->st && !stopping && g->running > 0 && g->next_join_watch < wake) wake = g->next_join_watch;
        if (drain_until && drain_until < wake) wake = drain_until;
        int timeout = -1;
        if (wake != UINT64_MAX) timeout = wake > now ? (int)((wake - now + 999999ull) / 1000000ull) : 0;
        int r = poll(pfd, (nfds_t)nfd, timeout);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "baton run: poll: %s\n", strerror(errno));
            break;
        }
        if (r > 0 && (pfd[0].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
                int sig = (int)si.ssi_signo;
                if (sig == SIGCHLD) continue;
                if (!stopping) {
                    o.result = RUN_INTERRUPTED;
                    o.signo = sig;
                    fprintf(stderr, "baton run: got SIG%s; stopping the workers\n", sig_name(sig));
                    begin_stop(g, sig, &stopping, &kill_at);
                } else if (!killed && sig != SIGHUP) {
                    fprintf(stderr, "baton run: got SIG%s again; killing the workers\n", sig_name(sig));
                    signal_group(g, SIGKILL);
                    killed = 1;
                }
            }
        }
        for (int k = 1; r > 0 && k < nfd; k++)
            if (pfd[k].revents) relay(&g->w[who[k] / 2], who[k] % 2);
        /* reap everything that ended, then decide: all failures seen before the stop are root causes */
        reap_all(g);
        now = baton__now_ns();
        if (!stopping && !settle_until)
            for (int i = 0; i < g->n; i++)
                if (!g->w[i].running && failed(g->w[i].status)) {
                    /* The others get a moment to see the failure themselves and say so. */
                    o.result = RUN_FAILED;
                    settle_until = now + (uint64_t)RUN_SETTLE_MS * 1000000ull;
                    break;
                }
        if (settle_until && !stopping && (now >= settle_until || g->running == 0))
            begin_stop(g, SIGTERM, &stopping, &kill_at);
        note_left_unjoined(g);
        if (g->st && !stopping && !settle_until && g->running > 0 && now >= g->next_join_watch) {
            g->next_join_watch = now + JOIN_WATCH_MS * 1000000ull;
            if (join_cannot_complete(g, o.why, sizeof o.why)) {
                o.result = RUN_FAILED;
                fprintf(stderr, "baton run: %s; stopping the workers\n", o.why);
                begin_stop(g, SIGTERM, &stopping, &kill_at);
            }
        }
        if (poll_remote && !stopping && g->running > 0 && now >= next_poll) {
            next_poll = now + POLL_REMOTE_MS * 1000000ull;
            if (poll_remote(ctx, o.why, sizeof o.why)) {
                o.result = RUN_REMOTE;
                begin_stop(g, SIGTERM, &stopping, &kill_at);
            }
        }
        if (stopping && !killed && baton__now_ns() >= kill_at) {
            signal_group(g, SIGKILL);
            killed = 1;
        }
    }
    /* whatever still runs (only after a poll failure) is killed and reaped: nobody is left behind */
    if (g->running > 0) {
        signal_group(g, SIGKILL);
        while (g->running > 0) {
            int st;
            pid_t p = waitpid(-1, &st, 0);
            if (p < 0 && errno != EINTR) break;
            for (int i = 0; i < g->n; i++)
                if (g->w[i].running && g->w[i].pid == p) {
                    g->w[i].running = 0;
                    g->w[i].status = st;
                    g->running--;
                }
        }
    }
    for (int i = 0; i < g->n; i++)
        for (int s = 0; s < 2; s++)
            if (g->w[i].fd[s] >= 0) {
                if (g->w[i].lb[s].len) emit(&g->w[i], s, g->w[i].lb[s].buf, g->w[i].lb[s].len);
                g->w[i].lb[s].len = 0;
                close(g->w[i].fd[s]);
                g->w[i].fd[s] = -1;
            }
    free(pfd);
    free(who);
    return o;
}

static int waited_only(const run_worker *w) {
    return !strcmp(w->fail_kind, "timeout") || !strcmp(w->fail_kind, "peer") || !strcmp(w->fail_kind, "canceled");
}

static int canceled(const run_worker *w) { return !strcmp(w->fail_kind, "canceled"); }

int run_group_report(const run_group *g, const char *prefix) {
    int causes = 0, first = -1, silent = -1, nfailed = 0, nwaited = 0;
    char how[96];
    /* The first failure is the likely root cause; the ones that followed it within the settle window are
     * usually ranks that saw it (their own output says what they saw). Failures reaped within 50 ms of each
     * other are too close to order (a survivor that saw a dead peer's connection close may be reaped
     * first): among them a death by signal is taken as the cause rather than an exit code. */
    /* A rank canceled by another rank's abort is never first while another failure is there: it only learned of
     * that one (it may be reaped first, having had less to do before it exited). */
    int uncanceled = 0;
    uint64_t first_end = UINT64_MAX;
    for (int i = 0; i < g->n; i++) {
        const run_worker *w = &g->w[i];
        if (w->stopped || !failed(w->status)) continue;
        nfailed++;
        nwaited += waited_only(w) && !WIFSIGNALED(w->status);
        uncanceled += !canceled(w);
        if (w->ended_ns < first_end) first_end = w->ended_ns;
    }
    for (int i = 0; i < g->n; i++) {
        const run_worker *w = &g->w[i];
        if (w->stopped || !failed(w->status) || (uncanceled && canceled(w))) continue;
        if (first < 0 || w->ended_ns < g->w[first].ended_ns) first = i;
    }
    for (int i = 0; first >= 0 && i < g->n; i++) {
        const run_worker *w = &g->w[i];
        if (w->stopped || !failed(w->status) || !WIFSIGNALED(w->status) || WIFSIGNALED(g->w[first].status) ||
            (uncanceled && canceled(w)))
            continue;
        if (w->ended_ns - g->w[first].ended_ns < 50000000ull) first = i;
    }
    /* Every rank that failed was waiting for others: the cause is a rank that stayed silent until the launcher
     * stopped it. Among several, one that posted no failure of its own (a rank still exiting after its own
     * timeout was waiting, not silent, even if it looked stopped: LeakSanitizer's exit check ptrace-stops a
     * process's threads), then one the waiting ranks named, then one found in the stopped state. */
    if (nfailed > 0 && nwaited == nfailed) {
        int best = -1;
        for (int i = 0; i < g->n; i++) {
            const run_worker *w = &g->w[i];
            if (!w->stopped) continue;
            int named = 0;
            for (int k = 0; k < g->n; k++) named |= !g->w[k].stopped && g->w[k].fail_peer == w->rank;
            int score = 4 * !w->fail_kind[0] + 2 * named + w->frozen;
            if (best < 0 || score > best) best = score, silent = i;
        }
    }
    /* Nobody stayed silent, but a rank exited 0 before any failure: it left while the others still needed it
     * (its data ran out first, say), and they failed on its closed connection or were canceled. One the failing
     * ranks named as the peer they lost comes first. */
    int left = -1;
    if (nfailed > 0 && nwaited == nfailed && silent < 0) {
        int naming = 0;   /* failing ranks that named the peer they lost: then it must be this one (it may be on
                           * another node, and a rank of ours that finished early is no cause) */
        for (int k = 0; k < g->n; k++) naming += !g->w[k].stopped && failed(g->w[k].status) && g->w[k].fail_peer >= 0;
        for (int i = 0; i < g->n && left < 0; i++) {
            const run_worker *w = &g->w[i];
            if (w->stopped || failed(w->status) || !w->ended_ns || w->ended_ns > first_end) continue;
            int named = 0;
            for (int k = 0; k < g->n; k++) named |= !g->w[k].stopped && failed(g->w[k].status) && g->w[k].fail_peer == w->rank;
            if (named || !naming) left = i;
        }
    }
    if (left >= 0) {
        fprintf(stderr, "baton run: %srank %d exited with code 0 while the others still needed it: they failed in a "
                        "collective it never joined (first failure)\n", prefix, g->w[left].rank);
        causes++;
    }
    if (silent >= 0) {
        const run_worker *w = &g->w[silent];
        run_describe_status(w->status, how, sizeof how);
        fprintf(stderr, "baton run: %srank %d stopped responding%s while the others waited for it; the launcher "
                        "stopped it (%s) (first failure)\n",
                prefix, w->rank, w->frozen ? " (it was in the stopped state: SIGSTOP, Ctrl-Z or a debugger)" : "", how);
        causes++;
    }
    for (int i = 0; i < g->n; i++) {
        const run_worker *w = &g->w[i];
        if (w->stopped || !failed(w->status)) continue;
        run_describe_status(w->status, how, sizeof how);
        if (silent >= 0)
            fprintf(stderr, "baton run: %srank %d %s (%s %d%s)\n", prefix, w->rank, how,
                    !strcmp(w->fail_kind, "timeout") ? "timed out waiting for rank" : "after rank", g->w[silent].rank,
                    !strcmp(w->fail_kind, "timeout") ? "" : " stopped responding");
        else if (left >= 0)
            fprintf(stderr, "baton run: %srank %d %s (after rank %d left)\n", prefix, w->rank, how, g->w[left].rank);
        else if (i == first)
            fprintf(stderr, "baton run: %srank %d %s%s\n", prefix, w->rank, how, " (first failure)");
        else
            fprintf(stderr, "baton run: %srank %d %s (after rank %d failed)\n", prefix, w->rank, how, g->w[first].rank);
        if (silent < 0 && left < 0) causes++;
    }
    for (int i = 0; i < g->n; i++) {
        const run_worker *w = &g->w[i];
        if (!w->stopped || i == silent) continue;
        run_describe_status(w->status, how, sizeof how);
        fprintf(stderr, "baton run: %srank %d stopped by the launcher (%s)\n", prefix, w->rank, how);
    }
    return causes;
}

void run_group_read_failures(run_group *g, baton_store *st) {
    for (int i = 0; i < g->n; i++) {
        run_worker *w = &g->w[i];
        w->fail_kind[0] = '\0';
        w->fail_peer = -1;
        char key[64];
        snprintf(key, sizeof key, "baton/fail/%d", w->rank);
        int exists = 0;
        if (!st || baton_store_check(st, key, &exists) < 0 || !exists) continue;
        void *v = NULL;
        size_t len = 0;
        if (baton_store_get(st, key, &v, &len, 1.0) < 0) continue;
        char kind[12] = "";   /* "%11s": fits fail_kind (12) exactly; 16 made -O1 warn of truncation */
        int peer = -1;
        if (sscanf(v, "%11s %d", kind, &peer) >= 1) {
            snprintf(w->fail_kind, sizeof w->fail_kind, "%s", kind);
            w->fail_peer = peer;
        }
        free(v);
    }
}

void run_group_free(run_group *g) {
    if (!g || !g->w) return;
    for (int i = 0; i < g->n; i++)
        for (int s = 0; s < 2; s++) {
            if (g->w[i].fd[s] >= 0) close(g->w[i].fd[s]);
            free(g->w[i].lb[s].buf);
        }
    free(g->w);
    g->w = NULL;
}
