/* checkpoint.c: writing, committing, verifying, loading and pruning checkpoint directories (see checkpoint.h;
 * state.json is ckpt_state.c's; the crash argument is in docs/checkpoints.md). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/checkpoint.h"
#include "util/files.h"
#include "ckpt/safetensors.h"
#include "util/util.h"

enum { NFILES = 3, HASH_LEN = 32, MAX_STEP_DIRS = 100000 };
#define MAX_TENSOR_FILE ((size_t)1 << 40)   /* bytes: model / optimizer file limit */
static const char *const file_names[NFILES] = {"model.safetensors", "optim.safetensors", "state.json"};

static void hash_hex(const void *buf, size_t len, char out[2 * HASH_LEN + 1]) {
    unsigned char h[HASH_LEN];
    if (sodium_init() < 0) BATON_ASSERT(!"sodium_init failed");
    crypto_generichash(h, HASH_LEN, buf, len, NULL, 0);
    for (int i = 0; i < HASH_LEN; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static int path_join(char *out, size_t cap, const char *a, const char *b) {
    if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap) return baton__fail(BATON_EINVAL, "%s/%s: path too long", a, b);
    return BATON_OK;
}

static const char *slot_name(int kind, int slot) {
    return slot == 1 ? "exp_avg_sq" : baton_optim_kind_slots(kind) == 2 ? "exp_avg" : "momentum_buffer";
}

/* ---- step directories ------------------------------------------------------------------------------- */
/* "step-<N>" with N canonical decimal (no sign, no leading zeros) in [0, 10^15]. */
static int parse_step_name(const char *name, long *step) {
    if (strncmp(name, "step-", 5) != 0) return 0;
    const char *d = name + 5;
    size_t n = strlen(d);
    if (n == 0 || n > 15 || (n > 1 && d[0] == '0') || strspn(d, "0123456789") != n) return 0;
    *step = strtol(d, NULL, 10);
    return 1;
}

static int cmp_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The steps of DIR's step directories, newest first (malloc'ed; *n = 0 and NULL for a missing DIR). */
static int list_steps(const char *dir, long **out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return BATON_OK;
        return baton__fail(BATON_EIO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    }
    long *v = NULL;
    int cap = 0, rc = BATON_OK;
    for (struct dirent *e; (e = readdir(d));) {
        long s;
        if (!parse_step_name(e->d_name, &s)) continue;
        if (*n == MAX_STEP_DIRS) {
            rc = baton__fail(BATON_EFORMAT, "%s: more than %d step directories", dir, MAX_STEP_DIRS);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                rc = baton__fail(BATON_ENOMEM, "%s: out of memory listing checkpoints", dir);
                break;
            }
            v = nv;
        }
        v[(*n)++] = s;
    }
    closedir(d);
    if (rc < 0) {
        free(v);
        *n = 0;
        return rc;
    }
    qsort(v, (size_t)*n, sizeof *v, cmp_desc);
    *out = v;
    return BATON_OK;
}

/* Removes STEPDIR: COMMIT first (so a crash half-way leaves an uncommitted directory), then the rest. */
static int remove_step_dir(const char *stepdir) {
    char path[4096];
    if (path_join(path, sizeof path, stepdir, "COMMIT") < 0) return BATON_EINVAL;
    if (unlink(path) == 0) baton__fsync_dir(stepdir);
    DIR *d = opendir(stepdir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (path_join(path, sizeof path, stepdir, e->d_name) == 0) unlink(path);
        }
        closedir(d);
    }
    if (rmdir(stepdir) != 0 && errno != ENOENT)
        return baton__fail(BATON_EIO, "%s: cannot remove the old checkpoint: %s", stepdir, strerror(errno));
    return BATON_OK;
}

/* ---- COMMIT ------------------------------------------------------------------------------------------ */
/* Writes STEPDIR/COMMIT recording each file's size and BLAKE2b-256 (hex): the three files, or with nshards > 0
 * model.safetensors, state.json and the optimizer shards optim-<r>.safetensors (whose sizes and hashes are
 * slen, shex). */
