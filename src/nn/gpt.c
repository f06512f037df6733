/* gpt.c: the GPT model of baton/gpt.h: parameters, initialization, forward (recorded on the tape, so
 * backward is the tape's), the loss over token windows, and sampling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/gpt.h"
#include "nn/nn_impl.h"
#include "util/util.h"

struct baton_gpt {
    baton_gpt_config cfg;
    baton_params *params;
};

enum { P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_PROJW, P_PROJB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_FC2W, P_FC2B, P_BLOCK };

static int check_cfg(const baton_gpt_config *c) {
    if (c->vocab < 2 || c->vocab > 65536) return baton__fail(BATON_EINVAL, "gpt: vocabulary of %d (need 2..65536)", c->vocab);
    if (c->context < 1 || c->context > 4096) return baton__fail(BATON_EINVAL, "gpt: context %d (need 1..4096)", c->context);
    if (c->layers < 1 || c->layers > 64) return baton__fail(BATON_EINVAL, "gpt: %d layers (need 1..64)", c->layers);
    if (c->heads < 1 || c->heads > 256) return baton__fail(BATON_EINVAL, "gpt: %d heads (need 1..256)", c->heads);
    if (c->dim < 1 || c->dim > 16384 || c->dim % c->heads)
        return baton__fail(BATON_EINVAL, "gpt: dim %d must be 1..16384 and divisible by the %d heads", c->dim, c->heads);
    return BATON_OK;
}

static void put(baton_param_info *v, int *n, int decay, int ndim, int s0, int s1, const char *fmt, int i) {
    baton_param_info *p = &v[(*n)++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, fmt, i);
    p->ndim = ndim;
    p->shape[0] = s0;
    p->shape[1] = s1;
    p->decay = decay;
}

int baton_gpt_new(baton_gpt **out, const baton_gpt_config *cfg, uint64_t seed) {
    *out = NULL;
    int rc = check_cfg(cfg);
    if (rc < 0) return rc;
    int np = 2 + P_BLOCK * cfg->layers + 2, n = 0, c = cfg->dim;
    baton_param_info *v = calloc((size_t)np, sizeof *v);
    baton_gpt *g = calloc(1, sizeof *g);
    if (!v || !g) {
        free(v);
        free(g);
        return baton__fail(BATON_ENOMEM, "gpt: out of memory");
    }
    put(v, &n, 1, 2, cfg->vocab, c, "wte.weight", 0);
    put(v, &n, 1, 2, cfg->context, c, "wpe.weight", 0);
    for (int i = 0; i < cfg->layers; i++) {
        put(v, &n, 0, 1, c, 0, "h.%d.ln_1.weight", i);
        put(v, &n, 0, 1, c, 0, "h.%d.ln_1.bias", i);
        put(v, &n, 1, 2, 3 * c, c, "h.%d.attn.c_attn.weight", i);
        put(v, &n, 0, 1, 3 * c, 0, "h.%d.attn.c_attn.bias", i);
        put(v, &n, 1, 2, c, c, "h.%d.attn.c_proj.weight", i);
        put(v, &n, 0, 1, c, 0, "h.%d.attn.c_proj.bias", i);
        put(v, &n, 0, 1, c, 0, "h.%d.ln_2.weight", i);
        put(v, &n, 0, 1, c, 0, "h.%d.ln_2.bias", i);
        put(v, &n, 1, 2, 4 * c, c, "h.%d.mlp.c_fc.weight", i);
        put(v, &n, 0, 1, 4 * c, 0, "h.%d.mlp.c_fc.bias", i);
        put(v, &n, 1, 2, c, 4 * c, "h.%d.mlp.c_proj.weight", i);
        put(v, &n, 0, 1, c, 0, "h.%d.mlp.c_proj.bias", i);
    }
    put(v, &n, 0, 1, c, 0, "ln_f.weight", 0);
    put(v, &n, 0, 1, c, 0, "ln_f.bias", 0);
    rc = baton_params_new(&g->params, v, n);
    if (rc < 0) {
        free(v);
        free(g);
        return rc;
    }
    g->cfg = *cfg;
    baton_rng rng;
    baton_rng_seed(&rng, seed);
    float proj_std = 0.02f / sqrtf(2.0f * (float)cfg->layers);
    for (int i = 0; i < n; i++) {
        baton_tensor *p = baton_params_tensor(g->params, i);
        const char *name = v[i].name;
        size_t len = strlen(name);
        if (v[i].decay) {
            float sd = strstr(name, "c_proj.weight") ? proj_std : 0.02f;
            for (size_t j = 0; j < p->n; j++) p->data[j] = sd * baton_rng_normal(&rng);
        } else if (len > 7 && !strcmp(name + len - 7, ".weight")) {   /* LayerNorm gains */
            for (size_t j = 0; j < p->n; j++) p->data[j] = 1.0f;
        }
    }
    free(v);
    *out = g;
    return BATON_OK;
}

void baton_gpt_free(baton_gpt *g) {
    if (!g) return;
    baton_params_free(g->params);
    free(g);
}

baton_params *baton_gpt_params(baton_gpt *g) { return g->params; }
const baton_gpt_config *baton_gpt_cfg(const baton_gpt *g) { return &g->cfg; }

