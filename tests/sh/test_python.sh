#!/bin/sh
# The Python package (import baton, import baton.torch, the torch.distributed backend "baton") on Debian's
# /usr/bin/python3, every multi-process run under `baton run` with a hard timeout:
#   tests/python/check_coll.py    every collective on numpy arrays and torch tensors, each dtype and op,
#                                 element by element, in and out of place, async, refusals; 1, 2, 3, 4 ranks
#   tests/python/check_torch.py   DistributedOptimizer / DDP over baton / DDP over gloo / one process agree
#                                 after 5 SGD steps; Horovod helpers; torch.distributed calls; 2 and 3 ranks
#   tests/python/check_faults.py  a killed rank, a mismatch, a timeout raise baton.Error naming the cause
#   examples/numpy_allreduce.py, examples/torch_mnist.py (a few steps)
# Prints "N passed, N failed".
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
PY=${BATON_TEST_PY:-/usr/bin/python3}   # make asan: the interpreter with the ASan runtime preloaded
# Each rank prints whole lines with flush=True: one write each when Python buffers, but two (the text, then
# the newline) under PYTHONUNBUFFERED=1, where the ranks' lines can interleave.
unset PYTHONUNBUFFERED
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/baton-python-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
export TMPDIR="$T"            # baton's private directory (flight-recorder dumps) lives and dies here
unset XDG_RUNTIME_DIR
export PYTHONPATH="$PWD/$BUILD/python"
export PYTHONDONTWRITEBYTECODE=1
export OMP_NUM_THREADS=1
BATON="$PWD/$BUILD/baton"

ext=$(ls "$BUILD"/python/baton/_baton*.so 2>/dev/null | head -n 1)
want=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
case "$ext" in *"$want") ok "extension built for $PY ($want)" ;; *) bad "no extension for $PY ($want) under $BUILD/python" ;; esac

# run NAME N SECONDS SCRIPT ARGS...: every rank must print "CHECKS n FAILED 0" and the job exit 0
run_checks() {
    name=$1 n=$2 secs=$3
    shift 3
    out=$(tmo "$secs" "$BATON" run -n "$n" --tag-output -- $PY "$@" 2>&1)
    rc=$?
    good=$(printf '%s\n' "$out" | grep -c 'CHECKS [0-9]* FAILED 0$')
    if [ "$rc" -eq 0 ] && [ "$good" -eq "$n" ]; then
        ok "$name on $n rank(s): $(printf '%s\n' "$out" | grep -m 1 -o 'CHECKS [0-9]*') each"
    else
        bad "$name on $n rank(s) (exit $rc, $good of $n ranks clean)"
        printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
    fi
}

for n in 1 2 3 4; do run_checks "collectives (numpy, torch)" $n 120 tests/python/check_coll.py both; done
for n in 2 3; do run_checks "DistributedOptimizer, DDP over baton and gloo" $n 120 tests/python/check_torch.py; done
# the same with every gradient all-reduce inline on the hook's thread (BATON_TORCH_INLINE, docs/python.md)
export BATON_TORCH_INLINE=on
run_checks "BATON_TORCH_INLINE=on: DistributedOptimizer, DDP over baton and gloo" 2 120 tests/python/check_torch.py
unset BATON_TORCH_INLINE
# the C++ work layer (baton/torch/_work.cpp): built whenever the Makefile finds libtorch-dev's headers; the Python
# route (BATON_TORCH_WORK=python) stays tested too
if [ -f /usr/lib/python3/dist-packages/torch/include/torch/csrc/distributed/c10d/Work.hpp ]; then
    if ls "$BUILD"/python/baton/torch/_work*.so >/dev/null 2>&1; then ok "baton.torch's C++ work layer is built"
    else bad "libtorch-dev's headers are installed but $BUILD/python/baton/torch/_work*.so is missing"; fi
fi
BATON_TORCH_WORK=python run_checks "BATON_TORCH_WORK=python: DistributedOptimizer, DDP over baton and gloo" 2 120 \
    tests/python/check_torch.py
# the C++ work layer behind the Python group, without the C++ front (BATON_TORCH_GROUP=python, the way before it)
BATON_TORCH_GROUP=python run_checks "BATON_TORCH_GROUP=python: DistributedOptimizer, DDP over baton and gloo" 2 120 \
    tests/python/check_torch.py

