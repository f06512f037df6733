#!/bin/sh
# Runs every test binary under $BUILD/tests (each test inside already has its own hard timeout; each
# binary also gets an outer one) and prints the totals as the last line: "N passed, N failed".
#
# RUN_ONLY="test_store test_coll:async" runs only those binaries, each with an optional test-name filter.
# Besides the C binaries, every executable script tests/sh/test_*.sh is run the same way (it must print its
# own "N passed, N failed" line). SUITE=cluster runs tests/cluster/test_*.sh instead (`make test-cluster`:
# the heavy fixtures, such as simulated nodes in network namespaces and a real Slurm).
BUILD=${BUILD:-build}
SUITE=${SUITE:-unit}
export BUILD
passed=0
failed=0
tdir=
trap 'rm -rf "$tdir"; exit 130' INT TERM HUP
if [ -n "${RUN_ONLY:-}" ]; then
    list=$RUN_ONLY
else
    if [ "$SUITE" = cluster ]; then
        list=$(for t in tests/cluster/test_*.sh; do [ -f "$t" ] && basename "$t"; done)
    else
        list=$(for t in "$BUILD"/tests/test_* tests/sh/test_*.sh; do [ -f "$t" ] && basename "$t"; done)
    fi
fi
for entry in $list; do
    name=${entry%%:*}
    filter=
    case "$entry" in *:*) filter=${entry#*:} ;; esac
    case "$name" in
        *.sh) if [ -f "tests/sh/$name" ] && [ "$SUITE" != cluster ]; then t="tests/sh/$name"; else t="tests/cluster/$name"; fi ;;
        *) t="$BUILD/tests/$name" ;;
    esac
    [ -x "$t" ] || { echo "FAIL $name: no such test binary"; failed=$((failed + 1)); continue; }
    echo "== $name${filter:+ ($filter)}"
    # Each binary or script gets a TMPDIR of its own, removed afterwards: what baton writes by default
    # (flight-recorder dumps, metrics run directories) lands in its private directory under TMPDIR.
    tdir=$(mktemp -d "${TMPDIR:-/tmp}/baton-run-XXXXXX") || { echo "FAIL $name: no temporary directory"; failed=$((failed + 1)); continue; }
    out=$(TMPDIR=$tdir timeout -k 5 3000 "$t" $filter 2>&1)
    rc=$?
    rm -rf "$tdir"
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -n "$line" ]; then
        p=${line%% passed*}
        f=${line#*passed, }
        f=${f%% failed*}
        passed=$((passed + p))
        failed=$((failed + f))
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            echo "FAIL $name: exited $rc after reporting no failure"
            failed=$((failed + 1))
        fi
    else
        echo "FAIL $name: exited $rc without a summary line"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
