/* prog_coll.c: a worker for the collective matrix, started under `baton run` by test_coll.c.
 *
 *   prog_coll [--algos auto,ring,rd] [--counts 0,1,13,...] [--dtypes f32,...] [--ops sum,...] [--big]
 *             [--colls allreduce,reducescatter,allgather,broadcast,barrier] [--shmbuf] [--attach] [--expect-algo A]
 *             [--roots K] [--allgather-shmem] [--stale-hier-scratch] [--node-buffer]
 *
 * For every combination it runs the collective in place and out of place and checks every element of its
 * own result against a reference computed by brute force over all ranks' inputs (in double, rounded once
 * into the dtype). --expect-algo A: every all-reduce of at least one element must have used algorithm A
 * (baton_comm_last_algo), e.g. that auto picks hier across nodes. Prints "prog_coll: rank R: N checks passed" or the first mismatches, exits 1 on any.
 * --allgather-shmem first runs three in-place all-gathers of 4 MiB per rank and prints how much shared memory
 * they added to the process's resident set ("shmem +N KiB cma C", RssShmem of /proc/self/status).
 * --stale-hier-scratch: before every all-reduce the communicator's hierarchical scratch (slices and messages,
 * kept between calls) is filled with 0xff (NaN), so a result that depends on what a previous call left there
 * fails; at the end one more all-reduce of the largest count must reuse that scratch, not allocate another.
 * --node-buffer: baton_buffer_alloc_node gives the ranks of each node one buffer (what one writes the others
 * read) exactly when every node has shared memory and two ranks or more, else NULL without an error; ranks
 * asking for different sizes all get NULL and the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "baton/comm.h"
#include "comm/comm_internal.h"
#include "comm/reduce.h"
#include "util/util.h"

static int rank_, world_;

/* Integer-valued inputs, negative ones included; PROD uses {1, 2, -1} so products stay exact. */
static double val(baton_op op, int r, size_t i, int salt) {
    if (op == BATON_PROD) {
        static const double v[3] = {1, 2, -1};
        return v[(i + (size_t)r * 2 + (size_t)salt) % 3];
    }
    return (double)((long)((i * 31 + (size_t)r * 17 + (size_t)salt * 5) % 11) - 3);
}

static int is_int(baton_dtype dt) { return dt == BATON_I32 || dt == BATON_I64; }

static double reference(baton_dtype dt, baton_op op, int n, size_t i, int salt) {
    double acc = val(op, 0, i, salt);
    for (int r = 1; r < n; r++) {
        double x = val(op, r, i, salt);
        switch (op) {
        case BATON_SUM: case BATON_AVG: acc += x; break;
        case BATON_MIN: acc = x < acc ? x : acc; break;
        case BATON_MAX: acc = x > acc ? x : acc; break;
        case BATON_PROD: acc *= x; break;
        default: break;
        }
    }
    if (op == BATON_AVG) acc = is_int(dt) ? (double)((long long)acc / n) : acc / n;
    return acc;
}

static long failures, checks;
static int expect_algo = -1; /* --expect-algo: the algorithm every non-empty all-reduce must use */
static int stale_hier;        /* --stale-hier-scratch */

static void spoil_hier_scratch(baton_comm *c) {
    if (stale_hier && c->hier_scratch.p) memset(c->hier_scratch.p, 0xff, c->hier_scratch.cap);
}

static void expect(const char *what, baton_dtype dt, const void *got, size_t i, double want) {
    uint8_t ref[8];
    baton__dtype_put(dt, ref, 0, want);
    size_t e = baton_dtype_size(dt);
    checks++;
    if (memcmp((const uint8_t *)got + i * e, ref, e) == 0) return;
    if (failures++ < 8)
        fprintf(stderr, "prog_coll: rank %d: %s: element %zu is %.9g, expected %.9g\n", rank_, what, i, baton__dtype_get(dt, got, i), want);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "prog_coll: out of memory\n"); exit(2); }
    return p;
}

