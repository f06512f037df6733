"""Whether baton.torch runs its gradient all-reduces on the calling thread (BATON_TORCH_INLINE).

Asynchronous all-reduces hand each bucket to baton's comm thread and (for the torch.distributed backend)
complete a torch future from a waiter thread. That overlap needs a spare CPU: when this process is bound to
one CPU (baton run gives each of 2 ranks on 2 cores its own), the training thread, the comm thread and the
waiter thread share it, and every hand-off is a wake-up, a context switch and (for the waiter) a GIL
hand-off, with no core gained. Inline, the all-reduce runs on the thread that asked for it (DDP's autograd
hook, DistributedOptimizer's gradient hook), with the GIL released, and the returned work is already
complete. docs/measurements/python-history.md has the measurements.

BATON_TORCH_INLINE: off (the default: everything asynchronous), last (the torch.distributed backend runs
inline only the all-reduce that ends a step, the one DDP's reducer waits for as soon as it has started it,
and the earlier ones asynchronously; DistributedOptimizer stays asynchronous), on (always inline), auto
(inline when the process may run on one CPU only, asynchronous otherwise). Everything inline is not
the default because it lost under load (2026-11-26; docs/measurements/python-history.md, "Inline all-reduces
and a cheaper zero-copy all-reduce"): on the hook's thread an early bucket's all-reduce waits idle for a late
peer, where the asynchronous way computes the earlier layers' backward meanwhile. The last bucket has nothing
left to overlap: DDP's reducer waits for it at once, so `last` keeps the overlap and drops only the hand-offs
(comm thread, waiter thread, GIL, the reducer's wake-up) where they are pure latency; it took less CPU but was
slower under load in 10 rounds of 12 (docs/measurements/python-history.md, "Where DDP over the baton backend
loses against the ceiling, and the last bucket inline"), so it is not the default. The cost of `last`: an all_reduce(async_op=True) that the process group takes for a
step's end blocks until every rank has called it (a script that makes another rank's call depend on
something it does between starting and waiting would wait forever; BATON_TORCH_INLINE=off for that).
"""
import os


def inline_mode():
    """'on', 'off' or 'last' (auto resolved to on or off; unset: off)."""
    v = os.environ.get("BATON_TORCH_INLINE", "").strip().lower()
    if v in ("on", "1"):
        return "on"
    if v in ("", "off", "0"):
        return "off"
    if v == "last":
        return "last"
    if v != "auto":
        raise ValueError("BATON_TORCH_INLINE='%s' must be off, on, auto or last" % os.environ["BATON_TORCH_INLINE"])
    try:
        return "on" if len(os.sched_getaffinity(0)) == 1 else "off"
    except (AttributeError, OSError):
        return "off"


def inline_allreduce():
    """Whether every gradient all-reduce runs on the calling thread."""
    return inline_mode() == "on"
