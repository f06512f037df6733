/* train_gpt.c: `baton train --model gpt`: a GPT (baton/gpt.h) on byte-level text (baton/text.h), in one
 * process or data-parallel under `baton run -n N`, with AdamW (decay on matrices and embeddings only),
 * linear warmup and cosine decay, and validation loss / perplexity at every evaluation.
 *
 * Batches: the training text is cut into windows of T+1 tokens with disjoint inputs (baton/text.h); one
 * seeded permutation of the windows per epoch is dealt to the ranks by the distributed sampler, so every
 * rank trains on its own windows, and N ranks x batch B/N see exactly the windows of 1 rank x batch B.
 * Evaluation: the first --eval-windows validation windows, sharded over the ranks, summed. */
#include <cjson/cJSON.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/comm.h"
#include "baton/data.h"
#include "baton/ddp.h"
#include "baton/gpt.h"
#include "baton/text.h"
#include "ckpt/safetensors.h"
#include "cli.h"
#include "train.h"
#include "util/util.h"

typedef struct {
    const char *data, *data_dir, *save;
    double time_limit;        /* --time-limit seconds of training, 0 = none */
    long steps, batch, threads, warmup, eval_every, eval_windows, log_every;
    double lr, min_lr, weight_decay, clip, beta2;
    uint64_t seed;
    int json, min_lr_set;
    int bf16, gemm;           /* --precision bf16; --gemm: the f32 library (baton_gemm_backend) */
    baton_gpt_config gc;
    baton_ddp_config ddp;
} gpt_opts;

static const char usage_text[] =
    "usage: baton train --model gpt [options]   (docs/gpt.md)\n"
    "  --layers N --heads H --dim C --context T   model (default 6, 6, 384, 256; C divisible by H)\n"
    "  --data fortunes|text:FILE   byte-level text (default fortunes: Debian's fortunes package; --data-dir DIR\n"
    "                         overrides /usr/share/games/fortunes); split into train/validation by document\n"
    "  --steps S              optimizer steps (default 1000)\n"
    "  --batch B              windows of T tokens per step per rank (default 16)\n"
    "  --lr LR --min-lr LR    peak and final learning rate (default 1e-3 and lr/10)\n"
    "  --warmup-steps N       linear warmup, then cosine decay to --min-lr at the last step (default 100;\n"
    "                         --warmup is the same)\n"
    "  --weight-decay WD      AdamW decay of matrices and embeddings (default 0.1; betas 0.9, --beta2 0.99)\n"
    "  --clip NORM            global gradient-norm clip (default 1; 0 = off)\n"
    "  --eval-every N         validation every N steps and at the end (default 100)\n"
    "  --time-limit SEC       stop after the step that reaches SEC seconds of training (then evaluate, save)\n"
    "  --eval-windows N       validation windows per evaluation (default 32)\n"
    "  --precision f32|bf16   matrix multiplies in f32, or bf16 with f32 accumulation and f32 master weights\n"
    "                         (needs AVX512_BF16 or AMX; elsewhere a note and f32) (default f32)\n"
    "  --gemm onednn|openblas f32 matrix-multiply library (default onednn: faster here, docs/decisions.md)\n"
    "  --seed N --threads T --log-every N --save FILE.safetensors --json\n"
    "  --bucket-mb MB --no-overlap --grad-dtype f32|bf16|f16   data-parallel (docs/ddp.md)\n";

static int bad(const char *flag, const char *why) {
    fprintf(stderr, "baton train: %s: %s (see baton train --model gpt --help)\n", flag, why);
    return 2;
}

