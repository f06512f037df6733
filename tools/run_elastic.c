/* run_elastic.c: `baton run --nnodes MIN:MAX`, elastic multi-node runs (docs/rendezvous.md, "Elastic").
 *
 * The launcher with --node-rank 0 hosts the rendezvous store at --rdzv for the whole job (it must stay up;
 * the other launchers may come and go). The job runs in rounds k = 0, 1, ...; in each:
 *   1. every launcher joins: ADD "elastic/k/joined" gives its slot (join order, from 1);
 *   2. the host starts a fresh worker store for the round (so a round never sees an older one's keys) and
 *      publishes its port, a new job id and MASTER_PORT under elastic/k/;
 *   3. the round closes when MAX launchers joined, or at least MIN and nobody joined for ELASTIC_SETTLE_MS:
 *      the first launcher to see that (ADD "elastic/k/closer" == 1) writes "elastic/k/size"; launchers with
 *      a slot beyond it wait for the next round;
 *   4. a member takes node rank slot - 1 of `size` nodes, starts its workers (BATON_RESTART_COUNT = k) and
 *      polls: "elastic/k/abort" (a node's workers failed, or a launcher left: its workers die with it, the
 *      peers' collectives fail) or "elastic/<k+1>/joined" (a launcher waits to join) stops the round;
 *      The host also reads the others' heartbeats for the round (run_alive.c, "elastic/k/R/beat"): a node
 *      silent for BATON_NODE_TIMEOUT that has not said it is done ("elastic/k/R/done") stops the round too,
 *      as a failed one does, so the nodes left go on without it;
 *   5. a round whose workers all succeed on every node ends the job ("elastic/k/done" counts them, then
 *      "elastic/complete" tells launchers waiting to join that there is nothing left to join);
 *      otherwise every launcher left goes on to round k + 1, at most --max-restarts times.
 * A join request and the end of the job can cross: one node's workers finish while another node sees the
 * request. The round's verdict settles it, once: the first launcher to claim "elastic/k/verdict" (ADD on
 * elastic/k/verdict_claim) sets it to "join" (it saw the request first: the round stops everywhere) or
 * "finish" (its workers finished first: every launcher ignores join requests from then on, the job ends).
 * Workers resume from their last checkpoint with the new world size (baton train --checkpoint --resume
 * converts the position and learning rate: docs/checkpoints.md). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "run.h"
#include "util/util.h"

enum { ELASTIC_SETTLE_MS = 2000, ELASTIC_DONE_WAIT_S = 600, ELASTIC_LEAVE_S = 10 };

typedef struct {
    baton_store *st;
    long round, size, max;
    int finishing;   /* the round's verdict is "finish": join requests are ignored */
    run_alive *alive; /* the round's heartbeats (run_alive.c): the host reads them, the others beat */
} elastic_ctx;

static int key_exists(baton_store *st, const char *key, int *exists) { return baton_store_check(st, key, exists); }

static int get_long(baton_store *st, const char *key, double timeout, long *out) {
    void *v;
    size_t n;
    int rc = baton_store_get(st, key, &v, &n, timeout);
    if (rc < 0) return rc;
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < 31 ? n : 31), (char *)v);
    free(v);
    return baton__parse_long(buf, 0, 1L << 40, out);
}

static int set_long(baton_store *st, const char *key, long v) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", v);
    return baton_store_set(st, key, buf, (size_t)n);
}

/* The round's verdict, claimed as `mine` ('j' join, 'f' finish) if nobody claimed it first: returns 'j' or
 * 'f', or -1 on a store failure. */
static int round_verdict(elastic_ctx *c, char mine) {
    char ck[64], vk[64];
    snprintf(ck, sizeof ck, "elastic/%ld/verdict_claim", c->round);
    snprintf(vk, sizeof vk, "elastic/%ld/verdict", c->round);
    int64_t n;
    if (baton_store_add(c->st, ck, 1, &n) < 0) return -1;
    if (n == 1) return baton_store_set(c->st, vk, &mine, 1) < 0 ? -1 : mine;
    void *v = NULL;
    size_t len = 0;
    if (baton_store_get(c->st, vk, &v, &len, 30.0) < 0) return -1;
    int r = len == 1 && *(char *)v == 'f' ? 'f' : 'j';
    free(v);
    return r;
}

