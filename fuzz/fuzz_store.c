/* fuzz_store.c: libFuzzer target for the rendezvous store protocol (src/rendezvous/store_server.c).
 *
 * Two layers per input:
 *
 * 1. The server's pure checks of untrusted bytes, called directly: baton__store_req_parse on every 32-byte
 *    window of the input must agree (verdict and decoded fields) with an independent reading of the layout
 *    in store_proto.h; baton__store_auth_verify on the first 72 bytes must accept exactly when the MAC is
 *    HMAC-SHA256(secret, "baton-store/v1/client" | snonce | cnonce) computed here with libsodium, must
 *    accept the input's nonce with the right MAC, and must reject it again after any one bit flip.
 *
 * 2. The real server, in-process: a fresh server per input (so every input starts from an empty store and
 *    a crash reproduces from that input alone), one TCP connection over loopback. Byte 0 picks the mode:
 *    - even: an unauthenticated client sends the rest as its AUTH attempt. The server must close the
 *      connection on its own after reading at most 72 bytes (the client does not hang up when it sent
 *      72 or more), send nothing but HELLO, count exactly min(len, 72) unauthenticated bytes, and change
 *      no state (no key appears; a real client still gets served).
 *    - odd: the client authenticates properly, then sends the rest as a stream of requests. A reference
 *      model of the store (written here from store_proto.h) predicts every response: op, id, status,
 *      arg and value. The stream is cut after the first malformed header (the server must close the
 *      connection and count one protocol error, having answered everything before it) or after the first
 *      request that parks (GET of an absent key or BARRIER of world > 1, with a timeout): such a request
 *      gets no answer before the client hangs up, or BATON_ETIMEDOUT if its timeout passed first. A
 *      second connection then checks the store still serves and holds what the model says.
 *
 * Every wait is bounded (10 s); a server that neither answers nor closes is reported as a finding. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "baton/status.h"
#include "fuzz.h"
#include "rendezvous/store.h"
#include "rendezvous/store_proto.h"
#include "util/util.h"

#ifndef FUZZ_STORE_ONCE
#define FUZZ_STORE_ONCE

#define SS_WAIT_NS 10000000000ull   /* any single wait on the server */

static const uint8_t ss_secret[32] = "fuzz-store-secret-32-bytes-long";
static const uint8_t ss_snonce[STORE_NONCE_BYTES] = "a fixed server nonce for checks";

static uint64_t ss_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- layer 1: pure checks ---------------------------------------------------------------------------- */

typedef struct {
    uint8_t op;
    uint32_t id, key_len, val_len, timeout_ms;
    int64_t arg;
} ss_req;

/* The request header as store_proto.h describes it, read independently of the server. */
static int ss_ref_parse(const uint8_t *b, ss_req *r) {
    r->op = b[5];
    r->id = (uint32_t)ss_le(b + 8, 4);
    r->key_len = (uint32_t)ss_le(b + 12, 4);
    r->val_len = (uint32_t)ss_le(b + 16, 4);
    r->timeout_ms = (uint32_t)ss_le(b + 20, 4);
    r->arg = (int64_t)ss_le(b + 24, 8);
    return ss_le(b, 4) == 0x51535442u && b[4] == 1 && ss_le(b + 6, 2) == 0 && r->op >= 1 && r->op <= 6 &&
           r->key_len >= 1 && r->key_len <= 256 && r->val_len <= (1u << 20) && (r->val_len == 0 || r->op == 1);
}

static void ss_client_mac(const uint8_t *cnonce, uint8_t mac[32]) {
    static const char ctx[] = "baton-store/v1/client";
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, ss_secret, sizeof ss_secret);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)ctx, sizeof ctx - 1);
    crypto_auth_hmacsha256_update(&st, ss_snonce, sizeof ss_snonce);
    crypto_auth_hmacsha256_update(&st, cnonce, STORE_NONCE_BYTES);
    crypto_auth_hmacsha256_final(&st, mac);
}

