"""Every collective, for every dtype, on both front-ends, against a NumPy reference
that each rank computes from every rank's (rebuildable) input."""
import numpy as np
import pytest

import hvd.torch as hvd
from helpers import FRONTENDS, int_average, rank_input

SHAPE = (3, 5)


def fe_dtypes():
    return [(fe, d) for fe in FRONTENDS for d in fe.dtypes]


def ids(params):
    return ["%s-%s" % p for p in params]


FE_DTYPES = fe_dtypes()


def all_inputs(shape, dtype, seed=0):
    return [rank_input(r, shape, dtype, seed) for r in range(hvd.size())]


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_allreduce_every_op(fe, dtype):
    m = fe.mod
    inputs = all_inputs(SHAPE, dtype)
    mine = fe.make(inputs[hvd.rank()], dtype)
    results = {
        "sum": m.allreduce(mine, op=m.Sum, name="ar.sum"),
        "average": m.allreduce(mine, name="ar.avg"),
        "min": m.allreduce(mine, op=m.Min, name="ar.min"),
        "max": m.allreduce(mine, op=m.Max, name="ar.max"),
        "product": m.allreduce(mine, op=m.Product, name="ar.prod"),
        "scaled": m.allreduce(mine, op=m.Sum, prescale_factor=3.0, postscale_factor=0.5,
                              name="ar.scaled"),
        "scalar": m.allreduce(fe.make(np.array(float(hvd.rank() + 1)), dtype), op=m.Sum),
        "empty": m.allreduce(fe.make(np.zeros((0, 4)), dtype), op=m.Sum),
    }
    stack = np.stack(inputs)
    expected = {
        "sum": stack.sum(0), "average": int_average(stack.sum(0), hvd.size(), dtype),
        "min": stack.min(0), "max": stack.max(0), "product": stack.prod(0),
        # 3x each, summed, then halved (integers: truncated toward zero).
        "scaled": int_average(stack.sum(0) * 3, 2, dtype),
        "scalar": np.array(hvd.size() * (hvd.size() + 1) / 2), "empty": np.zeros((0, 4)),
    }
    for key, out in results.items():
        assert tuple(out.shape) == expected[key].shape, key
        np.testing.assert_allclose(fe.to_numpy(out), expected[key], rtol=1e-2, err_msg=key)
        assert str(out.dtype).endswith(dtype), key


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_grouped_allreduce(fe, dtype):
    m = fe.mod
    shapes = [(4,), (2, 3), (1,)]
    inputs = [all_inputs(s, dtype, seed=i) for i, s in enumerate(shapes)]
    mine = [fe.make(inp[hvd.rank()], dtype) for inp in inputs]
    outs = m.grouped_allreduce(mine, op=m.Sum, name="grouped")
    inplace = [fe.make(inp[hvd.rank()], dtype) for inp in inputs]
    returned = m.grouped_allreduce_(inplace, op=m.Max)
    for out, ip, ret, inp in zip(outs, inplace, returned, inputs):
        np.testing.assert_allclose(fe.to_numpy(out), np.stack(inp).sum(0))
        np.testing.assert_allclose(fe.to_numpy(ip), np.stack(inp).max(0))
        assert ret is ip


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_allgather_uneven_first_dim(fe, dtype):
    m = fe.mod
    inputs = [rank_input(r, (r + 1, 2, 3), dtype) for r in range(hvd.size())]
    out = m.allgather(fe.make(inputs[hvd.rank()], dtype), name="ag")
    grouped = m.grouped_allgather([fe.make(inputs[hvd.rank()], dtype),
                                   fe.make(inputs[hvd.rank()][:, 0], dtype)])
    expected = np.concatenate(inputs)
    np.testing.assert_array_equal(fe.to_numpy(out), expected)
    np.testing.assert_array_equal(fe.to_numpy(grouped[0]), expected)
    np.testing.assert_array_equal(fe.to_numpy(grouped[1]), expected[:, 0])
    assert str(out.dtype).endswith(dtype)


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_broadcast_every_root(fe, dtype):
    m = fe.mod
    inputs = all_inputs(SHAPE, dtype)
    outs, inplace = [], []
    for root in range(hvd.size()):
        mine = fe.make(inputs[hvd.rank()], dtype)
        outs.append((m.broadcast(mine, root, name="bc.%d" % root), mine))
        target = fe.make(inputs[hvd.rank()], dtype)
        inplace.append((m.broadcast_(target, root), target))
    for root, ((out, original), (ret, target)) in enumerate(zip(outs, inplace)):
        np.testing.assert_array_equal(fe.to_numpy(out), inputs[root])
        np.testing.assert_array_equal(fe.to_numpy(original), inputs[hvd.rank()])  # untouched
        np.testing.assert_array_equal(fe.to_numpy(target), inputs[root])
        assert ret is target


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_alltoall(fe, dtype):
    m = fe.mod
    n, r = hvd.size(), hvd.rank()
    # Rank s sends (s + d) % 3 rows to rank d.
    splits = [[(s + d) % 3 for d in range(n)] for s in range(n)]
    inputs = [rank_input(s, (sum(splits[s]), 2), dtype) for s in range(n)]
    out, received = m.alltoall(fe.make(inputs[r], dtype), splits=splits[r], name="a2a")
    equal = m.alltoall(fe.make(rank_input(r, (2 * n, 3), dtype), dtype))
    offsets = [np.cumsum([0] + s) for s in splits]
    expected = np.concatenate([inputs[s][offsets[s][r]:offsets[s][r + 1]] for s in range(n)])
    np.testing.assert_array_equal(fe.to_numpy(out), expected)
    assert list(np.asarray(received)) == [splits[s][r] for s in range(n)]
    expected_equal = np.concatenate([rank_input(s, (2 * n, 3), dtype)[2 * r:2 * r + 2]
                                     for s in range(n)])
    np.testing.assert_array_equal(fe.to_numpy(equal), expected_equal)


