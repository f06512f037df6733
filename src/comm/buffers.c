/* buffers.c: memory the local ranks share. baton_buffer_alloc gives each rank a buffer of its own that every
 * local peer also maps (the zero-copy collectives read and write the peers' copies); baton_buffer_attach does
 * the same for memory the caller already shares through a file; baton_buffer_alloc_node gives the ranks of a
 * node one buffer between them (see include/baton/comm.h for who owns what). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "util/util.h"

/* ---- shared buffers -------------------------------------------------------------------------------- */

/* Collective: 1 when every rank's ok is nonzero, 0 when one's is not, -1 when the all-reduce fails. */
static int all_ok(baton_comm *c, int ok) {
    int64_t flag = ok != 0, all = 0;
    if (baton_allreduce(c, &flag, &all, 1, BATON_I64, BATON_MIN) < 0) return -1;
    return all != 0;
}

/* Collective: BATON_OK when every rank asked for len bytes, else a failure naming the sizes. */
static int same_size(baton_comm *c, size_t len, const char *what) {
    int64_t sz[2] = {(int64_t)len, -(int64_t)len}, agg[2];
    int rc = baton_allreduce(c, sz, agg, 2, BATON_I64, BATON_MAX);
    if (rc < 0) return rc;
    if (agg[0] != -agg[1])
        return baton__fail(BATON_EINVAL, "%s: ranks asked for different sizes (%lld to %lld bytes)", what,
                           (long long)-agg[1], (long long)agg[0]);
    return BATON_OK;
}

static void buffer_name(baton_comm *c, int rank, unsigned idx, char *out, size_t n) {
    snprintf(out, n, "/baton-%s-%d-b%d-%u", c->job_id, c->id.restart, rank, idx);
}

void *baton_buffer_alloc(baton_comm *c, size_t bytes) {
    static unsigned counter;
    if (!c || bytes == 0) return NULL;
    size_t len = (bytes + 4095) & ~(size_t)4095;
    baton_shm_buffer *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->bytes = len;
    if (!c->shm) { /* nobody to share with: ordinary memory */
        if (posix_memalign((void **)&b->local, 4096, len) != 0) {
            free(b);
            return NULL;
        }
        b->next = c->buffers;
        c->buffers = b;
        return b->local;
    }
    if (same_size(c, len, "baton_buffer_alloc") < 0) goto fail;
    unsigned idx = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    int L = c->local_size;
    b->peer = calloc((size_t)L, sizeof *b->peer);
    if (!b->peer) goto fail;
    char name[160];
    buffer_name(c, c->rank, idx, name, sizeof name);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600), ok = fd >= 0;
    if (ok && ftruncate(fd, (off_t)len) != 0) ok = 0;
    if (ok) {
        /* populated now: the owner writes all of it (a gradient slab, staging), and faulting it in page by page
         * in the first step cost up to a second for 200 MiB on this project's VMs (docs/zero.md). The peers'
         * mappings are left to fault in: each rank touches only its part of them. */
        b->local = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (b->local == MAP_FAILED) b->local = NULL, ok = 0;
    }
    if (fd >= 0) close(fd);
    if (all_ok(c, ok) != 1) {
        if (!ok) baton__fail(BATON_ESYS, "baton_buffer_alloc: cannot create %zu bytes of shared memory: %s", len, strerror(errno));
        goto fail_unlink;
    }
    ok = 1;
    for (int q = 0; q < L && ok; q++) {
        if (q == c->local_rank) {
            b->peer[q] = b->local;
            continue;
        }
        char pname[160];
        buffer_name(c, c->local_ranks[q], idx, pname, sizeof pname);
        int pfd = shm_open(pname, O_RDWR, 0600);
        if (pfd < 0) { ok = 0; break; }
        b->peer[q] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
        close(pfd);
        if (b->peer[q] == MAP_FAILED) b->peer[q] = NULL, ok = 0;
    }
    if (all_ok(c, ok) != 1) {
        baton__fail(BATON_ESYS, "baton_buffer_alloc: a rank could not map its peers' buffers");
        goto fail_unlink;
    }
    shm_unlink(name); /* everyone mapped it: nothing is left behind */
    b->next = c->buffers;
    c->buffers = b;
    return b->local;
fail_unlink:
    shm_unlink(name);
fail:
    if (b->peer)
        for (int q = 0; q < c->local_size; q++)
            if (b->peer[q] && b->peer[q] != b->local) munmap(b->peer[q], len);
    if (b->local) munmap(b->local, len);
    free(b->peer);
    free(b);
    return NULL;
}

