/* prog_params_close.c: are two safetensors files of f32 parameters the same model within a tolerance?
 * For test_netns_train.sh (and any shell test that compares trained weights).
 *
 *   prog_params_close A.safetensors B.safetensors TOL
 *
 * Every tensor of A must be in B with the same shape, and every element within TOL relative, with the
 * parameters' RMS as the floor of the scale (the rule of tests/test_ddp_train.c). Prints the worst
 * relative difference; exits 0 within TOL, 1 outside, 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: prog_params_close A.safetensors B.safetensors TOL\n");
        return 2;
    }
    double tol = atof(argv[3]);
    baton_st_file *a, *b;
    if (baton_st_open(&a, argv[1]) < 0 || baton_st_open(&b, argv[2]) < 0) {
        fprintf(stderr, "prog_params_close: %s\n", baton_last_error());
        return 2;
    }
    double ss = 0;
    size_t n = 0;
    for (int i = 0; i < baton_st_count(a); i++) {
        const baton_st_entry *e = baton_st_get(a, i);
        const float *x = e->data;
        if (strcmp(e->dtype, "F32")) {
            fprintf(stderr, "prog_params_close: %s: tensor %s is %s, not F32\n", argv[1], e->name, e->dtype);
            return 2;
        }
        for (size_t k = 0; k < e->nbytes / 4; k++) ss += (double)x[k] * x[k];
        n += e->nbytes / 4;
    }
    double rms = n ? sqrt(ss / (double)n) : 0, worst = 0;
    if (baton_st_count(a) != baton_st_count(b)) {
        fprintf(stderr, "prog_params_close: %d tensors in %s, %d in %s\n", baton_st_count(a), argv[1],
                baton_st_count(b), argv[2]);
        return 1;
    }
    for (int i = 0; i < baton_st_count(a); i++) {
        const baton_st_entry *e = baton_st_get(a, i), *f = baton_st_find(b, e->name);
        if (!f || f->nbytes != e->nbytes || strcmp(f->dtype, e->dtype)) {
            fprintf(stderr, "prog_params_close: tensor %s differs in presence, size or dtype\n", e->name);
            return 1;
        }
        const float *x = e->data, *y = f->data;
        for (size_t k = 0; k < e->nbytes / 4; k++) {
            double s = fabs(x[k]) > rms ? fabs(x[k]) : rms, r = fabs((double)x[k] - y[k]) / (s > 0 ? s : 1);
            if (!(r <= worst)) worst = r; /* NaN counts as worst */
        }
    }
    printf("worst relative difference %.3e (tolerance %.1e)\n", worst, tol);
    baton_st_close(a);
    baton_st_close(b);
    return worst <= tol ? 0 : 1;
}
