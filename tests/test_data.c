/* test_data.c: the IDX loader (good files, and each kind of bad file giving an error that names the file),
 * the synthetic dataset, batch gathering and the seeded, shardable sampler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "baton/data.h"
#include "harness.h"

/* Writes an IDX file: magic bytes, big-endian dims, then `n` payload bytes (gzip unless plain). */
static void write_idx(const char *path, int gz, const unsigned char magic[4], const uint32_t *dims, int ndims,
                      const unsigned char *payload, size_t n) {
    unsigned char buf[4096];
    size_t len = 0;
    memcpy(buf, magic, 4);
    len = 4;
    for (int i = 0; i < ndims; i++) {
        buf[len++] = (unsigned char)(dims[i] >> 24);
        buf[len++] = (unsigned char)(dims[i] >> 16);
        buf[len++] = (unsigned char)(dims[i] >> 8);
        buf[len++] = (unsigned char)dims[i];
    }
    ASSERT_TRUE(len + n <= sizeof buf);
    if (n) memcpy(buf + len, payload, n);
    len += n;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ASSERT_TRUE(f != NULL);
        ASSERT_EQ_INT(gzwrite(f, buf, (unsigned)len), (int)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        ASSERT_TRUE(f != NULL);
        fwrite(buf, 1, len, f);
        fclose(f);
    }
}

static const unsigned char IMG_MAGIC[4] = {0, 0, 8, 3}, LBL_MAGIC[4] = {0, 0, 8, 1};

/* 3 images of 2x3 and their labels in dir */
static void good_pair(const char *img, const char *lbl, int gz) {
    unsigned char px[18];
    for (int i = 0; i < 18; i++) px[i] = (unsigned char)(i * 15);
    write_idx(img, gz, IMG_MAGIC, (uint32_t[]){3, 2, 3}, 3, px, 18);
    write_idx(lbl, gz, LBL_MAGIC, (uint32_t[]){3}, 1, (unsigned char[]){2, 0, 9}, 3);
}

static char *path_in(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", th_tmpdir(), name);
    return p;
}

TEST(idx_loads_gzip_and_plain_files_and_normalizes) {
    for (int gz = 0; gz <= 1; gz++) {
        char *img = path_in("img"), *lbl = path_in("lbl");
        good_pair(img, lbl, gz);
        baton_dataset ds;
        ASSERT_OK(baton_dataset_load_idx(&ds, img, lbl, 10, 0.5f, 0.25f));
        ASSERT_EQ_INT(ds.n, 3);
        ASSERT_EQ_INT(ds.h, 2);
        ASSERT_EQ_INT(ds.w, 3);
        ASSERT_EQ_INT(ds.dim, 6);
        ASSERT_EQ_INT(ds.y[0], 2);
        ASSERT_EQ_INT(ds.y[2], 9);
        ASSERT_NEAR(ds.x[0], (0.0 - 0.5) / 0.25, 1e-5);
        ASSERT_NEAR(ds.x[17], (255.0 / 255.0 - 0.5) / 0.25, 1e-5);
        baton_dataset_free(&ds);
        baton_dataset_free(&ds);   /* idempotent */
    }
}

static void expect_error(const char *img, const char *lbl, int code, const char *names, const char *says) {
    baton_dataset ds;
    ASSERT_EQ_INT(baton_dataset_load_idx(&ds, img, lbl, 10, 0.5f, 0.25f), code);
    ASSERT_CONTAINS(baton_last_error(), names);
    ASSERT_CONTAINS(baton_last_error(), says);
    ASSERT_TRUE(ds.x == NULL && ds.y == NULL);
}

