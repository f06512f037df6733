/* test_safetensors.c: round trips through the writer and the hardened reader, a check of baton's files
 * by an independent reader written from the spec (tests/golden/safetensors_check.py), and one test per
 * kind of hostile or damaged file: each must give a clean BATON_EFORMAT naming the problem. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/nn.h"
#include "ckpt/safetensors.h"
#include "harness.h"

static baton_params *sample_params(void) {
    baton_param_info v[] = {{"fc1.weight", 2, {3, 4}, 0, 0, 1}, {"fc1.bias", 1, {3}, 0, 0, 0},
                            {"conv.weight", 4, {2, 1, 3, 3}, 0, 0, 1}};
    baton_params *p;
    ASSERT_OK(baton_params_new(&p, v, 3));
    for (int i = 0; i < 3; i++) {
        baton_tensor *t = baton_params_tensor(p, i);
        for (size_t j = 0; j < t->n; j++) t->data[j] = (float)(i * 100 + j) * 0.5f - 3.0f;
    }
    return p;
}

static char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", th_tmpdir(), name);
    return p;
}

TEST(safetensors_round_trip_params_and_metadata) {
    baton_params *p = sample_params();
    char *path = tmp_path("m.safetensors");
    const char *meta[] = {"model", "mlp", "note", "hello \"world\""};
    ASSERT_OK(baton_st_save_params(path, p, meta, 2));
    baton_st_file *f;
    ASSERT_OK(baton_st_open(&f, path));
    ASSERT_EQ_INT(baton_st_count(f), 3);
    ASSERT_STR_EQ(baton_st_meta(f, "model"), "mlp");
    ASSERT_STR_EQ(baton_st_meta(f, "note"), "hello \"world\"");
    ASSERT_TRUE(baton_st_meta(f, "absent") == NULL);
    const baton_st_entry *e = baton_st_find(f, "conv.weight");
    ASSERT_TRUE(e != NULL);
    ASSERT_STR_EQ(e->dtype, "F32");
    ASSERT_EQ_INT(e->ndim, 4);
    ASSERT_EQ_INT(e->shape[0], 2);
    ASSERT_EQ_INT(e->shape[3], 3);
    ASSERT_EQ_U64(e->nbytes, 18 * 4);
    ASSERT_TRUE(!memcmp(e->data, baton_params_tensor(p, 2)->data, 18 * 4));
    ASSERT_TRUE(baton_st_find(f, "nope") == NULL);
    baton_st_close(f);
    baton_st_close(NULL);
    /* header length is a multiple of 8 (padded) */
    FILE *fp = fopen(path, "rb");
    unsigned char h[8];
    ASSERT_EQ_INT(fread(h, 1, 8, fp), 8);
    fclose(fp);
    ASSERT_EQ_INT(h[0] % 8, 0);
    /* load into a fresh slab */
    baton_params *q = sample_params();
    memset(baton_params_data(q), 0, baton_params_numel(q) * sizeof(float));
    ASSERT_OK(baton_st_load_params(path, q));
    ASSERT_TRUE(!memcmp(baton_params_data(p), baton_params_data(q), baton_params_numel(p) * sizeof(float)));
    baton_params_free(q);
    baton_params_free(p);
}

TEST(safetensors_files_read_by_an_independent_spec_reader) {
    baton_params *p = sample_params();
    char *path = tmp_path("m.safetensors");
    const char *meta[] = {"model", "mlp"};
    ASSERT_OK(baton_st_save_params(path, p, meta, 1));
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/golden/safetensors_check.py %s", path);
    ASSERT_EQ_INT(th_run(cmd, 30, &out, NULL), 0);
    /* sums: fc1.weight = sum(0.5j - 3, j<12) = 33 - 36 = -3; fc1.bias: sum(0.5(100+j) - 3, j<3) = 142.5 */
    ASSERT_CONTAINS(out, "fc1.weight F32 3x4 -3.000000");
    ASSERT_CONTAINS(out, "fc1.bias F32 3 142.500000");
    ASSERT_CONTAINS(out, "conv.weight F32 2x1x3x3");
    ASSERT_CONTAINS(out, "meta model mlp");
    free(out);
    baton_params_free(p);
}

/* Builds a file: 8-byte length of `json` (optionally overridden), the JSON, then `data_len` bytes. */
static int parse_crafted(const char *json, size_t data_len, int64_t hlen_override, size_t cut) {
    size_t jl = strlen(json), len = 8 + jl + data_len;
    unsigned char *buf = calloc(1, len + 1);
    uint64_t hl = hlen_override >= 0 ? (uint64_t)hlen_override : jl;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, json, jl);
    for (size_t i = 0; i < data_len; i++) buf[8 + jl + i] = (unsigned char)i;
    baton_st_file *f = NULL;
    int rc = baton_st_parse(&f, buf, cut ? cut : len, "crafted.safetensors");
    if (rc == 0) baton_st_close(f);
    free(buf);
    return rc;
}

