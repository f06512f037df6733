/* algo_ring.c: ring all-reduce (reduce-scatter then all-gather), ring reduce-scatter and ring all-gather
 * over any transport. See docs/algorithms.md for the schedule, the bytes on the wire and the precision
 * rule for 16-bit dtypes (f32 partials on the wire, rounded once by the chunk's owner). */
#include <stdlib.h>
#include <string.h>

#include "comm/algo_util.h"
#include "comm/reduce.h"

static int overlaps(const void *a, size_t alen, const void *b, size_t blen) {
    const uint8_t *pa = a, *pb = b;
    return pa < pb + blen && pb < pa + alen;
}

/* One reduce-scatter step's receiving side: where each incoming piece lands and how it is combined. */
typedef struct {
    const uint8_t *mine;  /* this rank's input, at the received chunk's offset */
    uint8_t *dst;         /* where the chunk's partial goes (wire element size wsz) */
    uint8_t *tmp;         /* landing area for one piece when the partial cannot be received in place */
    size_t xsz, wsz, esz; /* element bytes: on the wire in this step, of a partial, of the dtype */
    int direct, first16;  /* received straight into dst; 16-bit raw values (step 0) to widen first */
    baton_dtype dt;
    baton_op op;
} rs_step;

static void *rs_dst(void *arg, size_t off, size_t len) {
    (void)len;
    rs_step *st = arg;
    return st->direct ? st->dst + off : st->tmp;   /* direct implies xsz == wsz */
}

static int rs_done(void *arg, size_t off, size_t len) {
    rs_step *st = arg;
    size_t b = off / st->xsz, rn = len / st->xsz;
    uint8_t *d = st->dst + b * st->wsz;
    const uint8_t *m = st->mine + b * st->esz;
    if (baton__is16(st->dt)) {
        if (st->first16) {   /* d = widen(the left rank's raw values), then d op= widen(mine) */
            if (st->dt == BATON_F16) baton__f16_to_f32((float *)d, (const uint16_t *)st->tmp, rn);
            else baton__bf16_to_f32((float *)d, (const uint16_t *)st->tmp, rn);
        }
        baton__reduce_f32_acc16((float *)d, (const uint16_t *)m, rn, st->dt, st->op);
    } else if (st->direct) {
        baton__reduce(d, m, rn, st->dt, st->op);
    } else {
        const void *srcs[2] = {st->tmp, m};
        baton__reduce_n(d, srcs, 2, rn, st->dt, st->op, 0);
    }
    return BATON_OK;
}

/* The reduce-scatter phase. count elements of `mine` are split into n chunks (baton__chunk). At step s
 * (0..n-2) rank me sends chunk (me + a - s) to its right and receives chunk (me + a - s - 1) from the left,
 * combining it with its own data; after the phase it holds the full reduction of chunk (me + a + 1) % n.
 *
 * Where partial sums live: if acc (non-16-bit only) is given, chunk c accumulates at acc + off(c) (acc may
 * be `mine`, in place) and the final chunk stays there (AVG applied). Otherwise partials alternate
 * between two chunk-sized scratch buffers and the final chunk is written to `out` (16-bit dtypes: the f32
 * partial is rounded once into out). 16-bit dtypes send their raw values at step 0 (exact, half the bytes)
 * and f32 partials from step 1 on.
 *
 * Each step's data is ready when the step starts, so with a transport that offers sendrecv_pieces the
 * whole chunk goes out as one message while the incoming one is reduced piece by piece (segment_bytes)
 * as it lands: the link never waits for the reduction. Otherwise the step is a sequence of segment-sized
 * sendrecv calls, each followed by the reduction of its segment. */
