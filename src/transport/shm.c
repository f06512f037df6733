/* shm.c: the node's shared-memory segment: creation and attachment, progress counters and bounded waits,
 * the abort word, and the shm point-to-point transport over per-pair byte rings. */
#include "transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define SHM_MAGIC_READY 0x6261746f6e53484dull /* "batonSHM": stored last by the creator */

enum {
    SHM_VERSION = 1,
    SHM_PAGE = 4096,
    LIVENESS_NS = 20 * 1000 * 1000,  /* how often a waiter checks that the ranks it waits for are alive */
    ABORT_REASON_BYTES = 512,
};

typedef struct {
    _Atomic uint64_t magic;        /* SHM_MAGIC_READY once the creator initialized the header */
    uint32_t version;
    uint32_t local_size;
    uint64_t total_bytes;
    _Atomic uint32_t attached;     /* ranks that mapped the segment */
    _Atomic uint32_t aborted;      /* 0 running; 1 an abort is being written; 2 aborted, reason valid */
    _Atomic uint32_t agree_count;  /* baton__shm_agree_once: ranks that voted, and those that voted no */
    _Atomic uint32_t agree_no;
    char reason[ABORT_REASON_BYTES];
} shm_header;

struct baton_shm {
    int (*peer_check)(void *ctx, int local_rank); /* the communicator's check of a waited-for rank */
    void *peer_ctx;
    uint8_t *base;
    size_t bytes;
    int local_rank, local_size;
    int global_ranks[BATON_SHM_MAX_LOCAL];
    shm_header *hdr;
    baton_shm_rank *ranks;    /* [local_size] */
    uint8_t *small;           /* [local_size][2][SMALL_BYTES] */
    uint8_t *stage;           /* [local_size][2][STAGE_BYTES] */
    uint8_t *chans;           /* [local_size][local_size][chan_stride] */
    size_t chan_stride;
    size_t chan_bytes;        /* capacity of one ring */
    _Atomic uint64_t wakes_sent, naps_woken; /* baton__shm_wake_stats */
    int wake;                 /* waits on counters sleep on the futex (BATON_SHM_WAKE, default on) */
};

