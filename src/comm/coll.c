/* coll.c: the public collectives. Argument checks, the choice of algorithm (one switch per collective),
 * and the asynchronous FIFO run by the communicator's comm thread (shared-memory buffers: buffers.c).
 *
 * Choice (BATON_ALGO_AUTO), see docs/algorithms.md:
 *   one node, shared memory:  direct (small path up to 32 KiB, staged or zero-copy above)
 *   tcp, one node or flat:    recursive doubling up to rd_max bytes, ring above
 *   several nodes:            hierarchical (hier.c): reduce-scatter inside each node, every local rank
 *                             ring-all-reduces its slice across nodes, all-gather inside each node,
 *                             pipelined by segments
 * With a calibration (BATON_TUNING, autotune.c) one node takes the algorithm its fits predict fastest. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/algo.h"
#include "comm/comm_internal.h"
#include "comm/reduce.h"
#include "util/util.h"

/* p2p all-reduce: recursive doubling (halving-doubling from 32 KiB, inside baton__allreduce_rd) up to here,
 * ring above. Measured over TCP (docs/algorithms.md): with 2 ranks rd and ring meet near 64 KiB; with 4,
 * halving-doubling wins up to about 1 MiB. */
static size_t rd_max_bytes(int n) { return n <= 2 ? (size_t)64 << 10 : (size_t)1 << 20; }

static baton_group flat_group(baton_comm *c, baton_transport *t, uint64_t deadline) {
    baton_group g = {.t = t, .n = c->world, .me = c->rank, .ranks = NULL, .deadline_ns = deadline, .scratch = &c->scratch};
    return g;
}

/* The p2p transport for flat algorithms: TCP when there is one, else shared memory. */
static baton_transport *p2p(baton_comm *c) { return c->tcp ? c->tcp : c->shm_tp; }

static baton_algo fixed_allreduce(baton_comm *c, size_t bytes) {
    if (c->nnodes > 1 && (c->local_size > 1 || c->world > c->nnodes)) return BATON_ALGO_HIER;
    if (c->shm && !c->tcp) return BATON_ALGO_DIRECT;
    return bytes <= rd_max_bytes(c->world) ? BATON_ALGO_RD : BATON_ALGO_RING;
}

static baton_algo choose_allreduce(baton_comm *c, size_t bytes) {
    if (c->algo != BATON_ALGO_AUTO) return c->algo;
    baton_algo fixed = fixed_allreduce(c, bytes);
    baton_algo tuned = baton__autotune_choose(c, bytes, fixed);
    return tuned != BATON_ALGO_AUTO ? tuned : fixed;
}

static int unsupported(baton_comm *c, const char *coll, baton_algo a) {
    return baton__fail(BATON_EUNSUPPORTED, "%s: algorithm '%s' cannot run on transport %s with %d node(s)", coll,
                       baton_algo_name(a), baton_transport_name(c->transport), c->nnodes);
}

static int exec_allreduce(baton_comm *c, const coll_args *a, uint64_t deadline) {
    size_t bytes = a->count * baton_dtype_size(a->dt);
    baton_algo algo = choose_allreduce(c, bytes);
    c->last_algo = algo;
    baton_group g = flat_group(c, p2p(c), deadline);
    switch (algo) {
    case BATON_ALGO_DIRECT:
        if (!c->shm || c->nnodes > 1) return unsupported(c, "allreduce", algo);
        return baton__shm_allreduce(c, a->send, a->recv, a->count, a->dt, a->op, a->op == BATON_AVG ? c->world : 0,
                                    deadline);
    case BATON_ALGO_HIER:
        if (c->nnodes == 1 && c->shm && !c->tcp)
            return baton__shm_allreduce(c, a->send, a->recv, a->count, a->dt, a->op,
                                        a->op == BATON_AVG ? c->world : 0, deadline);
        if (!c->tcp || (c->local_size > 1 && !c->shm)) return unsupported(c, "allreduce", algo);
        return baton__hier_allreduce(c, a->send, a->recv, a->count, a->dt, a->op, deadline);
    case BATON_ALGO_RING:
        return baton__allreduce_ring(&g, a->send, a->recv, a->count, a->dt, a->op);
    case BATON_ALGO_RD:
        return baton__allreduce_rd(&g, a->send, a->recv, a->count, a->dt, a->op);
    default:
        return unsupported(c, "allreduce", algo);
    }
}

