#!/bin/sh
# Every option a command's --help lists is accepted (never "unknown option"), also as the last argument;
# an unknown one says "unknown option" wherever it stands, the last argument included (it said "needs a
# value" there); every option string in a command's source is listed by its --help (so the help cannot
# fall behind the code). Covers `baton run`, `baton train` and `baton train --model gpt` (and, for the
# source check, `baton generate`). Nothing here
# starts a worker or a training step: each command line ends in an error. Prints "N passed, N failed".
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
B="$BUILD/baton"
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/baton-cli-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
export TMPDIR="$T" BATON_FLIGHT_DIR="$T"

# run CMD...: output (stdout+stderr) in $out, exit status in $rc; 60 s at most
run() { out=$(tmo 60 "$@" 2>&1 </dev/null); rc=$?; }

options() {   # the --options a help text lists, once each
    "$@" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9_-]*' | sort -u | grep -vx -- '--help'
}

# ---- baton run: each listed option, as the last argument, is known (it needs a value or a program) ----
run_opts=$(options "$B" run)
n=0
for opt in $run_opts; do
    n=$((n + 1))
    run "$B" run "$opt"
    case "$out" in *"unknown option"*) bad "baton run $opt (last): $out" ;; *) ok ;; esac
    [ "$rc" = 2 ] && ok || bad "baton run $opt (last) exited $rc, not 2: $out"
done
[ "$n" -ge 15 ] && ok || bad "baton run --help lists only $n options"
for opt in --nproc_per_node --nproc-per-node --standalone --node_rank --nnodes --master_addr --master_port \
           --rdzv_endpoint --rdzv-endpoint --max_restarts --log-dir --log_dir; do
    printf '%s\n' "$run_opts" | grep -qx -- "$opt" && ok || bad "baton run --help does not list $opt"
done
for args in "--bogus" "-n 2 --bogus"; do
    run "$B" run $args
    case "$out" in *"unknown option '--bogus'"*) ok ;; *) bad "baton run $args: $out" ;; esac
done

# ---- baton train and baton train --model gpt: each listed option is known ----
# A missing --data-dir stops a command line whose last option takes no value before any step.
check_train() {   # $1: label; rest: the command's prefix
    label=$1
    shift
    n=0
    for opt in $(options "$B" train "$@"); do
        n=$((n + 1))
        run "$B" train "$@" --data-dir "$T/none" "$opt"
        case "$out" in *"unknown option"*) bad "$label $opt (last): $out" ;; *) ok ;; esac
        [ "$rc" = 1 ] || [ "$rc" = 2 ] && ok || bad "$label $opt (last) exited $rc: $out"
    done
    [ "$n" -ge 15 ] && ok || bad "$label --help lists only $n options"
    for args in "--bogus" "--batch 4 --bogus" "--batch --bogus"; do
        run "$B" train "$@" $args
        case "$out" in *"--bogus: unknown option"*|*"--batch: "*) ok ;; *) bad "$label $args: $out" ;; esac
    done
    run "$B" train "$@" --batch
    case "$out" in *"--batch: needs a value"*) ok ;; *) bad "$label --batch (last): $out" ;; esac
}
check_train "baton train"
check_train "baton train --model gpt" --model gpt

# ---- every option string in a command's source is listed by its --help ----
# (each file must hold some: a parser moved to another file must be followed here, not silently dropped)
for pair in "run_args.c:run" "train.c:train" "train_gpt.c:train --model gpt" "generate.c:generate"; do
    file=tools/${pair%%:*}
    cmd=${pair#*:}
    listed=$(options "$B" $cmd)
    n=0
    for opt in $(grep -oE '"--[a-z][a-z0-9-]*"' "$file" | tr -d '"' | sort -u | grep -vx -- '--help'); do
        n=$((n + 1))
        printf '%s\n' "$listed" | grep -qx -- "$opt" && ok || bad "$file accepts $opt but baton $cmd --help does not list it"
    done
    [ "$n" -ge 5 ] && ok || bad "$file holds only $n option strings: is its parser elsewhere now?"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
