"""Failures as a TensorFlow user meets them: ranks that disagree about a tensor (the
op fails on every rank, naming the tensor, the ranks and what differed), bad input,
a killed rank (the survivors' pending ops fail naming it, within seconds), the
TensorFlow errors as hvd.errors, elastic.run resetting on them, and a kernel
library built for another TensorFlow."""
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from hvd import errors
from hvd.tensorflow import mpi_ops

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_mismatched_shapes_and_dtypes_are_named(multi_rank, mode):
    r = hvd.rank()
    call = (lambda f, *a: f(*a)) if mode == "eager" else (lambda f, *a: tf.function(f)(*a))
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        call(lambda t: hvd.allreduce(t, name="grads"), tf.ones([2, 3] if r == 0 else [3, 2]))
    message = info.value.message
    assert "HVD_MISMATCH: tensor '" in message and "(allreduce)" in message
    assert "shape" in message and "rank 0" in message and "[2, 3]" in message
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        call(lambda t: hvd.allgather(t), tf.ones([2], tf.float32 if r == 0 else tf.int32))
    message = info.value.message
    assert "HVD_MISMATCH" in message and "dtype" in message and "float32" in message
    err = mpi_ops.hvd_error(info.value)
    assert isinstance(err, errors.MismatchError) and err.status == "HVD_MISMATCH"
    # The runtime is healthy afterwards.
    assert hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy().tolist() == [hvd.size()] * 2


def test_bad_input_is_an_invalid_argument():
    # TensorFlow's own dtype check (a TypeError in a graph).
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError), match="uint16"):
        hvd.allreduce(tf.ones([2], tf.uint16))
    with pytest.raises(tf.errors.InvalidArgumentError, match="HVD_INVALID_ARGUMENT"):
        hvd.allgather(tf.constant(1.0))  # a scalar has no first dimension
    with pytest.raises(tf.errors.InvalidArgumentError, match="HVD_INVALID_ARGUMENT"):
        hvd.alltoall(tf.ones([hvd.size() + 1]) if hvd.size() > 1 else tf.ones([3]),
                     splits=[hvd.size() + 5] * hvd.size())
    with pytest.raises(errors.InvalidArgumentError, match="not registered"):
        hvd.allreduce(tf.ones([1]), process_set=hvd.ProcessSet([0]))


def test_errors_translate_to_hvd_classes():
    for status, tf_class, hvd_class in [
            ("HVD_REMOTE_ERROR", tf.errors.UnavailableError, errors.RemoteError),
            ("HVD_TIMEOUT", tf.errors.DeadlineExceededError, errors.HvdTimeoutError),
            ("HVD_SHUT_DOWN", tf.errors.AbortedError, errors.ShutDownError)]:
        e = tf_class(None, None, "%s: rank 1 (pid 7) was killed by signal 9" % status)
        assert isinstance(mpi_ops.hvd_error(e), hvd_class)
    assert mpi_ops.hvd_error(tf.errors.UnknownError(None, None, "something else")) is None


def test_elastic_run_resets_on_a_lost_rank_error():
    # A collective failing with a lost rank raises UnavailableError from its op;
    # run() turns it into RemoteError, so the state is restored and the function
    # runs again after a reset (here a job of one rank: shutdown and init).
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        if len(calls) == 1:
            state.step = 5  # not committed: rolled back
            raise tf.errors.UnavailableError(None, None, "HVD_REMOTE_ERROR: rank 1 was lost")
        return hvd.size()

    if hvd.size() != 1:
        pytest.skip("resets the runtime: one rank only")
    assert train(state) == 1
    assert calls == [0, 0]
    assert hvd.is_initialized()


def test_a_library_built_for_another_tensorflow_is_refused(tmp_path):
    fake = tmp_path / "libhvd_tensorflow.so"
    fake.write_bytes(b"\0ELF...hvd-tensorflow-built-against:2.0.0\0...")
    assert mpi_ops._built_against(str(fake)) == "2.0.0"
    path = os.path.join(HERE, "..")
    env = dict(os.environ, HVD_TF_LIBRARY=str(fake), PYTHONPATH=path)
    out = subprocess.run([sys.executable, "-c", "import hvd.tensorflow"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert ("was built against TensorFlow 2.0.0, but this is TensorFlow %s" % tf.__version__
            in out.stderr)
    missing = dict(env, HVD_TF_LIBRARY=str(tmp_path / "none.so"))
    out = subprocess.run([sys.executable, "-c", "import hvd.tensorflow"], env=missing,
                         capture_output=True, text=True, timeout=120)
    assert "libhvd_tensorflow.so not found" in out.stderr and "HVD_TF_PYTHON" in out.stderr


KILLED_JOB = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, %r)
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    hvd.allreduce(tf.ones([4]))
    if hvd.rank() == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.time()
    try:
        hvd.allreduce(tf.ones([4]), name="after")
        print("rank %%d: no error" %% hvd.rank())
    except tf.errors.OpError as e:
        print("rank %%d: %%s after %%.1f s: %%s" %% (hvd.rank(), type(e).__name__,
                                               time.time() - start, e.message))
        os._exit(0)
""")


@pytest.mark.single
@pytest.mark.slow
def test_a_killed_rank_is_named_by_the_others(tmp_path):
    from hvd import _lib
    script = tmp_path / "killed.py"
    script.write_text(KILLED_JOB % os.path.join(HERE, ".."))
    dprun = os.path.join(os.path.dirname(_lib.lib().path), "dprun")
    out = subprocess.run([dprun, "-np", "3", sys.executable, str(script)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HVD_TIMEOUT="10", TF_CPP_MIN_LOG_LEVEL="3"))
    lines = [line for line in out.stdout.splitlines() if ": rank " in line and " after " in line]
    assert len(lines) == 2, out.stdout + out.stderr
    for line in lines:
        assert "UnavailableError" in line and "HVD_REMOTE_ERROR" in line, line
        assert "rank 1 (pid" in line, line
        seconds = float(line.split(" after ")[1].split(" s:")[0])
        assert seconds < 10, line
    assert "was killed by signal 9" in out.stderr
