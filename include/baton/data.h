/* baton/data.h: datasets held in memory as normalized f32 images plus int labels, the IDX loader for
 * (gzip-compressed) MNIST-style files, a synthetic dataset of any size, and the epoch sampler.
 *
 *   baton_dataset train, test;
 *   if (baton_dataset_fashion_mnist(&train, &test, NULL) < 0) fprintf(stderr, "%s\n", baton_last_error());
 *   baton_sampler s;
 *   baton_sampler_init(&s, train.n, rank, world, 1, seed);
 *   baton_sampler_set_epoch(&s, epoch);           // s.idx[0..s.len) = this rank's shard, reshuffled
 *   baton_dataset_gather(&train, s.idx + i, B, xbuf, ybuf);
 *   baton_sampler_free(&s); baton_dataset_free(&train); baton_dataset_free(&test);
 *
 * Loader errors (missing file, wrong magic, truncated data, header sizes that disagree with each other or
 * with the other file, labels out of range) return BATON_EIO / BATON_EFORMAT with a detail naming the file. */
#ifndef BATON_DATA_H
#define BATON_DATA_H

#include <stdint.h>

#include "baton/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int n;              /* samples */
    int c, h, w;        /* image shape (1, 28, 28) */
    int dim;            /* c*h*w floats per sample */
    int classes;        /* labels are in [0, classes) */
    float *x;           /* (n, dim), normalized: (pixel/255 - mean) / std */
    int32_t *y;         /* (n) */
} baton_dataset;

/* Fashion-MNIST train/test statistics of pixel/255, used for normalization. */
#define BATON_FMNIST_MEAN 0.2860f
#define BATON_FMNIST_STD 0.3530f
#define BATON_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads an IDX3 ubyte image file and an IDX1 ubyte label file (gzip or plain) with `classes` classes. */
int baton_dataset_load_idx(baton_dataset *ds, const char *images_path, const char *labels_path, int classes,
                           float mean, float std);
/* dir NULL: $BATON_DATA_DIR, else BATON_FMNIST_DIR (Debian's dataset-fashion-mnist). Each file is looked up as
 * NAME.gz, then NAME uncompressed (as torchvision leaves them), in dir and then in dir/FashionMNIST/raw
 * (torchvision's layout under its root), e.g. train-images-idx3-ubyte[.gz]. */
int baton_dataset_fashion_mnist(baton_dataset *train, baton_dataset *test, const char *dir);
/* n samples of c x h x w drawn around one random prototype per class (learnable, deterministic). */
int baton_dataset_synthetic(baton_dataset *ds, int n, int c, int h, int w, int classes, uint64_t seed);
void baton_dataset_free(baton_dataset *ds);   /* safe on a zeroed or freed dataset */
/* Copies samples idx[0..count) into x (count, dim) and y (count). */
void baton_dataset_gather(const baton_dataset *ds, const int32_t *idx, int count, float *x, int32_t *y);

/* Epoch sampler, DistributedSampler-style: each epoch is a permutation of [0, n) seeded by (seed, epoch),
 * padded by wrapping to a multiple of world, of which rank takes positions rank, rank+world, ... */
typedef struct {
    int n;              /* dataset size */
    int rank, world;    /* this shard */
    int shuffle;        /* 0: identity order */
    uint64_t seed;
    int len;            /* indices per rank per epoch: ceil(n / world) */
    int32_t *idx;       /* (len) this rank's indices for the current epoch */
    int32_t *perm;      /* (n) scratch */
} baton_sampler;
int baton_sampler_init(baton_sampler *s, int n, int rank, int world, int shuffle, uint64_t seed);
void baton_sampler_set_epoch(baton_sampler *s, long epoch);
void baton_sampler_free(baton_sampler *s);

#ifdef __cplusplus
}
#endif

#endif
