/* test_store.c: the rendezvous store: operations, waits, barriers, authentication, caps on lengths and
 * connections, garbage and abandoned connections, and the job-secret helpers. The server runs in-process on
 * its own thread; multi-process cases fork clients. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rendezvous/store.h"
#include "rendezvous/store_proto.h"
#include "util/util.h"

static uint8_t secret[BATON_STORE_SECRET_BYTES];

static baton_store_server *start_server(const baton__store_limits *lim) {
    baton_store_server *srv = NULL;
    if (baton_secret_generate(secret) < 0) th_fail(__FILE__, __LINE__, "secret: %s", baton_last_error());
    if (baton__store_server_start_ex("127.0.0.1", 0, secret, sizeof secret, lim, &srv) < 0)
        th_fail(__FILE__, __LINE__, "server: %s", baton_last_error());
    return srv;
}

static baton_store *connect_ok(baton_store_server *srv) {
    baton_store *st = NULL;
    if (baton_store_connect("127.0.0.1", baton_store_server_port(srv), secret, sizeof secret, 5.0, &st) < 0)
        th_fail(__FILE__, __LINE__, "connect: %s", baton_last_error());
    return st;
}

static double now_s(void) { return (double)baton__now_ns() * 1e-9; }

/* A plain TCP connection to the server, no handshake. */
static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) th_fail(__FILE__, __LINE__, "raw connect: %s", strerror(errno));
    return fd;
}

/* Reads until EOF or timeout; returns bytes read, or -1 if the connection stayed open past timeout_s. */
static long read_until_eof(int fd, double timeout_s) {
    long total = 0;
    double end = now_s() + timeout_s;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)((end - now_s()) * 1000);
        if (left <= 0) return -1;
        if (poll(&p, 1, left) <= 0) continue;
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) return total;
        total += r;
    }
}

/* Performs the client side of the handshake by hand; returns the authenticated fd. */
static int raw_auth(int port) {
    int fd = raw_connect(port);
    unsigned char hello[STORE_HELLO_BYTES], auth[STORE_AUTH_BYTES], welcome[STORE_WELCOME_BYTES];
    ASSERT_OK(baton__read_full(fd, hello, sizeof hello));
    baton__put_le32(auth, STORE_AUTH_MAGIC);
    baton__put_le16(auth + 4, STORE_VERSION);
    baton__put_le16(auth + 6, 0);
    randombytes_buf(auth + 8, STORE_NONCE_BYTES);
    ASSERT_OK(baton__store_mac(secret, sizeof secret, 'c', hello + 8, auth + 8, auth + 40));
    ASSERT_OK(baton__write_full(fd, auth, sizeof auth));
    ASSERT_OK(baton__read_full(fd, welcome, sizeof welcome));
    return fd;
}

