/* mpi_plugin.c: the MPI transport (see mpi.h), built into build/libbaton-mpi.so with mpicc.openmpi and
 * loaded by libbaton only when --transport mpi is asked for. It calls nothing of libbaton's: errors are
 * reported through the host's fail(). Not part of libbaton.a (the Makefile filters it out). */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baton/status.h"
#include "transport/mpi.h"

enum {
    PREFIX_BYTES = 16,                 /* u64 payload bytes, u32 segment bytes, u32 reserved */
    FIRST_BYTES = 16 << 10,            /* payload carried by the first message of each send */
    STAGE_BYTES = PREFIX_BYTES + BATON_MSG_HDR_MAX + FIRST_BYTES,
    TAG = 0x6261,                      /* every message (order per pair of ranks is MPI's non-overtaking rule) */
    NAP_MIN_NS = 10000, NAP_MAX_NS = 200000, /* idle naps between tests, after the spin */
    BUSY_NS = 50000,                         /* the spin's first part polls without yielding */
};

static const baton_mpi_host *host_;
static int we_initialized_, finalized_;
static MPI_Comm comm_ = MPI_COMM_NULL;
static int mpi_yields_; /* MPI's own progress yields the CPU when idle (Open MPI's mpi_yield_when_idle) */
static char library_[MPI_MAX_LIBRARY_VERSION_STRING] = "?";

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int mpi_fail(int status, int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return host_->fail(status, "mpi: %s: %s", what, msg);
}

/* ---- init under a watchdog --------------------------------------------------------------------------- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static int wd_done;
static double wd_timeout_s;

static void *init_watchdog(void *arg) {
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)wd_timeout_s;
    until.tv_nsec += (long)((wd_timeout_s - (double)(time_t)wd_timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&wd_mu);
    int rc = 0;
    while (!wd_done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&wd_cv, &wd_mu, &until);
    int done = wd_done;
    pthread_mutex_unlock(&wd_mu);
    if (!done) {
        /* MPI_Init cannot be interrupted: the process ends, so that the job fails instead of hanging. */
        char msg[300];
        int n = snprintf(msg, sizeof msg,
                         "baton: MPI_Init did not return within %.3g s (BATON_JOIN_TIMEOUT): is every rank started "
                         "by the same mpirun, and can the nodes reach each other? Exiting.\n",
                         wd_timeout_s);
        if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */ }
        _exit(1);
    }
    return NULL;
}

/* Open MPI reads its MCA parameters from OMPI_MCA_<name> when MPI_Init runs: baton's defaults for its own
 * traffic pattern (docs/cluster.md, "The MPI transport"), each only when the user did not set it (mpirun
 * --mca, -x, the environment or a parameter file all end up in the environment or win over it). */
static void mca_defaults(void) {
    static const char *const defaults[][2] = {
        {"OMPI_MCA_btl_tcp_eager_limit", "2097152"},
        {"OMPI_MCA_btl_tcp_rndv_eager_limit", "2097152"},
        {"OMPI_MCA_btl_tcp_max_send_size", "2097152"},
    };
    if (getenv("BATON_MPI_MCA_DEFAULTS") && !strcmp(getenv("BATON_MPI_MCA_DEFAULTS"), "0")) return;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) setenv(defaults[i][0], defaults[i][1], 0);
}

/* Whether MPI's progress engine calls sched_yield when it finds nothing to do: Open MPI does when its ranks
 * outnumber the slots it was given (mpi_yield_when_idle, a control variable read through MPI_T). Then a wait
 * yields at every test already, and a sched_yield of our own doubled the context switches, which this VM makes
 * expensive (3 ranks on 2 cores, 8 bytes: 42-48 us with both, 17-18 us with Open MPI's alone). 0 when it
 * cannot be read. */
static int read_mpi_yields(void) {
    int provided = 0, idx = -1, yes = 0;
    if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 0;
    char name[64];
    int name_len = sizeof name, verbosity, bind, scope, desc_len = 0;
    MPI_Datatype dt;
    MPI_T_enum en;
    if (MPI_T_cvar_get_index("mpi_yield_when_idle", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_get_info(idx, name, &name_len, &verbosity, &dt, &en, NULL, &desc_len, &bind, &scope) ==
            MPI_SUCCESS &&
        bind == MPI_T_BIND_NO_OBJECT) {
        MPI_T_cvar_handle h;
        int count = 0;
        if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
            if (count == 1 && dt == MPI_C_BOOL) {
                _Bool v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) yes = v;
            } else if (count == 1 && dt == MPI_INT) {
                int v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) yes = v != 0;
            }
            MPI_T_cvar_handle_free(&h);
        }
    }
    MPI_T_finalize();
    return yes;
}

