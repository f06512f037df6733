/* baton/gpt.h: a decoder-only transformer (GPT-2 layout) on the engine of baton/nn.h, and its sampler.
 *
 *   token + position embeddings -> N x [x += proj(attn(LN1(x))); x += fc2(GELU(fc1(LN2(x))))] -> LN_f
 *   -> logits = x @ wte^T   (the output head is tied to the token embedding)
 *
 * Parameters (nanoGPT / GPT-2 names, PyTorch Linear layout (out, in)), in slab order:
 *   wte.weight (V,C), wpe.weight (T,C), then per block i: h.i.ln_1.{weight,bias} (C),
 *   h.i.attn.c_attn.{weight (3C,C), bias (3C)}, h.i.attn.c_proj.{weight (C,C), bias}, h.i.ln_2.*,
 *   h.i.mlp.c_fc.{weight (4C,C), bias (4C)}, h.i.mlp.c_proj.{weight (C,4C), bias (C)}; ln_f.{weight,bias}.
 * Weight decay (decay = 1) on the 2-D tensors only: embeddings and matrices, not biases or LayerNorm.
 * Initialization from the seed (one RNG stream in slab order): normal(0, 0.02) for matrices and
 * embeddings, normal(0, 0.02/sqrt(2N)) for the two residual projections (c_proj), zero biases, LayerNorm
 * weight 1 and bias 0. LayerNorm eps 1e-5, exact (erf) GELU.
 *
 * Errors: functions returning int give BATON_OK or a negative baton_status with baton_last_error() set. */
#ifndef BATON_GPT_H
#define BATON_GPT_H

#include <stdint.h>

#include "baton/nn.h"

typedef struct {
    int vocab;     /* 256 for the byte tokenizer */
    int context;   /* T: longest sequence (position embeddings) */
    int layers;    /* N blocks */
    int heads;     /* H; dim must divide by it */
    int dim;       /* C */
} baton_gpt_config;

typedef struct baton_gpt baton_gpt;
/* Validates the config (1..4096 context, 1..64 layers, dim % heads == 0, ...) and initializes. */
int baton_gpt_new(baton_gpt **out, const baton_gpt_config *cfg, uint64_t seed);
void baton_gpt_free(baton_gpt *g);
baton_params *baton_gpt_params(baton_gpt *g);
const baton_gpt_config *baton_gpt_cfg(const baton_gpt *g);
/* ids (B*T), sequence b at ids[b*T..], 1 <= T <= context, every id < vocab -> logits (B*T, V).
 * ids must stay valid until the tape is reset (the embedding's backward reads them). */
baton_tensor *baton_gpt_forward(baton_gpt *g, baton_tape *t, const int32_t *ids, int b, int tlen);
/* Mean next-token cross-entropy of B windows of T+1 tokens: window b is tokens[b*(T+1) ..], inputs its first
 * T, targets its last T. The ids/targets are copied into the tape's arena. */
baton_tensor *baton_gpt_loss(baton_gpt *g, baton_tape *t, const int32_t *windows, int b, int tlen);
/* Model FLOPs per trained token (forward + backward, the 6N rule plus attention): for MFU. */
double baton_gpt_flops_per_token(const baton_gpt_config *c, int tlen);

/* Appends n_new tokens to tokens[0..n_prompt) (capacity n_prompt + n_new): each from the softmax of the last
 * position's logits / temperature over the top_k most likely tokens (top_k 0 = all; temperature 0 = greedy),
 * drawn with rng; the model sees the last `context` tokens. n_prompt >= 1. Uses tape t in evaluation mode. */
void baton_gpt_generate(baton_gpt *g, baton_tape *t, int32_t *tokens, int n_prompt, int n_new, float temperature,
                        int top_k, baton_rng *rng);

#endif
