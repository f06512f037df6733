/* run.c: `baton run`, the torchrun-style launcher: the job's secret and id, the rendezvous store it hosts,
 * the workers' environment, restarts, multi-node rendezvous between launchers, and the clean-up of
 * shared-memory leftovers. Its flags are parsed by run_args.c. One attempt's processes are handled by run_group.c.
 *
 * Single node: the store runs on a thread of this launcher on 127.0.0.1, port 0 (or on --rdzv if given);
 * each attempt (--max-restarts) gets a fresh store server, so an attempt never sees an older attempt's keys.
 *
 * Several nodes (--nnodes M): every launcher needs the same BATON_SECRET. Node 0 hosts the store at
 * --rdzv HOST:PORT; every launcher (node 0 included) connects to it as a client and
 *   1. claims its node rank (add "launcher/R/claimed": a second launcher with the same rank fails),
 *   2. publishes its -n ("launcher/R/nproc"); node 0 publishes --nnodes and the random job id,
 *   3. counts itself in ("launcher/joined") and waits, polling, until all M have joined,
 *   4. checks that every node has the same -n and --nnodes, then starts its workers,
 *   5. while they run, polls "job/abort" every 250 ms; a launcher whose workers fail (or that is
 *      interrupted) writes "job/abort" so that the other nodes stop theirs; losing the store counts too,
 *   6. at the end counts itself in "job/done" (plus DONE_FAILED if its part failed) and waits for all M (up to
 *      600 s) so that node 0 keeps the store up for the others; the others then read the outcome and say so
 *      ("job/left"), node 0 waits for that (up to 10 s) before its store goes; each removes
 *      /dev/shm/baton-<jobid>-* on its machine.
 * While workers run, every launcher also watches for a rank that exited without joining while another is
 * joining (run_group.c: the join can never complete; the job is stopped naming it).
 * From step 4 on every launcher but node 0's beats a heartbeat into the store (run_alive.c): node 0 stops the
 * job (5) or its wait (6) once a node that has not said it is done has been silent for BATON_NODE_TIMEOUT
 * seconds, and every store request of the others is bounded by that time, so a node that dies or drops off
 * the network does not hold the rest.
 * Restarts are single-node only: --max-restarts with --nnodes M > 1 is refused; --nnodes MIN:MAX (elastic,
 * rounds of re-rendezvous) is tools/run_elastic.c. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "commands.h"
#include "rendezvous/store.h"
#include "rendezvous/store_proto.h"
#include "run.h"
#include "transport/tcp.h"
#include "util/util.h"

extern char **environ;

enum { DONE_WAIT_S = 600, LEAVE_WAIT_S = 10 };
#define DONE_FAILED ((int64_t)1 << 32)   /* added to job/done by a node whose job failed (step 6) */

/* ---- environment ----------------------------------------------------------------------------------- */

static const char *const overridden[] = {
    "BATON_RANK", "BATON_WORLD_SIZE", "BATON_LOCAL_RANK", "BATON_LOCAL_WORLD_SIZE", "BATON_NODE_RANK",
    "BATON_NNODES", "BATON_RESTART_COUNT", "BATON_STORE_ADDR", "BATON_SECRET", "BATON_JOB_ID", "BATON_LAUNCHER_PID", "RANK",
    "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
};


static int is_overridden(const char *kv, const char *timeout) {
    for (size_t k = 0; k < sizeof overridden / sizeof overridden[0]; k++) {
        size_t n = strlen(overridden[k]);
        if (!strncmp(kv, overridden[k], n) && kv[n] == '=') return 1;
    }
    return timeout && !strncmp(kv, "BATON_TIMEOUT=", 14);
}

static void free_env(char **env) {
    if (!env) return;
    for (char **p = env; *p; p++) free(*p);
    free(env);
}