static int direct_ok(baton_comm *c) {
    return c->shm && c->nnodes == 1 && !c->tcp && (c->algo == BATON_ALGO_AUTO || c->algo == BATON_ALGO_DIRECT);
}

static int exec_one(baton_comm *c, const coll_args *a, uint64_t deadline) {
    size_t esz = baton_dtype_size(a->dt);
    baton_group g = flat_group(c, p2p(c), deadline);
    if (c->world == 1) {
        c->last_algo = BATON_ALGO_DIRECT;
        if (a->kind != COLL_BARRIER && a->kind != COLL_BROADCAST && a->send != a->recv && a->count)
            memcpy(a->recv, a->send, a->count * esz);
        return BATON_OK;
    }
    /* A collective that moves nothing still shows that every rank runs it: in shared memory through the
     * announced descriptors (a barrier compares them), else through one framed message per neighbour. */
    if (a->count == 0 && a->kind != COLL_BARRIER) {
        c->last_algo = c->tcp ? BATON_ALGO_RING : BATON_ALGO_DIRECT;
        return c->tcp ? baton__agree_p2p(&g, "agreement on a collective of 0 elements") : baton__shm_barrier(c, deadline);
    }
    switch (a->kind) {
    case COLL_ALLREDUCE:
        return exec_allreduce(c, a, deadline);
    case COLL_REDUCE_SCATTER:
        if (direct_ok(c)) {
            c->last_algo = BATON_ALGO_DIRECT;
            return baton__shm_reduce_scatter(c, a->send, a->recv, a->count, a->dt, a->op, deadline);
        }
        c->last_algo = BATON_ALGO_RING;
        return baton__reduce_scatter_ring(&g, a->send, a->recv, a->count, a->dt, a->op);
    case COLL_ALLGATHER:
        if (direct_ok(c)) {
            c->last_algo = BATON_ALGO_DIRECT;
            return baton__shm_allgather(c, a->send, a->recv, a->count, a->dt, deadline);
        }
        c->last_algo = BATON_ALGO_RING;
        return baton__allgather_ring(&g, a->send, a->recv, a->count, a->dt);
    case COLL_BROADCAST:
        if (direct_ok(c)) {
            c->last_algo = BATON_ALGO_DIRECT;
            return baton__shm_broadcast(c, a->recv, a->count, a->dt, c->g2l[a->root], deadline);
        }
        c->last_algo = BATON_ALGO_RING;
        return baton__broadcast_p2p(&g, a->recv, a->count, a->dt, a->root);
    case COLL_REDUCE_RANGE: {
        /* Straight from the peers' shared buffers into my range; elsewhere (TCP, several nodes, a private
         * buffer) an in-place all-reduce of the whole buffer, which leaves the same values in my range. */
        size_t boff;
        baton_shm_buffer *reg;
        if (direct_ok(c) && (reg = baton__shm_find_buffer(c, a->recv, a->count * esz, &boff))) {
            c->last_algo = BATON_ALGO_DIRECT;
            return baton__shm_reduce_range(c, reg, boff, a->lo, a->hi, a->dt, a->op, a->op == BATON_AVG ? c->world : 0,
                                           deadline);
        }
        coll_args ar = *a;
        ar.kind = COLL_ALLREDUCE;
        return exec_allreduce(c, &ar, deadline);
    }
    case COLL_BARRIER:
        if (direct_ok(c)) {
            c->last_algo = BATON_ALGO_DIRECT;
            return baton__shm_barrier(c, deadline);
        }
        c->last_algo = BATON_ALGO_RD;
        return baton__barrier_p2p(&g);
    }
    return baton__fail(BATON_EINVAL, "unknown collective %d", (int)a->kind);
}

