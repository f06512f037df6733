/* fsio.h: crash-safe file writes and bounded file reads, the building blocks of checkpoints.
 *
 * baton__write_atomic(path, buf, len) writes PATH.tmp, fsyncs it, renames it over PATH and fsyncs the
 * directory, so after a crash at any point PATH holds either its old content or all of the new one (and
 * a stale PATH.tmp may be left behind, which a reader never looks at).
 *
 *   if (baton__write_atomic("ckpt/step-10/state.json", json, strlen(json)) < 0) ... baton_last_error() ...
 *   void *buf; size_t len;
 *   if (baton__read_file("ckpt/step-10/COMMIT", 65536, &buf, &len) == 0) { ...; free(buf); }
 *
 * Test knob (tests only): BATON_TEST_CKPT_SLOW_US=U makes baton__write_atomic write in 4 KiB pieces and
 * sleep U microseconds after each, so a test can SIGKILL a writer in the middle of a file. */
#ifndef BATON_CKPT_FSIO_H
#define BATON_CKPT_FSIO_H

#include <stddef.h>

/* tmp + write + fsync + rename + fsync(dir). BATON_EIO with a detail naming the file on failure. */
int baton__write_atomic(const char *path, const void *buf, size_t len);
/* fsyncs the directory itself (so entries created, renamed or removed in it are durable). */
int baton__fsync_dir(const char *dir);
/* Reads a whole regular file of at most max_len bytes into a malloc'ed buffer (NUL-terminated one past
 * the end, so text can be parsed in place). BATON_ENOTFOUND if it does not exist, BATON_EFORMAT if it is
 * larger than max_len, BATON_EIO otherwise. */
int baton__read_file(const char *path, size_t max_len, void **out, size_t *len);

#endif
