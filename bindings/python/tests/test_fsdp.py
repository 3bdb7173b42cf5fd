"""FullyShardedDataParallel (ZeRO 3, torch's SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD):
the pure layout and unit planning, training to the parameters of one process on
the whole batch, memory held per rank, prefetch and overlap order, mixed
precision, checkpoints, and the errors."""
import functools
import gc
import io
import random
import weakref

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from hvd.torch import fsdp as fsdp_mod
from hvd.torch import wrap
from helpers import dataset, identical_across_ranks, make_model

PER_RANK = 6
SIZES = (10, 17, 13, 4)  # Element counts that do not divide by the number of ranks.
S = hvd.ShardingStrategy
LINEAR = {torch.nn.Linear}

OPTIMIZERS = {
    "adam": (torch.optim.Adam, dict(lr=0.01, weight_decay=0.01)),
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
}


def local_batch(x, y):
    r = hvd.rank()
    return x[r * PER_RANK:(r + 1) * PER_RANK], y[r * PER_RANK:(r + 1) * PER_RANK]


def train(model, opt, steps, x, y, passes=1):
    for _ in range(steps):
        opt.zero_grad()
        for _ in range(passes):
            F.cross_entropy(model(x), y).backward()
        opt.step()


def max_state_diff(ref_model, state):
    return max((state[k].float() - v.float()).abs().max().item()
               for k, v in ref_model.state_dict().items())


@pytest.fixture(scope="module")
def hybrid_sets():
    """2 x 2 at 4 ranks; elsewhere shards of one rank, replicated over all."""
    n = hvd.size()
    sets = hvd.hybrid_process_sets(2 if n % 2 == 0 and n >= 4 else 1)
    yield sets
    sets.remove()


def process_set_for(strategy, hybrid_sets):
    return (hybrid_sets.shard, hybrid_sets.replicate) if strategy == S.HYBRID_SHARD \
        else hvd.global_process_set


# ---- pure planning -----------------------------------------------------------------------

def test_plan_flat_layout_property():
    rng = random.Random(5)
    for _ in range(300):
        numels = [rng.choice([0, 1, 2, 3, 7, 16, 33]) for _ in range(rng.randint(0, 6))]
        world = rng.randint(1, 5)
        lay = fsdp_mod.plan_flat_layout(numels, world)
        total = sum(numels)
        assert lay.total == total and lay.padded % world == 0
        assert 0 <= lay.padded - total < world
        assert lay.chunk * world == lay.padded
        assert list(lay.offsets) == [sum(numels[:i]) for i in range(len(numels))]
        covered = [0] * total
        for r in range(world):
            lo, hi = lay.shard_range(r)
            assert (lo, hi) == (r * lay.chunk, (r + 1) * lay.chunk)
            for i, a, b, at in lay.pieces(r):
                assert 0 <= a < b <= numels[i] and 0 <= at and at + b - a <= lay.chunk
                assert lo + at == lay.offsets[i] + a  # The same flat position.
                for e in range(lay.offsets[i] + a, lay.offsets[i] + b):
                    covered[e] += 1
        assert covered == [1] * total
    with pytest.raises(ValueError):
        fsdp_mod.plan_flat_layout([3], 0)


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(torch.tanh(self.fc(x)))


