/* frame.c: collective descriptors and their frame header (see frame.h). */
#include "transport/frame.h"

#include <stdio.h>
#include <string.h>

#include "baton/comm.h"
#include "util/util.h"

static const char *const kind_names[BATON_COLL_KINDS] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                                          "barrier"};
#define FRAME_MAGIC 0x31465442u /* "BTF1" little-endian */

void baton__frame_encode(uint8_t out[BATON_FRAME_BYTES], const baton_coll_desc *d, uint64_t payload) {
    baton__put_le32(out, FRAME_MAGIC);
    out[4] = d->kind;
    out[5] = d->dtype;
    out[6] = d->op;
    out[7] = 0;
    baton__put_le32(out + 8, (uint32_t)d->root);
    baton__put_le32(out + 12, 0);
    baton__put_le64(out + 16, d->seq);
    baton__put_le64(out + 24, d->count);
    baton__put_le64(out + 32, payload);
}

int baton__frame_decode(const uint8_t in[BATON_FRAME_BYTES], baton_coll_desc *d, uint64_t *payload) {
    if (baton__get_le32(in) != FRAME_MAGIC)
        return baton__fail(BATON_EPROTO, "not a baton frame (magic %08x): a stray connection or a corrupt stream",
                           baton__get_le32(in));
    if (in[4] >= BATON_COLL_KINDS || in[5] >= BATON_DTYPE_COUNT || in[6] >= BATON_OP_COUNT || in[7] != 0 ||
        baton__get_le32(in + 12) != 0)
        return baton__fail(BATON_EPROTO, "malformed frame header (kind %u, dtype %u, op %u, flags %u)", in[4], in[5],
                           in[6], in[7]);
    d->kind = in[4];
    d->dtype = in[5];
    d->op = in[6];
    d->root = (int32_t)baton__get_le32(in + 8);
    d->seq = baton__get_le64(in + 16);
    d->count = baton__get_le64(in + 24);
    *payload = baton__get_le64(in + 32);
    return BATON_OK;
}

void baton__desc_format(const baton_coll_desc *d, char *out, size_t n) {
    const char *kind = d->kind < BATON_COLL_KINDS ? kind_names[d->kind] : "?";
    if (d->kind == 4) /* barrier */
        snprintf(out, n, "%s #%llu", kind, (unsigned long long)d->seq);
    else if (d->kind == 3) /* broadcast */
        snprintf(out, n, "%s #%llu (%llu x %s, root %d)", kind, (unsigned long long)d->seq,
                 (unsigned long long)d->count, baton_dtype_name((baton_dtype)d->dtype), (int)d->root);
    else if (d->kind == 2) /* allgather */
        snprintf(out, n, "%s #%llu (%llu x %s)", kind, (unsigned long long)d->seq, (unsigned long long)d->count,
                 baton_dtype_name((baton_dtype)d->dtype));
    else
        snprintf(out, n, "%s #%llu (%llu x %s, %s)", kind, (unsigned long long)d->seq, (unsigned long long)d->count,
                 baton_dtype_name((baton_dtype)d->dtype), baton_op_name((baton_op)d->op));
}

int baton__desc_check(const baton_coll_desc *mine, const baton_coll_desc *theirs, int their_rank) {
    if (mine->seq == theirs->seq && mine->kind == theirs->kind && mine->dtype == theirs->dtype &&
        mine->op == theirs->op && mine->count == theirs->count && mine->root == theirs->root)
        return BATON_OK;
    char a[128], b[128];
    baton__desc_format(theirs, a, sizeof a);
    baton__desc_format(mine, b, sizeof b);
    return baton__fail(BATON_EMISMATCH, "collective mismatch: rank %d runs %s but this rank runs %s", their_rank, a, b);
}

int baton__frame_check(const baton_coll_desc *mine, size_t expect_payload, const uint8_t hdr[BATON_FRAME_BYTES],
                       int from_rank) {
    baton_coll_desc theirs;
    uint64_t payload;
    int rc = baton__frame_decode(hdr, &theirs, &payload);
    if (rc < 0) return baton__fail_ctx(rc, "from rank %d: ", from_rank);
    if ((rc = baton__desc_check(mine, &theirs, from_rank)) < 0) return rc;
    if (payload != expect_payload) {
        char b[128];
        baton__desc_format(mine, b, sizeof b);
        return baton__fail(BATON_EMISMATCH, "collective mismatch in %s: rank %d sent %llu bytes where %zu were expected",
                           b, from_rank, (unsigned long long)payload, expect_payload);
    }
    return BATON_OK;
}