static size_t rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtoul(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* ---- secrets --------------------------------------------------------------------------------------- */

TEST(secret_hex_roundtrip_and_generate) {
    uint8_t a[BATON_STORE_SECRET_BYTES], b[BATON_STORE_SECRET_BYTES], c[BATON_STORE_SECRET_BYTES];
    char hex[2 * BATON_STORE_SECRET_BYTES + 1];
    ASSERT_OK(baton_secret_generate(a));
    ASSERT_OK(baton_secret_generate(b));
    ASSERT_TRUE(memcmp(a, b, sizeof a) != 0);
    baton_secret_format(a, hex);
    ASSERT_EQ_INT(strlen(hex), 64);
    for (int i = 0; i < 64; i++) ASSERT_TRUE(strchr("0123456789abcdef", hex[i]) != NULL);
    ASSERT_OK(baton_secret_parse(hex, c));
    ASSERT_TRUE(memcmp(a, c, sizeof a) == 0);
    const char *known = "000102030405060708090A0B0C0D0E0F101112131415161718191a1b1c1d1e1f";
    ASSERT_OK(baton_secret_parse(known, c));
    for (int i = 0; i < 32; i++) ASSERT_EQ_INT(c[i], i);
    baton_secret_format(c, hex);
    ASSERT_STR_EQ(hex, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
}

TEST(secret_parse_rejects_bad_input) {
    uint8_t c[BATON_STORE_SECRET_BYTES];
    memset(c, 0x5a, sizeof c);
    ASSERT_EQ_INT(baton_secret_parse(NULL, c), BATON_EINVAL);
    ASSERT_EQ_INT(baton_secret_parse("", c), BATON_EINVAL);
    ASSERT_EQ_INT(baton_secret_parse("abcd", c), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "64 hex");
    char s[80];
    memset(s, 'a', 65);
    s[65] = '\0';
    ASSERT_EQ_INT(baton_secret_parse(s, c), BATON_EINVAL);
    s[64] = '\0';
    s[10] = 'g';
    ASSERT_EQ_INT(baton_secret_parse(s, c), BATON_EINVAL);
    ASSERT_CONTAINS(baton_last_error(), "position 10");
    for (size_t i = 0; i < sizeof c; i++) ASSERT_EQ_INT(c[i], 0x5a);   /* untouched on failure */
}

/* ---- operations ------------------------------------------------------------------------------------ */

TEST(set_get_check_add_delete) {
    baton_store_server *srv = start_server(NULL);
    baton_store *a = connect_ok(srv), *b = connect_ok(srv);
    ASSERT_OK(baton_store_set(a, "addr/0", "10.0.0.1:4711", 13));
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(b, "addr/0", &v, &n, 1.0));
    ASSERT_EQ_INT(n, 13);
    ASSERT_STR_EQ((char *)v, "10.0.0.1:4711");
    free(v);
    ASSERT_OK(baton_store_set(b, "addr/0", "x", 1));   /* overwrite */
    ASSERT_OK(baton_store_get(a, "addr/0", &v, &n, 1.0));
    ASSERT_STR_EQ((char *)v, "x");
    free(v);
    ASSERT_OK(baton_store_set(a, "empty", "", 0));
    ASSERT_OK(baton_store_get(b, "empty", &v, &n, 1.0));
    ASSERT_EQ_INT(n, 0);
    ASSERT_STR_EQ((char *)v, "");
    free(v);
    int ex = -1;
    ASSERT_OK(baton_store_check(a, "addr/0", &ex));
    ASSERT_EQ_INT(ex, 1);
    ASSERT_OK(baton_store_check(a, "nope", &ex));
    ASSERT_EQ_INT(ex, 0);
    int64_t r = 0;
    ASSERT_OK(baton_store_add(a, "count", 5, &r));
    ASSERT_EQ_INT(r, 5);
    ASSERT_OK(baton_store_add(b, "count", -7, &r));
    ASSERT_EQ_INT(r, -2);
    ASSERT_OK(baton_store_get(a, "count", &v, &n, 1.0));
    ASSERT_STR_EQ((char *)v, "-2");
    free(v);
    ASSERT_EQ_INT(baton_store_add(a, "addr/0", 1, &r), BATON_EINVAL);       /* "x" is not an integer */
    ASSERT_OK(baton_store_set(a, "big", "9223372036854775807", 19));
    ASSERT_EQ_INT(baton_store_add(a, "big", 1, &r), BATON_ERANGE);
    ASSERT_OK(baton_store_delete(b, "addr/0"));
    ASSERT_OK(baton_store_check(a, "addr/0", &ex));
    ASSERT_EQ_INT(ex, 0);
    ASSERT_OK(baton_store_delete(b, "addr/0"));   /* deleting an absent key is fine */
    ASSERT_EQ_INT(baton_store_get(a, "addr/0", &v, &n, 0), BATON_ETIMEDOUT);
    /* the connection survives error answers */
    ASSERT_OK(baton_store_set(a, "after", "ok", 2));
    baton_store_close(a);
    baton_store_close(b);
    baton_store_server_stop(srv);
}

TEST(large_values_and_length_caps_in_client) {
    baton_store_server *srv = start_server(NULL);
    baton_store *a = connect_ok(srv);
    size_t big = BATON_STORE_MAX_VALUE;
    unsigned char *buf = malloc(big + 1);
    for (size_t i = 0; i < big + 1; i++) buf[i] = (unsigned char)(i * 131 + 7);
    ASSERT_OK(baton_store_set(a, "blob", buf, big));
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(a, "blob", &v, &n, 1.0));
    ASSERT_EQ_U64(n, big);
    ASSERT_TRUE(memcmp(v, buf, big) == 0);
    free(v);
    ASSERT_EQ_INT(baton_store_set(a, "blob2", buf, big + 1), BATON_EINVAL);
    char key[BATON_STORE_MAX_KEY + 2];
    memset(key, 'k', sizeof key);
    key[BATON_STORE_MAX_KEY] = '\0';
    ASSERT_OK(baton_store_set(a, key, "1", 1));
    key[BATON_STORE_MAX_KEY] = 'k';
    key[BATON_STORE_MAX_KEY + 1] = '\0';
    ASSERT_EQ_INT(baton_store_set(a, key, "1", 1), BATON_EINVAL);
    ASSERT_EQ_INT(baton_store_set(a, "", "1", 1), BATON_EINVAL);
    ASSERT_OK(baton_store_set(a, "still", "ok", 2));
    free(buf);
    baton_store_close(a);
    baton_store_server_stop(srv);
}

