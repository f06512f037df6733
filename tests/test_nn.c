/* test_nn.c: parameters and slabs, the gradient hook, golden values from PyTorch, determinism, the
 * optimizers against hand-computed steps, schedules, clipping, and an allocation-free steady state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "harness.h"

/* ---- golden values (tests/golden/make_golden.py, PyTorch float64) ---------------------------------- */
typedef struct {
    char name[64];
    int n;
    double v[64];
} golden_row;

static int golden_load(golden_row *rows, int max) {
    FILE *f = fopen("tests/golden/tiny_nets.txt", "r");
    if (!f) th_fail(__FILE__, __LINE__, "cannot open tests/golden/tiny_nets.txt (run from the repository root)");
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        if (line[0] == '#') continue;
        char *p = line, *end;
        golden_row *r = &rows[n];
        int len = (int)strcspn(p, " ");
        snprintf(r->name, sizeof r->name, "%.*s", len, p);
        p += len;
        r->n = 0;
        for (double v = strtod(p, &end); end != p && r->n < 64; v = strtod(p, &end)) {
            r->v[r->n++] = v;
            p = end;
        }
        n++;
    }
    fclose(f);
    return n;
}

static const golden_row *golden_find(const golden_row *rows, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    th_fail(__FILE__, __LINE__, "golden value %s missing", name);
}

typedef double (*formula)(int i);
static double f_x_mlp(int i) { return sin(1.3 * i); }
static double f_w1(int i) { return 0.5 * sin(0.7 * i + 0.3); }
static double f_b1(int i) { return 0.1 * cos(i); }
static double f_w2(int i) { return 0.5 * cos(0.9 * i + 0.1); }
static double f_b2(int i) { return 0.05 * (i - 1); }
static double f_x_cnn(int i) { return sin(0.37 * i * i + 0.2); }
static double f_cw(int i) { return 0.4 * cos(1.1 * i); }
static double f_cb(int i) { return 0.1 * (i + 1); }
static double f_fw(int i) { return 0.3 * sin(0.5 * i + 1.0); }
static double f_zero(int i) { (void)i; return 0.0; }
static double f_x_misc(int i) { return cos(0.8 * i) * 2.0; }
static double f_g(int i) { return 1.0 + 0.1 * i; }
static double f_be(int i) { return 0.05 * i - 0.1; }
static double f_wa(int i) { return 0.4 * sin(0.3 * i + 0.5); }
static double f_ba(int i) { return 0.02 * i; }
static double f_wb(int i) { return 0.6 * cos(0.45 * i); }
static double f_bb(int i) { return -0.03 * i; }

static void fill(float *x, int n, formula f) {
    for (int i = 0; i < n; i++) x[i] = (float)f(i);
}

static baton_params *make_params(const baton_param_info *v, int n, const formula *f) {
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, n));
    for (int i = 0; i < n; i++) {
        baton_tensor *t = baton_params_tensor(p, i);
        fill(t->data, (int)t->n, f[i]);
    }
    return p;
}

static void check_golden(const golden_row *rows, int nrows, const char *net, baton_params *p, float loss) {
    char key[96];
    snprintf(key, sizeof key, "%s.loss", net);
    ASSERT_NEAR(loss, golden_find(rows, nrows, key)->v[0], 2e-6);
    for (int i = 0; i < baton_params_count(p); i++) {
        baton_tensor *t = baton_params_tensor(p, i);
        snprintf(key, sizeof key, "%s.%s", net, baton_params_info(p, i)->name);
        const golden_row *g = golden_find(rows, nrows, key);
        ASSERT_EQ_INT(g->n, t->n);
        for (int j = 0; j < g->n; j++)
            if (fabs(t->grad[j] - g->v[j]) > 2e-6 + 1e-4 * fabs(g->v[j]))
                th_fail(__FILE__, __LINE__, "%s[%d]: baton %.9g vs pytorch %.9g", key, j, t->grad[j], g->v[j]);
    }
}

