/* tcp.c: the TCP transport (see tcp.h): mesh setup with an HMAC handshake, and a poll()-driven
 * sendrecv that progresses one send and one receive at the same time. */
#include "transport/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

enum {
    HELLO_BYTES = 40,
    CHALLENGE_BYTES = 56,
    MAC_BYTES = 32,
    NONCE_BYTES = 16,
    VERDICT_BYTES = 4,
    PROTO_VERSION = 1,
    HANDSHAKE_MAX_S = 10,   /* one connection's handshake may take at most this long (or the deadline) */
    MAX_WORLD = 1 << 20,
};
static const uint8_t MAGIC[4] = {'B', 'T', 'N', '1'};

enum { REFUSE_OK = 0, REFUSE_DEST = 1, REFUSE_SRC = 2, REFUSE_DUP = 3, REFUSE_AUTH = 4 };
static const char *refuse_name(uint32_t st) {
    switch (st) {
    case REFUSE_DEST: return "wrong destination rank or world size";
    case REFUSE_SRC: return "impossible source rank";
    case REFUSE_DUP: return "duplicate source rank";
    case REFUSE_AUTH: return "authentication failed (wrong job secret?)";
    }
    return "unknown refusal";
}

typedef struct {
    baton_transport base;
    int *fds;          /* [world] socket per peer; -1: not connected (yet), and for this rank */
    uint64_t spin_ns;  /* busy-poll budget before blocking in ppoll */
    int yield_spin;    /* the busy-poll yields the CPU between polls (this node's ranks outnumber its CPUs) */
    int respin;        /* spin again after every wake-up (ranks on this host <= cores), else once per call */
    int listen_fd;     /* our own duplicate of the rank's listening socket; -1 when no higher rank can come */
    int bufsz;         /* BATON_TCP_BUF_KB in bytes (0: kernel autotuning) */
    int cc_mode;       /* BATON_TCP_CC: CC_AUTO, CC_SYSTEM or CC_NAMED (cc) */
    char cc[16];       /* the congestion control named (TCP_CA_NAME_MAX) */
    int nsock;         /* connections open */
    uint8_t secret[BATON_TCP_SECRET_BYTES];
    baton_tcp_addr_fn addr_of;   /* where a lower rank listens (asked on first use) */
    void *addr_ctx;
    char **addrs;      /* [world] copies of the addresses given up front (baton__tcp_transport_create), or NULL */
} tcp_transport;

/* ---- small helpers ------------------------------------------------------------------------------- */


static int set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return baton__fail(BATON_ESYS, "tcp: fcntl(O_NONBLOCK): %s", strerror(errno));
    return BATON_OK;
}

/* Socket buffer size from BATON_TCP_BUF_KB (0 = kernel autotuning). */
static int buf_bytes(int *out) {
    long kb = 0;
    int rc = baton__env_long("BATON_TCP_BUF_KB", 0, 0, 1L << 20, &kb);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    *out = (int)(kb * 1024);
    return BATON_OK;
}

static void set_bufs(int fd, int bytes) {
    if (bytes <= 0) return;
    /* Best effort: the kernel caps at net.core.[rw]mem_max; the FORCE variants lift that for root. */
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

enum { CC_AUTO = 0, CC_SYSTEM = 1, CC_NAMED = 2 };

/* BATON_TCP_CC: unset or "auto" (replace BBR, see set_cc), "system" (the kernel's default), or a name. */
static int cc_from_env(int *mode, char *name, size_t cap) {
    const char *v = getenv("BATON_TCP_CC");
    *mode = CC_AUTO;
    name[0] = '\0';
    if (!v || !*v || !strcmp(v, "auto")) return BATON_OK;
    if (!strcmp(v, "system")) { *mode = CC_SYSTEM; return BATON_OK; }
    size_t n = strlen(v);
    int ok = n < cap;
    for (size_t i = 0; ok && i < n; i++) ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_';
    if (!ok)
        return baton__fail(BATON_EINVAL, "BATON_TCP_CC: '%s' is not a congestion control name (expected auto, system, "
                           "or a name such as cubic or reno, at most %zu characters)", v, cap - 1);
    memcpy(name, v, n + 1);
    *mode = CC_NAMED;
    /* refuse an unusable name now, with one clear message, rather than at the first connection */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return baton__fail(BATON_ESYS, "tcp: socket: %s", strerror(errno));
    int rc = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)n), err = errno;
    close(fd);
    if (rc < 0)
        return baton__fail(BATON_EINVAL, "BATON_TCP_CC: the kernel refuses congestion control '%s': %s (see "
                           "/proc/sys/net/ipv4/tcp_available_congestion_control and tcp_allowed_congestion_control; "
                           "'system' keeps the kernel's default)", name, strerror(err));
    return BATON_OK;
}

/* The congestion control of a data socket. BBR (the kernel's default here) paces every burst at the
 * rate its model estimated from the previous ones; a collective's messages are bursts with idle gaps
 * (application-limited), and on loopback its estimate swung between 8 and 260 Gbit/s within one job, so
 * an exchange took 2-2.5x longer at 1-4 MiB and depended on what ran before it on the same socket
 * (docs/algorithms.md, "TCP congestion control"). CC_AUTO replaces any bbr* with cubic, or reno where an unprivileged process
 * may not choose cubic (reno is always allowed); other choices of the host are left alone. */
