"""hvd.numpy: the horovod.torch 0.28 collectives for NumPy arrays.

    import hvd.numpy as hvd
    hvd.init()
    avg = hvd.allreduce(np.ones(3, np.float32), name="x")

Arrays of float32, float64, float16, int8, uint8, int16, int32 and int64 are supported
(NumPy has no bfloat16: use hvd.torch for it). Non-contiguous arrays are copied to
a contiguous buffer; the in-place calls copy the result back into the array they
were given. Async calls return an int handle; synchronize(handle) returns the
output (see hvd._frontend for what each call returns).
"""
import ctypes
import math

import numpy as np

from hvd import _frontend
from hvd import _handles
from hvd import _lib
from hvd import _objects
from hvd._compression import NoneCompressor, compression_namespace, fp16_compressor  # noqa: F401
from hvd.basics import (ProcessSet, add_process_set, ccl_built, check_health,  # noqa: F401
                        cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
                        gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                        local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                        nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                        start_timeline, stop_timeline)
from hvd._version import __version__  # noqa: F401
from hvd.errors import (HorovodInternalError, HvdError, InternalError,  # noqa: F401
                        InvalidArgumentError, MismatchError)
from hvd._frontend import Adasum, Average, Max, Min, Product, Sum  # noqa: F401

_DTYPES = {
    np.dtype(np.float32): _lib.FLOAT32,
    np.dtype(np.float64): _lib.FLOAT64,
    np.dtype(np.float16): _lib.FLOAT16,
    np.dtype(np.int8): _lib.INT8,
    np.dtype(np.uint8): _lib.UINT8,
    np.dtype(np.int32): _lib.INT32,
    np.dtype(np.int64): _lib.INT64,
    np.dtype(np.int16): _lib.INT16,
}
_CODE_TO_DTYPE = {code: dtype for dtype, code in _DTYPES.items()}
_SUPPORTED = "float32, float64, float16, int8, uint8, int16, int32, int64"


class _NumpyAdapter:
    def dtype_code(self, t, what):
        if not isinstance(t, np.ndarray):
            raise InvalidArgumentError("%s: hvd.numpy takes numpy.ndarray, got %s"
                                       % (what, type(t).__name__))
        code = _DTYPES.get(t.dtype)
        if code is None:
            hint = (" (NumPy has no bfloat16; use hvd.torch with torch.bfloat16)"
                    if "bfloat16" in str(t.dtype) else "")
            raise InvalidArgumentError("%s: dtype %s is not supported; supported: %s%s"
                                       % (what, t.dtype, _SUPPORTED, hint))
        return code

    def contiguous(self, t):
        return t if t.flags.c_contiguous else np.ascontiguousarray(t)

    def fast_key(self, t):
        if isinstance(t, np.ndarray) and t.flags.c_contiguous:
            return t.dtype, t.shape, -1
        return None

    def clone(self, t):
        return np.array(t, order="C", copy=True)

    def empty_like(self, t):
        return np.empty(t.shape, dtype=t.dtype)

    def address(self, t):
        return t.ctypes.data if t.size else 0

    def numel(self, t):
        return int(t.size)

    def shape(self, t):
        return tuple(t.shape)

    def copy_(self, dst, src):
        np.copyto(dst, src)

    def placement(self, t, what):
        return -1, None  # NumPy arrays are host memory.

    def from_memory(self, address, nbytes, shape, like, stream=None):
        out = np.empty(shape, dtype=like.dtype)
        if out.nbytes != nbytes:
            raise InternalError(
                "result of %d bytes does not fill shape %s of %s" % (nbytes, shape, like.dtype))
        if nbytes:
            ctypes.memmove(out.ctypes.data, address, nbytes)
        return out

    def wrap_memory(self, address, nbytes, shape, like, owner):
        out = _handles.result_bytes(address, nbytes, owner).view(like.dtype)
        if out.size != math.prod(shape):
            raise InternalError(
                "result of %d bytes does not fill shape %s of %s" % (nbytes, shape, like.dtype))
        return out.reshape(shape)

    def int_list(self, splits):
        return [int(s) for s in np.asarray(splits).reshape(-1)]

    def int32_vector(self, values):
        return np.asarray(values, dtype=np.int32)


_ops = _frontend.Frontend(_NumpyAdapter())

poll = _handles.poll
synchronize = _handles.synchronize


def _writable(tensor, what):
    if isinstance(tensor, np.ndarray) and not tensor.flags.writeable:
        raise InvalidArgumentError("%s: the array is read-only" % what)


FP16Compressor = fp16_compressor(lambda dtype: np.issubdtype(dtype, np.floating),
                                 lambda array, dtype: array.astype(dtype), np.float16)
Compression = compression_namespace(FP16Compressor)


# ---- allreduce ---------------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    return _ops.allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                process_set)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed, ctx = compression.compress(tensor)
    out = synchronize(allreduce_async(compressed, average, name, op, prescale_factor,
                                      postscale_factor, process_set))
    return compression.decompress(out, ctx)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    _writable(tensor, "allreduce_")
    return _ops.allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                process_set, inplace=True)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    return _ops.grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                        postscale_factor, process_set)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    pairs = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_allreduce_async([p[0] for p in pairs], average, name, op,
                                               prescale_factor, postscale_factor, process_set))
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    tensors = list(tensors)
    for t in tensors:
        _writable(t, "grouped_allreduce_")
    return _ops.grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                        postscale_factor, process_set, inplace=True)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather, broadcast, alltoall, reducescatter -----------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    return _ops.allgather_async(tensor, name, process_set)


def allgather(tensor, name=None, process_set=global_process_set):
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _ops.grouped_allgather_async(tensors, name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _ops.broadcast_async(tensor, root_rank, name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    _writable(tensor, "broadcast_")
    return _ops.broadcast_async(tensor, root_rank, name, process_set, inplace=True)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    return _ops.alltoall_async(tensor, splits, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """As horovod.torch 0.28: the output, or (output, received_splits) when `splits`
    is given."""
    output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=global_process_set):
    return _ops.reducescatter_async(tensor, name, op, prescale_factor, postscale_factor,
                                    process_set)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    compressed, ctx = compression.compress(tensor)
    out = synchronize(reducescatter_async(compressed, name, op, prescale_factor,
                                          postscale_factor, process_set))
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    return _ops.grouped_reducescatter_async(tensors, name, op, prescale_factor,
                                            postscale_factor, process_set)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    pairs = [compression.compress(t) for t in tensors]
    outs = synchronize(grouped_reducescatter_async([p[0] for p in pairs], name, op,
                                                   prescale_factor, postscale_factor,
                                                   process_set))
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def barrier(process_set=global_process_set):
    _frontend.barrier(process_set)


def join(process_set=global_process_set):
    """Returns the global rank of the last rank to join."""
    return _frontend.join(process_set)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    return _objects.allgather_object(obj, name, process_set)