TEST(golden_tiny_mlp_cnn_misc_match_pytorch) {
    golden_row rows[32];
    int nrows = golden_load(rows, 32);
    ASSERT_TRUE(nrows >= 17);
    {   /* mlp */
        baton_param_info v[] = {{"fc1.weight", 2, {5, 4}, 0, 0, 1}, {"fc1.bias", 1, {5}, 0, 0, 0},
                                {"fc2.weight", 2, {3, 5}, 0, 0, 1}, {"fc2.bias", 1, {3}, 0, 0, 0}};
        baton_params *p = make_params(v, 4, (formula[]){f_w1, f_b1, f_w2, f_b2});
        float x[16];
        fill(x, 16, f_x_mlp);
        int32_t y[4] = {0, 2, 1, 2};
        baton_tape *t = baton_tape_new(p, 1);
        baton_tape_reset(t, 1);
        baton_tensor *h = baton_linear(t, baton_tape_input(t, 2, (int[]){4, 4}, x), baton_params_tensor(p, 0),
                                       baton_params_tensor(p, 1), BATON_ACT_RELU);
        baton_tensor *loss = baton_cross_entropy(
            t, baton_linear(t, h, baton_params_tensor(p, 2), baton_params_tensor(p, 3), BATON_ACT_NONE), y);
        baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 1.0f);
        check_golden(rows, nrows, "mlp", p, loss->data[0]);
        baton_tape_free(t);
        baton_params_free(p);
    }
    {   /* cnn */
        baton_param_info v[] = {{"conv1.weight", 4, {2, 1, 3, 3}, 0, 0, 1}, {"conv1.bias", 1, {2}, 0, 0, 0},
                                {"fc1.weight", 2, {3, 8}, 0, 0, 1}, {"fc1.bias", 1, {3}, 0, 0, 0}};
        baton_params *p = make_params(v, 4, (formula[]){f_cw, f_cb, f_fw, f_zero});
        float x[32];
        fill(x, 32, f_x_cnn);
        int32_t y[2] = {1, 2};
        baton_tape *t = baton_tape_new(p, 1);
        baton_tape_reset(t, 1);
        baton_tensor *h = baton_conv2d(t, baton_tape_input(t, 4, (int[]){2, 1, 4, 4}, x), baton_params_tensor(p, 0),
                                       baton_params_tensor(p, 1), 1, 1);
        h = baton_flatten(t, baton_maxpool2d(t, baton_relu(t, h), 2));
        baton_tensor *loss = baton_cross_entropy(
            t, baton_linear(t, h, baton_params_tensor(p, 2), baton_params_tensor(p, 3), BATON_ACT_NONE), y);
        baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 1.0f);
        check_golden(rows, nrows, "cnn", p, loss->data[0]);
        baton_tape_free(t);
        baton_params_free(p);
    }
    {   /* misc: layer norm, GELU, tanh */
        baton_param_info v[] = {{"ln.weight", 1, {6}, 0, 0, 0}, {"ln.bias", 1, {6}, 0, 0, 0},
                                {"fa.weight", 2, {4, 6}, 0, 0, 1}, {"fa.bias", 1, {4}, 0, 0, 0},
                                {"fb.weight", 2, {3, 4}, 0, 0, 1}, {"fb.bias", 1, {3}, 0, 0, 0}};
        baton_params *p = make_params(v, 6, (formula[]){f_g, f_be, f_wa, f_ba, f_wb, f_bb});
        float x[18];
        fill(x, 18, f_x_misc);
        int32_t y[3] = {2, 0, 1};
        baton_tape *t = baton_tape_new(p, 1);
        baton_tape_reset(t, 1);
        baton_tensor *h = baton_layernorm(t, baton_tape_input(t, 2, (int[]){3, 6}, x), baton_params_tensor(p, 0),
                                          baton_params_tensor(p, 1), 1e-5f);
        h = baton_linear(t, h, baton_params_tensor(p, 2), baton_params_tensor(p, 3), BATON_ACT_GELU);
        h = baton_linear(t, h, baton_params_tensor(p, 4), baton_params_tensor(p, 5), BATON_ACT_TANH);
        baton_tensor *loss = baton_cross_entropy(t, h, y);
        baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 1.0f);
        check_golden(rows, nrows, "misc", p, loss->data[0]);
        baton_tape_free(t);
        baton_params_free(p);
    }
}