static int set_cc(int fd, int mode, const char *name) {
    if (mode == CC_SYSTEM) return BATON_OK;
    if (mode == CC_NAMED) {
        if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
            return baton__fail(BATON_ESYS, "tcp: setsockopt(TCP_CONGESTION, %s) (BATON_TCP_CC): %s", name,
                               strerror(errno));
        return BATON_OK;
    }
    char cur[16] = "";
    socklen_t len = sizeof cur - 1;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) < 0 || strncmp(cur, "bbr", 3) != 0) return BATON_OK;
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5) < 0)
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);   /* best effort: else the kernel's */
    return BATON_OK;
}

static int set_stream_opts(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        return baton__fail(BATON_ESYS, "tcp: setsockopt(TCP_NODELAY): %s", strerror(errno));
    return set_nonblock(fd);
}

int baton__tcp_split_addr(const char *addr, char *host, size_t hostcap, int *port) {
    if (!addr || !*addr) return baton__fail(BATON_EINVAL, "tcp: empty peer address (expected host:port)");
    const char *colon, *hs = addr, *he;
    if (addr[0] == '[') {
        he = strchr(addr, ']');
        if (!he || he[1] != ':') return baton__fail(BATON_EINVAL, "tcp: bad address '%s' (expected [v6]:port)", addr);
        hs = addr + 1;
        colon = he + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon) return baton__fail(BATON_EINVAL, "tcp: bad address '%s' (expected host:port)", addr);
        he = colon;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl + 1 > hostcap)
        return baton__fail(BATON_EINVAL, "tcp: bad host in address '%s' (empty or longer than %zu)", addr, hostcap - 1);
    long p;
    if (baton__parse_long(colon + 1, 1, 65535, &p) < 0)
        return baton__fail(BATON_EINVAL, "tcp: bad port in address '%s' (expected 1..65535)", addr);
    memcpy(host, hs, hl);
    host[hl] = '\0';
    *port = (int)p;
    return BATON_OK;
}

/* Waits until fd is ready for `events` or the deadline passes. Returns BATON_OK or BATON_ETIMEDOUT
 * (no detail; the caller names the peer). */
static int wait_fd(int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = baton__now_ns();
        if (now >= deadline) return BATON_ETIMEDOUT;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        struct pollfd p = {fd, events, 0};
        int k = ppoll(&p, 1, deadline == UINT64_MAX ? NULL : &ts, NULL);
        if (k > 0) return BATON_OK;
        if (k < 0 && errno != EINTR) return baton__fail(BATON_ESYS, "tcp: poll: %s", strerror(errno));
    }
}

/* Exact-length transfer on a non-blocking socket during the handshake. BATON_EPEERDEAD on EOF/reset,
 * BATON_ETIMEDOUT at the deadline; no detail (the caller names the peer). */
static int xfer_full(int fd, void *buf, size_t n, int writing, uint64_t deadline) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, n - done, 0);
        if (k > 0) { done += (size_t)k; continue; }
        if (k == 0 && !writing) return BATON_EPEERDEAD;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return BATON_EPEERDEAD;
        int rc = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
        if (rc < 0) return rc;
    }
    return BATON_OK;
}

static void mac(uint8_t out[MAC_BYTES], const uint8_t *secret, const char *label, const uint8_t *hello,
                const uint8_t *nonce_a) {
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, secret, BATON_TCP_SECRET_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, 3);
    crypto_auth_hmacsha256_update(&st, hello, HELLO_BYTES);
    crypto_auth_hmacsha256_update(&st, nonce_a, NONCE_BYTES);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

/* ---- connecting side ----------------------------------------------------------------------------- */

static int dial(const tcp_transport *t, const char *addr, int peer, uint64_t deadline, int *fd_out) {
    char host[256];
    int port;
    if (baton__tcp_split_addr(addr, host, sizeof host, &port) < 0)
        return baton__fail_ctx(BATON_EINVAL, "rank %d's address: ", peer);
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, ports, &hints, &res);
    if (gai != 0)
        return baton__fail(BATON_EINVAL, "tcp: cannot resolve rank %d's host '%s': %s", peer, host, gai_strerror(gai));
    uint32_t nap_ms = 1;
    int last_err = 0;
    for (;;) {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) { last_err = errno; continue; }
            set_bufs(fd, t->bufsz);
            if (set_stream_opts(fd) < 0 || set_cc(fd, t->cc_mode, t->cc) < 0) {
                close(fd);
                freeaddrinfo(res);
                return BATON_ESYS;
            }
            int k = connect(fd, ai->ai_addr, ai->ai_addrlen);
            if (k < 0 && errno == EINPROGRESS) {
                int rc = wait_fd(fd, POLLOUT, deadline);
                if (rc < 0) {
                    close(fd);
                    freeaddrinfo(res);
                    return rc == BATON_ETIMEDOUT
                               ? baton__fail(rc, "tcp: timed out connecting to rank %d at %s", peer, addr)
                               : rc;
                }
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                k = err ? -1 : 0;
                errno = err;
            }
            if (k == 0) { freeaddrinfo(res); *fd_out = fd; return BATON_OK; }
            last_err = errno;
            close(fd);
        }
        if (baton__now_ns() + (uint64_t)nap_ms * 1000000ull >= deadline) break;
        baton__sleep_ns((uint64_t)nap_ms * 1000000ull);   /* refused: the peer may not listen yet */
        if (nap_ms < 200) nap_ms *= 2;
    }
    freeaddrinfo(res);
    return baton__fail(BATON_ETIMEDOUT, "tcp: could not connect to rank %d at %s before the deadline: %s", peer,
                       addr, strerror(last_err));
}

