"""Shared helpers of the TensorFlow suite: per-rank inputs any rank can rebuild, the
dtypes, and running a function eagerly or inside tf.function."""
import numpy as np
import tensorflow as tf

REDUCE_DTYPES = [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int8, tf.uint8, tf.int16,
                 tf.int32, tf.int64]
# Ops that only move bytes take these too.
MOVE_DTYPES = REDUCE_DTYPES + [tf.bool, tf.uint16]
MODES = ["eager", "function"]


def rank_input(rank, shape, dtype, seed=0):
    """Rank `rank`'s input as a float64 array of small integers: exact in every dtype,
    even after sums and products over 4 ranks."""
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype == tf.bool:
        return rng.integers(0, 2, size=shape).astype(np.float64)
    if dtype in (tf.uint8, tf.uint16):
        return rng.integers(0, 4, size=shape).astype(np.float64)
    return rng.integers(-3, 4, size=shape).astype(np.float64)


def make(array, dtype):
    return tf.cast(tf.constant(np.asarray(array)), dtype)


def as_float(t):
    return tf.cast(t, tf.float64).numpy()


def run(mode, fn, *args):
    """fn(*args) eagerly, or traced and run as a tf.function."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn)(*args)


def int_average(total, n, dtype):
    """Average as the runtime computes it: integer dtypes truncate toward zero."""
    if dtype.is_floating:
        return total / n
    return np.trunc(total / n)


# One unit in the last place of each float dtype, for results that divide (Average).
EPS = {tf.float16: 1e-3, tf.bfloat16: 8e-3, tf.float32: 2e-7, tf.float64: 1e-15}


def assert_close(got, want, dtype, msg=""):
    """Exact for integers; within a rounding of the dtype for floats."""
    import numpy.testing as npt
    if dtype.is_floating:
        npt.assert_allclose(as_float(got), want, rtol=EPS[dtype], atol=EPS[dtype], err_msg=msg)
    else:
        npt.assert_array_equal(as_float(got), want, err_msg=msg)