#define EXPECT_BAD(json, data_len, hlen, cut, says)                                      \
    do {                                                                                 \
        ASSERT_EQ_INT(parse_crafted(json, data_len, hlen, cut), BATON_EFORMAT);          \
        ASSERT_CONTAINS(baton_last_error(), "crafted.safetensors");                      \
        ASSERT_CONTAINS(baton_last_error(), says);                                       \
    } while (0)

TEST(safetensors_hostile_headers_give_clean_errors) {
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    ASSERT_OK(parse_crafted(ok, 8, -1, 0));
    EXPECT_BAD(ok, 8, -1, 5, "truncated");                                  /* shorter than 8 bytes */
    EXPECT_BAD(ok, 8, (int64_t)1 << 40, 0, "exceeds");                      /* header too large */
    EXPECT_BAD(ok, 8, 5000, 0, "truncated");                                /* header longer than file */
    EXPECT_BAD("not json at all", 0, -1, 0, "not a JSON object");
    EXPECT_BAD("[1,2,3]", 0, -1, 0, "not a JSON object");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} xx", 8, -1, 0, "junk");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, 0, "dtype");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, -1, 0, "shape");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, -1, 0, "shape");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, -1, 0, "shape");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, -1, 0, "data_offsets");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, -1, 0, "data_offsets");
    EXPECT_BAD("{\"a\":[1]}", 8, -1, 0, "not an object");
    EXPECT_BAD("{\"__metadata__\":{\"k\":1}}", 0, -1, 0, "not a string");
}

TEST(safetensors_bad_offsets_and_sizes_give_clean_errors) {
    /* out of range (also what truncation of the data section looks like) */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, -1, 0, "out of range");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, -1, 0, "out of range");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 8, -1, 0, "data_offsets");
    /* size disagrees with dtype x shape */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, -1, 0, "disagree");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", 8, -1, 0,
               "shape");
    /* overlapping */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, -1, 0, "overlap");
    /* hole */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, -1, 0, "hole");
    /* data after the last tensor */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, -1, 0, "cover");
    /* duplicate name */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, -1, 0, "twice");
    /* a zero-element tensor is fine */
    ASSERT_OK(parse_crafted("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", 0, -1, 0));
}

/* Regression (found while writing fuzz/fuzz_safetensors.c): duplicate names were found by comparing every
 * tensor with every earlier one, so a header of N zero-sized tensors cost N^2/2 name comparisons; 200,000
 * of them held the reader for minutes. They are now found by sorting; a hang here is a failure. */
TEST_T(safetensors_many_tensors_and_a_late_duplicate_parse_quickly, 60) {
    enum { N = 200000 };
    size_t cap = (size_t)N * 64 + 64, len = 0;
    char *json = malloc(cap);
    ASSERT_TRUE(json != NULL);
    len += (size_t)snprintf(json + len, cap - len, "{");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(json + len, cap - len, "%s\"t%06d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}",
                                i ? "," : "", i);
    size_t open_end = len;
    len += (size_t)snprintf(json + len, cap - len, "}");
    ASSERT_OK(parse_crafted(json, 0, -1, 0));
    /* the same with the first name again at the end */
    len = open_end + (size_t)snprintf(json + open_end, cap - open_end,
                                       ",\"t000000\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}");
    ASSERT_EQ_INT(parse_crafted(json, 0, -1, 0), BATON_EFORMAT);
    ASSERT_CONTAINS(baton_last_error(), "t000000 appears twice");
    free(json);
}

TEST(safetensors_truncated_file_on_disk_and_mismatched_model) {
    baton_params *p = sample_params();
    char *path = tmp_path("m.safetensors"), *cut = tmp_path("cut.safetensors");
    ASSERT_OK(baton_st_save_params(path, p, NULL, 0));
    FILE *f = fopen(path, "rb");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t keep = 0; keep < n; keep += (keep < 16 ? 1 : 37)) {   /* every cut point is an error */
        f = fopen(cut, "wb");
        fwrite(buf, 1, keep, f);
        fclose(f);
        baton_st_file *sf = NULL;
        int rc = baton_st_open(&sf, cut);
        if (rc != BATON_EFORMAT) th_fail(__FILE__, __LINE__, "cut at %zu bytes: rc %d", keep, rc);
        ASSERT_CONTAINS(baton_last_error(), "cut.safetensors");
    }
    ASSERT_EQ_INT(baton_st_load_params(tmp_path("absent.safetensors"), p), BATON_EIO);
    /* a model of another shape refuses the file */
    baton_param_info v[] = {{"fc1.weight", 2, {4, 3}, 0, 0, 1}, {"fc1.bias", 1, {3}, 0, 0, 0},
                            {"conv.weight", 4, {2, 1, 3, 3}, 0, 0, 1}};
    baton_params *q;
    ASSERT_OK(baton_params_new(&q, v, 3));
    ASSERT_EQ_INT(baton_st_load_params(path, q), BATON_EMISMATCH);
    ASSERT_CONTAINS(baton_last_error(), "fc1.weight");
    baton_params_free(q);
    baton_params_free(p);
}