TEST(idx_wrong_magic_names_the_file) {
    char *img = path_in("img.gz"), *lbl = path_in("lbl.gz");
    good_pair(img, lbl, 1);
    write_idx(img, 1, LBL_MAGIC, (uint32_t[]){3, 2, 3}, 3, (unsigned char[18]){0}, 18);
    expect_error(img, lbl, BATON_EFORMAT, img, "wrong magic");
    good_pair(img, lbl, 1);
    write_idx(lbl, 1, (unsigned char[]){0, 0, 0x0d, 1}, (uint32_t[]){3}, 1, (unsigned char[3]){0}, 3);   /* float */
    expect_error(img, lbl, BATON_EFORMAT, lbl, "wrong magic");
}

TEST(idx_truncated_names_the_file) {
    char *img = path_in("img.gz"), *lbl = path_in("lbl.gz");
    good_pair(img, lbl, 1);
    write_idx(img, 1, IMG_MAGIC, (uint32_t[]){3, 2, 3}, 3, (unsigned char[17]){0}, 17);   /* one pixel short */
    expect_error(img, lbl, BATON_EFORMAT, img, "truncated");
    write_idx(img, 1, IMG_MAGIC, (uint32_t[]){3}, 1, NULL, 0);   /* header cut short */
    expect_error(img, lbl, BATON_EFORMAT, img, "truncated");
    /* a gzip stream cut in the middle */
    good_pair(img, lbl, 1);
    FILE *f = fopen(img, "rb");
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    f = fopen(img, "wb");
    fwrite(buf, 1, n - 12, f);
    fclose(f);
    baton_dataset ds;
    ASSERT_TRUE(baton_dataset_load_idx(&ds, img, lbl, 10, 0.5f, 0.25f) < 0);
    ASSERT_CONTAINS(baton_last_error(), img);
}

TEST(idx_disagreeing_sizes_name_the_file) {
    char *img = path_in("img.gz"), *lbl = path_in("lbl.gz");
    good_pair(img, lbl, 1);
    write_idx(lbl, 1, LBL_MAGIC, (uint32_t[]){4}, 1, (unsigned char[4]){0}, 4);   /* 4 labels, 3 images */
    expect_error(img, lbl, BATON_EFORMAT, lbl, "disagree");
    good_pair(img, lbl, 1);
    write_idx(img, 1, IMG_MAGIC, (uint32_t[]){3, 2, 3}, 3, (unsigned char[20]){0}, 20);   /* 2 extra bytes */
    expect_error(img, lbl, BATON_EFORMAT, img, "disagree");
    write_idx(img, 1, IMG_MAGIC, (uint32_t[]){3, 0, 3}, 3, NULL, 0);
    expect_error(img, lbl, BATON_EFORMAT, img, "implausible");
    write_idx(img, 1, IMG_MAGIC, (uint32_t[]){0xffffffffu, 28, 28}, 3, NULL, 0);
    expect_error(img, lbl, BATON_EFORMAT, img, "implausible");
}

TEST(idx_bad_label_and_missing_file_name_the_file) {
    char *img = path_in("img.gz"), *lbl = path_in("lbl.gz");
    good_pair(img, lbl, 1);
    write_idx(lbl, 1, LBL_MAGIC, (uint32_t[]){3}, 1, (unsigned char[]){1, 10, 2}, 3);
    expect_error(img, lbl, BATON_EFORMAT, lbl, "out of range");
    expect_error(path_in("nope.gz"), lbl, BATON_EIO, "nope.gz", "cannot open");
}

TEST(fashion_mnist_loads_from_debian_package) {
    baton_dataset train, test;
    ASSERT_OK(baton_dataset_fashion_mnist(&train, &test, NULL));
    ASSERT_EQ_INT(train.n, 60000);
    ASSERT_EQ_INT(test.n, 10000);
    ASSERT_EQ_INT(train.dim, 784);
    int counts[10] = {0};
    double mean = 0;
    for (int i = 0; i < train.n; i++) counts[train.y[i]]++;
    for (int c = 0; c < 10; c++) ASSERT_EQ_INT(counts[c], 6000);
    for (size_t i = 0; i < (size_t)train.n * 784; i += 97) mean += train.x[i];
    mean /= (double)((size_t)train.n * 784 / 97 + 1);
    ASSERT_NEAR(mean, 0.0, 0.05);   /* normalized */
    baton_dataset_free(&train);
    baton_dataset_free(&test);
    ASSERT_TRUE(baton_dataset_fashion_mnist(&train, &test, th_tmpdir()) < 0);
    ASSERT_CONTAINS(baton_last_error(), "train-images-idx3-ubyte.gz");
}

