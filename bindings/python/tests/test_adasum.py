"""op=Adasum: allreduce in every form and both front-ends against a local reference
built from every rank's deterministic input (any number of ranks: the suite runs
under -np 2 and -np 4; run it under -np 3 by hand), the refusals, gradients,
process sets, CUDA tensors staged through host memory, and
DistributedOptimizer(op=Adasum) against a single-process replay of Horovod's
algorithm."""
import math
import os
import re
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hvd
import hvd.numpy as hnp
import hvd.torch as ht
from hvd.torch import _adasum_host
from helpers import flat_params, identical_across_ranks, make_model

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SQRT_DBL_MIN = math.sqrt(sys.float_info.min)

# ---- the reference ------------------------------------------------------------------


def rounder(dtype):
    """float64 array -> the values `dtype` (a torch dtype name) stores for it."""
    t = getattr(torch, dtype)
    return lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64)).to(t).to(
        torch.float64).numpy()


def combine(a, b):
    dot, aa, bb = float(np.dot(a, b)), float(np.dot(a, a)), float(np.dot(b, b))
    ca = 1.0 if aa < SQRT_DBL_MIN else 1.0 - dot / (2 * aa)
    cb = 1.0 if bb < SQRT_DBL_MIN else 1.0 - dot / (2 * bb)
    return ca * a + cb * b


def tree(vectors, dtype="float64"):
    """Neighbours paired level by level in rank order, an odd one out carried up,
    every combination rounded to the dtype."""
    rnd = rounder(dtype)
    level = [rnd(np.ravel(v)) for v in vectors]
    while len(level) > 1:
        nxt = [rnd(combine(level[i], level[i + 1])) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def rank_vector(rank, n, seed):
    """Rank `rank`'s input: a direction every rank shares, scaled per rank, plus
    noise, so the coefficients are far from 1 and the tree's shape matters."""
    common = np.random.default_rng(seed).standard_normal(n)
    noise = np.random.default_rng(1000 * seed + rank + 1).standard_normal(n)
    return (0.3 + 0.7 * rank) * common + (0.2 if rank % 2 else 1.0) * noise


def expected(n, seed, dtype, ranks=None, pre=1.0, post=1.0):
    ranks = list(range(ht.size())) if ranks is None else ranks
    rnd = rounder(dtype)
    return rnd(post * tree([pre * rnd(rank_vector(r, n, seed)) for r in ranks], dtype))


TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 2e-2}


def assert_close(got, want, dtype, what):
    got = np.ravel(np.asarray(got, dtype=np.float64))
    tol = TOLERANCE[dtype] * max(float(np.abs(want).max()) if want.size else 0.0, 1e-30)
    worst = float(np.abs(got - want).max()) if want.size else 0.0
    assert got.shape == want.shape and worst <= tol, (
        "%s on rank %d of %d: off by %g (tolerance %g)" % (what, ht.rank(), ht.size(), worst, tol))


def as_float64(t):
    if isinstance(t, np.ndarray):
        return t.astype(np.float64)
    return t.detach().as_subclass(torch.Tensor).to(torch.float64).numpy()


def torch_input(n, seed, dtype, shape=None):
    t = torch.from_numpy(rank_vector(ht.rank(), n, seed)).to(getattr(torch, dtype))
    return t.reshape(shape) if shape else t


def numpy_input(n, seed, dtype):
    return rank_vector(ht.rank(), n, seed).astype(dtype)


# ---- allreduce ----------------------------------------------------------------------

def test_adasum_is_hvd_h_value():
    header = open(os.path.join(REPO, "bindings", "c", "hvd.h")).read()
    body = re.search(r"typedef enum \{([^}]*)\} hvd_reduce_op_t;", header).group(1)
    names = re.findall(r"^\s*(HVD_[A-Z0-9_]+)", body, re.M)
    assert names.index("HVD_ADASUM") == ht.Adasum == hnp.Adasum == hvd._lib.ADASUM


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_torch_allreduce_matches_reference(dtype):
    n, seed = 60, 11
    out = ht.allreduce(torch_input(n, seed, dtype, (3, 4, 5)), op=ht.Adasum,
                       name="adasum.torch.%s" % dtype)
    same = identical_across_ranks(out, "adasum.torch.%s.check" % dtype)
    assert out.shape == (3, 4, 5) and out.dtype == getattr(torch, dtype)
    assert_close(as_float64(out), expected(n, seed, dtype), dtype, "allreduce")
    assert same


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_numpy_allreduce_matches_reference(dtype):
    n, seed = 33, 12
    out = hnp.allreduce(numpy_input(n, seed, dtype).reshape(3, 11), op=hnp.Adasum,
                        name="adasum.numpy.%s" % dtype)
    same = identical_across_ranks(torch.from_numpy(np.ascontiguousarray(out)),
                                  "adasum.numpy.%s.check" % dtype)
    assert out.shape == (3, 11) and out.dtype == np.dtype(dtype)
    assert_close(as_float64(out), expected(n, seed, dtype), dtype, "numpy allreduce")
    assert same


