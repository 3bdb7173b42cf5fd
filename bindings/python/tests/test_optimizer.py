"""DistributedOptimizer: equivalence with single-process training on the full
batch (computed locally with plain torch on every rank), overlap of allreduce with
backward, gradient accumulation, compression, groups, sparse gradients and
Horovod's usage errors."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from helpers import dataset, identical_across_ranks, flat_params, make_model, max_diff

PER_RANK = 6

# The hooks at every size, one rank included (conftest.hooked).
pytestmark = pytest.mark.usefixtures("hooked")


def local_slice(x, y):
    r = hvd.rank()
    return x[r * PER_RANK:(r + 1) * PER_RANK], y[r * PER_RANK:(r + 1) * PER_RANK]


def train_distributed(model, opt, steps, x, y):
    xs, ys = local_slice(x, y)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        opt.step()


def train_reference(model, opt, steps, x, y):
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_matches_single_process_full_batch(kind):
    x, y = dataset(PER_RANK, hvd.size())
    model, ref = make_model(1), make_model(1)

    def make_opt(params):
        if kind == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9)
        return torch.optim.Adam(params, lr=0.01)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters())
    train_distributed(model, opt, 5, x, y)
    train_reference(ref, make_opt(ref.parameters()), 5, x, y)
    same = identical_across_ranks(flat_params(model), "check.%s" % kind)
    assert max_diff(model, ref) < 1e-5
    assert same


def test_allreduces_start_during_backward():
    """The hooks start allreduces while backward is still running: a probe at the
    model's input sees the handles of every later layer's parameters in flight."""
    seen = {}

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            started = [h for h, _ in opt._handles.values() if h is not None]
            seen["started"] = len(started)
            seen["polls"] = [hvd.poll(h) for h in started]  # Valid, live handles.
            return grad

    model = make_model(2, sizes=(10, 16, 16, 4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = dataset(PER_RANK, hvd.size())
    xs, ys = local_slice(x, y)
    h = torch.tanh(model.layers[0](xs))
    h = Probe.apply(h)  # Backward reaches this after the last two layers' gradients.
    for layer in model.layers[1:-1]:
        h = torch.tanh(layer(h))
    F.cross_entropy(model.layers[-1](h), ys).backward()
    after_backward = sum(1 for hd, _ in opt._handles.values() if hd is not None)
    opt.step()
    assert seen["started"] == 4  # Weights and biases of layers 1 and 2.
    assert len(seen["polls"]) == 4
    assert after_backward == 6  # All parameters, before step() was called.
    assert not opt._handles


def test_backward_passes_per_step():
    x, y = dataset(2 * PER_RANK, hvd.size(), seed=3)
    model, ref = make_model(4), make_model(4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    r, n = hvd.rank(), hvd.size()
    mine = slice(2 * PER_RANK * r, 2 * PER_RANK * (r + 1))
    xm, ym = x[mine], y[mine]
    after_first = []
    for _ in range(3):
        opt.zero_grad()
        for micro in range(2):
            part = slice(micro * PER_RANK, (micro + 1) * PER_RANK)
            F.cross_entropy(model(xm[part]), ym[part]).backward()
            if micro == 0:
                after_first.append(sum(1 for h, _ in opt._handles.values() if h is not None))
        opt.step()
    # Reference: gradients of both micro-batches summed, averaged over ranks.
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        ropt.zero_grad()
        loss = 0
        for rank in range(n):
            for micro in range(2):
                start = 2 * PER_RANK * rank + micro * PER_RANK
                loss = loss + F.cross_entropy(ref(x[start:start + PER_RANK]),
                                              y[start:start + PER_RANK]) / n
        loss.backward()
        ropt.step()
    assert after_first == [0, 0, 0]  # Nothing is sent after the first pass.
    assert max_diff(model, ref) < 1e-5


def test_too_many_backward_passes():
    model = make_model(5)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=1)
    x, y = dataset(PER_RANK, hvd.size())
    xs, ys = local_slice(x, y)
    F.cross_entropy(model(xs), ys).backward()
    with pytest.raises((AssertionError, RuntimeError), match="backward_passes_per_step"):
        F.cross_entropy(model(xs), ys).backward()
    opt.synchronize()  # Completes the first pass's allreduces on every rank.


def test_fp16_compression():
    x, y = dataset(PER_RANK, hvd.size(), seed=5)
    model, ref = make_model(6), make_model(6)
    wire = []

    class Recording(hvd.Compression.fp16):
        @staticmethod
        def compress(tensor):
            out, ctx = hvd.Compression.fp16.compress(tensor)
            wire.append(out.dtype)
            return out, ctx

    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   compression=Recording)
    train_distributed(model, opt, 3, x, y)
    train_reference(ref, torch.optim.SGD(ref.parameters(), lr=0.1), 3, x, y)
    assert set(wire) == {torch.float16}
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    assert max_diff(model, ref) < 2e-3


def test_gradient_predivide_factor():
    x, y = dataset(PER_RANK, hvd.size())
    model, ref = make_model(7), make_model(7)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   gradient_predivide_factor=2.0)
    train_distributed(model, opt, 3, x, y)
    train_reference(ref, torch.optim.SGD(ref.parameters(), lr=0.1), 3, x, y)
    assert max_diff(model, ref) < 1e-5
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)


@pytest.mark.parametrize("groups", [2, "list"])
def test_groups(groups):
    x, y = dataset(PER_RANK, hvd.size())
    model, ref = make_model(8), make_model(8)
    if groups == "list":
        groups = [[model.layers[0].weight, model.layers[0].bias], [model.layers[2].weight]]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), groups=groups)
    train_distributed(model, opt, 3, x, y)
    train_reference(ref, torch.optim.SGD(ref.parameters(), lr=0.1), 3, x, y)
    assert max_diff(model, ref) < 1e-5


def test_parameter_unused_on_some_ranks():
    """A parameter that only rank 0 uses still gets averaged (others send zeros)."""
    model = make_model(9)
    extra = torch.nn.Linear(10, 4)
    torch.nn.init.constant_(extra.weight, 0.1)
    params = list(model.named_parameters()) + [("extra." + k, v)
                                               for k, v in extra.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.1),
                                   named_parameters=params)
    x, y = dataset(PER_RANK, hvd.size())
    xs, ys = local_slice(x, y)
    for _ in range(2):
        opt.zero_grad()
        out = model(xs)
        if hvd.rank() == 0:
            out = out + extra(xs)
        F.cross_entropy(out, ys).backward()
        opt.step()
    everything = torch.cat([flat_params(model), flat_params(extra)])
    assert identical_across_ranks(everything, "check.unused")


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients(sparse_as_dense):
    torch.manual_seed(10)
    emb = torch.nn.Embedding(12, 3, sparse=True)
    ref = torch.nn.Embedding(12, 3, sparse=True)
    ref.load_state_dict(emb.state_dict())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    ids = torch.arange(hvd.size() * 2).reshape(hvd.size(), 2) % 12
    opt.zero_grad()
    emb(ids[hvd.rank()]).pow(2).sum().backward()
    opt.step()
    ropt = torch.optim.SGD(ref.parameters(), lr=0.5)
    ropt.zero_grad()
    (ref(ids).pow(2).sum() / hvd.size()).backward()
    ropt.step()
    assert torch.allclose(emb.weight, ref.weight, atol=1e-6)


@pytest.mark.parametrize("op", [hvd.Average, hvd.Adasum], ids=["average", "adasum"])
def test_usage_errors(op):
    model = make_model(11)
    params = list(model.named_parameters())

    def wrap(named):
        return hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                        named_parameters=named, op=op)

    with pytest.raises(ValueError, match="must be unique. Found duplicates: same$"):
        wrap([("same", p) for _, p in params])
    with pytest.raises(ValueError, match="were not named"):
        wrap(params[:2])
    with pytest.raises(ValueError, match="sequence of tuples"):
        wrap([p for _, p in params])


def test_zero_grad_and_step_usage():
    model = make_model(11)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = dataset(PER_RANK, hvd.size())
    xs, ys = local_slice(x, y)
    F.cross_entropy(model(xs), ys).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        opt.step()  # A second synchronize: allowed, but warned about.
    opt.zero_grad()
    F.cross_entropy(model(xs), ys).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    assert identical_across_ranks(flat_params(model), "check.usage")


def test_unnamed_parameters_get_positional_names():
    model, ref = make_model(12), make_model(12)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    assert sorted(opt._parameter_names.values())[0] == "allreduce.noname.0.0"
    x, y = dataset(PER_RANK, hvd.size())
    train_distributed(model, opt, 2, x, y)
    train_reference(ref, torch.optim.SGD(ref.parameters(), lr=0.1), 2, x, y)
    assert max_diff(model, ref) < 1e-5


def test_one_rank_adds_no_hooks(monkeypatch):
    """At one rank (not elastic) the wrapper registers no hooks and its step is the
    wrapped optimizer's: nothing is enqueued, the result is plain torch's."""
    if hvd.size() != 1:
        pytest.skip("one rank only")
    monkeypatch.delenv("HOROVOD_ELASTIC", raising=False)
    monkeypatch.delenv("HVD_ELASTIC_ID", raising=False)
    x, y = dataset(PER_RANK, 1, seed=9)
    model, ref = make_model(12), make_model(12)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    assert opt._grad_accs == [] and opt._requires_update == set()
    train_distributed(model, opt, 3, x, y)
    train_reference(ref, torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9), 3, x, y)
    assert opt._handles == {}
    assert max_diff(model, ref) == 0
    monkeypatch.setenv("HOROVOD_ELASTIC", "1")  # An elastic job may grow: hooks.
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    assert len(opt._grad_accs) == len(list(model.parameters()))
