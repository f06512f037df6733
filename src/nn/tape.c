/* tape.c: the autograd tape: arena allocation of activations, node recording, and the reverse walk that
 * calls one backward per node and fires the per-parameter "gradient final" hook. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "util/util.h"

/* One backward function per op, in enum order; the static_assert keeps the table and the enum in sync. */
typedef void (*bwd_fn)(baton_tape *, baton_node *);
static const bwd_fn op_backward[] = {
#define BATON_OP_TABLE_(name) baton__bwd_##name,
    BATON_OP_MAP(BATON_OP_TABLE_)
#undef BATON_OP_TABLE_
};
static_assert(sizeof op_backward / sizeof op_backward[0] == BATON__OP_COUNT, "op table out of sync");

#define CHUNK_HDR 64   /* chunk header padded so data stays 64-byte aligned */
static_assert(sizeof(baton_chunk) <= CHUNK_HDR, "chunk header too large");
#define CHUNK_MIN ((size_t)1 << 20)

static unsigned char *chunk_data(baton_chunk *c) { return (unsigned char *)c + CHUNK_HDR; }

static baton_chunk *chunk_new(baton_tape *t, size_t cap) {
    size_t bytes;
    if (!baton__add_ok(cap, CHUNK_HDR, &bytes)) return NULL;
    bytes = (bytes + 63) & ~(size_t)63;
    baton_chunk *c = aligned_alloc(64, bytes);
    if (!c) return NULL;
    c->next = NULL;
    c->cap = bytes - CHUNK_HDR;
    c->used = 0;
    t->mallocs++;
    return c;
}

void *baton__arena_alloc(baton_tape *t, size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    baton_chunk *c = t->cur;
    if (!c || c->cap - c->used < bytes) {
        /* the next chunk of an earlier step if it fits (steps allocate alike, so it does), else a new one
         * after this one, at least twice this one's size */
        if (c && c->next && c->next->cap >= bytes) {
            c = c->next;
        } else {
            size_t cap = c ? c->cap * 2 : CHUNK_MIN;
            if (cap < bytes) cap = bytes;
            baton_chunk *nc = chunk_new(t, cap);
            if (!nc) {
                fprintf(stderr, "baton: out of memory allocating %zu bytes of activations\n", bytes);
                abort();
            }
            if (c) {
                nc->next = c->next;
                c->next = nc;
            } else {
                nc->next = t->chunks;
                t->chunks = nc;
            }
            c = nc;
        }
        c->used = 0;
        t->cur = c;
    }
    void *p = chunk_data(c) + c->used;
    c->used += bytes;
    return p;
}

baton_tape *baton_tape_new(baton_params *params, uint64_t seed) {
    baton_tape *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->params = params;
    t->training = 1;
    t->stamp = 1;
    baton_rng_seed(&t->rng, seed ^ 0x7461706564726f70ull);
    int np = params ? baton_params_count(params) : 0;
    t->cap_params = np;
    if (np) {
        t->first_use = malloc((size_t)np * sizeof *t->first_use);
        if (!t->first_use) {
            free(t);
            return NULL;
        }
    }
    return t;
}

