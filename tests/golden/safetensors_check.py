#!/usr/bin/python3
"""An independent safetensors reader written from the format specification
(https://huggingface.co/docs/safetensors, "Format"): used by tests/test_safetensors.c to check files that
baton writes, because Debian bookworm has no python3-safetensors package. Standard library only.

usage: safetensors_check.py FILE   -> prints "name dtype shape sum" per tensor and the metadata, or fails.
"""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}

data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
assert n <= 100_000_000 and 8 + n <= len(data), "bad header length"
header = json.loads(data[8 : 8 + n].decode("utf-8"))
assert isinstance(header, dict)
meta = header.pop("__metadata__", {})
assert all(isinstance(v, str) for v in meta.values())
body = data[8 + n :]
spans = []
for name, info in header.items():
    shape, (b, e) = info["shape"], info["data_offsets"]
    count = 1
    for s in shape:
        count *= s
    assert e - b == count * SIZES[info["dtype"]], name + ": size disagrees with shape"
    spans.append((b, e, name))
spans.sort()
pos = 0
for b, e, name in spans:
    assert b == pos, name + ": overlap or hole"
    pos = e
assert pos == len(body), "data section not fully covered"
for name, info in header.items():
    b, e = info["data_offsets"]
    vals = struct.unpack("<%df" % ((e - b) // 4), body[b:e]) if info["dtype"] == "F32" else []
    print(name, info["dtype"], "x".join(map(str, info["shape"])), "%.6f" % sum(vals))
for k in sorted(meta):
    print("meta", k, meta[k])
