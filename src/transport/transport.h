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

/* Receives a message piece by piece (see sendrecv_pieces). */
typedef struct baton_piece_sink_ {
    void *(*dst)(void *arg, size_t off, size_t len);   /* where the piece [off, off+len) of the message lands */
    int (*done)(void *arg, size_t off, size_t len);    /* it has arrived */
    void *arg;
} baton_piece_sink;

typedef struct {
    const char *name;  /* "shm", "tcp" */
    /* Sends sbytes to speer while receiving rbytes from rpeer, returning when both are complete.
     * speer < 0 (or sbytes 0) means no send; rpeer < 0 (or rbytes 0) no receive. Large transfers move
     * in pipelined segments; the send and the receive progress at the same time (no deadlock when two
     * ranks send to each other at once). */
    int (*sendrecv)(baton_transport *t, int speer, const void *sbuf, size_t sbytes, int rpeer, void *rbuf,
                    size_t rbytes, uint64_t deadline_ns);
    void (*close)(baton_transport *t);
    /* Optional (NULL when a transport lacks it): sendrecv whose receive is handed over piece by piece, so
     * that the caller can work on (e.g. reduce) each piece while the rest keeps arriving and the send keeps
     * going. The rbytes from rpeer arrive as one message, in pieces of `piece` bytes (the last one shorter):
     * for each piece sink->dst(arg, off, len) says where it lands, and sink->done(arg, off, len) is called
     * when it is complete (a negative return aborts the exchange with that status). */
    int (*sendrecv_pieces)(baton_transport *t, int speer, const void *sbuf, size_t sbytes, int rpeer, size_t rbytes,
                           size_t piece, const baton_piece_sink *sink, uint64_t deadline_ns);
} baton_transport_ops;

struct baton_coll_desc_;

struct baton_transport {
    const baton_transport_ops *ops;
    int rank;    /* this rank (global) */
    int world;   /* ranks in the job (global) */
    /* The collective now running (see comm/frame.h), set by the communicator before each collective.
     * When set, every message carries a 40-byte frame header with it and the payload length, and a
     * receiver checks the header against its own before it accepts a payload byte (BATON_EMISMATCH).
     * NULL: raw byte streams (the transport's own tests). Both sides must agree. */
    const struct baton_coll_desc_ *desc;
};

static inline int baton__send(baton_transport *t, int peer, const void *buf, size_t bytes, uint64_t deadline_ns) {
    return t->ops->sendrecv(t, peer, buf, bytes, -1, NULL, 0, deadline_ns);
}
static inline int baton__recv(baton_transport *t, int peer, void *buf, size_t bytes, uint64_t deadline_ns) {
    return t->ops->sendrecv(t, -1, NULL, 0, peer, buf, bytes, deadline_ns);
}

#endif
