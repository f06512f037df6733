/* fuzz_safetensors.c: libFuzzer target for the checkpoint header reader (src/ckpt/safetensors.c).
 *
 * Input: a whole safetensors file image, handed to baton_st_parse. Properties checked on every input:
 *  - the result is BATON_OK or BATON_EFORMAT with a detail naming the file; nothing else, no crash, no
 *    read outside the buffer (ASan), no leak;
 *  - when it parses: every tensor has a known dtype, 0..8 dims, nbytes == product(shape) x dtype size, a
 *    byte range inside the data section that starts right after the 8 + N header bytes, and its data
 *    pointer holds exactly the input's bytes there (every byte is read); the tensors, in order, cover the
 *    data section exactly once; names are distinct and baton_st_find finds each;
 *  - writing the parsed tensors back with baton_st_write and parsing that file gives the same tensors. */
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "ckpt/safetensors.h"
#include "fuzz.h"

#ifndef FUZZ_SAFETENSORS_ONCE
#define FUZZ_SAFETENSORS_ONCE
static size_t st_dtype_size(const char *d) {
    static const char *const names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16",
                                        "I8",  "U64", "U32", "U16",  "U8",  "BOOL"};
    static const size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 8, 4, 2, 1, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(names[i], d)) return sizes[i];
    return 0;
}

/* Writes f's tensors to a scratch file, parses it again and compares. */
static void st_roundtrip(const baton_st_file *f) {
    int n = baton_st_count(f);
    baton_st_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    FUZZ_CHECK(t != NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        const baton_st_entry *e = baton_st_get(f, i);
        t[i].name = e->name;
        t[i].dtype = e->dtype;
        t[i].ndim = e->ndim;
        memcpy(t[i].shape, e->shape, sizeof t[i].shape);
        t[i].data = e->data;
        t[i].nbytes = e->nbytes;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/baton-fuzz-st-%d.safetensors", (int)getpid());
    const char *meta[2] = {"fuzz", "roundtrip"};
    int rc = baton_st_write(path, t, n, meta, 1);
    FUZZ_CHECK(rc == BATON_OK, "writing back a parsed file failed: %s", baton_last_error());
    baton_st_file *g = NULL;
    rc = baton_st_open(&g, path);
    FUZZ_CHECK(rc == BATON_OK, "re-parsing a written file failed: %s", baton_last_error());
    FUZZ_CHECK(baton_st_count(g) == n, "round trip changed the tensor count");
    const char *m = baton_st_meta(g, "fuzz");
    FUZZ_CHECK(m && !strcmp(m, "roundtrip"), "round trip lost __metadata__");
    for (int i = 0; i < n; i++) {
        const baton_st_entry *a = baton_st_get(f, i), *b = baton_st_find(g, a->name);
        FUZZ_CHECK(b != NULL, "round trip lost tensor %s", a->name);
        FUZZ_CHECK(!strcmp(a->dtype, b->dtype) && a->ndim == b->ndim && a->nbytes == b->nbytes &&
                       !memcmp(a->shape, b->shape, sizeof a->shape) &&
                       (a->nbytes == 0 || !memcmp(a->data, b->data, a->nbytes)),
                   "round trip changed tensor %s", a->name);
    }
    baton_st_close(g);
    unlink(path);
    free(t);
}
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    baton_st_file *f = (baton_st_file *)(uintptr_t)1;
    int rc = baton_st_parse(&f, data, size, "fuzz.safetensors");
    if (rc != BATON_OK) {
        FUZZ_CHECK(rc == BATON_EFORMAT, "parse returned %d (%s)", rc, baton_last_error());
        FUZZ_CHECK(f == NULL, "a failed parse left *out set");
        FUZZ_CHECK(strstr(baton_last_error(), "fuzz.safetensors") != NULL, "detail does not name the file: %s",
                   baton_last_error());
        return 0;
    }
    FUZZ_CHECK(size >= 8, "parsed a file shorter than its length field");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    FUZZ_CHECK(hlen <= size - 8, "parsed a header longer than the file");
    const uint8_t *section = data + 8 + hlen;
    size_t section_len = size - 8 - (size_t)hlen, pos = 0;
    int n = baton_st_count(f);
    FUZZ_CHECK(n >= 0 && (size_t)n <= hlen / 8 + 1, "implausible tensor count %d", n);
    unsigned sum = 0;
    for (int i = 0; i < n; i++) {
        const baton_st_entry *e = baton_st_get(f, i);
        FUZZ_CHECK(e != NULL, "tensor %d missing", i);
        FUZZ_CHECK(memchr(e->name, '\0', sizeof e->name) && memchr(e->dtype, '\0', sizeof e->dtype),
                   "unterminated name or dtype");
        size_t es = st_dtype_size(e->dtype), numel = 1;
        FUZZ_CHECK(es != 0, "tensor %s has unknown dtype %s", e->name, e->dtype);
        FUZZ_CHECK(e->ndim >= 0 && e->ndim <= BATON_ST_MAX_DIMS, "tensor %s has %d dims", e->name, e->ndim);
        for (int d = 0; d < e->ndim; d++) {
            FUZZ_CHECK(e->shape[d] >= 0, "tensor %s has a negative size", e->name);
            FUZZ_CHECK(!__builtin_mul_overflow(numel, (size_t)e->shape[d], &numel), "tensor %s: shape overflows",
                       e->name);
        }
        FUZZ_CHECK(numel * es == e->nbytes, "tensor %s: %zu bytes but shape x dtype says %zu", e->name, e->nbytes,
                   numel * es);
        FUZZ_CHECK(e->begin == pos, "tensor %s starts at %zu, expected %zu (hole or overlap)", e->name, e->begin, pos);
        FUZZ_CHECK(e->nbytes <= section_len - pos, "tensor %s runs past the data section", e->name);
        if (e->nbytes) {
            FUZZ_CHECK(!memcmp(e->data, section + e->begin, e->nbytes), "tensor %s: data pointer is off", e->name);
            const uint8_t *p = e->data;
            for (size_t k = 0; k < e->nbytes; k++) sum += p[k];
        }
        pos += e->nbytes;
        FUZZ_CHECK(baton_st_find(f, e->name) == e, "find(%s) does not return it (duplicate name?)", e->name);
    }
    FUZZ_CHECK(pos == section_len, "tensors cover %zu of %zu data bytes", pos, section_len);
    FUZZ_CHECK(baton_st_get(f, n) == NULL && baton_st_get(f, -1) == NULL, "get out of range returned an entry");
    const char *m = baton_st_meta(f, "format");
    if (m) sum += (unsigned)strlen(m);
    (void)sum;
    st_roundtrip(f);
    baton_st_close(f);
    return 0;
}