static void *set_later(void *arg) {
    baton_store_server *srv = arg;
    baton__sleep_ns(300000000ull);
    baton_store *st = connect_ok(srv);
    baton_store_set(st, "late", "here", 4);
    baton_store_close(st);
    return NULL;
}

TEST_T(get_waits_for_a_later_set_and_times_out, 30) {
    baton_store_server *srv = start_server(NULL);
    baton_store *a = connect_ok(srv);
    pthread_t t;
    pthread_create(&t, NULL, set_later, srv);
    double t0 = now_s();
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(a, "late", &v, &n, 10.0));
    double dt = now_s() - t0;
    ASSERT_STR_EQ((char *)v, "here");
    free(v);
    ASSERT_TRUE(dt >= 0.25);
    pthread_join(t, NULL);
    t0 = now_s();
    ASSERT_EQ_INT(baton_store_get(a, "never", &v, &n, 0.4), BATON_ETIMEDOUT);
    dt = now_s() - t0;
    ASSERT_TRUE(dt >= 0.35 && dt < 5.0);
    ASSERT_CONTAINS(baton_last_error(), "never");
    ASSERT_OK(baton_store_set(a, "usable", "after timeout", 13));   /* same connection still works */
    baton_store_close(a);
    baton_store_server_stop(srv);
}

/* Every child: publish its key, count itself in, meet at a barrier twice under the same name, read all. */
static int child_work(int port, int rank, int world) {
    baton_store *st = NULL;
    if (baton_store_connect("127.0.0.1", port, secret, sizeof secret, 10.0, &st) < 0) return 10;
    char key[32], val[32];
    snprintf(key, sizeof key, "rank/%d", rank);
    int vl = snprintf(val, sizeof val, "value-%d", rank * 7);
    if (baton_store_set(st, key, val, (size_t)vl) < 0) return 11;
    int64_t r;
    if (baton_store_add(st, "arrived", 1, &r) < 0 || r < 1 || r > world) return 12;
    for (int round = 0; round < 3; round++)
        if (baton_store_barrier(st, "sync", world, 20.0) < 0) return 13;
    for (int i = 0; i < world; i++) {
        void *v;
        size_t n;
        snprintf(key, sizeof key, "rank/%d", i);
        if (baton_store_get(st, key, &v, &n, 5.0) < 0) return 15;
        snprintf(val, sizeof val, "value-%d", i * 7);
        int ok = n == strlen(val) && !memcmp(v, val, n);
        free(v);
        if (!ok) return 16;
    }
    baton_store_close(st);
    return 0;
}

TEST_T(several_processes_rendezvous_with_barriers, 60) {
    baton_store_server *srv = start_server(NULL);
    int port = baton_store_server_port(srv);
    enum { W = 6 };
    pid_t pids[W];
    for (int i = 0; i < W; i++) {
        pids[i] = fork();
        if (pids[i] == 0) _exit(child_work(port, i, W));
    }
    for (int i = 0; i < W; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ_INT(WEXITSTATUS(status), 0);
    }
    baton_store *st = connect_ok(srv);
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(st, "arrived", &v, &n, 1.0));
    ASSERT_STR_EQ((char *)v, "6");
    free(v);
    baton_store_close(st);
    baton_store_server_stop(srv);
}

TEST_T(barrier_timeout_mismatch_and_dead_participant, 30) {
    baton_store_server *srv = start_server(NULL);
    baton_store *a = connect_ok(srv), *b = connect_ok(srv);
    double t0 = now_s();
    ASSERT_EQ_INT(baton_store_barrier(a, "b", 2, 0.3), BATON_ETIMEDOUT);
    ASSERT_TRUE(now_s() - t0 >= 0.25);
    ASSERT_OK(baton_store_barrier(a, "one", 1, 1.0));
    ASSERT_EQ_INT(baton_store_barrier(a, "x", 0, 1.0), BATON_EINVAL);
    /* a participant that dies while waiting no longer counts */
    int port = baton_store_server_port(srv);
    pid_t pid = fork();
    if (pid == 0) {
        baton_store *c = NULL;
        if (baton_store_connect("127.0.0.1", port, secret, sizeof secret, 5.0, &c) < 0) _exit(1);
        baton_store_barrier(c, "d", 2, 30.0);
        _exit(2);
    }
    baton__sleep_ns(300000000ull);
    /* world mismatch against the waiting child */
    ASSERT_EQ_INT(baton_store_barrier(b, "d", 3, 1.0), BATON_EMISMATCH);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    baton__sleep_ns(200000000ull);
    ASSERT_EQ_INT(baton_store_barrier(a, "d", 2, 0.3), BATON_ETIMEDOUT);
    baton_store_close(a);
    baton_store_close(b);
    baton_store_server_stop(srv);
}

