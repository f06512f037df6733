/* algo_util.h: small helpers shared by the point-to-point collective algorithms (algo_*.c): element sizes,
 * the uneven chunk layout of the ring algorithms, and group-indexed sendrecv with error context.
 *
 *   size_t off, len;
 *   baton__chunk(count, n, c, &off, &len);        // chunk c of count elements split n ways
 *   rc = baton__gsendrecv(g, right, sp, sb, left, rp, rb, "ring allreduce");  // group indices, not ranks */
#ifndef BATON_ALGO_UTIL_H
#define BATON_ALGO_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/algo.h"
#include "util/util.h"

#define BATON_SEGMENT_DEFAULT ((size_t)256 * 1024)

static inline size_t baton__esize(baton_dtype dt) {
    switch (dt) {
    case BATON_F64: case BATON_I64: return 8;
    case BATON_F16: case BATON_BF16: return 2;
    default: return 4;
    }
}
static inline int baton__is16(baton_dtype dt) { return dt == BATON_F16 || dt == BATON_BF16; }

/* Chunk c (0..n-1) of count elements: the first count % n chunks hold one element more. */
static inline void baton__chunk(size_t count, int n, int c, size_t *off, size_t *len) {
    size_t base = count / (size_t)n, rem = count % (size_t)n, cc = (size_t)c;
    *len = base + (cc < rem ? 1 : 0);
    *off = cc * base + (cc < rem ? cc : rem);
}

static inline int baton__mod(int a, int n) { return ((a % n) + n) % n; }

static inline size_t baton__segment(const baton_group *g) {
    return g->segment_bytes ? g->segment_bytes : BATON_SEGMENT_DEFAULT;
}

/* sendrecv between group indices (-1: none); on failure prefixes `what` to the transport's detail.
 * The _cb form reports the receive buffer's progress (see baton_recv_progress). */
static inline int baton__gsendrecv_cb(const baton_group *g, int sidx, const void *sbuf, size_t sbytes, int ridx,
                                      void *rbuf, size_t rbytes, const baton_recv_progress *progress,
                                      const char *what) {
    int sp = sidx >= 0 ? baton__group_peer(g, sidx) : -1, rp = ridx >= 0 ? baton__group_peer(g, ridx) : -1;
    int rc = g->t->ops->sendrecv(g->t, sp, sbuf, sbytes, rp, rbuf, rbytes, g->deadline_ns, progress);
    return rc < 0 ? baton__fail_ctx(rc, "%s: ", what) : rc;
}

static inline int baton__gsendrecv(const baton_group *g, int sidx, const void *sbuf, size_t sbytes, int ridx,
                                   void *rbuf, size_t rbytes, const char *what) {
    return baton__gsendrecv_cb(g, sidx, sbuf, sbytes, ridx, rbuf, rbytes, NULL, what);
}

/* Validates the group and arguments every algorithm shares. */
static inline int baton__check_group(const baton_group *g, baton_dtype dt, const char *what) {
    if (!g || !g->t || g->n < 1 || g->me < 0 || g->me >= g->n)
        return baton__fail(BATON_EINVAL, "%s: bad group (n %d, me %d)", what, g ? g->n : -1, g ? g->me : -1);
    if ((int)dt < 0 || dt >= BATON_DTYPE_COUNT) return baton__fail(BATON_EINVAL, "%s: bad dtype %d", what, (int)dt);
    return BATON_OK;
}

#endif
