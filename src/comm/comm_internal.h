/* comm_internal.h: the communicator's state, shared by comm.c (set-up), identity.c (who am I, where is
 * the store), coll.c (dispatch and asynchronous work) and shm_coll.c (shared-memory algorithms). */
#ifndef BATON_COMM_INTERNAL_H
#define BATON_COMM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "baton/comm.h"
#include "comm/algo.h"
#include "comm/flight.h"
#include "rendezvous/store.h"
#include "comm/desc.h"
#include "transport/mpi.h"
#include "transport/shm.h"
#include "transport/transport.h"

/* Where this process is in the job, read from the environment of whichever launcher started it. */
typedef struct {
    int rank, world;
    int local_rank, local_world;   /* -1 when the launcher did not say */
    int node_rank, nnodes;         /* -1 when the launcher did not say */
    int restart;                   /* restart attempt (BATON_RESTART_COUNT / TORCHELASTIC_RESTART_COUNT) */
    const char *source;            /* "baton", "torchrun", "openmpi", "mpich", "slurm" or "none" */
} baton_identity;

/* How to reach the rendezvous store. */
typedef struct {
    char host[256];
    int port;                      /* 0: this rank hosts it on a port the OS picks (single node) */
    int host_it;                   /* this rank starts the store server */
    uint8_t secret[BATON_STORE_SECRET_BYTES];
    int have_secret;               /* 0: rank 0 generates it and shares it through a private file */
    char file[512];                /* single-node hand-off file (port and secret), or "" */
    char job_id[64];               /* names shared-memory segments */
    int one_node;                  /* every rank is on this machine (the launcher says so, or a loopback address) */
} baton_store_plan;

int baton__identity_from_env(baton_identity *id);
/* 1 when host is a loopback address or "localhost" as written ("127.x", "::1", "[::1]"): no name is resolved. */
int baton__is_loopback(const char *host);
int baton__store_plan_from_env(const baton_identity *id, baton_store_plan *plan);
struct baton_comm;
/* Posts baton/fail/<rank> = "<kind> <peer>" for the launcher's blame (see coll.c). */
void baton__post_failure(struct baton_comm *c, int rc, const char *detail);

/* A shared-memory buffer from baton_buffer_alloc, mapped by every local rank. */
typedef struct baton_shm_buffer {
    struct baton_shm_buffer *next;
    uint8_t *local;                /* this rank's mapping of its own buffer */
    size_t bytes;
    uint8_t **peer;                /* [local_size] every local rank's buffer, mapped here */
    int attached;                  /* from baton_buffer_attach: `local` is the caller's, never unmapped here */
    int node;                      /* from baton_buffer_alloc_node: one mapping of the node's buffer, no peers */
} baton_shm_buffer;

#define BATON_AUTOTUNE_CACHE 64
#define BATON_AUTOTUNE_PROBE_BLOCK 16  /* calls in one block of a candidate's probe calls, at most */
#define BATON_AUTOTUNE_PROBE_ROUNDS 3  /* blocks per candidate: A B C, C B A, A B C */

/* One size's --algo auto choice (autotune.c). While ncand > 0 the choice is being confirmed online: after a
 * lead-in call, the size's next calls run the candidates in blocks of `len` calls and record their times,
 * then the ranks agree. */
typedef struct {
    size_t bytes1;                 /* bytes + 1, 0 = empty */
    unsigned char algo;            /* the choice, once decided */
    unsigned char ncand, len, next;/* probing: candidates (0: decided), calls per block, calls so far */
    unsigned char cand[3];         /* the model's choice first */
    double t[3][BATON_AUTOTUNE_PROBE_ROUNDS]; /* each candidate's time per counted call, block by block */
} baton_tune_slot;

typedef struct {
    coll_kind kind;
    const void *send;
    void *recv;
    size_t count;
    baton_dtype dt;
    baton_op op;
    int root;
    size_t lo, hi;                 /* reduce_range: this rank's element range */
} coll_args;

struct baton_work {
    baton_comm *comm;
    coll_args args;
    struct baton_work *next;       /* queue link */
    int done;                      /* guarded by comm->mu */
    int status;
};

struct baton_comm {
    baton_identity id;
    int rank, world;
    int local_rank, local_size;    /* on this node, from the topology */
    int node, nnodes;              /* this rank's node index (nodes ordered by their lowest rank) */
    int *node_of;                  /* [world] node index of each rank */
    int *local_of;                 /* [world] local index of each rank on its node */
    int *local_ranks;              /* [local_size] global ranks on this node, ascending */
    int *leaders;                  /* [nnodes] lowest global rank of each node */
    int *g2l;                      /* [world] local index if on this node, else -1 */

