/* plan_calib.c: `baton plan calibrate` measures this machine's all-reduces and `baton plan allreduce
 * --calibrated FILE` predicts `baton bench` from the result (comm/tuning.h).
 *
 * Calibration launches `baton run -n K -- baton bench allreduce --csv --algo A,B,C --rounds 1 --sweeps S
 * --transport T -f 2 -w 2 -n 5 --min-time 0.02` (the settings bench/plan_floors.sh measures with): every
 * algorithm the transport can run, each size run by each algorithm in turn, and each (algorithm, size) keeps
 * the median of its runs. On one node every shape (transport x world size) is measured in passes over the
 * shapes, so that a shape's jobs spread over the calibration's minutes (cal_group): a shape with no more ranks
 * than CPUs runs one job of S sweeps of every size per pass, R passes, each point the median over its jobs;
 * one with more ranks than CPUs runs its sizes up to 16 MiB in S passes of one-sweep jobs and its big sizes in
 * one job of S sweeps. net: one job of S sweeps.
 * S is --rounds R rounded to whole Williams designs of the shape's algorithms (baton__whole_designs). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plan.h"
#include "util/util.h"

/* The bench settings of every measurement (bench/plan_floors.sh measures with the same ones). Above
 * CAL_SPLIT bytes one iteration fills --min-time many times over: one warm-up and one timed iteration per
 * round, the median of the rounds (-w 2 -n 5 would make the calibration minutes longer). The warm-up
 * (none until 2026-11-26) makes each algorithm's timed iteration start from its own state, not from what
 * the algorithm before it in the round left behind. */
#define CAL_WARMUP "2"
#define CAL_ITERS "5"
#define CAL_MIN_TIME "0.02"
#define CAL_SPLIT_DEFAULT (16.0 * 1024 * 1024)
/* BATON_TEST_CAL_SPLIT=BYTES (tests only): where the big sizes start, halved, so a test can reach them in seconds */
static double cal_split(void) {
    double v;
    baton__env_double("BATON_TEST_CAL_SPLIT", CAL_SPLIT_DEFAULT, 4, 1e15, &v);   /* unset or out of range: the default */
    return v;
}
#define CAL_SPLIT (cal_split())
#define CAL_BIG_WARMUP "1"
#define CAL_BIG_ITERS "1"
#define CAL_ROWS 256

/* The algorithms each link can run: one node (shm, tcp) or several (net). */
static int link_algos(int link, baton_algo *out) {
    if (link == BATON_LINK_NET) {
        out[0] = BATON_ALGO_HIER, out[1] = BATON_ALGO_RING, out[2] = BATON_ALGO_RD;
        return 3;
    }
    if (link == BATON_LINK_SHM) {
        out[0] = BATON_ALGO_DIRECT, out[1] = BATON_ALGO_RING, out[2] = BATON_ALGO_RD;
        return 3;
    }
    out[0] = BATON_ALGO_RING, out[1] = BATON_ALGO_RD;
    return 2;
}

/* ---- --calibrated FILE: predictions for baton bench -------------------------------------------------- */

