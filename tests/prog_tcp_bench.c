/* prog_tcp_bench.c: micro-benchmark of the TCP transport and the p2p algorithms without the communicator
 * core: forks N ranks over loopback, builds the TCP mesh, and times collectives back to back.
 *
 *   build/tests/prog_tcp_bench -n 2 -b 4 -e 64M -f 4 --algo ring|rd|raw|bcast|barrier -d f32|bf16|...
 *                              [-s SEGMENT] [-i ITERS] [-w WARMUP] [--framed 0|1]
 *
 * Rank 0 prints one row per size: bytes, algorithm, median time (us) over 5 repetitions of the mean of
 * ITERS back-to-back calls, algbw and busbw (GB/s; all-reduce busbw = algbw * 2(n-1)/n; raw = one
 * direction of a simultaneous exchange with the neighbour). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/algo.h"
#include "comm/algo_util.h"
#include "comm/reduce.h"
#include "comm/desc.h"
#include "transport/tcp.h"
#include "util/util.h"

enum { MAXN = 64, REPS = 5 };

typedef struct {
    int n, iters, warmup;
    uint64_t minb, maxb, seg;
    double factor;
    const char *algo;
    baton_dtype dt;
    baton_op op;
    int framed;     /* frame headers on every message, as under the communicator */
} opts;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_one(const opts *o, baton_group *g, void *buf, void *buf2, size_t bytes) {
    size_t count = bytes / baton__esize(o->dt);
    if (!strcmp(o->algo, "ring")) return baton__allreduce_ring(g, buf, buf, count, o->dt, o->op);
    if (!strcmp(o->algo, "rd")) return baton__allreduce_rd(g, buf, buf, count, o->dt, o->op);
    if (!strcmp(o->algo, "bcast")) return baton__broadcast_p2p(g, buf, count, o->dt, 0);
    if (!strcmp(o->algo, "barrier")) return baton__barrier_p2p(g);
    /* raw: exchange with the ring neighbours */
    return baton__gsendrecv(g, baton__mod(g->me + 1, g->n), buf, bytes, baton__mod(g->me - 1, g->n), buf2, bytes, "raw");
}

static int rank_main(const opts *o, int rank, int lfd, const char *const *addrs, const uint8_t *secret) {
    baton_transport *t;
    if (baton__tcp_transport_create(rank, o->n, lfd, addrs, secret, baton__deadline_after(60), &t) < 0) {
        fprintf(stderr, "rank %d: %s\n", rank, baton_last_error());
        return 1;
    }
    close(lfd);
    static baton_coll_desc desc;   /* the same on every rank: only the header cost is measured */
    static baton_msg_hdr hdr;
    baton__desc_msg_hdr(&hdr, &desc);
    if (o->framed) t->hdr = &hdr;
    void *buf = malloc(o->maxb + 64), *buf2 = malloc(o->maxb + 64);
    if (!buf || !buf2) return 1;
    memset(buf, 0, o->maxb + 64);   /* fault the pages in before timing */
    memset(buf2, 0, o->maxb + 64);
    baton_scratch scratch = {0};   /* kept between calls, as a communicator keeps it */
    baton_group g = {t, o->n, rank, NULL, UINT64_MAX, o->seg, &scratch};
    if (rank == 0) printf("# %d ranks, reduce kernels: %s\n", o->n, baton__reduce_isa());
    if (rank == 0) printf("%12s %8s %6s %12s %10s %10s\n", "bytes", "algo", "dtype", "time_us", "algbw", "busbw");
    for (uint64_t b = o->minb; b <= o->maxb; b = (uint64_t)((double)b * o->factor) > b ? (uint64_t)((double)b * o->factor) : b + 1) {
        size_t bytes = b / baton__esize(o->dt) * baton__esize(o->dt);
        int iters = o->iters;
        if (bytes >= (1u << 20)) iters = iters / 10 > 3 ? iters / 10 : 3;
        for (int i = 0; i < o->warmup; i++)
            if (run_one(o, &g, buf, buf2, bytes) < 0) goto fail;
        double rep[REPS];
        for (int r = 0; r < REPS; r++) {
            if (baton__barrier_p2p(&g) < 0) goto fail;
            uint64_t t0 = baton__now_ns();
            for (int i = 0; i < iters; i++)
                if (run_one(o, &g, buf, buf2, bytes) < 0) goto fail;
            rep[r] = (double)(baton__now_ns() - t0) / 1e3 / iters;
        }
        qsort(rep, REPS, sizeof *rep, cmp_d);
        double us = rep[REPS / 2], algbw = (double)bytes / us / 1e3;
        double bus = !strcmp(o->algo, "ring") || !strcmp(o->algo, "rd") ? algbw * 2.0 * (o->n - 1) / o->n : algbw;
        if (rank == 0)
            printf("%12zu %8s %6s %12.2f %10.3f %10.3f\n", bytes, o->algo,
                   (const char *[]){"f32", "f64", "f16", "bf16", "i32", "i64"}[o->dt], us, algbw, bus);
        fflush(stdout);
    }
    t->ops->close(t);
    baton__scratch_free(&scratch);
    free(buf);
    free(buf2);
    return 0;
fail:
    fprintf(stderr, "rank %d: %s\n", rank, baton_last_error());
    return 1;
}

