/* doctor.c: `baton doctor FILES...` reads every rank's flight-recorder dump (baton-flight-*-rank*.json) and
 * says at which collective the ranks diverged (different descriptors for one sequence number) and which
 * rank lagged (the others waited in a collective it never started), plus each rank's error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

enum { MAX_RANKS = 4096, MAX_FILE = 64 << 20 };

typedef struct {
    long long seq, count, root;
    char coll[24], dtype[8], op[8], state[12];
} entry;

typedef struct {
    int rank, world, n;
    char error[512];
    entry *e;
} dump;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz >= 0 && sz <= MAX_FILE && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz + 1))) {
            *len = fread(buf, 1, (size_t)sz, f);
            buf[*len] = '\0';
        }
    }
    fclose(f);
    return buf;
}

static void copy_str(char *dst, size_t n, const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, n, "%s", cJSON_IsString(v) && v->valuestring ? v->valuestring : "?");
}

static long long get_num(const cJSON *o, const char *key, int *ok) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return (long long)v->valuedouble;
}

static int load(const char *path, dump *d) {
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "baton doctor: cannot read %s (missing, unreadable or over 64 MiB)\n", path);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    int ok = 1;
    const cJSON *entries = root ? cJSON_GetObjectItemCaseSensitive(root, "entries") : NULL;
    if (!root || !cJSON_IsArray(entries)) {
        fprintf(stderr, "baton doctor: %s is not a flight-recorder dump (no JSON object with \"entries\")\n", path);
        cJSON_Delete(root);
        return -1;
    }
    d->rank = (int)get_num(root, "rank", &ok);
    d->world = (int)get_num(root, "world", &ok);
    copy_str(d->error, sizeof d->error, root, "error");
    int n = cJSON_GetArraySize(entries);
    d->e = calloc((size_t)(n > 0 ? n : 1), sizeof(entry));
    d->n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, entries) {
        entry *e = &d->e[d->n];
        e->seq = get_num(it, "seq", &ok);
        e->count = get_num(it, "count", &ok);
        e->root = get_num(it, "root", &ok);
        copy_str(e->coll, sizeof e->coll, it, "coll");
        copy_str(e->dtype, sizeof e->dtype, it, "dtype");
        copy_str(e->op, sizeof e->op, it, "op");
        copy_str(e->state, sizeof e->state, it, "state");
        d->n++;
    }
    cJSON_Delete(root);
    if (!ok || d->rank < 0 || d->rank >= MAX_RANKS || d->world < 1) {
        fprintf(stderr, "baton doctor: %s has missing or invalid fields (rank, world, seq, count, root)\n", path);
        free(d->e);
        return -1;
    }
    return 0;
}

static const entry *find(const dump *d, long long seq) {
    for (int i = 0; i < d->n; i++)
        if (d->e[i].seq == seq) return &d->e[i];
    return NULL;
}

static void describe(const entry *e, char *out, size_t n) {
    snprintf(out, n, "%s #%lld (%lld x %s, %s, root %lld) [%s]", e->coll, e->seq, e->count, e->dtype, e->op, e->root,
             e->state);
}

static int same(const entry *a, const entry *b) {
    return !strcmp(a->coll, b->coll) && !strcmp(a->dtype, b->dtype) && !strcmp(a->op, b->op) && a->count == b->count &&
           a->root == b->root;
}

int baton_cmd_doctor(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: baton doctor FILE...\n  reads the flight-recorder dumps that ranks write when a collective "
                "fails\n  (default $BATON_FLIGHT_DIR or /tmp: baton-flight-<job>-rank<R>.json) and says where the "
                "ranks diverged\n  and which rank lagged\n");
        return argc < 2 ? 2 : 0;
    }
    int nd = argc - 1;
    dump *d = calloc((size_t)nd, sizeof *d);
    if (!d) return 1;
    for (int i = 0; i < nd; i++)
        if (load(argv[i + 1], &d[i]) < 0) {
            for (int j = 0; j < i; j++) free(d[j].e);
            free(d);
            return 2;
        }
    int world = d[0].world;
    printf("baton doctor: %d dump(s), world size %d\n", nd, world);
    for (int i = 0; i < nd; i++) {
        long long last = d[i].n ? d[i].e[d[i].n - 1].seq : 0;
        char what[256] = "no collective";
        if (d[i].n) describe(&d[i].e[d[i].n - 1], what, sizeof what);
        printf("  rank %d: last %s%s%s\n", d[i].rank, what, d[i].error[0] ? "; error: " : "", d[i].error);
        (void)last;
    }
    if (nd < world) {
        printf("missing dumps from:");
        for (int r = 0; r < world; r++) {
            int have = 0;
            for (int i = 0; i < nd; i++) have |= d[i].rank == r;
            if (!have) printf(" rank %d", r);
        }
        printf(" (a rank that died or hung writes none: it is the first suspect)\n");
    }
    /* Divergence: the first sequence number at which two ranks recorded different collectives. */
    long long lo = -1, hi = 0;
    for (int i = 0; i < nd; i++)
        if (d[i].n) {
            if (lo < 0 || d[i].e[0].seq > lo) lo = d[i].e[0].seq;
            if (d[i].e[d[i].n - 1].seq > hi) hi = d[i].e[d[i].n - 1].seq;
        }
    int diverged = 0;
    for (long long s = lo < 1 ? 1 : lo; s <= hi && !diverged; s++) {
        const entry *ref = NULL;
        int refrank = -1;
        for (int i = 0; i < nd && !diverged; i++) {
            const entry *e = find(&d[i], s);
            if (!e) continue;
            if (!ref) {
                ref = e;
                refrank = d[i].rank;
            } else if (!same(ref, e)) {
                char a[256], b[256];
                describe(ref, a, sizeof a);
                describe(e, b, sizeof b);
                printf("DIVERGED at collective #%lld: rank %d ran %s, rank %d ran %s\n", s, refrank, a, d[i].rank, b);
                diverged = 1;
            }
        }
    }
    /* Lag: the rank whose newest collective is the oldest, while others waited in a later one. */
    int lag = -1;
    long long lag_seq = 0, max_seq = 0;
    for (int i = 0; i < nd; i++) {
        long long last = d[i].n ? d[i].e[d[i].n - 1].seq : 0;
        if (lag < 0 || last < lag_seq) lag = i, lag_seq = last;
        if (last > max_seq) max_seq = last;
    }
    if (lag >= 0 && lag_seq < max_seq)
        printf("LAGGED: rank %d's newest collective is #%lld while others reached #%lld: the others waited for it\n",
               d[lag].rank, lag_seq, max_seq);
    else if (!diverged)
        printf("no divergence and no lag among these dumps: all reached #%lld%s\n", max_seq,
               nd < world ? "; look at the ranks without a dump" : "");
    for (int i = 0; i < nd; i++) free(d[i].e);
    free(d);
    return 0;
}