int plan_cmd_calibrated(const char *sub, const char *file, const char *link_s, int ranks, double bytes, int json,
                        const char *plot) {
    int link;
    if (baton__link_parse(link_s, &link) < 0) return plan_error(sub, "bad value '%s' for --link: expected shm, tcp or net", link_s), 2;
    baton_tuning t;
    if (baton__tuning_load(file, &t) < 0) return plan_error(sub, "--calibrated: %s", baton_last_error()), 2;
    baton_algo cands[4];
    int nc = link_algos(link, cands);
    double pred[4];
    int have[4], any = 0;
    for (int i = 0; i < nc; i++) {
        have[i] = baton__tuning_predict(&t, link, cands[i], ranks, bytes, &pred[i]) == BATON_OK;
        any |= have[i];
    }
    if (!any) {
        baton__tuning_free(&t);
        return plan_error(sub, "--calibrated %s has no measurements on %s (calibrate with --transports %s)", file, link_s, link_s), 2;
    }
    baton_algo best = baton__tuning_best(&t, link, cands, nc, ranks, bytes);
    /* the others --algo auto confirms online: predicted within BATON_TUNING_PROBE of the fastest (by default on
     * shared memory with 2 ranks only) */
    double margin;
    if (baton__tuning_probe_margin(link, ranks, &margin) < 0) {
        baton__tuning_free(&t);
        return plan_error(sub, "%s", baton_last_error()), 2;
    }
    double best_s = 0;
    int close[4] = {0}, nclose = 0;
    for (int i = 0; i < nc; i++)
        if (have[i] && cands[i] == best) best_s = pred[i];
    for (int i = 0; i < nc; i++)
        if (margin > 0 && have[i] && cands[i] != best && pred[i] <= (1 + margin) * best_s) close[i] = 1, nclose++;
    char b1[32], b2[32];
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "allreduce");
        cJSON_AddStringToObject(j, "calibrated", file);
        cJSON_AddStringToObject(j, "transport", link_s);
        cJSON_AddNumberToObject(j, "ranks", ranks);
        cJSON_AddNumberToObject(j, "bytes", bytes);
        cJSON *arr = cJSON_AddArrayToObject(j, "algos");
        for (int i = 0; i < nc; i++) {
            if (!have[i]) continue;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "algo", baton_algo_name(cands[i]));
            cJSON_AddNumberToObject(e, "predicted_us", pred[i] * 1e6);
            for (int p = 0; p < t.npoints; p++)
                if (t.points[p].link == link && t.points[p].algo == cands[i] && t.points[p].ranks == ranks && t.points[p].bytes == bytes)
                    cJSON_AddNumberToObject(e, "measured_us", t.points[p].secs * 1e6);
            cJSON_AddItemToArray(arr, e);
        }
        cJSON_AddStringToObject(j, "auto", baton_algo_name(best));
        cJSON *conf = cJSON_AddArrayToObject(j, "auto_times_online");
        for (int i = 0; nclose && i < nc; i++)
            if (close[i] || cands[i] == best) cJSON_AddItemToArray(conf, cJSON_CreateString(baton_algo_name(cands[i])));
        plan_print_json(j);
    } else {
        printf("baton bench allreduce of %s over %d ranks on %s, predicted from %s\n", plan_bytes(bytes, b1, sizeof b1), ranks, link_s, file);
        if (t.about[0]) printf("(calibrated: %s)\n", t.about);
        if (t.have_link[link])
            printf("fitted %s link: %.2f us latency, %.3f GB/s\n", link_s, t.link[link].lat_s * 1e6, t.link[link].bw_Bps / 1e9);
        printf("\n%-8s %14s %14s\n", "algo", "predicted", "measured");
        for (int i = 0; i < nc; i++) {
            if (!have[i]) continue;
            char meas[32] = "-";
            for (int p = 0; p < t.npoints; p++)
                if (t.points[p].link == link && t.points[p].algo == cands[i] && t.points[p].ranks == ranks && t.points[p].bytes == bytes)
                    plan_secs(t.points[p].secs, meas, sizeof meas);
            printf("%-8s %14s %14s%s\n", baton_algo_name(cands[i]), plan_secs(pred[i], b2, sizeof b2), meas,
                   cands[i] == best ? (nclose ? "   <- the model's choice" : "   <- --algo auto takes this")
                   : close[i]       ? "   <- within BATON_TUNING_PROBE" : "");
        }
        if (nclose)
            printf("Within %g %% of the model's choice (BATON_TUNING_PROBE=%g): --algo auto times them on the size's first calls "
                   "and every rank takes the faster (docs/plan.md).\n", 100 * margin, margin);
    }
    int rc = 0;
    if (plot) {
        /* time against size: each algorithm's fitted curve and its measured points for this world size */
        static double xs[4][64], ys[4][64], mx[4][64], my[4][64];
        plot_panel p = {.title = "all-reduce time against size (calibrated)", .xlabel = "bytes", .ylabel = "seconds", .log_x = 1, .log_y = 1};
        static char labels[8][48];
        for (int i = 0; i < nc; i++) {
            if (!have[i]) continue;
            int n = 0, m = 0;
            for (double b = 4; b <= 1.1e9 && n < 64; b *= 2, n++) {
                xs[i][n] = b;
                baton__tuning_predict(&t, link, cands[i], ranks, b, &ys[i][n]);
            }
            for (int q = 0; q < t.npoints && m < 64; q++)
                if (t.points[q].link == link && t.points[q].algo == cands[i] && t.points[q].ranks == ranks)
                    mx[i][m] = t.points[q].bytes, my[i][m] = t.points[q].secs, m++;
            snprintf(labels[2 * i], 48, "%s fit", baton_algo_name(cands[i]));
            snprintf(labels[2 * i + 1], 48, "%s measured", baton_algo_name(cands[i]));
            p.s[p.nseries++] = (plot_series){labels[2 * i], n, xs[i], ys[i], 0};
            p.s[p.nseries++] = (plot_series){labels[2 * i + 1], m, mx[i], my[i], 1};
        }
        if (plan_plot_svg(sub, plot, &p, 1) < 0) rc = 1;
    }
    baton__tuning_free(&t);
    return rc;
}

