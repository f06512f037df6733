#!/usr/bin/python3
"""bench/gpt_torch.py: baton's GPT (docs/gpt.md) in PyTorch, for the benchmark and the equivalence test.

Same architecture (nanoGPT layout and parameter names, pre-LayerNorm, exact GELU, tied head, no dropout), same
initialization scheme, same byte-level data and split by document (the fortunes or a text file), same windows,
same AdamW (betas 0.9/beta2, eps 1e-8, decay on 2-D tensors only), global-norm clip, warmup + cosine schedule.
The batches are drawn from a seeded permutation of the training windows like baton's, but with torch's RNG, so
the sequences of batches differ.

  gpt_torch.py train [options]            train; prints one JSON line (tokens/s, losses); --world N runs N
                                          processes under DDP over gloo (each its own disjoint windows)
  gpt_torch.py eval MODEL.safetensors     validation loss of a baton-saved GPT on the first --eval-windows
                                          validation windows (baton's evaluation), one JSON line
  gpt_torch.py split                      BLAKE2b-256 of the training and validation bytes, one JSON line
Common options: --data fortunes|text:FILE --data-dir DIR --eval-windows N (default 32)
"""
import argparse
import hashlib
import json
import math
import os
import stat
import struct
import sys
import time

FORTUNES = "/usr/share/games/fortunes"


# ---- data: the split of src/data/text.c, byte for byte ----------------------------------------------------
class Splitter:
    def __init__(self):
        self.train, self.val, self.docs = bytearray(), bytearray(), 0

    @staticmethod
    def add_doc(to, doc):
        doc = doc.lstrip(b"\r\n").rstrip(b"\r\n")
        if not doc:
            return 0
        if to:
            to += b"\n"
        to += doc
        return 1

    def split(self, buf, fortune):
        n, i, doc = len(buf), 0, 0
        while i <= n:
            eol = buf.find(b"\n", i)
            if eol < 0:
                eol = n
            line = buf[i:eol]
            sep = line in (b"%", b"%\r") if fortune else line.strip(b" \t\r") == b""
            if sep or eol >= n:
                end = i if sep else n
                to = self.val if self.docs % 10 == 9 else self.train
                self.docs += self.add_doc(to, buf[doc:end])
                doc = eol + 1
            i = eol + 1

    def finish(self):
        if self.docs < 10:   # too few documents: the last 10 % of the bytes validate
            everything = bytes(self.train) + (b"\n" + bytes(self.val) if self.val else b"")
            nv = len(everything) // 10
            return everything[:len(everything) - nv], everything[len(everything) - nv:]
        return bytes(self.train), bytes(self.val)


def load_text(data, data_dir=None):
    s = Splitter()
    if data == "fortunes":
        d = data_dir or FORTUNES
        names = []
        for name in os.listdir(d):
            if name.startswith(".") or (len(name) > 4 and name.endswith(".dat")):
                continue
            if stat.S_ISREG(os.lstat(os.path.join(d, name)).st_mode):
                names.append(os.path.join(d, name))
        for path in sorted(names, key=os.fsencode):
            with open(path, "rb") as f:
                s.split(f.read(), True)
    elif data.startswith("text:"):
        with open(data[5:], "rb") as f:
            s.split(f.read(), False)
    else:
        sys.exit("gpt_torch.py: --data expects fortunes or text:FILE")
    return s.finish()


def windows(n_tokens, t):
    return (n_tokens - 1) // t if n_tokens > t else 0


# ---- model ------------------------------------------------------------------------------------------------
def build(torch, layers, heads, dim, context, vocab=256):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
            self.attn = nn.Module()
            self.attn.c_attn = nn.Linear(dim, 3 * dim)
            self.attn.c_proj = nn.Linear(dim, dim)
            self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(dim, 4 * dim)
            self.mlp.c_proj = nn.Linear(4 * dim, dim)

        def forward(self, x, mask):
            b, t, c = x.shape
            d = c // heads
            q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, d).transpose(1, 2) for z in (q, k, v))   # (B, H, T, D)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))                   # (B, H, T, T)
            att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.attn.c_proj(y)
            return x + self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, dim)
            self.wpe = nn.Embedding(context, dim)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(dim, eps=1e-5)
            # not a buffer: DDP would broadcast it, and gloo has no bool
            self.mask = torch.ones(context, context, dtype=torch.bool).triu(1)
            for name, p in self.named_parameters():   # baton's scheme (src/nn/gpt.c)
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
                else:
                    nn.init.ones_(p)

        def forward(self, idx, targets):
            b, t = idx.shape
            x = self.wte(idx) + self.wpe(torch.arange(t))
            for blk in self.h:
                x = blk(x, self.mask)
            logits = self.ln_f(x) @ self.wte.weight.t()   # tied head
            return torch.nn.functional.cross_entropy(logits.reshape(b * t, -1), targets.reshape(-1))

    return GPT()


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        sys.exit("gpt_torch.py: %s: header length %d exceeds the file" % (path, hlen))
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    body = raw[8 + hlen:]
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            sys.exit("gpt_torch.py: %s: tensor %s is %s, expected F32" % (path, name, info["dtype"]))
        lo, hi = info["data_offsets"]
        tensors[name] = np.frombuffer(body[lo:hi], dtype=np.float32).reshape(info["shape"]).copy()
    return meta, tensors


def val_windows(torch, val, t, n):
    n = min(n, windows(len(val), t))
    w = torch.tensor(list(val[:n * t + 1]), dtype=torch.long)
    idx = torch.stack([w[i * t:i * t + t] for i in range(n)])
    tgt = torch.stack([w[i * t + 1:i * t + t + 1] for i in range(n)])
    return idx, tgt


