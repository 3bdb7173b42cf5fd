"""Process sets from Python: the even and odd ranks, each with its own collectives;
root ranks are global ranks, as in Horovod."""
import numpy as np
import pytest
import torch

import hvd
import hvd.numpy as hnp
import hvd.torch as ht


@pytest.fixture
def even_odd(multi_rank):
    n = ht.size()
    even = ht.add_process_set([r for r in range(n) if r % 2 == 0])
    odd = ht.add_process_set(hvd.ProcessSet([r for r in range(n) if r % 2 == 1]))
    yield even, odd
    assert ht.remove_process_set(odd)
    assert ht.remove_process_set(even)


def test_even_odd_collectives(even_odd):
    even, odd = even_odd
    mine, other = (even, odd) if ht.rank() % 2 == 0 else (odd, even)
    assert mine.included() and not other.included()
    assert other.rank() == -1
    assert mine.rank() == mine.ranks.index(ht.rank())
    assert mine.size() == len(mine.ranks)

    summed = ht.allreduce(torch.tensor([float(ht.rank())]), op=ht.Sum, process_set=mine)
    gathered = hnp.allgather(np.array([ht.rank()], dtype=np.int64), process_set=mine)
    root = mine.ranks[-1]  # A global rank.
    bcast = ht.broadcast(torch.tensor([ht.rank()], dtype=torch.int32), root, process_set=mine)
    scattered = ht.reducescatter(torch.ones(2 * mine.size(), 1), op=ht.Sum, process_set=mine)
    ht.barrier(process_set=mine)
    objs = ht.allgather_object(ht.rank(), process_set=mine)

    assert summed.item() == sum(mine.ranks)
    assert gathered.tolist() == mine.ranks
    assert bcast.item() == root
    assert scattered.shape == (2, 1) and (scattered == mine.size()).all()
    assert objs == mine.ranks


def test_root_rank_outside_the_set(even_odd):
    even, odd = even_odd
    mine, other = (even, odd) if ht.rank() % 2 == 0 else (odd, even)
    with pytest.raises(hvd.InvalidArgumentError, match="not a member"):
        ht.broadcast(torch.ones(1), other.ranks[0], process_set=mine)


def test_distributed_optimizer_on_a_process_set(even_odd):
    even, odd = even_odd
    mine = even if ht.rank() % 2 == 0 else odd
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = ht.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                  named_parameters=model.named_parameters(), process_set=mine)
    x = torch.full((1, 3), float(ht.rank()))
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    # The averaged gradient of the weight is the mean of the set's x.
    torch.manual_seed(0)
    expected = torch.nn.Linear(3, 1)
    with torch.no_grad():
        expected.weight -= 0.1 * float(np.mean(mine.ranks))
    assert torch.allclose(model.weight, expected.weight)


def test_removed_set_is_rejected(multi_rank):
    ps = ht.add_process_set([0, 1])
    assert ht.remove_process_set(ps)
    assert not ht.remove_process_set(ps)
    with pytest.raises(hvd.InvalidArgumentError, match="not registered"):
        ht.allreduce(torch.ones(1), process_set=ps)
    with pytest.raises(hvd.InvalidArgumentError, match="global process set"):
        ht.remove_process_set(ht.global_process_set)
