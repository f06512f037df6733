/* run_args.c: `baton run`'s command line: the help text, the flags (baton's and torchrun's spellings) and
 * the checks between them. See run_parse_args in run.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"
#include "transport/shm.h"
#include "util/util.h"

enum { MAX_NPROC = 4096, MAX_NNODES = 4096, MAX_RESTARTS = 1000 };


static const char usage_text[] =
    "usage: baton run [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N worker processes of PROGRAM (torchrun-style) and hosts the job's rendezvous store.\n"
    "\n"
    "  -n, --nproc-per-node N|auto|cpu   workers on this node (default 1; auto and cpu: one per usable core)\n"
    "      --nnodes M           launchers (nodes) in the job (default 1)\n"
    "      --nnodes MIN:MAX     elastic: run on the MIN..MAX launchers that join; when a node is lost (or one joins)\n"
    "                           the rest re-rendezvous and restart the workers with the new world size\n"
    "                           (docs/rendezvous.md; needs --rdzv, up to --max-restarts times)\n"
    "      --node-rank R        this launcher's node rank, 0..M-1 (default 0)\n"
    "      --rdzv HOST:PORT     where node 0 hosts the store (required when M > 1; all nodes pass the same);\n"
    "                           also spelled --rdzv-endpoint, or --master-addr HOST --master-port PORT\n"
    "                           (defaults 127.0.0.1 and 29500, as torchrun's)\n"
    "      --standalone         one node with a store on a free local port (the default; refuses --nnodes > 1)\n"
    "      --max-restarts K     restart all workers up to K times after a failure (default 0; single node or elastic)\n"
    "      --timeout SECONDS    collective timeout handed to the workers as BATON_TIMEOUT\n"
    "      --tag-output         prefix every output line with \"[rank R] \"\n"
    "      --log-dir DIR        write each rank's output to DIR/JOB/attempt_K/RANK/{stdout,stderr}.log\n"
    "                           instead of the terminal (JOB: the job id, or ID_<job id> with --rdzv-id ID)\n"
    "      --rdzv-id ID         a name for the job's log directory\n"
    "      --rdzv-backend c10d|static   accepted for torchrun's command lines; baton has one store\n"
    "      --no-python          accepted for torchrun's command lines; baton always runs PROGRAM itself\n"
    "  -h, --help               this text\n"
    "torchrun's spellings with underscores work too: --nproc_per_node, --node_rank, --rdzv_endpoint,\n"
    "--master_addr, --master_port, --max_restarts, --log_dir, --rdzv_id, --rdzv_backend, --no_python.\n"
    "\n"
    "Workers get BATON_RANK, BATON_WORLD_SIZE, BATON_LOCAL_RANK, BATON_LOCAL_WORLD_SIZE, BATON_NODE_RANK,\n"
    "BATON_NNODES, BATON_RESTART_COUNT, BATON_STORE_ADDR, BATON_SECRET, BATON_JOB_ID (and BATON_TIMEOUT), plus\n"
    "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,\n"
    "TORCHELASTIC_RESTART_COUNT (MASTER_PORT is a free port for torch.distributed's own store, not baton's).\n"
    "Global rank = node rank * N + local rank. Workers' stdin is /dev/null.\n"
    "With M > 1 every launcher needs the same BATON_SECRET (64 hex characters) in its environment;\n"
    "BATON_RDZV_TIMEOUT (seconds, default 300) bounds the wait for the other launchers; once they have met, a\n"
    "launcher not heard from for BATON_NODE_TIMEOUT seconds (default 30) counts as lost and the job stops.\n"
    "Exit code: 0 when every worker exited 0; 1 when a worker failed; 128+signal when interrupted;\n"
    "2 for bad usage.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "baton run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see baton run --help)\n");
    va_end(ap);
    return 2;
}

static int parse_rdzv(const char *s, run_opts *o) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1]) return -1;
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[') {   /* [v6]:port */
        if (hl < 3 || s[hl - 1] != ']') return -1;
        s++;
        hl -= 2;
    }
    if (hl >= sizeof o->rdzv_host) return -1;
    memcpy(o->rdzv_host, s, hl);
    o->rdzv_host[hl] = '\0';
    long port;
    if (baton__parse_long(colon + 1, 1, 65535, &port) < 0) return -1;
    o->rdzv_port = (int)port;
    o->have_rdzv = 1;
    return 0;
}

/* Flags are matched with '_' read as '-', so torchrun's spellings (--nproc_per_node, --node_rank, --master_addr, ...) are the same
 * flags as baton's. */