/* What a failing rank tells the launcher, at baton/fail/<rank>: "<kind> <peer>", kind one of timeout (it waited
 * for a rank that did not answer), peer (a peer died or closed), canceled (another rank aborted the job),
 * mismatch, error; peer the rank it named as the one it waited for or lost, else -1. The launcher blames from
 * these (tools/run_group.c): a rank that stays silent while the others time out waiting for it is the one that
 * stopped responding, one that exited 0 while the others lost it is the one that left. */
void baton__post_failure(baton_comm *c, int rc, const char *detail) {
    if (!c->store) return;
    const char *kind = rc == BATON_ETIMEDOUT ? "timeout"
                       : rc == BATON_EPEERDEAD ? "peer"
                       : rc == BATON_ECANCELED ? "canceled"
                       : rc == BATON_EMISMATCH ? "mismatch"
                                               : "error";
    int peer = -1;
    const char *w = strstr(detail, "waiting for rank ");
    if (w) peer = atoi(w + 17);
    else if (rc == BATON_EPEERDEAD) /* the transports name the lost peer first: "rank 3 (pid 812) died", "rank 3 closed
                                     * its connection", "connection to rank 3 failed" */
        for (const char *p = detail; peer < 0 && (p = strstr(p, "rank ")); p += 5)
            if (p[5] >= '0' && p[5] <= '9') peer = atoi(p + 5);
    char key[64], val[64];
    snprintf(key, sizeof key, "baton/fail/%d", c->rank);
    int n = snprintf(val, sizeof val, "%s %d", kind, peer);
    baton_store_set(c->store, key, val, (size_t)n);
}

/* After a failure: the first rank to fail posts its detail to the store, so that ranks which only saw a
 * consequence (a neighbour closing its connection, an abort) can report the first failure too; then every
 * failing rank writes its flight recorder. The detail of the current error is kept. A rank whose collective
 * was canceled by another rank's abort (BATON_ECANCELED) never claims the first failure: its message already
 * carries the aborting rank's, and claiming raced that rank to the store (a canceled rank won it about one
 * time in six, and the rank that saw the failure then named the canceled one as the first). Store calls here
 * are bounded by the collective timeout: a frozen store (a stopped launcher) delays the report by that much
 * at most, and the rank fails with its own reason. */
static void report_failure(baton_comm *c, int rc) {
    char mine[512], first[512] = "";
    snprintf(mine, sizeof mine, "%s", baton_last_error());
    if (c->store) {
        pthread_mutex_lock(&c->store_mu);
        double bound = c->opt.timeout_s > 0.5 ? c->opt.timeout_s : 0.5;
        if (bound < c->opt.join_timeout_s) baton_store_set_io_timeout(c->store, bound);
        baton__post_failure(c, rc, mine);
        int64_t n = 0;
        char line[600];
        snprintf(line, sizeof line, "rank %d: %s", c->rank, mine);
        if (rc != BATON_ECANCELED && baton_store_add(c->store, "baton/failures", 1, &n) == BATON_OK) {
            if (n == 1) {
                baton_store_set(c->store, "baton/failure", line, strlen(line));
            } else {
                void *v = NULL;
                size_t len = 0;
                if (baton_store_get(c->store, "baton/failure", &v, &len, 1.0) == BATON_OK) {
                    snprintf(first, sizeof first, "%.*s", (int)(len < sizeof first - 1 ? len : sizeof first - 1), (char *)v);
                    free(v);
                }
            }
        }
        pthread_mutex_unlock(&c->store_mu);
    }
    char path[600];
    int drc = baton__flight_dump(&c->flight, c->rank, c->world, c->job_id, mine, path, sizeof path);
    if (drc == BATON_OK)
        BATON_WARN("flight recorder written to %s (read all ranks' with `baton doctor`)", path);
    else
        BATON_WARN("%s", baton_last_error());
    if (first[0] && !strstr(mine, first) && strncmp(first, "rank ", 5) == 0)
        baton__fail(rc, "%s [first failure in the job: %s]", mine, first);
    else
        baton__fail(rc, "%s", mine);
}

