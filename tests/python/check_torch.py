"""baton.torch against single-process training and against PyTorch DDP over gloo, on the same data.

Run under `baton run -n W -- /usr/bin/python3 tests/python/check_torch.py`. Every rank trains a small MLP for
5 SGD steps on its shard (per-rank batch 64) in several ways and compares the final parameters, each
tensor within 1e-5 of its RMS (16-bit compression: within 2e-2):
  reference   one process, batch 64 x W, plain SGD (every rank computes it alone, no communication)
  hvd         hvd.DistributedOptimizer, 64 per rank
  hvd_k2      backward_passes_per_step=2: two micro-batches of 32 per step, loss halved (Horovod sums them)
  hvd_fp16/bf16  Compression.fp16 / bf16
  gloo_ddp    torch DistributedDataParallel over gloo (a gloo group beside the default group)
  baton_ddp   the same DDP script over the default process group, init_process_group("baton")
  BATON_TORCH_INLINE=last: c10d._StepEnd on call sequences, and DDP with two buckets runs
              the first asynchronous and the last inline every step, with gloo's parameters
  BATON_TORCH_WORK: DDP's asynchronous all-reduces return the C++ work layer's Work when it is built (and not
              turned off), the Python _Work otherwise; async all_reduce's work, future and result, 4 dtypes
  BATON_TORCH_GROUP: with the C++ layer, torch's group is its C++ front, which runs DDP's steady-state
              all-reduces itself (counted) with gloo's parameters; a reused tensor's calls 2-4 go through it
Also the Horovod helpers: broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather with
unequal first dimensions, allreduce with Average/Sum, synchronize/poll, skip_synchronize, zero_grad refusal.
Prints "CHECKS n FAILED m" last.
"""
import sys

import torch
import torch.distributed as dist

import baton
import baton.torch as hvd

torch.set_num_threads(1)
hvd.init()
R, W = hvd.rank(), hvd.size()
dist.init_process_group("baton")  # the default group: baton's backend (torch's store at MASTER_ADDR:MASTER_PORT)
gloo = dist.new_group(backend="gloo")
checks, failures = 0, []


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("rank %d: FAIL %s" % (R, what), flush=True)


def check_route_variable(var, values, read, python_is_off):
    """A bad value of var is refused naming the accepted ones, and var=python turns the C++ part off (read() is
    how c10d reads var); var is restored after."""
    saved = os.environ.get(var)
    os.environ[var] = "sometimes"
    try:
        read()
        check(False, "%s=sometimes was accepted" % var)
    except ValueError as e:
        check("%s='sometimes' must be %s" % (var, values) in str(e), "bad %s: %s" % (var, e))
    os.environ[var] = "python"
    check(python_is_off(read()), "%s=python: the C++ part is off" % var)
    if saved is None:
        del os.environ[var]
    else:
        os.environ[var] = saved


B, STEPS, LR = 64, 5, 0.1
g = torch.Generator().manual_seed(1234)
X = torch.randn(STEPS, W * B, 20, generator=g)
Y = torch.randint(0, 5, (STEPS, W * B), generator=g)


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def shard(s):
    return X[s, R * B:(R + 1) * B], Y[s, R * B:(R + 1) * B]


loss_fn = torch.nn.CrossEntropyLoss()


def reference():
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    for s in range(STEPS):
        opt.zero_grad()
        loss_fn(m(X[s]), Y[s]).backward()
        opt.step()
    return m


def compare(m, ref, what, tol=1e-5):
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        rms = q.detach().pow(2).mean().sqrt().item()
        err = (p.detach() - q.detach()).abs().max().item()
        check(err <= tol * rms, "%s: %s differs by %.3g (rms %.3g)" % (what, name, err, rms))


ref = reference()