static char **build_env(const job *j, int local_rank) {
    const run_opts *o = j->o;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 32, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_overridden(environ[i], o->timeout) && !(env[k++] = strdup(environ[i]))) goto oom;
    long rank = o->node_rank * o->nproc + local_rank, world = o->nnodes * o->nproc;
    int v6 = strchr(j->store_host, ':') != NULL;
    char addr[300];
    snprintf(addr, sizeof addr, v6 ? "[%s]:%d" : "%s:%d", j->store_host, j->store_port);
#define PUT(...)                                                             \
    do {                                                                     \
        char tmp[400];                                                       \
        snprintf(tmp, sizeof tmp, __VA_ARGS__);                              \
        if (!(env[k++] = strdup(tmp))) goto oom;                             \
    } while (0)
    PUT("BATON_RANK=%ld", rank);
    PUT("BATON_WORLD_SIZE=%ld", world);
    PUT("BATON_LOCAL_RANK=%d", local_rank);
    PUT("BATON_LOCAL_WORLD_SIZE=%ld", o->nproc);
    PUT("BATON_NODE_RANK=%ld", o->node_rank);
    PUT("BATON_NNODES=%ld", o->nnodes);
    PUT("BATON_RESTART_COUNT=%d", j->restart);
    PUT("BATON_STORE_ADDR=%s", addr);
    PUT("BATON_SECRET=%s", j->secret_hex);
    PUT("BATON_JOB_ID=%s", j->job_id);
    PUT("BATON_LAUNCHER_PID=%d", (int)getpid());
    if (o->timeout) PUT("BATON_TIMEOUT=%s", o->timeout);
    PUT("RANK=%ld", rank);
    PUT("WORLD_SIZE=%ld", world);
    PUT("LOCAL_RANK=%d", local_rank);
    PUT("LOCAL_WORLD_SIZE=%ld", o->nproc);
    PUT("GROUP_RANK=%ld", o->node_rank);
    PUT("GROUP_WORLD_SIZE=%ld", o->nnodes);
    PUT("MASTER_ADDR=%s", j->store_host);
    PUT("MASTER_PORT=%d", j->torch_port);
    PUT("TORCHELASTIC_RESTART_COUNT=%d", j->restart);
#undef PUT
    env[k] = NULL;
    return env;
oom:
    free_env(env);
    return NULL;
}

/* ---- shared-memory leftovers ----------------------------------------------------------------------- */

void remove_shm_leftovers(const char *job_id) {
    char prefix[64];
    int pl = snprintf(prefix, sizeof prefix, "baton-%s-", job_id);
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, (size_t)pl) && unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
    closedir(d);
    if (removed) BATON_INFO("baton run: removed %d shared-memory leftover(s) /dev/shm/%s*", removed, prefix);
}

/* ---- one attempt ----------------------------------------------------------------------------------- */

/* Spawns the local workers with the job's environment and waits for them. Returns 0 with *out filled, or
 * -1 when they could not be started. */
int run_attempt(job *j, int sigfd, run_poll_fn poll, void *ctx, run_group *g, run_outcome *out) {
    const run_opts *o = j->o;
    int n = (int)o->nproc;
    char ***envs = calloc((size_t)n, sizeof *envs);
    int *ranks = calloc((size_t)n, sizeof *ranks);
    int rc = -1, *logs = NULL;
    memset(g, 0, sizeof *g);
    if (!envs || !ranks) goto done;
    for (int i = 0; i < n; i++) {
        ranks[i] = (int)(o->node_rank * o->nproc + i);
        if (!(envs[i] = build_env(j, i))) goto done;
    }
    if (o->log_dir) {
        if (!(logs = malloc(2 * (size_t)n * sizeof *logs))) goto done;
        if (run_logs_open(o->log_dir, o->rdzv_id, j->job_id, j->restart, n, ranks, logs) < 0) {
            free(logs);
            logs = NULL;
            goto failed;
        }
        char dir[4400];
        run_logs_job_dir(o->log_dir, o->rdzv_id, j->job_id, j->restart, dir, sizeof dir);
        fprintf(stderr, "baton run: the workers' output goes to %s/RANK/{stdout,stderr}.log\n", dir);
    }
    if (run_group_spawn(g, n, ranks, o->prog, (char **const *)envs, o->tag, logs) < 0) goto failed;
    g->st = j->st;
    *out = run_group_wait(g, sigfd, poll, ctx);
    rc = 0;
done:
    if (rc < 0 && (!envs || !ranks || (o->log_dir && !logs))) fprintf(stderr, "baton run: out of memory\n");
failed:
    run_logs_close(logs, n);
    free(logs);
    for (int i = 0; envs && i < n; i++) free_env(envs[i]);
    free(envs);
    free(ranks);
    return rc;
}

