/* run.h: internals of `baton run` shared by tools/run.c (flags, store, attempts, multi-node) and
 * tools/run_group.c (one attempt's worker processes: spawn, output relay, signals, reaping, stopping).
 *
 *   run_group g;
 *   run_group_spawn(&g, n, ranks, argv, envs, tag, log_fds);   // forks N workers into one process group
 *   run_outcome o = run_group_wait(&g, sigfd, poll_remote, ctx);
 *   run_group_report(&g, "attempt 0: ");       // "baton run: rank 2 exited with code 3", ...
 *   run_group_free(&g);
 */
#ifndef BATON_TOOLS_RUN_H
#define BATON_TOOLS_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rendezvous/store.h"

enum {
    RUN_GRACE_MS = 3000,   /* SIGTERM -> SIGKILL when the launcher stops its workers */
    RUN_SETTLE_MS = 500,   /* after a worker fails, how long the others get to notice and exit on their own
                            * (so that they can say which rank died) before the SIGTERM */
};

typedef struct {
    int len, cap;                 /* bytes buffered / capacity */
    char *buf;                    /* one partial line of a worker's stdout or stderr */
} run_linebuf;

typedef struct {
    int rank;                     /* global rank */
    pid_t pid;
    int running;                  /* not reaped yet */
    int status;                   /* wait status once reaped */
    int stopped;                  /* still running when the launcher began stopping the group */
    uint64_t ended_ns;            /* when it was seen to end (CLOCK_MONOTONIC), 0 while running */
    int frozen;                   /* it (or a process under it) was in the stopped state (SIGSTOP, ^Z, a
                                   * debugger) when the launcher began stopping the group */
    char fail_kind[12];           /* what it posted at baton/fail/<rank> on failing: timeout, peer, mismatch,
                                   * error; "" if nothing (it crashed, failed outside baton, or stayed silent) */
    int fail_peer;                /* the rank it said it waited for, or -1 */
    int join_checked;             /* its clean exit was checked for a join it never made (run_group.c) */
    int fd[2];                    /* relay pipes for stdout / stderr (--tag-output), -1 if none or closed */
    run_linebuf lb[2];
} run_worker;

typedef struct {
    int n;                        /* local workers */
    run_worker *w;
    pid_t pgid;                   /* the workers' process group */
    int tag;                      /* --tag-output */
    int running;                  /* workers not reaped yet */
    baton_store *st;              /* a client of the workers' store for the join watch (run_group.c), or NULL:
                                   * borrowed from the job, set after run_group_spawn */
    uint64_t next_join_watch;     /* when the join watch looks again (CLOCK_MONOTONIC ns) */
} run_group;

typedef enum {
    RUN_OK = 0,                   /* every worker exited 0 */
    RUN_FAILED,                   /* a local worker failed; the rest were stopped */
    RUN_INTERRUPTED,              /* the launcher got SIGINT / SIGTERM / SIGHUP and stopped the workers */
    RUN_REMOTE,                   /* another node reported a failure (or its store vanished); stopped */
} run_result;

typedef struct {
    run_result result;
    int signo;                    /* RUN_INTERRUPTED: the signal received */
    char why[256];                /* RUN_REMOTE: what the other node reported */
} run_outcome;

/* Returns 1 (and fills why) when the job must stop because of something outside this launcher; called
 * about every 250 ms while workers run, if not NULL. */
typedef int (*run_poll_fn)(void *ctx, char *why, size_t why_len);

/* Forks one worker per envs[i] (a NULL-terminated "K=V" array) running argv. Returns 0, or -1 after a
 * message (the workers already started are killed and reaped). */
int run_group_spawn(run_group *g, int n, const int *ranks, char *const argv[], char **const envs[], int tag,
                    const int *log_fds);   /* log_fds: stdout and stderr of each worker (2n), or NULL */
run_outcome run_group_wait(run_group *g, int sigfd, run_poll_fn poll, void *ctx);
/* Prints one line per failed or stopped worker to stderr, each prefixed with prefix, the likely root cause
 * marked "(first failure)". When every rank that failed did so waiting for others (timeouts, dead peers,
 * cancellations) and some rank stayed silent until the launcher stopped it, the silent rank is the cause
 * ("stopped responding"); else one that exited 0 before them and was the peer they lost ("left"); otherwise
 * the first rank to crash or fail on its own, never a canceled one while another failed. Returns how many
 * workers failed on their own. */
int run_group_report(const run_group *g, const char *prefix);
void run_group_free(run_group *g);
/* Reads what the workers posted at baton/fail/<rank> (st may be NULL: nothing is read). */
struct baton_store;
void run_group_read_failures(run_group *g, struct baton_store *st);

