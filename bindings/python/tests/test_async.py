"""Async handles, poll and synchronize; in-place and non-contiguous tensors; buffer
lifetime."""
import ctypes
import gc
import time

import numpy as np
import pytest
import torch

import hvd.numpy as hnp
import hvd.torch as hvd
from hvd import _handles
from hvd import _lib


def total_of_ranks():
    return hvd.size() * (hvd.size() + 1) / 2


def wait_polling(handle, timeout=30.0):
    deadline = time.time() + timeout
    while not hvd.poll(handle):
        assert time.time() < deadline, "poll never reported completion"
        time.sleep(0.001)


def test_async_poll_synchronize():
    t = torch.full((7,), float(hvd.rank() + 1))
    handle = hvd.allreduce_async(t, op=hvd.Sum, name="async.one")
    assert isinstance(handle, int)
    wait_polling(handle)
    out = hvd.synchronize(handle)
    np.testing.assert_array_equal(out.numpy(), total_of_ranks())
    with pytest.raises(hvd.InvalidArgumentError, match="unknown handle"):
        hvd.synchronize(handle)


def test_many_in_flight_synchronized_in_reverse():
    tensors = [torch.full((3, i + 1), float(hvd.rank() + i)) for i in range(20)]
    before = _handles.pending_count()
    handles = [hvd.allreduce_async(t, op=hvd.Sum) for t in tensors]
    outs = [hvd.synchronize(h) for h in reversed(handles)][::-1]
    assert _handles.pending_count() == before
    for i, out in enumerate(outs):
        expected = sum(r + i for r in range(hvd.size()))
        np.testing.assert_array_equal(out.numpy(), expected)


def test_every_async_kind():
    r = hvd.rank()
    t = torch.full((hvd.size() * 2, 2), float(r))
    handles = {
        "allreduce_": hvd.allreduce_async_(t.clone(), op=hvd.Sum),
        "allgather": hvd.allgather_async(t[:1].clone()),
        "broadcast": hvd.broadcast_async(t, 0),
        "broadcast_": hvd.broadcast_async_(t.clone(), 0),
        "alltoall": hvd.alltoall_async(t),
        "reducescatter": hvd.reducescatter_async(t, op=hvd.Sum),
        "grouped": hvd.grouped_allreduce_async([t, t[:, 0].contiguous()], op=hvd.Max),
    }
    outs = {k: hvd.synchronize(h) for k, h in handles.items()}
    n = hvd.size()
    assert (outs["allreduce_"] == total_of_ranks() - n).all()
    assert outs["allgather"][:, 0].tolist() == list(map(float, range(n)))
    assert (outs["broadcast"] == 0).all() and (outs["broadcast_"] == 0).all()
    alltoall_out, received = outs["alltoall"]
    assert alltoall_out[:, 0].tolist() == [float(s) for s in range(n) for _ in range(2)]
    assert received.tolist() == [2] * n
    assert tuple(outs["reducescatter"].shape) == (2, 2)
    assert (outs["grouped"][0] == n - 1).all() and (outs["grouped"][1] == n - 1).all()


def test_numpy_async():
    a = np.full(4, hvd.rank() + 1, dtype=np.int32)
    handle = hnp.allreduce_async_(a, op=hnp.Sum)
    result = hnp.synchronize(handle)
    assert result is a
    assert (a == total_of_ranks()).all()


def test_inplace_is_really_in_place():
    t = torch.full((4, 3), float(hvd.rank() + 1))
    ptr = t.data_ptr()
    returned = hvd.allreduce_(t, op=hvd.Sum)
    assert returned is t and t.data_ptr() == ptr
    assert (t == total_of_ranks()).all()
    b = torch.full((5,), float(hvd.rank()))
    hvd.broadcast_(b, hvd.size() - 1)
    assert (b == hvd.size() - 1).all()


