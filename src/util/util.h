/* util.h: internal helpers used by every layer: errors with detail, logging, assertions, clocks,
 * bounded environment parsing, and a spin-then-back-off waiter for shared-memory flags. */
#ifndef BATON_UTIL_H
#define BATON_UTIL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"

/* ---- errors ---------------------------------------------------------------------------------------- */
/* Records a detail line for baton_last_error() and returns `status`, so failures read
 *   return baton__fail(BATON_EPROTO, "store: key length %u exceeds %u", len, max);              */
int baton__fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends context to the current detail: "allreduce #3: " + old detail. Returns status. */
int baton__fail_ctx(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void baton__clear_error(void);

/* ---- logging --------------------------------------------------------------------------------------- */
enum { BATON_LOG_ERROR = 0, BATON_LOG_WARN = 1, BATON_LOG_INFO = 2, BATON_LOG_DEBUG = 3 };
/* Level from BATON_LOG_LEVEL (error|warn|info|debug or 0-3), default warn. Lines go to stderr as
 * "baton[rank R] warn: message". The rank is set once known (-1 prints no rank). */
void baton__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int baton__log_enabled(int level);
void baton__log_set_rank(int rank);
#define BATON_ERROR(...) baton__log(BATON_LOG_ERROR, __VA_ARGS__)
#define BATON_WARN(...) baton__log(BATON_LOG_WARN, __VA_ARGS__)
#define BATON_INFO(...) baton__log(BATON_LOG_INFO, __VA_ARGS__)
#define BATON_DEBUG(...) baton__log(BATON_LOG_DEBUG, __VA_ARGS__)

/* Programming errors: prints file:line, the rank and the expression, then aborts. */
#define BATON_ASSERT(cond) \
    ((cond) ? (void)0 : baton__assert_fail(#cond, __FILE__, __LINE__, __func__))
_Noreturn void baton__assert_fail(const char *expr, const char *file, int line, const char *func);

/* ---- clocks ---------------------------------------------------------------------------------------- */
uint64_t baton__now_ns(void);          /* CLOCK_MONOTONIC */
uint64_t baton__thread_cpu_ns(void);   /* CLOCK_THREAD_CPUTIME_ID: CPU time of the calling thread */
/* now + seconds, saturating; seconds <= 0 means "no deadline" (UINT64_MAX). */
uint64_t baton__deadline_after(double seconds);
void baton__sleep_ns(uint64_t ns);

/* ---- environment ----------------------------------------------------------------------------------- */
/* Each returns BATON_OK and stores the value, returns BATON_ENOTFOUND (leaving *out = dflt) when the
 * variable is unset or empty, or fails with BATON_EINVAL and a detail naming the variable, the bad value
 * and the accepted range when it is malformed or out of range. */
int baton__env_long(const char *name, long dflt, long min, long max, long *out);
int baton__env_double(const char *name, double dflt, double min, double max, double *out);
/* A size such as 256K or 32M (baton__parse_size) within [min, max]. */
int baton__env_size(const char *name, uint64_t dflt, uint64_t min, uint64_t max, uint64_t *out);
/* Strict integer / double parsing of a whole string (no trailing junk); used for flags too. */
int baton__parse_long(const char *s, long min, long max, long *out);
int baton__parse_double(const char *s, double min, double max, double *out);
/* Parses sizes such as "64", "8K", "256M", "1G" (powers of 1024) into bytes. */
int baton__parse_size(const char *s, uint64_t max, uint64_t *out);

/* ---- waiting --------------------------------------------------------------------------------------- */
/* Spin briefly (with pause), then sched_yield, then sleep with growing naps (up to ~200 us), so that
 * ranks which outnumber the cores still make progress.
 *   baton_backoff b; baton__backoff_init(&b);
 *   while (!ready()) baton__backoff(&b);                                                          */
typedef struct {
    uint32_t iter;     /* calls so far */
    uint32_t nap_ns;   /* current nap once sleeping */
    uint32_t nap_max_ns;
} baton_backoff;
void baton__backoff_init(baton_backoff *b);
void baton__backoff(baton_backoff *b);
/* Process-wide, set by baton_init: this node's ranks and the CPUs they share. With more ranks than CPUs waits
 * skip spinning (baton__backoff_cpus_shared() is then 1); past 4 ranks per CPU they also nap early and nap
 * longer (baton__backoff_oversubscribed() is then 1). */
void baton__backoff_set_load(int ranks, int cpus);
int baton__backoff_oversubscribed(void);
/* 1 when this node's ranks outnumber its CPUs at all (3 ranks on 2 cores): then every wait starts at the
 * sched_yield phase, as BATON__WAIT_YIELD below (a spin would hold the CPU the awaited rank may need). */
int baton__backoff_cpus_shared(void);
/* For the calling thread only: where its waits start. BATON__WAIT_SPIN (the default) spins, then yields, then
 * naps; BATON__WAIT_YIELD skips the spin phase and starts at sched_yield; BATON__WAIT_NAP also skips the yield
 * phase and naps from the first call. For a thread that shares its only CPU with a
 * thread doing the work (a comm thread of a rank bound to one CPU, while the user thread computes), a spin
 * takes that CPU from the work and cannot make the awaited peer come sooner; and a thread that yielded
 * gets the CPU back only when the working thread's time slice ends (milliseconds), where a napping one is
 * woken at the nap's end and runs at once (docs/measurements/python-history.md, "The backend's CPU per step
 * inside DDP, and the comm thread's wait", has the measurements). */
enum { BATON__WAIT_SPIN = 0, BATON__WAIT_YIELD = 1, BATON__WAIT_NAP = 2 };
void baton__backoff_no_spin(int from);
/* Where the calling thread's waits start: its baton__backoff_no_spin mode, or BATON__WAIT_YIELD for a spinning
 * thread while ranks share CPUs (baton__backoff_cpus_shared). Waits outside the backoff (the MPI transport's) follow it. */
int baton__backoff_wait_mode(void);
/* Napping on a futex word, for waits whose waker can signal (issue 10): baton__backoff_naps(b) is 1 when
 * the next baton__backoff(b) would nap (past the spin and yield phases). baton__backoff_nap_on(b, word,
 * seen) then sleeps in FUTEX_WAIT on word (shared between processes: no private flag) while it still holds
 * seen, for the longest nap at once (the waker is expected to wake it): it returns 1 when woken (or word
 * had moved on), 0 when the nap ran out. Before the nap phase, it is baton__backoff(b).
 * baton__futex_wake_all(word) moves word on and wakes every thread napping on it. The waker/sleeper
 * protocol (who counts sleepers, the order of stores and loads) is the caller's. */
int baton__backoff_naps(baton_backoff *b);
int baton__backoff_nap_on(baton_backoff *b, _Atomic uint32_t *word, uint32_t seen);
void baton__futex_wake_all(_Atomic uint32_t *word);
/* The calling thread's scheduler slice (sched_setattr's sched_runtime for a SCHED_OTHER thread, nice kept):
 * Linux 6.12 and later give a thread with a shorter slice an earlier deadline, so it preempts on wake-up;
 * the kernel clamps it to 0.1-100 ms, and older kernels accept and ignore it. baton__thread_slice_ns reads it
 * back (0 when the kernel has no per-thread slice, or on failure). */
int baton__thread_set_slice_ns(uint64_t ns);
uint64_t baton__thread_slice_ns(void);

static inline void baton__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- memory ---------------------------------------------------------------------------------------- */
/* Overflow-checked size arithmetic: return 0 on overflow (and leave *out unchanged). */
static inline int baton__mul_ok(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? 0 : 1;
}
static inline int baton__add_ok(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out) ? 0 : 1;
}

/* Little-endian fixed-width fields of wire formats (store protocol, TCP handshake, frame headers). */
static inline void baton__put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void baton__put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void baton__put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t baton__get_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t baton__get_le32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t baton__get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The median of v[0..n) (sorts v in place; the mean of the middle two for even n; 0 for n == 0). */
double baton__median(double *v, size_t n);
/* Which of n alternatives runs k-th (0..n-1) in round r of an interleaved comparison: a Williams design,
 * a Latin square whose rows also balance what runs right before what. Over n rounds (2n for odd n) every
 * alternative runs once in each position and right after every other one equally often, so none always
 * inherits the state of the same predecessor. */
int baton__round_order(int n, long r, int k);
/* r rounds rounded to the nearest whole number of those designs for n alternatives (n rounds for even n, 2n
 * for odd n; a tie rounds up; at least one design), so that every alternative runs in every position and after
 * every other one equally often (bench/plan_floors.sh's `balanced` is the same rule). */
long baton__whole_designs(int n, long r);

/* Reads / writes exactly n bytes on a blocking fd, retrying EINTR and short transfers. Return BATON_OK,
 * BATON_EPEERDEAD on EOF / reset, BATON_ESYS otherwise. */
int baton__read_full(int fd, void *buf, size_t n);
int baton__write_full(int fd, const void *buf, size_t n);

#endif
