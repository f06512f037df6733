/* train.c: `baton train`: train a model on Fashion-MNIST or synthetic data in one process.
 *
 * One optimizer step, top to bottom (see train_step):
 *   next_batch -> forward -> zero_grad -> backward   (repeated --accum times, gradients accumulate)
 *   -> [data-parallel gradient sync goes here] -> clip -> optimizer step
 * The sampler (src/data/sampler.c) already takes (rank, world), and evaluate() works on a range of test
 * indices and returns (correct, count, loss sum), so both can be sharded and summed across ranks. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/data.h"
#include "baton/nn.h"
#include "ckpt/safetensors.h"
#include "commands.h"
#include "util/util.h"

typedef struct {
    const char *model, *data, *optim, *schedule, *save, *data_dir;
    long epochs, steps, batch, accum, threads, warmup, step_every, eval_batch, train_samples, log_every;
    double lr, momentum, weight_decay, clip, gamma, dropout, min_lr;
    uint64_t seed;
    int json, epochs_set, steps_set, lr_set, optim_set, wd_set;
    baton_model_config mc;
} train_opts;

static const char usage_text[] =
    "usage: baton train [options]\n"
    "  --model mlp|cnn        model (default mlp: 784-1024-1024-10; cnn: conv32-conv64-fc128)\n"
    "  --hidden LIST          hidden widths, e.g. 1024,1024 (mlp) or 128 (cnn)\n"
    "  --channels LIST        cnn conv channels per block, e.g. 32,64\n"
    "  --dropout P            dropout before the last layer (default 0)\n"
    "  --data fashion-mnist|synthetic   (default fashion-mnist; --data-dir DIR overrides the location)\n"
    "  --train-samples N      synthetic training set size (default 60000; test set is 10000)\n"
    "  --epochs E             epochs (default 5, or unlimited when only --steps is given)\n"
    "  --steps S              stop after S optimizer steps\n"
    "  --batch B              samples per step (default 128)\n"
    "  --accum K              accumulate gradients over K batches per step (default 1)\n"
    "  --optim sgd|adamw      (default sgd for mlp, adamw for cnn)\n"
    "  --lr LR                peak learning rate (default 0.05 sgd, 0.001 adamw)\n"
    "  --momentum M           sgd momentum (default 0.9)\n"
    "  --weight-decay WD      (default 5e-4 sgd, 0.01 adamw)\n"
    "  --schedule cosine|step|const   decay after warmup (default cosine)\n"
    "  --warmup N             warmup steps (default 100)\n"
    "  --step-every N --gamma G       step decay: lr *= G every N steps (defaults 1 epoch, 0.1)\n"
    "  --clip NORM            clip gradients to this global norm (default 0 = off)\n"
    "  --seed N               seed for init, shuffling and dropout (default 1)\n"
    "  --threads T            compute threads (default: cores / local world size)\n"
    "  --eval-batch N         evaluation batch (default 1000)\n"
    "  --log-every N          progress line every N steps when stderr is not a terminal\n"
    "  --save FILE.safetensors        write the final parameters\n"
    "  --json                 print one final JSON line on stdout\n"
    "  not supported yet: --bucket-mb --no-overlap --grad-dtype --checkpoint --resume --trace\n";

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
    int hidden_set = 0, channels_set = 0;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0) return bad(a, "unexpected argument");
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        if (fl >= sizeof flag) return bad(a, "unknown option");
        memcpy(flag, a, fl);
        flag[fl] = '\0';
        if (!strcmp(flag, "--help")) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (!strcmp(flag, "--json")) { o->json = 1; continue; }
        if (!strcmp(flag, "--no-overlap") || !strcmp(flag, "--resume"))
            return bad(flag, "not supported yet (data-parallel / checkpointing features come in a later release)");
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return bad(flag, "needs a value");
        long l;
        double d;
        uint64_t u;
#define LONG_OPT(name, field, lo, hi)                                                  \
    if (!strcmp(flag, name)) {                                                       \
        if (baton__parse_long(val, lo, hi, &l) < 0) return bad(flag, baton_last_error()); \
        o->field = l;                                                                \
        continue;                                                                    \
    }
#define DBL_OPT(name, field, lo, hi)                                                     \
    if (!strcmp(flag, name)) {                                                         \
        if (baton__parse_double(val, lo, hi, &d) < 0) return bad(flag, baton_last_error()); \
        o->field = d;                                                                  \
        continue;                                                                      \
    }
        if (!strcmp(flag, "--epochs")) o->epochs_set = 1;
        if (!strcmp(flag, "--steps")) o->steps_set = 1;
        if (!strcmp(flag, "--lr")) o->lr_set = 1;
        if (!strcmp(flag, "--weight-decay")) o->wd_set = 1;
        LONG_OPT("--epochs", epochs, 1, 100000)
        LONG_OPT("--steps", steps, 1, 1000000000)
        LONG_OPT("--batch", batch, 1, 65536)
        LONG_OPT("--accum", accum, 1, 4096)
        LONG_OPT("--threads", threads, 1, 1024)
        LONG_OPT("--warmup", warmup, 0, 1000000000)
        LONG_OPT("--step-every", step_every, 1, 1000000000)
        LONG_OPT("--eval-batch", eval_batch, 1, 65536)
        LONG_OPT("--train-samples", train_samples, 1, 10000000)
        LONG_OPT("--log-every", log_every, 1, 1000000000)
        DBL_OPT("--lr", lr, 1e-12, 100.0)
        DBL_OPT("--momentum", momentum, 0.0, 0.999999)
        DBL_OPT("--weight-decay", weight_decay, 0.0, 10.0)
        DBL_OPT("--clip", clip, 0.0, 1e9)
        DBL_OPT("--gamma", gamma, 1e-9, 1.0)
        DBL_OPT("--dropout", dropout, 0.0, 0.99)
        DBL_OPT("--min-lr", min_lr, 0.0, 100.0)
        if (!strcmp(flag, "--seed")) {
            if (baton__parse_size(val, UINT64_MAX, &u) < 0 || strpbrk(val, "kKmMgGbB"))
                return bad(flag, "expects a non-negative integer");
            o->seed = u;
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
            if (strcmp(val, "sgd") && strcmp(val, "adamw")) return bad(flag, "expects sgd or adamw");
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
        } else if (!strcmp(flag, "--save")) {
            o->save = val;
        } else if (!strcmp(flag, "--bucket-mb") || !strcmp(flag, "--grad-dtype") || !strcmp(flag, "--checkpoint") ||
                   !strcmp(flag, "--trace")) {
            return bad(flag, "not supported yet (data-parallel / checkpointing features come in a later release)");
        } else {
            return bad(flag, "unknown option");
        }
#undef LONG_OPT
#undef DBL_OPT
    }
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
    int adam = !strcmp(o->optim, "adamw");
    if (!o->lr_set) o->lr = adam ? 0.001 : 0.05;
    if (!o->wd_set) o->weight_decay = adam ? 0.01 : 5e-4;
    if (o->steps_set && !o->epochs_set) o->epochs = 100000;
    return 0;
}

/* ---- pieces of the loop -------------------------------------------------------------------------------- */
typedef struct {
    float *x;            /* (B, dim) */
    int32_t *y;          /* (B) */
} batch_buf;