def test_non_contiguous_torch():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (hvd.rank() + 1)
    view = base.t()[1:4]  # Non-contiguous view into base.
    assert not view.is_contiguous()
    expected = (torch.arange(24, dtype=torch.float32).reshape(4, 6).t()[1:4]
                * total_of_ranks())
    out = hvd.allreduce(view, op=hvd.Sum)
    assert torch.equal(out, expected)
    assert torch.equal(view, expected / total_of_ranks() * (hvd.rank() + 1))  # Input untouched.
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(view, expected)
    assert torch.equal(base.t()[1:4], expected)  # Written through to the base tensor.
    gathered = hvd.allgather(base[:, ::2])
    assert gathered.shape == (4 * hvd.size(), 3)


def test_non_contiguous_numpy():
    base = np.arange(24, dtype=np.float64).reshape(4, 6) * (hvd.rank() + 1)
    view = base.T[::2]
    assert not view.flags.c_contiguous
    hnp.allreduce_(view, op=hnp.Sum)
    expected = np.arange(24, dtype=np.float64).reshape(4, 6).T[::2] * total_of_ranks()
    np.testing.assert_array_equal(base.T[::2], expected)


def test_buffers_stay_alive_until_synchronize():
    # Temporaries with no other reference: the handle must keep them alive.
    handles = [hvd.allreduce_async(torch.full((1000,), float(hvd.rank())) + i, op=hvd.Sum)
               for i in range(5)]
    handles.append(hvd.broadcast_async_(torch.full((1000,), float(hvd.rank())), 0))
    gc.collect()
    garbage = [torch.full((1000,), -1.0) for _ in range(50)]  # Reuse freed memory, if any.
    outs = [hvd.synchronize(h) for h in handles]
    del garbage
    for i, out in enumerate(outs[:5]):
        assert (out == total_of_ranks() - hvd.size() + i * hvd.size()).all()
    assert (outs[5] == 0).all()


def test_autograd_through_allreduce_and_allgather():
    x = torch.full((2, 3), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum)
    y.sum().backward()
    # d(sum of the allreduced sum)/dx is the allreduced sum of ones.
    assert (x.grad == hvd.size()).all()
    z = torch.full((hvd.rank() + 1, 2), 1.0, requires_grad=True)
    g = hvd.allgather(z)
    (g * 2).sum().backward()
    assert z.grad.shape == z.shape and (z.grad == 2).all()


# ---- PreparedAllreduce: the gradient hook's hot path ----------------------

def test_prepared_allreduce_matches_the_general_path_each_start():
    from hvd.torch.mpi_ops import _ops
    prepared = _ops.prepare_allreduce("prepared.a", hvd.Sum, 3.0, 0.5, hvd.global_process_set)
    r = hvd.rank()
    kept = []  # every step's tensor alive: each has its own memory
    for step in range(3):  # each start reuses the struct, with this step's buffer
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4) + r + step
        kept.append(t)
        handle = prepared.start(t)
        assert hvd.synchronize(handle) is t
        want = 1.5 * (torch.arange(12, dtype=torch.float32).reshape(3, 4) * hvd.size() +
                      total_of_ranks() - hvd.size() + step * hvd.size())
        torch.testing.assert_close(t, want)  # 3.0 * sum * 0.5
    assert len({t.data_ptr() for t in kept}) == 3
    # Another dtype and shape: prepared again, same name; a non-contiguous tensor
    # takes the general path (written back in place).
    d = torch.full((5,), float(r), dtype=torch.float64)
    assert hvd.synchronize(prepared.start(d)) is d
    torch.testing.assert_close(d, torch.full((5,), 1.5 * (total_of_ranks() - hvd.size()),
                                             dtype=torch.float64))
    nc = torch.full((4, 6), float(r + 1)).t()
    assert not nc.is_contiguous()
    assert hvd.synchronize(prepared.start(nc)) is nc
    torch.testing.assert_close(nc, torch.full((6, 4), 1.5 * total_of_ranks()))


