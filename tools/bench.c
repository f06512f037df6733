/* bench.c: `baton bench COLLECTIVE [options]`, an nccl-tests-style benchmark run under `baton run`.
 *
 * Rank 0 prints one row per size: size count type op algo time_us algbw_GBps busbw_GBps wrong
 * (sizes and bus bandwidth as nccl-tests defines them: allreduce busbw = algbw x 2(n-1)/n, allgather and
 * reduce-scatter x (n-1)/n, broadcast x 1; size is the largest buffer: allgather's output, reduce-scatter's
 * input). time_us is the slowest rank's mean over the timed iterations. Each size runs max(-n, as many as
 * fill 20 ms) iterations after -w warm-up ones, all ranks agreeing on the count (see bench_size).
 * The timed loop runs the collective and nothing else, with or without -c: filling and checking stay
 * outside it. -c 1 fills fresh integer-valued data before every warm-up iteration and before one more
 * iteration after the timed ones, and checks every element of those results on every rank against a
 * closed-form reference (16-bit types: the exact value rounded once); `wrong` counts the mismatches over all
 * ranks and checked iterations, and is N/A without -c 1. The output ends, as nccl-tests' does, with
 * "# Avg bus bandwidth    : X" (the mean of the rows' busbw; not with --csv, whose every line is a row). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "baton/comm.h"
#include "comm/reduce.h"
#include "commands.h"
#include "util/util.h"

enum { BENCH_MAX_ALGOS = 4, BENCH_MAX_ROUNDS = 99, BENCH_MAX_SWEPT = 256 };

typedef enum { B_ALLREDUCE, B_BROADCAST, B_ALLGATHER, B_REDUCESCATTER, B_BARRIER } bench_coll;
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather", "reducescatter", "barrier"};

typedef struct {
    bench_coll coll;
    uint64_t minbytes, maxbytes;
    double factor;
    long iters, warmup;
    int check, csv, inplace, root;
    int bufmode;        /* 0 malloc, 1 shm (baton_buffer_alloc), 2 both */
    double min_time_s;  /* each size runs at least this long */
    baton_dtype dt;
    baton_op op;
    baton_algo algo;                    /* the first of algos */
    baton_algo algos[BENCH_MAX_ALGOS];  /* --algo A[,B...]: each size runs each of them, in turn */
    int nalgos;
    long rounds;                        /* --rounds R: interleaved rounds per size, the median reported */
    long sweeps;                        /* --sweeps S: the size range S times over, R rounds a size each time */
    int runs;                           /* --runs: every timed run on stderr (rank 0), for finding order effects */
    baton_transport_kind transport;
} bench_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: baton run -n N -- baton bench COLLECTIVE [options]\n"
            "  COLLECTIVE: allreduce | broadcast | allgather | reducescatter | barrier\n"
            "  -b MINBYTES     smallest size (default 8; suffixes K M G)\n"
            "  -e MAXBYTES     largest size (default 64M)\n"
            "  -f FACTOR       size multiplier between rows (default 2)\n"
            "  -n ITERS        timed iterations per size, at least (default 20; more until 20 ms are filled)\n"
            "  -w WARMUP       warm-up iterations per size and round (default 5)\n"
            "  -c 0|1          check every element of the warm-up results and of one more iteration after\n"
            "                  the timed ones, outside the timing (default 0: wrong is N/A)\n"
            "  -d DTYPE        f32 f64 f16 bf16 i32 i64 (default f32)\n"
            "  -o OP           sum avg min max prod (default sum)\n"
            "  -r ROOT         broadcast root (default 0)\n"
            "  --algo A[,B..]  auto ring rd direct hier (default auto); a list (at most 4) runs each size\n"
            "                  with each algorithm in turn, one row each, and --csv adds a column asked\n"
            "  --rounds R      per size, R interleaved rounds of every --algo, each run after its own -w\n"
            "                  warm-up iterations; time_us is the median of the rounds (default 1)\n"
            "  --sweeps S      run the whole size range S times (R rounds of each size each time) and report\n"
            "                  the median of a size's S x R runs, printed after the last sweep: a burst of\n"
            "                  load lands on one sweep of a few sizes, not on every round of one (default 1)\n"
            "  --transport T   auto shm tcp mpi (default auto; mpi: under Open MPI's mpirun)\n"
            "  --inplace       all-reduce in place, in one buffer (default: out of place)\n"
            "  --buffers B     malloc | shm | both: where the buffers live (default malloc; shm = baton_buffer_alloc)\n"
            "  --min-time S    seconds each size runs at least (default 0.02)\n"
            "  --csv           comma-separated output with a header\n"
            "  --runs          also print every timed run on stderr (rank 0), one line each: run,bytes,sweep,\n"
            "                  round,position,asked,used,time_us,iters,faults (position 0: first in its round;\n"
            "                  faults: rank 0's minor page faults over the run and its warm-up)\n");
}

