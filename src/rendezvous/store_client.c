/* store_client.c: the rendezvous store's client: one blocking TCP connection, every read and write bounded
 * by a deadline (poll), one request in flight at a time (see store_proto.h for the wire format).
 *
 * Timeouts: connect retries refused / unreachable connections with a growing nap (10 ms .. 250 ms) until
 * its timeout_s. GET and BARRIER hand their timeout to the server, which parks the request and answers
 * BATON_ETIMEDOUT when it expires; the client itself waits that long plus its I/O timeout. timeout_s <= 0
 * means "do not wait" (GET answers from what is there now; BARRIER succeeds only if everybody is already
 * there). SET / CHECK / ADD / DELETE wait at most the I/O timeout: max(connect timeout_s, 30 s).
 * After a transport failure or an I/O timeout mid-request the connection is unusable: every later call
 * fails with BATON_EPEERDEAD; close it and connect again. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rendezvous/store_proto.h"
#include "util/util.h"

enum { MIN_IO_TIMEOUT_S = 30 };

struct baton_store {
    int fd;
    int broken;          /* a request failed mid-way: the stream is out of sync */
    uint32_t next_id;
    double io_timeout_s; /* bound for non-waiting requests, and the grace on top of waits */
    char peer[300];      /* "host:port" for messages */
};

/* Waits until fd is readable / writable or the deadline passes. */
static int wait_fd(int fd, short ev, uint64_t deadline) {
    for (;;) {
        uint64_t now = baton__now_ns();
        if (now >= deadline) return BATON_ETIMEDOUT;
        uint64_t left_ms = (deadline - now + 999999ull) / 1000000ull;
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms);
        if (r > 0) return BATON_OK;
        if (r < 0 && errno != EINTR) return baton__fail(BATON_ESYS, "store: poll: %s", strerror(errno));
    }
}

static int send_all(baton_store *st, const void *buf, size_t n, uint64_t deadline) {
    const char *p = buf;
    while (n > 0) {
        ssize_t r = send(st->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(st->fd, POLLOUT, deadline);
            if (rc == BATON_ETIMEDOUT) return baton__fail(rc, "store %s: send timed out", st->peer);
            if (rc < 0) return rc;
            continue;
        }
        return baton__fail(BATON_EPEERDEAD, "store %s: connection lost while sending (%s)", st->peer,
                           r < 0 ? strerror(errno) : "sent 0 bytes");
    }
    return BATON_OK;
}

static int recv_all(baton_store *st, void *buf, size_t n, uint64_t deadline) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(st->fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) return baton__fail(BATON_EPEERDEAD, "store %s: the server closed the connection", st->peer);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(st->fd, POLLIN, deadline);
            if (rc == BATON_ETIMEDOUT) return baton__fail(rc, "store %s: no answer from the server in time", st->peer);
            if (rc < 0) return rc;
            continue;
        }
        return baton__fail(BATON_EPEERDEAD, "store %s: connection lost (%s)", st->peer, strerror(errno));
    }
    return BATON_OK;
}

/* One non-blocking connect attempt to one address; BATON_OK, or < 0 with errno-ish detail in *err. */
static int try_connect(const struct addrinfo *a, uint64_t deadline, int *fd_out, int *err) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            *err = errno;
            close(fd);
            return -1;
        }
        /* a single attempt waits at most 2 s so that a lost SYN is retried */
        uint64_t d = baton__now_ns() + 2000000000ull;
        if (d > deadline) d = deadline;
        if (wait_fd(fd, POLLOUT, d) != BATON_OK) {
            *err = ETIMEDOUT;
            close(fd);
            return -1;
        }
        int so = 0;
        socklen_t sl = sizeof so;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
        if (so != 0) {
            *err = so;
            close(fd);
            return -1;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *fd_out = fd;
    return 0;
}

