"""Shared test helpers: per-rank inputs that any rank can rebuild, front-end
wrappers, and small models with their single-process references."""
import numpy as np
import torch

import hvd.numpy as hnp
import hvd.torch as hvd

TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
                "int64"]
NUMPY_DTYPES = [d for d in TORCH_DTYPES if d != "bfloat16"]


def rank_input(rank, shape, dtype, seed=0):
    """Rank `rank`'s input as a float64 array of small integers, exact in every dtype
    even after sums and products over 4 ranks."""
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype == "uint8":
        return rng.integers(0, 4, size=shape).astype(np.float64)
    return rng.integers(-3, 4, size=shape).astype(np.float64)


class Frontend:
    """A front-end module with converters between float64 arrays and its tensors."""

    def __init__(self, name):
        self.name = name
        self.mod = hvd if name == "torch" else hnp
        self.dtypes = TORCH_DTYPES if name == "torch" else NUMPY_DTYPES

    def make(self, array, dtype):
        if self.name == "numpy":
            return np.array(array, dtype=dtype, order="C")
        t = torch.from_numpy(np.array(array, order="C"))
        return t.to(getattr(torch, dtype))

    def to_numpy(self, t):
        if self.name == "numpy":
            return np.asarray(t, dtype=np.float64)
        return t.to(torch.float64).numpy()

    def __repr__(self):
        return self.name


FRONTENDS = [Frontend("torch"), Frontend("numpy")]


def int_average(total, n, dtype):
    if dtype.startswith("float") or dtype == "bfloat16":
        return total / n
    return np.trunc(total / n)


class MLP(torch.nn.Module):
    def __init__(self, sizes=(10, 16, 12, 4)):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.tanh(x)
        return x


def make_model(seed=0, sizes=(10, 16, 12, 4)):
    torch.manual_seed(seed)
    return MLP(sizes)


def dataset(n_per_rank, size, seed=7, features=10, classes=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_per_rank * size, features, generator=g)
    y = torch.randint(0, classes, (n_per_rank * size,), generator=g)
    return x, y


def max_diff(model_a, model_b):
    return max((a.detach() - b.detach()).abs().max().item()
               for a, b in zip(model_a.parameters(), model_b.parameters()))


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def identical_across_ranks(tensor, name):
    """True on every rank if every rank holds a bit-identical `tensor`."""
    everyone = hvd.allgather(tensor.reshape(1, -1), name=name)
    return bool((everyone == tensor.reshape(1, -1)).all())