int main(int argc, char **argv) {
    opts o = {2, 100, 5, 4, 64u << 20, 0, 4, "ring", BATON_F32, BATON_SUM, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        if (!v) { fprintf(stderr, "%s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "-n")) { if (baton__parse_long(v, 1, MAXN, &l) < 0) goto bad; o.n = (int)l; }
        else if (!strcmp(a, "-i")) { if (baton__parse_long(v, 1, 1000000, &l) < 0) goto bad; o.iters = (int)l; }
        else if (!strcmp(a, "-w")) { if (baton__parse_long(v, 0, 1000000, &l) < 0) goto bad; o.warmup = (int)l; }
        else if (!strcmp(a, "-b")) { if (baton__parse_size(v, 1ull << 34, &o.minb) < 0) goto bad; }
        else if (!strcmp(a, "-e")) { if (baton__parse_size(v, 1ull << 34, &o.maxb) < 0) goto bad; }
        else if (!strcmp(a, "-s")) { if (baton__parse_size(v, 1ull << 30, &o.seg) < 0) goto bad; }
        else if (!strcmp(a, "-f")) { if (baton__parse_double(v, 1.01, 1024, &o.factor) < 0) goto bad; }
        else if (!strcmp(a, "--algo")) o.algo = v;
        else if (!strcmp(a, "--framed")) { if (baton__parse_long(v, 0, 1, &l) < 0) goto bad; o.framed = (int)l; }
        else if (!strcmp(a, "-d")) {
            const char *names[] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
            int k = 0;
            while (k < 6 && strcmp(names[k], v)) k++;
            if (k == 6) goto bad;
            o.dt = (baton_dtype)k;
        } else goto bad;
        continue;
    bad:
        fprintf(stderr, "bad option %s %s\n", a, v);
        return 2;
    }
    if (o.minb > o.maxb) o.maxb = o.minb;
    int lfd[MAXN];
    char addr[MAXN][64];
    const char *addrs[MAXN];
    uint8_t secret[32] = {1, 2, 3};
    for (int r = 0; r < o.n; r++) {
        int port;
        if (baton__tcp_listen("127.0.0.1", &port, &lfd[r]) < 0) { fprintf(stderr, "%s\n", baton_last_error()); return 1; }
        snprintf(addr[r], sizeof addr[r], "127.0.0.1:%d", port);
        addrs[r] = addr[r];
    }
    fflush(stdout);
    pid_t pids[MAXN];
    for (int r = 0; r < o.n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            for (int k = 0; k < o.n; k++)
                if (k != r) close(lfd[k]);
            _exit(rank_main(&o, r, lfd[r], addrs, secret));
        }
    }
    int bad = 0;
    for (int r = 0; r < o.n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
    }
    return bad;
}
