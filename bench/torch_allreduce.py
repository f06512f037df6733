"""bench/torch_allreduce.py: per-call time of hvd.allreduce_ (in place, sum) on a CPU torch tensor.

Run under `baton run -n N`; rank 0 prints "bytes time_us" for each size given (bytes, multiples of 4).
Timing as `baton bench`: WARMUP calls, then calls until both ITERS calls and MIN_TIME seconds are done.
"""
import sys
import time

import torch

import baton.torch as hvd

torch.set_num_threads(1)
hvd.init()
ITERS, WARMUP, MIN_TIME = 20, 5, 0.2
for nbytes in (int(a) for a in sys.argv[1:]):
    t = torch.ones(nbytes // 4, dtype=torch.float32)
    for _ in range(WARMUP):
        hvd.allreduce_(t, op=hvd.Sum)
    hvd.barrier()
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(ITERS):
            hvd.allreduce_(t, op=hvd.Sum)
        n += ITERS
        # every rank must run the same number of calls: rank 0 decides, and tells the others
        flag = torch.tensor([1 if time.perf_counter() - t0 >= MIN_TIME else 0], dtype=torch.int32)
        hvd.broadcast_(flag, 0)
        if flag.item():
            break
    dt = time.perf_counter() - t0
    if hvd.rank() == 0:
        print("%d %.3f" % (nbytes, dt / n * 1e6), flush=True)