baton_tensor *baton_gpt_forward(baton_gpt *g, baton_tape *t, const int32_t *ids, int b, int tlen) {
    const baton_gpt_config *c = &g->cfg;
    BATON_ASSERT(b >= 1 && tlen >= 1 && tlen <= c->context);
    baton_params *p = g->params;
    int m = b * tlen;
    int32_t *pos = baton__arena_alloc(t, (size_t)m * sizeof *pos);
    for (int i = 0; i < m; i++) pos[i] = i % tlen;
    /* x (M,C) = wte[ids] + wpe[pos] */
    baton_tensor *x = baton_add(t, baton_embedding(t, ids, m, baton_params_tensor(p, 0)),
                                baton_embedding(t, pos, m, baton_params_tensor(p, 1)));
    for (int l = 0; l < c->layers; l++) {
        int k = 2 + l * P_BLOCK;
#define W(i) baton_params_tensor(p, k + (i))
        /* baton__feeds_products: the next op's output is read only by the linear layer after it (or the head),
         * so under bf16 products it is written as its bf16 copy only (nn_impl.h) */
        baton__feeds_products(t);
        baton_tensor *h = baton_layernorm(t, x, W(P_LN1W), W(P_LN1B), 1e-5f);
        baton__feeds_products(t);   /* qkv: read by attention's bf16 products only */
        h = baton_linear(t, h, W(P_QKVW), W(P_QKVB), BATON_ACT_NONE);          /* (M, 3C) */
        baton__feeds_products(t);
        h = baton_attention(t, h, b, c->heads);                                  /* (M, C) */
        x = baton_add(t, x, baton_linear(t, h, W(P_PROJW), W(P_PROJB), BATON_ACT_NONE));
        baton__feeds_products(t);
        h = baton_layernorm(t, x, W(P_LN2W), W(P_LN2B), 1e-5f);
        baton__feeds_products(t);
        h = baton_linear(t, h, W(P_FCW), W(P_FCB), BATON_ACT_GELU);             /* (M, 4C) */
        x = baton_add(t, x, baton_linear(t, h, W(P_FC2W), W(P_FC2B), BATON_ACT_NONE));
#undef W
    }
    int k = 2 + c->layers * P_BLOCK;
    baton__feeds_products(t);
    x = baton_layernorm(t, x, baton_params_tensor(p, k), baton_params_tensor(p, k + 1), 1e-5f);
    return baton_matmul(t, x, baton_params_tensor(p, 0), 1);                    /* (M, V), tied head */
}

baton_tensor *baton_gpt_loss(baton_gpt *g, baton_tape *t, const int32_t *windows, int b, int tlen) {
    int m = b * tlen;
    int32_t *ids = baton__arena_alloc(t, 2 * (size_t)m * sizeof *ids), *tgt = ids + m;
    for (int i = 0; i < b; i++) {
        memcpy(ids + (size_t)i * tlen, windows + (size_t)i * (tlen + 1), (size_t)tlen * sizeof *ids);
        memcpy(tgt + (size_t)i * tlen, windows + (size_t)i * (tlen + 1) + 1, (size_t)tlen * sizeof *ids);
    }
    return baton_cross_entropy(t, baton_gpt_forward(g, t, ids, b, tlen), tgt);
}

double baton_gpt_flops_per_token(const baton_gpt_config *c, int tlen) {
    /* matrices a token passes through: 12 C^2 per block (qkv 3, proj 1, mlp 8) and the V x C head; attention
     * scores and weighted sum: 2 x T x C per block (the full T x T product is what the kernels compute) */
    double cc = c->dim, mats = 12.0 * cc * cc * c->layers + (double)c->vocab * cc;
    return 6.0 * mats + 6.0 * 2.0 * tlen * cc * c->layers;
}

void baton_gpt_generate(baton_gpt *g, baton_tape *t, int32_t *tokens, int n_prompt, int n_new, float temperature,
                        int top_k, baton_rng *rng) {
    int v = g->cfg.vocab, ctx = g->cfg.context;
    BATON_ASSERT(n_prompt >= 1 && n_new >= 0);
    float *prob = malloc((size_t)v * sizeof *prob);
    int *order = malloc((size_t)v * sizeof *order);
    BATON_ASSERT(prob && order);
    for (int s = 0; s < n_new; s++) {
        int n = n_prompt + s, start = n > ctx ? n - ctx : 0, tl = n - start;
        baton_tape_reset(t, 0);
        baton_tensor *logits = baton_gpt_forward(g, t, tokens + start, 1, tl);
        const float *row = logits->data + (size_t)(tl - 1) * v;
        int best = 0;
        for (int j = 1; j < v; j++) best = row[j] > row[best] ? j : best;
        if (temperature <= 0.0f) {
            tokens[n] = best;
            continue;
        }
        /* keep the top_k largest logits (ties broken by the lower id), softmax over them */
        int k = top_k > 0 && top_k < v ? top_k : v;
        for (int j = 0; j < v; j++) order[j] = j;
        for (int i = 0; i < k; i++) {   /* partial selection sort: k is small or the whole (small) vocabulary */
            int mx = i;
            for (int j = i + 1; j < v; j++)
                if (row[order[j]] > row[order[mx]] || (row[order[j]] == row[order[mx]] && order[j] < order[mx])) mx = j;
            int tmp = order[i];
            order[i] = order[mx];
            order[mx] = tmp;
        }
        double sum = 0.0;
        for (int i = 0; i < k; i++) sum += prob[i] = expf((row[order[i]] - row[best]) / temperature);
        double u = baton_rng_uniform(rng) * sum, acc = 0.0;
        int pick = order[k - 1];
        for (int i = 0; i < k; i++) {
            acc += prob[i];
            if (u < acc) {
                pick = order[i];
                break;
            }
        }
        tokens[n] = pick;
    }
    free(prob);
    free(order);
}