static void ss_pure(const uint8_t *data, size_t size) {
    for (size_t off = 0; off + STORE_REQ_BYTES <= size && off < 512; off++) {
        unsigned char *w = malloc(STORE_REQ_BYTES);   /* exact size: ASan flags a read past 32 bytes */
        FUZZ_CHECK(w != NULL, "out of memory");
        memcpy(w, data + off, STORE_REQ_BYTES);
        store_req got;
        ss_req ref;
        int ok = baton__store_req_parse(w, &got), want = ss_ref_parse(w, &ref);
        FUZZ_CHECK(ok == want, "req_parse says %d, the layout says %d (offset %zu)", ok, want, off);
        if (ok)
            FUZZ_CHECK(got.op == ref.op && got.id == ref.id && got.key_len == ref.key_len &&
                           got.val_len == ref.val_len && got.timeout_ms == ref.timeout_ms && got.arg == ref.arg,
                       "req_parse decoded a field from the wrong bytes");
        free(w);
    }
    unsigned char *m = calloc(1, STORE_AUTH_BYTES);
    FUZZ_CHECK(m != NULL, "out of memory");
    memcpy(m, data, size < STORE_AUTH_BYTES ? size : STORE_AUTH_BYTES);
    uint8_t mac[32];
    ss_client_mac(m + 8, mac);
    int want = ss_le(m, 4) == 0x31415442u && ss_le(m + 4, 2) == 1 && ss_le(m + 6, 2) == 0 && !memcmp(mac, m + 40, 32);
    FUZZ_CHECK(baton__store_auth_verify(ss_secret, sizeof ss_secret, ss_snonce, m) == want,
               "auth_verify disagrees with the HMAC (expected %d)", want);
    baton__put_le32(m, 0x31415442u);
    baton__put_le16(m + 4, 1);
    baton__put_le16(m + 6, 0);
    memcpy(m + 40, mac, 32);
    FUZZ_CHECK(baton__store_auth_verify(ss_secret, sizeof ss_secret, ss_snonce, m) == 1,
               "a correct AUTH for this nonce is refused");
    size_t bit = size ? (size_t)data[size - 1] * 7 % (STORE_AUTH_BYTES * 8) : 0;
    m[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    FUZZ_CHECK(baton__store_auth_verify(ss_secret, sizeof ss_secret, ss_snonce, m) == 0,
               "an AUTH with bit %zu flipped is accepted", bit);
    free(m);
}

/* ---- the reference model of the store ---------------------------------------------------------------- */

typedef struct {
    const uint8_t *key;   /* into the input */
    size_t kn;
    uint8_t *val;         /* owned */
    size_t vn;
} ss_ent;

typedef struct {
    ss_ent *e;
    size_t n, cap;
} ss_kv;

static ss_ent *ss_find(ss_kv *kv, const uint8_t *k, size_t kn) {
    for (size_t i = 0; i < kv->n; i++)
        if (kv->e[i].kn == kn && !memcmp(kv->e[i].key, k, kn)) return &kv->e[i];
    return NULL;
}

static void ss_put(ss_kv *kv, const uint8_t *k, size_t kn, const void *v, size_t vn) {
    ss_ent *e = ss_find(kv, k, kn);
    if (!e) {
        if (kv->n == kv->cap) {
            kv->cap = kv->cap ? 2 * kv->cap : 16;
            kv->e = realloc(kv->e, kv->cap * sizeof *kv->e);
            FUZZ_CHECK(kv->e != NULL, "out of memory");
        }
        e = &kv->e[kv->n++];
        e->key = k;
        e->kn = kn;
    } else {
        free(e->val);
    }
    e->val = malloc(vn ? vn : 1);
    FUZZ_CHECK(e->val != NULL, "out of memory");
    if (vn) memcpy(e->val, v, vn);
    e->vn = vn;
}

static int ss_del(ss_kv *kv, const uint8_t *k, size_t kn) {
    ss_ent *e = ss_find(kv, k, kn);
    if (!e) return 0;
    free(e->val);
    *e = kv->e[--kv->n];
    return 1;
}

static void ss_kv_free(ss_kv *kv) {
    for (size_t i = 0; i < kv->n; i++) free(kv->e[i].val);
    free(kv->e);
}

/* What ADD accepts as the current value: optional '-', 1..19 digits of an int64. */
static int ss_decimal(const uint8_t *p, size_t n, int64_t *out) {
    if (n == 0 || n > 20) return -1;
    size_t i = p[0] == '-';
    if (i == n) return -1;
    __int128 v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    if (p[0] == '-') v = -v;
    if (v < INT64_MIN || v > INT64_MAX) return -1;
    *out = (int64_t)v;
    return 0;
}

typedef struct {
    uint8_t op;
    uint32_t id;
    int status;          /* expected; the park marker when the request waits */
    int64_t arg;
    const uint8_t *val;  /* expected value (GET), into a model copy made for this response */
    size_t vn;
    uint8_t *own;        /* owned copy of val */
} ss_expect;

enum { SS_PARK = 1000 };

/* Runs the model over the request stream; fills ex (capacity max_ex) and returns how many responses it
 * predicts. *cut = stream bytes to send; *malformed = 1 when the stream ends at a malformed header. */
static size_t ss_model(ss_kv *kv, const uint8_t *s, size_t n, ss_expect *ex, size_t max_ex, size_t *cut,
                       int *malformed) {
    size_t pos = 0, k = 0;
    *malformed = 0;
    while (k < max_ex && n - pos >= STORE_REQ_BYTES) {
        ss_req r;
        if (!ss_ref_parse(s + pos, &r)) {
            *malformed = 1;
            *cut = pos + STORE_REQ_BYTES;
            return k;
        }
        size_t body = (size_t)r.key_len + r.val_len;
        if (n - pos - STORE_REQ_BYTES < body) break;   /* truncated: the server waits, then sees EOF */
        const uint8_t *key = s + pos + STORE_REQ_BYTES, *val = key + r.key_len;
        pos += STORE_REQ_BYTES + body;
        ss_expect *x = &ex[k++];
        memset(x, 0, sizeof *x);
        x->op = r.op;
        x->id = r.id;
        ss_ent *e = ss_find(kv, key, r.key_len);
        switch (r.op) {
        case STORE_OP_SET:
            ss_put(kv, key, r.key_len, val, r.val_len);
            break;
        case STORE_OP_GET:
            if (e) {
                x->own = malloc(e->vn ? e->vn : 1);
                FUZZ_CHECK(x->own != NULL, "out of memory");
                if (e->vn) memcpy(x->own, e->val, e->vn);
                x->val = x->own;
                x->vn = e->vn;
            } else {
                x->status = r.timeout_ms ? SS_PARK : BATON_ETIMEDOUT;
            }
            break;
        case STORE_OP_CHECK:
            x->arg = e != NULL;
            break;
        case STORE_OP_ADD: {
            int64_t cur = 0, next;
            if (e && ss_decimal(e->val, e->vn, &cur) != 0) x->status = BATON_EINVAL;
            else if (__builtin_add_overflow(cur, r.arg, &next)) {
                x->status = BATON_ERANGE;
                x->arg = cur;
            } else {
                char txt[24];
                int len = snprintf(txt, sizeof txt, "%lld", (long long)next);
                ss_put(kv, key, r.key_len, txt, (size_t)len);
                x->arg = next;
            }
            break;
        }
        case STORE_OP_DELETE:
            x->arg = ss_del(kv, key, r.key_len);
            break;
        case STORE_OP_BARRIER:
            if (r.arg < 1 || r.arg > STORE_MAX_WORLD) x->status = BATON_EINVAL;
            else if (r.arg > 1) x->status = r.timeout_ms ? SS_PARK : BATON_ETIMEDOUT;
            break;
        }
        if (x->status == SS_PARK) break;
    }
    *cut = pos;
    return k;
}

/* ---- the live server ---------------------------------------------------------------------------------- */

static int ss_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(0x7f000001)};
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (rc != 0 && errno == EINTR) {   /* libFuzzer's timer signal: the connect goes on; wait for it */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        while (poll(&p, 1, 10000) < 0 && errno == EINTR) {
        }
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        rc = err ? -1 : 0;
        errno = err;
    }
    FUZZ_CHECK(rc == 0, "connect: %s", strerror(errno));
    return fd;
}