static int ring_rs(const baton_group *g, const uint8_t *mine, size_t count, baton_dtype dt, baton_op op, int a,
                   uint8_t *acc, uint8_t *out, const char *what) {
    const int n = g->n, me = g->me, right = baton__mod(me + 1, n), left = baton__mod(me - 1, n);
    const int is16 = baton__is16(dt), pieces = g->t->ops->sendrecv_pieces != NULL;
    const size_t esz = baton__esize(dt), wsz = is16 ? 4 : esz;
    size_t seg = baton__segment(g) / wsz;
    if (seg == 0) seg = 1;
    size_t maxlen = count / (size_t)n + (count % (size_t)n ? 1 : 0);
    if (seg > maxlen) seg = maxlen;   /* maxlen >= 1: count >= 1 */
    BATON_ASSERT(!(acc && is16));
    uint8_t *pp[2] = {NULL, NULL}, *tmp = NULL;
    int rc = BATON_OK;
    if (!acc) {
        pp[0] = malloc(maxlen * wsz);
        pp[1] = malloc(maxlen * wsz);
    }
    tmp = malloc(seg * wsz);
    if ((!acc && (!pp[0] || !pp[1])) || !tmp) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory for %zu-element scratch", what, maxlen);
        goto done;
    }
    for (int s = 0; s < n - 1; s++) {
        const int sc = baton__mod(me + a - s, n), rcv = baton__mod(me + a - s - 1, n);
        const int last = s == n - 2;
        /* Step 0 forwards raw input, which 16-bit dtypes send as they are (exact); from step 1 on the
         * partials are f32. */
        const size_t xsz = s == 0 ? esz : wsz;
        size_t soff, slen, roff, rlen;
        baton__chunk(count, n, sc, &soff, &slen);
        baton__chunk(count, n, rcv, &roff, &rlen);
        /* destination of this step's partial for chunk rcv, and source of the partial we forward */
        uint8_t *dst = acc ? acc + roff * esz : (last && !is16) ? out : pp[s & 1];
        const uint8_t *src = s == 0 ? mine + soff * esz : acc ? acc + soff * esz : pp[(s - 1) & 1];
        rs_step st = {mine + roff * esz, dst, tmp, xsz, wsz, esz,
                      !(is16 && s == 0) && !overlaps(dst, rlen * wsz, mine + roff * esz, rlen * esz), is16 && s == 0,
                      dt, op};
        if (pieces) {
            baton_piece_sink sink = {rs_dst, rs_done, &st};
            rc = baton__gsendrecv_pieces(g, right, src, slen * xsz, left, rlen * xsz, seg * xsz, &sink, what);
            if (rc < 0) goto done;
            continue;
        }
        size_t nseg = ((slen > rlen ? slen : rlen) + seg - 1) / seg;
        for (size_t k = 0; k < nseg; k++) {
            size_t b = k * seg;
            size_t sn = b < slen ? (slen - b < seg ? slen - b : seg) : 0;
            size_t rn = b < rlen ? (rlen - b < seg ? rlen - b : seg) : 0;
            rc = baton__gsendrecv(g, right, src + b * xsz, sn * xsz, left, rs_dst(&st, b * xsz, rn * xsz), rn * xsz,
                                  what);
            if (rc < 0) goto done;
            if (rn) rs_done(&st, b * xsz, rn * xsz);
        }
    }
    {
        size_t ooff, olen;
        baton__chunk(count, n, baton__mod(me + a + 1, n), &ooff, &olen);
        int avg_n = op == BATON_AVG ? n : 1;
        if (is16) baton__f32_to_16_avg((uint16_t *)out, (const float *)pp[(n - 2) & 1], olen, dt, avg_n);
        else if (op == BATON_AVG) baton__finish_avg(acc ? acc + ooff * esz : out, olen, dt, n);
    }
done:
    free(pp[0]);
    free(pp[1]);
    free(tmp);
    return rc;
}

/* The all-gather phase over buf (count elements in n chunks): rank me starts holding chunk (me + a); at
 * step s it sends chunk (me + a - s) right and receives chunk (me + a - s - 1) from the left, straight into
 * its place in buf. */
