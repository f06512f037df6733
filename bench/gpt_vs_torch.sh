#!/bin/sh
# bench/gpt_vs_torch.sh: tokens/s of the same GPT (6 layers, dim 384, 6 heads, context 256, byte-level fortunes,
# batch 16 windows, AdamW) trained by baton and by its PyTorch twin (bench/gpt_torch.py, Debian's torch 1.13),
# side by side, interleaved run by run, ROUNDS rounds, medians:
#   1 process x THREADS threads: baton f32, baton --precision bf16, PyTorch f32      (floors: baton >= 1.2x
#                                                                                     PyTorch; bf16 >= 1.5x f32)
#   2 workers x 1 thread x batch 8: `baton run -n 2` vs PyTorch DDP over gloo        (floor: >= 1.5x)
# plus the validation loss of baton's f32 and bf16 runs after the same steps (floor: within 2 %), and MFU
# against the sgemm peak measured here (1536^3, 1 thread, bench/gemm_bench.c) times the cores used.
# Timing: each run does STEPS + 1 steps and the first is not timed (baton: from its per-step log; PyTorch:
# --warmup-untimed 1). OMP_WAIT_POLICY=PASSIVE on both sides (OpenMP pools otherwise spin against each other
# on a 2-core machine); OPENBLAS_CORETYPE, if set, applies to both.
#
# usage: flock /tmp/baton-bench.lock bench/gpt_vs_torch.sh [ROUNDS (default 3)] [STEPS (default 3)]
# Environment: THREADS (default 2), BUILD (default build), MODEL (default the sizes above, as baton flags),
# ONLY_BATON=1: baton f32 and bf16 on 1 process only (no PyTorch, no 2-worker runs): the bf16 floor alone.
set -eu
ROUNDS=${1:-3}
STEPS=${2:-3}
THREADS=${THREADS:-2}
BUILD=${BUILD:-build}
MODEL=${MODEL:---layers 6 --heads 6 --dim 384 --context 256}
ONLY_BATON=${ONLY_BATON:-0}
cd "$(dirname "$0")/.."
[ "$ONLY_BATON" = 1 ] || . bench/torch_setup.sh
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" "$BUILD/libbaton.a" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
export TMPDIR="$TMP"   # the runs' metrics land here (else /tmp/baton-UID stays behind), removed at exit
export OMP_WAIT_POLICY=PASSIVE PYTHONDONTWRITEBYTECODE=1
BATON="$PWD/$BUILD/baton"
TWIN="$PWD/bench/gpt_torch.py"

cc -std=c11 -O2 -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/gemm_bench.c "$BUILD/libbaton.a" \
    -lsodium -lcjson -lz -lm -lrt -pthread -o "$TMP/gemm_bench"
echo "# $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_tile)$' | tr '\n' ' ')"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; model: $MODEL, batch 16; $ROUNDS rounds x ($STEPS timed + 1) steps"
peak=$("$TMP/gemm_bench" -m 256 -s 1 | grep '^peak square')
echo "# sgemm peak, 1 thread, 1536^3 (GFLOP/s): $(echo "$peak" | awk '{ printf "OpenBLAS %s, oneDNN f32 %s, oneDNN bf16 %s", $8, $9, $10 }')"
pk_f32=$(echo "$peak" | awk '{ print ($8 > $9 ? $8 : $9) }')
pk_bf16=$(echo "$peak" | awk '{ print ($10 == "" ? 0 : $10) }')
bf16_cpu=$("$BATON" train --model gpt --layers 1 --heads 1 --dim 8 --context 8 --batch 1 --steps 1 --precision bf16 \
    --data "text:$PWD/README.md" 2>&1 | grep -c 'neither AVX512_BF16' || true)
[ "$bf16_cpu" = 0 ] || echo "# this CPU has neither AVX512_BF16 nor AMX: --precision bf16 runs f32 and its floor does not apply"