def test_every_allreduce_form():
    sizes = [17, 1, 0, 300]
    results = {}
    t = torch_input(40, 20, "float32")
    results["allreduce_"] = (ht.allreduce_(t, op=ht.Adasum, name="adasum.inplace"), 40, 20)
    h = ht.allreduce_async(torch_input(41, 21, "float32"), op=ht.Adasum, name="adasum.async")
    results["allreduce_async"] = (ht.synchronize(h), 41, 21)
    t2 = torch_input(42, 22, "float32")
    h = ht.allreduce_async_(t2, op=ht.Adasum, name="adasum.async_")
    assert ht.synchronize(h) is t2
    results["allreduce_async_"] = (t2, 42, 22)
    grouped = ht.grouped_allreduce([torch_input(n, 30 + i, "float32") for i, n in enumerate(sizes)],
                                   op=ht.Adasum, name="adasum.grouped")
    ins = [torch_input(n, 40 + i, "float64") for i, n in enumerate(sizes)]
    grouped_ = ht.grouped_allreduce_(ins, op=ht.Adasum, name="adasum.grouped_")
    h = ht.grouped_allreduce_async([torch_input(n, 50 + i, "float16") for i, n in enumerate(sizes)],
                                   op=ht.Adasum, name="adasum.grouped_async")
    grouped_async = ht.synchronize(h)
    np_grouped = hnp.grouped_allreduce([numpy_input(n, 60 + i, "float32")
                                        for i, n in enumerate(sizes)], op=hnp.Adasum,
                                       name="adasum.np.grouped")
    np_inplace = numpy_input(25, 70, "float64")
    hnp.allreduce_(np_inplace, op=hnp.Adasum, name="adasum.np.inplace")

    for what, (out, n, seed) in results.items():
        assert_close(as_float64(out), expected(n, seed, "float32"), "float32", what)
    assert all(a is b for a, b in zip(grouped_, ins))
    for i, n in enumerate(sizes):
        assert_close(as_float64(grouped[i]), expected(n, 30 + i, "float32"), "float32", "grouped")
        assert_close(as_float64(grouped_[i]), expected(n, 40 + i, "float64"), "float64", "grouped_")
        assert_close(as_float64(grouped_async[i]), expected(n, 50 + i, "float16"), "float16",
                     "grouped_async")
        assert_close(np_grouped[i], expected(n, 60 + i, "float32"), "float32", "numpy grouped")
    assert_close(np_inplace, expected(25, 70, "float64"), "float64", "numpy allreduce_")


def test_prescale_before_postscale_after():
    out = ht.allreduce(torch_input(30, 80, "float32"), op=ht.Adasum, prescale_factor=0.5,
                       postscale_factor=3.0, name="adasum.scaled")
    assert_close(as_float64(out), expected(30, 80, "float32", pre=0.5, post=3.0), "float32",
                 "scaled")


def test_refusals_name_the_tensor():
    with pytest.raises(hvd.InvalidArgumentError,
                       match="allreduce.adasum.int.*Adasum takes float16, bfloat16, float32 or "
                             "float64, not int32"):
        ht.allreduce(torch.ones(3, dtype=torch.int32), op=ht.Adasum, name="adasum.int")
    with pytest.raises(hvd.InvalidArgumentError, match="not int64"):
        hnp.allreduce(np.ones(3, dtype=np.int64), op=hnp.Adasum, name="adasum.np.int")
    with pytest.raises(hvd.InvalidArgumentError, match="not uint8"):
        ht.grouped_allreduce([torch.ones(2), torch.ones(2, dtype=torch.uint8)], op=ht.Adasum,
                             name="adasum.grouped.int")
    with pytest.raises(hvd.InvalidArgumentError, match="reducescatter supports only sum and"):
        ht.reducescatter(torch.ones(2 * ht.size()), op=ht.Adasum, name="adasum.rs")
    # Nothing was enqueued: the runtime goes on.
    out = ht.allreduce(torch.ones(2), op=ht.Adasum, name="adasum.after.refusals")
    assert torch.equal(out, torch.ones(2))  # Equal vectors combine to themselves.


