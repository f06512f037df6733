# ab.sh ROUNDS OUT: variants of the shm 2-rank direct all-reduce, interleaved, with a c2c probe per round
B=/work/wt-plan/build/baton
export OPENBLAS_CORETYPE=Haswell
for i in $(seq 1 $1); do
  echo "$(date +%T) load $(cut -d' ' -f1 /proc/loadavg) $(./c2c 64)" | tee -a $2
  for v in default BATON_SHM_STREAM=0 BATON_SHM_CHUNK=256K BATON_SHM_CHUNK=2M; do
    r=$(env $([ $v = default ] || echo $v) $B run -n 2 -- $B bench allreduce --csv --transport shm --algo direct,ring --rounds 2 -b 8 -e 64M -f 8 -w 2 -n 5 --min-time 0.02 2>/dev/null | awk -F, 'NR>1 && ($1==8 || $1==2097152 || $1==67108864){printf "%s@%s=%.3g ", $5, ($1<1024?$1:$1/1048576 "M"), $6}')
    echo "  $v: $r" | tee -a $2
  done
done
