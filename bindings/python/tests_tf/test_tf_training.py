"""Training with hvd.tensorflow outside Keras's fit: DistributedGradientTape (groups,
sparse gradients, local sources, predivide, compression), broadcast_variables and
objects, and TF1 graphs (tf.compat.v1 sessions) with the legacy
DistributedOptimizer, local gradient aggregation and BroadcastGlobalVariablesHook."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd


def _grads_of(loss_fn, variables, **tape_args):
    with tf.GradientTape() as tape:
        loss = loss_fn()
    return hvd.DistributedGradientTape(tape, **tape_args).gradient(loss, variables)


def test_tape_averages_and_keeps_local_sources():
    n, r = hvd.size(), hvd.rank()
    w = tf.Variable([1.0, 2.0])
    local = tf.Variable([3.0])
    with tf.GradientTape() as tape:
        loss = float(r + 1) * (tf.reduce_sum(w) + tf.reduce_sum(local))
    tape = hvd.DistributedGradientTape(tape)
    tape.register_local_source(local)
    gw, gl = tape.gradient(loss, [w, local])
    mean = sum(q + 1 for q in range(n)) / n
    np.testing.assert_allclose(gw.numpy(), [mean, mean])
    np.testing.assert_allclose(gl.numpy(), [(r + 1) / n])  # local: scaled, not reduced


@pytest.mark.parametrize("groups", [None, 2, "lists"])
def test_tape_groups_predivide_and_fp16(groups):
    n, r = hvd.size(), hvd.rank()
    variables = [tf.Variable(np.full([k + 1], 1.0, np.float32)) for k in range(4)]
    if groups == "lists":
        groups = [[variables[0], variables[3]], [variables[1]]]
    grads = _grads_of(lambda: float(r + 1) * tf.add_n([tf.reduce_sum(v) for v in variables]),
                      variables, groups=groups, gradient_predivide_factor=2.0,
                      compression=hvd.Compression.fp16)
    mean = sum(q + 1 for q in range(n)) / n
    for v, g in zip(variables, grads):
        assert g.dtype == tf.float32
        np.testing.assert_allclose(g.numpy(), np.full(v.shape, mean), rtol=1e-3)


def test_tape_sparse_gradients_gathered_or_dense():
    n, r = hvd.size(), hvd.rank()
    table = tf.Variable(np.zeros([n + 1, 2], np.float32))
    loss = lambda: tf.reduce_sum(tf.gather(table, [r, n]) * float(r + 1))  # noqa: E731
    sparse, = _grads_of(loss, [table])
    dense, = _grads_of(loss, [table], sparse_as_dense=True)
    assert isinstance(sparse, tf.IndexedSlices)
    want = np.zeros([n + 1, 2])
    for q in range(n):
        want[q] += (q + 1) / n
        want[n] += (q + 1) / n
    np.testing.assert_allclose(tf.convert_to_tensor(sparse).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(dense.numpy(), want, rtol=1e-6)


def test_tape_inside_tf_function_with_generic_names():
    n, r = hvd.size(), hvd.rank()
    w = tf.Variable([1.0, 1.0])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = float(r + 1) * tf.reduce_sum(w * w)
        grads = hvd.DistributedGradientTape(tape, op=hvd.Sum).gradient(
            loss, [w], use_generic_names=True)
        return grads[0]
    total = sum(q + 1 for q in range(n))
    np.testing.assert_allclose(step().numpy(), [2.0 * total] * 2)
    np.testing.assert_allclose(step().numpy(), [2.0 * total] * 2)


def test_broadcast_variables_and_objects():
    root = hvd.size() - 1
    variables = [tf.Variable(np.full([3], hvd.rank(), np.float32)),
                 tf.Variable(np.full([2, 2], hvd.rank(), np.int64))]
    hvd.broadcast_variables(variables, root_rank=root)
    for v in variables:
        assert np.all(v.numpy() == root)
    obj = {"epoch": 3, "name": "x"} if hvd.rank() == root else None
    assert hvd.broadcast_object(obj, root_rank=root) == {"epoch": 3, "name": "x"}
    assert hvd.broadcast_object_fn(root_rank=root)(obj) == {"epoch": 3, "name": "x"}
    assert hvd.allgather_object({"r": hvd.rank()}) == [{"r": q} for q in range(hvd.size())]
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        hvd.broadcast_global_variables(0)


def test_tf1_graph_optimizer_hook_and_local_aggregation():
    n, r = hvd.size(), hvd.rank()
    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([float(r), float(r)]))
        loss = float(r + 1) * tf.reduce_sum(w)
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0))
        train = opt.minimize(loss)
        hook = hvd.BroadcastGlobalVariablesHook(n - 1)
        acc = tf.compat.v1.get_variable("acc", initializer=tf.constant([0.0]))
        agg = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                       backward_passes_per_step=2,
                                       average_aggregated_gradients=True)
        grads = agg.compute_gradients(float(r + 1) * tf.reduce_sum(acc), var_list=[acc])
        agg_step = agg.apply_gradients(grads)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            assert sess.run(w).tolist() == [n - 1.0, n - 1.0]  # the hook broadcast
            sess.run(train)
            mean = sum(q + 1 for q in range(n)) / n
            np.testing.assert_allclose(sess.run(w), [n - 1.0 - mean] * 2)
            values = []
            for _ in range(4):
                sess.run(agg_step)
                values.append(float(sess.run(acc)[0]))
        # Applied on every second pass only, with the mean of two passes' means.
        np.testing.assert_allclose(values, [0.0, -mean, -mean, -2 * mean], rtol=1e-6)
