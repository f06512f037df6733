/* autotune.c: --algo auto from a calibration (comm/tuning.h), the way NCCL's tuner works: estimate each
 * algorithm's time for this size and world from the fitted model and take the smallest.
 *
 * Which calibration: BATON_TUNING=FILE; BATON_TUNING=off for none; unset, the cached one `baton plan
 * calibrate` writes (<private dir>/tuning.json) if it exists. Only rank 0 reads it (the ranks of other nodes
 * may not have the file); it publishes the fits through the store and every rank, rank 0 included, parses
 * that same text, so every rank predicts the same numbers and takes the same algorithm.
 * A BATON_TUNING file that cannot be read fails initialization with the reason; a bad cached one is
 * skipped with a warning. Without a calibration the fixed rules of coll.c apply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/tuning.h"
#include "util/files.h"
#include "util/util.h"

#define TUNING_KEY "baton/tuning"

/* Rank 0: the JSON text to publish ("" for none). */
static int rank0_text(char **out) {
    *out = NULL;
    const char *env = getenv("BATON_TUNING");
    char path[600];
    int explicit_file = env && *env;
    if (explicit_file && !strcmp(env, "off")) return BATON_OK;
    if (explicit_file)
        snprintf(path, sizeof path, "%s", env);
    else if (baton__tuning_default_path(path, sizeof path) < 0)
        return BATON_OK; /* no private directory: no cached calibration */
    baton_tuning t;
    int rc = baton__tuning_load(path, &t);
    if (rc < 0) {
        if (explicit_file) return baton__fail_ctx(rc, "BATON_TUNING: ");
        if (rc != BATON_ENOTFOUND) BATON_WARN("ignoring the cached calibration: %s", baton_last_error());
        return BATON_OK;
    }
    t.npoints = 0; /* the fits and links are what the choice needs */
    *out = baton__tuning_to_json(&t);
    baton__tuning_free(&t);
    if (!*out) return baton__fail(BATON_ENOMEM, "BATON_TUNING: out of memory");
    if (strlen(*out) > BATON_STORE_MAX_VALUE) {
        free(*out);
        *out = NULL;
        return baton__fail(BATON_EFORMAT, "BATON_TUNING: %s has too many fits to share (more than %d bytes)", path,
                           BATON_STORE_MAX_VALUE);
    }
    return BATON_OK;
}

int baton__autotune_init(baton_comm *c, uint64_t deadline) {
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (c->rank == 0) {
        if ((rc = rank0_text(&text)) < 0) {
            /* the others wait for the key: give them an empty one, then fail here */
            baton_store_set(c->store, TUNING_KEY, "", 0);
            return rc;
        }
        len = text ? strlen(text) : 0;
        if ((rc = baton_store_set(c->store, TUNING_KEY, text ? text : "", len)) < 0) {
            free(text);
            return baton__fail_ctx(rc, "publishing the calibration: ");
        }
    } else {
        void *v = NULL;
        double left = (double)(deadline - baton__now_ns()) / 1e9;
        if ((rc = baton_store_get(c->store, TUNING_KEY, &v, &len, left > 0.01 ? left : 0.01)) < 0)
            return baton__fail_ctx(rc, "rendezvous: waiting for the calibration: ");
        text = v;
    }
    if (len == 0) {
        free(text);
        return BATON_OK;
    }
    baton_tuning *t = calloc(1, sizeof *t);
    if (!t) {
        free(text);
        return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    }
    rc = baton__tuning_parse(text, len, t);
    free(text);
    if (rc < 0) {
        free(t);
        return baton__fail_ctx(rc, "the calibration rank 0 shared: ");
    }
    c->tuning = t;
    BATON_INFO("--algo auto follows the calibration (%d fitted lines%s%s)", t->nfits, t->about[0] ? "; " : "", t->about);
    return BATON_OK;
}

void baton__autotune_free(baton_comm *c) {
    if (!c->tuning) return;
    baton__tuning_free(c->tuning);
    free(c->tuning);
    c->tuning = NULL;
}

/* The candidate predicted fastest, unless the fixed rule's own choice is predicted within AUTOTUNE_MARGIN of
 * it: a calibration made on a noisy machine then moves the choice only for a clear win. */
#define AUTOTUNE_MARGIN 0.05

baton_algo baton__autotune_choose(baton_comm *c, size_t bytes, baton_algo fixed) {
    if (!c->tuning) return BATON_ALGO_AUTO;
    baton_algo cands[3];
    int n, link;
    if (c->nnodes > 1) {
        /* several nodes: the calibration's "net" fits (a simulated or real cluster), if it has any */
        link = BATON_LINK_NET;
        cands[0] = BATON_ALGO_HIER, cands[1] = BATON_ALGO_RING, cands[2] = BATON_ALGO_RD, n = 3;
    } else if (c->shm && !c->tcp) {
        link = BATON_LINK_SHM;
        cands[0] = BATON_ALGO_DIRECT, cands[1] = BATON_ALGO_RING, cands[2] = BATON_ALGO_RD, n = 3;
    } else {
        link = BATON_LINK_TCP;
        cands[0] = BATON_ALGO_RING, cands[1] = BATON_ALGO_RD, n = 2;
    }
    /* a small direct-mapped cache: the same sizes come back (benchmarks, DDP buckets) */
    unsigned slot = (unsigned)((bytes * 0x9E3779B97F4A7C15ull) >> 58) % BATON_AUTOTUNE_CACHE;
    if (c->tune_cache_bytes[slot] == bytes + 1) return (baton_algo)c->tune_cache_algo[slot];
    baton_algo best = BATON_ALGO_AUTO;
    double best_s = 0, fixed_s = 0;
    for (int i = 0; i < n; i++) {
        double s;
        if (baton__tuning_predict(c->tuning, link, cands[i], c->world, (double)bytes, &s) < 0) continue;
        if (best == BATON_ALGO_AUTO || s < best_s) best = cands[i], best_s = s;
        if (cands[i] == fixed) fixed_s = s;
    }
    if (best != BATON_ALGO_AUTO && fixed_s > 0 && best_s >= (1 - AUTOTUNE_MARGIN) * fixed_s) best = fixed;
    c->tune_cache_bytes[slot] = bytes + 1;
    c->tune_cache_algo[slot] = (unsigned char)best;
    return best;
}
