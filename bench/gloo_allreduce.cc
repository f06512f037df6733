// gloo_allreduce.cc: times Gloo's ring all-reduce (f32 sum, out of place) over TCP on loopback, the way
// `baton bench allreduce` times baton, so bench/allreduce_vs_mpi.sh can put the two side by side. Built
// by that script against Debian's libgloo-dev. Not part of `make test`.
//
//   RANK=r WORLD_SIZE=2 GLOO_STORE=/tmp/dir bench/out/gloo_allreduce -b 8 -e 256M -f 2 -n 20 -w 5 [--algo ring|chunked]
//
// One process per rank (the script starts them); they meet through a Gloo FileStore in $GLOO_STORE.
// --algo ring (default): gloo::allreduce with AllreduceOptions::Algorithm::RING (the API PyTorch's gloo
// backend calls), output separate from input. --algo chunked: the classic AllreduceRingChunked, which runs
// in place, so each iteration first copies the input into the output buffer (as an out-of-place call must).
// Rank 0 prints baton bench's columns: size count type op algo time_us algbw_GBps busbw_GBps wrong.
// Timing rule, identical to baton bench: -w warm-up iterations, then up to 3 rounds of: barrier, time
// `iters` iterations (first round: -n), take the slowest rank's time; stop when it fills >= 20 ms,
// otherwise size the next round as ceil(22 ms / per-iteration time) iterations (at most 10^7, at least 2x
// the last). time_us is the slowest rank's mean over the last round.
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end == 'B') end++;
    if (*end || v * (double)mul > (double)(1ull << 40)) return false;
    *out = (uint64_t)(v * (double)mul);
    return true;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static long env_long(const char *name, long lo, long hi) {
    const char *v = getenv(name);
    long x;
    if (!v || !parse_long(v, lo, hi, &x)) {
        fprintf(stderr, "gloo_allreduce: set %s to an integer in [%ld, %ld]\n", name, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv) {
    uint64_t minb = 8, maxb = 64ull << 20;
    double factor = 2, min_time = 0.02;
    long iters0 = 20, warmup = 5;
    bool chunked = false;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        bool ok = v != nullptr;
        if (ok && !strcmp(a, "-b")) ok = parse_size(v, &minb);
        else if (ok && !strcmp(a, "-e")) ok = parse_size(v, &maxb);
        else if (ok && !strcmp(a, "-f")) { char *e; factor = strtod(v, &e); ok = !*e && factor > 1.0001 && factor <= 1024; }
        else if (ok && !strcmp(a, "-n")) ok = parse_long(v, 1, 100000000, &iters0);
        else if (ok && !strcmp(a, "-w")) ok = parse_long(v, 0, 100000000, &warmup);
        else if (ok && !strcmp(a, "--algo")) { chunked = !strcmp(v, "chunked"); ok = chunked || !strcmp(v, "ring"); }
        else ok = false;
        if (!ok) {
            fprintf(stderr, "gloo_allreduce: bad option '%s'; usage: -b MINBYTES -e MAXBYTES -f FACTOR -n ITERS -w WARMUP [--algo ring|chunked]\n", a);
            return 2;
        }
    }
    if (minb < 4 || minb > maxb || maxb / 4 > 0x7fffffff) {
        fprintf(stderr, "gloo_allreduce: need 4 <= -b <= -e <= 8G\n");
        return 2;
    }
    int rank = (int)env_long("RANK", 0, 1 << 20), n = (int)env_long("WORLD_SIZE", 1, 1 << 20);
    const char *dir = getenv("GLOO_STORE");
    if (!dir || !*dir) {
        fprintf(stderr, "gloo_allreduce: set GLOO_STORE to an empty directory shared by the ranks\n");
        return 2;
    }
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->setTimeout(std::chrono::seconds(300));
    ctx->connectFullMesh(store, dev);

    size_t maxcount = (size_t)(maxb / 4);
    std::vector<float> send(maxcount), recv(maxcount, 0.0f);
    for (size_t i = 0; i < maxcount; i++) send[i] = (float)((i + (size_t)rank) % 64);
    uint32_t tag = 1;
    auto barrier = [&]() {
        gloo::BarrierOptions bo(ctx);
        bo.setTag(tag++);
        gloo::barrier(bo);
    };
    auto max_double = [&](double v) {
        double in = v, out = 0;
        gloo::AllreduceOptions o(ctx);
        o.setInput(&in, 1);
        o.setOutput(&out, 1);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction([](void *c, const void *a, const void *b, size_t k) {
            gloo::max<double>(c, a, b, k);
        });
        o.setTag(tag++);
        gloo::allreduce(o);
        return out;
    };
    if (rank == 0) {
        printf("# gloo %s all-reduce: %d ranks, tcp loopback, out of place, f32 sum\n", chunked ? "AllreduceRingChunked" : "ring (gloo::allreduce)", n);
        printf("%12s %12s %6s %6s %12s %12s %11s %11s %8s\n", "size", "count", "type", "op", "algo", "time_us",
               "algbw_GBps", "busbw_GBps", "wrong");
        fflush(stdout);
    }
    for (uint64_t size = minb; size <= maxb;) {
        size_t count = (size_t)(size / 4);
        std::unique_ptr<gloo::AllreduceRingChunked<float>> classic;
        if (chunked) {
            std::vector<float *> ptrs{recv.data()};
            classic.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, (int)count));
        }
        auto once = [&]() {
            if (chunked) {
                memcpy(recv.data(), send.data(), count * 4);
                classic->run();
                return;
            }
            gloo::AllreduceOptions o(ctx);
            o.setInput(send.data(), count);
            o.setOutput(recv.data(), count);
            o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
            o.setReduceFunction([](void *c, const void *a, const void *b, size_t k) {
                gloo::sum<float>(c, a, b, k);
            });
            o.setTag(tag++);
            gloo::allreduce(o);
        };
        for (long i = 0; i < warmup; i++) once();
        long iters = iters0;
        double tmax = 0;
        for (int round = 0; round < 3; round++) {
            barrier();
            double t0 = now_s();
            for (long i = 0; i < iters; i++) once();
            tmax = max_double(now_s() - t0);
            if (tmax >= min_time || iters >= 10000000) break;
            double per = tmax / (double)iters;
            long want = per > 0 ? (long)ceil(min_time * 1.1 / per) : iters * 100;
            iters = want > iters ? (want < 10000000 ? want : 10000000) : iters * 2;
        }
        double per = tmax / (double)iters;
        long wrong = 0;
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < n; r++) want += (double)((i + (size_t)r) % 64);
            if (recv[i] != (float)want) wrong++;
        }
        double wrong_all = max_double((double)wrong);  // any rank's mismatches (max, enough to flag)
        if (rank == 0) {
            size_t bytes = count * 4;
            double algbw = (double)bytes / per / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
            printf("%12zu %12zu %6s %6s %12s %12.2f %11.3f %11.3f %8ld\n", bytes, count, "f32", "sum",
                   chunked ? "gloo-chunked" : "gloo-ring", per * 1e6, algbw, busbw, (long)wrong_all);
            fflush(stdout);
        }
        uint64_t next = (uint64_t)((double)size * factor);
        size = next > size ? next : size + 1;
    }
    barrier();
    return 0;
}