static int plugin_init(double timeout_s, int *rank, int *world) {
    if (finalized_)
        return host_->fail(BATON_EUNSUPPORTED, "mpi: MPI was finalized when an earlier communicator was freed; "
                                               "a process can use the MPI transport for one communicator");
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        mca_defaults();
        pthread_t wd;
        wd_timeout_s = timeout_s;
        wd_done = 0;
        int have_wd = pthread_create(&wd, NULL, init_watchdog, NULL) == 0;
        int provided = 0;
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (have_wd) {
            pthread_mutex_lock(&wd_mu);
            wd_done = 1;
            pthread_cond_signal(&wd_cv);
            pthread_mutex_unlock(&wd_mu);
            pthread_join(wd, NULL);
        }
        if (rc != MPI_SUCCESS) return host_->fail(BATON_ESYS, "mpi: MPI_Init_thread failed (%d)", rc);
        we_initialized_ = 1;
        if (provided < MPI_THREAD_SERIALIZED)
            return host_->fail(BATON_EUNSUPPORTED, "mpi: the MPI library gives thread level %d, baton needs "
                                                   "MPI_THREAD_SERIALIZED (its collectives run on its comm thread)",
                               provided);
    } else {
        int provided = 0;
        MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_SERIALIZED)
            return host_->fail(BATON_EUNSUPPORTED, "mpi: the program initialized MPI with thread level %d; baton "
                                                   "needs MPI_THREAD_SERIALIZED (MPI_Init_thread)",
                               provided);
    }
    if (comm_ == MPI_COMM_NULL) {
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_)) != MPI_SUCCESS) return mpi_fail(BATON_ESYS, rc, "MPI_Comm_dup");
        MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    }
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, "\n,")] = '\0';
    snprintf(library_, sizeof library_, "%s", ver);
    MPI_Comm_rank(comm_, rank);
    MPI_Comm_size(comm_, world);
    mpi_yields_ = read_mpi_yields();
    return BATON_OK;
}

static int plugin_bcast(void *buf, size_t bytes, int root) {
    if (bytes > (size_t)1 << 30) return host_->fail(BATON_EINVAL, "mpi: bootstrap broadcast of %zu bytes", bytes);
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm_);
    return rc == MPI_SUCCESS ? BATON_OK : mpi_fail(BATON_EPEERDEAD, rc, "bootstrap broadcast");
}

static void plugin_finalize(void) {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    int fin = 0;
    MPI_Finalized(&fin);
    if (we_initialized_ && !fin) MPI_Finalize();
    finalized_ = we_initialized_;
}

/* ---- the transport ----------------------------------------------------------------------------------- */

typedef struct {
    baton_transport base;
    size_t seg;                        /* segment size this rank sends with (BATON_MPI_SEG_KB) */
    int spin_us;                       /* poll this long before napping between tests (BATON_MPI_SPIN_US) */
    int nap_spin_us;                   /* the same for a thread whose waits nap (host wait_mode NAP) */
    MPI_Request *req;                  /* [cap] */
    int *idx;                          /* [cap] Testsome's output */
    MPI_Status *st;                    /* [cap] */
    uint8_t *seg_done;                 /* [cap] receive segments complete */
    int cap;
    uint8_t sstage[STAGE_BYTES], rstage[STAGE_BYTES];
    int broken;
} mpi_tp;

static int grow(mpi_tp *t, int n) {
    if (n <= t->cap) return BATON_OK;
    int cap = n < 64 ? 64 : n;
    MPI_Request *r = realloc(t->req, (size_t)cap * sizeof *r);
    if (r) t->req = r;
    int *ix = realloc(t->idx, (size_t)cap * sizeof *ix);
    if (ix) t->idx = ix;
    MPI_Status *s = realloc(t->st, (size_t)cap * sizeof *s);
    if (s) t->st = s;
    uint8_t *d = realloc(t->seg_done, (size_t)cap);
    if (d) t->seg_done = d;
    if (!r || !ix || !s || !d) return host_->fail(BATON_ENOMEM, "mpi: out of memory for %d requests", n);
    t->cap = cap;
    return BATON_OK;
}

static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static size_t nsegs(size_t rest, size_t seg) { return rest == 0 ? 0 : (rest + seg - 1) / seg; }

