/* model.h: the alpha-beta cost model of an all-reduce, and the arithmetic built on it (efficiency,
 * training wall-clock, memory per rank). Pure functions: no I/O, no communicator. `baton plan` prints
 * them; the calibration (comm/tuning.h) fits their parameters to this machine, and the communicator's
 * automatic choice uses those fits. See docs/plan.md for every formula.
 *
 * A link is a latency alpha (seconds per message) and a bandwidth beta (bytes per second). With n bytes
 * and K ranks:
 *   ring    2(K-1) alpha + 2(K-1)/K n / beta              (reduce-scatter then all-gather, K-1 steps each)
 *   tree    2 ceil(log2 K) alpha + 2 n / beta              (reduce up a binary tree, broadcast down, pipelined)
 *   rd      recursive doubling below 32 KiB: ceil(log2 K) (alpha + n / beta); from 32 KiB halving-doubling:
 *           2 log2 p alpha + 2 (p-1)/p n / beta; with p the largest power of two <= K, a K that is not a power
 *           of two adds a fold-in and a hand-back, 2 (alpha + n / beta)  (src/comm/algo_rd.c)
 *   direct  2 alpha + 2 (K-1)/K n / beta                   (shared memory: each rank reduces its 1/K slice
 *           straight from the others' buffers, then every rank gets every reduced slice; two barriers)
 *   hier    M nodes of L ranks (src/comm/hier.c). Below 64 KiB the leaders' path: direct inside each node
 *           (intra link), ring across the M node leaders on the whole buffer (inter link), broadcast back
 *           inside the node (alpha_i + n / beta_i). From 64 KiB pipelined over N = ceil(n / 512 KiB) segments
 *           of S = n / N bytes (L > 1; BATON_HIER_SEGMENT's default, BATON_HIER_SEGMENT_DEFAULT). The ring
 *           across nodes runs fused ticks: tick t carries step s of segment t's reduce-scatter and of segment
 *           t-1's all-gather as one message, so the network stage is N + 1 ticks of M - 1 messages,
 *           (N+1)(M-1) alpha_e + 2(M-1)/M n / beta_e (the L local rings share the node's link). The
 *           shared-memory stage (reduce-scatter, all-gather) is 2 alpha_i + 2(L-1)/L S / beta_i per segment.
 *           When the network stage is the slower one, the first scatter and the last gather add one
 *           shared-memory segment; otherwise the last segment's two half ticks, 2(M-1) alpha_e +
 *           2(M-1)/M S / beta_e, follow N shared-memory segments. */
#ifndef BATON_COMM_MODEL_H
#define BATON_COMM_MODEL_H

typedef struct {
    double lat_s;   /* alpha: seconds per message */
    double bw_Bps;  /* beta: bytes per second */
} baton_link_params;

typedef enum {
    BATON_MODEL_RING = 0,
    BATON_MODEL_TREE,
    BATON_MODEL_RD,
    BATON_MODEL_DIRECT,
    BATON_MODEL_HIER,
    BATON_MODEL_COUNT
} baton_model_algo;

/* A predicted time split into its latency and bandwidth terms (seconds); total = lat + bw. */
typedef struct {
    double lat_s, bw_s, total_s;
} baton_model_time;

const char *baton__model_algo_name(baton_model_algo a);          /* "ring", "tree", "rd", "direct", "hier" */
int baton__model_algo_parse(const char *s, baton_model_algo *out); /* 0 or -1 */

/* A flat all-reduce of `bytes` over `ranks` ranks on one link (ranks >= 1; 1 rank costs nothing).
 * BATON_MODEL_HIER is not flat: use baton__model_hier. */
baton_model_time baton__model_flat(baton_model_algo a, double bytes, int ranks, baton_link_params link);
#define BATON_MODEL_HIER_MIN_BYTES 65536.0   /* src/comm/hier.c HIER_MIN_BYTES */
/* BATON_HIER_SEGMENT's default (src/comm/comm.c reads it from here; until 2026-11-26 the model had 1 MiB
 * while the implementation had moved to 512 KiB) */
#define BATON_HIER_SEGMENT_DEFAULT (512 << 10)
/* Hierarchical: `nodes` nodes of `per_node` ranks, intra-node link `intra`, inter-node link `inter`. */
baton_model_time baton__model_hier(double bytes, int nodes, int per_node, baton_link_params intra,
                                   baton_link_params inter);
/* The same all-reduce flat, one ring over all nodes x per_node ranks: every step waits for the slowest
 * link on the ring, the inter-node one when nodes > 1. */
baton_model_time baton__model_flat_ring_cluster(double bytes, int nodes, int per_node, baton_link_params intra,
                                                baton_link_params inter);

/* compute / (compute + comm): the share of a step spent computing when nothing overlaps. */
double baton__model_efficiency(double compute_s, double comm_s);
/* The compute time per step at which `comm_s` of communication leaves efficiency `target` (0 < target < 1):
 * target / (1 - target) x comm_s. */
double baton__model_compute_for(double target, double comm_s);

/* Training: 6 x params x tokens FLOPs, run at peak x mfu per device. */
typedef struct {
    double flops;           /* total FLOPs */
    double one_device_s;    /* wall-clock on one device */
} baton_model_train;
baton_model_train baton__model_train(double params, double tokens, double peak_flops, double mfu);
/* The scaling efficiency 1 / (1 + c sqrt(K)). */
double baton__model_sqrt_efficiency(double c, int ranks);

/* Memory per rank for data-parallel AdamW training with f32 parameters, f32 gradients and two f32 moments
 * (16 bytes per parameter unsharded). zero = 0: everything replicated; 1: optimizer state sharded over the
 * ranks; 2: gradients too. A shard is ceil(params / ranks) elements (contiguous, within one element). */
typedef struct {
    double params_B, grads_B, optim_B, total_B;
    double staging_B;       /* part of grads_B: gradient staging (0 here; see baton__model_zero2_staging) */
} baton_model_memory;
baton_model_memory baton__model_memory(double params, int ranks, int zero);
/* baton's ZeRO-2 (src/ddp/zero.c) stages the buckets backward writes in two slots of the largest bucket: a
 * bucket closes below bucket_mb unless one parameter alone exceeds it, so the largest bucket is at most
 * max(bucket_mb, largest_param) (and at most the model). Bytes of both slots (f32); exact when the largest
 * bucket is one parameter of at least bucket_mb, an upper bound otherwise (largest_param 0: unknown). A model
 * of at most 1 MiB is one bucket (the first bucket's cap): one slot. */
double baton__model_zero2_staging(double params, double bucket_mb, double largest_param);

#endif
