"""Rank 0 calls all_reduce where the others call all_gather: every rank's call
fails with dprun's mismatch, naming both calls; the group then goes on."""
import torch
import torch.distributed as dist

import hvd.torch  # noqa: F401

dist.init_process_group("dprun")
me, n = dist.get_rank(), dist.get_world_size()
x = torch.ones(4)
try:
    if me == 0:
        dist.all_reduce(x)
    else:
        dist.all_gather([torch.empty(4) for _ in range(n)], x)
    print("rank %d: NO ERROR" % me, flush=True)
except Exception as e:  # noqa: BLE001
    print("rank %d: %s: %s" % (me, type(e).__name__, e), flush=True)
y = torch.ones(2)
dist.all_reduce(y)
print("rank %d: after: %s" % (me, y.tolist()), flush=True)
dist.destroy_process_group()
