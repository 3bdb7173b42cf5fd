"""torch.distributed peers that bench/multihost_bench.sh runs next to
allreduce_bench, started by dprun (one process per rank):

- the all-reduce of one flat float32 buffer over Gloo (the default), rendezvousing
  through torch's own TCP store at --master;
- with --ddp-sizes FILE: a DDP step (backward, whose gradient averaging DDP waits
  for) of a module whose parameters have FILE's sizes (ResNet-50's) and whose loss
  touches each once, over --backend (gloo at --master, or dprun, which finds its
  rendezvous in the variables dprun gives each rank).

    dprun -np 2 -H a:1,b:1 python3 bench/torch_gloo_peer.py --elements N --master ADDR:PORT
    dprun -np 2 -H a:1,b:1 python3 bench/torch_gloo_peer.py --ddp-sizes sizes.txt --backend dprun

Prints, on rank 0, "torch_<backend>[_ddp] <elements> <median ms>": the median over
steps of the slowest rank's time, as allreduce_bench (bench/harness.h) times every
peer. Each rank times from its own exit of the barrier, so rank 0's clock alone can
miss the time a later rank still needs (up to one message at 4 MB and 1 Gbit/s).
"""
import argparse
import os
import statistics
import time

import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "bindings", "python"))

from gradient_set import GradientSet, read_sizes  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int)
    p.add_argument("--master", help="ADDR:PORT of rank 0's store (gloo)")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--ddp-sizes", help="a DDP step of parameters of these sizes instead")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    rank, size = int(os.environ["HVD_RANK"]), int(os.environ["HVD_SIZE"])
    torch.set_num_threads(1)
    if a.backend == "dprun":
        import hvd.torch  # noqa: F401  (registers the backend)
        dist.init_process_group("dprun")
    else:
        addr, port = a.master.rsplit(":", 1)
        dist.init_process_group(a.backend, init_method="tcp://%s:%s" % (addr, port), rank=rank,
                                world_size=size)
    if a.ddp_sizes:
        sizes = read_sizes(a.ddp_sizes)
        model = torch.nn.parallel.DistributedDataParallel(GradientSet(sizes))
        scale = torch.tensor(0.5)
        elements, label = sum(sizes), "torch_%s_ddp" % a.backend

        def step():
            model.zero_grad()
            model(scale).backward()
    else:
        buf = torch.ones(a.elements)
        elements, label = a.elements, "torch_%s" % a.backend

        def step():
            dist.all_reduce(buf)
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t = time.perf_counter()
        step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("%s %d %.3f" % (label, elements, statistics.median(slowest.tolist()) * 1000),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
