/* fsio.c: atomic, durable file replacement and bounded whole-file reads (see fsio.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/fsio.h"
#include "util/util.h"

enum { SLOW_CHUNK = 4096 };

int baton__fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return baton__fail(BATON_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = BATON_OK;
    /* Some file systems refuse fsync on directories (EINVAL); they order metadata on their own. */
    if (fsync(fd) != 0 && errno != EINVAL)
        rc = baton__fail(BATON_EIO, "%s: fsync of the directory failed: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

static int write_all(int fd, const unsigned char *p, size_t len, long slow_us) {
    size_t piece = slow_us > 0 ? SLOW_CHUNK : len;
    while (len > 0) {
        size_t n = len < piece ? len : piece;
        if (baton__write_full(fd, p, n) < 0) return -1;
        p += n;
        len -= n;
        if (slow_us > 0) baton__sleep_ns((uint64_t)slow_us * 1000u);
    }
    return 0;
}

int baton__write_atomic(const char *path, const void *buf, size_t len) {
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp || strlen(path) >= sizeof dir)
        return baton__fail(BATON_EINVAL, "%s: path too long", path);
    long slow_us = 0;
    if (baton__env_long("BATON_TEST_CKPT_SLOW_US", 0, 0, 1000000, &slow_us) == BATON_EINVAL) return BATON_EINVAL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return baton__fail(BATON_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    if (write_all(fd, buf, len, slow_us) < 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return baton__fail(BATON_EIO, "%s: write failed: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return baton__fail(BATON_EIO, "%s: close failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return baton__fail(BATON_EIO, "%s: cannot rename into place: %s", path, strerror(e));
    }
    memcpy(dir, path, strlen(path) + 1);
    return baton__fsync_dir(dirname(dir));
}

int baton__read_file(const char *path, size_t max_len, void **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return baton__fail(BATON_ENOTFOUND, "%s: does not exist", path);
        return baton__fail(BATON_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return baton__fail(BATON_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)max_len) {
        close(fd);
        return baton__fail(BATON_EFORMAT, "%s: %lld bytes exceeds the %zu-byte limit for this file", path,
                           (long long)st.st_size, max_len);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return baton__fail(BATON_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    int rc = n ? baton__read_full(fd, buf, n) : BATON_OK;
    close(fd);
    if (rc < 0) {
        free(buf);
        return baton__fail(BATON_EIO, "%s: short read (file truncated while reading?)", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return BATON_OK;
}
