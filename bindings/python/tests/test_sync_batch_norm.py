"""SyncBatchNorm against torch.nn.BatchNorm1d/2d/3d run in one process on the
concatenation of every rank's batch (each rank rebuilds all ranks' inputs from the
rank numbers): the output slice of this rank, the running stats (equal to the
reference's and identical on every rank), and the gradients of the sum of all
ranks' losses, loss_r = (out_r * w_r).sum() with a rank-dependent w_r. The input
gradient is the reference's slice for this rank; the weight and bias gradients are
this rank's local contributions, whose sum over ranks is the reference's."""
import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from hvd.torch import sync_batch_norm
from helpers import identical_across_ranks

C = 3
WEIGHT = [0.5, 1.5, -2.0]
BIAS = [0.1, -0.3, 0.7]
SPATIAL = {"NC": (), "NCL": (5,), "NCHW": (4, 3), "NCDHW": (2, 3, 2)}
REFERENCE = {0: torch.nn.BatchNorm1d, 1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d,
             3: torch.nn.BatchNorm3d}
TOLERANCE = {torch.float64: dict(rtol=1e-9, atol=1e-9),
             torch.float32: dict(rtol=1e-4, atol=2e-5)}
LAYOUTS = {"even": lambda r: 2, "uneven": lambda r: r + 1, "empty0": lambda r: 2 if r else 0,
           "empty": lambda r: 0}


def rank_batch(rank, rows, spatial, dtype, step):
    """Rank `rank`'s input at `step` and the weights of its loss: off-centre
    channels, so that a wrong mean shows."""
    g = torch.Generator().manual_seed(7919 * step + rank)
    shape = (rows, C) + spatial
    offset = torch.tensor([-3.0, 0.5, 4.0], dtype=torch.float64).reshape(
        [1, C] + [1] * len(spatial))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2 + offset
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    return x.to(dtype), w.to(dtype)


def make_pair(spatial, dtype, momentum=0.1, affine=True, track_running_stats=True):
    """A SyncBatchNorm and its reference, with the same non-trivial weight and bias."""
    kwargs = dict(momentum=momentum, affine=affine, track_running_stats=track_running_stats)
    sbn = hvd.SyncBatchNorm(C, **kwargs).to(dtype)
    ref = REFERENCE[len(spatial)](C, **kwargs).to(dtype)
    if affine:
        with torch.no_grad():
            for m in (sbn, ref):
                m.weight.copy_(torch.tensor(WEIGHT))
                m.bias.copy_(torch.tensor(BIAS))
    return sbn, ref


def local_sum(t):
    return t.sum([0] + list(range(2, t.dim())))


def run_steps(sbn, ref, spatial, dtype, rows_of, steps, name):
    """Runs `steps` forward/backward passes of both modules; returns (what, ours,
    expected) triples to compare. All collectives happen here."""
    rank, size = hvd.rank(), hvd.size()
    checks = []
    for step in range(steps):
        batches = [rank_batch(r, rows_of(r), spatial, dtype, step) for r in range(size)]
        begin = sum(rows_of(r) for r in range(rank))
        mine = slice(begin, begin + rows_of(rank))
        big_x = torch.cat([x for x, _ in batches]).requires_grad_()
        big_w = torch.cat([w for _, w in batches])
        ref.zero_grad()
        ref_out = ref(big_x)
        (ref_out * big_w).sum().backward()

        x, w = batches[rank]
        x = x.clone().requires_grad_()
        sbn.zero_grad()
        out = sbn(x)
        (out * w).sum().backward()
        checks += [("out%d" % step, out.detach(), ref_out.detach()[mine]),
                   ("x.grad%d" % step, x.grad, big_x.grad[mine])]
        if sbn.affine:
            shape = [1, C] + [1] * len(spatial)
            xhat = (ref_out.detach()[mine] - ref.bias.detach().reshape(shape)) \
                / ref.weight.detach().reshape(shape)
            local = torch.cat([sbn.weight.grad, sbn.bias.grad])
            total = hvd.allreduce(local, op=hvd.Sum, name="%s.param_grads" % name)
            checks += [("local param grads%d" % step, local,
                        torch.cat([local_sum(w * xhat), local_sum(w)])),
                       ("summed param grads%d" % step, total,
                        torch.cat([ref.weight.grad, ref.bias.grad]))]
    return checks


