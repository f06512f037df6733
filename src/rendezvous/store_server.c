/* store_server.c: the rendezvous store's server: one background thread, epoll over non-blocking sockets.
 *
 * Each connection is a small state machine (AUTH -> HDR <-> BODY, or PARKED while a GET or BARRIER waits)
 * with its own buffers, so no connection can block another. Reads are always exactly as long as the
 * message part still missing (never more), which is how an unauthenticated connection is held to the 72
 * AUTH bytes (see store_proto.h). Output is one response at a time; a connection with output pending is
 * not read. A parked GET waits in a list that every SET / ADD scans; a parked BARRIER waits on its
 * barrier, which completes (and is freed, so its name can be reused) when `world` participants arrived.
 * A waiter that times out is answered BATON_ETIMEDOUT by the server; one that disconnects is dropped
 * (and, in a barrier, no longer counted).
 *
 * Resource bounds: max_conns open connections, of which max_unauth unauthenticated (the oldest
 * unauthenticated connection is evicted to admit a new one, so a flood cannot lock workers out); an
 * unauthenticated connection lives at most auth_timeout_ms; BATON_STORE_MAX_KEYS keys and max_bytes of
 * keys + values; one request (<= 32 + 256 + 1 MiB bytes) and one response buffered per connection.
 * A connection freed during an event batch is parked in a graveyard and freed after the batch. The keys and
 * values live in store_kv.c. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rendezvous/store_kv.h"
#include "rendezvous/store_proto.h"
#include "util/util.h"

enum { C_AUTH, C_HDR, C_BODY, C_PARKED, C_DEAD };
enum { W_NONE, W_GET, W_BARRIER };
enum { MAX_MSGS_PER_WAKE = 16, MAX_ACCEPTS_PER_WAKE = 256, MAX_EVENTS = 64, SMALL_OUT = 64 };

typedef struct conn conn;
typedef struct barrier barrier;

struct conn {
    int fd;
    int state;                        /* C_* */
    int authed;
    uint32_t events;                  /* current epoll interest */
    uint64_t auth_deadline;           /* ns, CLOCK_MONOTONIC */
    uint8_t snonce[STORE_NONCE_BYTES];
    unsigned char hdr[STORE_AUTH_BYTES];   /* the AUTH message or a request header being read */
    size_t hdr_got;                   /* bytes of hdr received */
    store_req req;                    /* the request being read / served */
    unsigned char *body;              /* key_len + val_len bytes of the request */
    size_t body_len, body_got;
    unsigned char small[SMALL_OUT];   /* hello, welcome and value-less responses */
    unsigned char *out;               /* small or a heap buffer */
    size_t out_len, out_off;          /* bytes queued / already sent */
    int wait;                         /* W_*: what a PARKED connection waits for */
    uint64_t wait_deadline;           /* ns */
    barrier *bar;
    conn *wprev, *wnext;              /* GET waiters list or the barrier's list */
    conn *prev, *next;                /* all connections, oldest first; the graveyard reuses next */
};

struct barrier {
    barrier *next;
    uint32_t world, arrived;          /* participants expected / parked so far */
    conn *waiters;
    size_t name_len;
    unsigned char name[];
};

struct baton_store_server {
    int listen_fd, wake_fd, epfd;
    int port;
    pthread_t thread;
    int thread_started;
    uint8_t secret[STORE_SECRET_MAX];
    size_t secret_len;
    baton__store_limits lim;
    store_kv kv;                      /* the keys and values */
    conn *head, *tail, *getwait, *graveyard;
    barrier *barriers;
    uint32_t nconns, nunauth;
    uint64_t next_deadline;           /* ns: earliest auth or wait deadline (may be stale-early) */
    uint64_t listen_paused_until;     /* ns, 0 = listening (paused after EMFILE) */
    int stop;
    pthread_mutex_t mu;               /* guards stats */
    baton__store_stats stats;
};

