/* test_algo_tcp.c: the TCP transport and the point-to-point collective algorithms. N ranks run as N threads
 * of one process, each with its own TCP transport over loopback (addresses exchanged through an array).
 * Data are integer-valued so sums and products are exact; each rank checks its own result element by
 * element against a reference computed in double (16-bit dtypes: rounded once, to nearest-even). */
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include "comm/algo.h"
#include "comm/algo_util.h"
#include "harness.h"
#include "comm/desc.h"
#include "transport/tcp.h"
#include "util/util.h"

#define MAXN 8

/* ---- a mesh of threads ------------------------------------------------------------------------- */

typedef struct mesh mesh;
typedef void (*body_fn)(mesh *m, int rank, baton_transport *t);
struct mesh {
    int n;
    char addr[MAXN][64];
    const char *addrp[MAXN];
    uint8_t secret[MAXN][32];   /* per rank, normally all equal */
    pthread_barrier_t bar;
    body_fn body;
    void *arg;
    double create_timeout_s;
    int create_rc[MAXN];
    char create_err[MAXN][512];
    int expect_create_fail;     /* do not assert on create failures */
    int rc[MAXN];               /* bodies may record statuses here */
    char err[MAXN][512];
    double elapsed[MAXN];
};

typedef struct { mesh *m; int rank; } targ;

static void *rank_main(void *p) {
    targ *a = p;
    mesh *m = a->m;
    int fd = -1, port = 0;
    ASSERT_OK(baton__tcp_listen("127.0.0.1", &port, &fd));
    snprintf(m->addr[a->rank], sizeof m->addr[a->rank], "127.0.0.1:%d", port);
    m->addrp[a->rank] = m->addr[a->rank];
    pthread_barrier_wait(&m->bar);
    baton_transport *t = NULL;
    int rc = baton__tcp_transport_create(a->rank, m->n, fd, m->addrp, m->secret[a->rank],
                                         baton__deadline_after(m->create_timeout_s), &t);
    close(fd);
    m->create_rc[a->rank] = rc;
    snprintf(m->create_err[a->rank], sizeof m->create_err[a->rank], "%s", baton_last_error());
    if (rc < 0) {
        if (!m->expect_create_fail)
            th_fail(__FILE__, __LINE__, "rank %d: transport create: %s", a->rank, baton_last_error());
        return NULL;
    }
    ASSERT_STR_EQ(t->ops->name, "tcp");
    if (m->body) m->body(m, a->rank, t);
    t->ops->close(t);
    return NULL;
}

