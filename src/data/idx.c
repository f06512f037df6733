/* idx.c: the IDX loader (MNIST / Fashion-MNIST files, gzip-compressed or plain, read through zlib).
 * An IDX file is a 4-byte magic (0, 0, type 0x08 = ubyte, ndims), ndims big-endian u32 sizes, then the
 * data. Every size is bounded and checked against the other file before anything is allocated. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "baton/data.h"
#include "util/files.h"
#include "util/util.h"

#define IDX_MAX_SAMPLES 10000000
#define IDX_MAX_SIDE 4096

typedef struct {
    gzFile f;
    const char *path;
} idx_file;

static int idx_open(idx_file *f, const char *path) {
    f->path = path;
    int fd = baton__open_regular(path); /* never blocks on a FIFO; regular files only */
    if (fd < 0) return fd == BATON_ENOTFOUND ? baton__fail(BATON_EIO, "%s: cannot open: does not exist", path) : fd;
    f->f = gzdopen(fd, "rb");
    if (!f->f) {
        close(fd);
        return baton__fail(BATON_EIO, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
    }
    return BATON_OK;
}

static int idx_read(idx_file *f, void *buf, size_t n, const char *what) {
    unsigned char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        int got = gzread(f->f, p, chunk);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f->f, &zerr);
            return baton__fail(BATON_EFORMAT, "%s: corrupt gzip data while reading %s: %s", f->path, what, msg);
        }
        if (got == 0) return baton__fail(BATON_EFORMAT, "%s: truncated: file ends inside the %s", f->path, what);
        p += got;
        n -= (size_t)got;
    }
    return BATON_OK;
}

/* Reads the header; checks the magic (ubyte, ndims) and returns the sizes. */
static int idx_header(idx_file *f, int ndims, uint32_t *dims) {
    unsigned char h[4 + 4 * 3];
    int rc = idx_read(f, h, 4 + 4 * (size_t)ndims, "header");
    if (rc < 0) return rc;
    if (h[0] != 0 || h[1] != 0 || h[2] != 0x08 || h[3] != ndims)
        return baton__fail(BATON_EFORMAT,
                           "%s: wrong magic %02x%02x%02x%02x (expected 000008%02x: an IDX ubyte file with %d dims)",
                           f->path, h[0], h[1], h[2], h[3], ndims, ndims);
    for (int i = 0; i < ndims; i++) {
        const unsigned char *q = h + 4 + 4 * i;
        dims[i] = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    }
    return BATON_OK;
}

static int idx_expect_end(idx_file *f) {
    unsigned char extra;
    int got = gzread(f->f, &extra, 1);
    if (got != 0)
        return baton__fail(BATON_EFORMAT, "%s: the header's sizes disagree with the file: data continues past "
                                          "the end the header announces", f->path);
    return BATON_OK;
}

void baton_dataset_free(baton_dataset *ds) {
    if (!ds) return;
    free(ds->x);
    free(ds->y);
    ds->x = NULL;
    ds->y = NULL;
    ds->n = 0;
}