static void stat_add(baton_store_server *s, uint64_t *field, uint64_t n) {
    pthread_mutex_lock(&s->mu);
    *field += n;
    pthread_mutex_unlock(&s->mu);
}

static void stat_gauges(baton_store_server *s) {
    pthread_mutex_lock(&s->mu);
    s->stats.open_conns = s->nconns;
    s->stats.keys = (uint32_t)s->kv.nkeys;
    pthread_mutex_unlock(&s->mu);
}

/* ---- connections ----------------------------------------------------------------------------------- */

static void set_events(baton_store_server *s, conn *c, uint32_t ev) {
    if (c->state == C_DEAD || c->events == ev) return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0) c->events = ev;
}

static void note_deadline(baton_store_server *s, uint64_t d) {
    if (d < s->next_deadline) s->next_deadline = d;
}

static void list_unlink(conn **head, conn *c) {
    if (c->wprev) c->wprev->wnext = c->wnext;
    else *head = c->wnext;
    if (c->wnext) c->wnext->wprev = c->wprev;
    c->wprev = c->wnext = NULL;
}

static void list_push(conn **head, conn *c) {
    c->wprev = NULL;
    c->wnext = *head;
    if (*head) (*head)->wprev = c;
    *head = c;
}

static void barrier_free(baton_store_server *s, barrier *b) {
    for (barrier **pp = &s->barriers; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    free(b);
}

/* Takes a parked connection off its wait list (a barrier participant stops counting). Idempotent. */
static void unpark(baton_store_server *s, conn *c) {
    if (c->wait == W_GET) {
        list_unlink(&s->getwait, c);
    } else if (c->wait == W_BARRIER) {
        barrier *b = c->bar;
        list_unlink(&b->waiters, c);
        if (--b->arrived == 0) barrier_free(s, b);
        c->bar = NULL;
    }
    c->wait = W_NONE;
}

static void kill_conn(baton_store_server *s, conn *c, uint64_t *why) {
    if (c->state == C_DEAD) return;
    unpark(s, c);
    if (why) stat_add(s, why, 1);
    if (!c->authed) stat_add(s, &s->stats.unauth_bytes, c->hdr_got);
    if (!c->authed) s->nunauth--;
    s->nconns--;
    if (c->prev) c->prev->next = c->next;
    else s->head = c->next;
    if (c->next) c->next->prev = c->prev;
    else s->tail = c->prev;
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->state = C_DEAD;
    c->prev = NULL;
    c->next = s->graveyard;
    s->graveyard = c;
}

static void free_out(conn *c) {
    if (c->out && c->out != c->small) free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
}

static void bury(baton_store_server *s) {
    while (s->graveyard) {
        conn *c = s->graveyard;
        s->graveyard = c->next;
        free_out(c);
        free(c->body);
        sodium_memzero(c->hdr, sizeof c->hdr);
        free(c);
    }
}

/* Sends queued output. Returns 1 when all is sent, 0 when the socket is full (waits for EPOLLOUT), -1
 * when the connection died. */
static int flush(baton_store_server *s, conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t r = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            c->out_off += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_events(s, c, EPOLLOUT);
            return 0;
        }
        kill_conn(s, c, NULL);
        return -1;
    }
    free_out(c);
    set_events(s, c, c->state == C_PARKED ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP);
    return 1;
}

/* Queues the response to c's current request and sends what the socket takes; c then reads the next one. */
static void respond(baton_store_server *s, conn *c, int status, int64_t arg, const void *val, size_t vn) {
    store_resp r = {STORE_RESP_MAGIC, STORE_VERSION, c->req.op, (int16_t)status, c->req.id, (uint32_t)vn, arg};
    unsigned char *buf = c->small;
    if (STORE_RESP_BYTES + vn > sizeof c->small) {
        buf = malloc(STORE_RESP_BYTES + vn);
        if (!buf) {
            kill_conn(s, c, NULL);
            return;
        }
    }
    store_resp_encode(&r, buf);
    if (vn) memcpy(buf + STORE_RESP_BYTES, val, vn);
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_got = 0;
    c->hdr_got = 0;
    c->state = C_HDR;
    c->out = buf;
    c->out_len = STORE_RESP_BYTES + vn;
    c->out_off = 0;
    flush(s, c);
}