/* Copies the next B samples of this rank's shard into buf. */
static void next_batch(const baton_dataset *ds, const baton_sampler *s, long pos, int b, batch_buf *buf) {
    baton_dataset_gather(ds, s->idx + pos, b, buf->x, buf->y);
}

/* Forward of one batch: returns the mean loss tensor; *correct gets the batch's correct predictions. */
static baton_tensor *forward(baton_model *m, baton_tape *t, const baton_dataset *ds, batch_buf *buf, int b,
                             int *correct) {
    baton_tensor *x = baton_tape_input(t, 2, (int[]){b, ds->dim}, buf->x);
    baton_tensor *logits = baton_model_forward(m, t, x);
    *correct = baton_count_correct(logits->data, buf->y, b, ds->classes);
    return baton_cross_entropy(t, logits, buf->y);
}

/* Evaluates test samples [begin, end) in batches: the pieces a data-parallel run shards and sums. */
static void evaluate(baton_model *m, baton_tape *t, const baton_dataset *ds, long begin, long end, int eb,
                     batch_buf *buf, long *correct, long *count, double *loss_sum) {
    *correct = *count = 0;
    *loss_sum = 0.0;
    for (long i = begin; i < end; i += eb) {
        int b = (int)(end - i < eb ? end - i : eb);
        memcpy(buf->x, ds->x + (size_t)i * ds->dim, (size_t)b * ds->dim * sizeof(float));
        memcpy(buf->y, ds->y + i, (size_t)b * sizeof(int32_t));
        baton_tape_reset(t, 0);
        int c;
        baton_tensor *loss = forward(m, t, ds, buf, b, &c);
        *correct += c;
        *count += b;
        *loss_sum += (double)loss->data[0] * b;
    }
}