static int write_commit_n(const char *stepdir, long step, const size_t len[NFILES], char hex[NFILES][2 * HASH_LEN + 1],
                          int nshards, const size_t *slen, char (*shex)[2 * HASH_LEN + 1]) {
    cJSON *root = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(root, "files");
    char path[4096];
    int rc;
    if (!root || !files) {
        cJSON_Delete(root);
        return baton__fail(BATON_ENOMEM, "%s: out of memory", stepdir);
    }
    cJSON_AddStringToObject(root, "format", "baton-checkpoint");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddNumberToObject(root, "step", (double)step);
    for (int i = 0; i < NFILES + (nshards ? nshards - 1 : 0); i++) {
        int shard = nshards && i >= 1 && i <= nshards ? i - 1 : -1, k = nshards && i > nshards ? 2 : i;
        char sname[64];
        if (shard >= 0) snprintf(sname, sizeof sname, "optim-%d.safetensors", shard);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddItemToArray(files, f);
        cJSON_AddStringToObject(f, "name", shard >= 0 ? sname : file_names[k]);
        cJSON_AddNumberToObject(f, "bytes", (double)(shard >= 0 ? slen[shard] : len[k]));
        cJSON_AddStringToObject(f, "blake2b", shard >= 0 ? shex[shard] : hex[k]);
    }
    char *js = cJSON_Print(root);
    if (!js) rc = baton__fail(BATON_ENOMEM, "%s: out of memory", stepdir);
    else if ((rc = path_join(path, sizeof path, stepdir, "COMMIT")) >= 0) rc = baton__write_atomic(path, js, strlen(js), BATON_FILE_DURABLE);
    free(js);
    cJSON_Delete(root);
    return rc;
}

static int write_commit(const char *stepdir, long step, const size_t len[NFILES], char hex[NFILES][2 * HASH_LEN + 1]) {
    return write_commit_n(stepdir, step, len, hex, 0, NULL, NULL);
}

int baton__ckpt_commit(const char *stepdir, long step) {
    char path[4096], hex[NFILES][2 * HASH_LEN + 1];
    size_t len[NFILES];
    for (int i = 0; i < NFILES; i++) {
        void *buf;
        int rc = path_join(path, sizeof path, stepdir, file_names[i]);
        if (rc < 0 || (rc = baton__read_file(path, MAX_TENSOR_FILE, &buf, &len[i])) < 0) return rc;
        hash_hex(buf, len[i], hex[i]);
        free(buf);
    }
    return write_commit(stepdir, step, len, hex);
}

/* The three files of a committed step directory, read and checked against COMMIT. */
typedef struct {
    char dir[4096];              /* DIR/step-<N> */
    void *buf[NFILES];           /* model, optim (NULL when sharded), state */
    size_t len[NFILES];
    int nshards;                 /* ZeRO checkpoints: optim-<r>.safetensors, r < nshards (else 0) */
    void **sbuf;
    size_t *slen;
} step_files;

static void step_files_free(step_files *f) {
    for (int i = 0; i < NFILES; i++) {
        free(f->buf[i]);
        f->buf[i] = NULL;
    }
    for (int i = 0; f->sbuf && i < f->nshards; i++) free(f->sbuf[i]);
    free(f->sbuf);
    free(f->slen);
    f->sbuf = NULL;
    f->slen = NULL;
    f->nshards = 0;
}

/* "optim-<r>.safetensors" with r canonical decimal below n: r, else -1. */
static int shard_index(const char *name, int n) {
    if (strncmp(name, "optim-", 6) != 0) return -1;
    const char *d = name + 6;
    size_t k = strspn(d, "0123456789");
    if (k == 0 || k > 7 || (k > 1 && d[0] == '0') || strcmp(d + k, ".safetensors")) return -1;
    long r = strtol(d, NULL, 10);
    return r < n ? (int)r : -1;
}

static int json_uint(const cJSON *j, double max, uint64_t *out) {
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0.0 && j->valuedouble <= max) || floor(j->valuedouble) != j->valuedouble)
        return 0;
    *out = (uint64_t)j->valuedouble;
    return 1;
}

