/* hier.c: hierarchical all-reduce across nodes (docs/algorithms.md, docs/cluster.md).
 *
 * Pipelined (every node has the same number L of local ranks, and the buffer is at least HIER_MIN_BYTES):
 * the buffer is cut into segments of 512 KiB on the wire (BATON_HIER_SEGMENT, 64 KiB to 2 MiB). For each segment
 *   1. reduce-scatter inside the node over shared memory: local rank l holds slice l of the segment,
 *      reduced over its node (baton__shm_rs_slice; 16-bit dtypes as f32 partials);
 *   2. every local rank ring-all-reduces its slice with the ranks of the same local index on the other
 *      nodes (M ranks, one per node), all L rings at once, so every local rank uses the network with 1/L
 *      of the data; the finished slice is divided (AVG) or rounded to 16 bits once, here;
 *   3. all-gather of the finished slices inside the node (baton__shm_ag_slice).
 * Step 2 runs on a second thread, between steps 1 and 3 on the calling thread, which scatters up to
 * 3 MiB of segments (3 to 16) ahead of the one it gathers: while the network works on segment k, shared memory
 * gathers what the network finished and scatters the next ones, so the node's link does not wait for
 * shared memory (not even when the calling thread loses its core for a few milliseconds). Each node's link carries 2(M-1)/M of the buffer (a flat ring over
 * K = M*L ranks: 2(K-1)/K). Across nodes the slices always go round a ring: recursive doubling over a
 * node count that is not a power of two puts more than that on some links.
 *
 * Leaders (small buffers, or nodes with different numbers of local ranks): all-reduce inside the node,
 * all-reduce of the node sums across the node leaders (recursive doubling or ring), broadcast back inside
 * the node. 16-bit dtypes travel in f32 and are rounded once, at the end.
 *
 * Failures: the network thread's error (a peer died, a mismatched header, a timeout) is handed to the
 * calling thread, which fails the collective with it; a failure of the calling thread stops the network
 * thread after the segment it is on (its peers on the other nodes finish it or time out). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/algo.h"
#include "comm/algo_util.h"
#include "comm/comm_internal.h"
#include "comm/reduce.h"
#include "util/util.h"

enum {
    HIER_MIN_BYTES = 64 << 10,  /* below this the leaders' path (fewer, shorter messages) */
    /* the scatter runs this many bytes of segments (at least 3, at most 16 segments) ahead of the gather */
    HIER_AHEAD_BYTES = 3 << 20,
    HIER_AHEAD_MIN = 3,
    HIER_AHEAD_MAX = 16,
    HIER_SLOTS_MAX = HIER_AHEAD_MAX + 1, /* slices in flight: from the one being gathered to the one being scattered */
};

/* ---- leaders' path --------------------------------------------------------------------------------- */

static int leaders_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                             uint64_t deadline) {
    size_t esz = baton_dtype_size(dt);
    int wide = baton__is16(dt);
    baton_dtype wdt = wide ? BATON_F32 : dt;
    baton_op wop = op == BATON_AVG ? BATON_SUM : op;
    void *work = recv;
    float *tmp = NULL;
    int rc = BATON_OK;
    if (wide) {
        tmp = malloc(count * sizeof(float) + 1);
        if (!tmp) return baton__fail(BATON_ENOMEM, "allreduce: out of memory for %zu f32 partials", count);
        (dt == BATON_F16 ? baton__f16_to_f32 : baton__bf16_to_f32)(tmp, send, count);
        work = tmp;
    } else if (send != recv) {
        memcpy(recv, send, count * esz);
    }
    if (c->local_size > 1) rc = baton__shm_allreduce(c, work, work, count, wdt, wop, 0, deadline);
    if (rc >= 0 && c->rank == c->leaders[c->node] && c->nnodes > 1) {
        baton_group g = {.t = c->tcp, .n = c->nnodes, .me = c->node, .ranks = c->leaders, .deadline_ns = deadline,
                         .scratch = &c->scratch};
        size_t bytes = count * baton_dtype_size(wdt);
        size_t rd_max = g.n <= 2 ? (size_t)64 << 10 : (size_t)1 << 20;
        rc = bytes <= rd_max ? baton__allreduce_rd(&g, work, work, count, wdt, wop)
                             : baton__allreduce_ring(&g, work, work, count, wdt, wop);
    }
    if (rc >= 0 && c->local_size > 1) rc = baton__shm_broadcast(c, work, count, wdt, 0, deadline);
    if (rc >= 0) {
        if (wide)
            baton__f32_to_16_avg(recv, tmp, count, dt, op == BATON_AVG ? c->world : 1);
        else if (op == BATON_AVG)
            baton__finish_avg(recv, count, dt, c->world);
    }
    free(tmp);
    return rc;
}