class Tower(torch.nn.Module):
    def __init__(self, d=8, depth=3, classes=4):
        super().__init__()
        self.embed = torch.nn.Linear(10, d)
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(depth))
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_assign_units_policies():
    torch.manual_seed(0)
    tower = Tower()
    names = lambda units: [u.name for u in units]  # noqa: E731

    def covered(units):
        got = [s.fqn for u in units for s in u.params]
        return sorted(got) == sorted(n for n, _ in tower.named_parameters())

    plain = wrap.assign_units(tower, None)
    assert names(plain) == [""] and covered(plain)
    by_class = wrap.assign_units(tower, {Block})
    assert names(by_class) == ["", "blocks.0", "blocks.1", "blocks.2"] and covered(by_class)
    assert [s.fqn for s in by_class[0].params] == ["embed.weight", "embed.bias", "head.weight",
                                                   "head.bias"]
    assert [s.fqn for s in by_class[2].params] == ["blocks.1.fc.weight", "blocks.1.fc.bias",
                                                   "blocks.1.norm.weight", "blocks.1.norm.bias"]
    # Size: a Block's fc (72) alone is not enough, a Block (88) or embed (88) is, the
    # head (36) is not, and the ModuleList never is.
    by_size = wrap.assign_units(tower, functools.partial(wrap.size_based_auto_wrap_policy,
                                                         min_num_params=80))
    assert names(by_size) == ["", "embed", "blocks.0", "blocks.1", "blocks.2"]
    assert covered(by_size)
    nested = wrap.assign_units(tower, wrap.ModuleWrapPolicy({Block, torch.nn.Linear}))
    assert names(nested) == ["", "embed", "blocks.0", "blocks.0.fc", "blocks.1", "blocks.1.fc",
                             "blocks.2", "blocks.2.fc", "head"] and covered(nested)
    assert [s.fqn for s in nested[2].params] == ["blocks.0.norm.weight", "blocks.0.norm.bias"]
    # Tied weights: one slot with two owners in one unit; refused across units.
    tower.head.weight = torch.nn.Parameter(torch.randn(4, 8))
    tower.embed2 = torch.nn.Linear(8, 4)
    tower.embed2.weight = tower.head.weight
    tied = wrap.assign_units(tower, None)
    spec = [s for s in tied[0].params if s.fqn == "head.weight"][0]
    assert [a for _, a in spec.owners] == ["weight", "weight"] and covered(tied)
    with pytest.raises(ValueError, match="shared by unit.*head.*embed2"):
        wrap.assign_units(tower, LINEAR)


# ---- numerics ----------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", [S.FULL_SHARD, S.SHARD_GRAD_OP, S.HYBRID_SHARD, S.NO_SHARD])
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_matches_single_process(strategy, kind, hybrid_sets):
    cls, kwargs = OPTIMIZERS[kind]
    x, y = dataset(PER_RANK, hvd.size(), seed=60)
    ref = make_model(61, SIZES)
    ropt = cls(ref.parameters(), **kwargs)
    model = hvd.FullyShardedDataParallel(make_model(61, SIZES), auto_wrap_policy=LINEAR,
                                         sharding_strategy=strategy,
                                         process_set=process_set_for(strategy, hybrid_sets))
    opt = cls(model.parameters(), **kwargs)
    train(ref, ropt, 4, x, y)
    train(model, opt, 4, *local_batch(x, y))
    state = model.full_state_dict()
    flat = torch.cat([v.reshape(-1) for v in state.values()])
    same = identical_across_ranks(flat, "check.fsdp.%s.%s" % (kind, strategy.name))
    assert len(model.units) == 4
    assert max_state_diff(ref, state) < 1e-5
    assert same


def test_tower_with_nested_units_and_accumulation():
    """Units inside units, LayerNorm, two backward passes per step, clipping."""
    x, y = dataset(PER_RANK, hvd.size(), seed=62)
    torch.manual_seed(63)
    ref = Tower()
    model = hvd.FullyShardedDataParallel(Tower(), auto_wrap_policy={Block, torch.nn.Linear})
    with torch.no_grad():  # Same start: load the reference's values.
        model.load_full_state_dict(ref.state_dict())
    ropt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    xs, ys = local_batch(x, y)
    for _ in range(3):
        ropt.zero_grad()
        opt.zero_grad()
        for _ in range(2):
            (10 * F.cross_entropy(ref(x), y)).backward()
            (10 * F.cross_entropy(model(xs), ys)).backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        norm = model.clip_grad_norm_(0.5)
        ropt.step()
        opt.step()
    assert abs(float(norm) - float(ref_norm)) < 1e-4 * float(ref_norm)
    assert max_state_diff(ref, model.full_state_dict()) < 1e-5