    baton_options opt;
    baton_algo algo;               /* forced algorithm or AUTO */
    baton_algo last_algo;
    baton_transport_kind transport;/* SHM: one node; TCP: forced or across nodes */
    char job_id[64];
    uint8_t secret[BATON_STORE_SECRET_BYTES]; /* the job's secret (store and TCP handshakes) */
    char store_host[256];          /* where the store is (to find this host's address across nodes) */
    int store_port;
    pthread_mutex_t store_mu;      /* the store client is used by one thread at a time */

    baton_store_server *store_server;
    baton_store *store;
    baton_shm *shm;                /* NULL unless several local ranks share memory */
    baton_transport *shm_tp;
    baton_transport *tcp;          /* the network transport: TCP, or MPI under --transport mpi (comm_mpi.c);
                                    * NULL when every rank is on one node and shares memory */
    const baton_mpi_plugin *mpi;   /* the MPI plugin, when --transport mpi loaded it */
    int mpi_inited;                /* MPI initialized through it: finalize on a clean free */

    size_t shm_chunk_bytes;        /* direct all-reduce chunk, <= BATON_SHM_STAGE_BYTES (BATON_SHM_CHUNK) */
    size_t hier_seg_bytes;         /* hierarchical all-reduce segment on the wire (BATON_HIER_SEGMENT) */
    size_t shm_stream_bytes;       /* results from this size on are written non-temporally (BATON_SHM_STREAM) */
    int cma;                       /* every local pair can read each other's memory (process_vm_readv) */
    size_t cma_min_bytes, cma_max_bytes; /* all-reduces of [min, max) bytes use it (BATON_CMA_MIN/_MAX; max 0 by default) */
    uint64_t cma_probe;            /* a value peers read from this process to test that */
    uint64_t seq;                  /* collectives run so far */
    uint64_t last_ns;              /* how long the last collective took here (baton_comm_last_ns) */
    const baton_coll_desc *desc;   /* the collective running now (set by baton__coll_exec) */
    uint8_t desc_packed[BATON_DESC_BYTES]; /* ... in its packed form (comm/desc.h) */
    baton_msg_hdr msg_hdr;         /* ... as the transports' message header */
    baton_flight flight;           /* the last 256 collectives, written out when one fails */
    /* for the watchdog thread: the running collective (0: none) and since when (CLOCK_MONOTONIC ns) */
    _Atomic uint64_t running_seq, running_since;
    _Atomic uint64_t running_desc[BATON_DESC_BYTES / 8]; /* its packed descriptor, as 64-bit words */
    pthread_t watchdog;
    int watchdog_started;
    double stall_s;                /* BATON_STALL_WARN: seconds before the first stall warning; 0 = off */
    uint64_t small_seq;            /* small shm all-reduces so far */
    uint64_t big_chunks;           /* chunks of direct shm collectives so far */
    baton_shm_buffer *buffers;
    baton_scratch scratch;         /* the p2p algorithms' scratch, kept between collectives (comm/algo.h) */
    baton_scratch hier_scratch;    /* the hierarchical all-reduce's slices and messages (hier.c), kept likewise */

    /* --algo auto from a calibration (autotune.c); NULL: the fixed rules */
    struct baton_tuning_s *tuning;
    int tune_first_use;            /* BATON_TUNING=calibrate: calibrate at the end of init if tuning lacks this link */
    baton_tune_slot tune_cache[BATON_AUTOTUNE_CACHE]; /* choices per size, direct-mapped */
    int tune_probe;                /* 1 + the slot whose probe call is running now, 0: none */
    int tune_busy;                 /* the probes' agreement is running: it takes the fixed rule */
    int tune_prefaulted;           /* the shm segment's pages are mapped in for probing (baton__shm_prefault) */
    int tune_long_algo;            /* 1 + the algorithm a probe of long calls chose (autotune.c), 0: none yet */
    double tune_probe_margin;      /* BATON_TUNING_PROBE: confirm candidates predicted within this of the best */
    int tune_state_on;             /* BATON_TUNING_STATE (rank 0's), BATON_TUNING_STATE_*: compare the machine's state with
                                    * the calibration's (auto: for 2 ranks only) */
    int tune_state;                /* BATON_TUNE_STATE_*: what that comparison found */
    int tune_state_pending;        /* the first auto all-reduce ran: compare once it has finished */

    /* asynchronous work: a FIFO run by one comm thread, in issue order */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started, stopping;
    baton_work *head, *tail;
    int pending;                   /* works queued or running (atomic: see run_blocking) */
    int comm_wait;                 /* the comm thread's waits when alone on one CPU: BATON__WAIT_NAP or _YIELD (coll.c) */
    long comm_slice_us;            /* its scheduler slice when alone on one CPU (BATON_COMM_SLICE_US; 0: the kernel's) */
    _Atomic uint64_t comm_slice_got_ns; /* the slice the comm thread read back after setting it (0: not set) */
    int broken;                    /* a collective failed: the communicator is unusable */
    char broken_reason[512];
};