def hvd_run(k=1, compression=hvd.Compression.none, perturb=False):
    m = model()
    if perturb:  # different start on every rank: broadcast_parameters must fix it
        with torch.no_grad():
            for p in m.parameters():
                p.add_(R * 0.5)
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=m.named_parameters(), compression=compression,
                                   backward_passes_per_step=k, bucket_mb=0.001)
    hvd.broadcast_parameters(m.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    check(isinstance(opt, torch.optim.SGD), "DistributedOptimizer is still an SGD")
    for s in range(STEPS):
        opt.zero_grad()
        x, y = shard(s)
        for j in range(k):
            part = slice(j * B // k, (j + 1) * B // k)
            (loss_fn(m(x[part]), y[part]) / k).backward()
        opt.step()
    return m, opt


m, opt = hvd_run(perturb=True)
compare(m, ref, "hvd.DistributedOptimizer")
m, _ = hvd_run(k=2)
compare(m, ref, "backward_passes_per_step=2")
for c in (hvd.Compression.fp16, hvd.Compression.bf16):
    m, _ = hvd_run(compression=c)
    compare(m, ref, "Compression.%s" % c.name, tol=2e-2)

# zero_grad between backward and step is refused, as in Horovod; synchronize + skip_synchronize (clipping)
m = model()
opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=LR), named_parameters=m.named_parameters())
x, y = shard(0)
loss_fn(m(x), y).backward()
try:
    opt.zero_grad()
    check(False, "zero_grad after backward was not refused")
except AssertionError as e:
    check("zero_grad" in str(e), "zero_grad refusal message")
opt.synchronize()
torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9)
with opt.skip_synchronize():
    opt.step()
m1 = model()
opt1 = torch.optim.SGD(m1.parameters(), lr=LR)
loss_fn(m1(X[0]), Y[0]).backward()
opt1.step()
compare(m, m1, "synchronize + skip_synchronize")
# a second backward without step(): more passes than backward_passes_per_step
loss_fn(m(x), y).backward()
try:
    loss_fn(m(x), y).backward()
    check(False, "a second backward before step() was not refused")
except Exception as e:  # noqa: BLE001  (raised inside the autograd hook)
    check("backward_passes_per_step" in str(e), "too many backward passes: %s" % e)
opt.synchronize()


# ---- torch DDP: over gloo (a group beside the default one) and over baton (the default group) ----
def ddp_run(group, **kw):
    m = model()
    ddp = torch.nn.parallel.DistributedDataParallel(m, process_group=group, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=0.9)
    for s in range(STEPS):
        opt.zero_grad()
        x, y = shard(s)
        loss_fn(ddp(x), y).backward()
        opt.step()
    return m


mg = ddp_run(gloo)
mb = ddp_run(None)
compare(mb, mg, "DDP over baton against DDP over gloo")
compare(mg, ref, "DDP over gloo against one process")

# ---- DDP's buckets attached to baton (zero-copy; by default only from 1 MiB, here from 0 bytes) ----
from baton.torch import c10d  # noqa: E402

front = dist.group.WORLD  # the C++ front (baton/torch/_work.cpp's Group) when it is in use, else the Python group
pg = c10d.python_group(front)
pg._attach_min = 0
n_attached = len(c10d._attached)
mz = ddp_run(None)
compare(mz, mg, "DDP over baton with its buckets attached against DDP over gloo")
check(len(c10d._attached) > n_attached, "DDP's bucket was attached (%d -> %d)" % (n_attached, len(c10d._attached)))
t = torch.full((1000,), float(R))
for i in range(3):  # seen, attached (moved to shared memory in place), zero-copy
    t.fill_(float(R + i))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((1000,), float(sum(r + i for r in range(W))))), "all_reduce #%d of a tensor" % i)
check(getattr(t, "_baton_attach", None) == "attached" and t.is_shared(), "a reused tensor is attached")
# a tensor in a baton.buffer stays there (never moved into torch's shared memory)
sb = baton.buffer(4000)
bt = torch.frombuffer(sb, dtype=torch.float32)
for i in range(3):
    bt.fill_(1.0)
    dist.all_reduce(bt)
check(getattr(bt, "_baton_attach", None) == "refused" and torch.equal(torch.frombuffer(sb, dtype=torch.float32), bt)
      and torch.equal(bt, torch.full((1000,), float(W))), "a baton.buffer tensor is not moved")
