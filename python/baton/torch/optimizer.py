"""hvd.DistributedOptimizer over baton: gradients all-reduced in buckets while backward still runs.

How it works:
- At construction every parameter that requires a gradient gets a slot in one slab of baton shared memory
  (baton.buffer: collective, the same size on every rank). Slots are grouped into buckets of about
  `bucket_mb` MiB in reverse parameter order, the order in which backward usually finishes them; a bucket
  holds one dtype.
- Without compression a parameter's .grad IS its slot (a view into the slab): autograd accumulates into
  shared memory and the all-reduce reads and writes it there, with no copy (baton skips its staging copy
  for shared buffers). With Compression.fp16/bf16 the slot is 16-bit: the gradient is converted into it
  when final and converted back after the all-reduce.
- A hook on each parameter's gradient accumulator counts the backward passes; after the
  backward_passes_per_step-th, the parameter is final and its bucket counts down. A bucket that reaches zero
  starts its asynchronous all-reduce at once, while backward goes on with earlier layers. Buckets start in
  bucket order on every rank (a bucket finished early waits for the ones before it), so all ranks issue
  the same collectives in the same order, as baton requires.
- With BATON_TORCH_INLINE=on (or auto, when the process is bound to one CPU), a bucket's all-reduce runs
  inline in the hook instead, on the training thread with the GIL released: with no spare CPU, handing it
  to baton's comm thread only adds wake-ups and context switches on the same CPU. A failure is kept and
  raised by synchronize(), as in the asynchronous way.
- step() waits for every bucket (synchronize()), then runs the wrapped optimizer's step. Parameters whose
  hook did not fire (unused this step) contribute zeros, as in Horovod.
"""
import contextlib

import torch

import baton
from baton import _baton
from baton.torch._inline import inline_allreduce
from baton.torch.compression import Compression

_ALIGN = 64  # bytes: every bucket starts on a cache line


def _esize(dtype):
    return torch.empty(0, dtype=dtype).element_size()


class _Bucket:
    __slots__ = ("params", "pending", "flat", "handle", "error")

    def __init__(self):
        self.params = []
        self.pending = 0
        self.flat = None
        self.handle = None
        self.error = None  # an inline all-reduce's failure, raised by synchronize()


