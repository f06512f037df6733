#!/bin/sh
# Runs every test binary under $BUILD/tests (each test inside already has its own hard timeout; each
# binary also gets an outer one) and prints the totals as the last line: "N passed, N failed".
BUILD=${BUILD:-build}
export BUILD
passed=0
failed=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "== $name"
    out=$(timeout -k 5 1500 "$t" 2>&1)
    rc=$?
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
