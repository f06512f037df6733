#!/bin/sh
# docs/environment.md lists exactly the environment variables the code reads: every name read in src/,
# tools/ or python/ (getenv, secure_getenv, the baton__env_* helpers, os.environ / os.getenv, and the
# launcher table `families[]` of src/comm/identity.c) has a row in its table, and every row names a
# variable the code reads. A failure says which name to add (or remove) where. The test then shows, on
# fixtures, that it catches both directions. Also: README's layout table lists every public header.
# Prints "N passed, N failed".
DOC=${DOC:-docs/environment.md}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/baton-envdoc-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP

NAME='[A-Za-z_][A-Za-z0-9_]*'
# "NAME FILE:LINE" for every read in the given directories (first place it is read first)
code_reads() {
    grep -rnoE --include='*.c' --include='*.h' --include='*.py' \
        "(secure_)?getenv\(\"$NAME\"|baton__env_[a-z0-9_]+\(\"$NAME\"|os\.environ(\.get\(|\[)[\"']$NAME[\"']|os\.getenv\([\"']$NAME[\"']" "$@" |
        sed -E "s/^([^:]*:[0-9]+):.*[(\[][\"']($NAME)[\"']\$/\2 \1/"
    for f in $(grep -rl --include='*.c' 'families\[\] = {' "$@"); do   # the launcher variable table
        awk -v f="$f" '/families\[\] = \{/ { on = 1 } on { while (match($0, /"[A-Za-z_][A-Za-z0-9_]*"/)) {
            s = substr($0, RSTART + 1, RLENGTH - 2); if (s ~ /[A-Z]/) print s " " f ":" NR; $0 = substr($0, RSTART + RLENGTH) } }
            on && /^};/ { on = 0 }' "$f"
    done
}
doc_rows() { grep -oE "^\| \`$NAME\` \|" "$1" | sed -E 's/^\| `(.*)` \|$/\1/' | sort -u; }

# check DOC DIRS...: prints one line per difference; returns how many
check() {
    doc=$1
    shift
    code_reads "$@" | sort -k1,1 -u >"$T/code"
    cut -d' ' -f1 "$T/code" >"$T/code.names"
    doc_rows "$doc" >"$T/doc.names"
    n=0
    for v in $(comm -23 "$T/code.names" "$T/doc.names"); do
        where=$(grep -m1 "^$v " "$T/code" | cut -d' ' -f2)
        echo "$v is read at $where but $doc has no row for it: add the row '| \`$v\` | <what reads it> | <default> | <meaning> |' to the table in $doc"
        n=$((n + 1))
    done
    for v in $(comm -13 "$T/code.names" "$T/doc.names"); do
        echo "$doc has a row for $v but nothing in $* reads it: remove the row from $doc (or read it through getenv / baton__env_*)"
        n=$((n + 1))
    done
    return $n
}

# ---- the real code and table ----
out=$(check "$DOC" src tools python)
if [ $? -eq 0 ]; then ok "$DOC matches the variables read in src/ tools/ python/ ($(wc -l <"$T/code.names") of them)"
else bad "$DOC differs from the code:"; printf '%s\n' "$out"; fi
[ "$(wc -l <"$T/code.names")" -ge 50 ] && ok "found the launcher table and the getenv calls" ||
    bad "only $(wc -l <"$T/code.names") variables found: the extraction is broken"

# ---- README's layout table names every public header ----
row=$(grep '^| `include/baton/` |' README.md)
for h in include/baton/*.h; do
    case "$row" in *"\`${h##*/}\`"*) ok "README's layout lists ${h##*/}" ;;
    *) bad "README.md's layout row for include/baton/ does not list ${h##*/}: add \`${h##*/}\` to it" ;; esac
done

# ---- the check catches both directions (fixtures) ----
mkdir -p "$T/src" "$T/py"
cp "$DOC" "$T/doc.md"
printf 'int f(void) { return getenv("BATON_ENV_PROBE_C") != 0; }\nlong g(long *v) { return baton__env_long("BATON_ENV_PROBE_HELPER", 1, 0, 9, v); }\n' >"$T/src/probe.c"
printf "import os\nx = os.environ.get('BATON_ENV_PROBE_PY')\n" >"$T/py/probe.py"
out=$(check "$T/doc.md" src tools python "$T/src" "$T/py")
for v in BATON_ENV_PROBE_C BATON_ENV_PROBE_HELPER BATON_ENV_PROBE_PY; do
    case "$out" in *"$v is read at $T/"*"add the row '| \`$v\` |"*) ok "a variable read but not documented is caught: $v" ;;
    *) bad "undocumented $v not reported: $out" ;; esac
done
printf '| `BATON_ENV_PROBE_GONE` | nothing | | a row for a variable nobody reads |\n' >>"$T/doc.md"
out=$(check "$T/doc.md" src tools python)
case "$out" in *"has a row for BATON_ENV_PROBE_GONE but nothing"*"remove the row"*) ok "a documented variable nobody reads is caught" ;;
*) bad "stale row not reported: $out" ;; esac
grep -v '^| `BATON_SIMD` |' "$DOC" >"$T/doc2.md"
out=$(check "$T/doc2.md" src tools python)
case "$out" in *"BATON_SIMD is read at src/comm/reduce.c:"*) ok "a row removed from the table is caught, with the place that reads it" ;;
*) bad "missing BATON_SIMD row not reported: $out" ;; esac

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