def running_checks(sbn, ref, name):
    if sbn.running_mean is None:
        assert ref.running_mean is None and ref.running_var is None
        return []
    stats = torch.cat([sbn.running_mean.double(), sbn.running_var.double(),
                       sbn.num_batches_tracked.double().reshape(1)])
    same = identical_across_ranks(stats, "%s.running" % name)
    return [("running_mean", sbn.running_mean, ref.running_mean),
            ("running_var", sbn.running_var, ref.running_var),
            ("num_batches_tracked", sbn.num_batches_tracked, ref.num_batches_tracked),
            ("identical on every rank", torch.tensor(same), torch.tensor(True))]


def assert_checks(checks, dtype):
    for what, ours, expected in checks:
        assert ours.shape == expected.shape, what
        if ours.dtype in (torch.bool, torch.int64):
            assert torch.equal(ours, expected), what
        else:
            torch.testing.assert_close(ours, expected, **TOLERANCE[dtype], msg=what)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("layout", ["even", "uneven"])
@pytest.mark.parametrize("dims", list(SPATIAL))
def test_sync_batch_norm_matches_reference(multi_rank, dims, layout, dtype):
    sbn, ref = make_pair(SPATIAL[dims], dtype)
    checks = run_steps(sbn, ref, SPATIAL[dims], dtype, LAYOUTS[layout], 3, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_sync_batch_norm_cumulative_average(multi_rank, dtype):
    sbn, ref = make_pair(SPATIAL["NCHW"], dtype, momentum=None)
    checks = run_steps(sbn, ref, SPATIAL["NCHW"], dtype, LAYOUTS["uneven"], 4, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, dtype)
    assert int(sbn.num_batches_tracked) == 4


def test_sync_batch_norm_rank_with_empty_batch(multi_rank):
    sbn, ref = make_pair(SPATIAL["NCL"], torch.float64)
    checks = run_steps(sbn, ref, SPATIAL["NCL"], torch.float64, LAYOUTS["empty0"], 2, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, torch.float64)


def test_sync_batch_norm_globally_empty_batch():
    """Every rank's batch empty: empty output, zero gradients, running stats left
    alone but the batch counted, as torch.nn.BatchNorm does."""
    sbn, ref = make_pair(SPATIAL["NCL"], torch.float64)
    checks = run_steps(sbn, ref, SPATIAL["NCL"], torch.float64, LAYOUTS["empty"], 1, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, torch.float64)
    assert torch.equal(sbn.running_var, torch.ones(C, dtype=torch.float64))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_sync_batch_norm_without_running_stats(multi_rank, mode):
    """No running stats: batch statistics over all ranks in eval mode too; no affine."""
    sbn, ref = make_pair(SPATIAL["NCHW"], torch.float64, affine=False,
                         track_running_stats=False)
    sbn.train(mode == "train")
    ref.train(mode == "train")
    checks = run_steps(sbn, ref, SPATIAL["NCHW"], torch.float64, LAYOUTS["uneven"], 2, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, torch.float64)


def test_sync_batch_norm_eval_uses_running_stats_without_communication(monkeypatch):
    spatial = SPATIAL["NCL"]
    sbn, ref = make_pair(spatial, torch.float64)
    checks = run_steps(sbn, ref, spatial, torch.float64, LAYOUTS["uneven"], 2, "sbn")
    sbn.eval()
    ref.eval()

    def no_collective(*args, **kwargs):
        raise AssertionError("SyncBatchNorm communicated in eval mode")
    monkeypatch.setattr(sync_batch_norm, "allgather_async", no_collective)
    monkeypatch.setattr(sync_batch_norm, "allreduce_async", no_collective)
    x, w = rank_batch(hvd.rank(), 4, spatial, torch.float64, step=10)
    x.requires_grad_()
    out = sbn(x)
    (out * w).sum().backward()
    expected = F.batch_norm(x.detach(), ref.running_mean, ref.running_var, ref.weight,
                            ref.bias, False, 0.0, ref.eps)
    checks += [("eval out", out.detach(), expected), ("eval out vs ref", out, ref(x))]
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, torch.float64)
    assert int(sbn.num_batches_tracked) == 2