/* ---- pipelined path -------------------------------------------------------------------------------- */

typedef struct {
    baton_comm *c;
    baton_group g;          /* the ring across nodes: this local index on every node */
    baton_dtype dt, wdt;    /* user dtype, and the one partials travel in (f32 for 16-bit) */
    baton_op op, wop;       /* user op, and the one the partials combine with (SUM for AVG) */
    size_t count, seg;      /* elements, elements per segment */
    size_t nseg;
    size_t slots;               /* slices in flight: the segments ahead + 1 */
    uint8_t *part[HIER_SLOTS_MAX];  /* my slice's partials (wdt) */
    uint8_t *fin[HIER_SLOTS_MAX];   /* my finished slice (dt): part itself unless 16-bit */
    uint8_t *sbuf, *rbuf;           /* the network thread's outgoing and landing message */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t given, done;     /* segments handed to the network thread / finished by it */
    int stop, failed;
    char err[512];
    /* time split (BATON_LOG_LEVEL=debug): ns the network thread spent on the rings and waiting for shared
     * memory, and the calling thread waiting for the network */
    uint64_t net_busy_ns, net_idle_ns, shm_idle_ns;
} hier_pipe;

/* n rounded up to whole 64-byte cache lines (each piece of the kept scratch starts on one) */
static size_t line_up(size_t n) { return (n + 63) / 64 * 64; }

static size_t seg_len(const hier_pipe *h, size_t k) {
    size_t off = k * h->seg;
    return h->count - off < h->seg ? h->count - off : h->seg;
}

/* My slice of segment k: its element count. */
static size_t slice_len(const hier_pipe *h, size_t k) {
    size_t lo, hi;
    baton__shm_slice(seg_len(h, k), h->c->local_size, h->c->local_rank, h->dt, &lo, &hi);
    return hi - lo;
}

/* Segment k's slice is all-reduced across the nodes: divide (AVG) or round it to 16 bits once, here. */
static void finish_segment(hier_pipe *h, size_t k) {
    size_t n = slice_len(h, k);
    int s = (int)(k % h->slots);
    if (h->wdt != h->dt)
        baton__f32_to_16_avg((uint16_t *)h->fin[s], (const float *)h->part[s], n, h->dt,
                             h->op == BATON_AVG ? h->c->world : 1);
    else if (h->op == BATON_AVG)
        baton__finish_avg(h->part[s], n, h->dt, h->c->world);
}

/* Step 2 of segment k on its own (a buffer of one segment): all-reduce my slice across the nodes, finish it. */
static int net_segment(hier_pipe *h, size_t k) {
    int rc = baton__allreduce_ring(&h->g, h->part[k % h->slots], h->part[k % h->slots], slice_len(h, k), h->wdt,
                                   h->wop);
    if (rc < 0) return baton__fail_ctx(rc, "hierarchical allreduce, segment %zu of %zu across %d nodes: ", k + 1,
                                       h->nseg, h->g.n);
    finish_segment(h, k);
    return BATON_OK;
}

/* ---- the fused ring across nodes ---------------------------------------------------------------------
 * Segment by segment, a ring all-reduce is M-1 reduce-scatter steps then M-1 all-gather steps, each a
 * message each way that cannot start before the previous one has landed: every step ends with the link
 * drained, and a segment's steps wait for each other across the network 2(M-1) times. Tick t runs step s
 * of segment t's reduce-scatter and step s of segment t-1's all-gather as ONE message each way (the two
 * depend on nothing but their own previous steps), so the link drains half as often and every message is
 * twice as long. Tick 0 only scatters, tick nseg only gathers; after tick t, segment t-1 is complete. */

