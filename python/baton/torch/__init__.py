"""baton.torch: Horovod's PyTorch API over baton, so `import baton.torch as hvd` replaces `import horovod.torch
as hvd` in a training script (docs/python.md has the table of what is the same and what differs).

    import baton.torch as hvd
    hvd.init()
    model = ...; opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for x, y in loader: opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

Importing this module also registers the torch.distributed backend "baton" (baton.torch.c10d), so
torch.distributed.init_process_group("baton") works in the same process.
Tensors must be CPU tensors; non-contiguous ones are handled through a contiguous copy where Horovod
would accept them (broadcast_parameters), and refused by the in-place collectives.
"""
import pickle

import torch

import baton
from baton import _baton
from baton._baton import Error, Handle

baton._register_torch()

from baton.torch.compression import Compression  # noqa: E402
from baton.torch.optimizer import DistributedOptimizer  # noqa: E402
from baton.torch import c10d as _c10d  # noqa: E402,F401  registers the "baton" torch.distributed backend

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "Average", "Sum",
           "Min", "Max", "Product", "Compression", "DistributedOptimizer", "allreduce", "allreduce_",
           "allreduce_async", "allreduce_async_", "synchronize", "poll", "broadcast", "broadcast_",
           "broadcast_async", "broadcast_async_", "allgather", "broadcast_parameters",
           "broadcast_optimizer_state", "broadcast_object", "barrier", "join", "Error", "Handle"]

# Reduction ops (Horovod's names); baton takes them wherever an op is expected.
Average = baton.AVG
Sum = baton.SUM
Min = baton.MIN
Max = baton.MAX
Product = baton.PROD

init = baton.init
shutdown = baton.shutdown
is_initialized = baton.is_initialized
rank = baton.rank
size = baton.size
local_rank = baton.local_rank
local_size = baton.local_size
barrier = baton.barrier


def _op(average, op):
    if op is not None and average is not None:
        raise ValueError("baton.torch: give either op= or average=, not both")
    if op is None:
        return Sum if average is False else Average
    return op