size_t baton__shm_chan_bytes(int L) {
    size_t b = BATON_SHM_CHAN_BYTES;
    for (int l = BATON_SHM_CHAN_FULL_RANKS; l < L && b > BATON_SHM_CHAN_MIN_BYTES; l *= 2) b /= 4;
    return b < BATON_SHM_CHAN_MIN_BYTES ? BATON_SHM_CHAN_MIN_BYTES : b;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Computes the layout for local_size ranks; fills the region pointers when base is set. */
static size_t layout(baton_shm *s, uint8_t *base, int L) {
    size_t off = align_up(sizeof(shm_header), SHM_PAGE);
    size_t ranks_off = off;
    off = align_up(off + (size_t)L * sizeof(baton_shm_rank), SHM_PAGE);
    size_t small_off = off;
    off += (size_t)L * 2 * BATON_SHM_SMALL_BYTES;
    size_t stage_off = off;
    off += (size_t)L * 2 * BATON_SHM_STAGE_BYTES;
    size_t chan_bytes = baton__shm_chan_bytes(L);
    /* page-aligned rings while they are large; cache-line aligned once they are a page or two */
    size_t chan_stride = align_up(sizeof(baton_shm_chan_ctl) + chan_bytes,
                                  chan_bytes >= (size_t)16 * SHM_PAGE ? SHM_PAGE : BATON_SHM_CACHELINE);
    size_t chans_off = off;
    off += (size_t)L * (size_t)L * chan_stride;
    if (base) {
        s->hdr = (shm_header *)base;
        s->ranks = (baton_shm_rank *)(base + ranks_off);
        s->small = base + small_off;
        s->stage = base + stage_off;
        s->chans = base + chans_off;
        s->chan_stride = chan_stride;
        s->chan_bytes = chan_bytes;
    }
    return off;
}

static int wait_for_attach(baton_shm *s, uint64_t deadline) {
    baton_backoff b;
    baton__backoff_init(&b);
    while (atomic_load_explicit(&s->hdr->attached, memory_order_acquire) < (uint32_t)s->local_size) {
        if (baton__now_ns() > deadline)
            return baton__fail(BATON_ETIMEDOUT, "shared memory: only %u of %d local ranks attached in time",
                               atomic_load(&s->hdr->attached), s->local_size);
        baton__backoff(&b);
    }
    return BATON_OK;
}

int baton__shm_open(const char *name, int local_rank, int local_size, const int *global_ranks,
                    uint64_t deadline_ns, baton_shm **out) {
    *out = NULL;
    if (local_size >= 1 && local_size <= BATON_SHM_MAX_LOCAL && (local_rank < 0 || local_rank >= local_size))
        return baton__fail(BATON_EINVAL, "shared memory: local rank %d of %d is out of range", local_rank, local_size);
    if (local_size < 1 || local_size > BATON_SHM_MAX_LOCAL)
        return baton__fail(BATON_EINVAL, "shared memory: %d local ranks on one node is over the limit of %d "
                           "(BATON_SHM_MAX_LOCAL); run fewer ranks per node or --transport tcp",
                           local_size, BATON_SHM_MAX_LOCAL);
    /* BATON_SHM_WAKE=off: waits on counters nap as before waking existed (for A/B runs; posts still wake
     * sleepers of ranks that have it on) */
    const char *we = getenv("BATON_SHM_WAKE");
    int wake = !we || !*we || !strcmp(we, "on") || !strcmp(we, "1");
    if (!wake && strcmp(we, "off") && strcmp(we, "0"))
        return baton__fail(BATON_EINVAL, "BATON_SHM_WAKE='%s' must be on (the default) or off", we);
    baton_shm *s = calloc(1, sizeof *s);
    if (!s) return baton__fail(BATON_ENOMEM, "shared memory: out of memory");
    s->wake = wake;
    s->local_rank = local_rank;
    s->local_size = local_size;
    for (int i = 0; i < local_size; i++) s->global_ranks[i] = global_ranks ? global_ranks[i] : i;
    size_t bytes = layout(s, NULL, local_size);
    int fd = -1, rc;
    if (local_rank == 0) {
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno == EEXIST) {
            BATON_WARN("shared memory segment %s already exists (left by a crashed job?); replacing it", name);
            shm_unlink(name);
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        }
        if (fd < 0) {
            rc = baton__fail(BATON_ESYS, "shared memory: cannot create %s: %s", name, strerror(errno));
            goto fail;
        }
        if (ftruncate(fd, (off_t)bytes) != 0) {
            rc = baton__fail(BATON_ESYS, "shared memory: cannot size %s to %zu bytes: %s (is /dev/shm large enough?)",
                             name, bytes, strerror(errno));
            shm_unlink(name);
            goto fail;
        }
    } else {
        baton_backoff b;
        baton__backoff_init(&b);
        for (;;) {
            fd = shm_open(name, O_RDWR, 0600);
            if (fd >= 0) {
                struct stat st;
                if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes) break;
                close(fd);
                fd = -1;
            } else if (errno != ENOENT) {
                rc = baton__fail(BATON_ESYS, "shared memory: cannot open %s: %s", name, strerror(errno));
                goto fail;
            }
            if (baton__now_ns() > deadline_ns) {
                rc = baton__fail(BATON_ETIMEDOUT,
                                 "shared memory: local rank 0 did not create %s in time (did it start?)", name);
                goto fail;
            }
            baton__backoff(&b);
        }
    }
    s->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fd = -1;
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        rc = baton__fail(BATON_ESYS, "shared memory: cannot map %zu bytes: %s", bytes, strerror(errno));
        if (local_rank == 0) shm_unlink(name);
        goto fail;
    }
    s->bytes = bytes;
    layout(s, s->base, local_size);
    if (local_rank == 0) {
        s->hdr->version = SHM_VERSION;
        s->hdr->local_size = (uint32_t)local_size;
        s->hdr->total_bytes = bytes;
        atomic_store_explicit(&s->hdr->magic, SHM_MAGIC_READY, memory_order_release);
    } else {
        baton_backoff b;
        baton__backoff_init(&b);
        while (atomic_load_explicit(&s->hdr->magic, memory_order_acquire) != SHM_MAGIC_READY) {
            if (baton__now_ns() > deadline_ns) {
                rc = baton__fail(BATON_ETIMEDOUT, "shared memory: %s was never initialized", name);
                goto fail;
            }
            baton__backoff(&b);
        }
        if (s->hdr->version != SHM_VERSION || s->hdr->local_size != (uint32_t)local_size) {
            rc = baton__fail(BATON_EPROTO, "shared memory: %s was made for %u local ranks (version %u), this rank "
                             "expects %d: do all ranks agree on the local world size?",
                             name, s->hdr->local_size, s->hdr->version, local_size);
            goto fail;
        }
    }
    baton_shm_rank *me = &s->ranks[local_rank];
    me->pid = (int32_t)getpid();
    me->global_rank = s->global_ranks[local_rank];
    atomic_fetch_add_explicit(&s->hdr->attached, 1, memory_order_acq_rel);
    rc = wait_for_attach(s, deadline_ns);
    if (local_rank == 0) shm_unlink(name); /* attached or not: never leave the name behind */
    if (rc < 0) goto fail;
    *out = s;
    return BATON_OK;