/* Reads exactly n bytes; 0 on success, -1 on EOF / reset. A wait over SS_WAIT_NS is a finding. */
static int ss_read(int fd, void *buf, size_t n) {
    uint64_t end = baton__now_ns() + SS_WAIT_NS;
    size_t got = 0;
    while (got < n) {
        uint64_t now = baton__now_ns();
        FUZZ_CHECK(now < end, "the server neither answered nor closed within 10 s");
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)((end - now) / 1000000 + 1)) <= 0) continue;
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return -1;
        if (r > 0) got += (size_t)r;
    }
    return 0;
}

static void ss_send(int fd, const void *buf, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;   /* the server may close first; what it read is checked elsewhere */
        off += (size_t)w;
    }
}

/* Reads the HELLO and, when authed, completes the handshake as a real client. */
static void ss_hello(int fd, int authed) {
    uint8_t hello[STORE_HELLO_BYTES];
    FUZZ_CHECK(ss_read(fd, hello, sizeof hello) == 0, "no HELLO from the server");
    FUZZ_CHECK(baton__get_le32(hello) == STORE_HELLO_MAGIC && baton__get_le16(hello + 4) == STORE_VERSION &&
                   baton__get_le16(hello + 6) == 0,
               "malformed HELLO");
    if (!authed) return;
    uint8_t auth[STORE_AUTH_BYTES], welcome[STORE_WELCOME_BYTES], want[STORE_MAC_BYTES];
    baton__put_le32(auth, STORE_AUTH_MAGIC);
    baton__put_le16(auth + 4, STORE_VERSION);
    baton__put_le16(auth + 6, 0);
    randombytes_buf(auth + 8, STORE_NONCE_BYTES);
    baton__store_mac(ss_secret, sizeof ss_secret, 'c', hello + 8, auth + 8, auth + 8 + STORE_NONCE_BYTES);
    ss_send(fd, auth, sizeof auth);
    FUZZ_CHECK(ss_read(fd, welcome, sizeof welcome) == 0, "no WELCOME for a correct AUTH");
    baton__store_mac(ss_secret, sizeof ss_secret, 's', hello + 8, auth + 8, want);
    FUZZ_CHECK(!memcmp(want, welcome, sizeof want), "the WELCOME does not prove the secret");
}

