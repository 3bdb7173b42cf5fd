"""Horovod 0.28's semantics where users notice them: the package surface, error
classes, shapes that must agree, the exact pre/postscale rule, join with Average,
sparse allreduce, broadcast_optimizer_state(model=) and the run-time timeline."""
import json

import numpy as np
import pytest
import torch

import hvd
import hvd.numpy as hnp
import hvd.torch as ht
from helpers import TORCH_DTYPES

# Every name horovod/torch/__init__.py of Horovod 0.28.1 exports, in its order.
HOROVOD_TORCH_EXPORTS = """elastic Compression allgather_object broadcast_object
    broadcast_optimizer_state broadcast_parameters allreduce allreduce_async allreduce_
    allreduce_async_ grouped_allreduce grouped_allreduce_async grouped_allreduce_
    grouped_allreduce_async_ sparse_allreduce_async allgather allgather_async grouped_allgather
    grouped_allgather_async broadcast broadcast_async broadcast_ broadcast_async_ alltoall
    alltoall_async reducescatter reducescatter_async grouped_reducescatter
    grouped_reducescatter_async join barrier poll synchronize init shutdown is_initialized
    start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
    mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built
    ccl_built cuda_built rocm_built ProcessSet global_process_set add_process_set
    remove_process_set Average Sum Adasum Min Max Product HorovodInternalError
    DistributedOptimizer SyncBatchNorm""".split()
# Every name is there now.
PENDING = set()
# What hvd.numpy shares with it: everything that does not need torch.
TORCH_ONLY = {"elastic", "Compression", "sparse_allreduce_async", "DistributedOptimizer",
              "SyncBatchNorm", "broadcast_parameters", "broadcast_optimizer_state"}


def test_surface_matches_horovod_torch():
    assert len(HOROVOD_TORCH_EXPORTS) == 67
    missing = [n for n in HOROVOD_TORCH_EXPORTS if n not in PENDING and not hasattr(ht, n)]
    assert not missing
    arrived = [n for n in PENDING if hasattr(ht, n)]
    assert not arrived, "take these out of PENDING"
    np_missing = [n for n in HOROVOD_TORCH_EXPORTS if n not in TORCH_ONLY and not hasattr(hnp, n)]
    assert not np_missing


def test_build_queries_answer_as_horovod_does():
    assert isinstance(ht.nccl_built(), int) and not isinstance(ht.nccl_built(), bool)
    assert (ht.nccl_built() > 2700) == ht.cuda_built()  # the version code, or 0
    assert (ht.ccl_built(), ht.ddl_built(), ht.rocm_built(), ht.mpi_built()) == (False,) * 4
    assert ht.gloo_built() is True
    with pytest.raises(ValueError, match="MPI is not enabled"):
        ht.mpi_threads_supported()


# ---- error classes --------------------------------------------------------------------

def test_error_classes_derive_from_what_horovod_raises():
    assert hvd.HorovodInternalError is hvd.HvdError and issubclass(hvd.HvdError, RuntimeError)
    for cls in (hvd.InvalidArgumentError, hvd.InvalidUsageError, hvd.NotInitializedError):
        assert issubclass(cls, ValueError) and issubclass(cls, hvd.HorovodInternalError), cls
    for cls in (hvd.MismatchError, hvd.HvdTimeoutError, hvd.RemoteError, hvd.ShutDownError,
                hvd.InternalError):
        assert issubclass(cls, RuntimeError) and not issubclass(cls, ValueError), cls


def test_duplicate_name_in_flight_is_a_value_error(multi_rank):
    # As Horovod's own test: rank 0's first allreduce waits for the others, so its
    # second one with the same name is refused; then the others do the same with
    # another name, which rank 0 has not submitted. Then each completes the other's.
    t = torch.ones(17)
    mine = "dup.0" if ht.rank() == 0 else "dup.1"
    handles = []
    for turn in (0, 1):
        if (ht.rank() == 0) == (turn == 0):
            handles.append(ht.allreduce_async(t, name=mine))
            with pytest.raises(ValueError, match="already in flight") as info:
                ht.allreduce_async(t, name=mine)
            assert isinstance(info.value, hvd.InvalidUsageError)
        ht.barrier()
    handles.append(ht.allreduce_async(t, name="dup.1" if ht.rank() == 0 else "dup.0"))
    for h in handles:
        assert (ht.synchronize(h) == 1).all()