fail:
    if (fd >= 0) close(fd);
    if (s->base) munmap(s->base, s->bytes);
    free(s);
    return rc;
}

int baton__shm_agree_once(baton_shm *s, int yes, uint64_t deadline, int *all) {
    if (!yes) atomic_fetch_add_explicit(&s->hdr->agree_no, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->hdr->agree_count, 1, memory_order_acq_rel);
    baton_backoff b;
    baton__backoff_init(&b);
    while (atomic_load_explicit(&s->hdr->agree_count, memory_order_acquire) < (uint32_t)s->local_size) {
        if (baton__now_ns() > deadline)
            return baton__fail(BATON_ETIMEDOUT, "shared memory: only %u of %d local ranks voted in time",
                               atomic_load(&s->hdr->agree_count), s->local_size);
        baton__backoff(&b);
    }
    *all = atomic_load_explicit(&s->hdr->agree_no, memory_order_relaxed) == 0;
    return BATON_OK;
}

void baton__shm_close(baton_shm *s) {
    if (!s) return;
    if (s->base) munmap(s->base, s->bytes);
    free(s);
}


void *baton__shm_small(baton_shm *s, int r, int parity) {
    return s->small + ((size_t)r * 2 + (size_t)parity) * BATON_SHM_SMALL_BYTES;
}

void *baton__shm_stage(baton_shm *s, int r, int buf) {
    return s->stage + ((size_t)r * 2 + (size_t)buf) * BATON_SHM_STAGE_BYTES;
}

baton_shm_rank *baton__shm_rank_block(baton_shm *s, int r) { return &s->ranks[r]; }

void baton__shm_post(baton_shm *s, baton_shm_ctr c, uint64_t v) {
    baton_shm_rank *me = &s->ranks[s->local_rank];
    /* seq_cst store, then seq_cst load of sleepers; a sleeper counts itself (seq_cst) before it loads the
     * counter: one of the two sees the other's store, so a sleeper is never missed (see nap_on_counter) */
    atomic_store_explicit(&me->ctr[c].v, v, memory_order_seq_cst);
    if (atomic_load_explicit(&me->sleepers, memory_order_seq_cst)) {
        baton__futex_wake_all(&me->wake);
        atomic_fetch_add_explicit(&s->wakes_sent, 1, memory_order_relaxed);
    }
}

void baton__shm_wake_stats(const baton_shm *s, uint64_t *wakes_sent, uint64_t *naps_woken) {
    *wakes_sent = atomic_load_explicit(&s->wakes_sent, memory_order_relaxed);
    *naps_woken = atomic_load_explicit(&s->naps_woken, memory_order_relaxed);
}

/* ---- announcements and descriptor checks --------------------------------------------------------- */

_Static_assert(sizeof(baton_shm_rank) % BATON_SHM_CACHELINE == 0, "rank blocks are whole cache lines");
_Static_assert(sizeof(baton_shm_small_hdr) == BATON_SHM_SMALL_DATA, "small slot header size");

void baton__shm_announce(baton_shm *s, uint64_t seq, const uint8_t desc[BATON_SHM_DESC_BYTES]) {
    baton_shm_rank *me = &s->ranks[s->local_rank];
    baton_shm_desc *slot = &me->desc[seq % BATON_SHM_DESC_RING];
    atomic_store_explicit(&slot->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(slot->bytes, desc, BATON_SHM_DESC_BYTES);
    atomic_store_explicit(&slot->seq, seq, memory_order_release);
    atomic_store_explicit(&me->announced, seq, memory_order_release);
}

/* A reader copies the entry between two reads of its sequence number; a writer clears the number before it
 * rewrites the bytes, so an entry read whole under the same number twice is one writer's. */
int baton__shm_announced(baton_shm *s, int r, uint64_t seq, uint8_t out[BATON_SHM_DESC_BYTES], uint64_t *latest) {
    *latest = atomic_load_explicit(&s->ranks[r].announced, memory_order_acquire);
    if (*latest < seq) return 0;
    baton_shm_desc *slot = &s->ranks[r].desc[seq % BATON_SHM_DESC_RING];
    if (atomic_load_explicit(&slot->seq, memory_order_acquire) != seq) return 0;
    memcpy(out, slot->bytes, BATON_SHM_DESC_BYTES);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&slot->seq, memory_order_relaxed) == seq;
}

