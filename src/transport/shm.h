/* shm.h: the shared-memory segment of one node, its synchronization counters, and the shm point-to-point
 * transport.
 *
 * One segment per node and job, named /baton-<jobid>-<node>. Local rank 0 creates it; the others open it;
 * once every local rank has mapped it, it is unlinked, so nothing is left in /dev/shm however the job ends.
 *
 * Layout (every region cache-line aligned):
 *   header                           magic, geometry, abort word
 *   rank blocks[L]                   per local rank: pid, progress counters (each on its own cache line)
 *   small slots[L][2]                small all-reduce: each rank's input, by sequence parity
 *   stage[L][2]                      large collectives: each rank's staging buffer, double-buffered
 *   channels[L][L]                   p2p byte rings, one per ordered pair (src -> dst); smaller past 64
 *                                    ranks (baton__shm_chan_bytes), so 512 ranks map ~3.3 GiB, not 68
 *
 * Progress counters only grow. A rank posts a counter after finishing a step; a peer waits until every
 * rank's counter has reached a value. Waiting spins, yields, then naps (baton__backoff), checks the
 * deadline, the job's abort word, and every ~20 ms whether the ranks it waits for are still alive.
 *
 *   baton_shm *shm;
 *   baton__shm_open("/baton-1a2b-n0", local_rank, local_size, deadline, &shm);
 *   ...  baton__shm_post(shm, BATON_SHM_CTR_BIG, v);  baton__shm_wait_all(shm, BATON_SHM_CTR_BIG, v, ...);
 *   baton__shm_close(shm);                                                                              */
#ifndef BATON_SHM_H
#define BATON_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

enum {
    BATON_SHM_CACHELINE = 64,
    BATON_SHM_MAX_LOCAL = 512,                 /* local ranks per node */
    BATON_SHM_SMALL_BYTES = 32 << 10,          /* one small slot (8-byte header + all-reduce input) */
    BATON_SHM_STAGE_BYTES = 2 << 20,           /* one staging buffer (a chunk of a large collective) */
    BATON_SHM_CHAN_BYTES = 256 << 10,          /* one p2p ring, up to BATON_SHM_CHAN_FULL_RANKS local ranks */
    BATON_SHM_CHAN_FULL_RANKS = 64,            /* past this the rings shrink so that L * L rings stay ~1 GiB */
    BATON_SHM_CHAN_MIN_BYTES = 4 << 10,        /* the smallest ring (512 local ranks) */
};

/* The ring size for L local ranks: BATON_SHM_CHAN_BYTES up to 64 ranks, then a quarter for every doubling
 * (L * L rings of it stay near 64 * 64 * 256 KiB = 1 GiB of segment, most never touched), at least 4 KiB. */
size_t baton__shm_chan_bytes(int local_size);

/* The counters of one rank. */
typedef enum {
    BATON_SHM_CTR_BIG = 0,     /* 3 x (chunks of direct collectives done) + phase */
    BATON_SHM_CTR_COUNT
} baton_shm_ctr;

typedef struct {
    _Atomic uint64_t v;
    char pad[BATON_SHM_CACHELINE - sizeof(uint64_t)];
} baton_shm_counter;

/* One announced collective descriptor: the communicator's packed form (comm/desc.h), opaque here,
 * readable by peers once seq is stored. */
enum { BATON_SHM_DESC_BYTES = 24 };
typedef struct {
    _Atomic uint64_t seq;                      /* stored last (release) */
    uint8_t bytes[BATON_SHM_DESC_BYTES];
} baton_shm_desc;

/* Collectives that move no data (count 0) let a rank run ahead of the others; a ring this long keeps
 * the descriptor of the collective a slower peer is at for a long while. */
enum { BATON_SHM_DESC_RING = 64 };

typedef struct {
    baton_shm_counter ctr[BATON_SHM_CTR_COUNT];
    int32_t pid;           /* the rank's process, for liveness checks */
    int32_t global_rank;   /* for messages */
    char pad[BATON_SHM_CACHELINE - 8];
    baton_shm_desc desc[BATON_SHM_DESC_RING];  /* the last collectives announced, by seq % RING */
    _Atomic uint64_t announced;                /* the latest seq announced */
    char pad2[BATON_SHM_CACHELINE - (BATON_SHM_DESC_RING * sizeof(baton_shm_desc) + 8) % BATON_SHM_CACHELINE];
    /* addresses (in the rank's own address space) of the running all-reduce's send and receive buffers,
     * for peers that read them with process_vm_readv (cross-memory attach); published before a post */
    _Atomic uint64_t cma_send, cma_recv;
    char pad3[BATON_SHM_CACHELINE - 16];
    /* Waking instead of timed naps (issue 10): a rank waiting for this rank's counters in the nap phase
     * counts itself in sleepers and sleeps on the futex word wake; baton__shm_post moves wake on and wakes
     * it when sleepers is not 0. */
    _Atomic uint32_t wake, sleepers;
    char pad4[BATON_SHM_CACHELINE - 8];
} baton_shm_rank;

typedef struct {
    baton_shm_counter head;   /* bytes written by the sender, ever */
    baton_shm_counter tail;   /* bytes consumed by the receiver, ever */
} baton_shm_chan_ctl;

typedef struct baton_shm baton_shm;

/* Creates (local_rank 0) or opens the node segment and waits until all local_size ranks mapped it; then
 * the name is unlinked. global_ranks[i] is the global rank of local rank i (for error messages). */