static int fail_rc(const char *what, int rc) {
    fprintf(stderr, "prog_coll: rank %d: %s failed: %s: %s\n", rank_, what, baton_strerror(rc), baton_last_error());
    exit(1);
}

static void test_allreduce(baton_comm *c, size_t count, baton_dtype dt, baton_op op, int inplace, int salt, int shmbuf) {
    size_t e = baton_dtype_size(dt);
    char what[160];
    snprintf(what, sizeof what, "allreduce %zu x %s %s %s algo=%s%s", count, baton_dtype_name(dt), baton_op_name(op),
             inplace ? "in-place" : "out-of-place", baton_algo_name(baton_comm_last_algo(c)), shmbuf ? " shmbuf" : "");
    uint8_t *send = shmbuf ? baton_buffer_alloc(c, count * e + 64) : xmalloc(count * e);
    uint8_t *recv = inplace ? send : xmalloc(count * e);
    if (!send) fail_rc("baton_buffer_alloc", BATON_ENOMEM);
    for (size_t i = 0; i < count; i++) baton__dtype_put(dt, send, i, val(op, rank_, i, salt));
    if (!inplace) memset(recv, 0x5a, count * e);
    int rc = baton_allreduce(c, send, recv, count, dt, op);
    if (rc < 0) fail_rc(what, rc);
    snprintf(what, sizeof what, "allreduce %zu x %s %s %s algo=%s%s", count, baton_dtype_name(dt), baton_op_name(op),
             inplace ? "in-place" : "out-of-place", baton_algo_name(baton_comm_last_algo(c)), shmbuf ? " shmbuf" : "");
    for (size_t i = 0; i < count; i++) expect(what, dt, recv, i, reference(dt, op, world_, i, salt));
    checks++;
    if (expect_algo >= 0 && count > 0 && baton_comm_last_algo(c) != (baton_algo)expect_algo && failures++ < 8)
        fprintf(stderr, "prog_coll: rank %d: %s: expected algorithm %s\n", rank_, what,
                baton_algo_name((baton_algo)expect_algo));
    if (!inplace) /* the send buffer must be untouched */
        for (size_t i = 0; i < count; i++) expect("allreduce send buffer", dt, send, i, val(op, rank_, i, salt));
    if (shmbuf) baton_buffer_free(c, send); else free(send);
    if (!inplace) free(recv);
}

static void test_reduce_scatter(baton_comm *c, size_t count, baton_dtype dt, baton_op op, int salt) {
    size_t e = baton_dtype_size(dt), n = (size_t)world_;
    uint8_t *send = xmalloc(count * n * e), *recv = xmalloc(count * e);
    for (size_t i = 0; i < count * n; i++) baton__dtype_put(dt, send, i, val(op, rank_, i, salt));
    memset(recv, 0x5a, count * e);
    int rc = baton_reduce_scatter(c, send, recv, count, dt, op);
    char what[128];
    snprintf(what, sizeof what, "reduce_scatter %zu x %s %s algo=%s", count, baton_dtype_name(dt), baton_op_name(op),
             baton_algo_name(baton_comm_last_algo(c)));
    if (rc < 0) fail_rc(what, rc);
    for (size_t i = 0; i < count; i++) expect(what, dt, recv, i, reference(dt, op, world_, (size_t)rank_ * count + i, salt));
    free(send);
    free(recv);
}