void baton__shm_set_peer_check(baton_shm *s, int (*check)(void *ctx, int local_rank), void *ctx) {
    s->peer_check = check;
    s->peer_ctx = ctx;
}

static int check_waited(baton_shm *s, int r) {
    return s->peer_check && r != s->local_rank ? s->peer_check(s->peer_ctx, r) : BATON_OK;
}

void baton__shm_small_publish(baton_shm_small_hdr *h, uint64_t flag, const uint8_t desc[BATON_SHM_DESC_BYTES]) {
    memcpy(h->desc, desc, BATON_SHM_DESC_BYTES);
    atomic_store_explicit(&h->flag, flag, memory_order_release);
}

void baton__shm_abort(baton_shm *s, const char *reason) {
    uint32_t expect = 0;
    if (!atomic_compare_exchange_strong(&s->hdr->aborted, &expect, 1)) return;
    snprintf(s->hdr->reason, sizeof s->hdr->reason, "rank %d: %s", s->global_ranks[s->local_rank], reason);
    atomic_store_explicit(&s->hdr->aborted, 2, memory_order_release);
}

static int check_abort(baton_shm *s) {
    uint32_t a = atomic_load_explicit(&s->hdr->aborted, memory_order_acquire);
    if (a == 0) return BATON_OK;
    while (a == 1) {
        baton__cpu_relax();
        a = atomic_load_explicit(&s->hdr->aborted, memory_order_acquire);
    }
    return baton__fail(BATON_ECANCELED, "the job was aborted by %s", s->hdr->reason);
}

static int peer_alive(baton_shm *s, int r) {
    pid_t pid = s->ranks[r].pid;
    if (pid <= 0) return 1;
    return !(kill(pid, 0) != 0 && errno == ESRCH);
}

/* The slow part of a wait: backs off; now and then checks the abort word, the deadline, and whether the
 * ranks still behind are alive. Returns a status to stop with, or BATON_OK to keep waiting. */
typedef struct {
    baton_backoff b;
    uint64_t next_liveness;
    int cursor;             /* where the next liveness check starts */
} waiter;

/* Ranks checked per liveness tick: all of them each tick made 512 waiters send 512 x 512 signals every 20 ms;
 * a rotating window finds a dead rank among 512 within 64 ticks. */
enum { LIVENESS_PER_TICK = 8 };

static uint64_t word_at(const void *base, size_t stride, int r) {
    return atomic_load_explicit((_Atomic uint64_t *)((uint8_t *)base + (size_t)r * stride), memory_order_acquire);
}

/* The nap of a wait for rank r's counter (word at base + r * stride), spent asleep on r's futex word: r's
 * post wakes it at once instead of the nap running out (issue 10: with each rank bound to one CPU, the comm
 * thread of the rank that arrived first noticed its peer up to a 200 us nap late, twice per all-reduce).
 * The order: read the word's value, count this thread among r's sleepers, look at the counter once more,
 * sleep only if it is still short; baton__shm_post stores the counter and then looks at the sleepers. */
static void nap_on_counter(baton_shm *s, waiter *w, const void *base, size_t stride, int r, uint64_t v) {
    baton_shm_rank *rk = &s->ranks[r];
    uint32_t seen = atomic_load_explicit(&rk->wake, memory_order_seq_cst);
    atomic_fetch_add_explicit(&rk->sleepers, 1, memory_order_seq_cst);
    if (atomic_load_explicit((_Atomic uint64_t *)((uint8_t *)base + (size_t)r * stride), memory_order_seq_cst) < v &&
        baton__backoff_nap_on(&w->b, &rk->wake, seen))
        atomic_fetch_add_explicit(&s->naps_woken, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&rk->sleepers, 1, memory_order_seq_cst);
}

