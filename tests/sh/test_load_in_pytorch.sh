#!/bin/sh
# A model saved by `baton train --save` carries what a reader needs: examples/load_in_pytorch.py rebuilds
# it in PyTorch (Debian's /usr/bin/python3 with python3-torch) from the file alone and reproduces baton's
# test accuracy on Fashion-MNIST exactly (the same count of correct test images), for the MLP and the CNN;
# without the recorded input normalisation it does clearly worse (at least 5 points). Prints
# "N passed, N failed".
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
B="$BUILD/baton"
PY=${BATON_TEST_PY:-/usr/bin/python3}   # make asan: the interpreter with the ASan runtime preloaded
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/baton-pytorch-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
export TMPDIR="$T" BATON_FLIGHT_DIR="$T" OPENBLAS_NUM_THREADS=1

if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    bad "$PY cannot import torch and numpy (Debian: python3-torch python3-numpy)"
    echo "$passed passed, $failed failed"
    exit 1
fi

train() {   # $1 label, rest: baton train options; baton's count of correct test images in $T/$1.want
    label=$1
    shift
    out=$(tmo 300 "$B" train "$@" --threads 1 --save "$T/$label.safetensors" --json 2>"$T/$label.err")
    rc=$?
    [ $rc = 0 ] && ok "$label: baton train --save" || bad "$label: baton train exited $rc: $(tail -n 3 "$T/$label.err")"
    printf '%s\n' "$out" | $PY -c 'import json, sys; print(round(json.loads(sys.stdin.readline())["test_accuracy"] * 10000))' \
        >"$T/$label.want" 2>/dev/null
}
train mlp --model mlp --hidden 64,32 --steps 150 --batch 64
train cnn --model cnn --channels 4,8 --hidden 32 --steps 60 --batch 32

got=$(tmo 300 $PY examples/load_in_pytorch.py "$T/mlp.safetensors" "$T/cnn.safetensors" --without-normalization 2>&1)
rc=$?
[ $rc = 0 ] && ok "load_in_pytorch.py reads both files" || bad "load_in_pytorch.py exited $rc: $got"
for label in mlp cnn; do
    want=$(cat "$T/$label.want")
    part=$(printf '%s\n' "$got" | sed -n "\#^file $T/$label.safetensors\$#,/^accuracy without/p")
    with=$(printf '%s\n' "$part" | sed -n 's/^accuracy [0-9.]* (\([0-9]*\)\/10000)$/\1/p')
    without=$(printf '%s\n' "$part" | sed -n 's/^accuracy without the normalization [0-9.]* (\([0-9]*\)\/10000)$/\1/p')
    [ -n "$want" ] && [ "$with" = "$want" ] && ok "$label: PyTorch gets baton's test accuracy exactly ($with of 10000)" ||
        bad "$label: PyTorch got '$with' of 10000 correct, baton '$want': $part"
    [ -n "$without" ] && [ -n "$want" ] && [ "$without" -le $((want - 500)) ] &&
        ok "$label: without the recorded normalization PyTorch gets $without of 10000 (baton $want)" ||
        bad "$label: without the normalization '$without', not clearly below '$want'"
    for k in "model: $label" "input_shape: 1,28,28" "classes: 10" "input_mean: 0.2860" "input_std: 0.3530"; do
        case "$part" in *"meta $k"*) ok "$label: the file records $k" ;; *) bad "$label: no '$k' in the metadata: $part" ;; esac
    done
done
case "$got" in *"meta channels: 4,8"*) ok "cnn: the file records its channels" ;; *) bad "cnn: no channels in: $got" ;; esac

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