static int handshake(baton_store *st, const uint8_t *secret, size_t secret_len, uint64_t deadline) {
    unsigned char hello[STORE_HELLO_BYTES], auth[STORE_AUTH_BYTES], welcome[STORE_WELCOME_BYTES];
    uint8_t want[STORE_MAC_BYTES];
    int rc = recv_all(st, hello, sizeof hello, deadline);
    if (rc < 0) return baton__fail_ctx(rc, "during the handshake: ");
    if (baton__get_le32(hello) != STORE_HELLO_MAGIC)
        return baton__fail(BATON_EPROTO, "store %s: the peer is not a baton store (bad greeting); check the address",
                           st->peer);
    if (baton__get_le16(hello + 4) != STORE_VERSION)
        return baton__fail(BATON_EPROTO, "store %s: protocol version %u, this client speaks %u (mixed baton versions?)",
                           st->peer, baton__get_le16(hello + 4), STORE_VERSION);
    const uint8_t *snonce = hello + 8;
    baton__put_le32(auth, STORE_AUTH_MAGIC);
    baton__put_le16(auth + 4, STORE_VERSION);
    baton__put_le16(auth + 6, 0);
    randombytes_buf(auth + 8, STORE_NONCE_BYTES);
    rc = baton__store_mac(secret, secret_len, 'c', snonce, auth + 8, auth + 8 + STORE_NONCE_BYTES);
    if (rc < 0) return rc;
    rc = send_all(st, auth, sizeof auth, deadline);
    if (rc < 0) return rc;
    rc = recv_all(st, welcome, sizeof welcome, deadline);
    if (rc == BATON_EPEERDEAD)
        return baton__fail(BATON_EAUTH, "store %s: the server rejected our secret (is BATON_SECRET the same for "
                           "every worker and launcher of this job?)", st->peer);
    if (rc < 0) return rc;
    rc = baton__store_mac(secret, secret_len, 's', snonce, auth + 8, want);
    if (rc < 0) return rc;
    int ok = sodium_memcmp(want, welcome, sizeof want) == 0;
    sodium_memzero(want, sizeof want);
    if (!ok)
        return baton__fail(BATON_EAUTH, "store %s: the server could not prove it knows the job secret "
                           "(wrong BATON_SECRET, or another service on that port)", st->peer);
    return BATON_OK;
}

void baton_store_interrupt(baton_store *st) {
    if (st && st->fd >= 0) shutdown(st->fd, SHUT_RDWR);
}

int baton_store_peer_address(const baton_store *st, char *out, size_t n) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char buf[INET6_ADDRSTRLEN];
    if (!st || getpeername(st->fd, (struct sockaddr *)&ss, &len) != 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
        return baton__fail(BATON_ESYS, "store: cannot tell the server's address: %s", strerror(errno));
    const void *a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                                             : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    if (!inet_ntop(ss.ss_family, a, buf, sizeof buf))
        return baton__fail(BATON_ESYS, "store: cannot format the server's address: %s", strerror(errno));
    snprintf(out, n, ss.ss_family == AF_INET6 ? "[%s]" : "%s", buf);
    return BATON_OK;
}

int baton_store_connect(const char *host, int port, const uint8_t *secret, size_t secret_len, double timeout_s,
                        baton_store **out) {
    *out = NULL;
    int rc = baton__store_check_secret(secret, secret_len);
    if (rc < 0) return rc;
    if (!host || !*host) host = "127.0.0.1";
    if (port < 1 || port > 65535) return baton__fail(BATON_EINVAL, "store: port %d is not in 1..65535", port);
    if (!(timeout_s > 0)) timeout_s = 1;
    baton_store *st = calloc(1, sizeof *st);
    if (!st) return baton__fail(BATON_ENOMEM, "store: out of memory");
    st->fd = -1;
    st->io_timeout_s = timeout_s > MIN_IO_TIMEOUT_S ? timeout_s : MIN_IO_TIMEOUT_S;
    snprintf(st->peer, sizeof st->peer, "%s:%d", host, port);

    uint64_t deadline = baton__deadline_after(timeout_s);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    uint64_t nap = 10000000ull;
    int last_err = 0;
    for (;;) {
        struct addrinfo *ai = NULL;
        int g = getaddrinfo(host, portstr, &hints, &ai);
        if (g == 0) {
            for (struct addrinfo *a = ai; a && st->fd < 0; a = a->ai_next)
                try_connect(a, deadline, &st->fd, &last_err);
            freeaddrinfo(ai);
        } else if (g != EAI_AGAIN) {
            free(st);
            return baton__fail(BATON_EINVAL, "store: cannot resolve '%s': %s", host, gai_strerror(g));
        }
        if (st->fd >= 0) break;
        uint64_t now = baton__now_ns();
        if (now >= deadline) {
            free(st);
            return baton__fail(BATON_ETIMEDOUT, "store: could not connect to %s:%d within %.1f s (%s); is the "
                               "launcher / rank 0 running and the address right?", host, port, timeout_s,
                               last_err ? strerror(last_err) : "name lookup kept failing");
        }
        uint64_t left = deadline - now;
        baton__sleep_ns(nap < left ? nap : left);
        if (nap < 250000000ull) nap *= 2;
    }
    rc = handshake(st, secret, secret_len, deadline);
    if (rc < 0) {
        close(st->fd);
        free(st);
        return rc;
    }
    *out = st;
    return BATON_OK;
}