static void test_allgather(baton_comm *c, size_t count, baton_dtype dt, int salt) {
    size_t e = baton_dtype_size(dt), n = (size_t)world_;
    uint8_t *send = xmalloc(count * e), *recv = xmalloc(count * n * e);
    for (size_t i = 0; i < count; i++) baton__dtype_put(dt, send, i, val(BATON_SUM, rank_, i, salt));
    memset(recv, 0x5a, count * n * e);
    int rc = baton_allgather(c, send, recv, count, dt);
    char what[128];
    snprintf(what, sizeof what, "allgather %zu x %s algo=%s", count, baton_dtype_name(dt), baton_algo_name(baton_comm_last_algo(c)));
    if (rc < 0) fail_rc(what, rc);
    for (int q = 0; q < world_; q++)
        for (size_t i = 0; i < count; i++) expect(what, dt, recv, (size_t)q * count + i, val(BATON_SUM, q, i, salt));
    /* in place: this rank's piece already sits in the output */
    memset(recv, 0x5a, count * n * e);
    for (size_t i = 0; i < count; i++) baton__dtype_put(dt, recv, (size_t)rank_ * count + i, val(BATON_SUM, rank_, i, salt + 1));
    rc = baton_allgather(c, recv + (size_t)rank_ * count * e, recv, count, dt);
    snprintf(what, sizeof what, "allgather in-place %zu x %s algo=%s", count, baton_dtype_name(dt),
             baton_algo_name(baton_comm_last_algo(c)));
    if (rc < 0) fail_rc(what, rc);
    for (int q = 0; q < world_; q++)
        for (size_t i = 0; i < count; i++) expect(what, dt, recv, (size_t)q * count + i, val(BATON_SUM, q, i, salt + 1));
    free(send);
    free(recv);
}

static void test_broadcast(baton_comm *c, size_t count, baton_dtype dt, int root, int salt) {
    size_t e = baton_dtype_size(dt);
    uint8_t *buf = xmalloc(count * e);
    for (size_t i = 0; i < count; i++) baton__dtype_put(dt, buf, i, rank_ == root ? val(BATON_SUM, root, i, salt) : 99);
    int rc = baton_broadcast(c, buf, count, dt, root);
    char what[128];
    snprintf(what, sizeof what, "broadcast %zu x %s root %d algo=%s", count, baton_dtype_name(dt), root,
             baton_algo_name(baton_comm_last_algo(c)));
    if (rc < 0) fail_rc(what, rc);
    for (size_t i = 0; i < count; i++) expect(what, dt, buf, i, val(BATON_SUM, root, i, salt));
    free(buf);
}

/* Splits a comma list into tokens; returns how many. */
static int split(char *s, char **out, int max) {
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

static long rss_shmem_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssShmem: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* ZeRO's parameter all-gather (in place on private memory, every step): what it adds to the resident set. */
static void allgather_shmem(baton_comm *c) {
    size_t count = (4u << 20) / 4, n = (size_t)world_;
    float *buf = xmalloc(count * n * sizeof(float));
    long before = rss_shmem_kib();
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < count; i++) buf[(size_t)rank_ * count + i] = (float)(val(BATON_SUM, rank_, i, round));
        int rc = baton_allgather(c, buf + (size_t)rank_ * count, buf, count, BATON_F32);
        if (rc < 0) fail_rc("allgather-shmem", rc);
        for (int q = 0; q < world_; q++)
            for (size_t i = 0; i < count; i += 997) expect("allgather-shmem", BATON_F32, buf, (size_t)q * count + i, val(BATON_SUM, q, i, round));
    }
    printf("prog_coll: rank %d: allgather shmem +%ld KiB cma %d\n", rank_, rss_shmem_kib() - before, c->cma);
    free(buf);
}

/* --attach: baton_buffer_attach on a memfd (what baton.torch does with DDP's buckets): in-place all-reduces
 * on it are right and take the direct path; a second attach of the same memory, a rank with nothing to attach
 * and ranks with different sizes fail on every rank; after baton_buffer_detach the all-reduce is still right. */
