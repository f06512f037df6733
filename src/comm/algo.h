/* algo.h: collective algorithms over point-to-point transports (see docs/algorithms.md). They run on a
 * group: a list of global ranks (the whole job, or e.g. the node leaders for hierarchical all-reduce).
 * All ranks of the group call the same function with the same arguments except the buffers. */
#ifndef BATON_ALGO_H
#define BATON_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "baton/comm.h"
#include "transport/transport.h"

typedef struct {
    baton_transport *t;
    int n;              /* ranks in the group */
    int me;             /* my index in the group, 0..n-1 */
    const int *ranks;   /* group index -> global rank (transport peer id); NULL means identity */
    uint64_t deadline_ns;
    size_t segment_bytes; /* pipelining segment; 0 picks the default (256 KiB) */
} baton_group;

static inline int baton__group_peer(const baton_group *g, int idx) { return g->ranks ? g->ranks[idx] : idx; }

/* All take send == recv for in place, any count (including 0 and counts not divisible by n). AVG divides
 * by g->n. They allocate what scratch they need and free it before returning. */
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
