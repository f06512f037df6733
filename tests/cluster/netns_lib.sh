# netns_lib.sh: the preamble the simulated-cluster tests share (sourced, not run): the repository as the
# working directory, BATON and NETNS, the pass/fail counters and check(), the root check (a skip that says
# why), a sweep of clusters left by a killed earlier run, and fixture() (a cluster name and a directory, both
# removed on exit).
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
# fixture TAG: a cluster name of this process (name; brought up by the caller) and a private directory (out) that
# both go away on exit, whatever the exit (an interrupt exits 130 through the same trap).
fixture() {
    name="baton-sim$$"
    out=$(mktemp -d "/tmp/baton-$1-XXXXXX") || exit 2
    trap 'sh $NETNS down "$name" >/dev/null 2>&1; rm -rf "$out"' EXIT
    trap 'exit 130' INT TERM HUP
}
