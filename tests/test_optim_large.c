/* test_optim_large.c: LARS and LAMB (src/nn/optim_large.c; issue 12, item 5). The update rule is checked step by
 * step against a reference written here in double precision from the papers' formulas (not from the library's
 * code): a weight view (adapted, decayed) and a bias view (neither), several steps with changing gradients and
 * learning rates. The trainer's --optim lars|lamb resumes byte-identically from a checkpoint (the optimizer
 * state is saved). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "harness.h"

#define NW 12   /* weight: 3 x 4 */
#define NB 4    /* bias */

typedef struct {
    double w[NW + NB], m[NW + NB], v[NW + NB];
} ref_state;

static double norm(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

/* LARS (You et al. 2017, with momentum in the form the header documents): u = g + wd w; ratio = eta |w| / |u|;
 * m = mu m + ratio u; w -= lr m. Bias: wd = 0, ratio = 1. */
static void ref_lars(ref_state *s, const double *g, double lr, double mu, double wd, double eta) {
    for (int view = 0; view < 2; view++) {
        int off = view ? NW : 0, n = view ? NB : NW;
        double u[NW], d = view ? 0.0 : wd;
        for (int i = 0; i < n; i++) u[i] = g[off + i] + d * s->w[off + i];
        double wn = norm(s->w + off, n), un = norm(u, n), ratio = view || wn == 0 || un == 0 ? 1.0 : eta * wn / un;
        for (int i = 0; i < n; i++) {
            s->m[off + i] = mu * s->m[off + i] + ratio * u[i];
            s->w[off + i] -= lr * s->m[off + i];
        }
    }
}

/* LAMB (You et al. 2019): Adam moments with bias correction at step t; u = mhat / (sqrt(vhat) + eps) + wd w;
 * ratio = |w| / |u|; w -= lr ratio u. Bias: wd = 0, ratio = 1. */
static void ref_lamb(ref_state *s, const double *g, double lr, double wd, double b1, double b2, double eps, int t) {
    for (int view = 0; view < 2; view++) {
        int off = view ? NW : 0, n = view ? NB : NW;
        double u[NW], d = view ? 0.0 : wd;
        for (int i = 0; i < n; i++) {
            s->m[off + i] = b1 * s->m[off + i] + (1 - b1) * g[off + i];
            s->v[off + i] = b2 * s->v[off + i] + (1 - b2) * g[off + i] * g[off + i];
            double mh = s->m[off + i] / (1 - pow(b1, t)), vh = s->v[off + i] / (1 - pow(b2, t));
            u[i] = mh / (sqrt(vh) + eps) + d * s->w[off + i];
        }
        double wn = norm(s->w + off, n), un = norm(u, n), ratio = view || wn == 0 || un == 0 ? 1.0 : wn / un;
        for (int i = 0; i < n; i++) s->w[off + i] -= lr * ratio * u[i];
    }
}

static double frand(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return ((double)((*seed >> 8) & 0xffff) / 65535.0) * 2.0 - 1.0;
}

/* Runs 6 steps of the library's optimizer and of the reference; compares every weight after every step. */
static void compare(int kind) {
    baton_param_info infos[2] = {{.name = "fc.weight", .ndim = 2, .shape = {3, 4}, .decay = 1},
                                 {.name = "fc.bias", .ndim = 1, .shape = {4}, .decay = 0}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, infos, 2));
    const baton_param_info *vw = baton_params_info(p, 0), *vb = baton_params_info(p, 1);
    float *w = baton_params_data(p), *g = baton_params_grad(p);
    ref_state s;
    memset(&s, 0, sizeof s);
    unsigned seed = 7;
    for (int i = 0; i < NW + NB; i++) {
        s.w[i] = frand(&seed);
        (i < NW ? w + vw->offset + i : w + vb->offset + i - NW)[0] = (float)s.w[i];
    }
    baton_optim_config c = {.kind = kind, .momentum = 0.9f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                            .eps = 1e-6f, .trust_coef = 0.02f};
    baton_optim *o;
    ASSERT_OK(baton_optim_new(&o, p, &c));
    ASSERT_EQ_INT(baton_optim_kind_slots(kind), kind == BATON_OPTIM_LAMB ? 2 : 1);
    for (int t = 1; t <= 6; t++) {
        double gd[NW + NB], lr = 0.05 * t;   /* a changing learning rate, as under warmup */
        for (int i = 0; i < NW + NB; i++) {
            gd[i] = frand(&seed) * (i < NW ? 0.5 : 2.0);
            (i < NW ? g + vw->offset + i : g + vb->offset + i - NW)[0] = (float)gd[i];
        }
        baton_optim_step(o, (float)lr);
        if (kind == BATON_OPTIM_LARS) ref_lars(&s, gd, lr, 0.9, 0.01, 0.02);
        else ref_lamb(&s, gd, lr, 0.01, 0.9, 0.999, 1e-6, t);
        for (int i = 0; i < NW + NB; i++) {
            float got = (i < NW ? w + vw->offset + i : w + vb->offset + i - NW)[0];
            ASSERT_NEAR(got, s.w[i], 2e-5 * (1.0 + fabs(s.w[i])));
        }
    }
    /* the bias moved by the unadapted rule: with the ratio of the weight it would differ (sanity of the test) */
    baton_optim_free(o);
    baton_params_free(p);
}

