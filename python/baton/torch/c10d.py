"""The torch.distributed backend "baton": a ProcessGroup written in Python over baton's C core.

    import baton.torch                      # registers the backend (this module)
    torch.distributed.init_process_group("baton")
    model = torch.nn.parallel.DistributedDataParallel(model)   # unchanged

torch 1.13 lets Python subclass ProcessGroup and Work (pybind11 trampolines: PyProcessGroup, PyWork), and
DistributedDataParallel's C++ reducer calls the Python methods through them. What DDP and the usual
scripts need is here: allreduce (DDP's gradient buckets, asynchronous: the reducer goes on with backward),
broadcast (the initial state, asynchronous), allgather and barrier (parameter checks), reduce_scatter.
The process group is the whole job: baton.init() joins it from the launcher's environment (baton run,
torchrun, mpirun, srun), and torch's rank and world size must agree with baton's. Subgroups (new_group),
send/recv and CUDA tensors are not supported and say so.

Completion: each asynchronous collective gets a torch.futures.Future; one waiter thread per process group
waits for baton's handles in order (the GIL is released while it waits) and completes the futures, which
is what the reducer waits on. Work objects stay referenced until they are finished and a while after, so
C++ callers that hold only the C++ side still reach the Python methods.

Inline (BATON_TORCH_INLINE=on, or auto when the process is bound to one CPU; baton/torch/_inline.py):
allreduce and broadcast run on the calling thread (DDP's autograd hook) with the GIL released and return a
Work whose future is already complete: no comm thread, no waiter thread, no hand-off between threads that
share one CPU. A failure still reaches the caller through the future (wait() raises), as in the
asynchronous way. The waiter thread starts only when needed. BATON_TORCH_INLINE=last runs inline only the
all-reduce that ends a step (_StepEnd): DDP's reducer waits for that one as soon as it has started it, so it
has nothing to overlap and the hand-offs (comm thread, waiter thread, GIL, the reducer's wake-up) are pure
latency; the earlier buckets stay asynchronous and overlap backward.

The C++ front (BATON_TORCH_GROUP=auto, the default with the C++ work layer): torch and DDP's reducer hold a C++
ProcessGroup (baton/torch/_work.cpp's Group) that owns this Python group. It runs an all-reduce itself, with no
Python and no GIL, once every tensor in it was seen here and _settled says nothing is left to decide (the
attach below); everything else (other collectives, a tensor's first calls, the inline modes) it hands to this
group's methods. python_group(group) gives this group behind a front. BATON_TORCH_GROUP=python: this group is
the process group (torch's trampoline calls its methods), the way before the front.

Zero-copy buckets: DDP allocates its gradient buckets itself (private memory), so baton would read the peer's
bucket with process_vm_readv (cross-memory attach). The second time the same bucket tensor (the same Python
object: DDP passes the same bucket every step) of at least BATON_TORCH_ATTACH_MIN bytes (default 1 MiB;
"off" disables) comes to allreduce, and the tensor is the whole of its storage, the group moves the storage
into shared memory in place (Tensor.share_memory_(): torch swaps the storage's memory, so DDP's views of the
bucket follow, contents kept) and attaches it to baton (baton_buffer_attach: the local peers map it through
the file torch keeps open). From then on its all-reduce runs in place in shared memory like
DistributedOptimizer's slab, with no copy through the kernel. Deciding is collective: every rank attaches at
the same call or none does (a rank that cannot passes fd -1). At most _ATTACH_MAX storages stay attached
(kept alive by the module until exit or until detached, oldest first, at the same call on every rank).
"""
import collections
import os
import queue
import threading

import torch
import torch.distributed as dist

import baton
from baton import _baton
from baton.torch._inline import inline_mode

_REDUCE_OPS = [("SUM", baton.SUM), ("PRODUCT", baton.PROD), ("MIN", baton.MIN), ("MAX", baton.MAX),
               ("AVG", baton.AVG)]


