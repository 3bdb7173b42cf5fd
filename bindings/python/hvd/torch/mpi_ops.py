"""The horovod.torch 0.28 collectives for torch CPU and CUDA tensors.

Supported dtypes: float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64
(Horovod's list, plus bfloat16); torch.bool and every other dtype raise
InvalidArgumentError, as do sparse tensors
and tensors on devices other than the CPU and CUDA. Non-contiguous tensors are
copied to a contiguous buffer; the in-place calls (trailing underscore) copy the
result back, so the tensor given is really modified.

CUDA tensors need a libhvd built with CUDA (hvd.cuda_built()); otherwise they raise
InvalidUsageError before anything is enqueued. A CUDA collective follows the work
queued so far on torch's current stream of the tensor's device, and its outputs
are CUDA tensors on that device, ready once synchronize() returns (see _device).
All of one rank's CUDA tensors in a process set must be on one device (usually
torch.cuda.set_device(hvd.local_rank())). received_splits of alltoall and the
results of join stay on the CPU.

The blocking allreduce, allgather, broadcast, alltoall, reducescatter and their
grouped forms are differentiable with Horovod's definitions: allreduce's gradient
is the allreduce of the gradient with the same op and scale factors; allgather's
is the averaged gradient's slice for this rank; broadcast's is the averaged
gradient on the root and zero elsewhere; alltoall's sends the gradient back;
reducescatter's is the allgather of the gradient times the scale factors, and
times the set's size for Sum (not for Average). Each is the gradient, on this
rank's input, of one objective over all ranks' losses L_r: sum_r L_r for
allreduce and alltoall, (1/size) sum_r L_r for allgather and broadcast, and
size * sum_r L_r for reducescatter. The async and in-place calls are not
differentiable.
"""
import ctypes
import math

import torch

from hvd import _frontend
from hvd import _handles
from hvd import _lib
from hvd import basics
from hvd.basics import global_process_set
from hvd.errors import InternalError, InvalidArgumentError
from hvd.torch import _adasum_host
from hvd.torch import _device
from hvd.torch.compression import Compression

Sum, Average, Min, Max, Product, Adasum = (_frontend.Sum, _frontend.Average, _frontend.Min,
                                           _frontend.Max, _frontend.Product, _frontend.Adasum)

_DTYPES = {
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.int8: _lib.INT8,
    torch.uint8: _lib.UINT8,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.int16: _lib.INT16,
}
_SUPPORTED = "float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64"


def check_tensor(t, what):
    """The hvd dtype of `t`; InvalidArgumentError if the runtime cannot take it."""
    # The common case first, in a few attribute reads (a gradient hook's hot path).
    if isinstance(t, torch.Tensor) and t.is_cpu and t.layout is torch.strided:
        code = _DTYPES.get(t.dtype)
        if code is not None:
            return code
    if not torch.is_tensor(t):
        raise InvalidArgumentError("%s: hvd.torch takes torch.Tensor, got %s"
                                   % (what, type(t).__name__))
    _device.placement(t, what)  # Raises for a device the runtime cannot take.
    if t.layout != torch.strided:
        raise InvalidArgumentError("%s: %s tensors are not supported (use a dense tensor, or "
                                   "DistributedOptimizer(sparse_as_dense=True))" % (what, t.layout))
    code = _DTYPES.get(t.dtype)
    if code is None:
        raise InvalidArgumentError("%s: dtype %s is not supported; supported: %s"
                                   % (what, t.dtype, _SUPPORTED))
    return code


def _placement(t, what):
    if t.is_cpu:
        return -1, None
    return _device.placement(t, what)


class _TorchAdapter:
    dtype_code = staticmethod(check_tensor)
    placement = staticmethod(_placement)
    stream_order = _device.StreamOrder

    def contiguous(self, t):
        return t if t.is_contiguous() else t.detach().contiguous()

    def fast_key(self, t):
        if isinstance(t, torch.Tensor) and t.layout is torch.strided and t.is_contiguous():
            if t.is_cpu:
                return t.dtype, t.shape, -1
            if t.is_cuda:
                return t.dtype, t.shape, t.device.index
        return None

    def clone(self, t):
        return t.detach().clone(memory_format=torch.contiguous_format)

    def empty_like(self, t):
        return torch.empty(t.shape, dtype=t.dtype, device=t.device)

    def address(self, t):
        return t.data_ptr()

    def numel(self, t):
        return t.numel()

    def shape(self, t):
        return tuple(t.shape)

    def copy_(self, dst, src):
        with torch.no_grad():
            dst.copy_(src)

    def from_memory(self, address, nbytes, shape, like, stream=None):
        out = torch.empty(shape, dtype=like.dtype, device=like.device)
        if out.numel() * out.element_size() != nbytes:
            raise InternalError("result of %d bytes does not fill shape %s of %s"
                                % (nbytes, shape, like.dtype))
        if nbytes and out.is_cuda:
            _device.copy_from_device(out, address, nbytes, stream)
        elif nbytes:
            ctypes.memmove(out.data_ptr(), address, nbytes)
        return out

    def wrap_memory(self, address, nbytes, shape, like, owner):
        # The tensor's storage holds the bytes' array, and through it the owner.
        out = torch.frombuffer(_handles.result_bytes(address, nbytes, owner), dtype=like.dtype)
        if out.numel() != math.prod(shape):
            raise InternalError("result of %d bytes does not fill shape %s of %s"
                                % (nbytes, shape, like.dtype))
        return out.view(shape)

    def int_list(self, splits):
        if torch.is_tensor(splits):
            return [int(s) for s in splits.reshape(-1).tolist()]
        return [int(s) for s in splits]

    def int32_vector(self, values):
        return torch.tensor(values, dtype=torch.int32)


