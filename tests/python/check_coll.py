"""Every collective of `import baton` on numpy arrays and torch tensors, checked element by element.

Run under `baton run -n N -- /usr/bin/python3 tests/python/check_coll.py [numpy|torch|both]`. Each rank prints
"CHECKS <n> FAILED <m>" last, and exits 1 when something failed. Data are small integers so every dtype
(bf16 and f16 included) holds them exactly; avg is compared with a tolerance of one rounding.
"""
import sys

import numpy as np

import baton

KINDS = sys.argv[1] if len(sys.argv) > 1 else "both"
checks = 0
failures = []


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        if len(failures) <= 20:
            print("rank %d: FAIL %s" % (baton.rank() if baton.is_initialized() else -1, what), flush=True)


def expect_raises(exc, fn, words, what):
    try:
        fn()
    except exc as e:
        msg = str(e)
        check(all(w in msg for w in words), "%s: message %r lacks %r" % (what, msg, words))
        return
    except Exception as e:  # noqa: BLE001
        check(False, "%s: raised %s (%s), expected %s" % (what, type(e).__name__, e, exc.__name__))
        return
    check(False, "%s: did not raise" % what)


# Before init(): a clear error, not a crash.
expect_raises(baton.Error, baton.rank, ["baton.init()"], "rank() before init")
baton.init()
R, W = baton.rank(), baton.size()
check(0 <= baton.local_rank() < baton.local_size() <= W, "local_rank/local_size")

DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64"]
OPS = ["sum", "avg", "min", "max", "prod"]
SIZES = [0, 1, 7, 1031, 70001]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i64": np.int64}


def data(op, r, n):
    """Rank r's contribution (float64), chosen so every op's result is an exact small integer."""
    i = np.arange(n, dtype=np.int64)
    if op == "prod":
        return (1 + (i + r) % 2).astype(np.float64)
    if op in ("min", "max"):
        return ((i * 3 + r * 5) % 11 - 5).astype(np.float64)
    return ((i % 7) + r * 3 - 4).astype(np.float64)


def expected(op, dt, n):
    xs = np.stack([data(op, r, n) for r in range(W)]) if n else np.zeros((W, 0))
    if op == "sum":
        return xs.sum(0)
    if op == "prod":
        return xs.prod(0)
    if op == "min":
        return xs.min(0)
    if op == "max":
        return xs.max(0)
    s = xs.sum(0)
    return np.trunc(s / W) if dt in ("i32", "i64") else s / W


def tol(op, dt, ref):
    if op != "avg" or dt in ("i32", "i64"):
        return 0.0
    eps = {"f32": 2.0 ** -23, "f64": 2.0 ** -52, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}[dt]
    return eps * np.maximum(np.abs(ref), 1.0)


# ---- numpy: bf16 travels as uint16 bits with dtype="bf16" ----
def np_make(dt, x):
    if dt == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(NP[dt])


