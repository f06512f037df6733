/* text.c: byte-level text corpora split by document (baton/text.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "baton/text.h"
#include "util/files.h"
#include "util/util.h"

#define FORTUNES_DIR "/usr/share/games/fortunes"

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} bytes;

static int grow(bytes *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more) cap *= 2;
    uint8_t *n = realloc(b->buf, cap);
    if (!n) return -1;
    b->buf = n;
    b->cap = cap;
    return 0;
}

/* Appends document [p, p+n) (trimmed of surrounding newlines) to b, after a "\n" if b is not empty. */
static int add_doc(bytes *b, const uint8_t *p, size_t n) {
    while (n && (p[0] == '\n' || p[0] == '\r')) p++, n--;
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r')) n--;
    if (!n) return 0;
    if (grow(b, n + 1)) return -1;
    if (b->len) b->buf[b->len++] = '\n';
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    return 1;
}

typedef struct {
    bytes train, val;
    long docs;   /* documents seen so far (all files): decides the split */
} splitter;

/* Cuts buf into documents at separator lines (fortune: a line "%"; else: an empty or blank line). */
static int split_docs(splitter *s, const uint8_t *buf, size_t len, int fortune) {
    size_t doc = 0, i = 0;
    while (i <= len) {
        size_t eol = i;
        while (eol < len && buf[eol] != '\n') eol++;
        size_t ll = eol - i;
        int sep;
        if (fortune) {
            sep = (ll == 1 && buf[i] == '%') || (ll == 2 && buf[i] == '%' && buf[i + 1] == '\r');
        } else {
            sep = 1;
            for (size_t k = i; k < eol; k++)
                if (buf[k] != ' ' && buf[k] != '\t' && buf[k] != '\r') sep = 0;
        }
        if (sep || eol >= len) {
            size_t end = sep ? i : len;
            bytes *to = s->docs % 10 == 9 ? &s->val : &s->train;
            int rc = add_doc(to, buf + doc, end - doc);
            if (rc < 0) return baton__fail(BATON_ENOMEM, "text: out of memory");
            s->docs += rc;
            doc = eol + 1;
        }
        i = eol + 1;
    }
    return BATON_OK;
}

static int finish(baton_text *out, splitter *s, const char *what) {
    long docs = s->docs;
    if (s->train.len + s->val.len == 0) {
        free(s->train.buf);
        free(s->val.buf);
        return baton__fail(BATON_EFORMAT, "%s: holds no text", what);
    }
    if (docs < 10) {   /* too few documents to split by document: the last 10 % of the bytes validate */
        bytes all = s->train;
        if (s->val.len) {
            if (grow(&all, s->val.len + 1) < 0) {
                free(all.buf);
                free(s->val.buf);
                return baton__fail(BATON_ENOMEM, "text: out of memory");
            }
            all.buf[all.len++] = '\n';
            memcpy(all.buf + all.len, s->val.buf, s->val.len);
            all.len += s->val.len;
        }
        free(s->val.buf);
        size_t nv = all.len / 10;
        s->val.buf = malloc(nv + 1);
        if (!s->val.buf) {
            free(all.buf);
            return baton__fail(BATON_ENOMEM, "text: out of memory");
        }
        memcpy(s->val.buf, all.buf + all.len - nv, nv);
        s->val.len = nv;
        all.len -= nv;
        s->train = all;
        docs = 0;
    }
    out->train = s->train.buf;
    out->n_train = s->train.len;
    out->val = s->val.buf;
    out->n_val = s->val.len;
    out->docs_train = docs ? docs - docs / 10 : 0;
    out->docs_val = docs ? docs / 10 : 0;
    return BATON_OK;
}

static int read_text(const char *path, uint8_t **buf, size_t *len) {
    void *b;
    int rc = baton__read_file(path, BATON_TEXT_MAX_BYTES, &b, len);
    if (rc < 0) return rc;
    if (memchr(b, '\0', *len)) {
        free(b);
        return baton__fail(BATON_EFORMAT, "%s: holds NUL bytes, so it is not a text file (give a plain text file)", path);
    }
    *buf = b;
    return BATON_OK;
}

int baton_text_load_file(baton_text *out, const char *path) {
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rc = read_text(path, &buf, &len);
    if (rc < 0) return rc;
    splitter s = {0};
    rc = split_docs(&s, buf, len, 0);
    free(buf);
    if (rc < 0) {
        free(s.train.buf);
        free(s.val.buf);
        return rc;
    }
    return finish(out, &s, path);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int baton_text_load_fortunes(baton_text *out, const char *dir) {
    memset(out, 0, sizeof *out);
    if (!dir) dir = FORTUNES_DIR;
    DIR *d = opendir(dir);
    if (!d)
        return baton__fail(BATON_ENOTFOUND, "%s: cannot open the fortunes directory (install Debian's fortunes package: "
                           "apt-get install fortunes)", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = BATON_OK;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || (l > 4 && !strcmp(e->d_name + l - 4, ".dat"))) continue;
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || lstat(path, &st) != 0 ||
            !S_ISREG(st.st_mode))
            continue;   /* symbolic links (the .u8 aliases), directories, ... */
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (!nn) { rc = baton__fail(BATON_ENOMEM, "text: out of memory"); break; }
            names = nn;
        }
        if (!(names[n] = strdup(path))) { rc = baton__fail(BATON_ENOMEM, "text: out of memory"); break; }
        n++;
    }
    closedir(d);
    splitter s = {0};
    if (rc == BATON_OK && n) qsort(names, n, sizeof *names, by_name);
    size_t total = 0;
    for (size_t i = 0; rc == BATON_OK && i < n; i++) {
        uint8_t *buf;
        size_t len;
        if ((rc = read_text(names[i], &buf, &len)) < 0) break;
        if ((total += len) > BATON_TEXT_MAX_BYTES)
            rc = baton__fail(BATON_EFORMAT, "%s: the fortune files exceed %zu bytes in all", dir, BATON_TEXT_MAX_BYTES);
        else
            rc = split_docs(&s, buf, len, 1);
        free(buf);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc < 0) {
        free(s.train.buf);
        free(s.val.buf);
        return rc;
    }
    if (!n) return baton__fail(BATON_ENOTFOUND, "%s: no fortune files (install Debian's fortunes package)", dir);
    return finish(out, &s, dir);
}

void baton_text_free(baton_text *t) {
    if (!t) return;
    free(t->train);
    free(t->val);
    memset(t, 0, sizeof *t);
}

void baton_text_window(const uint8_t *tokens, long w, int tlen, int32_t *out) {
    const uint8_t *p = tokens + (size_t)w * tlen;
    for (int i = 0; i <= tlen; i++) out[i] = p[i];
}