static int poll_elastic(void *p, char *why, size_t len) {
    elastic_ctx *c = p;
    char key[64];
    int exists = 0;
    snprintf(key, sizeof key, "elastic/%ld/abort", c->round);
    if (run_alive_lost(c->alive, c->st, why, len)) {   /* a silent node: the round stops everywhere */
        if (baton_store_set(c->st, key, why, strlen(why)) < 0) BATON_WARN("baton run: could not tell the other nodes");
        return 1;
    }
    if (key_exists(c->st, key, &exists) < 0) {
        snprintf(why, len, "lost the rendezvous store (%s); did the --node-rank 0 launcher die?", baton_last_error());
        return 1;
    }
    if (exists) {
        void *v = NULL;
        size_t n = 0;
        if (baton_store_get(c->st, key, &v, &n, 1.0) == 0) snprintf(why, len, "%.*s", (int)n, (char *)v);
        else snprintf(why, len, "another node stopped");
        free(v);
        return 1;
    }
    snprintf(key, sizeof key, "elastic/%ld/joined", c->round + 1);   /* room for a launcher that waits */
    if (!c->finishing && c->size < c->max && key_exists(c->st, key, &exists) == 0 && exists) {
        int v = round_verdict(c, 'j');
        if (v == 'f') {   /* a node finished first: the job ends in this round */
            c->finishing = 1;
            return 0;
        }
        if (v < 0) snprintf(why, len, "lost the rendezvous store (%s); did the --node-rank 0 launcher die?", baton_last_error());
        else snprintf(why, len, "a launcher is waiting to join");
        return 1;
    }
    return 0;
}

/* The job is done: launchers waiting to join round k + 1 are told so, and the round's other launchers say they
 * have seen the count of done nodes complete ("elastic/k/left"); the host keeps the store up until both have
 * happened (at most ELASTIC_SETTLE_MS for the first, ELASTIC_LEAVE_S for the second): a launcher that lost the
 * store before it saw the count complete cannot tell a finished job from a failed host, and says it failed. */
static void finish_job(baton_store *st, int host, long k, long size, int sigfd) {
    char jk[64], lk[64];
    snprintf(lk, sizeof lk, "elastic/%ld/left", k);
    if (baton_store_set(st, "elastic/complete", "1", 1) < 0) return;
    if (host) {
        snprintf(jk, sizeof jk, "elastic/%ld/joined", k + 1);
        uint64_t deadline = baton__deadline_after(ELASTIC_SETTLE_MS / 1000.0);
        while (baton__now_ns() < deadline) {
            int64_t waiting = 0, seen = 0;
            if (baton_store_add(st, jk, 0, &waiting) < 0 || baton_store_add(st, "elastic/complete_seen", 0, &seen) < 0)
                return;
            if (seen >= waiting) break;
            baton__sleep_ns(50000000ull);
        }
    }
    run_leave_together(st, lk, host, size - 1, ELASTIC_LEAVE_S, sigfd);
}

/* Host: a fresh worker store, job id and MASTER_PORT for round k. */
static int host_round(job *j, const uint8_t *secret, baton_store *st, long k, baton_store_server **srv) {
    const run_opts *o = j->o;
    char key[64];
    uint8_t rnd[BATON_STORE_SECRET_BYTES];
    char hex[2 * BATON_STORE_SECRET_BYTES + 1];
    int tp;
    if (start_store(baton_store_listen_host(o->rdzv_host), 0, secret, srv) < 0 || pick_torch_port(o->rdzv_host, &tp) < 0 ||
        baton_secret_generate(rnd) < 0)
        return -1;
    baton_secret_format(rnd, hex);
    snprintf(key, sizeof key, "elastic/%ld/job_id", k);
    if (baton_store_set(st, key, hex, 16) < 0) return -1;
    snprintf(key, sizeof key, "elastic/%ld/torch_port", k);
    if (set_long(st, key, tp) < 0) return -1;
    snprintf(key, sizeof key, "elastic/%ld/store_port", k);
    return set_long(st, key, baton_store_server_port(*srv));
}

/* Joins round k and waits for it to close. Returns 1 with *slot and *size (a member when slot <= size), 2 when
 * the job finished meanwhile, 0 on a stop signal (*sig), -1 on a store failure or timeout (after a message). */