# model FLOPs per token (baton_gpt_flops_per_token): 6 x (12 C^2 L + 256 C) + 12 T C L
set -- $MODEL
L=$2 C=$6 T=$8
fpt=$(awk -v l="$L" -v c="$C" -v t="$T" 'BEGIN { printf "%.0f", 6 * (12 * c * c * l + 256 * c) + 12 * t * c * l }')

# baton tokens/s over steps 2..S+1 from the cumulative per-step log: time(k) = k x tokens_per_step / tps(k)
baton_tps() {   # LOG TOKENS_PER_STEP
    awk -v n="$2" '/^step [0-9]+\// { split($2, s, "/"); k = s[1]; for (i = 1; i <= NF; i++) if ($(i+1) == "tokens/s") tps = $i;
                   t[k] = k * n / tps; last = k }
                   END { if (last > 1) printf "%.1f", (last - 1) * n / (t[last] - t[1]); else print "NaN" }' "$1"
}
val_of() { grep -o '"val_loss":[0-9.]*' "$1" | cut -d: -f2; }
# round R of baton f32 and bf16 on one process x THREADS threads: tokens/s appended to $TMP/baton1{f32,bf16}
baton_one_process() {
    for prec in f32 bf16; do
        "$BATON" train --model gpt $MODEL --batch 16 --steps $((STEPS + 1)) --threads "$THREADS" --log-every 1 \
            --eval-windows 8 --precision $prec --json > "$TMP/b1$prec.$1.json" 2> "$TMP/b1$prec.$1.log"
        baton_tps "$TMP/b1$prec.$1.log" $((16 * T)) >> "$TMP/baton1$prec"
        echo >> "$TMP/baton1$prec"
    done
}

for r in $(seq 1 "$ROUNDS"); do
    if [ "$ONLY_BATON" = 1 ]; then
        baton_one_process "$r"
        echo "# round $r: baton1 f32 $(tail -n1 "$TMP/baton1f32") bf16 $(tail -n1 "$TMP/baton1bf16") tokens/s" \
             "($(awk -v f="$(tail -n1 "$TMP/baton1f32")" -v h="$(tail -n1 "$TMP/baton1bf16")" 'BEGIN { printf "%.2fx", h / f }')); load $(cut -d' ' -f1 /proc/loadavg)"
        continue
    fi
    OMP_NUM_THREADS=$THREADS "$PY" "$TWIN" train $MODEL --batch 16 --steps "$STEPS" --warmup-untimed 1 \
        --threads "$THREADS" --eval-windows 8 > "$TMP/t1.$r"
    grep -o '"tokens_per_sec": [0-9.]*' "$TMP/t1.$r" | awk '{ print $2 }' >> "$TMP/torch1"
    baton_one_process "$r"
    OMP_NUM_THREADS=1 "$PY" "$TWIN" train $MODEL --batch 8 --world 2 --steps "$STEPS" --warmup-untimed 1 \
        --threads 1 --eval-windows 8 > "$TMP/t2.$r"
    grep -o '"tokens_per_sec": [0-9.]*' "$TMP/t2.$r" | awk '{ print $2 }' >> "$TMP/torch2"
    "$BATON" run -n 2 -- "$BATON" train --model gpt $MODEL --batch 8 --steps $((STEPS + 1)) --threads 1 --log-every 1 \
        --eval-windows 8 --json > "$TMP/b2.$r.json" 2> "$TMP/b2.$r.log"
    baton_tps "$TMP/b2.$r.log" $((16 * T)) >> "$TMP/baton2"
    echo >> "$TMP/baton2"
    echo "# round $r: torch1 $(tail -n1 "$TMP/torch1") baton1 f32 $(tail -n1 "$TMP/baton1f32") bf16 $(tail -n1 "$TMP/baton1bf16")" \
         "torch2 $(tail -n1 "$TMP/torch2") baton2 $(tail -n1 "$TMP/baton2") tokens/s; load $(cut -d' ' -f1 /proc/loadavg)"
done