/* With --log-dir, the end of each failed rank's stderr.log (the terminal saw none of it). */
static void show_failed_logs(const job *j, const run_group *g) {
    if (!j->o->log_dir) return;
    char dir[4400], path[4500];
    run_logs_job_dir(j->o->log_dir, j->o->rdzv_id, j->job_id, j->restart, dir, sizeof dir);
    for (int i = 0; i < g->n; i++)
        if (!g->w[i].stopped && !(WIFEXITED(g->w[i].status) && WEXITSTATUS(g->w[i].status) == 0)) {
            snprintf(path, sizeof path, "%s/%d/stderr.log", dir, g->w[i].rank);
            fprintf(stderr, "baton run: the end of rank %d's %s:\n", g->w[i].rank, path);
            run_logs_show_tail(path, 5);
        }
}

int exit_code_for(const run_outcome *oc) {
    if (oc->result == RUN_OK) return 0;
    if (oc->result == RUN_INTERRUPTED) return 128 + oc->signo;
    return 1;
}

int start_store(const char *host, int port, const uint8_t *secret, baton_store_server **srv) {
    if (baton_store_server_start(host, port, secret, BATON_STORE_SECRET_BYTES, srv) < 0) {
        fprintf(stderr, "baton run: cannot start the rendezvous store on %s:%d: %s\n", host, port, baton_last_error());
        return -1;
    }
    return 0;
}

/* MASTER_ADDR:MASTER_PORT is where rank 0 of a torch.distributed env:// job hosts torch's own store, so
 * MASTER_PORT must be a port nobody holds (baton's store speaks another protocol): one the OS hands out on
 * `host` now, released at once (torchrun picks its port the same way). */
int pick_torch_port(const char *host, int *port) {
    int fd;
    if (baton__tcp_listen(host, port, &fd) < 0) {
        fprintf(stderr, "baton run: cannot find a free port on %s for MASTER_PORT: %s\n", host, baton_last_error());
        return -1;
    }
    close(fd);
    return 0;
}

