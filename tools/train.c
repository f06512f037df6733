/* train.c: `baton train`: train a model on Fashion-MNIST or synthetic data, in one process or data-parallel
 * under `baton run -n N` (or torchrun / mpirun / srun: anything that sets the rank variables).
 *
 * One optimizer step, top to bottom (the loop in baton_cmd_train):
 *   next_batch -> forward -> zero_grad -> backward   (repeated --accum times, gradients accumulate;
 *                                                     on the last one, full buckets all-reduce from the hook)
 *   -> ddp finish (wait for the buckets, average) -> clip -> optimizer step
 * Each rank reads its own shard of every global batch (baton_dist_sampler); evaluation shards the test
 * set and sums the counts, so the accuracy equals a one-process evaluation. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/comm.h"
#include "baton/data.h"
#include "baton/ddp.h"
#include "baton/nn.h"
#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "cli.h"
#include "commands.h"
#include "train.h"
#include "train_bucket.h"
#include "train_metrics.h"
#include "train_summary.h"
#include "util/util.h"

typedef struct {
    const char *model, *data, *optim, *schedule, *save, *data_dir, *trace, *checkpoint;
    long epochs, steps, batch, accum, threads, warmup, step_every, eval_batch, train_samples, log_every, ckpt_every;
    double lr, momentum, weight_decay, clip, gamma, dropout, min_lr, trust_coef;
    uint64_t seed;
    int json, epochs_set, steps_set, lr_set, optim_set, wd_set, resume;
    int drop_last, lr_linear;  /* --drop-last, --lr-scaling linear */
    baton_ddp_config ddp;      /* --bucket-mb, --no-overlap, --grad-dtype, --loss-scale, --no-zero-copy */
    baton_model_config mc;
    int no_prefetch;           /* --no-prefetch */
    int bucket_auto;           /* --bucket-mb auto */
    const char *metrics;       /* --metrics FILE.jsonl|FILE.csv|none (NULL: the default, on) */
} train_opts;

static const char usage_text[] =
    "usage: baton train [options]\n"
    "  --model mlp|cnn|gpt    model (default mlp: 784-1024-1024-10; cnn: conv32-conv64-fc128; gpt: see\n"
    "                         baton train --model gpt --help)\n"
    "  --hidden LIST          hidden widths, e.g. 1024,1024 (mlp) or 128 (cnn)\n"
    "  --channels LIST        cnn conv channels per block, e.g. 32,64\n"
    "  --dropout P            dropout before the last layer (default 0)\n"
    "  --data fashion-mnist|synthetic   (default fashion-mnist; --data-dir DIR overrides the location)\n"
    "  --train-samples N      synthetic training set size (default 60000; test set is 10000)\n"
    "  --epochs E             epochs (default 5, or unlimited when only --steps is given)\n"
    "  --steps S              stop after S optimizer steps\n"
    "  --batch B              samples per step per rank (default 128)\n"
    "  --accum K              accumulate gradients over K batches per step (default 1)\n"
    "  --drop-last            drop the samples that do not divide by the world size (default: pad)\n"
    "  --optim sgd|adamw|lars|lamb   (default sgd for mlp, adamw for cnn; lars and lamb scale each layer's step\n"
    "                         by a trust ratio |w|/|update| for large batches; biases are not adapted)\n"
    "  --lr LR                peak learning rate (default 0.05 sgd, 0.001 adamw, 1 lars, 0.005 lamb)\n"
    "  --trust-coef ETA       lars: the trust coefficient eta (default 0.02)\n"
    "  --momentum M           sgd momentum (default 0.9)\n"
    "  --weight-decay WD      (default 5e-4 sgd, 0.01 adamw)\n"
    "  --schedule cosine|step|const   decay after warmup (default cosine)\n"
    "  --min-lr LR            the lr cosine decays to (default 0)\n"
    "  --warmup-steps N       warmup steps (default 100; --warmup is the same)\n"
    "  --lr-scaling none|linear       linear: lr x world size (the effective batch grows with it)\n"
    "  --step-every N --gamma G       step decay: lr *= G every N steps (defaults 1 epoch, 0.1)\n"
    "  --clip NORM            clip gradients to this global norm (default 0 = off)\n"
    "  --seed N               seed for init, shuffling and dropout (default 1)\n"
    "  --threads T            compute threads (default: cores / local world size)\n"
    "  --eval-batch N         evaluation batch (default 1000)\n"
    "  --log-every N          progress line every N steps when stderr is not a terminal\n"
    "  --save FILE.safetensors        write the final parameters\n"
    "  --json                 print one final JSON line on stdout\n"
    "  --no-prefetch          gather each batch on the training thread (default: one batch ahead on a thread)\n"
    "  --metrics FILE.jsonl|FILE.csv|none   per-step metrics of every rank (default: on, into the --checkpoint\n"
    "                         directory or a new run directory; `baton report DIR` draws them; docs/observe.md)\n"
    "checkpoints (docs/checkpoints.md):\n"
    "  --checkpoint DIR       save DIR/step-N every --checkpoint-every steps and at the end (keeps the last 2);\n"
    "                         DIR must hold no checkpoint unless --resume is given\n"
    "  --checkpoint-every N   steps between checkpoints (default: once per epoch)\n"
    "  --resume               continue from the newest complete checkpoint in DIR, bit-identical to a run that\n"
    "                         was never stopped; with none yet, start from scratch (so a restart script can\n"
    "                         always pass it)\n"
    "data-parallel (under baton run -n N):\n"
    "  --bucket-mb MB|auto    gradient bucket cap (default 25; the first bucket is 1); auto tries a ladder of\n"
    "                         caps for a few steps each and keeps the one with the least exposed communication\n"
    "  --no-overlap           all-reduce after the whole backward instead of during it\n"
    "  --grad-dtype f32|bf16|f16      gradients on the wire (default f32; master weights stay f32)\n"
    "  --loss-scale none|static|dynamic   loss scaling (dynamic: start 2^16, halve and skip on overflow,\n"
    "                         double after 2000 clean steps); --loss-scale-init S sets the start\n"
    "  --no-zero-copy         keep the gradients in private memory (the all-reduce stages them)\n"
    "  --zero 0|1|2           ZeRO: 1 shards the optimizer state over the ranks, 2 also the reduced gradients\n"
    "                         (docs/zero.md)\n"
    "  --trace FILE.json      write a Chrome/Perfetto timeline of every rank (main and comm threads)\n";