static int handshake_connect(int fd, int rank, int world, int peer, const uint8_t *secret, uint64_t deadline) {
    uint8_t hello[HELLO_BYTES] = {0}, ch[CHALLENGE_BYTES], resp[MAC_BYTES], want[MAC_BYTES], verdict[VERDICT_BYTES];
    memcpy(hello, MAGIC, 4);
    baton__put_le32(hello + 4, PROTO_VERSION);
    baton__put_le32(hello + 8, (uint32_t)rank);
    baton__put_le32(hello + 12, (uint32_t)peer);
    baton__put_le32(hello + 16, (uint32_t)world);
    randombytes_buf(hello + 24, NONCE_BYTES);
    int rc = xfer_full(fd, hello, sizeof hello, 1, deadline);
    if (rc == BATON_OK) rc = xfer_full(fd, ch, sizeof ch, 0, deadline);
    if (rc < 0) goto io_fail;
    if (memcmp(ch, MAGIC, 4) != 0)
        return baton__fail(BATON_EPROTO, "tcp: rank %d answered the handshake with a bad magic (not baton?)", peer);
    uint32_t st = baton__get_le32(ch + 4);
    if (st != REFUSE_OK)
        return baton__fail(st == REFUSE_AUTH ? BATON_EAUTH : BATON_EPROTO, "tcp: rank %d refused our connection: %s",
                           peer, refuse_name(st));
    mac(want, secret, "acc", hello, ch + 8);
    int acc_ok = sodium_memcmp(want, ch + 8 + NONCE_BYTES, MAC_BYTES) == 0;
    /* Answer even when the acceptor's MAC is wrong, so that it too learns (and reports) the mismatch. */
    mac(resp, secret, "con", hello, ch + 8);
    rc = xfer_full(fd, resp, sizeof resp, 1, deadline);
    if (rc == BATON_OK) rc = xfer_full(fd, verdict, sizeof verdict, 0, deadline);
    if (!acc_ok)
        return baton__fail(BATON_EAUTH, "tcp: rank %d failed authentication (its job secret differs from ours)", peer);
    if (rc < 0) goto io_fail;
    st = baton__get_le32(verdict);
    if (st != REFUSE_OK)
        return baton__fail(st == REFUSE_AUTH ? BATON_EAUTH : BATON_EPROTO, "tcp: rank %d refused our connection: %s",
                           peer, refuse_name(st));
    return BATON_OK;
io_fail:
    if (rc == BATON_ETIMEDOUT) return baton__fail(rc, "tcp: timed out in the handshake with rank %d", peer);
    if (rc == BATON_EPEERDEAD) return baton__fail(rc, "tcp: rank %d closed the connection during the handshake", peer);
    return rc;
}

/* ---- accepting side ------------------------------------------------------------------------------ */

/* Runs the acceptor's half on a fresh connection. Returns the authenticated source rank, or a negative
 * status with `why` filled (the connection is then to be closed). */