int run_parse_args(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->nproc = 1;
    o->nnodes = 1;
    int i = 1, standalone = 0;
    const char *master_addr = NULL, *master_port = NULL, *rdzv = NULL;
    while (i < argc) {
        char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1]) break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        }
        /* "--flag V", "--flag=V", "-n V", "-nV"; name gets the flag with '_' as '-' */
        const char *val = NULL;
        char name[64];
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (a[1] != '-' && a[1] == 'n' && a[2]) nl = 2;
        if (nl >= sizeof name) return usage_error("unknown option '%s'", a);
        for (size_t k = 0; k < nl; k++) name[k] = a[k] == '_' ? '-' : a[k];
        name[nl] = '\0';
        if (eq) val = eq + 1;
        else if (nl == 2 && a[2]) val = a + 2;
        if (!strcmp(name, "--tag-output") || !strcmp(name, "--standalone") || !strcmp(name, "--no-python")) {
            if (val) return usage_error("%s takes no value", name);
            if (!strcmp(name, "--tag-output")) o->tag = 1;
            if (!strcmp(name, "--standalone")) standalone = 1;
            i++;
            continue;
        }
        enum { F_NPROC, F_NNODES, F_NODE_RANK, F_RDZV, F_RESTARTS, F_TIMEOUT, F_LOG_DIR, F_MASTER_ADDR,
               F_MASTER_PORT, F_RDZV_ID, F_RDZV_BACKEND } f;
        if (!strcmp(name, "-n") || !strcmp(name, "--nproc-per-node")) f = F_NPROC;
        else if (!strcmp(name, "--nnodes")) f = F_NNODES;
        else if (!strcmp(name, "--node-rank")) f = F_NODE_RANK;
        else if (!strcmp(name, "--rdzv") || !strcmp(name, "--rdzv-endpoint")) f = F_RDZV;
        else if (!strcmp(name, "--max-restarts")) f = F_RESTARTS;
        else if (!strcmp(name, "--timeout")) f = F_TIMEOUT;
        else if (!strcmp(name, "--log-dir")) f = F_LOG_DIR;
        else if (!strcmp(name, "--master-addr")) f = F_MASTER_ADDR;
        else if (!strcmp(name, "--master-port")) f = F_MASTER_PORT;
        else if (!strcmp(name, "--rdzv-id")) f = F_RDZV_ID;
        else if (!strcmp(name, "--rdzv-backend")) f = F_RDZV_BACKEND;
        else return usage_error("unknown option '%s'", a);
        if (!val) {
            if (i + 1 >= argc) return usage_error("%s needs a value", a);
            val = argv[++i];
        }
        i++;
        long v;
        double d;
        switch (f) {
        case F_NPROC:
            if (!strcmp(val, "auto") || !strcmp(val, "cpu")) {
                v = cli_cores();
                o->nproc = v < MAX_NPROC ? v : MAX_NPROC;
                break;
            }
            if (!strcmp(val, "gpu"))
                return usage_error("-n gpu: baton trains on CPUs; use -n auto (one worker per core) or a number");
            if (baton__parse_long(val, 1, MAX_NPROC, &v) < 0)
                return usage_error("-n/--nproc-per-node '%s' is not auto, cpu or an integer in 1..%d (e.g. -n 4)", val,
                                   MAX_NPROC);
            o->nproc = v;
            break;
        case F_NNODES: {
            const char *colon = strchr(val, ':');   /* MIN:MAX (torchrun's spelling): elastic */
            char lo[32];
            long mn;
            if (colon && ((size_t)(colon - val) >= sizeof lo || !memcpy(lo, val, (size_t)(colon - val)) ||
                          (lo[colon - val] = '\0', baton__parse_long(lo, 1, MAX_NNODES, &mn) < 0) ||
                          baton__parse_long(colon + 1, 1, MAX_NNODES, &v) < 0 || mn > v))
                return usage_error("--nnodes '%s' is not MIN:MAX with 1 <= MIN <= MAX <= %d (e.g. --nnodes 2:4)", val,
                                   MAX_NNODES);
            if (!colon && baton__parse_long(val, 1, MAX_NNODES, &v) < 0)
                return usage_error("--nnodes '%s' is not an integer in 1..%d (or MIN:MAX)", val, MAX_NNODES);
            o->nnodes = v;
            o->nnodes_min = colon ? mn : v;
            o->elastic = colon != NULL;
            break;
        }
        case F_NODE_RANK:
            if (baton__parse_long(val, 0, MAX_NNODES - 1, &v) < 0)
                return usage_error("--node-rank '%s' is not an integer in 0..%d", val, MAX_NNODES - 1);
            o->node_rank = v;
            break;
        case F_RDZV:
            rdzv = val;
            if (parse_rdzv(val, o) < 0)
                return usage_error("%s '%s' is not HOST:PORT with a port in 1..65535 (e.g. --rdzv 10.0.0.1:29500)",
                                   name, val);
            break;
        case F_RESTARTS:
            if (baton__parse_long(val, 0, MAX_RESTARTS, &v) < 0)
                return usage_error("--max-restarts '%s' is not an integer in 0..%d", val, MAX_RESTARTS);
            o->max_restarts = v;
            break;
        case F_TIMEOUT:
            if (baton__parse_double(val, 1e-3, 1e7, &d) < 0)
                return usage_error("--timeout '%s' is not a number of seconds in 0.001..1e7 (e.g. --timeout 300)", val);
            o->timeout = val;
            break;
        case F_LOG_DIR:
            if (!*val) return usage_error("--log-dir needs a directory");
            o->log_dir = val;
            break;
        case F_MASTER_ADDR:
            if (!*val || strlen(val) > 250) return usage_error("--master-addr '%s' is not a host name or address", val);
            master_addr = val;
            break;
        case F_MASTER_PORT:
            if (baton__parse_long(val, 1, 65535, &v) < 0)
                return usage_error("--master-port '%s' is not a port in 1..65535", val);
            master_port = val;
            break;
        case F_RDZV_ID:
            if (run_log_name_check(val) < 0)
                return usage_error("--rdzv-id '%s': use 1 to 64 letters, digits, '-', '_' or '.'", val);
            o->rdzv_id = val;
            break;
        case F_RDZV_BACKEND:
            if (strcmp(val, "c10d") && strcmp(val, "static"))
                return usage_error("--rdzv-backend '%s': baton's store stands in for c10d and static only", val);
            break;
        }
    }
    if (i >= argc) return usage_error("no program given: usage: baton run [options] [--] PROGRAM [ARGS...]");
    o->prog = argv + i;
    if (master_addr || master_port) {   /* torchrun's static rendezvous: node 0's address and port */
        if (rdzv)
            return usage_error("--rdzv %s and --master-addr/--master-port both name the store; pass one of them", rdzv);
        char hp[300];
        const char *h = master_addr ? master_addr : "127.0.0.1";
        snprintf(hp, sizeof hp, strchr(h, ':') && h[0] != '[' ? "[%s]:%s" : "%s:%s", h,
                 master_port ? master_port : "29500");
        if (parse_rdzv(hp, o) < 0) return usage_error("--master-addr '%s' is not a host name or address", h);
    }
    if (standalone && o->nnodes > 1)
        return usage_error("--standalone runs one node; drop it or --nnodes %ld", o->nnodes);
    if (standalone && o->have_rdzv)
        return usage_error("--standalone puts the store on a free local port; drop it or the store's address");
    if (o->node_rank >= o->nnodes)
        return usage_error("--node-rank %ld must be below --nnodes %ld", o->node_rank, o->nnodes);
    if (o->nnodes > 1 && !o->have_rdzv)
        return usage_error("--nnodes %ld needs --rdzv HOST:PORT (where node 0 hosts the store; the same on every node)",
                           o->nnodes);
    if (o->elastic && !o->have_rdzv)
        return usage_error("--nnodes MIN:MAX needs --rdzv HOST:PORT (hosted by the launcher with --node-rank 0)");
    if (o->nnodes > 1 && o->max_restarts > 0 && !o->elastic)
        return usage_error("--max-restarts works on a single node only, or with --nnodes MIN:MAX; drop it or use "
                           "--nnodes 1");
    const char *tp = getenv("BATON_TRANSPORT");
    if (o->nproc > BATON_SHM_MAX_LOCAL && !(tp && !strcmp(tp, "tcp")))
        return usage_error("-n %ld is over the limit of %d ranks per node over shared memory (BATON_SHM_MAX_LOCAL): "
                           "start at most %d per node, or set BATON_TRANSPORT=tcp",
                           o->nproc, BATON_SHM_MAX_LOCAL, BATON_SHM_MAX_LOCAL);
    if (o->nproc * o->nnodes > (1L << 20))
        return usage_error("world size %ld x %ld is too large (at most %d)", o->nnodes, o->nproc, 1 << 20);
    return -1;
}
