/* flight.c: the flight recorder's ring and its JSON dump (see flight.h). */
#include "comm/flight.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baton/comm.h"
#include "util/files.h"
#include "util/util.h"

static const char *const coll_names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "barrier", "reduce_range"};
static const char *const state_names[] = {"running", "done", "failed"};

static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

int baton__flight_dir(char *out, size_t n) {
    const char *env = getenv("BATON_FLIGHT_DIR");
    if (env && *env) {
        if ((size_t)snprintf(out, n, "%s", env) >= n) return baton__fail(BATON_EINVAL, "BATON_FLIGHT_DIR is too long");
        return BATON_OK;
    }
    return baton__private_dir(out, n); /* 0700, owner checked; never a shared directory such as /tmp */
}

/* "baton-flight-<job>-rank<R>.json" -> job (n bytes), or 0 if the name is not a dump's. */
static int dump_job(const char *name, char *job, size_t n) {
    size_t len = strlen(name);
    if (strncmp(name, "baton-flight-", 13) || len < 19 || strcmp(name + len - 5, ".json")) return 0;
    const char *r = NULL;
    for (const char *p = name + 13; (p = strstr(p, "-rank")); p++) r = p;
    if (!r || (size_t)(r - (name + 13)) >= n) return 0;
    memcpy(job, name + 13, (size_t)(r - (name + 13)));
    job[r - (name + 13)] = '\0';
    return 1;
}

typedef struct {
    char job[80];
    double newest;
    int old;
} job_age;

/* Keeps the dumps of the newest BATON_FLIGHT_KEEP_JOBS jobs (always `mine`); bounded by what readdir gives. */
static void prune_old_jobs(const char *dir, const char *mine) {
    enum { MAX_JOBS = 512, MAX_SCAN = 16384 };
    DIR *d = opendir(dir);
    if (!d) return;
    job_age *jobs = calloc(MAX_JOBS, sizeof *jobs);
    int nj = 0, scanned = 0;
    char job[80], path[1024];
    struct stat st;
    for (struct dirent *e; jobs && scanned < MAX_SCAN && (e = readdir(d)); scanned++) {
        if (!dump_job(e->d_name, job, sizeof job)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &st) != 0) continue;
        double t = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
        if (!strcmp(job, mine)) t = 1e300; /* this job's dumps are never the old ones */
        int j = 0;
        while (j < nj && strcmp(jobs[j].job, job)) j++;
        if (j == nj) {
            if (nj == MAX_JOBS) continue;
            snprintf(jobs[nj].job, sizeof jobs[nj].job, "%s", job);
            jobs[nj++].newest = t;
        } else if (t > jobs[j].newest) {
            jobs[j].newest = t;
        }
    }
    if (jobs && nj > BATON_FLIGHT_KEEP_JOBS) {
        for (int j = 0; j < nj; j++) {
            int newer = 0;
            for (int k = 0; k < nj; k++) newer += jobs[k].newest > jobs[j].newest;
            jobs[j].old = newer >= BATON_FLIGHT_KEEP_JOBS;
        }
        rewinddir(d);
        scanned = 0;
        for (struct dirent *e; scanned < MAX_SCAN && (e = readdir(d)); scanned++) {
            if (!dump_job(e->d_name, job, sizeof job)) continue;
            int j = 0;
            while (j < nj && strcmp(jobs[j].job, job)) j++;
            if (j < nj && jobs[j].old) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        }
    }
    free(jobs);
    closedir(d);
}