/* One buffer per node: local rank 0 creates it, the others map it, every rank agrees it worked. The name is
 * unlinked once all have mapped it, so nothing outlives the job. */
void *baton_buffer_alloc_node(baton_comm *c, size_t bytes) {
    static unsigned counter;
    if (!c || bytes == 0 || c->world < 2) return NULL;
    size_t len = (bytes + 4095) & ~(size_t)4095;
    /* the same size everywhere, and every node able to share (else nobody does: the callers stay alike) */
    if (same_size(c, len, "baton_buffer_alloc_node") < 0 || all_ok(c, c->shm && c->local_size > 1) != 1) return NULL;
    unsigned idx = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    char name[160];
    snprintf(name, sizeof name, "/baton-%s-%d-n%d-%u", c->job_id, c->id.restart, c->local_ranks[0], idx);
    int creator = c->local_rank == 0, err = 0, flag = 1;
    uint8_t *m = NULL;
    if (creator) {   /* created before anyone looks for it */
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0) err = errno, flag = 0;
        if (fd >= 0) close(fd);
    }
    if (all_ok(c, flag) != 1) {
        if (creator && flag) shm_unlink(name);
        if (!flag) baton__fail(BATON_ESYS, "baton_buffer_alloc_node: cannot create %zu bytes of shared memory: %s", len, strerror(err));
        else baton__fail(BATON_ESYS, "baton_buffer_alloc_node: another node's rank could not create its buffer");
        return NULL;
    }
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
        /* populated now: every rank reads all of it (a parameter slab, in the first forward), and faulting it in
         * page by page there cost several hundred ms on this project's VMs (docs/zero.md); here it is one call */
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (m == MAP_FAILED) m = NULL;
        close(fd);
    }
    baton_shm_buffer *b = m ? calloc(1, sizeof *b) : NULL;
    int agreed = all_ok(c, b != NULL);
    if (creator) shm_unlink(name);   /* everyone has mapped it, or the buffer is given up */
    if (agreed != 1) {
        if (m) munmap(m, len);
        free(b);
        if (agreed == 0) baton__fail(BATON_ESYS, "baton_buffer_alloc_node: a rank could not map its node's buffer");
        return NULL;
    }
    b->local = m;
    b->bytes = len;
    b->node = 1;
    b->next = c->buffers;
    c->buffers = b;
    return m;
}

/* Unlinks b from the list and unmaps what this rank mapped for it (an attached buffer's own memory is the
 * caller's). The comm thread reads the list while it runs queued work: the caller drains the queue first. */
static void buffer_forget(baton_comm *c, baton_shm_buffer **pp) {
    baton_shm_buffer *b = *pp;
    *pp = b->next;
    if (b->node) {
        munmap(b->local, b->bytes);
    } else if (!b->peer) {
        if (!b->attached) free(b->local);
    } else {
        for (int q = 0; q < c->local_size; q++)
            if (b->peer[q] && !(b->attached && b->peer[q] == b->local)) munmap(b->peer[q], b->bytes);
        free(b->peer);
    }
    free(b);
}

/* Waits until the comm thread has finished everything queued (it may be reading the buffer list). */
static void drain(baton_comm *c) {
    if (!__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&c->mu);
    while (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE)) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void baton_buffer_free(baton_comm *c, void *p) {
    if (!c || !p) return;
    drain(c);
    for (baton_shm_buffer **pp = &c->buffers; *pp; pp = &(*pp)->next)
        if ((*pp)->local == p) {
            buffer_forget(c, pp);
            return;
        }
}

void baton_buffer_detach(baton_comm *c, void *p) {
    if (!c || !p) return;
    drain(c);
    for (baton_shm_buffer **pp = &c->buffers; *pp; pp = &(*pp)->next)
        if ((*pp)->attached && (*pp)->local == p) {
            buffer_forget(c, pp);
            return;
        }
}

/* Maps local rank q's attached file (its fd, read through /proc) and checks its first bytes against what q
 * published. NULL, with the reason in baton's error, if it cannot. */
