cd /tmp/h48
flock /work/bench.lock sh sweeps_ab.sh 3 > sweeps_ab.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/a_shm2 TRANSPORTS=shm RANKS_PRED=2 RANKS_AUTO=2 > a_shm2.txt 2>&1
sh floors.sh /tmp/h48/base /tmp/h48/b_shm2 TRANSPORTS=shm RANKS_PRED=2 RANKS_AUTO=2 > b_shm2.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/a_tcp2 TRANSPORTS=tcp RANKS_PRED=2 RANKS_AUTO=2 > a_tcp2.txt 2>&1
sh floors.sh /tmp/h48/base /tmp/h48/b_tcp2 TRANSPORTS=tcp RANKS_PRED=2 RANKS_AUTO=2 > b_tcp2.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/o_tcp3_j1 CAL=/tmp/h48/quietcal.json PARTS=auto TRANSPORTS=tcp RANKS_AUTO=3 JOBS=1 > o_tcp3_j1.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/o_tcp3_j3 CAL=/tmp/h48/quietcal.json PARTS=auto TRANSPORTS=tcp RANKS_AUTO=3 JOBS=3 > o_tcp3_j3.txt 2>&1
echo done > chain.done