@pytest.mark.parametrize("fe,dtype", FE_DTYPES, ids=ids(FE_DTYPES))
def test_reducescatter(fe, dtype):
    m = fe.mod
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # Uneven: the first rank gets one more row.
    inputs = all_inputs((rows, 3), dtype)
    mine = fe.make(inputs[r], dtype)
    summed = m.reducescatter(mine, op=m.Sum, name="rs.sum")
    averaged = m.reducescatter(mine, name="rs.avg")
    grouped = m.grouped_reducescatter([mine, fe.make(inputs[r][:, :1], dtype)], op=m.Sum)
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(counts[:r])
    total = np.stack(inputs).sum(0)[start:start + counts[r]]
    np.testing.assert_array_equal(fe.to_numpy(summed), total)
    np.testing.assert_allclose(fe.to_numpy(averaged), int_average(total, n, dtype), rtol=1e-2)
    np.testing.assert_array_equal(fe.to_numpy(grouped[0]), total)
    np.testing.assert_array_equal(fe.to_numpy(grouped[1]), total[:, :1])


@pytest.mark.parametrize("fe", FRONTENDS, ids=str)
def test_large_allreduce(fe):
    inputs = all_inputs((1 << 16,), "float32")
    out = fe.mod.allreduce(fe.make(inputs[hvd.rank()], "float32"), op=fe.mod.Sum)
    np.testing.assert_array_equal(fe.to_numpy(out), np.stack(inputs).sum(0))


def test_fp16_compression_on_allreduce():
    import torch
    mine = torch.full((5,), 0.1 * (hvd.rank() + 1), dtype=torch.float32)
    out = hvd.allreduce(mine, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32
    expected = 0.1 * hvd.size() * (hvd.size() + 1) / 2
    np.testing.assert_allclose(out.numpy(), expected, rtol=2e-3)


def test_deprecated_average_argument():
    import torch
    with pytest.warns(DeprecationWarning):
        out = hvd.allreduce(torch.ones(2) * (hvd.rank() + 1), average=False)
    np.testing.assert_array_equal(out.numpy(), hvd.size() * (hvd.size() + 1) / 2)
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)


def test_barrier():
    hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)
