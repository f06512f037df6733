import os, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=15))
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank", dist.get_rank(), "ok", t.tolist(), flush=True)