/* ---- slabs and hooks --------------------------------------------------------------------------------- */
static baton_model *small_model(int kind, uint64_t seed) {
    baton_model_config c = {.kind = kind, .in_c = 1, .in_h = 8, .in_w = 8, .classes = 4, .n_hidden = 2,
                            .hidden = {16, 12}, .n_channels = 2, .channels = {3, 5}};
    if (kind == BATON_MODEL_CNN) {
        c.n_hidden = 1;
        c.hidden[0] = 10;
    }
    baton_model *m;
    ASSERT_OK(baton_model_new(&m, &c, seed));
    return m;
}

TEST(params_are_views_into_one_aligned_slab) {
    baton_model *m = small_model(BATON_MODEL_MLP, 1);
    baton_params *p = baton_model_params(m);
    ASSERT_EQ_INT(baton_params_count(p), 6);
    ASSERT_STR_EQ(baton_params_info(p, 0)->name, "fc1.weight");
    ASSERT_EQ_INT(baton_params_info(p, 0)->shape[0], 16);
    ASSERT_EQ_INT(baton_params_info(p, 0)->shape[1], 64);
    ASSERT_EQ_INT(baton_params_find(p, "fc3.bias"), 5);
    ASSERT_EQ_INT(baton_params_find(p, "nope"), -1);
    size_t end = 0;
    for (int i = 0; i < 6; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        ASSERT_EQ_U64(v->offset % 16, 0);
        ASSERT_TRUE(v->offset >= end);
        end = v->offset + v->count;
        ASSERT_TRUE(baton_params_tensor(p, i)->data == baton_params_data(p) + v->offset);
        ASSERT_TRUE(baton_params_tensor(p, i)->grad == baton_params_grad(p) + v->offset);
    }
    ASSERT_TRUE(end <= baton_params_numel(p));
    ASSERT_EQ_INT(baton_params_info(p, 0)->decay, 1);
    ASSERT_EQ_INT(baton_params_info(p, 1)->decay, 0);
    baton_model_free(m);
}

/* baton_params_set_data_slab: the values move into the caller's slab (only the range given is copied: the
 * rest is the caller's), every view follows; NULL brings all of them back into the params' own memory; a
 * misaligned slab or a range outside the slab is refused. */
TEST(data_slab_moves_the_values_and_the_views) {
    baton_model *m = small_model(BATON_MODEL_MLP, 1);
    baton_params *p = baton_model_params(m);
    size_t n = baton_params_numel(p), lo = 16, hi = n - 16;
    float *was = malloc(n * sizeof(float)), *slab = aligned_alloc(64, n * sizeof(float) + 64);
    memcpy(was, baton_params_data(p), n * sizeof(float));
    for (size_t i = 0; i < n; i++) slab[i] = -1.0f;
    ASSERT_EQ_INT(baton_params_set_data_slab(p, slab + 1, 0, n), BATON_EINVAL);
    ASSERT_EQ_INT(baton_params_set_data_slab(p, slab, lo, n + 1), BATON_EINVAL);
    ASSERT_OK(baton_params_set_data_slab(p, slab, lo, hi));
    ASSERT_TRUE(baton_params_data(p) == slab);
    for (int i = 0; i < baton_params_count(p); i++)
        ASSERT_TRUE(baton_params_tensor(p, i)->data == slab + baton_params_info(p, i)->offset);
    ASSERT_TRUE(!memcmp(slab + lo, was + lo, (hi - lo) * sizeof(float)));
    ASSERT_TRUE(slab[0] == -1.0f && slab[n - 1] == -1.0f);   /* outside the range: untouched */
    for (size_t i = 0; i < lo; i++) slab[i] = was[i];          /* the caller fills the rest */
    for (size_t i = hi; i < n; i++) slab[i] = was[i];
    slab[lo] += 1.0f;                                          /* an update made in the caller's slab */
    ASSERT_OK(baton_params_set_data_slab(p, NULL, 0, 0));
    float *own = baton_params_data(p);
    ASSERT_TRUE(own != slab);
    ASSERT_TRUE(baton_params_tensor(p, 0)->data == own + baton_params_info(p, 0)->offset);
    ASSERT_TRUE(own[lo] == was[lo] + 1.0f);
    ASSERT_TRUE(!memcmp(own + lo + 1, was + lo + 1, (n - lo - 1) * sizeof(float)));
    ASSERT_TRUE(!memcmp(own, was, lo * sizeof(float)));
    free(slab);   /* the params no longer look at it */
    baton_model_free(m);
    free(was);
}

