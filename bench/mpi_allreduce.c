/* mpi_allreduce.c: times MPI_Allreduce (f32 sum, out of place) the way `baton bench allreduce` times baton,
 * so bench/allreduce_vs_mpi.sh can put the two side by side. Built twice by that script, once with
 * mpicc.openmpi and once with mpicc.mpich. Not part of `make test`.
 *
 *   mpirun.openmpi -np 2 bench/out/mpi_allreduce.openmpi -b 8 -e 256M -f 2 -n 20 -w 5
 *
 * Rank 0 prints one row per size with baton bench's columns:
 *   size count type op algo time_us algbw_GBps busbw_GBps wrong
 * (algbw = size / time; busbw = algbw x 2(n-1)/n as nccl-tests defines it; algo names the MPI library).
 * Timing rule, identical to baton bench: -w warm-up iterations, then up to 3 rounds of: barrier, time
 * `iters` iterations (first round: -n), take the slowest rank's time; stop when it fills >= 20 ms,
 * otherwise size the next round as ceil(22 ms / per-iteration time) iterations (at most 10^7, at least 2x
 * the last). time_us is the slowest rank's mean over the last round. `wrong` counts elements of the last
 * result that differ from the exact sum of the integer-valued inputs. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(OPEN_MPI)
#define LIBNAME "openmpi"
#elif defined(MPICH)
#define LIBNAME "mpich"
#else
#define LIBNAME "mpi"
#endif

static int parse_size(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end == 'B') end++;
    if (*end || v * (double)mul > (double)(1ull << 40)) return -1;
    *out = (uint64_t)(v * (double)mul);
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    uint64_t minb = 8, maxb = 64ull << 20;
    double factor = 2, min_time = 0.02;
    long iters0 = 20, warmup = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && !strcmp(a, "-b")) bad = parse_size(v, &minb);
        else if (!bad && !strcmp(a, "-e")) bad = parse_size(v, &maxb);
        else if (!bad && !strcmp(a, "-f")) { char *e; factor = strtod(v, &e); bad = *e || !(factor > 1.0001 && factor <= 1024); }
        else if (!bad && !strcmp(a, "-n")) bad = parse_long(v, 1, 100000000, &iters0);
        else if (!bad && !strcmp(a, "-w")) bad = parse_long(v, 0, 100000000, &warmup);
        else bad = 1;
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "mpi_allreduce: bad option '%s'%s%s; usage: -b MINBYTES -e MAXBYTES -f FACTOR -n ITERS -w WARMUP\n",
                        a, v ? " " : "", v ? v : "");
            MPI_Finalize();
            return 2;
        }
        i++;
    }
    if (minb < 4 || minb > maxb) {
        if (rank == 0) fprintf(stderr, "mpi_allreduce: need 4 <= -b <= -e\n");
        MPI_Finalize();
        return 2;
    }
    size_t maxcount = (size_t)(maxb / 4);
    float *send = NULL, *recv = NULL;
    if (posix_memalign((void **)&send, 64, maxcount * 4 + 64) || posix_memalign((void **)&recv, 64, maxcount * 4 + 64)) {
        fprintf(stderr, "mpi_allreduce: rank %d: cannot allocate 2 x %zu bytes\n", rank, maxcount * 4);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* integer values: the sum over ranks is exact, so it can be checked */
    for (size_t i = 0; i < maxcount; i++) send[i] = (float)((i + (size_t)rank) % 64);
    memset(recv, 0, maxcount * 4);
    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = 0;
        printf("# MPI_Allreduce %s: %d ranks, out of place, f32 sum; %s\n", LIBNAME, n, ver);
        printf("%12s %12s %6s %6s %12s %12s %11s %11s %8s\n", "size", "count", "type", "op", "algo", "time_us",
               "algbw_GBps", "busbw_GBps", "wrong");
        fflush(stdout);
    }
    for (uint64_t size = minb; size <= maxb;) {
        int count = (int)(size / 4);
        for (long i = 0; i < warmup; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        long iters = iters0;
        double tmax = 0;
        for (int round = 0; round < 3; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_s();
            for (long i = 0; i < iters; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = now_s() - t0;
            MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (tmax >= min_time || iters >= 10000000) break;
            double per = tmax / (double)iters;
            long want = per > 0 ? (long)ceil(min_time * 1.1 / per) : iters * 100;
            iters = want > iters ? (want < 10000000 ? want : 10000000) : iters * 2;
        }
        double per = tmax / (double)iters;
        long wrong = 0, wsum = 0;
        for (int i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < n; r++) want += (double)(((size_t)i + (size_t)r) % 64);
            if (recv[i] != (float)want) wrong++;
        }
        MPI_Reduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            size_t bytes = (size_t)count * 4;
            double algbw = (double)bytes / per / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
            printf("%12zu %12d %6s %6s %12s %12.2f %11.3f %11.3f %8ld\n", bytes, count, "f32", "sum", LIBNAME,
                   per * 1e6, algbw, busbw, wsum);
            fflush(stdout);
        }
        uint64_t next = (uint64_t)((double)size * factor);
        size = next > size ? next : size + 1;
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
