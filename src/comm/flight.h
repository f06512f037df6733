/* flight.h: the flight recorder. Each communicator keeps its last 256 collectives (descriptor, algorithm,
 * state, start and end times) in a ring, for the price of a few stores per collective. When a collective
 * fails or times out the ring is written out as JSON, one file per rank, and `baton doctor FILES...` reads
 * every rank's file and says which rank lagged and at which collective the ranks diverged.
 *
 * File: $BATON_FLIGHT_DIR/baton-flight-<job>-rank<R>.json, by default in baton's private per-user directory
 * ($XDG_RUNTIME_DIR/baton or ${TMPDIR:-/tmp}/baton-<uid>, 0700; util/files.h), mode 0600.
 *   {"version":1, "rank":R, "world":W, "job":"...", "host":"...", "error":"...",
 *    "entries":[{"seq":17, "coll":"allreduce", "count":1024, "dtype":"f32", "op":"sum", "root":0,
 *                "algo":"direct", "state":"done|running|failed", "start_us":..., "end_us":...}, ...]}
 * Times are CLOCK_REALTIME microseconds, comparable across ranks of one machine (and across machines as
 * far as their clocks agree). */
#ifndef BATON_FLIGHT_H
#define BATON_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "comm/desc.h"

enum {
    BATON_FLIGHT_ENTRIES = 256,
    BATON_FLIGHT_KEEP_JOBS = 8,      /* a dump directory keeps the dumps of the newest 8 jobs only */
    BATON_FLIGHT_MAX_WORLD = 1 << 20 /* the largest world size a reader believes */
};

typedef enum { BATON_FLIGHT_RUNNING = 0, BATON_FLIGHT_DONE = 1, BATON_FLIGHT_FAILED = 2 } baton_flight_state;

typedef struct {
    baton_coll_desc desc;
    uint8_t algo;        /* baton_algo that ran */
    uint8_t state;       /* baton_flight_state */
    uint64_t start_ns;   /* CLOCK_MONOTONIC (turned into wall-clock time when written out) */
    uint64_t end_ns;     /* 0 while running */
} baton_flight_entry;

typedef struct {
    baton_flight_entry e[BATON_FLIGHT_ENTRIES];  /* entry for seq s at s % ENTRIES */
    uint64_t last_seq;                           /* newest seq recorded (0: none) */
} baton_flight;

/* now_ns: CLOCK_MONOTONIC, as read by the caller (one clock reading per collective is enough). */
void baton__flight_start(baton_flight *f, const baton_coll_desc *d, uint64_t now_ns);
void baton__flight_end(baton_flight *f, uint64_t seq, int algo, int failed, uint64_t now_ns);
/* The dump directory: $BATON_FLIGHT_DIR, else baton's private per-user directory (util/files.h). */
int baton__flight_dir(char *out, size_t n);
/* The job id as it appears in dump names: [A-Za-z0-9.-] kept, anything else (a '/', say) becomes '_'. */
void baton__flight_job_name(const char *job, char *out, size_t n);
/* Writes the JSON file; *path receives its name. Returns BATON_OK or a failure (detail set). Then removes
 * the dumps of all but the newest BATON_FLIGHT_KEEP_JOBS jobs from the directory (its own job included). */
int baton__flight_dump(const baton_flight *f, int rank, int world, const char *job, const char *error, char *path,
                       size_t pathsz);

#endif
