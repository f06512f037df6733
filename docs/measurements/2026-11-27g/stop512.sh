#!/bin/sh
# 512 ranks in a long all-reduce loop; once all joined, SIGSTOP one rank; time until the launcher exits
N=${N:-512}
cd /work/main
BATON_LOG_LEVEL=info timeout 600 build/baton run -n $N --timeout ${TO:-10} -- build/baton bench allreduce -b ${SZ:-16396} -e ${SZ:-16396} -w 1 -n 100000000 --min-time 3000 > /work/quiet/s32/stop.out 2>&1 &
L=$!
# wait until all ranks joined
i=0; while [ $i -lt 300 ]; do j=$(grep -c 'joined:' /work/quiet/s32/stop.out); [ "$j" -ge $N ] && break; kill -0 $L 2>/dev/null || break; sleep 1; i=$((i+1)); done
echo "joined $j after $i s"; sleep 3
lp=$(pgrep -P $L); victim=$(pgrep -P $lp | sed -n "$((N / 5 + 1))p")
t0=$(date +%s.%N); kill -STOP $victim; echo "stopped $victim"
wait $L; rc=$?
echo "launcher rc=$rc after $(echo "$(date +%s.%N) - $t0" | bc) s"
pgrep -f 'baton bench allreduce' | wc -l
