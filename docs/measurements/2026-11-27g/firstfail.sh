#!/bin/sh
# N runs: 3 ranks in a long all-reduce loop, rank 2 SIGKILLed; count runs where some rank's "first failure in the job" names a canceled rank
B=${B:-build/baton}
n=${1:-5}; bad=0
for i in $(seq 1 $n); do
  out=$(mktemp); 
  timeout 60 $B run -n ${N:-3} -- $B bench allreduce -b 4K -e 4K -w 1 -n 100000000 --min-time 3000 >$out 2>&1 &
  L=$!; sleep 1.5
  lp=$(pgrep -P $L); victim=$(pgrep -P $lp | sed -n ${N:-3}p); kill -9 $victim; wait $L
  grep -q 'first failure in the job: rank [0-9]*: canceled\|first failure in the job: rank [0-9]*: [^]]*the job was aborted' $out && { bad=$((bad+1)); grep 'first failure in the job' $out | head -2 | cut -c1-300; }
  rm -f $out
done
echo "misattributed in $bad of $n"