def test_prepared_allreduce_keeps_the_name_rules():
    from hvd.torch.mpi_ops import _ops
    prepared = _ops.prepare_allreduce("prepared.b", hvd.Sum, 1.0, 1.0, hvd.global_process_set)
    t = torch.ones(4)
    handle = prepared.start(t)
    with pytest.raises(hvd.InvalidUsageError, match="'allreduce.prepared.b' is already in flight"):
        prepared.start(torch.ones(4))  # the same name before synchronize
    with pytest.raises(hvd.InvalidUsageError, match="already in flight"):
        hvd.allreduce_async_(torch.ones(4), name="prepared.b")
    hvd.synchronize(handle)
    torch.testing.assert_close(t, torch.full((4,), float(hvd.size())))
    with pytest.raises(hvd.InvalidArgumentError, match="dtype"):
        prepared.start(torch.ones(3, dtype=torch.complex64))
    unregistered = hvd.ProcessSet([0])
    bad = _ops.prepare_allreduce("prepared.c", hvd.Sum, 1.0, 1.0, unregistered)
    with pytest.raises(hvd.InvalidArgumentError, match="not registered"):
        bad.start(torch.ones(2))


def alive(c_handle):
    """Whether the runtime still knows C handle `c_handle` (hvd_poll refuses a
    released one)."""
    done = ctypes.c_int()
    return _lib.lib().hvd_poll(c_handle, ctypes.byref(done)) == _lib.SUCCESS


@pytest.mark.parametrize("front", ["torch", "numpy"])
def test_host_results_are_the_runtimes_memory_until_freed(monkeypatch, front):
    """An allgather's, reducescatter's and alltoall's host result is made over the
    runtime's own buffer (no copy): the tensor takes the C handle, which stays
    alive while the tensor or a view of it does and is released once they are
    freed; empty results take nothing."""
    taken = []
    take = _handles.take

    def spy(c_handles, i):
        taken.append(c_handles[i])
        return take(c_handles, i)
    monkeypatch.setattr(_handles, "take", spy)
    n, r = hvd.size(), hvd.rank()
    if front == "torch":
        mod, x = hvd, torch.arange(6, dtype=torch.float64).reshape(3, 2) + 10 * r
        values = lambda t: t.numpy()  # noqa: E731
    else:
        mod, x = hnp, np.arange(6, dtype=np.float64).reshape(3, 2) + 10 * r
        values = lambda t: t  # noqa: E731
    gathered = mod.allgather(x, name="owned.ag." + front)
    rows = torch.arange(2.0 * n).reshape(n, 2) + 100 * r  # one row for each rank
    rows = rows if front == "torch" else rows.numpy()
    scattered = mod.reducescatter(rows * 0 + 1, op=mod.Sum, name="owned.rs." + front)
    a2a = mod.alltoall(rows, name="owned.a2a." + front)
    np.testing.assert_array_equal(values(a2a), [[2.0 * r + 100 * k, 2.0 * r + 1 + 100 * k]
                                                for k in range(n)])
    empty = mod.allgather(x[:0], name="owned.empty." + front)
    assert len(taken) == 3 and all(alive(c) for c in taken)
    np.testing.assert_array_equal(
        values(gathered), np.concatenate([np.arange(6.0).reshape(3, 2) + 10 * k for k in range(n)]))
    np.testing.assert_array_equal(values(scattered), [[n, n]])
    assert values(empty).shape == (0, 2)
    if front == "numpy":
        base = gathered
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base.owner, _handles.ResultOwner)  # the runtime's memory itself
        assert base.__array_interface__["data"][0] == gathered.ctypes.data
        del base
    view = gathered[1:]
    del gathered, a2a
    gc.collect()
    assert alive(taken[0]) and not alive(taken[2])  # the view holds the gather's memory
    np.testing.assert_array_equal(values(view)[0], [2.0, 3.0])
    del view, scattered
    gc.collect()
    assert not any(alive(c) for c in taken)