static void wake_getters(baton_store_server *s, const unsigned char *k, size_t kn, const store_kv_entry *e) {
    for (conn *c = s->getwait, *nx; c; c = nx) {
        nx = c->wnext;
        if (c->req.key_len == kn && !memcmp(c->body, k, kn)) {
            unpark(s, c);
            respond(s, c, BATON_OK, 0, e->val, e->val_len);
        }
    }
}

static void park(baton_store_server *s, conn *c, int kind) {
    c->wait = kind;
    c->state = C_PARKED;
    c->wait_deadline = baton__now_ns() + (uint64_t)c->req.timeout_ms * 1000000ull;
    note_deadline(s, c->wait_deadline);
    set_events(s, c, EPOLLRDHUP);
}

/* Strict decimal int64 (what ADD stores); 0 on success. */
static int parse_i64(const unsigned char *p, size_t n, int64_t *out) {
    if (n == 0 || n > 20) return -1;
    size_t i = 0;
    int neg = 0;
    if (p[0] == '-') {
        neg = 1;
        i = 1;
        if (n == 1) return -1;
    }
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (!neg && v > (uint64_t)INT64_MAX) return -1;
    if (neg && v > (uint64_t)INT64_MAX + 1) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static void do_barrier(baton_store_server *s, conn *c, const unsigned char *name, size_t kn) {
    int64_t world = c->req.arg;
    if (world < 1 || world > STORE_MAX_WORLD) {
        respond(s, c, BATON_EINVAL, 0, NULL, 0);
        return;
    }
    barrier *b = s->barriers;
    while (b && !(b->name_len == kn && !memcmp(b->name, name, kn))) b = b->next;
    if (!b) {
        b = calloc(1, sizeof *b + kn);
        if (!b) {
            respond(s, c, BATON_ENOMEM, 0, NULL, 0);
            return;
        }
        b->world = (uint32_t)world;
        b->name_len = kn;
        memcpy(b->name, name, kn);
        b->next = s->barriers;
        s->barriers = b;
    } else if (b->world != (uint32_t)world) {
        respond(s, c, BATON_EMISMATCH, b->world, NULL, 0);
        return;
    }
    if (b->arrived + 1 < b->world) {
        if (c->req.timeout_ms == 0) {
            if (b->arrived == 0) barrier_free(s, b);
            respond(s, c, BATON_ETIMEDOUT, 0, NULL, 0);
            return;
        }
        b->arrived++;
        c->bar = b;
        list_push(&b->waiters, c);
        park(s, c, W_BARRIER);
        return;
    }
    /* the last one: release everybody; the barrier is gone and its name free for the next round */
    while (b->waiters) {
        conn *w = b->waiters;
        list_unlink(&b->waiters, w);
        w->wait = W_NONE;
        w->bar = NULL;
        respond(s, w, BATON_OK, 0, NULL, 0);
    }
    barrier_free(s, b);
    respond(s, c, BATON_OK, 0, NULL, 0);
}

static void execute(baton_store_server *s, conn *c) {
    const unsigned char *key = c->body;
    size_t kn = c->req.key_len;
    store_kv_entry *e;
    int rc;
    switch (c->req.op) {
    case STORE_OP_SET:
        rc = store_kv_put(&s->kv, key, kn, key + kn, c->req.val_len);
        if (rc == BATON_OK) wake_getters(s, key, kn, store_kv_get(&s->kv, key, kn));
        respond(s, c, rc, 0, NULL, 0);
        break;
    case STORE_OP_GET:
        e = store_kv_get(&s->kv, key, kn);
        if (e) respond(s, c, BATON_OK, 0, e->val, e->val_len);
        else if (c->req.timeout_ms == 0) respond(s, c, BATON_ETIMEDOUT, 0, NULL, 0);
        else {
            list_push(&s->getwait, c);
            park(s, c, W_GET);
        }
        break;
    case STORE_OP_CHECK:
        respond(s, c, BATON_OK, store_kv_get(&s->kv, key, kn) != NULL, NULL, 0);
        break;
    case STORE_OP_ADD: {
        int64_t cur = 0, next;
        e = store_kv_get(&s->kv, key, kn);
        if (e && parse_i64(e->val, e->val_len, &cur) != 0) {
            respond(s, c, BATON_EINVAL, 0, NULL, 0);
            break;
        }
        if (__builtin_add_overflow(cur, c->req.arg, &next)) {
            respond(s, c, BATON_ERANGE, cur, NULL, 0);
            break;
        }
        char txt[24];
        int n = snprintf(txt, sizeof txt, "%lld", (long long)next);
        rc = store_kv_put(&s->kv, key, kn, txt, (size_t)n);
        if (rc == BATON_OK) wake_getters(s, key, kn, store_kv_get(&s->kv, key, kn));
        respond(s, c, rc, next, NULL, 0);
        break;
    }
    case STORE_OP_DELETE:
        respond(s, c, BATON_OK, store_kv_del(&s->kv, key, kn), NULL, 0);
        break;
    case STORE_OP_BARRIER:
        do_barrier(s, c, key, kn);
        break;
    }
}

/* Decodes and checks a request header (see store_proto.h); 1 when it may be served. Nothing is allocated
 * before this passes. */
int baton__store_req_parse(const unsigned char b[STORE_REQ_BYTES], store_req *r) {
    store_req_decode(b, r);
    if (r->magic != STORE_REQ_MAGIC || r->version != STORE_VERSION || r->reserved != 0) return 0;
    if (r->op < STORE_OP_SET || r->op > STORE_OP_BARRIER) return 0;
    if (r->key_len < 1 || r->key_len > BATON_STORE_MAX_KEY) return 0;
    if (r->val_len > BATON_STORE_MAX_VALUE) return 0;
    if (r->val_len != 0 && r->op != STORE_OP_SET) return 0;
    return 1;
}

int baton__store_auth_verify(const uint8_t *secret, size_t secret_len, const uint8_t snonce[STORE_NONCE_BYTES],
                             const unsigned char m[STORE_AUTH_BYTES]) {
    if (baton__get_le32(m) != STORE_AUTH_MAGIC || baton__get_le16(m + 4) != STORE_VERSION || baton__get_le16(m + 6) != 0) return 0;
    uint8_t want[STORE_MAC_BYTES];
    if (baton__store_mac(secret, secret_len, 'c', snonce, m + 8, want) < 0) return 0;
    int ok = sodium_memcmp(want, m + 8 + STORE_NONCE_BYTES, STORE_MAC_BYTES) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}

/* Reads up to `want` bytes into p; returns bytes read, 0 on EAGAIN, -1 when the connection is gone. */
static ssize_t read_some(conn *c, void *p, size_t want) {
    for (;;) {
        ssize_t r = recv(c->fd, p, want, MSG_DONTWAIT);
        if (r > 0) return r;
        if (r == 0) return -1;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
}

static void on_readable(baton_store_server *s, conn *c) {
    for (int msgs = 0; msgs < MAX_MSGS_PER_WAKE && c->state != C_DEAD && c->state != C_PARKED && !c->out_len;) {
        if (c->state == C_AUTH || c->state == C_HDR) {
            size_t need = (c->state == C_AUTH ? STORE_AUTH_BYTES : STORE_REQ_BYTES) - c->hdr_got;
            ssize_t r = read_some(c, c->hdr + c->hdr_got, need);
            if (r < 0) {
                kill_conn(s, c, c->authed ? NULL : &s->stats.auth_failed);
                return;
            }
            if (r == 0) return;
            c->hdr_got += (size_t)r;
            if ((size_t)r < need) continue;
            if (c->state == C_AUTH) {
                if (!baton__store_auth_verify(s->secret, s->secret_len, c->snonce, c->hdr)) {
                    kill_conn(s, c, &s->stats.auth_failed);
                    return;
                }
                c->authed = 1;
                s->nunauth--;
                stat_add(s, &s->stats.auth_ok, 1);
                baton__store_mac(s->secret, s->secret_len, 's', c->snonce, c->hdr + 8, c->small);
                c->out = c->small;
                c->out_len = STORE_WELCOME_BYTES;
                c->out_off = 0;
                c->state = C_HDR;
                c->hdr_got = 0;
                flush(s, c);
                continue;
            }
            if (!baton__store_req_parse(c->hdr, &c->req)) {
                kill_conn(s, c, &s->stats.proto_errors);
                return;
            }
            c->body_len = (size_t)c->req.key_len + c->req.val_len;   /* both capped above */
            c->body_got = 0;
            c->body = malloc(c->body_len);
            if (!c->body) {
                kill_conn(s, c, NULL);
                return;
            }
            c->state = C_BODY;
        }
        if (c->state == C_BODY) {
            if (c->body_got < c->body_len) {
                ssize_t r = read_some(c, c->body + c->body_got, c->body_len - c->body_got);
                if (r < 0) {
                    kill_conn(s, c, NULL);
                    return;
                }
                if (r == 0) return;
                c->body_got += (size_t)r;
                if (c->body_got < c->body_len) continue;
            }
            msgs++;
            execute(s, c);
        }
    }
}

static void on_accept(baton_store_server *s) {
    for (int i = 0; i < MAX_ACCEPTS_PER_WAKE; i++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: stop accepting briefly instead of spinning on the backlog */
                struct epoll_event e = {.events = 0, .data.ptr = NULL};
                epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->listen_fd, &e);
                s->listen_paused_until = baton__now_ns() + 50000000ull;
                note_deadline(s, s->listen_paused_until);
            }
            return;
        }
        stat_add(s, &s->stats.accepted, 1);
        if (s->nconns >= (uint32_t)s->lim.max_conns || s->nunauth >= (uint32_t)s->lim.max_unauth) {
            conn *old = s->head;
            while (old && old->authed) old = old->next;
            if (!old) {   /* full of authenticated clients: refuse the newcomer */
                stat_add(s, &s->stats.evicted, 1);
                close(fd);
                continue;
            }
            kill_conn(s, old, &s->stats.evicted);
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->state = C_AUTH;
        c->auth_deadline = baton__now_ns() + (uint64_t)s->lim.auth_timeout_ms * 1000000ull;
        randombytes_buf(c->snonce, sizeof c->snonce);
        baton__put_le32(c->small, STORE_HELLO_MAGIC);
        baton__put_le16(c->small + 4, STORE_VERSION);
        baton__put_le16(c->small + 6, 0);
        memcpy(c->small + 8, c->snonce, STORE_NONCE_BYTES);
        c->out = c->small;
        c->out_len = STORE_HELLO_BYTES;
        c->events = EPOLLIN | EPOLLRDHUP;
        struct epoll_event e = {.events = c->events, .data.ptr = c};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->prev = s->tail;
        if (s->tail) s->tail->next = c;
        else s->head = c;
        s->tail = c;
        s->nconns++;
        s->nunauth++;
        note_deadline(s, c->auth_deadline);
        flush(s, c);
    }
}

