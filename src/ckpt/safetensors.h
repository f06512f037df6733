/* safetensors.h: write and read the safetensors format (https://huggingface.co/docs/safetensors):
 * 8-byte little-endian header length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}} padded with spaces to a multiple
 * of 8, then the data section (offsets are relative to its start).
 *
 * The reader trusts nothing: a header over 100 MB or longer than the file, JSON that is not an object,
 * unknown dtypes, bad shapes, offsets out of range / overlapping / leaving holes, byte sizes that disagree
 * with dtype x shape, duplicate names, and truncation all give BATON_EFORMAT with a detail naming the file.
 *
 *   baton_st_save_params("model.safetensors", params, (const char *[]){"model", "mlp"}, 1);
 *   baton_st_file *f;
 *   if (baton_st_open(&f, "model.safetensors") == 0) {
 *       const baton_st_entry *e = baton_st_find(f, "fc1.weight");   // e->data, e->shape, e->nbytes
 *       baton_st_close(f);
 *   }
 *   baton_st_load_params("model.safetensors", params);   // every parameter must be present as F32 */
#ifndef BATON_CKPT_SAFETENSORS_H
#define BATON_CKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "baton/nn.h"

#define BATON_ST_MAX_HEADER (100u << 20)   /* bytes; the reference implementation's limit */
#define BATON_ST_MAX_DIMS 8
#define BATON_ST_MAX_NAME 255

typedef struct {
    const char *name;      /* tensor name */
    const char *dtype;     /* "F32", "F16", "BF16", "I32", ... */
    int ndim;              /* 0..BATON_ST_MAX_DIMS */
    int64_t shape[BATON_ST_MAX_DIMS];
    const void *data;      /* nbytes, little-endian */
    size_t nbytes;
} baton_st_tensor;

/* Writes tensors in the given order; meta is n_meta (key, value) string pairs for __metadata__. Writes
 * PATH.tmp, fsyncs it, renames it over PATH and fsyncs the directory, so a crash never leaves a
 * half-written file under PATH. */
int baton_st_write(const char *path, const baton_st_tensor *tensors, int n, const char *const *meta, int n_meta);
/* The same file image in memory: *out (malloc'ed, *out_len bytes). `what` names it in errors. */
int baton_st_serialize(const baton_st_tensor *tensors, int n, const char *const *meta, int n_meta, void **out,
                       size_t *out_len, const char *what);
/* Every parameter as an F32 tensor under its name. */
int baton_st_save_params(const char *path, const baton_params *p, const char *const *meta, int n_meta);

typedef struct {
    char name[BATON_ST_MAX_NAME + 1];
    char dtype[8];
    int ndim;
    int64_t shape[BATON_ST_MAX_DIMS];
    size_t begin, nbytes;  /* byte range in the data section */
    const void *data;      /* into the file buffer; valid until baton_st_close */
} baton_st_entry;

typedef struct baton_st_file baton_st_file;
int baton_st_open(baton_st_file **out, const char *path);
/* Parses a file image already in memory (copied). `what` names it in errors. */
int baton_st_parse(baton_st_file **out, const void *buf, size_t len, const char *what);
void baton_st_close(baton_st_file *f);
int baton_st_count(const baton_st_file *f);
const baton_st_entry *baton_st_get(const baton_st_file *f, int i);
const baton_st_entry *baton_st_find(const baton_st_file *f, const char *name);   /* NULL if absent */
const char *baton_st_meta(const baton_st_file *f, const char *key);              /* NULL if absent */
/* Copies every parameter from the file (F32, same shape) into the slab; extra tensors are an error too. */
int baton_st_load_params(const char *path, baton_params *p);

#endif
