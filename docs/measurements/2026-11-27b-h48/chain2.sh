cd /tmp/h48
sh floors.sh /tmp/h48/base /tmp/h48/b_shm3 TRANSPORTS=shm RANKS_PRED=2 RANKS_AUTO=2 > b_shm3.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/a_shm3 TRANSPORTS=shm RANKS_PRED=2 RANKS_AUTO=2 > a_shm3.txt 2>&1
sh floors.sh /tmp/h48/base /tmp/h48/b_tcp3 TRANSPORTS=tcp RANKS_PRED=2 RANKS_AUTO=2 > b_tcp3.txt 2>&1
sh floors.sh /work/wt-48 /tmp/h48/a_tcp3 TRANSPORTS=tcp RANKS_PRED=2 RANKS_AUTO=2 > a_tcp3.txt 2>&1
echo done > chain2.done