/* Reads one response and compares it with x; returns 0, or -1 on EOF before any byte of it. */
static int ss_expect_resp(int fd, const ss_expect *x, int may_time_out) {
    uint8_t h[STORE_RESP_BYTES];
    if (ss_read(fd, h, sizeof h) < 0) return -1;
    store_resp r;
    store_resp_decode(h, &r);
    FUZZ_CHECK(r.magic == STORE_RESP_MAGIC && r.version == STORE_VERSION, "malformed response header");
    FUZZ_CHECK(r.op == x->op && r.id == x->id, "response (op %u, id %u) where (op %u, id %u) was due", r.op, r.id,
               x->op, x->id);
    int status = may_time_out ? BATON_ETIMEDOUT : x->status;
    FUZZ_CHECK(r.status == status, "op %u id %u: status %d, model says %d", r.op, r.id, r.status, status);
    FUZZ_CHECK(r.arg == (may_time_out ? 0 : x->arg), "op %u id %u: arg %lld, model says %lld", r.op, r.id,
               (long long)r.arg, (long long)x->arg);
    FUZZ_CHECK(r.val_len == (may_time_out ? 0 : x->vn), "op %u id %u: %u value bytes, model says %zu", r.op, r.id,
               r.val_len, x->vn);
    if (r.val_len) {
        uint8_t *v = malloc(r.val_len);
        FUZZ_CHECK(v != NULL, "out of memory");
        FUZZ_CHECK(ss_read(fd, v, r.val_len) == 0, "connection closed inside a response value");
        FUZZ_CHECK(!memcmp(v, x->val, r.val_len), "op %u id %u: value differs from the model", r.op, r.id);
        free(v);
    }
    return 0;
}