TEST(synthetic_is_deterministic_and_gather_copies_rows) {
    baton_dataset a, b;
    ASSERT_OK(baton_dataset_synthetic(&a, 100, 1, 4, 4, 5, 7));
    ASSERT_OK(baton_dataset_synthetic(&b, 100, 1, 4, 4, 5, 7));
    ASSERT_TRUE(!memcmp(a.x, b.x, 100 * 16 * sizeof(float)));
    ASSERT_TRUE(!memcmp(a.y, b.y, 100 * sizeof(int32_t)));
    for (int i = 0; i < 100; i++) ASSERT_TRUE(a.y[i] >= 0 && a.y[i] < 5);
    int32_t idx[3] = {5, 0, 99}, y[3];
    float x[48];
    baton_dataset_gather(&a, idx, 3, x, y);
    ASSERT_TRUE(!memcmp(x + 16, a.x, 16 * sizeof(float)));
    ASSERT_TRUE(!memcmp(x + 32, a.x + 99 * 16, 16 * sizeof(float)));
    ASSERT_EQ_INT(y[0], a.y[5]);
    baton_dataset_free(&a);
    baton_dataset_free(&b);
    ASSERT_EQ_INT(baton_dataset_synthetic(&a, 0, 1, 4, 4, 5, 7), BATON_EINVAL);
}

TEST(sampler_permutes_per_epoch_and_shards_cover_everything) {
    baton_sampler s, t;
    ASSERT_OK(baton_sampler_init(&s, 10, 0, 1, 1, 3));
    ASSERT_OK(baton_sampler_init(&t, 10, 0, 1, 1, 3));
    int seen[10] = {0};
    for (int i = 0; i < s.len; i++) seen[s.idx[i]]++;
    for (int i = 0; i < 10; i++) ASSERT_EQ_INT(seen[i], 1);
    int32_t e0[10];
    memcpy(e0, s.idx, sizeof e0);
    baton_sampler_set_epoch(&s, 1);
    ASSERT_TRUE(memcmp(e0, s.idx, sizeof e0) != 0);   /* reshuffled */
    baton_sampler_set_epoch(&t, 1);
    ASSERT_TRUE(!memcmp(t.idx, s.idx, sizeof e0));    /* same (seed, epoch) -> same order */
    baton_sampler_free(&s);
    baton_sampler_free(&t);
    /* 3 ranks over 10 samples: 4 each (2 padded by wrapping), union covers all 10 */
    int count[10] = {0};
    for (int r = 0; r < 3; r++) {
        ASSERT_OK(baton_sampler_init(&s, 10, r, 3, 1, 9));
        baton_sampler_set_epoch(&s, 4);
        ASSERT_EQ_INT(s.len, 4);
        for (int i = 0; i < s.len; i++) count[s.idx[i]]++;
        baton_sampler_free(&s);
    }
    int total = 0;
    for (int i = 0; i < 10; i++) {
        ASSERT_TRUE(count[i] >= 1 && count[i] <= 2);
        total += count[i];
    }
    ASSERT_EQ_INT(total, 12);
    ASSERT_EQ_INT(baton_sampler_init(&s, 10, 3, 3, 1, 9), BATON_EINVAL);
    ASSERT_OK(baton_sampler_init(&s, 5, 0, 1, 0, 9));   /* no shuffle: identity */
    for (int i = 0; i < 5; i++) ASSERT_EQ_INT(s.idx[i], i);
    baton_sampler_free(&s);
}
/* The files as torchvision leaves them: uncompressed (train-images-idx3-ubyte, no .gz), in DIR or under
 * DIR/FashionMNIST/raw; .gz wins where both exist. (Only .gz names were looked for: "not found".) */
