/* comm.c: building and freeing a communicator: options, identity, the rendezvous store, the topology
 * (which ranks share a node), and the transports; plus accessors and dtype / op / algorithm names. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/model.h"
#include <sodium.h>
#include <sys/random.h>
#include "util/files.h"
#include "util/util.h"

/* ---- names ----------------------------------------------------------------------------------------- */

static const char *const dtype_names[BATON_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
static const size_t dtype_sizes[BATON_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8};
static const char *const op_names[BATON_OP_COUNT] = {"sum", "avg", "min", "max", "prod"};
static const char *const algo_names[BATON_ALGO_COUNT] = {"auto", "ring", "rd", "direct", "hier"};
static const char *const transport_names[BATON_TRANSPORT_COUNT] = {"auto", "shm", "tcp", "mpi"};

size_t baton_dtype_size(baton_dtype dt) { return (unsigned)dt < BATON_DTYPE_COUNT ? dtype_sizes[dt] : 0; }
const char *baton_dtype_name(baton_dtype dt) { return (unsigned)dt < BATON_DTYPE_COUNT ? dtype_names[dt] : "?"; }
const char *baton_op_name(baton_op op) { return (unsigned)op < BATON_OP_COUNT ? op_names[op] : "?"; }
const char *baton_algo_name(baton_algo a) { return (unsigned)a < BATON_ALGO_COUNT ? algo_names[a] : "?"; }
const char *baton_transport_name(baton_transport_kind t) {
    return (unsigned)t < BATON_TRANSPORT_COUNT ? transport_names[t] : "?";
}

static int parse_name(const char *what, const char *s, const char *const *names, int n, int *out) {
    for (int i = 0; i < n; i++)
        if (s && !strcmp(s, names[i])) {
            *out = i;
            return BATON_OK;
        }
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? "|" : "", names[i]);
    return baton__fail(BATON_EINVAL, "unknown %s '%s' (expected %s)", what, s ? s : "", list);
}

int baton_dtype_parse(const char *s, baton_dtype *out) {
    int v;
    int rc = parse_name("dtype", s, dtype_names, BATON_DTYPE_COUNT, &v);
    if (rc == BATON_OK) *out = (baton_dtype)v;
    return rc;
}
int baton_op_parse(const char *s, baton_op *out) {
    int v;
    int rc = parse_name("op", s, op_names, BATON_OP_COUNT, &v);
    if (rc == BATON_OK) *out = (baton_op)v;
    return rc;
}
int baton_algo_parse(const char *s, baton_algo *out) {
    int v;
    int rc = parse_name("algorithm", s, algo_names, BATON_ALGO_COUNT, &v);
    if (rc == BATON_OK) *out = (baton_algo)v;
    return rc;
}
int baton_transport_parse(const char *s, baton_transport_kind *out) {
    int v;
    int rc = parse_name("transport", s, transport_names, BATON_TRANSPORT_COUNT, &v);
    if (rc == BATON_OK) *out = (baton_transport_kind)v;
    return rc;
}

int baton_options_from_env(baton_options *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = 300;
    o->join_timeout_s = 120;
    o->stall_warn_s = 60;
    const char *s;
    if ((s = getenv("BATON_TRANSPORT")) && *s && baton_transport_parse(s, &o->transport) < 0)
        return baton__fail(BATON_EINVAL, "BATON_TRANSPORT='%s' is not one of auto|shm|tcp|mpi", s);
    if ((s = getenv("BATON_ALGO")) && *s && baton_algo_parse(s, &o->algo) < 0)
        return baton__fail(BATON_EINVAL, "BATON_ALGO='%s' is not one of auto|ring|rd|direct|hier", s);
    int rc = baton__env_double("BATON_TIMEOUT", 300, 0.001, 1e7, &o->timeout_s);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    rc = baton__env_double("BATON_JOIN_TIMEOUT", 120, 0.001, 1e7, &o->join_timeout_s);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    rc = baton__env_double("BATON_STALL_WARN", 60, 0, 1e7, &o->stall_warn_s);
    if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
    return BATON_OK;
}

/* ---- accessors ------------------------------------------------------------------------------------- */

