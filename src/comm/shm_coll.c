/* shm_coll.c: collectives among the ranks of one node, straight through the node's shared memory.
 *
 * Small all-reduce (<= BATON_SHM_SMALL_BYTES): each rank copies its input into its slot of parity
 * seq % 2, posts seq, waits until every rank posted seq, and reduces all inputs in rank order itself, so
 * every rank gets the same bits in one step. A slot is rewritten two calls later, when every rank has
 * posted the call in between, i.e. finished reading it.
 *
 * Large collectives move in chunks through double-buffered staging buffers. Chunk g (counted over all
 * direct collectives of the communicator) uses buffer g % 2 and three progress values:
 *   3g+1  my input is staged        3g+2  my slice is reduced        3g+3  I have consumed the chunk
 * A rank refills buffer g % 2 only when every rank has posted 3(g-2)+3, i.e. consumed chunk g-2.
 * All-reduce: stage my chunk; reduce my slice from every rank's stage into my stage; copy every rank's
 * reduced slice out. Each byte is read and written about once per phase, all in cache-sized chunks.
 *
 * Buffers from baton_buffer_alloc are visible to every local rank: an in-place all-reduce on one skips
 * staging: each rank reduces its slice straight from the peers' buffers into its own and writes the result
 * into the peers' buffers. See docs/algorithms.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/copy.h"
#include "comm/reduce.h"
#include "util/util.h"

enum { SLICE_ALIGN_BYTES = 64 };

/* First element of rank r's slice of m elements split over n ranks, aligned to 64 bytes. */
static size_t slice_lo(size_t m, int n, int r, size_t esz) {
    if (r >= n) return m;
    size_t align = SLICE_ALIGN_BYTES / esz;
    size_t x = (size_t)((unsigned __int128)m * (unsigned)r / (unsigned)n);
    x -= x % align;
    return x;
}

static int wait_all(baton_comm *c, uint64_t v, uint64_t deadline) {
    return baton__shm_wait_all(c->shm, BATON_SHM_CTR_BIG, v, deadline);
}

/* Waits until buffer g % 2 may be refilled. */
static int wait_free(baton_comm *c, uint64_t g, uint64_t deadline) {
    return g >= 2 ? wait_all(c, 3 * g - 3, deadline) : BATON_OK;
}

static void post(baton_comm *c, uint64_t v) { baton__shm_post(c->shm, BATON_SHM_CTR_BIG, v); }

/* ---- do the local ranks agree on the running collective? ------------------------------------------ */

/* Local rank r's packed descriptor (announced or published) against ours. */
static int compare_packed(baton_comm *c, int r, const uint8_t packed[BATON_DESC_BYTES]) {
    baton_coll_desc theirs;
    int rc = baton__desc_unpack(packed, &theirs);
    if (rc < 0) return baton__fail_ctx(rc, "rank %d's shared-memory announcement: ", c->local_ranks[r]);
    return baton__desc_check(c->desc, &theirs, c->local_ranks[r]);
}

/* Once every rank is known to have entered the collective: r's announcement for it must agree with ours. */
static int check_one(baton_comm *c, int r) {
    if (r == c->local_rank) return BATON_OK;
    uint8_t b[BATON_DESC_BYTES];
    uint64_t latest, l2;
    int have = baton__shm_announced(c->shm, r, c->desc->seq, b, &latest);
    if (latest < c->desc->seq) {
        char x[128] = "its start", y[128];
        baton_coll_desc theirs;
        if (latest && baton__shm_announced(c->shm, r, latest, b, &l2) && baton__desc_unpack(b, &theirs) == BATON_OK)
            baton__desc_format(&theirs, x, sizeof x);
        baton__desc_format(c->desc, y, sizeof y);
        return baton__fail(BATON_EMISMATCH, "collective mismatch: rank %d is still at %s while this rank runs %s",
                           c->local_ranks[r], x, y);
    }
    return have ? compare_packed(c, r, b) : BATON_OK;
}

