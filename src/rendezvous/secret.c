/* secret.c: job secrets (generate, hex parse / format) and the handshake MAC of the rendezvous store.
 * All cryptography is libsodium's: randombytes for secrets and nonces, HMAC-SHA256 for the MACs. */
#include <sodium.h>
#include <string.h>

#include "rendezvous/store_proto.h"
#include "util/util.h"

static int sodium_ready(void) {
    if (sodium_init() < 0) return baton__fail(BATON_ESYS, "libsodium failed to initialize (no entropy source?)");
    return BATON_OK;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int baton_secret_parse(const char *hex, uint8_t out[BATON_STORE_SECRET_BYTES]) {
    if (!hex) return baton__fail(BATON_EINVAL, "secret is missing: expected %d hex characters", 2 * BATON_STORE_SECRET_BYTES);
    size_t n = strnlen(hex, 2 * BATON_STORE_SECRET_BYTES + 1);
    if (n != 2 * BATON_STORE_SECRET_BYTES) {
        if (n > 2 * BATON_STORE_SECRET_BYTES)
            return baton__fail(BATON_EINVAL, "secret is longer than %d characters: expected exactly %d hex characters",
                               2 * BATON_STORE_SECRET_BYTES, 2 * BATON_STORE_SECRET_BYTES);
        return baton__fail(BATON_EINVAL, "secret has %zu characters: expected exactly %d hex characters "
                           "(make one with: head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')",
                           n, 2 * BATON_STORE_SECRET_BYTES);
    }
    uint8_t tmp[BATON_STORE_SECRET_BYTES];
    for (size_t i = 0; i < BATON_STORE_SECRET_BYTES; i++) {
        int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return baton__fail(BATON_EINVAL, "secret has a non-hex character at position %zu: expected only 0-9 a-f",
                               hi < 0 ? 2 * i : 2 * i + 1);
        tmp[i] = (uint8_t)(hi << 4 | lo);
    }
    memcpy(out, tmp, sizeof tmp);
    sodium_memzero(tmp, sizeof tmp);
    return BATON_OK;
}

void baton_secret_format(const uint8_t secret[BATON_STORE_SECRET_BYTES], char hex[2 * BATON_STORE_SECRET_BYTES + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < BATON_STORE_SECRET_BYTES; i++) {
        hex[2 * i] = digits[secret[i] >> 4];
        hex[2 * i + 1] = digits[secret[i] & 15];
    }
    hex[2 * BATON_STORE_SECRET_BYTES] = '\0';
}

int baton_secret_generate(uint8_t out[BATON_STORE_SECRET_BYTES]) {
    int rc = sodium_ready();
    if (rc < 0) return rc;
    randombytes_buf(out, BATON_STORE_SECRET_BYTES);
    return BATON_OK;
}

int baton__store_check_secret(const uint8_t *secret, size_t secret_len) {
    if (!secret) return baton__fail(BATON_EINVAL, "store: no secret given (set BATON_SECRET to %d hex characters)",
                                    2 * BATON_STORE_SECRET_BYTES);
    if (secret_len < STORE_SECRET_MIN || secret_len > STORE_SECRET_MAX)
        return baton__fail(BATON_EINVAL, "store: secret is %zu bytes: expected %d..%d (normally %d)", secret_len,
                           STORE_SECRET_MIN, STORE_SECRET_MAX, BATON_STORE_SECRET_BYTES);
    return sodium_ready();
}

int baton__store_mac(const uint8_t *secret, size_t secret_len, char who, const uint8_t snonce[STORE_NONCE_BYTES],
                     const uint8_t cnonce[STORE_NONCE_BYTES], uint8_t mac[STORE_MAC_BYTES]) {
    static const char ctx_client[] = "baton-store/v1/client";
    static const char ctx_server[] = "baton-store/v1/server";
    const char *ctx = who == 'c' ? ctx_client : ctx_server;
    crypto_auth_hmacsha256_state st;
    if (crypto_auth_hmacsha256_init(&st, secret, secret_len) != 0 ||
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)ctx, strlen(ctx)) != 0 ||
        crypto_auth_hmacsha256_update(&st, snonce, STORE_NONCE_BYTES) != 0 ||
        crypto_auth_hmacsha256_update(&st, cnonce, STORE_NONCE_BYTES) != 0 ||
        crypto_auth_hmacsha256_final(&st, mac) != 0) {
        sodium_memzero(&st, sizeof st);
        return baton__fail(BATON_ESYS, "store: HMAC-SHA256 failed");
    }
    sodium_memzero(&st, sizeof st);
    return BATON_OK;
}