def _scale(t, factor):
    if factor != 1.0:
        t.mul_(factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts an in-place all-reduce of `tensor`; returns a handle for synchronize()/poll()."""
    _scale(tensor, prescale_factor)
    h = _baton.allreduce_async_into(tensor, tensor, _op(average, op))
    if postscale_factor != 1.0:
        return _Scaled(h, postscale_factor)
    return h


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    """All-reduces `tensor` in place (Average by default) and returns it."""
    if prescale_factor == 1.0 and postscale_factor == 1.0:
        return _baton.allreduce_into(tensor, tensor, _op(average, op))
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    compression=None):
    """Starts an all-reduce into a new tensor; synchronize(handle) returns it."""
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return allreduce_async_(out, average, name, op, prescale_factor, postscale_factor)


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0):
    """Returns a new tensor: the all-reduce of `tensor` (Average by default), compressed on the wire if asked."""
    from baton.torch.compression import Compression as _C
    compression = compression or _C.none
    src = tensor.detach()
    wire, ctx = compression.compress(src)
    # a new contiguous tensor to reduce in place (compress returns its input when it does not convert)
    wire = wire.clone(memory_format=torch.contiguous_format) if wire is src else wire.contiguous()
    _scale(wire, prescale_factor)
    _baton.allreduce_into(wire, wire, _op(average, op))
    _scale(wire, postscale_factor)
    return compression.decompress(wire, ctx)


class _Scaled:
    """A handle whose result is multiplied by a factor once finished (Horovod's postscale_factor)."""

    def __init__(self, h, factor):
        self.h, self.factor = h, factor

    def wait(self):
        t = self.h.wait()
        t.mul_(self.factor)
        return t

    def done(self):
        return self.h.done()


def synchronize(handle):
    """Waits for an asynchronous operation and returns its output tensor (raises baton.Error on failure)."""
    return handle.wait()


def poll(handle):
    """True once the asynchronous operation has finished: synchronize() then returns at once."""
    return handle.done()


def broadcast_async_(tensor, root_rank, name=None):
    return _baton.broadcast_async_(tensor, root_rank)


def broadcast_async(tensor, root_rank, name=None):
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _baton.broadcast_async_(out, root_rank)


def broadcast_(tensor, root_rank, name=None):
    """Overwrites `tensor` with root_rank's; returns it."""
    return _baton.broadcast_(tensor, root_rank)


def broadcast(tensor, root_rank, name=None):
    """Returns a new tensor holding root_rank's `tensor`."""
    out = tensor.detach().clone(memory_format=torch.contiguous_format)
    return _baton.broadcast_(out, root_rank)


def allgather(tensor, name=None):
    """Concatenates every rank's tensor along dimension 0 (first dimensions may differ between ranks)."""
    t = tensor.detach().contiguous()
    if t.dim() == 0:
        t = t.reshape(1)
    w = size()
    firsts = torch.tensor([t.shape[0]], dtype=torch.int64)
    firsts = baton.allgather(firsts)
    longest = int(firsts.max())
    if int(firsts.min()) == longest:
        out = torch.empty((w * longest,) + tuple(t.shape[1:]), dtype=t.dtype)
        return _baton.allgather_into(t, out)
    padded = torch.zeros((longest,) + tuple(t.shape[1:]), dtype=t.dtype)
    padded[:t.shape[0]] = t
    out = torch.empty((w * longest,) + tuple(t.shape[1:]), dtype=t.dtype)
    _baton.allgather_into(padded, out)
    return torch.cat([out[r * longest:r * longest + int(firsts[r])] for r in range(w)])


def broadcast_object(obj, root_rank=0, name=None):
    """Returns root_rank's `obj` (pickled; the bytes travel padded to whole int64 words) on every rank."""
    n = torch.zeros(1, dtype=torch.int64)
    if rank() == root_rank:
        data = pickle.dumps(obj)
        n[0] = len(data)
    _baton.broadcast_(n, root_rank)
    words = torch.zeros((int(n) + 7) // 8, dtype=torch.int64)
    if rank() == root_rank:
        words.view(torch.uint8)[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    if words.numel():
        _baton.broadcast_(words, root_rank)
    if rank() == root_rank:
        return obj
    return pickle.loads(words.view(torch.uint8)[:int(n)].numpy().tobytes())


def broadcast_parameters(params, root_rank):
    """Overwrites every tensor of a state_dict (or (name, tensor) list) with root_rank's values."""
    if isinstance(params, dict):
        items = sorted(params.items(), key=lambda kv: kv[0])
    else:
        items = list(params)
    handles = []
    for _, p in items:
        if p is None:
            continue
        t = p.data if isinstance(p, torch.nn.Parameter) else p
        if not isinstance(t, torch.Tensor):
            raise TypeError("baton.torch.broadcast_parameters: expected tensors, got %s" % type(t).__name__)
        if t.dtype == torch.bool or t.dtype == torch.uint8 or t.dtype == torch.int8 or t.dtype == torch.int16:
            src = t.to(torch.int32)
            _baton.broadcast_(src, root_rank)
            t.copy_(src)
        elif t.is_contiguous():
            handles.append(_baton.broadcast_async_(t, root_rank))
        else:
            src = t.contiguous()
            _baton.broadcast_(src, root_rank)
            t.copy_(src)
    for h in handles:
        h.wait()


def broadcast_optimizer_state(optimizer, root_rank):
    """Gives every rank root_rank's optimizer state (hyper-parameters and per-parameter state)."""
    if hasattr(optimizer, "_baton_inner_state_dict"):
        state = optimizer._baton_inner_state_dict()
    else:
        state = optimizer.state_dict()
    state = broadcast_object(state, root_rank)
    optimizer.load_state_dict(state)


def join(device=-1):
    """Horovod's join for uneven inputs is not provided: every rank must run the same number of steps."""
    raise NotImplementedError("baton.torch.join: uneven inputs are not supported; give every rank the same "
                              "number of batches (torch.utils.data.DistributedSampler with drop_last=True)")
