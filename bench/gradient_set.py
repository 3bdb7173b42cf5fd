"""A torch module whose parameters have given sizes and whose loss touches each
once (every gradient a constant): a DDP step of it is DDP's gradient averaging of
that gradient set and little else. resnet50_sizes() gives ResNet-50's 161 sizes
(../shared/data/resnet50_sizes.txt, or the copy in bench/data/)."""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def read_sizes(path):
    with open(path) as f:
        return [int(line.split()[0]) for line in f if line.strip() and line[0] != "#"]


def resnet50_sizes():
    for path in (os.path.join(HERE, "..", "..", "shared", "data", "resnet50_sizes.txt"),
                 os.path.join(HERE, "data", "resnet50_sizes.txt")):
        if os.path.exists(path):
            return read_sizes(path)
    raise SystemExit("resnet50_sizes.txt not found")


class GradientSet(torch.nn.Module):
    """Parameters of the given sizes; forward touches each once."""

    def __init__(self, sizes):
        super().__init__()
        self.params = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(n)) for n in sizes)

    def forward(self, scale):
        return sum(p.sum() for p in self.params) * scale