static int handshake_accept(int fd, int rank, int world, const int *fds, const uint8_t *secret, uint64_t deadline,
                            char *why, size_t whycap) {
    uint8_t hello[HELLO_BYTES], ch[CHALLENGE_BYTES] = {0}, resp[MAC_BYTES], want[MAC_BYTES], verdict[VERDICT_BYTES];
    int rc = xfer_full(fd, hello, sizeof hello, 0, deadline);
    if (rc < 0) {
        snprintf(why, whycap, "%s before its hello", rc == BATON_ETIMEDOUT ? "sent nothing" : "closed");
        return rc == BATON_ETIMEDOUT ? BATON_ETIMEDOUT : BATON_EPROTO;
    }
    if (memcmp(hello, MAGIC, 4) != 0 || baton__get_le32(hello + 4) != PROTO_VERSION) {
        snprintf(why, whycap, "sent a bad magic or version (not a baton rank of this version)");
        return BATON_EPROTO;
    }
    uint32_t from = baton__get_le32(hello + 8), to = baton__get_le32(hello + 12), w = baton__get_le32(hello + 16);
    uint32_t st = REFUSE_OK;
    if (to != (uint32_t)rank || w != (uint32_t)world) st = REFUSE_DEST;
    else if (from >= (uint32_t)world || from <= (uint32_t)rank) st = REFUSE_SRC;
    else if (fds[from] >= 0) st = REFUSE_DUP;
    memcpy(ch, MAGIC, 4);
    baton__put_le32(ch + 4, st);
    randombytes_buf(ch + 8, NONCE_BYTES);
    mac(ch + 8 + NONCE_BYTES, secret, "acc", hello, ch + 8);
    if (st != REFUSE_OK) {
        memset(ch + 8 + NONCE_BYTES, 0, MAC_BYTES);   /* a refused connector learns no MAC */
        xfer_full(fd, ch, sizeof ch, 1, deadline);
        snprintf(why, whycap, "claimed rank %u of world %u to rank %u: %s", from, w, to, refuse_name(st));
        return BATON_EPROTO;
    }
    rc = xfer_full(fd, ch, sizeof ch, 1, deadline);
    if (rc == BATON_OK) rc = xfer_full(fd, resp, sizeof resp, 0, deadline);
    if (rc < 0) {
        snprintf(why, whycap, "claiming rank %u %s during the handshake", from,
                 rc == BATON_ETIMEDOUT ? "stalled" : "closed the connection");
        return rc == BATON_ETIMEDOUT ? BATON_ETIMEDOUT : BATON_EPROTO;
    }
    mac(want, secret, "con", hello, ch + 8);
    int ok = sodium_memcmp(want, resp, MAC_BYTES) == 0;
    baton__put_le32(verdict, ok ? REFUSE_OK : REFUSE_AUTH);
    rc = xfer_full(fd, verdict, sizeof verdict, 1, deadline);
    if (!ok) {
        snprintf(why, whycap, "claiming rank %u failed authentication (wrong job secret?)", from);
        return BATON_EAUTH;
    }
    if (rc < 0) {
        snprintf(why, whycap, "claiming rank %u closed the connection during the handshake", from);
        return BATON_EPROTO;
    }
    return (int)from;
}

static void peer_name(const struct sockaddr_storage *ss, char *buf, size_t cap) {
    char h[128] = "?", p[16] = "?";
    getnameinfo((const struct sockaddr *)ss, sizeof *ss, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, cap, "%s:%s", h, p);
}

/* Accepts one pending connection (the listening socket is non-blocking) and runs the acceptor's half of
 * the handshake. 1: a rank got in (t->fds[from] set); 0: nothing pending, or a connection was refused
 * (logged, and appended to `refused` when given); < 0: a system error. */
static int accept_one(tcp_transport *t, uint64_t deadline, char *refused, size_t refcap, int *refused_status) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(t->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return 0;
        if (errno == EMFILE || errno == ENFILE)
            return baton__fail(BATON_ESYS, "tcp: accept: %s (raise the open-file limit: ulimit -n)", strerror(errno));
        return baton__fail(BATON_ESYS, "tcp: accept: %s", strerror(errno));
    }
    set_bufs(fd, t->bufsz);
    if (set_stream_opts(fd) < 0 || set_cc(fd, t->cc_mode, t->cc) < 0) { close(fd); return BATON_ESYS; }
    uint64_t hs_deadline = baton__deadline_after(HANDSHAKE_MAX_S);
    if (hs_deadline > deadline) hs_deadline = deadline;
    char why[200];
    int from = handshake_accept(fd, t->base.rank, t->base.world, t->fds, t->secret, hs_deadline, why, sizeof why);
    if (from < 0) {
        char who[160];
        peer_name(&ss, who, sizeof who);
        BATON_WARN("tcp: refused a connection from %s: %s", who, why);
        size_t len = refused ? strlen(refused) : 0;
        if (refused && len < refcap - 1) snprintf(refused + len, refcap - len, "%s%s %s", len ? "; " : "", who, why);
        if (refused_status) {
            if (from == BATON_EAUTH) *refused_status = BATON_EAUTH;
            else if (!*refused_status) *refused_status = BATON_EPROTO;
        }
        close(fd);
        return 0;
    }
    t->fds[from] = fd;
    t->nsock++;
    BATON_DEBUG("tcp: rank %d accepted rank %d (%d socket%s open)", t->base.rank, from, t->nsock, t->nsock > 1 ? "s" : "");
    return 1;
}

/* Waits until every rank in [lo, hi) has connected (accepting whoever comes meanwhile). */
static int accept_until(tcp_transport *t, int lo, int hi, uint64_t deadline) {
    char refused[384] = "";
    int refused_status = 0;
    for (;;) {
        int missing = 0;
        for (int r = lo; r < hi; r++) missing += t->fds[r] < 0;
        if (!missing) return BATON_OK;
        int rc = accept_one(t, deadline, refused, sizeof refused, &refused_status);
        if (rc < 0) return rc;
        if (rc > 0) continue;
        rc = wait_fd(t->listen_fd, POLLIN, deadline);
        if (rc == BATON_ETIMEDOUT) {
            char list[160] = "";
            size_t len = 0;
            for (int r = lo; r < hi && len < sizeof list - 12; r++)
                if (t->fds[r] < 0) len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", r);
            if (refused[0])
                return baton__fail(refused_status ? refused_status : BATON_ETIMEDOUT,
                                   "tcp: rank(s) %s never connected before the deadline; refused: %s", list, refused);
            return baton__fail(BATON_ETIMEDOUT, "tcp: timed out waiting for rank(s) %s to connect", list);
        }
        if (rc < 0) return rc;
    }
}

