"""The TensorFlow suite of hvd (hvd.tensorflow, hvd.tensorflow.keras): every rank of a
dprun job runs it in the same order, as bindings/python/tests does (see its
conftest). Run from the `tf` venv (.ci/requirements/tf.txt), never with Debian's
torch: bindings/python/tests_tf/run_tf_tests.sh. TF_USE_LEGACY_KERAS=1 runs the
Keras tests on tf-keras (Keras 2) instead of Keras 3.

Markers: `slow` (a few seconds or more each; all still run in .ci/test), `single`
(only in a single process: they launch their own dprun jobs)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvd.tensorflow as hvd  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds; selected out with -m 'not slow'")
    config.addinivalue_line("markers", "single: runs only in a single process (starts dprun)")
    # Ranks share the host's cores.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(4)
    hvd.init()


def pytest_report_header(config):
    import keras
    from hvd import _lib
    return "hvd: rank %d of %d, library %s; TensorFlow %s, keras %s" % (
        hvd.rank(), hvd.size(), _lib.lib().path, tf.__version__, keras.__version__)


def pytest_collection_modifyitems(config, items):
    # Decided from the size alone, so every rank skips alike.
    if hvd.size() > 1:
        skip = pytest.mark.skip(reason="starts its own dprun jobs: single process only")
        for item in items:
            if "single" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def multi_rank():
    if hvd.size() < 2:
        pytest.skip("needs at least 2 ranks")
