#!/bin/sh
# bench/train_vs_pytorch.sh: samples/s of the same MLP (784-1024-1024-10, ReLU, batch 128, SGD momentum 0.9,
# weight decay 5e-4 on weights, Fashion-MNIST preloaded in memory) trained by PyTorch (Debian python3-torch
# 1.13) and by `baton train`, one thread each and then two threads each, interleaved run by run, REPS runs
# per setting, medians and the ratio printed as a table.
#
# usage: bench/train_vs_pytorch.sh [REPS (default 5)] [STEPS per run (default 300)]
# Environment: OPENBLAS_CORETYPE applies to both sides (unset = OpenBLAS autodetect); BUILD (default build).
# Needs root the first time: installs python3-torch and points libblas.so.3 at OpenBLAS if it is not
# (Debian's reference BLAS is ~30x slower, which would make the comparison meaningless).
set -eu
REPS=${1:-5}
STEPS=${2:-300}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."

. bench/torch_setup.sh

make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/torch_mlp.py" <<'PYEOF'
import gzip, sys, time
import numpy as np, torch
threads, steps, batch, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(threads)
if mode == "gemm":   # sanity check: is torch's sgemm OpenBLAS (fast) or the reference BLAS (slow)?
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.mm(a, b)
    t0 = time.perf_counter()
    for _ in range(10): torch.mm(a, b)
    print("%.1f" % (10 * 2 * 1024 ** 3 / (time.perf_counter() - t0) / 1e9))
    sys.exit(0)
torch.manual_seed(1)
d = "/usr/share/datasets/fashion-mnist/"
def load(name, off): return np.frombuffer(gzip.open(d + name).read(), np.uint8, offset=off)
x = torch.from_numpy((load("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255 - 0.2860) / 0.3530)
y = torch.from_numpy(load("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
L = torch.nn.Linear
model = torch.nn.Sequential(L(784, 1024), torch.nn.ReLU(), L(1024, 1024), torch.nn.ReLU(), L(1024, 10))
decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                      lr=0.05, momentum=0.9)
lossf = torch.nn.CrossEntropyLoss()
n = x.shape[0] // batch
def step(i, perm):
    idx = perm[(i % n) * batch:(i % n + 1) * batch]
    loss = lossf(model(x[idx]), y[idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss
perm = torch.randperm(x.shape[0])
for i in range(10): step(i, perm)            # warm-up (allocator, BLAS buffers)
t0 = time.perf_counter()
for i in range(steps): loss = step(i, perm)
dt = time.perf_counter() - t0
print("%.1f %.4f" % (steps * batch / dt, loss.item()))
PYEOF

core=$(OPENBLAS_VERBOSE=2 "$BUILD/baton" train --help 2>&1 | sed -n 's/^Core: //p' | head -n 1)
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} (OpenBLAS core: ${core:-autodetected}); $(nproc) cores; $REPS runs x $STEPS steps, batch 128"
gf=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$PY" "$TMP/torch_mlp.py" 1 0 0 gemm)
echo "torch 1024^3 sgemm, 1 thread: $gf GFLOP/s (reference BLAS would be ~5)"
awk -v g="$gf" 'BEGIN { exit !(g < 30) }' && { echo "error: torch is not using an optimized BLAS" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '\n| threads | PyTorch samples/s (median) | baton samples/s (median) | baton / PyTorch |\n|---|---|---|---|\n' > "$TMP/table"
for t in 1 2; do
    : > "$TMP/torch.$t"
    : > "$TMP/baton.$t"
    for r in $(seq 1 "$REPS"); do
        # OMP_WAIT_POLICY=PASSIVE: with 2 threads PyTorch's OpenMP pool otherwise spin-waits against
        # OpenBLAS's own threads on 2 cores (3,400 instead of 11,200 samples/s measured here): PyTorch gets
        # its best setting.
        OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$PY" "$TMP/torch_mlp.py" "$t" "$STEPS" 128 run | awk '{ print $1 }' >> "$TMP/torch.$t"
        "$BUILD/baton" train --model mlp --data fashion-mnist --batch 128 --optim sgd --lr 0.05 --momentum 0.9 \
            --weight-decay 5e-4 --steps "$STEPS" --threads "$t" --json 2>/dev/null |
            sed -n 's/.*"samples_per_sec":\([0-9.e+]*\).*/\1/p' >> "$TMP/baton.$t"
        echo "threads $t run $r: torch $(tail -n 1 "$TMP/torch.$t")  baton $(tail -n 1 "$TMP/baton.$t")" >&2
    done
    tm=$(median < "$TMP/torch.$t")
    bm=$(median < "$TMP/baton.$t")
    awk -v t="$t" -v a="$tm" -v b="$bm" 'BEGIN { printf "| %d | %.0f | %.0f | %.2fx |\n", t, a, b, b / a }' >> "$TMP/table"
done
cat "$TMP/table"
