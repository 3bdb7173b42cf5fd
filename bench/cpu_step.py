"""One data-parallel training step on the CPU: plain torch, hvd.DistributedOptimizer
and torch DDP (gloo), all three in one process, interleaved (issue 25's CPU twin
of bench/gpu_step.py).

The model is a many-small-parameter MLP: LAYERS Linear layers of WIDTH x WIDTH
(weight and bias: 2 x LAYERS parameter tensors, 160 by default), batch BATCH,
SGD with momentum. A step is zero_grad, forward, backward, step. Each round runs
every variant for STEPS timed steps (after WARMUP untimed ones), in an order that
rotates from round to round; a variant's figure is its median step time over all
its rounds' steps, and the round medians are printed too. Ratios are to plain torch
in the same run.

At 1 rank run it directly; at 2 or more run it under dprun (every rank runs the
same loop; rank 0 prints; DDP joins a gloo group on 127.0.0.1:$CPU_STEP_PORT,
default 29533, rank and size from hvd):

    /usr/bin/python3 bench/cpu_step.py [--rounds 5] [--steps 30]
    build/dprun -np 2 /usr/bin/python3 bench/cpu_step.py

At one rank hvd.DistributedOptimizer registers no hooks (as Horovod: nothing to
average); the "hvd+hooks" variant measures the step with them (as in an elastic
job), that is the per-gradient cost of the hook path.

Plain torch at 2 ranks is the same local step (no communication): the ratio then
says what the gradient averaging costs on top of it.
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

import hvd.torch as hvd  # noqa: E402


def make_model(layers, width):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


class Variant:
    """A model, its optimizer and a step function."""

    def __init__(self, name, model, opt):
        self.name = name
        self.model = model
        self.opt = opt
        self.times = []
        self.round_medians = []

    def step(self, x, y):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()


def build(args):
    torch.manual_seed(0)
    base = make_model(args.layers, args.width)
    sgd = lambda params: torch.optim.SGD(params, lr=1e-3, momentum=0.9)  # noqa: E731
    variants = []
    plain = copy.deepcopy(base)
    variants.append(Variant("plain", plain, sgd(plain.parameters())))
    m = copy.deepcopy(base)
    opt = hvd.DistributedOptimizer(sgd(m.parameters()), named_parameters=m.named_parameters())
    variants.append(Variant("hvd", m, opt))
    if hvd.size() == 1:
        # At one rank hvd (as Horovod) registers no hooks; "hvd+hooks" is the step
        # with them, as in an elastic job: the per-gradient cost of the hook path.
        os.environ["HOROVOD_ELASTIC"] = "1"
        m = copy.deepcopy(base)
        opt = hvd.DistributedOptimizer(sgd(m.parameters()), named_parameters=m.named_parameters())
        del os.environ["HOROVOD_ELASTIC"]
        variants.append(Variant("hvd+hooks", m, opt))
    if not args.no_ddp:
        m = copy.deepcopy(base)
        ddp = torch.nn.parallel.DistributedDataParallel(m)
        variants.append(Variant("ddp", ddp, sgd(ddp.parameters())))
    return variants


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=80)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-ddp", action="store_true")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if not args.no_ddp:
        port = int(os.environ.get("CPU_STEP_PORT", "29533"))
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=size)
    variants = build(args)
    x = torch.randn(args.batch, args.width)
    y = torch.randn(args.batch, args.width)
    for v in variants:
        for _ in range(args.warmup):
            v.step(x, y)

    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            times = []
            for _ in range(args.steps):
                if size > 1:
                    hvd.barrier()  # every rank starts the step together
                t0 = time.perf_counter()
                v.step(x, y)
                times.append(time.perf_counter() - t0)
            v.times += times
            v.round_medians.append(statistics.median(times))

    if rank == 0:
        nparams = sum(1 for _ in variants[0].model.parameters())
        print("cpu_step: %d ranks, %d parameter tensors (%d x Linear(%d, %d)), batch %d, "
              "%d rounds x %d steps, torch %s, %d thread(s)"
              % (size, nparams, args.layers, args.width, args.width, args.batch, args.rounds,
                 args.steps, torch.__version__, args.threads))
        plain = statistics.median(variants[0].times)
        print("| variant | median ms/step | x plain | round medians (ms) |")
        print("|---|---|---|---|")
        for v in variants:
            med = statistics.median(v.times)
            print("| %s | %.3f | %.2fx | %s |" % (
                v.name, med * 1e3, med / plain,
                ", ".join("%.3f" % (t * 1e3) for t in v.round_medians)))
    if not args.no_ddp:
        dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
