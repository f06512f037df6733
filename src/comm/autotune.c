/* autotune.c: --algo auto from a calibration (comm/tuning.h), the way NCCL's tuner works: estimate each
 * algorithm's time for this size and world from the fitted model and take the smallest.
 *
 * Which calibration: BATON_TUNING=FILE; BATON_TUNING=off for none; unset, the cached one `baton plan
 * calibrate` writes (<private dir>/tuning.json) if it exists. Only rank 0 reads it (the ranks of other nodes
 * may not have the file); it publishes the fits through the store and every rank, rank 0 included, parses
 * that same text, so every rank predicts the same numbers and takes the same algorithm.
 * A BATON_TUNING file that cannot be read fails initialization with the reason; a bad cached one is
 * skipped with a warning. Without a calibration the fixed rules of coll.c apply.
 *
 * BATON_TUNING=calibrate: the cached calibration, and when it has nothing for this link and world size, a
 * short calibration at the end of baton_init (baton__autotune_first_use: every candidate algorithm at sizes
 * 4 B to 4 MiB, 3 interleaved rounds, the slowest rank's time, medians; about a second), which every rank
 * fits identically and rank 0 adds to the cache (written atomically, 0600, in baton's private directory).
 *
 * Online confirmation (BATON_TUNING_PROBE=F; by default 0.25 on shared memory with 2 ranks and off elsewhere,
 * docs/plan.md says why): where candidates are predicted within that fraction of the fastest, the
 * calibration cannot rank them (the order of two such
 * algorithms flips from job to job on this machine, docs/measurements/plan-history.md, "Close candidates are
 * timed online"), so after one lead-in call (the model's
 * choice, not timed) the size's next calls run each of them in blocks of consecutive calls, A B C, C B A,
 * A B C (1 to 16 calls a block: about PROBE_BUDGET_S of calls per candidate; a block's first call, after
 * another algorithm's, is not counted when the block has 3 or more). Before the first probe the shared-memory
 * segment's pages are mapped in (baton__shm_prefault), so no candidate pays another's first touches.
 * After the last one every rank contributes each block's time per call (its calls' times added up on that
 * rank) to one all-reduce (MIN: the fastest rank's), so every rank takes the same algorithm: the one with the
 * smallest median over its blocks, the model's choice unless another is at least PROBE_CLEAR faster. Until
 * 2026-11-27 the calls alternated candidate by candidate, at most 5 per candidate, each timed on the rank that
 * entered it last, and the smallest lower median won (why blocks, block times and medians:
 * docs/measurements/plan-history.md, "How the candidates are timed: blocks, medians, mapped pages"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/tuning.h"
#include "util/files.h"
#include "util/util.h"

#define TUNING_KEY "baton/tuning"

/* BATON_TUNING_PROBE: unset or "auto": BATON_TUNING_PROBE_SHM2 for 2 ranks on shared memory, else off; "off" or 0:
 * no online confirmation; else a fraction in [0, 1]. */
int baton__tuning_probe_margin(int link, int ranks, double *m) {
    const char *env = getenv("BATON_TUNING_PROBE");
    *m = 0;
    if (!env || !*env || !strcmp(env, "auto")) {
        if (link == BATON_LINK_SHM && ranks == 2) *m = BATON_TUNING_PROBE_SHM2;
        return BATON_OK;
    }
    if (!strcmp(env, "off")) return BATON_OK;
    if (baton__parse_double(env, 0, 1, m) < 0)
        return baton__fail(BATON_EINVAL, "BATON_TUNING_PROBE=%s: expected auto, off or a fraction in [0, 1] (candidates "
                                         "predicted within it of the fastest are timed online; default auto: %g on shared "
                                         "memory with 2 ranks, off elsewhere)", env, BATON_TUNING_PROBE_SHM2);
    return BATON_OK;
}