/* ---- authentication -------------------------------------------------------------------------------- */

static void snapshot_ok(baton_store_server *srv) {
    baton_store *st = connect_ok(srv);
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(st, "k", &v, &n, 1.0));
    ASSERT_STR_EQ((char *)v, "original");
    free(v);
    int ex = 1;
    ASSERT_OK(baton_store_check(st, "evil", &ex));
    ASSERT_EQ_INT(ex, 0);
    baton_store_close(st);
}

TEST_T(wrong_or_missing_secret_is_rejected_without_changing_state, 30) {
    baton__store_limits lim = {.auth_timeout_ms = 300};
    baton_store_server *srv = start_server(&lim);
    int port = baton_store_server_port(srv);
    baton_store *st = connect_ok(srv);
    ASSERT_OK(baton_store_set(st, "k", "original", 8));
    baton_store_close(st);

    uint8_t wrong[BATON_STORE_SECRET_BYTES];
    memcpy(wrong, secret, sizeof wrong);
    wrong[31] ^= 1;
    baton_store *bad = NULL;
    ASSERT_EQ_INT(baton_store_connect("127.0.0.1", port, wrong, sizeof wrong, 5.0, &bad), BATON_EAUTH);
    ASSERT_TRUE(bad == NULL);
    ASSERT_CONTAINS(baton_last_error(), "secret");

    /* a client that skips the handshake and sends a well-formed SET (key "evil") straight away */
    int fd = raw_connect(port);
    unsigned char hello[STORE_HELLO_BYTES], auth[STORE_AUTH_BYTES];
    ASSERT_OK(baton__read_full(fd, hello, sizeof hello));
    unsigned char msg[STORE_AUTH_BYTES + 64];
    store_req rq = {STORE_REQ_MAGIC, STORE_VERSION, STORE_OP_SET, 0, 1, 4, 8, 0, 0};
    store_req_encode(&rq, msg);
    memcpy(msg + STORE_REQ_BYTES, "evil", 4);
    memcpy(msg + STORE_REQ_BYTES + 4, "payload!", 8);
    store_req rq2 = {STORE_REQ_MAGIC, STORE_VERSION, STORE_OP_SET, 0, 2, 1, 8, 0, 0};
    store_req_encode(&rq2, msg + 44);
    memcpy(msg + 76, "k", 1);
    memcpy(msg + 77, "hijacked", 8);
    ASSERT_OK(baton__write_full(fd, msg, 85));
    long got = read_until_eof(fd, 5.0);
    ASSERT_EQ_INT(got, 0);   /* closed: no WELCOME, no response */
    close(fd);

    /* a client that connects and sends nothing is dropped after the auth timeout */
    fd = raw_connect(port);
    double t0 = now_s();
    got = read_until_eof(fd, 5.0);
    ASSERT_EQ_INT(got, STORE_HELLO_BYTES);
    ASSERT_TRUE(now_s() - t0 < 3.0);
    close(fd);

    /* a client that replays a MAC computed for another server nonce */
    fd = raw_connect(port);
    ASSERT_OK(baton__read_full(fd, hello, sizeof hello));
    uint8_t other[STORE_NONCE_BYTES] = {0};
    baton__put_le32(auth, STORE_AUTH_MAGIC);
    baton__put_le16(auth + 4, STORE_VERSION);
    baton__put_le16(auth + 6, 0);
    randombytes_buf(auth + 8, STORE_NONCE_BYTES);
    ASSERT_OK(baton__store_mac(secret, sizeof secret, 'c', other, auth + 8, auth + 40));
    ASSERT_OK(baton__write_full(fd, auth, sizeof auth));
    ASSERT_EQ_INT(read_until_eof(fd, 5.0), 0);
    close(fd);

    snapshot_ok(srv);
    baton__store_stats s;
    baton__store_server_stats(srv, &s);
    ASSERT_EQ_U64(s.auth_failed, 4);
    ASSERT_TRUE(s.unauth_bytes <= 4 * STORE_AUTH_BYTES);
    baton_store_server_stop(srv);
}

