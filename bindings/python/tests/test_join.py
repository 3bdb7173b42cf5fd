"""join with uneven data: ranks run out of batches at different steps; allreduces
keep going with the remaining ranks, and the result matches a reference that
averages over the ranks that still had data at each step."""
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from helpers import dataset, flat_params, make_model, max_diff

BATCH = 4


def batches_of(rank):
    return 2 + rank  # Rank r has 2 + r batches: the last rank has the most.


def test_join_with_uneven_batches():
    n = hvd.size()
    x, y = dataset(BATCH * batches_of(n - 1), n, seed=21)

    def batch(rank, step):
        start = (rank * batches_of(n - 1) + step) * BATCH
        return x[start:start + BATCH], y[start:start + BATCH]

    model = make_model(30)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    for step in range(batches_of(hvd.rank())):
        xb, yb = batch(hvd.rank(), step)
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    last = hvd.join()
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)

    ref = make_model(30)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(batches_of(n - 1)):
        ranks = [r for r in range(n) if batches_of(r) > step]
        ropt.zero_grad()
        loss = sum(F.cross_entropy(ref(batch(r, step)[0]), batch(r, step)[1]) for r in ranks)
        (loss / n).backward()  # A joined rank contributes zeros; Average divides by n.
        ropt.step()
    assert last == n - 1
    assert max_diff(model, ref) < 1e-5
    assert torch.isfinite(flat_params(model)).all()


def test_join_when_all_ranks_are_even():
    assert hvd.join() in range(hvd.size())
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum)  # Collectives work again afterwards.
    assert (out == hvd.size()).all()
