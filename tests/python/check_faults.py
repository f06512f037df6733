"""Library failures surface as baton.Error in Python, the interpreter keeps running.

Run under `baton run -n 2 -- /usr/bin/python3 tests/python/check_faults.py MODE`:
  kill      rank 1 SIGKILLs itself while an all-reduce is in flight; rank 0 prints
            "RAISED <seconds> <status>: <message>" (the seconds its failing call took)
  mismatch  rank 0 reduces 4 elements, rank 1 5: both print RAISED ... BATON_EMISMATCH
  timeout   (BATON_TIMEOUT=1) rank 1 arrives 4 s late: rank 0 prints RAISED ... BATON_ETIMEDOUT (rank 1
            prints LATE or RAISED: rank 0's contribution may still be posted when it arrives)
  async     as kill, with rank 0 waiting on an asynchronous handle
  torch_async  as async, through the torch.distributed backend (dist.all_reduce(async_op=True).wait()): with
            the C++ work layer the error is a RuntimeError carrying baton's message and status name
A rank that raised then checks the interpreter still works and the communicator refuses further work,
prints "ALIVE" and exits 0.
"""
import os
import signal
import sys
import time

import numpy as np

import baton

mode = sys.argv[1]
# The launcher stops the survivors (SIGTERM) soon after a rank dies; keep running to report (SIGKILL
# follows after its grace period, so nothing can outlive the job).
signal.signal(signal.SIGTERM, lambda *a: None)
baton.init()
R = baton.rank()


def report(t0, e):
    print("rank %d: RAISED %.2f %s: %s" % (R, time.monotonic() - t0, e.status, e), flush=True)


def after():
    x = np.ones(4, np.float32)
    try:
        baton.allreduce_(x)
        print("rank %d: a broken communicator still ran a collective" % R, flush=True)
        sys.exit(1)
    except baton.Error:
        pass
    print("rank %d: ALIVE %d" % (R, sum(range(10))), flush=True)
    sys.exit(0)


big = np.ones(4 << 20, np.float32)  # 16 MiB: the all-reduce takes a while
if mode in ("kill", "async"):
    for i in range(1000):
        if R == 1 and i == 3:
            h = baton.allreduce_async_(big)
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            if mode == "async":
                h = baton.allreduce_async_(big)
                while not h.done():
                    time.sleep(0.0005)
                h.wait()
            else:
                baton.allreduce_(big)
        except baton.Error as e:
            report(t0, e)
            after()
    print("rank %d: never raised" % R, flush=True)
    sys.exit(1)
elif mode == "torch_async":
    import torch
    import torch.distributed as dist

    import baton.torch  # noqa: F401  (registers the backend)
    dist.init_process_group("baton")
    t = torch.ones(4 << 20)
    for i in range(1000):
        if R == 1 and i == 3:
            w = dist.all_reduce(t, async_op=True)
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            dist.all_reduce(t, async_op=True).wait()
        except RuntimeError as e:  # baton.Error (the Python work) or RuntimeError (the C++ work layer)
            print("rank %d: RAISED %.2f %s: %s" % (R, time.monotonic() - t0, type(e).__name__, e), flush=True)
            after()
    print("rank %d: never raised" % R, flush=True)
    sys.exit(1)
elif mode == "mismatch":
    x = np.ones(4 + R, np.float32)
    t0 = time.monotonic()
    try:
        baton.allreduce_(x)
    except baton.Error as e:
        report(t0, e)
        after()
elif mode == "timeout":
    if R == 1:
        time.sleep(4)
    x = np.ones(4, np.float32)
    t0 = time.monotonic()
    try:
        baton.allreduce_(x)
    except baton.Error as e:
        report(t0, e)
        after()
    if R == 1:  # the late rank may find rank 0's contribution still posted, or a dead peer: either is fine
        print("rank 1: LATE", flush=True)
        sys.exit(0)
print("rank %d: never raised" % R, flush=True)
sys.exit(1)
