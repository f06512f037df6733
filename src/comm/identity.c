/* identity.c: who this process is in the job (rank, world, local rank, node) and where the rendezvous
 * store is, from whichever launcher started it: `baton run`, torchrun, Open MPI's mpirun, MPICH's
 * mpiexec (Hydra) or Slurm's srun. The first family whose rank variable is set is used; a missing or
 * inconsistent companion variable is an error that names it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "util/files.h"
#include "util/util.h"

typedef struct {
    const char *source;
    const char *rank, *world, *local_rank, *local_world, *node_rank, *nnodes, *restart;
} env_family;

static const env_family families[] = {
    {"baton", "BATON_RANK", "BATON_WORLD_SIZE", "BATON_LOCAL_RANK", "BATON_LOCAL_WORLD_SIZE", "BATON_NODE_RANK",
     "BATON_NNODES", "BATON_RESTART_COUNT"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", NULL,
     "TORCHELASTIC_RESTART_COUNT"},
    /* Open MPI's OMPI_COMM_WORLD_NODE_RANK is the process's index among the processes of its node (0, 1, ...
     * on one machine), not the node's index: taking it for one made every rank of `mpirun -np 2` a node of
     * its own. Nodes come from the host names; the node count from OMPI_MCA_orte_num_nodes. */
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, "OMPI_MCA_orte_num_nodes", NULL},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL, NULL, NULL},
    /* srun's job step: SLURM_STEP_NUM_NODES may be fewer than the allocation's SLURM_JOB_NUM_NODES; the local
     * world size comes from SLURM_STEP_TASKS_PER_NODE (slurm_local_world). */
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "SLURM_NODEID", "SLURM_STEP_NUM_NODES", NULL},
};

enum { MAX_WORLD = 1 << 20 };

/* SLURM_STEP_TASKS_PER_NODE lists the tasks of each node of the step, runs compressed: "4", "2(x3)", "3(x2),1".
 * Returns node `node`'s count, or -1 when the variable is absent or does not cover that node. */