/* Expires unauthenticated connections and parked waits; recomputes the next deadline. */
static void sweep(baton_store_server *s, uint64_t now) {
    uint64_t next = UINT64_MAX;
    if (s->listen_paused_until) {
        if (now >= s->listen_paused_until) {
            struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
            epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->listen_fd, &e);
            s->listen_paused_until = 0;
        } else {
            next = s->listen_paused_until;
        }
    }
    for (conn *c = s->head, *nx; c; c = nx) {
        nx = c->next;
        if (!c->authed) {
            if (now >= c->auth_deadline) kill_conn(s, c, &s->stats.auth_failed);
            else if (c->auth_deadline < next) next = c->auth_deadline;
        } else if (c->state == C_PARKED) {
            if (now >= c->wait_deadline) {
                unpark(s, c);
                respond(s, c, BATON_ETIMEDOUT, 0, NULL, 0);
            } else if (c->wait_deadline < next) {
                next = c->wait_deadline;
            }
        }
    }
    s->next_deadline = next;
}

static void *server_main(void *arg) {
    baton_store_server *s = arg;
    struct epoll_event evs[MAX_EVENTS];
    while (!s->stop) {
        uint64_t now = baton__now_ns();
        int timeout_ms = 1000;
        if (s->next_deadline != UINT64_MAX) {
            uint64_t left = s->next_deadline > now ? s->next_deadline - now : 0;
            if (left / 1000000ull < 1000) timeout_ms = (int)((left + 999999ull) / 1000000ull);
        }
        int n = epoll_wait(s->epfd, evs, MAX_EVENTS, timeout_ms);
        if (n < 0 && errno != EINTR) {
            BATON_ERROR("store server: epoll_wait: %s; the store stops serving", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if (p == NULL) on_accept(s);
            else if (p == (void *)s) s->stop = 1;
            else {
                conn *c = p;
                if (c->state == C_DEAD) continue;
                if (ev & (EPOLLERR | EPOLLHUP)) kill_conn(s, c, c->authed ? NULL : &s->stats.auth_failed);
                else if (c->state == C_PARKED && (ev & EPOLLRDHUP)) kill_conn(s, c, NULL);
                else {
                    if ((ev & EPOLLOUT) && c->out_len && flush(s, c) < 0) continue;
                    if (ev & (EPOLLIN | EPOLLRDHUP)) on_readable(s, c);
                }
            }
        }
        bury(s);
        now = baton__now_ns();
        if (now >= s->next_deadline) sweep(s, now);
        bury(s);
        stat_gauges(s);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------------- */

static int open_listener(const char *host, int port, int *fd_out, int *port_out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int g = getaddrinfo(host, portstr, &hints, &ai);
    if (g != 0) return baton__fail(BATON_EINVAL, "store: cannot resolve listen address '%s': %s", host, gai_strerror(g));
    int last_errno = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                       : ((struct sockaddr_in *)&ss)->sin_port);
            *fd_out = fd;
            freeaddrinfo(ai);
            return BATON_OK;
        }
        last_errno = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return baton__fail(last_errno == EADDRINUSE ? BATON_EIO : BATON_ESYS, "store: cannot listen on %s:%d: %s%s", host,
                       port, strerror(last_errno),
                       last_errno == EADDRINUSE ? " (pick another port, or port 0 to let the system choose)" : "");
}

/* The descriptors this process may open: the soft limit raised to the hard one first (Debian's soft limit
 * is 1024, which held the store to 512 clients). */
static long descriptor_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)1 << 20 ? (rlim_t)1 << 20 : rl.rlim_max;
        if (want > rl.rlim_cur) {
            rl.rlim_cur = want;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    return rl.rlim_cur == RLIM_INFINITY ? (long)1 << 20 : (long)rl.rlim_cur;
}