/* Runs one collective now (on the user's thread when nothing is queued, else on the comm thread).
 * A failure breaks the communicator for good. */
int baton__coll_exec(baton_comm *c, const coll_args *a) {
    if (c->broken) return baton__fail(BATON_ECANCELED, "communicator unusable after an earlier failure: %s", c->broken_reason);
    /* one clock reading serves the deadline, the watchdog and the flight recorder */
    uint64_t now = baton__now_ns();
    uint64_t deadline = c->opt.timeout_s > 0 && c->opt.timeout_s < 1e9 ? now + (uint64_t)(c->opt.timeout_s * 1e9)
                                                                      : UINT64_MAX;
    /* Every collective says what it is before it touches anything shared (see comm/desc.h). */
    baton_coll_desc desc = {.seq = ++c->seq, .count = a->count, .kind = (uint8_t)a->kind, .dtype = (uint8_t)a->dt,
                            .op = (uint8_t)a->op, .root = a->root};
    if (a->kind == COLL_ALLGATHER || a->kind == COLL_BROADCAST || a->kind == COLL_BARRIER) desc.op = 0;
    if (a->kind == COLL_BARRIER) desc.count = 0, desc.dtype = 0;
    c->desc = &desc;
    baton__desc_pack(c->desc_packed, &desc);
    baton__desc_msg_hdr(&c->msg_hdr, &desc);
    baton__flight_start(&c->flight, &desc, now);
    for (int i = 0; i < BATON_DESC_BYTES / 8; i++) {
        uint64_t w;
        memcpy(&w, c->desc_packed + 8 * i, 8);
        atomic_store_explicit(&c->running_desc[i], w, memory_order_relaxed);
    }
    atomic_store_explicit(&c->running_since, now, memory_order_relaxed);
    atomic_store_explicit(&c->running_seq, desc.seq, memory_order_release);
    if (c->shm) baton__shm_announce(c->shm, desc.seq, c->desc_packed);
    if (c->tcp) c->tcp->hdr = &c->msg_hdr;
    if (c->shm_tp) c->shm_tp->hdr = &c->msg_hdr;
    int rc = exec_one(c, a, deadline);
    if (c->tcp) c->tcp->hdr = NULL;
    if (c->shm_tp) c->shm_tp->hdr = NULL;
    c->desc = NULL;
    atomic_store_explicit(&c->running_seq, 0, memory_order_release);
    uint64_t end = baton__now_ns();
    c->last_ns = end - now;
    baton__flight_end(&c->flight, desc.seq, c->last_algo, rc < 0, end);
    if (rc < 0) {
        char what[128];
        baton__desc_format(&desc, what, sizeof what);
        baton__fail_ctx(rc, "%s: ", what);
        c->broken = 1;
        if (c->shm) baton__shm_abort(c->shm, baton_last_error());
        report_failure(c, rc);
        snprintf(c->broken_reason, sizeof c->broken_reason, "%s", baton_last_error());
        c->tune_probe = 0;
        return rc;
    }
    /* --algo auto confirming a close choice: this call's time, and after a size's last probe the agreement */
    if (c->tune_probe && (rc = baton__autotune_probed(c, end - now)) < 0) return rc;
    /* after the first --algo auto all-reduce: is the machine in the calibration's state? (autotune.c) */
    if (c->tune_state_pending && !c->tune_busy) return baton__autotune_state_check(c);
    return rc;
}

/* ---- waits for peers (docs/observe.md) ------------------------------------------------------------------ */

void baton_coll_waits(const double *dur, int n, size_t stride, double *wait) {
    if (n <= 0) return;
    double lo = dur[0];
    for (int r = 1; r < n; r++)
        if (dur[(size_t)r * stride] < lo) lo = dur[(size_t)r * stride];
    for (int r = 0; r < n; r++) wait[(size_t)r * stride] = dur[(size_t)r * stride] - lo;
}

/* ---- argument checks ------------------------------------------------------------------------------- */

