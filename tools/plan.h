/* plan.h: `baton plan`, shared by its files: the flag parser every subcommand uses and the output helpers.
 *   tools/plan.c        dispatch, allreduce, train, the flag parser
 *   tools/plan_more.c   sweep, solve, compare, memory
 *   tools/plan_calib.c  calibrate (measures this machine with `baton run ... baton bench`)
 *   tools/plan_plot.c   --plot FILE.svg */
#ifndef BATON_TOOLS_PLAN_H
#define BATON_TOOLS_PLAN_H

#include <cjson/cJSON.h>

#include "comm/model.h"
#include "comm/tuning.h"

#define PLAN_LIST_MAX 64

typedef struct {
    int n;
    double v[PLAN_LIST_MAX];
} plan_list;

/* One flag of a subcommand. kind: 'd' a number in [min, max], 'i' a whole number in [min, max],
 * 'l' a comma-separated list of numbers in [min, max], 'k' a list of whole numbers, 's' a string,
 * 'f' a switch (no value). dst: double*, int*, plan_list* (l, k), const char** (s), int* (f). */
typedef struct {
    const char *name;
    char kind;
    double min, max;
    void *dst;
    const char *help;
} plan_flag;

/* Parses argv[1..] (argv[0] is the subcommand) against `flags`. Returns 0, 1 after printing --help, or
 * -1 after printing one line naming the bad flag. seen[i] is set for each flag given. */
int plan_parse(const char *sub, int argc, char **argv, const plan_flag *flags, int nflags, int *seen);
/* "baton plan SUB: MESSAGE" on stderr, for errors the parser cannot see (flags that conflict). Returns -1. */
int plan_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints a cJSON document on stdout and frees it. */
void plan_print_json(cJSON *j);
/* Human units: "2.00 GB", "11.68 ms", "300 GB/s". */
const char *plan_bytes(double b, char *buf, size_t n);
const char *plan_secs(double s, char *buf, size_t n);

int plan_cmd_sweep(int argc, char **argv);
int plan_cmd_solve(int argc, char **argv);
int plan_cmd_compare(int argc, char **argv);
int plan_cmd_memory(int argc, char **argv);
int plan_cmd_calibrate(int argc, char **argv);
/* plan_calib.c: `plan allreduce --calibrated FILE`: predicted baton bench times per algorithm. Exit code. */
int plan_cmd_calibrated(const char *sub, const char *file, const char *link, int ranks, double bytes, int json,
                        const char *plot);

/* plan_plot.c: an SVG of one or two panels. Each series is (x, y) points; measured series are drawn as dots.
 * log_x / log_y choose the axes. Returns 0 or -1 after printing a line naming the file. */
typedef struct {
    const char *label;
    int n;
    const double *x, *y;
    int dots;               /* measured points: dots, no line */
} plot_series;
typedef struct {
    const char *title, *xlabel, *ylabel;
    int log_x, log_y;
    int nseries;
    plot_series s[16];
} plot_panel;
int plan_plot_svg(const char *sub, const char *path, const plot_panel *panels, int npanels);
/* Before any work: the --plot name must end in .svg (one line and -1 otherwise). */
int plan_plot_check(const char *sub, const char *path);

#endif
