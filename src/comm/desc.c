/* desc.c: collective descriptors, their packed form and their frame header (see desc.h). */
#include "comm/desc.h"

#include <stdio.h>
#include <string.h>

#include "baton/comm.h"
#include "util/util.h"

static const char *const kind_names[BATON_COLL_KINDS] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                                          "barrier",
                                                          "reduce_range"};
#define FRAME_MAGIC 0x32465442u /* "BTF2" little-endian */

void baton__desc_pack(uint8_t out[BATON_DESC_BYTES], const baton_coll_desc *d) {
    out[0] = d->kind;
    out[1] = d->dtype;
    out[2] = d->op;
    out[3] = 0;
    baton__put_le32(out + 4, (uint32_t)d->root);
    baton__put_le64(out + 8, d->seq);
    baton__put_le64(out + 16, d->count);
}

int baton__desc_unpack(const uint8_t in[BATON_DESC_BYTES], baton_coll_desc *d) {
    if (in[0] >= BATON_COLL_KINDS || in[1] >= BATON_DTYPE_COUNT || in[2] >= BATON_OP_COUNT || in[3] != 0)
        return baton__fail(BATON_EPROTO, "malformed collective descriptor (kind %u, dtype %u, op %u, flags %u)", in[0],
                           in[1], in[2], in[3]);
    d->kind = in[0];
    d->dtype = in[1];
    d->op = in[2];
    d->root = (int32_t)baton__get_le32(in + 4);
    d->seq = baton__get_le64(in + 8);
    d->count = baton__get_le64(in + 16);
    return BATON_OK;
}

void baton__frame_encode(uint8_t out[BATON_FRAME_BYTES], const baton_coll_desc *d, uint64_t payload) {
    baton__put_le32(out, FRAME_MAGIC);
    baton__desc_pack(out + 4, d);
    baton__put_le32(out + 4 + BATON_DESC_BYTES, 0);
    baton__put_le64(out + 32, payload);
}

int baton__frame_decode(const uint8_t in[BATON_FRAME_BYTES], baton_coll_desc *d, uint64_t *payload) {
    if (baton__get_le32(in) != FRAME_MAGIC)
        return baton__fail(BATON_EPROTO, "not a baton frame (magic %08x): a stray connection or a corrupt stream",
                           baton__get_le32(in));
    if (baton__get_le32(in + 4 + BATON_DESC_BYTES) != 0)
        return baton__fail(BATON_EPROTO, "malformed frame header (reserved field %08x)",
                           baton__get_le32(in + 4 + BATON_DESC_BYTES));
    int rc = baton__desc_unpack(in + 4, d);
    if (rc < 0) return rc;
    *payload = baton__get_le64(in + 32);
    return BATON_OK;
}

void baton__desc_format(const baton_coll_desc *d, char *out, size_t n) {
    const char *kind = d->kind < BATON_COLL_KINDS ? kind_names[d->kind] : "?";
    unsigned long long seq = (unsigned long long)d->seq, count = (unsigned long long)d->count;
    const char *dt = baton_dtype_name((baton_dtype)d->dtype);
    switch (d->kind) {
    case COLL_BARRIER:
        snprintf(out, n, "%s #%llu", kind, seq);
        break;
    case COLL_BROADCAST:
        snprintf(out, n, "%s #%llu (%llu x %s, root %d)", kind, seq, count, dt, (int)d->root);
        break;
    case COLL_ALLGATHER:
        snprintf(out, n, "%s #%llu (%llu x %s)", kind, seq, count, dt);
        break;
    default:
        snprintf(out, n, "%s #%llu (%llu x %s, %s)", kind, seq, count, dt, baton_op_name((baton_op)d->op));
    }
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

/* ---- the descriptor as a transport's opaque message header --------------------------------------- */

static void hdr_pack(const void *ctx, uint8_t *out, uint64_t payload) { baton__frame_encode(out, ctx, payload); }

static int hdr_check(const void *ctx, const uint8_t *in, uint64_t expect_payload, int from_rank) {
    return baton__frame_check(ctx, (size_t)expect_payload, in, from_rank);
}

void baton__desc_msg_hdr(baton_msg_hdr *h, const baton_coll_desc *d) {
    *h = (baton_msg_hdr){.bytes = BATON_FRAME_BYTES, .pack = hdr_pack, .check = hdr_check, .ctx = d};
}

_Static_assert((int)BATON_FRAME_BYTES <= (int)BATON_MSG_HDR_MAX, "the frame header fits a transport's header buffer");
_Static_assert(4 + BATON_DESC_BYTES + 4 + 8 == BATON_FRAME_BYTES, "frame layout");