TEST(fashion_mnist_loads_uncompressed_files_as_torchvision_writes_them) {
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                         "t10k-labels-idx1-ubyte"};
    char sub[600];
    snprintf(sub, sizeof sub, "%s/FashionMNIST", th_tmpdir());
    ASSERT_EQ_INT(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/FashionMNIST/raw", th_tmpdir());
    ASSERT_EQ_INT(mkdir(sub, 0700), 0);
    for (int layout = 0; layout < 2; layout++) {   /* 0: in DIR; 1: in DIR/FashionMNIST/raw */
        char p[4][700];
        for (int i = 0; i < 4; i++) snprintf(p[i], sizeof p[i], "%s/%s", layout ? sub : th_tmpdir(), names[i]);
        good_pair(p[0], p[1], 0);
        good_pair(p[2], p[3], 0);
        baton_dataset train, test;
        ASSERT_OK(baton_dataset_fashion_mnist(&train, &test, th_tmpdir()));
        ASSERT_EQ_INT(train.n, 3);
        ASSERT_EQ_INT(test.n, 3);
        ASSERT_EQ_INT(train.y[2], 9);
        ASSERT_NEAR(train.x[17], (1.0 - BATON_FMNIST_MEAN) / BATON_FMNIST_STD, 1e-5);
        baton_dataset_free(&train);
        baton_dataset_free(&test);
        for (int i = 0; i < 4; i++) remove(p[i]);
    }
    /* nothing there: the error names the .gz and the plain name */
    baton_dataset train, test;
    ASSERT_TRUE(baton_dataset_fashion_mnist(&train, &test, th_tmpdir()) < 0);
    ASSERT_CONTAINS(baton_last_error(), "train-images-idx3-ubyte.gz: cannot open: does not exist (nor ");
    ASSERT_CONTAINS(baton_last_error(), "/train-images-idx3-ubyte, nor either under ");
}

/* IDX images of another size than Fashion-MNIST's 28x28 train a model of that input size (this aborted on an
 * assertion in the model before: the shape was fixed at 28x28); a shape the CNN cannot pool is refused with
 * an error naming the shape. */
static void write_set(int side) {
    unsigned char px[3 * 32 * 32], lab[3] = {1, 3, 1};
    size_t n = (size_t)3 * side * side;
    for (size_t i = 0; i < n; i++) px[i] = (unsigned char)((i * 7) % 251);
    const char *names[2][2] = {{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
                               {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}};
    for (int s = 0; s < 2; s++) {
        remove(path_in(names[s][0]));
        remove(path_in(names[s][1]));
        write_idx(path_in(names[s][0]), 1, IMG_MAGIC, (uint32_t[]){3, (uint32_t)side, (uint32_t)side}, 3, px, n);
        write_idx(path_in(names[s][1]), 1, LBL_MAGIC, (uint32_t[]){3}, 1, lab, 3);
    }
}

static int train_on(const char *model, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=1 %s train %s --data-dir %s --epochs 1 --batch 2 --threads 1 2>&1",
             th_baton(), model, th_tmpdir());
    return th_run(cmd, 60, out, NULL);
}

TEST_T(train_takes_the_image_shape_from_the_data, 120) {
    char *out = NULL;
    write_set(30);
    int rc = train_on("--model mlp --hidden 16", &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    free(out);
    rc = train_on("--model cnn --hidden 16 --channels 4,4", &out);
    ASSERT_EQ_INT(rc, 2); /* refused, not aborted */
    ASSERT_CONTAINS(out, "30x30");
    free(out);
    write_set(32);
    rc = train_on("--model cnn --hidden 16 --channels 4,4", &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    ASSERT_EQ_INT(rc, 0);
    free(out);
}
