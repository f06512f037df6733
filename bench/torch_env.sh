# bench/torch_env.sh: sourced, from the checkout's top directory, by the training benchmarks of baton for PyTorch
# users (torch_dp.sh, torch_cpu_ab.sh). Sets PY (bench/torch_setup.sh), builds BUILD (default build), points
# PYTHONPATH at its Python package with one intra-op thread, and makes TMP, a temporary directory removed at
# exit, also on INT and TERM; the runs' TMPDIR (their per-user directory baton-UID lands there, not in /tmp).
BUILD=${BUILD:-build}
. bench/torch_setup.sh
make --no-print-directory BUILD="$BUILD" all >/dev/null
export PYTHONPATH="$PWD/$BUILD/python" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
export TMPDIR="$TMP"