def _baton_op(reduce_op):
    for name, op in _REDUCE_OPS:
        if hasattr(dist.ReduceOp, name) and reduce_op == getattr(dist.ReduceOp, name):
            return op
    raise ValueError("the baton backend supports ReduceOp SUM, PRODUCT, MIN, MAX and AVG, not %s" % (reduce_op,))


_ATTACH_MAX = 16
_attached = collections.deque()  # tensors whose storages are attached, oldest first (kept alive: see above)
_attach_state = {"broken": False}


_WORK_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def _work_layer():
    """The C++ work layer (baton/torch/_work.cpp) when BATON_TORCH_WORK allows it and it is built, else None."""
    v = os.environ.get("BATON_TORCH_WORK", "").strip().lower()
    if v not in ("", "auto", "cpp", "python"):
        raise ValueError("BATON_TORCH_WORK='%s' must be auto, cpp or python" % os.environ["BATON_TORCH_WORK"])
    if v == "python":
        return None
    try:
        from baton.torch import _work
    except ImportError as e:
        if v == "cpp":
            raise ImportError("BATON_TORCH_WORK=cpp but baton.torch's C++ work layer is not built (%s); install "
                              "libtorch-dev and rebuild, or use BATON_TORCH_WORK=auto" % e) from None
        return None
    _work.bind(_baton._capi)
    return _work


def _group_front():
    """Whether the C++ front (baton/torch/_work.cpp's Group) is the process group torch holds (BATON_TORCH_GROUP)."""
    v = os.environ.get("BATON_TORCH_GROUP", "").strip().lower()
    if v not in ("", "auto", "python"):
        raise ValueError("BATON_TORCH_GROUP='%s' must be auto or python" % os.environ["BATON_TORCH_GROUP"])
    return v != "python"


def python_group(group):
    """The Python ProcessGroupBaton of a baton group: the group itself, or the one behind its C++ front."""
    return getattr(group, "_python", group)


def _attach_min():
    v = os.environ.get("BATON_TORCH_ATTACH_MIN", "")
    if v == "":
        return 1 << 20
    if v == "off":
        return None
    try:
        n = int(v)
        if n < 0:
            raise ValueError
        return n
    except ValueError:
        raise ValueError("BATON_TORCH_ATTACH_MIN='%s' must be a number of bytes (0 or more) or 'off'" % v) from None


def _maybe_attach(t, nbytes):
    """Second call with the same tensor: move its storage to shared memory and attach it (collective)."""
    mark = getattr(t, "_baton_attach", None)
    if mark is None:
        t._baton_attach = "seen"
        return
    if mark != "seen":
        return  # attached, detached or refused: nothing to decide again
    fd = -1
    try:
        st = t.storage().untyped()
        # file_descriptor: torch's default on Linux (file_system would start torch_shm_manager: not here)
        if (t.storage_offset() == 0 and st.nbytes() == nbytes and not _baton._owns(t.data_ptr(), nbytes)
                and torch.multiprocessing.get_sharing_strategy() == "file_descriptor"):
            t.share_memory_()
            fd, size = t.storage().untyped()._share_fd_cpu_()
            if size < nbytes:
                fd = -1
    except (RuntimeError, AttributeError, TypeError):
        fd = -1  # e.g. shared already by file name: every rank still takes part, with nothing to attach
    try:
        _baton._attach(t.data_ptr(), nbytes, fd)
    except baton.Error as e:
        if e.status not in ("BATON_EUNSUPPORTED", "BATON_ESYS", "BATON_EINVAL"):
            raise
        t._baton_attach = "refused"
        if e.status == "BATON_ESYS":  # /proc or mmap refused on some rank: every rank stops trying
            _attach_state["broken"] = True
        return
    t._baton_attach = "attached"
    _attached.append(t)
    if len(_attached) > _ATTACH_MAX:
        old = _attached.popleft()
        _baton._detach(old.data_ptr())
        old._baton_attach = "detached"