def test_eval_forward_and_an_unused_unit():
    x, y = dataset(PER_RANK, hvd.size(), seed=64)
    ref = make_model(65, SIZES + (3,))
    model = hvd.FullyShardedDataParallel(make_model(65, SIZES + (3,)), auto_wrap_policy=LINEAR)
    inner = model.module
    inner.forward = lambda t: inner.layers[2](torch.tanh(inner.layers[1](torch.tanh(
        inner.layers[0](t)))))  # layers[3] is never run: its gradient is reduced as zeros.
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ropt.zero_grad()
    F.cross_entropy(ref.layers[2](torch.tanh(ref.layers[1](torch.tanh(ref.layers[0](x))))),
                    y).backward()
    ropt.step()
    train(model, opt, 1, *local_batch(x, y))
    with torch.no_grad():
        out = model(x)
    expected = ref.layers[2](torch.tanh(ref.layers[1](torch.tanh(ref.layers[0](x)))))
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    assert float(grads[-1].abs().sum()) == 0.0  # The unused unit's shard.
    assert (out - expected).abs().max().item() < 1e-5
    assert model.gathered_units() == []


# ---- memory, prefetch, overlap ---------------------------------------------------------

def test_memory_per_rank_is_sharded():
    sizes = (64, 96, 96, 96, 10)
    inner = make_model(66, sizes)
    originals = [weakref.ref(p) for p in inner.parameters()]
    model = hvd.FullyShardedDataParallel(inner, auto_wrap_policy=LINEAR)
    gc.collect()
    # The full parameters are gone once wrapped: nothing refers to them any more.
    assert [r() for r in originals] == [None] * len(originals)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    full = make_model(66, sizes)
    fopt = torch.optim.Adam(full.parameters(), lr=1e-3)
    x = torch.randn(8, sizes[0])
    for m, o in ((model, opt), (full, fopt)):
        o.zero_grad()
        m(x).pow(2).mean().backward()
        o.step()
    n = hvd.size()
    numel = sum(p.numel() for p in full.parameters())
    units = len(model.units) - 1  # The root has no parameters of its own.
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v))
    full_state = sum(v.numel() * v.element_size() for s in fopt.state.values()
                     for v in s.values() if torch.is_tensor(v))
    biggest = max(model.unit_bytes().values())
    assert model.shard_numel() <= -(-numel // n) + units
    assert model.shard_bytes() == 4 * model.shard_numel()
    assert model.gradient_bytes() == 4 * model.shard_numel()
    assert state <= full_state / n + 8 * units + 4 * units
    assert model.gathered_units() == []  # Between steps: shards only.
    assert all(getattr(model.module.layers[i], "weight").is_meta for i in range(4))
    # During the step: at most two units gathered, and at most two units' flat
    # gradients in reduce-scatters.
    assert model.peak_units <= (2 if n > 1 else 4)
    if n > 1:
        assert model.peak_unsharded_bytes <= 4 * biggest


def test_prefetch_and_overlap_order():
    model = hvd.FullyShardedDataParallel(make_model(67, SIZES), auto_wrap_policy=LINEAR)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = local_batch(*dataset(PER_RANK, hvd.size(), seed=68))
    train(model, opt, 1, x, y)
    model.trace = []
    train(model, opt, 1, x, y)
    ev = [(e["event"], e["unit"]) for e in model.trace if "event" in e]
    if hvd.size() == 1:
        assert not any(k in ("issue_ag", "issue_rs") for k, _ in ev)
        return
    split = ev.index(("fwd_end", 0))  # The root (unit 0)'s forward ends: backward follows.
    fwd, bwd = ev[:split], ev[split:]
    # Forward: unit u+1's allgather starts before unit u's compute.
    for u in (1, 2):
        assert fwd.index(("issue_ag", u + 1)) < fwd.index(("fwd_begin", u))
    # Backward: unit 3 ran last and was kept, unit 2's allgather is prefetched while
    # unit 3 runs backward, and unit 1 (whose input needs no gradient, so only its
    # input is saved) is neither re-gathered nor prefetched: 4 allgathers a step.
    assert [k for k in bwd if k[0] == "issue_ag"] == [("issue_ag", 2)]
    assert bwd.index(("bwd_begin", 3)) < bwd.index(("issue_ag", 2)) < bwd.index(("bwd_begin", 2))
    assert ("bwd_begin", 1) not in bwd
    # Reduce-scatters start as each unit's gradient is complete, while the rest of
    # backward runs, and are waited for only later: unit 3's was still in flight when
    # unit 2's gradient was complete; all before the end of backward.
    assert bwd.index(("issue_rs", 3)) < bwd.index(("bwd_begin", 2))
    assert bwd.index(("issue_rs", 2)) < bwd.index(("wait_rs", 3))
    assert bwd.index(("issue_rs", 1)) < bwd.index(("final", None))
    assert model.peak_units <= 2


# ---- mixed precision -------------------------------------------------------------------

def test_mixed_precision_bf16():
    x, y = dataset(PER_RANK, hvd.size(), seed=69)
    ref = make_model(70, SIZES)
    mp = hvd.MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    model = hvd.FullyShardedDataParallel(make_model(70, SIZES), auto_wrap_policy=LINEAR,
                                         mixed_precision=mp)
    seen = []
    model.module.layers[1].register_forward_hook(
        lambda m, i, o: seen.append((m.weight.dtype, i[0].dtype, o.dtype)))
    ropt = torch.optim.Adam(ref.parameters(), lr=0.01)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    train(ref, ropt, 3, x, y)
    train(model, opt, 3, *local_batch(x, y))
    state = model.full_state_dict()
    assert seen[0] == (torch.bfloat16,) * 3
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32
               for p in model.parameters())
    assert all(v.dtype == torch.float32 for v in state.values())
    assert max_state_diff(ref, state) < 3e-2