void baton_tape_free(baton_tape *t) {
    if (!t) return;
    for (baton_chunk *c = t->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(t->nodes);
    free(t->first_use);
    baton__tape_gemm_free(t);
    free(t);
}

void baton_tape_reset(baton_tape *t, int training) {
    t->training = training;
    t->n_nodes = 0;
    t->stamp++;   /* the parameters may have changed: bf16 weight copies are stale */
    /* Reuse the chunks from the first: folding them into one new chunk (as before) made the next step touch
     * all of it afresh, a page fault per 4 KiB (about 260,000 for the 6 x 384 GPT at batch 16). */
    t->cur = t->chunks;
    if (t->cur) t->cur->used = 0;
}

int baton_tape_training(const baton_tape *t) { return t->training; }
baton_rng *baton_tape_rng(baton_tape *t) { return &t->rng; }

size_t baton_tape_arena_bytes(const baton_tape *t) {
    size_t total = 0;
    for (const baton_chunk *c = t->chunks; c; c = c->next) total += c->cap;
    return total;
}
size_t baton_tape_arena_mallocs(const baton_tape *t) { return t->mallocs; }

void baton_tape_set_grad_hook(baton_tape *t, baton_grad_hook hook, void *ctx) {
    t->hook = hook;
    t->hook_ctx = ctx;
}

void baton_tape_set_grad_need_hook(baton_tape *t, baton_grad_hook hook, void *ctx) {
    t->need = hook;
    t->need_ctx = ctx;
}

baton_node *baton__tape_push(baton_tape *t, int op) {
    if (t->n_nodes == t->cap_nodes) {
        int cap = t->cap_nodes ? t->cap_nodes * 2 : 64;
        baton_node *nn = realloc(t->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            fprintf(stderr, "baton: out of memory growing the tape\n");
            abort();
        }
        t->nodes = nn;
        t->cap_nodes = cap;
    }
    baton_node *n = &t->nodes[t->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    return n;
}

static baton_tensor *tensor_init(baton_tape *t, int ndim, const int *shape) {
    BATON_ASSERT(ndim >= 1 && ndim <= BATON_MAX_DIMS);
    baton_tensor *x = baton__arena_alloc(t, sizeof *x);
    memset(x, 0, sizeof *x);
    x->ndim = ndim;
    x->n = 1;
    for (int i = 0; i < ndim; i++) {
        BATON_ASSERT(shape[i] > 0);
        x->shape[i] = shape[i];
        x->n *= (size_t)shape[i];
    }
    x->param = -1;
    x->base = x;
    return x;
}

baton_tensor *baton__tensor_new(baton_tape *t, int ndim, const int *shape, int requires_grad) {
    baton_tensor *x = tensor_init(t, ndim, shape);
    x->data = baton__arena_alloc(t, x->n * sizeof(float));
    if (requires_grad && t->training) x->grad = baton__arena_alloc(t, x->n * sizeof(float));
    return x;
}

baton_tensor *baton_tape_tensor(baton_tape *t, int ndim, const int *shape, int requires_grad) {
    return baton__tensor_new(t, ndim, shape, requires_grad);
}

baton_tensor *baton_tape_input(baton_tape *t, int ndim, const int *shape, float *data) {
    baton_tensor *x = tensor_init(t, ndim, shape);
    x->data = data;
    return x;
}

int baton__sole_use(const baton_tape *t, const baton_tensor *x) {
    int uses = 0;
    for (int j = 0; j < t->n_nodes; j++)
        for (int k = 0; k < BATON_NODE_INPUTS; k++)
            if (t->nodes[j].in[k] && t->nodes[j].in[k]->base == x->base) uses++;
    return uses == 1;
}

int baton__producer_op(const baton_tape *t, const baton_tensor *x, int *iarg0) {
    for (int j = t->n_nodes - 1; j >= 0; j--)
        if (t->nodes[j].out == x) {
            if (iarg0) *iarg0 = t->nodes[j].iarg[0];
            return t->nodes[j].op;
        }
    return -1;
}

/* Marks parameter p final: zero-fills it if nothing wrote it this backward, then calls the hook. */
static void param_final(baton_tape *t, int p) {
    baton_tensor *w = baton_params_tensor(t->params, p);
    if (!w->grad_full) {
        if (t->need) t->need(t->need_ctx, p);
        memset(w->grad, 0, w->n * sizeof(float));
        w->grad_full = 1;
    }
    if (t->hook) t->hook(t->hook_ctx, p);
}

void baton_tape_backward(baton_tape *t, baton_tensor *loss, float scale) {
    BATON_ASSERT(t->training && loss->n == 1 && loss->grad);
    int np = t->params ? baton_params_count(t->params) : 0;
    BATON_ASSERT(np <= t->cap_params);
    for (int p = 0; p < np; p++) t->first_use[p] = -1;
    for (int j = 0; j < t->n_nodes; j++)
        for (int k = 0; k < BATON_NODE_INPUTS; k++) {
            baton_tensor *x = t->nodes[j].in[k];
            if (x && x->param >= 0 && x->param < np && t->first_use[x->param] < 0) t->first_use[x->param] = j;
        }
    loss->grad[0] = scale;
    loss->base->grad_full = 1;
    for (int j = t->n_nodes - 1; j >= 0; j--) {
        baton_node *n = &t->nodes[j];
        if (n->out->grad && n->out->base->grad_full) {
            if (t->need)   /* parameters this node writes for the first time get their memory now */
                for (int k = 0; k < BATON_NODE_INPUTS; k++) {
                    baton_tensor *x = n->in[k];
                    if (x && x->param >= 0 && x->param < np && !x->grad_full) t->need(t->need_ctx, x->param);
                }
            op_backward[n->op](t, n);
        }
        for (int k = 0; k < BATON_NODE_INPUTS; k++) {
            baton_tensor *x = n->in[k];
            if (x && x->param >= 0 && x->param < np && t->first_use[x->param] == j) {
                t->first_use[x->param] = -2;   /* fired */
                param_final(t, x->param);
            }
        }
    }
    for (int p = 0; p < np; p++)
        if (t->first_use[p] == -1) param_final(t, p);
}
