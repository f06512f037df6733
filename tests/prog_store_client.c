/* prog_store_client.c: a worker for test_launcher: joins the store `baton run` hands over in the
 * environment, publishes a key per rank, meets the others at a barrier and reads every rank's key.
 *
 *   baton run -n 3 -- build/tests/prog_store_client            prints "rank R ok world W" per rank
 *   baton run -n 2 --max-restarts 1 -- prog_store_client restart
 *       additionally checks that the key "marker" is absent (a restarted attempt must not see the old
 *       attempt's keys), sets it, and rank 0 exits 5 in attempt 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rendezvous/store.h"
#include "util/util.h"

static int die(const char *what) {
    fprintf(stderr, "prog_store_client: %s: %s\n", what, baton_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int restart_mode = argc > 1 && !strcmp(argv[1], "restart");
    long rank, world, attempt;
    if (baton__env_long("BATON_RANK", -1, 0, 1 << 20, &rank) < 0) return die("BATON_RANK");
    if (baton__env_long("BATON_WORLD_SIZE", -1, 1, 1 << 20, &world) < 0) return die("BATON_WORLD_SIZE");
    if (baton__env_long("BATON_RESTART_COUNT", 0, 0, 1000, &attempt) < 0) return die("BATON_RESTART_COUNT");
    const char *addr = getenv("BATON_STORE_ADDR"), *hex = getenv("BATON_SECRET");
    const char *maddr = getenv("MASTER_ADDR"), *mport = getenv("MASTER_PORT");
    if (!addr || !hex || !maddr || !mport) {
        fprintf(stderr, "prog_store_client: BATON_STORE_ADDR / BATON_SECRET / MASTER_ADDR / MASTER_PORT missing\n");
        return 1;
    }
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        fprintf(stderr, "prog_store_client: BATON_STORE_ADDR='%s' is not HOST:PORT\n", addr);
        return 1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    long port;
    if (baton__parse_long(colon + 1, 1, 65535, &port) < 0) return die("BATON_STORE_ADDR port");
    /* MASTER_ADDR is the store's host; MASTER_PORT is left free for torch.distributed's own store */
    if (strcmp(host, maddr) || !strcmp(colon + 1, mport)) {
        fprintf(stderr, "prog_store_client: MASTER_ADDR:MASTER_PORT %s:%s should be the host of BATON_STORE_ADDR %s "
                "with another port\n", maddr, mport, addr);
        return 1;
    }
    uint8_t secret[BATON_STORE_SECRET_BYTES];
    if (baton_secret_parse(hex, secret) < 0) return die("BATON_SECRET");
    baton_store *st;
    if (baton_store_connect(host, (int)port, secret, sizeof secret, 10.0, &st) < 0) return die("connect");
    if (restart_mode) {
        if (baton_store_barrier(st, "before-marker", (int)world, 20.0) < 0) return die("barrier");
        int exists = 1;
        if (baton_store_check(st, "marker", &exists) < 0) return die("check");
        if (exists) {
            fprintf(stderr, "prog_store_client: rank %ld attempt %ld sees an older attempt's key\n", rank, attempt);
            return 9;
        }
        if (baton_store_barrier(st, "checked", (int)world, 20.0) < 0) return die("barrier");
        if (baton_store_set(st, "marker", "x", 1) < 0) return die("set");
    }
    char key[64], val[64];
    snprintf(key, sizeof key, "rank/%ld", rank);
    int vl = snprintf(val, sizeof val, "hello from %ld", rank);
    if (baton_store_set(st, key, val, (size_t)vl) < 0) return die("set");
    if (baton_store_barrier(st, "all", (int)world, 20.0) < 0) return die("barrier");
    for (long r = 0; r < world; r++) {
        void *v;
        size_t n;
        snprintf(key, sizeof key, "rank/%ld", r);
        if (baton_store_get(st, key, &v, &n, 10.0) < 0) return die("get");
        snprintf(val, sizeof val, "hello from %ld", r);
        int ok = !strcmp(v, val);
        free(v);
        if (!ok) {
            fprintf(stderr, "prog_store_client: wrong value under %s\n", key);
            return 1;
        }
    }
    baton_store_close(st);
    if (restart_mode && rank == 0 && attempt == 0) {
        printf("rank %ld failing on purpose in attempt %ld\n", rank, attempt);
        return 5;
    }
    printf("rank %ld ok world %ld attempt %ld\n", rank, world, attempt);
    return 0;
}
