"""baton: data-parallel collectives for Python, on any writable contiguous buffer.

    import numpy as np, baton
    baton.init()                          # joins the job started by `baton run -n N` (or torchrun, mpirun, srun)
    g = np.ones(1000, np.float32)
    baton.allreduce_(g, op="avg")         # in place
    s = baton.allreduce(g)                # out of place: a new array
    h = baton.allreduce_async_(g)         # returns a Handle; h.wait() / h.done()
    ...
    h.wait()

Arrays are numpy arrays, CPU torch tensors (import baton.torch first, or just torch: it is registered on
first use) or anything with the buffer protocol. Element types: float32, float64, float16, bfloat16 (torch,
or uint16 data with dtype="bf16"), int32, int64. Ops: "sum", "avg", "min", "max", "prod" (or baton.SUM ...).
A failure in the library (a dead rank, ranks calling different collectives, a timeout) raises baton.Error
with baton's message; the communicator is then unusable (shutdown() and stop). Non-contiguous inputs and
read-only outputs are refused with ValueError.

Built for Debian's /usr/bin/python3 (the interpreter python3-numpy and python3-torch belong to).
"""
import sys as _sys

from baton import _baton
from baton._baton import (Error, Handle, SharedBuffer, init, shutdown, is_initialized, rank, size, local_rank,
                          local_size, node_rank, num_nodes, barrier, buffer, dtype_size,
                          F32, F64, F16, BF16, I32, I64, SUM, AVG, MIN, MAX, PROD)

__all__ = ["Error", "Handle", "SharedBuffer", "init", "shutdown", "is_initialized", "rank", "size",
           "local_rank", "local_size", "node_rank", "num_nodes", "allreduce", "allreduce_", "allreduce_async",
           "allreduce_async_", "allgather", "broadcast", "broadcast_", "broadcast_async_", "reduce_scatter",
           "barrier", "buffer"]

_torch_checked = False


def _is_tensor(x):
    """True for a torch.Tensor; registers torch with the extension the first time torch is seen loaded."""
    global _torch_checked
    if not _torch_checked and "torch" in _sys.modules:
        _register_torch()
    t = _sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _register_torch():
    global _torch_checked
    import torch
    _baton._register_torch(torch.Tensor, {torch.float32: F32, torch.float64: F64, torch.float16: F16,
                                          torch.bfloat16: BF16, torch.int32: I32, torch.int64: I64})
    _torch_checked = True


def _empty_like(x, n=None):
    """A new array of x's kind and dtype, with x's shape or n elements."""
    if _is_tensor(x):
        import torch
        return torch.empty_like(x) if n is None else torch.empty(n, dtype=x.dtype)
    import numpy as np
    a = np.asarray(x)
    return np.empty_like(a) if n is None else np.empty(n, dtype=a.dtype)


def _numel(x):
    if _is_tensor(x):
        return x.numel()
    return memoryview(x).nbytes // memoryview(x).itemsize


def allreduce(x, op="sum", dtype=None, out=None):
    """Returns a new array holding the reduction of x over all ranks (x is unchanged)."""
    if not _torch_checked:
        _is_tensor(x)
    if out is None:
        out = _empty_like(x)
    return _baton.allreduce_into(x, out, op, dtype)


def allreduce_(x, op="sum", dtype=None):
    """Reduces x over all ranks in place; returns x."""
    if not _torch_checked:
        _is_tensor(x)
    return _baton.allreduce_into(x, x, op, dtype)


def allreduce_async(x, op="sum", dtype=None, out=None):
    """Starts an out-of-place all-reduce; the Handle's wait() returns the output."""
    if not _torch_checked:
        _is_tensor(x)
    if out is None:
        out = _empty_like(x)
    return _baton.allreduce_async_into(x, out, op, dtype)


def allreduce_async_(x, op="sum", dtype=None):
    """Starts an in-place all-reduce; x must not be touched until the Handle's wait() returns."""
    if not _torch_checked:
        _is_tensor(x)
    return _baton.allreduce_async_into(x, x, op, dtype)


def allgather(x, dtype=None, out=None):
    """Returns a flat array of size() * len(x) elements: rank r's x at offset r * len(x)."""
    if not _torch_checked:
        _is_tensor(x)
    if out is None:
        out = _empty_like(x, _numel(x) * size())
    return _baton.allgather_into(x, out, dtype)


def reduce_scatter(x, op="sum", dtype=None, out=None):
    """x holds size() equal slices (flat); returns this rank's slice of the reduction."""
    if not _torch_checked:
        _is_tensor(x)
    n = _numel(x)
    w = size()
    if n % w:
        raise ValueError("baton.reduce_scatter: %d elements do not split into %d equal slices" % (n, w))
    if out is None:
        out = _empty_like(x, n // w)
    return _baton.reduce_scatter_into(x, out, op, dtype)


def broadcast_(x, root=0, dtype=None):
    """Overwrites x with root's x; returns x."""
    if not _torch_checked:
        _is_tensor(x)
    return _baton.broadcast_(x, root, dtype)


def broadcast(x, root=0, dtype=None):
    """Returns a copy of root's x (x is unchanged)."""
    if not _torch_checked:
        _is_tensor(x)
    y = x.clone() if _is_tensor(x) else __import__("numpy").array(x, copy=True)
    return _baton.broadcast_(y, root, dtype)


def broadcast_async_(x, root=0, dtype=None):
    """Starts an in-place broadcast; the Handle's wait() returns x."""
    if not _torch_checked:
        _is_tensor(x)
    return _baton.broadcast_async_(x, root, dtype)


def _at_exit():
    try:
        shutdown()
    except Exception:
        pass


import atexit as _atexit  # noqa: E402

_atexit.register(_at_exit)