static void attach_checks(baton_comm *c) {
    size_t count = 262147, bytes = count * sizeof(float); /* odd, over a megabyte, not a page multiple */
    int fd = memfd_create("prog_coll", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) fail_rc("memfd", BATON_ESYS);
    float *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (buf == MAP_FAILED) fail_rc("mmap", BATON_ESYS);
    for (size_t i = 0; i < count; i++) buf[i] = (float)val(BATON_SUM, rank_, i, 1);
    int rc = baton_buffer_attach(c, buf, bytes, fd);
    if (rc < 0) fail_rc("baton_buffer_attach", rc);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < count; i++) buf[i] = (float)val(BATON_SUM, rank_, i, round);
        if ((rc = baton_allreduce(c, buf, buf, count, BATON_F32, BATON_SUM)) < 0) fail_rc("allreduce attached", rc);
        for (size_t i = 0; i < count; i++) expect("allreduce attached", BATON_F32, buf, i, reference(BATON_F32, BATON_SUM, world_, i, round));
        if (world_ > 1 && baton_comm_last_algo(c) != BATON_ALGO_DIRECT && failures++ < 8)
            fprintf(stderr, "prog_coll: rank %d: attached all-reduce used %s, not direct\n", rank_,
                    baton_algo_name(baton_comm_last_algo(c)));
        checks++;
    }
    struct { const char *what; size_t bytes; int fd, want; } bad[] = {
        {"attaching the same memory twice", bytes, fd, BATON_EUNSUPPORTED},
        {"rank 0 with nothing to attach", bytes, rank_ == 0 ? -1 : fd, BATON_EUNSUPPORTED},
        {"ranks with different sizes", rank_ == 0 ? bytes - 4096 : bytes, fd, BATON_EINVAL},
    };
    baton_buffer_detach(c, buf);
    for (int k = 0; k < 3; k++) {
        if (k == 0 && (rc = baton_buffer_attach(c, buf, bytes, fd)) < 0) fail_rc("baton_buffer_attach again", rc);
        rc = baton_buffer_attach(c, buf, bad[k].bytes, bad[k].fd);
        if (world_ > 1 && rc != bad[k].want && failures++ < 8)
            fprintf(stderr, "prog_coll: rank %d: %s: status %s, expected %s\n", rank_, bad[k].what, baton_strerror(rc),
                    baton_strerror(bad[k].want));
        if (k == 0) baton_buffer_detach(c, buf);
        checks++;
    }
    for (size_t i = 0; i < count; i++) buf[i] = (float)val(BATON_SUM, rank_, i, 5);
    if ((rc = baton_allreduce(c, buf, buf, count, BATON_F32, BATON_SUM)) < 0) fail_rc("allreduce detached", rc);
    for (size_t i = 0; i < count; i++) expect("allreduce detached", BATON_F32, buf, i, reference(BATON_F32, BATON_SUM, world_, i, 5));
    checks++;
    munmap(buf, bytes);
    close(fd);
}

static void node_buffer_checks(baton_comm *c) {
    int L = baton_comm_local_size(c), me = baton_comm_local_rank(c);
    int64_t can[2] = {L, c->shm != NULL};
    int rc = baton_allreduce(c, can, can, 2, BATON_I64, BATON_MIN);
    if (rc < 0) fail_rc("allreduce", rc);
    int want = can[0] >= 2 && can[1];
    baton__clear_error();
    int32_t *buf = baton_buffer_alloc_node(c, 4099 * sizeof(int32_t));
    checks++;
    if ((buf != NULL) != want || (!buf && *baton_last_error())) {
        fprintf(stderr, "prog_coll: rank %d: node buffer %s where %s (%s)\n", rank_, buf ? "given" : "refused",
                want ? "every node can share" : "some node cannot", baton_last_error());
        failures++;
    }
    if (buf) {
        buf[me] = rank_ + 1;
        buf[4098 - me] = -(rank_ + 1);
        if ((rc = baton_barrier(c)) < 0) fail_rc("barrier", rc);
        for (int q = 0; q < L; q++) {
            expect("node buffer", BATON_I32, buf, (size_t)q, c->local_ranks[q] + 1);
            expect("node buffer", BATON_I32, buf, (size_t)(4098 - q), -(c->local_ranks[q] + 1));
        }
        if ((rc = baton_barrier(c)) < 0) fail_rc("barrier", rc);
        baton_buffer_free(c, buf);
    }
    void *bad = baton_buffer_alloc_node(c, rank_ == 0 ? 8192 : 4096);
    checks++;
    if (bad || !strstr(baton_last_error(), "different sizes")) {
        fprintf(stderr, "prog_coll: rank %d: node buffers of different sizes: %s\n", rank_, bad ? "given" : baton_last_error());
        failures++;
    }
}

