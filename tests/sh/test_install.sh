#!/bin/sh
# The installed tree: `make install PREFIX=<private dir>` puts the command, libbaton.a, libbaton.so (with its
# soname), the headers, baton.pc and the Python package there; an example worker is built against it with
# `pkg-config --cflags --libs baton` only and runs under the installed `baton run -n 2`; the headers compile
# as C++; the library exports only public names. Prints "N passed, N failed".
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

T=$(mktemp -d "${TMPDIR:-/tmp}/baton-install-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
P="$T/prefix"
export TMPDIR="$T"

if timeout 120 ${MAKE:-make} --no-print-directory -s install-files BUILD="$BUILD" PREFIX="$P" >"$T/install.log" 2>&1; then
    ok "make install PREFIX=..."
else
    bad "make install PREFIX=... ($(tail -n 3 "$T/install.log"))"
fi
for f in bin/baton lib/libbaton.a lib/libbaton.so include/baton/comm.h include/baton/status.h \
         include/baton/nn.h include/baton/ddp.h include/baton/data.h lib/pkgconfig/baton.pc; do
    check "installed $f" test -e "$P/$f"
done
# the MPI plugin (built when libopenmpi-dev is installed) goes next to the library it is loaded by
if [ -f "$BUILD/libbaton-mpi.so" ]; then check "installed lib/libbaton-mpi.so" test -e "$P/lib/libbaton-mpi.so"; fi
# make asan: BATON_TEST_PY preloads the ASan runtime into Python, BATON_TEST_SAN builds the host programs with it
PY=${BATON_TEST_PY:-/usr/bin/python3}
pyv=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
check "installed the Python package" test -f "$P/lib/python$pyv/dist-packages/baton/__init__.py"
if ls "$BUILD"/python/baton/torch/_work*.so >/dev/null 2>&1; then   # baton.torch's C++ work layer, when built
    check "installed baton.torch's C++ work layer" sh -c "ls '$P/lib/python$pyv/dist-packages/baton/torch/'_work*.so"
fi
got=$(cd "$T" && PYTHONPATH="$P/lib/python$pyv/dist-packages" timeout 60 $PY -c \
    'import baton, array; baton.init(); a = array.array("d", [1.5, 2]); baton.allreduce_(a); print(baton.__file__.startswith("'"$P"'"), baton.size(), list(a))' 2>&1)
check "the installed package imports and reduces from the install tree (got '$got')" test "$got" = "True 1 [1.5, 2.0]"

soname=$(readelf -d "$P/lib/libbaton.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "libbaton.so has soname libbaton.so.0 (got '$soname')" test "$soname" = libbaton.so.0
check "the soname link exists" test -e "$P/lib/$soname"
internal=$(nm -D --defined-only "$P/lib/libbaton.so" | awk '{print $3}' | grep -c '^baton__' || true)
public=$(nm -D --defined-only "$P/lib/libbaton.so" | awk '{print $3}' | grep -c '^baton_[a-z]' || true)
check "libbaton.so exports public names ($public) and no baton__ internals ($internal)" \
    test "$public" -gt 50 -a "$internal" -eq 0

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
flags=$(pkg-config --cflags --libs baton 2>"$T/pc.err")
check "pkg-config --cflags --libs baton: $flags" test -n "$flags"
if cc ${BATON_TEST_SAN:-} examples/allreduce_worker.c $flags -o "$T/worker" 2>"$T/cc.err"; then
    ok "example worker builds with pkg-config flags only"
else
    bad "example worker builds with pkg-config flags only: $(head -n 5 "$T/cc.err")"
fi
check "the worker is linked dynamically against libbaton.so.0" \
    sh -c "readelf -d '$T/worker' | grep -q 'NEEDED.*libbaton.so.0'"
out=$(tmo 60 env LD_LIBRARY_PATH="$P/lib" "$P/bin/baton" run -n 2 -- "$T/worker" 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
check "the worker runs under the installed baton run -n 2 (exit $rc)" test "$rc" -eq 0
check "both ranks report every element right" test "$(echo "$out" | grep -c 'elements wrong' )" -eq 2 -a \
    "$(echo "$out" | grep -c ': 0 of 1000 elements wrong')" -eq 2

# The public headers compile as C++ (extern "C" guards) and link against the C library.
cat >"$T/hdr.cc" <<'CC'
#include <baton/comm.h>
#include <baton/data.h>
#include <baton/ddp.h>
#include <baton/nn.h>
#include <baton/status.h>
#include <cstdio>
int main() { std::printf("%s %s\n", baton_strerror(BATON_ETIMEDOUT), baton_dtype_name(BATON_BF16)); return 0; }
CC
if command -v c++ >/dev/null 2>&1; then
    if c++ ${BATON_TEST_SAN:-} "$T/hdr.cc" $flags -o "$T/hdr" 2>"$T/cxx.err"; then
        got=$(LD_LIBRARY_PATH="$P/lib" "$T/hdr")
        check "the headers compile and link as C++ (got '$got')" test "$got" = "timed out bf16"
    else
        bad "the headers compile and link as C++: $(head -n 5 "$T/cxx.err")"
    fi
else
    bad "no C++ compiler (the Makefile's DEB_PKGS installs g++)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
