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

/* What a reduce-scatter step does with each piece of the incoming partial as it arrives. */
typedef struct {
    uint8_t *d;           /* where this step's partial for the received chunk goes */
    const uint8_t *in;    /* the receive buffer: d itself (direct) or the scratch */
    const uint8_t *m;     /* this rank's own input for the received chunk */
    baton_dtype dt;
    baton_op op;
    size_t esz, wsz, xsz; /* element bytes: user dtype, partial (f32 for 16-bit), on the wire this step */
    int is16, first, direct;
    uint16_t *out16;      /* 16-bit dtypes, last step: round the finished f32 values into here at once */
    int avg_n;            /* ... dividing by this first (1: no division) */
    int fdiv;             /* other dtypes, last step: AVG divisor applied as the final values form (0: none) */
} rs_step;

/* Elements [lo, hi) of the incoming partial are complete: combine them with this rank's input. */
static void rs_combine(void *ctx, size_t lo_b, size_t hi_b) {
    const rs_step *st = ctx;
    size_t lo = lo_b / st->xsz, n = hi_b / st->xsz - lo;
    uint8_t *d = st->d + lo * st->wsz;
    const uint8_t *m = st->m + lo * st->esz;
    if (st->is16 && st->first && st->out16) {   /* two ranks: round (left's raw op mine) / avg_n at once */
        const void *srcs[2] = {(const uint16_t *)st->in + lo, m};
        baton__reduce_n(st->out16 + lo, srcs, 2, n, st->dt, st->op, st->avg_n > 1 ? st->avg_n : 0);
    } else if (st->is16) {
        if (st->first) { /* d = widen(left's raw values), then d op= widen(mine) */
            const uint16_t *raw = (const uint16_t *)st->in + lo;
            if (st->dt == BATON_F16) baton__f16_to_f32((float *)d, raw, n);
            else baton__bf16_to_f32((float *)d, raw, n);
        }
        baton__reduce_f32_acc16((float *)d, (const uint16_t *)m, n, st->dt, st->op);
        if (st->out16) baton__f32_to_16_avg(st->out16 + lo, (const float *)d, n, st->dt, st->avg_n);
    } else {   /* d = incoming op mine (divided by n for AVG on the last step), in one pass */
        const void *srcs[2] = {st->direct ? d : st->in + lo * st->wsz, m};
        baton__reduce_n(d, srcs, 2, n, st->dt, st->op, st->fdiv);
    }
}

/* The reduce-scatter phase. count elements of `mine` are split into n chunks (baton__chunk). At step s
 * (0..n-2) rank me sends chunk (me + a - s) to its right and receives chunk (me + a - s - 1) from its left,
 * combining it with its own data; after the phase it holds the full reduction of chunk (me + a + 1) % n.
 *
 * Where partial sums live: if acc (non-16-bit only) is given, chunk c accumulates at acc + off(c) (acc may
 * be `mine`, in place) and the final chunk stays there (AVG divided as its values form). Otherwise partials alternate
 * between two chunk-sized scratch buffers and the final chunk is written to `out` (16-bit dtypes: the f32
 * partial is rounded once into out). 16-bit dtypes send their raw values at step 0 (exact, half the bytes)
 * and f32 partials from step 1 on.
 *
 * Each step is one message each way (or a few: at most 16 segments each). Everything a step sends is ready
 * when it starts (raw input, or the previous step's partial), so the whole chunk streams out while the
 * incoming one is combined segment by segment as it lands (baton_recv_progress): the link never waits for
 * the reduction. A partial that cannot land in place (in place, or 16-bit raw values) lands in one reused
 * buffer of at most 16 segments, which stays cache-warm. All scratch is the group's (the communicator's,
 * kept between calls: not re-faulted on every call). */
