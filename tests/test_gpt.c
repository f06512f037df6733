/* test_gpt.c: the GPT model (baton/gpt.h): a whole small GPT's backward against finite differences, the
 * causal mask end to end, overfitting a few hundred characters, deterministic sampling, config checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baton/gpt.h"
#include "harness.h"
#include "nn/libs.h"

static const char text[] =
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. "
    "To be or not to be, that is the question. All that glitters is not gold. Fortune favours the bold. "
    "Where there is a will there is a way. Actions speak louder than words. Time flies like an arrow.";

static double loss_of(baton_gpt *g, baton_tape *t, const int32_t *w, int b, int tl, int grad) {
    baton_tape_reset(t, grad);
    baton_tensor *loss = baton_gpt_loss(g, t, w, b, tl);
    if (grad) {
        baton_params_zero_grad(baton_gpt_params(g));
        baton_tape_backward(t, loss, 1.0f);
    }
    return loss->data[0];
}

TEST(whole_gpt_backward_matches_finite_differences) {
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 7, .context = 5, .layers = 2, .heads = 2, .dim = 8};
    ASSERT_OK(baton_gpt_new(&g, &c, 3));
    baton_params *p = baton_gpt_params(g);
    baton_rng r;
    baton_rng_seed(&r, 5);
    /* larger weights than the 0.02 init, so every path carries a gradient well above f32 noise */
    for (int i = 0; i < baton_params_count(p); i++) {
        baton_tensor *w = baton_params_tensor(p, i);
        for (size_t j = 0; j < w->n; j++) w->data[j] += 0.3f * baton_rng_normal(&r);
    }
    int b = 2, tl = 4;
    int32_t win[2 * 5] = {1, 4, 2, 6, 0, 3, 3, 5, 1, 2};
    baton_tape *t = baton_tape_new(p, 1);
    loss_of(g, t, win, b, tl, 1);
    float *an = malloc(baton_params_numel(p) * sizeof(float));
    memcpy(an, baton_params_grad(p), baton_params_numel(p) * sizeof(float));
    int checked = 0;
    for (int i = 0; i < baton_params_count(p); i++) {
        baton_tensor *w = baton_params_tensor(p, i);
        const baton_param_info *info = baton_params_info(p, i);
        for (size_t j = 0; j < w->n; j += w->n / 4 + 1) {   /* a few elements of every parameter */
            float keep = w->data[j], h = 1e-2f;
            w->data[j] = keep + h;
            double lp = loss_of(g, t, win, b, tl, 0);
            w->data[j] = keep - h;
            double lm = loss_of(g, t, win, b, tl, 0);
            w->data[j] = keep;
            double fd = (lp - lm) / (2.0 * h), a = an[info->offset + j];
            if (!(fabs(fd - a) <= 2e-3 + 3e-2 * fabs(a)))
                th_fail(__FILE__, __LINE__, "%s[%zu]: finite difference %.6g vs backward %.6g", info->name, j, fd, a);
            checked++;
        }
    }
    ASSERT_TRUE(checked > 50);
    free(an);
    baton_tape_free(t);
    baton_gpt_free(g);
}

TEST(changing_a_later_token_never_changes_earlier_logits) {
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 16, .context = 8, .layers = 2, .heads = 2, .dim = 16};
    ASSERT_OK(baton_gpt_new(&g, &c, 9));
    baton_tape *t = baton_tape_new(baton_gpt_params(g), 1);
    int32_t ids[8] = {1, 5, 9, 2, 7, 3, 3, 0}, ids2[8];
    float ref[8 * 16];
    baton_tape_reset(t, 0);
    memcpy(ref, baton_gpt_forward(g, t, ids, 1, 8)->data, sizeof ref);
    for (int pos = 0; pos < 8; pos++) {
        memcpy(ids2, ids, sizeof ids);
        ids2[pos] = (ids[pos] + 7) % 16;
        baton_tape_reset(t, 0);
        const float *y = baton_gpt_forward(g, t, ids2, 1, 8)->data;
        for (int i = 0; i < 8; i++) {
            double diff = 0.0;
            for (int j = 0; j < 16; j++) diff += fabs(y[i * 16 + j] - ref[i * 16 + j]);
            if (i < pos) ASSERT_TRUE(diff == 0.0);
            if (i == pos) ASSERT_TRUE(diff > 1e-4);   /* the changed position itself does change */
        }
    }
    baton_tape_free(t);
    baton_gpt_free(g);
}

