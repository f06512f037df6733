/* baton/comm.h: the communicator. N worker processes find each other through the rendezvous store and
 * run collectives over shared memory (same node) or TCP (across nodes).
 *
 *   baton_comm *comm;
 *   if (baton_init(&comm, NULL) < 0) { fprintf(stderr, "%s\n", baton_last_error()); return 1; }
 *   float g[1000];  ...
 *   baton_allreduce(comm, g, g, 1000, BATON_F32, BATON_AVG);          // in place
 *   baton_work *w;
 *   baton_allreduce_start(comm, a, a, n, BATON_BF16, BATON_SUM, &w);   // asynchronous
 *   ... compute ...
 *   baton_wait(w);                                                      // frees w
 *   baton_comm_free(comm);
 *
 * Rules: every rank calls the same collectives in the same order with the same count, dtype, op and root.
 * Collectives borrow their buffers; an asynchronous one's buffers must not be touched until its wait returns.
 * send == recv means in place. A communicator that reported a dead peer or a timeout is unusable: free it.
 * A communicator is used by one user thread at a time (its own comm thread runs the asynchronous work). */
#ifndef BATON_COMM_H
#define BATON_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    BATON_F32 = 0,
    BATON_F64 = 1,
    BATON_F16 = 2,   /* IEEE half; reduced in f32, rounded to nearest-even once */
    BATON_BF16 = 3,  /* bfloat16; reduced in f32, rounded to nearest-even once */
    BATON_I32 = 4,
    BATON_I64 = 5,
    BATON_DTYPE_COUNT
} baton_dtype;

typedef enum {
    BATON_SUM = 0,
    BATON_AVG = 1,   /* sum divided by the world size (integers: truncated toward zero) */
    BATON_MIN = 2,
    BATON_MAX = 3,
    BATON_PROD = 4,
    BATON_OP_COUNT
} baton_op;

typedef enum {
    BATON_ALGO_AUTO = 0,
    BATON_ALGO_RING = 1,    /* reduce-scatter + all-gather around a ring; large buffers */
    BATON_ALGO_RD = 2,      /* recursive doubling (halving-doubling for large); small buffers */
    BATON_ALGO_DIRECT = 3,  /* shared memory only: each rank reduces its slice straight from the others */
    BATON_ALGO_HIER = 4,    /* reduce inside each node, exchange across node leaders, broadcast back */
    BATON_ALGO_COUNT
} baton_algo;

typedef enum {
    BATON_TRANSPORT_AUTO = 0,  /* shm between ranks of one node, tcp across nodes */
    BATON_TRANSPORT_SHM = 1,
    BATON_TRANSPORT_TCP = 2,
    BATON_TRANSPORT_MPI = 3,   /* shm inside a node, MPI point-to-point across nodes (Open MPI's mpirun; the
                                * plugin libbaton-mpi.so, see docs/cluster.md); flat over MPI on one node */
    BATON_TRANSPORT_COUNT
} baton_transport_kind;

typedef struct {
    baton_transport_kind transport;  /* AUTO unless forced (env BATON_TRANSPORT) */
    baton_algo algo;                 /* AUTO unless forced (env BATON_ALGO) */
    double timeout_s;                /* every collective's bound, seconds (env BATON_TIMEOUT, default 300) */
    double join_timeout_s;           /* rendezvous join bound, seconds (env BATON_JOIN_TIMEOUT, default 120) */
    double stall_warn_s;             /* a collective waiting this long logs which ranks have not reached it,
                                      * and again each time as long again; 0 = never (env BATON_STALL_WARN, 60) */
} baton_options;

typedef struct baton_comm baton_comm;
typedef struct baton_work baton_work;

/* Fills `opt` with the defaults, then applies BATON_TRANSPORT, BATON_ALGO, BATON_TIMEOUT,
 * BATON_JOIN_TIMEOUT, BATON_STALL_WARN. Fails with a message naming a malformed variable. Start from it
 * when building options by hand. */
int baton_options_from_env(baton_options *opt);

/* Builds a communicator from the environment: baton's own variables (BATON_RANK, BATON_WORLD_SIZE, ...,
 * BATON_STORE_ADDR, BATON_SECRET), torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
 * Open MPI's (OMPI_COMM_WORLD_*), MPICH's (PMI_RANK, PMI_SIZE, MPI_LOCALNRANKS) or Slurm's (SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE). opt NULL: from env. */
int baton_init(baton_comm **out, const baton_options *opt);

/* What the launcher's environment says about this process, read without joining anything: the same
 * variables baton_init reads. world is 1 and launcher "none" for a process started alone; local_rank and
 * local_size are -1 where the launcher does not say. Fails (BATON_EINVAL, a detail naming the variable) when
 * a variable is malformed, so that a program can refuse to start instead of silently running alone. */
typedef struct {
    int rank, world, local_rank, local_size;
    const char *launcher; /* "baton", "torchrun", "openmpi", "mpich", "slurm" or "none" (static string) */
} baton_launch_env;
int baton_launch_env_read(baton_launch_env *out);
void baton_comm_free(baton_comm *comm);  /* NULL is a no-op */

int baton_comm_rank(const baton_comm *comm);
int baton_comm_size(const baton_comm *comm);
int baton_comm_local_rank(const baton_comm *comm);
int baton_comm_local_size(const baton_comm *comm);
int baton_comm_node_rank(const baton_comm *comm);
int baton_comm_num_nodes(const baton_comm *comm);