/* BATON_ENOTFOUND: no COMMIT (torn, silently skipped); BATON_EFORMAT: committed but damaged. */
static int verify_step(const char *dir, long step, step_files *f) {
    memset(f, 0, sizeof *f);
    char name[32], path[4096 + 64];
    snprintf(name, sizeof name, "step-%ld", step);
    int rc = path_join(f->dir, sizeof f->dir, dir, name);
    if (rc < 0) return rc;
    snprintf(path, sizeof path, "%s/COMMIT", f->dir);
    void *cbuf;
    size_t clen;
    if ((rc = baton__read_file(path, BATON_CKPT_MAX_COMMIT, &cbuf, &clen)) < 0) return rc;
    cJSON *root = cJSON_ParseWithLength(cbuf, clen);
    free(cbuf);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    uint64_t cstep;
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "baton-checkpoint") ||
        !json_uint(cJSON_GetObjectItemCaseSensitive(root, "step"), 1e15, &cstep) || (long)cstep != step ||
        !cJSON_IsArray(files) || cJSON_GetArraySize(files) < NFILES || cJSON_GetArraySize(files) > 2 + BATON_CKPT_MAX_WORLD) {
        rc = baton__fail(BATON_EFORMAT, "%s: not a valid commit record for step %ld", path, step);
        goto out;
    }
    /* the three files, or model, state and optimizer shards optim-0 .. optim-<S-1> (S = entries - 2) */
    int seen[NFILES] = {0}, nsh = cJSON_GetArraySize(files) - 2;
    f->sbuf = calloc((size_t)nsh, sizeof *f->sbuf);
    f->slen = calloc((size_t)nsh, sizeof *f->slen);
    if (!f->sbuf || !f->slen) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    f->nshards = nsh;
    for (const cJSON *e = files->child; e; e = e->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *hx = cJSON_GetObjectItemCaseSensitive(e, "blake2b");
        uint64_t bytes;
        int k = -1, shard = cJSON_IsString(nm) ? shard_index(nm->valuestring, nsh) : -1;
        for (int i = 0; cJSON_IsString(nm) && i < NFILES; i++)
            if (!strcmp(nm->valuestring, file_names[i]) && (i != 1 || nsh == 1)) k = i;
        if (shard >= 0) k = 1;
        if (k < 0 || (shard < 0 && seen[k]++) || (shard >= 0 && f->sbuf[shard]) || (k == 1 && seen[1] && shard >= 0) ||
            !json_uint(cJSON_GetObjectItemCaseSensitive(e, "bytes"), (double)MAX_TENSOR_FILE, &bytes) ||
            !cJSON_IsString(hx) || strlen(hx->valuestring) != 2 * HASH_LEN) {
            rc = baton__fail(BATON_EFORMAT, "%s: bad file entry in the commit record", path);
            goto out;
        }
        char fpath[4096 + 64], hex[2 * HASH_LEN + 1];
        snprintf(fpath, sizeof fpath, "%s/%s", f->dir, nm->valuestring);
        void **dst = shard >= 0 ? &f->sbuf[shard] : &f->buf[k];
        size_t *dlen = shard >= 0 ? &f->slen[shard] : &f->len[k];
        size_t limit = k == 2 ? BATON_CKPT_MAX_STATE : MAX_TENSOR_FILE;
        if (bytes > limit) {
            rc = baton__fail(BATON_EFORMAT, "%s: commit record claims %" PRIu64 " bytes (limit %zu)", fpath, bytes, limit);
            goto out;
        }
        if ((rc = baton__read_file(fpath, (size_t)bytes, dst, dlen)) < 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", baton_last_error());
            rc = baton__fail(BATON_EFORMAT, "%s (the commit record lists it with %" PRIu64 " bytes)", why, bytes);
            goto out;
        }
        if (*dlen != bytes) {
            rc = baton__fail(BATON_EFORMAT, "%s: %zu bytes but the commit record says %" PRIu64 " (truncated?)", fpath,
                             *dlen, bytes);
            goto out;
        }
        hash_hex(*dst, *dlen, hex);
        if (strcmp(hex, hx->valuestring)) {
            rc = baton__fail(BATON_EFORMAT, "%s: checksum differs from the commit record (damaged file)", fpath);
            goto out;
        }
    }
    if (!seen[0] || !seen[2]) {
        rc = baton__fail(BATON_EFORMAT, "%s: the commit record does not list model.safetensors and state.json", path);
        goto out;
    }
    if (seen[1]) {   /* one optimizer file: not sharded */
        free(f->sbuf[0]);
        free(f->sbuf);
        free(f->slen);
        f->sbuf = NULL;
        f->slen = NULL;
        f->nshards = 0;
    }
    rc = BATON_OK;
out:
    cJSON_Delete(root);
    if (rc < 0) step_files_free(f);
    return rc;
}

int baton_ckpt_scan(const char *dir, int *committed, long *newest) {
    long *steps;
    int n, rc = list_steps(dir, &steps, &n);
    *committed = 0;
    *newest = -1;
    if (rc < 0) return rc;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/step-%ld/COMMIT", dir, steps[i]);
        if (stat(path, &sb) == 0) ++*committed;
        step_files f;
        if (*newest < 0 && verify_step(dir, steps[i], &f) == BATON_OK) {
            *newest = steps[i];
            step_files_free(&f);
        }
    }
    free(steps);
    return BATON_OK;
}