int main(int argc, char **argv) {
    char algos_s[256] = "auto", counts_s[256] = "0,1,13,1000", dtypes_s[256] = "f32,f64,f16,bf16,i32,i64",
         ops_s[256] = "sum,avg,min,max,prod", colls_s[256] = "allreduce,reducescatter,allgather,broadcast,barrier";
    int big = 0, shmbuf = 0, ag_shmem = 0, attach = 0, node_buf = 0;
    long max_roots = 0; /* broadcast from every rank, or from this many spread over the world (--roots K) */
    for (int i = 1; i < argc; i++) {
        char *dst = NULL;
        if (!strcmp(argv[i], "--algos")) dst = algos_s;
        else if (!strcmp(argv[i], "--counts")) dst = counts_s;
        else if (!strcmp(argv[i], "--dtypes")) dst = dtypes_s;
        else if (!strcmp(argv[i], "--ops")) dst = ops_s;
        else if (!strcmp(argv[i], "--colls")) dst = colls_s;
        else if (!strcmp(argv[i], "--big")) { big = 1; continue; }
        else if (!strcmp(argv[i], "--shmbuf")) { shmbuf = 1; continue; }
        else if (!strcmp(argv[i], "--allgather-shmem")) { ag_shmem = 1; continue; }
        else if (!strcmp(argv[i], "--attach")) { attach = 1; continue; }
        else if (!strcmp(argv[i], "--node-buffer")) { node_buf = 1; continue; }
        else if (!strcmp(argv[i], "--stale-hier-scratch")) { stale_hier = 1; continue; }
        else if (!strcmp(argv[i], "--roots") && i + 1 < argc) {
            char *end;
            max_roots = strtol(argv[++i], &end, 10);
            if (*end || max_roots < 1) { fprintf(stderr, "prog_coll: --roots wants a positive integer\n"); return 2; }
            continue;
        }
        else if (!strcmp(argv[i], "--expect-algo")) {
            baton_algo a;
            if (++i >= argc || baton_algo_parse(argv[i], &a) < 0) {
                fprintf(stderr, "prog_coll: --expect-algo needs an algorithm (auto ring rd direct hier)\n");
                return 2;
            }
            expect_algo = (int)a;
            continue;
        }
        else { fprintf(stderr, "prog_coll: unknown argument %s\n", argv[i]); return 2; }
        if (++i >= argc) { fprintf(stderr, "prog_coll: %s needs a value\n", argv[i - 1]); return 2; }
        snprintf(dst, 256, "%s", argv[i]);
    }
    baton_comm *c;
    int rc = baton_init(&c, NULL);
    if (rc < 0) {
        fprintf(stderr, "prog_coll: baton_init: %s\n", baton_last_error());
        return 1;
    }
    rank_ = baton_comm_rank(c);
    world_ = baton_comm_size(c);
    if (ag_shmem) allgather_shmem(c);
    if (attach) attach_checks(c);
    if (node_buf) node_buffer_checks(c);
    char *algos[8], *counts[16], *dtypes[8], *ops[8], *colls[8];
    int nalgo = split(algos_s, algos, 8), ncount = split(counts_s, counts, 16), ndt = split(dtypes_s, dtypes, 8),
        nop = split(ops_s, ops, 8), ncoll = split(colls_s, colls, 8);
    int salt = 0;
    size_t max_count = 0;
    for (int a = 0; a < nalgo; a++) {
        baton_algo algo;
        if (baton_algo_parse(algos[a], &algo) < 0) { fprintf(stderr, "prog_coll: %s\n", baton_last_error()); return 2; }
        baton_comm_set_algo(c, algo);
        for (int k = 0; k < ncoll; k++) {
            for (int ci = 0; ci < ncount; ci++) {
                /* "W" in a count means the world size: "3W+1" is 3 x world + 1. */
                size_t count = 0;
                char *w = strchr(counts[ci], 'W');
                if (w) {
                    count = (size_t)strtoull(counts[ci], NULL, 10) * (size_t)world_ + (w[1] == '+' ? (size_t)strtoull(w + 2, NULL, 10) : 0);
                } else {
                    count = (size_t)strtoull(counts[ci], NULL, 10);
                }
                for (int d = 0; d < ndt; d++) {
                    baton_dtype dt;
                    if (baton_dtype_parse(dtypes[d], &dt) < 0) { fprintf(stderr, "prog_coll: %s\n", baton_last_error()); return 2; }
                    salt++;
                    if (!strcmp(colls[k], "allgather")) { test_allgather(c, count, dt, salt); continue; }
                    if (!strcmp(colls[k], "broadcast")) {
                        int nroots = max_roots && max_roots < world_ ? (int)max_roots : world_;
                        for (int k2 = 0; k2 < nroots; k2++) /* with --roots K: 0, ..., world - 1 spread */
                            test_broadcast(c, count, dt, nroots > 1 ? (int)((long)k2 * (world_ - 1) / (nroots - 1)) : 0,
                                           salt);
                        continue;
                    }
                    if (!strcmp(colls[k], "barrier")) {
                        if ((rc = baton_barrier(c)) < 0) fail_rc("barrier", rc);
                        continue;
                    }
                    for (int o = 0; o < nop; o++) {
                        baton_op op;
                        if (baton_op_parse(ops[o], &op) < 0) { fprintf(stderr, "prog_coll: %s\n", baton_last_error()); return 2; }
                        if (!strcmp(colls[k], "allreduce")) {
                            if (count > max_count) max_count = count;
                            spoil_hier_scratch(c);
                            test_allreduce(c, count, dt, op, 0, salt, 0);
                            spoil_hier_scratch(c);
                            test_allreduce(c, count, dt, op, 1, salt, 0);
                            if (shmbuf) test_allreduce(c, count, dt, op, 1, salt, 1);
                        } else if (!strcmp(colls[k], "reducescatter")) {
                            test_reduce_scatter(c, count, dt, op, salt);
                        } else {
                            fprintf(stderr, "prog_coll: unknown collective %s\n", colls[k]);
                            return 2;
                        }
                    }
                }
            }
        }
    }
    if (big) { /* 64 MiB of f32, sum, out of place and in place */
        size_t count = (64u << 20) / 4;
        test_allreduce(c, count, BATON_F32, BATON_SUM, 0, 7, 0);
        test_allreduce(c, count, BATON_F32, BATON_SUM, 1, 8, 0);
        if (shmbuf) test_allreduce(c, count, BATON_F32, BATON_SUM, 1, 9, 1);
    }
    if (stale_hier) { /* the slices and messages are the communicator's: the largest size again reuses them */
        void *p = c->hier_scratch.p;
        size_t cap = c->hier_scratch.cap;
        spoil_hier_scratch(c);
        test_allreduce(c, max_count, BATON_F32, BATON_SUM, 0, 11, 0);
        checks++;
        if ((!p || c->hier_scratch.p != p || c->hier_scratch.cap != cap) && failures++ < 8)
            fprintf(stderr, "prog_coll: rank %d: hierarchical scratch %p (%zu B) not kept: %p (%zu B) after another call\n",
                    rank_, p, cap, c->hier_scratch.p, c->hier_scratch.cap);
    }
    baton_comm_free(c);
    if (failures) {
        fprintf(stderr, "prog_coll: rank %d: %ld of %ld checks failed\n", rank_, failures, checks);
        return 1;
    }
    printf("prog_coll: rank %d: %ld checks passed\n", rank_, checks);
    return 0;
}