/* The flag an option character stands for, for messages. */
static const char *flag_name(int ch) {
    switch (ch) {
    case 'A': return "--algo";
    case 'T': return "--transport";
    case 'B': return "--buffers";
    case 'M': return "--min-time";
    case 'R': return "--rounds";
    case 'S': return "--sweeps";
    default: {
        static char f[3] = "-?";
        f[1] = (char)ch;
        return f;
    }
    }
}

/* --algo A[,B...]: each a known algorithm, at most BENCH_MAX_ALGOS, none twice. */
static int parse_algos(const char *arg, bench_opts *o) {
    char buf[128];
    if (strlen(arg) >= sizeof buf) return baton__fail(BATON_EINVAL, "too long");
    snprintf(buf, sizeof buf, "%s", arg);
    o->nalgos = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        baton_algo a;
        if (baton_algo_parse(tok, &a) < 0) return baton__fail(BATON_EINVAL, "unknown algorithm '%s' (expected auto, ring, rd, direct or hier)", tok);
        for (int i = 0; i < o->nalgos; i++)
            if (o->algos[i] == a) return baton__fail(BATON_EINVAL, "'%s' appears twice", tok);
        if (o->nalgos == BENCH_MAX_ALGOS) return baton__fail(BATON_EINVAL, "at most %d algorithms", BENCH_MAX_ALGOS);
        o->algos[o->nalgos++] = a;
    }
    if (!o->nalgos) return baton__fail(BATON_EINVAL, "expected a list of algorithms");
    o->algo = o->algos[0];
    return BATON_OK;
}

/* The size after `size` in the sweep: times --factor, at least one byte more. */
static uint64_t next_size(const bench_opts *o, uint64_t size) {
    uint64_t next = (uint64_t)((double)size * o->factor);
    return next > size ? next : size + 1;
}