static int ring_ag(const baton_group *g, uint8_t *buf, size_t count, size_t esz, int a, const char *what) {
    const int n = g->n, me = g->me, right = baton__mod(me + 1, n), left = baton__mod(me - 1, n);
    for (int s = 0; s < n - 1; s++) {
        size_t soff, slen, roff, rlen;
        baton__chunk(count, n, baton__mod(me + a - s, n), &soff, &slen);
        baton__chunk(count, n, baton__mod(me + a - s - 1, n), &roff, &rlen);
        int rc = baton__gsendrecv(g, right, buf + soff * esz, slen * esz, left, buf + roff * esz, rlen * esz, what);
        if (rc < 0) return rc;
    }
    return BATON_OK;
}

int baton__allreduce_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt,
                          baton_op op) {
    int rc = baton__check_group(g, dt, "ring allreduce");
    if (rc < 0) return rc;
    if ((int)op < 0 || op >= BATON_OP_COUNT) return baton__fail(BATON_EINVAL, "ring allreduce: bad op %d", (int)op);
    const size_t esz = baton__esize(dt);
    if (count == 0) return BATON_OK;
    if (!send || !recv) return baton__fail(BATON_EINVAL, "ring allreduce: NULL buffer");
    if (g->n == 1) {
        if (send != recv) memmove(recv, send, count * esz);
        return BATON_OK;
    }
    if (baton__is16(dt)) {
        size_t ooff, olen;
        baton__chunk(count, g->n, baton__mod(g->me + 1, g->n), &ooff, &olen);
        rc = ring_rs(g, send, count, dt, op, 0, NULL, (uint8_t *)recv + ooff * esz, "ring allreduce");
    } else {
        rc = ring_rs(g, send, count, dt, op, 0, recv, NULL, "ring allreduce");
    }
    if (rc < 0) return rc;
    return ring_ag(g, recv, count, esz, 1, "ring allreduce");
}

int baton__reduce_scatter_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt,
                               baton_op op) {
    int rc = baton__check_group(g, dt, "ring reduce-scatter");
    if (rc < 0) return rc;
    if ((int)op < 0 || op >= BATON_OP_COUNT)
        return baton__fail(BATON_EINVAL, "ring reduce-scatter: bad op %d", (int)op);
    const size_t esz = baton__esize(dt);
    size_t total;
    if (!baton__mul_ok(count, (size_t)g->n, &total) || !baton__mul_ok(total, esz, &(size_t){0}))
        return baton__fail(BATON_EINVAL, "ring reduce-scatter: %zu x %d elements overflow", count, g->n);
    if (count == 0) return BATON_OK;
    if (!send || !recv) return baton__fail(BATON_EINVAL, "ring reduce-scatter: NULL buffer");
    if (g->n == 1) {
        if (send != recv) memmove(recv, send, count * esz);
        return BATON_OK;
    }
    /* a = -1: rank me ends holding chunk me, i.e. elements [me*count, (me+1)*count) of send. */
    return ring_rs(g, send, total, dt, op, -1, NULL, recv, "ring reduce-scatter");
}

int baton__allgather_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt) {
    int rc = baton__check_group(g, dt, "ring allgather");
    if (rc < 0) return rc;
    const size_t esz = baton__esize(dt);
    size_t total, bytes;
    if (!baton__mul_ok(count, (size_t)g->n, &total) || !baton__mul_ok(total, esz, &bytes))
        return baton__fail(BATON_EINVAL, "ring allgather: %zu x %d elements overflow", count, g->n);
    if (count == 0) return BATON_OK;
    if (!send || !recv) return baton__fail(BATON_EINVAL, "ring allgather: NULL buffer");
    uint8_t *mine = (uint8_t *)recv + (size_t)g->me * count * esz;
    if ((const void *)mine != send) memmove(mine, send, count * esz);   /* send == recv: input at offset 0 */
    if (g->n == 1) return BATON_OK;
    return ring_ag(g, recv, total, esz, 0, "ring allgather");
}
