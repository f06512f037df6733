/* model.c: the alpha-beta cost model (formulas in model.h and docs/plan.md). */
#include <math.h>
#include <string.h>

#include "comm/model.h"

static const char *const names[BATON_MODEL_COUNT] = {"ring", "tree", "rd", "direct", "hier"};

const char *baton__model_algo_name(baton_model_algo a) {
    return (unsigned)a < BATON_MODEL_COUNT ? names[a] : "?";
}

int baton__model_algo_parse(const char *s, baton_model_algo *out) {
    for (int i = 0; i < BATON_MODEL_COUNT; i++)
        if (s && !strcmp(s, names[i])) {
            *out = (baton_model_algo)i;
            return 0;
        }
    return -1;
}

static baton_model_time mt(double lat, double bw) {
    baton_model_time t = {lat, bw, lat + bw};
    return t;
}

static int ceil_log2(int k) {
    int l = 0;
    while ((1L << l) < k) l++;
    return l;
}

/* Halving-doubling switches on here (src/comm/algo_rd.c HD_MIN_BYTES). */
#define RD_HD_MIN_BYTES 32768.0

baton_model_time baton__model_flat(baton_model_algo a, double bytes, int k, baton_link_params l) {
    if (k <= 1) return mt(0, 0);
    double al = l.lat_s, nb = bytes / l.bw_Bps;
    switch (a) {
    case BATON_MODEL_RING:
        return mt(2.0 * (k - 1) * al, 2.0 * (k - 1) / k * nb);
    case BATON_MODEL_TREE:
        return mt(2.0 * ceil_log2(k) * al, 2.0 * nb);
    case BATON_MODEL_RD: {
        int lg = ceil_log2(k);
        int p = 1 << (((1 << lg) == k) ? lg : lg - 1);
        double fold_lat = p == k ? 0 : 2 * al, fold_bw = p == k ? 0 : 2 * nb;
        int lp = p == k ? lg : lg - 1;
        if (bytes < RD_HD_MIN_BYTES || p < 4) return mt(lp * al + fold_lat, lp * nb + fold_bw);
        return mt(2.0 * lp * al + fold_lat, 2.0 * (p - 1) / p * nb + fold_bw);
    }
    case BATON_MODEL_DIRECT:
        return mt(2 * al, 2.0 * (k - 1) / k * nb);
    default:
        return mt(NAN, NAN);
    }
}

/* The leaders' path: direct inside the node, a ring across the node leaders on the whole buffer, a
 * broadcast inside the node. */
static baton_model_time hier_leaders(double bytes, int nodes, int per_node, baton_link_params intra,
                                     baton_link_params inter) {
    baton_model_time in = baton__model_flat(BATON_MODEL_DIRECT, bytes, per_node, intra);
    baton_model_time across = baton__model_flat(BATON_MODEL_RING, bytes, nodes, inter);
    baton_model_time bc = per_node > 1 ? mt(intra.lat_s, bytes / intra.bw_Bps) : mt(0, 0);
    return mt(in.lat_s + across.lat_s + bc.lat_s, in.bw_s + across.bw_s + bc.bw_s);
}

baton_model_time baton__model_hier(double bytes, int nodes, int per_node, baton_link_params intra,
                                   baton_link_params inter) {
    if (nodes * per_node <= 1) return mt(0, 0);
    if (bytes < BATON_MODEL_HIER_MIN_BYTES || nodes < 2 || per_node < 2) return hier_leaders(bytes, nodes, per_node, intra, inter);
    /* pipelined over nseg segments of s bytes; the ring across nodes runs nseg + 1 fused ticks of M-1
     * messages (tick t: segment t's reduce-scatter step with segment t-1's all-gather step), the node's link
     * carrying 2(M-1)/M of the buffer in all; shared memory scatters and gathers each segment (two barriers,
     * 2(L-1)/L s). The slower stage sets the pace; the faster one adds its share of one segment: the first
     * scatter and the last gather, or the last segment's two half ticks. */
    double nseg = ceil(bytes / (double)BATON_HIER_SEGMENT_DEFAULT), s = bytes / nseg, m1 = nodes - 1.0;
    baton_model_time net = mt((nseg + 1) * m1 * inter.lat_s, 2.0 * m1 / nodes * bytes / inter.bw_Bps);
    baton_model_time seg = mt(2 * intra.lat_s, 2.0 * (per_node - 1) / per_node * s / intra.bw_Bps);
    baton_model_time shm = mt(nseg * seg.lat_s, nseg * seg.bw_s);
    if (net.total_s >= shm.total_s) return mt(net.lat_s + seg.lat_s, net.bw_s + seg.bw_s);
    return mt(shm.lat_s + 2 * m1 * inter.lat_s, shm.bw_s + 2.0 * m1 / nodes * s / inter.bw_Bps);
}

baton_model_time baton__model_flat_ring_cluster(double bytes, int nodes, int per_node, baton_link_params intra,
                                                baton_link_params inter) {
    return baton__model_flat(BATON_MODEL_RING, bytes, nodes * per_node, nodes > 1 ? inter : intra);
}

double baton__model_efficiency(double compute_s, double comm_s) {
    return compute_s + comm_s > 0 ? compute_s / (compute_s + comm_s) : 1.0;
}

double baton__model_compute_for(double target, double comm_s) { return target / (1.0 - target) * comm_s; }

baton_model_train baton__model_train(double params, double tokens, double peak_flops, double mfu) {
    baton_model_train t;
    t.flops = 6.0 * params * tokens;
    t.one_device_s = t.flops / (peak_flops * mfu);
    return t;
}

double baton__model_sqrt_efficiency(double c, int ranks) { return 1.0 / (1.0 + c * sqrt((double)ranks)); }

baton_model_memory baton__model_memory(double params, int ranks, int zero) {
    double shard = ceil(params / ranks);
    baton_model_memory m;
    m.params_B = 4.0 * params;
    m.grads_B = 4.0 * (zero >= 2 ? shard : params);
    m.optim_B = 8.0 * (zero >= 1 ? shard : params);
    m.total_B = m.params_B + m.grads_B + m.optim_B;
    m.staging_B = 0;
    return m;
}

double baton__model_zero2_staging(double params, double bucket_mb, double largest_param) {
    if (params * 4.0 <= 1048576.0) return 4.0 * 16.0 * ceil(params / 16.0);   /* one bucket (the first's 1 MiB cap): one slot */
    double cap = floor(bucket_mb * 1048576.0 / 4.0), big = largest_param > cap ? largest_param : cap;
    if (big > params) big = params;
    return 2.0 * 4.0 * 16.0 * ceil(big / 16.0);   /* slots hold whole 16-float (64-byte) lines */
}
