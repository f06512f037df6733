/* status.c: the status table's strings and the thread-local failure detail. */
#include <stdio.h>
#include <string.h>

#include "util/util.h"

const char *baton_strerror(int status) {
    switch (status) {
#define BATON_STATUS_MSG_(name, value, msg) case value: return msg;
        BATON_STATUS_MAP(BATON_STATUS_MSG_)
#undef BATON_STATUS_MSG_
    }
    return "unknown status";
}

const char *baton_status_name(int status) {
    switch (status) {
#define BATON_STATUS_NAME_(name, value, msg) case value: return "BATON_" #name;
        BATON_STATUS_MAP(BATON_STATUS_NAME_)
#undef BATON_STATUS_NAME_
    }
    return "BATON_UNKNOWN";
}

static _Thread_local char last_error[512];

const char *baton_last_error(void) { return last_error; }

void baton__clear_error(void) { last_error[0] = '\0'; }

int baton__fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int baton__fail_ctx(int status, const char *fmt, ...) {
    char prefix[256], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* prefix first, then as much of the old detail as fits (truncation is intended) */
    size_t n = strlen(prefix);
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, prefix, n);
    size_t m = strlen(old);
    if (m > sizeof last_error - 1 - n) m = sizeof last_error - 1 - n;
    memcpy(last_error + n, old, m);
    last_error[n + m] = '\0';
    return status;
}
