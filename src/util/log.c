/* log.c: leveled logging to stderr, one line per call, and the assertion handler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int log_level = -1;  /* -1: not read from the environment yet */
static int log_rank = -1;

static int level_from_env(void) {
    const char *s = getenv("BATON_LOG_LEVEL");
    if (!s || !*s) return BATON_LOG_WARN;
    if (!strcmp(s, "error") || !strcmp(s, "0")) return BATON_LOG_ERROR;
    if (!strcmp(s, "warn") || !strcmp(s, "1")) return BATON_LOG_WARN;
    if (!strcmp(s, "info") || !strcmp(s, "2")) return BATON_LOG_INFO;
    if (!strcmp(s, "debug") || !strcmp(s, "3")) return BATON_LOG_DEBUG;
    fprintf(stderr, "baton: warn: BATON_LOG_LEVEL=%s is not one of error|warn|info|debug; using warn\n", s);
    return BATON_LOG_WARN;
}

int baton__log_enabled(int level) {
    int cur = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
    if (cur < 0) {
        cur = level_from_env();
        __atomic_store_n(&log_level, cur, __ATOMIC_RELAXED);
    }
    return level <= cur;
}

void baton__log_set_rank(int rank) { log_rank = rank; }

void baton__log(int level, const char *fmt, ...) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (!baton__log_enabled(level)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (log_rank >= 0)
        fprintf(stderr, "baton[rank %d] %s: %s\n", log_rank, names[level], msg);
    else
        fprintf(stderr, "baton: %s: %s\n", names[level], msg);
}

void baton__assert_fail(const char *expr, const char *file, int line, const char *func) {
    fprintf(stderr, "baton[rank %d]: assertion failed: %s at %s:%d (%s)\n", log_rank, expr, file, line, func);
    fflush(stderr);
    abort();
}
