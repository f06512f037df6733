/* flight.c: the flight recorder's ring and its JSON dump (see flight.h). */
#include "comm/flight.h"

#include <cjson/cJSON.h>
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

static const char *const coll_names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "barrier"};
static const char *const state_names[] = {"running", "done", "failed"};

static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
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
    /* BATON_FLIGHT_DIR, else baton's private per-user directory (0700; never a shared one such as /tmp). */
    char dir[512];
    const char *env = getenv("BATON_FLIGHT_DIR");
    int rc;
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else if ((rc = baton__private_dir(dir, sizeof dir)) < 0)
        return baton__fail_ctx(rc, "flight recorder: ");
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
        cJSON_AddStringToObject(j, "coll", e->desc.kind < 5 ? coll_names[e->desc.kind] : "?");
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
    return rc;
}