static int bad(const char *flag, const char *why) {
    fprintf(stderr, "baton train: %s: %s (see baton train --help)\n", flag, why);
    return 2;
}

static int parse_list(const char *flag, const char *s, int *out, int *n) {
    *n = 0;
    for (const char *p = s;;) {   /* comma-separated positive integers, no empty entries */
        char tok[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof tok) return bad(flag, "expects a comma-separated list such as 1024,1024");
        if (*n == BATON_MAX_LAYERS) return bad(flag, "too many entries (at most 8)");
        memcpy(tok, p, len);
        tok[len] = '\0';
        long v;
        if (baton__parse_long(tok, 1, 65536, &v) < 0) return bad(flag, baton_last_error());
        out[(*n)++] = (int)v;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

static int parse_args(int argc, char **argv, train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "mlp";
    o->data = "fashion-mnist";
    o->schedule = "cosine";
    o->epochs = 5;
    o->batch = 128;
    o->accum = 1;
    o->warmup = 100;
    o->gamma = 0.1;
    o->momentum = 0.9;
    o->eval_batch = 1000;
    o->train_samples = 60000;
    o->seed = 1;
    o->ddp = baton_ddp_defaults();
    int hidden_set = 0, channels_set = 0;
    static const char *const switches[] = {"--json", "--no-overlap", "--no-zero-copy", "--drop-last", "--resume",
                                           "--no-prefetch", NULL};
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
        if (!strcmp(flag, "--no-zero-copy")) { o->ddp.zero_copy = 0; continue; }
        if (!strcmp(flag, "--drop-last")) { o->drop_last = 1; continue; }
        if (!strcmp(flag, "--resume")) { o->resume = 1; continue; }
        if (!strcmp(flag, "--no-prefetch")) { o->no_prefetch = 1; continue; }
        if (!strcmp(flag, "--epochs")) o->epochs_set = 1;
        if (!strcmp(flag, "--steps")) o->steps_set = 1;
        if (!strcmp(flag, "--lr")) o->lr_set = 1;
        if (!strcmp(flag, "--weight-decay")) o->wd_set = 1;
        if (!strcmp(flag, "--bucket-mb") && !strcmp(val, "auto")) {
            o->bucket_auto = 1;
            continue;
        }
        if (cli_long(&it, "--epochs", 1, 100000, &o->epochs) || cli_long(&it, "--steps", 1, 1000000000, &o->steps) ||
            cli_long(&it, "--batch", 1, 65536, &o->batch) || cli_long(&it, "--accum", 1, 4096, &o->accum) ||
            cli_long(&it, "--threads", 1, 1024, &o->threads) || cli_long(&it, "--warmup", 0, 1000000000, &o->warmup) ||
            cli_long(&it, "--warmup-steps", 0, 1000000000, &o->warmup) ||
            cli_long(&it, "--step-every", 1, 1000000000, &o->step_every) ||
            cli_long(&it, "--eval-batch", 1, 65536, &o->eval_batch) ||
            cli_long(&it, "--train-samples", 1, 10000000, &o->train_samples) ||
            cli_long(&it, "--log-every", 1, 1000000000, &o->log_every) ||
            cli_long(&it, "--checkpoint-every", 1, 1000000000, &o->ckpt_every) ||
            cli_double(&it, "--lr", 1e-12, 100.0, &o->lr) || cli_double(&it, "--momentum", 0.0, 0.999999, &o->momentum) ||
            cli_double(&it, "--weight-decay", 0.0, 10.0, &o->weight_decay) ||
            cli_double(&it, "--clip", 0.0, 1e9, &o->clip) || cli_double(&it, "--gamma", 1e-9, 1.0, &o->gamma) ||
            cli_double(&it, "--dropout", 0.0, 0.99, &o->dropout) || cli_double(&it, "--min-lr", 0.0, 100.0, &o->min_lr) ||
            cli_double(&it, "--trust-coef", 1e-6, 10.0, &o->trust_coef) ||
            cli_double(&it, "--bucket-mb", 0.001, 4096.0, &o->ddp.bucket_mb) || cli_seed(&it, "--seed", &o->seed)) {
            if (it.why) return bad(flag, it.why);
            continue;
        }
        double d;
        if (!strcmp(flag, "--zero")) {
            long l;
            if (baton__parse_long(val, 0, 2, &l) < 0) return bad(flag, "expects 0, 1 or 2 (the ZeRO stage)");
            o->ddp.zero = (int)l;
        } else if (!strcmp(flag, "--model")) {
            if (strcmp(val, "mlp") && strcmp(val, "cnn")) return bad(flag, "expects mlp or cnn");
            o->model = val;
        } else if (!strcmp(flag, "--data")) {
            if (strcmp(val, "fashion-mnist") && strcmp(val, "synthetic"))
                return bad(flag, "expects fashion-mnist or synthetic");
            o->data = val;
        } else if (!strcmp(flag, "--data-dir")) {
            o->data_dir = val;
        } else if (!strcmp(flag, "--optim")) {
            if (strcmp(val, "sgd") && strcmp(val, "adamw") && strcmp(val, "lars") && strcmp(val, "lamb"))
                return bad(flag, "expects sgd, adamw, lars or lamb");
            o->optim = val;
        } else if (!strcmp(flag, "--schedule")) {
            if (strcmp(val, "cosine") && strcmp(val, "step") && strcmp(val, "const"))
                return bad(flag, "expects cosine, step or const");
            o->schedule = val;
        } else if (!strcmp(flag, "--hidden")) {
            if (parse_list(flag, val, o->mc.hidden, &o->mc.n_hidden)) return 2;
            hidden_set = 1;
        } else if (!strcmp(flag, "--channels")) {
            if (parse_list(flag, val, o->mc.channels, &o->mc.n_channels)) return 2;
            channels_set = 1;
        } else if (!strcmp(flag, "--metrics")) {
            const char *why = train_metrics_check_value(val);
            if (why) return bad(flag, why);
            o->metrics = val;
        } else if (!strcmp(flag, "--save")) {
            o->save = val;
        } else if (!strcmp(flag, "--grad-dtype")) {
            if (strcmp(val, "f32") && strcmp(val, "bf16") && strcmp(val, "f16")) return bad(flag, "expects f32, bf16 or f16");
            baton_dtype_parse(val, &o->ddp.grad_dtype);
        } else if (!strcmp(flag, "--loss-scale")) {
            if (!strcmp(val, "none")) o->ddp.loss_scale = BATON_LOSS_SCALE_NONE;
            else if (!strcmp(val, "static")) o->ddp.loss_scale = BATON_LOSS_SCALE_STATIC;
            else if (!strcmp(val, "dynamic")) o->ddp.loss_scale = BATON_LOSS_SCALE_DYNAMIC;
            else return bad(flag, "expects none, static or dynamic");
        } else if (!strcmp(flag, "--loss-scale-init")) {
            if (baton__parse_double(val, 1.0, 16777216.0, &d) < 0) return bad(flag, baton_last_error());
            o->ddp.loss_scale_init = (float)d;
        } else if (!strcmp(flag, "--lr-scaling")) {
            if (strcmp(val, "none") && strcmp(val, "linear")) return bad(flag, "expects none or linear");
            o->lr_linear = !strcmp(val, "linear");
        } else if (!strcmp(flag, "--trace")) {
            o->trace = val;
        } else if (!strcmp(flag, "--checkpoint")) {
            if (!*val) return bad(flag, "expects a directory");
            o->checkpoint = val;
        } else {
            return bad(flag, "unknown option");
        }
    }
    if (rc < 0) return bad(it.flag, it.why);
    int cnn = !strcmp(o->model, "cnn");
    o->mc.kind = cnn ? BATON_MODEL_CNN : BATON_MODEL_MLP;
    o->mc.in_c = 1;
    o->mc.in_h = o->mc.in_w = 28;
    o->mc.classes = 10;
    o->mc.dropout = (float)o->dropout;
    if (!hidden_set) {
        o->mc.n_hidden = cnn ? 1 : 2;
        o->mc.hidden[0] = cnn ? 128 : 1024;
        o->mc.hidden[1] = 1024;
    }
    if (!channels_set) {
        o->mc.n_channels = 2;
        o->mc.channels[0] = 32;
        o->mc.channels[1] = 64;
    } else if (!cnn) {
        return bad("--channels", "only applies to --model cnn");
    }
    if (!o->optim) o->optim = cnn ? "adamw" : "sgd";
    int adam = !strcmp(o->optim, "adamw") || !strcmp(o->optim, "lamb"), lars = !strcmp(o->optim, "lars");
    if (!o->lr_set) o->lr = !strcmp(o->optim, "lamb") ? 0.005 : adam ? 0.001 : lars ? 1.0 : 0.05;
    if (!o->wd_set) o->weight_decay = adam ? 0.01 : 5e-4;
    if (!o->trust_coef) o->trust_coef = 0.02;
    if (o->steps_set && !o->epochs_set) o->epochs = 100000;
    if ((o->resume || o->ckpt_every) && !o->checkpoint)
        return bad(o->resume ? "--resume" : "--checkpoint-every", "needs --checkpoint DIR");
    if ((!strcmp(o->optim, "lars") || !strcmp(o->optim, "lamb")) && o->ddp.zero)
        return bad("--optim", "lars and lamb need each layer whole for its trust ratio, which --zero splits across "
                   "ranks; use --zero 0 with them");
    if (o->bucket_auto && o->ddp.zero)
        return bad("--bucket-mb auto", "cannot be combined with --zero (trying caps rebuilds the engine, which would "
                   "re-shard the optimizer); give a size in MB");
    return 0;
}

/* The settings a resumed run must share with the checkpoint: they fix the shapes and the data order. The world
 * size, batch and accumulation may change (the position is converted, tools/train_zero.c). */
static void config_fingerprint(const train_opts *o, long world, char *out, size_t cap) {
    char h[128] = "", c[128] = "";
    for (int i = 0; i < o->mc.n_hidden; i++) snprintf(h + strlen(h), sizeof h - strlen(h), "%s%d", i ? "," : "", o->mc.hidden[i]);
    for (int i = 0; o->mc.kind == BATON_MODEL_CNN && i < o->mc.n_channels; i++)
        snprintf(c + strlen(c), sizeof c - strlen(c), "%s%d", i ? "," : "", o->mc.channels[i]);
    (void)world;
    snprintf(out, cap, "model=%s hidden=%s channels=%s dropout=%.9g optim=%s seed=%llu data=%s train_samples=%ld "
             "drop_last=%d", o->model, h, *c ? c : "-", o->dropout, o->optim, (unsigned long long)o->seed, o->data,
             !strcmp(o->data, "synthetic") ? o->train_samples : 0, o->drop_last);
}

/* --checkpoint without --resume needs a directory without checkpoints; with --resume, restores the newest
 * one (or notes that there is none) and hands back where to start and the schedule. Returns an exit code. */
static int start_from_checkpoint(const train_opts *o, const baton_ckpt_run *ck, long steps_per_epoch,
                                 baton_ckpt_state *pos, baton_lr_schedule *sched) {
    int talk = ck->rank == 0, rc, committed;
    long newest;
    if (!o->resume) {
        if (baton_ckpt_scan(o->checkpoint, &committed, &newest) < 0 || committed > 0) {
            fprintf(stderr, "baton train: --checkpoint %s: %s\n", o->checkpoint, committed > 0 ?
                    "already holds checkpoints; pass --resume to continue from them or choose an empty directory" :
                    baton_last_error());
            return 2;
        }
        return 0;
    }
    if ((rc = baton_ckpt_run_resume(ck, pos)) == BATON_ENOTFOUND) {
        if (talk) fprintf(stderr, "baton train: --resume: no complete checkpoint in %s yet; starting from step 0\n", o->checkpoint);
        memset(pos, 0, sizeof *pos);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "baton train: --resume: %s\n", baton_last_error());
        return rc == BATON_EMISMATCH ? 2 : 1;
    }
    if (train_resume_geometry(talk, pos, ck->world, o->batch * o->accum, steps_per_epoch, o->lr_linear) != 0) return 2;
    if ((pos->world == ck->world && pos->epoch * steps_per_epoch + pos->epoch_step != pos->step) ||
        pos->epoch_step >= steps_per_epoch || pos->sample_offset != pos->epoch_step * o->batch * o->accum) {
        fprintf(stderr, "baton train: --resume: %s/step-%ld: epoch %ld, step %ld of it, offset %ld do not fit %ld steps "
                "per epoch\n", o->checkpoint, pos->step, pos->epoch, pos->epoch_step, pos->sample_offset, steps_per_epoch);
        return 2;
    }
    char how[64];
    snprintf(how, sizeof how, o->steps_set ? "--steps %ld" : "--epochs %ld", o->steps_set ? o->steps : o->epochs);
    if ((rc = train_resume_schedule(talk, pos->step, sched->total, how, sched, &pos->sched)) != 0) return rc;
    if (talk)
        fprintf(stderr, "baton train: resuming from %s/step-%ld (epoch %ld, step %ld of it)\n", o->checkpoint, pos->step,
                pos->epoch + 1, pos->epoch_step);
    return 0;
}