static int check_args(baton_comm *c, const char *what, const void *send, const void *recv, size_t count,
                      baton_dtype dt, baton_op op, size_t send_mult, size_t recv_mult) {
    if (!c) return baton__fail(BATON_EINVAL, "%s: communicator is NULL", what);
    if ((unsigned)dt >= BATON_DTYPE_COUNT) return baton__fail(BATON_EINVAL, "%s: invalid dtype %d", what, (int)dt);
    if ((unsigned)op >= BATON_OP_COUNT) return baton__fail(BATON_EINVAL, "%s: invalid op %d", what, (int)op);
    size_t bytes;
    if (!baton__mul_ok(count, baton_dtype_size(dt), &bytes) || !baton__mul_ok(bytes, send_mult > recv_mult ? send_mult : recv_mult, &bytes) ||
        bytes > ((size_t)1 << 48))
        return baton__fail(BATON_EINVAL, "%s: count %zu is too large", what, count);
    if (count && send_mult && !send) return baton__fail(BATON_EINVAL, "%s: send buffer is NULL", what);
    if (count && recv_mult && !recv) return baton__fail(BATON_EINVAL, "%s: receive buffer is NULL", what);
    return BATON_OK;
}

/* ---- asynchronous work ----------------------------------------------------------------------------- */

/* The comm thread runs while the user thread computes (that is the point of asynchronous work). When the
 * process is bound to one CPU (BATON_BIND gives each of 2 ranks on 2 cores its own), both share it, and
 * the comm thread's spin-waits for a peer took that CPU from the user's compute: profiled with baton.torch
 * on 2 ranks x 1 CPU (docs/measurements/python-history.md, "Profile of one step"), about 93 us per wait,
 * several waits per step. It naps instead
 * (BATON_COMM_WAIT=nap, the default): a comm thread that yielded got the CPU back only when the training
 * thread's time slice ended, so a peer's arrival went unnoticed for up to a slice while the user thread
 * computed; napping, it is woken at the nap's end and preempts the computing thread at once. With 2 ranks
 * x 1 CPU under load, DDP over baton.torch's backend ran 20.6 ms a step instead of 25.2
 * (docs/measurements/python-history.md, "The backend's CPU per step inside DDP, and the comm thread's wait").
 * BATON_COMM_WAIT=yield: the yield phase first, as before. */
static int alone_on_one_cpu(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
}

static int comm_wait_mode(int *mode) {
    const char *e = getenv("BATON_COMM_WAIT");
    *mode = BATON__WAIT_NAP;
    if (!e || !*e || !strcmp(e, "nap")) return BATON_OK;
    if (!strcmp(e, "yield")) {
        *mode = BATON__WAIT_YIELD;
        return BATON_OK;
    }
    return baton__fail(BATON_EINVAL, "BATON_COMM_WAIT='%s' must be nap (the default) or yield", e);
}


/* The comm thread's scheduler slice (BATON_COMM_SLICE_US, default 100 us, the kernel's minimum; 0 keeps the
 * kernel's default, about 3 ms). Bound to one CPU, the comm thread shares it with the training thread, and the
 * kernel's EEVDF scheduler lets a woken thread preempt the running one only when its deadline comes first:
 * with equal slices, a collective queued by the training thread (or a peer's arrival that woke the comm
 * thread) waited until the training thread blocked or used up its slice. Measured inside DDP over
 * baton.torch's backend (docs/measurements/python-history.md, "Where the last bucket's all-reduce waited"):
 * the comm thread picked a queued all-reduce up 70-450 us after it was
 * queued, the last bucket's all-reduce ended 480-560 us after the later rank queued it; with a 100 us slice it
 * is picked up in about 30 us and ends after about 320. A short slice (sched_setattr's sched_runtime,
 * Linux 6.12 and later; older kernels ignore it) makes the kernel preempt for it at once; it uses its slice
 * for the collective and sleeps again. The nice value stays the thread's own. */
