#!/bin/sh
# test_slurm.sh: baton inside a real Slurm (tests/cluster/slurm.sh: Debian's slurmctld, slurmd, munge on
# this machine). `srun -n 4` runs one data-parallel job of 4 ranks (not 4 jobs of 1), with the topology and
# transport baton should find on one node; an sbatch script trains data-parallel with `srun baton train`.
# Every step has a hard timeout; the fixture is torn down whatever happens (trap), leaving nothing behind.
BUILD=${BUILD:-build}
B=$(cd "$(dirname "$0")/../.." && pwd)
cd "$B"
dir=$(mktemp -d /tmp/baton-slurm-XXXXXX) && rmdir "$dir"
passed=0; failed=0
cleanup() { tests/cluster/slurm.sh down "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

check() { # name, condition-status
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}

if ! up=$(timeout 60 tests/cluster/slurm.sh up "$dir"); then
    echo "FAIL slurm_fixture_starts"; echo "0 passed, 1 failed"; exit 1
fi
eval "$up"
export SLURM_CONF

# 1. the benchmark: one job of 4 ranks, every element checked
out=$(timeout 120 srun -n 4 "$BUILD/baton" bench allreduce -b 8 -e 256K -f 8 -c 1 2>&1); rc=$?
echo "$out" | grep -q "^# baton bench allreduce: 4 ranks, 1 node(s), transport shm" &&
    ! echo "$out" | awk '$1 ~ /^[0-9]+$/ && $9 != 0 { bad = 1 } END { exit !bad }' && [ $rc = 0 ]
st=$?; [ $st = 0 ] || echo "$out"
check srun_bench_is_one_job_of_4_ranks_with_no_wrong_element $st

# 2. the topology every rank found
out=$(timeout 60 srun -n 4 "$BUILD/tests/prog_topo" 2>&1); rc=$?
st=0; [ $rc = 0 ] || st=1
for r in 0 1 2 3; do
    echo "$out" | grep -q "topo: rank $r/4 local $r/4 node 0/1 transport shm launcher slurm sum OK" || st=1
done
[ $st = 0 ] || echo "$out"
check srun_topology_one_node_4_local_ranks_shm $st

# 3. sbatch: the script trains data-parallel with srun; without srun, the batch script itself is one process
cat > "$dir/train.sbatch" <<SCRIPT
#!/bin/sh
#SBATCH --ntasks=4
#SBATCH --output=$dir/train.out
srun $B/$BUILD/baton train --data synthetic --train-samples 1024 --hidden 32 --batch 32 --steps 4 --threads 1 --metrics none --json > $dir/srun.out 2>&1
$B/$BUILD/baton train --data synthetic --train-samples 256 --hidden 16 --batch 32 --steps 1 --threads 1
SCRIPT
timeout 180 sbatch --wait "$dir/train.sbatch" >/dev/null 2>&1; rc=$?
out=$(cat "$dir/srun.out" 2>/dev/null); alone=$(cat "$dir/train.out" 2>/dev/null)
st=0
[ $rc = 0 ] || st=1
echo "$out" | grep -q '"world_size":4' || st=1
[ "$(echo "$out" | grep -c '"world_size"')" = 1 ] || st=1          # one job, reported once by its rank 0
echo "$alone" | grep -q '1 rank x batch 32' || st=1              # the batch script itself: one process
[ $st = 0 ] || { echo "sbatch exit $rc"; echo "$out"; echo "$alone"; }
check sbatch_script_trains_data_parallel_with_srun $st

echo "$passed passed, $failed failed"
[ $failed = 0 ]