class _DistributedOptimizer(torch.optim.Optimizer):
    """Not used directly: DistributedOptimizer() copies these methods into a subclass of the wrapped
    optimizer's class, so the result is still an instance of (say) torch.optim.SGD."""

    def __init__(self, params, inner_state, named_parameters, compression, backward_passes_per_step, op,
                 bucket_mb):
        super(self.__class__, self).__init__(params)
        self.load_state_dict(inner_state)
        if not baton.is_initialized():
            raise baton.Error("baton.torch.DistributedOptimizer: call hvd.init() first")
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1")
        if bucket_mb <= 0:
            raise ValueError("bucket_mb must be positive")
        self._compression = compression or Compression.none
        self._passes = int(backward_passes_per_step)
        self._op = op
        self._should_synchronize = True
        self._synchronized = False
        self._inline = inline_allreduce()

        seen, params = set(), []
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        self._names = {}
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(nm, tuple) or len(nm) != 2 for nm in named):
                raise ValueError("named_parameters must be (name, parameter) pairs, e.g. model.named_parameters()")
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise ValueError("named_parameters has duplicate names")
            self._names = {id(p): n for n, p in named}
            missing = [p for p in params if id(p) not in self._names]
            if missing:
                raise ValueError("named_parameters lacks %d of the optimizer's parameters" % len(missing))
        for i, p in enumerate(params):
            if p.device.type != "cpu":
                raise ValueError("baton.torch: parameter %s is on %s; baton works on CPU tensors"
                                 % (self._names.get(id(p), i), p.device))
            if not p.dtype.is_floating_point:
                raise ValueError("baton.torch: parameter %s is %s; gradients must be floating point"
                                 % (self._names.get(id(p), i), p.dtype))

        # Buckets in reverse parameter order, one wire dtype each; slots laid out bucket after bucket.
        cap = int(bucket_mb * (1 << 20))
        self._buckets, layout, offset = [], [], 0
        cur, cur_bytes, cur_dtype = None, 0, None
        for p in reversed([p for p in params if p.numel() > 0]):
            wdt = self._compression.wire_dtype or p.dtype
            nbytes = p.numel() * _esize(wdt)
            if cur is None or cur_dtype != wdt or (cur_bytes and cur_bytes + nbytes > cap):
                offset = (offset + _ALIGN - 1) // _ALIGN * _ALIGN
                cur = _Bucket()
                cur.flat = (offset, wdt)
                self._buckets.append(cur)
                cur_bytes, cur_dtype = 0, wdt
            layout.append((p, cur, offset, wdt))
            cur.params.append(p)
            offset += nbytes
            cur_bytes += nbytes
        self._slab = baton.buffer(max(offset, 1))  # collective
        self._slot, self._bucket_of, self._delay = {}, {}, {}
        ends = {}
        for p, b, off, wdt in layout:
            self._slot[p] = torch.frombuffer(self._slab, dtype=wdt, count=p.numel(), offset=off).view(p.shape)
            self._bucket_of[p] = b
            self._delay[p] = self._passes
            ends[id(b)] = off + p.numel() * _esize(wdt)
        for b in self._buckets:
            start, wdt = b.flat
            size = (ends[id(b)] - start) // _esize(wdt)
            b.flat = torch.frombuffer(self._slab, dtype=wdt, count=size, offset=start)
            b.pending = len(b.params)
        self._zero_copy = self._compression.wire_dtype is None
        if self._zero_copy:
            for p, slot in self._slot.items():
                if p.grad is not None:
                    slot.copy_(p.grad)
                else:
                    slot.zero_()
                p.grad = slot
        self._next = 0  # the next bucket to start
        self._accumulators = []
        for p in self._slot:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]  # the parameter's AccumulateGrad node
            acc.register_hook(self._make_hook(p))
            self._accumulators.append(acc)

    # ---- during backward ----
    def _make_hook(self, p):
        def hook(*unused):
            self._grad_ready(p)
        return hook

    def _grad_ready(self, p):
        if self._delay[p] <= 0:
            raise AssertionError("Gradients were computed more than backward_passes_per_step times before call "
                                 "to step(). Increase backward_passes_per_step to accumulate gradients locally.")
        self._synchronized = False
        slot = self._slot[p]
        if self._zero_copy and p.grad is not slot:
            # .grad was replaced (zero_grad(set_to_none=True), or assigned): move it back into the slab
            slot.copy_(p.grad)
            p.grad = slot
        self._delay[p] -= 1
        if self._delay[p] == 0:
            if not self._zero_copy:
                slot.copy_(p.grad)
            b = self._bucket_of[p]
            b.pending -= 1
            if b.pending == 0:
                self._start_ready()

    def _start_ready(self):
        bs = self._buckets
        while self._next < len(bs) and bs[self._next].pending == 0:
            b = bs[self._next]
            self._next += 1
            if self._inline:
                try:
                    _baton.allreduce_into(b.flat, b.flat, self._op)
                except baton.Error as e:
                    b.error = e
            else:
                b.handle = _baton.allreduce_async_into(b.flat, b.flat, self._op)

    # ---- Horovod's optimizer API ----
    def synchronize(self):
        """Finishes every bucket's all-reduce; afterwards each p.grad holds the reduced gradient."""
        if self._synchronized:
            return
        for b in self._buckets:
            if b.pending == 0:
                continue
            for p in b.params:
                if self._delay[p] == 0:
                    continue
                slot = self._slot[p]
                if self._delay[p] == self._passes and p.grad is None:
                    slot.zero_()  # unused on this rank this step: contributes zeros
                    if self._zero_copy:
                        p.grad = slot
                elif self._zero_copy:
                    if p.grad is not slot:
                        slot.copy_(p.grad)
                        p.grad = slot
                else:
                    slot.copy_(p.grad)
                self._delay[p] = 0
            b.pending = 0
        self._start_ready()
        err = None
        for b in self._buckets:
            if b.handle is not None:
                try:
                    b.handle.wait()
                except baton.Error as e:
                    err = err or e
                b.handle = None
            if b.error is not None:
                err = err or b.error
                b.error = None
        for b in self._buckets:
            b.pending = len(b.params)
        for p in self._delay:
            self._delay[p] = self._passes
        self._next = 0
        if err is not None:
            raise err
        if not self._zero_copy:
            for p, slot in self._slot.items():
                if p.grad is None:
                    p.grad = slot.to(p.dtype)
                else:
                    p.grad.copy_(slot)
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() yourself before, e.g. to clip)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._next > 0 or any(b.pending != len(b.params) for b in self._buckets):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(); this is prohibited as it can "
                                 "cause a race condition")
        return super(self.__class__, self).zero_grad(set_to_none)

    def _baton_inner_state_dict(self):
        return self.state_dict()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=None, gradient_predivide_factor=1.0, bucket_mb=4.0,
                         sparse_as_dense=False, groups=None, num_groups=0):
    """Wraps `optimizer` (an instance of any torch.optim.Optimizer) so step() uses gradients averaged over
    all ranks (op=hvd.Sum sums them). With backward_passes_per_step=K, K backward passes accumulate locally
    (summed, as in Horovod) before the all-reduce. The result is an instance of the optimizer's class."""
    if gradient_predivide_factor != 1.0:
        raise ValueError("baton.torch.DistributedOptimizer: gradient_predivide_factor is not supported "
                         "(baton averages in one step; scale the loss instead)")
    if groups is not None or num_groups:
        raise ValueError("baton.torch.DistributedOptimizer: groups/num_groups are not supported; use bucket_mb")
    if op is None:
        op = baton.AVG
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, optimizer.state_dict(), named_parameters, compression,
               backward_passes_per_step, op, bucket_mb)
