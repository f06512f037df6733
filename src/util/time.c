/* time.c: monotonic clock, deadlines, sleeping and the spin-then-back-off waiter. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

uint64_t baton__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t baton__thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t baton__deadline_after(double seconds) {
    if (!(seconds > 0)) return UINT64_MAX;
    if (seconds > 1e9) return UINT64_MAX;
    uint64_t now = baton__now_ns();
    uint64_t add = (uint64_t)(seconds * 1e9);
    return UINT64_MAX - now < add ? UINT64_MAX : now + add;
}

void baton__sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Phases: calls [0, SPIN) pause; [SPIN, SPIN + YIELD) sched_yield; afterwards nap, doubling from 1 us
 * to 200 us. With 2 ranks on 2 cores a peer answers within the spin phase; with 8 ranks on 2 cores the
 * yield and nap phases hand the core to the rank that must move. */
enum { BACKOFF_SPIN = 4000, BACKOFF_YIELD = 200, NAP_MIN_NS = 1000, NAP_MAX_NS = 200000 };

/* When the ranks far outnumber the cores (512 ranks on 2 cores), a spinning waiter burns the time slice of
 * the rank it waits for, and hundreds of waiters napping 200 us each wake a million times a second: a
 * 512-rank job did not get through init in 120 s. Oversubscribed (more than OVERSUB_RATIO ranks per CPU), a
 * wait skips the spin phase, yields a few times and then naps up to 200 us per rank per CPU (at most
 * 10 ms), so that waiters leave the run queue to the ranks that can move. */
enum { OVERSUB_RATIO = 4, OVERSUB_YIELD = 8, OVERSUB_NAP_MAX_NS = 10000000 };
static _Atomic uint32_t nap_max_ns = NAP_MAX_NS; /* > NAP_MAX_NS: oversubscribed */
/* More ranks than CPUs at all (3 or 4 ranks on 2 cores): two ranks share a CPU, and a rank spinning for the
 * one it shares its CPU with holds that CPU until the 4000 pauses run out (about 90 us here): every
 * all-reduce of 8 bytes took 95 us with 3 ranks on 2 cores, where starting at sched_yield gives 7-11 us
 * (docs/measurements/plan-history.md, "Waits with more ranks than CPUs"). So every wait starts at sched_yield
 * then. */
static _Atomic int cpus_shared = 0;

void baton__backoff_set_load(int ranks, int cpus) {
    if (cpus < 1) cpus = 1;
    uint64_t nap = NAP_MAX_NS;
    if (ranks > OVERSUB_RATIO * cpus) {
        nap = (uint64_t)NAP_MAX_NS * (uint64_t)ranks / (uint64_t)cpus;
        if (nap > OVERSUB_NAP_MAX_NS) nap = OVERSUB_NAP_MAX_NS;
    }
    atomic_store_explicit(&nap_max_ns, (uint32_t)nap, memory_order_relaxed);
    atomic_store_explicit(&cpus_shared, ranks > cpus, memory_order_relaxed);
}

int baton__backoff_cpus_shared(void) { return atomic_load_explicit(&cpus_shared, memory_order_relaxed); }

int baton__backoff_oversubscribed(void) {
    return atomic_load_explicit(&nap_max_ns, memory_order_relaxed) > NAP_MAX_NS;
}

void baton__backoff_init(baton_backoff *b) {
    b->nap_max_ns = atomic_load_explicit(&nap_max_ns, memory_order_relaxed);
    /* skipping ahead keeps `iter` meaning "calls so far" for callers that act every so many calls */
    b->iter = b->nap_max_ns > NAP_MAX_NS ? BACKOFF_SPIN + BACKOFF_YIELD - OVERSUB_YIELD : 0;
    b->nap_ns = NAP_MIN_NS;
}

static _Thread_local int wait_from = BATON__WAIT_SPIN;

void baton__backoff_no_spin(int from) { wait_from = from; }

int baton__backoff_wait_mode(void) {
    return wait_from == BATON__WAIT_SPIN && baton__backoff_cpus_shared() ? BATON__WAIT_YIELD : wait_from;
}

/* Where the next call stands: 0 spin, 1 yield, 2 nap (moves a thread that skips the spin phase past it). */
static int backoff_phase(baton_backoff *b) {
    if (b->iter < BACKOFF_SPIN) {
        int from = baton__backoff_wait_mode();
        if (from == BATON__WAIT_SPIN) return 0;
        /* straight to the yield phase (sched_yield hands the CPU to the working thread), or to the naps */
        b->iter = from == BATON__WAIT_NAP ? BACKOFF_SPIN + BACKOFF_YIELD : BACKOFF_SPIN;
    }
    return b->iter < BACKOFF_SPIN + BACKOFF_YIELD ? 1 : 2;
}

int baton__backoff_naps(baton_backoff *b) { return backoff_phase(b) == 2; }

static void nap_grow(baton_backoff *b) {
    if (b->nap_ns < b->nap_max_ns) b->nap_ns *= 2;
    if (b->nap_ns > b->nap_max_ns) b->nap_ns = b->nap_max_ns;
}

int baton__backoff_nap_on(baton_backoff *b, _Atomic uint32_t *word, uint32_t seen) {
    if (backoff_phase(b) != 2) {
        baton__backoff(b);
        return 0;
    }
    /* The longest nap at once: the waker wakes it, so short first naps would only add wake-ups (each one
     * preempts the thread it shares its CPU with); the timeout keeps the caller's abort and liveness checks. */
    uint32_t ns = b->nap_max_ns;
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    /* not FUTEX_PRIVATE_FLAG: the word lives in memory other processes share, and they wake it */
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
    return rc == 0 || (rc < 0 && errno == EAGAIN);
}

void baton__futex_wake_all(_Atomic uint32_t *word) {
    atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void baton__backoff(baton_backoff *b) {
    switch (backoff_phase(b)) {
    case 0:
        b->iter++;
        baton__cpu_relax();
        return;
    case 1:
        b->iter++;
        sched_yield();
        return;
    default:
        baton__sleep_ns(b->nap_ns);
        nap_grow(b);
    }
}

/* ---- the calling thread's scheduler slice -------------------------------------------------------------- */

typedef struct { /* the kernel's struct sched_attr (SCHED_ATTR_SIZE_VER1); glibc's sched.h has none */
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
} kernel_sched_attr;

int baton__thread_set_slice_ns(uint64_t ns) {
    kernel_sched_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.sched_policy = SCHED_OTHER;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0); /* this thread's (Linux): kept */
    if (errno) return baton__fail(BATON_ESYS, "getpriority: %s", strerror(errno));
    a.sched_nice = nice;
    a.sched_runtime = ns;
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
        return baton__fail(BATON_ESYS, "sched_setattr (slice %llu ns): %s", (unsigned long long)ns, strerror(errno));
    return BATON_OK;
}

uint64_t baton__thread_slice_ns(void) {
    kernel_sched_attr a;
    memset(&a, 0, sizeof a);
    return syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0 ? a.sched_runtime : 0;
}
