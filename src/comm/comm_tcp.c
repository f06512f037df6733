/* comm_tcp.c: setting up the TCP mesh: listen, publish this rank's address in the store, read every
 * rank's, connect. The address published is loopback on one node; across nodes it is the local address
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

int baton__comm_setup_tcp(baton_comm *c, uint64_t deadline) {
    char host[300], addr[320], key[64];
    const char *ha = getenv("BATON_HOST_ADDR");
    int rc;
    if (ha && *ha)
        snprintf(host, sizeof host, "%s", ha);
    else if (c->nnodes == 1)
        snprintf(host, sizeof host, "127.0.0.1");
    else if ((rc = address_towards(c->store_host, host, sizeof host)) < 0)
        return rc;
    int port = 0, fd = -1;
    if ((rc = baton__tcp_listen(c->nnodes == 1 && !(ha && *ha) ? "127.0.0.1" : NULL, &port, &fd)) < 0) return rc;
    snprintf(addr, sizeof addr, "%s:%d", host, port);
    snprintf(key, sizeof key, "baton/tcp/%d", c->rank);
    char **addrs = calloc((size_t)c->world, sizeof(char *));
    if (!addrs) {
        close(fd);
        return baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
    }
    rc = baton_store_set(c->store, key, addr, strlen(addr));
    for (int r = 0; r < c->world && rc >= 0; r++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "baton/tcp/%d", r);
        double left = (double)(deadline - baton__now_ns()) / 1e9;
        rc = baton_store_get(c->store, key, &v, &len, left > 0.01 ? left : 0.01);
        if (rc < 0) {
            baton__fail_ctx(rc, "rendezvous: waiting for rank %d's TCP address: ", r);
            break;
        }
        addrs[r] = v; /* NUL-terminated by the store client */
    }
    if (rc >= 0)
        rc = baton__tcp_transport_create(c->rank, c->world, fd, (const char *const *)addrs, c->secret, deadline, &c->tcp);
    for (int r = 0; r < c->world; r++) free(addrs[r]);
    free(addrs);
    close(fd);
    return rc;
}
