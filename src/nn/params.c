/* params.c: the parameter and gradient slabs with named views, the explicit RNG, and BLAS threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "nn/libs.h"
#include "nn/nn_impl.h"
#include "util/util.h"

/* ---- rng: xoshiro256** seeded through splitmix64 ----------------------------------------------------- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void baton_rng_seed(baton_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t baton_rng_u64(baton_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t baton_rng_below(baton_rng *r, uint64_t n) {
    BATON_ASSERT(n > 0);
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;   /* rejection keeps it unbiased */
    uint64_t x;
    do x = baton_rng_u64(r);
    while (x >= limit);
    return x % n;
}

float baton_rng_uniform(baton_rng *r) { return (float)(baton_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float baton_rng_normal(baton_rng *r) {
    double u1 = ((double)(baton_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);   /* (0, 1] */
    double u2 = (double)(baton_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void baton_set_threads(int threads) {
    baton__blas()->openblas_set_num_threads(threads < 1 ? 1 : threads);
    baton__gemm_threads(threads);
}

/* ---- parameters -------------------------------------------------------------------------------------- */
/* A slab of n floats, zeroed, 64-byte aligned. From 1 MiB up it is mapped on its own: freeing it (when a
 * slab moves into a caller's memory, e.g. shared memory for the data-parallel engine) gives the pages back
 * at once, where a heap chunk could stay resident in malloc's free lists (measured: half of a freed 15 MiB
 * slab stayed in the resident set). Returns NULL when out of memory. */
enum { SLAB_MAP_BYTES = 1 << 20 };
static float *slab_new(size_t n) {
    size_t bytes = n * sizeof(float);
    if (bytes >= SLAB_MAP_BYTES) {
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return m == MAP_FAILED ? NULL : m;
    }
    float *s = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (s) memset(s, 0, bytes);
    return s;
}
static void slab_free(float *s, size_t n) {
    if (!s) return;
    if (n * sizeof(float) >= SLAB_MAP_BYTES) munmap(s, n * sizeof(float));
    else free(s);
}

struct baton_params {
    int count;
    baton_param_info *info;   /* count views */
    baton_tensor *tensors;    /* count tensors viewing the slabs */
    float *data;              /* slab of numel floats, 64-byte aligned */
    float *own_data;          /* the value slab allocated here, or NULL while a caller lends it */
    float *grad;              /* the gradients held: slab elements [grad_lo, grad_hi), grad[0] is element grad_lo */
    size_t grad_lo, grad_hi;  /* [0, numel) unless baton_params_shard_grads narrowed it */
    size_t numel;
    float *own_grad;          /* the slab allocated here, or NULL while a caller lends the gradient memory */
};

int baton_params_new(baton_params **out, const baton_param_info *infos, int count) {
    *out = NULL;
    if (count <= 0 || count > 4096) return baton__fail(BATON_EINVAL, "params: %d parameters (need 1..4096)", count);
    baton_params *p = calloc(1, sizeof *p);
    if (!p) return baton__fail(BATON_ENOMEM, "params: out of memory");
    p->count = count;
    p->info = calloc((size_t)count, sizeof *p->info);
    p->tensors = calloc((size_t)count, sizeof *p->tensors);
    if (!p->info || !p->tensors) {
        baton_params_free(p);
        return baton__fail(BATON_ENOMEM, "params: out of memory");
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        baton_param_info *v = &p->info[i];
        *v = infos[i];
        v->name[sizeof v->name - 1] = '\0';
        if (v->ndim < 1 || v->ndim > BATON_MAX_DIMS) {
            baton_params_free(p);
            return baton__fail(BATON_EINVAL, "params: %s has %d dims (need 1..%d)", v->name, v->ndim, BATON_MAX_DIMS);
        }
        size_t n = 1;
        for (int d = 0; d < v->ndim; d++) {
            if (v->shape[d] <= 0 || !baton__mul_ok(n, (size_t)v->shape[d], &n) || n > ((size_t)1 << 32)) {
                baton_params_free(p);
                return baton__fail(BATON_EINVAL, "params: %s has a bad shape", v->name);
            }
        }
        v->offset = off;
        v->count = n;
        off += (n + 15) & ~(size_t)15;   /* each view starts on a 64-byte boundary */
    }
    p->numel = off;
    p->grad_hi = off;
    p->data = p->own_data = slab_new(off);
    p->grad = p->own_grad = slab_new(off);
    if (!p->data || !p->grad) {
        baton_params_free(p);
        return baton__fail(BATON_ENOMEM, "params: out of memory for %zu floats", off);
    }
    for (int i = 0; i < count; i++) {
        baton_tensor *x = &p->tensors[i];
        x->data = p->data + p->info[i].offset;
        x->grad = p->grad + p->info[i].offset;
        x->ndim = p->info[i].ndim;
        memcpy(x->shape, p->info[i].shape, sizeof x->shape);
        x->n = p->info[i].count;
        x->param = i;
        x->grad_full = 1;   /* the slab starts zeroed */
        x->base = x;
    }
    *out = p;
    return BATON_OK;
}

void baton_params_free(baton_params *p) {
    if (!p) return;
    free(p->info);
    free(p->tensors);
    slab_free(p->own_data, p->numel);
    slab_free(p->own_grad, p->numel);
    free(p);
}

static int whole(const baton_params *p) { return p->grad_lo == 0 && p->grad_hi == p->numel; }

int baton_params_count(const baton_params *p) { return p->count; }
const baton_param_info *baton_params_info(const baton_params *p, int i) {
    BATON_ASSERT(i >= 0 && i < p->count);
    return &p->info[i];
}
int baton_params_find(const baton_params *p, const char *name) {
    for (int i = 0; i < p->count; i++)
        if (!strcmp(p->info[i].name, name)) return i;
    return -1;
}
float *baton_params_data(baton_params *p) { return p->data; }
float *baton_params_grad(baton_params *p) { return whole(p) ? p->grad : NULL; }
float *baton_params_grad_at(baton_params *p, size_t lo, size_t hi) {
    BATON_ASSERT(p->grad_lo <= lo && lo <= hi && hi <= p->grad_hi);
    return p->grad + (lo - p->grad_lo);
}
size_t baton_params_numel(const baton_params *p) { return p->numel; }
baton_tensor *baton_params_tensor(baton_params *p, int i) {
    BATON_ASSERT(i >= 0 && i < p->count);
    return &p->tensors[i];
}
void baton_params_zero_grad(baton_params *p) {
    for (int i = 0; i < p->count; i++) p->tensors[i].grad_full = 0;
}

static void point_views(baton_params *p) {
    for (int i = 0; i < p->count; i++) p->tensors[i].grad = p->grad + p->info[i].offset;
}

int baton_params_set_grad_slab(baton_params *p, float *slab) {
    if (slab && ((uintptr_t)slab & 63) != 0)
        return baton__fail(BATON_EINVAL, "params: a gradient slab must be 64-byte aligned (got %p)", (void *)slab);
    if (slab && slab == p->grad && whole(p)) return BATON_OK;
    if (!slab && p->own_grad && p->grad == p->own_grad) return BATON_OK;
    float *to = slab;
    if (!to) {
        to = slab_new(p->numel);
        if (!to) return baton__fail(BATON_ENOMEM, "params: out of memory for the %zu-float gradient slab", p->numel);
    }
    float *old = p->grad;
    int was_whole = whole(p);
    if (was_whole) memcpy(to, old, p->numel * sizeof(float));
    else memcpy(to + p->grad_lo, old, (p->grad_hi - p->grad_lo) * sizeof(float));
    if (p->own_grad && p->own_grad != to) slab_free(p->own_grad, p->numel);
    p->own_grad = slab ? NULL : to;
    p->grad = to;
    p->grad_lo = 0;
    p->grad_hi = p->numel;
    point_views(p);
    if (!was_whole)   /* the views' gradients were elsewhere (staging): they hold nothing now */
        for (int i = 0; i < p->count; i++) p->tensors[i].grad_full = 1;
    return BATON_OK;
}

int baton_params_set_data_slab(baton_params *p, float *slab, size_t lo, size_t hi) {
    if (slab && ((uintptr_t)slab & 63) != 0)
        return baton__fail(BATON_EINVAL, "params: a value slab must be 64-byte aligned (got %p)", (void *)slab);
    if (slab && (lo > hi || hi > p->numel))
        return baton__fail(BATON_EINVAL, "params: range [%zu, %zu) is not inside the %zu-element slab", lo, hi, p->numel);
    if (slab == p->data || (!slab && p->data == p->own_data)) return BATON_OK;
    float *to = slab;
    if (!to) {
        to = slab_new(p->numel);
        if (!to) return baton__fail(BATON_ENOMEM, "params: out of memory for the %zu-float value slab", p->numel);
        lo = 0;
        hi = p->numel;
    }
    memcpy(to + lo, p->data + lo, (hi - lo) * sizeof(float));
    if (p->own_data && p->own_data != to) slab_free(p->own_data, p->numel);
    p->own_data = slab ? NULL : to;
    p->data = to;
    for (int i = 0; i < p->count; i++) p->tensors[i].data = p->data + p->info[i].offset;
    return BATON_OK;
}

int baton_params_shard_grads(baton_params *p, float *shard, size_t lo, size_t hi) {
    if (lo > hi || hi > p->numel)
        return baton__fail(BATON_EINVAL, "params: gradient shard [%zu, %zu) is not inside the %zu-element slab", lo, hi,
                           p->numel);
    if (!shard || ((uintptr_t)shard & 63) != 0)
        return baton__fail(BATON_EINVAL, "params: a gradient shard must be 64-byte aligned (got %p)", (void *)shard);
    memcpy(shard, baton_params_grad_at(p, lo, hi), (hi - lo) * sizeof(float));
    slab_free(p->own_grad, p->numel);
    p->own_grad = NULL;
    p->grad = shard;
    p->grad_lo = lo;
    p->grad_hi = hi;
    return BATON_OK;
}

void baton_params_set_view_grad(baton_params *p, int i, float *grad) {
    BATON_ASSERT(i >= 0 && i < p->count && grad);
    p->tensors[i].grad = grad;
}