# ---- checkpoints -----------------------------------------------------------------------

def test_full_state_dict_round_trip():
    x, y = local_batch(*dataset(PER_RANK, hvd.size(), seed=71))
    model = hvd.FullyShardedDataParallel(make_model(72, SIZES), auto_wrap_policy=LINEAR)
    train(model, torch.optim.SGD(model.parameters(), lr=0.5), 2, x, y)
    on_rank0 = model.full_state_dict(rank0_only=True)
    everywhere = model.full_state_dict()
    other = hvd.FullyShardedDataParallel(make_model(73, SIZES), auto_wrap_policy=LINEAR)
    other.load_full_state_dict(on_rank0 if hvd.rank() == 0 else None, rank0_only=True)
    back = other.full_state_dict()
    third = hvd.FullyShardedDataParallel(make_model(74, SIZES), auto_wrap_policy=LINEAR)
    with hvd.FullyShardedDataParallel.state_dict_type(third, hvd.StateDictType.FULL_STATE_DICT):
        third.load_state_dict(everywhere)
        via_module = third.state_dict()
    plain = make_model(0, SIZES)
    plain.load_state_dict(everywhere)
    with torch.no_grad():
        out_plain, out_other = plain(x), other(x)
    assert (len(on_rank0) > 0) == (hvd.rank() == 0)
    assert list(everywhere) == list(make_model(0, SIZES).state_dict())
    assert all(torch.equal(everywhere[k], back[k]) for k in everywhere)
    assert all(torch.equal(everywhere[k], via_module[k]) for k in everywhere)
    assert torch.equal(out_plain, out_other)
    with pytest.raises(RuntimeError, match="missing keys.*layers.0.bias"):
        other.load_full_state_dict({k: v for k, v in everywhere.items() if k != "layers.0.bias"})


