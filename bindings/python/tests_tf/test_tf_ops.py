"""hvd.tensorflow's collectives against local references, for every dtype each op
takes, eagerly and inside tf.function (where every dtype's collective is one node
of a single graph, all in flight together): allreduce (each op, pre/postscale),
grouped allreduce (mixed dtypes), allgather (ragged), grouped allgather,
broadcast, in-place broadcast, alltoall (uneven splits), reducescatter (uneven),
grouped reducescatter, join, barrier, process sets and the topology ops."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from tf_helpers import (MODES, MOVE_DTYPES, REDUCE_DTYPES, as_float, assert_close, int_average,
                        make, rank_input, run)

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
       "Product": hvd.Product}
REFERENCE = {"Sum": np.sum, "Min": np.min, "Max": np.max, "Product": np.prod}


def _inputs(dtypes, shape_of, seed):
    """(this rank's tensors, every rank's float64 arrays) per dtype."""
    n, r = hvd.size(), hvd.rank()
    per_rank = [[rank_input(q, shape_of(q), d, seed) for q in range(n)] for d in dtypes]
    mine = [make(arrays[r], d) for arrays, d in zip(per_rank, dtypes)]
    return mine, per_rank


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_name", sorted(OPS))
def test_allreduce_every_dtype(mode, op_name):
    n = hvd.size()
    mine, per_rank = _inputs(REDUCE_DTYPES, lambda q: (3, 5), seed=1)
    out = run(mode, lambda ts: [hvd.allreduce(t, op=OPS[op_name]) for t in ts], mine)
    for d, arrays, got in zip(REDUCE_DTYPES, per_rank, out):
        assert got.dtype == d and got.shape == (3, 5)
        stacked = np.stack(arrays)
        if op_name == "Average":
            want = int_average(stacked.sum(axis=0), n, d)
        else:
            want = REFERENCE[op_name](stacked, axis=0)
        assert_close(got, want, d, "%s %s" % (d.name, op_name))


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_scale_factors_and_shapes(mode):
    n = hvd.size()
    shapes = [(), (1,), (0,), (4, 0, 2), (2, 3, 4)]
    arrays = [[rank_input(q, s, tf.float32, 2) for q in range(n)] for s in shapes]
    mine = [make(a[hvd.rank()], tf.float32) for a in arrays]
    out = run(mode, lambda ts: [hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5,
                                              postscale_factor=3.0) for t in ts], mine)
    for s, a, got in zip(shapes, arrays, out):
        assert got.shape == s
        np.testing.assert_allclose(got.numpy(), 1.5 * np.sum(a, axis=0), rtol=1e-6)
    # Integers scale in float64 and truncate (hvd.h's rule).
    got = hvd.allreduce(tf.constant([7, -7], tf.int32), op=hvd.Sum, prescale_factor=0.5)
    np.testing.assert_array_equal(got.numpy(), [n * 3, n * -3])


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_mixed_dtypes_and_sparse(mode):
    n = hvd.size()
    dtypes = [tf.float32, tf.int64, tf.float16]
    mine, per_rank = _inputs(dtypes, lambda q: (2, 3), seed=3)

    def fn(ts):
        sparse = tf.IndexedSlices(tf.ones([2, 3]) * float(hvd.rank() + 1),
                                  tf.constant([hvd.rank(), 0], tf.int64),
                                  dense_shape=tf.constant([n + 1, 3], tf.int64))
        return hvd.grouped_allreduce(ts + [sparse], op=hvd.Sum)
    out = run(mode, fn, mine)
    for d, arrays, got in zip(dtypes, per_rank, out):
        assert got.dtype == d
        np.testing.assert_array_equal(as_float(got), np.sum(arrays, axis=0))
    dense = tf.convert_to_tensor(out[-1]).numpy()
    want = np.zeros((n + 1, 3))
    for q in range(n):
        want[q] += q + 1
        want[0] += q + 1
    np.testing.assert_array_equal(dense, want)  # gathered slices sum like a dense allreduce


@pytest.mark.parametrize("mode", MODES)
def test_allgather_ragged_every_dtype(mode):
    n = hvd.size()
    mine, per_rank = _inputs(MOVE_DTYPES, lambda q: (q + 1, 2, 3), seed=4)
    out = run(mode, lambda ts: [hvd.allgather(t) for t in ts], mine)
    for d, arrays, got in zip(MOVE_DTYPES, per_rank, out):
        assert got.dtype == d and got.shape == (n * (n + 1) // 2, 2, 3)
        np.testing.assert_array_equal(as_float(got), np.concatenate(arrays), err_msg=d.name)
    # A rank with no rows at all, and grouped.
    rows = [rank_input(q, (q % 2, 4), tf.int32, 5) for q in range(n)]
    got = run(mode, lambda a, b: hvd.grouped_allgather([a, b]),
              make(rows[hvd.rank()], tf.int32), make(rows[hvd.rank()] * 2, tf.float64))
    np.testing.assert_array_equal(got[0].numpy(), np.concatenate(rows))
    np.testing.assert_array_equal(got[1].numpy(), 2 * np.concatenate(rows))


def test_allgather_result_is_the_runtimes_memory_without_a_copy():
    # The output tensor is made over the handle's result buffer: 64-byte aligned,
    # and the values survive the handle's release with the tensor alive.
    t = hvd.allgather(tf.ones([1000 + hvd.rank(), 3]))
    del_a = hvd.allgather(tf.zeros([5]))
    del del_a
    assert t.numpy().sum() == 3 * sum(1000 + q for q in range(hvd.size()))
    ptr = t.__array__().__array_interface__["data"][0]
    assert ptr % 64 == 0


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_every_dtype_from_each_root(mode):
    n = hvd.size()
    mine, per_rank = _inputs(MOVE_DTYPES, lambda q: (2, 5), seed=6)
    for root in range(n):
        out = run(mode, lambda ts: [hvd.broadcast(t, root) for t in ts], mine)
        for d, arrays, got in zip(MOVE_DTYPES, per_rank, out):
            assert got.dtype == d
            np.testing.assert_array_equal(as_float(got), arrays[root], err_msg=d.name)
        # The input is not modified.
        np.testing.assert_array_equal(as_float(mine[0]), per_rank[0][hvd.rank()])


def test_broadcast_inplace_writes_the_variables_and_copies_on_write():
    n = hvd.size()
    root = n - 1
    variables = [tf.Variable(make(rank_input(hvd.rank(), (3, 2), d, 7), d))
                 for d in (tf.float32, tf.int64, tf.bool)]
    before = variables[0].read_value()  # shares the buffer: must keep its value
    kept = before.numpy().copy()
    values = hvd.broadcast_(variables, root)
    for v, got, d in zip(variables, values, (tf.float32, tf.int64, tf.bool)):
        want = rank_input(root, (3, 2), d, 7)
        np.testing.assert_array_equal(as_float(v), want)
        np.testing.assert_array_equal(as_float(got), want)
    np.testing.assert_array_equal(before.numpy(), kept)


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_uneven_splits_every_dtype(mode):
    n, r = hvd.size(), hvd.rank()
    # Rank q sends (q + p) % 3 rows to rank p.
    splits = lambda q: [(q + p) % 3 for p in range(n)]  # noqa: E731
    mine, per_rank = _inputs(MOVE_DTYPES, lambda q: (sum(splits(q)), 2), seed=8)
    out = run(mode, lambda ts, s: [hvd.alltoall(t, splits=s) for t in ts], mine,
              tf.constant(splits(r), tf.int32))
    for d, arrays, (got, received) in zip(MOVE_DTYPES, per_rank, out):
        want = []
        for q in range(n):
            start = sum(splits(q)[:r])
            want.append(arrays[q][start:start + splits(q)[r]])
        np.testing.assert_array_equal(as_float(got), np.concatenate(want), err_msg=d.name)
        np.testing.assert_array_equal(received.numpy(), [splits(q)[r] for q in range(n)])
    # No splits: an equal share, and no received splits returned.
    equal = run(mode, lambda t: hvd.alltoall(t), tf.fill([2 * n], float(r)))
    np.testing.assert_array_equal(equal.numpy(), np.repeat(np.arange(n, dtype=np.float32), 2))


@pytest.mark.parametrize("mode", MODES)
def test_reducescatter_uneven_and_grouped(mode):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # the first rank gets one row more
    dtypes = [tf.float32, tf.int32, tf.float64, tf.bfloat16]
    mine, per_rank = _inputs(dtypes, lambda q: (rows, 3), seed=9)
    start = r * 2 + min(r, 1)
    count = 3 if r == 0 else 2
    for op_name, op in (("Sum", hvd.Sum), ("Average", hvd.Average)):
        out = run(mode, lambda ts: [hvd.reducescatter(t, op=op) for t in ts], mine)
        grouped = run(mode, lambda ts: hvd.grouped_reducescatter(ts, op=op), mine)
        for d, arrays, got, got_g in zip(dtypes, per_rank, out, grouped):
            total = np.sum(arrays, axis=0)[start:start + count]
            want = total if op_name == "Sum" else int_average(total, n, d)
            assert_close(got, want, d, d.name)
            assert_close(got_g, want, d, d.name)


def test_topology_ops_answer_at_run_time():
    assert int(hvd.rank_op()) == hvd.rank()
    assert int(hvd.size_op()) == hvd.size()
    assert int(hvd.local_rank_op()) == hvd.local_rank()
    assert int(hvd.local_size_op()) == hvd.local_size()
    assert int(hvd.process_set_included_op(0)) == 1
    f = tf.function(lambda: (hvd.size_op(), hvd.rank_op()))
    assert [int(x) for x in f()] == [hvd.size(), hvd.rank()]


def test_process_set_collectives(multi_rank):
    n = hvd.size()
    evens = hvd.add_process_set([q for q in range(n) if q % 2 == 0])
    try:
        r = hvd.rank()
        if r % 2 == 0:
            x = tf.constant([float(r + 1)] * 3)
            got = hvd.allreduce(x, op=hvd.Sum, process_set=evens)
            members = [q for q in range(n) if q % 2 == 0]
            np.testing.assert_array_equal(got.numpy(), [sum(q + 1 for q in members)] * 3)
            g = hvd.allgather(tf.fill([1], r), process_set=evens)
            np.testing.assert_array_equal(g.numpy(), members)
            # root_rank is a global rank, as in Horovod.
            b = hvd.broadcast(tf.constant([r]), members[-1], process_set=evens)
            assert b.numpy().tolist() == [members[-1]]
            assert int(hvd.size_op(evens.process_set_id)) == len(members)
            assert int(hvd.process_set_included_op(evens.process_set_id)) == 1
        else:
            assert int(hvd.process_set_included_op(evens.process_set_id)) == 0
    finally:
        hvd.barrier()
        hvd.remove_process_set(evens)


def test_join_zeros_for_the_joined_rank_and_barrier():
    # The last rank joins first; the others' allreduce completes with its zeros.
    n = hvd.size()
    first = n - 1
    if hvd.rank() == first:
        joined = hvd.join()
    else:
        summed = hvd.allreduce(tf.constant([1.0, 2.0]), op=hvd.Sum)
        np.testing.assert_array_equal(summed.numpy(), [n - 1.0, 2.0 * (n - 1)])
        averaged = hvd.allreduce(tf.constant([4.0]), op=hvd.Average)
        np.testing.assert_allclose(averaged.numpy(), [4.0 * (n - 1) / n])  # zeros count
        joined = hvd.join()
    # Every rank gets the same last rank, which is not the first to join.
    everyone = hvd.allgather(tf.reshape(joined, [1])).numpy().tolist()
    assert everyone == [int(joined)] * n
    assert n == 1 or int(joined) != first
    hvd.barrier()
    assert hvd.barrier() is None  # eagerly nothing to return
