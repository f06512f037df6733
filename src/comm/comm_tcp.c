/* comm_tcp.c: setting up TCP: listen, publish this rank's address in the store; the transport reads a
 * peer's address from the store when it first connects to it. The address published is loopback on one node; across nodes it is the local address
 * this host uses to reach the store (the interface that routes there), or BATON_HOST_ADDR if set. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "transport/tcp.h"
#include "util/util.h"

/* The local address of a UDP socket "connected" towards host: no packet is sent. */
static int address_towards(const char *host, char *out, size_t n) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(host, "9", &hints, &res) != 0 || !res)
        return baton__fail(BATON_EINVAL, "cannot resolve the store host '%s' to find this host's address; set "
                                         "BATON_HOST_ADDR", host);
    int rc = BATON_ESYS;
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        char buf[INET6_ADDRSTRLEN];
        const void *a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                                                 : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        if (inet_ntop(ss.ss_family, a, buf, sizeof buf)) {
            snprintf(out, n, ss.ss_family == AF_INET6 ? "[%s]" : "%s", buf);
            rc = BATON_OK;
        }
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    if (rc < 0) return baton__fail(rc, "cannot find this host's address towards '%s'; set BATON_HOST_ADDR", host);
    return BATON_OK;
}

/* Across nodes, a route to the store over loopback means either that every node runs on this machine (launchers
 * started side by side with --rdzv 127.0.0.1:PORT: loopback is right) or that the store's host name maps to
 * loopback on this machine only (Debian's /etc/hosts entry for the machine's own name, 127.0.1.1), and the other
 * nodes cannot reach that. Those other nodes' first ranks publish the address they reached the store at
 * ("baton/store_seen", before their host entries, so it is there once the host table is): when it exists it is
 * this machine's address as they see it, and it is what this rank publishes. */
static int not_loopback(baton_comm *c, char *host, size_t n) {
    if (!baton__is_loopback(host)) return BATON_OK;
    int exists = 0, rc;
    void *v = NULL;
    size_t len = 0;
    pthread_mutex_lock(&c->store_mu);
    rc = baton_store_check(c->store, "baton/store_seen", &exists);
    if (rc == BATON_OK && exists) rc = baton_store_get(c->store, "baton/store_seen", &v, &len, 1.0);
    pthread_mutex_unlock(&c->store_mu);
    if (rc < 0) return rc;
    if (!exists) return BATON_OK; /* every node reached the store over loopback: they all run here */
    if (len == 0 || len >= n || len >= 64) {
        free(v);
        return baton__fail(BATON_EPROTO, "tcp: baton/store_seen holds %zu bytes, not an address", len);
    }
    BATON_INFO("tcp: '%s' is reached over loopback here (from %s); publishing %.*s, where the other nodes reach "
               "this machine", c->store_host, host, (int)len, (char *)v);
    memcpy(host, v, len);
    host[len] = '\0';
    free(v);
    return BATON_OK;
}

/* The transport's address lookup: rank `peer`'s published "host:port", from the store. */
static int addr_of(void *ctx, int peer, char *out, size_t cap, uint64_t deadline) {
    baton_comm *c = ctx;
    char key[64];
    snprintf(key, sizeof key, "baton/tcp/%d", peer);
    void *v = NULL;
    size_t len = 0;
    uint64_t now = baton__now_ns();
    double left = deadline > now ? (double)(deadline - now) / 1e9 : 0;
    pthread_mutex_lock(&c->store_mu);
    int rc = baton_store_get(c->store, key, &v, &len, left > 0.01 ? left : 0.01);
    pthread_mutex_unlock(&c->store_mu);
    if (rc < 0) return baton__fail_ctx(rc, "tcp: waiting for rank %d's address: ", peer);
    if (len == 0 || len >= cap) {
        free(v);
        return baton__fail(BATON_EPROTO, "tcp: rank %d published an address of %zu bytes", peer, len);
    }
    memcpy(out, v, len);
    out[len] = '\0';
    free(v);
    return BATON_OK;
}

int baton__comm_setup_tcp(baton_comm *c, uint64_t deadline) {
    (void)deadline;
    char host[300], addr[320], key[64];
    const char *ha = getenv("BATON_HOST_ADDR");
    int rc;
    if (ha && *ha && strchr(ha, ':') && ha[0] != '[') /* an IPv6 address: "host:port" needs it in brackets */
        snprintf(host, sizeof host, "[%.250s]", ha);
    else if (ha && *ha)
        snprintf(host, sizeof host, "%s", ha);
    else if (c->nnodes == 1)
        snprintf(host, sizeof host, "127.0.0.1");
    else if ((rc = address_towards(c->store_host, host, sizeof host)) < 0)
        return rc;
    else if ((rc = not_loopback(c, host, sizeof host)) < 0)
        return rc;
    int port = 0, fd = -1;
    /* every interface, in the family of the address published ("[...]": IPv6; a wildcard without a family took
     * IPv4's, and peers were refused at an IPv6 address) */
    const char *bind_host = c->nnodes == 1 && !(ha && *ha) ? "127.0.0.1" : host[0] == '[' ? "::" : "0.0.0.0";
    if ((rc = baton__tcp_listen(bind_host, &port, &fd)) < 0) return rc;
    snprintf(addr, sizeof addr, "%s:%d", host, port);
    snprintf(key, sizeof key, "baton/tcp/%d", c->rank);
    pthread_mutex_lock(&c->store_mu);
    rc = baton_store_set(c->store, key, addr, strlen(addr));
    pthread_mutex_unlock(&c->store_mu);
    if (rc >= 0) {
        /* Connections come on first use (tcp.h): a rank holds sockets only to the peers its algorithms talk
         * to (ring neighbours, recursive-doubling and tree partners, node leaders), O(log n), not n - 1. */
        baton_tcp_config cfg = {.rank = c->rank, .world = c->world, .listen_fd = fd, .secret = c->secret,
                                .ranks_on_host = c->local_size, .addr_of = addr_of, .addr_ctx = c};
        rc = baton__tcp_transport_open(&cfg, &c->tcp);
    }
    close(fd);
    return rc;
}