/* After the first wait that every rank has passed: do all agree on what this collective is? */
static int check_peers(baton_comm *c) {
    for (int r = 0; r < c->local_size; r++) {
        int rc = check_one(c, r);
        if (rc < 0) return rc;
    }
    return BATON_OK;
}

/* Collectives with one progress pair instead of staged chunks (the barrier, the zero-copy all-reduce,
 * reduce_range, the all-gather by cross-memory attach). enter_all takes the pair's number g, posts 3g+1 and
 * waits until every rank has, then checks that all agree on the collective; leave_all posts 3g+3 and waits
 * until every rank has (no peer touches this rank's memory any more). */
static int enter_all(baton_comm *c, uint64_t *g, uint64_t deadline) {
    *g = c->big_chunks++;
    post(c, 3 * *g + 1);
    int rc = wait_all(c, 3 * *g + 1, deadline);
    return rc == BATON_OK ? check_peers(c) : rc;
}

static int leave_all(baton_comm *c, uint64_t g, uint64_t deadline) {
    post(c, 3 * g + 3);
    return wait_all(c, 3 * g + 3, deadline);
}

int baton__shm_peer_check(void *ctx, int r) {
    baton_comm *c = ctx;
    const baton_coll_desc *d = c->desc;
    if (!d || r == c->local_rank) return BATON_OK;
    uint8_t b[BATON_DESC_BYTES];
    uint64_t latest;
    return baton__shm_announced(c->shm, r, d->seq, b, &latest) ? compare_packed(c, r, b) : BATON_OK;
}

/* Chunk k of a direct collective: its number g among all chunks of the communicator, its staging buffer
 * b = g % 2, and the elements [off, off + m) it covers. */
typedef struct {
    uint64_t g;
    int b;
    size_t k, off, m;
} chunk_pos;

/* Positions chunk k of `count` elements cut into chunks of `chunk`. */
static void chunk_at(baton_comm *c, size_t k, size_t chunk, size_t count, chunk_pos *p) {
    p->k = k;
    p->g = c->big_chunks + k;
    p->b = (int)(p->g & 1);
    p->off = k * chunk;
    p->m = count - p->off < chunk ? count - p->off : chunk;
}

/* The same, then waits until the chunk's staging buffer may be refilled. */
static int chunk_begin(baton_comm *c, size_t k, size_t chunk, size_t count, chunk_pos *p, uint64_t deadline) {
    chunk_at(c, k, chunk, count, p);
    return wait_free(c, p->g, deadline);
}

/* Copies into my staging buffer the slices of chunk p that the other ranks reduce (my own slice I read
 * from my input directly when I reduce it). */
static void stage_others(baton_comm *c, const chunk_pos *p, const uint8_t *in, size_t esz) {
    uint8_t *mine = baton__shm_stage(c->shm, c->local_rank, p->b);
    size_t lo = slice_lo(p->m, c->local_size, c->local_rank, esz), hi = slice_lo(p->m, c->local_size, c->local_rank + 1, esz);
    memcpy(mine, in + p->off * esz, lo * esz);
    memcpy(mine + hi * esz, in + (p->off + hi) * esz, (p->m - hi) * esz);
}

/* Posts "my part of the chunk is staged", waits for everyone's; on the first chunk compares descriptors. */
static int chunk_staged(baton_comm *c, const chunk_pos *p, uint64_t deadline) {
    post(c, 3 * p->g + 1);
    int rc = wait_all(c, 3 * p->g + 1, deadline);
    if (rc == BATON_OK && p->k == 0) rc = check_peers(c);
    return rc;
}

