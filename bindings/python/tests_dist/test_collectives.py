"""Every collective of torch.distributed over "dprun", against Gloo's result on the
same inputs (or, where Gloo refuses a dtype or op, against the reduction computed
here from every rank's input, which any rank can rebuild), for every dtype."""
import pytest
import torch
import torch.distributed as dist

from conftest import TORCH2

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64]
OPS = {"SUM": R.SUM, "MIN": R.MIN, "MAX": R.MAX, "PRODUCT": R.PRODUCT, "AVG": R.AVG}


def rank_tensor(rank, shape, dtype, seed=0):
    """Rank `rank`'s input: small integers, exact in every dtype after sums and
    products over 4 ranks (positive for uint8; complex with an imaginary part)."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    low = 0 if dtype in (torch.uint8, torch.bool) else -3
    high = 2 if dtype == torch.bool else 4
    x = torch.randint(low, high, shape, generator=g)
    if dtype.is_complex:
        return torch.complex(x.double(), torch.randint(-3, 4, shape, generator=g).double()).to(
            dtype)
    return x.to(dtype)


def reference(op, inputs):
    """The reduction of every rank's input, in a wide type."""
    wide = [x.to(torch.complex128 if x.dtype.is_complex else torch.float64) for x in inputs]
    if op == "SUM":
        out = sum(wide)
    elif op == "AVG":
        out = sum(wide) / len(wide)
    elif op == "PRODUCT":
        out = wide[0]
        for x in wide[1:]:
            out = out * x
    else:
        out = torch.stack(wide)
        out = out.min(0).values if op == "MIN" else out.max(0).values
    if inputs[0].dtype == torch.bool:
        return out != 0
    return out


def gloo_result(x, op, gloo):
    """Gloo's all_reduce of x, or None if Gloo refuses the dtype or op."""
    y = x.clone()
    try:
        dist.all_reduce(y, op=op, group=gloo)
    except (RuntimeError, ValueError):
        return None
    return y


def supported(dtype, op):
    if dtype.is_complex:
        return op in ("SUM", "AVG")
    if dtype == torch.bool:
        return op != "AVG"
    return True


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_all_reduce_every_dtype_and_op(dtype, op, gloo):
    n, me = dist.get_world_size(), dist.get_rank()
    shape = (3, 5)
    x = rank_tensor(me, shape, dtype, seed=len(op))
    y = x.clone()
    if not supported(dtype, op):
        # Refused by torch itself (complex) or by the backend, naming the dtype.
        with pytest.raises((ValueError, RuntimeError), match="cannot reduce|does not support"):
            dist.all_reduce(y, op=OPS[op])
        return
    if op == "AVG" and not dtype.is_floating_point and not dtype.is_complex:
        x = x.abs() * n  # integer averages: sums that divide exactly
        y = x.clone()
    dist.all_reduce(y, op=OPS[op])
    want_gloo = gloo_result(x, OPS[op], gloo) if op != "AVG" else None
    inputs = [rank_tensor(r, shape, dtype, seed=len(op)) for r in range(n)]
    if op == "AVG" and not dtype.is_floating_point and not dtype.is_complex:
        inputs = [t.abs() * n for t in inputs]
    want = reference(op, inputs)
    if want_gloo is not None:
        assert torch.equal(y, want_gloo), (y, want_gloo)
    got = y.to(torch.complex128 if dtype.is_complex else torch.float64) if dtype != torch.bool \
        else y
    if op == "AVG" and (dtype.is_floating_point or dtype.is_complex):
        # A division by the size: exact only in the reference's wide type.
        eps = torch.finfo(dtype if dtype.is_floating_point else torch.float32).eps
        assert torch.allclose(got, want.to(got.dtype), rtol=2 * eps, atol=2 * eps), (y, want)
        return
    assert torch.equal(got, want.to(got.dtype)), (y, want)


@pytest.mark.parametrize("op", ["BAND", "BOR", "BXOR"])
def test_bitwise_ops_are_refused_by_name(op):
    with pytest.raises(ValueError, match="reduce op %s is not supported" % op):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=getattr(R, op))


def test_premul_sum_scales_before_the_sum(torch2, gloo):
    n, me = dist.get_world_size(), dist.get_rank()
    x = rank_tensor(me, (6,), torch.float64)
    y = x.clone()
    dist.all_reduce(y, op=dist._make_nccl_premul_sum(2.5))
    want = sum(rank_tensor(r, (6,), torch.float64) for r in range(n)) * 2.5
    assert torch.allclose(y, want)
    z = x.clone()
    dist.all_reduce(z, op=dist._make_nccl_premul_sum(torch.tensor([0.5], dtype=torch.float64)))
    assert torch.allclose(z, want / 5)


