"""DDP over dprun against DDP over Gloo: one training step of torch's
DistributedDataParallel on the same script, in one process, interleaved.

Three variants step the same model from the same weights and data:
  plain       the model alone, no communication (the floor);
  ddp-dprun   DDP over the default group, torch.distributed's "dprun" backend;
  ddp-gloo    DDP over a Gloo group of the same ranks (new_group(backend="gloo")).
Workloads (--workload):
  mlp       LAYERS x Linear(WIDTH, WIDTH), 2 x LAYERS = 160 parameter tensors by
            default, batch BATCH, SGD with momentum: many small gradients, in DDP's
            buckets (its first bucket 1 MB, then 25 MB);
  resnet50  a module whose parameters have ResNet-50's 161 shapes (25.6 M floats,
            ../shared/data/resnet50_sizes.txt or bench/data/), whose loss touches
            every parameter once (each gradient a constant): the step is DDP's
            gradient averaging of ResNet-50's gradient set, and little else.
Each round runs every variant for STEPS timed steps (after WARMUP untimed), the
order rotating from round to round; every step starts after a barrier; a
variant's figure is rank 0's median step over all rounds, with the round medians.
Ratios are to plain torch (the floor) and between the two DDPs, in the same run.

    /usr/bin/python3 bench/ddp_step.py --workload mlp             # 1 rank
    build/dprun -np 2 /usr/bin/python3 bench/ddp_step.py --workload mlp,resnet50
"""
import argparse
import copy
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import hvd.torch as hvd  # noqa: E402  (registers "dprun")

import gradient_set  # noqa: E402


def mlp(args):
    mods = []
    for _ in range(args.layers):
        mods += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods)
    x, y = torch.randn(args.batch, args.width), torch.randn(args.batch, args.width)
    return model, lambda m: torch.nn.functional.mse_loss(m(x), y)


def resnet50(args):
    model = gradient_set.GradientSet(gradient_set.resnet50_sizes())
    scale = torch.tensor(0.5)
    return model, lambda m: m(scale)


def variants(build, args, gloo):
    torch.manual_seed(0)
    base, loss = build(args)
    out = []
    for name in ("plain", "ddp-dprun", "ddp-gloo"):
        m = copy.deepcopy(base)
        if name == "ddp-dprun":
            m = torch.nn.parallel.DistributedDataParallel(m)
        elif name == "ddp-gloo":
            m = torch.nn.parallel.DistributedDataParallel(m, process_group=gloo)
        opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
        out.append((name, m, opt))
    return out, loss


def run(workload, args, gloo, rank, size):
    builds = {"mlp": mlp, "resnet50": resnet50}
    vs, loss = variants(builds[workload], args, gloo)

    def step(model, opt):
        opt.zero_grad()
        loss(model).backward()
        opt.step()
    for _, m, o in vs:
        for _ in range(args.warmup):
            step(m, o)
    times = {name: [] for name, _, _ in vs}
    medians = {name: [] for name, _, _ in vs}
    for r in range(args.rounds):
        k = r % len(vs)
        for name, m, o in vs[k:] + vs[:k]:
            ts = []
            for _ in range(args.steps):
                hvd.barrier()
                t0 = time.perf_counter()
                step(m, o)
                ts.append(time.perf_counter() - t0)
            times[name] += ts
            medians[name].append(statistics.median(ts))
    if rank != 0:
        return
    nparams = sum(1 for _ in vs[0][1].parameters())
    print("\nddp_step %s: %d rank(s), %d parameter tensors, %d rounds x %d steps, torch %s"
          % (workload, size, nparams, args.rounds, args.steps, torch.__version__))
    plain = statistics.median(times["plain"])
    gloo_med = statistics.median(times["ddp-gloo"])
    print("| variant | median ms/step | x plain | x ddp-gloo | round medians (ms) |")
    print("|---|---|---|---|---|")
    for name, _, _ in vs:
        med = statistics.median(times[name])
        print("| %s | %.3f | %.2f | %.2f | %s |" % (
            name, med * 1e3, med / plain, med / gloo_med,
            ", ".join("%.3f" % (t * 1e3) for t in medians[name])))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="mlp,resnet50")
    p.add_argument("--layers", type=int, default=80)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("dprun")
    gloo = dist.new_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    for workload in args.workload.split(","):
        run(workload, args, gloo, rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
