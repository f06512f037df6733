#!/bin/sh
# floors.sh DIR(build tree) OUT [env...]: one plan_floors.sh subset under the lock
D=$1; O=$2; shift 2
export OPENBLAS_CORETYPE=Haswell
cd "$D" || exit 1
flock /work/bench.lock sh -c "echo \"# \$(date -u +%T) load \$(cut -d' ' -f1-3 /proc/loadavg) $D $*\"; env $* sh bench/plan_floors.sh $O; echo \"# end \$(date -u +%T) load \$(cut -d' ' -f1-3 /proc/loadavg)\""
