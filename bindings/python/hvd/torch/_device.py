"""Where a torch tensor lives, in the C API's terms, and copying runtime-owned
device results into torch tensors.

placement(t, what) gives the `device` and `stream` that the device forms of the C
calls take (hvd.h, "Device tensors"): (-1, None) for a CPU tensor; for a CUDA
tensor its device index and torch's current stream on that device, so that the
collective starts after the work already queued there (the contiguous copy of a
strided input, the kernels that produced a gradient). A CUDA tensor given to a
libhvd built without CUDA raises InvalidUsageError, the status the C API itself
refuses it with, before anything is enqueued or copied.

copy_from_device(out, address, nbytes, stream) copies a result that the runtime
owns in device memory (hvd_handle_result of an allgather, alltoall or
reducescatter) into the torch tensor `out`. The runtime frees that memory in the
order of the stream the collective was enqueued with, so the copy is queued on
that stream; the caller's current stream then waits for it.

StreamOrder is what a device collective registers with its handle for
stream-ordered completion (hvd._handles; for results the runtime owns, only when
the consumer's stream is the enqueue stream: on_enqueue_stream). synchronize()
makes torch's current stream at that
time (the consumer) wait for the collective on the device, and, where that is
not the stream the collective was enqueued after, records the buffers as used
by the consumer (Tensor.record_stream), so that torch's caching allocator does
not hand their memory to new work on the enqueue stream before the consumer has
run past the collective. On the enqueue stream itself nothing is needed: work
queued there after the wait runs after the collective.

Nothing here touches torch.cuda for CPU tensors, so CPU-only torch builds work.
"""
import torch

from hvd import _lib
from hvd.errors import InvalidArgumentError, InvalidUsageError


def placement(t, what, cuda_built=None):
    """(device, stream) of tensor `t` for the C API: (-1, None) for a CPU tensor, or
    (device index, torch.cuda.Stream) for a CUDA tensor. `cuda_built` (default: ask
    the loaded libhvd) says whether the library takes device tensors. `t` needs only
    a `.device` (a torch.device)."""
    device = t.device
    if device.type == "cpu":
        return -1, None
    if device.type != "cuda":
        raise InvalidArgumentError("%s: tensors on device %s are not supported; only CPU "
                                   "and CUDA tensors" % (what, device))
    if cuda_built is None:
        cuda_built = _lib.cuda_built()
    if not cuda_built:
        raise InvalidUsageError(
            "tensor '%s' is on %s but libhvd was built without CUDA (%s); move the tensor "
            "to the CPU, or use a libhvd built with CUDA (cmake -DHVD_WITH_CUDA=ON)"
            % (what, device, _library_path()))
    index = device.index if device.index is not None else torch.cuda.current_device()
    return index, torch.cuda.current_stream(index)


def _library_path():
    try:
        return _lib.lib().path
    except Exception:  # Only for the message: the check itself does not need the path.
        return "libhvd.so"


class _DeviceBytes:
    """`nbytes` bytes of device memory at `address`, as __cuda_array_interface__
    (version 2: no stream, the caller orders the reads)."""

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 2,
        }


def copy_from_device(out, address, nbytes, stream):
    """Copies `nbytes` of device memory at `address` into the contiguous CUDA tensor
    `out` (of exactly that many bytes), on `stream` (None: the current stream); see
    the module docstring for the ordering."""
    src = torch.as_tensor(_DeviceBytes(address, nbytes), device=out.device)
    dst = out.view(-1).view(torch.uint8)  # Every dtype, bfloat16 included, as bytes.
    current = torch.cuda.current_stream(out.device)
    if stream is None or stream == current:
        dst.copy_(src)
        return
    stream.wait_stream(current)  # `out` was allocated in the current stream's order.
    with torch.cuda.stream(stream):
        dst.copy_(src)
    out.record_stream(stream)
    current.wait_stream(stream)


class StreamOrder:
    """The consumer side of one device collective (module docstring): `stream` is
    the torch stream it was enqueued after, `device` its device index."""
    __slots__ = ("device", "stream", "consumer")

    def __init__(self, device, stream):
        self.device = device
        self.stream = stream
        self.consumer = None

    def consumer_stream(self):
        """The cudaStream_t of torch's current stream on the device (remembered
        for retain)."""
        self.consumer = torch.cuda.current_stream(self.device)
        return self.consumer.cuda_stream or None

    def on_enqueue_stream(self):
        """Whether torch's current stream on the device is the enqueue stream."""
        return torch.cuda.current_stream(self.device) == self.stream

    def retain(self, keepalive):
        """Records every CUDA tensor in `keepalive` (nested tuples and lists) as
        used by the consumer stream, when that is not the enqueue stream."""
        if self.consumer is None or self.consumer == self.stream:
            return
        for t in _tensors(keepalive):
            t.record_stream(self.consumer)


def _tensors(obj):
    if torch.is_tensor(obj):
        if obj.is_cuda:
            yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item)