class _StepEnd:
    """Learns, from the order of the calls, which all-reduce ends a step. DDP's reducer all-reduces the same
    bucket tensors in the same order every step and waits for all of them right after starting the last;
    a tensor seen again in the current sequence starts the next step, so the sequence's last tensor is the
    one that ends a step. A wrong guess costs only time: inline and asynchronous give the same result."""
    _MAX = 1024  # tensors in one sequence; beyond that (never a repeat: no steps) start over

    def __init__(self):
        self._seen = set()
        self._order = []
        self._last = None

    def ends_step(self, key):
        if key in self._seen or len(self._order) >= self._MAX:
            self._last = self._order[-1] if key in self._seen else None
            self._seen.clear()
            self._order.clear()
        self._seen.add(key)
        self._order.append(key)
        return key == self._last


def _check(t, what):
    if t.device.type != "cpu":
        raise ValueError("the baton backend works on CPU tensors; %s is on %s" % (what, t.device))


class _Work(dist.Work):
    def __init__(self, fut):
        super().__init__()
        self._fut = fut

    def wait(self, timeout=None):
        self._fut.wait()  # raises the collective's baton.Error, if any
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            return False
        try:
            self._fut.value()
            return True
        except Exception:  # noqa: BLE001
            return False

    def exception(self):
        try:
            self._fut.value()
            return None
        except Exception as e:  # noqa: BLE001
            return e