typedef struct {
    uint8_t *ag_dst;        /* where the all-gather part lands (its place in the slice) */
    size_t ag_bytes;        /* the first ag_bytes of the message */
    uint8_t *rs_acc;        /* the reduce-scatter part combines into this partial */
    const uint8_t *rbuf;    /* the landing buffer */
    baton_dtype wdt;
    baton_op wop;
    size_t wsz;
} tick_recv;

/* Bytes [lo, hi) of the incoming message have landed: copy the all-gather part, combine the other. */
static void tick_landed(void *ctx, size_t lo, size_t hi) {
    const tick_recv *r = ctx;
    if (lo < r->ag_bytes) {
        size_t e = hi < r->ag_bytes ? hi : r->ag_bytes;
        memcpy(r->ag_dst + lo, r->rbuf + lo, e - lo);
        lo = e;
    }
    if (lo >= hi) return;
    size_t a = (lo - r->ag_bytes) / r->wsz, n = (hi - lo) / r->wsz;
    uint8_t *d = r->rs_acc + a * r->wsz;
    const void *srcs[2] = {r->rbuf + lo, d};
    baton__reduce_n(d, srcs, 2, n, r->wdt, r->wop, 0);
}

enum { TICK_UNIT = 64 << 10 }; /* the landed part is combined in pieces of this many bytes */

static int net_tick(hier_pipe *h, size_t t, uint8_t *sbuf, uint8_t *rbuf) {
    const int M = h->g.n, me = h->g.me, right = baton__mod(me + 1, M), left = baton__mod(me - 1, M);
    const size_t wsz = baton_dtype_size(h->wdt);
    const int ag = t >= 1, rs = t < h->nseg;
    const size_t nag = ag ? slice_len(h, t - 1) : 0, nrs = rs ? slice_len(h, t) : 0;
    uint8_t *pag = ag ? h->part[(t - 1) % h->slots] : NULL, *prs = rs ? h->part[t % h->slots] : NULL;
    for (int s = 0; s < M - 1; s++) {
        size_t ags_off = 0, ags_len = 0, agr_off = 0, agr_len = 0, rss_off = 0, rss_len = 0, rsr_off = 0, rsr_len = 0;
        if (ag) {
            baton__chunk(nag, M, baton__mod(me + 1 - s, M), &ags_off, &ags_len);
            baton__chunk(nag, M, baton__mod(me - s, M), &agr_off, &agr_len);
        }
        if (rs) {
            baton__chunk(nrs, M, baton__mod(me - s, M), &rss_off, &rss_len);
            baton__chunk(nrs, M, baton__mod(me - s - 1, M), &rsr_off, &rsr_len);
        }
        if (ags_len) memcpy(sbuf, pag + ags_off * wsz, ags_len * wsz);
        if (rss_len) memcpy(sbuf + ags_len * wsz, prs + rss_off * wsz, rss_len * wsz);
        tick_recv r = {.ag_dst = pag ? pag + agr_off * wsz : NULL, .ag_bytes = agr_len * wsz,
                       .rs_acc = prs ? prs + rsr_off * wsz : NULL, .rbuf = rbuf, .wdt = h->wdt, .wop = h->wop,
                       .wsz = wsz};
        baton_recv_progress prog = {.unit = TICK_UNIT, .fn = tick_landed, .ctx = &r};
        size_t sbytes = (ags_len + rss_len) * wsz, rbytes = (agr_len + rsr_len) * wsz;
        int rc = baton__gsendrecv_cb(&h->g, right, sbuf, sbytes, left, rbuf, rbytes, rbytes ? &prog : NULL,
                                     "hierarchical allreduce");
        if (rc < 0)
            return baton__fail_ctx(rc, "segment %zu of %zu across %d nodes: ", rs ? t + 1 : t, h->nseg, M);
    }
    if (ag) finish_segment(h, t - 1);
    return BATON_OK;
}