int baton_comm_rank(const baton_comm *c) { return c->rank; }
int baton_comm_size(const baton_comm *c) { return c->world; }
int baton_comm_local_rank(const baton_comm *c) { return c->local_rank; }
int baton_comm_local_size(const baton_comm *c) { return c->local_size; }
int baton_comm_node_rank(const baton_comm *c) { return c->node; }
int baton_comm_num_nodes(const baton_comm *c) { return c->nnodes; }
void baton_comm_set_algo(baton_comm *c, baton_algo a) { c->algo = a; }
baton_algo baton_comm_last_algo(const baton_comm *c) { return c->last_algo; }
uint64_t baton_comm_last_ns(const baton_comm *c) { return c->last_ns; }
baton_transport_kind baton_comm_transport(const baton_comm *c) { return c->transport; }

int baton_launch_env_read(baton_launch_env *out) {
    baton_identity id;
    memset(out, 0, sizeof *out);
    int rc = baton__identity_from_env(&id);
    if (rc < 0) return rc;
    out->rank = id.rank;
    out->world = id.world;
    out->local_rank = id.local_rank;
    out->local_size = id.local_world;
    out->launcher = id.source;
    return BATON_OK;
}

/* ---- store bootstrap ------------------------------------------------------------------------------- */

/* Single-node jobs without a launcher: rank 0 writes "port secret-hex" to a file in baton's private
 * per-user directory (0700, owner checked; the file 0600, created O_EXCL|O_NOFOLLOW and renamed in). */
static int write_handoff(const char *path, int port, const uint8_t *secret) {
    char hex[2 * BATON_STORE_SECRET_BYTES + 1], line[128];
    baton_secret_format(secret, hex);
    int n = snprintf(line, sizeof line, "%d %s\n", port, hex);
    int rc = baton__write_atomic(path, line, (size_t)n, BATON_FILE_PRIVATE);
    sodium_memzero(line, sizeof line);
    sodium_memzero(hex, sizeof hex);
    if (rc < 0) return baton__fail_ctx(rc, "cannot write the store hand-off file: ");
    return BATON_OK;
}

static int read_handoff(const char *path, uint64_t deadline, int *port, uint8_t *secret) {
    baton_backoff b;
    baton__backoff_init(&b);
    for (;;) {
        int fd = baton__open_regular(path);
        if (fd == BATON_ENOTFOUND) baton__clear_error();
        if (fd < 0 && fd != BATON_ENOTFOUND) return fd;
        if (fd >= 0) {
            struct stat st;
            char buf[160];
            ssize_t n = -1;
            if (fstat(fd, &st) == 0 && st.st_uid == getuid() && (st.st_mode & 077) == 0)
                n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = '\0';
                char hex[2 * BATON_STORE_SECRET_BYTES + 8];
                if (sscanf(buf, "%d %70s", port, hex) == 2 && *port > 0 && *port < 65536 &&
                    baton_secret_parse(hex, secret) == BATON_OK)
                    return BATON_OK;
            }
            return baton__fail(BATON_EPROTO, "store hand-off file %s is malformed or not private to this user", path);
        }
        if (baton__now_ns() > deadline)
            return baton__fail(BATON_ETIMEDOUT, "rank 0 did not publish the store (no %s): did it start? For a "
                                                "multi-node job set MASTER_ADDR, MASTER_PORT and BATON_SECRET",
                               path);
        baton__backoff(&b);
    }
}

/* How long joining may take: the join timeout, or the collective timeout when that is shorter (a rank that
 * is stopped before it joins is then named within --timeout, like one that stops later). */
static double join_wait_s(const baton_comm *c) {
    double t = c->opt.join_timeout_s;
    if (c->opt.timeout_s > 0 && c->opt.timeout_s < t) t = c->opt.timeout_s;
    return t;
}

static int connect_store(baton_comm *c, baton_store_plan *plan) {
    uint64_t deadline = baton__deadline_after(join_wait_s(c));
    int rc;
    if (plan->host_it) {
        if (!plan->have_secret && (rc = baton_secret_generate(plan->secret)) < 0) return rc;
        /* several nodes: a name that maps to loopback here (Debian's own-name entry) must not shut them out */
        const char *listen = plan->one_node ? plan->host : baton_store_listen_host(plan->host);
        if ((rc = baton_store_server_start(listen, plan->port, plan->secret, sizeof plan->secret,
                                           &c->store_server)) < 0)
            return baton__fail_ctx(rc, "rank 0 cannot host the store on %s:%d: ", plan->host, plan->port);
        plan->port = baton_store_server_port(c->store_server);
        if (plan->file[0] && (rc = write_handoff(plan->file, plan->port, plan->secret)) < 0) return rc;
    } else if (plan->file[0]) {
        if ((rc = read_handoff(plan->file, deadline, &plan->port, plan->secret)) < 0) return rc;
    }
    double left = (double)(deadline - baton__now_ns()) / 1e9;
    rc = baton_store_connect(plan->host, plan->port, plan->secret, sizeof plan->secret, left > 0.1 ? left : 0.1,
                             &c->store);
    if (rc < 0) return baton__fail_ctx(rc, "cannot join the store at %s:%d: ", plan->host, plan->port);
    memcpy(c->secret, plan->secret, sizeof c->secret);
    snprintf(c->store_host, sizeof c->store_host, "%s", plan->host);
    c->store_port = plan->port;
    return BATON_OK;
}

