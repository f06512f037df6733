/* tcp.c: the TCP transport (see tcp.h): mesh setup with an HMAC handshake, and a poll()-driven
 * sendrecv that progresses one send and one receive at the same time. */
#include "transport/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/frame.h"
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
    int *fds;          /* [world] socket per peer; -1 for this rank */
    uint64_t spin_ns;  /* busy-poll budget before blocking in ppoll */
    int respin;        /* spin again after every wake-up (ranks on this host <= cores), else once per call */
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

static int dial(const char *addr, int peer, uint64_t deadline, int bufsz, int *fd_out) {
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
            set_bufs(fd, bufsz);
            if (set_stream_opts(fd) < 0) { close(fd); freeaddrinfo(res); return BATON_ESYS; }
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

static int accept_all(tcp_transport *t, int listen_fd, const uint8_t *secret, uint64_t deadline, int bufsz) {
    int rank = t->base.rank, world = t->base.world;
    int missing = world - 1 - rank;
    char refused[384] = "";
    int refused_status = 0;
    while (missing > 0) {
        int rc = wait_fd(listen_fd, POLLIN, deadline);
        if (rc == BATON_ETIMEDOUT) {
            char list[160] = "";
            size_t len = 0;
            for (int r = rank + 1; r < world && len < sizeof list - 12; r++)
                if (t->fds[r] < 0) len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", r);
            if (refused[0])
                return baton__fail(refused_status ? refused_status : BATON_ETIMEDOUT,
                                   "tcp: rank(s) %s never connected before the deadline; refused: %s", list, refused);
            return baton__fail(BATON_ETIMEDOUT, "tcp: timed out waiting for rank(s) %s to connect", list);
        }
        if (rc < 0) return rc;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
            return baton__fail(BATON_ESYS, "tcp: accept: %s", strerror(errno));
        }
        set_bufs(fd, bufsz);
        if (set_stream_opts(fd) < 0) { close(fd); return BATON_ESYS; }
        uint64_t hs_deadline = baton__deadline_after(HANDSHAKE_MAX_S);
        if (hs_deadline > deadline) hs_deadline = deadline;
        char why[200];
        int from = handshake_accept(fd, rank, world, t->fds, secret, hs_deadline, why, sizeof why);
        if (from < 0) {
            char who[160];
            peer_name(&ss, who, sizeof who);
            BATON_WARN("tcp: refused a connection from %s: %s", who, why);
            size_t len = strlen(refused);
            if (len < sizeof refused - 1)
                snprintf(refused + len, sizeof refused - len, "%s%s %s", len ? "; " : "", who, why);
            if (from == BATON_EAUTH) refused_status = BATON_EAUTH;
            else if (!refused_status) refused_status = BATON_EPROTO;
            close(fd);
            continue;
        }
        t->fds[from] = fd;
        missing--;
    }
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
    int sfd = speer >= 0 ? t->fds[speer] : -1, rfd = rpeer >= 0 ? t->fds[rpeer] : -1;
    const char *sp = sbuf;
    char *rp = rbuf;
    size_t sdone = 0, rdone = 0;
    uint64_t spin_until = 0;
    int spun = 0;
    /* Framing (see comm/frame.h): a header goes out in front of the payload in the same sendmsg; the
     * incoming header is read into a bounce buffer together with up to FRAME_BOUNCE payload bytes (one
     * recv for small messages), checked, and only then is any payload copied into rbuf. Never more than
     * this message's bytes are read from the stream. */
    enum { FRAME_BOUNCE = 4096 };
    const baton_coll_desc *desc = (const baton_coll_desc *)bt->desc;
    uint8_t shdr[BATON_FRAME_BYTES], bounce[BATON_FRAME_BYTES + FRAME_BOUNCE];
    size_t shdr_len = 0, shdr_done = 0, rb_len = 0, rb_want = 0, reported = 0;
    int rhdr_ok = 1;
    if (desc && sbytes) {
        baton__frame_encode(shdr, desc, sbytes);
        shdr_len = BATON_FRAME_BYTES;
    }
    if (desc && rbytes) {
        rhdr_ok = 0;
        rb_want = BATON_FRAME_BYTES + (rbytes < FRAME_BOUNCE ? rbytes : FRAME_BOUNCE);
    }
    while (shdr_done < shdr_len || sdone < sbytes || !rhdr_ok || rdone < rbytes) {
        int progressed = 0;
        if (shdr_done < shdr_len || sdone < sbytes) {
            struct iovec iov[2];
            int niov = 0;
            if (shdr_done < shdr_len) iov[niov++] = (struct iovec){shdr + shdr_done, shdr_len - shdr_done};
            if (sdone < sbytes) iov[niov++] = (struct iovec){(void *)(sp + sdone), sbytes - sdone};
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
            ssize_t k = sendmsg(sfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                size_t h = shdr_len - shdr_done < (size_t)k ? shdr_len - shdr_done : (size_t)k;
                shdr_done += h;
                sdone += (size_t)k - h;
                progressed = 1;
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return io_error(speer, errno, "sending");
            }
        }
        if (!rhdr_ok) {
            ssize_t k = recv(rfd, bounce + rb_len, rb_want - rb_len, MSG_DONTWAIT);
            if (k > 0) {
                rb_len += (size_t)k;
                progressed = 1;
                if (rb_len >= BATON_FRAME_BYTES) {
                    int rc = baton__frame_check(desc, rbytes, bounce, rpeer);
                    if (rc < 0) return rc;
                    rhdr_ok = 1;
                    rdone = rb_len - BATON_FRAME_BYTES;
                    memcpy(rp, bounce + BATON_FRAME_BYTES, rdone);
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
        if (now < spin_until) { baton__cpu_relax(); continue; }
        struct pollfd p[2];
        int np = 0;
        if (shdr_done < shdr_len || sdone < sbytes) p[np++] = (struct pollfd){sfd, POLLOUT, 0};
        if (!rhdr_ok || rdone < rbytes) {
            if (np && p[0].fd == rfd) p[0].events |= POLLIN;
            else p[np++] = (struct pollfd){rfd, POLLIN, 0};
        }
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        int k = ppoll(p, (nfds_t)np, deadline == UINT64_MAX ? NULL : &ts, NULL);
        if (k < 0 && errno != EINTR) return baton__fail(BATON_ESYS, "tcp: poll: %s", strerror(errno));
        /* With a core per rank, spinning again after each wake-up keeps a large transfer off the slow
         * sleep/wake path; with more ranks than cores it would burn the CPU its peer needs. */
        if (t->respin) spun = 0;
    }
    return BATON_OK;
}

static void tcp_close(baton_transport *bt) {
    if (!bt) return;
    tcp_transport *t = (tcp_transport *)bt;
    for (int r = 0; r < bt->world; r++)
        if (t->fds[r] >= 0) close(t->fds[r]);
    free(t->fds);
    free(t);
}

static const baton_transport_ops tcp_ops = {"tcp", tcp_sendrecv, tcp_close};

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

int baton__tcp_transport_create(int rank, int world, int listen_fd, const char *const *peer_addrs,
                                const uint8_t secret[BATON_TCP_SECRET_BYTES], uint64_t deadline,
                                baton_transport **out) {
    if (!out || !secret || world < 1 || world > MAX_WORLD || rank < 0 || rank >= world)
        return baton__fail(BATON_EINVAL, "tcp: bad transport arguments (rank %d, world %d)", rank, world);
    if (world > 1 && !peer_addrs) return baton__fail(BATON_EINVAL, "tcp: peer addresses missing");
    if (rank < world - 1 && listen_fd < 0) return baton__fail(BATON_EINVAL, "tcp: rank %d needs a listening socket", rank);
    if (sodium_init() < 0) return baton__fail(BATON_ESYS, "tcp: libsodium failed to initialize");
    long spin_us = 50;
    int rc = baton__env_long("BATON_TCP_SPIN_US", 50, 0, 10000, &spin_us);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    int bufsz;
    if ((rc = buf_bytes(&bufsz)) < 0) return rc;
    long respin = -1;
    if ((rc = baton__env_long("BATON_TCP_RESPIN", -1, 0, 1, &respin)) < 0 && rc != BATON_ENOTFOUND) return rc;
    if (respin < 0) {   /* ranks that publish this rank's host share its cores */
        char me[256], h[256];
        int port, local = 0;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (world > 1 && baton__tcp_split_addr(peer_addrs[rank], me, sizeof me, &port) == BATON_OK)
            for (int r = 0; r < world; r++)
                if (baton__tcp_split_addr(peer_addrs[r], h, sizeof h, &port) == BATON_OK && !strcmp(h, me)) local++;
        respin = local <= (cores > 0 ? cores : 1);
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
    t->respin = (int)respin;
    for (int r = 0; r < rank; r++) {
        int fd = -1;
        rc = dial(peer_addrs[r], r, deadline, bufsz, &fd);
        if (rc < 0) goto fail;
        rc = handshake_connect(fd, rank, world, r, secret, deadline);
        if (rc < 0) { close(fd); goto fail; }
        fds[r] = fd;
    }
    if (rank < world - 1 && (rc = accept_all(t, listen_fd, secret, deadline, bufsz)) < 0) goto fail;
    *out = &t->base;
    return BATON_OK;
fail:
    tcp_close(&t->base);
    return rc;
}
