/* doctor.c: `baton doctor [--job ID] [--list] [FILES...]` reads the flight-recorder dumps of one job
 * (baton-flight-<job>-rank<R>.json) and says at which collective the ranks diverged (different descriptors
 * for one sequence number) and which rank lagged (the others waited in a collective it never started), plus
 * each rank's error.
 *
 * Without FILES it reads the dump directory (BATON_FLIGHT_DIR, else baton's private directory). Dumps are
 * grouped by the job they name; the newest job is diagnosed unless --job picks another, and --list lists
 * them. Every loop is bounded by what was read: entries are sorted once and looked up by binary search, and
 * a world size is accepted only up to BATON_MAX_WORLD. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "comm/flight.h"
#include "util/files.h"
#include "util/util.h"

enum { MAX_RANKS = BATON_FLIGHT_MAX_WORLD, MAX_FILE = 64 << 20, MAX_DUMPS = 65536 };

typedef struct {
    long long seq, count, root;
    char coll[24], dtype[8], op[8], state[12];
} entry;

typedef struct {
    int rank, world, n;
    char job[80], error[512], path[1024];
    double mtime;
    entry *e; /* sorted by seq, unique */
} dump;

static void copy_str(char *dst, size_t n, const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, n, "%s", cJSON_IsString(v) && v->valuestring ? v->valuestring : "?");
}

static long long get_num(const cJSON *o, const char *key, int *ok) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -9.2e18 && v->valuedouble <= 9.2e18)) {
        *ok = 0;
        return 0;
    }
    return (long long)v->valuedouble;
}

static int by_seq(const void *a, const void *b) {
    long long x = ((const entry *)a)->seq, y = ((const entry *)b)->seq;
    return (x > y) - (x < y);
}