static int join_round(baton_store *st, const run_opts *o, long k, double timeout, int sigfd, long *slot, long *size,
                      int *sig) {
    char jk[64], sk[64], ck[64];
    snprintf(jk, sizeof jk, "elastic/%ld/joined", k);
    snprintf(sk, sizeof sk, "elastic/%ld/size", k);
    snprintf(ck, sizeof ck, "elastic/%ld/closer", k);
    int64_t r, last = -1;
    if (baton_store_add(st, jk, 1, &r) < 0) return -1;
    *slot = (long)r;
    uint64_t changed = baton__now_ns(), deadline = baton__deadline_after(timeout);
    for (;;) {
        int exists = 0;
        if (key_exists(st, sk, &exists) < 0) return -1;
        if (exists) return get_long(st, sk, 10.0, size) < 0 ? -1 : 1;
        if (key_exists(st, "elastic/complete", &exists) < 0) return -1;
        if (exists) {
            int64_t seen;
            return baton_store_add(st, "elastic/complete_seen", 1, &seen) < 0 ? -1 : 2;
        }
        if (baton_store_add(st, jk, 0, &r) < 0) return -1;
        if (r != last) last = r, changed = baton__now_ns();
        int settled = baton__now_ns() - changed >= (uint64_t)ELASTIC_SETTLE_MS * 1000000ull;
        if (r >= o->nnodes || (r >= o->nnodes_min && settled)) {
            int64_t c;
            if (baton_store_add(st, ck, 1, &c) < 0) return -1;
            if (c == 1) {
                if (baton_store_add(st, jk, 0, &r) < 0) return -1;
                if (set_long(st, sk, r > o->nnodes ? o->nnodes : (long)r) < 0) return -1;
            }
            continue;
        }
        if ((*sig = pending_stop_signal(sigfd))) return 0;
        if (baton__now_ns() >= deadline) {
            fprintf(stderr, "baton run: round %ld: only %lld launcher(s) joined within %.0f s, fewer than --nnodes "
                    "minimum %ld\n", k, (long long)r, timeout, o->nnodes_min);
            return -1;
        }
        baton__sleep_ns(100000000ull);
    }
}