class ProcessGroupBaton(dist.ProcessGroup):
    def __init__(self, rank, size):
        super().__init__(rank, size)
        self._queue = queue.Queue()
        self._recent = collections.deque(maxlen=256)  # finished works still referenced (see module doc)
        self._attach_min = _attach_min()
        mode = inline_mode()
        self._inline = mode == "on"
        self._step_end = _StepEnd() if mode == "last" else None
        self._thread = None  # the waiter, started by the first asynchronous collective
        self._work = _work_layer()  # the C++ work layer, or None: the Python futures and waiter thread

    def getBackendName(self):
        return "baton"

    # ---- for the C++ front (baton/torch/_work.cpp's Group) ----
    def _fast_ok(self):
        """Whether the front may run settled all-reduces itself: not in the inline modes, which decide per call."""
        return not self._inline and self._step_end is None

    def _settled(self, t):
        """True when later all-reduces of t need no decision here (the front then runs them in C++): t is below
        the attach threshold, attaching is off or broken, or its attach was decided (attached, refused, detached)."""
        if not t.is_contiguous():
            return False
        nbytes = t.numel() * t.element_size()
        if self._attach_min is None or nbytes < max(self._attach_min, 1) or _attach_state["broken"]:
            return True
        return getattr(t, "_baton_attach", None) in ("attached", "refused", "detached")

    # ---- completion ----
    def _complete(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            handles, fut, result, after = item
            err = None
            for h in handles:
                try:
                    h.wait()
                except baton.Error as e:
                    err = err or e
            if err is None and after is not None:
                try:
                    after()
                except Exception as e:  # noqa: BLE001
                    err = e
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(result)

    def _async(self, handles, result, after=None):
        if self._thread is None:
            self._thread = threading.Thread(target=self._complete, name="baton-c10d-waiter", daemon=True)
            self._thread.start()
        fut = torch.futures.Future()
        work = _Work(fut)
        self._recent.append(work)
        self._queue.put((handles, fut, result, after))
        return work

    def _done(self, result, err=None):
        fut = torch.futures.Future()
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(result)
        work = _Work(fut)
        self._recent.append(work)
        return work

    def _inline_run(self, tensors, result, run):
        """Runs run(contiguous tensor) for each tensor now, on this thread: a completed Work (see module doc)."""
        err = None
        for t in tensors:
            c = t if t.is_contiguous() else t.contiguous()
            try:
                run(c)
            except baton.Error as e:
                err = e
                break
            if c is not t:
                t.copy_(c)
        return self._done(result, err)

    # ---- collectives ----
    def allreduce(self, tensors, opts=None):
        op = _baton_op(opts.reduceOp) if opts is not None else baton.SUM
        for t in tensors:
            _check(t, "the all-reduce tensor")
            if t.is_contiguous():
                nbytes = t.numel() * t.element_size()
                if (self._attach_min is not None and nbytes >= max(self._attach_min, 1) and not _attach_state["broken"]):
                    _maybe_attach(t, nbytes)
        if self._inline or (self._step_end is not None and len(tensors) == 1 and
                            self._step_end.ends_step((tensors[0].data_ptr(), tensors[0].numel(), tensors[0].dtype))):
            return self._inline_run(tensors, tensors, lambda c: _baton.allreduce_into(c, c, op))
        return self._allreduce_async(tensors, op)

    def _allreduce_async(self, tensors, op):
        """In place, asynchronous: a C++ Work from the work layer when there is one (and it takes the tensors),
        else baton handles completed into a torch future by the waiter thread."""
        if self._work is not None and all(t.is_contiguous() and t.dtype in _WORK_DTYPES for t in tensors):
            return self._work.allreduce(tensors, int(op))
        handles, after = [], []
        for t in tensors:
            if t.is_contiguous():
                handles.append(_baton.allreduce_async_into(t, t, op))
            else:
                c = t.contiguous()
                handles.append(_baton.allreduce_async_into(c, c, op))
                after.append((t, c))
        return self._async(handles, tensors, (lambda: [t.copy_(c) for t, c in after]) if after else None)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        for t in tensors:
            _check(t, "the broadcast tensor")
        if self._inline:
            return self._inline_run(tensors, tensors, lambda c: _baton.broadcast_(c, root))
        handles, after = [], []
        for t in tensors:
            if t.is_contiguous():
                handles.append(_baton.broadcast_async_(t, root))
            else:
                c = t.contiguous()
                handles.append(_baton.broadcast_async_(c, root))
                after.append((t, c))
        return self._async(handles, tensors, (lambda: [t.copy_(c) for t, c in after]) if after else None)

    def allgather(self, output_tensors, input_tensors, opts=None):
        w = self.size()
        for outs, t in zip(output_tensors, input_tensors):
            _check(t, "the all-gather input")
            if len(outs) != w:
                raise ValueError("allgather: %d output tensors for a world of %d" % (len(outs), w))
            src = t.contiguous()
            flat = torch.empty((w,) + tuple(src.shape), dtype=src.dtype)
            if src.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16):
                wide = torch.empty((w,) + tuple(src.shape), dtype=torch.int32)
                _baton.allgather_into(src.to(torch.int32), wide)
                flat.copy_(wide)
            else:
                _baton.allgather_into(src, flat)
            for r in range(w):
                outs[r].copy_(flat[r])
        return self._done(output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _baton_op(opts.reduceOp) if opts is not None else baton.SUM
        for out, ins in zip(output_tensors, input_tensors):
            _check(out, "the reduce-scatter output")
            full = torch.cat([i.reshape(-1) for i in ins])
            dst = out if out.is_contiguous() else out.contiguous()
            _baton.reduce_scatter_into(full, dst.view(-1), op)
            if dst is not out:
                out.copy_(dst)
        return self._done(output_tensors)

    def barrier(self, opts=None):
        baton.barrier()
        return self._done([])

    def send(self, tensors, dst, tag):
        raise RuntimeError("the baton backend has no point-to-point send/recv")

    def recv(self, tensors, src, tag):
        raise RuntimeError("the baton backend has no point-to-point send/recv")


def _create(store, rank, size, timeout):
    baton.init()
    if baton.rank() != rank or baton.size() != size:
        raise ValueError("the baton backend serves the whole job: torch.distributed asked for rank %d of %d but "
                         "baton's launcher environment says rank %d of %d (subgroups are not supported)"
                         % (rank, size, baton.rank(), baton.size()))
    pg = ProcessGroupBaton(rank, size)
    if pg._work is None or not _group_front():
        return pg
    front = pg._work.Group(rank, size, pg)  # torch holds the C++ front; the Python group stays behind it
    front._fast = pg._fast_ok()
    return front


if "BATON" not in dist.Backend._plugins:
    dist.Backend.register_backend("baton", _create)