int baton_dataset_load_idx(baton_dataset *ds, const char *images_path, const char *labels_path, int classes,
                           float mean, float std) {
    memset(ds, 0, sizeof *ds);
    if (classes < 2 || classes > 256 || !(std > 0.0f))
        return baton__fail(BATON_EINVAL, "idx: bad classes %d / std %g", classes, (double)std);
    idx_file fi = {0}, fl = {0};
    unsigned char *raw = NULL;
    uint32_t di[3], dl[1];
    int rc;
    if ((rc = idx_open(&fi, images_path)) < 0) goto out;
    if ((rc = idx_open(&fl, labels_path)) < 0) goto out;
    if ((rc = idx_header(&fi, 3, di)) < 0) goto out;
    if ((rc = idx_header(&fl, 1, dl)) < 0) goto out;
    if (di[0] == 0 || di[0] > IDX_MAX_SAMPLES || di[1] == 0 || di[1] > IDX_MAX_SIDE || di[2] == 0 ||
        di[2] > IDX_MAX_SIDE || (uint64_t)di[0] * di[1] * di[2] > ((uint64_t)1 << 32)) {
        rc = baton__fail(BATON_EFORMAT, "%s: implausible header sizes %u x %u x %u (at most %d images of at "
                                        "most %dx%d)", images_path, di[0], di[1], di[2], IDX_MAX_SAMPLES,
                         IDX_MAX_SIDE, IDX_MAX_SIDE);
        goto out;
    }
    if (dl[0] != di[0]) {
        rc = baton__fail(BATON_EFORMAT, "%s: sizes disagree: %u labels but %s holds %u images", labels_path,
                         dl[0], images_path, di[0]);
        goto out;
    }
    size_t n = di[0], dim = (size_t)di[1] * di[2];
    ds->n = (int)n;
    ds->c = 1;
    ds->h = (int)di[1];
    ds->w = (int)di[2];
    ds->dim = (int)dim;
    ds->classes = classes;
    raw = malloc(n * dim > n ? n * dim : n);
    ds->x = malloc(n * dim * sizeof(float));
    ds->y = malloc(n * sizeof(int32_t));
    if (!raw || !ds->x || !ds->y) {
        rc = baton__fail(BATON_ENOMEM, "idx: out of memory for %zu images", n);
        goto out;
    }
    if ((rc = idx_read(&fi, raw, n * dim, "image data")) < 0 || (rc = idx_expect_end(&fi)) < 0) goto out;
    float scale = 1.0f / (255.0f * std), shift = mean / std;
    for (size_t i = 0; i < n * dim; i++) ds->x[i] = (float)raw[i] * scale - shift;
    if ((rc = idx_read(&fl, raw, n, "label data")) < 0 || (rc = idx_expect_end(&fl)) < 0) goto out;
    for (size_t i = 0; i < n; i++) {
        if (raw[i] >= classes) {
            rc = baton__fail(BATON_EFORMAT, "%s: label %u of sample %zu is out of range [0, %d)", labels_path,
                             raw[i], i, classes);
            goto out;
        }
        ds->y[i] = raw[i];
    }
    rc = BATON_OK;
out:
    free(raw);
    if (fi.f) gzclose(fi.f);
    if (fl.f) gzclose(fl.f);
    if (rc < 0) baton_dataset_free(ds);
    return rc;
}

/* dir/name.gz, else dir/name (torchvision downloads and then unpacks them: both are there, or only the
 * plain file), each also under dir/FashionMNIST/raw (torchvision's layout under its root). out gets the
 * first that exists; BATON_EIO naming them all when none does. */
static int find_idx(const char *dir, const char *name, char *out, size_t cap) {
    static const char *const where[] = {"%s/%s.gz", "%s/%s", "%s/FashionMNIST/raw/%s.gz", "%s/FashionMNIST/raw/%s"};
    struct stat st;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(out, cap, where[i], dir, name);
        if (stat(out, &st) == 0) return BATON_OK;
    }
    return baton__fail(BATON_EIO, "%s/%s.gz: cannot open: does not exist (nor %s/%s, nor either under %s/FashionMNIST/raw); "
                       "point --data-dir or BATON_DATA_DIR at the directory of the IDX files", dir, name, dir, name, dir);
}

int baton_dataset_fashion_mnist(baton_dataset *train, baton_dataset *test, const char *dir) {
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!dir) dir = getenv("BATON_DATA_DIR");
    if (!dir || !*dir) dir = BATON_FMNIST_DIR;
    if (strlen(dir) > 3000) return baton__fail(BATON_EINVAL, "data directory path too long");
    char img[3100], lbl[3100];
    int rc;
    if ((rc = find_idx(dir, "train-images-idx3-ubyte", img, sizeof img)) < 0 ||
        (rc = find_idx(dir, "train-labels-idx1-ubyte", lbl, sizeof lbl)) < 0 ||
        (rc = baton_dataset_load_idx(train, img, lbl, 10, BATON_FMNIST_MEAN, BATON_FMNIST_STD)) < 0)
        return rc;
    if ((rc = find_idx(dir, "t10k-images-idx3-ubyte", img, sizeof img)) < 0 ||
        (rc = find_idx(dir, "t10k-labels-idx1-ubyte", lbl, sizeof lbl)) < 0 ||
        (rc = baton_dataset_load_idx(test, img, lbl, 10, BATON_FMNIST_MEAN, BATON_FMNIST_STD)) < 0) {
        baton_dataset_free(train);
        return rc;
    }
    if (test->h != train->h || test->w != train->w) {
        baton_dataset_free(train);
        baton_dataset_free(test);
        return baton__fail(BATON_EFORMAT, "%s: test images are %dx%d but training images %dx%d", img, test->h,
                           test->w, train->h, train->w);
    }
    return BATON_OK;
}