/* A fake server: sends a proper greeting, reads the AUTH, answers with `reply`. */
struct fake { int lfd; const char *reply; size_t reply_len; int greet; };

static void *fake_server(void *arg) {
    struct fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    unsigned char hello[STORE_HELLO_BYTES], auth[STORE_AUTH_BYTES];
    if (f->greet) {
        baton__put_le32(hello, STORE_HELLO_MAGIC);
        baton__put_le16(hello + 4, STORE_VERSION);
        baton__put_le16(hello + 6, 0);
        randombytes_buf(hello + 8, STORE_NONCE_BYTES);
        baton__write_full(fd, hello, sizeof hello);
        baton__read_full(fd, auth, sizeof auth);
    }
    baton__write_full(fd, f->reply, f->reply_len);
    baton__sleep_ns(500000000ull);
    close(fd);
    return NULL;
}

static int fake_listen(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    listen(fd, 4);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    return fd;
}

TEST_T(client_rejects_a_server_without_the_secret, 30) {
    ASSERT_OK(baton_secret_generate(secret));
    int port;
    char junk[STORE_WELCOME_BYTES];
    memset(junk, 0x42, sizeof junk);
    struct fake f = {fake_listen(&port), junk, sizeof junk, 1};
    pthread_t t;
    pthread_create(&t, NULL, fake_server, &f);
    baton_store *st = NULL;
    ASSERT_EQ_INT(baton_store_connect("127.0.0.1", port, secret, sizeof secret, 5.0, &st), BATON_EAUTH);
    ASSERT_CONTAINS(baton_last_error(), "prove");
    pthread_join(t, NULL);
    /* something that is not a store at all */
    static const char http[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    struct fake g = {f.lfd, http, sizeof http - 1, 0};
    pthread_create(&t, NULL, fake_server, &g);
    ASSERT_EQ_INT(baton_store_connect("127.0.0.1", port, secret, sizeof secret, 5.0, &st), BATON_EPROTO);
    pthread_join(t, NULL);
    close(f.lfd);
}

/* ---- malformed requests and abuse ------------------------------------------------------------------ */

static void send_header_expect_close(int port, store_req rq) {
    int fd = raw_auth(port);
    unsigned char h[STORE_REQ_BYTES];
    store_req_encode(&rq, h);
    ASSERT_OK(baton__write_full(fd, h, sizeof h));
    ASSERT_EQ_INT(read_until_eof(fd, 5.0), 0);   /* closed without a response */
    close(fd);
}

TEST_T(malformed_requests_close_only_that_connection, 30) {
    baton_store_server *srv = start_server(NULL);
    int port = baton_store_server_port(srv);
    baton_store *keep = connect_ok(srv);
    ASSERT_OK(baton_store_set(keep, "k", "original", 8));
    store_req ok = {STORE_REQ_MAGIC, STORE_VERSION, STORE_OP_SET, 0, 1, 4, 8, 0, 0};
    store_req r;
    r = ok; r.key_len = BATON_STORE_MAX_KEY + 1; send_header_expect_close(port, r);
    r = ok; r.key_len = 0xffffffffu; send_header_expect_close(port, r);
    r = ok; r.key_len = 0; send_header_expect_close(port, r);
    r = ok; r.val_len = BATON_STORE_MAX_VALUE + 1; send_header_expect_close(port, r);
    r = ok; r.val_len = 0xffffffffu; send_header_expect_close(port, r);
    r = ok; r.op = STORE_OP_GET; send_header_expect_close(port, r);   /* a value on a GET */
    r = ok; r.op = 99; send_header_expect_close(port, r);
    r = ok; r.magic = 0x12345678; send_header_expect_close(port, r);
    r = ok; r.version = 9; send_header_expect_close(port, r);
    r = ok; r.reserved = 1; send_header_expect_close(port, r);
    /* a well-formed request by hand is served, proving the raw path itself is right */
    int fd = raw_auth(port);
    unsigned char msg[STORE_REQ_BYTES + 12], resp[STORE_RESP_BYTES];
    store_req_encode(&ok, msg);
    memcpy(msg + STORE_REQ_BYTES, "evil", 4);
    memcpy(msg + STORE_REQ_BYTES + 4, "accepted", 8);
    ASSERT_OK(baton__write_full(fd, msg, sizeof msg));
    ASSERT_OK(baton__read_full(fd, resp, sizeof resp));
    store_resp rs;
    store_resp_decode(resp, &rs);
    ASSERT_EQ_INT(rs.status, BATON_OK);
    ASSERT_EQ_INT(rs.id, 1);
    close(fd);
    baton__store_stats s;
    baton__store_server_stats(srv, &s);
    ASSERT_EQ_U64(s.proto_errors, 10);
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(keep, "k", &v, &n, 1.0));   /* the long-lived client was not disturbed */
    ASSERT_STR_EQ((char *)v, "original");
    free(v);
    baton_store_close(keep);
    baton_store_server_stop(srv);
}

