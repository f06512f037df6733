/* algo_rd.c: recursive-doubling all-reduce for small buffers, any group size.
 *
 * With p the largest power of two <= n and r = n - p, the first 2r ranks fold in pairs (even index sends
 * its vector to the odd one, which combines them), the p survivors exchange and combine whole vectors with
 * partners at distance 1, 2, 4, ... (virtual ranks), and the odd ranks hand the result back to their even
 * partners. Pairwise combination always puts the lower virtual rank's operand first, so both partners
 * compute bit-identical values even for MIN/MAX with NaN or signed zeros. 16-bit dtypes are widened to f32
 * once, exchanged and combined in f32, and rounded once at the end. */
#include <stdlib.h>
#include <string.h>

#include "comm/algo_util.h"
#include "comm/reduce.h"

/* acc = lo op hi where `mine_first` says whether acc is the lower operand. */
static void combine(void *acc, const void *other, int mine_first, size_t count, baton_dtype wdt, baton_op op) {
    const void *srcs[2] = {mine_first ? acc : other, mine_first ? other : acc};
    baton__reduce_n(acc, srcs, 2, count, wdt, op, 0);
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
    uint8_t *inc = malloc(wbytes), *acc = is16 ? malloc(wbytes) : recv;
    if (!inc || !acc) {
        free(inc);
        if (is16) free(acc);
        return baton__fail(BATON_ENOMEM, "rd allreduce: out of memory for %zu bytes of scratch", wbytes);
    }
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
    for (int mask = 1; rc == BATON_OK && vr >= 0 && mask < p; mask <<= 1) {
        int vp = vr ^ mask, peer = vp < r ? 2 * vp + 1 : vp + r;
        rc = baton__gsendrecv(g, peer, acc, wbytes, peer, inc, wbytes, "rd allreduce");
        if (rc == BATON_OK) combine(acc, inc, vr < vp, count, wdt, op);
    }
    if (rc == BATON_OK && vr >= 0) {
        if (is16) baton__f32_to_16_avg(recv, (const float *)acc, count, dt, op == BATON_AVG ? n : 1);
        else if (op == BATON_AVG) baton__finish_avg(recv, count, dt, n);
    }
    if (rc == BATON_OK && me < 2 * r) {   /* unfold: the final values, in the user's dtype */
        if (me % 2) rc = baton__gsendrecv(g, me - 1, recv, count * esz, -1, NULL, 0, "rd allreduce (unfold)");
        else rc = baton__gsendrecv(g, -1, NULL, 0, me + 1, recv, count * esz, "rd allreduce (unfold)");
    }
    free(inc);
    if (is16) free(acc);
    return rc;
}
