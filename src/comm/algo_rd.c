/* algo_rd.c: recursive-doubling all-reduce for small buffers and halving-doubling (Rabenseifner) for
 * medium ones, any group size.
 *
 * With p the largest power of two <= n and r = n - p, the first 2r ranks fold in pairs (even index sends
 * its vector to the odd one, which combines them), the p survivors exchange and combine whole vectors with
 * partners at distance 1, 2, 4, ... (virtual ranks), and the odd ranks hand the result back to their even
 * partners. Pairwise combination always puts the lower virtual rank's operand first, so both partners
 * compute bit-identical values even for MIN/MAX with NaN or signed zeros.
 *
 * Halving-doubling replaces the survivors' exchange for buffers of at least HD_MIN_BYTES on 4 or more
 * survivors: recursive halving
 * (at distance p/2, p/4, ..., 1 a rank keeps half of its window, sends the other half and combines what
 * its partner sent for the kept half) leaves each survivor owning count/p fully reduced elements; recursive
 * doubling in reverse order gathers the owned windows. It moves 2 (p-1)/p of the vector per rank instead of
 * log2(p) times the vector, and each element is reduced by exactly one rank per level.
 *
 * 16-bit dtypes are widened to f32 once, exchanged and combined in f32, and rounded once (by the owner in
 * halving-doubling; the all-gather half then carries 16-bit values). */
#include <stdlib.h>
#include <string.h>

#include "comm/algo_util.h"
#include "comm/reduce.h"

/* acc = lo op hi where `mine_first` says whether acc is the lower operand. */
static void combine(void *acc, const void *other, int mine_first, size_t count, baton_dtype wdt, baton_op op) {
    const void *srcs[2] = {mine_first ? acc : other, mine_first ? other : acc};
    baton__reduce_n(acc, srcs, 2, count, wdt, op, 0);
}

/* Halving-doubling from HD_MIN_BYTES of working data (f32 for 16-bit dtypes) upward, when p >= 4 (with
 * p = 2 it is the two-step ring, and the communicator switches to the ring itself above recursive
 * doubling's range). */
#define HD_MIN_BYTES ((size_t)32 * 1024)

/* Survivor index -> group index. */
static int survivor(int vp, int r) { return vp < r ? 2 * vp + 1 : vp + r; }

static void finalize(void *out, void *acc, size_t count, baton_dtype dt, baton_op op, int n) {
    if (baton__is16(dt)) baton__f32_to_16_avg(out, (const float *)acc, count, dt, op == BATON_AVG ? n : 1);
    else if (op == BATON_AVG) baton__finish_avg(out, count, dt, n);
}

static int rd_core(const baton_group *g, uint8_t *acc, uint8_t *inc, void *recv, size_t count, baton_dtype dt,
                   baton_op op, int vr, int p, int r) {
    const baton_dtype wdt = baton__is16(dt) ? BATON_F32 : dt;
    const size_t wbytes = count * baton__esize(wdt);
    for (int mask = 1; mask < p; mask <<= 1) {
        int vp = vr ^ mask, peer = survivor(vp, r);
        int rc = baton__gsendrecv(g, peer, acc, wbytes, peer, inc, wbytes, "rd allreduce");
        if (rc < 0) return rc;
        combine(acc, inc, vr < vp, count, wdt, op);
    }
    finalize(recv, acc, count, dt, op, g->n);
    return BATON_OK;
}

static int hd_core(const baton_group *g, uint8_t *acc, uint8_t *inc, uint8_t *recv, size_t count, baton_dtype dt,
                   baton_op op, int vr, int p, int r) {
    const baton_dtype wdt = baton__is16(dt) ? BATON_F32 : dt;
    const size_t wsz = baton__esize(wdt), esz = baton__esize(dt);
    size_t lo[32], hi[32];   /* window before each halving level (p <= 2^31) */
    int kept_lower[32];      /* whether this rank kept the lower half at that level */
    size_t wlo = 0, whi = count;
    int lv = 0;
    for (int mask = p / 2; mask >= 1; mask /= 2, lv++) {
        int vp = vr ^ mask, peer = survivor(vp, r);
        size_t mid = wlo + (whi - wlo) / 2;
        int lower = (vr & mask) == 0;
        size_t klo = lower ? wlo : mid, khi = lower ? mid : whi;   /* kept half */
        size_t slo = lower ? mid : wlo, shi = lower ? whi : mid;   /* half sent away */
        lo[lv] = wlo;
        hi[lv] = whi;
        kept_lower[lv] = lower;
        int rc = baton__gsendrecv(g, peer, acc + slo * wsz, (shi - slo) * wsz, peer, inc, (khi - klo) * wsz,
                                  "hd allreduce (reduce-scatter)");
        if (rc < 0) return rc;
        combine(acc + klo * wsz, inc, lower, khi - klo, wdt, op);
        wlo = klo;
        whi = khi;
    }
    finalize(recv + wlo * esz, acc + wlo * wsz, whi - wlo, dt, op, g->n);
    for (int mask = 1; mask < p; mask <<= 1) {
        lv--;
        int vp = vr ^ mask, peer = survivor(vp, r);
        /* the parent window [lo, hi) is my window plus my partner's, its other half */
        size_t plo = kept_lower[lv] ? whi : lo[lv], phi = kept_lower[lv] ? hi[lv] : wlo;
        int rc = baton__gsendrecv(g, peer, recv + wlo * esz, (whi - wlo) * esz, peer, recv + plo * esz,
                                  (phi - plo) * esz, "hd allreduce (all-gather)");
        if (rc < 0) return rc;
        wlo = lo[lv];
        whi = hi[lv];
    }
    return BATON_OK;
}