static void run_mesh(mesh *m) {
    pthread_t th[MAXN];
    targ args[MAXN];
    if (m->create_timeout_s <= 0) m->create_timeout_s = 30;
    pthread_barrier_init(&m->bar, NULL, (unsigned)m->n);
    for (int r = 0; r < m->n; r++) {
        args[r] = (targ){m, r};
        ASSERT_EQ_INT(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < m->n; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&m->bar);
}

static void mesh_init(mesh *m, int n, body_fn body, void *arg) {
    memset(m, 0, sizeof *m);
    m->n = n;
    m->body = body;
    m->arg = arg;
    uint8_t s[32];
    randombytes_buf(s, sizeof s);
    for (int r = 0; r < n; r++) memcpy(m->secret[r], s, 32);
}

static baton_group group_of(baton_transport *t, int n, int rank, size_t seg) {
    return (baton_group){t, n, rank, NULL, baton__deadline_after(30), seg, NULL};
}

/* ---- data and reference ------------------------------------------------------------------------ */

/* Integer-valued input of rank r, element i, for op: sums stay below 2^8 in magnitude (exact in bf16),
 * products are +-2^k with k <= 8. */
static double val(int r, size_t i, baton_op op) {
    if (op == BATON_PROD) {
        unsigned h = (unsigned)(r * 5 + i * 3) % 7;
        return h == 0 ? 2.0 : h == 3 ? -1.0 : 1.0;
    }
    return (double)((long)((unsigned)(r * 7 + i * 13 + (i >> 3)) % 17) - 8);
}

/* Round x to p significant bits, nearest-even (values here stay in the normal range of every type). */
static double round_bits(double x, int p) {
    if (x == 0 || !isfinite(x)) return x;
    int e;
    frexp(x, &e);
    return ldexp(nearbyint(ldexp(x, p - e)), e - p);
}

/* Decoders independent of the library's (test oracle). */
static double dec_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static double dec_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Encode an exactly representable value (inputs are small integers). */
static uint16_t enc_f16(double v) {
    if (v == 0) return signbit(v) ? 0x8000 : 0;
    int e;
    double m = frexp(fabs(v), &e);   /* v = m 2^e, m in [0.5, 1) */
    uint16_t bits = (uint16_t)(((e + 14) << 10) | ((unsigned)ldexp(m, 11) & 1023));
    return (uint16_t)(v < 0 ? bits | 0x8000 : bits);
}
static uint16_t enc_bf16(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static void put(void *buf, size_t i, baton_dtype dt, double v) {
    switch (dt) {
    case BATON_F32: ((float *)buf)[i] = (float)v; break;
    case BATON_F64: ((double *)buf)[i] = v; break;
    case BATON_F16: ((uint16_t *)buf)[i] = enc_f16(v); break;
    case BATON_BF16: ((uint16_t *)buf)[i] = enc_bf16(v); break;
    case BATON_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case BATON_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}
static double get(const void *buf, size_t i, baton_dtype dt) {
    switch (dt) {
    case BATON_F32: return ((const float *)buf)[i];
    case BATON_F64: return ((const double *)buf)[i];
    case BATON_F16: return dec_f16(((const uint16_t *)buf)[i]);
    case BATON_BF16: return dec_bf16(((const uint16_t *)buf)[i]);
    case BATON_I32: return ((const int32_t *)buf)[i];
    case BATON_I64: return (double)((const int64_t *)buf)[i];
    default: return NAN;
    }
}

/* The correctly rounded expected value of element i reduced over n ranks. */
static double expect(int n, size_t i, baton_dtype dt, baton_op op) {
    double acc = val(0, i, op);
    for (int r = 1; r < n; r++) {
        double v = val(r, i, op);
        switch (op) {
        case BATON_SUM: case BATON_AVG: acc += v; break;
        case BATON_PROD: acc *= v; break;
        case BATON_MIN: acc = v < acc ? v : acc; break;
        case BATON_MAX: acc = v > acc ? v : acc; break;
        default: break;
        }
    }
    if (op == BATON_AVG) {
        if (dt == BATON_I32 || dt == BATON_I64) return (double)((long long)acc / n);
        acc /= n;
    }
    switch (dt) {
    case BATON_F32: return (float)acc;
    case BATON_F16: return round_bits(acc, 11);
    case BATON_BF16: return round_bits(acc, 8);
    default: return acc;
    }
}

static const char *const DT_NAMES[] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
static const char *const OP_NAMES[] = {"sum", "avg", "min", "max", "prod"};

/* ---- the all-reduce matrix --------------------------------------------------------------------- */

typedef int (*allreduce_fn)(const baton_group *, const void *, void *, size_t, baton_dtype, baton_op);

typedef struct {
    allreduce_fn fn;
    const char *name;
    const size_t *counts;
    int ncounts;
    size_t seg;
    int all_types;   /* 0: only f32 sum and bf16 sum / avg */
    int framed;      /* set t->hdr so that every message carries a checked frame header */
    int scratch;     /* one baton_scratch for all the rank's calls, as a communicator keeps it (0: none) */
} ar_case;


static void check_allreduce(int rank, int n, const char *name, const void *out, size_t count, baton_dtype dt,
                            baton_op op, int inplace) {
    for (size_t i = 0; i < count; i++) {
        double got = get(out, i, dt), want = expect(n, i, dt, op);
        if (!(got == want))
            th_fail(__FILE__, __LINE__, "%s n=%d rank %d count %zu %s %s %s: element %zu = %.9g, want %.9g", name, n,
                    rank, count, DT_NAMES[dt], OP_NAMES[op], inplace ? "in place" : "out of place",
                    i, got, want);
    }
}

static void ar_body(mesh *m, int rank, baton_transport *t) {
    const ar_case *c = m->arg;
    const int n = m->n;
    size_t maxc = 0;
    for (int k = 0; k < c->ncounts; k++) maxc = c->counts[k] > maxc ? c->counts[k] : maxc;
    size_t cap = (maxc + 1) * 8;
    uint8_t *in = malloc(cap), *out = malloc(cap);
    ASSERT_TRUE(in && out);
    baton_group g = group_of(t, n, rank, c->seg);
    baton_scratch scratch = {0};
    if (c->scratch) g.scratch = &scratch;
    baton_coll_desc desc = {0, 0, 0, 0, 0, 0};
    baton_msg_hdr hdr;
    baton__desc_msg_hdr(&hdr, &desc);
    for (int k = 0; k < c->ncounts; k++) {
        size_t count = c->counts[k];
        for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++) {
            for (int op = 0; op < BATON_OP_COUNT; op++) {
                if (!c->all_types && !(dt == BATON_F32 && op == BATON_SUM) &&
                    !(dt == BATON_BF16 && (op == BATON_SUM || op == BATON_AVG)))
                    continue;
                for (int inplace = 0; inplace < 2; inplace++) {
                    for (size_t i = 0; i < count; i++) put(in, i, dt, val(rank, i, op));
                    memset(out, 0xa5, cap);
                    void *dst = inplace ? in : out;
                    g.deadline_ns = baton__deadline_after(30);
                    desc = (baton_coll_desc){desc.seq + 1, count, 0, (uint8_t)dt, (uint8_t)op, 0};
                    t->hdr = c->framed ? &hdr : NULL;
                    if (scratch.p) memset(scratch.p, 0xff, scratch.cap);   /* NaN: stale scratch must not matter */
                    int rc = c->fn(&g, in, dst, count, dt, op);
                    if (rc < 0)
                        th_fail(__FILE__, __LINE__, "%s n=%d rank %d count %zu %s %s: %s", c->name, n, rank, count,
                                DT_NAMES[dt], OP_NAMES[op], baton_last_error());
                    check_allreduce(rank, n, c->name, dst, count, dt, op, inplace);
                    if (!inplace) {   /* the input is untouched and nothing past the output was written */
                        for (size_t i = 0; i < count; i++) ASSERT_TRUE(get(in, i, dt) == val(rank, i, op));
                        ASSERT_EQ_INT(out[count * baton__esize(dt)], 0xa5);
                    }
                }
            }
        }
    }
    t->hdr = NULL;
    if (c->scratch && n > 1 && maxc >= (size_t)n) {
        /* the scratch was kept and grown, never given back (rd's holds a whole f64 vector); a call of the
         * largest size again (f64: the largest working size) runs in the same memory */
        void *p = scratch.p;
        size_t cap = scratch.cap;
        ASSERT_TRUE(p != NULL && cap >= (c->fn == baton__allreduce_rd ? maxc * 8 : 1));
        for (size_t i = 0; i < maxc; i++) put(in, i, BATON_F64, val(rank, i, BATON_SUM));
        g.deadline_ns = baton__deadline_after(30);
        ASSERT_OK(c->fn(&g, in, out, maxc, BATON_F64, BATON_SUM));
        check_allreduce(rank, n, c->name, out, maxc, BATON_F64, BATON_SUM, 0);
        ASSERT_TRUE(scratch.p == p && scratch.cap == cap);
    }
    baton__scratch_free(&scratch);
    free(in);
    free(out);
}

static void run_allreduce_matrix(allreduce_fn fn, const char *name, int framed, size_t seg) {
    static const int worlds[] = {1, 2, 3, 4, 5, 8};
    for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++) {
        int n = worlds[w];
        /* 9001 elements: several 1 KiB ring segments, and rd's halving-doubling path (>= 32 KiB) */
        size_t counts[] = {0, 1, 7, (size_t)n - 1 ? (size_t)n - 1 : 2, (size_t)n + 1, 37, 1001, 9001};
        /* framed runs keep one scratch per rank across every call (as a communicator does); unframed
         * ones allocate per call */
        ar_case c = {fn, name, counts, (int)(sizeof counts / sizeof *counts), seg, 1, framed, framed};
        mesh m;
        mesh_init(&m, n, ar_body, &c);
        run_mesh(&m);
    }
}

/* 1 KiB segments: 9001 elements take several progress reports and several 16-segment messages per step */
TEST_T(ring_allreduce_all_types_ops_worlds, 120) { run_allreduce_matrix(baton__allreduce_ring, "ring", 1, 1024); }
/* unframed byte streams, and segments smaller than some elements' groups (12 bytes: 3 f32, 1 f64 + ...) */
TEST_T(ring_allreduce_unframed_odd_segments, 120) { run_allreduce_matrix(baton__allreduce_ring, "ring", 0, 12); }
TEST_T(rd_allreduce_all_types_ops_worlds, 120) { run_allreduce_matrix(baton__allreduce_rd, "rd", 1, 1024); }

/* A few MiB with the default 256 KiB segment, 2, 3 and 4 ranks. */
TEST_T(allreduce_large_buffers, 120) {
    static const size_t counts[] = {(size_t)3 << 18, ((size_t)1 << 19) + 3};   /* 3 MiB, 2 MiB of f32 */
    for (int n = 2; n <= 4; n++) {
        ar_case c = {baton__allreduce_ring, "ring", counts, 2, 0, 0, 1, 1};
        mesh m;
        mesh_init(&m, n, ar_body, &c);
        run_mesh(&m);
        ar_case d = {baton__allreduce_rd, "rd", counts + 1, 1, 0, 0, 1, 1};
        mesh_init(&m, n, ar_body, &d);
        run_mesh(&m);
    }
}

/* ---- determinism with non-integer data: every rank ends with the same bits ------------------------- */

typedef struct {
    allreduce_fn fn;
    baton_dtype dt;
    baton_op op;
    size_t count;
    uint8_t *out[MAXN];
} det_case;

static void det_body(mesh *m, int rank, baton_transport *t) {
    det_case *c = m->arg;
    size_t esz = baton__esize(c->dt);
    uint8_t *buf = malloc(c->count * esz);
    ASSERT_TRUE(buf != NULL);
    uint32_t x = 0x9e3779b9u * (uint32_t)(rank + 1);
    for (size_t i = 0; i < c->count; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        double v = ((double)(x % 20001) - 10000.0) / 3.0;
        if (i % 97 == 5) v = rank % 2 ? -0.0 : 0.0;          /* signed zeros for MIN/MAX */
        if (i % 211 == 7 && rank == 1) v = NAN;
        if (c->dt == BATON_F32) ((float *)buf)[i] = (float)v;
        else if (c->dt == BATON_F64) ((double *)buf)[i] = v;
        else ((uint16_t *)buf)[i] = enc_bf16(round_bits(v, 8));
    }
    baton_group g = group_of(t, m->n, rank, 4096);
    ASSERT_OK(c->fn(&g, buf, buf, c->count, c->dt, c->op));
    c->out[rank] = buf;
}

TEST_T(allreduce_bit_identical_on_every_rank, 60) {
    allreduce_fn fns[] = {baton__allreduce_ring, baton__allreduce_rd};
    baton_dtype dts[] = {BATON_F32, BATON_F64, BATON_BF16};
    baton_op ops[] = {BATON_SUM, BATON_MIN, BATON_MAX, BATON_AVG};
    int worlds[] = {3, 5, 6};
    for (int f = 0; f < 2; f++)
        for (int d = 0; d < 3; d++)
            for (int o = 0; o < 4; o++)
                for (int w = 0; w < 3; w++) {
                    det_case c = {fns[f], dts[d], ops[o], 5003, {0}};
                    mesh m;
                    mesh_init(&m, worlds[w], det_body, &c);
                    run_mesh(&m);
                    size_t bytes = c.count * baton__esize(c.dt);
                    for (int r = 1; r < m.n; r++)
                        if (memcmp(c.out[0], c.out[r], bytes) != 0)
                            th_fail(__FILE__, __LINE__, "%s %s %s n=%d: rank %d differs from rank 0", f ? "rd" : "ring",
                                    DT_NAMES[c.dt], OP_NAMES[c.op], m.n, r);
                    for (int r = 0; r < m.n; r++) free(c.out[r]);
                }
}

/* ---- reduce-scatter, all-gather, broadcast, barrier --------------------------------------------- */

static const size_t SMALL_COUNTS[] = {0, 1, 2, 7, 9, 300, 1001};
#define NSMALL ((int)(sizeof SMALL_COUNTS / sizeof *SMALL_COUNTS))

static void rs_body(mesh *m, int rank, baton_transport *t) {
    const int n = m->n;
    baton_group g = group_of(t, n, rank, 1024);
    baton_scratch scratch = {0};   /* every other call: the kept scratch a communicator passes, poisoned */
    for (int k = 0; k < NSMALL; k++) {
        size_t count = SMALL_COUNTS[k], total = count * (size_t)n;
        for (int dt = 0; dt < BATON_DTYPE_COUNT; dt++)
            for (int op = 0; op < BATON_OP_COUNT; op++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    g.scratch = (k + dt + op) % 2 ? &scratch : NULL;
                    if (scratch.p) memset(scratch.p, 0xff, scratch.cap);
                    size_t esz = baton__esize(dt);
                    uint8_t *in = malloc(total * esz + 8), *out = malloc(count * esz + 8);
                    ASSERT_TRUE(in && out);
                    for (size_t i = 0; i < total; i++) put(in, i, dt, val(rank, i, op));
                    memset(out, 0xa5, count * esz + 8);
                    void *dst = inplace ? in : out;
                    int rc = baton__reduce_scatter_ring(&g, in, dst, count, dt, op);
                    if (rc < 0) th_fail(__FILE__, __LINE__, "rs n=%d count %zu: %s", n, count, baton_last_error());
                    for (size_t i = 0; i < count; i++) {
                        double got = get(dst, i, dt), want = expect(n, (size_t)rank * count + i, dt, op);
                        if (!(got == want))
                            th_fail(__FILE__, __LINE__, "rs n=%d rank %d count %zu %s %s %s: elem %zu = %g, want %g", n,
                                    rank, count, DT_NAMES[dt], OP_NAMES[op], inplace ? "in place" : "out of place", i,
                                    got, want);
                    }
                    if (!inplace) ASSERT_EQ_INT(out[count * esz], 0xa5);
                    free(in);
                    free(out);
                }
    }
    if (n > 2) ASSERT_TRUE(scratch.p != NULL);   /* the partials of n >= 3 ranks used it */
    baton__scratch_free(&scratch);
}

static void ag_body(mesh *m, int rank, baton_transport *t) {
    const int n = m->n;
    baton_group g = group_of(t, n, rank, 1024);
    for (int k = 0; k < NSMALL; k++) {
        size_t count = SMALL_COUNTS[k], total = count * (size_t)n;
        baton_dtype dts[] = {BATON_F32, BATON_BF16, BATON_I64};
        for (int d = 0; d < 3; d++)
            for (int inplace = 0; inplace < 2; inplace++) {
                baton_dtype dt = dts[d];
                size_t esz = baton__esize(dt);
                uint8_t *in = malloc(count * esz + 8), *out = malloc(total * esz + 8);
                ASSERT_TRUE(in && out);
                memset(out, 0xa5, total * esz + 8);
                void *src = in;
                if (inplace) src = out;   /* send == recv: the input sits at offset 0 */
                for (size_t i = 0; i < count; i++) put(src, i, dt, val(rank, i, BATON_SUM));
                int rc = baton__allgather_ring(&g, src, out, count, dt);
                if (rc < 0) th_fail(__FILE__, __LINE__, "ag n=%d count %zu: %s", n, count, baton_last_error());
                for (int r = 0; r < n; r++)
                    for (size_t i = 0; i < count; i++)
                        if (get(out, (size_t)r * count + i, dt) != val(r, i, BATON_SUM))
                            th_fail(__FILE__, __LINE__, "ag n=%d rank %d count %zu %s: block %d elem %zu wrong", n, rank,
                                    count, DT_NAMES[dt], r, i);
                ASSERT_EQ_INT(out[total * esz], 0xa5);
                free(in);
                free(out);
            }
    }
}

static void bcast_body(mesh *m, int rank, baton_transport *t) {
    const int n = m->n;
    static const size_t counts[] = {0, 1, 7, 1001, 40000};   /* 40000 f32 = 160 KB: the chain */
    baton_group g = group_of(t, n, rank, 4096);
    float *buf = malloc(40000 * sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    for (int k = 0; k < 5; k++)
        for (int root = 0; root < n; root++) {
            size_t count = counts[k];
            for (size_t i = 0; i < count; i++) buf[i] = rank == root ? (float)val(root, i, BATON_SUM) : -99.0f;
            int rc = baton__broadcast_p2p(&g, buf, count, BATON_F32, root);
            if (rc < 0) th_fail(__FILE__, __LINE__, "bcast n=%d root %d: %s", n, root, baton_last_error());
            for (size_t i = 0; i < count; i++)
                if (buf[i] != (float)val(root, i, BATON_SUM))
                    th_fail(__FILE__, __LINE__, "bcast n=%d root %d rank %d count %zu: elem %zu = %g", n, root, rank,
                            count, i, buf[i]);
        }
    ASSERT_OK(baton__barrier_p2p(&g));
    free(buf);
}

/* Barrier: nobody leaves round k before everybody has entered it (a shared counter checks it). */
static int barrier_entered[64];
static void barrier_body(mesh *m, int rank, baton_transport *t) {
    baton_group g = group_of(t, m->n, rank, 0);
    for (int round = 0; round < 20; round++) {
        if (rank == round % m->n) usleep(2000);   /* a late rank each round */
        __atomic_add_fetch(&barrier_entered[round], 1, __ATOMIC_SEQ_CST);
        ASSERT_OK(baton__barrier_p2p(&g));
        ASSERT_EQ_INT(__atomic_load_n(&barrier_entered[round], __ATOMIC_SEQ_CST), m->n);
    }
}

static const int WORLDS[] = {1, 2, 3, 4, 5, 8};
#define NWORLDS ((int)(sizeof WORLDS / sizeof *WORLDS))

TEST_T(reduce_scatter_ring_matrix, 120) {
    for (int w = 0; w < NWORLDS; w++) {
        mesh m;
        mesh_init(&m, WORLDS[w], rs_body, NULL);
        run_mesh(&m);
    }
}

TEST_T(allgather_ring_matrix, 60) {
    for (int w = 0; w < NWORLDS; w++) {
        mesh m;
        mesh_init(&m, WORLDS[w], ag_body, NULL);
        run_mesh(&m);
    }
}

TEST_T(broadcast_every_root, 60) {
    for (int w = 0; w < NWORLDS; w++) {
        mesh m;
        mesh_init(&m, WORLDS[w], bcast_body, NULL);
        run_mesh(&m);
    }
}

TEST_T(barrier_dissemination, 60) {
    for (int w = 0; w < NWORLDS; w++) {
        memset(barrier_entered, 0, sizeof barrier_entered);
        mesh m;
        mesh_init(&m, WORLDS[w], barrier_body, NULL);
        run_mesh(&m);
    }
}

/* ---- groups: g->ranks maps group index -> transport peer ---------------------------------------- */

static void subgroup_body(mesh *m, int rank, baton_transport *t) {
    (void)m;
    static const int members[3] = {4, 2, 0};   /* group index 0 is global rank 4, ... */
    int me = -1;
    for (int i = 0; i < 3; i++)
        if (members[i] == rank) me = i;
    if (me < 0) return;   /* ranks 1 and 3 sit this one out */
    baton_group g = {t, 3, me, members, baton__deadline_after(30), 1024, NULL};
    size_t count = 1001;
    float *buf = malloc(count * sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    allreduce_fn fns[] = {baton__allreduce_ring, baton__allreduce_rd};
    for (int f = 0; f < 2; f++) {
        for (size_t i = 0; i < count; i++) buf[i] = (float)val(me, i, BATON_SUM);
        ASSERT_OK(fns[f](&g, buf, buf, count, BATON_F32, BATON_SUM));
        for (size_t i = 0; i < count; i++) ASSERT_TRUE(buf[i] == (float)expect(3, i, BATON_F32, BATON_SUM));
    }
    for (size_t i = 0; i < count; i++) buf[i] = me == 1 ? 5.0f : 0.0f;
    ASSERT_OK(baton__broadcast_p2p(&g, buf, count, BATON_F32, 1));
    for (size_t i = 0; i < count; i++) ASSERT_TRUE(buf[i] == 5.0f);
    ASSERT_OK(baton__barrier_p2p(&g));
    free(buf);
}

TEST(group_maps_indices_to_ranks) {
    mesh m;
    mesh_init(&m, 5, subgroup_body, NULL);
    run_mesh(&m);
}

/* ---- the transport itself ------------------------------------------------------------------------ */

/* Two ranks send each other 256 MiB at once: both directions progress, no deadlock. */
static void bidir_body(mesh *m, int rank, baton_transport *t) {
    (void)m;
    size_t bytes = (size_t)256 << 20;
    uint8_t *s = malloc(bytes), *r = malloc(bytes);
    ASSERT_TRUE(s && r);
    for (size_t i = 0; i < bytes; i += 4096) s[i] = (uint8_t)(i / 4096 + (size_t)rank);
    int peer = 1 - rank;
    ASSERT_OK(t->ops->sendrecv(t, peer, s, bytes, peer, r, bytes, baton__deadline_after(60), NULL));
    for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ_INT(r[i], (uint8_t)(i / 4096 + (size_t)peer));
    free(s);
    free(r);
}

TEST_T(sendrecv_256mib_both_ways_at_once, 90) {
    mesh m;
    mesh_init(&m, 2, bidir_body, NULL);
    run_mesh(&m);
}

TEST(split_addr_parses_and_rejects) {
    char h[64];
    int port;
    ASSERT_OK(baton__tcp_split_addr("10.0.0.1:29500", h, sizeof h, &port));
    ASSERT_STR_EQ(h, "10.0.0.1");
    ASSERT_EQ_INT(port, 29500);
    ASSERT_OK(baton__tcp_split_addr("[::1]:7", h, sizeof h, &port));
    ASSERT_STR_EQ(h, "::1");
    ASSERT_EQ_INT(port, 7);
    ASSERT_OK(baton__tcp_split_addr("node-3.cluster:65535", h, sizeof h, &port));
    ASSERT_STR_EQ(h, "node-3.cluster");
    ASSERT_EQ_INT(baton__tcp_split_addr("nocolon", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "host:port");
    ASSERT_EQ_INT(baton__tcp_split_addr("h:0", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_EQ_INT(baton__tcp_split_addr("h:70000", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_EQ_INT(baton__tcp_split_addr("h:12x", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_EQ_INT(baton__tcp_split_addr(":80", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_EQ_INT(baton__tcp_split_addr("[::1]80", h, sizeof h, &port), BATON_EINVAL);
    ASSERT_EQ_INT(baton__tcp_split_addr("abcdefgh:80", h, 4, &port), BATON_EINVAL);
}

/* ---- failures ------------------------------------------------------------------------------------ */

/* The last rank closes its sockets while the others run a ring all-reduce. */
static void dies_body(mesh *m, int rank, baton_transport *t) {
    if (rank == m->n - 1) {
        usleep(20000);
        return;   /* rank_main closes the transport: every socket of this rank goes away */
    }
    size_t count = (size_t)4 << 20;
    float *buf = calloc(count, sizeof *buf);
    ASSERT_TRUE(buf != NULL);
    baton_group g = group_of(t, m->n, rank, 0);
    uint64_t t0 = baton__now_ns();
    int rc = BATON_OK;
    for (int it = 0; it < 50 && rc == BATON_OK; it++) rc = baton__allreduce_ring(&g, buf, buf, count, BATON_F32, BATON_SUM);
    m->rc[rank] = rc;
    m->elapsed[rank] = (double)(baton__now_ns() - t0) / 1e9;
    snprintf(m->err[rank], sizeof m->err[rank], "%s", baton_last_error());
    free(buf);
}

TEST_T(peer_closing_mid_collective_is_named, 60) {
    for (int n = 2; n <= 3; n++) {
        mesh m;
        mesh_init(&m, n, dies_body, NULL);
        run_mesh(&m);
        for (int r = 0; r < n - 1; r++) {
            if (m.rc[r] != BATON_EPEERDEAD)
                th_fail(__FILE__, __LINE__, "n=%d rank %d: rc %d (%s), want EPEERDEAD", n, r, m.rc[r], m.err[r]);
            ASSERT_TRUE(m.elapsed[r] < 10.0);   /* the deadline is 30 s: the failure was noticed, not waited out */
        }
        for (int r = 0; r < n - 1; r++) printf("    n=%d rank %d (%.3f s): %s\n", n, r, m.elapsed[r], m.err[r]);
        /* rank 0 receives from the dead rank in the ring: it names it */
        char want[32];
        snprintf(want, sizeof want, "rank %d", n - 1);
        ASSERT_CONTAINS(m.err[0], want);
    }
}

/* Rank 1 is connected but never sends: rank 0 times out at its deadline, naming rank 1. */
static void silent_body(mesh *m, int rank, baton_transport *t) {
    if (rank == 1) {
        usleep(2500000);
        return;
    }
    float x[4] = {1, 2, 3, 4};
    baton_group g = group_of(t, 2, rank, 0);
    g.deadline_ns = baton__deadline_after(1.0);
    uint64_t t0 = baton__now_ns();
    m->rc[0] = baton__allreduce_rd(&g, x, x, 4, BATON_F32, BATON_SUM);
    m->elapsed[0] = (double)(baton__now_ns() - t0) / 1e9;
    snprintf(m->err[0], sizeof m->err[0], "%s", baton_last_error());
}

TEST(silent_peer_times_out_at_deadline) {
    mesh m;
    mesh_init(&m, 2, silent_body, NULL);
    run_mesh(&m);
    ASSERT_EQ_INT(m.rc[0], BATON_ETIMEDOUT);
    ASSERT_CONTAINS(m.err[0], "rank 1");
    ASSERT_TRUE(m.elapsed[0] >= 0.95 && m.elapsed[0] < 2.0);
}

TEST(wrong_secret_is_refused) {
    mesh m;
    mesh_init(&m, 2, NULL, NULL);
    m.secret[1][0] ^= 1;
    m.expect_create_fail = 1;
    m.create_timeout_s = 2;
    run_mesh(&m);
    ASSERT_EQ_INT(m.create_rc[1], BATON_EAUTH);   /* the connector cannot verify rank 0's MAC */
    ASSERT_CONTAINS(m.create_err[1], "rank 0 failed authentication");
    ASSERT_EQ_INT(m.create_rc[0], BATON_EAUTH);   /* rank 0 refused it and names it at its deadline */
    ASSERT_CONTAINS(m.create_err[0], "rank(s) 1 never connected");
    ASSERT_CONTAINS(m.create_err[0], "claiming rank 1 failed authentication");
}

/* A stranger that claims an impossible rank (or the wrong world size) is refused with a status code and
 * closed; the genuine rank still gets in and the mesh forms. */
typedef struct { int fd; const char *const *addrs; uint8_t *secret; int rc; char err[512]; int got; } solo_arg;
static void *solo_rank0(void *p) {
    solo_arg *a = p;
    baton_transport *t = NULL;
    a->rc = baton__tcp_transport_create(0, 2, a->fd, a->addrs, a->secret, baton__deadline_after(20), &t);
    if (a->rc == BATON_OK) a->rc = t->ops->sendrecv(t, -1, NULL, 0, 1, &a->got, sizeof a->got, baton__deadline_after(20), NULL);
    snprintf(a->err, sizeof a->err, "%s", baton_last_error());
    if (t) t->ops->close(t);
    return NULL;
}

static uint32_t stranger(int port, uint32_t from, uint32_t to, uint32_t world) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint8_t hello[40] = {'B', 'T', 'N', '1'};   /* the handshake is little-endian, like every baton message */
    baton__put_le32(hello + 4, 1);
    baton__put_le32(hello + 8, from);
    baton__put_le32(hello + 12, to);
    baton__put_le32(hello + 16, world);
    ASSERT_OK(baton__write_full(fd, hello, sizeof hello));
    uint8_t ch[56];
    ASSERT_OK(baton__read_full(fd, ch, sizeof ch));
    uint8_t extra;
    ASSERT_EQ_INT(baton__read_full(fd, &extra, 1), BATON_EPEERDEAD);   /* refused, then closed */
    close(fd);
    return baton__get_le32(ch + 4);
}

TEST(impossible_rank_claims_are_refused) {
    int fd0, fd1, port0, port1;
    ASSERT_OK(baton__tcp_listen("127.0.0.1", &port0, &fd0));
    ASSERT_OK(baton__tcp_listen("127.0.0.1", &port1, &fd1));
    char a0[64], a1[64];
    snprintf(a0, sizeof a0, "127.0.0.1:%d", port0);
    snprintf(a1, sizeof a1, "127.0.0.1:%d", port1);
    const char *addrs[2] = {a0, a1};
    uint8_t secret[32] = {7};
    solo_arg a = {fd0, addrs, secret, 0, "", 0};
    pthread_t th;
    ASSERT_EQ_INT(pthread_create(&th, NULL, solo_rank0, &a), 0);
    ASSERT_EQ_INT(stranger(port0, 0, 0, 2), 2);    /* rank 0 claiming to be rank 0: impossible source */
    ASSERT_EQ_INT(stranger(port0, 9, 0, 2), 2);    /* beyond the world */
    ASSERT_EQ_INT(stranger(port0, 1, 0, 5), 1);    /* wrong world size */
    ASSERT_EQ_INT(stranger(port0, 1, 3, 2), 1);    /* meant for another rank */
    baton_transport *t = NULL;
    ASSERT_OK(baton__tcp_transport_create(1, 2, fd1, addrs, secret, baton__deadline_after(20), &t));
    int x = 5;
    ASSERT_OK(t->ops->sendrecv(t, 0, &x, sizeof x, -1, NULL, 0, baton__deadline_after(5), NULL));
    pthread_join(th, NULL);
    if (a.rc < 0) th_fail(__FILE__, __LINE__, "rank 0: %s", a.err);
    ASSERT_EQ_INT(a.got, 5);
    t->ops->close(t);
    close(fd0);
    close(fd1);
}

/* An impostor that knows the secret takes rank 1's place first; the genuine rank 1 then claims the same
 * rank and is refused as a duplicate (and says so), and rank 0 lists the refusal when it gives up. */
typedef struct { int fd, rank, world; const char *const *addrs; const uint8_t *secret; double timeout; int rc; char err[512]; } solo2;
static void *solo_create(void *p) {
    solo2 *a = p;
    baton_transport *t = NULL;
    a->rc = baton__tcp_transport_create(a->rank, a->world, a->fd, a->addrs, a->secret,
                                        baton__deadline_after(a->timeout), &t);
    snprintf(a->err, sizeof a->err, "%s", baton_last_error());
    if (t) t->ops->close(t);
    return NULL;
}

static int impostor(int port, uint32_t from, uint32_t world, const uint8_t *secret) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint8_t hello[40] = {'B', 'T', 'N', '1'};
    baton__put_le32(hello + 4, 1);
    baton__put_le32(hello + 8, from);
    baton__put_le32(hello + 12, 0);
    baton__put_le32(hello + 16, world);
    randombytes_buf(hello + 24, 16);
    uint8_t ch[56], resp[32], verdict[4];
    ASSERT_OK(baton__write_full(fd, hello, sizeof hello));
    ASSERT_OK(baton__read_full(fd, ch, sizeof ch));
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, secret, 32);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)"con", 3);
    crypto_auth_hmacsha256_update(&st, hello, sizeof hello);
    crypto_auth_hmacsha256_update(&st, ch + 8, 16);
    crypto_auth_hmacsha256_final(&st, resp);
    ASSERT_OK(baton__write_full(fd, resp, sizeof resp));
    ASSERT_OK(baton__read_full(fd, verdict, sizeof verdict));
    ASSERT_EQ_INT(verdict[0] | verdict[1] | verdict[2] | verdict[3], 0);   /* accepted as rank 1 */
    return fd;
}

TEST(duplicate_rank_claim_is_refused) {
    int fd[3], port[3];
    char a[3][64];
    const char *addrs[3];
    for (int r = 0; r < 3; r++) {
        ASSERT_OK(baton__tcp_listen("127.0.0.1", &port[r], &fd[r]));
        snprintf(a[r], sizeof a[r], "127.0.0.1:%d", port[r]);
        addrs[r] = a[r];
    }
    uint8_t secret[32] = {9, 9};
    solo2 r0 = {fd[0], 0, 3, addrs, secret, 3.0, 0, ""}, r1 = {fd[1], 1, 3, addrs, secret, 3.0, 0, ""};
    pthread_t t0, t1;
    ASSERT_EQ_INT(pthread_create(&t0, NULL, solo_create, &r0), 0);
    int imp = impostor(port[0], 1, 3, secret);
    ASSERT_EQ_INT(pthread_create(&t1, NULL, solo_create, &r1), 0);
    pthread_join(t1, NULL);
    pthread_join(t0, NULL);
    ASSERT_EQ_INT(r1.rc, BATON_EPROTO);
    ASSERT_CONTAINS(r1.err, "rank 0 refused our connection: duplicate source rank");
    ASSERT_EQ_INT(r0.rc, BATON_EPROTO);   /* rank 2 never came; the refusal is listed */
    ASSERT_CONTAINS(r0.err, "rank(s) 2 never connected");
    ASSERT_CONTAINS(r0.err, "claimed rank 1 of world 3 to rank 0: duplicate source rank");
    close(imp);
    for (int r = 0; r < 3; r++) close(fd[r]);
}

/* ---- congestion control of the data sockets (BATON_TCP_CC, see tcp.h and docs/algorithms.md) ------ */

typedef struct { char cc[MAXN][16]; } cc_seen;
static void record_cc(mesh *m, int rank, baton_transport *t) {
    cc_seen *s = m->arg;
    ASSERT_OK(baton__tcp_congestion(t, rank ^ 1, s->cc[rank], sizeof s->cc[rank]));   /* two ranks: the other one */
}

/* What a fresh TCP socket gets from the kernel (net.ipv4.tcp_congestion_control). */
static void kernel_default_cc(char *out, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_TRUE(fd >= 0);
    memset(out, 0, cap);
    socklen_t len = (socklen_t)(cap - 1);
    ASSERT_EQ_INT(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out, &len), 0);
    close(fd);
}

static void run_cc_mesh(const char *env, cc_seen *s) {
    if (env) setenv("BATON_TCP_CC", env, 1);
    else unsetenv("BATON_TCP_CC");
    memset(s, 0, sizeof *s);
    mesh m;
    mesh_init(&m, 2, record_cc, s);
    run_mesh(&m);
}

/* By default the data sockets never run BBR (whose pacing made a 1 MiB ring all-reduce 2-2.5x slower on
 * loopback, depending on what the socket carried before); any other congestion control of the host stays.
 * Both ends are checked: rank 1's socket was dialled, rank 0's accepted. */
TEST(data_sockets_do_not_run_bbr_by_default) {
    char kdef[16];
    kernel_default_cc(kdef, sizeof kdef);
    cc_seen s;
    run_cc_mesh(NULL, &s);
    for (int r = 0; r < 2; r++) {
        if (!strncmp(kdef, "bbr", 3)) {
            if (strcmp(s.cc[r], "cubic") && strcmp(s.cc[r], "reno"))
                th_fail(__FILE__, __LINE__, "rank %d's socket runs '%s' (kernel default %s): want cubic or reno", r,
                        s.cc[r], kdef);
        } else {
            ASSERT_STR_EQ(s.cc[r], kdef);
        }
    }
    run_cc_mesh("auto", &s);
    for (int r = 0; r < 2; r++) ASSERT_TRUE(strncmp(s.cc[r], "bbr", 3) != 0);
}

TEST(tcp_cc_names_or_keeps_the_congestion_control) {
    cc_seen s;
    run_cc_mesh("reno", &s);   /* reno is always available and allowed */
    ASSERT_STR_EQ(s.cc[0], "reno");
    ASSERT_STR_EQ(s.cc[1], "reno");
    char kdef[16];
    kernel_default_cc(kdef, sizeof kdef);
    run_cc_mesh("system", &s);
    ASSERT_STR_EQ(s.cc[0], kdef);
    ASSERT_STR_EQ(s.cc[1], kdef);
}

TEST(tcp_cc_bad_names_fail_the_transport) {
    static const char *const bad[] = {"no such", "UPPER", "averyveryverylongname", "nosuchcontrol"};
    uint8_t secret[32] = {1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("BATON_TCP_CC", bad[i], 1);
        baton_transport *t = NULL;
        ASSERT_EQ_INT(baton__tcp_transport_create(0, 1, -1, NULL, secret, baton__deadline_after(5), &t), BATON_EINVAL);
        ASSERT_TRUE(t == NULL);
        ASSERT_CONTAINS(baton_last_error(), "BATON_TCP_CC");
        ASSERT_CONTAINS(baton_last_error(), bad[i]);
    }
    unsetenv("BATON_TCP_CC");
}
