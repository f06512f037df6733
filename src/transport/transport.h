/* transport.h: point-to-point transports behind one small vtable. Collective algorithms talk only to
 * peers through this, so ring, recursive doubling and the rest run unchanged over shm and tcp.
 *
 * Messages between one ordered pair of ranks arrive in the order they were sent (a byte stream per
 * direction); collectives run one at a time per communicator, so no tags are needed at this level.
 * Every call is bounded by a deadline (CLOCK_MONOTONIC ns, UINT64_MAX = none) and returns BATON_OK,
 * BATON_ETIMEDOUT, or BATON_EPEERDEAD / BATON_EPROTO with a detail naming the peer rank. */
#ifndef BATON_TRANSPORT_H
#define BATON_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct baton_transport baton_transport;

/* Reports, while a receive is under way, which leading part of the receive buffer is complete, so that
 * the caller can work on it (reduce it) while the rest is still arriving and the send keeps going. */
typedef struct {
    size_t unit;                                  /* report in steps of this many bytes (a multiple of the
                                                   * element size); the last step may be shorter */
    void (*fn)(void *ctx, size_t lo, size_t hi);  /* bytes [lo, hi) of the receive buffer are complete */
    void *ctx;
} baton_recv_progress;

typedef struct {
    const char *name;  /* "shm", "tcp" */
    /* Sends sbytes to speer while receiving rbytes from rpeer, returning when both are complete.
     * speer < 0 (or sbytes 0) means no send; rpeer < 0 (or rbytes 0) no receive. Large transfers move
     * in pipelined segments; the send and the receive progress at the same time (no deadlock when two
     * ranks send to each other at once). progress (may be NULL) is called in order as the receive
     * buffer fills; every byte is reported exactly once before sendrecv returns BATON_OK. */
    int (*sendrecv)(baton_transport *t, int speer, const void *sbuf, size_t sbytes, int rpeer, void *rbuf,
                    size_t rbytes, uint64_t deadline_ns, const baton_recv_progress *progress);
    void (*close)(baton_transport *t);
} baton_transport_ops;

/* For transports: reports [*reported, done) rounded down to whole units (all of it once done == total). */
static inline void baton__progress(const baton_recv_progress *p, size_t *reported, size_t done, size_t total) {
    if (!p) return;
    size_t upto = done == total ? total : done - done % p->unit;
    if (upto > *reported) {
        p->fn(p->ctx, *reported, upto);
        *reported = upto;
    }
}

/* An opaque header that travels in front of every message, with the validator that checks an incoming
 * one. The communicator builds it from the collective it runs (comm/desc.h); a transport only copies
 * bytes: it asks pack() for the header of each message it sends and hands each header it receives to
 * check() before it accepts a payload byte (a failure there ends the sendrecv with check's status). */
enum { BATON_MSG_HDR_MAX = 64 };
typedef struct {
    size_t bytes;                                               /* header size, <= BATON_MSG_HDR_MAX */
    void (*pack)(const void *ctx, uint8_t *out, uint64_t payload);     /* header of a payload-byte message */
    int (*check)(const void *ctx, const uint8_t *in, uint64_t expect_payload, int from_rank);
    const void *ctx;                                            /* owned by whoever set the header */
} baton_msg_hdr;

struct baton_transport {
    const baton_transport_ops *ops;
    int rank;    /* this rank (global) */
    int world;   /* ranks in the job (global) */
    /* Set by the communicator before each collective (and cleared after). When set, every message of
     * sbytes > 0 carries hdr->bytes of header before its payload, and a receiver checks the header with
     * hdr->check before it accepts a payload byte. NULL: raw byte streams (the transport's own tests).
     * Both sides must agree. */
    const baton_msg_hdr *hdr;
};

static inline int baton__send(baton_transport *t, int peer, const void *buf, size_t bytes, uint64_t deadline_ns) {
    return t->ops->sendrecv(t, peer, buf, bytes, -1, NULL, 0, deadline_ns, NULL);
}
static inline int baton__recv(baton_transport *t, int peer, void *buf, size_t bytes, uint64_t deadline_ns) {
    return t->ops->sendrecv(t, -1, NULL, 0, peer, buf, bytes, deadline_ns, NULL);
}

#endif
