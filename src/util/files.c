/* files.c: safe creation, atomic replacement and bounded reads of files; baton's private directory
 * (see files.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/files.h"
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

int baton__write_atomic(const char *path, const void *buf, size_t len, int flags) {
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp || strlen(path) >= sizeof dir)
        return baton__fail(BATON_EINVAL, "%s: path too long", path);
    int durable = flags & BATON_FILE_DURABLE;
    long slow_us = 0;
    if (durable && baton__env_long("BATON_TEST_CKPT_SLOW_US", 0, 0, 1000000, &slow_us) == BATON_EINVAL)
        return BATON_EINVAL;
    /* A stale PATH.tmp (a killed writer) or anything planted there is removed, never written through:
     * unlink does not follow symlinks, and O_EXCL|O_NOFOLLOW fails if the name reappears in between. */
    if (unlink(tmp) != 0 && errno != ENOENT)
        return baton__fail(BATON_EIO, "%s: cannot remove the stale temporary file: %s", tmp, strerror(errno));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, flags & BATON_FILE_PRIVATE ? 0600 : 0644);
    if (fd < 0) return baton__fail(BATON_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    if (write_all(fd, buf, len, slow_us) < 0 || (durable && fsync(fd) != 0)) {
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
    if (!durable) return BATON_OK;
    memcpy(dir, path, strlen(path) + 1);
    return baton__fsync_dir(dirname(dir));
}

int baton__open_regular(const char *path) {
    /* O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return baton__fail(BATON_ENOTFOUND, "%s: does not exist", path);
        return baton__fail(BATON_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return baton__fail(BATON_EIO, "%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int baton__read_file(const char *path, size_t max_len, void **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd = baton__open_regular(path);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return baton__fail(BATON_EIO, "%s: cannot stat: %s", path, strerror(errno));
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

int baton__private_dir(char *out, size_t n) {
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
    int w;
    if (xdg && xdg[0] == '/')
        w = snprintf(out, n, "%s/baton", xdg);
    else
        w = snprintf(out, n, "%s/baton-%u", tmp && tmp[0] == '/' ? tmp : "/tmp", (unsigned)geteuid());
    if (w < 0 || (size_t)w >= n) return baton__fail(BATON_EINVAL, "baton's private directory name is too long");
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return baton__fail(BATON_ESYS, "cannot create baton's private directory %s: %s (set TMPDIR or "
                                       "XDG_RUNTIME_DIR to a directory of your own)", out, strerror(errno));
    /* Whatever is there now (ours, or planted before we came) is checked through a descriptor that cannot
     * have followed a symlink. */
    struct stat st;
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) e = ELOOP;
        if (fd >= 0) close(fd);
        return baton__fail(BATON_ESYS, "baton's private directory %s is not a directory of this user (%s): "
                                       "remove it, or set TMPDIR or XDG_RUNTIME_DIR to a directory of your own",
                           out, e == ELOOP ? "it is a symlink" : strerror(e));
    }
    close(fd);
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        return baton__fail(BATON_ESYS, "baton's private directory %s belongs to uid %u with mode %03o, not to "
                                       "uid %u with mode 700: remove it, or set TMPDIR or XDG_RUNTIME_DIR to a "
                                       "directory of your own",
                           out, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), (unsigned)geteuid());
    return BATON_OK;
}