/* A second, well-behaved connection: the store still serves and holds what the model holds. */
static void ss_still_serving(int port, ss_kv *kv) {
    int fd = ss_connect(port);
    ss_hello(fd, 1);
    static const uint8_t probe[] = {0xff, 'p', 'r', 'o', 'b', 'e'};
    size_t checks = kv->n < 4 ? kv->n : 4;
    for (size_t i = 0; i <= checks; i++) {
        const uint8_t *k = i < checks ? kv->e[i].key : probe;
        size_t kn = i < checks ? kv->e[i].kn : sizeof probe;
        ss_ent *e = ss_find(kv, k, kn);
        store_req q = {STORE_REQ_MAGIC, STORE_VERSION, STORE_OP_GET, 0, (uint32_t)(100 + i), (uint32_t)kn, 0, 0, 0};
        uint8_t buf[STORE_REQ_BYTES + 256];
        store_req_encode(&q, buf);
        memcpy(buf + STORE_REQ_BYTES, k, kn);
        ss_send(fd, buf, STORE_REQ_BYTES + kn);
        ss_expect x = {.op = STORE_OP_GET, .id = q.id, .status = e ? BATON_OK : BATON_ETIMEDOUT,
                       .val = e ? e->val : NULL, .vn = e ? e->vn : 0};
        FUZZ_CHECK(ss_expect_resp(fd, &x, 0) == 0, "the store stopped serving after a fuzzed connection");
    }
    close(fd);
}

static void ss_live(const uint8_t *data, size_t size) {
    baton__store_limits lim = {.auth_timeout_ms = 5000, .max_conns = 16, .max_unauth = 8};
    baton_store_server *srv = NULL;
    FUZZ_CHECK(baton__store_server_start_ex("127.0.0.1", 0, ss_secret, sizeof ss_secret, &lim, &srv) == BATON_OK,
               "server start: %s", baton_last_error());
    int port = baton_store_server_port(srv);
    int authed = size > 0 && (data[0] & 1);
    const uint8_t *s = size ? data + 1 : data;
    size_t n = size ? size - 1 : 0;
    baton__store_stats st;
    ss_kv kv = {0};
    int fd = ss_connect(port);
    ss_hello(fd, authed);
    if (!authed) {
        ss_send(fd, s, n);
        if (n < STORE_AUTH_BYTES) shutdown(fd, SHUT_WR);   /* else the server must close on its own */
        uint8_t extra;
        FUZZ_CHECK(ss_read(fd, &extra, 1) < 0, "the server sent data to an unauthenticated client");
        close(fd);
        baton__store_server_stats(srv, &st);
        FUZZ_CHECK(st.auth_ok == 0 && st.auth_failed == 1, "garbage authenticated (ok %llu, failed %llu)",
                   (unsigned long long)st.auth_ok, (unsigned long long)st.auth_failed);
        size_t want = n < STORE_AUTH_BYTES ? n : STORE_AUTH_BYTES;
        FUZZ_CHECK(st.unauth_bytes == want, "read %llu unauthenticated bytes, expected %zu",
                   (unsigned long long)st.unauth_bytes, want);
    } else {
        size_t max_ex = n / STORE_REQ_BYTES + 1, cut = 0;
        int malformed = 0;
        ss_expect *ex = calloc(max_ex, sizeof *ex);
        FUZZ_CHECK(ex != NULL, "out of memory");
        size_t k = ss_model(&kv, s, n, ex, max_ex, &cut, &malformed);
        ss_send(fd, s, cut);   /* nothing after a malformed or parked request: the server would not read it */
        shutdown(fd, SHUT_WR);
        for (size_t i = 0; i < k; i++) {
            int parked = ex[i].status == SS_PARK;
            int rc = ss_expect_resp(fd, &ex[i], parked);
            FUZZ_CHECK(rc == 0 || parked, "connection closed where request id %u (op %u) was due an answer", ex[i].id,
                       ex[i].op);
        }
        uint8_t extra;
        FUZZ_CHECK(ss_read(fd, &extra, 1) < 0, "the server sent more responses than requests");
        close(fd);
        baton__store_server_stats(srv, &st);
        FUZZ_CHECK(st.auth_ok == 1 && st.auth_failed == 0, "handshake counters off");
        FUZZ_CHECK(st.proto_errors == (uint64_t)malformed, "%llu protocol errors counted, expected %d",
                   (unsigned long long)st.proto_errors, malformed);
        for (size_t i = 0; i < k; i++) free(ex[i].own);
        free(ex);
    }
    ss_still_serving(port, &kv);
    baton__store_server_stats(srv, &st);
    FUZZ_CHECK(st.evicted == 0 && st.accepted == 2, "connection counters off");
    ss_kv_free(&kv);
    baton_store_server_stop(srv);
}
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    ss_pure(data, size);
    ss_live(data, size);
    return 0;
}
