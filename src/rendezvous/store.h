/* store.h: the rendezvous store, a small authenticated TCP key-value store.
 *
 * The server runs on a background thread inside `baton run` (or inside rank 0 when workers are started by
 * torchrun / mpirun / srun). It listens on 127.0.0.1 unless told otherwise, on a port the OS picks. Every
 * connection first answers an HMAC-SHA256 challenge keyed by the job's secret; nothing else is read before
 * that, every length is capped before allocation, and a misbehaving connection is closed without touching
 * state. Clients are used by one thread at a time.
 *
 *   baton_store_server *srv;  baton_store_server_start("127.0.0.1", 0, secret, 32, &srv);
 *   baton_store *st;          baton_store_connect("127.0.0.1", baton_store_server_port(srv), secret, 32, 10.0, &st);
 *   baton_store_set(st, "addr/3", "10.0.0.2:4711", 13);
 *   void *v; size_t n;        baton_store_get(st, "addr/3", &v, &n, 30.0);  free(v);
 */
#ifndef BATON_STORE_H
#define BATON_STORE_H

#include <stddef.h>
#include <stdint.h>

enum {
    BATON_STORE_SECRET_BYTES = 32,          /* secrets are 32 random bytes, 64 hex chars in BATON_SECRET */
    BATON_STORE_MAX_KEY = 256,              /* bytes */
    BATON_STORE_MAX_VALUE = 1 << 20,        /* bytes */
    BATON_STORE_MAX_KEYS = 1 << 16,         /* keys held at once */
    BATON_STORE_MAX_CLIENTS = 16384,        /* connections served at once (fewer if descriptors are short) */
};

typedef struct baton_store_server baton_store_server;
typedef struct baton_store baton_store;

/* ---- server ---- */
/* host NULL means "127.0.0.1"; port 0 lets the OS pick. */
int baton_store_server_start(const char *host, int port, const uint8_t *secret, size_t secret_len,
                             baton_store_server **out);
int baton_store_server_port(const baton_store_server *srv);
/* Where a store that other machines must reach should listen, given the host the job names it by: host itself,
 * or the wildcard address of its family ("0.0.0.0" or "::") when host is a name (not an address, not
 * "localhost") that resolves here to loopback addresses only, as Debian's /etc/hosts makes the machine's own
 * name (127.0.1.1): listening there would shut every other machine out. Returns host or a static string. */
const char *baton_store_listen_host(const char *host);
void baton_store_server_stop(baton_store_server *srv);   /* NULL is a no-op; closes every connection */

/* ---- client ---- */
/* Retries refused connections until timeout_s (the server may not be up yet). */
int baton_store_connect(const char *host, int port, const uint8_t *secret, size_t secret_len,
                        double timeout_s, baton_store **out);
void baton_store_close(baton_store *st);                  /* NULL is a no-op */
/* Ends a request another thread may be blocked in on this connection (it fails at once) and every later one;
 * the connection still has to be closed, after that thread is done with it. */
void baton_store_interrupt(baton_store *st);
/* The numeric address of the server this client reached ("10.0.0.1", "[fd00::1]"): how this machine sees the
 * store's; BATON_ESYS if the socket cannot say. */
int baton_store_peer_address(const baton_store *st, char *out, size_t n);
/* Bounds every later request that does not wait for a key (and the grace on top of waits) by s seconds,
 * instead of the connect timeout: a caller that must not hang on a frozen store (a failure report) lowers it.
 * A request that runs out of time leaves the connection unusable for later requests. */
void baton_store_set_io_timeout(baton_store *st, double s);
int baton_store_set(baton_store *st, const char *key, const void *val, size_t len);
/* Waits up to timeout_s for the key to exist; *val is malloc'ed (caller frees), NUL-terminated for
 * convenience (the terminator is not counted in *len). BATON_ETIMEDOUT if it never appears. */
int baton_store_get(baton_store *st, const char *key, void **val, size_t *len, double timeout_s);
/* Does not wait: *exists = 0 or 1. */
int baton_store_check(baton_store *st, const char *key, int *exists);
/* Atomically adds delta to the decimal integer stored at key (absent counts as 0); *result = new value. */
int baton_store_add(baton_store *st, const char *key, int64_t delta, int64_t *result);
int baton_store_delete(baton_store *st, const char *key);
/* All `world` participants call it with the same name; returns when all arrived or fails on timeout. */
int baton_store_barrier(baton_store *st, const char *name, int world, double timeout_s);

/* Secrets as hex: parse 64 hex chars into 32 bytes / format 32 bytes as 64 hex chars + NUL. */
int baton_secret_parse(const char *hex, uint8_t out[BATON_STORE_SECRET_BYTES]);
void baton_secret_format(const uint8_t secret[BATON_STORE_SECRET_BYTES], char hex[2 * BATON_STORE_SECRET_BYTES + 1]);
int baton_secret_generate(uint8_t out[BATON_STORE_SECRET_BYTES]);   /* from libsodium's randombytes */

#endif
