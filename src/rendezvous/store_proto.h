/* store_proto.h: the rendezvous store's wire format (internal; shared by store_server.c, store_client.c
 * and the tests).
 *
 * Every field is fixed-layout little-endian; nothing is text except keys and values. A connection goes:
 *
 *   server -> client  HELLO    40 bytes  "BTS1" | version u16 | 0 u16 | server nonce[32]
 *   client -> server  AUTH     72 bytes  "BTA1" | version u16 | 0 u16 | client nonce[32] | client mac[32]
 *   server -> client  WELCOME  32 bytes  server mac[32]
 *
 *   client mac = HMAC-SHA256(secret, "baton-store/v1/client" | server nonce | client nonce)
 *   server mac = HMAC-SHA256(secret, "baton-store/v1/server" | server nonce | client nonce)
 *
 * so each side proves it knows the secret to the other (mutual), both nonces make every transcript fresh,
 * and the distinct context strings stop one side's answer from being reflected back as the other's.
 * The server reads exactly the 72 AUTH bytes from a connection before it decides; a connection that is
 * not authenticated after those 72 bytes (or within the auth timeout) is closed: an unauthenticated peer
 * can make the server read at most STORE_AUTH_BYTES = 72 bytes, and it changes no state.
 *
 * Then requests and responses, strictly one at a time per connection:
 *
 *   request   32-byte header  magic u32 | version u8 | op u8 | 0 u16 | id u32 | key_len u32 | val_len u32 |
 *                             timeout_ms u32 | arg i64
 *             then key_len key bytes, then val_len value bytes (val_len is 0 except for SET)
 *   response  24-byte header  magic u32 | version u8 | op u8 | status i16 | id u32 | val_len u32 | arg i64
 *             then val_len value bytes (GET only)
 *
 * key_len is 1..BATON_STORE_MAX_KEY and val_len 0..BATON_STORE_MAX_VALUE, checked on the header before any
 * allocation. A malformed request (bad magic/version/op/reserved field/length) closes that connection; a
 * well-formed request that cannot be served (store full, non-integer ADD target, barrier world mismatch,
 * wait timed out) gets a response with a negative baton_status in `status`.
 *   op      arg in                  timeout_ms          arg out / value out
 *   SET     -                       -                   -
 *   GET     -                       wait for the key    value
 *   CHECK   -                       -                   1 if the key exists, else 0
 *   ADD     delta                   -                   new value (stored as decimal text)
 *   DELETE  -                       -                   1 if the key existed, else 0
 *   BARRIER world (1..1<<20)        wait for the others -
 */
#ifndef BATON_STORE_PROTO_H
#define BATON_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rendezvous/store.h"
#include "util/util.h"

enum {
    STORE_VERSION = 1,
    STORE_NONCE_BYTES = 32,
    STORE_MAC_BYTES = 32,
    STORE_HELLO_BYTES = 40,
    STORE_AUTH_BYTES = 72,
    STORE_WELCOME_BYTES = 32,
    STORE_REQ_BYTES = 32,
    STORE_RESP_BYTES = 24,
    STORE_MAX_WORLD = 1 << 20,
    STORE_SECRET_MIN = 16,          /* bytes; the launcher's secrets are BATON_STORE_SECRET_BYTES (32) */
    STORE_SECRET_MAX = 64,
};

#define STORE_HELLO_MAGIC 0x31535442u   /* "BTS1" little-endian */
#define STORE_AUTH_MAGIC 0x31415442u    /* "BTA1" */
#define STORE_REQ_MAGIC 0x51535442u     /* "BTSQ" */
#define STORE_RESP_MAGIC 0x52535442u    /* "BTSR" */

typedef enum {
    STORE_OP_SET = 1,
    STORE_OP_GET = 2,
    STORE_OP_CHECK = 3,
    STORE_OP_ADD = 4,
    STORE_OP_DELETE = 5,
    STORE_OP_BARRIER = 6,
} store_op;

typedef struct {
    uint32_t magic;
    uint8_t version;
    uint8_t op;          /* store_op */
    uint16_t reserved;   /* must be 0 */
    uint32_t id;         /* echoed in the response */
    uint32_t key_len;    /* bytes, 1..BATON_STORE_MAX_KEY */
    uint32_t val_len;    /* bytes, 0..BATON_STORE_MAX_VALUE */
    uint32_t timeout_ms; /* GET and BARRIER: how long the server parks the request */
    int64_t arg;         /* ADD: delta; BARRIER: world */
} store_req;

typedef struct {
    uint32_t magic;
    uint8_t version;
    uint8_t op;
    int16_t status;      /* BATON_OK or a negative baton_status */
    uint32_t id;
    uint32_t val_len;    /* bytes of value that follow */
    int64_t arg;         /* CHECK: exists; ADD: new value; DELETE: existed */
} store_resp;