static int store_get_str(baton_comm *c, const char *key, char *out, size_t outsz, uint64_t deadline) {
    void *v = NULL;
    size_t n = 0;
    double left = (double)(deadline - baton__now_ns()) / 1e9;
    int rc = baton_store_get(c->store, key, &v, &n, left > 0.01 ? left : 0.01);
    if (rc < 0) return baton__fail_ctx(rc, "rendezvous: waiting for '%s': ", key);
    if (n >= outsz) {
        free(v);
        return baton__fail(BATON_EPROTO, "rendezvous: value of '%s' is too long (%zu bytes)", key, n);
    }
    memcpy(out, v, n);
    out[n] = '\0';
    free(v);
    return BATON_OK;
}

/* ---- topology -------------------------------------------------------------------------------------- */

static void host_identity(const baton_comm *c, char *out, size_t n) {
    const char *s = getenv("BATON_HOST_ID");
    if (s && *s) {
        snprintf(out, n, "%s", s);
        return;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    /* Launchers that name the node (baton run --node-rank, torchrun's GROUP_RANK) keep separate launches
     * on one machine separate nodes: that is how multi-node runs are tested on one machine. */
    if (c->id.node_rank >= 0)
        snprintf(out, n, "%s#%d", host, c->id.node_rank);
    else
        snprintf(out, n, "%s", host);
}

static int build_topology(baton_comm *c, char **hosts) {
    int W = c->world;
    c->node_of = calloc((size_t)W, sizeof(int));
    c->local_of = calloc((size_t)W, sizeof(int));
    c->g2l = calloc((size_t)W, sizeof(int));
    c->leaders = calloc((size_t)W, sizeof(int));
    c->local_ranks = calloc((size_t)W, sizeof(int));
    if (!c->node_of || !c->local_of || !c->g2l || !c->leaders || !c->local_ranks)
        return baton__fail(BATON_ENOMEM, "topology: out of memory");
    int nnodes = 0;
    for (int r = 0; r < W; r++) {
        int node = -1;
        for (int k = 0; k < nnodes; k++) /* against each node's first rank: O(W x nodes) */
            if (!strcmp(hosts[c->leaders[k]], hosts[r])) {
                node = k;
                break;
            }
        if (node < 0) {
            node = nnodes++;
            c->leaders[node] = r;
        }
        c->node_of[r] = node;
    }
    c->nnodes = nnodes;
    c->node = c->node_of[c->rank];
    int *counts = calloc((size_t)W, sizeof(int)); /* ranks seen so far on each node */
    if (!counts) return baton__fail(BATON_ENOMEM, "topology: out of memory");
    for (int r = 0; r < W; r++) c->local_of[r] = counts[c->node_of[r]]++;
    free(counts);
    c->local_size = 0;
    for (int r = 0; r < W; r++) {
        c->g2l[r] = c->node_of[r] == c->node ? c->local_of[r] : -1;
        if (c->node_of[r] == c->node) c->local_ranks[c->local_size++] = r;
    }
    c->local_rank = c->local_of[c->rank];
    if (c->id.local_rank >= 0 && c->id.local_rank != c->local_rank)
        BATON_INFO("launcher's local rank %d differs from the topology's %d (ranks are ordered by global rank on "
                   "each node); using %d",
                   c->id.local_rank, c->local_rank, c->local_rank);
    return BATON_OK;
}

/* The first rank whose host entry is missing (after a timeout: whom the job waits for), or -1. */
static int first_missing_host(baton_comm *c) {
    char key[64];
    for (int r = 0; r < c->world; r++) {
        int exists = 1;
        snprintf(key, sizeof key, "baton/host/%d", r);
        if (baton_store_check(c->store, key, &exists) < 0) return -1;
        if (!exists) return r;
    }
    return -1;
}

static int join_timed_out(baton_comm *c, int missing) {
    int rc;
    if (missing < 0)
        rc = baton__fail(BATON_ETIMEDOUT, "rendezvous: timed out waiting for rank 0's host table (%.3g s: the "
                                          "smaller of BATON_JOIN_TIMEOUT and BATON_TIMEOUT / --timeout)", join_wait_s(c));
    else
        rc = baton__fail(BATON_ETIMEDOUT, "rendezvous: timed out waiting for rank %d to join (%.3g s: the smaller of "
                                          "BATON_JOIN_TIMEOUT and BATON_TIMEOUT / --timeout); it may be stopped, hung "
                                          "or still starting",
                         missing, join_wait_s(c));
    return rc; /* baton_comm_init posts it for the launcher, like every timeout during init */
}

/* The host table, rank 0's one checked copy of every rank's host identity:
 *   "<nhosts>\n<host 0>\n...<host nhosts-1>\n<node of rank 0> <node of rank 1> ...\n"
 * Every rank publishes its own entry (W sets); rank 0 reads them all (W gets) and publishes the table; the
 * others read the table (W - 1 gets): about 3W store requests instead of W^2. */
static int gather_host_table(baton_comm *c, uint64_t deadline, char **table_out, size_t *len_out) {
    int W = c->world, rc = BATON_OK, nh = 0;
    char key[64];
    char **uniq = calloc((size_t)W, sizeof(char *));
    int *node = calloc((size_t)W, sizeof(int));
    char *host = malloc(300);
    if (!uniq || !node || !host) rc = baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
    for (int r = 0; r < W && rc >= 0; r++) {
        snprintf(key, sizeof key, "baton/host/%d", r);
        rc = store_get_str(c, key, host, 300, deadline);
        if (rc == BATON_ETIMEDOUT) rc = join_timed_out(c, r);
        if (rc < 0) break;
        if (!host[0] || strchr(host, '\n')) {
            rc = baton__fail(BATON_EPROTO, "rendezvous: rank %d published a host identity that is empty or spans "
                                           "lines (check BATON_HOST_ID)", r);
            break;
        }
        int k = 0;
        while (k < nh && strcmp(uniq[k], host)) k++;
        if (k == nh && !(uniq[nh++] = strdup(host))) rc = baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
        node[r] = k;
    }
    size_t cap = 16 + (size_t)W * 12, len = 0;
    for (int k = 0; k < nh; k++) cap += strlen(uniq[k]) + 1;
    char *t = rc >= 0 ? malloc(cap) : NULL;
    if (rc >= 0 && !t) rc = baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
    if (rc >= 0) {
        len += (size_t)snprintf(t + len, cap - len, "%d\n", nh);
        for (int k = 0; k < nh; k++) len += (size_t)snprintf(t + len, cap - len, "%s\n", uniq[k]);
        for (int r = 0; r < W; r++) len += (size_t)snprintf(t + len, cap - len, r + 1 < W ? "%d " : "%d\n", node[r]);
        if (len >= BATON_STORE_MAX_VALUE)
            rc = baton__fail(BATON_EINVAL, "rendezvous: the host table of %d ranks is %zu bytes, over the store's "
                                           "limit of %d (shorter BATON_HOST_ID values?)", W, len, BATON_STORE_MAX_VALUE);
    }
    for (int k = 0; k < nh; k++) free(uniq[k]);
    free(uniq);
    free(node);
    free(host);
    if (rc < 0) {
        free(t);
        return rc;
    }
    *table_out = t;
    *len_out = len;
    return BATON_OK;
}

/* Parses (and checks) the host table into hosts[W] (pointers into the table, which it edits). */
static int parse_host_table(char *t, int W, char **hosts) {
    char *p = t, *end;
    long nh = strtol(p, &end, 10);
    if (end == p || *end != '\n' || nh < 1 || nh > W) goto bad;
    p = end + 1;
    char **h = calloc((size_t)nh, sizeof(char *));
    if (!h) return baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
    for (long k = 0; k < nh; k++) {
        char *nl = strchr(p, '\n');
        if (!nl || nl == p) goto bad_free;
        *nl = '\0';
        h[k] = p;
        p = nl + 1;
    }
    for (int r = 0; r < W; r++) {
        long k = strtol(p, &end, 10);
        if (end == p || k < 0 || k >= nh || *end != (r + 1 < W ? ' ' : '\n')) goto bad_free;
        hosts[r] = h[k];
        p = end + 1;
    }
    free(h);
    if (*p) goto bad;
    return BATON_OK;
bad_free:
    free(h);
bad:
    return baton__fail(BATON_EPROTO, "rendezvous: rank 0's host table for %d ranks is malformed", W);
}

/* One launcher started every rank of the job on this machine (LOCAL_WORLD_SIZE == WORLD_SIZE, as `baton run`
 * without --nnodes, torchrun and srun on one node say), nobody renamed hosts (BATON_HOST_ID, which tests use to
 * fake nodes) and the ranks will meet in shared memory: the host table can only say "one node". Skipping it
 * saves rank 0 W + 1 store round trips and every other rank one (issue 8, startup); a rank that never comes
 * is then named when the shared-memory attach times out (shm_join_timed_out). */
static int one_node_by_launcher(const baton_comm *c) {
    const char *h = getenv("BATON_HOST_ID");
    return c->id.local_world == c->world && !(h && *h) &&
           (c->opt.transport == BATON_TRANSPORT_AUTO || c->opt.transport == BATON_TRANSPORT_SHM);
}

static int exchange(baton_comm *c, uint64_t deadline) {
    char key[64], hostid[300];
    host_identity(c, hostid, sizeof hostid);
    int rc;
    /* The job id names shared-memory segments; rank 0 makes one when no launcher did. */
    if (!c->job_id[0]) {
        if (c->rank == 0) {
            uint8_t r[8];
            if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
                return baton__fail(BATON_ESYS, "getrandom failed: %s", strerror(errno));
            for (int i = 0; i < 8; i++) snprintf(c->job_id + 2 * i, 3, "%02x", r[i]);
            if ((rc = baton_store_set(c->store, "baton/job_id", c->job_id, strlen(c->job_id))) < 0) return rc;
        } else if ((rc = store_get_str(c, "baton/job_id", c->job_id, sizeof c->job_id, deadline)) < 0) {
            return rc;
        }
    }
    /* How a node's first rank reached the store's machine, when not over loopback: the address the ranks there
     * publish for TCP if their own route to the store is loopback (comm_tcp.c). Before the host entry, so that
     * it is there once the host table is. */
    char seen[80];
    if (c->id.local_rank <= 0 && baton_store_peer_address(c->store, seen, sizeof seen) == BATON_OK &&
        !baton__is_loopback(seen) &&
        (rc = baton_store_set(c->store, "baton/store_seen", seen, strlen(seen))) < 0)
        return rc;
    snprintf(key, sizeof key, "baton/host/%d", c->rank);
    if ((rc = baton_store_set(c->store, key, hostid, strlen(hostid))) < 0) return rc;
    if (one_node_by_launcher(c)) { /* the entry above stays: it names a missing rank after a timeout */
        BATON_DEBUG("rendezvous: one node by the launcher's word (LOCAL_WORLD_SIZE = WORLD_SIZE = %d): no host table",
                    c->world);
        char **same = calloc((size_t)c->world, sizeof(char *));
        if (!same) return baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
        for (int r = 0; r < c->world; r++) same[r] = hostid;
        rc = build_topology(c, same);
        free(same);
        return rc;
    }
    char *table = NULL;
    size_t len = 0;
    if (c->rank == 0) {
        if ((rc = gather_host_table(c, deadline, &table, &len)) < 0) return rc;
        if ((rc = baton_store_set(c->store, "baton/hosts", table, len)) < 0) {
            free(table);
            return rc;
        }
    } else {
        void *v = NULL;
        double left = (double)(deadline - baton__now_ns()) / 1e9;
        rc = baton_store_get(c->store, "baton/hosts", &v, &len, left > 0.01 ? left : 0.01);
        if (rc == BATON_ETIMEDOUT) return join_timed_out(c, first_missing_host(c));
        if (rc < 0) return baton__fail_ctx(rc, "rendezvous: waiting for rank 0's host table: ");
        table = v;
    }
    char **hosts = calloc((size_t)c->world, sizeof(char *));
    if (!hosts) rc = baton__fail(BATON_ENOMEM, "rendezvous: out of memory");
    if (rc >= 0) rc = parse_host_table(table, c->world, hosts);
    if (rc >= 0) rc = build_topology(c, hosts);
    free(hosts);
    free(table);
    return rc;
}

static int setup_shm(baton_comm *c, uint64_t deadline) {
    char name[160];
    snprintf(name, sizeof name, "/baton-%s-%d-n%d", c->job_id, c->id.restart, c->node);
    int rc = baton__shm_open(name, c->local_rank, c->local_size, c->local_ranks, deadline, &c->shm);
    if (rc == BATON_ETIMEDOUT && one_node_by_launcher(c)) { /* no host table waited for them: name who is missing */
        int missing = first_missing_host(c);
        if (missing >= 0) return join_timed_out(c, missing);
    }
    if (rc < 0) return rc;
    baton__shm_set_peer_check(c->shm, baton__shm_peer_check, c);
    return baton__shm_transport_create(c->shm, c->rank, c->world, c->g2l, &c->shm_tp);
}

/* ---- binding ---------------------------------------------------------------------------------------- */

/* Gives local rank r its own share of the CPUs (ncpu / local_size each, or round-robin when the ranks
 * outnumber the CPUs), for every thread of the process (OpenBLAS's pool exists already). Ranks that share
 * a core, or that migrate, spin on each other's flags in vain. BATON_BIND=none leaves placement alone;
 * auto (the default) also leaves it alone when something (mpirun, taskset, cgroups) already restricted it. */
static int bind_mode(const char **mode) {
    *mode = getenv("BATON_BIND");
    if (*mode && **mode && strcmp(*mode, "auto") && strcmp(*mode, "core") && strcmp(*mode, "none"))
        return baton__fail(BATON_EINVAL, "BATON_BIND='%s' is not one of auto|core|none", *mode);
    return BATON_OK;
}

/* The CPUs this process may run on (its affinity, which taskset, cgroups or mpirun may have narrowed). */
static int cpus_available(void) {
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) == 0) return CPU_COUNT(&cur);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

