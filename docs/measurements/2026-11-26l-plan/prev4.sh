#!/bin/sh
# sh prev4.sh OUT ROUNDS: tcp 4 ranks, one-sweep jobs of ring,rd from 4 B to 16 MiB (the calibration's and the
# prediction check's pass job), each after a shm 4-rank job (as in the check's passes) or after a tcp 3-rank job
# (as in the calibration's), alternating; the tcp 4-rank jobs' runs go to OUT with a '# after X' line
out=$1; B=${BB:-build}/baton
job() { timeout 300 $B run -n "$2" -- $B bench allreduce --csv --runs --transport "$1" --algo "$3" --rounds 1 --sweeps 1 \
    -b 4 -e 16M -f 2 -w 2 -n 5 --min-time 0.02 2>"$4" >/dev/null; }
i=0
while [ $i -lt "$2" ]; do
    for before in shm4 tcp3; do
        if [ $before = shm4 ]; then job shm 4 direct,ring,rd /dev/null; else job tcp 3 ring,rd /dev/null; fi
        echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) after $before" >>"$out"
        job tcp 4 ring,rd "$out.tmp"; cat "$out.tmp" >>"$out"; rm -f "$out.tmp"
    done
    i=$((i + 1))
done