/* counters: base is the counter array of the rank blocks (posted by baton__shm_post, which wakes sleepers) */
static int waiter_step(baton_shm *s, waiter *w, const void *base, size_t stride, int r0, int r1, uint64_t v,
                       uint64_t deadline, int counters) {
    if (counters && s->wake && baton__backoff_naps(&w->b) && !baton__backoff_oversubscribed())
        nap_on_counter(s, w, base, stride, r0, v);
    else
        baton__backoff(&w->b);
    if (w->b.iter < 4000 && (w->b.iter & 255) != 0) return BATON_OK; /* cheap spin phase */
    int rc = check_abort(s);
    if (rc < 0) return rc;
    uint64_t now = baton__now_ns();
    if (now >= w->next_liveness) {
        w->next_liveness = now + LIVENESS_NS;
        int n = r1 - r0, checked = 0;
        if (w->cursor < r0 || w->cursor >= r1) w->cursor = r0;
        for (int i = 0; i < n && checked < LIVENESS_PER_TICK; i++) {
            int r = w->cursor;
            w->cursor = w->cursor + 1 < r1 ? w->cursor + 1 : r0;
            if (word_at(base, stride, r) >= v) continue;
            checked++;
            if ((rc = check_waited(s, r)) < 0) return rc;
            if (peer_alive(s, r)) continue;
            /* It may have posted and exited since its word was read: only a word still short is a death. */
            if (word_at(base, stride, r) >= v) continue;
            rc = baton__fail(BATON_EPEERDEAD, "rank %d (pid %d) died", s->global_ranks[r], (int)s->ranks[r].pid);
            baton__shm_abort(s, baton_last_error());
            return rc;
        }
    }
    if (now > deadline) {
        char behind[256];
        size_t len = 0;
        int count = 0;
        behind[0] = '\0';
        for (int r = r0; r < r1 && len < sizeof behind - 16; r++)
            if (word_at(base, stride, r) < v) {
                len += (size_t)snprintf(behind + len, sizeof behind - len, "%s%d", count ? ", " : "", s->global_ranks[r]);
                count++;
            }
        return baton__fail(BATON_ETIMEDOUT, "timed out waiting for rank%s %s", count > 1 ? "s" : "", behind);
    }
    return BATON_OK;
}

static int wait_range(baton_shm *s, const void *base, size_t stride, int r0, int r1, uint64_t v, uint64_t deadline,
                      int counters) {
    waiter w = {.next_liveness = 0};
    baton__backoff_init(&w.b);
    for (int r = r0; r < r1;) {
        if (word_at(base, stride, r) >= v) {
            r++;
            continue;
        }
        int rc = waiter_step(s, &w, base, stride, r, r1, v, deadline, counters);
        if (rc < 0) return rc;
    }
    return BATON_OK;
}

int baton__shm_wait_all_at(baton_shm *s, const void *base, size_t stride, uint64_t v, uint64_t deadline) {
    return wait_range(s, base, stride, 0, s->local_size, v, deadline, 0);
}

int baton__shm_wait_all(baton_shm *s, baton_shm_ctr c, uint64_t v, uint64_t deadline) {
    return wait_range(s, &s->ranks[0].ctr[c].v, sizeof(baton_shm_rank), 0, s->local_size, v, deadline, 1);
}

int baton__shm_wait_one(baton_shm *s, int r, baton_shm_ctr c, uint64_t v, uint64_t deadline) {
    return wait_range(s, &s->ranks[0].ctr[c].v, sizeof(baton_shm_rank), r, r + 1, v, deadline, 1);
}

/* ---- p2p transport over byte rings --------------------------------------------------------------- */

typedef struct {
    baton_transport base;
    baton_shm *shm;
    int g2l[];  /* [world] global rank -> local rank or -1 */
} shm_transport;

static baton_shm_chan_ctl *chan_ctl(baton_shm *s, int src, int dst) {
    return (baton_shm_chan_ctl *)(s->chans + ((size_t)src * (size_t)s->local_size + (size_t)dst) * s->chan_stride);
}

static uint8_t *chan_data(baton_shm *s, int src, int dst) {
    return (uint8_t *)chan_ctl(s, src, dst) + sizeof(baton_shm_chan_ctl);
}