static int small_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                           int avg_div, uint64_t deadline) {
    int L = c->local_size, me = c->local_rank;
    uint64_t s = ++c->small_seq;
    int p = (int)(s & 1);
    uint8_t *slot = baton__shm_small(c->shm, me, p);
    memcpy(slot + BATON_SHM_SMALL_DATA, send, count * baton_dtype_size(dt));
    baton__shm_small_publish((baton_shm_small_hdr *)slot, s, c->desc_packed);
    uint8_t *base = baton__shm_small(c->shm, 0, p);
    size_t stride = (size_t)((uint8_t *)baton__shm_small(c->shm, L > 1 ? 1 : 0, p) - base);
    int rc = baton__shm_wait_all_at(c->shm, base, stride, s, deadline);
    if (rc < 0) return rc;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    for (int q = 0; q < L; q++) {
        const uint8_t *qs = base + (size_t)q * stride;
        if (q != me && memcmp(((const baton_shm_small_hdr *)qs)->desc, c->desc_packed, BATON_DESC_BYTES) != 0 &&
            (rc = compare_packed(c, q, ((const baton_shm_small_hdr *)qs)->desc)) < 0)
            return rc;
        srcs[q] = qs + BATON_SHM_SMALL_DATA;
    }
    baton__reduce_n(recv, srcs, L, count, dt, op, avg_div);
    return BATON_OK;
}

/* In place on a buffer every local rank mapped: no staging, one wait to start and one to finish. Rank r owns
 * slice r of the whole buffer: it reduces it, block by block, from every rank's buffer into its own and, while
 * the block is still in cache, writes the result into every peer's buffer. Only the owner reads or writes a
 * slice, in every buffer, so no rank waits for another between blocks, and a rank maps only its own slices
 * of the peers' buffers (1/L of them, not all). */
enum { PUSH_BLOCK_BYTES = 64 << 10 };

static int zero_copy_allreduce(baton_comm *c, baton_shm_buffer *buf, size_t base, size_t count, baton_dtype dt,
                               baton_op op, int avg_div, uint64_t deadline) {
    if (!count) return BATON_OK;
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt), block = PUSH_BLOCK_BYTES / esz;
    uint64_t g;
    /* everyone has entered: every input is in place, and no peer still reads a buffer of the last call */
    int rc = enter_all(c, &g, deadline);
    if (rc < 0) return rc;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    size_t lo = slice_lo(count, L, me, esz), hi = slice_lo(count, L, me + 1, esz);
    for (size_t b = lo; b < hi; b += block) {
        size_t n = hi - b < block ? hi - b : block, at = base + b * esz;
        for (int q = 0; q < L; q++) srcs[q] = buf->peer[q] + at;
        baton__reduce_n(buf->peer[me] + at, srcs, L, n, dt, op, avg_div);
        for (int q = 0; q < L; q++)
            if (q != me) memcpy(buf->peer[q] + at, buf->peer[me] + at, n * esz);
    }
    /* Peers may still be writing their slices into my buffer: it is the caller's again when all are done. */
    return leave_all(c, g, deadline);
}

/* ---- cross-memory attach ------------------------------------------------------------------------------
 * With ordinary (malloc'ed) buffers, a rank can still read its peers' buffers directly: process_vm_readv
 * copies from another process's memory in one kernel copy. That removes the staging copies of the path
 * above: each rank reads its slice of every peer's input straight into scratch, reduces into its own
 * output, then reads every peer's reduced slice straight into its output. Used when every local pair can
 * (checked at init, agreed by all ranks; BATON_CMA=0 turns it off). The all-gather uses it from BATON_CMA_MIN
 * (default 256 KiB) up; the all-reduce only for sizes in [BATON_CMA_MIN, BATON_CMA_MAX), and BATON_CMA_MAX
 * defaults to 0 (staged): measured slower here (docs/measurements/plan-history.md, "shm direct: cross-memory
 * attach was the slow, unsteady part"). */

static int cma_read(baton_comm *c, int q, void *local, uint64_t remote, size_t bytes) {
    pid_t pid = baton__shm_rank_block(c->shm, q)->pid;
    uint8_t *l = local;
    while (bytes) {
        struct iovec li = {l, bytes}, ri = {(void *)(uintptr_t)remote, bytes};
        ssize_t n = process_vm_readv(pid, &li, 1, &ri, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == ESRCH)
            return baton__fail(BATON_EPEERDEAD, "rank %d (pid %d) died", c->local_ranks[q], (int)pid);
        if (n <= 0)
            return baton__fail(BATON_ESYS, "reading rank %d's buffer (process_vm_readv): %s", c->local_ranks[q],
                               n < 0 ? strerror(errno) : "no progress");
        l += n;
        remote += (uint64_t)n;
        bytes -= (size_t)n;
    }
    return BATON_OK;
}