static int batch_alloc(batch_buf *b, int n, int dim) {
    b->x = malloc((size_t)n * dim * sizeof(float));
    b->y = malloc((size_t)n * sizeof(int32_t));
    return b->x && b->y ? 0 : -1;
}
static void batch_free(batch_buf *b) {
    free(b->x);
    free(b->y);
}

/* ---- progress -------------------------------------------------------------------------------------------- */
typedef struct {
    int tty;
    long log_every;
    uint64_t last_draw_ns;
} progress;

static void progress_step(progress *p, long epoch, long epochs, long step_in_epoch, long steps_per_epoch,
                          double loss, double acc, double sps, int force) {
    if (p->tty) {
        uint64_t now = baton__now_ns();
        if (!force && now - p->last_draw_ns < 100000000ull) return;
        p->last_draw_ns = now;
        int width = 24, fill = (int)(width * step_in_epoch / (steps_per_epoch ? steps_per_epoch : 1));
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\repoch %ld/%ld [%s] %ld/%ld  loss %.4f  acc %.2f%%  %.0f samples/s   ", epoch, epochs,
                bar, step_in_epoch, steps_per_epoch, loss, 100.0 * acc, sps);
    } else if (force || step_in_epoch % p->log_every == 0) {
        fprintf(stderr, "epoch %ld/%ld step %ld/%ld  loss %.4f  acc %.2f%%  %.0f samples/s\n", epoch, epochs,
                step_in_epoch, steps_per_epoch, loss, 100.0 * acc, sps);
    }
}

static int default_threads(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN), local = 1;
    if (baton__env_long("BATON_LOCAL_WORLD_SIZE", 1, 1, 4096, &local) == BATON_ENOTFOUND)
        baton__env_long("LOCAL_WORLD_SIZE", 1, 1, 4096, &local);
    long t = cores > 0 ? cores / local : 1;
    return t < 1 ? 1 : (int)t;
}

#define LOSS_WINDOW 100