/* One byte of every page of [p, p + bytes) (bytes > 0), the last byte's page included. */
static void touch_written(void *p, size_t bytes, size_t page) {
    for (size_t o = 0; o < bytes; o += page) __atomic_fetch_add((uint8_t *)p + o, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add((uint8_t *)p + bytes - 1, 0, __ATOMIC_RELAXED);
}

static uint8_t touch_read(const void *p, size_t bytes, size_t page) {
    const volatile uint8_t *v = p;
    uint8_t sink = v[bytes - 1];
    for (size_t o = 0; o < bytes; o += page) sink ^= v[o];
    return sink;
}

void baton__shm_prefault(baton_shm *s) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    int me = s->local_rank, L = s->local_size;
    uint8_t sink = 0;
    for (int r = 0; r < L; r++) {
        for (int b = 0; b < 2; b++) {
            if (r == me) {
                touch_written(baton__shm_small(s, r, b), BATON_SHM_SMALL_BYTES, page);
                touch_written(baton__shm_stage(s, r, b), BATON_SHM_STAGE_BYTES, page);
            } else if (L <= BATON_SHM_PREFAULT_PEERS) {
                sink ^= touch_read(baton__shm_small(s, r, b), BATON_SHM_SMALL_BYTES, page);
                sink ^= touch_read(baton__shm_stage(s, r, b), BATON_SHM_STAGE_BYTES, page);
            }
        }
        if (r == me) continue;
        touch_written(chan_data(s, me, r), s->chan_bytes, page);
        sink ^= touch_read(chan_data(s, r, me), s->chan_bytes, page);
    }
    (void)sink;
}

enum { CHAN_PIECE = 64 << 10 }; /* publish progress at least this often so the peer can start early */

/* Could a sendrecv move bytes now: room in the outgoing ring, or bytes in the incoming one? */
static int ring_moves(baton_shm_chan_ctl *out, baton_shm_chan_ctl *in, uint64_t cap, int sending, int receiving) {
    if (sending && atomic_load_explicit(&out->head.v, memory_order_relaxed) -
                           atomic_load_explicit(&out->tail.v, memory_order_acquire) < cap)
        return 1;
    return receiving && atomic_load_explicit(&in->head.v, memory_order_acquire) !=
                            atomic_load_explicit(&in->tail.v, memory_order_relaxed);
}

