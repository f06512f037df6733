/* safetensors.c: the safetensors writer and a reader that validates every field before use. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/files.h"
#include "ckpt/safetensors.h"
#include "util/util.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
              {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},   {"BOOL", 1}};

static size_t dtype_size(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, name)) return dtypes[i].size;
    return 0;
}

/* ---- writer ------------------------------------------------------------------------------------------ */
int baton_st_serialize(const baton_st_tensor *tensors, int n, const char *const *meta, int n_meta, void **out,
                       size_t *out_len, const char *what) {
    *out = NULL;
    *out_len = 0;
    cJSON *root = cJSON_CreateObject();
    char *json = NULL;
    int rc = BATON_OK;
    if (!root) return baton__fail(BATON_ENOMEM, "%s: out of memory", what);
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < n_meta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const baton_st_tensor *t = &tensors[i];
        size_t esz = dtype_size(t->dtype), numel = 1;
        if (!esz || t->ndim < 0 || t->ndim > BATON_ST_MAX_DIMS) {
            rc = baton__fail(BATON_EINVAL, "%s: tensor %s: bad dtype or rank", what, t->name);
            goto out;
        }
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        if (numel * esz != t->nbytes) {
            rc = baton__fail(BATON_EINVAL, "%s: tensor %s: %zu bytes disagree with its shape", what, t->name, t->nbytes);
            goto out;
        }
        cJSON *e = cJSON_AddObjectToObject(root, t->name), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        if (!e || !shape || !offs) {
            cJSON_Delete(shape);
            cJSON_Delete(offs);
            rc = baton__fail(BATON_ENOMEM, "%s: out of memory", what);
            goto out;
        }
        cJSON_AddStringToObject(e, "dtype", t->dtype);
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToObject(e, "shape", shape);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t->nbytes)));
        cJSON_AddItemToObject(e, "data_offsets", offs);
        off += t->nbytes;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", what);
        goto out;
    }
    size_t jlen = strlen(json), padded = (jlen + 7) & ~(size_t)7, total = 8 + padded + off;
    unsigned char *buf = malloc(total);
    if (!buf) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory for %zu bytes", what, total);
        goto out;
    }
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, jlen);
    memset(buf + 8 + jlen, ' ', padded - jlen);
    unsigned char *p = buf + 8 + padded;
    for (int i = 0; i < n; i++) {
        if (tensors[i].nbytes) memcpy(p, tensors[i].data, tensors[i].nbytes);
        p += tensors[i].nbytes;
    }
    *out = buf;
    *out_len = total;
out:
    free(json);
    cJSON_Delete(root);
    return rc;
}

int baton_st_write(const char *path, const baton_st_tensor *tensors, int n, const char *const *meta, int n_meta) {
    void *buf;
    size_t len;
    int rc = baton_st_serialize(tensors, n, meta, n_meta, &buf, &len, path);
    if (rc < 0) return rc;
    rc = baton__write_atomic(path, buf, len, BATON_FILE_DURABLE);
    free(buf);
    return rc;
}

int baton_st_save_params(const char *path, const baton_params *p, const char *const *meta, int n_meta) {
    int n = baton_params_count(p);
    baton_st_tensor *t = calloc((size_t)n, sizeof *t);
    if (!t) return baton__fail(BATON_ENOMEM, "%s: out of memory", path);
    const float *data = baton_params_data((baton_params *)p);
    for (int i = 0; i < n; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        t[i].name = v->name;
        t[i].dtype = "F32";
        t[i].ndim = v->ndim;
        for (int d = 0; d < v->ndim; d++) t[i].shape[d] = v->shape[d];
        t[i].data = data + v->offset;
        t[i].nbytes = v->count * sizeof(float);
    }
    int rc = baton_st_write(path, t, n, meta, n_meta);
    free(t);
    return rc;
}

/* ---- reader ------------------------------------------------------------------------------------------ */
struct baton_st_file {
    unsigned char *buf;      /* whole file */
    size_t len;
    baton_st_entry *e;       /* n entries in data order */
    int n;
    cJSON *meta;             /* __metadata__ (detached), or NULL */
    char what[256];
};

void baton_st_close(baton_st_file *f) {
    if (!f) return;
    free(f->buf);
    free(f->e);
    cJSON_Delete(f->meta);
    free(f);
}