static int slurm_local_world(int node) {
    const char *s = getenv("SLURM_STEP_TASKS_PER_NODE");
    if (!s || !*s || node < 0) s = NULL;
    for (long seen = 0; s && *s;) {
        char *end;
        long count = strtol(s, &end, 10), reps = 1;
        if (end == s || count < 1) return -1;
        s = end;
        if (*s == '(') {
            if (s[1] != 'x') return -1;
            reps = strtol(s + 2, &end, 10);
            if (end == s + 2 || reps < 1 || *end != ')') return -1;
            s = end + 1;
        }
        if (node < seen + reps) return count > (1L << 20) ? -1 : (int)count;
        seen += reps;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return -1;
}

static int opt_var(const char *name, long min, long max, int *out) {
    *out = -1;
    if (!name) return BATON_OK;
    long v;
    int rc = baton__env_long(name, -1, min, max, &v);
    if (rc == BATON_ENOTFOUND) return BATON_OK;
    if (rc < 0) return rc;
    *out = (int)v;
    return BATON_OK;
}

int baton__identity_from_env(baton_identity *id) {
    memset(id, 0, sizeof *id);
    id->local_rank = id->local_world = id->node_rank = id->nnodes = -1;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        const env_family *fam = &families[f];
        const char *r = getenv(fam->rank);
        const char *w = getenv(fam->world);
        int own = !strcmp(fam->source, "baton") || !strcmp(fam->source, "torchrun");
        if ((!r || !*r) && own && w && *w)
            return baton__fail(BATON_EINVAL, "%s='%s' is set but %s is not: set both (rank and world size) or neither",
                               fam->world, w, fam->rank);
        if (!r || !*r) continue;
        /* Slurm's variables describe the job in the batch script too (SLURM_PROCID=0 of SLURM_NTASKS); only a
         * task of a job step (srun, which sets SLURM_STEP_ID) is one rank of a data-parallel job. */
        if (!strcmp(fam->source, "slurm") && !getenv("SLURM_STEP_ID")) continue;
        if (!w || !*w)
            return baton__fail(BATON_EINVAL, "%s is set but %s is not: set both (rank and world size) or neither",
                               fam->rank, fam->world);
        long rank, world;
        int rc = baton__env_long(fam->world, 1, 1, MAX_WORLD, &world);
        if (rc < 0) return rc;
        rc = baton__env_long(fam->rank, 0, 0, world - 1, &rank);
        if (rc < 0)
            return baton__fail(BATON_EINVAL, "%s='%s' must be a rank in [0, %ld) since %s=%ld", fam->rank, r, world,
                               fam->world, world);
        id->rank = (int)rank;
        id->world = (int)world;
        id->source = fam->source;
        if ((rc = opt_var(fam->local_world, 1, world, &id->local_world)) < 0) return rc;
        if ((rc = opt_var(fam->local_rank, 0, world - 1, &id->local_rank)) < 0) return rc;
        if (id->local_world > 0 && id->local_rank >= id->local_world)
            return baton__fail(BATON_EINVAL, "%s=%d must be below %s=%d", fam->local_rank, id->local_rank,
                               fam->local_world, id->local_world);
        if ((rc = opt_var(fam->nnodes, 1, world, &id->nnodes)) < 0) return rc;
        if ((rc = opt_var(fam->node_rank, 0, world - 1, &id->node_rank)) < 0) return rc;
        if (id->nnodes > 0 && id->node_rank >= id->nnodes)
            return baton__fail(BATON_EINVAL, "%s=%d must be below %s=%d", fam->node_rank, id->node_rank, fam->nnodes,
                               id->nnodes);
        if (!strcmp(fam->source, "slurm") && id->local_world < 0) {
            id->local_world = slurm_local_world(id->node_rank);
            if (id->local_world > 0 && id->local_rank >= id->local_world) id->local_world = -1;
        }
        int restart;
        if ((rc = opt_var(fam->restart, 0, 1 << 30, &restart)) < 0) return rc;
        id->restart = restart < 0 ? 0 : restart;
        return BATON_OK;
    }
    id->rank = 0;
    id->world = 1;
    id->local_rank = 0;
    id->local_world = 1;
    id->node_rank = 0;
    id->nnodes = 1;
    id->source = "none";
    return BATON_OK;
}

static int split_host_port(const char *var, const char *s, char *host, size_t hostsz, int *port) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return baton__fail(BATON_EINVAL, "%s='%s' is not HOST:PORT (e.g. 127.0.0.1:29500)", var, s);
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') { /* [::1]:port */
        s++;
        hl -= 2;
    }
    if (hl >= hostsz) return baton__fail(BATON_EINVAL, "%s: host name is too long", var);
    memcpy(host, s, hl);
    host[hl] = '\0';
    long p;
    if (baton__parse_long(colon + 1, 1, 65535, &p) < 0)
        return baton__fail(BATON_EINVAL, "%s='%s': the port must be a number in [1, 65535]", var, s);
    *port = (int)p;
    return BATON_OK;
}

/* A key that every rank of one single-node job computes alike, for the hand-off file. */
static void local_job_key(char *out, size_t n) {
    const char *s;
    if ((s = getenv("BATON_JOB_ID")) && *s) { snprintf(out, n, "j%s", s); return; }
    unsigned long h = 5381;
    const char *parts[] = {getenv("PMIX_NAMESPACE"), getenv("OMPI_MCA_ess_base_jobid"), getenv("PMI_KVSNAME"),
                           getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_ID"), getenv("MASTER_PORT")};
    int any = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!parts[i]) continue;
        any = 1;
        for (const char *p = parts[i]; *p; p++) h = h * 33 + (unsigned char)*p;
        h = h * 33 + '|';
    }
    /* Under mpirun and srun every rank of a node has the same parent: the last resort. */
    if (!any) h = h * 33 + (unsigned long)getppid();
    snprintf(out, n, "h%lx", h);
}

/* The store hand-off file of a launcher-less single-node job: in baton's private per-user directory, named
 * by a key every rank of the job computes alike. */