/* The connection to `peer`, made on first use: a lower rank is dialled, a higher one is waited for (it
 * dials us). Any rank waiting in a sendrecv also accepts whoever dials it, so a rank that dials is only
 * ever waiting for a rank below it, and the chain of such waits ends. */
static int ensure_peer(tcp_transport *t, int peer, uint64_t deadline) {
    if (t->fds[peer] >= 0) return BATON_OK;
    if (peer > t->base.rank) {
        if (t->listen_fd < 0) return baton__fail(BATON_EINVAL, "tcp: rank %d cannot accept rank %d (no listener)",
                                                 t->base.rank, peer);
        return accept_until(t, peer, peer + 1, deadline);
    }
    char addr[320];
    int rc;
    if (t->addrs) snprintf(addr, sizeof addr, "%s", t->addrs[peer]);
    else if (!t->addr_of) return baton__fail(BATON_EINVAL, "tcp: no way to find rank %d's address", peer);
    else if ((rc = t->addr_of(t->addr_ctx, peer, addr, sizeof addr, deadline)) < 0) return rc;
    int fd = -1;
    if ((rc = dial(t, addr, peer, deadline, &fd)) < 0) return rc;
    if ((rc = handshake_connect(fd, t->base.rank, t->base.world, peer, t->secret, deadline)) < 0) {
        close(fd);
        return rc;
    }
    t->fds[peer] = fd;
    t->nsock++;
    BATON_DEBUG("tcp: rank %d connected to rank %d (%d socket%s open)", t->base.rank, peer, t->nsock,
                t->nsock > 1 ? "s" : "");
    return BATON_OK;
}

/* ---- data path ----------------------------------------------------------------------------------- */

static int io_error(int peer, int err, const char *what) {
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT || err == EHOSTUNREACH ||
        err == ECONNABORTED || err == ENETUNREACH)
        return baton__fail(BATON_EPEERDEAD, "connection to rank %d failed while %s: %s", peer, what, strerror(err));
    return baton__fail(BATON_ESYS, "tcp: %s rank %d: %s", what, peer, strerror(err));
}