TEST_T(a_stalled_connection_does_not_block_others, 30) {
    baton_store_server *srv = start_server(NULL);
    int port = baton_store_server_port(srv);
    /* authenticated, then half a header and silence */
    int stalled = raw_auth(port);
    ASSERT_OK(baton__write_full(stalled, "\x42\x54\x53\x51\x01", 5));
    /* unauthenticated, 10 bytes and silence */
    int half = raw_connect(port);
    ASSERT_OK(baton__write_full(half, "0123456789", 10));
    /* a parked GET on another connection */
    baton_store *waiter = connect_ok(srv);
    pid_t pid = fork();
    if (pid == 0) {
        void *v;
        size_t n;
        _exit(baton_store_get(waiter, "go", &v, &n, 20.0) == BATON_OK && !strcmp(v, "now") ? 0 : 1);
    }
    baton_store *st = connect_ok(srv);
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_OK(baton_store_set(st, key, key, strlen(key)));
    }
    ASSERT_OK(baton_store_set(st, "go", "now", 3));
    int status;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(stalled);
    close(half);
    baton_store_close(st);
    baton_store_close(waiter);
    baton_store_server_stop(srv);
}

TEST_T(client_disconnecting_mid_wait_does_not_hurt_the_server, 30) {
    baton_store_server *srv = start_server(NULL);
    int port = baton_store_server_port(srv);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            baton_store *c = NULL;
            if (baton_store_connect("127.0.0.1", port, secret, sizeof secret, 5.0, &c) < 0) _exit(1);
            void *v;
            size_t n;
            baton_store_get(c, "never", &v, &n, 60.0);
            _exit(2);
        }
    }
    baton__sleep_ns(300000000ull);
    for (int i = 0; i < 4; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
    baton_store *st = connect_ok(srv);
    ASSERT_OK(baton_store_set(st, "never", "now set", 7));   /* wakes nobody, crashes nothing */
    void *v;
    size_t n;
    ASSERT_OK(baton_store_get(st, "never", &v, &n, 1.0));
    free(v);
    baton__store_stats s;
    for (int i = 0; i < 100; i++) {
        baton__store_server_stats(srv, &s);
        if (s.open_conns == 1) break;
        baton__sleep_ns(20000000ull);
    }
    ASSERT_EQ_INT(s.open_conns, 1);
    baton_store_close(st);
    baton_store_server_stop(srv);
}

TEST_T(connection_caps_evict_unauthenticated_first, 30) {
    baton__store_limits lim = {.max_conns = 16, .max_unauth = 8, .auth_timeout_ms = 20000};
    baton_store_server *srv = start_server(&lim);
    int port = baton_store_server_port(srv);
    baton_store *first = connect_ok(srv);
    int fds[40];
    for (int i = 0; i < 40; i++) fds[i] = raw_connect(port);
    baton_store *late = connect_ok(srv);   /* gets in although 40 silent connections came before */
    ASSERT_OK(baton_store_set(late, "k", "v", 1));
    ASSERT_OK(baton_store_set(first, "k2", "v", 1));
    baton__store_stats s;
    baton__store_server_stats(srv, &s);
    ASSERT_TRUE(s.open_conns <= 16);
    ASSERT_TRUE(s.evicted >= 32);
    for (int i = 0; i < 40; i++) close(fds[i]);
    baton_store_close(first);
    baton_store_close(late);
    baton_store_server_stop(srv);
}

TEST_T(connect_retries_until_the_server_starts, 30) {
    int port;
    int lfd = fake_listen(&port);
    close(lfd);   /* the port is free now; nobody listens on it for a while */
    ASSERT_OK(baton_secret_generate(secret));
    pid_t pid = fork();
    if (pid == 0) {
        baton__sleep_ns(600000000ull);
        baton_store_server *srv = NULL;
        if (baton_store_server_start("127.0.0.1", port, secret, sizeof secret, &srv) < 0) _exit(1);
        baton__sleep_ns(5000000000ull);
        baton_store_server_stop(srv);
        _exit(0);
    }
    double t0 = now_s();
    baton_store *st = NULL;
    ASSERT_OK(baton_store_connect("127.0.0.1", port, secret, sizeof secret, 10.0, &st));
    ASSERT_TRUE(now_s() - t0 >= 0.5);
    ASSERT_OK(baton_store_set(st, "k", "v", 1));
    baton_store_close(st);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* and gives up at its timeout when nobody comes */
    t0 = now_s();
    ASSERT_EQ_INT(baton_store_connect("127.0.0.1", port, secret, sizeof secret, 0.5, &st), BATON_ETIMEDOUT);
    ASSERT_TRUE(now_s() - t0 < 3.0);
    ASSERT_CONTAINS(baton_last_error(), "could not connect");
}