int baton__tuning_state_setting(int *on) {
    const char *env = getenv("BATON_TUNING_STATE");
    *on = BATON_TUNING_STATE_AUTO;
    if (!env || !*env || !strcmp(env, "auto")) return BATON_OK;
    if (!strcmp(env, "on") || !strcmp(env, "1")) {
        *on = BATON_TUNING_STATE_ON;
        return BATON_OK;
    }
    if (!strcmp(env, "off") || !strcmp(env, "0")) {
        *on = BATON_TUNING_STATE_OFF;
        return BATON_OK;
    }
    return baton__fail(BATON_EINVAL, "BATON_TUNING_STATE=%s: expected auto (the default: on for 2 ranks, where every "
                                     "algorithm gives the same bits), on (time every candidate when the machine is not in "
                                     "the calibration's state) or off (the model alone, reproducible)", env);
}

/* Rank 0: the JSON text to publish (NULL for none); *first: BATON_TUNING=calibrate. */
static int rank0_text(char **out, int *first) {
    *out = NULL;
    const char *env = getenv("BATON_TUNING");
    char path[600];
    *first = env && !strcmp(env, "calibrate");
    int explicit_file = env && *env && !*first;
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

static int candidates(const baton_comm *c, baton_algo *cands, int *link);

int baton__autotune_init(baton_comm *c, uint64_t deadline) {
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (c->rank == 0) {
        int first;
        if ((rc = rank0_text(&text, &first)) < 0) {
            /* the others wait for the key: give them an empty one, then fail here */
            baton_store_set(c->store, TUNING_KEY, "", 0);
            return rc;
        }
        double margin;
        int state_on, link;
        baton_algo cands[3];
        candidates(c, cands, &link);
        if ((rc = baton__tuning_probe_margin(link, c->world, &margin)) < 0 || (rc = baton__tuning_state_setting(&state_on)) < 0) {
            free(text);
            baton_store_set(c->store, TUNING_KEY, "", 0);
            return rc;
        }
        /* "+" first: BATON_TUNING=calibrate; then the probe margin, the state setting and a newline (rank 0's
         * settings decide for every rank: they must all probe the same calls) */
        size_t cap = (text ? strlen(text) : 0) + 40;
        char *pub = malloc(cap);
        if (!pub) {
            free(text);
            baton_store_set(c->store, TUNING_KEY, "", 0);
            return baton__fail(BATON_ENOMEM, "calibration: out of memory");
        }
        snprintf(pub, cap, "%s%.17g %d\n%s", first ? "+" : "", margin, state_on, text ? text : "");
        free(text);
        text = pub;
        len = strlen(text);
        if ((rc = baton_store_set(c->store, TUNING_KEY, text, len)) < 0) {
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
    if (len == 0) { /* rank 0 failed */
        free(text);
        return baton__fail(BATON_EINVAL, "rank 0 could not read its calibration settings (BATON_TUNING, BATON_TUNING_PROBE, "
                                         "BATON_TUNING_STATE)");
    }
    size_t skip = text[0] == '+';
    c->tune_first_use = (int)skip;
    char *nl = memchr(text + skip, '\n', len - skip), *end = NULL;
    double margin = nl ? strtod(text + skip, &end) : -1;
    long state_on = end && *end == ' ' ? strtol(end + 1, &end, 10) : -1;
    if (!nl || end != nl || !(margin >= 0 && margin <= 1) || (state_on < BATON_TUNING_STATE_OFF || state_on > BATON_TUNING_STATE_AUTO)) {
        free(text);
        return baton__fail(BATON_EFORMAT, "the calibration settings rank 0 shared are malformed");
    }
    c->tune_probe_margin = margin;
    c->tune_state_on = (int)state_on;
    skip = (size_t)(nl + 1 - text);
    if (len == skip) {
        free(text);
        return BATON_OK;
    }
    baton_tuning *t = calloc(1, sizeof *t);
    if (!t) {
        free(text);
        return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    }
    rc = baton__tuning_parse(text + skip, len - skip, t);
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
#define AUTOTUNE_MARGIN 0.02

/* The link this communicator's all-reduces run on and the algorithms auto chooses among there. */
static int candidates(const baton_comm *c, baton_algo *cands, int *link) {
    if (c->nnodes > 1) {
        /* several nodes: the calibration's "net" fits (a simulated or real cluster), if it has any */
        *link = BATON_LINK_NET;
        cands[0] = BATON_ALGO_HIER, cands[1] = BATON_ALGO_RING, cands[2] = BATON_ALGO_RD;
        return 3;
    }
    if (c->shm && !c->tcp) {
        *link = BATON_LINK_SHM;
        cands[0] = BATON_ALGO_DIRECT, cands[1] = BATON_ALGO_RING, cands[2] = BATON_ALGO_RD;
        return 3;
    }
    *link = BATON_LINK_TCP;
    cands[0] = BATON_ALGO_RING, cands[1] = BATON_ALGO_RD;
    return 2;
}

/* Probing: every candidate runs BATON_AUTOTUNE_PROBE_ROUNDS blocks of `len` consecutive calls, len =
 * PROBE_BUDGET_S / BATON_AUTOTUNE_PROBE_ROUNDS over its predicted time, 1 to BATON_AUTOTUNE_PROBE_BLOCK.
 * Consecutive calls are what a benchmark's timed loop sees: a call right after another algorithm's finds the
 * caches and the peers' flags in that algorithm's state (at 8-32 KiB on shm that moved the measured order by
 * 10-15 %). A block of 3 or more counts all but its first call; three blocks give a median of 3 or more calls
 * even where a call is long (one block of one call), so neither one slow call (a stall) nor one fast one
 * decides. A measured candidate replaces the model's choice only when its median is at least PROBE_CLEAR below
 * the model choice's (5 %: what the floor allows; a smaller measured difference is as likely the timing's
 * noise as the algorithms'); a median, not the fastest call: an algorithm whose calls are sometimes fast and
 * often slow (shm direct from 32 MiB) must not win on its lucky one. */
#define PROBE_BUDGET_S 0.02
#define PROBE_CLEAR 0.05

/* The machine's state check (below): an 8-byte direct all-reduce outside this ratio of the calibration's own
 * time for it means another state. */
#define STATE_RATIO 1.6

#define CACHE_WAYS 8

/* Where call i of a slot's probe goes: the candidate (index into slot->cand), and when block is not NULL its
 * block (0 to BATON_AUTOTUNE_PROBE_ROUNDS - 1), or -1 for an uncounted call (call 0, the lead-in; a block's first
 * call). Blocks after the lead-in: cand 0, 1, .., n-1, then n-1, .., 0, then 0, 1, .. again. */
static int probe_cand(const baton_tune_slot *s, int i, int *block) {
    if (block) *block = -1;
    if (i == 0) return 0;
    i--;
    int b = i / s->len, q = i % s->len, r = b / s->ncand, p = b % s->ncand;
    if (block && (s->len < 3 || q > 0)) *block = r;
    return r % 2 ? s->ncand - 1 - p : p;
}

/* Every size chooses again (a calibration or a machine state that the choices so far did not see). */
static void forget_choices(baton_comm *c) {
    memset(c->tune_cache, 0, sizeof c->tune_cache);
    c->tune_long_algo = 0;
}

/* Counted calls per block, and calls of the whole probe (the lead-in included). */
static int block_calls(const baton_tune_slot *s) { return s->len - (s->len >= 3); }
static int probe_calls(const baton_tune_slot *s) { return 1 + s->ncand * BATON_AUTOTUNE_PROBE_ROUNDS * s->len; }

baton_algo baton__autotune_choose(baton_comm *c, size_t bytes, baton_algo fixed) {
    if (!c->tuning || c->tune_busy) return BATON_ALGO_AUTO;
    if (c->tune_state == BATON_TUNE_STATE_UNCHECKED) c->tune_state_pending = 1;
    baton_algo cands[3];
    int link, n = candidates(c, cands, &link);
    /* a small cache: the same sizes come back (benchmarks, DDP buckets); every rank makes the same calls, so
     * every rank's cache holds the same sizes in the same state. Open addressing over CACHE_WAYS slots from
     * the size's own: directly mapped, 8 bytes and 128 KiB shared a slot, and baton bench's 8-byte agreement
     * after every timed run of 128 KiB made auto choose (and probe) 128 KiB again each time. Entries are
     * never removed one by one (the state check clears them all), so the first empty slot ends a search; when
     * none of the ways is free the size's own slot is taken over. */
    unsigned home = (unsigned)((bytes * 0x9E3779B97F4A7C15ull) >> 58) % BATON_AUTOTUNE_CACHE, slot = home;
    for (int w = 0; w < CACHE_WAYS; w++) {
        unsigned i = (home + (unsigned)w) % BATON_AUTOTUNE_CACHE;
        if (c->tune_cache[i].bytes1 == bytes + 1 || !c->tune_cache[i].bytes1) {
            slot = i;
            break;
        }
    }
    baton_tune_slot *sl = &c->tune_cache[slot];
    if (sl->bytes1 == bytes + 1) {
        if (!sl->ncand) return (baton_algo)sl->algo;
        c->tune_probe = (int)slot + 1;
        return (baton_algo)sl->cand[probe_cand(sl, sl->next, NULL)];
    }
    baton_algo best = BATON_ALGO_AUTO;
    double pred[3], best_s = 0, fixed_s = 0;
    for (int i = 0; i < n; i++) {
        pred[i] = -1;
        if (baton__tuning_predict(c->tuning, link, cands[i], c->world, (double)bytes, &pred[i]) < 0) continue;
        if (best == BATON_ALGO_AUTO || pred[i] < best_s) best = cands[i], best_s = pred[i];
        if (cands[i] == fixed) fixed_s = pred[i];
    }
    if (best != BATON_ALGO_AUTO && fixed_s > 0 && best_s >= (1 - AUTOTUNE_MARGIN) * fixed_s) best = fixed;
    memset(sl, 0, sizeof *sl);
    sl->bytes1 = bytes + 1;
    sl->algo = (unsigned char)best;
    /* the machine is not in the calibration's state: its order of the candidates may not hold, time those
     * predicted within the ratio that tells the states apart (rd from 32 MiB on shm, about 2x, is left out: its
     * probe calls would cost more than a wrong order between the others could) */
    double margin = c->tune_state == BATON_TUNE_STATE_DIFFERS ? STATE_RATIO - 1 : c->tune_probe_margin;
    if (best == BATON_ALGO_AUTO || margin <= 0) return best;
    /* the candidates predicted within the margin of the fastest, the model's choice first, then by prediction */
    sl->cand[sl->ncand++] = (unsigned char)best;
    for (;;) {
        int k = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < sl->ncand; q++) taken |= sl->cand[q] == cands[i];
            if (!taken && pred[i] > 0 && pred[i] <= (1 + margin) * best_s && (k < 0 || pred[i] < pred[k])) k = i;
        }
        if (k < 0) break;
        sl->cand[sl->ncand++] = (unsigned char)cands[k];
    }
    if (sl->ncand < 2) {
        sl->ncand = 0;
        return best;
    }
    double len = PROBE_BUDGET_S / BATON_AUTOTUNE_PROBE_ROUNDS / best_s;
    sl->len = (unsigned char)(len >= BATON_AUTOTUNE_PROBE_BLOCK ? BATON_AUTOTUNE_PROBE_BLOCK : len < 1 ? 1 : (int)len);
    /* Long calls (a block of one): the choice a probe of long calls already made in this job stands, if it is a
     * candidate here. On shm with 2 ranks the job's mode orders direct and ring the same way at every size from
     * 32 MiB to 256 MiB (the 03:12 quiet check: in each of its three jobs one of them was the faster at all four
     * sizes, ring in two jobs and direct in one, docs/measurements/plan-history.md, "How the candidates are
     * timed: blocks, medians, mapped pages"), and at those sizes the probe's own calls cost the
     * most: a benchmark's first calls of 128 MiB were mostly probe calls. */
    if (sl->len == 1 && c->tune_long_algo)
        for (int q = 0; q < sl->ncand; q++)
            if (sl->cand[q] == c->tune_long_algo - 1) {
                sl->algo = sl->cand[q];
                sl->ncand = 0;
                return (baton_algo)sl->algo;
            }
    /* once per communicator: every candidate's pages mapped in before any is timed (the lead-in call pays it) */
    if (c->shm && !c->tune_prefaulted) {
        baton__shm_prefault(c->shm);
        c->tune_prefaulted = 1;
    }
    c->tune_probe = (int)slot + 1;
    return (baton_algo)sl->cand[probe_cand(sl, 0, NULL)];
}

/* Test knob: BATON_TEST_TUNE_PROBE=RANK:ALGO:US[:even|odd][,...] adds US microseconds (negative: takes them off)
 * to every timed probe call of ALGO on rank RANK, or on every rank with RANK -1 (a fast candidate seen by one rank
 * only: the agreement must carry it to every rank); with even or odd, only to the probe's calls of that parity
 * (call 0 is the lead-in: ranks that take turns to wait); the specs that match add up. */
static double probe_penalty(const baton_comm *c, baton_algo a, int call) {
    const char *env = getenv("BATON_TEST_TUNE_PROBE");
    double sum = 0;
    for (const char *p = env; p && *p;) {
        int rank;
        char name[16], parity[8] = "";
        double us;
        baton_algo pa;
        int got = sscanf(p, "%d:%15[^:]:%lf:%7[a-z]", &rank, name, &us, parity);
        int par_ok = got < 4 || !strcmp(parity, call % 2 ? "odd" : "even");
        if (got >= 3 && par_ok && (rank == c->rank || rank == -1) && baton_algo_parse(name, &pa) == 0 && pa == a)
            sum += us * 1e-6;
        p = strchr(p, ',');
        if (p) p++;
    }
    return sum;
}

int baton__autotune_probed(baton_comm *c, uint64_t ns) {
    baton_tune_slot *sl = &c->tune_cache[c->tune_probe - 1];
    c->tune_probe = 0;
    int block, i = sl->next++, k = probe_cand(sl, i, &block);
    if (block >= 0) sl->t[k][block] += ((double)ns / 1e9 + probe_penalty(c, (baton_algo)sl->cand[k], i)) / block_calls(sl);
    if (sl->next < probe_calls(sl)) return BATON_OK;
    /* Each block's time per call on each rank (its counted calls' times added up: a rank's waits for the other
     * inside the calls count, as they do in a loop of calls), reduced to the fastest rank's (the one whose
     * block began least behind the others; a rank slowed inside the calls slows every rank's time of them):
     * the same numbers everywhere. Until 2026-11-27 05:39 UTC each call's time on the rank that entered it
     * last: with the ranks taking turns to wait (rd at 4 KiB) that counted none of the waiting, 1.1 us a call
     * of rd against 1.7 in the same job's loop of them (direct 1.2 against 1.4), and auto took rd. */
    double v[3 * BATON_AUTOTUNE_PROBE_ROUNDS], vmin[3 * BATON_AUTOTUNE_PROBE_ROUNDS];
    int per = BATON_AUTOTUNE_PROBE_ROUNDS, nv = sl->ncand * per;
    for (int q = 0; q < sl->ncand; q++) memcpy(v + q * per, sl->t[q], sizeof(double) * (size_t)per);
    coll_args a = {.kind = COLL_ALLREDUCE, .send = v, .recv = vmin, .count = (size_t)nv, .dt = BATON_F64, .op = BATON_MIN};
    baton_algo last = c->last_algo;
    uint64_t last_ns = c->last_ns;
    c->tune_busy = 1;
    int rc = baton__coll_exec(c, &a);
    c->tune_busy = 0;
    c->last_algo = last, c->last_ns = last_ns;
    if (rc < 0) return rc;
    double med[3] = {0, 0, 0};
    int best = 0;
    for (int q = 0; q < sl->ncand; q++) {
        med[q] = baton__median(vmin + q * per, (size_t)per);
        if (med[q] < med[best]) best = q;
    }
    if (med[best] > (1 - PROBE_CLEAR) * med[0]) best = 0;
    char also[48] = "";
    if (sl->ncand > 2) snprintf(also, sizeof also, ", %s %.1f us", baton_algo_name((baton_algo)sl->cand[2]), med[2] * 1e6);
    BATON_DEBUG("--algo auto, %zu bytes: %s (median of %d blocks of %d calls: %s %.1f us, %s %.1f us%s)", sl->bytes1 - 1,
                baton_algo_name((baton_algo)sl->cand[best]), per, block_calls(sl), baton_algo_name((baton_algo)sl->cand[0]), med[0] * 1e6,
                baton_algo_name((baton_algo)sl->cand[1]), med[1] * 1e6, also);
    sl->algo = sl->cand[best];
    if (sl->len == 1) c->tune_long_algo = sl->algo + 1;
    sl->ncand = 0;
    return BATON_OK;
}

/* ---- the machine's state against the calibration's (BATON_TUNING_STATE) --------------------------------
 * On this VM (2 vCPUs) the two CPUs answer each other in one of two states that last minutes and change
 * between jobs (the hypervisor's placement, docs/measurements/plan-history.md, "shm 2 ranks: two machine
 * states"): an 8-byte shared-memory all-reduce takes about
 * 0.18 us in one and 0.45 us in the other, and the order of direct and ring from 2 MiB up flips with it. So
 * after the first auto all-reduce, where that marker means something (shared memory, no more ranks than
 * CPUs), each rank times STATE_CALLS 8-byte direct all-reduces, takes the median, and every rank takes the
 * slowest rank's (one all-reduce, MAX): the same number everywhere. Outside STATE_RATIO of the calibration's
 * own time for it, the calibration was made in the other state: every size's first calls then time the
 * candidates predicted within STATE_RATIO of the fastest (the probe above, the model's choice kept unless
 * another is PROBE_CLEAR faster). */
#define STATE_WARM 4
#define STATE_CALLS 31

/* Test knob: BATON_TEST_TUNE_STATE=RANK:US makes rank RANK's measured marker US microseconds. */
static double state_override(const baton_comm *c, double secs) {
    const char *env = getenv("BATON_TEST_TUNE_STATE");
    int rank;
    double us;
    if (!env || sscanf(env, "%d:%lf", &rank, &us) != 2 || rank != c->rank) return secs;
    return us * 1e-6;
}

int baton__autotune_state_check(baton_comm *c) {
    c->tune_state_pending = 0;
    if (c->tune_state != BATON_TUNE_STATE_UNCHECKED) return BATON_OK;
    c->tune_state = BATON_TUNE_STATE_NA;
    baton_algo cands[3];
    int link;
    candidates(c, cands, &link);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double pred = 0;
    /* auto: only where the choice cannot change result bits (2 ranks: each element is one operation on the same two
     * operands, docs/algorithms.md); with 3 or more ranks the algorithms combine in different orders, and a choice
     * made by timing would make a job's results differ from run to run unless asked for (on) */
    int enabled = c->tune_state_on == BATON_TUNING_STATE_ON || (c->tune_state_on == BATON_TUNING_STATE_AUTO && c->world == 2);
    if (!c->tuning || !enabled || link != BATON_LINK_SHM || c->world < 2 || (cpus > 0 && c->world > cpus) ||
        baton__tuning_predict(c->tuning, link, BATON_ALGO_DIRECT, c->world, 8, &pred) < 0 || !(pred > 0))
        return BATON_OK;
    float x[2] = {0, 0}, y[2];
    double t[STATE_CALLS], med = 0, worst = 0;
    coll_args a = {.kind = COLL_ALLREDUCE, .send = x, .recv = y, .count = 2, .dt = BATON_F32, .op = BATON_SUM};
    baton_algo saved = c->algo, last = c->last_algo;
    uint64_t last_ns = c->last_ns;
    c->algo = BATON_ALGO_DIRECT;
    c->tune_busy = 1;
    int rc = BATON_OK;
    for (int i = 0; i < STATE_WARM + STATE_CALLS && rc >= 0; i++)
        if ((rc = baton__coll_exec(c, &a)) >= 0 && i >= STATE_WARM) t[i - STATE_WARM] = (double)c->last_ns / 1e9;
    if (rc >= 0) {
        med = state_override(c, baton__median(t, STATE_CALLS));
        coll_args m = {.kind = COLL_ALLREDUCE, .send = &med, .recv = &worst, .count = 1, .dt = BATON_F64, .op = BATON_MAX};
        rc = baton__coll_exec(c, &m);
    }
    c->algo = saved, c->tune_busy = 0;
    c->last_algo = last, c->last_ns = last_ns;
    if (rc < 0) return rc;
    double ratio = worst / pred;
    if (ratio <= STATE_RATIO && ratio >= 1 / STATE_RATIO) {
        c->tune_state = BATON_TUNE_STATE_SAME;
        BATON_DEBUG("--algo auto: an 8-byte all-reduce takes %.2f us, the calibration's %.2f us: its state", worst * 1e6, pred * 1e6);
        return BATON_OK;
    }
    c->tune_state = BATON_TUNE_STATE_DIFFERS;
    forget_choices(c); /* every size chooses again, timing its candidates */
    BATON_INFO("--algo auto: an 8-byte all-reduce takes %.2f us, %.2fx the calibration's %.2f us: the machine is not in "
               "the calibration's state, so each size's first calls time every algorithm (BATON_TUNING_STATE=off: the "
               "model alone)", worst * 1e6, ratio, pred * 1e6);
    return BATON_OK;
}

/* ---- BATON_TUNING=calibrate: a short calibration at first use ---------------------------------------- */

#define FIRST_ROUNDS 3
#define FIRST_SIZES 12     /* 4 B x 4^k up to FIRST_MAX_BYTES */
#define FIRST_MAX_BYTES ((size_t)4 << 20)

/* Whether t has fits for every candidate on this link and world size. */
static int covers(const baton_tuning *t, int link, const baton_algo *cands, int n, int ranks) {
    if (!t) return 0;
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int f = 0; f < t->nfits && !found; f++)
            found = t->fits[f].link == link && t->fits[f].algo == cands[i] && t->fits[f].ranks == ranks;
        if (!found) return 0;
    }
    return 1;
}