static int shm_sendrecv(baton_transport *t, int speer, const void *sbuf, size_t sbytes, int rpeer, void *rbuf,
                        size_t rbytes, uint64_t deadline, const baton_recv_progress *progress) {
    shm_transport *st = (shm_transport *)t;
    baton_shm *s = st->shm;
    int me = s->local_rank;
    if (speer < 0) sbytes = 0;
    if (rpeer < 0) rbytes = 0;
    int sl = -1, rl = -1;
    if (sbytes) {
        if (speer >= t->world || (sl = st->g2l[speer]) < 0)
            return baton__fail(BATON_EINVAL, "shm transport: rank %d is not on this node", speer);
    }
    if (rbytes) {
        if (rpeer >= t->world || (rl = st->g2l[rpeer]) < 0)
            return baton__fail(BATON_EINVAL, "shm transport: rank %d is not on this node", rpeer);
    }
    baton_shm_chan_ctl *out = sbytes ? chan_ctl(s, me, sl) : NULL;
    baton_shm_chan_ctl *in = rbytes ? chan_ctl(s, rl, me) : NULL;
    uint8_t *outd = sbytes ? chan_data(s, me, sl) : NULL;
    uint8_t *ind = rbytes ? chan_data(s, rl, me) : NULL;
    /* With a message header set, each message is [header][payload]; the receiver checks the header with
     * its validator before it copies a payload byte. */
    const baton_msg_hdr *mh = t->hdr;
    uint8_t shdr[BATON_MSG_HDR_MAX], rhdr[BATON_MSG_HDR_MAX];
    if (mh && mh->bytes > BATON_MSG_HDR_MAX)
        return baton__fail(BATON_EINVAL, "shm transport: message header of %zu bytes is too long", mh->bytes);
    size_t shl = mh && sbytes ? mh->bytes : 0, rhl = mh && rbytes ? mh->bytes : 0;
    if (shl) mh->pack(mh->ctx, shdr, sbytes);
    size_t stotal = shl + sbytes, rtotal = rhl + rbytes; /* bytes of this message in each direction */
    const uint8_t *sp = sbuf;
    uint8_t *rp = rbuf;
    size_t sent = 0, got = 0, reported = 0;
    const uint64_t cap = s->chan_bytes;
    waiter w = {.next_liveness = 0};
    baton__backoff_init(&w.b);
    while (sent < stotal || got < rtotal) {
        int moved = 0;
        if (sent < stotal) {
            uint64_t head = atomic_load_explicit(&out->head.v, memory_order_relaxed);
            uint64_t tail = atomic_load_explicit(&out->tail.v, memory_order_acquire);
            uint64_t space = cap - (head - tail);
            if (space > 0) {
                uint64_t pos = head % cap;
                /* the header and the payload are two pieces of one stream */
                const uint8_t *from = sent < shl ? shdr + sent : sp + (sent - shl);
                size_t n = sent < shl ? shl - sent : stotal - sent;
                if (n > space) n = (size_t)space;
                if (n > cap - pos) n = (size_t)(cap - pos);
                if (n > CHAN_PIECE) n = CHAN_PIECE;
                memcpy(outd + pos, from, n);
                atomic_store_explicit(&out->head.v, head + n, memory_order_release);
                sent += n;
                moved = 1;
            }
        }
        if (got < rtotal) {
            uint64_t tail = atomic_load_explicit(&in->tail.v, memory_order_relaxed);
            uint64_t head = atomic_load_explicit(&in->head.v, memory_order_acquire);
            uint64_t avail = head - tail;
            if (avail > 0) {
                uint64_t pos = tail % cap;
                uint8_t *to = got < rhl ? rhdr + got : rp + (got - rhl);
                size_t n = got < rhl ? rhl - got : rtotal - got;
                if (n > avail) n = (size_t)avail;
                if (n > cap - pos) n = (size_t)(cap - pos);
                if (n > CHAN_PIECE) n = CHAN_PIECE;
                memcpy(to, ind + pos, n);
                atomic_store_explicit(&in->tail.v, tail + n, memory_order_release);
                got += n;
                moved = 1;
                if (rhl && got == rhl) {
                    int rc = mh->check(mh->ctx, rhdr, rbytes, rpeer);
                    if (rc < 0) return rc;
                }
                if (got > rhl) baton__progress(progress, &reported, got - rhl, rbytes);
            }
        }
        if (moved) {
            baton__backoff_init(&w.b);
            continue;
        }
        /* Nothing moved: wait, watching the peers we depend on. */
        int who[2], nwho = 0;
        if (sent < stotal) who[nwho++] = sl;
        if (got < rtotal && rl != sl) who[nwho++] = rl;
        baton__backoff(&w.b);
        if (w.b.iter < 4000 && (w.b.iter & 255) != 0) continue;
        int rc = check_abort(s);
        if (rc < 0) return rc;
        uint64_t now = baton__now_ns();
        if (now >= w.next_liveness) {
            w.next_liveness = now + LIVENESS_NS;
            int gone = 0;
            for (int i = 0; i < nwho; i++) {
                if ((rc = check_waited(s, who[i])) < 0) return rc;
                if (!peer_alive(s, who[i])) gone = 1;
            }
            /* A peer that wrote its last bytes (or made room) and exited a moment ago is gone but done:
             * look at the rings once more; only a peer that is gone with nothing left to move failed us. */
            if (gone && !ring_moves(out, in, cap, sent < stotal, got < rtotal)) {
                for (int i = 0; i < nwho; i++) {
                    if (peer_alive(s, who[i])) continue;
                    rc = baton__fail(BATON_EPEERDEAD, "rank %d (pid %d) died", s->global_ranks[who[i]],
                                     (int)s->ranks[who[i]].pid);
                    baton__shm_abort(s, baton_last_error());
                    return rc;
                }
            }
        }
        if (now > deadline)
            return baton__fail(BATON_ETIMEDOUT, "timed out %s rank %d", sent < stotal ? "sending to" : "receiving from",
                               sent < stotal ? speer : rpeer);
    }
    return BATON_OK;
}

static void shm_tp_close(baton_transport *t) { free(t); }

static const baton_transport_ops shm_ops = {"shm", shm_sendrecv, shm_tp_close};

int baton__shm_transport_create(baton_shm *shm, int rank, int world, const int *g2l, baton_transport **out) {
    shm_transport *t = calloc(1, sizeof *t + sizeof(int) * (size_t)world);
    if (!t) return baton__fail(BATON_ENOMEM, "shm transport: out of memory");
    t->base.ops = &shm_ops;
    t->base.rank = rank;
    t->base.world = world;
    t->shm = shm;
    memcpy(t->g2l, g2l, sizeof(int) * (size_t)world);
    *out = &t->base;
    return BATON_OK;
}