/* ---- calibrate ------------------------------------------------------------------------------------- */

/* Runs one bench of every algorithm in algos (n of them), interleaved, the size range swept `rounds` times
 * (--sweeps: a burst of load lands on one sweep of a few sizes, not on every round of one size), and
 * appends its rows: bytes, median seconds and the index of the algorithm in algos. Returns the number of
 * rows or -1. shm and tcp run under `baton run -n K`; net runs `sh -c "NET_LAUNCH 'baton' bench ..."`,
 * NET_LAUNCH starting the ranks on every node of the cluster (e.g. tests/cluster/netns.sh launch NAME -n 2 --). */
static int run_bench(const char *self, int ranks, int link, const baton_algo *algos, int nalgos, int rounds, int big,
                     double max_bytes, double timeout_s, const char *net_launch, double *xs, double *ts, int *as, int cap) {
    char n_s[16], b_s[32], e_s[32], r_s[16], list[64] = "", cmdline[4096];
    const char *w = big ? CAL_BIG_WARMUP : CAL_WARMUP, *it = big ? CAL_BIG_ITERS : CAL_ITERS;
    snprintf(n_s, sizeof n_s, "%d", ranks);
    snprintf(b_s, sizeof b_s, "%.0f", big ? CAL_SPLIT * 2 : 4);
    snprintf(e_s, sizeof e_s, "%.0f", big ? max_bytes : fmin(max_bytes, CAL_SPLIT));
    snprintf(r_s, sizeof r_s, "%d", rounds);
    for (int i = 0; i < nalgos; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", baton_algo_name(algos[i]));
    const char *local[] = {self, "run", "-n", n_s, "--", self, "bench", "allreduce", "--csv", "-b", b_s, "-e", e_s, "-f", "2",
                           "--algo", list, "--rounds", "1", "--sweeps", r_s, "--transport", baton__link_name(link), "-w", w,
                           "-n", it, "--min-time", CAL_MIN_TIME, NULL};
    snprintf(cmdline, sizeof cmdline,
             "%s '%s' bench allreduce --csv -b %s -e %s -f 2 --algo %s --rounds 1 --sweeps %s -w %s -n %s --min-time " CAL_MIN_TIME,
             net_launch ? net_launch : "", self, b_s, e_s, list, r_s, w, it);
    const char *shell[] = {"/bin/sh", "-c", cmdline, NULL};
    const char *const *argv = link == BATON_LINK_NET ? shell : local;
    int fd[2];
    if (pipe(fd) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd[1], 1);
        close(fd[0]), close(fd[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    if (!f) {
        close(fd[0]);
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    /* a watchdog: the whole group is killed if the bench outlives timeout_s */
    pid_t dog = fork();
    if (dog == 0) {
        baton__sleep_ns((uint64_t)(timeout_s * 1e9));
        kill(-pid, SIGKILL);
        _exit(0);
    }
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        /* size,count,type,op,algo,time_us,algbw,busbw,wrong[,asked] */
        const char *field[10];
        int nfield = 0;
        if (!strncmp(line, "size", 4) || line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        field[nfield++] = line;
        for (char *p = line; *p && nfield < 10; p++)
            if (*p == ',') *p = 0, field[nfield++] = p + 1;
        if (nfield < 6) continue;
        char *end;
        double bytes = strtod(field[0], &end), us = strtod(field[5], NULL);
        if (end == field[0]) continue;
        int ai = 0;
        if (nalgos > 1) {
            baton_algo asked;
            if (nfield < 10 || baton_algo_parse(field[9], &asked) < 0) continue;
            for (ai = 0; ai < nalgos && algos[ai] != asked; ai++) {}
            if (ai == nalgos) continue;
        }
        if (n < cap && bytes > 0 && us > 0) xs[n] = bytes, ts[n] = us * 1e-6, as[n] = ai, n++;
    }
    fclose(f);
    int st;
    waitpid(pid, &st, 0);
    if (dog > 0) {
        kill(dog, SIGKILL);
        waitpid(dog, NULL, 0);
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? n : -1;
}

/* Shapes with more ranks than CPUs on one node (4 on 2 here): the sizes up to CAL_SPLIT in R passes over those
 * shapes, each pass one job of one sweep per shape, the shapes in turn, each point the median over the passes.
 * What varies for those shapes is the job more than the sweep: which ranks share a CPU is settled when the job
 * starts (tcp, 4 ranks, 1 MiB: rd 1.10 ms in one calibration, 1.91 ms in the check minutes later), and in passes
 * a shape's jobs spread over the calibration instead of sharing one minute of the machine (in the quiet runs
 * the calibration and the check differed by a factor common to all the shapes of a few minutes:
 * docs/measurements/plan-history.md, "Why the calibration came out faster than the check").
 * The other shapes (2 ranks on 2 CPUs) stay one job of R sweeps: a job of one sweep times every size before
 * any bigger one has run in it, and on tcp that history moves a size by up to 2.3x (ring at 1 MiB after rd at
 * 1 MiB: 541-556 us, with ring first: 223-253 us; rd at 128 KiB: 47 us in the one-sweep jobs of the 15:32
 * calibration, 77 us in one job of 3 sweeps, 118 us in the auto check, where auto then took rd and ring was
 * 1.87x faster). Nor the big sizes (from 2 x CAL_SPLIT), one job of R sweeps per shape: in jobs of one warm-up
 * and one iteration tcp's ring took 85.7 ms at 32 MiB on 2 ranks, 4.5x its check's 19.1 ms, and auto took rd
 * from 32 MiB up where ring was 1.17-1.40x faster. */
/* Shapes with no more ranks than CPUs (2 on 2 here), since 2026-11-27: every size, the big ones too, in R jobs of
 * S sweeps (R = --rounds, S its whole designs), one job per pass, each point the median over the jobs (of each
 * job's median over its sweeps). Until then one job of S sweeps decided every point of such a shape, and on this
 * VM a job can draw a mode that lasts for the job: shm direct on 2 ranks at 32 MiB took 3673, 3891, 6439 and 5383
 * us in four jobs back to back while ring stayed at 4486-4815 us, and the 2026-11-27 00:49 calibration's one job
 * caught the fast mode, so auto took direct from 32 MiB where ring was 1.12-1.20x faster in the check's jobs; its
 * tcp 2-rank job ran 1.4-1.8x faster than every check of that slot at every size from 8 B to 16 MiB
 * (docs/measurements/plan-history.md, "Per-job modes"). A job of S sweeps, not of one: a one-sweep job times
 * each size before any
 * bigger one ran in it (above). */
typedef struct {
    int link, ranks, nalgos;
    int passes;    /* 1: more ranks than CPUs, sizes up to CAL_SPLIT in passes of one-sweep jobs (big sizes one job);
                    * 2: no more ranks than CPUs, every size in jobs of `sweeps` sweeps, one per pass; 0: one job */
    int jobs;      /* passes it takes part in: `sweeps` (1) or --rounds (2) */
    int sweeps;    /* sweeps of its jobs, or its passes (1): --rounds in whole designs of its algorithms */
    baton_algo algos[4];
    double *x, *t; /* the rows of every pass: bytes, seconds and the index in algos */
    int *a, n, cap;
} cal_group;

/* One job of one sweep of g's sizes up to CAL_SPLIT, the algorithms in the order of round j of the bench's
 * Williams design (baton__round_order): a job of one sweep runs every size in its list's order, so with one
 * list for every job the first algorithm would run first and the second right after it at every size of
 * every job, while the check's jobs of several sweeps rotate. Appends the rows to g with their index in
 * g->algos. */
static int run_pass_job(const char *self, cal_group *g, int j, int jobs, double max_bytes, double timeout_s, uint64_t t0) {
    baton_algo order[4];
    char list[64] = "";
    for (int k = 0; k < g->nalgos; k++) {
        order[k] = g->algos[baton__round_order(g->nalgos, j, k)];
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "," : "", baton_algo_name(order[k]));
    }
    fprintf(stderr, "baton plan calibrate: pass %d of %d, %s, %d ranks: --algo %s (%.0f s so far)\n", j + 1, jobs,
            baton__link_name(g->link), g->ranks, list, (double)(baton__now_ns() - t0) / 1e9);
    int m = run_bench(self, g->ranks, g->link, order, g->nalgos, 1, 0, max_bytes, timeout_s, NULL, g->x + g->n, g->t + g->n,
                      g->a + g->n, g->cap - g->n);
    if (m < 0) return -1;
    for (int q = g->n; q < g->n + m; q++) { /* the row's index in order, back to its index in algos */
        int a = 0;
        while (a < g->nalgos && g->algos[a] != order[g->a[q]]) a++;
        g->a[q] = a;
    }
    g->n += m;
    return m;
}

/* One point per (algorithm, size) of the rows x, t, a (n of them): the median of that pair's rows, in the
 * order of their first row. Returns the number of points written to xs, ts, as (at most cap). */
static int median_rows(const double *x, const double *t, const int *a, int n, double *xs, double *ts, int *as, int cap) {
    int np = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int q = 0; q < np && !seen; q++) seen = xs[q] == x[i] && as[q] == a[i];
        if (seen || np >= cap) continue;
        double v[64];
        int nv = 0;
        for (int q = i; q < n && nv < 64; q++)
            if (x[q] == x[i] && a[q] == a[i]) v[nv++] = t[q];
        xs[np] = x[i], as[np] = a[i], ts[np] = baton__median(v, (size_t)nv), np++;
    }
    return np;
}

static void describe_machine(char *out, size_t n, double load0) {
    char cpu[128] = "unknown CPU", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    double load1 = 0;
    f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &load1) != 1) load1 = 0;
    if (f) fclose(f);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    snprintf(out, n, "%s, %ld CPUs, load average %.1f -> %.1f, %s", cpu, sysconf(_SC_NPROCESSORS_ONLN), load0, load1, when);
}