static int bind_cpus(baton_comm *c) {
    const char *mode;
    int rc = bind_mode(&mode);
    if (rc < 0) return rc;
    if (mode && !strcmp(mode, "none")) return BATON_OK;
    int forced = mode && !strcmp(mode, "core");
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) != 0) return BATON_OK;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int avail[CPU_SETSIZE], navail = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &cur)) avail[navail++] = i;
    if (!forced && navail < online) return BATON_OK; /* someone else placed us */
    if (navail < 1 || c->local_size < 2) return BATON_OK;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (c->local_size <= navail) {
        int k = navail / c->local_size;
        for (int i = 0; i < k; i++) CPU_SET(avail[c->local_rank * k + i], &set);
    } else {
        CPU_SET(avail[c->local_rank % navail], &set);
    }
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        sched_setaffinity(0, sizeof set, &set);
        return BATON_OK;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') sched_setaffinity((pid_t)atoi(e->d_name), sizeof set, &set);
    closedir(d);
    return BATON_OK;
}

/* Under `baton run` (BATON_LAUNCHER_PID): this process dies with its parent (PR_SET_PDEATHSIG). The launcher
 * gives its direct children the same, so a worker wrapped in a shell (`sh -c 'baton bench ...; echo done'`)
 * dies with the shell, which dies with the launcher, even when the launcher is SIGKILLed. A launcher that is
 * already gone makes init fail instead. */