def evaluate(torch, model, idx, tgt, eb=8):
    """baton's evaluation: the mean over batches of eb windows of each batch's mean loss, weighted by size."""
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, idx.shape[0], eb):
            b = min(eb, idx.shape[0] - i)
            total += float(model(idx[i:i + b], tgt[i:i + b])) * b
            count += b
    return total / count


# ---- commands ---------------------------------------------------------------------------------------------
def cmd_split(a):
    train, val = load_text(a.data, a.data_dir)
    print(json.dumps({"train_bytes": len(train), "val_bytes": len(val),
                      "train_blake2b": hashlib.blake2b(train, digest_size=32).hexdigest(),
                      "val_blake2b": hashlib.blake2b(val, digest_size=32).hexdigest()}))


def cmd_eval(a):
    import torch
    torch.set_num_threads(a.threads)
    meta, tensors = read_safetensors(a.model)
    if meta.get("model") != "gpt":
        sys.exit("gpt_torch.py: %s: not a baton GPT (metadata model=%s)" % (a.model, meta.get("model")))
    cfg = {k: int(meta[k]) for k in ("layers", "heads", "dim", "context", "vocab")}
    model = build(torch, cfg["layers"], cfg["heads"], cfg["dim"], cfg["context"], cfg["vocab"])
    state = {k: torch.from_numpy(v) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        sys.exit("gpt_torch.py: %s: missing %s, unexpected %s" % (a.model, missing, unexpected))
    _, val = load_text(a.data, a.data_dir)
    idx, tgt = val_windows(torch, val, cfg["context"], a.eval_windows)
    loss = evaluate(torch, model.eval(), idx, tgt)
    print(json.dumps({"val_loss": loss, "windows": int(idx.shape[0])}))


def train_worker(rank, a, train, val):
    import torch
    torch.set_num_threads(a.threads)
    world = a.world
    if world > 1:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(a.seed)   # the same initial weights on every rank (DDP also broadcasts rank 0's)
    t = a.context
    model = build(torch, a.layers, a.heads, a.dim, t)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)
    warm = a.warmup if a.warmup < a.steps else a.steps // 10
    min_lr = a.lr / 10

    def lr_at(step):   # baton_lr_at (src/nn/optim.c)
        if warm > 0 and step < warm:
            return a.lr * (step + 1) / warm
        span = a.steps - warm
        if span <= 0:
            return a.lr
        frac = min(1.0, (step - warm) / span)
        return min_lr + (a.lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * frac))

    data = torch.tensor(list(train), dtype=torch.uint8)
    n_train = windows(len(train), t)
    gen = torch.Generator().manual_seed(a.seed)
    per_epoch = (n_train // world) // a.batch
    perm = None
    vidx, vtgt = val_windows(torch, val, t, a.eval_windows)
    offs = torch.arange(t + 1)
    losses, tokens, t_total = [], 0, 0.0
    for step in range(a.steps + a.warmup_untimed):
        s = step % per_epoch
        if s == 0:
            perm = torch.randperm(n_train, generator=gen)[:per_epoch * a.batch * world]
        mine = perm[s * a.batch * world:(s + 1) * a.batch * world][rank::world]   # rank r: positions r, r+N, ...
        w = data[(mine * t).unsqueeze(1) + offs].long()
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(max(0, step - a.warmup_untimed))
        loss = net(w[:, :t], w[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= a.warmup_untimed:   # the first steps (allocator, thread pools) are not timed
            t_total += dt
            tokens += a.batch * t * world
            losses.append(float(loss))
    val_loss = evaluate(torch, model.eval(), vidx, vtgt)
    if world > 1:
        import torch.distributed as dist
        tt = torch.tensor([t_total], dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        t_total = float(tt)
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"model": "gpt", "framework": "pytorch", "world_size": world, "steps": a.steps,
                          "batch": a.batch, "context": t, "params": sum(p.numel() for p in model.parameters()),
                          "initial_loss": losses[0], "final_loss": losses[-1], "val_loss": val_loss,
                          "tokens_per_sec": tokens / t_total, "step_ms": 1e3 * t_total / a.steps,
                          "threads": a.threads}), flush=True)


def cmd_train(a):
    train, val = load_text(a.data, a.data_dir)
    if a.world == 1:
        train_worker(0, a, train, val)
        return
    if not a.port:
        import socket
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            a.port = sk.getsockname()[1]
    import torch.multiprocessing as mp
    mp.start_processes(train_worker, args=(a, train, val), nprocs=a.world, start_method="fork")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["train", "eval", "split"])
    p.add_argument("model", nargs="?", help="eval: a baton-saved GPT (.safetensors)")
    p.add_argument("--data", default="fortunes")
    p.add_argument("--data-dir")
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=16, help="windows per step per process")
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps")
    p.add_argument("--warmup-untimed", type=int, default=2, help="untimed steps before them")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--world", type=int, default=1, help="processes (DDP over gloo when > 1)")
    p.add_argument("--port", type=int, default=0, help="gloo rendezvous port on 127.0.0.1 (default: a free one)")
    a = p.parse_args()
    if a.command == "eval" and not a.model:
        p.error("eval needs MODEL.safetensors")
    if a.dim % a.heads:
        p.error("--dim must be divisible by --heads")
    {"train": cmd_train, "eval": cmd_eval, "split": cmd_split}[a.command](a)


if __name__ == "__main__":
    main()
