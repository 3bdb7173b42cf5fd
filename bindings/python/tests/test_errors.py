"""Errors: the runtime's message and status come through as HvdError subclasses;
argument errors are caught in Python with the same classes."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import hvd
import hvd.numpy as hnp
import hvd.torch as ht

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_mismatched_shape_names_the_tensor(multi_rank):
    t = torch.ones(ht.rank() + 2)
    with pytest.raises(hvd.MismatchError) as info:
        ht.allreduce(t, name="mismatched.grad")
    err = info.value
    assert isinstance(err, hvd.HvdError) and isinstance(err, hvd.HorovodInternalError)
    assert isinstance(err, RuntimeError)
    assert err.status == "HVD_MISMATCH"
    assert "allreduce.mismatched.grad" in str(err)
    assert "HVD_MISMATCH" in str(err)
    assert "rank 0" in err.detail
    # The runtime keeps serving.
    out = ht.allreduce(torch.ones(3), op=ht.Sum, name="after.mismatch")
    assert (out == ht.size()).all()


def test_mismatched_dtype(multi_rank):
    a = np.ones(3, dtype=np.float32 if hnp.rank() == 0 else np.float64)
    with pytest.raises(hvd.MismatchError, match="dtype"):
        hnp.allreduce(a, name="mismatched.dtype")


def test_mismatched_op(multi_rank):
    op = ht.Sum if ht.rank() == 0 else ht.Max
    with pytest.raises(hvd.MismatchError, match="mismatched.op"):
        ht.allreduce(torch.ones(2), op=op, name="mismatched.op")


def test_mismatched_root_rank(multi_rank):
    with pytest.raises(hvd.MismatchError, match="mismatched.root"):
        ht.broadcast(torch.ones(2), root_rank=ht.rank(), name="mismatched.root")


def test_unsupported_dtypes():
    with pytest.raises(hvd.InvalidArgumentError, match="torch.bool"):
        ht.allreduce(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="torch.complex64"):  # InvalidArgumentError is a ValueError.
        ht.allreduce_(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(hvd.InvalidArgumentError, match="complex128"):
        hnp.allreduce(np.ones(3, dtype=np.complex128))
    with pytest.raises(hvd.InvalidArgumentError, match="bool"):
        hnp.allgather(np.ones(3, dtype=bool))
    with pytest.raises(hvd.InvalidArgumentError, match="numpy.ndarray"):
        hnp.allreduce([1.0, 2.0])
    with pytest.raises(hvd.InvalidArgumentError, match="torch.Tensor"):
        ht.allreduce(np.ones(3))


def test_non_cpu_tensor():
    with pytest.raises(hvd.InvalidArgumentError, match="only CPU and CUDA tensors"):
        ht.allreduce(torch.empty(3, device="meta"))


def test_python_side_argument_errors():
    with pytest.raises(hvd.InvalidArgumentError, match="unknown reduce op 42"):
        ht.allreduce(torch.ones(2), op=42)
    with pytest.raises(hvd.InvalidArgumentError, match="scalar"):
        ht.allgather(torch.tensor(1.0))
    with pytest.raises(hvd.InvalidArgumentError, match="not registered"):
        ht.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]))
    with pytest.raises(hvd.InvalidArgumentError, match="read-only"):
        a = np.ones(2)
        a.flags.writeable = False
        hnp.allreduce_(a)


def test_runtime_argument_errors():
    with pytest.raises(hvd.InvalidArgumentError) as info:
        ht.allreduce(torch.ones(2), name="x" * 2000)
    assert info.value.status == "HVD_INVALID_ARGUMENT"
    with pytest.raises(hvd.HvdError) as info:
        ht.alltoall(torch.ones(4, 2), splits=[1] * (ht.size() + 1))
    assert info.value.code is not None  # Raised by the runtime, not in Python.


def test_not_initialized_in_a_fresh_process():
    code = ("import hvd.numpy as h\n"
            "try:\n    h.rank()\nexcept h.HvdError as e:\n"
            "    print(type(e).__name__, e.status, e)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HVD_") or k == "HVD_LIBRARY"}
    env["PYTHONPATH"] = PKG
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "NotInitializedError HVD_NOT_INITIALIZED" in out.stdout
    assert "hvd_init" in out.stdout


def test_library_search(tmp_path):
    from hvd import _lib
    env = dict(os.environ)
    env["HVD_LIBRARY"] = str(tmp_path / "missing.so")
    env["PYTHONPATH"] = PKG
    out = subprocess.run([sys.executable, "-c", "import hvd.numpy as h; h.size()"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "HVD_LIBRARY" in out.stderr
    assert os.path.basename(_lib.lib().path) == "libhvd.so"
