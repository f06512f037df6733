"""bench/torch_profile.py: where one training step of examples/torch_mnist.py's model spends its time.

    baton run -n 2 -- /usr/bin/python3 bench/torch_profile.py --mode gloo|baton|hvd|alone [--steps N]

The model, data, batch (128 per rank), optimizer (SGD momentum 0.9) and threads (1 intra-op thread) of
examples/torch_mnist.py. --mode gloo / baton: unchanged torch DDP over that backend; hvd:
baton.torch.DistributedOptimizer; alone: every rank trains its own copy with no communication at all (the
ceiling for any data-parallel way on these cores). Rank 0 prints one JSON line of per-step medians (ms):
  step       wall time of one iteration (zero_grad + forward + backward + step)
  zero, fwd, bwd, opt   wall time of each phase (opt: optimizer.step(), with hvd's wait for the buckets)
  cpu_main   CPU time of the training thread (cpu_zero, cpu_fwd, cpu_bwd, cpu_opt: of each phase); cpu_other: of every other thread of the process (baton's
             comm thread, gloo's worker threads, the baton backend's completion thread)
  faults     minor page faults of the process per step (memory the allocator returned to the kernel and
             touched again)
  hvd:   hooks (time inside the gradient hooks, starting buckets included), sync (the wait in step() for
         the all-reduces), inner (the wrapped optimizer's own step), starts_ms (when in backward each bucket
         started, ms after backward began; bwd is when backward ended)
  baton: pg_calls (all-reduce calls a step), pg_ms (time inside ProcessGroupBaton.allreduce), done_ms (with
         --done-times: when each bucket's all-reduce completed, ms after backward began). With the C++ front
         (BATON_TORCH_GROUP=auto, the default) DDP's steady-state all-reduces never reach the Python group, so
         pg_* count only the calls handed to it (0 a step); BATON_TORCH_GROUP=python times the Python route
  gloo/baton: ddp (DDP's own sampled timers, ms: forward, backward compute, backward comm, overlap)
  --all-ranks: every rank prints its line (with "cpu", the CPUs it is bound to), to see the ranks' skew.
  --timeline PREFIX (modes baton and hvd): every rank writes PREFIX.RANK, one JSON line per timed step with
         absolute CLOCK_MONOTONIC times (s): t0 (step start), fwd, bwd (backward starts), opt (backward
         ended), end; calls (each asynchronous all-reduce started through baton's extension) and ends (when
         a waiter saw it finished: the backend's waiter thread for DDP, synchronize() for hvd); cpu_main_ms,
         cpu_other_ms. The ranks share the clock, so bench/torch_timeline.py lines them up step by step.
Profiling costs a few perf_counter calls per step; every way pays them alike.
"""
import argparse
import gzip
import json
import os
import resource
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import baton.torch as hvd

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--mode", choices=["gloo", "baton", "noop", "hvd", "alone"], required=True)
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--bucket-mb", type=float, default=None, help="hvd: DistributedOptimizer bucket_mb (default its own)")
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--timeline", metavar="PREFIX", help="every rank writes PREFIX.RANK: one JSON line per timed step "
                "with absolute monotonic times (s) of the step's phases, each all-reduce's start (calls) and the "
                "moment a waiter saw it finished (ends); ranks share the clock, so their lines align")
ap.add_argument("--done-times", action="store_true", help="baton: note when each all-reduce's future completed "
                "(done_ms) through a Python done-callback on it, which costs the completing thread the GIL")
ap.add_argument("--all-ranks", action="store_true", help="every rank prints its line (rank skew), not only rank 0")
args = ap.parse_args()
torch.set_num_threads(1)

with gzip.open(os.path.join(args.data, "train-images-idx3-ubyte.gz")) as f:
    x_all = torch.from_numpy((np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255
                              - 0.2860) / 0.3530)
with gzip.open(os.path.join(args.data, "train-labels-idx1-ubyte.gz")) as f:
    y_all = torch.from_numpy(np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64))

hvd.init()
rank, world = hvd.rank(), hvd.size()
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
now = time.perf_counter
marks = {"pg_cpu": 0.0, "hooks": 0.0, "sync": 0.0, "inner": 0.0, "pg": 0.0, "pg_calls": 0, "starts": [], "done": []}
net = model