static int load(const char *path, dump *d) {
    size_t len = 0;
    void *text = NULL;
    if (baton__read_file(path, MAX_FILE, &text, &len) < 0) {
        fprintf(stderr, "baton doctor: cannot read %s: %s\n", path, baton_last_error());
        return -1;
    }
    struct stat st;
    d->mtime = stat(path, &st) == 0 ? (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec : 0;
    snprintf(d->path, sizeof d->path, "%s", path);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    int ok = 1;
    const cJSON *entries = root ? cJSON_GetObjectItemCaseSensitive(root, "entries") : NULL;
    if (!root || !cJSON_IsArray(entries)) {
        fprintf(stderr, "baton doctor: %s is not a flight-recorder dump (no JSON object with \"entries\")\n", path);
        cJSON_Delete(root);
        return -1;
    }
    long long rank = get_num(root, "rank", &ok), world = get_num(root, "world", &ok);
    copy_str(d->error, sizeof d->error, root, "error");
    copy_str(d->job, sizeof d->job, root, "job");
    int n = cJSON_GetArraySize(entries);
    d->e = calloc((size_t)(n > 0 ? n : 1), sizeof(entry));
    if (!d->e) {
        cJSON_Delete(root);
        fprintf(stderr, "baton doctor: %s: out of memory for %d entries\n", path, n);
        return -1;
    }
    d->n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, entries) {
        if (d->n >= n) break;
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
    if (!ok || world < 1 || world > MAX_RANKS || rank < 0 || rank >= world) {
        fprintf(stderr,
                "baton doctor: %s has missing or invalid fields (rank, world, seq, count, root; world must be 1 to %d "
                "and rank below it)\n",
                path, MAX_RANKS);
        free(d->e);
        d->e = NULL;
        return -1;
    }
    d->rank = (int)rank;
    d->world = (int)world;
    qsort(d->e, (size_t)d->n, sizeof(entry), by_seq);
    int u = 0; /* a sequence number recorded twice keeps its first record */
    for (int i = 0; i < d->n; i++)
        if (u == 0 || d->e[u - 1].seq != d->e[i].seq) d->e[u++] = d->e[i];
    d->n = u;
    return 0;
}

static const entry *find(const dump *d, long long seq) {
    int lo = 0, hi = d->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (d->e[mid].seq == seq) return &d->e[mid];
        if (d->e[mid].seq < seq) lo = mid + 1;
        else hi = mid - 1;
    }
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

static int by_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Diagnoses the dumps of one job (d[0..nd), all with the same job id). */
static void diagnose(dump *d, int nd) {
    int world = d[0].world;
    printf("baton doctor: job %s: %d dump(s), world size %d\n", d[0].job, nd, world);
    for (int i = 0; i < nd; i++) {
        char what[256] = "no collective";
        if (d[i].n) describe(&d[i].e[d[i].n - 1], what, sizeof what);
        printf("  rank %d: last %s%s%s\n", d[i].rank, what, d[i].error[0] ? "; error: " : "", d[i].error);
    }
    if (nd < world) {
        char *have = calloc((size_t)world, 1);
        int shown = 0, missing = 0;
        for (int i = 0; have && i < nd; i++) have[d[i].rank] = 1;
        printf("missing dumps from:");
        for (int r = 0; have && r < world; r++)
            if (!have[r] && missing++ < 32) printf(" rank %d", r), shown++;
        if (missing > shown) printf(" and %d more", missing - shown);
        printf(" (a rank that died or hung writes none: it is the first suspect)\n");
        free(have);
    }
    /* Divergence: the first sequence number, among those recorded, at which two ranks ran different collectives.
     * Only recorded numbers are visited, so a dump whose numbers jump to 1e18 costs nothing more. */
    long long lo = -1;
    size_t total = 0;
    for (int i = 0; i < nd; i++)
        if (d[i].n) {
            if (lo < 0 || d[i].e[0].seq > lo) lo = d[i].e[0].seq;
            total += (size_t)d[i].n;
        }
    long long *seqs = malloc((total ? total : 1) * sizeof *seqs);
    size_t ns = 0;
    for (int i = 0; seqs && i < nd; i++)
        for (int k = 0; k < d[i].n; k++)
            if (d[i].e[k].seq >= lo) seqs[ns++] = d[i].e[k].seq;
    if (seqs) qsort(seqs, ns, sizeof *seqs, by_ll);
    int diverged = 0;
    for (size_t k = 0; k < ns && !diverged; k++) {
        if (k && seqs[k] == seqs[k - 1]) continue;
        long long s = seqs[k];
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
    free(seqs);
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
}

static int is_dump_name(const char *name) {
    size_t n = strlen(name);
    return !strncmp(name, "baton-flight-", 13) && n > 18 && !strcmp(name + n - 5, ".json") && strstr(name, "-rank");
}

static int by_job_then_rank(const void *a, const void *b) {
    const dump *x = a, *y = b;
    int c = strcmp(x->job, y->job);
    return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static void usage(FILE *f) {
    fprintf(f, "usage: baton doctor [--job ID] [--list] [FILE...]\n"
               "  reads the flight-recorder dumps that ranks write when a collective fails and says where the\n"
               "  ranks diverged and which rank lagged. Without FILE it reads the dump directory\n"
               "  ($BATON_FLIGHT_DIR, else baton's private directory ${TMPDIR:-/tmp}/baton-<uid>). Dumps are\n"
               "  grouped by job: the newest job is diagnosed; --job ID picks one, --list lists them all.\n");
}

int baton_cmd_doctor(int argc, char **argv) {
    const char *want_job = NULL;
    int list = 0, nfiles = 0;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(files);
            return 0;
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "--job")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "baton doctor: --job needs a job id (see --list)\n");
                free(files);
                return 2;
            }
            want_job = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "baton doctor: unknown option '%s' (see baton doctor --help)\n", argv[i]);
            free(files);
            return 2;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    char dir[1024] = "";
    char **owned = NULL;
    int nowned = 0;
    if (!nfiles) { /* the dump directory */
        if (baton__flight_dir(dir, sizeof dir) < 0) {
            fprintf(stderr, "baton doctor: %s\n", baton_last_error());
            free(files);
            return 2;
        }
        DIR *dd = opendir(dir);
        if (!dd) {
            printf("baton doctor: no dumps in %s (it does not exist yet)\n", dir);
            free(files);
            return 0;
        }
        owned = calloc(MAX_DUMPS, sizeof *owned);
        for (struct dirent *e; owned && (e = readdir(dd)) && nowned < MAX_DUMPS;) {
            if (!is_dump_name(e->d_name)) continue;
            size_t L = strlen(dir) + strlen(e->d_name) + 2;
            if ((owned[nowned] = malloc(L))) snprintf(owned[nowned++], L, "%s/%s", dir, e->d_name);
        }
        closedir(dd);
        free(files);
        files = owned;
        nfiles = nowned;
        if (!nfiles) {
            printf("baton doctor: no dumps in %s\n", dir);
            free(owned);
            return 0;
        }
    }
    dump *d = calloc((size_t)nfiles, sizeof *d);
    int nd = 0, bad = 0;
    for (int i = 0; d && i < nfiles; i++) {
        if (load(files[i], &d[nd]) < 0) bad = 1;
        else nd++;
    }
    int rc = 0;
    if (!d || (bad && !dir[0])) { /* a named file that is not a dump is an error; in the directory, skipped */
        rc = 2;
        goto out;
    }
    qsort(d, (size_t)nd, sizeof *d, by_job_then_rank);
    /* jobs: runs of equal job ids; the newest is the one with the most recent dump */
    int njobs = 0, pick = -1;
    double pick_t = -1;
    if (list) printf("%-20s %6s %6s  %s\n", "job", "dumps", "world", "newest dump");
    for (int i = 0; i < nd;) {
        int j = i;
        double t = 0;
        while (j < nd && !strcmp(d[j].job, d[i].job)) t = d[j].mtime > t ? d[j].mtime : t, j++;
        njobs++;
        if (list) printf("%-20s %6d %6d  %s\n", d[i].job, j - i, d[i].world, d[j - 1].path);
        if (want_job ? !strcmp(d[i].job, want_job) : t > pick_t) pick = i, pick_t = t;
        i = j;
    }
    if (list) goto out;
    if (pick < 0) {
        if (want_job) fprintf(stderr, "baton doctor: no dumps of job '%s' (see baton doctor --list)\n", want_job);
        else printf("baton doctor: no readable dumps%s%s\n", dir[0] ? " in " : "", dir);
        rc = want_job ? 2 : 0;
        goto out;
    }
    int end = pick;
    while (end < nd && !strcmp(d[end].job, d[pick].job)) end++;
    /* one dump per rank: a rank listed twice keeps its newest dump */
    int k = pick;
    for (int i = pick; i < end; i++) {
        if (k > pick && d[k - 1].rank == d[i].rank) {
            if (d[i].mtime > d[k - 1].mtime) {
                free(d[k - 1].e);
                d[k - 1] = d[i];
            } else {
                free(d[i].e);
            }
            d[i].e = NULL;
            continue;
        }
        if (k != i) {
            d[k] = d[i];
            d[i].e = NULL;
        }
        k++;
    }
    if (njobs > 1)
        printf("baton doctor: dumps of %d jobs; diagnosing %s job %s (--job ID for another, --list for all)\n", njobs,
               want_job ? "the requested" : "the newest", d[pick].job);
    diagnose(d + pick, k - pick);
out:
    for (int i = 0; d && i < nd; i++) free(d[i].e);
    free(d);
    for (int i = 0; i < nowned; i++) free(owned[i]);
    if (owned) free(owned);
    else free(files);
    return rc;
}