static int run_single_node(job *j, const uint8_t *secret, int sigfd) {
    const run_opts *o = j->o;
    const char *host = o->have_rdzv ? o->rdzv_host : "127.0.0.1";
    char history[4096] = "";
    size_t hl = 0;
    for (int attempt = 0;; attempt++) {
        j->restart = attempt;
        baton_store_server *srv = NULL;
        if (start_store(host, o->have_rdzv ? o->rdzv_port : 0, secret, &srv) < 0) return 1;
        snprintf(j->store_host, sizeof j->store_host, "%s", host);
        j->store_port = baton_store_server_port(srv);
        if (pick_torch_port(host, &j->torch_port) < 0) {
            baton_store_server_stop(srv);
            return 1;
        }
        /* the launcher's own client: the join watch (run_group.c) and, after a failure, what the workers said */
        baton_store *st = NULL;
        if (baton_store_connect(host, j->store_port, secret, BATON_STORE_SECRET_BYTES, 2.0, &st) < 0) {
            BATON_DEBUG("baton run: no store client of its own (%s): no join watch", baton_last_error());
            st = NULL;
        }
        j->st = st;
        run_group g;
        run_outcome oc;
        int rc = run_attempt(j, sigfd, NULL, NULL, &g, &oc);
        if (rc == 0 && oc.result != RUN_OK) run_group_read_failures(&g, st); /* what the failing workers said */
        j->st = NULL;
        baton_store_close(st);
        baton_store_server_stop(srv);
        remove_shm_leftovers(j->job_id);
        if (rc < 0) {
            run_group_free(&g);
            return 1;
        }
        char prefix[64] = "";
        if (o->max_restarts > 0) snprintf(prefix, sizeof prefix, "attempt %d: ", attempt);
        if (oc.result == RUN_OK) {
            run_group_free(&g);
            return 0;
        }
        run_group_report(&g, prefix);
        show_failed_logs(j, &g);
        size_t before = hl;
        for (int i = 0; i < g.n && hl < sizeof history - 128; i++)
            if (!g.w[i].stopped && !(WIFEXITED(g.w[i].status) && WEXITSTATUS(g.w[i].status) == 0)) {
                char how[96];
                run_describe_status(g.w[i].status, how, sizeof how);
                hl += (size_t)snprintf(history + hl, sizeof history - hl, "baton run:   attempt %d: rank %d %s\n",
                                       attempt, g.w[i].rank, how);
            }
        if (hl == before && oc.why[0] && hl < sizeof history - 128) /* stopped by the launcher, no rank failed */
            hl += (size_t)snprintf(history + hl, sizeof history - hl, "baton run:   attempt %d: %.200s\n", attempt, oc.why);
        run_group_free(&g);
        if (oc.result != RUN_FAILED) return exit_code_for(&oc);
        if (attempt >= o->max_restarts) {
            if (o->max_restarts > 0)
                fprintf(stderr, "baton run: giving up after %ld restart(s); every failure:\n%s", o->max_restarts, history);
            return 1;
        }
        fprintf(stderr, "baton run: restarting all %ld workers (restart %d of %ld)\n", o->nproc, attempt + 1,
                o->max_restarts);
    }
}

/* ---- multi-node ------------------------------------------------------------------------------------ */

typedef struct {
    baton_store *st;
    const run_opts *o;
    run_alive *alive;
} remote_ctx;

/* run_poll_fn: has another node asked to stop, is the store gone, or (node 0) has a launcher gone silent? */
static int poll_abort(void *p, char *why, size_t len) {
    remote_ctx *c = p;
    int exists = 0;
    if (run_alive_lost(c->alive, c->st, why, len)) {   /* the other nodes stop too */
        if (baton_store_set(c->st, "job/abort", why, strlen(why)) < 0)
            BATON_WARN("baton run: could not tell the other nodes to stop: %s", baton_last_error());
        return 1;
    }
    if (baton_store_check(c->st, "job/abort", &exists) < 0) {
        snprintf(why, len, "lost the rendezvous store at %s:%d (%s); did node 0's launcher die, or the network to it?",
                 c->o->rdzv_host,
                 c->o->rdzv_port, baton_last_error());
        return 1;
    }
    if (!exists) return 0;
    void *v = NULL;
    size_t n = 0;
    if (baton_store_get(c->st, "job/abort", &v, &n, 1.0) == 0) snprintf(why, len, "%s", (char *)v);
    else snprintf(why, len, "another node asked to stop");
    free(v);
    return 1;
}

/* A pending SIGINT / SIGTERM / SIGHUP during the rendezvous or the final wait: returns the signal or 0. */
int pending_stop_signal(int sigfd) {
    struct signalfd_siginfo si;
    int got = 0;
    while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD) got = (int)si.ssi_signo;
    return got;
}

static int store_long(baton_store *st, const char *key, long *out) {
    void *v;
    size_t n;
    int rc = baton_store_get(st, key, &v, &n, 10.0);
    if (rc < 0) return rc;
    rc = baton__parse_long(v, 0, 1L << 30, out);
    free(v);
    return rc;
}

/* What a rendezvous that timed out can say about why: the node ranks nobody claimed (up to 8), a rank claimed
 * twice, and (node 0, which hosts the store: srv) connections refused for a wrong secret. */
