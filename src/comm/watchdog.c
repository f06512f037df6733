/* watchdog.c: the stall warning. A thread per communicator (world > 1) looks four times a second at the
 * collective running on this rank; once it has waited stall_warn_s (and again every stall_warn_s after),
 * it logs which ranks have not reached it, without stopping the job:
 *
 *   baton[rank 0] warn: allreduce #17 (1024 x f32, sum) has waited 60 s; not reached by rank 2 (at #16);
 *   reached by ranks 1, 3
 *
 * Ranks of this node are read from shared memory (what each announced last); the others through the
 * store: a stalled rank publishes where it waits ("baton/at/<rank>"), so a rank with no entry for this
 * collective has not reached it (or is stuck before it). The watchdog keeps its own store connection. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "util/util.h"

static int store_where(baton_store *st, int r, uint64_t *seq) {
    char key[64];
    snprintf(key, sizeof key, "baton/at/%d", r);
    int exists = 0;
    if (baton_store_check(st, key, &exists) < 0 || !exists) return 0;
    void *v = NULL;
    size_t len = 0;
    if (baton_store_get(st, key, &v, &len, 0.5) < 0) return 0;
    *seq = strtoull((char *)v, NULL, 10);
    free(v);
    return 1;
}

static void warn_stall(baton_comm *c, baton_store **st, const baton_coll_desc *d, double waited) {
    char key[64], val[32];
    if (!*st && c->store_port > 0)
        baton_store_connect(c->store_host, c->store_port, c->secret, sizeof c->secret, 5.0, st);
    if (*st) {
        snprintf(key, sizeof key, "baton/at/%d", c->rank);
        snprintf(val, sizeof val, "%llu", (unsigned long long)d->seq);
        baton_store_set(*st, key, val, strlen(val));
    }
    char behind[512] = "", there[256] = "";
    size_t bl = 0, tl = 0;
    int nthere = 0;
    for (int r = 0; r < c->world && bl < sizeof behind - 48 && tl < sizeof there - 16; r++) {
        if (r == c->rank) continue;
        uint64_t at = 0;
        int known = 0;
        if (c->shm && c->g2l[r] >= 0) {
            at = atomic_load_explicit(&baton__shm_rank_block(c->shm, c->g2l[r])->announced, memory_order_acquire);
            known = 1;
        } else if (*st) {
            known = store_where(*st, r, &at);
        }
        if (known && at >= d->seq) {
            tl += (size_t)snprintf(there + tl, sizeof there - tl, "%s%d", tl ? ", " : "", r);
            nthere++;
        } else if (known) {
            bl += (size_t)snprintf(behind + bl, sizeof behind - bl, "%srank %d (at #%llu)", bl ? ", " : "", r,
                                   (unsigned long long)at);
        } else {
            bl += (size_t)snprintf(behind + bl, sizeof behind - bl, "%srank %d (no report)", bl ? ", " : "", r);
        }
    }
    char what[128];
    baton__desc_format(d, what, sizeof what);
    if (bl)
        BATON_WARN("%s has waited %.1f s; not reached by %s%s%s%s", what, waited, behind, nthere ? "; reached by rank" : "",
                   nthere > 1 ? "s " : nthere ? " " : "", there);
    else
        BATON_WARN("%s has waited %.1f s; every rank has reached it, it is still running", what, waited);
}

static void *watchdog_main(void *arg) {
    baton_comm *c = arg;
    baton_store *st = NULL;
    uint64_t warned_seq = 0, next_warn = 0;
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->stopping) break;
        uint64_t seq = atomic_load_explicit(&c->running_seq, memory_order_acquire);
        if (!seq) continue;
        uint64_t since = atomic_load_explicit(&c->running_since, memory_order_relaxed), now = baton__now_ns();
        double waited = (double)(now - since) / 1e9;
        if (waited < c->stall_s) continue;
        if (seq != warned_seq) warned_seq = seq, next_warn = 0;
        if (now < next_warn) continue;
        next_warn = now + (uint64_t)(c->stall_s * 1e9);
        uint8_t packed[BATON_DESC_BYTES];
        for (int i = 0; i < BATON_DESC_BYTES / 8; i++) {
            uint64_t w = atomic_load_explicit(&c->running_desc[i], memory_order_relaxed);
            memcpy(packed + 8 * i, &w, 8);
        }
        baton_coll_desc d;
        if (baton__desc_unpack(packed, &d) < 0 || d.seq != seq) continue;   /* changed under us */
        if (atomic_load_explicit(&c->running_seq, memory_order_acquire) != seq) continue;
        pthread_mutex_unlock(&c->mu);
        warn_stall(c, &st, &d, waited);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    baton_store_close(st);
    return NULL;
}

int baton__watchdog_start(baton_comm *c) {
    c->stall_s = c->opt.stall_warn_s;
    if (c->world < 2 || !(c->stall_s > 0)) return BATON_OK;
    if (pthread_create(&c->watchdog, NULL, watchdog_main, c) != 0)
        return baton__fail(BATON_ESYS, "cannot start the stall watchdog thread");
    c->watchdog_started = 1;
    return BATON_OK;
}

void baton__watchdog_stop(baton_comm *c) {
    if (!c->watchdog_started) return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->watchdog, NULL);
    c->watchdog_started = 0;
}