/* Elements per rank-side buffer at `size` bytes, as nccl-tests counts them. */
static size_t count_of(const bench_opts *o, uint64_t size, size_t esz, int n) {
    if (o->coll == B_BARRIER) return 0;
    size_t total = (size_t)(size / esz);
    return o->coll == B_ALLGATHER || o->coll == B_REDUCESCATTER ? total / (size_t)n : total;
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->minbytes = 8;
    o->maxbytes = 64 << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->min_time_s = 0.02;
    o->dt = BATON_F32;
    o->op = BATON_SUM;
    o->nalgos = 1;
    o->rounds = 1;
    o->sweeps = 1;
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            return 1;
        }
        fprintf(stderr, "baton bench: name a collective first (allreduce, broadcast, allgather, reducescatter, barrier)\n");
        return -1;
    }
    int found = 0;
    for (int i = 0; i < 5; i++)
        if (!strcmp(argv[1], coll_names[i])) o->coll = (bench_coll)i, found = 1;
    if (!found) {
        fprintf(stderr, "baton bench: unknown collective '%s' (expected allreduce, broadcast, allgather, reducescatter or barrier)\n", argv[1]);
        return -1;
    }
    static const struct option longs[] = {{"algo", required_argument, 0, 'A'},    {"transport", required_argument, 0, 'T'},
                                          {"csv", no_argument, 0, 'C'},           {"inplace", no_argument, 0, 'I'},
                                          {"buffers", required_argument, 0, 'B'}, {"min-time", required_argument, 0, 'M'},
                                          {"rounds", required_argument, 0, 'R'},  {"sweeps", required_argument, 0, 'S'},
                                          {"runs", no_argument, 0, 'U'},          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    optind = 2;
    opterr = 0;
    int ch;
    long v;
    double d;
    while ((ch = getopt_long(argc, argv, ":b:e:f:n:w:c:d:o:r:h", longs, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case 'b': rc = baton__parse_size(optarg, 1ull << 40, &o->minbytes); break;
        case 'e': rc = baton__parse_size(optarg, 1ull << 40, &o->maxbytes); break;
        case 'f': rc = baton__parse_double(optarg, 1.0001, 1024, &o->factor); break;
        case 'n': rc = baton__parse_long(optarg, 1, 100000000, &o->iters); break;
        case 'w': rc = baton__parse_long(optarg, 0, 100000000, &o->warmup); break;
        case 'c': rc = baton__parse_long(optarg, 0, 1, &v); o->check = (int)v; break;
        case 'r': rc = baton__parse_long(optarg, 0, 1 << 20, &v); o->root = (int)v; break;
        case 'd': rc = baton_dtype_parse(optarg, &o->dt); break;
        case 'o': rc = baton_op_parse(optarg, &o->op); break;
        case 'A': rc = parse_algos(optarg, o); break;
        case 'R': rc = baton__parse_long(optarg, 1, BENCH_MAX_ROUNDS, &o->rounds); break;
        case 'S': rc = baton__parse_long(optarg, 1, BENCH_MAX_ROUNDS, &o->sweeps); break;
        case 'T': rc = baton_transport_parse(optarg, &o->transport); break;
        case 'M': rc = baton__parse_double(optarg, 0, 3600, &d); o->min_time_s = d; break;
        case 'C': o->csv = 1; break;
        case 'I': o->inplace = 1; break;
        case 'U': o->runs = 1; break;
        case 'B':
            if (!strcmp(optarg, "malloc")) o->bufmode = 0;
            else if (!strcmp(optarg, "shm")) o->bufmode = 1;
            else if (!strcmp(optarg, "both")) o->bufmode = 2;
            else rc = baton__fail(BATON_EINVAL, "expected malloc, shm or both");
            break;
        case 'h': usage(stdout); return 1;
        case ':': fprintf(stderr, "baton bench: option %s needs a value (see baton bench --help)\n", flag_name(optopt)); return -1;
        default: fprintf(stderr, "baton bench: unknown option '%s' (see baton bench --help)\n", argv[optind - 1]); return -1;
        }
        if (rc < 0) {
            fprintf(stderr, "baton bench: bad value '%s' for %s: %s (see baton bench --help)\n", optarg, flag_name(ch),
                    baton_last_error());
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "baton bench: unexpected argument '%s' (see baton bench --help)\n", argv[optind]);
        return -1;
    }
    if (o->minbytes > o->maxbytes) {
        fprintf(stderr, "baton bench: -b %llu is larger than -e %llu\n", (unsigned long long)o->minbytes, (unsigned long long)o->maxbytes);
        return -1;
    }
    if (o->sweeps * o->rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr, "baton bench: --sweeps %ld x --rounds %ld is more than %d runs of a size; use fewer\n", o->sweeps,
                o->rounds, BENCH_MAX_ROUNDS);
        return -1;
    }
    if (o->sweeps > 1) {
        long nsizes = 0;
        for (uint64_t size = o->minbytes; size <= o->maxbytes && nsizes <= BENCH_MAX_SWEPT;) {
            nsizes++;
            if (o->coll == B_BARRIER) break;
            size = next_size(o, size);
        }
        if (nsizes > BENCH_MAX_SWEPT) {
            fprintf(stderr, "baton bench: --sweeps keeps every size's times until the last sweep: at most %d sizes (raise -f or narrow -b/-e)\n",
                    BENCH_MAX_SWEPT);
            return -1;
        }
    }
    return 0;
}