/* The text cut into aligned windows of 33 characters, all of them in every batch: a 2-layer GPT learns them
 * by heart (each window is then predictable from its own prefix and position). */
TEST_T(tiny_gpt_overfits_a_few_hundred_characters, 120) {
    int n = (int)strlen(text), tl = 32, b = (n - 1) / tl;
    ASSERT_TRUE(n > 250 && b >= 8);
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = tl, .layers = 2, .heads = 2, .dim = 32};
    ASSERT_OK(baton_gpt_new(&g, &c, 1));
    baton_params *p = baton_gpt_params(g);
    baton_optim *o;
    ASSERT_OK(baton_optim_new(&o, p, &(baton_optim_config){.kind = BATON_OPTIM_ADAMW, .weight_decay = 0.0f,
                                                            .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f}));
    baton_tape *t = baton_tape_new(p, 1);
    int32_t *win = malloc((size_t)b * (tl + 1) * sizeof *win);
    for (int i = 0; i < b; i++)
        for (int j = 0; j <= tl; j++) win[i * (tl + 1) + j] = (unsigned char)text[i * tl + j];
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 300; step++) {
        last = loss_of(g, t, win, b, tl, 1);
        if (step == 0) first = last;
        baton_clip_grad_norm(p, 1.0f);
        baton_optim_step(o, step < 20 ? 3e-3f * (step + 1) / 20 : 3e-3f);
    }
    double final = loss_of(g, t, win, b, tl, 0);
    fprintf(stderr, "overfit: loss %.4f -> %.4f (evaluated: %.4f)\n", first, last, final);
    ASSERT_TRUE(first > 5.0);   /* ~ln 256 = 5.55 at init */
    ASSERT_TRUE(final < 0.1);   /* measured 0.035 */
    free(win);
    baton_tape_free(t);
    baton_optim_free(o);
    baton_gpt_free(g);
}

TEST(generation_is_deterministic_for_a_seed) {
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = 16, .layers = 1, .heads = 2, .dim = 16};
    ASSERT_OK(baton_gpt_new(&g, &c, 4));
    baton_tape *t = baton_tape_new(baton_gpt_params(g), 1);
    int32_t a[40] = {'H', 'i'}, bb[40] = {'H', 'i'}, cc[40] = {'H', 'i'};
    baton_rng r;
    baton_rng_seed(&r, 77);
    baton_gpt_generate(g, t, a, 2, 30, 1.0f, 0, &r);   /* 32 tokens > context 16: the window slides */
    baton_rng_seed(&r, 77);
    baton_gpt_generate(g, t, bb, 2, 30, 1.0f, 0, &r);
    ASSERT_TRUE(!memcmp(a, bb, sizeof a));
    baton_rng_seed(&r, 78);
    baton_gpt_generate(g, t, cc, 2, 30, 1.0f, 0, &r);
    ASSERT_TRUE(memcmp(a, cc, sizeof a) != 0);
    for (int i = 0; i < 32; i++) ASSERT_TRUE(a[i] >= 0 && a[i] < 256);
    /* top_k 1 is greedy, whatever the seed */
    baton_rng_seed(&r, 1);
    baton_gpt_generate(g, t, a, 2, 10, 1.0f, 1, &r);
    baton_gpt_generate(g, t, bb, 2, 10, 0.0f, 0, &r);
    ASSERT_TRUE(!memcmp(a, bb, 12 * sizeof *a));
    baton_tape_free(t);
    baton_gpt_free(g);
}

/* The loss and every gradient of a GPT large enough that the row loops (LayerNorm, GELU, the residual adds,
 * cross-entropy, AdamW's inputs) and the attention heads run on OpenMP's threads, with `threads` threads. */
static double grads_with(int threads, int gemm, float *grad_out) {
    baton_gpt *g;
    baton_gpt_config c = {.vocab = 256, .context = 64, .layers = 1, .heads = 4, .dim = 128};
    ASSERT_OK(baton_gpt_new(&g, &c, 11));
    baton_params *p = baton_gpt_params(g);
    baton_tape *t = baton_tape_new(p, 1);
    ASSERT_OK(baton_tape_set_gemm(t, (baton_gemm_backend)gemm));
    int b = 8, tl = 64;   /* 512 rows x 128 = 65,536 >= BATON__PAR_MIN */
    int32_t *win = malloc((size_t)b * (tl + 1) * sizeof *win);
    for (int i = 0; i < b * (tl + 1); i++) win[i] = (unsigned char)text[(i * 7) % (int)strlen(text)];
    baton_set_threads(threads);
    if (gemm == BATON_GEMM_OPENBLAS) baton__blas()->openblas_set_num_threads(1);   /* its own splits may cut K: see below */
    double loss = loss_of(g, t, win, b, tl, 1);
    baton_set_threads(1);
    memcpy(grad_out, baton_params_grad(p), baton_params_numel(p) * sizeof(float));
    free(win);
    baton_tape_free(t);
    baton_gpt_free(g);
    return loss;
}

