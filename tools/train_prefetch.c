/* train_prefetch.c: `baton train`'s input pipeline: the next batch is gathered on a loader thread while the
 * current one is trained on (see train_metrics.h). The time the trainer then spends in train_prefetch_take
 * is the time it was blocked on data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_metrics.h"
#include "util/util.h"

static void *loader(void *arg) {
    train_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->pending && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        pthread_mutex_unlock(&p->mu);
        baton_dataset_gather(p->ds, p->idx, p->b, p->x, p->y);
        if (p->slow_ms > 0) baton__sleep_ns((uint64_t)p->slow_ms * 1000000ull);
        pthread_mutex_lock(&p->mu);
        p->pending = 0;
        p->ready = 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int train_prefetch_start(train_prefetch *p, const baton_dataset *ds, int b, int threaded) {
    memset(p, 0, sizeof *p);
    p->threaded = threaded;
    p->ds = ds;
    p->b = b;
    /* Test knob: a slow loader (tests/test_observe.c). */
    if (baton__env_long("BATON_TEST_SLOW_DATA_MS", 0, 0, 60000, &p->slow_ms) == BATON_EINVAL) {
        fprintf(stderr, "baton train: %s\n", baton_last_error());
        return -1;
    }
    p->idx = malloc((size_t)b * sizeof(int32_t));
    p->x = malloc((size_t)b * ds->dim * sizeof(float));
    p->y = malloc((size_t)b * sizeof(int32_t));
    if (!p->idx || !p->x || !p->y) {
        fprintf(stderr, "baton train: out of memory for the input pipeline\n");
        return -1;
    }
    if (!threaded) return 0;   /* --no-prefetch: train_prefetch_take gathers on the caller's thread */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, loader, p) != 0) {
        fprintf(stderr, "baton train: cannot start the input pipeline thread\n");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return -1;
    }
    p->started = 1;
    return 0;
}

void train_prefetch_request(train_prefetch *p, const int32_t *idx) {
    if (!p->threaded) {
        memcpy(p->idx, idx, (size_t)p->b * sizeof(int32_t));
        return;
    }
    pthread_mutex_lock(&p->mu);
    memcpy(p->idx, idx, (size_t)p->b * sizeof(int32_t));   /* the sampler may reshuffle meanwhile */
    p->ready = 0;
    p->pending = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void train_prefetch_take(train_prefetch *p, float **x, int32_t **y) {
    if (!p->threaded) {
        baton_dataset_gather(p->ds, p->idx, p->b, *x, *y);
        if (p->slow_ms > 0) baton__sleep_ns((uint64_t)p->slow_ms * 1000000ull);
        return;
    }
    pthread_mutex_lock(&p->mu);
    while (!p->ready) pthread_cond_wait(&p->cv, &p->mu);
    p->ready = 0;
    float *tx = *x;
    int32_t *ty = *y;
    *x = p->x;   /* swap: the loader fills the caller's old buffers next */
    *y = p->y;
    p->x = tx;
    p->y = ty;
    pthread_mutex_unlock(&p->mu);
}

void train_prefetch_stop(train_prefetch *p) {
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->th, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
    free(p->idx);
    free(p->x);
    free(p->y);
    memset(p, 0, sizeof *p);
}