void baton_store_set_io_timeout(baton_store *st, double s) {
    if (st && s > 0) st->io_timeout_s = s;
}

void baton_store_close(baton_store *st) {
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    free(st);
}

static uint32_t timeout_ms(double timeout_s) {
    if (!(timeout_s > 0)) return 0;
    double ms = timeout_s * 1000.0 + 0.5;
    return ms >= 4294967295.0 ? 4294967295u : (uint32_t)ms;
}

/* Sends one request and reads its response header (and the value, when there is one: *val malloc'ed). */
static int call(baton_store *st, store_op op, const char *key, const void *val, size_t vlen, double wait_s,
                int64_t arg, store_resp *resp, void **rval) {
    if (!st) return baton__fail(BATON_EINVAL, "store: not connected");
    if (st->broken) return baton__fail(BATON_EPEERDEAD, "store %s: connection unusable after an earlier failure", st->peer);
    if (!key) return baton__fail(BATON_EINVAL, "store: key is NULL");
    size_t klen = strlen(key);
    if (klen < 1 || klen > BATON_STORE_MAX_KEY)
        return baton__fail(BATON_EINVAL, "store: key length %zu is not in 1..%d", klen, BATON_STORE_MAX_KEY);
    if (vlen > BATON_STORE_MAX_VALUE)
        return baton__fail(BATON_EINVAL, "store: value of %zu bytes for '%s' exceeds the %d-byte limit", vlen, key,
                           BATON_STORE_MAX_VALUE);
    store_req rq = {STORE_REQ_MAGIC, STORE_VERSION, (uint8_t)op, 0, ++st->next_id, (uint32_t)klen, (uint32_t)vlen,
                    timeout_ms(wait_s), arg};
    unsigned char hdr[STORE_REQ_BYTES + BATON_STORE_MAX_KEY];
    store_req_encode(&rq, hdr);
    memcpy(hdr + STORE_REQ_BYTES, key, klen);
    uint64_t deadline = baton__deadline_after((wait_s > 0 ? wait_s : 0) + st->io_timeout_s);
    st->broken = 1;   /* until the response is read whole */
    int rc = send_all(st, hdr, STORE_REQ_BYTES + klen, deadline);
    if (rc == BATON_OK && vlen) rc = send_all(st, val, vlen, deadline);
    unsigned char rb[STORE_RESP_BYTES];
    if (rc == BATON_OK) rc = recv_all(st, rb, sizeof rb, deadline);
    if (rc < 0) return rc;
    store_resp_decode(rb, resp);
    if (resp->magic != STORE_RESP_MAGIC || resp->version != STORE_VERSION || resp->op != op || resp->id != rq.id ||
        resp->val_len > BATON_STORE_MAX_VALUE || (resp->val_len && (op != STORE_OP_GET || resp->status != BATON_OK)))
        return baton__fail(BATON_EPROTO, "store %s: malformed response to a request on '%s'", st->peer, key);
    if (op == STORE_OP_GET && resp->status == BATON_OK) {
        unsigned char *v = malloc((size_t)resp->val_len + 1);
        if (!v) return baton__fail(BATON_ENOMEM, "store: out of memory for a %u-byte value", resp->val_len);
        rc = recv_all(st, v, resp->val_len, deadline);
        if (rc < 0) {
            free(v);
            return rc;
        }
        v[resp->val_len] = '\0';
        *rval = v;
    }
    st->broken = 0;
    return BATON_OK;
}