static int ring_rs(const baton_group *g, const uint8_t *mine, size_t count, baton_dtype dt, baton_op op, int a,
                   uint8_t *acc, uint8_t *out, const char *what) {
    const int n = g->n, me = g->me, right = baton__mod(me + 1, n), left = baton__mod(me - 1, n);
    const int is16 = baton__is16(dt);
    const size_t esz = baton__esize(dt), wsz = is16 ? 4 : esz;
    size_t seg = baton__segment(g) / wsz;
    if (seg == 0) seg = 1;
    size_t maxlen = count / (size_t)n + (count % (size_t)n ? 1 : 0);
    BATON_ASSERT(!(acc && is16));
    /* A step's chunk travels in messages of at most msg elements (16 segments: 4 MiB of f32 by default),
     * so that a partial that cannot be received in place needs a bounded, reused landing buffer. */
    const size_t msg = seg * 16;
    /* Chunk-sized partials only for the steps before the last (n >= 3); the last step of a 16-bit dtype
     * lands its f32 values in a message-sized buffer and rounds them into `out` as they complete (with two
     * ranks it is also the first step, and one fused kernel pass turns raw values into the result). */
    const size_t mlen = maxlen < msg ? maxlen : msg;
    const int avg_n = op == BATON_AVG ? n : 1;
    /* A step whose partial cannot land where it goes (16-bit raw values, or in place) lands in tmp. */
    int need_tmp = 0;
    for (int s = 0; s < n - 1; s++) {
        size_t roff, rlen;
        baton__chunk(count, n, baton__mod(me + a - s - 1, n), &roff, &rlen);
        const uint8_t *d = acc ? acc + roff * esz : s == n - 2 && !is16 ? out : NULL;   /* else scratch */
        if ((is16 && s == 0) || (d && overlaps(d, rlen * wsz, mine + roff * esz, rlen * esz))) need_tmp = 1;
    }
    /* One piece of the group's scratch (kept by the communicator between calls), 64-byte aligned parts:
     * two chunk-sized partials, the last step's f32 landing buffer, the message-sized landing buffer. */
    const size_t part[4] = {!acc && n > 2 ? maxlen * wsz : 0, !acc && n > 3 ? maxlen * wsz : 0,
                            is16 && n > 2 ? mlen * 4 : 0, need_tmp ? mlen * wsz : 0};
    size_t at[4], total = 0;
    for (int i = 0; i < 4; i++) {
        at[i] = total;
        total += (part[i] + 63) & ~(size_t)63;
    }
    uint8_t *pp[2] = {NULL, NULL}, *tmp = NULL, *fin = NULL;
    void *owned = NULL;
    int rc = BATON_OK;
    if (total) {
        uint8_t *base = baton__scratch_get(g->scratch, total, &owned);
        if (!base) return baton__fail(BATON_ENOMEM, "%s: out of memory for %zu bytes of scratch", what, total);
        if (part[0]) pp[0] = base + at[0];
        if (part[1]) pp[1] = base + at[1];
        if (part[2]) fin = base + at[2];
        if (part[3]) tmp = base + at[3];
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
        uint8_t *dst = acc ? acc + roff * esz : !last ? pp[s & 1] : is16 ? fin : out;
        const size_t dstep = last && is16 ? 0 : msg * wsz;   /* fin is reused by every message */
        const uint8_t *src = s == 0 ? mine + soff * esz : acc ? acc + soff * esz : pp[(s - 1) & 1];
        const int direct = !(is16 && s == 0) && !overlaps(dst, rlen * wsz, mine + roff * esz, rlen * esz);
        BATON_ASSERT(direct || tmp);
        size_t nmsg = ((slen > rlen ? slen : rlen) + msg - 1) / msg;
        for (size_t k = 0; k < nmsg; k++) {
            size_t b = k * msg;
            size_t sn = b < slen ? (slen - b < msg ? slen - b : msg) : 0;
            size_t rn = b < rlen ? (rlen - b < msg ? rlen - b : msg) : 0;
            uint8_t *d = dst + k * dstep;
            rs_step st = {.d = d, .in = direct ? d : tmp, .m = mine + (roff + b) * esz, .dt = dt, .op = op,
                          .esz = esz, .wsz = wsz, .xsz = xsz, .is16 = is16, .first = s == 0, .direct = direct,
                          .out16 = last && is16 ? (uint16_t *)out + b : NULL, .avg_n = avg_n,
                          .fdiv = last && avg_n > 1 ? avg_n : 0};
            baton_recv_progress prog = {.unit = seg * xsz, .fn = rs_combine, .ctx = &st};
            rc = baton__gsendrecv_cb(g, right, src + b * xsz, sn * xsz, left, direct ? d : tmp, rn * xsz,
                                     rn ? &prog : NULL, what);
            if (rc < 0) goto done;
        }
    }
done:
    free(owned);
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