class _TimedHandle:
    """An asynchronous handle whose wait() notes when it returned (--timeline's ends)."""
    __slots__ = ("h",)

    def __init__(self, h):
        self.h = h

    def wait(self):
        r = self.h.wait()
        marks["ends"].append(now())
        return r

    def done(self):
        return self.h.done()


class _TimedBaton:
    """baton's extension module, with allreduce_async_into noting its calls and timing its handles."""
    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        return getattr(self._mod, name)

    def allreduce_async_into(self, *a, **kw):
        marks["calls"].append(now())
        return _TimedHandle(self._mod.allreduce_async_into(*a, **kw))


marks["calls"], marks["ends"] = [], []
if args.timeline and args.mode in ("baton", "hvd"):
    import baton.torch.c10d as _c10d
    import baton.torch.optimizer as _optm
    _c10d._baton = _TimedBaton(_c10d._baton)
    _optm._baton = _TimedBaton(_optm._baton)
if args.mode in ("gloo", "baton", "noop"):
    dist.init_process_group("gloo" if args.mode == "gloo" else "baton")
    net = torch.nn.parallel.DistributedDataParallel(model)
    if args.mode in ("baton", "noop"):
        from baton.torch import c10d
        orig_allreduce = c10d.ProcessGroupBaton.allreduce
        if args.mode == "noop":
            def orig_allreduce(self, tensors, opts=None):
                return self._done(tensors)

        def allreduce(self, tensors, opts=None):
            t0, c0 = now(), time.thread_time()
            w = orig_allreduce(self, tensors, opts)
            marks["pg"] += now() - t0
            marks["pg_cpu"] += time.thread_time() - c0
            marks["pg_calls"] += 1
            if args.done_times:  # a Python callback: it runs on whichever thread completes the future (with
                # the C++ work layer, its C++ thread, which then takes the GIL for it), so it is opt-in
                w.get_future().add_done_callback(lambda f: marks["done"].append(now()))
            return w
        c10d.ProcessGroupBaton.allreduce = allreduce
elif args.mode == "hvd":
    kw = {"bucket_mb": args.bucket_mb} if args.bucket_mb else {}
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **kw)
    cls = type(opt)
    orig_ready, orig_sync, orig_start = cls._grad_ready, cls.synchronize, cls._start_ready
    inner_step = torch.optim.SGD.step

    def grad_ready(self, p):
        t0 = now()
        orig_ready(self, p)
        marks["hooks"] += now() - t0

    def start_ready(self):
        n0 = self._next
        orig_start(self)
        marks["starts"].extend([now()] * (self._next - n0))

    def synchronize(self):
        t0 = now()
        orig_sync(self)
        marks["sync"] += now() - t0

    def step(self, closure=None):
        if self._should_synchronize:
            self.synchronize()
        self._synchronized = False
        t0 = now()
        r = inner_step(self, closure)
        marks["inner"] += now() - t0
        return r
    cls._grad_ready, cls.synchronize, cls._start_ready, cls.step = grad_ready, synchronize, start_ready, step
if args.mode == "hvd":
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

loss_fn = torch.nn.CrossEntropyLoss()
perm = torch.randperm(x_all.shape[0], generator=torch.Generator().manual_seed(0))[rank::world]
rows = []
timeline = []


def thread_cpu(since=None):
    """CPU ms per thread (by /proc name and id) since `since`, per timed step when since is given."""
    tick, now_cpu = os.sysconf("SC_CLK_TCK"), {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid) as f:
                st = f.read()
        except OSError:
            continue
        name, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        now_cpu["%s/%s" % (name, tid)] = (int(rest[11]) + int(rest[12])) * 1e3 / tick
    if since is None:
        return now_cpu
    return {k: round((v - since.get(k, 0.0)) / args.steps, 2) for k, v in now_cpu.items()
            if v - since.get(k, 0.0) > 0}