/* ---- blocking collectives (return BATON_OK or a negative status; detail in baton_last_error()) ---- */
int baton_allreduce(baton_comm *comm, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op);
/* send holds count * world elements; recv receives this rank's `count` reduced elements. */
int baton_reduce_scatter(baton_comm *comm, const void *send, void *recv, size_t count, baton_dtype dt, baton_op op);
/* In place, a reduce-scatter with ranges of any size: buf holds count elements on every rank; each rank passes
 * its own range [lo, hi) (ranges of different ranks must not overlap, and may be empty) and gets in buf[lo, hi)
 * the reduction of every rank's buf[lo, hi). The rest of buf is left unspecified. On one node with buf from
 * baton_buffer_alloc each rank reads its range straight from the peers' buffers (no staging, half the traffic
 * of an all-reduce); otherwise it runs as an in-place all-reduce of buf. */
int baton_reduce_range(baton_comm *comm, void *buf, size_t count, baton_dtype dt, baton_op op, size_t lo, size_t hi);
/* send holds count elements; recv receives count * world, rank r's at offset r * count. */
int baton_allgather(baton_comm *comm, const void *send, void *recv, size_t count, baton_dtype dt);
int baton_broadcast(baton_comm *comm, void *buf, size_t count, baton_dtype dt, int root);
int baton_barrier(baton_comm *comm);

/* ---- asynchronous collectives: start, then baton_wait (frees the work) or baton_test ---- */
int baton_allreduce_start(baton_comm *comm, const void *send, void *recv, size_t count, baton_dtype dt,
                          baton_op op, baton_work **work);
int baton_broadcast_start(baton_comm *comm, void *buf, size_t count, baton_dtype dt, int root, baton_work **work);
/* Waits for the work to finish, frees it, and returns its status. NULL is a no-op returning BATON_OK. */
int baton_wait(baton_work *work);
/* Sets *done to 1 when finished (then baton_wait returns at once). Returns BATON_OK or a failure. */
int baton_test(baton_work *work, int *done);

/* ---- buffers in shared memory: collectives on them skip the copy into baton's staging area ---- */
void *baton_buffer_alloc(baton_comm *comm, size_t bytes);  /* NULL on failure; same size on every rank */
void baton_buffer_free(baton_comm *comm, void *buf);
/* Collective: one buffer of `bytes` (zeroed) shared by all the ranks of a node, each mapping it at its own
 * address; the same size on every rank. Writes by one local rank are seen by the others: the caller orders them
 * (a barrier between writing and reading). NULL on every rank, with baton_last_error() set only on a failure,
 * unless every node of the job has shared memory and at least two ranks. Freed
 * with baton_buffer_free by every local rank. Collectives treat it as ordinary memory. */
void *baton_buffer_alloc_node(baton_comm *comm, size_t bytes);
/* Collective: makes memory the caller already shares through a file behave like baton_buffer_alloc's.
 * [buf, buf + bytes) must be a MAP_SHARED mapping of fd from file offset 0 (e.g. a memfd, or a torch storage
 * after share_memory_()); every rank passes the same bytes. The local peers map it through
 * /proc/<pid>/fd/<fd> (the same permission cross-memory attach needs). A rank with nothing to attach passes
 * fd = -1: then nobody attaches, and every rank gets BATON_EUNSUPPORTED. On a failure no rank has attached.
 * The memory stays the caller's: baton_buffer_detach (local, not collective; every rank must detach the
 * same buffers at the same point of the program) before unmapping it. */
int baton_buffer_attach(baton_comm *comm, void *buf, size_t bytes, int fd);
void baton_buffer_detach(baton_comm *comm, void *buf);

/* ---- per-call choices (a forced algorithm that the transport cannot run fails with EUNSUPPORTED) ---- */
void baton_comm_set_algo(baton_comm *comm, baton_algo algo);
baton_algo baton_comm_last_algo(const baton_comm *comm);  /* the algorithm the last collective used */
/* How long the last collective took on this rank (ns, this process's monotonic clock, from entering the
 * collective to leaving it, on whichever thread ran it). */
uint64_t baton_comm_last_ns(const baton_comm *comm);
/* The waits of n ranks in one synchronising collective (all-reduce, reduce-scatter, all-gather, barrier) from
 * how long each spent in it, dur[r * stride], each on its own clock. No rank leaves such a collective before
 * the last one has entered, and from then on every rank has about the same work left, so rank r waited for
 * its peers dur[r] - min(dur); the last to arrive waited 0. No common clock is needed: only durations are
 * compared. Writes wait[r * stride]; the error is how unevenly the ranks leave (one message, or one chunk). */
void baton_coll_waits(const double *dur, int n, size_t stride, double *wait);
baton_transport_kind baton_comm_transport(const baton_comm *comm);

/* ---- dtypes, ops and names ---- */
size_t baton_dtype_size(baton_dtype dt);
const char *baton_dtype_name(baton_dtype dt);      /* "f32" ... */
const char *baton_op_name(baton_op op);            /* "sum" ... */
const char *baton_algo_name(baton_algo algo);      /* "auto", "ring", "rd", "direct", "hier" */
const char *baton_transport_name(baton_transport_kind t);
/* Parse the names above; return BATON_OK or BATON_EINVAL with a detail listing the accepted names. */
int baton_dtype_parse(const char *s, baton_dtype *out);
int baton_op_parse(const char *s, baton_op *out);
int baton_algo_parse(const char *s, baton_algo *out);
int baton_transport_parse(const char *s, baton_transport_kind *out);

#ifdef __cplusplus
}
#endif

#endif