def test_a_name_is_in_flight_until_synchronized():
    # Even once the collective completed, the same name is refused until its
    # handle is synchronized, so the outcome never depends on the runtime's speed.
    import time
    first = ht.allreduce_async(torch.ones(3), name="held", op=ht.Sum)
    deadline = time.monotonic() + 30
    while not ht.poll(first) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert ht.poll(first)
    with pytest.raises(hvd.InvalidUsageError, match="allreduce.held' is already in flight"):
        ht.allreduce_async(torch.ones(3), name="held", op=ht.Sum)
    group = ht.grouped_allreduce_async([torch.ones(1)], name="held.g")
    with pytest.raises(ValueError, match="already in flight"):
        ht.grouped_allreduce_async([torch.ones(1)], name="held.g")
    ht.synchronize(group)
    assert (ht.synchronize(first) == ht.size()).all()
    ht.synchronize(ht.allreduce_async(torch.ones(3), name="held", op=ht.Sum))  # free again


# ---- shapes must agree -------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((2, 3), (3, 2)), ((17, 23 * 57), (17, 23, 57))],
                         ids=["transposed", "split-dim"])
def test_allreduce_shapes_must_agree(multi_rank, shapes):
    mine = shapes[0] if ht.rank() == 0 else shapes[1]
    with pytest.raises(hvd.MismatchError) as info:
        ht.allreduce(torch.ones(*mine), name="shaped")
    text = str(info.value)
    assert "allreduce.shaped" in text and "shape" in text
    assert "rank 0 has [%s]" % ", ".join(map(str, shapes[0])) in text
    # The runtime keeps working, in the same shape on every rank.
    out = ht.allreduce(torch.ones(*shapes[0]), op=ht.Sum, name="shaped.after")
    assert out.shape == shapes[0] and (out == ht.size()).all()


def test_grouped_allreduce_shapes_must_agree(multi_rank):
    mine = (4, 6) if ht.rank() == 0 else (6, 4)
    with pytest.raises(hvd.MismatchError, match="shape"):
        ht.grouped_allreduce([torch.ones(3), torch.ones(*mine)], name="g.shaped")


# ---- Horovod's exact pre/postscale rule ---------------------------------------------------

def horovod_scale(t, factor):
    """Horovod's ScaleBuffer on the CPU: integers in float64, truncated toward zero;
    float32 and float64 in their own precision; 16-bit floats in float32."""
    if not t.is_floating_point():
        return (t.double() * factor).trunc().to(t.dtype)
    if t.dtype in (torch.float16, torch.bfloat16):
        return (t.float() * torch.tensor(factor, dtype=torch.float32)).to(t.dtype)
    return t * torch.tensor(factor, dtype=t.dtype)


def horovod_sum(t, n):
    out = t.clone()
    for _ in range(n - 1):
        out = out + t
    return out


SCALED_DTYPES = [d for d in TORCH_DTYPES if d != "uint8"]  # keeps negative inputs