def test_sharded_state_dict_round_trip():
    x, y = local_batch(*dataset(PER_RANK, hvd.size(), seed=75))
    model = hvd.FullyShardedDataParallel(make_model(76, SIZES), auto_wrap_policy=LINEAR)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    train(model, opt, 2, x, y)
    buf = io.BytesIO()
    with hvd.FullyShardedDataParallel.state_dict_type(model, hvd.StateDictType.SHARDED_STATE_DICT):
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    other = hvd.FullyShardedDataParallel(make_model(77, SIZES), auto_wrap_policy=LINEAR)
    oopt = torch.optim.Adam(other.parameters(), lr=0.01)
    other.set_state_dict_type(hvd.StateDictType.SHARDED_STATE_DICT)
    other.load_state_dict(saved["model"])
    oopt.load_state_dict(saved["optim"])
    same_now = all(torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters()))
    train(model, opt, 1, x, y)
    train(other, oopt, 1, x, y)
    same_after = all(torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters()))
    moved = dict(saved["model"])
    moved["_fsdp"] = dict(moved["_fsdp"], rank=(moved["_fsdp"]["rank"] + 1) % 7)
    assert saved["model"]["_fsdp"]["world"] == hvd.size()
    assert same_now and same_after
    with pytest.raises(ValueError, match="shard rank"):
        other.load_sharded_state_dict(moved)
    with pytest.raises(ValueError, match="not a sharded state dict"):
        other.load_sharded_state_dict(model.full_state_dict())


def test_meta_device_init_is_synchronised():
    meta = torch.nn.Sequential(torch.nn.Linear(10, 16, device="meta"), torch.nn.Tanh(),
                               torch.nn.Linear(16, 12, device="meta"), torch.nn.Tanh(),
                               torch.nn.Linear(12, 4, device="meta"))
    real = []  # Elements of real (not meta, not yet sharded) parameters at each call.

    def init(m):
        m.to_empty(device="cpu")
        m.reset_parameters()
        real.append(sum(p.numel() for p in meta.parameters() if not p.is_meta))

    torch.manual_seed(1000 + hvd.rank())  # Different on every rank: the broadcast decides.
    model = hvd.FullyShardedDataParallel(meta, auto_wrap_policy=LINEAR, sync_module_states=True,
                                         param_init_fn=init)
    state = model.full_state_dict()
    flat = torch.cat([v.reshape(-1) for v in state.values()])
    same = identical_across_ranks(flat, "check.fsdp.meta")
    assert real == [12 * 4 + 4, 16 * 12 + 12, 10 * 16 + 16]  # One unit at a time.
    assert not any(v.is_meta for v in state.values())
    assert same and float(flat.abs().sum()) > 0


# ---- errors ----------------------------------------------------------------------------

def test_parameters_that_differ_across_ranks(multi_rank):
    with pytest.raises(ValueError, match=r"disagree on the module's parameter values: .*unit 'layers.1', "
                                         r"parameters layers.1.weight, layers.1.bias"):
        model = make_model(78, SIZES)
        if hvd.rank() == hvd.size() - 1:
            with torch.no_grad():
                model.layers[1].weight.add_(1)
                model.layers[1].bias.add_(1)
        hvd.FullyShardedDataParallel(model, auto_wrap_policy=LINEAR)
    last = hvd.size() - 1
    with pytest.raises(ValueError, match=r"disagree on the module's layout: rank %d has unit 'layers.0' "
                                         r"parameter layers.0.weight \(1[67], 10\)" % last):
        sizes = (10, 16 if hvd.rank() == last else 17, 13, 4)
        hvd.FullyShardedDataParallel(make_model(79, sizes), auto_wrap_policy=LINEAR)
    # With sync_module_states the first rank's values win.
    torch.manual_seed(hvd.rank())
    model = hvd.FullyShardedDataParallel(torch.nn.Linear(5, 3), sync_module_states=True)
    flat = torch.cat([v.reshape(-1) for v in model.full_state_dict().values()])
    assert identical_across_ranks(flat, "check.fsdp.sync")


def test_refuses_optimizers_with_whole_tensor_statistics():
    model = hvd.FullyShardedDataParallel(make_model(80, SIZES), auto_wrap_policy=LINEAR)

    class FusedLAMB(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3):
            super().__init__(params, dict(lr=lr))

    class MyAdam(torch.optim.Adam):
        pass

    with pytest.raises(ValueError, match="LBFGS needs whole-tensor statistics"):
        torch.optim.LBFGS(model.parameters())
    with pytest.raises(ValueError, match="FusedLAMB needs whole-tensor statistics"):
        FusedLAMB(model.parameters())
    with pytest.raises(ValueError, match="Adafactor"):
        fsdp_mod.check_optimizer(type("Adafactor", (torch.optim.Optimizer,), {}))
    with pytest.raises(ValueError, match="already reduced"):
        fsdp_mod.check_optimizer(hvd.ShardedOptimizer)
    with pytest.raises(ValueError, match="not a DistributedOptimizer"):
        fsdp_mod.check_optimizer(hvd.DistributedOptimizer(torch.optim.SGD(
            torch.nn.Linear(2, 2).parameters(), lr=0.1)))
    MyAdam(model.parameters())
    torch.optim.SGD(model.parameters(), lr=0.1)
    fsdp_mod.check_optimizer(torch.optim.AdamW)


