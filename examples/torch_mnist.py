"""examples/torch_mnist.py: the Fashion-MNIST MLP (784-1024-1024-10) in PyTorch, data-parallel over baton.

    baton run -n 2 -- /usr/bin/python3 examples/torch_mnist.py                 # hvd.DistributedOptimizer
    baton run -n 2 -- /usr/bin/python3 examples/torch_mnist.py --ddp baton     # torch DDP, backend "baton"
    baton run -n 2 -- /usr/bin/python3 examples/torch_mnist.py --ddp gloo      # torch DDP, backend "gloo"
    baton run -n 2 -- /usr/bin/python3 examples/torch_mnist.py --alone         # no communication at all

A Horovod script with its import changed: `import baton.torch as hvd`. The --ddp variants are an ordinary
DDP script whose init_process_group names the backend (importing baton.torch registers "baton").
--alone is the benchmarks' ceiling: every rank trains its own copy of the model on its shard with no gradient
communication at all (the same loop, processes and CPU binding), so no data-parallel way can be faster.
Options: --epochs E (default 1), --steps S (stop after S steps; with --warmup W, time only steps after W),
--batch B per rank (128), --lr, --threads T (compute threads per worker, default 1), --json (rank 0 prints
one JSON line: samples_per_sec, final_loss, test_accuracy, world_size). Data: Debian's
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) or --data DIR with the four IDX .gz files.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import baton.torch as hvd

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--ddp", choices=["baton", "gloo"], help="torch DDP over this backend instead of hvd")
ap.add_argument("--alone", action="store_true", help="no gradient communication: the benchmarks' ceiling")
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--steps", type=int, default=0)
ap.add_argument("--warmup", type=int, default=0)
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--json", action="store_true")
args = ap.parse_args()
for flag, v, least in (("--epochs", args.epochs, 1), ("--steps", args.steps, 0), ("--warmup", args.warmup, 0),
                       ("--batch", args.batch, 1), ("--threads", args.threads, 1)):
    if v < least:
        sys.exit("torch_mnist: %s %d: must be at least %d" % (flag, v, least))
torch.set_num_threads(args.threads)


def load(name, offset):
    path = os.path.join(args.data, name)
    if not os.path.exists(path):
        sys.exit("torch_mnist: %s is missing (apt-get install dataset-fashion-mnist, or --data DIR)" % path)
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def images(name):
    return torch.from_numpy((load(name, 16).reshape(-1, 784).astype(np.float32) / 255 - 0.2860) / 0.3530)


x_train, y_train = images("train-images-idx3-ubyte.gz"), torch.from_numpy(load("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
x_test, y_test = images("t10k-images-idx3-ubyte.gz"), torch.from_numpy(load("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))

hvd.init()
rank, world = hvd.rank(), hvd.size()
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
if args.ddp and args.alone:
    sys.exit("torch_mnist: --alone and --ddp exclude each other")
if args.alone:
    net = model
elif args.ddp:
    dist.init_process_group(args.ddp)
    net = torch.nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's parameters
else:
    net = model
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

loss_fn = torch.nn.CrossEntropyLoss()
steps_per_epoch = x_train.shape[0] // (args.batch * world)
total = args.steps or steps_per_epoch * args.epochs
if steps_per_epoch < 1:
    sys.exit("torch_mnist: --batch %d x %d ranks is more than the %d training images; use a smaller --batch"
             % (args.batch, world, x_train.shape[0]))
if args.warmup >= total:
    sys.exit("torch_mnist: --warmup %d leaves none of the %d steps to time; use a smaller --warmup or more --steps"
             % (args.warmup, total))
step, t0, timed, loss = 0, None, 0, torch.zeros(())
for epoch in range(args.epochs if not args.steps else 1 << 30):
    perm = torch.randperm(x_train.shape[0], generator=torch.Generator().manual_seed(epoch))
    mine = perm[rank::world]  # DistributedSampler's shard: every rank sees a different part of the epoch
    for i in range(steps_per_epoch):
        if step == args.warmup:
            hvd.barrier()
            t0 = time.perf_counter()
        idx = mine[i * args.batch:(i + 1) * args.batch]
        opt.zero_grad()
        loss = loss_fn(net(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
        step += 1
        timed += step > args.warmup
        if step >= total:
            break
    if step >= total:
        break
hvd.barrier()
seconds = time.perf_counter() - t0
with torch.no_grad():
    acc = (model(x_test).argmax(1) == y_test).float().mean().item()
result = {"samples_per_sec": timed * args.batch * world / seconds, "final_loss": loss.item(),
          "test_accuracy": acc, "world_size": world, "steps": step,
          "mode": "ddp-" + args.ddp if args.ddp else "alone" if args.alone else "hvd.DistributedOptimizer"}
if rank == 0:
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        print("%s on %d ranks: %d steps, %.0f samples/s, loss %.4f, test accuracy %.4f"
              % (result["mode"], world, step, result["samples_per_sec"], result["final_loss"], acc), flush=True)
if args.ddp:
    dist.destroy_process_group()
