#!/bin/sh
# bench/report_load.sh: how long `baton report`'s page takes to load in headless chromium (issue 12 floor:
# a 2-rank 5-epoch run's report loads in under 2 s and is under 2 MB). A timing page (script allowed here,
# it is not the report) loads the report in an iframe and logs performance.now() at its onload; the same for
# a blank page, interleaved, ROUNDS rounds. Browser start-up is not counted.
# usage: flock /tmp/baton-bench.lock bench/report_load.sh REPORT.html [ROUNDS (3)]
set -eu
REPORT=$(readlink -f "$1")
ROUNDS=${2:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cp "$REPORT" "$TMP/report.html"
printf '<!DOCTYPE html><html><body><p>blank</p></body></html>\n' >"$TMP/blank.html"
for p in report blank; do
    printf '<!DOCTYPE html><html><body><script>var t0 = performance.now();</script><iframe width="900" height="2400" src="%s.html" onload="console.log(\x27loaded-ms \x27 + (performance.now() - t0).toFixed(1))"></iframe></body></html>\n' "$p" >"$TMP/t_$p.html"
done
echo "report: $(wc -c <"$REPORT") bytes; $(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //')"
for r in $(seq 1 "$ROUNDS"); do
    for p in blank report; do
        mkdir "$TMP/prof"
        ms=$(timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
            --disable-component-update --disable-sync --no-first-run --user-data-dir="$TMP/prof" --enable-logging=stderr \
            --v=0 --dump-dom "file://$TMP/t_$p.html" 2>&1 >/dev/null | sed -n 's/.*loaded-ms \([0-9.]*\).*/\1/p')
        rm -rf "$TMP/prof"
        echo "round $r $p: ${ms:-?} ms"
    done
done