/* ---- save -------------------------------------------------------------------------------------------- */
/* The optimizer's slabs as one tensor per (parameter, slot); t has room for 2 x params entries. */
static int optim_tensors(baton_params *p, baton_optim *o, baton_st_tensor *t, char (*names)[64]) {
    int np = baton_params_count(p), kind = baton_optim_kind(o), nt = 0;
    for (int slot = 0; slot < 2; slot++) {
        float *slab = baton_optim_state(o, slot);
        if (!slab) continue;
        for (int i = 0; i < np; i++, nt++) {
            const baton_param_info *v = baton_params_info(p, i);
            snprintf(names[nt], 64, "%s.%s", v->name, slot_name(kind, slot));
            t[nt] = (baton_st_tensor){.name = names[nt], .dtype = "F32", .ndim = v->ndim, .data = slab + v->offset,
                                      .nbytes = v->count * sizeof(float)};
            for (int d = 0; d < v->ndim; d++) t[nt].shape[d] = v->shape[d];
        }
    }
    return nt;
}

/* Writes the three files (each atomically) and then COMMIT, hashing the images in memory as they go out. With
 * nshards > 0 the optimizer state is in the shard files the ranks wrote (slen, shex): no optim.safetensors. */
static int write_files(const char *stepdir, baton_params *p, baton_optim *o, const baton_ckpt_state *st, int nshards,
                       const size_t *slen, char (*shex)[2 * HASH_LEN + 1]) {
    int np = baton_params_count(p), rc = BATON_OK;
    baton_st_tensor *t = calloc((size_t)(2 * np), sizeof *t);
    char(*names)[64] = calloc((size_t)(2 * np), 64);
    char path[4096], stepbuf[32], osteps[32], hex[NFILES][2 * HASH_LEN + 1];
    void *buf = NULL;
    size_t len, lens[NFILES];
    if (!t || !names) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", stepdir);
        goto out;
    }
    snprintf(stepbuf, sizeof stepbuf, "%ld", st->step);
    snprintf(osteps, sizeof osteps, "%ld", st->optim_steps);
    /* model.safetensors: the parameters */
    const float *w = baton_params_data(p);
    for (int i = 0; i < np; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        t[i] = (baton_st_tensor){.name = v->name, .dtype = "F32", .ndim = v->ndim, .data = w + v->offset,
                                 .nbytes = v->count * sizeof(float)};
        for (int d = 0; d < v->ndim; d++) t[i].shape[d] = v->shape[d];
    }
    const char *mmeta[] = {"format", "pt", "producer", "baton train", "step", stepbuf};
    if ((rc = path_join(path, sizeof path, stepdir, file_names[0])) < 0 ||
        (rc = baton_st_serialize(t, np, mmeta, 3, &buf, &len, path)) < 0 || (rc = baton__write_atomic(path, buf, len, BATON_FILE_DURABLE)) < 0)
        goto out;
    hash_hex(buf, lens[0] = len, hex[0]);
    free(buf);
    buf = NULL;
    /* optim.safetensors: the state slabs */
    if (nshards) goto state;
    int nt = optim_tensors(p, o, t, names);
    const char *ometa[] = {"producer", "baton train", "optimizer", baton_optim_kind_name(baton_optim_kind(o)),
                           "steps", osteps};
    if ((rc = path_join(path, sizeof path, stepdir, file_names[1])) < 0 ||
        (rc = baton_st_serialize(t, nt, ometa, 3, &buf, &len, path)) < 0 || (rc = baton__write_atomic(path, buf, len, BATON_FILE_DURABLE)) < 0)
        goto out;
    hash_hex(buf, lens[1] = len, hex[1]);
state:
    free(buf);
    /* state.json */
    buf = baton__ckpt_state_json(st);
    if (!buf) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", stepdir);
        goto out;
    }
    if ((rc = path_join(path, sizeof path, stepdir, file_names[2])) < 0 ||
        (rc = baton__write_atomic(path, buf, lens[2] = strlen(buf), BATON_FILE_DURABLE)) < 0)
        goto out;
    hash_hex(buf, lens[2], hex[2]);
    rc = write_commit_n(stepdir, st->step, lens, hex, nshards, slen, shex);   /* the commit point */
out:
    free(buf);
    free(t);
    free(names);
    return rc;
}

/* Keeps the newest complete checkpoints older than `step` up to BATON_CKPT_KEEP in all (counting `kept`
 * already kept: 1 after committing `step` itself, 0 before writing it); deletes older ones and torn ones
 * older than `step`. Newer directories (from an abandoned future) are left alone. Pruning before a write as
 * well as after it bounds the count even when writers are killed between commit and prune again and again. */
