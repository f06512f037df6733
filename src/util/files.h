/* files.h: every file baton creates or reads on its own goes through here.
 *
 * - Files are created with O_CREAT|O_EXCL|O_NOFOLLOW under a temporary name and renamed into place, so a
 *   symlink, hard link or file planted at a predictable name is never written through (a planted name makes
 *   the write fail instead).
 * - Files baton makes for itself (the store hand-off, flight-recorder dumps) live in one private per-user
 *   directory, created 0700 and checked for owner and mode every time it is used (baton__private_dir).
 * - Reads open without blocking (a FIFO in place of a file is refused, not waited on) and accept regular
 *   files only, of a bounded size.
 *
 *   if (baton__write_atomic("ckpt/step-10/state.json", json, strlen(json), BATON_FILE_DURABLE) < 0) ...
 *   void *buf; size_t len;
 *   if (baton__read_file("ckpt/step-10/COMMIT", 65536, &buf, &len) == 0) { ...; free(buf); }
 *
 * Test knob (tests only): BATON_TEST_CKPT_SLOW_US=U makes a durable baton__write_atomic write in 4 KiB
 * pieces and sleep U microseconds after each, so a test can SIGKILL a writer in the middle of a file. */
#ifndef BATON_UTIL_FILES_H
#define BATON_UTIL_FILES_H

#include <stddef.h>
#include <sys/types.h>

enum {
    BATON_FILE_DURABLE = 1, /* fsync the file before the rename and the directory after it (checkpoints) */
    BATON_FILE_PRIVATE = 2, /* mode 0600 instead of 0644 */
};

/* Writes PATH atomically: the bytes go to PATH.tmp (a stale or planted PATH.tmp is removed first, then
 * created with O_EXCL|O_NOFOLLOW), then PATH.tmp is renamed over PATH (a rename replaces a symlink at PATH,
 * it never follows it). After a crash PATH holds its old content or all of the new one; a stale PATH.tmp
 * may be left, which no reader looks at. BATON_EIO with a detail naming the file on failure. */
int baton__write_atomic(const char *path, const void *buf, size_t len, int flags);
/* fsyncs the directory itself (so entries created, renamed or removed in it are durable). */
int baton__fsync_dir(const char *dir);
/* Reads a whole regular file of at most max_len bytes into a malloc'ed buffer (NUL-terminated one past
 * the end, so text can be parsed in place). Never blocks on a FIFO or device. BATON_ENOTFOUND if it does
 * not exist, BATON_EFORMAT if it is larger than max_len, BATON_EIO otherwise (not a regular file, ...). */
int baton__read_file(const char *path, size_t max_len, void **out, size_t *len);
/* Opens an existing file read-only without blocking, checks that it is a regular file, and returns the fd
 * in blocking mode (>= 0), or a negative status (BATON_ENOTFOUND, BATON_EIO) with a detail naming it. */
int baton__open_regular(const char *path);

/* The per-user private directory for baton's own files: $XDG_RUNTIME_DIR/baton when XDG_RUNTIME_DIR is set,
 * else ${TMPDIR:-/tmp}/baton-<uid>. Created 0700 if missing; an existing one must be a real directory (not
 * a symlink) owned by this user with no group/other access, else BATON_ESYS with a detail saying what is
 * wrong and how to fix it. out gets the path (no trailing slash). */
int baton__private_dir(char *out, size_t n);

#endif
