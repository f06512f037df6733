/* fuzz_frame.c: libFuzzer target for the collective frame header (src/comm/desc.c).
 *
 * Input: the first 40 bytes are a frame header as a peer would send it; the rest (if any) seeds a
 * descriptor for the encode/decode round trip. Properties checked on every input:
 *  - baton__frame_decode returns BATON_OK or BATON_EPROTO (with a detail), nothing else; it accepts
 *    exactly the headers an independent reference check accepts, and then fills the descriptor from the
 *    right offsets; re-encoding an accepted header reproduces the 40 input bytes exactly;
 *  - baton__frame_check against a fixed local descriptor returns EPROTO for a bad header, BATON_OK only
 *    when descriptor and payload length both match, else BATON_EMISMATCH with a detail;
 *  - the packed descriptor (bytes 4..27) unpacks exactly when decode accepts its fields, to the same
 *    descriptor, and packs back to the same bytes;
 *  - for any valid descriptor and payload length, decode(encode(d)) == d;
 *  - shorter inputs are padded, never read past. */
#include <string.h>

#include "baton/comm.h"
#include "baton/status.h"
#include "fuzz.h"
#include "comm/desc.h"
#include "util/util.h"

#ifndef FUZZ_FRAME_ONCE
#define FUZZ_FRAME_ONCE
static uint64_t fr_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The reference reading of desc.h's frame layout, written independently of desc.c. */
static int fr_valid(const uint8_t h[BATON_FRAME_BYTES]) {
    return fr_le(h, 4) == 0x32465442u && h[4] < BATON_COLL_KINDS && h[5] < BATON_DTYPE_COUNT &&
           h[6] < BATON_OP_COUNT && h[7] == 0 && fr_le(h + 28, 4) == 0;
}

static int fr_same(const baton_coll_desc *a, const baton_coll_desc *b) {
    return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->dtype == b->dtype &&
           a->op == b->op && a->root == b->root;
}
#endif

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    /* the local side: allreduce #7 of 1024 f32, sum; it expects 4096 payload bytes */
    const baton_coll_desc mine = {.seq = 7, .count = 1024, .kind = 0, .dtype = BATON_F32, .op = BATON_SUM, .root = 0};
    const size_t mine_payload = 4096;

    /* a header-sized copy, so ASan flags any read past the 40 bytes */
    uint8_t *h = malloc(BATON_FRAME_BYTES);
    FUZZ_CHECK(h != NULL, "out of memory");
    memset(h, 0, BATON_FRAME_BYTES);
    memcpy(h, data, size < BATON_FRAME_BYTES ? size : BATON_FRAME_BYTES);

    baton_coll_desc d;
    uint64_t payload = 0;
    memset(&d, 0xA5, sizeof d);
    int rc = baton__frame_decode(h, &d, &payload);
    int valid = fr_valid(h);
    FUZZ_CHECK(rc == BATON_OK || rc == BATON_EPROTO, "decode returned %d", rc);
    FUZZ_CHECK((rc == BATON_OK) == valid, "decode says %d, reference says valid=%d", rc, valid);
    if (rc == BATON_OK) {
        FUZZ_CHECK(d.kind == h[4] && d.dtype == h[5] && d.op == h[6], "kind/dtype/op read from the wrong bytes");
        FUZZ_CHECK(d.root == (int32_t)(uint32_t)fr_le(h + 8, 4), "root read wrong");
        FUZZ_CHECK(d.seq == fr_le(h + 12, 8) && d.count == fr_le(h + 20, 8) && payload == fr_le(h + 32, 8),
                   "seq/count/payload read wrong");
        uint8_t again[BATON_FRAME_BYTES];
        baton__frame_encode(again, &d, payload);
        FUZZ_CHECK(!memcmp(again, h, BATON_FRAME_BYTES), "encode(decode(h)) != h");
    } else {
        FUZZ_CHECK(baton_last_error()[0] != '\0', "EPROTO without a detail");
    }

    /* the packed descriptor inside the header: unpack agrees with decode on it */
    baton_coll_desc u;
    int urc = baton__desc_unpack(h + 4, &u);
    FUZZ_CHECK(urc == BATON_OK || urc == BATON_EPROTO, "desc_unpack returned %d", urc);
    if (rc == BATON_OK) FUZZ_CHECK(urc == BATON_OK && fr_same(&u, &d), "desc_unpack disagrees with frame_decode");
    if (urc == BATON_OK) {
        uint8_t packed[BATON_DESC_BYTES];
        baton__desc_pack(packed, &u);
        FUZZ_CHECK(!memcmp(packed, h + 4, BATON_DESC_BYTES), "pack(unpack(b)) != b");
    }

    int crc = baton__frame_check(&mine, mine_payload, h, 3);
    if (!valid) FUZZ_CHECK(crc == BATON_EPROTO, "check of a bad header returned %d", crc);
    else if (fr_same(&mine, &d) && payload == mine_payload) FUZZ_CHECK(crc == BATON_OK, "check of a match returned %d", crc);
    else {
        FUZZ_CHECK(crc == BATON_EMISMATCH, "check of a mismatch returned %d", crc);
        FUZZ_CHECK(strstr(baton_last_error(), "rank 3") != NULL, "mismatch detail does not name the peer: %s",
                   baton_last_error());
    }
    if (valid) FUZZ_CHECK(baton__desc_check(&mine, &d, 3) == (fr_same(&mine, &d) ? BATON_OK : BATON_EMISMATCH),
                          "desc_check disagrees with field equality");

    /* round trip of a descriptor built from the remaining bytes, forced into the valid ranges */
    if (size > BATON_FRAME_BYTES) {
        uint8_t s[32] = {0};
        size_t n = size - BATON_FRAME_BYTES;
        memcpy(s, data + BATON_FRAME_BYTES, n < sizeof s ? n : sizeof s);
        baton_coll_desc a = {.seq = fr_le(s, 8),
                             .count = fr_le(s + 8, 8),
                             .kind = (uint8_t)(s[16] % BATON_COLL_KINDS),
                             .dtype = (uint8_t)(s[17] % BATON_DTYPE_COUNT),
                             .op = (uint8_t)(s[18] % BATON_OP_COUNT),
                             .root = (int32_t)(uint32_t)fr_le(s + 20, 4)};
        uint64_t pay = fr_le(s + 24, 8), pay2 = 0;
        uint8_t enc[BATON_FRAME_BYTES];
        baton_coll_desc b;
        baton__frame_encode(enc, &a, pay);
        FUZZ_CHECK(baton__frame_decode(enc, &b, &pay2) == BATON_OK, "a valid descriptor does not decode: %s",
                   baton_last_error());
        FUZZ_CHECK(fr_same(&a, &b) && pay == pay2, "decode(encode(d)) != d");
        char text[128];
        baton__desc_format(&a, text, sizeof text);
        FUZZ_CHECK(memchr(text, '\0', sizeof text) != NULL, "desc_format left the string unterminated");
    }
    free(h);
    return 0;
}
