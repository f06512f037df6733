/* store_kv.c: see store_kv.h. */
#include <stdlib.h>
#include <string.h>

#include "rendezvous/store.h"
#include "rendezvous/store_kv.h"
#include "util/util.h"

enum { INITIAL_BUCKETS = 256 };

int store_kv_init(store_kv *kv, size_t max_bytes) {
    memset(kv, 0, sizeof *kv);
    crypto_shorthash_keygen(kv->hash_key);
    kv->max_bytes = max_bytes;
    kv->nbuckets = INITIAL_BUCKETS;
    kv->buckets = calloc(kv->nbuckets, sizeof *kv->buckets);
    if (!kv->buckets) return baton__fail(BATON_ENOMEM, "store: out of memory");
    return BATON_OK;
}

void store_kv_free(store_kv *kv) {
    for (size_t i = 0; kv->buckets && i < kv->nbuckets; i++)
        for (store_kv_entry *e = kv->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->val);
            free(e);
        }
    free(kv->buckets);
    sodium_memzero(kv->hash_key, sizeof kv->hash_key);
    kv->buckets = NULL;
    kv->nbuckets = kv->nkeys = kv->bytes = 0;
}

static uint64_t key_hash(const store_kv *kv, const unsigned char *k, size_t n) {
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, k, n, kv->hash_key);
    return baton__get_le64(h);
}

static store_kv_entry **find_slot(store_kv *kv, const unsigned char *k, size_t n, uint64_t h) {
    store_kv_entry **pp = &kv->buckets[h & (kv->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->key_len == n && !memcmp((*pp)->key, k, n)) return pp;
    return pp;
}

static void grow_table(store_kv *kv) {
    size_t nb = kv->nbuckets * 2;
    store_kv_entry **b = calloc(nb, sizeof *b);
    if (!b) return;   /* keep the old table: lookups stay correct, only slower */
    for (size_t i = 0; i < kv->nbuckets; i++)
        for (store_kv_entry *e = kv->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(kv->buckets);
    kv->buckets = b;
    kv->nbuckets = nb;
}

int store_kv_put(store_kv *kv, const unsigned char *k, size_t kn, const void *v, size_t vn) {
    uint64_t h = key_hash(kv, k, kn);
    store_kv_entry **pp = find_slot(kv, k, kn, h);
    size_t old = *pp ? (*pp)->val_len : 0;
    size_t need = kv->bytes - old + vn + (*pp ? 0 : kn);
    if (need > kv->max_bytes) return BATON_ERANGE;
    if (!*pp && kv->nkeys >= BATON_STORE_MAX_KEYS) return BATON_ERANGE;
    unsigned char *copy = malloc(vn ? vn : 1);
    if (!copy) return BATON_ENOMEM;
    memcpy(copy, v, vn);
    if (*pp) {
        free((*pp)->val);
        (*pp)->val = copy;
        (*pp)->val_len = (uint32_t)vn;
    } else {
        store_kv_entry *e = malloc(sizeof *e + kn);
        if (!e) {
            free(copy);
            return BATON_ENOMEM;
        }
        e->next = NULL;
        e->hash = h;
        e->key_len = (uint32_t)kn;
        e->val_len = (uint32_t)vn;
        e->val = copy;
        memcpy(e->key, k, kn);
        *pp = e;
        kv->nkeys++;
        if (kv->nkeys > kv->nbuckets) grow_table(kv);
    }
    kv->bytes = need;
    return BATON_OK;
}

store_kv_entry *store_kv_get(store_kv *kv, const unsigned char *k, size_t kn) {
    return *find_slot(kv, k, kn, key_hash(kv, k, kn));
}

int store_kv_del(store_kv *kv, const unsigned char *k, size_t kn) {
    store_kv_entry **pp = find_slot(kv, k, kn, key_hash(kv, k, kn));
    store_kv_entry *e = *pp;
    if (!e) return 0;
    *pp = e->next;
    kv->bytes -= e->key_len + e->val_len;
    kv->nkeys--;
    free(e->val);
    free(e);
    return 1;
}
