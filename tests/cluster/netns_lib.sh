# netns_lib.sh: the preamble the simulated-cluster tests share (sourced, not run): the repository as the
# working directory, BATON and NETNS, the pass/fail counters and check(), the root check (a skip that says
# why), and a sweep of clusters left by a killed earlier run.
BUILD=${BUILD:-build}
B=$(cd "$(dirname "$0")/../.." && pwd)
cd "$B" || exit 1
NETNS=tests/cluster/netns.sh
export BATON="$BUILD/baton"
passed=0; failed=0
check() { # name, status
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}
if [ "$(id -u)" != 0 ]; then
    echo "SKIP $(basename "$0"): needs root (network namespaces)"; echo "0 passed, 0 failed"; exit 0
fi
sh $NETNS gc >/dev/null 2>&1