# Frontend, except that CUDA tensors with op=Adasum go through host memory (_adasum_host).
_ops = _adasum_host.StagingFrontend(_TorchAdapter())

poll = _handles.poll
synchronize = _handles.synchronize


# ---- allreduce ---------------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; synchronize(handle) returns it."""
    return _ops.allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; synchronize(handle) returns `tensor`."""
    return _ops.allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                process_set, inplace=True)


class HorovodAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, pre, post, ps = ctx.args
        grad = allreduce(grad_output, average=average, op=op, prescale_factor=pre,
                         postscale_factor=post, process_set=ps)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Returns the reduction of `tensor` over the set's ranks (op=None: Average)."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                 postscale_factor, process_set)
    return compression.decompress(out, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    return _ops.grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                        postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return _ops.grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                        postscale_factor, process_set, inplace=True)


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), average, name, op,
                                                         prescale_factor, postscale_factor,
                                                         process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        average, op, pre, post, ps = ctx.args
        grads = grouped_allreduce(list(grad_outputs), average=average, op=op,
                                  prescale_factor=pre, postscale_factor=post, process_set=ps)
        return (None,) * 6 + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one fused group; returns the list of results."""
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                         process_set, *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts the allreduce of a sparse COO tensor as Horovod does: every rank's
    indices and values are allgathered (op=Average divides the values by the set's
    size) and rebuilt into one sparse tensor, whose duplicate indices sum when it is
    coalesced or made dense. Returns a handle to call, not to synchronize():
    `handle()` waits and returns the result."""
    if not (torch.is_tensor(tensor) and tensor.is_sparse):
        raise InvalidArgumentError("sparse_allreduce_async(%s): needs a sparse COO tensor, got %s"
                                   % (name, type(tensor).__name__ if not torch.is_tensor(tensor)
                                      else tensor.layout))
    if op not in (Average, Sum):
        raise InvalidArgumentError("sparse_allreduce_async(%s): op must be Average or Sum" % name)
    t = tensor.coalesce()
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name="%s.indices" % name, process_set=process_set)
    values_handle = allgather_async(t._values(), name="%s.values" % name,
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / process_set.size()
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size())
    return handle


# ---- allgather ---------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    return _ops.allgather_async(tensor, name, process_set)


class HorovodAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() else 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        return _allgather_grads([grad_output], [ctx.dim], ctx.process_set)[0], None, None


def _allgather_grads(grads, dims, ps):
    """The gradients of allgathered tensors whose first dimensions here were `dims`:
    each output's averaged gradient, narrowed to this rank's rows."""
    reduced = grouped_allreduce(list(grads), op=Average, process_set=ps)
    everyone = allgather(torch.tensor(dims, dtype=torch.int64), process_set=ps)
    offsets = everyone.view(-1, len(dims))[:ps.rank()].sum(dim=0).tolist()
    return [g.narrow(0, int(o), d) for g, o, d in zip(reduced, offsets, dims)]


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every set rank's tensor along the first dimension."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _ops.grouped_allgather_async(tensors, name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() else 0 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        return (None, None) + tuple(_allgather_grads(grad_outputs, ctx.dims, ctx.process_set))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor as one group; differentiable as allgather."""
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---- broadcast ---------------------------------------------------------------------

def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _ops.broadcast_async(tensor, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    return _ops.broadcast_async(tensor, root_rank, name, process_set, inplace=True)


class HorovodBroadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if basics.rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor (root_rank is a global rank)."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's in place and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ----------------------------------------------------------------------

def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """synchronize(handle) returns (output, received_splits)."""
    return _ops.alltoall_async(tensor, splits, name, process_set)


class HorovodAlltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of the first dimension to rank r (equal shares when
    splits is None). Returns the output, or (output, received_splits) when `splits`
    is given, as horovod.torch 0.28 does."""
    output, received = HorovodAlltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


# ---- reducescatter -----------------------------------------------------------------

def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=global_process_set):
    return _ops.reducescatter_async(tensor, name, op, prescale_factor, postscale_factor,
                                    process_set)


def _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set):
    """Horovod's factor on a reducescatter's gradient: the scale factors, times the
    set's size for Sum (for Average, not divided by it)."""
    scale = float(prescale_factor) * float(postscale_factor)
    return scale * process_set.size() if op == Sum else scale


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
        ctx.process_set = process_set
        return synchronize(reducescatter_async(tensor, name, op, prescale_factor,
                                               postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allgather(grad_output.contiguous() * ctx.scale, process_set=ctx.process_set)
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces (Sum or Average) over the set and returns this rank's block of the first
    dimension (the first dim0 % size ranks get one extra row)."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                                     process_set)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    return _ops.grouped_reducescatter_async(tensors, name, op, prescale_factor,
                                            postscale_factor, process_set)


class HorovodGroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
        ctx.process_set = process_set
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allgather([g.contiguous() * ctx.scale for g in grad_outputs],
                                  process_set=ctx.process_set)
        return (None,) * 5 + tuple(grads)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    """reducescatter of each tensor as one group; differentiable as reducescatter."""
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, prescale_factor, postscale_factor,
                                             process_set, *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


# ---- barrier and join --------------------------------------------------------------

def barrier(process_set=global_process_set):
    """Returns once every rank of the set has entered the barrier."""
    _frontend.barrier(process_set)


def join(device=-1, process_set=global_process_set):
    """For uneven data: call when this rank has no more batches. Until every rank of
    the set has joined, this rank contributes zeros to the others' allreduces (and
    Average still divides by the set's size, as in Horovod). Returns the global rank of the
    last rank to join. `device` is accepted for Horovod compatibility and ignored."""
    return _frontend.join(process_set)