static void prune(const char *dir, long step, int kept) {
    long *steps;
    int n;
    if (list_steps(dir, &steps, &n) < 0) return;
    for (int i = 0; i < n; i++) {
        if (steps[i] >= step) continue;
        step_files f;
        int ok = kept < BATON_CKPT_KEEP && verify_step(dir, steps[i], &f) == BATON_OK;
        if (ok) {
            step_files_free(&f);
            kept++;
            continue;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/step-%ld", dir, steps[i]);
        if (remove_step_dir(path) < 0) BATON_WARN("checkpoint: %s", baton_last_error());
    }
    free(steps);
    baton__fsync_dir(dir);
}

int baton__ckpt_begin(const char *dir, long step, char *stepdir, size_t cap) {
    char name[32];
    snprintf(name, sizeof name, "step-%ld", step);
    int rc = path_join(stepdir, cap, dir, name);
    if (rc < 0) return rc;
    if (mkdir(dir, 0755) == 0) {
        char parent[4096];
        snprintf(parent, sizeof parent, "%s/..", dir);
        baton__fsync_dir(parent);
    } else if (errno != EEXIST) {
        return baton__fail(BATON_EIO, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
    }
    struct stat sb;
    if (stat(stepdir, &sb) == 0 && (rc = remove_step_dir(stepdir)) < 0) return rc;
    if (mkdir(stepdir, 0755) != 0) return baton__fail(BATON_EIO, "%s: cannot create: %s", stepdir, strerror(errno));
    prune(dir, step, 0);
    return baton__fsync_dir(dir);
}

static int check_save_state(const baton_ckpt_state *st) {
    if (st->step < 0 || st->world < 1 || !st->ranks || st->sched.kind < 0 || st->sched.kind > 2 || st->loss_scale < 0 ||
        st->loss_scale > 2)
        return baton__fail(BATON_EINVAL, "checkpoint: bad state to save (step %ld, world %d)", st->step, st->world);
    return BATON_OK;
}

int baton__ckpt_finish(const char *dir, const char *stepdir, baton_params *p, const baton_ckpt_state *st, int nshards,
                       const size_t *slen, char (*shex)[65]) {
    int rc = check_save_state(st);
    if (rc < 0 || (rc = write_files(stepdir, p, NULL, st, nshards, slen, shex)) < 0) return rc;
    prune(dir, st->step, 1);
    return BATON_OK;
}

/* A shard: the optimizer's state for slab elements [lo, hi) as flat F32 tensors named by slot, the range in the
 * metadata (offset, slab length), so that a reader with any shard can take the part it needs. */
int baton__ckpt_write_shard(const char *stepdir, int shard, baton_params *p, baton_optim *o, size_t *len,
                            char hex[65]) {
    size_t lo, hi;
    baton_optim_shard(o, &lo, &hi);
    int kind = baton_optim_kind(o), nt = baton_optim_kind_slots(kind);
    baton_st_tensor t[2];
    for (int s = 0; s < nt; s++)
        t[s] = (baton_st_tensor){.name = slot_name(kind, s), .dtype = "F32", .ndim = 1, .shape = {(int64_t)(hi - lo)},
                                 .data = baton_optim_state(o, s), .nbytes = (hi - lo) * sizeof(float)};
    char off[32], slab[32], steps[32], name[64], path[4200];
    snprintf(off, sizeof off, "%zu", lo);
    snprintf(slab, sizeof slab, "%zu", baton_params_numel(p));
    snprintf(steps, sizeof steps, "%ld", baton_optim_steps(o));
    snprintf(name, sizeof name, "optim-%d.safetensors", shard);
    const char *meta[] = {"producer", "baton train", "optimizer", baton_optim_kind_name(kind),
                          "offset", off, "slab", slab, "steps", steps};
    void *buf = NULL;
    int rc = path_join(path, sizeof path, stepdir, name);
    if (rc >= 0 && (rc = baton_st_serialize(t, nt, meta, 5, &buf, len, path)) >= 0 &&
        (rc = baton__write_atomic(path, buf, *len, BATON_FILE_DURABLE)) >= 0)
        hash_hex(buf, *len, hex);
    free(buf);
    return rc;
}

int baton_ckpt_save(const char *dir, baton_params *p, baton_optim *o, const baton_ckpt_state *st) {
    char stepdir[4096];
    int rc = check_save_state(st);
    if (rc < 0 || (rc = baton__ckpt_begin(dir, st->step, stepdir, sizeof stepdir)) < 0 ||
        (rc = write_files(stepdir, p, o, st, 0, NULL, NULL)) < 0)
        return rc;
    prune(dir, st->step, 1);
    return BATON_OK;
}

/* The whitespace-free token of `cfg` ("k=v k2=v2 ...") whose key is the `klen` bytes at `key`, or NULL. */
static const char *find_key(const char *cfg, const char *key, size_t klen) {
    for (const char *t = cfg; *t; t += strcspn(t, " "), t += strspn(t, " "))
        if (!strncmp(t, key, klen) && t[klen] == '=') return t;
    return NULL;
}

/* Names the first setting of the checkpoint's config that this run's differs from. */
static int config_mismatch(const char *what, const char *theirs, const char *ours) {
    for (const char *t = theirs + strspn(theirs, " "); *t; t += strcspn(t, " "), t += strspn(t, " ")) {
        size_t tlen = strcspn(t, " "), klen = strcspn(t, "= ");
        const char *m = find_key(ours, t, klen);
        size_t mlen = m ? strcspn(m, " ") : 0;
        if (!m || mlen != tlen || strncmp(m, t, tlen))
            return baton__fail(BATON_EMISMATCH, "%s was written with %.*s but this run has %.*s: resume with "
                               "the same settings (or use a new --checkpoint directory)", what, (int)tlen, t,
                               m ? (int)mlen : 9, m ? m : "(nothing)");
    }
    return baton__fail(BATON_EMISMATCH, "%s was written with the settings \"%s\", this run has \"%s\"", what,
                       theirs, ours);
}

/* ---- load -------------------------------------------------------------------------------------------- */
/* Checks that f holds exactly the tensors <param><suffix> (F32, the parameter's shape) for each suffix. */
static int check_tensors(const baton_st_file *f, baton_params *p, const char *const *suffix, int ns, const char *what) {
    int np = baton_params_count(p);
    if (baton_st_count(f) != np * ns)
        return baton__fail(BATON_EMISMATCH, "%s: holds %d tensors but this model and optimizer need %d", what,
                           baton_st_count(f), np * ns);
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < np; i++) {
            const baton_param_info *v = baton_params_info(p, i);
            char name[128];
            snprintf(name, sizeof name, "%s%s", v->name, suffix[s]);
            const baton_st_entry *e = baton_st_find(f, name);
            int same = e && !strcmp(e->dtype, "F32") && e->ndim == v->ndim;
            for (int d = 0; same && d < v->ndim; d++) same = e->shape[d] == v->shape[d];
            if (!same)
                return baton__fail(BATON_EMISMATCH, "%s: tensor %s is missing or not F32 of the model's shape "
                                   "(a checkpoint of a different model?)", what, name);
        }
    return BATON_OK;
}

static void copy_tensors(const baton_st_file *f, baton_params *p, const char *suffix, float *slab) {
    memset(slab, 0, baton_params_numel(p) * sizeof(float));   /* alignment padding stays zero */
    for (int i = 0, np = baton_params_count(p); i < np; i++) {
        const baton_param_info *v = baton_params_info(p, i);
        char name[128];
        snprintf(name, sizeof name, "%s%s", v->name, suffix);
        memcpy(slab + v->offset, baton_st_find(f, name)->data, v->count * sizeof(float));
    }
}

/* The part of src (slab elements [src_lo, src_lo + n)) inside the optimizer's shard [lo, hi) into state. */
static void copy_overlap(float *state, size_t lo, size_t hi, const void *src, size_t src_lo, size_t n) {
    size_t a = src_lo > lo ? src_lo : lo, b = src_lo + n < hi ? src_lo + n : hi;
    if (a < b) memcpy(state + (a - lo), (const char *)src + (a - src_lo) * sizeof(float), (b - a) * sizeof(float));
}

static int meta_size(const baton_st_file *f, const char *key, size_t *out) {
    const char *s = baton_st_meta(f, key);
    if (!s || !*s || strlen(s) > 15 || strspn(s, "0123456789") != strlen(s)) return 0;
    *out = (size_t)strtoull(s, NULL, 10);
    return 1;
}

/* Parses and checks the optimizer shards optim-<r>.safetensors: flat F32 tensors per slot, the same optimizer,
 * the same slab length, and ranges that tile the slab in order. of[] gets the parsed files. */
static int check_shards(step_files *sf, baton_params *p, int kind, baton_st_file **of) {
    size_t numel = baton_params_numel(p), next = 0;
    int ns = baton_optim_kind_slots(kind), rc;
    for (int r = 0; r < sf->nshards; r++) {
        char what[4096 + 64];
        snprintf(what, sizeof what, "%s/optim-%d.safetensors", sf->dir, r);
        if ((rc = baton_st_parse(&of[r], sf->sbuf[r], sf->slen[r], what)) < 0) return rc;
        const char *okind = baton_st_meta(of[r], "optimizer");
        size_t off, slab;
        if (!okind || strcmp(okind, baton_optim_kind_name(kind)))
            return baton__fail(BATON_EMISMATCH, "%s: optimizer '%s' differs from this run's %s", what, okind ? okind : "?",
                               baton_optim_kind_name(kind));
        if (!meta_size(of[r], "offset", &off) || !meta_size(of[r], "slab", &slab))
            return baton__fail(BATON_EFORMAT, "%s: 'offset' and 'slab' metadata must be integers", what);
        if (slab != numel)
            return baton__fail(BATON_EMISMATCH, "%s: written for a slab of %zu elements but this model has %zu", what,
                               slab, numel);
        if (baton_st_count(of[r]) != ns)
            return baton__fail(BATON_EMISMATCH, "%s: holds %d tensors but this optimizer needs %d", what,
                               baton_st_count(of[r]), ns);
        size_t len = 0;
        for (int s = 0; s < ns; s++) {
            const baton_st_entry *e = baton_st_find(of[r], slot_name(kind, s));
            if (!e || strcmp(e->dtype, "F32") || e->ndim != 1 || (s && (size_t)e->shape[0] != len))
                return baton__fail(BATON_EFORMAT, "%s: tensor %s is missing or not a flat F32 range", what,
                                   slot_name(kind, s));
            len = (size_t)e->shape[0];
        }
        if (off != next || len > numel - off)
            return baton__fail(BATON_EFORMAT, "%s: covers [%zu, %zu) but the shards before it end at %zu (a damaged or "
                               "mixed shard set)", what, off, off + len, next);
        next = off + len;
    }
    if (next != numel)
        return baton__fail(BATON_EFORMAT, "%s: the %d optimizer shards cover %zu of the %zu elements (a damaged or "
                           "mixed shard set)", sf->dir, sf->nshards, next, numel);
    return BATON_OK;
}

static int load_verified(step_files *sf, baton_params *p, baton_optim *o, const char *config, int world,
                         baton_ckpt_state *st) {
    char what[3][4096 + 64];
    for (int i = 0; i < NFILES; i++) snprintf(what[i], sizeof what[i], "%s/%s", sf->dir, file_names[i]);
    baton_st_file *mf = NULL, *of = NULL, **shf = NULL;
    int kind = baton_optim_kind(o), rc;
    size_t lo, hi;
    baton_optim_shard(o, &lo, &hi);
    char s0[40], s1[40];
    snprintf(s0, sizeof s0, ".%s", slot_name(kind, 0));
    snprintf(s1, sizeof s1, ".%s", slot_name(kind, 1));
    const char *suffix[] = {s0, s1}, *none[] = {""};
    if ((rc = baton__ckpt_parse_state(sf->buf[2], sf->len[2], what[2], st)) < 0) goto out;
    if (world && st->world != world) {
        rc = baton__fail(BATON_EMISMATCH, "%s was written by %d rank(s) but this run has %d: resume with the same world "
                         "size (the data order depends on it)", sf->dir, st->world, world);
        goto out;
    }
    if (config && strcmp(st->config, config)) {
        rc = config_mismatch(sf->dir, st->config, config);
        goto out;
    }
    if ((rc = baton_st_parse(&mf, sf->buf[0], sf->len[0], what[0])) < 0 ||
        (rc = check_tensors(mf, p, none, 1, what[0])) < 0)
        goto out;
    if (sf->nshards) {   /* ZeRO: the ranks' shards of the flat state */
        if (!(shf = calloc((size_t)sf->nshards, sizeof *shf))) {
            rc = baton__fail(BATON_ENOMEM, "%s: out of memory", sf->dir);
            goto out;
        }
        if ((rc = check_shards(sf, p, kind, shf)) < 0) goto out;
    } else {
        if ((rc = baton_st_parse(&of, sf->buf[1], sf->len[1], what[1])) < 0 ||
            (rc = check_tensors(of, p, suffix, baton_optim_kind_slots(kind), what[1])) < 0)
            goto out;
        const char *okind = baton_st_meta(of, "optimizer");
        if (!okind || strcmp(okind, baton_optim_kind_name(kind))) {
            rc = baton__fail(BATON_EMISMATCH, "%s: optimizer '%s' differs from this run's %s", what[1], okind ? okind : "?",
                             baton_optim_kind_name(kind));
            goto out;
        }
    }
    copy_tensors(mf, p, "", baton_params_data(p));
    /* Only the optimizer's own shard [lo, hi) is kept (all of it without ZeRO), whatever wrote the state. */
    for (int s = 0; s < (baton_optim_kind_slots(kind)); s++) {
        float *state = baton_optim_state(o, s);
        memset(state, 0, (hi - lo) * sizeof(float));   /* alignment padding stays zero */
        for (int r = 0; r < sf->nshards; r++) {
            const baton_st_entry *e = baton_st_find(shf[r], slot_name(kind, s));
            size_t off;
            meta_size(shf[r], "offset", &off);
            copy_overlap(state, lo, hi, e->data, off, (size_t)e->shape[0]);
        }
        for (int i = 0, np = baton_params_count(p); !sf->nshards && i < np; i++) {
            const baton_param_info *v = baton_params_info(p, i);
            char name[128];
            snprintf(name, sizeof name, "%s%s", v->name, suffix[s]);
            copy_overlap(state, lo, hi, baton_st_find(of, name)->data, v->offset, v->count);
        }
    }
    baton_optim_set_steps(o, st->optim_steps);
out:
    baton_st_close(mf);
    baton_st_close(of);
    for (int r = 0; shf && r < sf->nshards; r++) baton_st_close(shf[r]);
    free(shf);
    if (rc < 0) baton_ckpt_state_free(st);
    return rc;
}

int baton_ckpt_load(const char *dir, baton_params *p, baton_optim *o, baton_ckpt_state *st) {
    return baton_ckpt_load_for(dir, p, o, NULL, 0, st);
}

int baton_ckpt_load_for(const char *dir, baton_params *p, baton_optim *o, const char *config, int world,
                        baton_ckpt_state *st) {
    memset(st, 0, sizeof *st);
    long *steps;
    int n, rc = list_steps(dir, &steps, &n), damaged = 0;
    if (rc < 0) return rc;
    char first_damage[512] = "";
    for (int i = 0; i < n; i++) {
        step_files f;
        rc = verify_step(dir, steps[i], &f);
        if (rc == BATON_ENOTFOUND) continue;   /* no COMMIT: a torn write, never committed */
        if (rc < 0) {
            if (!damaged++) snprintf(first_damage, sizeof first_damage, "%s", baton_last_error());
            BATON_WARN("checkpoint: skipping %s/step-%ld: %s", dir, steps[i], baton_last_error());
            continue;
        }
        free(steps);
        rc = load_verified(&f, p, o, config, world, st);
        step_files_free(&f);
        return rc;
    }
    free(steps);
    if (damaged)
        return baton__fail(BATON_EFORMAT, "%s: no complete checkpoint verifies (%d damaged; newest: %s)", dir, damaged,
                           first_damage);
    return baton__fail(BATON_ENOTFOUND, "%s: no complete checkpoint", dir);
}

int baton_ckpt_consolidate(const char *dir, const char *out, long *step) {
    long *steps;
    int n, rc = list_steps(dir, &steps, &n), damaged = 0;
    if (rc < 0) return rc;
    for (int i = 0; i < n; i++) {
        step_files f;
        rc = verify_step(dir, steps[i], &f);
        if (rc == BATON_ENOTFOUND) continue;
        if (rc < 0) {
            damaged++;
            BATON_WARN("checkpoint: skipping %s/step-%ld: %s", dir, steps[i], baton_last_error());
            continue;
        }
        *step = steps[i];
        free(steps);
        baton_st_file *mf = NULL;
        char what[4096 + 64];
        snprintf(what, sizeof what, "%s/model.safetensors", f.dir);
        /* the committed parameters, checked by the hardened reader, written out as they are */
        if ((rc = baton_st_parse(&mf, f.buf[0], f.len[0], what)) >= 0)
            rc = baton__write_atomic(out, f.buf[0], f.len[0], BATON_FILE_DURABLE);
        baton_st_close(mf);
        step_files_free(&f);
        return rc;
    }
    free(steps);
    return baton__fail(damaged ? BATON_EFORMAT : BATON_ENOTFOUND, "%s: no complete checkpoint%s", dir,
                       damaged ? " verifies (see the warnings)" : "");
}
