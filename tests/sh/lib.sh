# Sourced by the shell tests (`. tests/sh/lib.sh`; not a test itself: tests/run.sh runs tests/sh/test_*.sh).
#
# tmo SECONDS CMD [ARG...]: runs CMD under `timeout -k 5`, SECONDS multiplied by TH_TIMEOUT_SCALE the way
# tests/harness.c scales the C tests' timeouts (make asan sets 3: the sanitized library, and Python with the
# ASan runtime preloaded, run several times slower). An unset, malformed or non-positive scale counts as 1;
# the result is at least 1 s (`timeout 0` would mean no limit).
# Returns CMD's status, or timeout's (124 when the time ran out).
tmo() {
    _tmo_s=$(awk -v s="$1" -v k="${TH_TIMEOUT_SCALE:-1}" 'BEGIN { k += 0; if (k <= 0) k = 1; t = int(s * k + 0.5); if (t < 1) t = 1; printf "%d", t }')
    shift
    timeout -k 5 "$_tmo_s" "$@"
}