/* autotune.c: BATON_TUNING. init: rank 0 reads the calibration and shares it through the store (collective
 * over the store; call once every rank is connected). choose: the algorithm the calibration predicts
 * fastest for an all-reduce of `bytes` (`fixed`, the fixed rules' choice, unless another is predicted at
 * least 2 % faster), or BATON_ALGO_AUTO when there is no calibration for this link. */
int baton__autotune_init(baton_comm *c, uint64_t deadline);
baton_algo baton__autotune_choose(baton_comm *c, size_t bytes, baton_algo fixed);
/* After a collective ran (baton__coll_exec, rc >= 0): when it was a probe call, records its time (ns, this
 * rank's); after a size's last probe call every rank runs one more all-reduce (MIN of the probe times) and
 * takes the same choice from it. */
int baton__autotune_probed(baton_comm *c, uint64_t ns);
/* The machine's state against the calibration's (BATON_TUNING_STATE): 0 not compared yet. */
enum { BATON_TUNE_STATE_UNCHECKED, BATON_TUNE_STATE_NA, BATON_TUNE_STATE_SAME, BATON_TUNE_STATE_DIFFERS };
int baton__autotune_state_check(baton_comm *c);
void baton__autotune_free(baton_comm *c);
/* BATON_TUNING=calibrate and no fits for this link and world size: a short calibration (about a second,
 * collective; call at the end of init), adopted by every rank and added to the cache by rank 0. */
int baton__autotune_first_use(baton_comm *c);

/* comm_tcp.c: listen, publish this rank's address in the store, connect the full mesh. */
int baton__comm_setup_tcp(baton_comm *c, uint64_t deadline);
/* The scheduler slice the comm thread runs with, as it read it back after setting it (BATON_COMM_SLICE_US,
 * coll.c); 0 when it did not set one (not bound to one CPU, BATON_COMM_SLICE_US=0, or a kernel without it). */
uint64_t baton__comm_thread_slice_ns(baton_comm *c);

/* comm_mpi.c: --transport mpi: refuses launchers other than Open MPI's, initializes MPI (bounded by
 * timeout_s), and fills *plan with the store rank 0 starts and announces through MPI_Bcast. */
int baton__comm_mpi_bootstrap(baton_comm *c, baton_store_plan *plan, double timeout_s);
int baton__comm_setup_mpi(baton_comm *c);

/* watchdog.c: stall warnings (names the ranks that have not reached a collective that waits too long) */
int baton__watchdog_start(baton_comm *c);
void baton__watchdog_stop(baton_comm *c);

/* coll.c */
int baton__coll_exec(baton_comm *c, const coll_args *a);
void baton__async_stop(baton_comm *c);

/* shm_coll.c: collectives among the ranks of one node, straight through shared memory. */
int baton__shm_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                         int avg_div, uint64_t deadline);
int baton__shm_reduce_range(baton_comm *c, baton_shm_buffer *buf, size_t base, size_t lo, size_t hi, baton_dtype dt,
                            baton_op op, int avg_div, uint64_t deadline);
int baton__shm_reduce_scatter(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt,
                              baton_op op, uint64_t deadline);
int baton__shm_allgather(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt,
                         uint64_t deadline);
int baton__shm_broadcast(baton_comm *c, void *buf, size_t count, baton_dtype dt, int root_local,
                         uint64_t deadline);
int baton__shm_barrier(baton_comm *c, uint64_t deadline);
/* The hierarchical all-reduce's in-node phases (hier.c), on one segment of m elements at a time. Local rank
 * r's slice of a segment is [lo, hi) (baton__shm_slice: 64-byte aligned, the same on every node with as many
 * local ranks). u numbers the stage uses of the running collective from 0 (u == 0 compares the local ranks'
 * descriptors); the caller adds how many it made to c->big_chunks at the end.
 * rs: slice = my slice of the segment reduced over the local ranks (16-bit dtypes: an f32 partial; op not AVG).
 * ag: out = every local rank's finished slice (in dtype dt), mine taken from `slice`. */
void baton__shm_slice(size_t m, int L, int r, baton_dtype dt, size_t *lo, size_t *hi);
int baton__shm_rs_slice(baton_comm *c, uint64_t u, const void *in, size_t m, baton_dtype dt, baton_op op,
                        void *slice, uint64_t deadline);
int baton__shm_ag_slice(baton_comm *c, uint64_t u, const void *slice, void *out, size_t m, baton_dtype dt,
                        uint64_t deadline);
/* hier.c: hierarchical all-reduce across nodes (see the file's comment). */
int baton__hier_allreduce(baton_comm *c, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op,
                          uint64_t deadline);
/* The shared-memory waits' check of a local rank waited for (baton__shm_set_peer_check; ctx is the comm). */
int baton__shm_peer_check(void *ctx, int local_rank);
baton_shm_buffer *baton__shm_find_buffer(baton_comm *c, const void *p, size_t bytes, size_t *offset);
/* At init: can every local rank read every other's memory? Sets c->cma (agreed by all ranks). */
int baton__shm_cma_probe(baton_comm *c);

#endif
