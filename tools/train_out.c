/* train_out.c: the outputs of `baton train`. train_check_outputs checks every output path before the
 * first step, so that a typo never costs a finished run: one table, one check for all of them (--save,
 * --trace, --checkpoint, and whatever output flag comes next: add a row in train.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "train.h"

/* Creates and removes a private file in dir: the real test of "can files be created here" (access(2)
 * says yes to root on a read-only mount or /proc). mkstemp opens with O_CREAT|O_EXCL, mode 0600. */
static int probe_dir(const char *flag, const char *dir) {
    char probe[4200];
    if (snprintf(probe, sizeof probe, "%s/.baton-probe-XXXXXX", dir) >= (int)sizeof probe) {
        fprintf(stderr, "baton train: %s: path too long\n", flag);
        return -1;
    }
    int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "baton train: %s: cannot create files in %s: %s; choose a writable directory\n", flag, dir,
                strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* The directory part of path ("." when there is none). */
static void parent_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static int check_one(const train_output *t) {
    struct stat st;
    char parent[4096];
    if (!*t->path) {
        fprintf(stderr, "baton train: %s: empty path\n", t->flag);
        return -1;
    }
    if (strlen(t->path) >= sizeof parent) {
        fprintf(stderr, "baton train: %s: path too long\n", t->flag);
        return -1;
    }
    int exists = stat(t->path, &st) == 0;
    if (t->is_dir && exists) {
        if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "baton train: %s %s: exists and is not a directory; name a directory\n", t->flag, t->path);
            return -1;
        }
        return probe_dir(t->flag, t->path);
    }
    if (!t->is_dir && exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: is a directory; name a file in it, e.g. %s/model.safetensors\n", t->flag,
                t->path, t->path);
        return -1;
    }
    if (!t->is_dir && exists && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: exists and is not a regular file\n", t->flag, t->path);
        return -1;
    }
    parent_of(t->path, parent, sizeof parent);
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "baton train: %s %s: directory %s does not exist; create it first (mkdir -p %s)\n", t->flag,
                t->path, parent, parent);
        return -1;
    }
    return probe_dir(t->flag, parent);
}

int train_check_outputs(const train_output *outs, int n) {
    for (int i = 0; i < n; i++)
        if (outs[i].path && check_one(&outs[i]) < 0) return 2;
    return 0;
}

/* ---- --save: the parameters and what a reader needs to use them ------------------------------------ */

static void join_ints(const int *v, int n, char *out, size_t cap) {
    out[0] = '\0';
    for (int i = 0; i < n; i++) snprintf(out + strlen(out), cap - strlen(out), "%s%d", i ? "," : "", v[i]);
}

int train_save_model(const char *path, const baton_params *params, const baton_model_config *mc, const char *data) {
    int cnn = mc->kind == BATON_MODEL_CNN;
    char hidden[128], channels[128], shape[64], classes[16], arch[512], mean[16], std[16], norm[160];
    join_ints(mc->hidden, mc->n_hidden, hidden, sizeof hidden);
    join_ints(mc->channels, cnn ? mc->n_channels : 0, channels, sizeof channels);
    snprintf(shape, sizeof shape, "%d,%d,%d", mc->in_c, mc->in_h, mc->in_w);
    snprintf(classes, sizeof classes, "%d", mc->classes);
    if (cnn)
        snprintf(arch, sizeof arch, "input (N,C,H,W) = (N,%s); per entry k of channels: convk = Conv2d(3x3, stride 1, "
                 "padding 1) + ReLU + MaxPool2d(2); flatten (C,H,W order); fc1 = Linear + ReLU; fc2 = Linear -> "
                 "logits", shape);
    else
        snprintf(arch, sizeof arch, "input flattened to (N,%d); per entry k of hidden: fck = Linear + ReLU; then one "
                 "more Linear -> logits", mc->in_c * mc->in_h * mc->in_w);
    const char *meta[32];
    int n = 0;
#define META(k, v) (meta[2 * n] = (k), meta[2 * n + 1] = (v), n++)
    META("format", "pt");
    META("producer", "baton train");
    META("model", cnn ? "cnn" : "mlp");
    META("architecture", arch);
    META("hidden", hidden);
    if (cnn) META("channels", channels);
    META("input_shape", shape);
    META("classes", classes);
    META("data", data);
    if (strcmp(data, "synthetic")) {   /* IDX images: pixels 0..255, standardized by the loader */
        snprintf(mean, sizeof mean, "%.4f", (double)BATON_FMNIST_MEAN);
        snprintf(std, sizeof std, "%.4f", (double)BATON_FMNIST_STD);
        snprintf(norm, sizeof norm, "x = (pixel / 255 - %s) / %s", mean, std);
        META("input_mean", mean);
        META("input_std", std);
        META("input_normalization", norm);
    } else {
        META("input_normalization", "none: synthetic inputs are generated as they are fed");
    }
#undef META
    return baton_st_save_params(path, params, meta, n);
}