static void rendezvous_hint(baton_store *st, baton_store_server *srv, long nnodes, char *out, size_t cap) {
    size_t n = 0;
    int listed = 0, more = 0;
    out[0] = '\0';
    for (long k = 0; k < nnodes && k < 4096; k++) {
        char key[64];
        int exists = 1;
        snprintf(key, sizeof key, "launcher/%ld/claimed", k);
        if (baton_store_check(st, key, &exists) < 0) break;
        if (exists) continue;
        if (listed == 8) {
            more++;
            continue;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s%ld", listed ? ", " : " (missing: node rank ", k);
        listed++;
    }
    if (listed && n < cap) n += (size_t)snprintf(out + n, cap - n, more ? " and %d more)" : ")", more);
    int dup = 0;
    if (n < cap && baton_store_check(st, "launcher/duplicate", &dup) == 0 && dup) {
        void *v = NULL;
        size_t vl = 0;
        if (baton_store_get(st, "launcher/duplicate", &v, &vl, 1.0) == 0 && vl < 16 && strspn(v, "0123456789") >= vl)
            n += (size_t)snprintf(out + n, cap - n, " (node rank %.*s was claimed by two launchers)", (int)vl, (char *)v);
        free(v);
    }
    baton__store_stats ss;
    if (srv && n < cap) {
        baton__store_server_stats(srv, &ss);
        if (ss.auth_failed)
            snprintf(out + n, cap - n, " (%llu connection(s) to the store failed to authenticate: is BATON_SECRET the "
                     "same on every launcher?)", (unsigned long long)ss.auth_failed);
    }
}

/* Steps 1-4 of the header comment. Returns 0, or the exit code. */
static int rendezvous(job *j, baton_store *st, baton_store_server *srv, double rdzv_timeout, int sigfd) {
    const run_opts *o = j->o;
    char key[64], val[32];
    int64_t r;
    snprintf(key, sizeof key, "launcher/%ld/claimed", o->node_rank);
    if (baton_store_add(st, key, 1, &r) < 0) goto store_err;
    if (r != 1) {
        fprintf(stderr, "baton run: node rank %ld is already taken by another launcher; give each launcher a distinct "
                "--node-rank in 0..%ld\n", o->node_rank, o->nnodes - 1);
        int vl = snprintf(val, sizeof val, "%ld", o->node_rank);   /* for the others' timeout message */
        baton_store_set(st, "launcher/duplicate", val, (size_t)vl);
        return 1;
    }
    snprintf(key, sizeof key, "launcher/%ld/nproc", o->node_rank);
    int vl = snprintf(val, sizeof val, "%ld", o->nproc);
    if (baton_store_set(st, key, val, (size_t)vl) < 0) goto store_err;
    if (o->node_rank == 0) {
        if (pick_torch_port(o->rdzv_host, &j->torch_port) < 0) return 1;
        vl = snprintf(val, sizeof val, "%d", j->torch_port);
        if (baton_store_set(st, "job/torch_port", val, (size_t)vl) < 0) goto store_err;
        vl = snprintf(val, sizeof val, "%ld", o->nnodes);
        if (baton_store_set(st, "job/nnodes", val, (size_t)vl) < 0) goto store_err;
        if (baton_store_set(st, "job/id", j->job_id, strlen(j->job_id)) < 0) goto store_err;
    }
    if (baton_store_add(st, "launcher/joined", 1, &r) < 0) goto store_err;
    uint64_t deadline = baton__deadline_after(rdzv_timeout);
    int checked_nnodes = o->node_rank == 0;
    for (;;) {
        if (!checked_nnodes) {
            int exists = 0;
            if (baton_store_check(st, "job/nnodes", &exists) < 0) goto store_err;
            if (exists) {
                long nn;
                if (store_long(st, "job/nnodes", &nn) < 0) goto store_err;
                if (nn != o->nnodes) {
                    fprintf(stderr, "baton run: node 0 runs with --nnodes %ld but this launcher (node %ld) with --nnodes "
                            "%ld; pass the same --nnodes to every launcher\n", nn, o->node_rank, o->nnodes);
                    return 1;
                }
                checked_nnodes = 1;
            }
        }
        if (baton_store_add(st, "launcher/joined", 0, &r) < 0) goto store_err;
        if (r >= o->nnodes && checked_nnodes) break;
        int sig = pending_stop_signal(sigfd);
        if (sig) {
            fprintf(stderr, "baton run: got SIG%s while waiting for the other launchers\n", sigabbrev_np(sig));
            return 128 + sig;
        }
        if (baton__now_ns() >= deadline) {
            char hint[512];
            rendezvous_hint(st, srv, o->nnodes, hint, sizeof hint);
            fprintf(stderr, "baton run: only %lld of %ld launchers joined the rendezvous at %s:%d within %.0f s%s; start "
                    "one launcher per node rank 0..%ld (or raise BATON_RDZV_TIMEOUT)\n", (long long)r, o->nnodes,
                    o->rdzv_host, o->rdzv_port, rdzv_timeout, hint, o->nnodes - 1);
            return 1;
        }
        baton__sleep_ns(100000000ull);
    }
    if (r > o->nnodes) {
        fprintf(stderr, "baton run: %lld launchers joined but --nnodes is %ld; pass the same --nnodes to every "
                "launcher\n", (long long)r, o->nnodes);
        return 1;
    }
    for (long k = 0; k < o->nnodes; k++) {
        long np;
        snprintf(key, sizeof key, "launcher/%ld/nproc", k);
        if (store_long(st, key, &np) < 0) goto store_err;
        if (np != o->nproc) {
            fprintf(stderr, "baton run: node %ld runs -n %ld but this launcher (node %ld) runs -n %ld; every node needs "
                    "the same --nproc-per-node\n", k, np, o->node_rank, o->nproc);
            return 1;
        }
    }
    if (o->node_rank != 0) {
        void *v;
        size_t n;
        if (baton_store_get(st, "job/id", &v, &n, 10.0) < 0) goto store_err;
        if (n != 16) {
            free(v);
            fprintf(stderr, "baton run: node 0 published a malformed job id\n");
            return 1;
        }
        memcpy(j->job_id, v, 17);
        free(v);
        long tp;
        if (store_long(st, "job/torch_port", &tp) < 0) goto store_err;
        if (tp < 1 || tp > 65535) {
            fprintf(stderr, "baton run: node 0 published a malformed MASTER_PORT (%ld)\n", tp);
            return 1;
        }
        j->torch_port = (int)tp;
    }
    return 0;
store_err:
    fprintf(stderr, "baton run: rendezvous with the other launchers at %s:%d failed: %s%s\n", o->rdzv_host, o->rdzv_port,
            baton_last_error(), o->node_rank ? " (node 0's launcher, which hosts it, ends the rendezvous when not every "
                                              "node joins within its BATON_RDZV_TIMEOUT: its output says who was missing)" : "");
    return 1;
}

void run_leave_together(baton_store *st, const char *key, int host, long others, double wait_s, int sigfd) {
    int64_t left = 0;
    if (!host) {
        baton_store_add(st, key, 1, &left);
        return;
    }
    uint64_t deadline = baton__deadline_after(wait_s);
    while (left < others && baton__now_ns() < deadline && !pending_stop_signal(sigfd) &&
           baton_store_add(st, key, 0, &left) == 0)
        if (left < others) baton__sleep_ns(10000000ull);
}

static int run_multi_node(job *j, const uint8_t *secret, int sigfd) {
    const run_opts *o = j->o;
    double rdzv_timeout = 300, lost_s;
    if (baton__env_double("BATON_RDZV_TIMEOUT", 300, 0.1, 1e7, &rdzv_timeout) == BATON_EINVAL) {
        fprintf(stderr, "baton run: %s\n", baton_last_error());
        return 2;
    }
    if (run_alive_timeout(&lost_s) < 0) return 2;
    baton_store_server *srv = NULL;
    if (o->node_rank == 0 && start_store(baton_store_listen_host(o->rdzv_host), o->rdzv_port, secret, &srv) < 0) return 1;
    baton_store *st = NULL;
    run_alive *alive = NULL;
    int code = 1;
    if (baton_store_connect(o->rdzv_host, o->rdzv_port, secret, BATON_STORE_SECRET_BYTES, rdzv_timeout, &st) < 0) {
        fprintf(stderr, "baton run: cannot reach the rendezvous store at %s:%d: %s\n", o->rdzv_host, o->rdzv_port,
                baton_last_error());
        goto out;
    }
    code = rendezvous(j, st, srv, rdzv_timeout, sigfd);
    if (code != 0) goto out;
    snprintf(j->store_host, sizeof j->store_host, "%s", o->rdzv_host);
    j->store_port = o->rdzv_port;
    /* from here on every launcher is known to be up: a store that does not answer within the heartbeat's timeout
     * is a lost node 0 (or a lost network to it), and the others' heartbeats tell node 0 who is still there */
    code = 1;
    if (run_alive_start(o->rdzv_host, o->rdzv_port, secret, o->node_rank, o->nnodes, lost_s, &alive) < 0) goto out;
    baton_store_set_io_timeout(st, lost_s);

    j->st = st;
    remote_ctx ctx = {st, o, alive};
    run_group g;
    run_outcome oc;
    int started = run_attempt(j, sigfd, poll_abort, &ctx, &g, &oc) == 0;
    if (!started) {
        memset(&oc, 0, sizeof oc);
        oc.result = RUN_FAILED;
        snprintf(oc.why, sizeof oc.why, "node %ld could not start its workers", o->node_rank);
    }
    if (oc.result == RUN_FAILED || oc.result == RUN_INTERRUPTED) {
        char why[256] = "";
        for (int i = 0; started && i < g.n && !why[0]; i++)
            if (!g.w[i].stopped && !(WIFEXITED(g.w[i].status) && WEXITSTATUS(g.w[i].status) == 0)) {
                char how[96];
                run_describe_status(g.w[i].status, how, sizeof how);
                snprintf(why, sizeof why, "node %ld: rank %d %s", o->node_rank, g.w[i].rank, how);
            }
        if (!why[0] && oc.result == RUN_INTERRUPTED)
            snprintf(why, sizeof why, "node %ld: launcher interrupted by SIG%s", o->node_rank, sigabbrev_np(oc.signo));
        if (!why[0]) snprintf(why, sizeof why, "%s", oc.why);
        if (baton_store_set(st, "job/abort", why, strlen(why)) < 0)
            BATON_WARN("baton run: could not tell the other nodes to stop: %s", baton_last_error());
    }
    if (started) {
        run_group_read_failures(&g, st);
        run_group_report(&g, "");
        show_failed_logs(j, &g);
    }
    if (oc.result == RUN_REMOTE) fprintf(stderr, "baton run: stopped because of another node: %s\n", oc.why);
    run_group_free(&g);
    code = exit_code_for(&oc);

    /* step 6: wait until every launcher is done, so that node 0's store outlives everybody's workers. A node
     * whose job failed adds DONE_FAILED with its 1, so the count that says everyone is done also says whether
     * anyone failed; node 0 then keeps the store up until the others have read the outcome ("job/left"), for the
     * reason of the failure (job/abort) too, bounded by LEAVE_WAIT_S. */
    int64_t done = 0;
    if (run_alive_done(alive, st) == 0 && baton_store_add(st, "job/done", code ? 1 + DONE_FAILED : 1, &done) == 0) {
        uint64_t deadline = baton__deadline_after(DONE_WAIT_S);
        int said = 0;
        while (done % DONE_FAILED < o->nnodes && baton__now_ns() < deadline) {
            if (pending_stop_signal(sigfd)) break;
            if (!said && o->node_rank == 0) {
                BATON_INFO("baton run: node 0 is done; keeping the store up until the other %ld node(s) finish",
                           o->nnodes - (long)(done % DONE_FAILED));
                said = 1;
            }
            char why[256];
            if (run_alive_lost(alive, st, why, sizeof why)) {   /* a node that finished has said so in job/done */
                fprintf(stderr, "baton run: not waiting for the other nodes any more: %s\n", why);
                code = code ? code : 1;
                break;
            }
            baton__sleep_ns(100000000ull);
            if (baton_store_add(st, "job/done", 0, &done) < 0) break;   /* the store is gone */
        }
        int aborted = 0;
        if (code == 0 && baton_store_check(st, "job/abort", &aborted) < 0) aborted = 0;
        if (code == 0 && (done >= DONE_FAILED || aborted)) {
            char why[256] = "another node's launcher failed";
            if (aborted) poll_abort(&ctx, why, sizeof why);
            fprintf(stderr, "baton run: this node's workers succeeded but the job failed elsewhere: %s\n", why);
            code = 1;
        }
        /* the others say they have read the outcome; node 0 waits for that before its store goes */
        if (o->node_rank != 0 || done % DONE_FAILED >= o->nnodes)
            run_leave_together(st, "job/left", o->node_rank == 0, o->nnodes - 1, LEAVE_WAIT_S, sigfd);
    }
out:
    run_alive_stop(alive);
    baton_store_close(st);
    baton_store_server_stop(srv);
    if (j->job_id[0]) remove_shm_leftovers(j->job_id);
    return code;
}

/* ---- entry ----------------------------------------------------------------------------------------- */

int baton_cmd_run(int argc, char **argv) {
    run_opts o;
    int code = run_parse_args(argc, argv, &o);
    if (code >= 0) return code;

    job j;
    memset(&j, 0, sizeof j);
    j.o = &o;
    uint8_t secret[BATON_STORE_SECRET_BYTES];
    if (o.nnodes > 1) {
        const char *hex = getenv("BATON_SECRET");
        if (!hex || !*hex) {
            fprintf(stderr, "baton run: --nnodes %ld needs the same BATON_SECRET on every launcher; e.g. export "
                    "BATON_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n') and copy it to every node\n",
                    o.nnodes);
            return 2;
        }
        if (baton_secret_parse(hex, secret) < 0) {
            fprintf(stderr, "baton run: BATON_SECRET: %s\n", baton_last_error());
            return 2;
        }
    } else if (baton_secret_generate(secret) < 0) {
        fprintf(stderr, "baton run: cannot make a job secret: %s\n", baton_last_error());
        return 1;
    }
    baton_secret_format(secret, j.secret_hex);
    if (o.nnodes == 1 || o.node_rank == 0) {   /* other nodes learn node 0's id at the rendezvous */
        uint8_t rnd[BATON_STORE_SECRET_BYTES];
        char hex[2 * BATON_STORE_SECRET_BYTES + 1];
        if (baton_secret_generate(rnd) < 0) {
            fprintf(stderr, "baton run: cannot make a job id: %s\n", baton_last_error());
            return 1;
        }
        baton_secret_format(rnd, hex);
        memcpy(j.job_id, hex, 16);   /* 64 random bits as 16 hex characters */
        j.job_id[16] = '\0';
    }

    /* the store's thread and every later thread block these; the main thread reads them from a signalfd */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof stop_sigs / sizeof stop_sigs[0]; k++) {
        struct sigaction cur;   /* a signal ignored on entry (nohup, `cmd &` in sh) stays ignored, for workers too */
        if (sigaction(stop_sigs[k], NULL, &cur) == 0 && cur.sa_handler == SIG_IGN) continue;
        sigaddset(&mask, stop_sigs[k]);
    }
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) {
        fprintf(stderr, "baton run: signalfd: %s\n", strerror(errno));
        return 1;
    }
    struct sigaction ign, old_pipe;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old_pipe);
    struct rlimit rl;   /* workers and the store may want many descriptors */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    code = o.elastic ? run_elastic(&j, secret, sigfd)
           : o.nnodes > 1 ? run_multi_node(&j, secret, sigfd) : run_single_node(&j, secret, sigfd);

    /* the signals stay blocked: one that arrives now must not kill us before main() returns the code */
    close(sigfd);
    sigaction(SIGPIPE, &old_pipe, NULL);
    memset(secret, 0, sizeof secret);
    return code;
}