del bt, sb
# rank 0 passes a view (cannot be attached), the others whole tensors: nobody attaches, the results are right
big = torch.zeros(2000)
v = big[1000:] if R == 0 else torch.zeros(1000)
for i in range(3):
    v.fill_(float(R))
    dist.all_reduce(v)
    check(torch.equal(v, torch.full((1000,), W * (W - 1) / 2.0)), "all_reduce #%d, view on rank 0" % i)
check(getattr(v, "_baton_attach", None) == "refused", "no rank attaches when one cannot")
pg._attach_min = c10d._attach_min()
compare(m_hvd := hvd_run()[0], mg, "DistributedOptimizer against DDP over gloo")
del m_hvd

# ---- BATON_TORCH_INLINE: the mode this run asked for is the one the group and the optimizer use ----
import os  # noqa: E402

from baton.torch import _inline  # noqa: E402

want_inline = {"on": True, "auto": len(os.sched_getaffinity(0)) == 1}.get(os.environ.get("BATON_TORCH_INLINE", "off"),
                                                                         False)
check(pg._inline == want_inline and hvd_run()[1]._inline == want_inline,
      "BATON_TORCH_INLINE=%s: the group and the optimizer run inline=%s" % (os.environ.get("BATON_TORCH_INLINE"),
                                                                           want_inline))
saved = os.environ.get("BATON_TORCH_INLINE")
os.environ["BATON_TORCH_INLINE"] = "sometimes"
try:
    _inline.inline_allreduce()
    check(False, "BATON_TORCH_INLINE=sometimes was accepted")
except ValueError as e:
    check("BATON_TORCH_INLINE='sometimes' must be off, on, auto or last" in str(e), "bad BATON_TORCH_INLINE: %s" % e)
os.environ["BATON_TORCH_INLINE"] = "last"
check(_inline.inline_mode() == "last" and not _inline.inline_allreduce(), "BATON_TORCH_INLINE=last is its own mode")
if saved is None:
    del os.environ["BATON_TORCH_INLINE"]
else:
    os.environ["BATON_TORCH_INLINE"] = saved

# ---- BATON_TORCH_INLINE=last: only the all-reduce that ends a step runs inline (c10d._StepEnd) ----
se = c10d._StepEnd()
got = [se.ends_step(k) for k in "ababab"]
check(got == [False, False, False, True, False, True], "_StepEnd on a, b, a, b, a, b: %s" % got)
se = c10d._StepEnd()
got = [se.ends_step(k) for k in "abcabcab"]
check(got == [False] * 5 + [True, False, False], "_StepEnd on a, b, c, a, b, c, a, b: %s" % got)
se = c10d._StepEnd()
got = [se.ends_step(k) for k in "aaa"]
check(got == [False, True, True], "_StepEnd on a, a, a (one bucket: every call ends a step): %s" % got)
se = c10d._StepEnd()
got = [se.ends_step(k) for k in range(c10d._StepEnd._MAX + 3)]
check(not any(got), "_StepEnd on never-repeated tensors: nothing ends a step")
# DDP with two buckets (the first bucket from 512 bytes, the others 1 KiB): every step the first bucket's
# all-reduce goes asynchronous and the second (the last, which the reducer waits for at once) runs inline;
# the parameters are DDP over gloo's.
calls = []
saved_inline, saved_first = (pg._inline, pg._step_end), dist._DEFAULT_FIRST_BUCKET_BYTES
pg._inline, pg._step_end, dist._DEFAULT_FIRST_BUCKET_BYTES = False, c10d._StepEnd(), 512
if front is not pg:
    front._fast = pg._fast_ok()  # what c10d._create does: the inline modes decide every call in Python
orig_run, orig_async = pg._inline_run, pg._allreduce_async
pg._inline_run = lambda tensors, result, run: (calls.append(("inline", tensors[0].data_ptr())), orig_run(tensors, result, run))[1]
pg._allreduce_async = lambda tensors, op: (calls.append(("async", tensors[0].data_ptr())), orig_async(tensors, op))[1]
compare(ddp_run(None, bucket_cap_mb=1.0 / 1024), mg, "BATON_TORCH_INLINE=last: DDP over baton (2 buckets) against DDP over gloo")
del pg._inline_run, pg._allreduce_async
(pg._inline, pg._step_end), dist._DEFAULT_FIRST_BUCKET_BYTES = saved_inline, saved_first
if front is not pg:
    front._fast = pg._fast_ok()