static int tcp_sendrecv(baton_transport *bt, int speer, const void *sbuf, size_t sbytes, int rpeer, void *rbuf,
                        size_t rbytes, uint64_t deadline, const baton_recv_progress *progress) {
    tcp_transport *t = (tcp_transport *)bt;
    int world = bt->world;
    if (speer < 0 || sbytes == 0) { speer = -1; sbytes = 0; }
    if (rpeer < 0 || rbytes == 0) { rpeer = -1; rbytes = 0; }
    if (speer >= world || rpeer >= world)
        return baton__fail(BATON_EINVAL, "tcp: peer %d out of range (world %d)", speer >= world ? speer : rpeer, world);
    if (speer == bt->rank || rpeer == bt->rank) {
        if (speer == rpeer && sbytes == rbytes) {   /* a message to oneself */
            if (rbuf != sbuf) memmove(rbuf, sbuf, rbytes);
            size_t reported = 0;
            baton__progress(progress, &reported, rbytes, rbytes);
            return BATON_OK;
        }
        return baton__fail(BATON_EINVAL, "tcp: rank %d cannot send to / receive from itself here", bt->rank);
    }
    /* A lower peer not connected yet is dialled now; a higher one is waited for below, while the other
     * direction moves (a peer that never comes, e.g. one that runs another collective, must not keep us
     * from reading what the other peer sends: that is where a mismatch shows). */
    int rc0;
    if ((speer >= 0 && speer < bt->rank && (rc0 = ensure_peer(t, speer, deadline)) < 0) ||
        (rpeer >= 0 && rpeer < bt->rank && (rc0 = ensure_peer(t, rpeer, deadline)) < 0))
        return rc0;
    if (((speer > bt->rank && t->fds[speer] < 0) || (rpeer > bt->rank && t->fds[rpeer] < 0)) && t->listen_fd < 0)
        return baton__fail(BATON_EINVAL, "tcp: rank %d cannot accept connections (no listener)", bt->rank);
    int sfd = speer >= 0 ? t->fds[speer] : -1, rfd = rpeer >= 0 ? t->fds[rpeer] : -1;
    const char *sp = sbuf;
    char *rp = rbuf;
    size_t sdone = 0, rdone = 0;
    uint64_t spin_until = 0;
    int spun = 0;
    /* Message headers (bt->hdr, opaque here): a header goes out in front of the payload in the same
     * sendmsg; the incoming header is read into a bounce buffer together with up to FRAME_BOUNCE payload
     * bytes (one recv for small messages), checked by the header's validator, and only then is any
     * payload copied into rbuf. Never more than this message's bytes are read from the stream. */
    enum { FRAME_BOUNCE = 4096 };
    const baton_msg_hdr *mh = bt->hdr;
    const size_t hl = mh ? mh->bytes : 0;
    uint8_t shdr[BATON_MSG_HDR_MAX], bounce[BATON_MSG_HDR_MAX + FRAME_BOUNCE];
    size_t shdr_len = 0, shdr_done = 0, rb_len = 0, rb_want = 0, reported = 0;
    int rhdr_ok = 1;
    if (hl > BATON_MSG_HDR_MAX) return baton__fail(BATON_EINVAL, "tcp: message header of %zu bytes is too long", hl);
    if (mh && sbytes) {
        mh->pack(mh->ctx, shdr, sbytes);
        shdr_len = hl;
    }
    if (mh && rbytes) {
        rhdr_ok = 0;
        rb_want = hl + (rbytes < FRAME_BOUNCE ? rbytes : FRAME_BOUNCE);
    }
    while (shdr_done < shdr_len || sdone < sbytes || !rhdr_ok || rdone < rbytes) {
        int progressed = 0;
        if (sfd < 0 && speer >= 0) sfd = t->fds[speer];   /* a higher peer may have connected meanwhile */
        if (rfd < 0 && rpeer >= 0) rfd = t->fds[rpeer];
        if (sfd >= 0 && (shdr_done < shdr_len || sdone < sbytes)) {
            struct iovec iov[2];
            int niov = 0;
            if (shdr_done < shdr_len) iov[niov++] = (struct iovec){shdr + shdr_done, shdr_len - shdr_done};
            if (sdone < sbytes) iov[niov++] = (struct iovec){(void *)(sp + sdone), sbytes - sdone};
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
            ssize_t k = sendmsg(sfd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                size_t h = shdr_len - shdr_done < (size_t)k ? shdr_len - shdr_done : (size_t)k;
                shdr_done += h;
                sdone += (size_t)k - h;
                progressed = 1;
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return io_error(speer, errno, "sending");
            }
        }
        if (rfd < 0) {
            /* not connected yet: nothing to read */
        } else if (!rhdr_ok) {
            ssize_t k = recv(rfd, bounce + rb_len, rb_want - rb_len, MSG_DONTWAIT);
            if (k > 0) {
                rb_len += (size_t)k;
                progressed = 1;
                if (rb_len >= hl) {
                    int rc = mh->check(mh->ctx, bounce, rbytes, rpeer);
                    if (rc < 0) return rc;
                    rhdr_ok = 1;
                    rdone = rb_len - hl;
                    memcpy(rp, bounce + hl, rdone);
                    baton__progress(progress, &reported, rdone, rbytes);
                }
            } else if (k == 0) {
                return baton__fail(BATON_EPEERDEAD, "rank %d closed its connection (0 of %zu bytes received)", rpeer,
                                   rbytes);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return io_error(rpeer, errno, "receiving");
            }
        } else if (rdone < rbytes) {
            ssize_t k = recv(rfd, rp + rdone, rbytes - rdone, MSG_DONTWAIT);
            if (k > 0) {
                rdone += (size_t)k;
                progressed = 1;
                baton__progress(progress, &reported, rdone, rbytes);
            }
            else if (k == 0)
                return baton__fail(BATON_EPEERDEAD, "rank %d closed its connection (%zu of %zu bytes received)",
                                   rpeer, rdone, rbytes);
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return io_error(rpeer, errno, "receiving");
        }
        if (progressed) continue;
        uint64_t now = baton__now_ns();
        if (now >= deadline) {
            if ((speer >= 0 && sfd < 0) || (rpeer >= 0 && rfd < 0))
                return baton__fail(BATON_ETIMEDOUT, "timed out waiting for rank %d to connect",
                                   speer >= 0 && sfd < 0 ? speer : rpeer);
            if (rdone < rbytes && sdone < sbytes)
                return baton__fail(BATON_ETIMEDOUT,
                                   "timed out waiting for rank %d (received %zu of %zu bytes) and rank %d (sent %zu of "
                                   "%zu bytes)", rpeer, rdone, rbytes, speer, sdone, sbytes);
            if (rdone < rbytes)
                return baton__fail(BATON_ETIMEDOUT, "timed out waiting for rank %d (received %zu of %zu bytes)", rpeer,
                                   rdone, rbytes);
            return baton__fail(BATON_ETIMEDOUT, "timed out waiting for rank %d to take our data (sent %zu of %zu bytes)",
                               speer, sdone, sbytes);
        }
        if (!spun) { spun = 1; spin_until = now + t->spin_ns; }
        if (now < spin_until) {
            if (t->yield_spin) sched_yield(); /* a rank sharing this CPU may be the one we wait for */
            else baton__cpu_relax();
            continue;
        }
        struct pollfd p[3];
        int np = 0;
        if (sfd >= 0 && (shdr_done < shdr_len || sdone < sbytes)) p[np++] = (struct pollfd){sfd, POLLOUT, 0};
        if (rfd >= 0 && (!rhdr_ok || rdone < rbytes)) {
            if (np && p[0].fd == rfd) p[0].events |= POLLIN;
            else p[np++] = (struct pollfd){rfd, POLLIN, 0};
        }
        /* while we wait, a rank that needs us may dial: let it in (see ensure_peer) */
        int lp = t->listen_fd >= 0 ? np : -1;
        if (lp >= 0) p[np++] = (struct pollfd){t->listen_fd, POLLIN, 0};
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        int k = ppoll(p, (nfds_t)np, deadline == UINT64_MAX ? NULL : &ts, NULL);
        if (k < 0 && errno != EINTR) return baton__fail(BATON_ESYS, "tcp: poll: %s", strerror(errno));
        if (k > 0 && lp >= 0 && (p[lp].revents & POLLIN)) {
            int rc = accept_one(t, deadline, NULL, 0, NULL);
            if (rc < 0) return rc;
        }
        /* With a core per rank, spinning again after each wake-up keeps a large transfer off the slow
         * sleep/wake path; with more ranks than cores it would burn the CPU its peer needs. */
        if (t->respin) spun = 0;
    }
    return BATON_OK;
}