/* How long a wait of a thread in host wait mode `mode` polls before its naps, and how much of that busily
 * (BUSY_NS at most, none when ranks share CPUs); the rest polls between sched_yield calls. */
static void wait_budget(const mpi_tp *t, int mode, uint64_t *spin_ns, uint64_t *busy_ns) {
    *spin_ns = (uint64_t)(mode == BATON_MPI_WAIT_NAP ? t->nap_spin_us : t->spin_us) * 1000;
    *busy_ns = mode == BATON_MPI_WAIT_YIELD ? 0 : *spin_ns < BUSY_NS ? *spin_ns : BUSY_NS;
}

static int fail_broken(mpi_tp *t, int rc) {
    t->broken = 1;
    return rc;
}

/* Request layout of one sendrecv: [0] the first send, [1 .. ns] send segments, [ns+1] the first receive,
 * [ns+2 ..] receive segments (posted once the first receive has been checked). */
static int mpi_sendrecv(baton_transport *bt, int speer, const void *sbuf, size_t sbytes, int rpeer, void *rbuf,
                        size_t rbytes, uint64_t deadline_ns, const baton_recv_progress *progress) {
    mpi_tp *t = (mpi_tp *)bt;
    if (t->broken) return host_->fail(BATON_ECANCELED, "mpi: transport unusable after an earlier failure");
    int do_send = speer >= 0 && sbytes > 0, do_recv = rpeer >= 0 && rbytes > 0;
    if ((do_send && (speer >= bt->world || speer == bt->rank)) || (do_recv && (rpeer >= bt->world || rpeer == bt->rank)))
        return host_->fail(BATON_EINVAL, "mpi: sendrecv with peer %d/%d from rank %d", do_send ? speer : rpeer,
                           bt->world, bt->rank);
    const baton_msg_hdr *hdr = bt->hdr;
    size_t hb = hdr ? hdr->bytes : 0;
    size_t sfirst = do_send ? (sbytes < FIRST_BYTES ? sbytes : FIRST_BYTES) : 0;
    int ns = do_send ? (int)nsegs(sbytes - sfirst, t->seg) : 0;
    int rc = grow(t, ns + 2);
    if (rc < 0) return rc;
    int nreq = ns + 2;
    for (int i = 0; i < nreq; i++) t->req[i] = MPI_REQUEST_NULL;
    int pending = 0, mrc;
    if (do_send) {
        uint8_t *p = t->sstage;
        memset(p, 0, PREFIX_BYTES);
        put_u64(p, sbytes);
        put_u64(p + 8, t->seg);
        if (hdr) hdr->pack(hdr->ctx, p + PREFIX_BYTES, sbytes);
        memcpy(p + PREFIX_BYTES + hb, sbuf, sfirst);
        if ((mrc = MPI_Isend(p, (int)(PREFIX_BYTES + hb + sfirst), MPI_BYTE, speer, TAG, comm_, &t->req[0])) != MPI_SUCCESS)
            return fail_broken(t, mpi_fail(BATON_EPEERDEAD, mrc, "send"));
        pending++;
        const uint8_t *s = (const uint8_t *)sbuf + sfirst;
        size_t left = sbytes - sfirst;
        for (int i = 0; i < ns; i++) {
            size_t n = left < t->seg ? left : t->seg;
            if ((mrc = MPI_Isend(s, (int)n, MPI_BYTE, speer, TAG, comm_, &t->req[1 + i])) != MPI_SUCCESS)
                return fail_broken(t, mpi_fail(BATON_EPEERDEAD, mrc, "send"));
            pending++;
            s += n;
            left -= n;
        }
    }
    int rfirst_i = ns + 1;
    if (do_recv) {
        if ((mrc = MPI_Irecv(t->rstage, STAGE_BYTES, MPI_BYTE, rpeer, TAG, comm_, &t->req[rfirst_i])) != MPI_SUCCESS)
            return fail_broken(t, mpi_fail(BATON_EPEERDEAD, mrc, "receive"));
        pending++;
    }
    size_t reported = 0, rseg = 0, rfirst = 0;
    int nrsegs = 0, next_seg = 0; /* receive segments: count, and the first not yet reported */
    uint64_t spin_ns, busy_ns; /* then the yielding part of the poll, unless MPI's progress yields itself */
    wait_budget(t, host_->wait_mode(), &spin_ns, &busy_ns);
    uint64_t now0 = now_ns(), spin_until = now0 + spin_ns, busy_until = now0 + busy_ns, nap_ns = 0;
    while (pending > 0) {
        int outcount = 0;
        mrc = MPI_Testsome(nreq, t->req, &outcount, t->idx, t->st);
        if (mrc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING] = "";
            int len = 0;
            MPI_Error_string(mrc, msg, &len);
            if (do_send && do_recv && speer != rpeer)
                return fail_broken(t, host_->fail(BATON_EPEERDEAD, "mpi: transfer with rank %d or rank %d failed: %s",
                                                  rpeer, speer, msg));
            return fail_broken(t, host_->fail(BATON_EPEERDEAD, "mpi: transfer with rank %d failed: %s",
                                              do_recv ? rpeer : speer, msg));
        }
        if (outcount == MPI_UNDEFINED) outcount = 0;
        int first_arrived = 0;
        for (int k = 0; k < outcount; k++) {
            int i = t->idx[k];
            pending--;
            if (i == rfirst_i) first_arrived = 1;
            else if (i > rfirst_i) t->seg_done[i - rfirst_i - 1] = 1;
        }
        if (first_arrived) {
            int got = 0;
            for (int k = 0; k < outcount; k++)
                if (t->idx[k] == rfirst_i) MPI_Get_count(&t->st[k], MPI_BYTE, &got);
            if (got < PREFIX_BYTES + (int)hb)
                return fail_broken(t, host_->fail(BATON_EPROTO, "mpi: rank %d sent a message of %d bytes, shorter "
                                                                "than its header", rpeer, got));
            uint64_t plen = get_u64(t->rstage), pseg = get_u64(t->rstage + 8);
            if (hdr && (rc = hdr->check(hdr->ctx, t->rstage + PREFIX_BYTES, rbytes, rpeer)) < 0)
                return fail_broken(t, rc);
            if (plen != rbytes)
                return fail_broken(t, host_->fail(BATON_EPROTO, "mpi: rank %d sent %llu bytes where %zu were "
                                                                "expected", rpeer, (unsigned long long)plen, rbytes));
            rfirst = rbytes < FIRST_BYTES ? rbytes : FIRST_BYTES;
            if ((size_t)got != PREFIX_BYTES + hb + rfirst || pseg < 4096 || pseg > (1u << 30))
                return fail_broken(t, host_->fail(BATON_EPROTO, "mpi: rank %d sent a malformed first message (%d "
                                                                "bytes, segment %llu)",
                                                  rpeer, got, (unsigned long long)pseg));
            memcpy(rbuf, t->rstage + PREFIX_BYTES + hb, rfirst);
            rseg = (size_t)pseg;
            nrsegs = (int)nsegs(rbytes - rfirst, rseg);
            if ((rc = grow(t, nreq + nrsegs)) < 0) return fail_broken(t, rc);
            uint8_t *d = (uint8_t *)rbuf + rfirst;
            size_t left = rbytes - rfirst;
            for (int s = 0; s < nrsegs; s++) {
                size_t n = left < rseg ? left : rseg;
                t->seg_done[s] = 0;
                if ((mrc = MPI_Irecv(d, (int)n, MPI_BYTE, rpeer, TAG, comm_, &t->req[nreq + s])) != MPI_SUCCESS)
                    return fail_broken(t, mpi_fail(BATON_EPEERDEAD, mrc, "receive"));
                d += n;
                left -= n;
            }
            nreq += nrsegs;
            pending += nrsegs;
            baton__progress(progress, &reported, rfirst, rbytes);
        }
        if (do_recv && rseg) {
            while (next_seg < nrsegs && t->seg_done[next_seg]) next_seg++;
            size_t done = rfirst + (size_t)next_seg * rseg;
            baton__progress(progress, &reported, done > rbytes ? rbytes : done, rbytes);
        }
        if (pending == 0) break;
        uint64_t now = now_ns();
        if (now > deadline_ns) {
            t->broken = 1;
            int sp = 0;
            for (int i = 0; i <= ns && do_send; i++) sp += t->req[i] != MPI_REQUEST_NULL;
            int rp = pending - sp;
            if (rp > 0 && sp > 0 && speer != rpeer)
                return host_->fail(BATON_ETIMEDOUT, "mpi: timed out waiting for rank %d (receive) and rank %d (send)",
                                   rpeer, speer);
            return host_->fail(BATON_ETIMEDOUT, "mpi: timed out waiting for rank %d (%s)", rp > 0 ? rpeer : speer,
                               rp > 0 && sp > 0 ? "send and receive" : rp > 0 ? "receive" : "send");
        }
        /* Idle: after the spin, nap with growing naps (10 us to 200 us, less than 25 KB at 1 Gbit/s), reset by
         * any completion. A rank that kept polling would compete for the cores with the ranks and kernel
         * work it waits for (the ranks can outnumber the cores); a sleeper is woken first. */
        if (outcount > 0) {
            nap_ns = 0;
            spin_until = now + spin_ns;
            busy_until = now + busy_ns;
        } else if (now <= spin_until) {
            if (now > busy_until && !mpi_yields_) sched_yield(); /* whoever we wait for may need this CPU */
        } else {
            nap_ns = nap_ns ? (nap_ns * 2 > NAP_MAX_NS ? NAP_MAX_NS : nap_ns * 2) : NAP_MIN_NS;
            struct timespec ts = {0, (long)nap_ns};
            nanosleep(&ts, NULL);
        }
    }
    return BATON_OK;
}

