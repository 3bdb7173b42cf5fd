"""hvd: Python bindings of the dprun collective runtime (libhvd.so, via ctypes).

Front-ends with horovod.torch 0.28's API:
  hvd.torch  - torch CPU and CUDA tensors, DistributedOptimizer, ShardedOptimizer (ZeRO 1/2);
  hvd.numpy  - NumPy arrays;
and with horovod.tensorflow's and horovod.tensorflow.keras's:
  hvd.tensorflow, hvd.tensorflow.keras (also hvd.keras) - TensorFlow ops, Keras 3 and tf-keras.
This package itself holds what they share: the life cycle and topology calls, process
sets and the exceptions. libhvd.so is found through $HVD_LIBRARY, beside the dprun that
started this process, inside this package once installed, in the checkout's build
folders, or on the system (see hvd._lib).
"""
from hvd.basics import (ProcessSet, add_process_set, check_health, cross_rank, cross_size,  # noqa: F401
                        global_process_set, init, is_initialized, local_rank, local_size, rank,
                        remove_process_set, shutdown, size)
from hvd.errors import (HorovodInternalError, HvdError, HvdTimeoutError, InternalError,  # noqa: F401
                        InvalidArgumentError, InvalidUsageError, MismatchError,
                        NotInitializedError, RemoteError, ShutDownError)

from hvd._version import __version__  # noqa: F401
from hvd.runner import run  # noqa: F401
