/* algo.h: collective algorithms over point-to-point transports (see docs/algorithms.md). They run on a
 * group: a list of global ranks (the whole job, or e.g. the node leaders for hierarchical all-reduce).
 * All ranks of the group call the same function with the same arguments except the buffers. */
#ifndef BATON_ALGO_H
#define BATON_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "baton/comm.h"
#include "transport/transport.h"

/* Scratch memory owned by a communicator and reused by its collectives (they run one at a time). A
 * whole-message scratch malloc'ed per call is, at least from 32 MiB (glibc's largest mmap threshold), a
 * fresh mapping faulted in page by page on every call: 0.75 to 2.2 s per 256 MiB all-reduce on this
 * machine (docs/measurements/plan-history.md, "The floors on a quiet machine" and "After the quiet run: a fair
 * comparison"). */
typedef struct {
    void *p;
    size_t cap;
} baton_scratch;

/* At least `bytes` of scratch, 64-byte aligned. With s NULL the call gets a buffer of its own, returned in
 * *owned as well, to free() when done (*owned is NULL otherwise). NULL when out of memory. The contents
 * are not kept between calls. */
void *baton__scratch_get(baton_scratch *s, size_t bytes, void **owned);
/* Frees the communicator's scratch (at baton_comm_free). */
void baton__scratch_free(baton_scratch *s);

typedef struct {
    baton_transport *t;
    int n;              /* ranks in the group */
    int me;             /* my index in the group, 0..n-1 */
    const int *ranks;   /* group index -> global rank (transport peer id); NULL means identity */
    uint64_t deadline_ns;
    size_t segment_bytes; /* pipelining segment; 0 picks the default (256 KiB) */
    baton_scratch *scratch; /* the communicator's reusable scratch; NULL: each call allocates and frees its own */
} baton_group;

static inline int baton__group_peer(const baton_group *g, int idx) { return g->ranks ? g->ranks[idx] : idx; }

/* All take send == recv for in place, any count (including 0 and counts not divisible by n). AVG divides
 * by g->n. Their scratch comes from g->scratch (kept by the communicator between calls) or, without one,
 * is allocated and freed by the call. */
int baton__allreduce_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op);
int baton__allreduce_rd(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op);
int baton__reduce_scatter_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt,
                               baton_op op);
int baton__allgather_ring(const baton_group *g, const void *send, void *recv, size_t count, baton_dtype dt);
int baton__broadcast_p2p(const baton_group *g, void *buf, size_t count, baton_dtype dt, int root);
int baton__barrier_p2p(const baton_group *g);
/* Every rank sends 1 byte to its right neighbour and receives 1 from its left (see algo_bcast.c). */
int baton__agree_p2p(const baton_group *g, const char *what);

#endif