static int parse(int argc, char **argv, gpt_opts *o) {
    memset(o, 0, sizeof *o);
    o->data = "fortunes";
    o->steps = 1000;
    o->batch = 16;
    o->warmup = 100;
    o->eval_every = 100;
    o->eval_windows = 32;
    o->lr = 1e-3;
    o->weight_decay = 0.1;
    o->clip = 1.0;
    o->beta2 = 0.99;
    o->seed = 1;
    o->gc = (baton_gpt_config){.vocab = BATON_TEXT_VOCAB, .context = 256, .layers = 6, .heads = 6, .dim = 384};
    o->ddp = baton_ddp_defaults();
    o->gemm = BATON_GEMM_ONEDNN;
    static const char *const switches[] = {"--json", "--no-overlap", NULL};
    cli_opts it = {.argc = argc, .argv = argv, .usage = usage_text, .switches = switches};
    int rc;
    while ((rc = cli_opts_next(&it)) > 0) {
        const char *flag = it.flag, *val = it.val;
        if (!strcmp(flag, "--help")) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (!strcmp(flag, "--json")) { o->json = 1; continue; }
        if (!strcmp(flag, "--no-overlap")) { o->ddp.overlap = 0; continue; }
        if (!strcmp(flag, "--min-lr")) o->min_lr_set = 1;
        if (cli_int(&it, "--layers", 1, 64, &o->gc.layers) || cli_int(&it, "--heads", 1, 256, &o->gc.heads) ||
            cli_int(&it, "--dim", 1, 16384, &o->gc.dim) || cli_int(&it, "--context", 1, 4096, &o->gc.context) ||
            cli_long(&it, "--steps", 1, 1000000000, &o->steps) || cli_long(&it, "--batch", 1, 65536, &o->batch) ||
            cli_long(&it, "--threads", 1, 1024, &o->threads) ||
            cli_long(&it, "--warmup-steps", 0, 1000000000, &o->warmup) ||
            cli_long(&it, "--warmup", 0, 1000000000, &o->warmup) ||
            cli_long(&it, "--eval-every", 1, 1000000000, &o->eval_every) ||
            cli_long(&it, "--eval-windows", 1, 1000000, &o->eval_windows) ||
            cli_long(&it, "--log-every", 1, 1000000000, &o->log_every) || cli_double(&it, "--lr", 1e-12, 100.0, &o->lr) ||
            cli_double(&it, "--weight-decay", 0.0, 10.0, &o->weight_decay) ||
            cli_double(&it, "--clip", 0.0, 1e9, &o->clip) || cli_double(&it, "--beta2", 0.0, 0.999999, &o->beta2) ||
            cli_double(&it, "--bucket-mb", 0.001, 4096.0, &o->ddp.bucket_mb) ||
            cli_double(&it, "--time-limit", 0.001, 1e9, &o->time_limit) ||
            cli_double(&it, "--min-lr", 0.0, 100.0, &o->min_lr) || cli_seed(&it, "--seed", &o->seed)) {
            if (it.why) return bad(flag, it.why);
            continue;
        }
        if (!strcmp(flag, "--model")) {
            if (strcmp(val, "gpt")) return bad(flag, "this is the gpt trainer; mlp and cnn take other options");
        } else if (!strcmp(flag, "--data")) {
            if (strcmp(val, "fortunes") && (strncmp(val, "text:", 5) || !val[5]))
                return bad(flag, "expects fortunes or text:FILE");
            o->data = val;
        } else if (!strcmp(flag, "--precision")) {
            if (strcmp(val, "f32") && strcmp(val, "bf16")) return bad(flag, "expects f32 or bf16");
            o->bf16 = !strcmp(val, "bf16");
        } else if (!strcmp(flag, "--gemm")) {
            if (strcmp(val, "onednn") && strcmp(val, "openblas")) return bad(flag, "expects onednn or openblas");
            o->gemm = !strcmp(val, "onednn") ? BATON_GEMM_ONEDNN : BATON_GEMM_OPENBLAS;
        } else if (!strcmp(flag, "--data-dir")) {
            o->data_dir = val;
        } else if (!strcmp(flag, "--save")) {
            o->save = val;
        } else if (!strcmp(flag, "--grad-dtype")) {
            if (strcmp(val, "f32") && strcmp(val, "bf16") && strcmp(val, "f16")) return bad(flag, "expects f32, bf16 or f16");
            baton_dtype_parse(val, &o->ddp.grad_dtype);
        } else {
            return bad(flag, "unknown option (gpt takes --layers --heads --dim --context --data ...)");
        }
    }
    if (rc < 0) return bad(it.flag, it.why);
    if (o->gc.dim % o->gc.heads) return bad("--dim", "must be divisible by --heads");
    if (!o->min_lr_set) o->min_lr = o->lr / 10.0;
    return 0;
}

