/* optim_large.c: the large-batch optimizers, LARS (You, Gitman, Ginsburg 2017) and LAMB (You et al. 2019),
 * on one parameter view (a layer's weight or bias): the step of each layer is scaled by a trust ratio, the
 * layer's weight norm over its update norm, so every layer moves by a similar fraction of its size however
 * large the batch (and so the learning rate) is. Views with adapt = 0 (biases and normalisation parameters,
 * decay = 0 in baton_param_info) get neither weight decay nor a ratio. Norms are summed in double. The update
 * rules are in include/baton/nn.h; tests/test_optim_large.c checks them against a double-precision reference. */
#include <math.h>
#include <stddef.h>

#include "nn/nn_impl.h"

/* |a| over n floats, and |a + k*b| when b is given. */
static double norm2(const float *a, const float *b, float k, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)a[i] + (b ? (double)k * (double)b[i] : 0.0);
        s += x * x;
    }
    return sqrt(s);
}

void baton__lars(float *w, const float *g, float *m, size_t n, float lr, float mu, float wd, float eta, int adapt) {
    float ratio = 1.0f;
    if (adapt) {
        double wn = norm2(w, NULL, 0.0f, n), un = norm2(g, w, wd, n);
        if (wn > 0.0 && un > 0.0) ratio = (float)((double)eta * wn / un);
    } else {
        wd = 0.0f;
    }
    for (size_t i = 0; i < n; i++) {
        float u = g[i] + wd * w[i];
        m[i] = mu * m[i] + ratio * u;
        w[i] -= lr * m[i];
    }
}

void baton__lamb(float *w, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
                 float eps, float c1, float c2, int adapt) {
    if (!adapt) wd = 0.0f;
    /* first pass: moments, and the norms of w and of the update u = mhat/(sqrt(vhat)+eps) + wd*w */
    double wn = 0.0, un = 0.0;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float u = (m[i] * c1) / (sqrtf(v[i] * c2) + eps) + wd * w[i];
        wn += (double)w[i] * w[i];
        un += (double)u * u;
    }
    float ratio = adapt && wn > 0.0 && un > 0.0 ? (float)sqrt(wn / un) : 1.0f;
    for (size_t i = 0; i < n; i++) {
        float u = (m[i] * c1) / (sqrtf(v[i] * c2) + eps) + wd * w[i];
        w[i] -= lr * ratio * u;
    }
}