/* --refit: the points of FILE fitted again with this version's fitting, written to OUT. */
static int refit_file(const char *sub, const char *file, const char *out) {
    baton_tuning t;
    if (baton__tuning_load(file, &t) < 0) return plan_error(sub, "--refit: %s", baton_last_error()), 2;
    int rc = baton__tuning_fit(&t) < 0 || baton__tuning_save(out, &t) < 0;
    if (rc) plan_error(sub, "--refit: %s", baton_last_error());
    else printf("Refitted %d points of %s into %d lines, written to %s\n", t.npoints, file, t.nfits, out);
    baton__tuning_free(&t);
    return rc;
}

#define CAL_MAX_GROUPS 64
#define CAL_ROUNDS 16

int plan_cmd_calibrate(int argc, char **argv) {
    const char *sub = "calibrate";
    plan_list ranks = {2, {2, 4}};
    const char *transports = "shm,tcp", *out = NULL, *net_launch = NULL;
    int net_ranks = 0;
    double max_bytes = 16 << 20, timeout = 300;
    int rounds = 3, json = 0;
    const char *refit = NULL;
    plan_flag flags[] = {
        {"--ranks", 'k', 2, 64, &ranks, "world sizes to measure (default 2,4)"},
        {"--transports", 's', 0, 0, &transports, "links to measure: shm, tcp, net (default shm,tcp)"},
        {"--net-launch", 's', 0, 0, &net_launch, "net: command prefix that starts the ranks on every node, e.g. "
                                                   "'sh tests/cluster/netns.sh launch NAME -n 2 --'"},
        {"--net-ranks", 'i', 2, 1 << 20, &net_ranks, "net: the world size --net-launch starts"},
        {"--max-bytes", 'd', 4, 1 << 30, &max_bytes, "largest all-reduce measured, bytes (default 16777216; from 32 MiB, "
                                                       "one warm-up and one timed iteration per round)"},
        {"--rounds", 'i', 1, CAL_ROUNDS, &rounds, "sweeps of every algorithm, interleaved, in each bench, rounded to the nearest whole Williams "
                                                  "design of the link's algorithms (2 rounds for ring,rd, 6 for three; a tie rounds up), so each "
                                                  "runs first and after every other equally often; each size keeps its median (default 3: "
                                                  "4 on tcp, 6 on shm); every shape on one node is measured in passes over the shapes: no more ranks than "
                                                  "CPUs, R jobs of those sweeps, each point the median over the jobs; more ranks than CPUs, that "
                                                  "many passes of one-sweep jobs up to 16 MiB"},
        {"--timeout", 'd', 1, 86400, &timeout, "seconds one bench may take before it is killed (default 300)"},
        {"--out", 's', 0, 0, &out, "FILE to write (default: the cached calibration in baton's private directory)"},
        {"--json", 'f', 0, 0, &json, "machine-readable summary"},
        {"--refit", 's', 0, 0, &refit, "FILE: fit an existing calibration's measured points again (no measuring) "
                                       "and write it to --out (default: FILE itself)"},
    };
    int nf = (int)(sizeof flags / sizeof flags[0]), seen[16];
    int rc = plan_parse(sub, argc, argv, flags, nf, seen);
    if (rc) return rc > 0 ? 0 : 2;
    if (refit) return refit_file(sub, refit, out ? out : refit);
    int links[BATON_LINK_COUNT], nl = 0;
    char tbuf[64];
    if (strlen(transports) >= sizeof tbuf) return plan_error(sub, "bad value '%s' for --transports: expected a list of shm, tcp, net", transports), 2;
    strcpy(tbuf, transports);
    char *save = NULL;
    for (char *tok = strtok_r(tbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int l;
        int dup = 0;
        if (baton__link_parse(tok, &l) == 0)
            for (int i = 0; i < nl; i++) dup |= links[i] == l;
        if (baton__link_parse(tok, &l) < 0 || dup)
            return plan_error(sub, "bad value '%s' for --transports: expected a list of shm, tcp, net, each once", transports), 2;
        if (l == BATON_LINK_NET && (!net_launch || !net_ranks))
            return plan_error(sub, "--transports net needs --net-launch 'CMD' and --net-ranks K (see docs/plan.md)"), 2;
        links[nl++] = l;
    }
    if ((net_launch || net_ranks) && !strstr(transports, "net"))
        return plan_error(sub, "--net-launch and --net-ranks go with --transports net"), 2;
    char path[600];
    if (out)
        snprintf(path, sizeof path, "%s", out);
    else if (baton__tuning_default_path(path, sizeof path) < 0)
        return plan_error(sub, "no cached calibration path: %s (give --out FILE)", baton_last_error()), 2;
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return plan_error(sub, "cannot find the baton executable (/proc/self/exe): %s", strerror(errno)), 1;
    self[sl] = 0;
    if (net_launch && strchr(self, '\''))
        return plan_error(sub, "--transports net: the baton path '%s' contains a quote; run it from another path", self), 2;

    /* every link and world size on one node in passes over the shapes (cal_group above): no more ranks than CPUs,
     * --rounds jobs of every size; more, the sizes up to CAL_SPLIT in one-sweep jobs, then the big sizes in one job
     * per shape; net in one job */
    cal_group groups[CAL_MAX_GROUPS];
    int ngroup = 0;
    for (int l = 0; l < nl; l++)
        for (int r = 0; r < (links[l] == BATON_LINK_NET ? 1 : ranks.n) && ngroup < CAL_MAX_GROUPS; r++) {
            cal_group *g = &groups[ngroup++];
            memset(g, 0, sizeof *g);
            g->link = links[l];
            g->ranks = links[l] == BATON_LINK_NET ? net_ranks : (int)ranks.v[r];
            g->nalgos = link_algos(links[l], g->algos);
            /* whole designs, as bench/plan_floors.sh's check runs: 3 sweeps of ring,rd put ring first twice, and the
             * check (6 sweeps) saw another history than its calibration (docs/measurements/plan-history.md,
             * "The calibration in whole designs; shm 2 ranks at the top sizes") */
            g->sweeps = (int)baton__whole_designs(g->nalgos, rounds);
        }
    double load0 = 0;
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf && fscanf(lf, "%lf", &load0) != 1) load0 = 0;
    if (lf) fclose(lf);
    uint64_t t0 = baton__now_ns();
    baton_tuning t = {0};
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), fail = 0, npass = 0, maxpass = 0, minpass = 1 << 30;
    for (int gi = 0; gi < ngroup && !fail; gi++) {
        cal_group *g = &groups[gi];
        g->passes = g->link == BATON_LINK_NET || rounds < 2 ? 0 : g->ranks > cpus ? 1 : 2;
        if (!g->passes) continue;
        g->jobs = g->passes == 1 ? g->sweeps : rounds;
        if (g->passes == 1) {
            npass++;
            maxpass = g->sweeps > maxpass ? g->sweeps : maxpass;
            minpass = g->sweeps < minpass ? g->sweeps : minpass;
        }
        g->cap = CAL_ROWS * g->jobs;
        g->x = malloc((size_t)g->cap * sizeof *g->x), g->t = malloc((size_t)g->cap * sizeof *g->t);
        g->a = malloc((size_t)g->cap * sizeof *g->a);
        if (!g->x || !g->t || !g->a) fail = 1, plan_error(sub, "out of memory");
    }
    if (npass && !fail)
        fprintf(stderr, "baton plan calibrate: more ranks than CPUs: sizes up to %.0f bytes in %s%d passes over those shapes, "
                "one job of one sweep per shape and pass\n", fmin(max_bytes, CAL_SPLIT), minpass < maxpass ? "up to " : "", maxpass);
    int alljobs = 0;
    for (int gi = 0; gi < ngroup; gi++) alljobs = groups[gi].passes && groups[gi].jobs > alljobs ? groups[gi].jobs : alljobs;
    for (int j = 0; j < alljobs && !fail; j++)
        for (int gi = 0; gi < ngroup && !fail; gi++) {
            cal_group *g = &groups[gi];
            if (!g->passes || j >= g->jobs) continue;
            int m = 0;
            if (g->passes == 1) {
                m = run_pass_job(self, g, j, g->sweeps, max_bytes, timeout, t0);
            } else {
                fprintf(stderr, "baton plan calibrate: pass %d of %d, %s, %d ranks: one job of %d sweeps (%.0f s so far)\n", j + 1, g->jobs,
                        baton__link_name(g->link), g->ranks, g->sweeps, (double)(baton__now_ns() - t0) / 1e9);
                for (int big = 0; big < 2 && m >= 0; big++) {
                    if (big && max_bytes < 2 * CAL_SPLIT) break;
                    if (big)
                        fprintf(stderr, "baton plan calibrate: pass %d of %d, %s, %d ranks, sizes from %.0f bytes: one job of %d sweeps (%.0f s so far)\n",
                                j + 1, g->jobs, baton__link_name(g->link), g->ranks, 2 * CAL_SPLIT, g->sweeps,
                                (double)(baton__now_ns() - t0) / 1e9);
                    int k = run_bench(self, g->ranks, g->link, g->algos, g->nalgos, g->sweeps, big, max_bytes, timeout, NULL, g->x + g->n,
                                      g->t + g->n, g->a + g->n, g->cap - g->n);
                    m = k < 0 ? -1 : m + k;
                    if (k > 0) g->n += k;
                }
            }
            if (m < 0) {
                fprintf(stderr, "baton plan calibrate: the bench on %s with %d ranks failed (see its errors above)\n",
                        baton__link_name(g->link), g->ranks);
                fail = 1;
            }
        }
    for (int gi = 0; gi < ngroup && !fail; gi++) {
        cal_group *g = &groups[gi];
        static double xs[CAL_ROWS], ts[CAL_ROWS];
        static int as[CAL_ROWS];
        int n;
        if (g->passes) {
            n = median_rows(g->x, g->t, g->a, g->n, xs, ts, as, CAL_ROWS);
        } else {
            fprintf(stderr, "baton plan calibrate: %s, %d ranks, %d rounds in one job (%.0f s so far)\n", baton__link_name(g->link),
                    g->ranks, g->sweeps, (double)(baton__now_ns() - t0) / 1e9);
            n = run_bench(self, g->ranks, g->link, g->algos, g->nalgos, g->sweeps, 0, max_bytes, timeout, net_launch, xs, ts, as, CAL_ROWS);
        }
        if (n > 0 && g->passes != 2 && max_bytes >= 2 * CAL_SPLIT) {
            fprintf(stderr, "baton plan calibrate: %s, %d ranks, sizes from %.0f bytes: one job of %d sweeps (%.0f s so far)\n",
                    baton__link_name(g->link), g->ranks, 2 * CAL_SPLIT, g->sweeps, (double)(baton__now_ns() - t0) / 1e9);
            int m = run_bench(self, g->ranks, g->link, g->algos, g->nalgos, g->sweeps, 1, max_bytes, timeout, net_launch, xs + n,
                              ts + n, as + n, CAL_ROWS - n);
            n = m < 0 ? -1 : n + m;
        }
        if (n <= 0) {
            fprintf(stderr, "baton plan calibrate: the bench on %s with %d ranks failed (see its errors above)\n",
                    baton__link_name(g->link), g->ranks);
            fail = 1;
        }
        for (int i = 0; i < n && !fail; i++)
            if (baton__tuning_add(&t, g->link, g->algos[as[i]], g->ranks, xs[i], ts[i]) < 0) fail = 1, plan_error(sub, "%s", baton_last_error());
    }
    for (int gi = 0; gi < ngroup; gi++) free(groups[gi].x), free(groups[gi].t), free(groups[gi].a);
    if (fail) {
        baton__tuning_free(&t);
        return 1;
    }
    describe_machine(t.about, sizeof t.about, load0);
    t.cpus = cpus;
    if (baton__tuning_fit(&t) < 0 || baton__tuning_save(path, &t) < 0) {
        plan_error(sub, "%s", baton_last_error());
        baton__tuning_free(&t);
        return 1;
    }
    double secs = (double)(baton__now_ns() - t0) / 1e9;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "command", "calibrate");
        cJSON_AddStringToObject(j, "file", path);
        cJSON_AddStringToObject(j, "about", t.about);
        cJSON_AddNumberToObject(j, "seconds", secs);
        cJSON_AddNumberToObject(j, "points", t.npoints);
        cJSON_AddNumberToObject(j, "fits", t.nfits);
        plan_print_json(j);
    } else {
        printf("Calibrated in %.0f s (%s): %d points, %d fitted lines, written to %s\n", secs, t.about, t.npoints, t.nfits, path);
        for (int l = 0; l < BATON_LINK_COUNT; l++)
            if (t.have_link[l])
                printf("  %s: latency %.2f us, bandwidth %.3f GB/s (alpha-beta fit to the ring)\n", baton__link_name(l),
                       t.link[l].lat_s * 1e6, t.link[l].bw_Bps / 1e9);
        printf("Use it: baton plan allreduce --calibrated %s --link %s --ranks %d --bytes 1e6;  BATON_TUNING=%s with --algo auto\n",
               path, baton__link_name(groups[0].link), groups[0].ranks, path);
    }
    baton__tuning_free(&t);
    return 0;
}