def np_value(dt, a):
    if dt == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def run_numpy():
    for dt in DTYPES:
        kw = {"dtype": "bf16"} if dt == "bf16" else {}
        for op in OPS:
            for n in SIZES:
                ref = expected(op, dt, n)
                t = tol(op, dt, ref)
                x = np_make(dt, data(op, R, n))
                keep = x.copy()
                y = baton.allreduce(x, op=op, **kw)
                ok = np.all(np.abs(np_value(dt, y) - ref) <= t)
                check(ok and np.array_equal(x, keep), "numpy allreduce %s %s n=%d" % (dt, op, n))
                z = baton.allreduce_(x, op=op, **kw)
                check(z is x and np.all(np.abs(np_value(dt, x) - ref) <= t), "numpy allreduce_ %s %s n=%d" % (dt, op, n))
            # asynchronous, in place and out of place
            n = 1031
            ref = expected(op, dt, n)
            x = np_make(dt, data(op, R, n))
            h = baton.allreduce_async(x, op=op, **kw)
            x2 = np_make(dt, data(op, R, n))
            h2 = baton.allreduce_async_(x2, op=op, **kw)
            y = h.wait()
            check(h2.wait() is x2 and h2.done(), "numpy allreduce_async_ returns its array %s" % dt)
            check(np.all(np.abs(np_value(dt, y) - ref) <= tol(op, dt, ref)), "numpy allreduce_async %s %s" % (dt, op))
            check(np.all(np.abs(np_value(dt, x2) - ref) <= tol(op, dt, ref)), "numpy allreduce_async_ %s %s" % (dt, op))
        for n in (0, 1, 5, 4099):
            x = np_make(dt, np.arange(n, dtype=np.float64) % 50 + R)
            g = baton.allgather(x, **kw)
            want = np.concatenate([np.arange(n) % 50 + r for r in range(W)]) if n else np.zeros(0)
            check(g.shape == (n * W,) and np.array_equal(np_value(dt, g), want), "numpy allgather %s n=%d" % (dt, n))
            for op in ("sum", "max"):
                full = np_make(dt, (np.arange(n * W, dtype=np.float64) % 13) + R)
                rs = baton.reduce_scatter(full, op=op, **kw)
                allx = np.stack([(np.arange(n * W) % 13) + r for r in range(W)]).astype(np.float64)
                red = allx.sum(0) if op == "sum" else allx.max(0)
                check(np.array_equal(np_value(dt, rs), red[R * n:(R + 1) * n]), "numpy reduce_scatter %s %s n=%d" % (dt, op, n))
            root = W - 1
            b = np_make(dt, np.arange(n, dtype=np.float64) % 31 + 100 * (R == root))
            check(baton.broadcast_(b, root=root, **kw) is b, "broadcast_ returns its array")
            check(np.array_equal(np_value(dt, b), np.arange(n) % 31 + 100.0), "numpy broadcast_ %s n=%d" % (dt, n))
            b = np_make(dt, np.arange(n, dtype=np.float64) % 31 + 7 * R)
            h = baton.broadcast_async_(b, root=0, **kw)
            check(h.wait() is b and np.array_equal(np_value(dt, b), np.arange(n) % 31 + 0.0), "numpy broadcast_async_ %s n=%d" % (dt, n))
            c = b.copy()
            out = baton.broadcast(c, root=root, **kw)
            check(np.array_equal(c, b), "broadcast leaves its input alone")
            del out
    # integer ops by number as well as by name
    x = np.array([R + 1], np.int64)
    check(baton.allreduce(x, op=baton.MAX)[0] == W, "op given as baton.MAX")
    baton.barrier()
    # refusals: clear errors, nothing reduced, the communicator still usable afterwards
    a = np.zeros(10, np.float32)
    expect_raises(ValueError, lambda: baton.allreduce_(a[::2]), ["not C-contiguous"], "numpy non-contiguous")
    expect_raises(ValueError, lambda: baton.allreduce(np.zeros((4, 4), np.float32).T), ["not C-contiguous"], "numpy transposed")
    ro = np.zeros(10, np.float32)
    ro.flags.writeable = False
    expect_raises(ValueError, lambda: baton.allreduce_(ro), ["read-only"], "numpy read-only in place")
    expect_raises(ValueError, lambda: baton.broadcast_(ro), ["read-only"], "numpy read-only broadcast_")
    check(np.array_equal(baton.allreduce(ro), ro * W), "a read-only input is fine out of place")
    expect_raises(TypeError, lambda: baton.allreduce(np.zeros(3, np.complex64)), ["format"], "complex refused")
    expect_raises(TypeError, lambda: baton.allreduce_(np.zeros(3, np.int8)), ["format"], "int8 refused")
    expect_raises(TypeError, lambda: baton.allreduce_("abc"), ["buffer protocol"], "a str refused")
    expect_raises(ValueError, lambda: baton.allreduce_(a, op="mean"), ["sum"], "unknown op lists the names")
    expect_raises(ValueError, lambda: baton.allreduce_(a, dtype="f64"), ["8-byte"], "dtype of the wrong size")
    expect_raises(ValueError, lambda: baton.allreduce(a, out=np.zeros(9, np.float32)), ["elements"], "wrong output size")
    expect_raises(ValueError, lambda: baton.broadcast_(a, root=W), ["not a rank"], "root out of range")
    if W > 1:
        expect_raises(ValueError, lambda: baton.reduce_scatter(np.zeros(W * 2 + 1, np.float32)), ["equal slices"],
                      "reduce_scatter of an uneven input")
    buf = np.zeros(8, np.float32)
    expect_raises(ValueError, lambda: baton.allreduce(buf[0:4], out=buf[2:6]), ["overlap"], "overlapping input and output")
    same = np.ones(4, np.float32)
    check(np.array_equal(baton.allreduce(same, out=same[:]), np.full(4, float(W), np.float32)),
          "two views of the same range reduce in place")
    x = np.full(3, 2.0, np.float32)
    check(np.array_equal(baton.allreduce_(x), np.full(3, 2.0 * W, np.float32)), "usable after refusals")


