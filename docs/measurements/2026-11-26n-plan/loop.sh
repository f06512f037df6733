# loop.sh N OUT: N jobs of direct,ring at 2 and 64 MiB, shm 2 ranks, each with a c2c probe before
B=/work/wt-plan/build/baton
export OPENBLAS_CORETYPE=Haswell
for i in $(seq 1 $1); do
  p=$(./c2c 512)
  r=$($B run -n 2 -- $B bench allreduce --csv --transport shm --algo direct,ring --rounds 2 -b 2M -e 64M -f 32 -w 2 -n 5 --min-time 0.02 2>/dev/null | awk -F, 'NR>1{printf "%s@%d=%.0f ", $5, $1/1048576, $6}')
  echo "$(date +%T) $(cut -d' ' -f1 /proc/loadavg) $p | $r" | tee -a $2
done
