"""The gradient of every differentiable collective, against a local reference.

Horovod defines each collective's gradient (see hvd.torch.mpi_ops); each definition
is the gradient, on this rank's input, of one objective over every rank's loss. Here
rank r's loss is L_r = sum(out_r * w_r) for a rank-dependent weight w_r, and the
reference rebuilds every rank's input in one process, runs the same computation
with plain torch ops, and differentiates the objective with autograd:

    allreduce, grouped_allreduce, alltoall      J = sum_r L_r
    allgather, grouped_allgather, broadcast     J = (1/size) sum_r L_r
    reducescatter, grouped_reducescatter        J = size * sum_r L_r

Inputs are float64, so the comparison is tight.
"""
import pytest
import torch

import hvd.torch as hvd

TOL = dict(rtol=1e-12, atol=1e-12)


def inputs(shape_of, seed):
    """Every rank's input, shape_of(r), as leaf tensors that require grad."""
    out = []
    for r in range(hvd.size()):
        g = torch.Generator().manual_seed(1000 * seed + r)
        out.append(torch.randn(*shape_of(r), generator=g, dtype=torch.float64,
                               requires_grad=True))
    return out


def weight(shape, r, seed):
    g = torch.Generator().manual_seed(7919 * seed + 31 * r + 1)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def local_grad(xs, loss):
    """This rank's input gradient from a hvd computation: loss(x) -> L_r."""
    x = xs[hvd.rank()].detach().clone().requires_grad_(True)
    loss(x).backward()
    return x.grad


def reference_grad(xs, objective):
    """This rank's input gradient of the objective, computed locally."""
    objective(xs).backward()
    return xs[hvd.rank()].grad


@pytest.mark.parametrize("op,pre,post", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                                         (hvd.Sum, 0.5, 3.0), (hvd.Average, 2.0, 0.25)])
def test_allreduce(op, pre, post):
    n, me = hvd.size(), hvd.rank()
    xs = inputs(lambda r: (3, 4), seed=1)
    w = [weight((3, 4), r, 1) for r in range(n)]

    def combine(ts):
        total = sum(pre * t for t in ts)
        return post * (total / n if op == hvd.Average else total)
    got = local_grad(xs, lambda x: (hvd.allreduce(x, op=op, prescale_factor=pre,
                                                  postscale_factor=post) * w[me]).sum())
    want = reference_grad(xs, lambda ts: sum((combine(ts) * w[r]).sum() for r in range(n)))
    torch.testing.assert_close(got, want, **TOL)


def test_grouped_allreduce():
    n, me = hvd.size(), hvd.rank()
    a, b = inputs(lambda r: (2, 3), seed=2), inputs(lambda r: (5,), seed=3)
    wa = [weight((2, 3), r, 2) for r in range(n)]
    wb = [weight((5,), r, 3) for r in range(n)]
    xa = a[me].detach().clone().requires_grad_(True)
    xb = b[me].detach().clone().requires_grad_(True)
    oa, ob = hvd.grouped_allreduce([xa, xb], op=hvd.Average)
    ((oa * wa[me]).sum() + (ob * wb[me]).sum()).backward()
    ma, mb = sum(a) / n, sum(b) / n
    sum((ma * wa[r]).sum() + (mb * wb[r]).sum() for r in range(n)).backward()
    torch.testing.assert_close(xa.grad, a[me].grad, **TOL)
    torch.testing.assert_close(xb.grad, b[me].grad, **TOL)


def test_allgather_uneven_rows():
    n, me = hvd.size(), hvd.rank()
    xs = inputs(lambda r: (r + 1, 3), seed=4)
    rows = n * (n + 1) // 2
    w = [weight((rows, 3), r, 4) for r in range(n)]
    got = local_grad(xs, lambda x: (hvd.allgather(x) * w[me]).sum())
    want = reference_grad(xs, lambda ts: sum((torch.cat(ts) * w[r]).sum() for r in range(n)) / n)
    torch.testing.assert_close(got, want, **TOL)