tail = [c[0] for c in calls[-4:]]
check(tail == ["async", "inline", "async", "inline"] and calls[-1][1] == calls[-3][1] != calls[-2][1],
      "BATON_TORCH_INLINE=last: the last two steps' all-reduces were %s" % calls[-4:])

# ---- the C++ work layer (baton/torch/_work.cpp; BATON_TORCH_WORK): DDP's asynchronous all-reduces return a
# C++ Work whose future a C++ thread completes, not the Python _Work and waiter thread ----
import importlib.util  # noqa: E402
import os  # noqa: E402

work_env = os.environ.get("BATON_TORCH_WORK", "auto")
want_cpp = work_env != "python" and importlib.util.find_spec("baton.torch._work") is not None
check((pg._work is not None) == want_cpp, "BATON_TORCH_WORK=%s: the C++ work layer is used: %s" % (work_env, want_cpp))
# The C++ front (BATON_TORCH_GROUP, default auto): with the C++ work layer, torch holds a C++ group that runs a
# settled tensor's all-reduce itself and hands the rest to the Python group; DDP's steady-state buckets go through
# it with the same parameters as gloo's. Without the front (or in an inline mode) every call reaches the Python group.
group_env = os.environ.get("BATON_TORCH_GROUP", "auto")
want_front = want_cpp and group_env != "python"
check((front is not pg) == want_front, "BATON_TORCH_GROUP=%s: the C++ front is the group: %s" % (group_env, want_front))
check(front is pg or front._fast == pg._fast_ok(), "the front runs all-reduces itself exactly when not inline")
kinds = []
calls0 = front._calls() if want_front else (0, 0)
orig_async = pg._allreduce_async
pg._allreduce_async = lambda tensors, op: (lambda w: (kinds.append(isinstance(w, c10d._Work)), w)[1])(orig_async(tensors, op))
compare(ddp_run(None, bucket_cap_mb=1.0 / 1024), mg, "BATON_TORCH_WORK=%s: DDP over baton (2 buckets) against DDP over gloo"
        % work_env)
del pg._allreduce_async
fast = front._calls()[0] - calls0[0] if want_front else 0
if want_front and not front._fast:  # an inline mode: every call decided in Python
    check(fast == 0, "inline: the front ran no all-reduce itself (%d)" % fast)
elif want_front:
    # DDP rebuilds its buckets after step 1: steps 1 and 2 go through Python (new tensors), the rest through C++
    check(fast >= STEPS - 2 and fast + len(kinds) >= STEPS and len(kinds) <= 4 and all(not k for k in kinds),
          "the C++ front ran DDP's steady-state all-reduces: %d in C++, Python's returned %s" % (fast, kinds))
elif pg._inline:
    check(kinds == [], "inline: no asynchronous all-reduce (%s)" % kinds)
else:
    check(len(kinds) >= STEPS and all(k != want_cpp for k in kinds),
          "BATON_TORCH_WORK=%s: DDP's all-reduces returned %s (Python _Work: %s)" % (work_env, "C++ Work" if want_cpp
                                                                                    else "Python _Work", kinds))
