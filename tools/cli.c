/* cli.c: see cli.h. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char *cli_plural(long n, const char *one, const char *many) { return n == 1 ? one : many; }

static int flag_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

int cli_flag_listed(const char *usage, const char *flag) {
    size_t n = strlen(flag);
    if (n < 2) return 0;
    for (const char *p = usage; (p = strstr(p, flag)); p += n)
        if ((p == usage || !flag_char(p[-1])) && !flag_char(p[n]) && p[n] != '=') return 1;
    return 0;
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