static void tcp_close(baton_transport *bt);
static const baton_transport_ops tcp_ops = {"tcp", tcp_sendrecv, tcp_close};

static void tcp_close(baton_transport *bt) {
    if (!bt) return;
    tcp_transport *t = (tcp_transport *)bt;
    if (t->fds && bt->world > 1) {
        char peers[256] = "";
        size_t len = 0;
        for (int r = 0; r < bt->world && len < sizeof peers - 16; r++)
            if (t->fds[r] >= 0) len += (size_t)snprintf(peers + len, sizeof peers - len, "%s%d", len ? " " : "", r);
        BATON_DEBUG("tcp: rank %d used %d socket%s of %d peers (ranks %s%s)", bt->rank, t->nsock,
                    t->nsock == 1 ? "" : "s", bt->world - 1, len ? peers : "none", len >= sizeof peers - 16 ? " ..." : "");
    }
    for (int r = 0; t->fds && r < bt->world; r++)
        if (t->fds[r] >= 0) close(t->fds[r]);
    if (t->listen_fd >= 0) close(t->listen_fd);
    if (t->addrs)
        for (int r = 0; r < bt->world; r++) free(t->addrs[r]);
    free(t->addrs);
    sodium_memzero(t->secret, sizeof t->secret);
    free(t->fds);
    free(t);
}

int baton__tcp_sockets(const baton_transport *bt) {
    return bt && bt->ops == &tcp_ops ? ((const tcp_transport *)bt)->nsock : -1;
}

int baton__tcp_congestion(const baton_transport *bt, int peer, char *out, size_t cap) {
    if (!bt || bt->ops != &tcp_ops || peer < 0 || peer >= bt->world || !out || cap < 2)
        return baton__fail(BATON_EINVAL, "tcp: no socket to peer %d", peer);
    const tcp_transport *t = (const tcp_transport *)bt;
    if (t->fds[peer] < 0) return baton__fail(BATON_EINVAL, "tcp: no socket to peer %d", peer);
    memset(out, 0, cap);
    socklen_t len = (socklen_t)(cap - 1);
    if (getsockopt(t->fds[peer], IPPROTO_TCP, TCP_CONGESTION, out, &len) < 0)
        return baton__fail(BATON_ESYS, "tcp: getsockopt(TCP_CONGESTION): %s", strerror(errno));
    return BATON_OK;
}


/* ---- setup --------------------------------------------------------------------------------------- */

int baton__tcp_listen(const char *bind_host, int *port_out, int *fd_out) {
    if (!port_out || !fd_out) return baton__fail(BATON_EINVAL, "tcp: listen needs port and fd outputs");
    if (sodium_init() < 0) return baton__fail(BATON_ESYS, "tcp: libsodium failed to initialize");
    int bufsz;
    int rc = buf_bytes(&bufsz);
    if (rc < 0) return rc;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const char *h = bind_host && *bind_host ? bind_host : NULL;
    int gai = getaddrinfo(h, "0", &hints, &res);
    if (gai != 0)
        return baton__fail(BATON_EINVAL, "tcp: cannot resolve bind host '%s': %s", h ? h : "*", gai_strerror(gai));
    int last_err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) { last_err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        set_bufs(fd, bufsz);   /* inherited by accepted sockets (window scale is fixed at SYN time) */
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0 || set_nonblock(fd) < 0) {
            last_err = errno;
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) { last_err = errno; close(fd); continue; }
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
        *fd_out = fd;
        freeaddrinfo(res);
        return BATON_OK;
    }
    freeaddrinfo(res);
    return baton__fail(BATON_ESYS, "tcp: cannot listen on '%s': %s", h ? h : "*", strerror(last_err));
}