void baton__flight_job_name(const char *job, char *out, size_t n) {
    if (!job || !*job) job = "nojob";
    size_t i = 0;
    for (; job[i] && i + 1 < n; i++) {
        char ch = job[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.';
        out[i] = ok && !(i == 0 && ch == '.') ? ch : '_';
    }
    out[i] = '\0';
}

void baton__flight_start(baton_flight *f, const baton_coll_desc *d, uint64_t now_ns) {
    baton_flight_entry *e = &f->e[d->seq % BATON_FLIGHT_ENTRIES];
    e->desc = *d;
    e->algo = 0;
    e->state = BATON_FLIGHT_RUNNING;
    e->start_ns = now_ns;
    e->end_ns = 0;
    f->last_seq = d->seq;
}

void baton__flight_end(baton_flight *f, uint64_t seq, int algo, int failed, uint64_t now_ns) {
    baton_flight_entry *e = &f->e[seq % BATON_FLIGHT_ENTRIES];
    if (e->desc.seq != seq) return;
    e->algo = (uint8_t)algo;
    e->state = failed ? BATON_FLIGHT_FAILED : BATON_FLIGHT_DONE;
    e->end_ns = now_ns;
}

int baton__flight_dump(const baton_flight *f, int rank, int world, const char *job, const char *error, char *path,
                       size_t pathsz) {
    char dir[512];
    int rc = baton__flight_dir(dir, sizeof dir);
    if (rc < 0) return baton__fail_ctx(rc, "flight recorder: ");
    char jobname[80];
    baton__flight_job_name(job, jobname, sizeof jobname);
    snprintf(path, pathsz, "%s/baton-flight-%s-rank%d.json", dir, jobname, rank);
    cJSON *root = cJSON_CreateObject(), *entries = cJSON_CreateArray();
    if (!root || !entries) {
        cJSON_Delete(root);
        cJSON_Delete(entries);
        return baton__fail(BATON_ENOMEM, "flight recorder: out of memory");
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddNumberToObject(root, "rank", rank);
    cJSON_AddNumberToObject(root, "world", world);
    cJSON_AddStringToObject(root, "job", job ? job : "");
    cJSON_AddStringToObject(root, "host", host);
    cJSON_AddStringToObject(root, "error", error ? error : "");
    /* monotonic -> wall clock: the offset between the two clocks now */
    int64_t offset_us = (int64_t)wall_us() - (int64_t)(baton__now_ns() / 1000);
    uint64_t first = f->last_seq >= BATON_FLIGHT_ENTRIES ? f->last_seq - BATON_FLIGHT_ENTRIES + 1 : 1;
    for (uint64_t s = first; f->last_seq && s <= f->last_seq; s++) {
        const baton_flight_entry *e = &f->e[s % BATON_FLIGHT_ENTRIES];
        if (e->desc.seq != s) continue;
        cJSON *j = cJSON_CreateObject();
        if (!j) break;
        cJSON_AddNumberToObject(j, "seq", (double)s);
        cJSON_AddStringToObject(j, "coll", e->desc.kind < BATON_COLL_KINDS ? coll_names[e->desc.kind] : "?");
        cJSON_AddNumberToObject(j, "count", (double)e->desc.count);
        cJSON_AddStringToObject(j, "dtype", baton_dtype_name((baton_dtype)e->desc.dtype));
        cJSON_AddStringToObject(j, "op", baton_op_name((baton_op)e->desc.op));
        cJSON_AddNumberToObject(j, "root", e->desc.root);
        cJSON_AddStringToObject(j, "algo", baton_algo_name((baton_algo)e->algo));
        cJSON_AddStringToObject(j, "state", e->state < 3 ? state_names[e->state] : "?");
        cJSON_AddNumberToObject(j, "start_us", (double)((int64_t)(e->start_ns / 1000) + offset_us));
        cJSON_AddNumberToObject(j, "end_us", e->end_ns ? (double)((int64_t)(e->end_ns / 1000) + offset_us) : 0.0);
        cJSON_AddItemToArray(entries, j);
    }
    cJSON_AddItemToObject(root, "entries", entries);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return baton__fail(BATON_ENOMEM, "flight recorder: out of memory");
    /* 0600: a dump names hosts, pids' collectives and error text; created O_EXCL|O_NOFOLLOW, renamed in. */
    rc = baton__write_atomic(path, text, strlen(text), BATON_FILE_PRIVATE);
    free(text);
    if (rc < 0) return baton__fail_ctx(rc, "flight recorder (set BATON_FLIGHT_DIR to a directory of your own): ");
    prune_old_jobs(dir, jobname);
    return rc;
}