# faults: MODE, extra env, the RAISED line expected from rank 0 (extended regex), longest acceptable seconds
fault() {
    mode=$1 envs=$2 want=$3 limit=$4
    out=$(tmo 60 env $envs "$BATON" run -n 2 --tag-output -- $PY tests/python/check_faults.py "$mode" 2>&1)
    line=$(printf '%s\n' "$out" | grep -m 1 "rank 0: RAISED")
    secs=$(printf '%s\n' "$line" | sed -n 's/.*RAISED \([0-9.]*\) .*/\1/p')
    if printf '%s\n' "$line" | grep -Eq "RAISED [0-9.]+ $want" &&
       printf '%s\n' "$out" | grep -q "rank 0: ALIVE 45" &&
       awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s != "" && s + 0 <= l) }'; then
        ok "$mode: rank 0 raised after $secs s and went on: $(printf '%s' "$line" | cut -c1-150)"
    else
        bad "$mode: expected rank 0 to raise /$want/ within $limit s and go on"
        printf '%s\n' "$out" | tail -n 12 | sed 's/^/    /'
    fi
}
fault kill "" "BATON_EPEERDEAD: baton.allreduce: .*rank 1 .*died" 5
fault async "" "BATON_EPEERDEAD: baton: asynchronous collective: .*rank 1 .*died" 5
fault torch_async "" "RuntimeError: baton: asynchronous all-reduce: .*rank 1 .*died.*BATON_EPEERDEAD" 5
fault torch_async "BATON_TORCH_WORK=python" "Error: baton: asynchronous collective: .*rank 1 .*died" 5
# rank 1 may see the mismatch first and abort the job: rank 0 then reports the cancel with rank 1's words
fault mismatch "" "BATON_E(MISMATCH|CANCELED): .*collective mismatch: rank [01] runs allreduce #1 \\([45] x f32" 5
fault timeout "BATON_TIMEOUT=1" "BATON_ETIMEDOUT: .*waiting for rank 1" 5

# the examples, as a user runs them
out=$(tmo 60 "$BATON" run -n 2 -- $PY examples/numpy_allreduce.py 2>&1)
if [ $? -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c ': ok$')" -eq 2 ]; then ok "examples/numpy_allreduce.py on 2 ranks"
else bad "examples/numpy_allreduce.py on 2 ranks"; printf '%s\n' "$out" | tail -n 8 | sed 's/^/    /'; fi
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    h=$(tmo 120 "$BATON" run -n 2 -- $PY examples/torch_mnist.py --steps 20 --json 2>&1)
    d=$(tmo 120 "$BATON" run -n 2 -- $PY examples/torch_mnist.py --steps 20 --json --ddp baton 2>&1)
    i=$(tmo 120 env BATON_TORCH_INLINE=auto "$BATON" run -n 2 -- $PY examples/torch_mnist.py --steps 20 --json --ddp baton 2>&1)
    o=$(tmo 120 env BATON_TORCH_INLINE=last "$BATON" run -n 2 -- $PY examples/torch_mnist.py --steps 20 --json --ddp baton 2>&1)
    hl=$(printf '%s\n' "$h" | sed -n 's/.*"final_loss": \([0-9.]*\).*/\1/p')
    dl=$(printf '%s\n' "$d" | sed -n 's/.*"final_loss": \([0-9.]*\).*/\1/p')
    il=$(printf '%s\n' "$i" | sed -n 's/.*"final_loss": \([0-9.]*\).*/\1/p')
    ol=$(printf '%s\n' "$o" | sed -n 's/.*"final_loss": \([0-9.]*\).*/\1/p')
    if [ -n "$hl" ] && [ -n "$dl" ] && [ -n "$il" ] && [ -n "$ol" ] &&
       awk -v a="$hl" -v b="$dl" -v c="$il" -v o="$ol" 'BEGIN { d = a - b; e = c - b; f = o - b
           exit !(a < 2.0 && d * d < 1e-8 && e * e < 1e-8 && f * f < 1e-8) }'; then
        ok "examples/torch_mnist.py, 20 steps on 2 ranks: hvd loss $hl = DDP-over-baton loss $dl = with BATON_TORCH_INLINE=auto $il = last $ol"
    else
        bad "examples/torch_mnist.py: hvd loss '$hl', DDP-over-baton loss '$dl', with BATON_TORCH_INLINE=auto '$il', last '$ol'"
        printf '%s\n%s\n%s\n%s\n' "$h" "$d" "$i" "$o" | tail -n 10 | sed 's/^/    /'
    fi
    # bad options: one line naming the option and a non-zero exit, no traceback (--warmup at or past the last
    # step used to end in a TypeError: the clock was never started)
    for case in "--warmup|--steps 2 --warmup 2" "--warmup|--warmup -1" "--batch|--batch 0" "--batch|--batch 100000"; do
        want=${case%%|*} opts=${case#*|}
        e=$(tmo 60 "$BATON" run -n 1 -- $PY examples/torch_mnist.py $opts 2>&1)
        rc=$?
        if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$e" | grep -c "^torch_mnist: $want ")" -eq 1 ] &&
           ! printf '%s\n' "$e" | grep -q Traceback; then ok "examples/torch_mnist.py $opts: refused ($(printf '%s\n' "$e" | grep -m 1 '^torch_mnist:'))"
        else bad "examples/torch_mnist.py $opts: exit $rc, no one-line error naming $want"; printf '%s\n' "$e" | tail -n 6 | sed 's/^/    /'; fi
    done
else
    bad "examples/torch_mnist.py: Fashion-MNIST missing (the Makefile's DEB_PKGS installs dataset-fashion-mnist)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
