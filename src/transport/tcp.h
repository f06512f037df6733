/* tcp.h: the TCP transport. Authenticated, non-blocking TCP connections, one per pair of ranks that talk
 * (made on first use, or all at once for tests), driven with poll() so that sendrecv moves its send and
 * its receive at the same time.
 *
 * How the communicator core sets it up (addresses travel through the rendezvous store):
 *
 *   int fd, port;
 *   if ((rc = baton__tcp_listen(host, &port, &fd)) < 0) return rc;     // host NULL: all interfaces
 *   ... publish "host:port" under this rank's key, read every rank's address into addrs[world] ...
 *   baton_transport *t;
 *   rc = baton__tcp_transport_create(rank, world, fd, addrs, secret, deadline, &t);
 *   close(fd);                                                         // the caller owns the listener
 *   ... t->ops->sendrecv(t, speer, sbuf, sbytes, rpeer, rbuf, rbytes, deadline, NULL) ...
 *   t->ops->close(t);                                                  // closes every socket, frees t
 *
 * Connection scheme: of a pair of ranks, the higher dials the lower. baton__tcp_transport_open connects
 * lazily: the first sendrecv with a lower peer dials it, with a higher one waits for it to dial; every
 * rank waiting in a sendrecv also accepts whoever dials it (so a dialling rank only ever waits for a lower
 * one, and such waits cannot form a cycle). baton__tcp_transport_create builds the full mesh at once:
 * rank i dials every j < i (in increasing j) and then accepts one connection from every j > i. Each connection starts with a handshake in which both sides prove that they know
 * the 32-byte job secret (HMAC-SHA256 over the connector's hello and fresh random nonces from both sides):
 * (all fields little-endian)
 *   connector -> acceptor  hello     40 B: "BTN1", version, from rank, to rank, world, 0, nonce_c[16]
 *   acceptor  -> connector challenge 56 B: "BTN1", status, nonce_a[16], HMAC(secret, "acc" hello nonce_a)
 *   connector -> acceptor  response  32 B: HMAC(secret, "con" hello nonce_a)
 *   acceptor  -> connector verdict    4 B: status (0 accepted)
 * status != 0 means refused: 1 wrong destination rank or world size, 2 impossible source rank, 3 duplicate
 * source rank, 4 authentication failed. The acceptor drops a connection that fails (logging why) and keeps
 * waiting for the genuine rank until the deadline; the error then names every refused connection.
 * A connector that cannot verify the acceptor's HMAC fails with BATON_EAUTH.
 *
 * Data path: sockets are non-blocking with TCP_NODELAY; sendrecv loops over sendmsg(MSG_NOSIGNAL) and
 * recv, spinning briefly (BATON_TCP_SPIN_US, default 50 us; 0 disables) before it blocks in ppoll(). The
 * spin is repeated after every wake-up when the ranks that publish this rank's host number at most the
 * cores (each has a core to itself), else it happens once per call (BATON_TCP_RESPIN=0|1 forces it).
 * When t->hdr is set every message carries that opaque header (the communicator's frame header),
 * checked by its validator before any payload byte is accepted. A baton_recv_progress, when given, is told which leading part of
 * the receive buffer is complete as data lands (the ring reduce-scatter reduces it meanwhile). Errors:
 * BATON_EPEERDEAD "rank 3 closed its connection" / "connection to rank 3 failed: ...", BATON_ETIMEDOUT
 * naming the rank(s) waited for. After any failure the transport is unusable: close it.
 *
 * Environment: BATON_TCP_SPIN_US (0..10000), BATON_TCP_RESPIN (0|1), BATON_TCP_BUF_KB (socket buffer size
 * requested with SO_SNDBUF/SO_RCVBUF; 0 = leave the kernel's autotuning, the default), BATON_TCP_CC
 * (congestion control of the data sockets: "auto", the default, replaces BBR with cubic, or reno where
 * cubic may not be chosen, and leaves any other choice of the host; "system" keeps the kernel's default;
 * a name such as cubic or reno is set on every socket, and one the kernel refuses fails the transport's
 * creation with BATON_EINVAL). Why BBR is replaced: docs/algorithms.md, "TCP congestion control". */
#ifndef BATON_TCP_H
#define BATON_TCP_H

#include <stdint.h>

#include "transport/transport.h"

#define BATON_TCP_SECRET_BYTES 32

/* Opens a listening socket on bind_host (NULL or "" = all interfaces, "127.0.0.1", a name, an IPv6
 * literal) at an OS-chosen port. *fd_out is the caller's to close; *port_out the port to publish. */
int baton__tcp_listen(const char *bind_host, int *port_out, int *fd_out);

/* Where rank `peer` listens ("host:port"), asked by the transport the first time it dials that rank. */
typedef int (*baton_tcp_addr_fn)(void *ctx, int peer, char *out, size_t cap, uint64_t deadline_ns);

typedef struct {
    int rank, world;
    int listen_fd;               /* this rank's socket from baton__tcp_listen; the transport keeps a duplicate,
                                  * the caller still closes its own */
    const uint8_t *secret;       /* BATON_TCP_SECRET_BYTES, copied */
    int ranks_on_host;           /* ranks sharing this host's cores (spin policy); 0 = assume world */
    baton_tcp_addr_fn addr_of;   /* required when world > 1 */
    void *addr_ctx;
} baton_tcp_config;

/* A transport that connects lazily: nothing is dialled here; the first sendrecv with a peer connects
 * to it (a lower rank is dialled, a higher one dials us), so a rank holds sockets only to the peers the
 * algorithms it runs use. Errors of a connection (authentication, refusal, timeout) surface in that
 * sendrecv, naming the peer. */
int baton__tcp_transport_open(const baton_tcp_config *cfg, baton_transport **out);
/* Connections open now (one per peer used so far); -1 if t is not a TCP transport. */
int baton__tcp_sockets(const baton_transport *t);
/* The congestion control of the socket to `peer` (e.g. "cubic") into out; BATON_EINVAL when there is none. */
int baton__tcp_congestion(const baton_transport *t, int peer, char *out, size_t cap);

/* Builds the full mesh at once (tests and benchmarks). peer_addrs[r] is rank r's "host:port" ("[v6addr]:port" for IPv6 literals);
 * peer_addrs[rank] is not used. listen_fd is this rank's socket from baton__tcp_listen (not closed here).
 * Fails with BATON_EINVAL (bad arguments or address), BATON_ETIMEDOUT (a peer missing at the deadline),
 * BATON_EAUTH (secret mismatch), BATON_EPROTO (malformed handshake) or BATON_ESYS; detail names the rank. */
int baton__tcp_transport_create(int rank, int world, int listen_fd, const char *const *peer_addrs,
                                const uint8_t secret[BATON_TCP_SECRET_BYTES], uint64_t deadline_ns,
                                baton_transport **out);

/* Splits "host:port" / "[v6]:port" into host (NUL-terminated, at most hostcap-1 chars) and port. */
int baton__tcp_split_addr(const char *addr, char *host, size_t hostcap, int *port);

#endif
