cd /work/main
name=baton-simt$$
sh tests/cluster/netns.sh up 2 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT
for mode in "" "--ddp baton" "--ddp gloo"; do
 echo "== mode '$mode'"
 /usr/bin/time -f "%e s" timeout 200 env PYTHONPATH=build/python OMP_NUM_THREADS=1 sh tests/cluster/netns.sh launch $name -n 2 --port 29670 -- /usr/bin/python3 examples/torch_mnist.py --steps 60 --json $mode 2>&1 | grep -v "^W2026\|WARNING: Logging" | tail -4
done
