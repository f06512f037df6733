/* model.c: the built-in models. mlp: Linear+ReLU blocks then a Linear head. cnn: blocks of
 * conv3x3(pad 1)+ReLU+maxpool2, then Linear+ReLU, (dropout), Linear head. Parameters are created in
 * forward order and initialized deterministically from the seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "util/util.h"

struct baton_model {
    baton_model_config cfg;
    baton_params *params;
};

static int check_cfg(const baton_model_config *c) {
    if (c->in_c < 1 || c->in_h < 1 || c->in_w < 1 || c->in_c > 64 || c->in_h > 4096 || c->in_w > 4096)
        return baton__fail(BATON_EINVAL, "model: bad input shape %dx%dx%d", c->in_c, c->in_h, c->in_w);
    if (c->classes < 2 || c->classes > 100000)
        return baton__fail(BATON_EINVAL, "model: %d classes (need 2..100000)", c->classes);
    if (c->n_hidden < 0 || c->n_hidden > BATON_MAX_LAYERS)
        return baton__fail(BATON_EINVAL, "model: %d hidden layers (need 0..%d)", c->n_hidden, BATON_MAX_LAYERS);
    for (int i = 0; i < c->n_hidden; i++)
        if (c->hidden[i] < 1 || c->hidden[i] > 65536)
            return baton__fail(BATON_EINVAL, "model: hidden width %d (need 1..65536)", c->hidden[i]);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return baton__fail(BATON_EINVAL, "model: dropout %g (need 0 <= p < 1)", (double)c->dropout);
    if (c->kind == BATON_MODEL_CNN) {
        if (c->n_channels < 1 || c->n_channels > 4)
            return baton__fail(BATON_EINVAL, "cnn: %d conv blocks (need 1..4)", c->n_channels);
        if (c->n_hidden != 1) return baton__fail(BATON_EINVAL, "cnn: needs exactly one hidden linear width");
        int div = 1 << c->n_channels;
        if (c->in_h % div || c->in_w % div)
            return baton__fail(BATON_EINVAL, "cnn: %dx%d images are not divisible by %d (one 2x2 pool per block)",
                               c->in_h, c->in_w, div);
        for (int i = 0; i < c->n_channels; i++)
            if (c->channels[i] < 1 || c->channels[i] > 1024)
                return baton__fail(BATON_EINVAL, "cnn: %d channels (need 1..1024)", c->channels[i]);
    } else if (c->kind != BATON_MODEL_MLP) {
        return baton__fail(BATON_EINVAL, "model: unknown kind %d", c->kind);
    }
    return BATON_OK;
}

static void add(baton_param_info *v, int *n, const char *name, int ndim, int s0, int s1, int s2, int s3,
                int decay) {
    baton_param_info *p = &v[(*n)++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    int s[4] = {s0, s1, s2, s3};
    for (int i = 0; i < ndim; i++) p->shape[i] = s[i];
    p->decay = decay;
}

static void add_layer(baton_param_info *v, int *n, const char *prefix, int ndim, int s0, int s1, int s2,
                      int s3) {
    char name[40];
    snprintf(name, sizeof name, "%s.weight", prefix);
    add(v, n, name, ndim, s0, s1, s2, s3, 1);
    snprintf(name, sizeof name, "%s.bias", prefix);
    add(v, n, name, 1, s0, 0, 0, 0, 0);
}

int baton_model_new(baton_model **out, const baton_model_config *cfg, uint64_t seed) {
    *out = NULL;
    int rc = check_cfg(cfg);
    if (rc < 0) return rc;
    baton_param_info v[2 * (2 * BATON_MAX_LAYERS + 2)];
    int n = 0;
    char name[32];
    int in = cfg->in_c * cfg->in_h * cfg->in_w;
    if (cfg->kind == BATON_MODEL_MLP) {
        for (int i = 0; i < cfg->n_hidden; i++) {
            snprintf(name, sizeof name, "fc%d", i + 1);
            add_layer(v, &n, name, 2, cfg->hidden[i], in, 0, 0);
            in = cfg->hidden[i];
        }
        snprintf(name, sizeof name, "fc%d", cfg->n_hidden + 1);
        add_layer(v, &n, name, 2, cfg->classes, in, 0, 0);
    } else {
        int c = cfg->in_c, h = cfg->in_h, w = cfg->in_w;
        for (int i = 0; i < cfg->n_channels; i++) {
            snprintf(name, sizeof name, "conv%d", i + 1);
            add_layer(v, &n, name, 4, cfg->channels[i], c, 3, 3);
            c = cfg->channels[i];
            h /= 2;
            w /= 2;
        }
        add_layer(v, &n, "fc1", 2, cfg->hidden[0], c * h * w, 0, 0);
        add_layer(v, &n, "fc2", 2, cfg->classes, cfg->hidden[0], 0, 0);
    }
    baton_model *m = calloc(1, sizeof *m);
    if (!m) return baton__fail(BATON_ENOMEM, "model: out of memory");
    m->cfg = *cfg;
    rc = baton_params_new(&m->params, v, n);
    if (rc < 0) {
        free(m);
        return rc;
    }
    /* He-uniform (bound sqrt(6/fan_in)) for weights feeding a ReLU, 1/sqrt(fan_in) for the head; zero
     * biases. One RNG stream walks the parameters in order, so the same seed gives the same model. */
    baton_rng rng;
    baton_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        baton_tensor *p = baton_params_tensor(m->params, i);
        if (!v[i].decay) continue;
        size_t fan_in = p->n / (size_t)p->shape[0];
        int head = (i == n - 2);
        float bound = head ? 1.0f / sqrtf((float)fan_in) : sqrtf(6.0f / (float)fan_in);
        for (size_t j = 0; j < p->n; j++) p->data[j] = (2.0f * baton_rng_uniform(&rng) - 1.0f) * bound;
    }
    *out = m;
    return BATON_OK;
}

