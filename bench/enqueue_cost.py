"""The per-call cost of hvd.torch.allreduce_async_ on CPU tensors (issue 25's "lean
hot path"): the host time from the call to its return, which a gradient hook pays
once per parameter, and of synchronize() per handle.

Each round enqueues N small float32 tensors under fixed names (as a training
step's hooks do), timing the enqueue loop, then synchronizes every handle, timing
that loop; figures are medians over rounds of the per-call mean. One process:

    /usr/bin/python3 bench/enqueue_cost.py [--tensors 1000] [--rounds 20]

The same is measured for the prepared in-place allreduce that
DistributedOptimizer's hooks use (hvd._frontend.PreparedAllreduce: one per
gradient, started once per step).

--profile prints cProfile's top functions for the enqueue loop instead.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))

import torch  # noqa: E402

import hvd.torch as hvd  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tensors", type=int, default=1000)
    p.add_argument("--numel", type=int, default=16)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    tensors = [torch.ones(args.numel) for _ in range(args.tensors)]
    names = ["grad.%d" % i for i in range(args.tensors)]

    from hvd.torch.mpi_ops import _ops
    prepared = [_ops.prepare_allreduce("prepared." + n, hvd.Sum, 1.0, 1.0,
                                       hvd.global_process_set) for n in names]

    def enqueue_general():
        return [hvd.allreduce_async_(t, name=n, op=hvd.Sum) for t, n in zip(tensors, names)]

    def enqueue_prepared():
        return [pr.start(t) for pr, t in zip(prepared, tensors)]

    for label, enqueue in (("allreduce_async_", enqueue_general),
                           ("prepared (DistributedOptimizer's hooks)", enqueue_prepared)):
        measure(label, enqueue, args)
    hvd.shutdown()


def measure(label, enqueue, args):

    for _ in range(3):
        for h in enqueue():
            hvd.synchronize(h)
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        handles = enqueue()
        prof.disable()
        for h in handles:
            hvd.synchronize(h)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return
    enq, syn = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        handles = enqueue()
        t1 = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        t2 = time.perf_counter()
        enq.append((t1 - t0) / args.tensors)
        syn.append((t2 - t1) / args.tensors)
    print("%s enqueue: %.2f us per call (median of %d rounds of %d; min %.2f)"
          % (label, statistics.median(enq) * 1e6, args.rounds, args.tensors, min(enq) * 1e6))
    print("%s synchronize: %.2f us per handle (min %.2f)"
          % (label, statistics.median(syn) * 1e6, min(syn) * 1e6))


if __name__ == "__main__":
    main()
