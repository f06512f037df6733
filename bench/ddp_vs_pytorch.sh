#!/bin/sh
# bench/ddp_vs_pytorch.sh: data-parallel training throughput, baton against PyTorch DDP, side by side.
# The MLP 784-1024-1024-10 (ReLU) on Fashion-MNIST held in memory, per-rank batch 128, SGD momentum 0.9,
# weight decay 5e-4, ONE compute thread per worker. Four settings, interleaved run by run, REPS runs each:
#   torch 1 worker | torch DDP 2 workers (gloo, default 25 MB buckets) | baton 1 worker | baton 2 workers
# and the medians of samples/s (all ranks together) as a table, with the two floors of issue 4:
#   baton 2 workers >= 1.8 x torch DDP 2 workers,   baton 2 workers >= 1.6 x baton 1 worker.
#
# usage: bench/ddp_vs_pytorch.sh [REPS (default 5)] [STEPS per run (default 300)] [extra baton train flags]
# Environment: OPENBLAS_CORETYPE applies to both sides (unset = autodetect); BUILD (default build).
# Needs root the first time: installs python3-torch / python3-numpy and points libblas.so.3 at OpenBLAS.
set -eu
REPS=${1:-5}
STEPS=${2:-300}
shift 2 2>/dev/null || shift $#
EXTRA="$*"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."

. bench/torch_setup.sh
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/torch_ddp.py" <<'PYEOF'
# torch_ddp.py WORLD STEPS BATCH: prints "samples_per_sec final_loss" (all ranks together) from rank 0.
import gzip, os, socket, sys, time
import numpy as np, torch, torch.distributed as dist, torch.multiprocessing as mp

def worker(rank, world, steps, batch, port):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if world > 1:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    d = "/usr/share/datasets/fashion-mnist/"
    def load(name, off): return np.frombuffer(gzip.open(d + name).read(), np.uint8, offset=off)
    x = torch.from_numpy((load("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255 - 0.2860) / 0.3530)
    y = torch.from_numpy(load("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    L = torch.nn.Linear
    model = torch.nn.Sequential(L(784, 1024), torch.nn.ReLU(), L(1024, 1024), torch.nn.ReLU(), L(1024, 10))
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)   # default buckets (25 MB)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                          lr=0.05, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(x.shape[0], generator=g)[rank::world]   # DistributedSampler's shard
    n = perm.shape[0] // batch
    def step(i):
        idx = perm[(i % n) * batch:(i % n + 1) * batch]
        loss = lossf(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    for i in range(10): step(i)   # warm-up
    if world > 1: dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps): loss = step(i)
    if world > 1: dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0: print("%.1f %.4f" % (steps * batch * world / dt, loss.item()), flush=True)
    if world > 1: dist.destroy_process_group()

if __name__ == "__main__":
    world, steps, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    if world == 1: worker(0, 1, steps, batch, port)
    else: mp.spawn(worker, args=(world, steps, batch, port), nprocs=world)
PYEOF

torch_run() {   # WORLD -> samples/s
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$PY" "$TMP/torch_ddp.py" "$1" "$STEPS" 128 | awk '{print $1}'
}
baton_run() {   # WORLD -> samples/s
    "$BUILD/baton" run -n "$1" -- "$BUILD/baton" train --model mlp --data fashion-mnist --batch 128 --threads 1 \
        --steps "$STEPS" --json $EXTRA 2>/dev/null | sed -n 's/.*"samples_per_sec":\([0-9.e+]*\).*/\1/p' | tail -n 1
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; $(nproc) cores; $REPS runs x $STEPS steps; per-rank batch 128, 1 thread/worker${EXTRA:+; baton flags: $EXTRA}"
for r in $(seq 1 "$REPS"); do
    torch_run 1 >> "$TMP/t1"
    torch_run 2 >> "$TMP/t2"
    baton_run 1 >> "$TMP/b1"
    baton_run 2 >> "$TMP/b2"
    printf 'run %d: torch1 %s torch2 %s baton1 %s baton2 %s\n' "$r" "$(tail -n1 "$TMP/t1")" "$(tail -n1 "$TMP/t2")" \
        "$(tail -n1 "$TMP/b1")" "$(tail -n1 "$TMP/b2")" >&2
done
t1=$(median < "$TMP/t1"); t2=$(median < "$TMP/t2"); b1=$(median < "$TMP/b1"); b2=$(median < "$TMP/b2")
awk -v t1="$t1" -v t2="$t2" -v b1="$b1" -v b2="$b2" 'BEGIN {
    printf "| setting | samples/s (median) |\n| --- | --- |\n"
    printf "| PyTorch 1 worker | %.0f |\n| PyTorch DDP 2 workers (gloo) | %.0f |\n", t1, t2
    printf "| baton 1 worker | %.0f |\n| baton 2 workers | %.0f |\n", b1, b2
    printf "\nbaton 2 / PyTorch DDP 2 = %.2fx (floor 1.8x)   baton 2 / baton 1 = %.2fx (floor 1.6x)   PyTorch 2 / 1 = %.2fx\n",
           b2 / t2, b2 / b1, t2 / t1
}'