int baton__shm_cma_probe(baton_comm *c) {
    const char *e = getenv("BATON_CMA");
    if (e && *e && strcmp(e, "0") && strcmp(e, "1"))
        return baton__fail(BATON_EINVAL, "BATON_CMA='%s' must be 0 (off) or 1 (on where it works)", e);
    int64_t ok = !(e && !strcmp(e, "0")), all = 0;
    /* each rank reads its two ring neighbours (not all L - 1: 512 ranks made 261,632 reads); since every
     * rank is read by its neighbours, a process nobody may read is still found, and the vote is the node's */
    int L = c->local_size, nq = L > 3 ? 2 : L - 1;
    for (int i = 0; i < nq && ok; i++) {
        int q = i == 0 ? (c->local_rank + 1) % L : (c->local_rank + L - 1) % L;
        uint64_t addr = atomic_load(&baton__shm_rank_block(c->shm, q)->cma_send), v = 0;
        if (!addr || cma_read(c, q, &v, addr, sizeof v) < 0 || v != 0xba7090000000ull + (uint64_t)c->local_ranks[q])
            ok = 0;
    }
    baton__clear_error();
    /* Agree through the segment, not a collective (users' collectives keep their numbers from #1) nor the
     * store (L^2 requests, then 3L through local rank 0, were most of init at 512 ranks). */
    int yes_all = 0;
    int rc = baton__shm_agree_once(c->shm, ok == 1, baton__deadline_after(c->opt.join_timeout_s), &yes_all);
    if (rc < 0) return baton__fail_ctx(rc, "agreeing on cross-memory attach: ");
    all = yes_all;
    c->cma = all == 1;
    if (!c->cma) BATON_INFO("cross-memory attach not available between local ranks: staging through shared memory");
    return BATON_OK;
}

static int cma_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                         int avg_div, uint64_t deadline) {
    int L = c->local_size, me = c->local_rank, rc;
    size_t esz = baton_dtype_size(dt);
    size_t chunk = c->shm_chunk_bytes / esz;
    size_t nchunks = (count + chunk - 1) / chunk;
    baton_shm_rank *mine = baton__shm_rank_block(c->shm, me);
    atomic_store_explicit(&mine->cma_send, (uint64_t)(uintptr_t)send, memory_order_relaxed);
    atomic_store_explicit(&mine->cma_recv, (uint64_t)(uintptr_t)recv, memory_order_relaxed);
    uint64_t psend[BATON_SHM_MAX_LOCAL], precv[BATON_SHM_MAX_LOCAL];
    /* scratch for the peers' input slices: my staging buffers (nobody reads them during this collective) */
    uint8_t *tmp = baton__shm_stage(c->shm, me, 0);
    const uint8_t *in = send;
    uint8_t *out = recv;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    for (size_t k = 0; k < nchunks; k++) {
        chunk_pos p;
        chunk_at(c, k, chunk, count, &p);
        post(c, 3 * p.g + 1);
        if (k == 0) { /* everyone has entered (their addresses are published and their inputs ready) */
            if ((rc = wait_all(c, 3 * p.g + 1, deadline)) < 0 || (rc = check_peers(c)) < 0) return rc;
            for (int q = 0; q < L; q++) {
                psend[q] = atomic_load_explicit(&baton__shm_rank_block(c->shm, q)->cma_send, memory_order_relaxed);
                precv[q] = atomic_load_explicit(&baton__shm_rank_block(c->shm, q)->cma_recv, memory_order_relaxed);
            }
        }
        size_t lo = slice_lo(p.m, L, me, esz), hi = slice_lo(p.m, L, me + 1, esz), n = hi - lo;
        for (int q = 0, t = 0; q < L; q++) {
            if (q == me) {
                srcs[q] = in + (p.off + lo) * esz;
                continue;
            }
            uint8_t *scratch = tmp + (size_t)t++ * n * esz;
            if (n && (rc = cma_read(c, q, scratch, psend[q] + (p.off + lo) * esz, n * esz)) < 0) return rc;
            srcs[q] = scratch;
        }
        baton__reduce_n(out + (p.off + lo) * esz, srcs, L, n, dt, op, avg_div);
        post(c, 3 * p.g + 2);
        if ((rc = wait_all(c, 3 * p.g + 2, deadline)) < 0) return rc;
        for (int q = 0; q < L; q++) {
            if (q == me) continue;
            size_t qlo = slice_lo(p.m, L, q, esz), qhi = slice_lo(p.m, L, q + 1, esz);
            if (qhi > qlo &&
                (rc = cma_read(c, q, out + (p.off + qlo) * esz, precv[q] + (p.off + qlo) * esz, (qhi - qlo) * esz)) < 0)
                return rc;
        }
        post(c, 3 * p.g + 3);
    }
    c->big_chunks += nchunks;
    /* Peers may still be reading my buffers: they are the caller's again only when all are done. */
    return wait_all(c, 3 * (c->big_chunks - 1) + 3, deadline);
}

