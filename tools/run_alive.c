/* run_alive.c: the launchers of a multi-node job (`baton run --nnodes M`) tell each other they are alive.
 *
 * Without it a launcher learns that another node is gone only from that node's workers (a reset connection
 * when the node's processes die and its kernel answers) or from the store (node 0's): a node that loses
 * power or its network answers nothing, and node 0's launcher waited up to 600 s for it to say it was done,
 * the others up to the store's 300 s I/O timeout (docs/cluster.md, "When a node is lost").
 *
 * Every launcher but node 0's runs a thread that adds 1 to "launcher/R/beat" every BEAT_S over a store
 * connection of its own (the main thread's one may be inside a long request, and spawning hundreds of workers
 * takes seconds). Node 0's own liveness needs no beat: its store answering is it.
 * Node 0's launcher, which hosts the store, reads the others' counters at most once per BEAT_S from its main
 * loop and calls a node lost once its counter has not moved for BATON_NODE_TIMEOUT seconds (default 30)
 * and the node has not said its workers are done ("launcher/R/done": a node that is done may leave).
 * The other launchers bound every store request by the same time (baton_store_set_io_timeout), so that a
 * node cut off from node 0 stops its workers after it instead of after 300 s. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"
#include "util/util.h"

enum { BEAT_S = 1 };

struct run_alive {
    baton_store *st;          /* the beat thread's own connection */
    char prefix[48];          /* keys are PREFIX/R/beat and PREFIX/R/done: "launcher", or "elastic/K" for a round */
    long node_rank, nnodes;
    int watcher;              /* this launcher hosts the store: it reads the others' beats and beats not itself */
    double lost_s;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    /* node 0's view of the others, read from its main thread */
    int64_t *seen;            /* each node's last counter value (-1: not read yet) */
    uint64_t *moved;          /* when it last changed (monotonic ns) */
    char *done;               /* the node said it is done ("launcher/R/done"): it may leave, silence is no loss */
    uint64_t next_check;
};

int run_alive_timeout(double *lost_s) {
    int rc = baton__env_double("BATON_NODE_TIMEOUT", 30, 1, 86400, lost_s);
    if (rc == BATON_EINVAL) {
        fprintf(stderr, "baton run: %s\n", baton_last_error());
        return -1;
    }
    return 0;
}

static void *beat_main(void *p) {
    run_alive *a = p;
    char key[96];
    snprintf(key, sizeof key, "%s/%ld/beat", a->prefix, a->node_rank);
    pthread_mutex_lock(&a->mu);
    while (!a->stop) {
        pthread_mutex_unlock(&a->mu);
        int64_t v;
        int rc = baton_store_add(a->st, key, 1, &v);
        pthread_mutex_lock(&a->mu);
        if (rc < 0) break;   /* the store is gone: the main thread's own requests will say so */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);   /* the condition variable's clock */
        ts.tv_sec += BEAT_S;
        while (!a->stop && pthread_cond_timedwait(&a->cv, &a->mu, &ts) == 0) {}
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int run_alive_start(const char *host, int port, const uint8_t *secret, long node_rank, long nnodes, double lost_s,
                    run_alive **out) {
    return run_alive_start_as(host, port, secret, "launcher", node_rank, nnodes, node_rank == 0, lost_s, out);
}

int run_alive_start_as(const char *host, int port, const uint8_t *secret, const char *prefix, long node_rank,
                       long nnodes, int watcher, double lost_s, run_alive **out) {
    *out = NULL;
    run_alive *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "baton run: out of memory\n");
        return -1;
    }
    snprintf(a->prefix, sizeof a->prefix, "%s", prefix);
    a->node_rank = node_rank;
    a->watcher = watcher;
    a->nnodes = nnodes;
    a->lost_s = lost_s;
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* a wall-clock step must not stretch or skip a beat */
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (watcher) {
        a->seen = malloc((size_t)nnodes * sizeof *a->seen);
        a->moved = malloc((size_t)nnodes * sizeof *a->moved);
        a->done = calloc((size_t)nnodes, 1);
        if (!a->seen || !a->moved || !a->done) {
            fprintf(stderr, "baton run: out of memory\n");
            run_alive_stop(a);
            return -1;
        }
        uint64_t now = baton__now_ns();
        for (long r = 0; r < nnodes; r++) {
            a->seen[r] = -1;
            a->moved[r] = now;
        }
        *out = a;   /* no beat of its own: its store answering is node 0's sign of life */
        return 0;
    }
    if (baton_store_connect(host, port, secret, BATON_STORE_SECRET_BYTES, lost_s, &a->st) < 0) {
        fprintf(stderr, "baton run: cannot reach the rendezvous store at %s:%d for the launchers' heartbeat: %s\n",
                host, port, baton_last_error());
        run_alive_stop(a);
        return -1;
    }
    baton_store_set_io_timeout(a->st, lost_s);
    if (pthread_create(&a->thread, NULL, beat_main, a) != 0) {
        fprintf(stderr, "baton run: cannot start the launchers' heartbeat thread\n");
        run_alive_stop(a);
        return -1;
    }
    a->started = 1;
    *out = a;
    return 0;
}

int run_alive_lost(run_alive *a, baton_store *st, char *why, size_t len) {
    if (!a || !a->watcher) return 0;
    uint64_t now = baton__now_ns();
    if (now < a->next_check) return 0;
    a->next_check = now + BEAT_S * 1000000000ull;
    for (long r = 0; r < a->nnodes; r++) {
        char key[96];
        int64_t v;
        int exists = 0;
        if (r == a->node_rank || a->done[r]) continue;
        snprintf(key, sizeof key, "%s/%ld/beat", a->prefix, r);
        if (baton_store_add(st, key, 0, &v) < 0) return 0;   /* node 0's own store failing: not a lost node */
        if (v != a->seen[r]) {
            a->seen[r] = v;
            a->moved[r] = now;
            continue;
        }
        if ((double)(now - a->moved[r]) / 1e9 < a->lost_s) continue;
        /* silent for the timeout: a node whose workers are done may have left (its wait at the end is bounded,
         * and a stop signal ends it), which must not stop node 0's workers, still at work (saving, evaluating) */
        snprintf(key, sizeof key, "%s/%ld/done", a->prefix, r);
        if (baton_store_check(st, key, &exists) < 0) return 0;
        if (exists) {
            a->done[r] = 1;
        } else {
            snprintf(why, len, "node %ld's launcher has not been heard from for %.0f s (BATON_NODE_TIMEOUT): the node "
                     "died or the network between it and node 0 is down", r, (double)(now - a->moved[r]) / 1e9);
            return 1;
        }
    }
    return 0;
}

int run_alive_done(run_alive *a, baton_store *st) {
    if (!a || a->watcher) return 0;
    char key[96];
    snprintf(key, sizeof key, "%s/%ld/done", a->prefix, a->node_rank);
    return baton_store_set(st, key, "1", 1);
}

void run_alive_stop(run_alive *a) {
    if (!a) return;
    if (a->started) {
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        baton_store_interrupt(a->st);   /* a beat stuck in a request to a store that is gone would hold the join
                                         * for up to BATON_NODE_TIMEOUT */
        pthread_join(a->thread, NULL);
    }
    baton_store_close(a->st);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a->seen);
    free(a->moved);
    free(a->done);
    free(a);
}