typedef struct {
    int fired[16];
    int order[16];
    int n;
    baton_params *p;
    float *expect;      /* the complete gradient slab from a reference backward */
    int complete_ok;
} hook_log;

static void on_grad(void *ctx, int i) {
    hook_log *h = ctx;
    h->fired[i]++;
    h->order[h->n++] = i;
    if (h->expect) {   /* at this moment the gradient must already equal its final value */
        const baton_param_info *v = baton_params_info(h->p, i);
        if (memcmp(baton_params_grad(h->p) + v->offset, h->expect + v->offset, v->count * sizeof(float)))
            h->complete_ok = 0;
    }
}

static float one_backward(baton_model *m, baton_tape *t, float *x, int32_t *y, int b) {
    baton_tape_reset(t, 1);
    baton_tensor *in = baton_tape_input(t, 2, (int[]){b, 64}, x);
    baton_tensor *loss = baton_cross_entropy(t, baton_model_forward(m, t, in), y);
    baton_params_zero_grad(baton_model_params(m));
    baton_tape_backward(t, loss, 1.0f);
    return loss->data[0];
}

TEST(hook_fires_once_per_param_after_gradient_is_complete_in_reverse_order) {
    for (int kind = BATON_MODEL_MLP; kind <= BATON_MODEL_CNN; kind++) {
        baton_model *m = small_model(kind, 3);
        baton_params *p = baton_model_params(m);
        int np = baton_params_count(p);
        float x[5 * 64];
        int32_t y[5] = {0, 1, 2, 3, 1};
        baton_rng r;
        baton_rng_seed(&r, 5);
        for (int i = 0; i < 5 * 64; i++) x[i] = baton_rng_normal(&r);
        baton_tape *t = baton_tape_new(p, 1);
        one_backward(m, t, x, y, 5);   /* reference gradients, no hook */
        float *expect = malloc(baton_params_numel(p) * sizeof(float));
        memcpy(expect, baton_params_grad(p), baton_params_numel(p) * sizeof(float));
        /* poison the slab: the hook must see values written by this backward, not leftovers */
        for (size_t i = 0; i < baton_params_numel(p); i++) baton_params_grad(p)[i] = 1e30f;
        hook_log h = {.p = p, .expect = expect, .complete_ok = 1};
        baton_tape_set_grad_hook(t, on_grad, &h);
        one_backward(m, t, x, y, 5);
        ASSERT_EQ_INT(h.n, np);
        for (int i = 0; i < np; i++) ASSERT_EQ_INT(h.fired[i], 1);
        ASSERT_TRUE(h.complete_ok);
        /* reverse of forward use: last layer first; within a layer weight before bias */
        for (int k = 0; k < np; k++) ASSERT_EQ_INT(h.order[k], (np - 2 - 2 * (k / 2)) + (k % 2));
        baton_tape_free(t);
        free(expect);
        baton_model_free(m);
    }
}