/* The transport without connections: cfg checked, knobs read, the listener duplicated. */
static int tcp_new(const baton_tcp_config *cfg, tcp_transport **out) {
    int rank = cfg->rank, world = cfg->world;
    if (!cfg->secret || world < 1 || world > MAX_WORLD || rank < 0 || rank >= world)
        return baton__fail(BATON_EINVAL, "tcp: bad transport arguments (rank %d, world %d)", rank, world);
    if (rank < world - 1 && cfg->listen_fd < 0)
        return baton__fail(BATON_EINVAL, "tcp: rank %d needs a listening socket", rank);
    if (sodium_init() < 0) return baton__fail(BATON_ESYS, "tcp: libsodium failed to initialize");
    long spin_us = 50;
    int rc = baton__env_long("BATON_TCP_SPIN_US", 50, 0, 10000, &spin_us);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    if (rc == BATON_ENOTFOUND && baton__backoff_oversubscribed()) spin_us = 0; /* the spin takes a peer's core */
    int bufsz, cc_mode;
    char cc[16];
    if ((rc = buf_bytes(&bufsz)) < 0) return rc;
    if ((rc = cc_from_env(&cc_mode, cc, sizeof cc)) < 0) return rc;
    long respin = -1;
    if ((rc = baton__env_long("BATON_TCP_RESPIN", -1, 0, 1, &respin)) < 0 && rc != BATON_ENOTFOUND) return rc;
    if (respin < 0) {   /* the ranks on this host share its cores */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        respin = (cfg->ranks_on_host > 0 ? cfg->ranks_on_host : world) <= (cores > 0 ? cores : 1);
    }
    tcp_transport *t = calloc(1, sizeof *t);
    int *fds = calloc((size_t)world, sizeof *fds);
    if (!t || !fds) {
        free(t);
        free(fds);
        return baton__fail(BATON_ENOMEM, "tcp: out of memory for %d peers", world);
    }
    for (int r = 0; r < world; r++) fds[r] = -1;
    t->base.ops = &tcp_ops;
    t->base.rank = rank;
    t->base.world = world;
    t->fds = fds;
    t->spin_ns = (uint64_t)spin_us * 1000u;
    /* With more ranks than CPUs a pause loop holds a CPU that a rank we wait for may share; polling between
     * sched_yield calls hands it over and still catches the data without a sleep and wake-up (rd, 3 ranks on 2
     * cores, 8 bytes: 103 us with pauses, 45 us with no spin, 28 us with yields; docs/measurements/plan-history.md,
     * "Waits with more ranks than CPUs"). */
    t->yield_spin = baton__backoff_cpus_shared();
    t->respin = (int)respin;
    t->bufsz = bufsz;
    t->cc_mode = cc_mode;
    memcpy(t->cc, cc, sizeof cc);
    t->listen_fd = -1;
    memcpy(t->secret, cfg->secret, BATON_TCP_SECRET_BYTES);
    t->addr_of = cfg->addr_of;
    t->addr_ctx = cfg->addr_ctx;
    if (rank < world - 1 && (t->listen_fd = fcntl(cfg->listen_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        rc = baton__fail(BATON_ESYS, "tcp: dup of the listening socket: %s", strerror(errno));
        tcp_close(&t->base);
        return rc;
    }
    *out = t;
    return BATON_OK;
}

int baton__tcp_transport_open(const baton_tcp_config *cfg, baton_transport **out) {
    if (!cfg || !out) return baton__fail(BATON_EINVAL, "tcp: transport_open needs a config and an output");
    if (!cfg->addr_of && cfg->world > 1) return baton__fail(BATON_EINVAL, "tcp: no address lookup for the peers");
    tcp_transport *t;
    int rc = tcp_new(cfg, &t);
    if (rc < 0) return rc;
    *out = &t->base;
    return BATON_OK;
}

int baton__tcp_transport_create(int rank, int world, int listen_fd, const char *const *peer_addrs,
                                const uint8_t secret[BATON_TCP_SECRET_BYTES], uint64_t deadline,
                                baton_transport **out) {
    if (!out) return baton__fail(BATON_EINVAL, "tcp: transport_create needs an output");
    if (world > 1 && !peer_addrs) return baton__fail(BATON_EINVAL, "tcp: peer addresses missing");
    /* ranks that publish this rank's host share its cores */
    int local = 0;
    char me[256], h[256];
    int port;
    if (world > 1 && rank >= 0 && rank < world &&
        baton__tcp_split_addr(peer_addrs[rank], me, sizeof me, &port) == BATON_OK)
        for (int r = 0; r < world; r++)
            if (baton__tcp_split_addr(peer_addrs[r], h, sizeof h, &port) == BATON_OK && !strcmp(h, me)) local++;
    baton_tcp_config cfg = {.rank = rank, .world = world, .listen_fd = listen_fd, .secret = secret,
                            .ranks_on_host = local};
    tcp_transport *t;
    int rc = tcp_new(&cfg, &t);
    if (rc < 0) return rc;
    if (world > 1 && !(t->addrs = calloc((size_t)world, sizeof *t->addrs))) {
        tcp_close(&t->base);
        return baton__fail(BATON_ENOMEM, "tcp: out of memory for %d addresses", world);
    }
    for (int r = 0; r < world && world > 1; r++)
        if (r != rank && !(t->addrs[r] = strdup(peer_addrs[r] ? peer_addrs[r] : ""))) {
            tcp_close(&t->base);
            return baton__fail(BATON_ENOMEM, "tcp: out of memory for %d addresses", world);
        }
    for (int r = 0; r < rank; r++)
        if ((rc = ensure_peer(t, r, deadline)) < 0) goto fail;
    if (rank < world - 1 && (rc = accept_until(t, rank + 1, world, deadline)) < 0) goto fail;
    *out = &t->base;
    return BATON_OK;
fail:
    tcp_close(&t->base);
    return rc;
}
