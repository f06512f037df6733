/* prog_ddp.c: a data-parallel training worker for the DDP tests, run under `baton run -n N`.
 * Trains a small MLP on synthetic data with the DDP engine and the distributed sampler, then
 *   - checks that every replica ends bit-identical (allgather of checksums),
 *   - rank 0 writes the final parameters as raw f32 to --out (the test compares runs),
 *   - prints "ddp ok rank R steps S skipped K acc A scale X buckets B" on every rank.
 * The global batch is --batch (split over the ranks, then over --accum micro-batches), so runs on any
 * number of ranks see the same samples per step.
 *
 *   prog_ddp --steps 50 --batch 64 [--accum K] [--grad-dtype f32|bf16|f16] [--no-overlap] [--bucket-mb MB]
 *            [--first-bucket-mb MB] [--loss-scale none|static|dynamic] [--scale-init S] [--hidden 64,32]
 *            [--lr LR] [--samples N] [--diverge-init] [--no-zero-copy] [--out FILE] [--trace FILE]
 *            [--fmnist] [--threads T]
 * --fmnist trains on Fashion-MNIST (28x28) instead; rank 0 then also prints "ddp time ..." with the median
 * step, exposed communication and samples/s (steps after the first 10), for quick measurements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/comm.h"
#include "baton/data.h"
#include "baton/ddp.h"
#include "baton/nn.h"
#include "util/util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(int rank, const char *what) {
    fprintf(stderr, "prog_ddp[rank %d]: %s: %s\n", rank, what, baton_last_error());
    return 1;
}

int main(int argc, char **argv) {
    long steps = 50, batch = 64, accum = 1, samples = 2048;
    double lr = 0.05;
    int diverge = 0, hidden[2] = {64, 64}, fmnist = 0, threads = 1;
    const char *out = NULL, *trace_path = NULL;
    baton_ddp_config dc = baton_ddp_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--steps")) steps = atol(v), i++;
        else if (!strcmp(a, "--batch")) batch = atol(v), i++;
        else if (!strcmp(a, "--accum")) accum = atol(v), i++;
        else if (!strcmp(a, "--samples")) samples = atol(v), i++;
        else if (!strcmp(a, "--lr")) lr = atof(v), i++;
        else if (!strcmp(a, "--bucket-mb")) dc.bucket_mb = atof(v), i++;
        else if (!strcmp(a, "--first-bucket-mb")) dc.first_bucket_mb = atof(v), i++;
        else if (!strcmp(a, "--scale-init")) dc.loss_scale_init = (float)atof(v), i++;
        else if (!strcmp(a, "--out")) out = v, i++;
        else if (!strcmp(a, "--trace")) trace_path = v, i++;
        else if (!strcmp(a, "--hidden")) {
            if (sscanf(v, "%d,%d", &hidden[0], &hidden[1]) != 2) return fprintf(stderr, "bad --hidden\n"), 2;
            i++;
        } else if (!strcmp(a, "--grad-dtype")) {
            if (baton_dtype_parse(v, &dc.grad_dtype) < 0) return fprintf(stderr, "bad --grad-dtype\n"), 2;
            i++;
        } else if (!strcmp(a, "--loss-scale")) {
            dc.loss_scale = !strcmp(v, "dynamic") ? BATON_LOSS_SCALE_DYNAMIC
                            : !strcmp(v, "static") ? BATON_LOSS_SCALE_STATIC : BATON_LOSS_SCALE_NONE;
            i++;
        } else if (!strcmp(a, "--no-overlap")) dc.overlap = 0;
        else if (!strcmp(a, "--no-zero-copy")) dc.zero_copy = 0;
        else if (!strcmp(a, "--diverge-init")) diverge = 1;
        else if (!strcmp(a, "--fmnist")) fmnist = 1;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else return fprintf(stderr, "prog_ddp: unknown argument %s\n", a), 2;
    }
    baton_set_threads(threads);
    baton_comm *comm;
    if (baton_init(&comm, NULL) < 0) return fail(-1, "baton_init");
    int rank = baton_comm_rank(comm), world = baton_comm_size(comm);
    if (batch % (world * accum)) {
        fprintf(stderr, "prog_ddp: --batch %ld is not divisible by world %d x accum %ld\n", batch, world, accum);
        return 2;
    }
    long b = batch / world / accum;   /* per-rank micro-batch */

    baton_dataset ds, test;
    if (fmnist) {
        if (baton_dataset_fashion_mnist(&ds, &test, NULL) < 0) return fail(rank, "dataset");
    } else {
        if (baton_dataset_synthetic(&ds, (int)samples, 1, 28, 28, 10, 7) < 0) return fail(rank, "dataset");
        if (baton_dataset_synthetic(&test, 1000, 1, 28, 28, 10, 7) < 0) return fail(rank, "dataset");
    }
    baton_model_config mc = {.kind = BATON_MODEL_MLP, .in_c = 1, .in_h = ds.h, .in_w = ds.w, .classes = 10,
                             .hidden = {hidden[0], hidden[1]}, .n_hidden = 2};
    baton_model *m;
    /* --diverge-init: every rank starts from different weights; the engine must make them rank 0's */
    if (baton_model_new(&m, &mc, diverge ? 11 + (uint64_t)rank : 11) < 0) return fail(rank, "model");
    baton_params *p = baton_model_params(m);
    baton_tape *tape = baton_tape_new(p, 3);
    baton_optim *opt;
    baton_optim_config oc = {.kind = BATON_OPTIM_SGD, .momentum = 0.9f, .weight_decay = 0.0f};
    if (!tape || baton_optim_new(&opt, p, &oc) < 0) return fail(rank, "tape/optim");
    baton_trace *tr = trace_path ? baton_trace_new(1 << 16) : NULL;
    dc.trace = tr;
    baton_ddp *d;
    if (baton_ddp_new(&d, comm, p, tape, &dc) < 0) return fail(rank, "ddp_new");
    baton_dist_sampler s;
    if (baton_dist_sampler_init(&s, ds.n, rank, world, 1, 0, 5) < 0) return fail(rank, "sampler");

    float *x = malloc((size_t)b * ds.dim * sizeof(float));
    int32_t *y = malloc((size_t)b * sizeof(int32_t));
    long per_epoch = s.len / (b * accum), epoch = -1;
    double *step_ms = calloc((size_t)steps, sizeof(double)), *exp_ms = calloc((size_t)steps, sizeof(double));
    uint64_t t_start = 0;
    for (long step = 0; step < steps; step++) {
        baton_ddp_stats st0;
        baton_ddp_get_stats(d, &st0);
        uint64_t t0 = baton__now_ns();
        if (step == 10) t_start = t0;
        if (step / per_epoch != epoch) baton_dist_sampler_set_epoch(&s, epoch = step / per_epoch);
        long base = (step % per_epoch) * b * accum;
        for (long k = 0; k < accum; k++) {
            baton_dataset_gather(&ds, s.idx + base + k * b, (int)b, x, y);
            baton_tape_reset(tape, 1);
            baton_tensor *in = baton_tape_input(tape, 2, (int[]){(int)b, ds.dim}, x);
            baton_tensor *loss = baton_cross_entropy(tape, baton_model_forward(m, tape, in), y);
            if (k == 0) baton_params_zero_grad(p);
            baton_ddp_prepare(d, k == accum - 1);
            baton_tape_backward(tape, loss, baton_ddp_backward_scale(d) / (float)accum);
        }
        int skip;
        if (baton_ddp_finish(d, &skip) < 0) return fail(rank, "ddp_finish");
        if (!skip) baton_optim_step(opt, (float)lr);
        baton_ddp_stats st1;
        baton_ddp_get_stats(d, &st1);
        step_ms[step] = (double)(baton__now_ns() - t0) * 1e-6;
        exp_ms[step] = (double)(st1.exposed_ns - st0.exposed_ns) * 1e-6;
    }
    if (fmnist && rank == 0 && steps > 20) {
        double secs = (double)(baton__now_ns() - t_start) * 1e-9;
        qsort(step_ms + 10, (size_t)steps - 10, sizeof(double), cmp_double);
        qsort(exp_ms + 10, (size_t)steps - 10, sizeof(double), cmp_double);
        printf("ddp time world %d step_ms %.3f exposed_ms %.3f samples_per_sec %.0f\n", world,
               step_ms[10 + (steps - 10) / 2], exp_ms[10 + (steps - 10) / 2], (double)(steps - 10) * batch / secs);
    }
    free(step_ms);
    free(exp_ms);

    /* evaluation sharded over the ranks, counts all-reduced */
    long lo, hi;
    baton_shard_range(test.n, rank, world, &lo, &hi);
    baton_tape *et = baton_tape_new(p, 3);
    double counts[2] = {0, (double)(hi - lo)};
    if (hi > lo) {
        baton_tape_reset(et, 0);
        baton_tensor *in = baton_tape_input(et, 2, (int[]){(int)(hi - lo), test.dim}, test.x + lo * test.dim);
        baton_tensor *logits = baton_model_forward(m, et, in);
        counts[0] = baton_count_correct(logits->data, test.y + lo, (int)(hi - lo), 10);
    }
    if (baton_allreduce(comm, counts, counts, 2, BATON_F64, BATON_SUM) < 0) return fail(rank, "eval allreduce");

    int64_t mine = (int64_t)baton_ddp_checksum(baton_params_data(p), baton_params_numel(p));
    int64_t *all = malloc((size_t)world * sizeof *all);
    if (baton_allgather(comm, &mine, all, 1, BATON_I64) < 0) return fail(rank, "allgather");
    for (int r = 0; r < world; r++)
        if (all[r] != all[0]) {
            fprintf(stderr, "prog_ddp[rank %d]: replica of rank %d differs from rank 0's\n", rank, r);
            return 1;
        }
    if (out && rank == 0) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(baton_params_data(p), sizeof(float), baton_params_numel(p), f) != baton_params_numel(p) ||
            fclose(f) != 0)
            return fprintf(stderr, "prog_ddp: cannot write %s\n", out), 1;
    }
    if (tr && baton_trace_write(tr, comm, trace_path) < 0) return fail(rank, "trace");
    baton_ddp_stats st;
    baton_ddp_get_stats(d, &st);
    printf("ddp ok rank %d steps %ld skipped %ld acc %.4f scale %g buckets %d bytes %llu evalcount %.0f\n", rank,
           st.steps, st.skipped, counts[0] / counts[1], st.loss_scale, st.buckets,
           (unsigned long long)st.bytes_per_step, counts[1]);
    free(all);
    free(x);
    free(y);
    baton_dist_sampler_free(&s);
    baton_ddp_free(d);
    baton_trace_free(tr);
    baton_tape_free(tape);
    baton_tape_free(et);
    baton_optim_free(opt);
    baton_model_free(m);
    baton_dataset_free(&ds);
    baton_dataset_free(&test);
    baton_comm_free(comm);
    return 0;
}
