"""bench/torch_timeline.py: one step of 2 ranks on a shared clock, from bench/torch_profile.py --timeline.

    baton run -n 2 -- /usr/bin/python3 bench/torch_profile.py --mode baton --timeline DIR/ddp
    /usr/bin/python3 bench/torch_timeline.py DIR/ddp

For every step both ranks timed, each event is taken in ms after the earlier rank's backward started; the
output is each event's median (and quartiles) over the steps, per rank, in time order: when each rank
started backward, started each all-reduce (callK), saw it finish (endK), ended backward (opt) and the step
(stepend), its step length and CPU (main thread, other threads). A rank's idle time in a step is roughly
step_ms - cpu_main - cpu_other (waiting for the peer, or for a thread that had no CPU).
"""
import json
import statistics
import sys


def load(prefix, rank):
    with open("%s.%d" % (prefix, rank)) as f:
        return {d["i"]: d for d in map(json.loads, f)}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_timeline.py PREFIX (the files PREFIX.0 and PREFIX.1 of torch_profile.py --timeline)")
    ranks = [load(sys.argv[1], 0), load(sys.argv[1], 1)]
    rows = []
    for i in sorted(set(ranks[0]) & set(ranks[1])):
        steps = [r[i] for r in ranks]
        base = min(d["bwd"] for d in steps)
        row = {}
        for r, d in enumerate(steps):
            row["r%d.t0" % r] = (d["t0"] - base) * 1e3
            row["r%d.bwd" % r] = (d["bwd"] - base) * 1e3
            for k, c in enumerate(d["calls"]):
                row["r%d.call%d" % (r, k)] = (c - base) * 1e3
            for k, c in enumerate(d["ends"]):
                row["r%d.end%d" % (r, k)] = (c - base) * 1e3
            row["r%d.opt" % r] = (d["opt"] - base) * 1e3
            row["r%d.stepend" % r] = (d["end"] - base) * 1e3
            row["r%d.step_ms" % r] = (d["end"] - d["t0"]) * 1e3
            row["r%d.cpu_main" % r] = d["cpu_main_ms"]
            row["r%d.cpu_other" % r] = d["cpu_other_ms"]
        rows.append(row)
    if not rows:
        sys.exit("torch_timeline.py: no step appears in both ranks' files")
    durations = ("step_ms", "cpu_main", "cpu_other")

    def order(k):
        v = [r[k] for r in rows if k in r]
        return (k[:2], k.split(".")[1] in durations, statistics.median(v))
    for k in sorted(set().union(*rows), key=order):
        v = sorted(r[k] for r in rows if k in r)
        print("%-14s median %8.2f  p25 %8.2f  p75 %8.2f  steps %d"
              % (k, statistics.median(v), v[len(v) // 4], v[3 * len(v) // 4], len(v)))


main()