def test_grouped_allgather():
    n, me = hvd.size(), hvd.rank()
    a, b = inputs(lambda r: (r + 1, 2), seed=5), inputs(lambda r: (2 * r + 1,), seed=6)
    wa = [weight((n * (n + 1) // 2, 2), r, 5) for r in range(n)]
    wb = [weight((n * n,), r, 6) for r in range(n)]
    xa = a[me].detach().clone().requires_grad_(True)
    xb = b[me].detach().clone().requires_grad_(True)
    oa, ob = hvd.grouped_allgather([xa, xb])
    ((oa * wa[me]).sum() + (ob * wb[me]).sum()).backward()
    ca, cb = torch.cat(a), torch.cat(b)
    (sum((ca * wa[r]).sum() + (cb * wb[r]).sum() for r in range(n)) / n).backward()
    torch.testing.assert_close(xa.grad, a[me].grad, **TOL)
    torch.testing.assert_close(xb.grad, b[me].grad, **TOL)


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast(root):
    n, me = hvd.size(), hvd.rank()
    root = root % n
    xs = inputs(lambda r: (4,), seed=7)
    w = [weight((4,), r, 7) for r in range(n)]
    got = local_grad(xs, lambda x: (hvd.broadcast(x, root) * w[me]).sum())
    want = reference_grad(xs, lambda ts: sum((ts[root] * w[r]).sum() for r in range(n)) / n)
    if want is None:  # Not the root: its input does not reach any output.
        want = torch.zeros(4, dtype=torch.float64)
    torch.testing.assert_close(got, want, **TOL)


def test_alltoall_uneven_splits():
    n, me = hvd.size(), hvd.rank()
    splits = [[(s + d) % 3 for d in range(n)] for s in range(n)]
    xs = inputs(lambda r: (sum(splits[r]), 2), seed=8)
    received = [sum(splits[s][d] for s in range(n)) for d in range(n)]
    w = [weight((received[r], 2), r, 8) for r in range(n)]
    got = local_grad(xs, lambda x: (hvd.alltoall(x, splits=splits[me])[0] * w[me]).sum())

    def outputs(ts):
        pieces = [torch.split(t, splits[s]) for s, t in enumerate(ts)]
        return [torch.cat([pieces[s][d] for s in range(n)]) for d in range(n)]
    want = reference_grad(xs, lambda ts: sum((o * w[r]).sum()
                                             for r, o in enumerate(outputs(ts))))
    torch.testing.assert_close(got, want, **TOL)


def _blocks(rows, n):
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    starts = [sum(counts[:i]) for i in range(n)]
    return counts, starts


@pytest.mark.parametrize("op,pre,post", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                                         (hvd.Sum, 0.5, 3.0), (hvd.Average, 2.0, 0.25)])
def test_reducescatter(op, pre, post):
    n, me = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    counts, starts = _blocks(rows, n)
    xs = inputs(lambda r: (rows, 3), seed=9)
    w = [weight((counts[r], 3), r, 9) for r in range(n)]

    def out(ts, r):
        total = sum(pre * t for t in ts)
        total = total / n if op == hvd.Average else total
        return post * total[starts[r]:starts[r] + counts[r]]
    got = local_grad(xs, lambda x: (hvd.reducescatter(x, op=op, prescale_factor=pre,
                                                      postscale_factor=post) * w[me]).sum())
    want = reference_grad(xs, lambda ts: n * sum((out(ts, r) * w[r]).sum() for r in range(n)))
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_grouped_reducescatter(op):
    n, me = hvd.size(), hvd.rank()
    a, b = inputs(lambda r: (2 * n, 3), seed=10), inputs(lambda r: (n + 1,), seed=11)
    ca, sa = _blocks(2 * n, n)
    cb, sb = _blocks(n + 1, n)
    wa = [weight((ca[r], 3), r, 10) for r in range(n)]
    wb = [weight((cb[r],), r, 11) for r in range(n)]
    xa = a[me].detach().clone().requires_grad_(True)
    xb = b[me].detach().clone().requires_grad_(True)
    oa, ob = hvd.grouped_reducescatter([xa, xb], op=op)
    ((oa * wa[me]).sum() + (ob * wb[me]).sum()).backward()
    scale = 1.0 / n if op == hvd.Average else 1.0
    ta, tb = scale * sum(a), scale * sum(b)
    (n * sum((ta[sa[r]:sa[r] + ca[r]] * wa[r]).sum() + (tb[sb[r]:sb[r] + cb[r]] * wb[r]).sum()
             for r in range(n))).backward()
    torch.testing.assert_close(xa.grad, a[me].grad, **TOL)
    torch.testing.assert_close(xb.grad, b[me].grad, **TOL)