TEST(gradients_accumulate_without_zero_grad_and_unused_params_are_zero) {
    baton_param_info v[] = {{"w", 2, {3, 4}, 0, 0, 1}, {"unused", 1, {5}, 0, 0, 0}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 2));
    for (int i = 0; i < 12; i++) baton_params_tensor(p, 0)->data[i] = 0.1f * i;
    for (int i = 0; i < 5; i++) baton_params_tensor(p, 1)->grad[i] = 7.0f;   /* stale */
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t y[2] = {0, 2};
    baton_tape *t = baton_tape_new(p, 1);
    float g1[12];
    hook_log h = {.p = p, .complete_ok = 1};
    baton_tape_set_grad_hook(t, on_grad, &h);
    for (int pass = 0; pass < 2; pass++) {
        baton_tape_reset(t, 1);
        baton_tensor *loss = baton_cross_entropy(
            t, baton_linear(t, baton_tape_input(t, 2, (int[]){2, 4}, x), baton_params_tensor(p, 0), NULL, 0), y);
        if (pass == 0) baton_params_zero_grad(p);
        baton_tape_backward(t, loss, 0.5f);
        if (pass == 0) memcpy(g1, baton_params_tensor(p, 0)->grad, sizeof g1);
    }
    for (int i = 0; i < 12; i++) ASSERT_NEAR(baton_params_tensor(p, 0)->grad[i], 2 * g1[i], 1e-6);
    for (int i = 0; i < 5; i++) ASSERT_TRUE(baton_params_tensor(p, 1)->grad[i] == 0.0f);
    ASSERT_EQ_INT(h.fired[0], 2);
    ASSERT_EQ_INT(h.fired[1], 2);
    baton_tape_free(t);
    baton_params_free(p);
}

TEST(same_seed_same_parameters_and_same_training) {
    for (int kind = BATON_MODEL_MLP; kind <= BATON_MODEL_CNN; kind++) {
        baton_model *a = small_model(kind, 42), *b = small_model(kind, 42), *c = small_model(kind, 43);
        size_t n = baton_params_numel(baton_model_params(a));
        ASSERT_TRUE(!memcmp(baton_params_data(baton_model_params(a)), baton_params_data(baton_model_params(b)), n * 4));
        ASSERT_TRUE(memcmp(baton_params_data(baton_model_params(a)), baton_params_data(baton_model_params(c)), n * 4));
        float x[4 * 64];
        int32_t y[4] = {3, 1, 0, 2};
        for (int i = 0; i < 4 * 64; i++) x[i] = sinf(0.1f * i);
        baton_optim_config oc = {.kind = BATON_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                 .weight_decay = 0.01f};
        baton_model *ms[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            baton_optim *o;
            ASSERT_OK(baton_optim_new(&o, baton_model_params(ms[k]), &oc));
            baton_tape *t = baton_tape_new(baton_model_params(ms[k]), 9);
            for (int s = 0; s < 3; s++) {
                one_backward(ms[k], t, x, y, 4);
                baton_optim_step(o, 1e-2f);
            }
            baton_tape_free(t);
            baton_optim_free(o);
        }
        ASSERT_TRUE(!memcmp(baton_params_data(baton_model_params(a)), baton_params_data(baton_model_params(b)), n * 4));
        baton_model_free(a);
        baton_model_free(b);
        baton_model_free(c);
    }
}

TEST(steady_state_steps_allocate_nothing) {
    baton_model *m = small_model(BATON_MODEL_CNN, 1);
    baton_tape *t = baton_tape_new(baton_model_params(m), 1);
    float x[6 * 64] = {0};
    int32_t y[6] = {0, 1, 2, 3, 0, 1};
    for (int s = 0; s < 3; s++) one_backward(m, t, x, y, 6);
    size_t mallocs = baton_tape_arena_mallocs(t);
    for (int s = 0; s < 5; s++) one_backward(m, t, x, y, 6);
    ASSERT_EQ_U64(baton_tape_arena_mallocs(t), mallocs);
    baton_tape_free(t);
    baton_model_free(m);
}