void baton_model_free(baton_model *m) {
    if (!m) return;
    baton_params_free(m->params);
    free(m);
}

baton_params *baton_model_params(baton_model *m) { return m->params; }
const baton_model_config *baton_model_cfg(const baton_model *m) { return &m->cfg; }

baton_tensor *baton_model_forward(baton_model *m, baton_tape *t, baton_tensor *x) {
    const baton_model_config *c = &m->cfg;
    baton_params *p = m->params;
    int bsz = x->shape[0], k = 0;
    BATON_ASSERT(x->n == (size_t)bsz * c->in_c * c->in_h * c->in_w);
    baton_tensor *h = x;
    if (c->kind == BATON_MODEL_MLP) {
        if (h->ndim != 2) h = baton_flatten(t, h);
        for (int i = 0; i < c->n_hidden; i++, k += 2)
            h = baton_linear(t, h, baton_params_tensor(p, k), baton_params_tensor(p, k + 1), BATON_ACT_RELU);
    } else {
        if (h->ndim != 4) {
            BATON_ASSERT(!h->grad);   /* reshaping a plain input: no gradient to share */
            h = baton_tape_input(t, 4, (int[]){bsz, c->in_c, c->in_h, c->in_w}, h->data);
        }
        for (int i = 0; i < c->n_channels; i++, k += 2) {
            h = baton_conv2d(t, h, baton_params_tensor(p, k), baton_params_tensor(p, k + 1), 1, 1);
            h = baton_relu(t, h);
            h = baton_maxpool2d(t, h, 2);
        }
        h = baton_flatten(t, h);
        h = baton_linear(t, h, baton_params_tensor(p, k), baton_params_tensor(p, k + 1), BATON_ACT_RELU);
        k += 2;
    }
    h = baton_dropout(t, h, c->dropout);
    return baton_linear(t, h, baton_params_tensor(p, k), baton_params_tensor(p, k + 1), BATON_ACT_NONE);
}

int baton_count_correct(const float *logits, const int32_t *labels, int m, int c) {
    int correct = 0;
    for (int i = 0; i < m; i++) {
        const float *r = logits + (size_t)i * c;
        int best = 0;
        for (int j = 1; j < c; j++)
            if (r[j] > r[best]) best = j;
        correct += best == labels[i];
    }
    return correct;
}
