# bench/torch_setup.sh: sourced by the PyTorch benchmarks. Installs Debian's python3-torch (benchmark only,
# never needed by make test) and makes sure PyTorch's BLAS is OpenBLAS: Debian's libblas.so.3 alternative may
# point at the reference BLAS, about 30x slower, which would make any comparison meaningless.
# Sets PY (Debian's python3, where python3-torch lives, not a pyenv one).
PY=/usr/bin/python3
if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    echo "installing python3-torch (benchmark only) ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-numpy >/dev/null
fi
ALT=libblas.so.3-x86_64-linux-gnu
cur=$(update-alternatives --query "$ALT" 2>/dev/null | sed -n 's/^Value: //p')
case "$cur" in
*openblas*) ;;
*)
    ob=$(update-alternatives --list "$ALT" | grep openblas | head -n 1)
    [ -n "$ob" ] || { echo "error: no OpenBLAS libblas.so.3 alternative; apt-get install libopenblas0-pthread" >&2; exit 1; }
    echo "pointing $ALT at $ob (was: ${cur:-unset})" >&2
    update-alternatives --set "$ALT" "$ob" >/dev/null
    ;;
esac