int baton__shm_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                         int avg_div, uint64_t deadline) {
    size_t esz = baton_dtype_size(dt);
    if (count == 0) return BATON_OK;
    if (count * esz <= BATON_SHM_SMALL_BYTES - BATON_SHM_SMALL_DATA)
        return small_allreduce(c, send, recv, count, dt, op, avg_div, deadline);
    size_t boff;
    baton_shm_buffer *reg;
    if (send == recv && (reg = baton__shm_find_buffer(c, recv, count * esz, &boff)))
        return zero_copy_allreduce(c, reg, boff, count, dt, op, avg_div, deadline);
    /* Cross-memory attach only where BATON_CMA_MAX asks for it (default 0: never). It once won while the
     * buffers fit in cache (16 MiB 7.2 against 6.4 GB/s), but on this VM's current kernel the kernel's copy
     * (a page-table walk and pin per 4 KiB page, then the copy) is 3-4x slower than memcpy, and the all-reduce
     * by it was slower than the staged path and varied 2x from job to job (issue 9;
     * docs/measurements/plan-history.md, "shm direct: cross-memory attach was the slow, unsteady part"). */
    if (c->cma && count * esz >= c->cma_min_bytes && count * esz < c->cma_max_bytes)
        return cma_allreduce(c, send, recv, count, dt, op, avg_div, deadline);

    int L = c->local_size, me = c->local_rank;
    size_t chunk = c->shm_chunk_bytes / esz;
    size_t nchunks = (count + chunk - 1) / chunk;
    const uint8_t *in = send;
    uint8_t *out = recv;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    /* Results larger than the caches go out with non-temporal stores. */
    int stream = count * esz >= c->shm_stream_bytes;
    int rc;
    /* Chunk k+1 is staged right after chunk k's reduction, while the others may still be reducing: its
     * buffer is free then (every rank has posted 3g+1 for chunk g, so all have consumed chunk g-1, the
     * buffer's previous user), and the copy fills what would otherwise be waiting. */
    chunk_pos p, next;
    if ((rc = chunk_begin(c, 0, chunk, count, &p, deadline)) < 0) return rc;
    stage_others(c, &p, in, esz);
    for (size_t k = 0; k < nchunks; k++) {
        uint64_t g = p.g;
        int b = p.b;
        size_t off = p.off, m = p.m;
        uint8_t *mine = baton__shm_stage(c->shm, me, b);
        size_t lo = slice_lo(m, L, me, esz), hi = slice_lo(m, L, me + 1, esz);
        if ((rc = chunk_staged(c, &p, deadline)) < 0) return rc;
        for (int q = 0; q < L; q++)
            srcs[q] = q == me ? in + (off + lo) * esz : (uint8_t *)baton__shm_stage(c->shm, q, b) + lo * esz;
        baton__reduce_n(mine + lo * esz, srcs, L, hi - lo, dt, op, avg_div);
        post(c, 3 * g + 2);
        if (k + 1 < nchunks) {
            chunk_at(c, k + 1, chunk, count, &next);
            stage_others(c, &next, in, esz);
        }
        if ((rc = wait_all(c, 3 * g + 2, deadline)) < 0) return rc;
        for (int q = 0; q < L; q++) {
            size_t qlo = slice_lo(m, L, q, esz), qhi = slice_lo(m, L, q + 1, esz);
            const uint8_t *from = (uint8_t *)baton__shm_stage(c->shm, q, b) + qlo * esz;
            if (stream)
                baton__copy_stream(out + (off + qlo) * esz, from, (qhi - qlo) * esz);
            else
                memcpy(out + (off + qlo) * esz, from, (qhi - qlo) * esz);
        }
        post(c, 3 * g + 3);
        p = next;
    }
    if (stream) baton__copy_stream_fence();
    c->big_chunks += nchunks;
    return BATON_OK;
}

