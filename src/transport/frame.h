/* frame.h: what every collective says about itself, and the frame header that carries it on the wire.
 *
 * Each collective of a communicator has a descriptor: (sequence number, kind, dtype, op, count, root).
 * Ranks compare descriptors before they touch each other's data: over p2p transports every message starts
 * with a 40-byte frame header holding the sender's descriptor and the payload length, checked before the
 * payload is accepted; in shared memory every rank announces its descriptor in its rank block. Ranks that
 * disagree fail with BATON_EMISMATCH naming the collective, both sides' values and the ranks.
 *
 * Frame header, little-endian, fixed layout (40 bytes):
 *   0  u32 magic "BTF1"      4  u8 kind   5  u8 dtype   6  u8 op   7  u8 flags (0)
 *   8  i32 root             12  u32 reserved (0)
 *   16 u64 seq              24 u64 count                32 u64 payload bytes that follow
 */
#ifndef BATON_FRAME_H
#define BATON_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum { BATON_FRAME_BYTES = 40, BATON_COLL_KINDS = 5 };

typedef struct baton_coll_desc_ {
    uint64_t seq;    /* collective number on the communicator, from 1 */
    uint64_t count;  /* elements, as passed by the caller */
    uint8_t kind;    /* coll_kind: allreduce, reduce_scatter, allgather, broadcast, barrier */
    uint8_t dtype;   /* baton_dtype */
    uint8_t op;      /* baton_op (0 where the collective has none) */
    int32_t root;    /* broadcast root, else 0 */
} baton_coll_desc;

void baton__frame_encode(uint8_t out[BATON_FRAME_BYTES], const baton_coll_desc *d, uint64_t payload);
/* Parses a header: BATON_OK, or BATON_EPROTO with a detail when the bytes are not a valid frame header
 * (bad magic, unknown kind / dtype / op, non-zero reserved fields). Never reads past 40 bytes. */
int baton__frame_decode(const uint8_t in[BATON_FRAME_BYTES], baton_coll_desc *d, uint64_t *payload);
/* Compares what a peer sent with what this rank runs (and the payload length it expects). On a difference:
 * BATON_EMISMATCH with a detail naming both sides, e.g. "rank 3 runs allreduce #5 (20 x f32, sum) but this
 * rank runs allreduce #5 (10 x f32, sum)". */
int baton__desc_check(const baton_coll_desc *mine, const baton_coll_desc *theirs, int their_rank);
int baton__frame_check(const baton_coll_desc *mine, size_t expect_payload, const uint8_t hdr[BATON_FRAME_BYTES],
                       int from_rank);
/* "allreduce #5 (10 x f32, sum)" */
void baton__desc_format(const baton_coll_desc *d, char *out, size_t n);

#endif