int baton__allreduce_rd(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt,
                        baton_op op) {
    int rc = baton__check_group(g, dt, "rd allreduce");
    if (rc < 0) return rc;
    if ((int)op < 0 || op >= BATON_OP_COUNT) return baton__fail(BATON_EINVAL, "rd allreduce: bad op %d", (int)op);
    const size_t esz = baton__esize(dt);
    if (count == 0) return BATON_OK;
    if (!send || !recv) return baton__fail(BATON_EINVAL, "rd allreduce: NULL buffer");
    if (g->n == 1) {
        if (send != recv) memmove(recv, send, count * esz);
        return BATON_OK;
    }
    const int n = g->n, me = g->me, is16 = baton__is16(dt);
    const baton_dtype wdt = is16 ? BATON_F32 : dt;
    const size_t wsz = baton__esize(wdt);
    size_t wbytes;
    if (!baton__mul_ok(count, wsz, &wbytes)) return baton__fail(BATON_EINVAL, "rd allreduce: count %zu overflows", count);
    /* inc: a partner's vector; acc: the f32 accumulator of 16-bit dtypes (recv itself otherwise) */
    const size_t acc_off = (wbytes + 63) & ~(size_t)63;
    if (acc_off < wbytes || acc_off > SIZE_MAX - wbytes) return baton__fail(BATON_EINVAL, "rd allreduce: count %zu overflows", count);
    const size_t need = is16 ? acc_off + wbytes : wbytes;
    void *owned;
    uint8_t *inc = baton__scratch_get(g->scratch, need, &owned);
    if (!inc) return baton__fail(BATON_ENOMEM, "rd allreduce: out of memory for %zu bytes of scratch", need);
    uint8_t *acc = is16 ? inc + acc_off : recv;
    if (is16) {
        if (dt == BATON_F16) baton__f16_to_f32((float *)acc, send, count);
        else baton__bf16_to_f32((float *)acc, send, count);
    } else if (send != recv) {
        memmove(recv, send, count * esz);
    }
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int r = n - p;
    int vr;   /* virtual rank among the p survivors; -1 for ranks folded away */
    if (me < 2 * r) {
        if (me % 2 == 0) {
            rc = baton__gsendrecv(g, me + 1, acc, wbytes, -1, NULL, 0, "rd allreduce (fold)");
            vr = -1;
        } else {
            rc = baton__gsendrecv(g, -1, NULL, 0, me - 1, inc, wbytes, "rd allreduce (fold)");
            if (rc == BATON_OK) combine(acc, inc, 0, count, wdt, op);
            vr = me / 2;
        }
    } else {
        vr = me - r;
    }
    if (rc == BATON_OK && vr >= 0) {
        if (p >= 4 && wbytes >= HD_MIN_BYTES && count >= (size_t)p) rc = hd_core(g, acc, inc, recv, count, dt, op, vr, p, r);
        else rc = rd_core(g, acc, inc, recv, count, dt, op, vr, p, r);
    }
    if (rc == BATON_OK && me < 2 * r) {   /* unfold: the final values, in the user's dtype */
        if (me % 2) rc = baton__gsendrecv(g, me - 1, recv, count * esz, -1, NULL, 0, "rd allreduce (unfold)");
        else rc = baton__gsendrecv(g, -1, NULL, 0, me + 1, recv, count * esz, "rd allreduce (unfold)");
    }
    free(owned);
    return rc;
}