int baton__shm_open(const char *name, int local_rank, int local_size, const int *global_ranks,
                    uint64_t deadline_ns, baton_shm **out);
void baton__shm_close(baton_shm *shm);   /* NULL is a no-op */
/* One vote of every local rank, once per segment: *all = 1 when every rank passed yes. Waits (bounded by
 * deadline) until all local_size ranks voted. No store round trips: the node agrees through its segment. */
int baton__shm_agree_once(baton_shm *shm, int yes, uint64_t deadline_ns, int *all);

/* Region pointers. A small slot starts with a baton_shm_small_hdr (flag and descriptor); the data
 * follows at BATON_SHM_SMALL_DATA, so a message of up to 40 bytes travels in the cache line of its flag. */
enum { BATON_SHM_SMALL_DATA = 32 };
void *baton__shm_small(baton_shm *shm, int local_rank, int parity);
void *baton__shm_stage(baton_shm *shm, int local_rank, int buf);

/* Maps every page this rank writes (its small slots, staging buffers and outgoing p2p rings) and reads (the
 * rings to it; the peers' slots and staging buffers too up to BATON_SHM_PREFAULT_PEERS local ranks) into
 * this process, so that no later call pays a first-touch fault (15-40 us a page on this VM: a first pass
 * over a 256 KiB ring made 64 calls of 4 KiB 20x slower). Safe at any time, with messages in flight: a
 * written page is touched by adding 0 to one byte atomically (the only writer is this rank), a read page by
 * reading it. Costs a fault per page not yet mapped (about 5 MiB for 2 local ranks: 30-60 ms here), nothing
 * once mapped. Called once per communicator before --algo auto times its candidates (comm/autotune.c). */
enum { BATON_SHM_PREFAULT_PEERS = 8 };
void baton__shm_prefault(baton_shm *shm);

/* Counters: post stores v, waits load it. A wait for a counter that reaches its nap phase sleeps on the
 * posting rank's futex word and the post wakes it at once (no nap runs out first: issue 10), unless the node
 * is oversubscribed (baton__backoff_oversubscribed), where waits nap as before. */
baton_shm_rank *baton__shm_rank_block(baton_shm *shm, int local_rank);
void baton__shm_post(baton_shm *shm, baton_shm_ctr c, uint64_t v);
/* This process's count of posts that woke a sleeping peer, and of its own naps on a counter that ended
 * because the word moved on (a post) rather than by running out. */
void baton__shm_wake_stats(const baton_shm *shm, uint64_t *wakes_sent, uint64_t *naps_woken);

/* Waits until every local rank's counter c is >= v (own included). Returns BATON_OK, BATON_ETIMEDOUT
 * (naming the ranks behind), BATON_EPEERDEAD (naming the dead rank) or BATON_ECANCELED (another rank
 * aborted the job; the detail carries its reason). The caller adds which collective it was. */
int baton__shm_wait_all(baton_shm *shm, baton_shm_ctr c, uint64_t v, uint64_t deadline_ns);
/* Same for a single local rank. */
int baton__shm_wait_one(baton_shm *shm, int local_rank, baton_shm_ctr c, uint64_t v, uint64_t deadline_ns);
/* The general form: rank r's word is at base + r * stride (e.g. the sequence words of small slots). */
int baton__shm_wait_all_at(baton_shm *shm, const void *base, size_t stride, uint64_t v, uint64_t deadline_ns);

/* Announces the collective this rank now runs (its sequence number and packed descriptor, opaque here)
 * before its first post or message, so that peers can compare. */
void baton__shm_announce(baton_shm *shm, uint64_t seq, const uint8_t desc[BATON_SHM_DESC_BYTES]);
/* What local rank r announced: *latest is its latest sequence number; returns 1 with r's descriptor for
 * seq in out when r announced seq and the entry was read whole, else 0 (not yet announced, or already
 * overwritten by a rank far ahead: nothing to compare). */
int baton__shm_announced(baton_shm *shm, int local_rank, uint64_t seq, uint8_t out[BATON_SHM_DESC_BYTES],
                         uint64_t *latest);
/* The communicator's check of a rank this rank waits for (did it announce something else for the running
 * collective?). Waits call it now and then for the ranks they wait on and stop with its error instead of
 * waiting for the timeout. NULL: no check. */
void baton__shm_set_peer_check(baton_shm *shm, int (*check)(void *ctx, int local_rank), void *ctx);
/* A small slot's header: the flag the readers wait on, and the writer's packed descriptor, which readers
 * compare with their own. */
typedef struct {
    _Atomic uint64_t flag;  /* the small all-reduce's own sequence number, stored last (release) */
    uint8_t desc[BATON_SHM_DESC_BYTES];
} baton_shm_small_hdr;
void baton__shm_small_publish(baton_shm_small_hdr *h, uint64_t flag, const uint8_t desc[BATON_SHM_DESC_BYTES]);

/* Marks the segment aborted with a reason so that every waiter stops at once (first writer wins). */
void baton__shm_abort(baton_shm *shm, const char *reason);

/* A p2p transport over this segment's channels. Peers are global ranks; global_to_local maps them
 * (-1: not on this node). The transport does not own the segment. */
int baton__shm_transport_create(baton_shm *shm, int rank, int world, const int *global_to_local,
                                baton_transport **out);

#endif