/* --log-dir (tools/run_logs.c). run_log_name_check: 0 when s can name a directory (1..64 of [A-Za-z0-9._-]).
 * run_logs_open makes DIR/JOB/attempt_K/RANK/ for each of the n ranks and opens its stdout.log and
 * stderr.log (fds[2i], fds[2i+1]); -1 after a message, nothing left open. run_logs_job_dir: the path of
 * DIR/JOB/attempt_K. run_logs_show_tail: the last `lines` lines of a log, indented, on stderr. */
int run_log_name_check(const char *s);
int run_logs_open(const char *dir, const char *rdzv_id, const char *job_id, int attempt, int n, const int *ranks,
                  int *fds);
void run_logs_close(int *fds, int n);
void run_logs_job_dir(const char *dir, const char *rdzv_id, const char *job_id, int attempt, char *out, size_t cap);
void run_logs_show_tail(const char *path, int lines);

/* "exited with code 3" / "killed by signal 9 (SIGKILL)" */
void run_describe_status(int status, char *out, size_t len);

/* ---- run.c internals shared with run_elastic.c ---- */
typedef struct {
    long nproc, nnodes, node_rank, max_restarts;
    long nnodes_min;              /* --nnodes MIN:MAX: MIN (elastic when given), else nnodes */
    int elastic;
    const char *timeout;          /* --timeout as given (validated), or NULL */
    int tag;
    int have_rdzv;
    char rdzv_host[256];
    int rdzv_port;
    char **prog;                  /* PROGRAM ARGS... (NULL-terminated, from argv) */
    const char *log_dir;          /* --log-dir, or NULL: workers write to the launcher's stdout/stderr */
    const char *rdzv_id;          /* --rdzv-id, or NULL */
} run_opts;

/* run_args.c: parses `baton run`'s flags into o (o->prog points into argv). Returns -1 to go on, or the
 * exit code after printing (0 for --help, 2 for a usage error, with a one-line message). */
int run_parse_args(int argc, char **argv, run_opts *o);

typedef struct {
    const run_opts *o;
    char secret_hex[2 * BATON_STORE_SECRET_BYTES + 1];
    char job_id[17];
    char store_host[256];         /* what workers connect to */
    int store_port;
    int torch_port;               /* MASTER_PORT: free for torch.distributed's own store (rank 0 binds it) */
    int restart;
    baton_store *st;              /* a client of the workers' store, or NULL (no join watch): the caller's */
} job;

int run_attempt(job *j, int sigfd, run_poll_fn poll, void *ctx, run_group *g, run_outcome *out);
int exit_code_for(const run_outcome *oc);
int start_store(const char *host, int port, const uint8_t *secret, baton_store_server **srv);
int pick_torch_port(const char *host, int *port);
void remove_shm_leftovers(const char *job_id);
int pending_stop_signal(int sigfd);
/* At the end of a multi-node job (or an elastic round): a launcher that is not the store's host adds 1 to key,
 * saying it no longer needs the store; the host waits until `others` have (at most wait_s, or until a stop
 * signal) before its store goes, so that nobody loses it before reading the outcome. */
void run_leave_together(baton_store *st, const char *key, int host, long others, double wait_s, int sigfd);
/* run_alive.c: the launchers of a multi-node job watch each other (BATON_NODE_TIMEOUT). run_alive_timeout reads
 * it (-1 after a message). run_alive_start (on every node but 0) connects a store client of its own and starts
 * a thread that bumps this launcher's heartbeat every second (-1 after a message). run_alive_lost (node 0
 * only; 0 elsewhere) reads the other launchers' heartbeats through st, at most once a second, and returns 1
 * with why filled when one has not moved for the timeout and its node has not said it is done. run_alive_stop
 * (NULL is a no-op) stops the thread and frees. */
typedef struct run_alive run_alive;
int run_alive_timeout(double *lost_s);
int run_alive_start(const char *host, int port, const uint8_t *secret, long node_rank, long nnodes, double lost_s,
                    run_alive **out);
/* The same for one elastic round (run_elastic.c): keys under prefix ("elastic/K"), node_rank the round's, and the
 * watcher (it reads the others' beats and does not beat) the launcher that hosts the store, whatever its rank. */
int run_alive_start_as(const char *host, int port, const uint8_t *secret, const char *prefix, long node_rank,
                       long nnodes, int watcher, double lost_s, run_alive **out);
int run_alive_lost(run_alive *a, baton_store *st, char *why, size_t len);
/* run_alive_done (every node but 0): says through st that this node's workers are done, so that node 0 does not
 * count its launcher lost once it stops beating (it may leave before node 0's workers finish). */
int run_alive_done(run_alive *a, baton_store *st);
void run_alive_stop(run_alive *a);
/* run_elastic.c: --nnodes MIN:MAX */
int run_elastic(job *j, const uint8_t *secret, int sigfd);

#endif