/* ---- integer-valued data with closed-form results ----------------------------------------------------- */

static int base_val(size_t i, long it) { return (int)((i * 7 + (size_t)it * 3) % 13); }
/* PROD uses 1s and 2s so products stay exact: rank r holds 2 where (i + r + it) is odd. */
static double val(const bench_opts *o, int r, size_t i, long it) {
    if (o->op == BATON_PROD) return 1 + (int)((i + (size_t)r + (size_t)it) & 1);
    return base_val(i, it) + r;
}

static double expect_reduced(const bench_opts *o, int n, size_t i, long it) {
    double b = base_val(i, it);
    switch (o->op) {
    case BATON_SUM: return n * b + n * (n - 1) / 2.0;
    case BATON_AVG: {
        double s = n * b + n * (n - 1) / 2.0;
        if (o->dt == BATON_I32 || o->dt == BATON_I64) return (double)((long long)s / n);
        return s / n;
    }
    case BATON_MIN: return b;
    case BATON_MAX: return b + n - 1;
    case BATON_PROD: {
        int twos = 0; /* ranks r in [0, n) with (i + r + it) odd */
        for (int r = 0; r < n; r++) twos += (int)((i + (size_t)r + (size_t)it) & 1);
        return ldexp(1.0, twos);
    }
    default: return 0;
    }
}

/* Compares bit patterns: the reference is the exact value rounded once into the dtype. */
static int same(baton_dtype dt, const void *p, size_t i, double v) {
    uint8_t ref[8];
    baton__dtype_put(dt, ref, 0, v);
    size_t e = baton_dtype_size(dt);
    return memcmp((const uint8_t *)p + i * e, ref, e) == 0;
}

/* ---- one size ------------------------------------------------------------------------------------------ */

typedef struct {
    void *send, *recv;
    size_t send_bytes, recv_bytes;
    int shm;
} bufs;

static void fill(const bench_opts *o, int rank, int n, bufs *b, size_t count, long it) {
    switch (o->coll) {
    case B_ALLREDUCE:
    case B_ALLGATHER:
        for (size_t i = 0; i < count; i++) baton__dtype_put(o->dt, b->send, i, val(o, rank, i, it));
        break;
    case B_REDUCESCATTER:
        for (size_t i = 0; i < count * (size_t)n; i++) baton__dtype_put(o->dt, b->send, i, val(o, rank, i, it));
        break;
    case B_BROADCAST:
        if (rank == o->root)
            for (size_t i = 0; i < count; i++) baton__dtype_put(o->dt, b->recv, i, val(o, o->root, i, it));
        else
            memset(b->recv, 0xff, count * baton_dtype_size(o->dt));
        break;
    case B_BARRIER: break;
    }
}

static long check(const bench_opts *o, int rank, int n, const bufs *b, size_t count, long it) {
    long wrong = 0;
    switch (o->coll) {
    case B_ALLREDUCE:
        for (size_t i = 0; i < count; i++) wrong += !same(o->dt, b->recv, i, expect_reduced(o, n, i, it));
        break;
    case B_REDUCESCATTER:
        for (size_t i = 0; i < count; i++)
            wrong += !same(o->dt, b->recv, i, expect_reduced(o, n, (size_t)rank * count + i, it));
        break;
    case B_ALLGATHER:
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < count; i++) wrong += !same(o->dt, (uint8_t *)b->recv, (size_t)q * count + i, val(o, q, i, it));
        break;
    case B_BROADCAST:
        for (size_t i = 0; i < count; i++) wrong += !same(o->dt, b->recv, i, val(o, o->root, i, it));
        break;
    case B_BARRIER: break;
    }
    return wrong;
}

