#!/usr/bin/env python3
"""Data-parallel training of a 64-128-10 MLP on scikit-learn's handwritten digits
(sklearn.datasets.load_digits: 1797 8x8 images, bundled, no download) with
hvd.torch's DistributedOptimizer.

Every rank loads the same data and trains on its own disjoint shard of the training
set, reshuffled each epoch with a seed shared by all ranks (DistributedSampler).
Ranks start from different random weights on purpose: broadcast_parameters and
broadcast_optimizer_state make them rank 0's before training. Gradients are
averaged by allreduces that the optimizer's hooks start during backward. The global
batch is fixed (64), so the per-rank batch is 64 / size and the run does the same
number of steps at any size.

Rank 0 prints each epoch's loss (averaged over ranks), test accuracy and time per
step. At the end every rank compares its parameters with every other rank's
(an allgather of the flattened parameters, compared bit for bit) and prints the
result. Exits 1 if the parameters differ or test accuracy is below 90%.

--device picks where the model, the batches and hence the gradient allreduces
live: cpu, cuda (each rank uses cuda:<its local rank>; NCCL needs one GPU per rank,
while HVD_GPU_OPERATIONS=gloo lets ranks share GPUs, cuda:<local rank % GPUs>), or
auto (the default: cuda when torch sees a GPU and libhvd was built with CUDA, else
cpu).

    build/dprun -np 4 /usr/bin/python3 examples/train_digits.py [--epochs N] [--device D]

The package is found through the sys.path entry below (or PYTHONPATH=bindings/python),
libhvd.so through $HVD_LIBRARY or the repository's build folders.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

import hvd.torch as hvd  # noqa: E402

GLOBAL_BATCH = 64


def load_data():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.2, random_state=0, stratify=digits.target)
    return (torch.from_numpy(x_train), torch.from_numpy(y_train).long(),
            torch.from_numpy(x_test), torch.from_numpy(y_test).long())


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def pick_device(choice):
    """The torch.device to train on for --device `choice`; for cuda, this rank's GPU
    (cuda:<local rank>), made the current device."""
    usable = torch.cuda.is_available() and hvd.cuda_built()
    if choice == "auto":
        choice = "cuda" if usable else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    if not hvd.cuda_built():
        raise SystemExit("--device cuda: libhvd (%s) was built without CUDA" % hvd_library())
    count = torch.cuda.device_count()
    sharing = os.environ.get("HVD_GPU_OPERATIONS", os.environ.get("HOROVOD_GPU_OPERATIONS"))
    if hvd.local_size() > count and (sharing or "nccl").lower() != "gloo":
        raise SystemExit("--device cuda: %d ranks on this host but %d GPU(s); NCCL needs one "
                         "per rank (HVD_GPU_OPERATIONS=gloo lets ranks share)"
                         % (hvd.local_size(), count))
    index = hvd.local_rank() % count
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def hvd_library():
    from hvd import _lib
    return _lib.lib().path


def parameters_identical(model):
    """True if every rank holds bit-identical parameters; also returns a checksum."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat.reshape(1, -1), name="check.params")
    identical = bool((everyone == flat).all())
    return identical, float(flat.double().sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where to train (default auto: cuda if usable, else cpu)")
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.set_num_threads(1)  # Ranks share the host's cores.
    device = pick_device(args.device)
    if GLOBAL_BATCH % size:
        raise SystemExit("the global batch %d must divide by the number of ranks %d"
                         % (GLOBAL_BATCH, size))

    x_train, y_train, x_test, y_test = (t.to(device) for t in load_data())
    sampler = DistributedSampler(TensorDataset(x_train, y_train), num_replicas=size, rank=rank,
                                 shuffle=True, seed=1234)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=GLOBAL_BATCH // size,
                        sampler=sampler)

    torch.manual_seed(100 + rank)  # Different on purpose: the broadcast fixes it.
    model = make_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    # The learning rate decays to zero over the run, which steadies the final epochs.
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * len(loader), pct_start=0.2)

    if rank == 0:
        print("digits: %d train / %d test samples, 64-128-10 MLP, %d ranks on %s, global batch "
              "%d (%d per rank), %d steps per epoch"
              % (len(x_train), len(x_test), size, device.type, GLOBAL_BATCH,
                 GLOBAL_BATCH // size, len(loader)), flush=True)

    steps, train_seconds, accuracy = 0, 0.0, 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        epoch_loss, batches = 0.0, 0
        start = time.perf_counter()
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            schedule.step()
            epoch_loss += loss.item()
            batches += 1
        elapsed = time.perf_counter() - start
        steps += batches
        train_seconds += elapsed
        mean_loss = hvd.allreduce(torch.tensor([epoch_loss / batches], device=device),
                                  name="epoch.loss").item()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
        if rank == 0:
            print("epoch %2d  loss %.4f  test accuracy %.2f%%  %.2f ms/step"
                  % (epoch + 1, mean_loss, 100 * accuracy, 1000 * elapsed / batches), flush=True)

    identical, checksum = parameters_identical(model)
    if rank == 0:
        print("final test accuracy %.2f%%, %.2f ms/step over %d steps on %d ranks"
              % (100 * accuracy, 1000 * train_seconds / steps, steps, size), flush=True)
    print("rank %d: parameters %s across all %d ranks (checksum %.6f)"
          % (rank, "identical" if identical else "DIFFER", size, checksum), flush=True)
    hvd.shutdown()
    if not identical:
        return 1
    if accuracy < 0.90:
        print("rank %d: test accuracy %.2f%% is below 90%%" % (rank, 100 * accuracy),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
