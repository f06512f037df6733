# abstate.sh CAL TAG: the auto check's shm 2-rank cells with CAL, BATON_TUNING_STATE=on then off
cd /work/wt-plan
export OPENBLAS_CORETYPE=Haswell
for arm in on off; do
  echo "== $arm $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) $(/tmp/plan-h/c2c 64)"
  BATON_TUNING_STATE=$arm CAL=$1 PARTS=auto TRANSPORTS=shm RANKS_AUTO=2 sh bench/plan_floors.sh /tmp/plan-h/out-$2-$arm > /tmp/plan-h/out-$2-$arm.txt 2>&1
  grep -E "MISSED|floor auto|auto ran the fastest|auto chose another" /tmp/plan-h/out-$2-$arm.txt
done