static int comm_slice_setting(long *us) {
    long v = 100;
    int rc = baton__env_long("BATON_COMM_SLICE_US", v, 0, 100000, &v);
    if (rc == BATON_EINVAL || (v > 0 && v < 100))
        return baton__fail(BATON_EINVAL, "BATON_COMM_SLICE_US='%s' must be 0 (the kernel's slice) or 100 to 100000 "
                           "(microseconds)", getenv("BATON_COMM_SLICE_US"));
    *us = v;
    return BATON_OK;
}

static void comm_thread_short_slice(baton_comm *c) {
    if (baton__thread_set_slice_ns((uint64_t)c->comm_slice_us * 1000u) < 0) {
        BATON_DEBUG("comm thread: %s", baton_last_error());
        baton__clear_error();
        return;
    }
    atomic_store_explicit(&c->comm_slice_got_ns, baton__thread_slice_ns(), memory_order_release);
}

uint64_t baton__comm_thread_slice_ns(baton_comm *c) {
    return atomic_load_explicit(&c->comm_slice_got_ns, memory_order_acquire);
}

static void *comm_thread(void *arg) {
    baton_comm *c = arg;
    if (alone_on_one_cpu() && c->comm_slice_us > 0) comm_thread_short_slice(c);
    baton__backoff_no_spin(alone_on_one_cpu() ? c->comm_wait : BATON__WAIT_SPIN);
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stopping) pthread_cond_wait(&c->cv, &c->mu);
        if (!c->head) break;
        baton_work *w = c->head;
        c->head = w->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        int rc = baton__coll_exec(c, &w->args);
        char detail[512];
        snprintf(detail, sizeof detail, "%s", baton_last_error());
        pthread_mutex_lock(&c->mu);
        w->status = rc;
        if (rc < 0) snprintf(c->broken_reason, sizeof c->broken_reason, "%s", detail);
        w->done = 1;
        __atomic_fetch_sub(&c->pending, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int enqueue(baton_comm *c, const coll_args *a, baton_work **out) {
    baton_work *w = calloc(1, sizeof *w);
    if (!w) return baton__fail(BATON_ENOMEM, "out of memory for an asynchronous collective");
    w->comm = c;
    w->args = *a;
    pthread_mutex_lock(&c->mu);
    if (!c->thread_started) {
        int rc = comm_wait_mode(&c->comm_wait);
        if (rc == BATON_OK) rc = comm_slice_setting(&c->comm_slice_us);
        if (rc < 0) {
            pthread_mutex_unlock(&c->mu);
            free(w);
            return rc;
        }
        if (pthread_create(&c->thread, NULL, comm_thread, c) != 0) {
            pthread_mutex_unlock(&c->mu);
            free(w);
            return baton__fail(BATON_ESYS, "cannot start the comm thread");
        }
        c->thread_started = 1;
    }
    if (c->tail)
        c->tail->next = w;
    else
        c->head = w;
    c->tail = w;
    __atomic_fetch_add(&c->pending, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    *out = w;
    return BATON_OK;
}

int baton_wait(baton_work *w) {
    if (!w) return BATON_OK;
    baton_comm *c = w->comm;
    pthread_mutex_lock(&c->mu);
    while (!w->done) pthread_cond_wait(&c->cv, &c->mu);
    int rc = w->status;
    if (rc < 0) baton__fail(rc, "%s", c->broken_reason);
    pthread_mutex_unlock(&c->mu);
    free(w);
    return rc;
}

int baton_test(baton_work *w, int *done) {
    if (!w) {
        *done = 1;
        return BATON_OK;
    }
    baton_comm *c = w->comm;
    pthread_mutex_lock(&c->mu);
    *done = w->done;
    int rc = w->done ? w->status : BATON_OK;
    if (rc < 0) baton__fail(rc, "%s", c->broken_reason);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void baton__async_stop(baton_comm *c) {
    pthread_mutex_lock(&c->mu);
    int started = c->thread_started;
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (started) pthread_join(c->thread, NULL);
    c->thread_started = 0;
}

/* Blocking calls run inline when nothing is queued, else behind the queued work (issue order). */
static int run_blocking(baton_comm *c, const coll_args *a) {
    /* pending is raised only by this (the user's) thread and dropped by the comm thread after its work
     * is done (release), so 0 here (acquire) means the comm thread is idle and its writes are visible. */
    if (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) == 0) return baton__coll_exec(c, a);
    baton_work *w;
    int rc = enqueue(c, a, &w);
    return rc < 0 ? rc : baton_wait(w);
}

/* ---- public collectives ---------------------------------------------------------------------------- */

int baton_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op) {
    int rc = check_args(c, "allreduce", send, recv, count, dt, op, 1, 1);
    if (rc < 0) return rc;
    coll_args a = {COLL_ALLREDUCE, send, recv, count, dt, op, 0, 0, 0};
    return run_blocking(c, &a);
}

int baton_allreduce_start(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                          baton_work **w) {
    *w = NULL;
    int rc = check_args(c, "allreduce", send, recv, count, dt, op, 1, 1);
    if (rc < 0) return rc;
    coll_args a = {COLL_ALLREDUCE, send, recv, count, dt, op, 0, 0, 0};
    return enqueue(c, &a, w);
}

int baton_reduce_scatter(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op) {
    int rc = check_args(c, "reduce_scatter", send, recv, count, dt, op, c ? (size_t)c->world : 1, 1);
    if (rc < 0) return rc;
    coll_args a = {COLL_REDUCE_SCATTER, send, recv, count, dt, op, 0, 0, 0};
    return run_blocking(c, &a);
}

int baton_reduce_range(baton_comm *c, void *buf, size_t count, baton_dtype dt, baton_op op, size_t lo, size_t hi) {
    int rc = check_args(c, "reduce_range", buf, buf, count, dt, op, 1, 1);
    if (rc < 0) return rc;
    if (lo > hi || hi > count)
        return baton__fail(BATON_EINVAL, "reduce_range: range [%zu, %zu) is not inside the %zu elements", lo, hi, count);
    coll_args a = {COLL_REDUCE_RANGE, buf, buf, count, dt, op, 0, lo, hi};
    return run_blocking(c, &a);
}

int baton_allgather(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt) {
    int rc = check_args(c, "allgather", send, recv, count, dt, BATON_SUM, 1, c ? (size_t)c->world : 1);
    if (rc < 0) return rc;
    coll_args a = {COLL_ALLGATHER, send, recv, count, dt, BATON_SUM, 0, 0, 0};
    return run_blocking(c, &a);
}

static int check_root(baton_comm *c, int root) {
    if (root < 0 || root >= c->world)
        return baton__fail(BATON_EINVAL, "broadcast: root %d is not a rank (world size %d)", root, c->world);
    return BATON_OK;
}

int baton_broadcast(baton_comm *c, void *buf, size_t count, baton_dtype dt, int root) {
    int rc = check_args(c, "broadcast", buf, buf, count, dt, BATON_SUM, 1, 1);
    if (rc < 0 || (rc = check_root(c, root)) < 0) return rc;
    coll_args a = {COLL_BROADCAST, buf, buf, count, dt, BATON_SUM, root, 0, 0};
    return run_blocking(c, &a);
}

int baton_broadcast_start(baton_comm *c, void *buf, size_t count, baton_dtype dt, int root, baton_work **w) {
    *w = NULL;
    int rc = check_args(c, "broadcast", buf, buf, count, dt, BATON_SUM, 1, 1);
    if (rc < 0 || (rc = check_root(c, root)) < 0) return rc;
    coll_args a = {COLL_BROADCAST, buf, buf, count, dt, BATON_SUM, root, 0, 0};
    return enqueue(c, &a, w);
}

int baton_barrier(baton_comm *c) {
    if (!c) return baton__fail(BATON_EINVAL, "barrier: communicator is NULL");
    coll_args a = {COLL_BARRIER, NULL, NULL, 0, BATON_F32, BATON_SUM, 0, 0, 0};
    return run_blocking(c, &a);
}