nb = perm.shape[0] // args.batch
for i in range(args.warmup + args.steps):
    idx = perm[(i % nb) * args.batch:(i % nb + 1) * args.batch]
    x, y = x_all[idx], y_all[idx]
    for k in ("hooks", "sync", "inner", "pg", "pg_cpu"):
        marks[k] = 0.0
    marks["pg_calls"] = 0
    marks["starts"], marks["done"] = [], []
    marks["calls"], marks["ends"] = [], []
    c0, p0 = time.thread_time(), time.process_time()
    t0 = now()
    opt.zero_grad()
    t1, ca = now(), time.thread_time()
    loss = loss_fn(net(x), y)
    t2, cb = now(), time.thread_time()
    loss.backward()
    t3, cc = now(), time.thread_time()
    opt.step()
    t4 = now()
    c1, p1 = time.thread_time(), time.process_time()
    if i == args.warmup - 1:
        cpu_at_start = thread_cpu()
        faults_at_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    if i >= args.warmup and args.timeline:
        timeline.append({"i": i, "t0": t0, "fwd": t1, "bwd": t2, "opt": t3, "end": t4, "calls": list(marks["calls"]),
                         "ends": list(marks["ends"]), "cpu_main_ms": (c1 - c0) * 1e3,
                         "cpu_other_ms": ((p1 - p0) - (c1 - c0)) * 1e3})
    if i >= args.warmup:
        ms = 1e3
        rows.append({"step": (t4 - t0) * ms, "zero": (t1 - t0) * ms, "fwd": (t2 - t1) * ms, "bwd": (t3 - t2) * ms,
                     "opt": (t4 - t3) * ms, "cpu_main": (c1 - c0) * ms,
                     "cpu_zero": (ca - c0) * ms, "cpu_fwd": (cb - ca) * ms, "cpu_bwd": (cc - cb) * ms, "cpu_opt": (c1 - cc) * ms, "cpu_other": ((p1 - p0) - (c1 - c0)) * ms,
                     "hooks": marks["hooks"] * ms, "sync": marks["sync"] * ms, "inner": marks["inner"] * ms,
                     "pg_ms": marks["pg"] * ms, "pg_cpu": marks["pg_cpu"] * ms, "pg_calls": marks["pg_calls"],
                     "starts_ms": [(s - t2) * ms for s in marks["starts"]],
                     "done_ms": [(s - t2) * ms for s in marks["done"]]})
hvd.barrier()


def med(key):
    return round(statistics.median(r[key] for r in rows), 3)


def med_list(key):
    n = min(len(r[key]) for r in rows)
    return [round(statistics.median(r[key][j] for r in rows), 2) for j in range(n)]


out = {"mode": args.mode, "rank": rank, "steps": len(rows)}
for k in ("step", "zero", "fwd", "bwd", "opt", "cpu_main", "cpu_zero", "cpu_fwd", "cpu_bwd", "cpu_opt", "cpu_other"):
    out[k] = med(k)
# the tail: samples_per_sec below is from the median step; a run's wall time (examples/torch_mnist.py) is the mean
steps_sorted = sorted(r["step"] for r in rows)
out["step_mean"] = round(statistics.fmean(steps_sorted), 3)
out["step_p90"], out["step_p99"] = (round(steps_sorted[min(len(rows) - 1, int(q * len(rows)))], 3) for q in (0.9, 0.99))
out["step_max"] = round(steps_sorted[-1], 3)
if args.mode == "hvd":
    out.update(hooks=med("hooks"), sync=med("sync"), inner=med("inner"), starts_ms=med_list("starts_ms"))
if args.mode in ("baton", "noop"):
    out.update(pg_calls=med("pg_calls"), pg_ms=med("pg_ms"), pg_cpu=med("pg_cpu"), done_ms=med_list("done_ms"))
if args.mode in ("gloo", "baton", "noop"):
    d = net._get_ddp_logging_data()
    out["ddp"] = {k: round(d[k] / 1e6, 3) for k in ("avg_forward_compute_time", "avg_backward_compute_time",
                                                    "avg_backward_comm_time", "avg_backward_compute_comm_overlap_time")
                  if k in d}
    out["ddp_buckets"] = d.get("bucket_sizes")
if args.timeline:
    with open("%s.%d" % (args.timeline, rank), "w") as f:
        for t in timeline:
            f.write(json.dumps(t) + "\n")
out["threads_ms"] = thread_cpu(cpu_at_start)
out["faults"] = round((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_at_start) / args.steps, 1)
out["samples_per_sec"] = round(args.batch * world / (out["step"] / 1e3))
if rank == 0 or args.all_ranks:
    out["cpu"] = os.sched_getaffinity(0) and sorted(os.sched_getaffinity(0))
    print(json.dumps(out), flush=True)
if args.mode in ("gloo", "baton", "noop"):
    dist.destroy_process_group()