median() { grep -v '^$' "$1" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [ "$ONLY_BATON" = 1 ]; then
    m_f32=$(median "$TMP/baton1f32") m_bf16=$(median "$TMP/baton1bf16")
    v32=$(val_of "$TMP/b1f32.1.json") v16=$(val_of "$TMP/b1bf16.1.json")
    awk -v f="$m_f32" -v h="$m_bf16" -v th="$THREADS" -v p16="$pk_bf16" -v fpt="$fpt" -v v32="$v32" -v v16="$v16" \
        -v steps="$((STEPS + 1))" -v nobf="$bf16_cpu" 'BEGIN {
        printf "\n| run | tokens/s (median) | ratio | floor |\n|---|---|---|---|\n"
        printf "| baton f32, 1 process x %d threads | %.0f | | |\n", th, f
        printf "| baton bf16, 1 process x %d threads | %.0f | %.2fx baton f32 | 1.5x: %s |\n", th, h, h / f, (nobf != "0" ? "n/a (no bf16 CPU)" : (h / f >= 1.5 ? "met" : "MISSED"))
        printf "\nvalidation loss after %d steps: f32 %.4f, bf16 %.4f (%.2f %% apart; floor 2 %%: %s)\n", steps, v32, v16, 100 * (v16 - v32) / v32, ((v16 - v32) / v32 <= 0.02 && (v32 - v16) / v32 <= 0.02 ? "met" : "MISSED") }'
    echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
m_t1=$(median "$TMP/torch1") m_f32=$(median "$TMP/baton1f32") m_bf16=$(median "$TMP/baton1bf16")
m_t2=$(median "$TMP/torch2") m_b2=$(median "$TMP/baton2")
v32=$(val_of "$TMP/b1f32.1.json") v16=$(val_of "$TMP/b1bf16.1.json")
awk -v t1="$m_t1" -v f="$m_f32" -v h="$m_bf16" -v t2="$m_t2" -v b2="$m_b2" -v fpt="$fpt" -v th="$THREADS" \
    -v p32="$pk_f32" -v p16="$pk_bf16" -v v32="$v32" -v v16="$v16" -v steps="$((STEPS + 1))" -v nobf="$bf16_cpu" 'BEGIN {
    printf "\n| run | tokens/s (median) | ratio | floor | MFU |\n|---|---|---|---|---|\n"
    printf "| PyTorch, 1 process x %d threads | %.0f | | | %.1f %% |\n", th, t1, 100 * t1 * fpt / 1e9 / (p32 * th)
    printf "| baton f32, 1 process x %d threads | %.0f | %.2fx PyTorch | 1.2x: %s | %.1f %% |\n", th, f, f / t1, (f / t1 >= 1.2 ? "met" : "MISSED"), 100 * f * fpt / 1e9 / (p32 * th)
    printf "| baton bf16, 1 process x %d threads | %.0f | %.2fx baton f32 | 1.5x: %s | %.1f %% of bf16 peak |\n", th, h, h / f, (nobf != "0" ? "n/a (no bf16 CPU)" : (h / f >= 1.5 ? "met" : "MISSED")), (p16 > 0 ? 100 * h * fpt / 1e9 / (p16 * th) : 0)
    printf "| PyTorch DDP (gloo), 2 x 1 thread | %.0f | | | %.1f %% |\n", t2, 100 * t2 * fpt / 1e9 / (p32 * 2)
    printf "| baton run -n 2, 2 x 1 thread | %.0f | %.2fx PyTorch DDP | 1.5x: %s | %.1f %% |\n", b2, b2 / t2, (b2 / t2 >= 1.5 ? "met" : "MISSED"), 100 * b2 * fpt / 1e9 / (p32 * 2)
    printf "\nvalidation loss after %d steps: f32 %.4f, bf16 %.4f (%.2f %% apart; floor 2 %%: %s)\n", steps, v32, v16, 100 * (v16 - v32) / v32, ((v16 - v32) / v32 <= 0.02 && (v32 - v16) / v32 <= 0.02 ? "met" : "MISSED")
    printf "MFU = tokens/s x %.0f model FLOPs/token / (sgemm peak %.1f GFLOP/s/core (bf16: %.1f) x cores used)\n", fpt, p32, p16 }'
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