@pytest.mark.parametrize("dtype", SCALED_DTYPES)
@pytest.mark.parametrize("where", ["pre", "post", "both", "average"])
def test_scale_rule_is_bit_exact(dtype, where):
    """Every rank holds the same tensor, as in Horovod's tests, so the sum is exact
    whatever the order: the result is bit-exact at up to 3 ranks (4 equal addends
    may round differently by order)."""
    n = ht.size()
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(1234)
    t = torch.randint(-100, 100, (17, 3), generator=g).to(dt)
    if dt.is_floating_point:
        t = t * torch.tensor(0.37, dtype=dt)  # not integers, so roundings show
    pre = 0.1915194503788923 if where in ("pre", "both") else 1.0
    post = 0.6221087710398319 if where in ("post", "both") else 1.0
    op = ht.Average if where == "average" else ht.Sum
    got = ht.allreduce(t, op=op, prescale_factor=pre, postscale_factor=post,
                       name="scale.%s.%s" % (dtype, where))
    summed = horovod_sum(horovod_scale(t, pre), n)
    if op == ht.Average:
        summed = summed.div(n, rounding_mode="trunc") if not dt.is_floating_point else summed / n
    want = horovod_scale(summed, post)
    if n <= 3:
        assert torch.equal(got, want), (got - want).abs().max()
    else:
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-2, atol=1e-2)
    rs = ht.reducescatter(t, op=ht.Sum, prescale_factor=pre, postscale_factor=post,
                          name="scale.rs.%s.%s" % (dtype, where))
    rows = [17 // n + (1 if i < 17 % n else 0) for i in range(n)]
    start = sum(rows[:ht.rank()])
    want_rs = horovod_scale(horovod_sum(horovod_scale(t, pre), n), post)
    want_rs = want_rs[start:start + rows[ht.rank()]]
    if n <= 3:
        assert torch.equal(rs, want_rs), (rs - want_rs).abs().max()


# ---- join with allreduce ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("cached", [False, True], ids=["cold", "cached"])
def test_join_with_allreduce_each_rank_first(multi_rank, dtype, cached):
    """Horovod's test_horovod_join_allreduce: the first rank to join contributes
    zeros, and Average still divides by the set's size."""
    n, me = ht.size(), ht.rank()
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(1234)
    a = torch.randint(-100, 100, (5, 5), generator=g).to(dt)
    b = torch.randint(-100, 100, (17,), generator=g).to(dt)

    def div(x):
        return x.div(n, rounding_mode="trunc") if not dt.is_floating_point else x / n
    for first in range(n):
        names = ("join.a.%s.%s" % (dtype, cached), "join.b.%s.%s" % (dtype, cached))
        if cached:  # Every rank takes part once, so the responses are cached.
            ht.synchronize(ht.allreduce_async(a, name=names[0]))
            ht.synchronize(ht.allreduce_async(b, name=names[1]))
        if me == first:
            last = ht.join()
        else:
            ha = ht.allreduce_async(a, name=names[0])
            hb = ht.allreduce_async(b, name=names[1])
            got_a, got_b = ht.synchronize(ha), ht.synchronize(hb)
            last = ht.join()
            assert torch.equal(got_a, div(a * (n - 1))), (first, got_a, a)
            assert torch.equal(got_b, div(b * (n - 1))), first
        assert last != first
        assert ht.allgather_object(last) == [last] * n


# ---- sparse allreduce -------------------------------------------------------------------

@pytest.mark.parametrize("op", [ht.Average, ht.Sum])
def test_sparse_allreduce_async_equals_dense_allreduce(op):
    g = torch.Generator().manual_seed(100 + ht.rank())
    tensors = []
    for rows in (17, 32, 5):
        t = torch.rand(rows, 10, generator=g)
        t[t < 0.8] = 0
        tensors.append(t.to_sparse())
    dense = [ht.allreduce(t.to_dense(), op=op, name="sp.dense.%d" % i)
             for i, t in enumerate(tensors)]
    handles = [ht.sparse_allreduce_async(t, name="sp.%d" % i, op=op)
               for i, t in enumerate(tensors)]
    for want, handle in zip(dense, handles):
        got = handle()
        assert got.is_sparse and got.shape == want.shape
        torch.testing.assert_close(got.to_dense(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(hvd.InvalidArgumentError, match="sparse COO"):
        ht.sparse_allreduce_async(torch.ones(3), name="sp.dense", op=ht.Sum)


# ---- broadcast_optimizer_state(model=) ------------------------------------------------------

class _SparseModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 4, sparse=True)
        self.linear = torch.nn.Linear(4, 2)


@pytest.mark.parametrize("kind", ["sgd", "sparse_adam"])
def test_broadcast_optimizer_state_with_model_marks_sparse_parameters(kind):
    torch.manual_seed(ht.rank())
    model = _SparseModel()
    if kind == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * (ht.rank() + 1), momentum=0.9)
    else:
        opt = torch.optim.SparseAdam(list(model.embedding.parameters()),
                                     lr=0.01 * (ht.rank() + 1))
    ht.broadcast_optimizer_state(opt, root_rank=0, model=model)
    # The fresh state was initialised with sparse gradients where torch needs them.
    assert model.embedding.weight.grad.is_sparse
    if kind == "sgd":
        assert not model.linear.weight.grad.is_sparse
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 if kind == "sgd" else 0.01)
    lrs = ht.allgather_object(opt.param_groups[0]["lr"])
    assert len(set(lrs)) == 1
    if kind == "sparse_adam":  # Its state now exists, equal on every rank.
        state = opt.state_dict()["state"]
        assert state and ht.allgather_object(int(state[0]["step"])) == [int(state[0]["step"])] * ht.size()


# ---- the run-time timeline -------------------------------------------------------------

def test_start_and_stop_timeline(tmp_path):
    path = str(tmp_path / ("timeline.%d.json" % ht.rank()))
    path = ht.broadcast_object(path)  # Rank 0 writes it; every rank calls.
    ht.start_timeline(path, mark_cycles=True)
    ht.allreduce(torch.tensor([1.0, 2.0, 3.0]), name="test_allreduce")
    ht.stop_timeline()
    ht.stop_timeline()  # Stopping twice is fine.
    if ht.rank() == 0:
        with open(path) as f:
            events = json.load(f)  # Complete JSON once stopped.
        names = {e.get("name") for e in events}
        rows = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        assert "allreduce.test_allreduce" in rows
        assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "CYCLE_START"} <= names  # Horovod's names
        assert any("start_time_since_epoch_in_micros" in e.get("args", {}) for e in events)
    with pytest.raises(hvd.InvalidArgumentError, match="cannot open timeline") if ht.rank() == 0 \
            else _no_error():
        ht.start_timeline(str(tmp_path / "no" / "such" / "dir.json"))
    ht.barrier()


class _no_error:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_numpy_front_end_takes_int16():
    out = hnp.allreduce(np.full(3, 300, dtype=np.int16), op=hnp.Sum, name="np.int16")
    assert out.dtype == np.int16 and (out == 300 * hnp.size()).all()
