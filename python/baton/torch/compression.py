"""Gradient compression on the wire, as Horovod's hvd.Compression: none, fp16 and bf16.

compress(tensor) -> (wire tensor, context); decompress(wire, context) -> tensor of the original dtype.
baton reduces f16 and bf16 in f32 and rounds once per element, so fp16/bf16 halve the bytes moved at the
cost of one rounding of each gradient and of the result.
"""
import torch


class _NoCompression:
    name = "none"
    wire_dtype = None

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompression:
    def __init__(self, name, dtype):
        self.name = name
        self.wire_dtype = dtype

    def compress(self, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != self.wire_dtype:
            return tensor.to(self.wire_dtype), tensor.dtype
        return tensor, None

    def decompress(self, tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)

    def __repr__(self):
        return "Compression.%s" % self.name


class Compression:
    """Compression.none (full precision), Compression.fp16 (IEEE half), Compression.bf16 (bfloat16)."""
    none = _NoCompression()
    fp16 = _CastCompression("fp16", torch.float16)
    bf16 = _CastCompression("bf16", torch.bfloat16)
