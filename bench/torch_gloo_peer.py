"""torch.distributed's Gloo all-reduce on one flat float32 buffer, the peer that
bench/multihost_bench.sh runs next to allreduce_bench. Started by dprun (one process
per rank); it rendezvouses through torch's own TCP store on rank 0's host.

    dprun -np 2 -H a:1,b:1 python3 bench/torch_gloo_peer.py --elements N --master ADDR:PORT

Prints, on rank 0, "torch_gloo <elements> <median ms>": the median over steps of the
slowest rank's time, as allreduce_bench (bench/harness.h) times every peer. Each rank
times from its own exit of the barrier, so rank 0's clock alone can miss the time a
later rank still needs (up to one message at 4 MB and 1 Gbit/s).
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, required=True)
    p.add_argument("--master", required=True, help="ADDR:PORT of rank 0's store")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    addr, port = a.master.rsplit(":", 1)
    rank, size = int(os.environ["HVD_RANK"]), int(os.environ["HVD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%s" % (addr, port), rank=rank,
                            world_size=size)
    buf = torch.ones(a.elements)
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(buf)
        if i >= a.warmup:
            times.append(time.perf_counter() - t)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("torch_gloo %d %.3f" % (a.elements, statistics.median(slowest.tolist()) * 1000),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
