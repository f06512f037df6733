/* parse.c: strict number parsing for flags and environment variables, and full reads / writes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

int baton__parse_long(const char *s, long min, long max, long *out) {
    if (!s || !*s) return baton__fail(BATON_EINVAL, "empty number");
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0') return baton__fail(BATON_EINVAL, "'%s' is not an integer", s);
    if (v < min || v > max)
        return baton__fail(BATON_ERANGE, "%ld is out of range [%ld, %ld]", v, min, max);
    *out = v;
    return BATON_OK;
}

int baton__parse_double(const char *s, double min, double max, double *out) {
    if (!s || !*s) return baton__fail(BATON_EINVAL, "empty number");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v)) return baton__fail(BATON_EINVAL, "'%s' is not a number", s);
    if (v < min || v > max) return baton__fail(BATON_ERANGE, "%g is out of range [%g, %g]", v, min, max);
    *out = v;
    return BATON_OK;
}

int baton__parse_size(const char *s, uint64_t max, uint64_t *out) {
    if (!s || !*s) return baton__fail(BATON_EINVAL, "empty size");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return baton__fail(BATON_EINVAL, "'%s' is not a size", s);
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    default: return baton__fail(BATON_EINVAL, "'%s' is not a size (use e.g. 64, 8K, 256M, 1G)", s);
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return baton__fail(BATON_EINVAL, "'%s' is not a size (use e.g. 64, 8K, 256M, 1G)", s);
    if (shift && v > (UINT64_MAX >> shift)) return baton__fail(BATON_ERANGE, "size '%s' is too large", s);
    v <<= shift;
    if (v > max) return baton__fail(BATON_ERANGE, "size '%s' exceeds the maximum %llu", s, (unsigned long long)max);
    *out = v;
    return BATON_OK;
}

static int env_get(const char *name, const char **val) {
    const char *s = getenv(name);
    if (!s || !*s) return BATON_ENOTFOUND;
    *val = s;
    return BATON_OK;
}

int baton__env_long(const char *name, long dflt, long min, long max, long *out) {
    const char *s;
    *out = dflt;
    if (env_get(name, &s) != BATON_OK) return BATON_ENOTFOUND;
    long v;
    int rc = baton__parse_long(s, min, max, &v);
    if (rc < 0)
        return baton__fail(BATON_EINVAL, "environment variable %s='%s' is invalid: expected an integer in [%ld, %ld]",
                           name, s, min, max);
    *out = v;
    return BATON_OK;
}

int baton__env_double(const char *name, double dflt, double min, double max, double *out) {
    const char *s;
    *out = dflt;
    if (env_get(name, &s) != BATON_OK) return BATON_ENOTFOUND;
    double v;
    int rc = baton__parse_double(s, min, max, &v);
    if (rc < 0)
        return baton__fail(BATON_EINVAL, "environment variable %s='%s' is invalid: expected a number in [%g, %g]",
                           name, s, min, max);
    *out = v;
    return BATON_OK;
}

int baton__env_size(const char *name, uint64_t dflt, uint64_t min, uint64_t max, uint64_t *out) {
    const char *s;
    *out = dflt;
    if (env_get(name, &s) != BATON_OK) return BATON_ENOTFOUND;
    uint64_t v;
    if (baton__parse_size(s, max, &v) < 0 || v < min)
        return baton__fail(BATON_EINVAL, "environment variable %s='%s' is invalid: expected a size (e.g. 256K, 32M) "
                                         "from %llu to %llu bytes",
                           name, s, (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return BATON_OK;
}

int baton__read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r == 0) return baton__fail(BATON_EPEERDEAD, "unexpected end of stream");
        if (errno == EINTR) continue;
        if (errno == ECONNRESET) return baton__fail(BATON_EPEERDEAD, "connection reset");
        return baton__fail(BATON_ESYS, "read: %s", strerror(errno));
    }
    return BATON_OK;
}

int baton__write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) return baton__fail(BATON_EPEERDEAD, "connection closed by peer");
        return baton__fail(BATON_ESYS, "write: %s", r < 0 ? strerror(errno) : "wrote 0 bytes");
    }
    return BATON_OK;
}