int baton_cmd_train(int argc, char **argv) {
    train_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    long world = 1;
    if (baton__env_long("BATON_WORLD_SIZE", 1, 1, 1 << 20, &world) == BATON_ENOTFOUND)
        baton__env_long("WORLD_SIZE", 1, 1, 1 << 20, &world);
    if (world > 1) {
        fprintf(stderr, "baton train: data-parallel training (world size %ld) is not supported yet; run "
                        "baton train without baton run\n", world);
        return 2;
    }
    baton_set_threads(o.threads ? (int)o.threads : default_threads());

    baton_dataset train = {0}, test = {0};
    baton_model *model = NULL;
    baton_tape *tape = NULL, *etape = NULL;
    baton_optim *opt = NULL;
    baton_sampler sampler = {0};
    batch_buf bb = {0}, eb = {0};
    int exit_code = 1;
    if (!strcmp(o.data, "synthetic")) {
        rc = baton_dataset_synthetic(&train, (int)o.train_samples, 1, 28, 28, 10, o.seed);
        if (rc >= 0) rc = baton_dataset_synthetic(&test, 10000, 1, 28, 28, 10, o.seed);
        /* same prototypes (same seed), different noise: regenerate the test set from its own stream */
        if (rc >= 0) {
            baton_dataset full;
            rc = baton_dataset_synthetic(&full, (int)o.train_samples + 10000, 1, 28, 28, 10, o.seed);
            if (rc >= 0) {
                memcpy(test.x, full.x + (size_t)o.train_samples * full.dim, (size_t)10000 * full.dim * sizeof(float));
                memcpy(test.y, full.y + o.train_samples, 10000 * sizeof(int32_t));
                memcpy(train.x, full.x, (size_t)o.train_samples * full.dim * sizeof(float));
                memcpy(train.y, full.y, (size_t)o.train_samples * sizeof(int32_t));
                baton_dataset_free(&full);
            }
        }
    } else {
        rc = baton_dataset_fashion_mnist(&train, &test, o.data_dir);
    }
    if (rc < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    long per_step = o.batch * o.accum;
    if (per_step > train.n) {
        fprintf(stderr, "baton train: --batch x --accum = %ld exceeds the %d training samples\n", per_step, train.n);
        exit_code = 2;
        goto out;
    }
    if ((rc = baton_model_new(&model, &o.mc, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        exit_code = 2;
        goto out;
    }
    baton_params *params = baton_model_params(model);
    baton_optim_config oc = {.kind = strcmp(o.optim, "adamw") ? BATON_OPTIM_SGD : BATON_OPTIM_ADAMW,
                             .momentum = (float)o.momentum, .weight_decay = (float)o.weight_decay,
                             .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    if ((rc = baton_optim_new(&opt, params, &oc)) < 0 ||
        (rc = baton_sampler_init(&sampler, train.n, 0, 1, 1, o.seed)) < 0) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        goto out;
    }
    tape = baton_tape_new(params, o.seed);
    etape = baton_tape_new(params, o.seed);
    if (!tape || !etape || batch_alloc(&bb, (int)o.batch, train.dim) || batch_alloc(&eb, (int)o.eval_batch, train.dim)) {
        fprintf(stderr, "baton train: out of memory\n");
        goto out;
    }
    long steps_per_epoch = sampler.len / per_step;
    long total = o.epochs * steps_per_epoch;
    if (o.steps_set && o.steps < total) total = o.steps;
    baton_lr_schedule sched = {.kind = !strcmp(o.schedule, "cosine") ? BATON_SCHED_COSINE
                                       : !strcmp(o.schedule, "step") ? BATON_SCHED_STEP : BATON_SCHED_CONST,
                               .lr = (float)o.lr, .warmup = o.warmup < total ? o.warmup : total / 10,
                               .total = total, .min_lr = (float)o.min_lr,
                               .step_every = o.step_every ? o.step_every : steps_per_epoch, .gamma = (float)o.gamma};
    progress prog = {.tty = isatty(STDERR_FILENO),
                     .log_every = o.log_every ? o.log_every : (steps_per_epoch / 5 > 0 ? steps_per_epoch / 5 : 1)};
    long epochs = (total + steps_per_epoch - 1) / steps_per_epoch;
    if (!o.json || prog.tty)
        fprintf(stderr, "baton train: %s on %s, %zu parameters, %ld steps (%ld epochs x %ld), batch %ld x accum %ld, "
                        "%s lr %g, %d threads\n", o.model, o.data, baton_params_numel(params), total, epochs,
                steps_per_epoch, o.batch, o.accum, o.optim, o.lr, o.threads ? (int)o.threads : default_threads());

    double losses[LOSS_WINDOW], initial_loss = 0.0, test_acc = 0.0, test_loss = 0.0;
    long step = 0;
    uint64_t train_ns = 0;
    for (long epoch = 0; step < total; epoch++) {
        baton_sampler_set_epoch(&sampler, epoch);
        double ep_loss = 0.0;
        long ep_correct = 0, ep_seen = 0, ep_steps = 0;
        uint64_t ep_t0 = baton__now_ns();
        for (long s = 0; s < steps_per_epoch && step < total; s++, step++) {
            uint64_t t0 = baton__now_ns();
            double step_loss = 0.0;
            for (long k = 0; k < o.accum; k++) {   /* one optimizer step = accum micro-batches */
                int correct;
                next_batch(&train, &sampler, (s * o.accum + k) * o.batch, (int)o.batch, &bb);
                baton_tape_reset(tape, 1);
                baton_tensor *loss = forward(model, tape, &train, &bb, (int)o.batch, &correct);
                if (k == 0) baton_params_zero_grad(params);
                baton_tape_backward(tape, loss, 1.0f / (float)o.accum);
                step_loss += loss->data[0] / (double)o.accum;
                ep_correct += correct;
                ep_seen += o.batch;
            }
            /* [data-parallel: all-reduce and average the gradient slab here] */
            if (o.clip > 0) baton_clip_grad_norm(params, (float)o.clip);
            baton_optim_step(opt, baton_lr_at(&sched, step));
            train_ns += baton__now_ns() - t0;

            if (!isfinite(step_loss)) {
                fprintf(stderr, "\nbaton train: loss became %f at step %ld; lower --lr or set --clip\n", step_loss, step);
                goto out;
            }
            if (step == 0) initial_loss = step_loss;
            losses[step % LOSS_WINDOW] = step_loss;
            ep_loss += step_loss;
            ep_steps++;
            double sps = (double)ep_seen / ((double)(baton__now_ns() - ep_t0) * 1e-9);
            progress_step(&prog, epoch + 1, epochs, s + 1, steps_per_epoch, ep_loss / ep_steps,
                          (double)ep_correct / ep_seen, sps, s + 1 == steps_per_epoch || step + 1 == total);
        }
        long correct, count;
        double lsum;
        evaluate(model, etape, &test, 0, test.n, (int)o.eval_batch, &eb, &correct, &count, &lsum);
        test_acc = (double)correct / count;
        test_loss = lsum / count;
        if (prog.tty) fputc('\n', stderr);
        fprintf(stderr, "epoch %ld/%ld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s\n", epoch + 1,
                epochs, ep_loss / ep_steps, 100.0 * ep_correct / ep_seen, test_loss, 100.0 * test_acc,
                (double)(baton__now_ns() - ep_t0) * 1e-9);
    }
    long window = step < LOSS_WINDOW ? step : LOSS_WINDOW;
    double final_loss = 0.0;
    for (long i = 0; i < window; i++) final_loss += losses[i] / window;
    double secs = (double)train_ns * 1e-9;
    double sps = secs > 0 ? (double)step * per_step / secs : 0.0, step_ms = step ? 1e3 * secs / step : 0.0;

    if (o.save) {
        char hidden[128] = "";
        for (int i = 0; i < o.mc.n_hidden; i++)
            snprintf(hidden + strlen(hidden), sizeof hidden - strlen(hidden), "%s%d", i ? "," : "", o.mc.hidden[i]);
        const char *meta[] = {"format", "pt", "producer", "baton train", "model", o.model, "hidden", hidden};
        if (baton_st_save_params(o.save, params, meta, 4) < 0) {
            fprintf(stderr, "baton train: --save: %s\n", baton_last_error());
            goto out;
        }
    }
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", o.model);
        cJSON_AddStringToObject(j, "data", o.data);
        cJSON_AddNumberToObject(j, "world_size", 1);
        cJSON_AddNumberToObject(j, "steps", (double)step);
        cJSON_AddNumberToObject(j, "batch", (double)o.batch);
        cJSON_AddNumberToObject(j, "accum", (double)o.accum);
        cJSON_AddNumberToObject(j, "test_accuracy", test_acc);
        cJSON_AddNumberToObject(j, "test_loss", test_loss);
        cJSON_AddNumberToObject(j, "initial_loss", initial_loss);
        cJSON_AddNumberToObject(j, "final_loss", final_loss);
        cJSON_AddNumberToObject(j, "samples_per_sec", sps);
        cJSON_AddNumberToObject(j, "step_ms", step_ms);
        cJSON_AddNumberToObject(j, "comm_exposed_ms", 0);
        cJSON_AddNumberToObject(j, "params", (double)baton_params_numel(params));
        cJSON_AddNumberToObject(j, "threads", o.threads ? (double)o.threads : (double)default_threads());
        char *s = cJSON_PrintUnformatted(j);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
    }
    exit_code = 0;
out:
    batch_free(&bb);
    batch_free(&eb);
    baton_tape_free(tape);
    baton_tape_free(etape);
    baton_optim_free(opt);
    baton_sampler_free(&sampler);
    baton_model_free(model);
    baton_dataset_free(&train);
    baton_dataset_free(&test);
    return exit_code;
}