int baton__shm_reduce_scatter(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                              uint64_t deadline) {
    if (count == 0) return BATON_OK;
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt);
    /* A stage holds, for every destination rank, `chunk` elements of its block. */
    size_t chunk = BATON_SHM_STAGE_BYTES / esz / (size_t)L;
    size_t nchunks = (count + chunk - 1) / chunk;
    const uint8_t *in = send;
    uint8_t *out = recv;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    int rc;
    for (size_t k = 0; k < nchunks; k++) {
        chunk_pos p;
        if ((rc = chunk_begin(c, k, chunk, count, &p, deadline)) < 0) return rc;
        uint8_t *mine = baton__shm_stage(c->shm, me, p.b);
        for (int r = 0; r < L; r++)
            memcpy(mine + (size_t)r * chunk * esz, in + ((size_t)r * count + p.off) * esz, p.m * esz);
        if ((rc = chunk_staged(c, &p, deadline)) < 0) return rc;
        for (int q = 0; q < L; q++) srcs[q] = (uint8_t *)baton__shm_stage(c->shm, q, p.b) + (size_t)me * chunk * esz;
        baton__reduce_n(out + p.off * esz, srcs, L, p.m, dt, op, op == BATON_AVG ? L : 0);
        post(c, 3 * p.g + 3);
    }
    c->big_chunks += nchunks;
    return BATON_OK;
}

/* All-gather by cross-memory attach: each rank reads every peer's piece straight from the peer's send
 * buffer into its own output, one kernel copy per peer and no staging. Besides saving the two staging
 * copies, it touches no shared pages: the staged path writes this rank's staging buffers and reads the
 * peers', which adds them (4 x BATON_SHM_STAGE_BYTES per rank pair) to the process's resident set, and
 * ZeRO's parameter all-gather runs every step (docs/zero.md). In place (send is recv's piece of this rank)
 * nothing is copied locally: the peers read the piece, and this rank writes only the others. */
static int cma_allgather(baton_comm *c, const void *send, void *recv, size_t count, size_t esz, uint64_t deadline) {
    int L = c->local_size, me = c->local_rank, rc;
    size_t piece = count * esz;
    uint8_t *out = recv;
    baton_shm_rank *mine = baton__shm_rank_block(c->shm, me);
    atomic_store_explicit(&mine->cma_send, (uint64_t)(uintptr_t)send, memory_order_relaxed);
    uint64_t g;
    if ((rc = enter_all(c, &g, deadline)) < 0) return rc;   /* every piece is final and its address published */
    for (int i = 1; i < L; i++) {   /* start at the next rank: L readers do not all hit rank 0 first */
        int q = (me + i) % L;
        uint64_t from = atomic_load_explicit(&baton__shm_rank_block(c->shm, q)->cma_send, memory_order_relaxed);
        if ((rc = cma_read(c, q, out + (size_t)q * piece, from, piece)) < 0) return rc;
    }
    /* Peers may still be reading my piece: the send buffer is the caller's again only when all are done
     * (and only then is my own piece copied, in case it overlaps the send buffer without being it). */
    if ((rc = leave_all(c, g, deadline)) < 0) return rc;
    if ((const uint8_t *)send != out + (size_t)me * piece) memmove(out + (size_t)me * piece, send, piece);
    return BATON_OK;
}

