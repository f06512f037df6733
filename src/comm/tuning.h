/* tuning.h: a calibration of this machine's all-reduces, made by `baton plan calibrate` and read by
 * `baton plan --calibrated FILE` and by the communicator's automatic choice (BATON_TUNING).
 *
 * It holds the measured points (median time of each transport x algorithm x ranks x size) and, fitted to
 * them, piecewise lines time = a + b x bytes per transport, algorithm and ranks: one line per size range,
 * a range growing as long as one line predicts every point in it within 2 % (a relative least-squares
 * fit), so latency-bound, cache-bound and bandwidth-bound sizes get their own lines. It also holds, per
 * transport, the alpha-beta link fitted to the ring points (comm/model.h), which scales a fit to a world
 * size that was not measured.
 *
 * More ranks than CPUs on one node (shm, tcp) share them: the link fit and the scaling to an unmeasured
 * world size multiply the model's time by max(1, K / cpus) (baton__tuning_cpu_share).
 *
 * File: JSON {"version":1, "about":"...", "cpus":C (optional), "links":[{"transport","lat_us","bw_gbs"}],
 *             "fits":[{"transport","algo","ranks","lo","hi","a_us","b_us_per_byte"}],
 *             "points":[{"transport","algo","ranks","bytes","us"}]}
 * written atomically, private (0600). */
#ifndef BATON_COMM_TUNING_H
#define BATON_COMM_TUNING_H

#include <stddef.h>

#include "baton/comm.h"
#include "comm/model.h"

enum { BATON_LINK_SHM = 0, BATON_LINK_TCP = 1, BATON_LINK_NET = 2, BATON_LINK_COUNT };
const char *baton__link_name(int link);             /* "shm", "tcp", "net" */
int baton__link_parse(const char *s, int *out);     /* 0 or -1 */

#define BATON_TUNING_MAX 4096   /* points, and fits, at most */
/* With BATON_TUNING_PROBE=F, --algo auto times the candidates predicted within F of the fastest on their first
 * calls (comm/autotune.c). The default (unset or `auto`): BATON_TUNING_PROBE_SHM2 on shared memory with 2 ranks,
 * off elsewhere (docs/plan.md: there the calibration's order of direct and ring from 32 MiB did not hold in
 * later jobs in 10 of 11 quiet runs; on tcp the model's order held, and timing there added wrong choices; with
 * 3 or more ranks a timed choice could change result bits from run to run). */
#define BATON_TUNING_PROBE_SHM2 0.25
/* BATON_TUNING_PROBE for a communicator of `ranks` ranks whose all-reduces run on `link` (BATON_LINK_*): *m =
 * the fraction (0: off); one line naming it on bad input. */
int baton__tuning_probe_margin(int link, int ranks, double *m);
/* BATON_TUNING_STATE: *on = BATON_TUNING_STATE_AUTO (unset, auto: the default, on for 2 ranks only), _ON (on, 1)
 * or _OFF (off, 0); one line naming it on bad input. */
enum { BATON_TUNING_STATE_OFF, BATON_TUNING_STATE_ON, BATON_TUNING_STATE_AUTO };
int baton__tuning_state_setting(int *on);

typedef struct {
    int link, ranks;
    baton_algo algo;
    double bytes, secs;
} baton_tuning_point;

typedef struct {
    int link, ranks;
    baton_algo algo;
    double lo, hi;          /* bytes: the measured range this line covers */
    double a_s, b_s;        /* time = a_s + b_s x bytes */
} baton_tuning_fit;

typedef struct baton_tuning_s {
    int npoints, nfits;
    baton_tuning_point *points;
    baton_tuning_fit *fits;
    int have_link[BATON_LINK_COUNT];
    baton_link_params link[BATON_LINK_COUNT];
    char about[256];        /* where and when it was measured (CPU, load) */
    int cpus;               /* CPUs the calibration ran on (0: unknown): K ranks on C < K of them each get
                             * C/K of a CPU, so one node's all-reduce takes K/C times the model's time */
} baton_tuning;

void baton__tuning_free(baton_tuning *t);
/* Appends a point (the caller adds medians). BATON_ENOMEM / BATON_ERANGE when full. */
int baton__tuning_add(baton_tuning *t, int link, baton_algo algo, int ranks, double bytes, double secs);
/* Replaces the fits and links by ones fitted to the points. */
int baton__tuning_fit(baton_tuning *t);
/* Predicted seconds of an all-reduce of `bytes` with `algo` over `ranks` ranks on `link`: from the fit of
 * that world size, else the nearest measured one scaled by the alpha-beta model. BATON_ENOTFOUND when the
 * calibration has nothing for that link and algorithm. */
int baton__tuning_predict(const baton_tuning *t, int link, baton_algo algo, int ranks, double bytes, double *secs);
/* max(1, ranks / cpus) on one node (shm, tcp) with a known CPU count, else 1. */
double baton__tuning_cpu_share(const baton_tuning *t, int link, int ranks);
/* The algorithm in `cands` (n of them) predicted fastest; BATON_ALGO_AUTO when none can be predicted. */
baton_algo baton__tuning_best(const baton_tuning *t, int link, const baton_algo *cands, int n, int ranks, double bytes);

/* JSON text (malloc'ed, NUL-terminated) and back. Parsing checks every field and refuses the whole file on
 * one bad value (BATON_EFORMAT, the detail naming it). */
char *baton__tuning_to_json(const baton_tuning *t);
int baton__tuning_parse(const char *text, size_t len, baton_tuning *t);
int baton__tuning_load(const char *path, baton_tuning *t);
int baton__tuning_save(const char *path, const baton_tuning *t);
/* The cached calibration: <baton__private_dir()>/tuning.json. */
int baton__tuning_default_path(char *out, size_t n);

#endif