/* A JSON number that is a non-negative integer <= 2^53. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0) || floor(v) != v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const baton_st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const baton_st_entry *)a)->name, ((const baton_st_entry *)b)->name);
}

static int parse_entry(baton_st_file *f, const cJSON *item, baton_st_entry *e, size_t data_len) {
    const char *w = f->what, *name = item->string;
    if (strlen(name) > BATON_ST_MAX_NAME)
        return baton__fail(BATON_EFORMAT, "%s: tensor name longer than %d bytes", w, BATON_ST_MAX_NAME);
    snprintf(e->name, sizeof e->name, "%s", name);
    if (!cJSON_IsObject(item)) return baton__fail(BATON_EFORMAT, "%s: tensor %s: entry is not an object", w, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt) || !dtype_size(dt->valuestring))
        return baton__fail(BATON_EFORMAT, "%s: tensor %s: missing or unknown dtype", w, name);
    snprintf(e->dtype, sizeof e->dtype, "%s", dt->valuestring);
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > BATON_ST_MAX_DIMS)
        return baton__fail(BATON_EFORMAT, "%s: tensor %s: shape must be an array of at most %d sizes", w, name,
                           BATON_ST_MAX_DIMS);
    size_t numel = 1;
    e->ndim = 0;
    for (const cJSON *d = sh->child; d; d = d->next) {
        uint64_t v;
        if (!json_uint(d, &v) || v > INT64_MAX || !baton__mul_ok(numel, (size_t)v, &numel))
            return baton__fail(BATON_EFORMAT, "%s: tensor %s: shape holds a bad size", w, name);
        e->shape[e->ndim++] = (int64_t)v;
    }
    uint64_t b, en;
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !json_uint(of->child, &b) ||
        !json_uint(of->child->next, &en))
        return baton__fail(BATON_EFORMAT, "%s: tensor %s: data_offsets must be [begin, end]", w, name);
    if (b > en || en > data_len)
        return baton__fail(BATON_EFORMAT, "%s: tensor %s: data_offsets [%llu, %llu] out of range (data section "
                                          "is %zu bytes; file truncated?)", w, name, (unsigned long long)b,
                           (unsigned long long)en, data_len);
    size_t bytes;
    if (!baton__mul_ok(numel, dtype_size(e->dtype), &bytes) || bytes != en - b)
        return baton__fail(BATON_EFORMAT, "%s: tensor %s: %llu bytes disagree with dtype %s and its shape", w,
                           name, (unsigned long long)(en - b), e->dtype);
    e->begin = (size_t)b;
    e->nbytes = bytes;
    return BATON_OK;
}

/* Parses and takes ownership of buf (len bytes, malloc'ed), freeing it on failure. */
static int parse_owned(baton_st_file **out, unsigned char *buf, size_t len, const char *what) {
    *out = NULL;
    baton_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(buf);
        return baton__fail(BATON_ENOMEM, "%s: out of memory", what);
    }
    f->buf = buf;
    f->len = len;
    snprintf(f->what, sizeof f->what, "%s", what);
    cJSON *root = NULL;
    int rc;
    if (len < 8) {
        rc = baton__fail(BATON_EFORMAT, "%s: truncated: %zu bytes, shorter than the 8-byte header length", what, len);
        goto fail;
    }
    const unsigned char *p = f->buf;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)p[i] << (8 * i);
    if (hlen > BATON_ST_MAX_HEADER) {
        rc = baton__fail(BATON_EFORMAT, "%s: header of %llu bytes exceeds the %u-byte limit", what,
                         (unsigned long long)hlen, BATON_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > len - 8) {
        rc = baton__fail(BATON_EFORMAT, "%s: truncated: header says %llu bytes but only %zu follow", what,
                         (unsigned long long)hlen, len - 8);
        goto fail;
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts((const char *)f->buf + 8, (size_t)hlen, &end, 0);
    if (!cJSON_IsObject(root) || hlen == 0 || f->buf[8] != '{') {
        rc = baton__fail(BATON_EFORMAT, "%s: header is not a JSON object", what);
        goto fail;
    }
    for (const char *q = end; q < (const char *)f->buf + 8 + hlen; q++)
        if (*q != ' ' && *q != '\n' && *q != '\t' && *q != '\r') {
            rc = baton__fail(BATON_EFORMAT, "%s: junk after the JSON header", what);
            goto fail;
        }
    size_t data_len = len - 8 - (size_t)hlen;
    int count = 0;
    for (cJSON *it = root->child; it; it = it->next) count++;
    if (count > 1000000) {
        rc = baton__fail(BATON_EFORMAT, "%s: too many entries (%d)", what, count);
        goto fail;
    }
    f->e = calloc((size_t)(count ? count : 1), sizeof *f->e);
    if (!f->e) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", what);
        goto fail;
    }
    for (cJSON *it = root->child; it; it = it->next) {
        if (!it->string) {
            rc = baton__fail(BATON_EFORMAT, "%s: header entry without a name", what);
            goto fail;
        }
        if (!strcmp(it->string, "__metadata__")) {
            if (f->meta || !cJSON_IsObject(it)) {
                rc = baton__fail(BATON_EFORMAT, "%s: __metadata__ must be one object of strings", what);
                goto fail;
            }
            for (cJSON *m = it->child; m; m = m->next)
                if (!cJSON_IsString(m)) {
                    rc = baton__fail(BATON_EFORMAT, "%s: __metadata__ value for '%s' is not a string", what,
                                     m->string ? m->string : "");
                    goto fail;
                }
            f->meta = cJSON_Duplicate(it, 1);
            if (!f->meta) {
                rc = baton__fail(BATON_ENOMEM, "%s: out of memory", what);
                goto fail;
            }
            continue;
        }
        if ((rc = parse_entry(f, it, &f->e[f->n], data_len)) < 0) goto fail;
        f->n++;
    }
    /* Duplicate names, found by sorting (a pairwise scan is quadratic: a hostile header of a million
     * zero-sized tensors would hold the reader for hours). */
    qsort(f->e, (size_t)f->n, sizeof *f->e, cmp_name);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->e[i - 1].name, f->e[i].name)) {
            rc = baton__fail(BATON_EFORMAT, "%s: tensor %s appears twice", what, f->e[i].name);
            goto fail;
        }
    /* The data section must be covered exactly: no overlaps, no holes, nothing after the last tensor. */
    qsort(f->e, (size_t)f->n, sizeof *f->e, cmp_begin);
    size_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->e[i].begin != pos) {
            rc = baton__fail(BATON_EFORMAT, "%s: tensor %s: data_offsets %s the previous tensor (begin %zu, "
                                            "expected %zu)", what, f->e[i].name,
                             f->e[i].begin < pos ? "overlap" : "leave a hole after", f->e[i].begin, pos);
            goto fail;
        }
        pos += f->e[i].nbytes;
        f->e[i].data = f->buf + 8 + hlen + f->e[i].begin;
    }
    if (pos != data_len) {
        rc = baton__fail(BATON_EFORMAT, "%s: %zu bytes of data section but the tensors cover %zu", what,
                         data_len, pos);
        goto fail;
    }
    cJSON_Delete(root);
    *out = f;
    return BATON_OK;
