#!/usr/bin/env python3
"""make_seeds.py: writes the hand-made seed inputs of the fuzz targets into fuzz/corpus/<target>/.

Valid and near-valid inputs for each target (the layouts are in src/comm/desc.h,
src/ckpt/safetensors.h and src/rendezvous/store_proto.h). libFuzzer grows the corpus from these; the
checked-in corpus is these seeds plus what `-merge=1` kept from long runs (docs/fuzzing.md).
Run from the repo root: python3 fuzz/make_seeds.py"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- frame header: u32 magic | u8 kind | u8 dtype | u8 op | u8 flags | i32 root | u64 seq | u64 count | u32 0 | u64 payload
def frame(kind=0, dtype=0, op=0, flags=0, root=0, reserved=0, seq=7, count=1024, payload=4096, magic=0x32465442):
    return struct.pack("<IBBBBiQQIQ", magic, kind, dtype, op, flags, root, seq, count, reserved, payload)


def frame_seeds():
    # dtype/op numbers are include/baton/comm.h's (F32 = 0, SUM = 0); the default is the target's own
    # descriptor (allreduce #7, 1024 x f32, sum, 4096 bytes), so it passes frame_check
    write("fuzz_frame", "match", frame())
    write("fuzz_frame", "match-wrong-payload", frame(payload=4095))
    for kind in range(5):
        for dtype in (0, 1, 2, 3):
            write("fuzz_frame", "k%d-d%d" % (kind, dtype), frame(kind=kind, dtype=dtype, op=kind % 3, root=kind))
    write("fuzz_frame", "bad-magic", frame(magic=0x32465443))
    write("fuzz_frame", "bad-kind", frame(kind=5))
    write("fuzz_frame", "old-magic", frame(magic=0x31465442))
    write("fuzz_frame", "bad-dtype", frame(dtype=200))
    write("fuzz_frame", "bad-op", frame(op=99))
    write("fuzz_frame", "flags", frame(flags=1))
    write("fuzz_frame", "reserved", frame(reserved=1))
    write("fuzz_frame", "short", frame()[:17])
    write("fuzz_frame", "huge", frame(seq=2**64 - 1, count=2**64 - 1, payload=2**64 - 1, root=-1))
    write("fuzz_frame", "with-desc", frame() + struct.pack("<QQBBBBiQ", 9, 33, 3, 2, 1, 0, -5, 132))


# ---- safetensors
def st_file(header, data=b"", pad=True, hlen=None):
    h = json.dumps(header, separators=(",", ":")).encode() if not isinstance(header, bytes) else header
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


def st_seeds():
    t = lambda dt, shape, b, e: {"dtype": dt, "shape": shape, "data_offsets": [b, e]}
    write("fuzz_safetensors", "empty-object", st_file({}))
    write("fuzz_safetensors", "one-f32", st_file({"w": t("F32", [2, 2], 0, 16)}, bytes(range(16))))
    write("fuzz_safetensors", "meta", st_file({"__metadata__": {"format": "pt", "model": "mlp"},
                                               "b": t("F32", [3], 0, 12)}, b"\x01" * 12))
    write("fuzz_safetensors", "dtypes", st_file({
        "a": t("F64", [1], 0, 8), "b": t("F16", [2], 8, 12), "c": t("BF16", [2], 12, 16), "d": t("I64", [1], 16, 24),
        "e": t("I32", [1], 24, 28), "f": t("I16", [2], 28, 32), "g": t("I8", [4], 32, 36), "h": t("U64", [1], 36, 44),
        "i": t("U32", [1], 44, 48), "j": t("U16", [2], 48, 52), "k": t("U8", [4], 52, 56), "l": t("BOOL", [8], 56, 64)},
        bytes(64)))
    write("fuzz_safetensors", "scalar-and-empty", st_file({"s": t("F32", [], 0, 4), "z": t("F32", [0, 5], 4, 4)}, bytes(4)))
    write("fuzz_safetensors", "rank8", st_file({"r": t("U8", [1, 1, 1, 1, 1, 1, 1, 2], 0, 2)}, b"ab"))
    write("fuzz_safetensors", "rank9", st_file({"r": t("U8", [1] * 9, 0, 1)}, b"a"))
    write("fuzz_safetensors", "unpadded", st_file({"w": t("U8", [3], 0, 3)}, b"xyz", pad=False))
    write("fuzz_safetensors", "bad-dtype", st_file({"w": t("F8", [1], 0, 1)}, b"x"))
    write("fuzz_safetensors", "overlap", st_file({"a": t("U8", [4], 0, 4), "b": t("U8", [4], 2, 6)}, bytes(6)))
    write("fuzz_safetensors", "hole", st_file({"a": t("U8", [2], 0, 2), "b": t("U8", [2], 3, 5)}, bytes(5)))
    write("fuzz_safetensors", "trailing", st_file({"a": t("U8", [2], 0, 2)}, bytes(3)))
    write("fuzz_safetensors", "size-mismatch", st_file({"a": t("F32", [2], 0, 4)}, bytes(4)))
    write("fuzz_safetensors", "out-of-range", st_file({"a": t("U8", [8], 0, 8)}, bytes(4)))
    write("fuzz_safetensors", "reversed", st_file({"a": t("U8", [0], 4, 0)}, bytes(4)))
    write("fuzz_safetensors", "float-offset", st_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.5]}}', b"x"))
    write("fuzz_safetensors", "neg-shape", st_file(b'{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}', b"x"))
    write("fuzz_safetensors", "huge-shape", st_file(b'{"a":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],'
                                                    b'"data_offsets":[0,8]}}', bytes(8)))
    write("fuzz_safetensors", "duplicate", st_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                                   b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xy"))
    write("fuzz_safetensors", "meta-not-string", st_file({"__metadata__": {"k": 1}}))
    write("fuzz_safetensors", "meta-twice", st_file(b'{"__metadata__":{},"__metadata__":{}}'))
    write("fuzz_safetensors", "not-object", st_file(b"[1,2,3]  "))
    write("fuzz_safetensors", "junk-after", st_file(b'{}x      '))
    write("fuzz_safetensors", "header-too-long", st_file({}, hlen=1000))
    write("fuzz_safetensors", "header-huge", struct.pack("<Q", 2**63) + b"{}")
    write("fuzz_safetensors", "short", b"\x02\x00\x00")
    write("fuzz_safetensors", "escapes", st_file({"w\u00e9\n\"\\/": t("U8", [1], 0, 1)}, b"!"))
    write("fuzz_safetensors", "long-name", st_file({"n" * 256: t("U8", [1], 0, 1)}, b"!"))
    write("fuzz_safetensors", "nested", st_file(b'{"a":' + b'[' * 200 + b']' * 200 + b'}'))
    write("fuzz_safetensors", "entry-not-object", st_file(b'{"a":3}'))


# ---- store: byte 0 = mode (even: unauthenticated garbage, odd: authenticated request stream)
def req(op, key, val=b"", rid=1, timeout=0, arg=0, magic=0x51535442, version=1, reserved=0, key_len=None, val_len=None):
    return struct.pack("<IBBHIIIIq", magic, version, op, reserved, rid, len(key) if key_len is None else key_len,
                       len(val) if val_len is None else val_len, timeout, arg) + key + val


SET, GET, CHECK, ADD, DELETE, BARRIER = range(1, 7)


def store_seeds():
    w = lambda name, data: write("fuzz_store", name, data)
    w("unauth-empty", b"\x00")
    w("unauth-short", b"\x00hello")
    auth = struct.pack("<IHH", 0x31415442, 1, 0) + bytes(range(32)) + bytes(32)
    w("unauth-auth-wrong-mac", b"\x00" + auth)
    w("unauth-auth-and-more", b"\x00" + auth + req(SET, b"k", b"v"))
    w("unauth-request-first", b"\x00" + req(SET, b"k", b"v") * 3)
    w("authed-nothing", b"\x01")
    w("set-get", b"\x01" + req(SET, b"key", b"value", 1) + req(GET, b"key", rid=2) + req(CHECK, b"key", rid=3))
    w("get-absent", b"\x01" + req(GET, b"nope", rid=9))
    w("get-park", b"\x01" + req(GET, b"nope", rid=9, timeout=60000) + req(SET, b"nope", b"x", 10))
    w("get-park-short", b"\x01" + req(GET, b"nope", rid=9, timeout=1) + req(CHECK, b"nope", rid=10))
    w("add", b"\x01" + req(ADD, b"ctr", arg=5) + req(ADD, b"ctr", rid=2, arg=-7) + req(GET, b"ctr", rid=3))
    w("add-overflow", b"\x01" + req(ADD, b"c", arg=2**63 - 1) + req(ADD, b"c", rid=2, arg=1))
    w("add-not-number", b"\x01" + req(SET, b"c", b"12a") + req(ADD, b"c", rid=2, arg=1))
    w("add-on-text-number", b"\x01" + req(SET, b"c", b"-00042") + req(ADD, b"c", rid=2, arg=2))
    w("delete", b"\x01" + req(SET, b"d", b"1") + req(DELETE, b"d", rid=2) + req(DELETE, b"d", rid=3))
    w("barrier-1", b"\x01" + req(BARRIER, b"b", arg=1) + req(BARRIER, b"b", rid=2, arg=1))
    w("barrier-bad-world", b"\x01" + req(BARRIER, b"b", arg=0) + req(BARRIER, b"b", rid=2, arg=2**21))
    w("barrier-2-now", b"\x01" + req(BARRIER, b"b", arg=2))
    w("barrier-2-wait", b"\x01" + req(BARRIER, b"b", arg=2, timeout=30000))
    w("bad-magic", b"\x01" + req(SET, b"k", b"v") + req(GET, b"k", magic=0x51535443))
    w("bad-version", b"\x01" + req(GET, b"k", version=2))
    w("bad-op", b"\x01" + req(7, b"k"))
    w("bad-reserved", b"\x01" + req(GET, b"k", reserved=1))
    w("key-too-long", b"\x01" + req(GET, b"k", key_len=257))
    w("key-empty", b"\x01" + req(GET, b""))
    w("value-too-long", b"\x01" + req(SET, b"k", val_len=(1 << 20) + 1))
    w("value-on-get", b"\x01" + req(GET, b"k", b"v"))
    w("truncated-body", b"\x01" + req(SET, b"k", val_len=1 << 20))
    w("truncated-header", b"\x01" + req(SET, b"k", b"v")[:20])
    w("max-key", b"\x01" + req(SET, b"K" * 256, b"v") + req(GET, b"K" * 256, rid=2))
    w("binary-keys", b"\x01" + req(SET, b"\x00\xff", b"\x00") + req(CHECK, b"\x00\xff", rid=2) + req(GET, b"\x00", rid=3))
    w("overwrite", b"\x01" + req(SET, b"k", b"one") + req(SET, b"k", b"two", 2) + req(GET, b"k", rid=3))


if __name__ == "__main__":
    frame_seeds()
    st_seeds()
    store_seeds()