def test_gradient_is_the_adasum_allreduce_of_the_gradient():
    # As Horovod: the backward of allreduce(op=Adasum) allreduces the gradient with Adasum.
    x = torch.zeros(8, dtype=torch.float64, requires_grad=True)
    w = torch.from_numpy(rank_vector(ht.rank(), 8, 90))
    (ht.allreduce(x, op=ht.Adasum, name="adasum.grad") * w).sum().backward()
    xs = [torch.zeros(3, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    ws = [torch.from_numpy(rank_vector(ht.rank(), 3, 91 + i)) for i in range(2)]
    outs = ht.grouped_allreduce(xs, op=ht.Adasum, name="adasum.grouped.grad")
    sum((o * wi).sum() for o, wi in zip(outs, ws)).backward()
    assert_close(x.grad.numpy(), expected(8, 90, "float64"), "float64", "gradient")
    for i in range(2):
        assert_close(xs[i].grad.numpy(), expected(3, 91 + i, "float64"), "float64",
                     "grouped gradient")


def test_process_set_combines_its_members_in_set_order():
    if ht.size() < 3:
        pytest.skip("needs at least 3 ranks")
    members = [r for r in range(ht.size()) if r != 1]
    ps = ht.add_process_set(members)
    try:
        if ps.included():
            out = ht.allreduce(torch_input(20, 100, "float32"), op=ht.Adasum, process_set=ps,
                               name="adasum.set")
            assert_close(as_float64(out), expected(20, 100, "float32", ranks=members),
                         "float32", "process set")
    finally:
        assert ht.remove_process_set(ps)


# ---- CUDA tensors -------------------------------------------------------------------

class _ClaimsCuda(torch.Tensor):
    """A CPU tensor whose .device says cuda:0 (see test_cuda.py): reaches the staging
    branch without a GPU. The staging only copies to and from it."""

    @property
    def device(self):
        return torch.device("cuda:0")

    @property
    def is_cuda(self):
        return True


def claims_cuda(t):
    return torch.Tensor._make_subclass(_ClaimsCuda, t)


def test_cuda_tensors_go_through_host_memory_with_one_warning(monkeypatch):
    monkeypatch.setattr(_adasum_host, "_warned", False)
    t = claims_cuda(torch_input(30, 110, "float32"))
    with pytest.warns(RuntimeWarning, match="host memory"):
        out = ht.allreduce(t, op=ht.Adasum, name="adasum.cuda")
    inplace = claims_cuda(torch_input(31, 111, "float32"))
    cpu = torch_input(5, 112, "float32")
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        same = ht.allreduce_(inplace, op=ht.Adasum, name="adasum.cuda.inplace")
        group = ht.grouped_allreduce([claims_cuda(torch_input(7, 113, "float32")), cpu],
                                     op=ht.Adasum, name="adasum.cuda.grouped")
    assert not [w for w in later if "host memory" in str(w.message)]  # Once per process.
    assert out.device.type == "cuda" and out is not t
    assert same is inplace
    assert group[0].device.type == "cuda" and group[1].device.type == "cpu"
    assert_close(as_float64(out), expected(30, 110, "float32"), "float32", "staged")
    assert_close(as_float64(inplace), expected(31, 111, "float32"), "float32", "staged in place")
    assert_close(as_float64(group[0]), expected(7, 113, "float32"), "float32", "staged grouped")
    assert_close(as_float64(group[1]), expected(5, 112, "float32"), "float32", "grouped cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_cuda_tensor_matches_cpu():
    device = torch.device("cuda", ht.local_rank() % torch.cuda.device_count())
    out = ht.allreduce(torch_input(50, 120, "float32").to(device), op=ht.Adasum,
                       name="adasum.real.cuda")
    assert out.device == device
    assert_close(as_float64(out.cpu()), expected(50, 120, "float32"), "float32", "real cuda")


# ---- DistributedOptimizer(op=Adasum) ------------------------------------------------

def batch(rank, step, micro, n=4):
    g = torch.Generator().manual_seed(10000 * step + 100 * micro + rank)
    return torch.randn(n, 10, generator=g), torch.randint(0, 4, (n,), generator=g)


def make_sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def replay(steps, passes, size, seed):
    """Horovod's algorithm in one process: every rank's replica steps its own SGD on
    its own gradients; the per-parameter updates are combined by the Adasum tree
    (float32, as the runtime stores each level) and every replica takes
    start + combined update."""
    replicas = [make_model(seed) for _ in range(size)]
    opts = [make_sgd(m.parameters()) for m in replicas]
    for step in range(steps):
        starts = [p.detach().clone() for p in replicas[0].parameters()]
        deltas = []
        for r, (model, opt) in enumerate(zip(replicas, opts)):
            for micro in range(passes):
                x, y = batch(r, step, micro)
                F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            deltas.append([(p.detach() - s) for p, s in zip(model.parameters(), starts)])
        for i, start in enumerate(starts):
            combined = tree([d[i].double().numpy() for d in deltas], "float32")
            new = start + torch.from_numpy(combined).float().reshape(start.shape)
            for model in replicas:
                list(model.parameters())[i].data.copy_(new)
    return replicas[0]


@pytest.mark.parametrize("passes", [1, 2])
def test_distributed_optimizer_matches_replay(passes):
    steps, seed = 3, 5
    model = make_model(seed)
    opt = ht.DistributedOptimizer(make_sgd(model.parameters()),
                                  named_parameters=model.named_parameters(), op=ht.Adasum,
                                  backward_passes_per_step=passes)
    assert isinstance(opt, torch.optim.SGD)
    for step in range(steps):
        for micro in range(passes):
            x, y = batch(ht.rank(), step, micro)
            F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    same = identical_across_ranks(flat_params(model), "adasum.opt.check.%d" % passes)
    want = flat_params(replay(steps, passes, ht.size(), seed))
    got = flat_params(model)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), float((got - want).abs().max())
    assert same


def test_distributed_optimizer_with_an_unused_parameter():
    # A parameter no forward pass uses still takes part (its delta is zero).
    model = make_model(6)
    extra = torch.nn.Linear(3, 3)
    params = list(model.parameters()) + list(extra.parameters())
    named = list(model.named_parameters()) + [("extra." + k, v) for k, v in extra.named_parameters()]
    before = [p.detach().clone() for p in extra.parameters()]
    opt = ht.DistributedOptimizer(make_sgd(params), named_parameters=named, op=ht.Adasum)
    x, y = batch(ht.rank(), 0, 0)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    same = identical_across_ranks(flat_params(model), "adasum.opt.unused.check")
    assert all(torch.equal(p, b) for p, b in zip(extra.parameters(), before))
    assert same


def test_distributed_optimizer_usage_errors(multi_rank):
    model = make_model(7)
    opt = ht.DistributedOptimizer(make_sgd(model.parameters()),
                                  named_parameters=model.named_parameters(), op=ht.Adasum)
    with pytest.raises(AssertionError, match="Skipping synchronization is not supported"):
        with opt.skip_synchronize():
            pass
    x, y = batch(ht.rank(), 0, 0)
    F.cross_entropy(model(x), y).backward()
    opt.synchronize()  # A no-op, as in Horovod.
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    opt.zero_grad()
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        ht.DistributedOptimizer(make_sgd(model.parameters()), op=ht.Adasum,
                                backward_passes_per_step=0)


def test_distributed_optimizer_too_many_backward_passes(multi_rank):
    model = make_model(8)
    opt = ht.DistributedOptimizer(make_sgd(model.parameters()),
                                  named_parameters=model.named_parameters(), op=ht.Adasum,
                                  backward_passes_per_step=1)
    x, y = batch(ht.rank(), 0, 0)
    F.cross_entropy(model(x), y).backward()
    with pytest.raises((AssertionError, RuntimeError), match="backward_passes_per_step"):
        F.cross_entropy(model(x), y).backward()
    opt.step()  # Completes the first pass's allreduces on every rank.
    assert identical_across_ranks(flat_params(model), "adasum.opt.passes.check")