/* Connections of random bytes, 50 open at a time: most read the greeting first (so the server really reads
 * their garbage rather than seeing a reset), some send exactly one AUTH's worth, some send nothing. */
static void garbage_flood(int port, int count) {
    enum { BATCH = 50 };
    int fds[BATCH];
    for (int done = 0; done < count;) {
        int n = count - done < BATCH ? count - done : BATCH;
        for (int i = 0; i < n; i++) fds[i] = raw_connect(port);
        for (int i = 0; i < n; i++) {
            unsigned char buf[512], hello[STORE_HELLO_BYTES];
            uint32_t kind = randombytes_uniform(8);
            uint32_t len = kind == 0 ? 0 : kind == 1 ? STORE_AUTH_BYTES : randombytes_uniform(sizeof buf);
            if (kind != 2) baton__read_full(fds[i], hello, sizeof hello);
            randombytes_buf(buf, len);
            if (len) send(fds[i], buf, len, MSG_NOSIGNAL);
        }
        for (int i = 0; i < n; i++) close(fds[i]);
        done += n;
    }
}

static void flood_and_check(int count, size_t max_growth_kib) {
    baton_store_server *srv = start_server(NULL);
    int port = baton_store_server_port(srv);
    baton_store *st = connect_ok(srv);
    ASSERT_OK(baton_store_set(st, "k", "original", 8));
    garbage_flood(port, 200);   /* warm up allocator arenas */
    size_t before = rss_kib();
    garbage_flood(port, count);
    baton__store_stats s;
    for (int i = 0; i < 500; i++) {   /* let the server drain its backlog */
        baton__store_server_stats(srv, &s);
        if (s.accepted >= (uint64_t)count + 201 && s.open_conns == 1) break;
        baton__sleep_ns(10000000ull);
    }
    size_t after = rss_kib();
    fprintf(stderr, "    %d garbage connections: RSS %zu -> %zu KiB (+%ld KiB), %llu auth failures, %llu bytes read\n",
            count, before, after, (long)after - (long)before, (unsigned long long)s.auth_failed,
            (unsigned long long)s.unauth_bytes);
    ASSERT_EQ_INT(s.open_conns, 1);
    ASSERT_EQ_U64(s.auth_ok, 1);   /* only st */
    ASSERT_TRUE(s.unauth_bytes <= (uint64_t)(count + 200) * STORE_AUTH_BYTES);
    ASSERT_TRUE(after < before + max_growth_kib);
    snapshot_ok(srv);
    ASSERT_OK(baton_store_set(st, "k2", "still serving", 13));
    baton_store_close(st);
    baton_store_server_stop(srv);
}

TEST_T(garbage_from_10000_connections_leaves_it_serving, 120) {
    flood_and_check(10000, 16 * 1024);
}

/* ---- many clients ---------------------------------------------------------------------------------- */

enum { MANY_CLIENTS = 4096, MANY_THREADS = 64 };
typedef struct {
    int port, first, n, failed;
    baton_store **st;
    char err[256];
} many_arg;

static void *many_connect(void *p) {
    many_arg *a = p;
    for (int i = a->first; i < a->first + a->n && !a->failed; i++)
        if (baton_store_connect("127.0.0.1", a->port, secret, sizeof secret, 60.0, &a->st[i]) < 0) {
            snprintf(a->err, sizeof a->err, "client %d: %s", i, baton_last_error());
            a->failed = 1;
        }
    return NULL;
}

static void *many_exchange(void *p) {
    many_arg *a = p;
    char key[32], val[32];
    for (int i = a->first; i < a->first + a->n && !a->failed; i++) {
        snprintf(key, sizeof key, "c/%d", i);
        snprintf(val, sizeof val, "v%d", i);
        if (baton_store_set(a->st[i], key, val, strlen(val)) < 0) a->failed = 1;
    }
    for (int i = a->first; i < a->first + a->n && !a->failed; i++) { /* each reads another thread's key */
        int j = (i + 97) % MANY_CLIENTS;
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "c/%d", j);
        snprintf(val, sizeof val, "v%d", j);
        if (baton_store_get(a->st[i], key, &v, &len, 60.0) < 0 || len != strlen(val) || memcmp(v, val, len)) {
            snprintf(a->err, sizeof a->err, "client %d reading %s: %s", i, key, baton_last_error());
            a->failed = 1;
        }
        free(v);
    }
    return NULL;
}

