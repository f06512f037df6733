/* comm_mpi.c: --transport mpi. Under Open MPI's mpirun the plugin (transport/mpi.h) initializes MPI, and
 * the store's address and the job secret go out from rank 0 through MPI_Bcast, so neither MASTER_ADDR nor
 * BATON_SECRET is needed. The rest of the set-up (topology through the store, shared memory inside a node)
 * is the same as with TCP; the MPI transport then carries the traffic between nodes. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "comm/comm_internal.h"
#include "util/util.h"

enum { BOOT_BYTES = 1024 };

/* This host's IPv4 addresses that other hosts may reach, comma-separated ("" if none). */
static void own_addresses(char *out, size_t n) {
    struct ifaddrs *ifs = NULL;
    out[0] = '\0';
    if (getifaddrs(&ifs) != 0) return;
    size_t len = 0;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        char a[INET_ADDRSTRLEN];
        if (!inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a)) continue;
        if (len + strlen(a) + 2 >= n) break;
        len += (size_t)snprintf(out + len, n - len, "%s%s", len ? "," : "", a);
    }
    freeifaddrs(ifs);
}

/* Of rank 0's addresses, the first on a subnet one of this host's interfaces is on; else the first. */
static void pick_address(const char *list, char *out, size_t n) {
    struct ifaddrs *ifs = NULL;
    char copy[BOOT_BYTES];
    snprintf(copy, sizeof copy, "%s", list);
    const char *first = NULL;
    if (getifaddrs(&ifs) != 0) ifs = NULL;
    char *save = NULL;
    for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        if (!first) first = a;
        struct in_addr x;
        if (inet_pton(AF_INET, a, &x) != 1) continue;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
            uint32_t mine = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            uint32_t mask = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
            if ((mine & mask) == (x.s_addr & mask)) {
                snprintf(out, n, "%s", a);
                freeifaddrs(ifs);
                return;
            }
        }
    }
    if (ifs) freeifaddrs(ifs);
    snprintf(out, n, "%s", first ? first : "127.0.0.1");
}

int baton__comm_mpi_bootstrap(baton_comm *c, baton_store_plan *plan, double timeout_s) {
    const char *src = c->id.source;
    if (!strcmp(src, "mpich"))
        return baton__fail(BATON_EUNSUPPORTED, "--transport mpi is built against Open MPI and cannot run under MPICH's "
                                               "mpiexec: use --transport auto (or tcp), or start the job with "
                                               "mpirun.openmpi");
    if (strcmp(src, "openmpi"))
        return baton__fail(BATON_EINVAL, "--transport mpi needs a job started by Open MPI's mpirun (this one was "
                                         "started by %s): mpirun.openmpi -np N PROGRAM --transport mpi, or use "
                                         "--transport auto|tcp",
                           !strcmp(src, "none") ? "no launcher" : src);
    int rc = baton__mpi_load(&c->mpi);
    if (rc < 0) return rc;
    int mrank = -1, mworld = -1;
    if ((rc = c->mpi->init(timeout_s, &mrank, &mworld)) < 0) return rc;
    c->mpi_inited = 1;
    if (mrank != c->id.rank || mworld != c->id.world)
        return baton__fail(BATON_EINVAL, "MPI says rank %d of %d but the launcher's variables say %d of %d (the "
                                         "program must be started by mpirun directly)",
                           mrank, mworld, c->id.rank, c->id.world);
    BATON_DEBUG("mpi: %s", c->mpi->library);
    if (c->world == 1) return BATON_OK;
    /* rank 0: "port secret-hex addr1,addr2,..."; one node: loopback */
    char boot[BOOT_BYTES];
    memset(boot, 0, sizeof boot);
    memset(plan, 0, sizeof *plan);
    int one_node = c->id.local_world > 0 && c->id.local_world == c->world;
    const char *ma = getenv("MASTER_ADDR");
    if (c->rank == 0) {
        const char *s = getenv("BATON_SECRET");
        if (s && *s) {
            if (baton_secret_parse(s, plan->secret) < 0)
                return baton__fail(BATON_EINVAL, "BATON_SECRET must be %d hex characters", 2 * BATON_STORE_SECRET_BYTES);
        } else if ((rc = baton_secret_generate(plan->secret)) < 0) {
            return rc;
        }
        snprintf(plan->host, sizeof plan->host, "%s", one_node ? "127.0.0.1" : ma && *ma ? ma : "0.0.0.0");
        rc = baton_store_server_start(one_node ? plan->host : baton_store_listen_host(plan->host), 0, plan->secret,
                                      sizeof plan->secret, &c->store_server);
        int port = rc < 0 ? 0 : baton_store_server_port(c->store_server);
        char addrs[BOOT_BYTES - 200] = "", hex[2 * BATON_STORE_SECRET_BYTES + 1];
        if (one_node) snprintf(addrs, sizeof addrs, "127.0.0.1");
        else if (ma && *ma) snprintf(addrs, sizeof addrs, "%s", ma);
        else own_addresses(addrs, sizeof addrs);
        baton_secret_format(plan->secret, hex);
        /* port 0 tells the others that rank 0 failed (they stop instead of waiting) */
        snprintf(boot, sizeof boot, "%d %s %s", port, hex, addrs[0] ? addrs : "127.0.0.1");
        sodium_memzero(hex, sizeof hex);
        int brc = c->mpi->bcast(boot, sizeof boot, 0);
        sodium_memzero(boot, sizeof boot);
        if (rc < 0) return baton__fail_ctx(rc, "rank 0 cannot host the store: ");
        if (brc < 0) return brc;
        if (!strcmp(plan->host, "0.0.0.0")) snprintf(plan->host, sizeof plan->host, "127.0.0.1"); /* its own */
        plan->port = port;
    } else {
        if ((rc = c->mpi->bcast(boot, sizeof boot, 0)) < 0) return rc;
        boot[sizeof boot - 1] = '\0';
        int port = 0;
        char hex[2 * BATON_STORE_SECRET_BYTES + 8], addrs[BOOT_BYTES];
        int ok = sscanf(boot, "%d %70s %1000s", &port, hex, addrs) == 3;
        sodium_memzero(boot, sizeof boot);
        if (ok && port == 0) return baton__fail(BATON_EPEERDEAD, "rank 0 could not host the store (see its error)");
        if (!ok || port < 1 || port > 65535 || baton_secret_parse(hex, plan->secret) < 0)
            return baton__fail(BATON_EPROTO, "mpi: malformed bootstrap message from rank 0");
        sodium_memzero(hex, sizeof hex);
        pick_address(addrs, plan->host, sizeof plan->host);
        plan->port = port;
    }
    plan->have_secret = 1;
    plan->host_it = 0; /* rank 0 started it above; connect_store only joins */
    return BATON_OK;
}

int baton__comm_setup_mpi(baton_comm *c) {
    return c->mpi->transport_open(c->rank, c->world, &c->tcp);
}
