/* algo_bcast.c: broadcast (binomial tree for small buffers, pipelined chain for large ones), the
 * dissemination barrier and the neighbour agreement step, over any transport. See docs/algorithms.md. */
#include <string.h>

#include "comm/algo_util.h"

/* Buffers at least this large (and groups of 3 or more) use the pipelined chain. */
#define BCAST_CHAIN_MIN_BYTES ((size_t)64 * 1024)

/* Binomial tree rooted at virtual rank 0 (vr = me - root mod n): receive once from the parent (vr with its
 * lowest set bit cleared), then send to the children vr + 2^k for every 2^k below that bit. */
static int bcast_binomial(const baton_group *g, uint8_t *buf, size_t bytes, int root) {
    const int n = g->n, vr = baton__mod(g->me - root, n);
    int mask = 1, rc;
    while (mask < n) {
        if (vr & mask) {
            rc = baton__gsendrecv(g, -1, NULL, 0, baton__mod(vr - mask + root, n), buf, bytes, "broadcast (tree)");
            if (rc < 0) return rc;
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < n) {
            rc = baton__gsendrecv(g, baton__mod(vr + mask + root, n), buf, bytes, -1, NULL, 0, "broadcast (tree)");
            if (rc < 0) return rc;
        }
    }
    return BATON_OK;
}

/* Chain root -> root+1 -> ... in segments: a middle rank forwards segment k-1 while it receives segment k,
 * so every link is busy and the time is about (bytes + (n-2) * segment) / bandwidth. Every link carries
 * the same sequence of segment-sized messages (the root and the tail too), so that each send matches one
 * receive: the transports frame and check every message (comm/desc.h). */
static int bcast_chain(const baton_group *g, uint8_t *buf, size_t bytes, int root) {
    const int n = g->n, vr = baton__mod(g->me - root, n);
    const int next = vr + 1 < n ? baton__mod(g->me + 1, n) : -1, prev = vr > 0 ? baton__mod(g->me - 1, n) : -1;
    const size_t seg = baton__segment(g), nseg = (bytes + seg - 1) / seg;
    if (prev < 0 || next < 0) {
        for (size_t k = 0; k < nseg; k++) {
            size_t off = k * seg, len = bytes - off < seg ? bytes - off : seg;
            int rc = prev < 0 ? baton__gsendrecv(g, next, buf + off, len, -1, NULL, 0, "broadcast (chain)")
                              : baton__gsendrecv(g, -1, NULL, 0, prev, buf + off, len, "broadcast (chain)");
            if (rc < 0) return rc;
        }
        return BATON_OK;
    }
    for (size_t k = 0; k <= nseg; k++) {
        size_t so = (k - 1) * seg, ro = k * seg;
        size_t sn = k == 0 ? 0 : (bytes - so < seg ? bytes - so : seg);
        size_t rn = k == nseg ? 0 : (bytes - ro < seg ? bytes - ro : seg);
        int rc = baton__gsendrecv(g, sn ? next : -1, buf + (k ? so : 0), sn, rn ? prev : -1, buf + ro, rn,
                                  "broadcast (chain)");
        if (rc < 0) return rc;
    }
    return BATON_OK;
}

/* One 1-byte message from every rank to its right neighbour, sent before anything else of the collective.
 * With the communicator's frame headers on, each rank has then compared its left neighbour's descriptor
 * with its own, and since the ring visits every rank, ranks that disagree are found (by at least one of
 * them, at once) even when the collective itself would let some rank receive nothing: a broadcast's root,
 * every rank of a collective of 0 elements. */
int baton__agree_p2p(const baton_group *g, const char *what) {
    if (g->n < 2) return BATON_OK;
    uint8_t out = 0xa9, in = 0;
    int rc = baton__gsendrecv(g, baton__mod(g->me + 1, g->n), &out, 1, baton__mod(g->me - 1, g->n), &in, 1, what);
    if (rc == BATON_OK && in != 0xa9)
        return baton__fail(BATON_EPROTO, "%s: unexpected agreement byte 0x%02x from group index %d", what, in,
                           baton__mod(g->me - 1, g->n));
    return rc;
}

int baton__broadcast_p2p(const baton_group *g, void *buf, size_t count, baton_dtype dt, int root) {
    int rc = baton__check_group(g, dt, "broadcast");
    if (rc < 0) return rc;
    if (root < 0 || root >= g->n)
        return baton__fail(BATON_EINVAL, "broadcast: root %d out of range (group of %d)", root, g->n);
    size_t bytes;
    if (!baton__mul_ok(count, baton__esize(dt), &bytes))
        return baton__fail(BATON_EINVAL, "broadcast: count %zu overflows", count);
    if (g->n == 1) return BATON_OK;
    if (bytes && !buf) return baton__fail(BATON_EINVAL, "broadcast: NULL buffer");
    /* The root receives nothing in the tree or the chain: without this, ranks that disagree about the root
     * would each send and return (issue 15). */
    if ((rc = baton__agree_p2p(g, "broadcast (agreement)")) < 0 || bytes == 0) return rc;
    if (g->n >= 3 && bytes >= BCAST_CHAIN_MIN_BYTES) return bcast_chain(g, buf, bytes, root);
    return bcast_binomial(g, buf, bytes, root);
}

/* Dissemination: in round k every rank signals the rank 2^k ahead and waits for the one 2^k behind; after
 * ceil(log2 n) rounds each rank has (transitively) heard from every other. */
int baton__barrier_p2p(const baton_group *g) {
    int rc = baton__check_group(g, BATON_F32, "barrier");
    if (rc < 0) return rc;
    uint8_t out = 0xb7, in = 0;
    for (int d = 1; d < g->n; d <<= 1) {
        rc = baton__gsendrecv(g, baton__mod(g->me + d, g->n), &out, 1, baton__mod(g->me - d, g->n), &in, 1, "barrier");
        if (rc < 0) return rc;
        if (in != 0xb7) return baton__fail(BATON_EPROTO, "barrier: unexpected byte 0x%02x from group index %d", in,
                                            baton__mod(g->me - d, g->n));
    }
    return BATON_OK;
}