#define SPAN(ev, t0) baton_trace_span(trace, BATON_TRACK_MAIN, ev, 0, t0, baton__now_ns())
/* The phases of a step are timed only when something uses the times (`timing`: metrics recording this step,
 * --trace, or the slow-rank knob), so --metrics none costs no clock readings. CLOCK() reads the clock then. */
#define CLOCK() (timing ? baton__now_ns() : 0)
/* A span of the step that also adds its duration (ms) to the step's metrics field. */
#define PHASE(ev, field, t0)                                                \
    do {                                                                    \
        if (timing) {                                                       \
            uint64_t t_end_ = baton__now_ns();                              \
            baton_trace_span(trace, BATON_TRACK_MAIN, ev, 0, t0, t_end_);   \
            mf[field] += (double)(t_end_ - (t0)) * 1e-6;                    \
        }                                                                   \
    } while (0)
#define LOSS_WINDOW 100

int baton_cmd_train(int argc, char **argv) {
    for (int i = 1; i < argc; i++)   /* the GPT trainer has its own options and loop (tools/train_gpt.c) */
        if ((!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "gpt")) || !strcmp(argv[i], "--model=gpt"))
            return baton_cmd_train_gpt(argc, argv);
    uint64_t t_start = baton__now_ns();
    train_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    /* Any launcher's variables (baton run, torchrun, mpirun, mpiexec, srun) make this a data-parallel job;
     * malformed ones are an error, never a silent run alone. */
    baton_launch_env le;
    if (baton_launch_env_read(&le) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        return 2;
    }
    long world = le.world;
    train_output outs[] = {{"--save", o.save, 0}, {"--trace", o.trace, 0}, {"--checkpoint", o.checkpoint, 1},
                          {"--metrics", o.metrics && strcmp(o.metrics, "none") ? o.metrics : NULL, 0}};
    if (le.rank == 0 && (rc = train_check_outputs(outs, (int)(sizeof outs / sizeof outs[0]))) != 0) return rc;
    int threads = train_threads(o.threads, &le);

    baton_comm *comm = NULL;
    baton_dataset train = {0}, test = {0};
    baton_model *model = NULL;
    baton_tape *tape = NULL, *etape = NULL;
    baton_optim *opt = NULL;
    baton_ddp *ddp = NULL;
    baton_trace *trace = NULL;
    double *rss_ranks = NULL;   /* every rank's resident set, for --json */
    baton_dist_sampler sampler = {0};
    batch_buf bb = {0}, eb = {0};
    train_metrics metrics = {0};
    tm_ab ab = {0};
    train_prefetch pf = {0};
    int exit_code = 1, rank = 0;
    if (world > 1 && baton_init(&comm, NULL) < 0) {
        fprintf(stderr, "baton train: joining the data-parallel job: %s\n", baton_last_error());
        return 1;
    }
    if (comm) {
        rank = baton_comm_rank(comm);
        world = baton_comm_size(comm);
    }
    if ((rc = train_load_data(o.data, o.data_dir, o.train_samples, o.seed, &train, &test)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    /* The model's input is the data's image shape (Fashion-MNIST's 28x28, or whatever IDX files were given). */
    o.mc.in_c = train.c;
    o.mc.in_h = train.h;
    o.mc.in_w = train.w;
    if ((rc = baton_model_new(&model, &o.mc, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        exit_code = 2;
        goto out;
    }
    baton_params *params = baton_model_params(model);
    int kind = !strcmp(o.optim, "adamw") ? BATON_OPTIM_ADAMW : !strcmp(o.optim, "lars") ? BATON_OPTIM_LARS
               : !strcmp(o.optim, "lamb") ? BATON_OPTIM_LAMB : BATON_OPTIM_SGD;
    baton_optim_config oc = {.kind = kind, .momentum = (float)o.momentum, .weight_decay = (float)o.weight_decay,
                             .beta1 = 0.9f, .beta2 = 0.999f, .eps = kind == BATON_OPTIM_LAMB ? 1e-6f : 1e-8f,
                             .trust_coef = (float)o.trust_coef};
    if ((rc = baton_optim_new(&opt, params, &oc)) < 0 ||
        (rc = baton_dist_sampler_init(&sampler, train.n, rank, (int)world, 1, o.drop_last, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    long per_step = o.batch * o.accum;   /* samples per rank per optimizer step */
    if (per_step > sampler.len) {
        fprintf(stderr, "baton train: --batch x --accum = %ld exceeds the %d training samples of each rank\n", per_step,
                sampler.len);
        exit_code = 2;
        goto out;
    }
    tape = baton_tape_new(params, o.seed);
    etape = baton_tape_new(params, o.seed);
    if (o.trace && !(trace = baton_trace_new(1 << 20))) rc = baton__fail(BATON_ENOMEM, "out of memory for --trace");
    if (!tape || !etape || train_batch_alloc(&bb, (int)o.batch, train.dim) || train_batch_alloc(&eb, (int)o.eval_batch, train.dim)) {
        fprintf(stderr, "baton train: out of memory\n");
        goto out;
    }
    o.ddp.trace = trace;   /* broadcasts rank 0's replica, checks it, builds the buckets, hooks the tape */
    if (rc < 0 || (rc = baton_ddp_new(&ddp, comm, params, tape, &o.ddp)) < 0 || (rc = baton_ddp_attach_optim(ddp, opt)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    long steps_per_epoch = sampler.len / per_step;
    long total = o.epochs * steps_per_epoch;
    if (o.steps_set && o.steps < total) total = o.steps;
    double lr = o.lr_linear ? o.lr * (double)world : o.lr;   /* the effective batch is per_step x world */
    baton_lr_schedule sched = {.kind = !strcmp(o.schedule, "cosine") ? BATON_SCHED_COSINE
                                       : !strcmp(o.schedule, "step") ? BATON_SCHED_STEP : BATON_SCHED_CONST,
                               .lr = (float)lr, .warmup = o.warmup < total ? o.warmup : total / 10,
                               .total = total, .min_lr = (float)o.min_lr,
                               .step_every = o.step_every ? o.step_every : steps_per_epoch, .gamma = (float)o.gamma};
    progress prog = {.tty = rank == 0 && isatty(STDERR_FILENO), .by_steps = o.steps_set, .total = total,
                     .log_every = o.log_every ? o.log_every : (steps_per_epoch / 5 > 0 ? steps_per_epoch / 5 : 1)};
    int talk = rank == 0 && (!o.json || prog.tty);   /* progress lines: rank 0 only */
    long epochs = (total + steps_per_epoch - 1) / steps_per_epoch;
    char config[BATON_CKPT_CONFIG_LEN];
    config_fingerprint(&o, world, config, sizeof config);
    baton_ckpt_run ck = {.dir = o.checkpoint, .comm = comm, .rank = rank, .world = (int)world, .params = params,
                         .opt = opt, .tape = tape, .ddp = ddp, .loss_scale = o.ddp.loss_scale, .config = config};
    baton_ckpt_state pos = {0};   /* where this process starts: step 0 unless resumed */
    long ckpt_every = o.ckpt_every ? o.ckpt_every : steps_per_epoch, die_at = -1, die_rank = world - 1, ckpts = 0;
    if (o.checkpoint && (exit_code = start_from_checkpoint(&o, &ck, steps_per_epoch, &pos, &sched)) != 0) goto out;
    if ((exit_code = train_metrics_open(&metrics, o.metrics, o.checkpoint, rank)) != 0) goto out;
    exit_code = 1;
    if (train_prefetch_start(&pf, &train, (int)o.batch, !o.no_prefetch) < 0) goto out;
    train_bucket_auto ba = {0};
    if (o.bucket_auto && train_bucket_auto_start(&ba, &ddp, comm, params, tape, opt, &o.ddp, total - pos.step) < 0) {
        fprintf(stderr, "baton train: --bucket-mb auto: %s\n", baton_last_error());
        goto out;
    }
    ck.ddp = ddp;
    /* Test knob (tests/test_observe.c): rank BATON_TEST_SLOW_RANK sleeps, at the end of each optimizer step,
     * BATON_TEST_SLOW_PCT % of the compute (forward + backward + optimizer) it just did: that rank's compute
     * is that much slower, counted where the straggler diagnosis counts it. Inert unless set. */
    long slow_rank = -1, slow_pct = 0;
    if (baton__env_long("BATON_TEST_SLOW_RANK", -1, 0, world - 1, &slow_rank) == BATON_EINVAL ||
        baton__env_long("BATON_TEST_SLOW_PCT", 0, 0, 10000, &slow_pct) == BATON_EINVAL) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    if (metrics.on && tm_ab_start(&ab, pos.step, total) < 0) goto out;
    /* Test knob (tests/test_ckpt_train.c): rank BATON_TEST_DIE_RANK (default the last) SIGKILLs itself as step
     * BATON_TEST_DIE_AT_STEP starts. Inert unless set. */
    if (baton__env_long("BATON_TEST_DIE_AT_STEP", -1, 0, LONG_MAX, &die_at) == BATON_EINVAL ||
        baton__env_long("BATON_TEST_DIE_RANK", world - 1, 0, world - 1, &die_rank) == BATON_EINVAL) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    if (talk)
        fprintf(stderr, "baton train: %s on %s, %zu parameters, %ld %s (%ld %s x %ld), %ld %s x batch %ld x accum %ld = "
                "effective batch %ld, %s lr %g%s, %d %s\n", o.model, o.data, baton_params_numel(params), total,
                cli_plural(total, "step", "steps"), epochs, cli_plural(epochs, "epoch", "epochs"), steps_per_epoch,
                world, cli_plural(world, "rank", "ranks"), o.batch, o.accum, per_step * world, o.optim, lr,
                o.lr_linear ? " (linear scaling)" : "", threads, cli_plural(threads, "thread/rank", "threads/rank"));
    char what[128];
    snprintf(what, sizeof what, "%s on %s", o.model, o.data);
    train_summary sum = {.what = what, .world = world, .threads = threads, .resumed_from = pos.step,
                         .save = o.save, .trace = o.trace, .checkpoint = o.checkpoint};

    double losses[LOSS_WINDOW] = {0}, initial_loss = 0.0, test_acc = 0.0, test_loss = 0.0;
    long step = pos.step, evaluated = 0;
    uint64_t train_ns = 0, ckpt_ns = 0, first_ns = 0;   /* first_ns: the first step this process ran */
    prog.first_step = pos.step;
    prog.start_ns = baton__now_ns();
    for (long epoch = pos.epoch; step < total; epoch++) {
        baton_dist_sampler_set_epoch(&sampler, epoch);
        long first_s = epoch == pos.epoch ? pos.epoch_step : 0, epoch_samples = steps_per_epoch * per_step;
        if (first_s < steps_per_epoch) train_prefetch_request(&pf, sampler.idx + first_s * per_step);
        double ep_loss = 0.0;
        long ep_correct = 0, ep_seen = 0, ep_steps = 0;
        uint64_t ep_t0 = baton__now_ns();
        for (long s = first_s; s < steps_per_epoch && step < total; s++, step++) {
            if (step == die_at && rank == die_rank) raise(SIGKILL);
            /* record: metrics on for this step (BATON_BENCH_METRICS_AB turns it off in every other block) */
            int record = metrics.on && tm_ab_recording(&ab, step), timing = record || trace != NULL || slow_pct > 0;
            uint64_t t0 = baton__now_ns(), t;
            double step_loss = 0.0, mf[TM_NF] = {0};
            baton_ddp_stats st0 = {0}, st1 = {0};
            if (record || ba.active) baton_ddp_get_stats(ddp, &st0);
            for (long k = 0; k < o.accum; k++) {   /* one optimizer step = accum micro-batches */
                int correct;
                t = CLOCK();
                train_prefetch_take(&pf, &bb.x, &bb.y);   /* gathered on the loader thread */
                long next = (s * o.accum + k + 1) * o.batch;
                if (next < epoch_samples) train_prefetch_request(&pf, sampler.idx + next);
                PHASE(BATON_EV_DATA, TM_DATA, t);
                t = CLOCK();
                uint64_t cpu = timing ? baton__thread_cpu_ns() : 0;
                baton_tape_reset(tape, 1);
                baton_tensor *loss = train_forward(model, tape, &train, &bb, (int)o.batch, &correct);
                PHASE(BATON_EV_FORWARD, TM_FWD, t);
                t = CLOCK();
                if (k == 0) baton_params_zero_grad(params);
                baton_ddp_prepare(ddp, k == o.accum - 1);   /* the last micro-batch's backward launches buckets */
                baton_tape_backward(tape, loss, baton_ddp_backward_scale(ddp) / (float)o.accum);
                if (timing) mf[TM_CPU] += (double)(baton__thread_cpu_ns() - cpu) * 1e-6;
                PHASE(BATON_EV_BACKWARD, TM_BWD, t);
                step_loss += loss->data[0] / (double)o.accum;
                ep_correct += correct;
                ep_seen += o.batch;
            }
            int skip;
            if (baton_ddp_finish(ddp, &skip) < 0) {   /* wait for every bucket; gradients averaged */
                fprintf(stderr, "\nbaton train: gradient all-reduce at step %ld: %s\n", step, baton_last_error());
                goto out;
            }
            t = CLOCK();
            float step_lr = baton_lr_at(&sched, step);
            if (!skip && baton_ddp_step(ddp, opt, step_lr, (float)o.clip, NULL) < 0) {   /* clip + step (+ ZeRO gather) */
                fprintf(stderr, "\nbaton train: optimizer step %ld: %s\n", step, baton_last_error());
                goto out;
            }
            if (rank == slow_rank && slow_pct > 0)
                baton__sleep_ns((uint64_t)((mf[TM_FWD] + mf[TM_BWD] + (double)(baton__now_ns() - t) * 1e-6) * 1e6 *
                                           (double)slow_pct / 100.0));
            PHASE(BATON_EV_OPTIM, TM_OPT, t);
            uint64_t t_step = baton__now_ns() - t0;
            if (step == pos.step) first_ns = t_step;
            train_ns += t_step;
            if (record || ba.active) baton_ddp_get_stats(ddp, &st1);
            if (record) {
                mf[TM_T0] = (double)t0 * 1e-6;
                mf[TM_STEP] = (double)t_step * 1e-6;
                mf[TM_EXPOSED] = (double)(st1.exposed_ns - st0.exposed_ns) * 1e-6;
                mf[TM_COMM] = (double)(st1.comm_ns - st0.comm_ns) * 1e-6;
                mf[TM_BYTES] = comm ? (double)st1.bytes_per_step : 0.0;
                mf[TM_LOSS] = step_loss;
                mf[TM_LR] = step_lr;
                mf[TM_EPOCH] = (double)epoch;
                uint64_t cn[TM_NCOLL];
                train_metrics_step(&metrics, step, mf, cn, baton_ddp_coll_times(ddp, cn, TM_NCOLL));
            }
            if (ba.active) {   /* may rebuild the engine with the next cap to try, or the one it keeps */
                if (train_bucket_auto_step(&ba, (double)(st1.exposed_ns - st0.exposed_ns) * 1e-6) < 0) {
                    fprintf(stderr, "\nbaton train: --bucket-mb auto: %s\n", baton_last_error());
                    goto out;
                }
                ck.ddp = ddp;
            }

            if (!isfinite(step_loss)) {
                fprintf(stderr, "\nbaton train: loss became %f at step %ld on rank %d; lower --lr or set --clip\n",
                        step_loss, step, rank);
                goto out;
            }
            if (step == pos.step) initial_loss = step_loss;
            losses[step % LOSS_WINDOW] = step_loss;
            ep_loss += step_loss;
            ep_steps++;
            double sps = (double)ep_seen * world / ((double)(baton__now_ns() - ep_t0) * 1e-9);
            progress_at at = {.epoch = epoch + 1, .epochs = epochs, .step_in_epoch = s + 1,
                              .steps_per_epoch = steps_per_epoch, .step = step + 1, .loss = ep_loss / ep_steps,
                              .acc = (double)ep_correct / ep_seen, .lr = step_lr, .sps = sps};
            if (rank == 0) train_progress_step(&prog, &at, s + 1 == steps_per_epoch || step + 1 == total);
            if (o.checkpoint && ((step + 1) % ckpt_every == 0 || step + 1 == total)) {
                t = baton__now_ns();
                baton_ckpt_state cs = {.step = step + 1, .epoch = epoch + (s + 1) / steps_per_epoch,
                                       .epoch_step = (s + 1) % steps_per_epoch,
                                       .sample_offset = (s + 1) % steps_per_epoch * per_step, .sched = sched};
                if (baton_ckpt_run_save(&ck, &cs) < 0) {
                    fprintf(stderr, "\nbaton train: checkpoint of step %ld: %s\n", step + 1, baton_last_error());
                    goto out;
                }
                ckpt_ns += baton__now_ns() - t;
                ckpts++;
                sum.last_checkpoint = step + 1;
            }
            if (ab.k) tm_ab_step(&ab, step, baton__now_ns() - t0);   /* the whole step, recorder included */
        }
        uint64_t t = baton__now_ns();
        if (train_evaluate_all(comm, model, etape, &test, (int)o.eval_batch, &eb, &test_acc, &test_loss) < 0) {
            fprintf(stderr, "baton train: evaluation: %s\n", baton_last_error());
            goto out;
        }
        SPAN(BATON_EV_EVAL, t);
        train_metrics_eval(&metrics, step, epoch + 1, test_acc, test_loss);
        evaluated++;
        train_summary_eval(&sum, epoch + 1, test_acc, test_loss);
        if (prog.tty) fputc('\n', stderr);
        if (rank == 0)
            fprintf(stderr, "epoch %ld/%ld: train loss %.4f acc %.2f%% (rank 0) | test loss %.4f acc %.2f%% | %.1f s\n",
                    epoch + 1, epochs, ep_loss / ep_steps, 100.0 * ep_correct / ep_seen, test_loss, 100.0 * test_acc,
                    (double)(baton__now_ns() - ep_t0) * 1e-9);
    }
    if (!evaluated && train_evaluate_all(comm, model, etape, &test, (int)o.eval_batch, &eb, &test_acc, &test_loss) < 0) {
        fprintf(stderr, "baton train: evaluation: %s\n", baton_last_error());   /* resumed at the last step */
        goto out;
    }
    if (!evaluated) train_summary_eval(&sum, pos.epoch, test_acc, test_loss);
    long ran = step - pos.step, window = ran < LOSS_WINDOW ? ran : LOSS_WINDOW;   /* steps this process ran */
    double final_loss = 0.0, secs = (double)train_ns * 1e-9;
    for (long i = 0; i < window; i++) final_loss += losses[(step - 1 - i) % LOSS_WINDOW] / window;
    /* the mean over ranks (each saw its own shard) and the slowest rank's time */
    double agg[3] = {final_loss / (double)world, secs, (double)(train_ns - first_ns) * 1e-9};
    if (comm && (baton_allreduce(comm, agg, agg, 1, BATON_F64, BATON_SUM) < 0 ||
                 baton_allreduce(comm, agg + 1, agg + 1, 2, BATON_F64, BATON_MAX) < 0)) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    final_loss = comm ? agg[0] : final_loss;
    secs = agg[1];
    /* the steps after the first: the first also maps the shared buffers and faults their pages in */
    double later_ms = ran > 1 ? 1e3 * agg[2] / (double)(ran - 1) : 0.0;
    if (o.json && !(rss_ranks = train_gather_rss(comm, rank, world))) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    double sps = secs > 0 ? (double)ran * per_step * world / secs : 0.0, step_ms = ran ? 1e3 * secs / ran : 0.0;
    baton_ddp_stats st;
    baton_ddp_get_stats(ddp, &st);
    tm_info mi = {.model = o.model, .data = o.data, .optim = o.optim, .world = world, .batch = o.batch,
                  .accum = o.accum, .steps_per_epoch = steps_per_epoch, .params = (long)baton_params_numel(params),
                  .bucket_note = o.bucket_auto ? ba.note : NULL};
    if (rank == 0 && o.bucket_auto) fprintf(stderr, "baton train: --bucket-mb %s\n", ba.note);
    tm_diagnosis diag;
    uint64_t t_fin = baton__now_ns();   /* the one-off cost at the end: gather, diagnose, write */
    if (train_metrics_finish(&metrics, comm, (int)world, &mi, &diag) < 0) goto out;
    double finish_ms = (double)(baton__now_ns() - t_fin) * 1e-6;
    if (rank == 0 && metrics.on) {   /* on stderr even with --json: the path is where the run's story is */
        fprintf(stderr, "baton train: %s\n", diag.text);
        fprintf(stderr, "baton train: metrics in %s; draw them with: baton report %s -o report.html\n", metrics.path,
                metrics.dir);
    }

    if (o.save && rank == 0) {
        if (train_save_model(o.save, params, &o.mc, o.data) < 0) {
            fprintf(stderr, "baton train: --save: %s\n", baton_last_error());
            goto out;
        }
    }
    if (trace && baton_trace_write(trace, comm, o.trace) < 0) {
        fprintf(stderr, "baton train: --trace: %s\n", baton_last_error());
        goto out;
    }
    if (talk) train_memory_summary(&sum, ddp, opt, o.ddp.zero);
    if (st.skipped)
        train_summary_add(&sum, "skipped", "%ld %s for non-finite gradients", st.skipped,
                          cli_plural(st.skipped, "step", "steps"));
    if (talk) {
        sum.wall_s = (double)(baton__now_ns() - t_start) * 1e-9;
        sum.train_s = secs;
        sum.steps = ran;
        sum.epochs = epochs - pos.epoch;
        sum.samples = (double)ran * per_step * world;
        sum.checkpoints = ckpts;
        train_summary_print(&sum, stderr);
    }
    if (o.json && rank == 0) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", o.model);
        cJSON_AddStringToObject(j, "data", o.data);
        cJSON_AddNumberToObject(j, "world_size", (double)world);
        cJSON_AddNumberToObject(j, "steps", (double)step);
        cJSON_AddNumberToObject(j, "resumed_from_step", (double)pos.step);
        cJSON_AddNumberToObject(j, "batch", (double)o.batch);
        cJSON_AddNumberToObject(j, "accum", (double)o.accum);
        cJSON_AddNumberToObject(j, "effective_batch", (double)(per_step * world));
        cJSON_AddNumberToObject(j, "lr", lr);
        cJSON_AddNumberToObject(j, "test_accuracy", test_acc);
        cJSON_AddNumberToObject(j, "test_loss", test_loss);
        cJSON_AddNumberToObject(j, "initial_loss", initial_loss);
        cJSON_AddNumberToObject(j, "final_loss", final_loss);
        cJSON_AddNumberToObject(j, "samples_per_sec", sps);
        cJSON_AddNumberToObject(j, "step_ms", step_ms);
        cJSON_AddNumberToObject(j, "step_ms_after_first", later_ms);
        cJSON_AddNumberToObject(j, "comm_exposed_ms", st.steps ? (double)st.exposed_ns * 1e-6 / st.steps : 0.0);
        cJSON_AddNumberToObject(j, "comm_ms", st.steps ? (double)st.comm_ns * 1e-6 / st.steps : 0.0);
        cJSON_AddNumberToObject(j, "bytes_per_step", (double)st.bytes_per_step);
        cJSON_AddNumberToObject(j, "buckets", st.buckets);
        cJSON_AddNumberToObject(j, "bucket_mb", o.ddp.bucket_mb);
        if (o.bucket_auto) cJSON_AddStringToObject(j, "bucket_auto", ba.note);
        cJSON_AddStringToObject(j, "grad_dtype", baton_dtype_name(o.ddp.grad_dtype));
        cJSON_AddBoolToObject(j, "overlap", o.ddp.overlap);
        cJSON_AddNumberToObject(j, "skipped_steps", (double)st.skipped);
        cJSON_AddNumberToObject(j, "loss_scale", st.loss_scale);
        cJSON_AddNumberToObject(j, "params", (double)baton_params_numel(params));
        cJSON_AddNumberToObject(j, "checkpoints", (double)ckpts);
        cJSON_AddNumberToObject(j, "checkpoint_ms", ckpts ? (double)ckpt_ns * 1e-6 / ckpts : 0.0);
        if (metrics.on) {
            cJSON_AddStringToObject(j, "metrics", metrics.path);
            cJSON_AddNumberToObject(j, "metrics_ms_per_step", train_metrics_ms_per_step(&metrics));
            cJSON_AddNumberToObject(j, "metrics_finish_ms", finish_ms);
            if (ab.k) train_ab_json(j, &ab);
            cJSON_AddNumberToObject(j, "straggler_rank", diag.straggler);
            cJSON_AddNumberToObject(j, "straggler_ratio", diag.ratio);
            cJSON_AddNumberToObject(j, "straggler_last_pct", diag.last_pct);
            cJSON_AddBoolToObject(j, "input_bound", diag.input_bound);
            cJSON_AddNumberToObject(j, "data_wait_pct", diag.data_pct);
            cJSON_AddStringToObject(j, "diagnosis", diag.text);
        }
        train_json_memory(j, ddp, opt, o.ddp.zero, rss_ranks, world);
        cJSON_AddNumberToObject(j, "threads", threads);
        char *js = cJSON_PrintUnformatted(j);
        if (js) printf("%s\n", js);
        free(js);
        cJSON_Delete(j);
    }
    exit_code = 0;
out:
    free(rss_ranks);
    train_prefetch_stop(&pf);
    train_metrics_free(&metrics);
    tm_ab_free(&ab);
    train_batch_free(&bb);
    train_batch_free(&eb);
    baton_ddp_free(ddp);
    baton_trace_free(trace);
    baton_tape_free(tape);
    baton_tape_free(etape);
    baton_optim_free(opt);
    baton_dist_sampler_free(&sampler);
    baton_model_free(model);
    baton_dataset_free(&train);
    baton_dataset_free(&test);
    baton_comm_free(comm);
    return exit_code;
}
