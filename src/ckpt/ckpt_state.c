/* ckpt_state.c: a checkpoint's state.json, written and parsed (the training state that is not tensors: step,
 * sampler position, lr schedule, loss scaler, config fingerprint, per-rank RNG). Parsing trusts nothing:
 * every field is type- and range-checked and errors name the field (see checkpoint.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "util/util.h"

static const char *const sched_names[] = {"const", "cosine", "step"};
static const char *const scale_names[] = {"none", "static", "dynamic"};
char *baton__ckpt_state_json(const baton_ckpt_state *st) {
    cJSON *r = cJSON_CreateObject();
    if (!r) return NULL;
    cJSON_AddStringToObject(r, "format", "baton-train-state");
    cJSON_AddNumberToObject(r, "version", 1);
    cJSON_AddNumberToObject(r, "step", (double)st->step);
    cJSON_AddNumberToObject(r, "epoch", (double)st->epoch);
    cJSON_AddNumberToObject(r, "epoch_step", (double)st->epoch_step);
    cJSON_AddNumberToObject(r, "sample_offset", (double)st->sample_offset);
    cJSON *s = cJSON_AddObjectToObject(r, "schedule");
    cJSON_AddStringToObject(s, "kind", sched_names[st->sched.kind]);
    cJSON_AddNumberToObject(s, "lr", st->sched.lr);
    cJSON_AddNumberToObject(s, "warmup", (double)st->sched.warmup);
    cJSON_AddNumberToObject(s, "total", (double)st->sched.total);
    cJSON_AddNumberToObject(s, "min_lr", st->sched.min_lr);
    cJSON_AddNumberToObject(s, "step_every", (double)st->sched.step_every);
    cJSON_AddNumberToObject(s, "gamma", st->sched.gamma);
    cJSON_AddNumberToObject(r, "optimizer_steps", (double)st->optim_steps);
    cJSON *l = cJSON_AddObjectToObject(r, "loss_scale");
    cJSON_AddStringToObject(l, "mode", scale_names[st->loss_scale]);
    cJSON_AddNumberToObject(l, "scale", st->scaler.scale);
    cJSON_AddNumberToObject(l, "good_steps", (double)st->scaler.good_steps);
    cJSON_AddNumberToObject(l, "skipped", (double)st->scaler.skipped);
    cJSON_AddStringToObject(r, "config", st->config);
    cJSON_AddNumberToObject(r, "world_size", st->world);
    cJSON *ranks = cJSON_AddArrayToObject(r, "ranks");
    for (int i = 0; ranks && i < st->world; i++) {
        cJSON *e = cJSON_CreateObject(), *rng = cJSON_AddArrayToObject(e, "rng");
        cJSON_AddItemToArray(ranks, e);
        for (int k = 0; rng && k < 4; k++) {
            char hex[17];
            snprintf(hex, sizeof hex, "%016" PRIx64, st->ranks[i].rng[k]);
            cJSON_AddItemToArray(rng, cJSON_CreateString(hex));
        }
    }
    char *js = cJSON_Print(r);
    cJSON_Delete(r);
    return js;
}

static int get_long(const cJSON *obj, const char *key, long lo, long hi, long *out, const char *what) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= (double)lo && j->valuedouble <= (double)hi) ||
        floor(j->valuedouble) != j->valuedouble)
        return baton__fail(BATON_EFORMAT, "%s: '%s' must be an integer in [%ld, %ld]", what, key, lo, hi);
    *out = (long)j->valuedouble;
    return BATON_OK;
}

static int get_float(const cJSON *obj, const char *key, double lo, double hi, float *out, const char *what) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= lo && j->valuedouble <= hi))
        return baton__fail(BATON_EFORMAT, "%s: '%s' must be a number in [%g, %g]", what, key, lo, hi);
    *out = (float)j->valuedouble;
    return BATON_OK;
}

static int get_enum(const cJSON *obj, const char *key, const char *const *names, int n, int *out, const char *what) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    for (int i = 0; cJSON_IsString(j) && i < n; i++)
        if (!strcmp(j->valuestring, names[i])) {
            *out = i;
            return BATON_OK;
        }
    return baton__fail(BATON_EFORMAT, "%s: '%s' must be one of the known names (%s, ...)", what, key, names[0]);
}

static int parse_rng(const cJSON *e, baton_ckpt_rank *r, int i, const char *what) {
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(e, "rng");
    if (!cJSON_IsObject(e) || !cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4)
        return baton__fail(BATON_EFORMAT, "%s: ranks[%d] must be an object with 'rng': 4 hex strings", what, i);
    int k = 0, nonzero = 0;
    for (const cJSON *x = rng->child; x; x = x->next, k++) {
        if (!cJSON_IsString(x) || strlen(x->valuestring) != 16 || strspn(x->valuestring, "0123456789abcdef") != 16)
            return baton__fail(BATON_EFORMAT, "%s: ranks[%d].rng[%d] must be 16 lower-case hex digits", what, i, k);
        r->rng[k] = strtoull(x->valuestring, NULL, 16);
        nonzero |= r->rng[k] != 0;
    }
    if (!nonzero) return baton__fail(BATON_EFORMAT, "%s: ranks[%d].rng is all zero (not a valid xoshiro state)", what, i);
    return BATON_OK;
}

int baton__ckpt_parse_state(const char *json, size_t len, const char *what, baton_ckpt_state *st) {
    memset(st, 0, sizeof *st);
    if (len > BATON_CKPT_MAX_STATE)
        return baton__fail(BATON_EFORMAT, "%s: %zu bytes exceeds the %u-byte limit", what, len, BATON_CKPT_MAX_STATE);
    cJSON *r = cJSON_ParseWithLength(json, len);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "schedule"), *ls = cJSON_GetObjectItemCaseSensitive(r, "loss_scale");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(r, "config"), *ranks = cJSON_GetObjectItemCaseSensitive(r, "ranks");
    const long BIG = 1000000000000000L;
    long world = 0, ver = 0;
    int rc;
    if (!cJSON_IsObject(r)) {
        rc = baton__fail(BATON_EFORMAT, "%s: not a JSON object", what);
        goto out;
    }
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "baton-train-state")) {
        rc = baton__fail(BATON_EFORMAT, "%s: 'format' must be \"baton-train-state\"", what);
        goto out;
    }
    if ((rc = get_long(r, "version", 1, 1, &ver, what)) < 0 || (rc = get_long(r, "step", 0, BIG, &st->step, what)) < 0 ||
        (rc = get_long(r, "epoch", 0, BIG, &st->epoch, what)) < 0 ||
        (rc = get_long(r, "epoch_step", 0, BIG, &st->epoch_step, what)) < 0 ||
        (rc = get_long(r, "sample_offset", 0, BIG, &st->sample_offset, what)) < 0 ||
        (rc = get_long(r, "optimizer_steps", 0, BIG, &st->optim_steps, what)) < 0 ||
        (rc = get_long(r, "world_size", 1, BATON_CKPT_MAX_WORLD, &world, what)) < 0)
        goto out;
    if (!cJSON_IsObject(sc) || !cJSON_IsObject(ls)) {
        rc = baton__fail(BATON_EFORMAT, "%s: 'schedule' and 'loss_scale' must be objects", what);
        goto out;
    }
    if ((rc = get_enum(sc, "kind", sched_names, 3, &st->sched.kind, what)) < 0 ||
        (rc = get_float(sc, "lr", 0.0, 100.0, &st->sched.lr, what)) < 0 ||
        (rc = get_long(sc, "warmup", 0, BIG, &st->sched.warmup, what)) < 0 ||
        (rc = get_long(sc, "total", 0, BIG, &st->sched.total, what)) < 0 ||
        (rc = get_float(sc, "min_lr", 0.0, 100.0, &st->sched.min_lr, what)) < 0 ||
        (rc = get_long(sc, "step_every", 0, BIG, &st->sched.step_every, what)) < 0 ||
        (rc = get_float(sc, "gamma", 0.0, 1.0, &st->sched.gamma, what)) < 0 ||
        (rc = get_enum(ls, "mode", scale_names, 3, &st->loss_scale, what)) < 0 ||
        (rc = get_float(ls, "scale", 1.0, 16777216.0, &st->scaler.scale, what)) < 0 ||
        (rc = get_long(ls, "good_steps", 0, BIG, &st->scaler.good_steps, what)) < 0 ||
        (rc = get_long(ls, "skipped", 0, BIG, &st->scaler.skipped, what)) < 0)
        goto out;
    if (!cJSON_IsString(cfg) || strlen(cfg->valuestring) >= sizeof st->config) {
        rc = baton__fail(BATON_EFORMAT, "%s: 'config' must be a string under %d bytes", what, BATON_CKPT_CONFIG_LEN);
        goto out;
    }
    snprintf(st->config, sizeof st->config, "%s", cfg->valuestring);
    if (!cJSON_IsArray(ranks) || cJSON_GetArraySize(ranks) != world) {
        rc = baton__fail(BATON_EFORMAT, "%s: 'ranks' must be an array of world_size (%ld) entries", what, world);
        goto out;
    }
    st->world = (int)world;
    if (!(st->ranks = calloc((size_t)world, sizeof *st->ranks))) {
        rc = baton__fail(BATON_ENOMEM, "%s: out of memory", what);
        goto out;
    }
    int i = 0;
    for (const cJSON *e = ranks->child; e; e = e->next, i++)
        if ((rc = parse_rng(e, &st->ranks[i], i, what)) < 0) goto out;
    rc = BATON_OK;
out:
    cJSON_Delete(r);
    if (rc < 0) baton_ckpt_state_free(st);
    return rc;
}

void baton_ckpt_state_free(baton_ckpt_state *st) {
    if (!st) return;
    free(st->ranks);
    st->ranks = NULL;
}
