#!/usr/bin/python3
"""Rebuilds a model saved by `baton train --save FILE.safetensors` in PyTorch from the file alone, and
evaluates it on the Fashion-MNIST test set (docs/pytorch.md).

    /usr/bin/python3 examples/load_in_pytorch.py model.safetensors [MORE.safetensors ...] [--data-dir DIR]
                                                 [--without-normalization]

The file's metadata says everything needed: the model kind, its hidden widths and CNN channels, the input
shape, the classes and the input normalisation x = (pixel / 255 - input_mean) / input_std. Prints the
metadata, then "accuracy A (C/N)" (for each file, in order); --without-normalization adds "accuracy without the normalization A (C/N)",
the pixels fed as pixel / 255 (what a reader who ignored input_mean / input_std would get), to show what
the normalisation is worth.

Needs only torch and numpy (Debian: python3-torch, python3-numpy); the safetensors file is read with the
standard library, as Debian has no python3-safetensors.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

DTYPES = {"F32": torch.float32}


def read_safetensors(path):
    """(tensors by name, metadata) of a safetensors file: an 8-byte little-endian header length, a JSON
    header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            sys.exit(f"{path}: tensor {name} has dtype {e['dtype']}; this script reads F32 only")
        begin, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[e["dtype"]])
        tensors[name] = t.reshape(e["shape"])
    return tensors, meta


def ints(s):
    return [int(v) for v in s.split(",")] if s else []


class BatonModel(nn.Module):
    """baton's built-in models with baton's parameter names (fc1, fc2, ..., conv1, conv2, ...).
    mlp: flatten; Linear + ReLU per hidden width; Linear head.
    cnn: per channel count, Conv2d 3x3 (padding 1) + ReLU + MaxPool2d(2); flatten; fc1 Linear + ReLU;
    fc2 Linear head. (Dropout, if the run used it, acts in training only.)"""

    def __init__(self, meta):
        super().__init__()
        self.kind = meta["model"]
        c, h, w = ints(meta["input_shape"])
        classes, hidden = int(meta["classes"]), ints(meta["hidden"])
        self.shape = (c, h, w)
        if self.kind == "mlp":
            widths = [c * h * w] + hidden + [classes]
            self.fcs = [f"fc{i + 1}" for i in range(len(widths) - 1)]
            for i, name in enumerate(self.fcs):
                setattr(self, name, nn.Linear(widths[i], widths[i + 1]))
        elif self.kind == "cnn":
            channels = ints(meta["channels"])
            self.convs = [f"conv{i + 1}" for i in range(len(channels))]
            for i, name in enumerate(self.convs):
                setattr(self, name, nn.Conv2d(c if i == 0 else channels[i - 1], channels[i], 3, padding=1))
            flat = channels[-1] * (h >> len(channels)) * (w >> len(channels))
            self.fc1 = nn.Linear(flat, hidden[0])
            self.fc2 = nn.Linear(hidden[0], classes)
        else:
            sys.exit(f"unknown model kind {self.kind!r} in the metadata")

    def forward(self, x):
        if self.kind == "mlp":
            x = x.flatten(1)
            for name in self.fcs[:-1]:
                x = torch.relu(getattr(self, name)(x))
            return getattr(self, self.fcs[-1])(x)
        x = x.reshape(-1, *self.shape)
        for name in self.convs:
            x = torch.max_pool2d(torch.relu(getattr(self, name)(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def read_idx(path):
    """An IDX ubyte file (gzip or plain) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        blob = f.read()
    zero, kind, ndim = struct.unpack(">HBB", blob[:4])
    if zero != 0 or kind != 0x08:
        sys.exit(f"{path}: not an IDX ubyte file")
    dims = struct.unpack(">" + "I" * ndim, blob[4:4 + 4 * ndim])
    return np.frombuffer(blob, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, name):
    for p in (f"{data_dir}/{name}.gz", f"{data_dir}/{name}"):
        if os.path.exists(p):
            return p
    sys.exit(f"{data_dir}/{name}[.gz] not found; pass --data-dir")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--data-dir", default=os.environ.get("BATON_DATA_DIR") or "/usr/share/datasets/fashion-mnist")
    ap.add_argument("--without-normalization", action="store_true",
                    help="also evaluate on pixel / 255 (ignoring input_mean/std)")
    args = ap.parse_args()

    pixels = read_idx(find(args.data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = torch.from_numpy(read_idx(find(args.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64))
    torch.set_num_threads(1)
    for path in args.files:
        tensors, meta = read_safetensors(path)
        print(f"file {path}")
        for k in sorted(meta):
            print(f"meta {k}: {meta[k]}")
        model = BatonModel(meta)
        model.load_state_dict(tensors, strict=True)   # every parameter, under baton's names, with its shape
        model.eval()
        if "input_mean" not in meta:
            sys.exit(f"{path} records no input_mean/input_std (a model trained on synthetic data?)")
        normalized = (pixels - np.float32(meta["input_mean"])) / np.float32(meta["input_std"])
        runs = [("accuracy", normalized)]
        if args.without_normalization:
            runs.append(("accuracy without the normalization", pixels))
        for what, images in runs:
            x = torch.from_numpy(images.reshape(len(images), -1))
            with torch.no_grad():
                correct = sum(int((model(x[i:i + 1000]).argmax(1) == labels[i:i + 1000]).sum())
                              for i in range(0, len(x), 1000))
            print(f"{what} {correct / len(x):.4f} ({correct}/{len(x)})")


if __name__ == "__main__":
    main()