def test_all_reduce_non_contiguous_and_empty(gloo):
    me = dist.get_rank()
    base = rank_tensor(me, (4, 6), torch.float32)
    view = base.t()[1:4]  # strided, not contiguous
    want = view.clone()
    dist.all_reduce(want, group=gloo)
    dist.all_reduce(view)
    assert torch.equal(view, want)
    empty = torch.zeros(0)
    dist.all_reduce(empty)
    assert empty.numel() == 0


def test_async_work_wait_and_future(gloo):
    n, me = dist.get_world_size(), dist.get_rank()
    xs = [rank_tensor(me, (8,), torch.float32, seed=s) for s in range(5)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    chained = works[-1].get_future().then(lambda fut: fut.value()[0] * 2)
    for w in works[:-1]:
        assert w.wait()
        assert w.get_future().done()
    doubled = chained.wait()
    for s, x in enumerate(xs):
        assert torch.equal(x, sum(rank_tensor(r, (8,), torch.float32, seed=s) for r in range(n)))
    assert torch.equal(doubled, xs[-1] * 2)


def test_a_callback_may_start_and_wait_for_a_collective():
    """As PowerSGD's hook does: the thread that completes the first future must not
    be the only one that can complete the second."""
    n = dist.get_world_size()

    def nested(fut):
        y = fut.value()[0] * 2
        dist.all_reduce(y, async_op=True).get_future().wait()
        return y
    x = torch.ones(4)
    got = dist.all_reduce(x, async_op=True).get_future().then(nested).wait()
    assert torch.equal(got, torch.full((4,), 2.0 * n * n))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_from_every_root(dtype, gloo):
    n, me = dist.get_world_size(), dist.get_rank()
    for root in range(n):
        x = rank_tensor(me, (2, 3), dtype, seed=root)
        dist.broadcast(x, src=root)
        assert torch.equal(x, rank_tensor(root, (2, 3), dtype, seed=root))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_list_and_into_tensor(dtype, gloo):
    n, me = dist.get_world_size(), dist.get_rank()
    x = rank_tensor(me, (3, 2), dtype)
    outs = [torch.empty((3, 2), dtype=dtype) for _ in range(n)]
    dist.all_gather(outs, x)
    for r in range(n):
        assert torch.equal(outs[r], rank_tensor(r, (3, 2), dtype))
    into = torch.empty((3 * n, 2), dtype=dtype)
    gather_into = dist.all_gather_into_tensor if TORCH2 else dist._all_gather_base
    gather_into(into, x)
    assert torch.equal(into, torch.cat([rank_tensor(r, (3, 2), dtype) for r in range(n)]))
    if dtype in (torch.float32, torch.int64):  # and Gloo agrees
        ref = [torch.empty((3, 2), dtype=dtype) for _ in range(n)]
        dist.all_gather(ref, x, group=gloo)
        assert all(torch.equal(a, b) for a, b in zip(outs, ref))


def test_all_gather_object_and_broadcast_object_list():
    n, me = dist.get_world_size(), dist.get_rank()
    got = [None] * n
    dist.all_gather_object(got, {"rank": me, "text": "x" * me})
    assert got == [{"rank": r, "text": "x" * r} for r in range(n)]
    objects = [me, "from %d" % me]
    dist.broadcast_object_list(objects, src=n - 1)
    assert objects == [n - 1, "from %d" % (n - 1)]


@pytest.mark.parametrize("op", ["SUM", "AVG", "MIN", "MAX", "PRODUCT"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32],
                         ids=str)
def test_reduce_scatter_list_and_tensor(op, dtype):
    n, me = dist.get_world_size(), dist.get_rank()
    if op == "AVG" and not dtype.is_floating_point:
        pytest.skip("integer averages are covered by all_reduce")
    inputs = [rank_tensor(me, (4,), dtype, seed=10 + k) for k in range(n)]
    out = torch.empty(4, dtype=dtype)
    dist.reduce_scatter(out, inputs, op=OPS[op])
    want = reference(op, [rank_tensor(r, (4,), dtype, seed=10 + me) for r in range(n)])
    if op == "AVG":
        eps = torch.finfo(dtype).eps
        assert torch.allclose(out.double(), want, rtol=2 * eps, atol=2 * eps), (out, want)
    else:
        assert torch.equal(out.double(), want.double()), (out, want)
    flat = torch.cat(inputs)
    out2 = torch.empty(4, dtype=dtype)
    scatter = dist.reduce_scatter_tensor if TORCH2 else dist._reduce_scatter_base
    scatter(out2, flat, op=OPS[op])
    assert torch.equal(out2, out)


def test_all_to_all_single_even_and_uneven(multi_rank):
    n, me = dist.get_world_size(), dist.get_rank()
    x = torch.arange(2 * n, dtype=torch.float32) + 100 * me
    out = torch.empty(2 * n)
    dist.all_to_all_single(out, x)
    assert torch.equal(out, torch.tensor([100 * r + 2 * me + k for r in range(n) for k in range(2)],
                                         dtype=torch.float32))
    # Rank r sends r + d + 1 rows to rank d; rows carry (sender, row) labels.
    send_splits = [me + d + 1 for d in range(n)]
    recv_splits = [r + me + 1 for r in range(n)]
    x = torch.tensor([[me, k] for k in range(sum(send_splits))], dtype=torch.int64)
    out = torch.empty((sum(recv_splits), 2), dtype=torch.int64)
    dist.all_to_all_single(out, x, output_split_sizes=recv_splits, input_split_sizes=send_splits)
    rows = []
    for r in range(n):
        start = sum(r + d + 1 for d in range(me))
        rows += [[r, start + k] for k in range(r + me + 1)]
    assert out.tolist() == rows


def test_all_to_all_list_with_uneven_shapes():
    n, me = dist.get_world_size(), dist.get_rank()
    ins = [torch.full((me + 1, d + 1), float(10 * me + d)) for d in range(n)]
    outs = [torch.empty((r + 1, me + 1)) for r in range(n)]
    dist.all_to_all(outs, ins)
    for r in range(n):
        assert torch.equal(outs[r], torch.full((r + 1, me + 1), float(10 * r + me)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64],
                         ids=str)
def test_gather_scatter_reduce_at_every_root(dtype):
    n, me = dist.get_world_size(), dist.get_rank()
    for root in range(n):
        x = rank_tensor(me, (2, 2), dtype, seed=root)
        got = [torch.empty((2, 2), dtype=dtype) for _ in range(n)] if me == root else None
        dist.gather(x, got, dst=root)
        if me == root:
            for r in range(n):
                assert torch.equal(got[r], rank_tensor(r, (2, 2), dtype, seed=root))
        out = torch.empty((2, 2), dtype=dtype)
        pieces = [rank_tensor(k, (2, 2), dtype, seed=50 + root) for k in range(n)]
        dist.scatter(out, pieces if me == root else None, src=root)
        assert torch.equal(out, rank_tensor(me, (2, 2), dtype, seed=50 + root))
        if dtype in (torch.float32, torch.int64):
            y = x.clone()
            dist.reduce(y, dst=root)
            if me == root:
                want = sum(rank_tensor(r, (2, 2), dtype, seed=root) for r in range(n))
                assert torch.equal(y, want)
            else:
                assert torch.equal(y, x)  # untouched off the root


def test_barrier_and_monitored_barrier_refusal():
    dist.barrier()
    dist.barrier()
    with pytest.raises((ValueError, RuntimeError)):
        dist.monitored_barrier()


def test_send_recv_pairs_tags_and_any_source(multi_rank):
    n, me = dist.get_world_size(), dist.get_rank()
    peer = me ^ 1
    if peer < n:  # (the last rank of an odd job has no pair)
        for tag in (0, 7):
            got = torch.empty(5)
            if me % 2 == 0:
                dist.send(torch.arange(5.0) + 10 * me + tag, dst=peer, tag=tag)
                dist.recv(got, src=peer, tag=tag)
            else:
                dist.recv(got, src=peer, tag=tag)
                dist.send(torch.arange(5.0) + 10 * me + tag, dst=peer, tag=tag)
            assert torch.equal(got, torch.arange(5.0) + 10 * peer + tag)
        if me % 2 == 0:
            dist.send(torch.tensor([me], dtype=torch.int32), dst=peer, tag=3)
        else:
            got = torch.empty(1, dtype=torch.int32)
            src = dist.recv(got, tag=3)
            assert src == peer and got.item() == peer
    dist.barrier()


def test_isend_irecv_and_batch(multi_rank):
    n, me = dist.get_world_size(), dist.get_rank()
    right, left = (me + 1) % n, (me - 1) % n
    got = torch.empty(3, dtype=torch.float64)
    ops = [dist.P2POp(dist.isend, torch.full((3,), float(me), dtype=torch.float64), right),
           dist.P2POp(dist.irecv, got, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, torch.full((3,), float(left), dtype=torch.float64))


def test_recv_into_a_tensor_of_another_shape_names_both(multi_rank):
    me = dist.get_rank()
    if me == 0:
        dist.send(torch.zeros(4), dst=1, tag=9)
    elif me == 1:
        with pytest.raises(RuntimeError, match=r"rank 0 sent a float32 4 tensor.*float32 5"):
            dist.recv(torch.zeros(5), src=0, tag=9)
    dist.barrier()


def test_all_reduce_coalesced(gloo):
    if not hasattr(dist, "all_reduce_coalesced"):
        pytest.skip("this torch has no all_reduce_coalesced")
    n, me = dist.get_world_size(), dist.get_rank()
    xs = [rank_tensor(me, (k + 1,), torch.float32, seed=k) for k in range(4)]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.all_reduce_coalesced(xs)
    for k, x in enumerate(xs):
        assert torch.equal(x, sum(rank_tensor(r, (k + 1,), torch.float32, seed=k)
                                  for r in range(n)))
