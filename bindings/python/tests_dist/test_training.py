"""torch's own data-parallel wrappers over "dprun" train to the same parameters as
over Gloo from the same seed: DDP (with its comm hooks), FSDP (full shard),
fully_shard (FSDP2), ZeroRedundancyOptimizer; and the groups DeviceMesh and
new_group make are dprun process sets that reduce within themselves."""
import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from conftest import TORCH2

STEPS = 4


def mlp(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                         nn.Linear(8, 1)).to(dtype)


def batches(dtype=torch.float64):
    """This rank's batches: different data on every rank."""
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    return [(torch.randn(6, 12, generator=g, dtype=dtype), torch.randn(6, 1, generator=g,
                                                                      dtype=dtype))
            for _ in range(STEPS)]


def train(model, optimizer, data):
    for x, y in data:
        optimizer.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        optimizer.step()


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def assert_same(a, b, rtol=1e-10):
    """Equal parameters: bitwise at 2 ranks, where a sum has one order; within
    `rtol` (float64 models) beyond, where dprun and Gloo add in other orders."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if dist.get_world_size() <= 2 and rtol <= 1e-10:
            assert torch.equal(x, y), (x - y).abs().max()
        else:
            assert torch.allclose(x, y, rtol=rtol, atol=rtol / 100), (x - y).abs().max()


def ddp_pair(hook=None, **kwargs):
    """(model over dprun, model over Gloo), both DDP, from the same seed, after
    training on this rank's data."""
    DDP = nn.parallel.DistributedDataParallel
    gloo = pytest.gloo_group
    base = mlp()
    ours, ref = DDP(copy.deepcopy(base), **kwargs), DDP(copy.deepcopy(base),
                                                       process_group=gloo, **kwargs)
    if hook is not None:
        state_ours, state_ref, fn = hook(None), hook(gloo), hook
        ours.register_comm_hook(state_ours[0], state_ours[1])
        ref.register_comm_hook(state_ref[0], state_ref[1])
    data = batches()
    for model in (ours, ref):
        train(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), data)
    return ours, ref


@pytest.fixture(autouse=True)
def _gloo(gloo):
    pytest.gloo_group = gloo


def test_ddp_trains_to_glooss_parameters():
    ours, ref = ddp_pair()
    assert_same(params(ours.module), params(ref.module))
    # And the ranks agree (averaged gradients, not local ones).
    mine = torch.cat([p.reshape(-1) for p in params(ours.module)])
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    assert all(torch.equal(mine, other) for other in everyone)


def test_ddp_with_small_buckets_and_unused_parameters():
    ours, ref = ddp_pair(bucket_cap_mb=0.0005, find_unused_parameters=True)
    assert_same(params(ours.module), params(ref.module))


def _fp16_hook(group):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    return group, default_hooks.fp16_compress_hook


def _custom_hook(group):
    """A hook written against Work.get_future(), as users write them."""
    def hook(process_group, bucket):
        buf = bucket.buffer() / dist.get_world_size(process_group)
        fut = dist.all_reduce(buf, group=process_group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    return group, hook


@pytest.mark.parametrize("hook", [_fp16_hook, _custom_hook], ids=["fp16_compress", "custom"])
def test_ddp_comm_hooks_behave_as_on_gloo(hook):
    ours, ref = ddp_pair(hook=hook)
    # fp16 compression rounds each sum, so a different order may round otherwise.
    assert_same(params(ours.module), params(ref.module),
                rtol=1e-3 if hook is _fp16_hook else 1e-10)


def test_ddp_powersgd_hook_runs_as_on_gloo():
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

    def hook(group):
        state = powerSGD.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                       start_powerSGD_iter=2, random_seed=0)
        return state, powerSGD.powerSGD_hook
    ours, ref = ddp_pair(hook=hook)
    # Its orthogonalization amplifies the last bits where the sums' order differs.
    assert_same(params(ours.module), params(ref.module), rtol=1e-3)


def _fsdp_train(group):
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy
    except (ImportError, ValueError) as e:  # torch 1.13's FSDP on Python 3.11
        pytest.skip("this torch's FullyShardedDataParallel cannot be imported: %s" % e)
    cpu = {"device_id": torch.device("cpu")} if TORCH2 else {}  # else it asks for a GPU
    model = FSDP(mlp(), process_group=group, sharding_strategy=ShardingStrategy.FULL_SHARD,
                 use_orig_params=True, **cpu)
    train(model, torch.optim.SGD(model.parameters(), lr=0.05), batches())
    with FSDP.summon_full_params(model):
        return params(model)


def test_fsdp_full_shard_trains_to_glooss_parameters():
    try:
        ours = _fsdp_train(None)
    except RuntimeError as e:
        if "accelerator" in str(e) or "CUDA" in str(e):
            pytest.skip("this torch's FullyShardedDataParallel needs a GPU: %s" % e)
        raise
    assert_same(ours, _fsdp_train(pytest.gloo_group))


def test_fully_shard_trains_to_glooss_parameters(torch2):
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        pytest.skip("this torch has no fully_shard")
    from torch.distributed.device_mesh import DeviceMesh

    def run(group):
        model = mlp()
        mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        train(model, torch.optim.SGD(model.parameters(), lr=0.05), batches())
        return [p.full_tensor().detach().clone() for p in model.parameters()]
    assert_same(run(None), run(pytest.gloo_group))


def test_zero_redundancy_optimizer_matches_gloo():
    from torch.distributed.optim import ZeroRedundancyOptimizer

    def run(group):
        model = nn.parallel.DistributedDataParallel(
            mlp(), process_group=group)
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                      lr=0.01, process_group=group)
        train(model, opt, batches())
        return params(model.module)
    assert_same(run(None), run(pytest.gloo_group))


def test_new_group_reduces_within_its_ranks(multi_rank):
    n, me = dist.get_world_size(), dist.get_rank()
    evens = list(range(0, n, 2))
    odds = list(range(1, n, 2))
    g_even, g_odd = dist.new_group(evens), dist.new_group(odds)
    mine = g_even if me % 2 == 0 else g_odd
    members = evens if me % 2 == 0 else odds
    x = torch.tensor([float(me)])
    dist.all_reduce(x, group=mine)
    assert x.item() == sum(members)
    y = torch.tensor([float(me)])
    dist.broadcast(y, src=members[-1], group=mine)
    assert y.item() == members[-1]
    assert dist.get_rank(mine) == members.index(me)
    dist.barrier()


def test_device_mesh_2d_reduces_along_each_dimension(torch2):
    n, me = dist.get_world_size(), dist.get_rank()
    if n != 4:
        pytest.skip("a 2 x 2 mesh needs 4 ranks")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    row, col = me // 2, me % 2
    x = torch.tensor([float(me)])
    dist.all_reduce(x, group=mesh.get_group("tp"))
    assert x.item() == 2 * row + 2 * row + 1  # the two ranks of my row
    y = torch.tensor([float(me)])
    dist.all_reduce(y, group=mesh.get_group("dp"))
    assert y.item() == col + (2 + col)  # the two ranks of my column
    assert dist.get_backend(mesh.get_group("tp")) == "dprun"


def test_functional_collectives_reach_the_backend(torch2):
    import torch.distributed._functional_collectives as funcol
    n, me = dist.get_world_size(), dist.get_rank()
    out = funcol.all_reduce(torch.tensor([float(me + 1)]), "sum", dist.group.WORLD)
    assert out.item() == n * (n + 1) / 2
    gathered = funcol.all_gather_tensor(torch.tensor([float(me)]), 0, dist.group.WORLD)
    assert gathered.tolist() == [float(r) for r in range(n)]
