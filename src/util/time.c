/* time.c: monotonic clock, deadlines, sleeping and the spin-then-back-off waiter. */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "util/util.h"

uint64_t baton__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

void baton__backoff_init(baton_backoff *b) {
    b->iter = 0;
    b->nap_ns = NAP_MIN_NS;
}

void baton__backoff(baton_backoff *b) {
    if (b->iter < BACKOFF_SPIN) {
        b->iter++;
        baton__cpu_relax();
        return;
    }
    if (b->iter < BACKOFF_SPIN + BACKOFF_YIELD) {
        b->iter++;
        sched_yield();
        return;
    }
    baton__sleep_ns(b->nap_ns);
    if (b->nap_ns < NAP_MAX_NS) b->nap_ns *= 2;
    if (b->nap_ns > NAP_MAX_NS) b->nap_ns = NAP_MAX_NS;
}
