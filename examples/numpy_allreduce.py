"""examples/numpy_allreduce.py: baton from plain numpy, no framework.

    baton run -n 4 -- /usr/bin/python3 examples/numpy_allreduce.py

Each rank estimates pi from its own random points, the ranks average their estimates with one all-reduce,
gather every rank's count, and rank 0 broadcasts a shared seed; then a gradient-style in-place
all-reduce runs asynchronously while the rank does other work. Exits 0 when every result is right.
"""
import sys

import numpy as np

import baton

baton.init()
rank, size = baton.rank(), baton.size()

# 1. a blocking out-of-place average
rng = np.random.default_rng(rank)
pts = rng.random((100_000, 2))
mine = np.array([4.0 * np.mean((pts ** 2).sum(1) < 1.0)])
pi = baton.allreduce(mine, op="avg")

# 2. gather one number from every rank
counts = baton.allgather(np.array([rank * 10], dtype=np.int64))

# 3. rank 0's seed to everybody, in place
seed = np.array([12345 if rank == 0 else -1], dtype=np.int64)
baton.broadcast_(seed, root=0)

# 4. an asynchronous in-place sum of a float16 "gradient", overlapped with other work
grad = np.full(1 << 20, rank + 1, dtype=np.float16)
handle = baton.allreduce_async_(grad, op="sum")
busy = sum(i * i for i in range(10_000))  # the overlapped work
handle.wait()

ok = (abs(pi[0] - np.pi) < 0.05 and list(counts) == [10 * r for r in range(size)] and seed[0] == 12345
      and np.all(grad == size * (size + 1) / 2))
# one write per line, so that the ranks' lines never interleave (print() writes the text and its newline
# separately when Python runs unbuffered, e.g. under PYTHONUNBUFFERED=1)
sys.stdout.write("rank %d of %d: pi ~ %.4f, counts %s, seed %d, fp16 sum %s: %s\n"
                 % (rank, size, pi[0], list(counts), seed[0], grad[0], "ok" if ok else "WRONG"))
sys.stdout.flush()
baton.shutdown()
sys.exit(0 if ok else 1)