static inline void store_req_encode(const store_req *r, unsigned char b[STORE_REQ_BYTES]) {
    baton__put_le32(b, r->magic);
    b[4] = r->version;
    b[5] = r->op;
    baton__put_le16(b + 6, r->reserved);
    baton__put_le32(b + 8, r->id);
    baton__put_le32(b + 12, r->key_len);
    baton__put_le32(b + 16, r->val_len);
    baton__put_le32(b + 20, r->timeout_ms);
    baton__put_le64(b + 24, (uint64_t)r->arg);
}
static inline void store_req_decode(const unsigned char b[STORE_REQ_BYTES], store_req *r) {
    r->magic = baton__get_le32(b);
    r->version = b[4];
    r->op = b[5];
    r->reserved = baton__get_le16(b + 6);
    r->id = baton__get_le32(b + 8);
    r->key_len = baton__get_le32(b + 12);
    r->val_len = baton__get_le32(b + 16);
    r->timeout_ms = baton__get_le32(b + 20);
    r->arg = (int64_t)baton__get_le64(b + 24);
}
static inline void store_resp_encode(const store_resp *r, unsigned char b[STORE_RESP_BYTES]) {
    baton__put_le32(b, r->magic);
    b[4] = r->version;
    b[5] = r->op;
    baton__put_le16(b + 6, (uint16_t)r->status);
    baton__put_le32(b + 8, r->id);
    baton__put_le32(b + 12, r->val_len);
    baton__put_le64(b + 16, (uint64_t)r->arg);
}
static inline void store_resp_decode(const unsigned char b[STORE_RESP_BYTES], store_resp *r) {
    r->magic = baton__get_le32(b);
    r->version = b[4];
    r->op = b[5];
    r->status = (int16_t)baton__get_le16(b + 6);
    r->id = baton__get_le32(b + 8);
    r->val_len = baton__get_le32(b + 12);
    r->arg = (int64_t)baton__get_le64(b + 16);
}

/* HMAC-SHA256(secret, context | snonce | cnonce) with libsodium; who is 'c' (client) or 's' (server). */
int baton__store_mac(const uint8_t *secret, size_t secret_len, char who, const uint8_t snonce[STORE_NONCE_BYTES],
                     const uint8_t cnonce[STORE_NONCE_BYTES], uint8_t mac[STORE_MAC_BYTES]);
/* Checks 16..64 bytes and initializes libsodium. */
int baton__store_check_secret(const uint8_t *secret, size_t secret_len);

/* The server's pure checks of untrusted bytes (no I/O, no allocation, no server state; the fuzz target
 * fuzz/fuzz_store.c drives them directly):
 * baton__store_req_parse decodes a request header into *r and returns 1 when it may be served (magic,
 * version, op, reserved field and both lengths valid), 0 when the connection must be closed;
 * baton__store_auth_verify returns 1 when an AUTH message carries the right magic/version and the client
 * MAC for this server nonce, else 0. */
int baton__store_req_parse(const unsigned char b[STORE_REQ_BYTES], store_req *r);
int baton__store_auth_verify(const uint8_t *secret, size_t secret_len, const uint8_t snonce[STORE_NONCE_BYTES],
                             const unsigned char m[STORE_AUTH_BYTES]);

/* Server knobs; baton_store_server_start uses the defaults (0 = default). Tests shrink them. */
typedef struct {
    int auth_timeout_ms;   /* an unauthenticated connection is dropped after this; default 30000 */
    int max_conns;         /* open connections; default min(BATON_STORE_MAX_CLIENTS, RLIMIT_NOFILE - 256) after
                            * raising the soft limit to the hard one, at least 16 */
    int max_unauth;        /* of which not yet authenticated; default max_conns / 4, at least 8 */
    size_t max_bytes;      /* keys + values held; default 256 MiB */
} baton__store_limits;

int baton__store_server_start_ex(const char *host, int port, const uint8_t *secret, size_t secret_len,
                                 const baton__store_limits *lim, baton_store_server **out);

/* Counters for tests and diagnostics, read under the server's lock. */
typedef struct {
    uint64_t accepted;      /* connections accepted */
    uint64_t auth_ok;       /* connections that authenticated */
    uint64_t auth_failed;   /* closed for a wrong answer, garbage or timeout before authenticating */
    uint64_t proto_errors;  /* authenticated connections closed for a malformed request */
    uint64_t evicted;       /* closed to make room (connection caps) */
    uint64_t unauth_bytes;  /* bytes read from connections that were closed unauthenticated */
    uint32_t open_conns;    /* currently open */
    uint32_t keys;          /* currently stored */
} baton__store_stats;
void baton__store_server_stats(baton_store_server *srv, baton__store_stats *out);

#endif
