/* store_kv.h: the rendezvous store server's key-value table (internal; used by store_server.c only).
 *
 * A chained hash table keyed by a keyed hash (libsodium's crypto_shorthash under a random key drawn at
 * init), so a client cannot choose keys that all land in one chain. The table owns copies of every key and
 * value; a value returned by store_kv_get stays valid until the next put or delete of that key. Caps:
 * BATON_STORE_MAX_KEYS keys and max_bytes of keys + values, checked before anything is changed. Not
 * thread-safe: the server's one thread owns it. */
#ifndef BATON_RENDEZVOUS_STORE_KV_H
#define BATON_RENDEZVOUS_STORE_KV_H

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

typedef struct store_kv_entry {
    struct store_kv_entry *next;
    uint64_t hash;
    uint32_t key_len, val_len;        /* bytes */
    unsigned char *val;
    unsigned char key[];
} store_kv_entry;

typedef struct {
    unsigned char hash_key[crypto_shorthash_KEYBYTES];
    store_kv_entry **buckets;
    size_t nbuckets, nkeys, bytes;    /* bytes: keys + values held */
    size_t max_bytes;
} store_kv;

/* An empty table holding at most max_bytes of keys + values. BATON_OK or BATON_ENOMEM (with the error set). */
int store_kv_init(store_kv *kv, size_t max_bytes);
/* Frees every entry and the table (kv may have failed init: zeroed). */
void store_kv_free(store_kv *kv);
/* Stores key = val (both copied). BATON_OK, BATON_ERANGE when a cap would be passed (nothing changed),
 * BATON_ENOMEM. */
int store_kv_put(store_kv *kv, const unsigned char *k, size_t kn, const void *v, size_t vn);
/* The entry of key k, or NULL. */
store_kv_entry *store_kv_get(store_kv *kv, const unsigned char *k, size_t kn);
/* Removes key k; 1 if it was there, else 0. */
int store_kv_del(store_kv *kv, const unsigned char *k, size_t kn);

#endif
