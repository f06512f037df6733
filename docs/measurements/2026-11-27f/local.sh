#!/bin/sh
# 3 rounds x (baton --transport mpi from /work/main and /work/wt-base, Open MPI's own MPI_Allreduce) x
# (2 ranks over Open MPI's shared memory, 2 ranks over its TCP, 3 and 4 ranks), one machine; size:us
M="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none"
for r in 1 2 3; do
  for cfg in "2 " "2 --mca btl self,tcp" "3 " "4 "; do
    n=${cfg%% *}; x=${cfg#* }
    for w in main wt-base ompi; do
      printf "r$r $w np$n [$x]: "
      if [ $w = ompi ]; then
        timeout 120 $M $x -np $n /work/main/bench/out/mpi_allreduce.openmpi -b 8 -e 16M -f 8 -n 20 -w 5 2>&1 | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $6} END{print ""}'
      else
        timeout 120 $M $x -np $n /work/$w/build/baton bench allreduce --transport mpi -b 8 -e 16M -f 8 --csv 2>&1 | awk -F, 'NR>1{printf "%s:%s ", $1, $6} END{print ""}'
      fi
    done
  done
done