static uint8_t *attach_peer(baton_comm *c, int q, int64_t fd, size_t bytes, int64_t first) {
    int pid = (int)baton__shm_rank_block(c->shm, q)->pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%lld", pid, (long long)fd);
    int pfd = open(path, O_RDWR | O_CLOEXEC);
    if (pfd < 0) {
        baton__fail(BATON_ESYS, "cannot open rank %d's file %s: %s", c->local_ranks[q], path, strerror(errno));
        return NULL;
    }
    struct stat st;
    uint8_t *m = MAP_FAILED;
    if (fstat(pfd, &st) == 0 && st.st_size >= 0 && (uint64_t)st.st_size >= bytes)
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
    else
        errno = EINVAL;
    int err = errno;
    close(pfd);
    if (m == MAP_FAILED) {
        baton__fail(BATON_ESYS, "cannot map %zu bytes of rank %d's file %s: %s", bytes, c->local_ranks[q], path,
                    strerror(err));
        return NULL;
    }
    int64_t seen = 0;
    memcpy(&seen, m, bytes < sizeof seen ? bytes : sizeof seen);
    if (seen != first) {
        munmap(m, bytes);
        baton__fail(BATON_EINVAL, "rank %d's fd %lld is not the memory it attached (its first bytes differ)",
                    c->local_ranks[q], (long long)fd);
        return NULL;
    }
    return m;
}

int baton_buffer_attach(baton_comm *c, void *buf, size_t bytes, int fd) {
    if (!c) return baton__fail(BATON_EINVAL, "baton_buffer_attach: communicator is NULL");
    if (c->world == 1) return BATON_OK; /* nobody to share with */
    uint8_t *p = buf;
    size_t off;
    /* what this rank offers: its fd, the size, its first bytes (the peers check they mapped the right file) */
    int64_t mine[3] = {fd, (int64_t)bytes, 0};
    const char *why = NULL;
    if (fd < 0 || !p || !bytes) why = "nothing to attach";
    else if (baton__shm_find_buffer(c, p, 1, &off) || baton__shm_find_buffer(c, p + bytes - 1, 1, &off))
        why = "the memory overlaps a shared buffer";
    if (why) mine[0] = -1;
    else memcpy(&mine[2], p, bytes < sizeof mine[2] ? bytes : sizeof mine[2]);
    int64_t *all = malloc(sizeof(int64_t) * 3 * (size_t)c->world);
    if (!all) return baton__fail(BATON_ENOMEM, "baton_buffer_attach: out of memory");
    int rc = baton_allgather(c, mine, all, 3, BATON_I64);
    if (rc < 0) {
        free(all);
        return rc;
    }
    for (int r = 0; r < c->world; r++) {
        if (all[3 * r] < 0) {
            free(all);
            return why ? baton__fail(BATON_EUNSUPPORTED, "baton_buffer_attach: %s", why)
                       : baton__fail(BATON_EUNSUPPORTED, "baton_buffer_attach: rank %d had nothing to attach", r);
        }
        if (all[3 * r + 1] != (int64_t)bytes) {
            rc = baton__fail(BATON_EINVAL, "baton_buffer_attach: ranks attach different sizes (%zu bytes here, %lld "
                                           "on rank %d)", bytes, (long long)all[3 * r + 1], r);
            free(all);
            return rc;
        }
    }
    baton_shm_buffer *b = NULL;
    int ok = 1;
    if (c->shm) {
        b = calloc(1, sizeof *b);
        if (b) b->peer = calloc((size_t)c->local_size, sizeof *b->peer);
        ok = b && b->peer;
        if (!ok) baton__fail(BATON_ENOMEM, "baton_buffer_attach: out of memory");
        for (int q = 0; ok && q < c->local_size; q++) {
            int r = c->local_ranks[q];
            b->peer[q] = q == c->local_rank ? p : attach_peer(c, q, all[3 * r], bytes, all[3 * r + 2]);
            ok = b->peer[q] != NULL;
        }
    }
    free(all);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", ok ? "" : baton_last_error());
    int64_t flag = ok, all_ok = 0;
    rc = baton_allreduce(c, &flag, &all_ok, 1, BATON_I64, BATON_MIN);
    if (rc >= 0 && !all_ok)
        rc = ok ? baton__fail(BATON_ESYS, "baton_buffer_attach: a local rank could not map this rank's memory")
                : baton__fail(BATON_ESYS, "baton_buffer_attach: %s", detail);
    if (rc < 0 || !b) {
        if (b) {
            b->attached = 1;
            b->local = p;
            b->bytes = bytes;
            b->next = NULL;
            baton_shm_buffer *one = b;
            buffer_forget(c, &one);
        }
        return rc < 0 ? rc : BATON_OK;
    }
    b->local = p;
    b->bytes = bytes;
    b->attached = 1;
    drain(c);
    b->next = c->buffers;
    c->buffers = b;
    return BATON_OK;
}