int run_elastic(job *j, const uint8_t *secret, int sigfd) {
    const run_opts *o = j->o;
    int host = o->node_rank == 0, code = 1;
    double rdzv_timeout = 300;
    if (baton__env_double("BATON_RDZV_TIMEOUT", 300, 0.1, 1e7, &rdzv_timeout) == BATON_EINVAL) {
        fprintf(stderr, "baton run: %s\n", baton_last_error());
        return 2;
    }
    double lost_s;
    if (run_alive_timeout(&lost_s) < 0) return 2;
    baton_store_server *rdzv = NULL, *wsrv = NULL;
    baton_store *st = NULL;
    run_alive *alive = NULL;
    if (host && start_store(baton_store_listen_host(o->rdzv_host), o->rdzv_port, secret, &rdzv) < 0) return 1;
    if (baton_store_connect(o->rdzv_host, o->rdzv_port, secret, BATON_STORE_SECRET_BYTES, rdzv_timeout, &st) < 0) {
        fprintf(stderr, "baton run: cannot reach the rendezvous store at %s:%d: %s\n", o->rdzv_host, o->rdzv_port,
                baton_last_error());
        goto out;
    }
    /* a launcher that arrives late starts at the round in progress (and asks to join the next one) */
    long k = 0, restarts = 0;
    int exists = 0;
    if (!host && key_exists(st, "elastic/round", &exists) == 0 && exists && get_long(st, "elastic/round", 10, &k) < 0)
        goto store_err;
    run_opts ro = *o;
    job rj = *j;
    rj.o = &ro;
    for (;; k++) {
        if (host) {
            baton_store_server_stop(wsrv);
            wsrv = NULL;
            if (set_long(st, "elastic/round", k) < 0 || host_round(j, secret, st, k, &wsrv) < 0) goto store_err;
        }
        long slot, size;
        int sig = 0, jr = join_round(st, o, k, rdzv_timeout, sigfd, &slot, &size, &sig);
        if (jr == 0) {
            code = 128 + sig;
            goto out;
        }
        if (jr < 0) goto store_err;
        if (jr == 2) {
            fprintf(stderr, "baton run: the job finished before this launcher could join it; nothing to do\n");
            code = 0;
            goto out;
        }
        if (slot > size) {   /* late for this round: it stops for us (poll_elastic) and we join the next */
            fprintf(stderr, "baton run: round %ld is full (%ld nodes); joining the next one\n", k, size);
            continue;
        }
        char key[64];
        long port, tp;
        void *v;
        size_t n;
        snprintf(key, sizeof key, "elastic/%ld/store_port", k);
        if (get_long(st, key, rdzv_timeout, &port) < 0) goto store_err;
        snprintf(key, sizeof key, "elastic/%ld/torch_port", k);
        if (get_long(st, key, rdzv_timeout, &tp) < 0) goto store_err;
        snprintf(key, sizeof key, "elastic/%ld/job_id", k);
        if (baton_store_get(st, key, &v, &n, rdzv_timeout) < 0) goto store_err;
        snprintf(rj.job_id, sizeof rj.job_id, "%.*s", (int)(n < 16 ? n : 16), (char *)v);
        free(v);
        ro.node_rank = slot - 1;
        ro.nnodes = size;
        rj.restart = (int)k;
        rj.torch_port = (int)tp;
        rj.store_port = (int)port;
        snprintf(rj.store_host, sizeof rj.store_host, "%s", o->rdzv_host);
        fprintf(stderr, "baton run: round %ld: node %ld of %ld, world size %ld\n", k, ro.node_rank, size, size * o->nproc);

        char prefix[32];
        snprintf(prefix, sizeof prefix, "elastic/%ld", k);
        run_alive_stop(alive);   /* the last round's */
        alive = NULL;
        if (run_alive_start_as(o->rdzv_host, o->rdzv_port, secret, prefix, ro.node_rank, size, host, lost_s, &alive) < 0)
            goto out;
        elastic_ctx ctx = {st, k, size, o->nnodes, 0, alive};
        run_group g;
        run_outcome oc;
        /* a client of the round's worker store: the join watch (run_group.c) */
        rj.st = NULL;
        if (baton_store_connect(rj.store_host, rj.store_port, secret, BATON_STORE_SECRET_BYTES, 5.0, &rj.st) < 0) {
            BATON_DEBUG("baton run: no client of round %ld's store (%s): no join watch", k, baton_last_error());
            rj.st = NULL;
        }
        int started = run_attempt(&rj, sigfd, poll_elastic, &ctx, &g, &oc) == 0;
        baton_store_close(rj.st);
        rj.st = NULL;
        if (!started) {
            memset(&oc, 0, sizeof oc);
            oc.result = RUN_FAILED;
        }
        if (oc.result == RUN_FAILED) {   /* tell the other nodes to stop and regroup */
            char why[256];
            snprintf(why, sizeof why, "node %ld's workers failed in round %ld", ro.node_rank, k);
            snprintf(key, sizeof key, "elastic/%ld/abort", k);
            if (baton_store_set(st, key, why, strlen(why)) < 0) BATON_WARN("baton run: could not tell the other nodes");
        }
        if (started) {
            run_group_read_failures(&g, NULL);
            run_group_report(&g, "");
            run_group_free(&g);
        }
        remove_shm_leftovers(rj.job_id);
        if (oc.result == RUN_INTERRUPTED) {
            code = exit_code_for(&oc);
            goto out;
        }
        if (oc.result == RUN_OK) {   /* done here; the job is done when every node of the round is */
            int v = round_verdict(&ctx, 'f');
            if (v < 0) goto store_err;
            if (v == 'j') {   /* a join request came first: the round stops on every node */
                oc.result = RUN_REMOTE;
                snprintf(oc.why, sizeof oc.why, "a launcher is waiting to join");
            }
        }
        if (oc.result == RUN_OK) {
            ctx.finishing = 1;
            run_alive_done(ctx.alive, st);   /* done: this node may leave without being counted lost */
            int64_t done = 0;
            snprintf(key, sizeof key, "elastic/%ld/done", k);
            if (baton_store_add(st, key, 1, &done) < 0) goto store_err;
            uint64_t deadline = baton__deadline_after(ELASTIC_DONE_WAIT_S);
            char why[256];
            int stop = 0;
            int lost = 0;
            while (done < size && baton__now_ns() < deadline && !(stop = poll_elastic(&ctx, why, sizeof why))) {
                baton__sleep_ns(100000000ull);
                if (baton_store_add(st, key, 0, &done) < 0) {
                    lost = 1;   /* the host waits for everybody to have seen the count complete: it failed or died */
                    break;
                }
            }
            if (!stop && done >= size) {
                code = 0;
                finish_job(st, host, k, size, sigfd);
                goto out;
            }
            if (!stop) {   /* never a success: the job is done only when every node of the round is */
                fprintf(stderr, "baton run: round %ld: this node's workers are done, but %s before every node was (%lld "
                        "of %ld)\n", k, lost ? "the rendezvous store went away" : "the wait timed out",
                        (long long)done, size);
                code = 1;
                goto out;
            }
            oc.result = RUN_REMOTE;
            snprintf(oc.why, sizeof oc.why, "%s", why);
        }
        fprintf(stderr, "baton run: round %ld ended (%s); re-rendezvous with the nodes that are left\n", k,
                oc.result == RUN_REMOTE ? oc.why : "this node's workers failed");
        if (++restarts > o->max_restarts) {
            fprintf(stderr, "baton run: giving up after %ld restart(s) (--max-restarts %ld)\n", restarts - 1,
                    o->max_restarts);
            code = 1;
            goto out;
        }
    }
store_err:
    fprintf(stderr, "baton run: elastic rendezvous at %s:%d failed: %s\n", o->rdzv_host, o->rdzv_port,
            baton_last_error());
    code = 1;
out:
    run_alive_stop(alive);
    baton_store_close(st);
    baton_store_server_stop(wsrv);
    baton_store_server_stop(rdzv);
    return code;
}
