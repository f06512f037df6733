/* trace.c: a timeline of spans per thread, gathered to rank 0 and written in the Chrome trace event
 * format ({"traceEvents": [{"ph": "X", ...}]}), which Perfetto and chrome://tracing load.
 *
 * Each track (main loop, comm thread) has its own preallocated array and a single writer, so recording
 * is a bounds check and four stores. At the end every rank's spans travel to rank 0 as i64 records
 * {t0, t1, event, arg, track} through one allgather of the counts and one of the (padded) records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/ddp.h"
#include "util/files.h"
#include "util/util.h"

enum { NTRACKS = 2, REC = 5 };   /* i64 fields per gathered span */

typedef struct {
    uint64_t t0, t1;   /* ns, baton__now_ns clock */
    int32_t ev, arg;
} span;

struct baton_trace {
    size_t cap;                 /* spans per track */
    span *s[NTRACKS];
    size_t n[NTRACKS];          /* recorded (<= cap) */
    uint64_t dropped[NTRACKS];  /* beyond cap */
};

static const char *const names[BATON_EV_COUNT] = {"step", "data", "forward", "backward", "allreduce",
                                                  "wait", "optimizer", "eval", "broadcast", "convert",
                                                  "barrier", "allgather"};

const char *baton_event_name(baton_event ev) {
    return (unsigned)ev < BATON_EV_COUNT ? names[ev] : "?";
}

baton_trace *baton_trace_new(size_t max_events) {
    if (max_events == 0 || max_events > ((size_t)1 << 26)) return NULL;
    baton_trace *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cap = max_events;
    for (int k = 0; k < NTRACKS; k++)
        if (!(t->s[k] = malloc(max_events * sizeof(span)))) {
            baton_trace_free(t);
            return NULL;
        }
    return t;
}

void baton_trace_free(baton_trace *t) {
    if (!t) return;
    for (int k = 0; k < NTRACKS; k++) free(t->s[k]);
    free(t);
}

void baton_trace_span(baton_trace *t, int track, baton_event ev, int arg, uint64_t t0_ns, uint64_t t1_ns) {
    if (!t || track < 0 || track >= NTRACKS) return;
    if (t->n[track] == t->cap) {
        t->dropped[track]++;
        return;
    }
    span *s = &t->s[track][t->n[track]++];
    s->t0 = t0_ns;
    s->t1 = t1_ns;
    s->ev = (int32_t)ev;
    s->arg = arg;
}

static int write_json(const char *path, const int64_t *recs, const int64_t *counts, int world, size_t stride) {
    /* Built in memory, then written as one file under a temporary name and renamed in (util/files.h): a
     * symlink planted at the name in a shared directory is replaced, never written through. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return baton__fail(BATON_ENOMEM, "trace: out of memory for %s", path);
    int64_t origin = INT64_MAX;
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < counts[r]; i++) {
            const int64_t *x = recs + (size_t)r * stride * REC + (size_t)i * REC;
            if (x[0] < origin) origin = x[0];
        }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    int first = 1;
    for (int r = 0; r < world; r++) {
        fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n",
                first ? "" : ",", r, r);
        first = 0;
        fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"main\"}},\n", r);
        fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"comm\"}}", r);
        for (int64_t i = 0; i < counts[r]; i++) {
            const int64_t *x = recs + (size_t)r * stride * REC + (size_t)i * REC;
            baton_event ev = (baton_event)x[2];
            double ts = (double)(x[0] - origin) * 1e-3, dur = (double)(x[1] - x[0]) * 1e-3;
            if (ev == BATON_EV_ALLREDUCE || ev == BATON_EV_CONVERT)
                fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"%s %lld\",\"pid\":%d,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,"
                           "\"args\":{\"bucket\":%lld}}",
                        baton_event_name(ev), (long long)x[3], r, (long long)x[4], ts, dur, (long long)x[3]);
            else
                fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f}",
                        baton_event_name(ev), r, (long long)x[4], ts, dur);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        free(text);
        return baton__fail(BATON_ENOMEM, "trace: out of memory for %s", path);
    }
    int rc = baton__write_atomic(path, text, len, 0);
    free(text);
    if (rc < 0) return baton__fail_ctx(rc, "trace: ");
    return BATON_OK;
}

int baton_trace_write(baton_trace *t, baton_comm *comm, const char *path) {
    int world = comm ? baton_comm_size(comm) : 1, rank = comm ? baton_comm_rank(comm) : 0;
    int64_t mine = (int64_t)(t->n[0] + t->n[1]), maxn = mine;
    int rc;
    if (world > 1 && (rc = baton_allreduce(comm, &mine, &maxn, 1, BATON_I64, BATON_MAX)) < 0) return rc;
    size_t stride = maxn > 0 ? (size_t)maxn : 1;
    int64_t *local = calloc(stride * REC, sizeof(int64_t));
    int64_t *all = calloc(stride * REC * (size_t)world, sizeof(int64_t));
    int64_t *counts = calloc((size_t)world, sizeof(int64_t));
    /* agree that every rank has its buffers before the gathers, so that none waits for a rank that left */
    int32_t ok = local && all && counts, all_ok = ok;
    if (world > 1 && (rc = baton_allreduce(comm, &ok, &all_ok, 1, BATON_I32, BATON_MIN)) < 0) goto out;
    if (!all_ok) {
        rc = baton__fail(BATON_ENOMEM, "trace: out of memory for %lld spans x %d ranks (on this or another rank)",
                         (long long)maxn, world);
        goto out;
    }
    size_t j = 0;
    for (int k = 0; k < NTRACKS; k++)
        for (size_t i = 0; i < t->n[k]; i++, j++) {
            int64_t *x = local + j * REC;
            x[0] = (int64_t)t->s[k][i].t0;
            x[1] = (int64_t)t->s[k][i].t1;
            x[2] = t->s[k][i].ev;
            x[3] = t->s[k][i].arg;
            x[4] = k;
        }
    if (world > 1) {
        if ((rc = baton_allgather(comm, &mine, counts, 1, BATON_I64)) < 0) goto out;
        if ((rc = baton_allgather(comm, local, all, stride * REC, BATON_I64)) < 0) goto out;
    } else {
        counts[0] = mine;
        memcpy(all, local, stride * REC * sizeof(int64_t));
    }
    if (t->dropped[0] + t->dropped[1])
        BATON_WARN("trace: %llu spans beyond the %zu-span buffer were dropped",
                   (unsigned long long)(t->dropped[0] + t->dropped[1]), t->cap);
    rc = rank == 0 ? write_json(path, all, counts, world, stride) : BATON_OK;
out:
    free(local);
    free(all);
    free(counts);
    return rc;
}