static int handoff_path(baton_store_plan *plan) {
    char key[96], dir[sizeof plan->file - 120];
    local_job_key(key, sizeof key);
    int rc = baton__private_dir(dir, sizeof dir);
    if (rc < 0) return rc;
    snprintf(plan->file, sizeof plan->file, "%s/store-%s", dir, key);
    return BATON_OK;
}

int baton__is_loopback(const char *host) {
    return !strncmp(host, "127.", 4) || !strcmp(host, "localhost") || !strcmp(host, "::1") || !strcmp(host, "[::1]");
}

int baton__store_plan_from_env(const baton_identity *id, baton_store_plan *plan) {
    memset(plan, 0, sizeof *plan);
    const char *s;
    if ((s = getenv("BATON_SECRET")) && *s) {
        if (baton_secret_parse(s, plan->secret) < 0)
            return baton__fail(BATON_EINVAL, "BATON_SECRET must be %d hex characters (e.g. from `openssl rand -hex 32`)",
                               2 * BATON_STORE_SECRET_BYTES);
        plan->have_secret = 1;
    }
    if ((s = getenv("BATON_JOB_ID")) && *s) {
        size_t n = strlen(s);
        if (n >= 40 || strspn(s, "0123456789abcdefABCDEF") != n)
            return baton__fail(BATON_EINVAL, "BATON_JOB_ID='%s' must be 1 to 39 hex characters", s);
        snprintf(plan->job_id, sizeof plan->job_id, "%s", s);
    }
    if (id->world == 1 && !getenv("BATON_STORE_ADDR")) {
        plan->host_it = 0; /* a job of one needs no store */
        plan->port = -1;
        return BATON_OK;
    }
    if ((s = getenv("BATON_STORE_ADDR")) && *s) {
        int rc = split_host_port("BATON_STORE_ADDR", s, plan->host, sizeof plan->host, &plan->port);
        if (rc < 0) return rc;
        if (!plan->have_secret)
            return baton__fail(BATON_EINVAL, "BATON_STORE_ADDR is set but BATON_SECRET is not: both come from "
                                             "`baton run`; set BATON_SECRET to the job's 64-hex-character secret");
        return BATON_OK;  /* the launcher hosts the store */
    }
    const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
    /* One node when the launcher says so, or when rank 0's store is on a loopback address: torchrun's
     * variables set by hand on one host (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, no LOCAL_WORLD_SIZE). */
    int single_node = (id->local_world > 0 && id->local_world == id->world) || (id->nnodes == 1) ||
                      (ma && baton__is_loopback(ma));
    plan->one_node = single_node;
    if (ma && *ma && mp && *mp) {
        long port;
        if (baton__parse_long(mp, 1, 65535, &port) < 0)
            return baton__fail(BATON_EINVAL, "MASTER_PORT='%s' must be a port number in [1, 65535]", mp);
        /* torchrun's own agent store may already hold MASTER_PORT; baton's store then takes the next port. */
        const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
        if (agent && !strcmp(agent, "True")) port = port == 65535 ? 65534 : port + 1;
        long bport;
        int rc = baton__env_long("BATON_STORE_PORT", port, 1, 65535, &bport);
        if (rc < 0 && rc != BATON_ENOTFOUND) return rc;
        snprintf(plan->host, sizeof plan->host, "%s", ma);
        plan->port = (int)bport;
        plan->host_it = id->rank == 0;
        if (!plan->have_secret) {
            if (!single_node)
                return baton__fail(BATON_EINVAL, "a multi-node job started by %s needs BATON_SECRET (64 hex "
                                                 "characters, the same on every node) to authenticate its store",
                                   id->source);
            int rc2 = handoff_path(plan);
            if (rc2 < 0) return rc2;
        }
        return BATON_OK;
    }
    if (!single_node)
        return baton__fail(BATON_EINVAL, "a multi-node job started by %s needs MASTER_ADDR and MASTER_PORT (where "
                                         "rank 0 hosts baton's store) and BATON_SECRET",
                           id->source);
    /* One node, no address given: rank 0 hosts on loopback and hands port and secret over in a private file. */
    snprintf(plan->host, sizeof plan->host, "127.0.0.1");
    plan->port = 0;
    plan->host_it = id->rank == 0;
    return handoff_path(plan);
}
