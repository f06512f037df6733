/* desc.h: what every collective says about itself (its descriptor), the one packed form of it, and the
 * frame header that carries it in front of every point-to-point message.
 *
 * Each collective of a communicator has a descriptor: (sequence number, kind, dtype, op, count, root).
 * Ranks compare descriptors before they touch each other's data. The communicator hands the descriptor to
 * the transports as an opaque message header with a validator (baton_msg_hdr, transport/transport.h): p2p
 * transports put the 40-byte frame header below in front of every message and let the validator check an
 * incoming one before they accept a payload byte; in shared memory every rank announces the packed
 * descriptor in its rank block; the watchdog keeps the running one in atomic words. All three use the one
 * packed form (baton__desc_pack / baton__desc_unpack). Ranks that disagree fail with BATON_EMISMATCH naming
 * the collective, both sides' values and the ranks.
 *
 * Packed descriptor, little-endian, 24 bytes:
 *   0 u8 kind   1 u8 dtype   2 u8 op   3 u8 flags (0)   4 i32 root   8 u64 seq   16 u64 count
 * Frame header, little-endian, 40 bytes:
 *   0 u32 magic "BTF2"   4 packed descriptor (24 bytes)   28 u32 reserved (0)   32 u64 payload bytes that follow
 */
#ifndef BATON_DESC_H
#define BATON_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* The collectives a communicator runs (the descriptor's kind). */
typedef enum { COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_BROADCAST, COLL_BARRIER,
               COLL_REDUCE_RANGE } coll_kind;
enum { BATON_COLL_KINDS = COLL_REDUCE_RANGE + 1 };

enum { BATON_DESC_BYTES = 24, BATON_FRAME_BYTES = 40 };

typedef struct baton_coll_desc_ {
    uint64_t seq;    /* collective number on the communicator, from 1 */
    uint64_t count;  /* elements, as passed by the caller */
    uint8_t kind;    /* coll_kind */
    uint8_t dtype;   /* baton_dtype */
    uint8_t op;      /* baton_op (0 where the collective has none) */
    int32_t root;    /* broadcast root, else 0 */
} baton_coll_desc;

/* The packed form. unpack: BATON_OK, or BATON_EPROTO with a detail for bytes that are no descriptor
 * (unknown kind / dtype / op, non-zero flags). Never reads past BATON_DESC_BYTES. */
void baton__desc_pack(uint8_t out[BATON_DESC_BYTES], const baton_coll_desc *d);
int baton__desc_unpack(const uint8_t in[BATON_DESC_BYTES], baton_coll_desc *d);

void baton__frame_encode(uint8_t out[BATON_FRAME_BYTES], const baton_coll_desc *d, uint64_t payload);
/* Parses a header: BATON_OK, or BATON_EPROTO with a detail when the bytes are not a valid frame header
 * (bad magic, an invalid descriptor, non-zero reserved field). Never reads past 40 bytes. */
int baton__frame_decode(const uint8_t in[BATON_FRAME_BYTES], baton_coll_desc *d, uint64_t *payload);
/* Compares what a peer sent with what this rank runs (and the payload length it expects). On a difference:
 * BATON_EMISMATCH with a detail naming both sides, e.g. "rank 3 runs allreduce #5 (20 x f32, sum) but this
 * rank runs allreduce #5 (10 x f32, sum)". */
int baton__desc_check(const baton_coll_desc *mine, const baton_coll_desc *theirs, int their_rank);
int baton__frame_check(const baton_coll_desc *mine, size_t expect_payload, const uint8_t hdr[BATON_FRAME_BYTES],
                       int from_rank);
/* "allreduce #5 (10 x f32, sum)" */
void baton__desc_format(const baton_coll_desc *d, char *out, size_t n);

/* The message header the communicator hands a transport for collective d: frame headers built from d and
 * checked against it. d must outlive the header's use (the running collective). */
void baton__desc_msg_hdr(baton_msg_hdr *h, const baton_coll_desc *d);

#endif