fail:
    cJSON_Delete(root);
    baton_st_close(f);
    return rc;
}

int baton_st_open(baton_st_file **out, const char *path) {
    *out = NULL;
    int fd = baton__open_regular(path); /* never blocks on a FIFO; regular files only */
    if (fd < 0) return fd == BATON_ENOTFOUND ? baton__fail(BATON_EIO, "%s: cannot open: does not exist", path) : fd;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return baton__fail(BATON_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fclose(fp);
        return baton__fail(BATON_EIO, "%s: cannot stat: %s", path, strerror(errno));
    }
    size_t len = (size_t)st.st_size;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(fp);
        return baton__fail(BATON_ENOMEM, "%s: out of memory for %zu bytes", path, len);
    }
    size_t got = fread(buf, 1, len, fp);
    fclose(fp);
    if (got != len) {
        free(buf);
        return baton__fail(BATON_EIO, "%s: short read (%zu of %zu bytes)", path, got, len);
    }
    return parse_owned(out, buf, len, path);
}

int baton_st_parse(baton_st_file **out, const void *buf, size_t len, const char *what) {
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy) {
        *out = NULL;
        return baton__fail(BATON_ENOMEM, "%s: out of memory for %zu bytes", what, len);
    }
    if (len) memcpy(copy, buf, len);
    return parse_owned(out, copy, len, what);
}

int baton_st_count(const baton_st_file *f) { return f->n; }
const baton_st_entry *baton_st_get(const baton_st_file *f, int i) { return i >= 0 && i < f->n ? &f->e[i] : NULL; }
const baton_st_entry *baton_st_find(const baton_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    return NULL;
}
const char *baton_st_meta(const baton_st_file *f, const char *key) {
    const cJSON *v = f->meta ? cJSON_GetObjectItemCaseSensitive(f->meta, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int baton_st_load_params(const char *path, baton_params *p) {
    baton_st_file *f;
    int rc = baton_st_open(&f, path);
    if (rc < 0) return rc;
    int np = baton_params_count(p);
    if (f->n != np) {
        rc = baton__fail(BATON_EMISMATCH, "%s: holds %d tensors but the model has %d parameters", path, f->n, np);
        goto out;
    }
    for (int i = 0; i < np; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        const baton_st_entry *e = baton_st_find(f, v->name);
        int same = e && !strcmp(e->dtype, "F32") && e->ndim == v->ndim;
        for (int d = 0; same && d < v->ndim; d++) same = e->shape[d] == v->shape[d];
        if (!same) {
            rc = baton__fail(BATON_EMISMATCH, "%s: parameter %s is missing or not F32 of the model's shape", path,
                             v->name);
            goto out;
        }
        memcpy(baton_params_data(p) + v->offset, e->data, e->nbytes);
    }
    rc = BATON_OK;
out:
    baton_st_close(f);
    return rc;
}