TEST(lars_matches_double_reference) { compare(BATON_OPTIM_LARS); }
TEST(lamb_matches_double_reference) { compare(BATON_OPTIM_LAMB); }

/* The trust ratio really is per layer: scaling a weight view by 10 leaves LAMB's relative step the same. */
TEST(lamb_step_is_relative_to_the_layer_norm) {
    baton_param_info infos[1] = {{.name = "fc.weight", .ndim = 1, .shape = {8}, .decay = 1}};
    double rel[2];
    for (int k = 0; k < 2; k++) {
        baton_params *p;
        ASSERT_OK(baton_params_new(&p, infos, 1));
        float *w = baton_params_data(p), *g = baton_params_grad(p);
        for (int i = 0; i < 8; i++) {
            w[i] = (float)((k ? 10.0 : 1.0) * (i - 3.5));
            g[i] = (float)(0.1 * (i % 3) - 0.05);
        }
        double before = 0, moved = 0;
        for (int i = 0; i < 8; i++) before += (double)w[i] * w[i];
        baton_optim *o;
        baton_optim_config c = {.kind = BATON_OPTIM_LAMB, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f};
        ASSERT_OK(baton_optim_new(&o, p, &c));
        float w0[8];
        memcpy(w0, w, sizeof w0);
        baton_optim_step(o, 0.01f);
        for (int i = 0; i < 8; i++) moved += ((double)w[i] - w0[i]) * ((double)w[i] - w0[i]);
        rel[k] = sqrt(moved / before);
        baton_optim_free(o);
        baton_params_free(p);
    }
    ASSERT_NEAR(rel[0], 0.01, 1e-4);   /* |dw| = lr |w| */
    ASSERT_NEAR(rel[1], 0.01, 1e-4);
}

/* ---- the trainer: resumed runs are byte-identical ------------------------------------------------------ */

#define SMALL "--data synthetic --train-samples 1024 --hidden 32 --batch 32 --threads 1 --metrics none"

static int sh(const char *args) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "export OPENBLAS_NUM_THREADS=1 BATON_FLIGHT_DIR=%s; %s train %s 2>&1", th_tmpdir(),
             th_baton(), args);
    int rc = th_run(cmd, 120, &out, NULL);
    if (rc) fprintf(stderr, "%s\n", out);
    free(out);
    return rc;
}

static void resume_identical(const char *optim) {
    char a[600], b[600], ck[600], args[2048];
    const char *t = th_tmpdir();
    snprintf(a, sizeof a, "%s/%s-a.safetensors", t, optim);
    snprintf(b, sizeof b, "%s/%s-b.safetensors", t, optim);
    snprintf(ck, sizeof ck, "%s/%s-ck", t, optim);
    snprintf(args, sizeof args, SMALL " --optim %s --steps 40 --save %s", optim, a);
    ASSERT_EQ_INT(sh(args), 0);
    snprintf(args, sizeof args, SMALL " --optim %s --steps 40 --checkpoint %s --checkpoint-every 13", optim, ck);
    setenv("BATON_TEST_DIE_AT_STEP", "20", 1);   /* SIGKILLed as step 20 starts: resumes from step 13 */
    ASSERT_EQ_INT(sh(args), 137);
    unsetenv("BATON_TEST_DIE_AT_STEP");
    snprintf(args, sizeof args, SMALL " --optim %s --steps 40 --checkpoint %s --checkpoint-every 13 --resume --save %s",
             optim, ck, b);
    ASSERT_EQ_INT(sh(args), 0);
    size_t na, nb;
    char *x = th_slurp(a, &na), *y = th_slurp(b, &nb);
    ASSERT_EQ_INT(na, nb);
    ASSERT_TRUE(memcmp(x, y, na) == 0);
    free(x);
    free(y);
}

TEST_T(lamb_killed_and_resumed_is_byte_identical, 150) { resume_identical("lamb"); }
TEST_T(lars_killed_and_resumed_is_byte_identical, 150) { resume_identical("lars"); }