TEST(model_config_errors_are_reported) {
    baton_model *m = NULL;
    baton_model_config c = {.kind = BATON_MODEL_CNN, .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10, .n_hidden = 1,
                            .hidden = {32}, .n_channels = 3, .channels = {4, 4, 4}};
    ASSERT_EQ_INT(baton_model_new(&m, &c, 1), BATON_EINVAL);   /* 28 is not divisible by 8 */
    ASSERT_CONTAINS(baton_last_error(), "divisible");
    c.n_channels = 2;
    c.hidden[0] = 0;
    ASSERT_EQ_INT(baton_model_new(&m, &c, 1), BATON_EINVAL);
    ASSERT_TRUE(m == NULL);
}

/* ---- optimizers, schedules, clipping --------------------------------------------------------------- */
static baton_params *two_params(void) {
    baton_param_info v[] = {{"w", 1, {2}, 0, 0, 1}, {"b", 1, {1}, 0, 0, 0}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 2));
    float *w = baton_params_tensor(p, 0)->data, *b = baton_params_tensor(p, 1)->data;
    w[0] = 1.0f;
    w[1] = -2.0f;
    b[0] = 0.5f;
    return p;
}

static void set_grads(baton_params *p, float g0, float g1, float g2) {
    baton_params_tensor(p, 0)->grad[0] = g0;
    baton_params_tensor(p, 0)->grad[1] = g1;
    baton_params_tensor(p, 1)->grad[0] = g2;
}