int baton__shm_allgather(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt,
                         uint64_t deadline) {
    if (count == 0) return BATON_OK;
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt);
    /* Cross-memory attach from the cache-friendly size up, with no upper bound (unlike the all-reduce): it
     * makes one copy of the peers' pieces where staging makes three. The choice depends only on what every
     * rank agrees on (sizes, the node's vote), so all ranks take the same path. */
    if (c->cma && count * esz * (size_t)L >= c->cma_min_bytes) return cma_allgather(c, send, recv, count, esz, deadline);
    size_t chunk = BATON_SHM_STAGE_BYTES / esz;
    size_t nchunks = (count + chunk - 1) / chunk;
    const uint8_t *in = send;
    uint8_t *out = recv;
    int rc;
    for (size_t k = 0; k < nchunks; k++) {
        chunk_pos p;
        if ((rc = chunk_begin(c, k, chunk, count, &p, deadline)) < 0) return rc;
        memcpy(baton__shm_stage(c->shm, me, p.b), in + p.off * esz, p.m * esz);
        if ((rc = chunk_staged(c, &p, deadline)) < 0) return rc;
        for (int q = 0; q < L; q++)
            memmove(out + ((size_t)q * count + p.off) * esz, baton__shm_stage(c->shm, q, p.b), p.m * esz);
        post(c, 3 * p.g + 3);
    }
    c->big_chunks += nchunks;
    return BATON_OK;
}

int baton__shm_broadcast(baton_comm *c, void *buf, size_t count, baton_dtype dt, int root, uint64_t deadline) {
    if (count == 0) return BATON_OK;
    int me = c->local_rank;
    size_t esz = baton_dtype_size(dt);
    size_t chunk = BATON_SHM_STAGE_BYTES / esz;
    size_t nchunks = (count + chunk - 1) / chunk;
    uint8_t *data = buf;
    int rc;
    for (size_t k = 0; k < nchunks; k++) {
        chunk_pos p;
        if (me == root) { /* stage, and say so */
            if ((rc = chunk_begin(c, k, chunk, count, &p, deadline)) < 0) return rc;
            memcpy(baton__shm_stage(c->shm, root, p.b), data + p.off * esz, p.m * esz);
        } else { /* wait for the root's chunk, take it */
            chunk_at(c, k, chunk, count, &p);
            if ((rc = baton__shm_wait_one(c->shm, root, BATON_SHM_CTR_BIG, 3 * p.g + 3, deadline)) < 0) return rc;
            if (k == 0 && (rc = check_one(c, root)) < 0) return rc;
            memcpy(data + p.off * esz, baton__shm_stage(c->shm, root, p.b), p.m * esz);
        }
        post(c, 3 * p.g + 3);
    }
    c->big_chunks += nchunks;
    /* The root waits until every rank has taken the data and then compares descriptors: otherwise two
     * ranks that each believe they are the root would both return at once and nobody would notice. */
    if (me == root && ((rc = wait_all(c, 3 * (c->big_chunks - 1) + 3, deadline)) < 0 || (rc = check_peers(c)) < 0))
        return rc;
    return BATON_OK;
}

/* ---- the hierarchical all-reduce's in-node phases (hier.c) ---------------------------------------- */

void baton__shm_slice(size_t m, int L, int r, baton_dtype dt, size_t *lo, size_t *hi) {
    size_t esz = baton_dtype_size(dt);
    *lo = slice_lo(m, L, r, esz);
    *hi = slice_lo(m, L, r + 1, esz);
}

/* Stage use u of the running collective: its chunk number g and staging buffer; waits until it is free. */
static int use_begin(baton_comm *c, uint64_t u, size_t m, chunk_pos *p, uint64_t deadline) {
    p->k = (size_t)u;
    p->g = c->big_chunks + u;
    p->b = (int)(p->g & 1);
    p->off = 0;
    p->m = m;
    return wait_free(c, p->g, deadline);
}