static void *net_thread(void *arg) {
    hier_pipe *h = arg;
    uint8_t *sbuf = h->sbuf, *rbuf = h->rbuf;
    int rc = BATON_OK;
    for (size_t t = 0; rc == BATON_OK && t <= h->nseg; t++) {
        uint64_t t0 = baton__now_ns();
        pthread_mutex_lock(&h->mu);
        while (t < h->nseg && h->given <= t && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
        int stop = h->stop;
        pthread_mutex_unlock(&h->mu);
        if (stop) break;
        uint64_t t1 = baton__now_ns();
        rc = net_tick(h, t, sbuf, rbuf);
        h->net_idle_ns += t ? t1 - t0 : 0; /* before the first segment it waits for the pipeline to fill */
        h->net_busy_ns += baton__now_ns() - t1;
        pthread_mutex_lock(&h->mu);
        if (rc == BATON_OK && t >= 1) h->done = t;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    if (rc < 0) {
        pthread_mutex_lock(&h->mu);
        h->failed = rc;
        snprintf(h->err, sizeof h->err, "%s", baton_last_error());
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

static void give(hier_pipe *h, size_t k) {
    pthread_mutex_lock(&h->mu);
    h->given = k + 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Waits until the network thread has finished segment k (or failed). */
static int await(hier_pipe *h, size_t k) {
    uint64_t t0 = baton__now_ns();
    pthread_mutex_lock(&h->mu);
    while (h->done <= k && !h->failed) pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->done > k ? BATON_OK : h->failed;
    pthread_mutex_unlock(&h->mu);
    h->shm_idle_ns += baton__now_ns() - t0;
    return rc < 0 ? baton__fail(rc, "%s", h->err) : BATON_OK;
}

static int pipelined_allreduce(baton_comm *c, const int *ring, const void *send, void *recv, size_t count,
                               baton_dtype dt, baton_op op, uint64_t deadline) {
    const size_t esz = baton_dtype_size(dt);
    hier_pipe h = {.c = c, .dt = dt, .wdt = baton__is16(dt) ? BATON_F32 : dt, .op = op,
                   .wop = op == BATON_AVG ? BATON_SUM : op, .count = count};
    /* the network stage's ring (one thread) is the only user of the communicator's scratch meanwhile */
    h.g = (baton_group){.t = c->tcp, .n = c->nnodes, .me = c->node, .ranks = ring, .deadline_ns = deadline,
                        .scratch = &c->scratch};
    const size_t wsz = baton_dtype_size(h.wdt);
    h.seg = c->hier_seg_bytes / wsz; /* on the wire (f32 for 16-bit dtypes); staged: <= BATON_SHM_STAGE_BYTES */
    h.nseg = (count + h.seg - 1) / h.seg;
    size_t lo, hi;
    baton__shm_slice(h.seg < count ? h.seg : count, c->local_size, c->local_rank, dt, &lo, &hi);
    size_t maxslice = hi - lo + 64; /* slices of shorter segments are no longer (64-byte alignment slack) */
    /* Scatter 3 MiB of segments ahead of the gather (3 to 16 segments; fewer when there are fewer). */
    size_t ahead = HIER_AHEAD_BYTES / (h.seg * wsz);
    ahead = ahead < HIER_AHEAD_MIN ? HIER_AHEAD_MIN : ahead > HIER_AHEAD_MAX ? HIER_AHEAD_MAX : ahead;
    if (ahead > h.nseg - 1) ahead = h.nseg - 1;
    h.slots = ahead + 1;
    /* Slices and messages come from the communicator's hierarchical scratch, kept between calls: malloc'ed
     * and freed per call (about 1 MiB at 512 KiB segments), glibc handed them back to the kernel at the
     * free (munmap, or a heap trim while its dynamic thresholds were still low) and every call faulted them
     * in again: on the simulated cluster hier at 1 MiB took 16.5-19.1 ms as a job's first size and
     * 10.8-12.7 ms once something bigger had been freed (issue 9; docs/measurements/plan-history.md, "Issue 9's
     * missed floors", item 1). A message carries at most
     * one chunk of each of two slices (a shorter segment's slice may be up to 64 bytes longer than the
     * first's: slices start 64-byte aligned). */
    const size_t most = (slice_len(&h, 0) + 64) / (size_t)h.g.n + 1;
    const size_t part_b = line_up(maxslice * wsz), fin_b = h.wdt != dt ? line_up(maxslice * esz) : 0;
    const size_t msg_b = line_up(2 * most * wsz);
    void *owned = NULL;
    uint8_t *mem = baton__scratch_get(&c->hier_scratch, h.slots * (part_b + fin_b) + 2 * msg_b, &owned);
    int rc = mem ? BATON_OK : baton__fail(BATON_ENOMEM, "allreduce: out of memory for hierarchical slices");
    for (size_t s = 0; mem && s < h.slots; s++) {
        h.part[s] = mem + s * (part_b + fin_b);
        h.fin[s] = fin_b ? h.part[s] + part_b : h.part[s];
    }
    if (mem) {
        h.sbuf = mem + h.slots * (part_b + fin_b);
        h.rbuf = h.sbuf + msg_b;
    }
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    pthread_t th;
    int threaded = rc == BATON_OK && h.nseg > 1 && pthread_create(&th, NULL, net_thread, &h) == 0;
    const uint8_t *in = send;
    uint8_t *out = recv;
    uint64_t u = 0; /* stage uses so far */
    /* Stage uses are collective among the local ranks, so every rank runs the same schedule: scatter segment
     * k (and hand it to the network thread), then gather segment k - ahead. The network thread has up to
     * `ahead` segments queued, so a calling thread that loses its core for a while (more ranks than cores)
     * does not stall the link. The schedule depends on nothing but the segment count (without the thread the
     * network steps run in line, right after the scatter). One segment: scatter, network, gather. */
    for (size_t k = 0; rc == BATON_OK && k < h.nseg + ahead; k++) {
        if (k < h.nseg) {
            rc = baton__shm_rs_slice(c, u++, in + k * h.seg * esz, seg_len(&h, k), dt, h.wop, h.part[k % h.slots],
                                     deadline);
            if (rc < 0) break;
            if (threaded)
                give(&h, k);
            else if ((rc = net_segment(&h, k)) < 0)
                break;
        }
        if (k >= ahead) {
            size_t j = k - ahead;
            if (threaded && (rc = await(&h, j)) < 0) break;
            rc = baton__shm_ag_slice(c, u++, h.fin[j % h.slots], out + j * h.seg * esz, seg_len(&h, j), dt,
                                     deadline);
        }
    }
    if (threaded) {
        pthread_mutex_lock(&h.mu);
        h.stop = 1;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        pthread_join(th, NULL);
        BATON_DEBUG("hier allreduce: %zu segments of %zu B, rings %.1f ms, rings waiting for shared memory %.1f ms, "
                    "shared memory waiting for the rings %.1f ms", h.nseg, h.seg * wsz, h.net_busy_ns / 1e6,
                    h.net_idle_ns / 1e6, h.shm_idle_ns / 1e6);
    }
    c->big_chunks += u;
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
    free(owned);
    return rc;
}

int baton__hier_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                          uint64_t deadline) {
    const int M = c->nnodes, L = c->local_size;
    /* The ring across nodes: the rank with my local index on every node; every node must have L ranks. */
    int *ring = malloc((size_t)M * sizeof *ring);
    if (!ring) return baton__fail(BATON_ENOMEM, "allreduce: out of memory for the ring across %d nodes", M);
    int even = 1;
    for (int n = 0; n < M; n++) ring[n] = -1;
    int *per_node = calloc((size_t)M, sizeof *per_node);
    if (!per_node) {
        free(ring);
        return baton__fail(BATON_ENOMEM, "allreduce: out of memory for the ring across %d nodes", M);
    }
    for (int r = 0; r < c->world; r++) {
        per_node[c->node_of[r]]++;
        if (c->local_of[r] == c->local_rank) ring[c->node_of[r]] = r;
    }
    for (int n = 0; n < M; n++) even &= per_node[n] == L;
    free(per_node);
    size_t wbytes = count * (baton__is16(dt) ? 4 : baton_dtype_size(dt));
    int rc;
    if (L > 1 && even && wbytes >= HIER_MIN_BYTES)
        rc = pipelined_allreduce(c, ring, send, recv, count, dt, op, deadline);
    else if (L == 1 && even)   /* one rank per node: the ring across nodes is the whole job */
        rc = baton__allreduce_ring(&(baton_group){.t = c->tcp, .n = M, .me = c->node, .ranks = ring,
                                                  .deadline_ns = deadline, .scratch = &c->scratch},
                                   send, recv, count, dt, op);
    else
        rc = leaders_allreduce(c, send, recv, count, dt, op, deadline);
    free(ring);
    return rc;
}