/* Mean loss over validation windows [0, n) sharded over the ranks (each rank its contiguous part). */
static int evaluate(baton_comm *comm, baton_gpt *g, baton_tape *t, const baton_text *tx, long n, int eb,
                    int32_t *buf, double *loss) {
    int rank = comm ? baton_comm_rank(comm) : 0, world = comm ? baton_comm_size(comm) : 1, tl = baton_gpt_cfg(g)->context;
    long lo, hi;
    baton_shard_range(n, rank, world, &lo, &hi);
    double sums[2] = {0.0, 0.0};   /* loss x windows, windows */
    for (long w = lo; w < hi; w += eb) {
        int b = (int)(hi - w < eb ? hi - w : eb);
        for (int i = 0; i < b; i++) baton_text_window(tx->val, w + i, tl, buf + (size_t)i * (tl + 1));
        baton_tape_reset(t, 0);
        sums[0] += (double)baton_gpt_loss(g, t, buf, b, tl)->data[0] * b;
        sums[1] += b;
    }
    if (comm && world > 1) {
        int rc = baton_allreduce(comm, sums, sums, 2, BATON_F64, BATON_SUM);
        if (rc < 0) return rc;
    }
    *loss = sums[0] / sums[1];
    return BATON_OK;
}

int baton_cmd_train_gpt(int argc, char **argv) {
    gpt_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    baton_launch_env le;   /* any launcher's variables make this a data-parallel job (as in train.c) */
    if (baton_launch_env_read(&le) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        return 2;
    }
    long world = le.world;
    int threads = train_threads(o.threads, &le);
    baton_comm *comm = NULL;
    baton_text tx = {0};
    baton_gpt *g = NULL;
    baton_tape *tape = NULL, *etape = NULL;
    baton_optim *opt = NULL;
    baton_ddp *ddp = NULL;
    baton_dist_sampler sampler = {0};
    int32_t *win = NULL, *ewin = NULL;
    int exit_code = 1, rank = 0, tl = o.gc.context;
    if (world > 1 && baton_init(&comm, NULL) < 0) {
        fprintf(stderr, "baton train: joining the data-parallel job: %s\n", baton_last_error());
        return 1;
    }
    if (comm) {
        rank = baton_comm_rank(comm);
        world = baton_comm_size(comm);
    }
    rc = !strcmp(o.data, "fortunes") ? baton_text_load_fortunes(&tx, o.data_dir) : baton_text_load_file(&tx, o.data + 5);
    if (rc < 0) {
        fprintf(stderr, "baton train: --data %s: %s\n", o.data, baton_last_error());
        exit_code = 2;
        goto out;
    }
    long n_train = baton_text_windows(tx.n_train, tl), n_val = baton_text_windows(tx.n_val, tl);
    if (n_train < o.batch * world || n_val < 1) {
        fprintf(stderr, "baton train: --data %s: %zu training and %zu validation bytes make %ld and %ld windows of "
                "--context %d; need at least --batch x ranks = %ld and 1: use more text or a shorter --context\n",
                o.data, tx.n_train, tx.n_val, n_train, n_val, tl, o.batch * world);
        exit_code = 2;
        goto out;
    }
    if (o.eval_windows < n_val) n_val = o.eval_windows;
    if ((rc = baton_gpt_new(&g, &o.gc, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        exit_code = 2;
        goto out;
    }
    baton_params *params = baton_gpt_params(g);
    baton_optim_config oc = {.kind = BATON_OPTIM_ADAMW, .weight_decay = (float)o.weight_decay, .beta1 = 0.9f,
                             .beta2 = (float)o.beta2, .eps = 1e-8f};
    int eb = 8;
    if ((rc = baton_optim_new(&opt, params, &oc)) < 0 ||
        (rc = baton_dist_sampler_init(&sampler, (int)n_train, rank, (int)world, 1, 0, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    tape = baton_tape_new(params, o.seed);
    etape = baton_tape_new(params, o.seed);
    win = malloc((size_t)o.batch * (tl + 1) * sizeof *win);
    ewin = malloc((size_t)eb * (tl + 1) * sizeof *ewin);
    if (!tape || !etape || !win || !ewin) {
        fprintf(stderr, "baton train: out of memory\n");
        goto out;
    }
    int gemm = o.gemm;   /* evaluation runs in the training precision too */
    if (o.bf16 && !baton_gemm_bf16_available()) {
        if (rank == 0) fprintf(stderr, "baton train: note: --precision bf16: this CPU has neither AVX512_BF16 nor AMX; running f32\n");
    } else if (o.bf16) {
        gemm = BATON_GEMM_ONEDNN_BF16;
    }
    if (baton_tape_set_gemm(tape, gemm) < 0 || baton_tape_set_gemm(etape, gemm) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    if ((rc = baton_ddp_new(&ddp, comm, params, tape, &o.ddp)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    long per_epoch = sampler.len / o.batch;
    baton_lr_schedule sched = {.kind = BATON_SCHED_COSINE, .lr = (float)o.lr, .warmup = o.warmup < o.steps ? o.warmup : o.steps / 10,
                               .total = o.steps, .min_lr = (float)o.min_lr};
    double fpt = baton_gpt_flops_per_token(&o.gc, tl);
    long log_every = o.log_every ? o.log_every : 10;
    if (rank == 0)
        fprintf(stderr, "baton train: gpt %d %s x %d %s x %d dim, context %d, %zu parameters; %s: %zu/%zu train/val "
                "bytes (%ld/%ld documents), %ld train windows; %ld %s x batch %ld x %d tokens, %ld %s, lr %g, %d %s, "
                "%s\n", o.gc.layers, cli_plural(o.gc.layers, "layer", "layers"), o.gc.heads,
                cli_plural(o.gc.heads, "head", "heads"), o.gc.dim, tl, baton_params_numel(params), o.data, tx.n_train,
                tx.n_val, tx.docs_train, tx.docs_val, n_train, world, cli_plural(world, "rank", "ranks"), o.batch, tl,
                o.steps, cli_plural(o.steps, "step", "steps"), o.lr, threads,
                cli_plural(threads, "thread/rank", "threads/rank"),
                gemm == BATON_GEMM_ONEDNN_BF16 ? "bf16 matmuls (oneDNN)" : gemm == BATON_GEMM_ONEDNN ? "f32 (oneDNN)" : "f32 (OpenBLAS)");
    double loss = 0.0, val_loss = NAN, initial = 0.0;
    uint64_t train_ns = 0;
    long epoch = 0;
    for (long step = 0; step < o.steps; step++) {
        long e = step / per_epoch, s = step % per_epoch;
        if (e != epoch) baton_dist_sampler_set_epoch(&sampler, epoch = e);
        uint64_t t0 = baton__now_ns();
        for (long i = 0; i < o.batch; i++)
            baton_text_window(tx.train, sampler.idx[s * o.batch + i], tl, win + (size_t)i * (tl + 1));
        baton_tape_reset(tape, 1);
        baton_tensor *lt = baton_gpt_loss(g, tape, win, (int)o.batch, tl);
        baton_params_zero_grad(params);
        baton_ddp_prepare(ddp, 1);
        baton_tape_backward(tape, lt, baton_ddp_backward_scale(ddp));
        int skip;
        if (baton_ddp_finish(ddp, &skip) < 0) {
            fprintf(stderr, "baton train: gradient all-reduce at step %ld: %s\n", step, baton_last_error());
            goto out;
        }
        if (!skip && o.clip > 0) baton_clip_grad_norm(params, (float)o.clip);
        float lr = baton_lr_at(&sched, step);
        if (!skip) baton_optim_step(opt, lr);
        train_ns += baton__now_ns() - t0;
        loss = lt->data[0];
        if (step == 0) initial = loss;
        if (!isfinite(loss)) {
            fprintf(stderr, "baton train: loss became %f at step %ld on rank %d; lower --lr\n", loss, step, rank);
            goto out;
        }
        double tps = (double)(step + 1) * o.batch * tl * world / ((double)train_ns * 1e-9);
        if (rank == 0 && ((step + 1) % log_every == 0 || step == 0))
            fprintf(stderr, "step %ld/%ld  loss %.4f  lr %.3g  %.0f tokens/s  %.2f GFLOP/s\n", step + 1, o.steps, loss,
                    (double)lr, tps, tps * fpt * 1e-9);
        int last = step + 1 == o.steps;
        if (o.time_limit > 0) {   /* every rank must stop at the same step: rank 0's clock decides */
            double over = (double)train_ns * 1e-9 >= o.time_limit;
            if (comm && baton_broadcast(comm, &over, 1, BATON_F64, 0) < 0) {
                fprintf(stderr, "baton train: %s\n", baton_last_error());
                goto out;
            }
            if (over && !last) {
                last = 1;
                o.steps = step + 1;
                if (rank == 0) fprintf(stderr, "baton train: --time-limit %g s reached after %ld steps\n", o.time_limit, o.steps);
            }
        }
        if ((step + 1) % o.eval_every == 0 || last) {
            if (evaluate(comm, g, etape, &tx, n_val, eb, ewin, &val_loss) < 0) {
                fprintf(stderr, "baton train: evaluation: %s\n", baton_last_error());
                goto out;
            }
            if (rank == 0)
                fprintf(stderr, "eval step %ld  val_loss %.4f  perplexity %.3f  (%ld windows)  elapsed %.1f s\n", step + 1,
                        val_loss, exp(val_loss), n_val, (double)train_ns * 1e-9);
        }
    }
    double secs = (double)train_ns * 1e-9;
    if (comm && baton_allreduce(comm, &secs, &secs, 1, BATON_F64, BATON_MAX) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    if (o.save && rank == 0) {
        char ly[16], hd[16], dm[16], cx[16], vc[16];
        snprintf(ly, sizeof ly, "%d", o.gc.layers);
        snprintf(hd, sizeof hd, "%d", o.gc.heads);
        snprintf(dm, sizeof dm, "%d", o.gc.dim);
        snprintf(cx, sizeof cx, "%d", o.gc.context);
        snprintf(vc, sizeof vc, "%d", o.gc.vocab);
        const char *meta[] = {"format", "pt", "producer", "baton train", "model", "gpt", "layers", ly, "heads", hd,
                              "dim", dm, "context", cx, "vocab", vc, "tokenizer", "bytes"};
        if (baton_st_save_params(o.save, params, meta, 9) < 0) {
            fprintf(stderr, "baton train: --save: %s\n", baton_last_error());
            goto out;
        }
    }
    if (o.json && rank == 0) {
        double tps = secs > 0 ? (double)o.steps * o.batch * tl * world / secs : 0.0;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", "gpt");
        cJSON_AddStringToObject(j, "data", o.data);
        cJSON_AddNumberToObject(j, "world_size", (double)world);
        cJSON_AddNumberToObject(j, "steps", (double)o.steps);
        cJSON_AddNumberToObject(j, "batch", (double)o.batch);
        cJSON_AddNumberToObject(j, "context", tl);
        cJSON_AddNumberToObject(j, "params", (double)baton_params_numel(params));
        cJSON_AddNumberToObject(j, "initial_loss", initial);
        cJSON_AddNumberToObject(j, "final_loss", loss);
        cJSON_AddNumberToObject(j, "val_loss", val_loss);
        cJSON_AddNumberToObject(j, "val_perplexity", exp(val_loss));
        cJSON_AddNumberToObject(j, "tokens_per_sec", tps);
        cJSON_AddNumberToObject(j, "model_gflops_per_sec", tps * fpt * 1e-9);
        cJSON_AddNumberToObject(j, "step_ms", 1e3 * secs / (double)o.steps);
        cJSON_AddNumberToObject(j, "threads", threads);
        char hex[2][65];   /* the split, for comparison with bench/gpt_torch.py split */
        const uint8_t *part[2] = {tx.train, tx.val};
        size_t plen[2] = {tx.n_train, tx.n_val};
        for (int i = 0; i < 2; i++) {
            unsigned char h[32];
            crypto_generichash(h, sizeof h, part[i], plen[i], NULL, 0);
            sodium_bin2hex(hex[i], sizeof hex[i], h, sizeof h);
        }
        cJSON_AddNumberToObject(j, "train_bytes", (double)tx.n_train);
        cJSON_AddNumberToObject(j, "val_bytes", (double)tx.n_val);
        cJSON_AddStringToObject(j, "train_blake2b", hex[0]);
        cJSON_AddStringToObject(j, "val_blake2b", hex[1]);
        cJSON_AddStringToObject(j, "precision", gemm == BATON_GEMM_ONEDNN_BF16 ? "bf16" : "f32");
        char *js = cJSON_PrintUnformatted(j);
        if (js) printf("%s\n", js);
        free(js);
        cJSON_Delete(j);
    }
    exit_code = 0;
out:
    free(win);
    free(ewin);
    baton_ddp_free(ddp);
    baton_tape_free(tape);
    baton_tape_free(etape);
    baton_optim_free(opt);
    baton_dist_sampler_free(&sampler);
    baton_gpt_free(g);
    baton_text_free(&tx);
    baton_comm_free(comm);
    return exit_code;
}
