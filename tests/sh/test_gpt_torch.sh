#!/bin/sh
# bench/gpt_torch.py (baton's GPT in PyTorch) against baton, on Debian's /usr/bin/python3 with python3-torch:
#   the train/validation split is byte-identical (BLAKE2b of each part) for the fortunes and for text:FILE
#   (CRLF lines, blank lines holding spaces, a file of fewer than 10 documents);
#   the validation loss PyTorch computes on a baton-saved GPT equals baton's within 1e-4;
#   the twin trains (a few steps, loss finite and falling).
# Prints "N passed, N failed".
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
PY=${BATON_TEST_PY:-/usr/bin/python3}   # make asan: the interpreter with the ASan runtime preloaded
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
if ! $PY -c "import torch, numpy" 2>/dev/null; then
    echo "skip: $PY has no torch (apt-get install python3-torch)"
    echo "0 passed, 0 failed"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-gpt-torch-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
export TMPDIR="$T" PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
BATON="$PWD/$BUILD/baton"
TWIN="$PWD/bench/gpt_torch.py"
field() { $PY -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

# a text file: 40 paragraphs, some CRLF, some separated by lines of spaces, and one of only 3 paragraphs
$PY - "$T" <<'PYEOF'
import sys
d = sys.argv[1]
words = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex jovial bakers".split()
with open(d + "/many.txt", "wb") as f:
    for i in range(40):
        line = " ".join(words[(i * 3 + j) % len(words)] for j in range(30 + i % 7))
        f.write(line.encode() + (b"\r\n" if i % 5 == 0 else b"\n"))
        f.write(line[::-1].encode() + b"\n")
        f.write(b"   \n" if i % 4 == 0 else b"\n\n" if i % 3 == 0 else b"\n")
with open(d + "/few.txt", "wb") as f:
    f.write(b"One paragraph of text. " * 20 + b"\n\n" + b"A second one, longer than the first. " * 20 + b"\n\nA third.\n")
PYEOF

for data in fortunes "text:$T/many.txt" "text:$T/few.txt"; do
    b=$(tmo 60 "$BATON" train --model gpt --layers 1 --heads 2 --dim 16 --context 8 --batch 2 --steps 1 \
        --eval-windows 1 --data "$data" --json 2>/dev/null)
    p=$(tmo 60 $PY "$TWIN" split --data "$data")
    for k in train_blake2b val_blake2b train_bytes; do
        x=$(printf '%s' "$b" | field $k 2>/dev/null)
        y=$(printf '%s' "$p" | field $k 2>/dev/null)
        if [ -n "$x" ] && [ "$x" = "$y" ]; then ok "split ${data#text:$T/}: $k $(printf '%.16s' "$x")"
        else bad "split ${data#text:$T/}: $k baton '$x' vs pytorch '$y'"; fi
    done
done

# baton trains and saves a small GPT; PyTorch computes the validation loss of the saved file
b=$(cd "$T" && tmo 120 "$BATON" train --model gpt --layers 2 --heads 2 --dim 32 --context 32 --batch 4 --steps 5 \
    --eval-windows 24 --threads 1 --save "$T/g.safetensors" --json 2>/dev/null)
p=$(tmo 120 $PY "$TWIN" eval "$T/g.safetensors" --eval-windows 24 2>&1)
vb=$(printf '%s' "$b" | field val_loss 2>/dev/null)
vp=$(printf '%s' "$p" | field val_loss 2>/dev/null)
if [ -n "$vb" ] && [ -n "$vp" ] && $PY -c "import sys; sys.exit(not abs($vb - $vp) <= 1e-4)"; then
    ok "validation loss of a baton-saved GPT: baton $vb, pytorch $vp"
else
    bad "validation loss: baton '$vb' vs pytorch '$vp' ($p)"
fi
# a wrong file is refused with one line
printf 'not safetensors' > "$T/bad.safetensors"
if out=$(tmo 60 $PY "$TWIN" eval "$T/bad.safetensors" 2>&1); then bad "a bad file was accepted: $out"
else ok "a bad model file is refused"; fi

# the twin trains
p=$(tmo 120 $PY "$TWIN" train --layers 2 --heads 2 --dim 32 --context 32 --batch 4 --steps 8 --lr 3e-3 \
    --warmup 2 --eval-windows 4 2>&1)
l0=$(printf '%s' "$p" | field initial_loss 2>/dev/null)
l1=$(printf '%s' "$p" | field final_loss 2>/dev/null)
if [ -n "$l0" ] && [ -n "$l1" ] && $PY -c "import sys; sys.exit(not ($l1 < $l0 < 6.0))"; then
    ok "the PyTorch twin trains: loss $l0 -> $l1"
else
    bad "the PyTorch twin: $p"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
