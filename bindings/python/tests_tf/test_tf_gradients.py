"""The gradients of hvd.tensorflow's collectives, checked numerically.

With every rank's loss L_q = sum(c_q * y_q) over its op's output y_q, the global
loss is L = sum_q L_q. Each rank's autodiff gradient of its own L_r w.r.t. its
input x_r (TensorFlow with the ops' registered gradients, which reduce across
ranks) is compared with central differences of L, perturbing one element of one
rank's input at a time (every rank runs the same collectives for each). The
registered gradients are Horovod's; relative to dL/dx_r they are
    allreduce, grouped allreduce, alltoall    1     (exactly dL/dx_r)
    allgather, broadcast                      1/n   (of the mean loss, L / n)
    reducescatter (Sum and Average)           n
which `factor` states per op."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd

H = 1e-6


def _input(q, shape, seed):
    return np.random.default_rng(100 * seed + q).uniform(-1, 1, size=shape)


def _check(fn, shape_of, factor, seed, mode="eager"):
    """Compares rank r's autodiff gradient of L_r with factor * dL/dx_r."""
    n, r = hvd.size(), hvd.rank()
    x = _input(r, shape_of(r), seed)
    y_shape = fn(tf.constant(x)).shape
    c = tf.constant(np.random.default_rng(7 * seed + r).uniform(-1, 1, size=y_shape))

    def local_loss(xt):
        return tf.reduce_sum(c * fn(xt))

    def autodiff(xt):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = local_loss(xt)
        return tape.gradient(loss, xt)
    grad = (tf.function(autodiff) if mode == "function" else autodiff)(tf.constant(x)).numpy()

    def global_loss(xv):
        return float(hvd.allreduce(tf.reshape(local_loss(tf.constant(xv)), [1]), op=hvd.Sum)[0])
    numeric = np.zeros_like(x)
    for p in range(n):
        for i in range(int(np.prod(shape_of(p)))):
            losses = []
            for sign in (1, -1):
                xv = x.copy()
                if p == r:
                    xv.flat[i] += sign * H
                losses.append(global_loss(xv))
            if p == r:
                numeric.flat[i] = (losses[0] - losses[1]) / (2 * H)
    np.testing.assert_allclose(grad, factor * numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_allreduce_gradient(mode, op):
    _check(lambda x: hvd.allreduce(x, op=op, prescale_factor=1.5, postscale_factor=0.5),
           lambda q: (2, 2), 1.0, seed=1, mode=mode)


def test_grouped_allreduce_gradient():
    _check(lambda x: tf.add_n(hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum)),
           lambda q: (3,), 1.0, seed=2)


def test_allgather_gradient():
    _check(lambda x: hvd.allgather(x), lambda q: (q + 1, 2), 1.0 / hvd.size(), seed=3)
    _check(lambda x: tf.concat(hvd.grouped_allgather([x, x * 3]), 0), lambda q: (q + 1,),
           1.0 / hvd.size(), seed=4)


def test_broadcast_gradient():
    root = hvd.size() - 1
    _check(lambda x: hvd.broadcast(x, root), lambda q: (3,), 1.0 / hvd.size(), seed=5)


def test_alltoall_gradient():
    n = hvd.size()
    splits = [(hvd.rank() + p) % 2 + 1 for p in range(n)]
    sizes = [sum((q + p) % 2 + 1 for p in range(n)) for q in range(n)]
    _check(lambda x: hvd.alltoall(x, splits=splits)[0], lambda q: (sizes[q], 2), 1.0, seed=6)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_gradient(op):
    n = hvd.size()
    _check(lambda x: hvd.reducescatter(x, op=op), lambda q: (2 * n + 1, 2), float(n), seed=7)
    _check(lambda x: tf.concat(hvd.grouped_reducescatter([x, x], op=op), 0),
           lambda q: (n, 2), float(n), seed=8)