static void mpi_close(baton_transport *bt) {
    mpi_tp *t = (mpi_tp *)bt;
    if (!t) return;
    free(t->req);
    free(t->idx);
    free(t->st);
    free(t->seg_done);
    free(t);
}

static const baton_transport_ops mpi_ops = {.name = "mpi", .sendrecv = mpi_sendrecv, .close = mpi_close};

static long env_long(const char *name, long dflt, long min, long max) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    return v;
}

static int plugin_transport_open(int rank, int world, baton_transport **out) {
    *out = NULL;
    if (comm_ == MPI_COMM_NULL) return host_->fail(BATON_EINVAL, "mpi: transport opened before init");
    long seg_kb = env_long("BATON_MPI_SEG_KB", 1024, 4, 1 << 20);
    if (seg_kb < 0)
        return host_->fail(BATON_EINVAL, "BATON_MPI_SEG_KB='%s' must be a number of KiB in [4, 1048576]",
                           getenv("BATON_MPI_SEG_KB"));
    /* The poll before the naps outlasts the longest nap several times over. With 50 us, a wait that once ran
     * into its naps woke up to 200 us (plus the timer's slack) after its data came, made its peer's next wait
     * run into naps too, and so on: 2 ranks on one machine, 8 bytes, 150-220 us over Open MPI's shared memory
     * and 210 us over its TCP, against 1 and 15 us with 1 ms (docs/cluster.md). Past its first 50 us the poll
     * yields between tests: a busy 1 ms held a CPU that the ranks of the other simulated node needed (2 nodes
     * x 2 ranks on 2 cores, 8 bytes: 1240-1360 us). A thread whose waits nap (a comm thread sharing its CPU with
     * the caller's work) keeps 50 us: its polling takes that CPU from the work. */
    const char *spin_set = getenv("BATON_MPI_SPIN_US");
    long spin = env_long("BATON_MPI_SPIN_US", 1000, 0, 10000);
    if (spin < 0)
        return host_->fail(BATON_EINVAL, "BATON_MPI_SPIN_US='%s' must be a number of microseconds in [0, 10000]",
                           spin_set);
    mpi_tp *t = calloc(1, sizeof *t);
    if (!t) return host_->fail(BATON_ENOMEM, "mpi: out of memory");
    t->base.ops = &mpi_ops;
    t->base.rank = rank;
    t->base.world = world;
    t->seg = (size_t)seg_kb << 10;
    t->spin_us = (int)spin;
    t->nap_spin_us = spin_set && *spin_set ? (int)spin : 50;
    uint64_t spin_ns, busy_ns; /* this (opening) thread's */
    wait_budget(t, host_->wait_mode(), &spin_ns, &busy_ns);
    host_->debug("mpi: a wait polls for %d us, busy for the first %d and then between sched_yield calls (%d us on a "
                 "thread whose waits nap), then naps%s", (int)(spin_ns / 1000), (int)(busy_ns / 1000), t->nap_spin_us,
                 mpi_yields_ ? "; MPI yields in its own progress, so the poll does not" : "");
    if (grow(t, 64) < 0) {
        mpi_close(&t->base);
        return BATON_ENOMEM;
    }
    *out = &t->base;
    return BATON_OK;
}

static baton_mpi_plugin plugin_ = {
    .abi = BATON_MPI_PLUGIN_ABI,
    .library = library_,
    .init = plugin_init,
    .bcast = plugin_bcast,
    .transport_open = plugin_transport_open,
    .finalize = plugin_finalize,
};

__attribute__((visibility("default"))) const baton_mpi_plugin *baton_mpi_plugin_v1(const baton_mpi_host *host) {
    if (!host || host->abi != BATON_MPI_PLUGIN_ABI) return NULL;
    host_ = host;
    return &plugin_;
}
