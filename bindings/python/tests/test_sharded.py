"""ShardedOptimizer (ZeRO 1 and 2): trains to the same parameters as
DistributedOptimizer, keeps 1/N of the optimizer state per rank, and (stage 2)
keeps no full gradients."""
import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from helpers import dataset, flat_params, identical_across_ranks, make_model, max_diff

PER_RANK = 6
SIZES = (10, 17, 13, 4)  # Element counts that do not divide by the number of ranks.


def local_batch(x, y):
    r = hvd.rank()
    return x[r * PER_RANK:(r + 1) * PER_RANK], y[r * PER_RANK:(r + 1) * PER_RANK]


def run(model, opt, steps, x, y, passes=1):
    xs, ys = local_batch(x, y)
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(passes):
            F.cross_entropy(model(xs), ys).backward()
        opt.step()


OPTIMIZERS = {
    "adam": (torch.optim.Adam, dict(lr=0.01, weight_decay=0.01)),
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
}


@pytest.mark.parametrize("stage", [1, 2])
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_matches_distributed_optimizer(stage, kind):
    cls, kwargs = OPTIMIZERS[kind]
    x, y = dataset(PER_RANK, hvd.size(), seed=40)
    dense, sharded = make_model(41, SIZES), make_model(41, SIZES)
    dopt = hvd.DistributedOptimizer(cls(dense.parameters(), **kwargs),
                                    named_parameters=dense.named_parameters())
    sopt = hvd.ShardedOptimizer(cls, sharded.parameters(), stage=stage, bucket_bytes=256,
                                **kwargs)
    run(dense, dopt, 4, x, y)
    run(sharded, sopt, 4, x, y)
    same = identical_across_ranks(flat_params(sharded), "check.sharded.%s.%d" % (kind, stage))
    assert len(sopt._buckets) > 2  # Small buckets: several reducescatters.
    assert max_diff(dense, sharded) < 1e-5
    assert same


@pytest.mark.parametrize("stage", [1, 2])
def test_optimizer_state_is_sharded(stage):
    model = make_model(42, (64, 128, 10))
    sopt = hvd.ShardedOptimizer(torch.optim.Adam, model.parameters(), stage=stage, lr=1e-3)
    full = make_model(42, (64, 128, 10))
    fopt = torch.optim.Adam(full.parameters(), lr=1e-3)
    x = torch.randn(8, 64)
    for m, o in ((model, sopt), (full, fopt)):
        o.zero_grad()
        m(x).pow(2).mean().backward()
        o.step()
    full_bytes = sum(v.numel() * v.element_size() for s in fopt.state.values()
                     for v in s.values() if torch.is_tensor(v))
    numel = sum(p.numel() for p in model.parameters())
    n = hvd.size()
    assert sopt.shard_numel() <= -(-numel // n) + len(sopt._buckets)
    moments = 2 * 4 * sopt.shard_numel()
    assert sopt.optimizer_state_bytes() == moments + 4 * len(sopt._buckets)  # + step counts
    assert sopt.optimizer_state_bytes() <= full_bytes / n + 64


def test_stage2_keeps_no_full_gradients_and_overlaps():
    model = make_model(43, (10, 32, 32, 4))
    sopt = hvd.ShardedOptimizer(torch.optim.SGD, model.parameters(), stage=2, lr=0.1,
                                bucket_bytes=1024)
    x, y = dataset(PER_RANK, hvd.size())
    xs, ys = local_batch(x, y)
    sopt.zero_grad()
    F.cross_entropy(model(xs), ys).backward()
    in_flight = sum(1 for b in sopt._buckets if b.handle is not None)
    grads = [p.grad for p in model.parameters()]
    sopt.step()
    numel = sum(p.numel() for p in model.parameters())
    assert in_flight == len(sopt._buckets)  # Every reducescatter started during backward.
    assert all(g is None for g in grads)
    assert sopt.gradient_bytes() <= 4 * (numel // hvd.size() + len(sopt._buckets))
    assert sopt.peak_staging_bytes < 4 * numel or len(sopt._buckets) == 1


@pytest.mark.parametrize("stage", [1, 2])
def test_gradient_accumulation_matches(stage):
    x, y = dataset(PER_RANK, hvd.size(), seed=44)
    dense, sharded = make_model(45, SIZES), make_model(45, SIZES)
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(dense.parameters(), lr=0.05),
                                    named_parameters=dense.named_parameters(),
                                    backward_passes_per_step=2)
    sopt = hvd.ShardedOptimizer(torch.optim.SGD, sharded.parameters(), stage=stage, lr=0.05,
                                bucket_bytes=512)
    run(dense, dopt, 3, x, y, passes=2)
    run(sharded, sopt, 3, x, y, passes=2)
    assert max_diff(dense, sharded) < 1e-5


def test_wraps_an_optimizer_instance_with_param_groups():
    x, y = dataset(PER_RANK, hvd.size(), seed=46)
    dense, sharded = make_model(47, SIZES), make_model(47, SIZES)

    def groups(m):
        return [{"params": m.layers[0].parameters(), "lr": 0.1},
                {"params": list(m.layers[1].parameters()) + list(m.layers[2].parameters()),
                 "lr": 0.01}]
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(groups(dense), lr=1.0, momentum=0.5))
    sopt = hvd.ShardedOptimizer(torch.optim.SGD(groups(sharded), lr=1.0, momentum=0.5),
                                stage=1, bucket_bytes=300)
    assert [g["lr"] for g in sopt.param_groups] == [0.1, 0.01]
    run(dense, dopt, 3, x, y)
    run(sharded, sopt, 3, x, y)
    assert max_diff(dense, sharded) < 1e-5


def test_clip_grad_norm_matches_torch():
    x, y = dataset(PER_RANK, hvd.size(), seed=48)
    ref, sharded = make_model(49, SIZES), make_model(49, SIZES)
    ropt = hvd.DistributedOptimizer(torch.optim.SGD(ref.parameters(), lr=0.1),
                                    named_parameters=ref.named_parameters())
    sopt = hvd.ShardedOptimizer(torch.optim.SGD, sharded.parameters(), stage=2, lr=0.1,
                                bucket_bytes=256)
    xs, ys = local_batch(x, y)
    for model, opt in ((ref, ropt), (sharded, sopt)):
        opt.zero_grad()
        (10 * F.cross_entropy(model(xs), ys)).backward()
        opt.synchronize()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
    norm = sopt.clip_grad_norm_(0.5)
    with ropt.skip_synchronize():
        ropt.step()
    sopt.step()
    assert abs(float(norm) - float(ref_norm)) < 1e-4 * float(ref_norm)
    assert max_diff(ref, sharded) < 1e-5


def test_state_dict_round_trip_and_errors():
    model = make_model(50, SIZES)
    sopt = hvd.ShardedOptimizer(torch.optim.Adam, model.parameters(), lr=0.01)
    x, y = dataset(PER_RANK, hvd.size())
    run(model, sopt, 1, x, y)
    saved = sopt.state_dict()
    other = hvd.ShardedOptimizer(torch.optim.Adam, make_model(50, SIZES).parameters(), lr=0.01)
    other.load_state_dict(saved)
    assert float(other.state_dict()["shard"]["state"][0]["step"]) == 1.0
    with pytest.raises(ValueError, match="stage"):
        hvd.ShardedOptimizer(torch.optim.SGD, model.parameters(), stage=3, lr=0.1)
    with pytest.raises(ValueError, match="not stepped"):
        hvd.ShardedOptimizer(sopt._inner)
