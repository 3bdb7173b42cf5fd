#!/usr/bin/env python3
"""Optimizer-state and gradient memory per rank: DistributedOptimizer (replicated
Adam state) against ShardedOptimizer stage 1 and stage 2 (ZeRO), for one model.

Under dprun, measures this job's size and prints one table:

    build-py/dprun -np 4 /usr/bin/python3 bench/sharded_memory.py

Started without dprun, it runs itself under `dprun -np N` for N = 1, 2, 4 (or
--sizes) and prints the combined table:

    /usr/bin/python3 bench/sharded_memory.py [--dprun build-py/dprun]

Columns, per rank (the largest over ranks): the optimizer state bytes (tensors in
the optimizer's state) and its ratio to DistributedOptimizer's replicated state,
the gradient bytes kept between steps, the peak of the
gradient staging buffers during backward (stage 2 only), and ms per training step.
The expectation is optimizer state ~ 1/N of the replicated state for both stages,
and, for stage 2, kept gradients ~ 1/N as well.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))

LAYERS = (256, 512, 512, 10)
STEPS = 5


def model():
    import torch
    torch.manual_seed(0)
    layers = []
    for a, b in zip(LAYERS[:-1], LAYERS[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def state_bytes(opt):
    import torch
    return sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
               if torch.is_tensor(v))


def measure():
    import torch
    import torch.nn.functional as F
    import hvd.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    rows = []
    for config in ("distributed", "sharded-1", "sharded-2"):
        m = model()
        if config == "distributed":
            opt = hvd.DistributedOptimizer(torch.optim.Adam(m.parameters(), lr=1e-3),
                                           named_parameters=m.named_parameters())
        else:
            opt = hvd.ShardedOptimizer(torch.optim.Adam, m.parameters(),
                                       stage=int(config[-1]), lr=1e-3, bucket_bytes=1 << 20)
        x = torch.randn(32, LAYERS[0])
        y = torch.randint(0, LAYERS[-1], (32,))
        start = None
        for step in range(STEPS + 1):
            if step == 1:
                start = time.perf_counter()  # The first step allocates the state.
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        ms = 1000 * (time.perf_counter() - start) / STEPS
        if config == "distributed":
            grads = sum(p.grad.numel() * p.grad.element_size() for p in m.parameters())
            peak = 0
            state = state_bytes(opt)
        else:
            grads, peak, state = opt.gradient_bytes(), opt.peak_staging_bytes, state_bytes(opt)
        worst = hvd.allreduce(torch.tensor([state, grads, peak, ms], dtype=torch.float64),
                              op=hvd.Max, name="bench.%s" % config)
        rows.append({"size": hvd.size(), "config": config, "params": sum(
            p.numel() for p in m.parameters()), "state": int(worst[0]), "grads": int(worst[1]),
            "peak_staging": int(worst[2]), "ms": float(worst[3])})
    hvd.shutdown()
    return rows


def print_table(rows):
    replicated = {r["size"]: r["state"] for r in rows if r["config"] == "distributed"}
    print("model %s, %d parameters, Adam (2 moments + step per parameter tensor)"
          % ("-".join(map(str, LAYERS)), rows[0]["params"]))
    print("%3s  %-12s %16s %8s %14s %14s %9s" % ("N", "optimizer", "state B/rank", "vs repl",
                                                  "kept grads B", "peak staging B", "ms/step"))
    for r in rows:
        ratio = "%.3f" % (r["state"] / replicated[r["size"]])
        print("%3d  %-12s %16d %8s %14d %14d %9.2f" % (r["size"], r["config"], r["state"], ratio,
                                                       r["grads"], r["peak_staging"], r["ms"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print rank 0's rows as JSON")
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--dprun", default=None, help="dprun to launch with (default: beside "
                        "the libhvd.so that the hvd package finds)")
    args = parser.parse_args()
    if "HVD_RANK" in os.environ:
        rows = measure()
        if int(os.environ["HVD_RANK"]) == 0:
            print(json.dumps(rows) if args.json else "", flush=True)
            if not args.json:
                print_table(rows)
        return 0
    from hvd import _lib
    dprun = args.dprun or os.path.join(os.path.dirname(_lib.find_library()), "dprun")
    env = dict(os.environ, HVD_LIBRARY=os.path.join(os.path.dirname(os.path.abspath(dprun)),
                                                    "libhvd.so"))
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        out = subprocess.run([dprun, "-np", str(n), sys.executable, os.path.abspath(__file__),
                              "--json"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            return out.returncode
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("[0]<stdout>:[")][0]
        rows += json.loads(line.split(":", 1)[1])
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