static int status_of(const baton_store *st, const store_resp *r, const char *what, const char *key, double wait_s) {
    switch (r->status) {
    case BATON_OK: return BATON_OK;
    case BATON_ETIMEDOUT:
        return baton__fail(BATON_ETIMEDOUT, "store %s: %s '%s' did not complete within %.1f s", st->peer, what, key, wait_s);
    case BATON_ERANGE:
        return baton__fail(BATON_ERANGE, "store %s: %s '%s': the store is full or the counter would overflow", st->peer,
                           what, key);
    case BATON_EINVAL:
        return baton__fail(BATON_EINVAL, "store %s: %s '%s': invalid request (ADD on a non-integer value, or a bad "
                           "barrier size)", st->peer, what, key);
    case BATON_EMISMATCH:
        return baton__fail(BATON_EMISMATCH, "store %s: barrier '%s' is already in use with world %lld", st->peer, key,
                           (long long)r->arg);
    default:
        return baton__fail(r->status < 0 ? r->status : BATON_EPROTO, "store %s: %s '%s' failed: %s", st->peer, what, key,
                           baton_strerror(r->status));
    }
}

int baton_store_set(baton_store *st, const char *key, const void *val, size_t len) {
    store_resp r;
    if (len && !val) return baton__fail(BATON_EINVAL, "store: value is NULL");
    int rc = call(st, STORE_OP_SET, key, val, len, 0, 0, &r, NULL);
    return rc < 0 ? rc : status_of(st, &r, "set", key, 0);
}

int baton_store_get(baton_store *st, const char *key, void **val, size_t *len, double timeout_s) {
    store_resp r;
    void *v = NULL;
    *val = NULL;
    *len = 0;
    int rc = call(st, STORE_OP_GET, key, NULL, 0, timeout_s, 0, &r, &v);
    if (rc < 0) return rc;
    rc = status_of(st, &r, "get", key, timeout_s);
    if (rc < 0) return rc;
    *val = v;
    *len = r.val_len;
    return BATON_OK;
}

int baton_store_check(baton_store *st, const char *key, int *exists) {
    store_resp r;
    int rc = call(st, STORE_OP_CHECK, key, NULL, 0, 0, 0, &r, NULL);
    if (rc < 0) return rc;
    rc = status_of(st, &r, "check", key, 0);
    if (rc == BATON_OK) *exists = r.arg != 0;
    return rc;
}

int baton_store_add(baton_store *st, const char *key, int64_t delta, int64_t *result) {
    store_resp r;
    int rc = call(st, STORE_OP_ADD, key, NULL, 0, 0, delta, &r, NULL);
    if (rc < 0) return rc;
    rc = status_of(st, &r, "add", key, 0);
    if (rc == BATON_OK && result) *result = r.arg;
    return rc;
}

int baton_store_delete(baton_store *st, const char *key) {
    store_resp r;
    int rc = call(st, STORE_OP_DELETE, key, NULL, 0, 0, 0, &r, NULL);
    return rc < 0 ? rc : status_of(st, &r, "delete", key, 0);
}

int baton_store_barrier(baton_store *st, const char *name, int world, double timeout_s) {
    if (world < 1 || world > STORE_MAX_WORLD)
        return baton__fail(BATON_EINVAL, "store: barrier '%s' world %d is not in 1..%d", name ? name : "", world,
                           STORE_MAX_WORLD);
    store_resp r;
    int rc = call(st, STORE_OP_BARRIER, name, NULL, 0, timeout_s, world, &r, NULL);
    return rc < 0 ? rc : status_of(st, &r, "barrier", name, timeout_s);
}