/* Rank 0: the cached calibration with this link and world size's points replaced by fresh's, refitted and
 * written back atomically (through a temporary name of this process's own, renamed over the cache). */
static void cache_merge(const baton_tuning *fresh, int link, int ranks) {
    char path[600], tmp[640];
    if (baton__tuning_default_path(path, sizeof path) < 0) {
        BATON_WARN("first-use calibration not cached: %s", baton_last_error());
        return;
    }
    baton_tuning old, t = {0};
    int have_old = baton__tuning_load(path, &old) == BATON_OK;
    if (!have_old && access(path, F_OK) == 0) BATON_WARN("replacing the unreadable cached calibration: %s", baton_last_error());
    for (int i = 0; have_old && i < old.npoints; i++) {
        const baton_tuning_point *p = &old.points[i];
        if (p->link != link || p->ranks != ranks) baton__tuning_add(&t, p->link, p->algo, p->ranks, p->bytes, p->secs);
    }
    for (int i = 0; i < fresh->npoints; i++) {
        const baton_tuning_point *p = &fresh->points[i];
        baton__tuning_add(&t, p->link, p->algo, p->ranks, p->bytes, p->secs);
    }
    t.cpus = fresh->cpus;
    snprintf(t.about, sizeof t.about, "%s", fresh->about);
    if (have_old) baton__tuning_free(&old);
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    if (baton__tuning_fit(&t) < 0 || baton__tuning_save(tmp, &t) < 0 || rename(tmp, path) != 0) {
        BATON_WARN("first-use calibration not cached in %s: %s", path, baton_last_error());
        unlink(tmp);
    } else {
        BATON_INFO("first-use calibration cached in %s", path);
    }
    baton__tuning_free(&t);
}