def test_sync_batch_norm_gradient_by_finite_differences(multi_rank):
    """Each rank in turn nudges one of its inputs; the change of the sum of all ranks'
    losses matches that rank's analytic input gradient (no reference involved)."""
    spatial = SPATIAL["NCL"]
    sbn, _ = make_pair(spatial, torch.float64, track_running_stats=False)
    rank, size = hvd.rank(), hvd.size()
    x, w = rank_batch(rank, rank + 1, spatial, torch.float64, step=20)

    def total_loss(x):
        with torch.no_grad():
            local = (sbn(x) * w).sum().reshape(1)
        return hvd.allreduce(local, op=hvd.Sum, name="sbn.fd_loss").item()

    xg = x.clone().requires_grad_()
    (sbn(xg) * w).sum().backward()
    h = 1e-6
    numeric, analytic = [], []
    for nudger in range(size):
        for index in [(0, 0, 0), (0, 2, 4)]:
            plus, minus = x.clone(), x.clone()
            if rank == nudger:
                plus[index] += h
                minus[index] -= h
            diff = (total_loss(plus) - total_loss(minus)) / (2 * h)
            if rank == nudger:
                numeric.append(diff)
                analytic.append(xg.grad[index].item())
    torch.testing.assert_close(torch.tensor(numeric), torch.tensor(analytic),
                               rtol=1e-5, atol=1e-6)


def test_sync_batch_norm_one_value_per_channel_raises_everywhere(multi_rank):
    sbn = hvd.SyncBatchNorm(C)
    x = torch.ones(1 if hvd.rank() == 0 else 0, C)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        sbn(x)


def test_sync_batch_norm_wrong_channels(multi_rank):
    with pytest.raises(ValueError, match="expected input with 3 channels"):
        hvd.SyncBatchNorm(C)(torch.zeros(2, C + 1))


@pytest.mark.parametrize("shape", [(), (C,)])
def test_sync_batch_norm_input_dims(shape):
    sbn = hvd.SyncBatchNorm(C)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got %dD input\)"
                       % len(shape)):
        sbn(torch.zeros(shape))
    sbn.eval()
    with pytest.raises(ValueError, match="expected at least 2D input"):
        sbn(torch.zeros(shape))


def test_sync_batch_norm_is_a_batch_norm():
    sbn, ref = make_pair(SPATIAL["NCHW"], torch.float32)
    assert isinstance(sbn, torch.nn.modules.batchnorm._BatchNorm)
    assert sbn.state_dict().keys() == ref.state_dict().keys()
    sbn.load_state_dict(ref.state_dict())


def test_sync_batch_norm_single_rank_is_plain_batch_norm():
    if hvd.size() != 1:
        pytest.skip("single-rank fallback")
    sbn, ref = make_pair(SPATIAL["NCHW"], torch.float64, momentum=None)
    checks = run_steps(sbn, ref, SPATIAL["NCHW"], torch.float64, LAYOUTS["even"], 2, "sbn")
    checks += running_checks(sbn, ref, "sbn")
    assert_checks(checks, torch.float64)


def test_sync_batch_norm_function_gradcheck():
    """gradcheck of the synchronized function itself (its collectives run over one
    rank); on several ranks every rank's backward also adds the others' terms,
    which the finite-differences test above checks instead."""
    if hvd.size() != 1:
        pytest.skip("gradcheck perturbs one rank's input at a time")
    x, _ = rank_batch(0, 4, SPATIAL["NCL"], torch.float64, step=30)
    weight = torch.tensor(WEIGHT, dtype=torch.float64, requires_grad=True)
    bias = torch.tensor(BIAS, dtype=torch.float64, requires_grad=True)

    def fn(x, weight, bias):
        return sync_batch_norm._SyncBatchNormFunction.apply(x, weight, bias, None, None,
                                                            1e-5, 0.0)
    assert torch.autograd.gradcheck(fn, (x.requires_grad_(), weight, bias))