/* 4,096 clients connect from 64 threads at once and stay connected while each sets a key and reads another
 * thread's. The process starts from Debian's default soft limit of 1,024 descriptors: the server raises it
 * (it held 512 clients before). */
TEST_T(store_serves_4096_clients_at_once, 120) {
    struct rlimit rl;
    ASSERT_TRUE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * MANY_CLIENTS + 512)
        th_fail(__FILE__, __LINE__, "the hard descriptor limit %llu is below %d: raise it (ulimit -Hn)",
                (unsigned long long)rl.rlim_max, 2 * MANY_CLIENTS + 512);
    rl.rlim_cur = 1024;
    ASSERT_TRUE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    baton_store_server *srv = start_server(NULL);
    baton_store **st = calloc(MANY_CLIENTS, sizeof *st);
    many_arg args[MANY_THREADS];
    pthread_t th[MANY_THREADS];
    for (int pass = 0; pass < 2; pass++) {
        for (int t = 0; t < MANY_THREADS; t++) {
            if (pass == 0)
                args[t] = (many_arg){.port = baton_store_server_port(srv), .first = t * (MANY_CLIENTS / MANY_THREADS),
                                     .n = MANY_CLIENTS / MANY_THREADS, .st = st};
            ASSERT_EQ_INT(pthread_create(&th[t], NULL, pass == 0 ? many_connect : many_exchange, &args[t]), 0);
        }
        for (int t = 0; t < MANY_THREADS; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < MANY_THREADS; t++)
            if (args[t].failed) th_fail(__FILE__, __LINE__, "pass %d: %s", pass, args[t].err);
    }
    baton__store_stats s;
    baton__store_server_stats(srv, &s);
    ASSERT_EQ_INT(s.open_conns, MANY_CLIENTS);
    ASSERT_EQ_U64(s.auth_ok, MANY_CLIENTS);
    ASSERT_EQ_U64(s.evicted, 0);
    for (int i = 0; i < MANY_CLIENTS; i++) baton_store_close(st[i]);
    free(st);
    baton_store_server_stop(srv);
}

/* Where a store for several machines listens: an address or "localhost" as given; a name that resolves only to
 * loopback here (this machine's own name on Debian, 127.0.1.1) becomes every interface of its family, so the
 * other machines can reach it (tests/cluster/test_netns_hosts.sh runs that case across simulated nodes). */
TEST(listen_host_keeps_addresses_and_opens_loopback_only_names) {
    ASSERT_STR_EQ(baton_store_listen_host("127.0.0.1"), "127.0.0.1");
    ASSERT_STR_EQ(baton_store_listen_host("10.1.2.3"), "10.1.2.3");
    ASSERT_STR_EQ(baton_store_listen_host("::1"), "::1");
    ASSERT_STR_EQ(baton_store_listen_host("localhost"), "localhost");
    ASSERT_TRUE(baton_store_listen_host(NULL) == NULL);
    char host[256] = "";
    ASSERT_EQ_INT(gethostname(host, sizeof host - 1), 0);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) {
        fprintf(stderr, "    %s does not resolve here: the name case is left to the cluster test\n", host);
        return;
    }
    int loop = (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) == 127 && !ai->ai_next;
    freeaddrinfo(ai);
    fprintf(stderr, "    this machine's name %s resolves to %s\n", host, loop ? "loopback" : "another address");
    if (loop) ASSERT_STR_EQ(baton_store_listen_host(host), "0.0.0.0");
    /* and a store started there is reached through the name, the way node 0's own workers reach it */
    uint8_t secret[BATON_STORE_SECRET_BYTES] = {1};
    baton_store_server *srv = NULL;
    baton_store *st = NULL;
    ASSERT_OK(baton_store_server_start(baton_store_listen_host(host), 0, secret, sizeof secret, &srv));
    ASSERT_OK(baton_store_connect(host, baton_store_server_port(srv), secret, sizeof secret, 10.0, &st));
    char peer[80];
    ASSERT_OK(baton_store_peer_address(st, peer, sizeof peer));
    ASSERT_TRUE(peer[0] != '\0');
    baton_store_close(st);
    baton_store_server_stop(srv);
}