/* Appends src's fits to *dst (a new calibration when there is none). */
static int adopt_fits(baton_comm *c, baton_tuning *src) {
    if (!c->tuning) {
        baton_tuning *t = calloc(1, sizeof *t);
        if (!t) return baton__fail(BATON_ENOMEM, "calibration: out of memory");
        *t = *src;
        memset(src, 0, sizeof *src);
        c->tuning = t;
        return BATON_OK;
    }
    baton_tuning *d = c->tuning;
    if (!d->fits && !(d->fits = calloc(BATON_TUNING_MAX, sizeof *d->fits))) return baton__fail(BATON_ENOMEM, "calibration: out of memory");
    for (int i = 0; i < src->nfits && d->nfits < BATON_TUNING_MAX; i++) d->fits[d->nfits++] = src->fits[i];
    for (int l = 0; l < BATON_LINK_COUNT; l++)
        if (src->have_link[l] && !d->have_link[l]) d->have_link[l] = 1, d->link[l] = src->link[l];
    if (!d->cpus) d->cpus = src->cpus;
    return BATON_OK;
}

int baton__autotune_first_use(baton_comm *c) {
    baton_algo cands[3];
    int link, n = candidates(c, cands, &link);
    if (!c->tune_first_use || c->world < 2 || covers(c->tuning, link, cands, n, c->world)) return BATON_OK;
    size_t sizes[FIRST_SIZES];
    int ns = 0;
    for (size_t b = 4; b <= FIRST_MAX_BYTES && ns < FIRST_SIZES; b *= 4) sizes[ns++] = b;
    float *send = malloc(FIRST_MAX_BYTES), *recv = malloc(FIRST_MAX_BYTES);
    double *tm = calloc((size_t)(FIRST_ROUNDS * n * ns), sizeof *tm), *tmax = calloc((size_t)(FIRST_ROUNDS * n * ns), sizeof *tmax);
    int rc = BATON_OK;
    if (!send || !recv || !tm || !tmax) {
        rc = baton__fail(BATON_ENOMEM, "first-use calibration: out of memory");
        goto out;
    }
    for (size_t i = 0; i < FIRST_MAX_BYTES / sizeof(float); i++) send[i] = (float)(i % 7);
    baton_algo saved = c->algo;
    uint64_t t0 = baton__now_ns();
    /* every size with every candidate in turn, FIRST_ROUNDS times over: a burst of load lands on one round.
     * Each timed run follows its own warm-up call, and the candidates' order changes from round to round
     * (baton__round_order), so that none is always timed right after the same other one (as baton bench
     * --rounds does; until 2026-11-26 only round 0 warmed up and the order was fixed). */
    for (int r = 0; r < FIRST_ROUNDS && rc >= 0; r++)
        for (int s = 0; s < ns && rc >= 0; s++)
            for (int k = 0; k < n && rc >= 0; k++) {
                int a = baton__round_order(n, r, k);
                size_t count = sizes[s] / sizeof(float);
                long iters = (long)((1u << 20) / sizes[s]);
                iters = iters < 2 ? 2 : iters > 30 ? 30 : iters;
                baton_comm_set_algo(c, cands[a]);
                if ((rc = baton_allreduce(c, send, recv, count, BATON_F32, BATON_SUM)) < 0) break; /* warm-up */
                if ((rc = baton_barrier(c)) < 0) break;
                uint64_t s0 = baton__now_ns();
                for (long i = 0; i < iters && rc >= 0; i++) rc = baton_allreduce(c, send, recv, count, BATON_F32, BATON_SUM);
                tm[(r * n + a) * ns + s] = (double)(baton__now_ns() - s0) / 1e9 / (double)iters;
            }
    baton_comm_set_algo(c, saved);
    /* the slowest rank's times, so every rank fits the same numbers */
    if (rc >= 0) rc = baton_allreduce(c, tm, tmax, (size_t)(FIRST_ROUNDS * n * ns), BATON_F64, BATON_MAX);
    if (rc < 0) {
        baton__fail_ctx(rc, "first-use calibration (BATON_TUNING=calibrate): ");
        goto out;
    }
    baton_tuning fresh = {0};
    for (int a = 0; a < n && rc >= 0; a++)
        for (int s = 0; s < ns && rc >= 0; s++) {
            double v[FIRST_ROUNDS];
            for (int r = 0; r < FIRST_ROUNDS; r++) v[r] = tmax[(r * n + a) * ns + s];
            rc = baton__tuning_add(&fresh, link, cands[a], c->world, (double)sizes[s], baton__median(v, FIRST_ROUNDS));
        }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fresh.cpus = cpus > 0 ? (int)cpus : 0;
    snprintf(fresh.about, sizeof fresh.about, "first use (BATON_TUNING=calibrate), %s, %d ranks, %.2f s", baton__link_name(link),
             c->world, (double)(baton__now_ns() - t0) / 1e9);
    if (rc >= 0) rc = baton__tuning_fit(&fresh);
    if (rc >= 0 && c->rank == 0) cache_merge(&fresh, link, c->world);
    fresh.npoints = 0;
    if (rc >= 0) rc = adopt_fits(c, &fresh);
    if (rc >= 0) {
        forget_choices(c);
        BATON_INFO("--algo auto: %s", c->tuning->nfits ? "calibrated at first use" : "first-use calibration gave no fits");
    }
    baton__tuning_free(&fresh);
out:
    free(send), free(recv), free(tm), free(tmax);
    return rc;
}