def test_forward_on_a_rank_outside_the_set(multi_rank):
    n = hvd.size()
    ps = hvd.add_process_set(list(range(n - 1)))
    try:
        x, y = local_batch(*dataset(PER_RANK, n, seed=81))
        model = hvd.FullyShardedDataParallel(make_model(82, SIZES), process_set=ps,
                                             auto_wrap_policy=LINEAR)
        params = list(model.parameters())
        if ps.included():
            train(model, torch.optim.SGD(params, lr=0.1), 1, x, y)
            assert len(params) == 3
        else:
            assert params == []
            with pytest.raises(ValueError, match="rank %d is not a member" % (n - 1)):
                model(x)
            with pytest.raises(ValueError, match="not a member"):
                model.full_state_dict()
    finally:
        hvd.remove_process_set(ps)


def test_argument_errors():
    with pytest.raises(ValueError, match="HYBRID_SHARD needs process_set"):
        hvd.FullyShardedDataParallel(make_model(83, SIZES), sharding_strategy=S.HYBRID_SHARD)
    with pytest.raises(ValueError, match="needs HYBRID_SHARD"):
        hvd.FullyShardedDataParallel(make_model(83, SIZES), process_set=(
            hvd.global_process_set, hvd.global_process_set))
    mixed = make_model(83, SIZES)
    mixed.layers[0].bias.requires_grad_(False)
    with pytest.raises(ValueError, match="unit 'layers.0' mixes parameters.*layers.0.bias"):
        hvd.FullyShardedDataParallel(mixed, auto_wrap_policy=LINEAR)


# ---- CUDA --------------------------------------------------------------------------------

def _cuda_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    if not hvd.cuda_built():
        pytest.skip("libhvd was built without CUDA")
    if torch.cuda.device_count() < hvd.local_size():
        pytest.skip("fewer GPUs than local ranks")
    torch.cuda.set_device(hvd.local_rank())
    return torch.device("cuda", hvd.local_rank())


@pytest.mark.parametrize("strategy", [S.FULL_SHARD, S.SHARD_GRAD_OP])
def test_cuda_matches_single_process(strategy):
    dev = _cuda_or_skip()
    x, y = dataset(PER_RANK, hvd.size(), seed=84)
    x, y = x.to(dev), y.to(dev)
    ref = make_model(85, SIZES).to(dev)
    ropt = torch.optim.Adam(ref.parameters(), lr=0.01)
    model = hvd.FullyShardedDataParallel(make_model(85, SIZES).to(dev), auto_wrap_policy=LINEAR,
                                         sharding_strategy=strategy)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    train(ref, ropt, 3, x, y)
    train(model, opt, 3, *local_batch(x, y))
    state = model.full_state_dict(cpu_offload=False)
    assert all(p.is_cuda for p in model.parameters())
    assert max_state_diff(ref, state) < 1e-5


def test_cuda_mixed_precision_fp16():
    dev = _cuda_or_skip()
    x, y = dataset(PER_RANK, hvd.size(), seed=86)
    x, y = x.to(dev), y.to(dev)
    ref = make_model(87, SIZES).to(dev)
    mp = hvd.MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32)
    model = hvd.FullyShardedDataParallel(make_model(87, SIZES).to(dev), auto_wrap_policy=LINEAR,
                                         mixed_precision=mp)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(ref, ropt, 2, x, y)
    train(model, opt, 2, *local_batch(x, y))
    assert max_state_diff(ref, model.full_state_dict()) < 1e-2