static int tie_to_launcher(void) {
    long lp = 0;
    int rc = baton__env_long("BATON_LAUNCHER_PID", 0, 1, 1L << 30, &lp);
    if (rc == BATON_ENOTFOUND) return BATON_OK;
    if (rc < 0) return rc;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (kill((pid_t)lp, 0) != 0 && errno == ESRCH)
        return baton__fail(BATON_EPEERDEAD, "the launcher (BATON_LAUNCHER_PID=%ld) is gone", lp);
    return BATON_OK;
}

static int init_async(baton_comm *c) {
    if (pthread_mutex_init(&c->mu, NULL) || pthread_cond_init(&c->cv, NULL) || pthread_mutex_init(&c->store_mu, NULL))
        return baton__fail(BATON_ESYS, "cannot initialize the communicator's locks");
    return BATON_OK;
}

int baton_init(baton_comm **out, const baton_options *opt) {
    *out = NULL;
    baton_store_plan plan;
    memset(&plan, 0, sizeof plan);
    baton_comm *c = calloc(1, sizeof *c);
    if (!c) return baton__fail(BATON_ENOMEM, "baton_init: out of memory");
    int rc;
    if (opt)
        c->opt = *opt;
    else if ((rc = baton_options_from_env(&c->opt)) < 0)
        goto fail;
    c->algo = c->opt.algo;
    /* tuning knobs (docs/algorithms.md): direct all-reduce chunk, cross-memory attach range, streaming */
    uint64_t chunk, cma_min, cma_max, stream, hseg;
    if (((rc = baton__env_size("BATON_SHM_CHUNK", 1 << 20, 4096, BATON_SHM_STAGE_BYTES, &chunk)) < 0 &&
         rc != BATON_ENOTFOUND) ||
        ((rc = baton__env_size("BATON_CMA_MIN", 256 << 10, 0, (uint64_t)1 << 50, &cma_min)) < 0 && rc != BATON_ENOTFOUND) ||
        ((rc = baton__env_size("BATON_CMA_MAX", 0, 0, (uint64_t)1 << 50, &cma_max)) < 0 && rc != BATON_ENOTFOUND) ||
        ((rc = baton__env_size("BATON_SHM_STREAM", 16 << 20, 0, (uint64_t)1 << 50, &stream)) < 0 && rc != BATON_ENOTFOUND) ||
        ((rc = baton__env_size("BATON_HIER_SEGMENT", BATON_HIER_SEGMENT_DEFAULT, 64 << 10, BATON_SHM_STAGE_BYTES, &hseg)) < 0 &&
         rc != BATON_ENOTFOUND))
        goto fail;
    c->hier_seg_bytes = (size_t)hseg;
    c->shm_chunk_bytes = (size_t)chunk;
    c->cma_min_bytes = (size_t)cma_min;
    c->cma_max_bytes = (size_t)cma_max;
    c->shm_stream_bytes = (size_t)stream;
    if ((rc = init_async(c)) < 0) goto fail;
    if ((rc = baton__identity_from_env(&c->id)) < 0) goto fail;
    if ((rc = tie_to_launcher()) < 0) goto fail;
    const char *bind;
    if ((rc = bind_mode(&bind)) < 0) goto fail;
    c->rank = c->id.rank;
    c->world = c->id.world;
    if (c->id.local_world > BATON_SHM_MAX_LOCAL && c->opt.transport != BATON_TRANSPORT_TCP &&
        c->opt.transport != BATON_TRANSPORT_MPI) { /* before joining (MPI: setup_shm refuses if it needs shm) */
        rc = baton__fail(BATON_EINVAL, "%d local ranks on one node is over the limit of %d over shared memory "
                         "(BATON_SHM_MAX_LOCAL): run fewer ranks per node or --transport tcp",
                         c->id.local_world, BATON_SHM_MAX_LOCAL);
        goto fail;
    }
    baton__log_set_rank(c->rank);
    int use_mpi = c->opt.transport == BATON_TRANSPORT_MPI;
    if (use_mpi) rc = baton__comm_mpi_bootstrap(c, &plan, join_wait_s(c));
    else rc = baton__store_plan_from_env(&c->id, &plan);
    if (rc < 0) goto fail;
    snprintf(c->job_id, sizeof c->job_id, "%s", plan.job_id);
    if (c->world == 1) {
        char *hosts[1] = {"self"};
        if ((rc = build_topology(c, hosts)) < 0) goto fail;
        c->transport = c->opt.transport == BATON_TRANSPORT_TCP || use_mpi ? c->opt.transport : BATON_TRANSPORT_SHM;
        *out = c;
        return BATON_OK;
    }
    uint64_t deadline = baton__deadline_after(join_wait_s(c));
    /* where init's time goes, for the `joined` line: store, rendezvous, shm, tcp, barrier, cma+watchdog */
    uint64_t t[7];
    t[0] = baton__now_ns();
    if ((rc = connect_store(c, &plan)) < 0) goto fail;
    t[1] = baton__now_ns();
    if ((rc = exchange(c, deadline)) < 0) goto fail;
    t[2] = baton__now_ns();
    baton__backoff_set_load(c->local_size, cpus_available()); /* before bind_cpus narrows the affinity */
    if ((rc = bind_cpus(c)) < 0) goto fail;
    if (c->opt.transport == BATON_TRANSPORT_SHM && c->nnodes > 1) {
        rc = baton__fail(BATON_EINVAL, "--transport shm needs every rank on one node, but the job spans %d nodes "
                                       "(use auto or tcp)", c->nnodes);
        goto fail;
    }
    /* The network transport: MPI when asked for (shared memory stays inside a node, except on one node,
     * where everything goes over MPI as it goes over TCP under --transport tcp), else TCP across nodes. */
    int use_tcp = !use_mpi && (c->opt.transport == BATON_TRANSPORT_TCP || c->nnodes > 1);
    int flat_net = c->opt.transport == BATON_TRANSPORT_TCP || (use_mpi && c->nnodes == 1);
    c->transport = use_mpi ? BATON_TRANSPORT_MPI : use_tcp ? BATON_TRANSPORT_TCP : BATON_TRANSPORT_SHM;
    if (c->local_size > 1 && !flat_net && (rc = setup_shm(c, deadline)) < 0) goto fail;
    t[3] = baton__now_ns();
    if (c->shm) { /* publish what peers read to test cross-memory attach after the barrier below */
        c->cma_probe = 0xba7090000000ull + (uint64_t)c->rank;
        atomic_store(&baton__shm_rank_block(c->shm, c->local_rank)->cma_send, (uint64_t)(uintptr_t)&c->cma_probe);
    }
    if (use_tcp && (rc = baton__comm_setup_tcp(c, deadline)) < 0) goto fail;
    t[4] = baton__now_ns();
    if (use_mpi && (rc = baton__comm_setup_mpi(c)) < 0) goto fail;
    if ((rc = baton__autotune_init(c, deadline)) < 0) goto fail;
    /* Test knob (tests/test_blame.c): rank BATON_TEST_STOP_IN_INIT stops itself (SIGSTOP) here, having joined,
     * before the init barrier. Inert unless set. */
    long stop_rank = -1;
    if (baton__env_long("BATON_TEST_STOP_IN_INIT", -1, 0, c->world - 1, &stop_rank) == BATON_OK && stop_rank == c->rank)
        raise(SIGSTOP);
    if ((rc = baton_store_barrier(c->store, "baton/init", c->world, (double)(deadline - baton__now_ns()) / 1e9)) < 0)
        goto fail;
    t[5] = baton__now_ns();
    if (plan.host_it && plan.file[0]) unlink(plan.file); /* everyone joined: the hand-off is done */
    if (c->shm && (rc = baton__shm_cma_probe(c)) < 0) goto fail;
    if ((rc = baton__watchdog_start(c)) < 0) goto fail;
    t[6] = baton__now_ns();
#define MS(a, b) ((double)(t[b] - t[a]) / 1e6)
    BATON_INFO("joined: rank %d of %d, node %d of %d, local rank %d of %d, transport %s, job %s; init %.1f ms (store "
               "%.1f, rendezvous %.1f, shm %.1f, tcp %.1f, barrier %.1f, cma %.1f)",
               c->rank, c->world, c->node, c->nnodes, c->local_rank, c->local_size, baton_transport_name(c->transport),
               c->job_id, MS(0, 6), MS(0, 1), MS(1, 2), MS(2, 3), MS(3, 4), MS(4, 5), MS(5, 6));
#undef MS
    if ((rc = baton__autotune_first_use(c)) < 0) goto fail;
    *out = c;
    return BATON_OK;
fail:
    if (plan.host_it && plan.file[0]) unlink(plan.file);
    /* A timeout anywhere in init (joining, shared memory, connections, the init barrier) means some rank did
     * not come: say so in the store, so that the launcher blames a rank it finds stopped or silent rather than
     * the first rank that gave up waiting (a rank SIGSTOPped after joining, before the barrier, was not named). */
    if (rc == BATON_ETIMEDOUT && c->store) {
        char why[512];
        snprintf(why, sizeof why, "%s", baton_last_error());
        double bound = c->opt.timeout_s > 0.5 ? c->opt.timeout_s : 0.5;
        if (bound < c->opt.join_timeout_s) baton_store_set_io_timeout(c->store, bound);
        baton__post_failure(c, rc, why);
        baton__fail(rc, "%s", why);
    }
    c->broken = 1; /* no MPI_Finalize: the other ranks may never get there */
    baton_comm_free(c);
    return rc;
}

void baton_comm_free(baton_comm *c) {
    if (!c) return;
    baton__watchdog_stop(c);
    baton__async_stop(c);
    while (c->buffers) baton_buffer_free(c, c->buffers->local);
    if (c->tcp) c->tcp->ops->close(c->tcp);
    if (c->shm_tp) c->shm_tp->ops->close(c->shm_tp);
    baton__shm_close(c->shm);
    /* MPI_Finalize waits for every rank: only on a clean exit (a failed job ends through mpirun instead) */
    if (c->mpi_inited && !c->broken) c->mpi->finalize();
    baton_store_close(c->store);
    baton_store_server_stop(c->store_server);
    baton__autotune_free(c);
    baton__scratch_free(&c->scratch);
    baton__scratch_free(&c->hier_scratch);
    free(c->node_of);
    free(c->local_of);
    free(c->g2l);
    free(c->leaders);
    free(c->local_ranks);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->store_mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}