static baton__store_limits default_limits(const baton__store_limits *in) {
    baton__store_limits l = in ? *in : (baton__store_limits){0};
    /* thousands of ranks connect at once; the server answers their handshakes one by one */
    if (l.auth_timeout_ms <= 0) l.auth_timeout_ms = 30000;
    if (l.max_conns <= 0) {   /* room for the job's clients, and for the rest of the hosting process */
        long avail = descriptor_limit();
        avail = avail > 512 ? avail - 256 : avail / 2;
        l.max_conns = (int)(avail < BATON_STORE_MAX_CLIENTS ? avail : BATON_STORE_MAX_CLIENTS);
    }
    if (l.max_conns < 16) l.max_conns = 16;
    if (l.max_unauth <= 0) l.max_unauth = l.max_conns / 4;
    if (l.max_unauth < 8) l.max_unauth = 8;
    if (l.max_bytes == 0) l.max_bytes = (size_t)256 << 20;
    return l;
}

int baton__store_server_start_ex(const char *host, int port, const uint8_t *secret, size_t secret_len,
                                 const baton__store_limits *lim, baton_store_server **out) {
    *out = NULL;
    int rc = baton__store_check_secret(secret, secret_len);
    if (rc < 0) return rc;
    if (port < 0 || port > 65535) return baton__fail(BATON_EINVAL, "store: port %d is not in 0..65535", port);
    baton_store_server *s = calloc(1, sizeof *s);
    if (!s) return baton__fail(BATON_ENOMEM, "store: out of memory");
    s->listen_fd = s->wake_fd = s->epfd = -1;
    pthread_mutex_init(&s->mu, NULL);
    memcpy(s->secret, secret, secret_len);
    s->secret_len = secret_len;
    s->lim = default_limits(lim);
    s->next_deadline = UINT64_MAX;
    rc = store_kv_init(&s->kv, s->lim.max_bytes);
    if (rc < 0) goto fail;
    rc = open_listener(host ? host : "127.0.0.1", port, &s->listen_fd, &s->port);
    if (rc < 0) goto fail;
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->wake_fd < 0 || s->epfd < 0) {
        rc = baton__fail(BATON_ESYS, "store: eventfd/epoll_create1: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event el = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event ew = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd, &el) != 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake_fd, &ew) != 0) {
        rc = baton__fail(BATON_ESYS, "store: epoll_ctl: %s", strerror(errno));
        goto fail;
    }
    /* the server thread takes no signals: they belong to the host program's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        rc = baton__fail(BATON_ESYS, "store: pthread_create: %s", strerror(e));
        goto fail;
    }
    s->thread_started = 1;
    *out = s;
    return BATON_OK;
fail:
    baton_store_server_stop(s);
    return rc;
}

int baton_store_server_start(const char *host, int port, const uint8_t *secret, size_t secret_len,
                             baton_store_server **out) {
    return baton__store_server_start_ex(host, port, secret, secret_len, NULL, out);
}

int baton_store_server_port(const baton_store_server *srv) { return srv ? srv->port : -1; }

const char *baton_store_listen_host(const char *host) {
    if (!host || !*host || !strcmp(host, "localhost")) return host;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) == 0) { /* an address: the user's choice */
        freeaddrinfo(ai);
        return host;
    }
    hints.ai_flags = 0;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) return host; /* open_listener will say so */
    int loop4 = 0, loop6 = 0, other = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if (a->ai_family == AF_INET &&
            (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127) loop4 = 1;
        else if (a->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr)) loop6 = 1;
        else other = 1;
    }
    freeaddrinfo(ai);
    if (other || !(loop4 || loop6)) return host;
    BATON_INFO("store: '%s' resolves to loopback only on this machine (as /etc/hosts does for a Debian machine's own "
               "name); listening on every interface so that the other nodes can reach it", host);
    return loop4 ? "0.0.0.0" : "::";
}

void baton__store_server_stats(baton_store_server *s, baton__store_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void baton_store_server_stop(baton_store_server *s) {
    if (!s) return;
    if (s->thread_started) {
        uint64_t one = 1;
        ssize_t w = write(s->wake_fd, &one, sizeof one);
        (void)w;
        pthread_join(s->thread, NULL);
    }
    while (s->head) kill_conn(s, s->head, NULL);
    bury(s);
    while (s->barriers) barrier_free(s, s->barriers);
    store_kv_free(&s->kv);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->wake_fd >= 0) close(s->wake_fd);
    if (s->epfd >= 0) close(s->epfd);
    sodium_memzero(s->secret, sizeof s->secret);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