static int run_once(baton_comm *c, const bench_opts *o, bufs *b, size_t count) {
    switch (o->coll) {
    case B_ALLREDUCE: return baton_allreduce(c, b->send, b->recv, count, o->dt, o->op);
    case B_BROADCAST: return baton_broadcast(c, b->recv, count, o->dt, o->root);
    case B_ALLGATHER: return baton_allgather(c, b->send, b->recv, count, o->dt);
    case B_REDUCESCATTER: return baton_reduce_scatter(c, b->send, b->recv, count, o->dt, o->op);
    case B_BARRIER: return baton_barrier(c);
    }
    return BATON_EINVAL;
}

static void *buf_alloc(baton_comm *c, size_t bytes, int shm) {
    if (bytes == 0) bytes = 64;
    if (shm) return baton_buffer_alloc(c, bytes);
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

static void buf_free(baton_comm *c, void *p, int shm) {
    if (shm)
        baton_buffer_free(c, p);
    else
        free(p);
}

/* Fills in time (s, slowest rank), wrong (all ranks) and the algorithm the timed collective used. */
static int bench_size(baton_comm *c, const bench_opts *o, bufs *b, size_t count, long warmup, double *time_s,
                      long *wrong_out, baton_algo *algo, long *iters_out) {
    int rank = baton_comm_rank(c), n = baton_comm_size(c), rc;
    /* test knob (a fake clock for the pacing): BATON_TEST_BENCH_PACE_US=A,B,C makes the k-th timed run of a
     * size count as iterations x the k-th value in microseconds, whatever it took */
    double pace_us[3] = {0, 0, 0};
    const char *pace = getenv("BATON_TEST_BENCH_PACE_US");
    if (pace && sscanf(pace, "%lf,%lf,%lf", &pace_us[0], &pace_us[1], &pace_us[2]) != 3)
        return baton__fail(BATON_EINVAL, "BATON_TEST_BENCH_PACE_US: expected three numbers A,B,C");
    long wrong = 0;
    long it = 0;
    for (long i = 0; i < warmup; i++, it++) {
        if (o->check) fill(o, rank, n, b, count, it);
        if ((rc = run_once(c, o, b, count)) < 0) return rc;
        if (o->check) wrong += check(o, rank, n, b, count, it);
    }
    /* Timed runs of -n iterations; while one is shorter than --min-time, the next one is sized from its
     * pace (the slowest rank's, so every rank agrees on the count). The last run is reported. */
    long iters = o->iters, ran = iters;
    double tmax = 0;
    for (int round = 0; round < 3; round++) {
        if ((rc = baton_barrier(c)) < 0) return rc;
        uint64_t t0 = baton__now_ns();
        for (long i = 0; i < iters; i++)   /* the collective only: no fill, no check */
            if ((rc = run_once(c, o, b, count)) < 0) return rc;
        double t = (double)(baton__now_ns() - t0) / 1e9;
        if (pace) t = (double)iters * pace_us[round] * 1e-6;
        ran = iters;
        *algo = baton_comm_last_algo(c); /* before the agreement below runs a collective of its own */
        if ((rc = baton_allreduce(c, &t, &tmax, 1, BATON_F64, BATON_MAX)) < 0) return rc;
        if (tmax >= o->min_time_s || iters >= 10000000) break;
        double per = tmax / (double)iters;
        long want = per > 0 ? (long)ceil(o->min_time_s * 1.1 / per) : iters * 100;
        iters = want > iters ? (want < 10000000 ? want : 10000000) : iters * 2;
    }
    /* per iteration of the run measured last: when all three came up short of --min-time (a pace that
     * sped up between them), iters has already been raised for a run that never happened; dividing by it
     * reported a fraction of the real time (0.0 us for 32 KiB: docs/measurements/plan-history.md, "`baton bench`
     * reported a fraction of the real time") */
    tmax /= (double)ran;
    if (o->check) {   /* one more checked iteration after the timed ones, outside the timing */
        fill(o, rank, n, b, count, it);
        if ((rc = run_once(c, o, b, count)) < 0) return rc;
        wrong += check(o, rank, n, b, count, it);
    }
    int64_t w = wrong, wsum;
    if ((rc = baton_allreduce(c, &w, &wsum, 1, BATON_I64, BATON_SUM)) < 0) return rc;
    *time_s = tmax;
    *wrong_out = (long)wsum;
    *iters_out = ran;
    return BATON_OK;
}

static double busbw_factor(bench_coll coll, int n) {
    switch (coll) {
    case B_ALLREDUCE: return 2.0 * (n - 1) / n;
    case B_ALLGATHER:
    case B_REDUCESCATTER: return (double)(n - 1) / n;
    case B_BROADCAST: return 1.0;
    default: return 0;
    }
}

int baton_cmd_bench(int argc, char **argv) {
    bench_opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;
    baton_options bo;
    if (baton_options_from_env(&bo) < 0) {
        fprintf(stderr, "baton bench: %s\n", baton_last_error());
        return 2;
    }
    if (o.transport != BATON_TRANSPORT_AUTO) bo.transport = o.transport;
    if (o.algo != BATON_ALGO_AUTO) bo.algo = o.algo;
    baton_comm *c;
    if (baton_init(&c, &bo) < 0) {
        fprintf(stderr, "baton bench: cannot join the job: %s\n", baton_last_error());
        return 1;
    }
    int rank = baton_comm_rank(c), n = baton_comm_size(c), status = 0;
    if (o.root >= n) {
        if (rank == 0) fprintf(stderr, "baton bench: root %d is not a rank (world size %d)\n", o.root, n);
        baton_comm_free(c);
        return 2;
    }
    size_t esz = baton_dtype_size(o.dt);
    if (rank == 0) {
        if (o.csv)
            printf("size,count,type,op,algo,time_us,algbw_GBps,busbw_GBps,wrong%s\n", o.nalgos > 1 ? ",asked" : "");
        else
            printf("# baton bench %s: %d ranks, %d node(s), transport %s, %s, simd %s\n", coll_names[o.coll], n,
                   baton_comm_num_nodes(c), baton_transport_name(baton_comm_transport(c)),
                   o.inplace ? "in place" : "out of place", baton__reduce_isa());
        if (!o.csv)
            printf("%12s %12s %6s %6s %12s %12s %11s %11s %8s%s\n", "size", "count", "type", "op", "algo", "time_us",
                   "algbw_GBps", "busbw_GBps", "wrong", o.nalgos > 1 ? "  asked" : "");
        fflush(stdout);
    }
    int modes[2] = {o.bufmode == 1, 1}, nmodes = o.bufmode == 2 ? 2 : 1;
    double busbw_sum = 0;
    long rows = 0, wrong_total = 0;
    /* every (size, buffer mode)'s runs: with --sweeps S they are kept until the last sweep prints them */
    size_t nslots = o.sweeps > 1 ? 2 * (size_t)BENCH_MAX_SWEPT : 2;
    double (*ts)[BENCH_MAX_ALGOS][BENCH_MAX_ROUNDS] = calloc(nslots, sizeof *ts);
    long (*wrongs)[BENCH_MAX_ALGOS] = calloc(nslots, sizeof *wrongs);
    baton_algo (*used)[BENCH_MAX_ALGOS] = calloc(nslots, sizeof *used);
    if (!ts || !wrongs || !used) {
        fprintf(stderr, "baton bench: rank %d: out of memory for the times of %zu sizes\n", rank, nslots / 2);
        status = 1;
    }
    const long runs = o.sweeps * o.rounds;
    /* The buffers are allocated once, for the largest size, and written in full before anything runs; every
     * size uses their beginning. Until 2026-11-26 each size allocated (and faulted in) buffers of its own, so
     * the first algorithm of every round after a size change ran on fresh pages: from 32 MiB, where a run is
     * one warm-up and one timed iteration, that algorithm measured 1.2-1.5x slower
     * (docs/measurements/plan-history.md, "Same algorithm, two times"), and an algorithm that came first more
     * often than another lost to itself. */
    uint64_t top = o.minbytes;
    while (o.coll != B_BARRIER && next_size(&o, top) <= o.maxbytes) top = next_size(&o, top);
    size_t top_count = count_of(&o, top, esz, n);
    size_t top_sb = top_count * esz, top_rb = top_count * esz;
    if (o.coll == B_ALLGATHER) top_rb *= (size_t)n;
    if (o.coll == B_REDUCESCATTER) top_sb *= (size_t)n;
    /* In place: allreduce and broadcast share one buffer; the others keep two (their shapes differ). */
    const int one = (o.inplace && o.coll == B_ALLREDUCE) || o.coll == B_BROADCAST || o.coll == B_BARRIER;
    bufs ball[2] = {{0}, {0}};
    for (int m = 0; m < nmodes && !status; m++) {
        bufs *bb = &ball[m];
        bb->shm = modes[m];
        size_t rbytes = top_rb > top_sb ? top_rb : top_sb;
        bb->recv = buf_alloc(c, rbytes, bb->shm);
        bb->send = one ? bb->recv : buf_alloc(c, top_sb, bb->shm);
        if (!bb->recv || !bb->send) {
            fprintf(stderr, "baton bench: rank %d: cannot allocate %zu bytes%s: %s\n", rank, rbytes + (one ? 0 : top_sb),
                    bb->shm ? " of shared memory" : "", baton_last_error());
            status = 1;
            break;
        }
        memset(bb->recv, 0, rbytes ? rbytes : 64);   /* fault every page in now, not during a size's runs */
        if (bb->send != bb->recv) memset(bb->send, 0, top_sb ? top_sb : 64);
    }
    for (long sw = 0; sw < o.sweeps && !status; sw++)
    for (uint64_t size = o.minbytes, zi = 0; size <= o.maxbytes && !status; zi++) {
        size_t count = count_of(&o, size, esz, n);
        for (int m = 0; m < nmodes && !status; m++) {
            bufs b = ball[m];
            fill(&o, rank, n, &b, count, 0);
            /* every algorithm in turn, --rounds times over, in the order of baton__round_order (none
             * always first, none always after the same one: a Williams design, util.h). Every timed run follows its own -w warm-up iterations: what one
             * algorithm leaves behind (caches, scratch, page faults) is not timed as the next one's. Until
             * 2026-11-26 only the first round warmed up, and with -w 0 -n 1 at 32 MiB and more an algorithm
             * listed after rd measured rd's aftermath (docs/measurements/plan-history.md, "After the quiet run:
             * a fair comparison"). Each algorithm's row reports the
             * median of its rounds. */
            /* --sweeps: sweep sw runs rounds sw x R to sw x R + R - 1 of the same design */
            size_t slot = (o.sweeps > 1 ? 2 * (size_t)zi : 0) + (size_t)m;
            if (sw == 0) memset(wrongs[slot], 0, sizeof wrongs[slot]);
            int rc = BATON_OK;
            /* The size's own warm-up: -w untimed iterations of the round's first algorithm before its own -w.
             * Every other algorithm of the round runs after one at the same size; the first came after another
             * size and, with -w 1 at 32 and 64 MiB over tcp, was 1.18x slower than after itself even with the
             * buffers already in place (docs/measurements/plan-history.md, "Same algorithm, two times"). */
            if (o.warmup > 0 && o.nalgos > 1) {
                baton_comm_set_algo(c, o.algos[baton__round_order(o.nalgos, sw * o.rounds, 0)]);
                for (long i = 0; i < o.warmup && rc >= 0; i++) rc = run_once(c, &o, &b, count);
            }
            for (long r = sw * o.rounds; r < (sw + 1) * o.rounds && rc >= 0; r++)
                for (int k = 0; k < o.nalgos && rc >= 0; k++) {
                    int ai = baton__round_order(o.nalgos, r, k);
                    long w = 0, ran = 0;
                    struct rusage ru0, ru1;
                    if (o.runs) getrusage(RUSAGE_SELF, &ru0);
                    baton_comm_set_algo(c, o.algos[ai]);
                    used[slot][ai] = BATON_ALGO_AUTO;
                    rc = bench_size(c, &o, &b, count, o.warmup, &ts[slot][ai][r], &w, &used[slot][ai], &ran);
                    wrongs[slot][ai] += w;
                    if (o.runs && rank == 0 && rc >= 0) {
                        getrusage(RUSAGE_SELF, &ru1);
                        fprintf(stderr, "run,%zu,%ld,%ld,%d,%s,%s,%.3f,%ld,%ld\n", count * esz, sw, r, k,
                                baton_algo_name(o.algos[ai]), baton_algo_name(used[slot][ai]), ts[slot][ai][r] * 1e6, ran,
                                ru1.ru_minflt - ru0.ru_minflt);
                    }
                }
            if (rc < 0) {
                fprintf(stderr, "baton bench: rank %d: %s: %s\n", rank, baton_strerror(rc), baton_last_error());
                status = 1;
            }
            for (int ai = 0; ai < o.nalgos && rc >= 0 && rank == 0 && sw == o.sweeps - 1; ai++) {
                double t = baton__median(ts[slot][ai], (size_t)runs);
                long wrong = wrongs[slot][ai];
                baton_algo algo_used = used[slot][ai];
                size_t bytes = o.coll == B_BARRIER ? 0 : (o.coll == B_ALLGATHER || o.coll == B_REDUCESCATTER ? count * (size_t)n * esz : count * esz);
                double algbw = t > 0 ? (double)bytes / t / 1e9 : 0, busbw = algbw * busbw_factor(o.coll, n);
                char algo[32], wrong_s[24] = "N/A";
                snprintf(algo, sizeof algo, "%s%s", baton_algo_name(algo_used), b.shm ? "+shmbuf" : "");
                if (o.check) snprintf(wrong_s, sizeof wrong_s, "%ld", wrong);
                if (o.csv)
                    printf("%zu,%zu,%s,%s,%s,%.3f,%.4f,%.4f,%s%s%s\n", bytes, o.coll == B_BARRIER ? 0 : bytes / esz,
                           baton_dtype_name(o.dt), baton_op_name(o.op), algo, t * 1e6, algbw, busbw, wrong_s,
                           o.nalgos > 1 ? "," : "", o.nalgos > 1 ? baton_algo_name(o.algos[ai]) : "");
                else
                    printf("%12zu %12zu %6s %6s %12s %12.2f %11.3f %11.3f %8s%s%s\n", bytes, o.coll == B_BARRIER ? 0 : bytes / esz,
                           baton_dtype_name(o.dt), baton_op_name(o.op), algo, t * 1e6, algbw, busbw, wrong_s,
                           o.nalgos > 1 ? "  " : "", o.nalgos > 1 ? baton_algo_name(o.algos[ai]) : "");
                busbw_sum += busbw;
                rows++;
                wrong_total += wrong;
                fflush(stdout);
                if (wrong) status = 1;
            }
        }
        if (o.coll == B_BARRIER) break;
        size = next_size(&o, size);
    }
    for (int m = 0; m < nmodes; m++) {
        if (ball[m].send && ball[m].send != ball[m].recv) buf_free(c, ball[m].send, ball[m].shm);
        if (ball[m].recv) buf_free(c, ball[m].recv, ball[m].shm);
    }
    free(ts);
    free(wrongs);
    free(used);
    if (rank == 0 && !o.csv && rows) {   /* nccl-tests' closing lines */
        if (o.check) printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n", busbw_sum / (double)rows);
        fflush(stdout);
    }
    baton_comm_free(c);
    return status;
}