# a tensor the front runs: the same sums (f32 and int64, SUM and MAX) through the front as through Python
for dt, op, want_of in ((torch.float32, dist.ReduceOp.SUM, lambda r: W * (W + 1) // 2),
                        (torch.int64, dist.ReduceOp.MAX, lambda r: W)):
    t = torch.zeros(5000, dtype=dt)
    before = front._calls() if want_front else (0, 0)
    for i in range(4):
        t.fill_(R + 1)
        w = dist.all_reduce(t, op=op, async_op=i % 2 == 1)
        if w is not None:
            w.wait()
        check(torch.equal(t, torch.full((5000,), want_of(R), dtype=dt)), "all_reduce #%d of one %s tensor" % (i, dt))
    if want_front and front._fast:
        got = front._calls()
        check(got[0] - before[0] == 3 and got[1] - before[1] == 1, "the front took calls 2-4 of one tensor: %s -> %s"
              % (before, got))
if want_front:
    check_route_variable("BATON_TORCH_GROUP", "auto or python", c10d._group_front, lambda v: not v)
for dt in (torch.float32, torch.float64, torch.bfloat16, torch.int64):
    t = torch.full((3000,), R + 1, dtype=dt)
    w = dist.all_reduce(t, async_op=True)
    got = w.get_future().wait()
    want = torch.full((3000,), W * (W + 1) // 2, dtype=dt)
    check(w.wait() and w.is_completed() and w.is_success() and torch.equal(t, want) and torch.equal(got[0], want)
          and got[0].data_ptr() == t.data_ptr(), "async all_reduce of %s: work, future and result in place" % dt)
if want_cpp:
    check_route_variable("BATON_TORCH_WORK", "auto, cpp or python", c10d._work_layer, lambda v: v is None)

# ---- torch.distributed calls on the baton backend ----
check(dist.get_backend() == "baton" and dist.get_world_size() == W and dist.get_rank() == R, "backend identity")
t = torch.full((3,), float(R + 1))
dist.all_reduce(t)
check(torch.equal(t, torch.full((3,), W * (W + 1) / 2.0)), "dist.all_reduce sum")
t = torch.full((3,), float(R + 1))
dist.all_reduce(t, op=dist.ReduceOp.MAX)
check(torch.equal(t, torch.full((3,), float(W))), "dist.all_reduce max")
t = torch.full((4,), float(R))
work = dist.all_reduce(t, async_op=True)
work.wait()
check(torch.equal(t, torch.full((4,), W * (W - 1) / 2.0)), "dist.all_reduce async_op")
t = torch.arange(5.0) + 10 * R
dist.broadcast(t, src=W - 1)
check(torch.equal(t, torch.arange(5.0) + 10 * (W - 1)), "dist.broadcast")
outs = [torch.zeros(2, dtype=torch.int64) for _ in range(W)]
dist.all_gather(outs, torch.tensor([R, R * R]))
check(all(torch.equal(outs[r], torch.tensor([r, r * r])) for r in range(W)), "dist.all_gather")
objs = [None] * W
dist.all_gather_object(objs, {"rank": R})
check(objs == [{"rank": r} for r in range(W)], "dist.all_gather_object")
dist.barrier()

# ---- Horovod helpers ----
check(hvd.broadcast_object({"a": [1, 2, R]}, root_rank=W - 1) == {"a": [1, 2, W - 1]}, "broadcast_object")
ga = hvd.allgather(torch.full((R + 1, 2), float(R)))
want = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(W)])
check(torch.equal(ga, want), "allgather with unequal first dimensions")
t = torch.full((3,), float(R))
check(torch.allclose(hvd.allreduce(t), torch.full((3,), (W - 1) / 2.0)), "allreduce averages by default")
check(torch.equal(hvd.allreduce(t, op=hvd.Sum), torch.full((3,), W * (W - 1) / 2.0)), "allreduce op=Sum")
check(torch.equal(t, torch.full((3,), float(R))), "allreduce leaves its input alone")
h = hvd.allreduce_async_(t, op=hvd.Sum)
while not hvd.poll(h):
    pass
check(hvd.synchronize(h) is t and torch.equal(t, torch.full((3,), W * (W - 1) / 2.0)), "allreduce_async_ + poll")
bt = torch.full((2, 2), float(R), dtype=torch.bfloat16)
check(torch.equal(hvd.broadcast(bt, root_rank=0), torch.zeros(2, 2, dtype=torch.bfloat16)), "broadcast bf16")

hvd.barrier()
print("rank %d: CHECKS %d FAILED %d" % (R, checks, len(failures)), flush=True)
dist.destroy_process_group()
sys.exit(1 if failures else 0)