/* Rows are split between threads, never a sum: with the products on one OpenBLAS thread (OpenBLAS itself
 * changes the last bits with 2 threads: measured up to 6e-8) and everything else on two OpenMP threads, the
 * bits equal those of one thread. With oneDNN the heads of attention are dealt to the threads (each its own dP
 * scratch); its f32 products may split K too, so there the check is the RMS of the difference to 1e-5 of
 * the gradient's (a race on a scratch buffer would be off by far more). */
TEST(gradients_do_not_depend_on_the_thread_count) {
    size_t n = 0;
    {
        baton_gpt *g;
        ASSERT_OK(baton_gpt_new(&g, &(baton_gpt_config){256, 64, 1, 4, 128}, 11));
        n = baton_params_numel(baton_gpt_params(g));
        baton_gpt_free(g);
    }
    float *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    double l1 = grads_with(1, BATON_GEMM_OPENBLAS, g1), l2 = grads_with(2, BATON_GEMM_OPENBLAS, g2);
    ASSERT_TRUE(l1 == l2);
    ASSERT_TRUE(!memcmp(g1, g2, n * sizeof(float)));
    l1 = grads_with(1, BATON_GEMM_ONEDNN, g1);
    l2 = grads_with(2, BATON_GEMM_ONEDNN, g2);
    ASSERT_TRUE(fabs(l1 - l2) <= 1e-5 * fabs(l1));
    double ss = 0.0, dd = 0.0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)g1[i] * g1[i];
        dd += ((double)g1[i] - g2[i]) * ((double)g1[i] - g2[i]);
    }
    fprintf(stderr, "oneDNN, 1 vs 2 threads: gradient RMS %.3g, difference RMS %.3g\n", sqrt(ss / n), sqrt(dd / n));
    ASSERT_TRUE(ss > 0.0 && sqrt(dd) <= 1e-5 * sqrt(ss));
    free(g1);
    free(g2);
}

/* The tape's arena: the first step allocates its chunks, every later step reuses them in the same order and
 * allocates nothing (it used to fold them into one new chunk at the second reset, which the second step then
 * page-faulted in afresh: about 260,000 faults at the benchmark's size). */
TEST(steps_after_the_first_allocate_no_arena) {
    baton_gpt *g;
    ASSERT_OK(baton_gpt_new(&g, &(baton_gpt_config){256, 64, 2, 4, 128}, 5));
    baton_tape *t = baton_tape_new(baton_gpt_params(g), 1);
    int b = 8, tl = 64;
    int32_t *win = malloc((size_t)b * (tl + 1) * sizeof *win);
    for (int i = 0; i < b * (tl + 1); i++) win[i] = (unsigned char)text[(i * 3) % (int)strlen(text)];
    double l1 = loss_of(g, t, win, b, tl, 1);
    size_t mallocs = baton_tape_arena_mallocs(t), bytes = baton_tape_arena_bytes(t);
    ASSERT_TRUE(mallocs > 1);   /* more than one chunk: the case that used to fold */
    for (int s = 0; s < 3; s++) ASSERT_TRUE(loss_of(g, t, win, b, tl, 1) == l1);   /* same data, same loss */
    ASSERT_EQ_U64(baton_tape_arena_mallocs(t), mallocs);
    ASSERT_EQ_U64(baton_tape_arena_bytes(t), bytes);
    free(win);
    baton_tape_free(t);
    baton_gpt_free(g);
}

TEST(bad_gpt_configs_are_rejected) {
    baton_gpt *g;
    ASSERT_EQ_INT(baton_gpt_new(&g, &(baton_gpt_config){256, 64, 2, 3, 32}, 1), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "divisible");
    ASSERT_EQ_INT(baton_gpt_new(&g, &(baton_gpt_config){256, 0, 2, 2, 32}, 1), BATON_EINVAL);
    ASSERT_EQ_INT(baton_gpt_new(&g, &(baton_gpt_config){256, 64, 0, 2, 32}, 1), BATON_EINVAL);
    ASSERT_TRUE(g == NULL);
}