int baton__shm_rs_slice(baton_comm *c, uint64_t u, const void *in, size_t m, baton_dtype dt, baton_op op,
                        void *slice, uint64_t deadline) {
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt), lo, hi;
    baton__shm_slice(m, L, me, dt, &lo, &hi);
    chunk_pos p;
    int rc;
    if ((rc = use_begin(c, u, m, &p, deadline)) < 0) return rc;
    stage_others(c, &p, in, esz);
    if ((rc = chunk_staged(c, &p, deadline)) < 0) return rc;
    const void *srcs[BATON_SHM_MAX_LOCAL];
    for (int q = 0; q < L; q++)
        srcs[q] = q == me ? (const uint8_t *)in + lo * esz : (uint8_t *)baton__shm_stage(c->shm, q, p.b) + lo * esz;
    if (dt == BATON_F16 || dt == BATON_BF16) { /* f32 partial: widen the first source, accumulate the others */
        (dt == BATON_F16 ? baton__f16_to_f32 : baton__bf16_to_f32)(slice, srcs[0], hi - lo);
        for (int q = 1; q < L; q++) baton__reduce_f32_acc16(slice, srcs[q], hi - lo, dt, op);
    } else {
        baton__reduce_n(slice, srcs, L, hi - lo, dt, op, 0);
    }
    post(c, 3 * p.g + 3);
    return BATON_OK;
}

int baton__shm_ag_slice(baton_comm *c, uint64_t u, const void *slice, void *out, size_t m, baton_dtype dt,
                        uint64_t deadline) {
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt), lo, hi;
    baton__shm_slice(m, L, me, dt, &lo, &hi);
    chunk_pos p;
    int rc;
    if ((rc = use_begin(c, u, m, &p, deadline)) < 0) return rc;
    memcpy((uint8_t *)baton__shm_stage(c->shm, me, p.b) + lo * esz, slice, (hi - lo) * esz);
    if ((rc = chunk_staged(c, &p, deadline)) < 0) return rc;
    for (int q = 0; q < L; q++) {
        size_t qlo, qhi;
        baton__shm_slice(m, L, q, dt, &qlo, &qhi);
        const uint8_t *from = q == me ? slice : (uint8_t *)baton__shm_stage(c->shm, q, p.b) + qlo * esz;
        memcpy((uint8_t *)out + qlo * esz, from, (qhi - qlo) * esz);
    }
    post(c, 3 * p.g + 3);
    return BATON_OK;
}

int baton__shm_barrier(baton_comm *c, uint64_t deadline) {
    uint64_t g;
    int rc = enter_all(c, &g, deadline);
    post(c, 3 * g + 3);   /* no wait: a barrier touches no memory a peer could still be using */
    return rc;
}

/* ---- shared buffers -------------------------------------------------------------------------------- */

baton_shm_buffer *baton__shm_find_buffer(baton_comm *c, const void *p, size_t bytes, size_t *offset) {
    const uint8_t *q = p;
    for (baton_shm_buffer *b = c->buffers; b; b = b->next)
        if (b->peer && q >= b->local && q + bytes <= b->local + b->bytes) {
            *offset = (size_t)(q - b->local);
            return b;
        }
    return NULL;
}

/* baton_reduce_range on a buffer every local rank mapped: everyone's input is in place once all have entered;
 * I reduce my range from the peers' buffers into mine (the peers read only their own ranges, never mine), and
 * the buffer is the caller's again when every rank has finished reading. One progress value pair, like a chunk. */
int baton__shm_reduce_range(baton_comm *c, baton_shm_buffer *buf, size_t base, size_t lo, size_t hi, baton_dtype dt,
                            baton_op op, int avg_div, uint64_t deadline) {
    int L = c->local_size, me = c->local_rank;
    size_t esz = baton_dtype_size(dt);
    uint64_t g;
    int rc = enter_all(c, &g, deadline);
    if (rc < 0) return rc;
    if (hi > lo) {
        const void *srcs[BATON_SHM_MAX_LOCAL];
        size_t at = base + lo * esz;
        for (int q = 0; q < L; q++) srcs[q] = buf->peer[q] + at;
        baton__reduce_n(buf->peer[me] + at, srcs, L, hi - lo, dt, op, avg_div);
    }
    return leave_all(c, g, deadline);
}
