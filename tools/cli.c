/* cli.c: see cli.h. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/util.h"

const char *cli_plural(long n, const char *one, const char *many) { return n == 1 ? one : many; }

static int flag_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

int cli_flag_listed(const char *usage, const char *flag) {
    size_t n = strlen(flag);
    if (n < 2) return 0;
    for (const char *p = usage; (p = strstr(p, flag)); p += n)
        if ((p == usage || !flag_char(p[-1])) && !flag_char(p[n]) && p[n] != '=') return 1;
    return 0;
}

static int is_switch(const cli_opts *it, const char *flag) {
    if (!strcmp(flag, "--help")) return 1;
    for (const char *const *s = it->switches; s && *s; s++)
        if (!strcmp(*s, flag)) return 1;
    return 0;
}

int cli_opts_next(cli_opts *it) {
    it->val = it->why = NULL;
    if (++it->i >= it->argc) return 0;
    const char *a = it->argv[it->i], *eq = strchr(a, '=');
    size_t fl = eq ? (size_t)(eq - a) : strlen(a);
    snprintf(it->flag, sizeof it->flag, "%.*s", (int)(fl < sizeof it->flag ? fl : sizeof it->flag - 1), a);
    if (strncmp(a, "--", 2) != 0 && it->positional) {
        it->flag[0] = '\0';
        it->val = a;
        return 2;
    }
    if (strncmp(a, "--", 2) != 0) {
        it->why = "unexpected argument";
        return -1;
    }
    if (fl >= sizeof it->flag) {
        it->why = "unknown option";
        return -1;
    }
    if (is_switch(it, it->flag)) {
        if (!eq) return 1;
        it->why = "takes no value";
        return -1;
    }
    if (eq) it->val = eq + 1;
    else if (it->i + 1 < it->argc) it->val = it->argv[++it->i];
    else {
        it->why = cli_flag_listed(it->usage, it->flag) ? "needs a value" : "unknown option";
        return -1;
    }
    return 1;
}

int cli_long(cli_opts *it, const char *name, long lo, long hi, long *out) {
    if (strcmp(it->flag, name) || !it->val) return 0;
    long v;
    if (baton__parse_long(it->val, lo, hi, &v) < 0) it->why = baton_last_error();
    else *out = v;
    return 1;
}

int cli_int(cli_opts *it, const char *name, int lo, int hi, int *out) {
    long v = 0;
    int m = cli_long(it, name, lo, hi, &v);
    if (m && !it->why) *out = (int)v;
    return m;
}

int cli_double(cli_opts *it, const char *name, double lo, double hi, double *out) {
    if (strcmp(it->flag, name) || !it->val) return 0;
    double v;
    if (baton__parse_double(it->val, lo, hi, &v) < 0) it->why = baton_last_error();
    else *out = v;
    return 1;
}

int cli_seed(cli_opts *it, const char *name, uint64_t *out) {
    if (strcmp(it->flag, name) || !it->val) return 0;
    uint64_t v;
    if (baton__parse_size(it->val, UINT64_MAX, &v) < 0 || strpbrk(it->val, "kKmMgGbB"))
        it->why = "expects a non-negative integer";
    else *out = v;
    return 1;
}

long cli_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? online : 1;
}

void cli_format_duration(double seconds, char *out, int cap) {
    if (!isfinite(seconds) || seconds < 0 || seconds > 1e9) {
        snprintf(out, (size_t)cap, "?");
        return;
    }
    long s = lround(seconds), h = s / 3600, m = s / 60 % 60;
    if (h) snprintf(out, (size_t)cap, "%ld:%02ld:%02ld", h, m, s % 60);
    else snprintf(out, (size_t)cap, "%ld:%02ld", m, s % 60);
}
