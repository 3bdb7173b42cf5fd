"""One data-parallel training step on one GPU: plain torch, hvd.DistributedOptimizer
and torch DDP (NCCL), all three in one process, interleaved (issue 25).

Models: torchvision ResNet-50 (batch 64) and ResNet-18 (batch 32) by default, on
synthetic ImageNet-shaped data, SGD with momentum. A step is zero_grad, forward,
backward, step. Each round runs every variant for STEPS steps (after WARMUP
untimed ones) in an order that rotates from round to round, and times them as a
whole: torch.cuda.synchronize(), then STEPS steps, then synchronize again, so a
step's figure is device time when the host keeps ahead. Also printed per variant:
the median host time of step() alone, and how long the synchronize() after the
last step waited ("tail": near zero means the host never ran ahead of the GPU,
the symptom issue 25 found). Medians over rounds; ratios are to plain torch.

Needs CUDA, torchvision and a libhvd built with CUDA. One process:

    /usr/bin/python3 bench/gpu_step.py [--models resnet50,resnet18] [--rounds 5]

DDP joins a one-rank NCCL group on 127.0.0.1:$GPU_STEP_PORT (default 29535).
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

BATCH = {"resnet50": 64, "resnet18": 32}


class Variant:
    def __init__(self, name, model, opt):
        self.name = name
        self.model = model
        self.opt = opt
        self.step_ms = []   # per round: wall time per step, synchronized at both ends
        self.host_ms = []   # per round: median host time of opt.step()
        self.tail_ms = []   # per round: the final synchronize()'s wait

    def step(self, x, y, host_times):
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        t0 = time.perf_counter()
        self.opt.step()
        host_times.append(time.perf_counter() - t0)


def variants_for(name, args):
    import torchvision
    torch.manual_seed(0)
    base = getattr(torchvision.models, name)().cuda()
    sgd = lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9)  # noqa: E731
    out = []
    m = copy.deepcopy(base)
    out.append(Variant("plain", m, sgd(m.parameters())))
    m = copy.deepcopy(base)
    out.append(Variant("hvd", m, hvd.DistributedOptimizer(
        sgd(m.parameters()), named_parameters=m.named_parameters())))
    m = copy.deepcopy(base)
    ddp = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])
    out.append(Variant("ddp", ddp, sgd(ddp.parameters())))
    return out


def run_model(name, args):
    batch = args.batch or BATCH[name]
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    variants = variants_for(name, args)
    for v in variants:
        for _ in range(args.warmup):
            v.step(x, y, [])
    torch.cuda.synchronize()
    for r in range(args.rounds):
        for v in variants[r % 3:] + variants[:r % 3]:
            host = []
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                v.step(x, y, host)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            v.step_ms.append((t2 - t0) / args.steps * 1e3)
            v.host_ms.append(statistics.median(host) * 1e3)
            v.tail_ms.append((t2 - t1) * 1e3)
    print("\n%s, batch %d, %d rounds x %d steps, torch %s" % (name, batch, args.rounds,
                                                               args.steps, torch.__version__))
    print("| variant | median ms/step | x plain | min-max | step() host ms | tail ms | rounds |")
    print("|---|---|---|---|---|---|---|")
    plain = statistics.median(variants[0].step_ms)
    for v in variants:
        med = statistics.median(v.step_ms)
        print("| %s | %.2f | %.3fx | %.2f-%.2f | %.2f | %.2f | %s |" % (
            v.name, med, med / plain, min(v.step_ms), max(v.step_ms),
            statistics.median(v.host_ms), statistics.median(v.tail_ms),
            ", ".join("%.2f" % t for t in v.step_ms)))
    del variants
    torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,resnet18")
    p.add_argument("--batch", type=int, default=0, help="0: 64 for ResNet-50, 32 for ResNet-18")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_step.py: no CUDA device")
    torch.backends.cudnn.benchmark = True
    hvd.init()
    torch.cuda.set_device(hvd.local_rank())
    port = int(os.environ.get("GPU_STEP_PORT", "29535"))
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=0,
                            world_size=1)
    for name in args.models.split(","):
        run_model(name, args)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