def run_torch():
    import torch
    import baton.torch  # noqa: F401  registers torch.Tensor

    TD = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64}

    def tv(t):
        return t.to(torch.float64).numpy()

    for dt in DTYPES:
        for op in OPS:
            for n in SIZES:
                ref = expected(op, dt, n)
                t = tol(op, dt, ref)
                x = torch.from_numpy(data(op, R, n)).to(TD[dt])
                keep = x.clone()
                y = baton.allreduce(x, op=op)
                check(isinstance(y, torch.Tensor) and y.dtype == TD[dt] and np.all(np.abs(tv(y) - ref) <= t)
                      and torch.equal(x, keep), "torch allreduce %s %s n=%d" % (dt, op, n))
                check(baton.allreduce_(x, op=op) is x and np.all(np.abs(tv(x) - ref) <= t),
                      "torch allreduce_ %s %s n=%d" % (dt, op, n))
            # a 2-D tensor, and an asynchronous one
            ref = expected(op, dt, 48).reshape(6, 8)
            x = torch.from_numpy(data(op, R, 48)).to(TD[dt]).reshape(6, 8)
            h = baton.allreduce_async_(x, op=op)
            check(h.wait() is x and np.all(np.abs(tv(x) - ref) <= tol(op, dt, ref)), "torch async 2-D %s %s" % (dt, op))
        n = 777
        x = (torch.arange(n) % 50 + R).to(TD[dt])
        g = baton.allgather(x)
        want = np.concatenate([np.arange(n) % 50 + r for r in range(W)])
        check(np.array_equal(tv(g), want), "torch allgather %s" % dt)
        full = (torch.arange(n * W) % 13 + R).to(TD[dt])
        rs = baton.reduce_scatter(full, op="sum")
        red = np.stack([(np.arange(n * W) % 13) + r for r in range(W)]).sum(0)
        check(np.array_equal(tv(rs), red[R * n:(R + 1) * n]), "torch reduce_scatter %s" % dt)
        b = (torch.arange(n) % 31 + 5 * R).to(TD[dt])
        baton.broadcast_(b, root=W - 1)
        check(np.array_equal(tv(b), np.arange(n) % 31 + 5.0 * (W - 1)), "torch broadcast_ %s" % dt)
    # a parameter that requires grad can be reduced in place (as Horovod allows), and a slice view too
    p = torch.ones(5, requires_grad=True)
    baton.allreduce_(p.data)
    check(torch.equal(p.detach(), torch.full((5,), float(W))), "a parameter's data in place")
    big = torch.zeros(4, 6)
    big[1] = R + 1.0
    baton.allreduce_(big[1])
    check(torch.equal(big[1], torch.full((6,), W * (W + 1) / 2.0)) and torch.equal(big[0], torch.zeros(6)),
          "a contiguous row view reduces in place, its neighbours untouched")
    a = torch.zeros(6, 6)
    expect_raises(ValueError, lambda: baton.allreduce_(a[:, 1]), ["not contiguous"], "torch non-contiguous column")
    expect_raises(ValueError, lambda: baton.allreduce_(a.t()), ["not contiguous"], "torch transposed")
    expect_raises(TypeError, lambda: baton.allreduce_(torch.zeros(3, dtype=torch.int8)), ["int8"], "torch int8 refused")
    expect_raises(TypeError, lambda: baton.allreduce_(torch.zeros(3, dtype=torch.complex64)), ["complex"], "torch complex")
    expect_raises(TypeError, lambda: baton.allreduce(torch.zeros(3), out=torch.zeros(3, dtype=torch.float64)),
                  ["f32", "f64"], "torch output of another dtype")
    x = torch.full((3,), 2.0)
    check(torch.equal(baton.allreduce_(x), torch.full((3,), 2.0 * W)), "usable after torch refusals")


if KINDS in ("numpy", "both"):
    run_numpy()
if KINDS in ("torch", "both"):
    run_torch()
baton.barrier()
print("rank %d: CHECKS %d FAILED %d" % (R, checks, len(failures)), flush=True)
baton.shutdown()
sys.exit(1 if failures else 0)
