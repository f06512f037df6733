/* harness.h: baton's test harness. Each tests/test_*.c file is one binary; each TEST runs in its own
 * forked child with a hard timeout (a hang is a failure), and the binary ends with "N passed, N failed".
 *
 *   TEST(store_rejects_bad_secret) {            // default timeout: 60 s
 *       ASSERT_EQ_INT(rc, BATON_EAUTH);
 *   }
 *   TEST_T(allreduce_matrix_8_ranks, 300) { ... }   // own timeout in seconds
 *
 * Run one binary with a substring filter: build/tests/test_store reject
 * TH_TIMEOUT_SCALE (e.g. 3 under sanitizers) multiplies every timeout. */
#ifndef BATON_TEST_HARNESS_H
#define BATON_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void th_register(const char *name, void (*fn)(void), int timeout_s);
_Noreturn void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define TEST_T(name, timeout_s)                                                 \
    static void name(void);                                                     \
    __attribute__((constructor)) static void th_reg_##name(void) {              \
        th_register(#name, name, timeout_s);                                    \
    }                                                                           \
    static void name(void)
#define TEST(name) TEST_T(name, 60)

#define ASSERT_TRUE(c) \
    do { if (!(c)) th_fail(__FILE__, __LINE__, "expected true: %s", #c); } while (0)
#define ASSERT_EQ_INT(a, b)                                                                         \
    do { long long th_a = (long long)(a), th_b = (long long)(b);                                    \
         if (th_a != th_b) th_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, th_a, th_b); \
    } while (0)
#define ASSERT_NE_INT(a, b)                                                                         \
    do { long long th_a = (long long)(a), th_b = (long long)(b);                                    \
         if (th_a == th_b) th_fail(__FILE__, __LINE__, "%s != %s: both %lld", #a, #b, th_a);          \
    } while (0)
#define ASSERT_EQ_U64(a, b)                                                                              \
    do { unsigned long long th_a = (unsigned long long)(a), th_b = (unsigned long long)(b);              \
         if (th_a != th_b) th_fail(__FILE__, __LINE__, "%s == %s: %llu != %llu", #a, #b, th_a, th_b);     \
    } while (0)
#define ASSERT_NEAR(a, b, tol)                                                                             \
    do { double th_a = (double)(a), th_b = (double)(b), th_t = (double)(tol);                              \
         if (!(th_a - th_b <= th_t && th_b - th_a <= th_t))                                                \
             th_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, th_a, th_b, th_t);       \
    } while (0)
#define ASSERT_STR_EQ(a, b)                                                                    \
    do { const char *th_a = (a), *th_b = (b);                                                  \
         if (strcmp(th_a, th_b)) th_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, th_a, th_b); \
    } while (0)
#define ASSERT_CONTAINS(hay, needle)                                                              \
    do { const char *th_h = (hay), *th_n = (needle);                                              \
         if (!th_h || !strstr(th_h, th_n))                                                        \
             th_fail(__FILE__, __LINE__, "expected \"%s\" in: %s", th_n, th_h ? th_h : "(null)");  \
    } while (0)
#define ASSERT_OK(expr)                                                                             \
    do { int th_rc = (expr);                                                                        \
         if (th_rc < 0) th_fail(__FILE__, __LINE__, "%s failed: %d (%s)", #expr, th_rc, th_errdetail()); \
    } while (0)

const char *th_errdetail(void);   /* baton_last_error() of this thread */

/* Paths of the build in use: th_build_dir() is $BUILD or "build"; th_baton() is "<build>/baton". */
const char *th_build_dir(void);
const char *th_baton(void);

/* Runs `cmd` with /bin/sh -c in its own process group, capturing stdout+stderr (up to 1 MiB) into a
 * malloc'ed NUL-terminated string (*out, may be NULL), killing the whole group after timeout_s.
 * Returns the exit status in the style of a shell: code, 128+signal, or 124 on timeout.
 * *elapsed_s (may be NULL) receives the wall time. */
int th_run(const char *cmd, double timeout_s, char **out, double *elapsed_s);

/* A TCP port on 127.0.0.1 that nobody listens on right now (for a store a test starts a moment later);
 * 0 if none could be found. */
int th_free_port(void);

/* TH_TIMEOUT_SCALE (1 unless set): for a test's own liveness bounds and delays, which sanitizers stretch too. */
double th_timeout_scale(void);

/* A fresh private directory under /tmp, removed by the harness after the test. */
const char *th_tmpdir(void);

/* The whole file at `path`, malloc'ed with a NUL after its last byte (the caller frees it); its size in
 * *len (may be NULL). Fails the test if the file cannot be read. */
char *th_slurp(const char *path, size_t *len);

/* Writes printf(fmt, ...) to th_tmpdir()/name and returns that path (static storage, one per name slot of a
 * small ring: valid for the next 7 calls). Fails the test if the file cannot be written. */
const char *th_write_tmp(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs `ENV baton run -n N -- baton train --threads 1 --json ARGS` (OPENBLAS_NUM_THREADS=1; env may be "")
 * under th_run's timeout, fails the test (printing the command and its output) unless it exits 0, and returns
 * the --json line (the one starting with {"model"), malloc'ed, without its newline. */
char *th_train_json(const char *env, int n, const char *args, double timeout_s);

/* The number after "key": in a JSON text; fails the test if the key is absent. */
double th_jnum(const char *json, const char *key);
/* Element i of the array of numbers after "key": in a JSON text; fails the test if the key is absent, is not
 * an array, or has fewer than i + 1 numbers. */
double th_jarr(const char *json, const char *key, int i);

#endif