TEST(sgd_momentum_weight_decay_matches_hand_computation) {
    baton_params *p = two_params();
    baton_optim *o;
    ASSERT_OK(baton_optim_new(&o, p, &(baton_optim_config){.kind = BATON_OPTIM_SGD, .momentum = 0.9f,
                                                           .weight_decay = 0.1f}));
    set_grads(p, 0.5f, 1.0f, -1.0f);
    baton_optim_step(o, 0.1f);
    /* w0: g = 0.5 + 0.1*1 = 0.6, m = 0.6, w = 1 - 0.06 = 0.94; w1: g = 1 - 0.2 = 0.8, w = -2.08;
     * b (no decay): m = -1, b = 0.5 + 0.1 = 0.6 */
    float *w = baton_params_tensor(p, 0)->data, *b = baton_params_tensor(p, 1)->data;
    ASSERT_NEAR(w[0], 0.94, 1e-6);
    ASSERT_NEAR(w[1], -2.08, 1e-6);
    ASSERT_NEAR(b[0], 0.6, 1e-6);
    set_grads(p, 0.5f, 1.0f, -1.0f);
    baton_optim_step(o, 0.1f);
    /* w0: g = 0.5 + 0.094 = 0.594, m = 0.9*0.6 + 0.594 = 1.134, w = 0.94 - 0.1134 = 0.8266 */
    ASSERT_NEAR(w[0], 0.8266, 1e-6);
    /* b: m = 0.9*-1 + -1 = -1.9, b = 0.6 + 0.19 = 0.79 */
    ASSERT_NEAR(b[0], 0.79, 1e-6);
    ASSERT_EQ_INT(baton_optim_steps(o), 2);
    ASSERT_NEAR(baton_optim_state(o, 0)[0], 1.134, 1e-6);
    ASSERT_TRUE(baton_optim_state(o, 1) == NULL);
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(adamw_matches_hand_computation) {
    baton_params *p = two_params();
    baton_optim *o;
    ASSERT_OK(baton_optim_new(&o, p, &(baton_optim_config){.kind = BATON_OPTIM_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f,
                                                           .eps = 1e-8f, .weight_decay = 0.1f}));
    set_grads(p, 0.5f, -0.25f, 2.0f);
    baton_optim_step(o, 0.01f);
    /* step 1: mhat = g, vhat = g^2, so the Adam update is lr * sign(g) (eps negligible);
     * w0 = 1 - 0.01*(0.1*1 + 1) = 0.989; w1 = -2 - 0.01*(0.1*-2 - 1) = -1.988; b = 0.5 - 0.01 = 0.49 */
    float *w = baton_params_tensor(p, 0)->data, *b = baton_params_tensor(p, 1)->data;
    ASSERT_NEAR(w[0], 0.989, 1e-6);
    ASSERT_NEAR(w[1], -1.988, 1e-6);
    ASSERT_NEAR(b[0], 0.49, 1e-6);
    set_grads(p, 0.5f, -0.25f, -2.0f);
    baton_optim_step(o, 0.01f);
    /* b: m = 0.9*0.2 + 0.1*-2 = -0.02, v = 0.999*0.004 + 0.001*4 = 0.007996;
     * mhat = -0.02/0.19 = -0.105263, vhat = 0.007996/0.001999 = 4.0 -> update -0.0526316 */
    ASSERT_NEAR(b[0], 0.49 + 0.01 * 0.0526316, 1e-6);
    ASSERT_NEAR(baton_optim_state(o, 1)[baton_params_info(p, 1)->offset], 0.007996, 1e-6);
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(clip_grad_norm_scales_to_max_norm) {
    baton_params *p = two_params();
    set_grads(p, 3.0f, 0.0f, 4.0f);
    ASSERT_NEAR(baton_clip_grad_norm(p, 0.0f), 5.0, 1e-6);   /* 0 = measure only */
    ASSERT_NEAR(baton_params_tensor(p, 0)->grad[0], 3.0, 1e-6);
    ASSERT_NEAR(baton_clip_grad_norm(p, 1.0f), 5.0, 1e-6);
    ASSERT_NEAR(baton_params_tensor(p, 0)->grad[0], 0.6, 1e-5);
    ASSERT_NEAR(baton_params_tensor(p, 1)->grad[0], 0.8, 1e-5);
    ASSERT_NEAR(baton_clip_grad_norm(p, 10.0f), 1.0, 1e-5);   /* under the limit: untouched */
    ASSERT_NEAR(baton_params_tensor(p, 1)->grad[0], 0.8, 1e-5);
    baton_params_free(p);
}

TEST(lr_schedules_warmup_cosine_step) {
    baton_lr_schedule s = {.kind = BATON_SCHED_COSINE, .lr = 1.0f, .warmup = 10, .total = 110, .min_lr = 0.0f};
    ASSERT_NEAR(baton_lr_at(&s, 0), 0.1, 1e-6);
    ASSERT_NEAR(baton_lr_at(&s, 9), 1.0, 1e-6);
    ASSERT_NEAR(baton_lr_at(&s, 10), 1.0, 1e-6);
    ASSERT_NEAR(baton_lr_at(&s, 60), 0.5, 1e-6);
    ASSERT_NEAR(baton_lr_at(&s, 110), 0.0, 1e-6);
    ASSERT_NEAR(baton_lr_at(&s, 500), 0.0, 1e-6);
    baton_lr_schedule st = {.kind = BATON_SCHED_STEP, .lr = 1.0f, .warmup = 0, .step_every = 5, .gamma = 0.5f};
    ASSERT_NEAR(baton_lr_at(&st, 4), 1.0, 1e-6);
    ASSERT_NEAR(baton_lr_at(&st, 5), 0.5, 1e-6);
    ASSERT_NEAR(baton_lr_at(&st, 12), 0.25, 1e-6);
    baton_lr_schedule c = {.kind = BATON_SCHED_CONST, .lr = 0.3f};
    ASSERT_NEAR(baton_lr_at(&c, 1000), 0.3, 1e-6);
}

TEST(rng_is_deterministic_and_roughly_uniform) {
    baton_rng a, b;
    baton_rng_seed(&a, 5);
    baton_rng_seed(&b, 5);
    for (int i = 0; i < 100; i++) ASSERT_EQ_U64(baton_rng_u64(&a), baton_rng_u64(&b));
    double sum = 0, sq = 0;
    for (int i = 0; i < 100000; i++) {
        float u = baton_rng_uniform(&a);
        ASSERT_TRUE(u >= 0.0f && u < 1.0f);
        float z = baton_rng_normal(&b);
        sum += z;
        sq += (double)z * z;
    }
    ASSERT_NEAR(sum / 100000, 0.0, 0.02);
    ASSERT_NEAR(sq / 100000, 1.0, 0.03);
    for (int i = 0; i < 1000; i++) ASSERT_TRUE(baton_rng_below(&a, 7) < 7);
}
