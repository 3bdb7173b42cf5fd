"""CUDA tensors given with op=Adasum, staged through host memory.

The runtime runs Adasum on host tensors only (hvd.h, HVD_ADASUM), as Horovod
built without NCCL does. hvd.torch therefore copies each CUDA tensor of an
Adasum allreduce to host memory, reduces the copy, and at synchronize() copies
the result back to the tensor's device: into the tensor itself for the in-place
calls, into a new CUDA tensor otherwise. It warns once per process.

Ordering: the copy to the host runs on torch's current stream of the tensor's
device and returns once it is done, so it follows the work queued there (the
kernels that produced a gradient); the copy back is made on the current stream
when synchronize() is called. Names, scale factors and process sets are the
call's, so a rank that stages a CUDA tensor reduces with ranks that pass CPU
tensors. CPU tensors of the same call are passed through untouched.

StagingFrontend is the torch Frontend with this branch in allreduce_async and
grouped_allreduce_async; every other call is Frontend's own.
"""
import warnings

import torch

from hvd import _frontend
from hvd import _handles

_warned = False


def _on_cuda(t):
    return torch.is_tensor(t) and t.is_cuda


def _warn_once():
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("op=Adasum runs on host memory in dprun: CUDA tensors are copied to the "
                      "CPU, reduced there and copied back (as Horovod built without NCCL does)",
                      RuntimeWarning, stacklevel=4)


def _to_host(t):
    host = torch.empty(tuple(t.shape), dtype=t.dtype)
    with torch.no_grad():
        host.copy_(t)
    return host


def _back(result, original, inplace):
    """`result` (host) as the caller of a staged call gets it: copied into
    `original` in place, or into a new tensor on original's device."""
    with torch.no_grad():
        if inplace:
            original.copy_(result)
            return original
        out = torch.empty_like(original, memory_format=torch.contiguous_format)
        out.copy_(result)
        return out


def _then(handle, fn):
    """Makes synchronize(handle) return fn(what it returned before)."""
    entry = _handles._get(handle)
    inner = entry.finish
    entry.finish = lambda c_handles: fn(inner(c_handles))
    return handle


class StagingFrontend(_frontend.Frontend):
    """Frontend whose Adasum allreduces take CUDA tensors through host memory."""

    def allreduce_async(self, tensor, average=None, name=None, op=None, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=None, inplace=False):
        if op != _frontend.Adasum or not _on_cuda(tensor):
            return super().allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set, inplace)
        _warn_once()
        handle = super().allreduce_async(_to_host(tensor), average, name, op, prescale_factor,
                                         postscale_factor, process_set, inplace)
        return _then(handle, lambda result: _back(result, tensor, inplace))

    def grouped_allreduce_async(self, tensors, average=None, name=None, op=None,
                                prescale_factor=1.0, postscale_factor=1.0, process_set=None,
                                inplace=False):
        tensors = list(tensors)
        staged = [_on_cuda(t) for t in tensors]
        if op != _frontend.Adasum or not any(staged):
            return super().grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                                   postscale_factor, process_set, inplace)
        _warn_once()
        hosts = [_to_host(t) if s else t for t, s in zip(tensors, staged)]
        handle = super().grouped_allreduce_async(hosts, average, name, op, prescale_factor,
                                                 postscale_factor, process_set, inplace)
        return _then(handle, lambda results: [
            _back(r, t, inplace) if s else r for r, t, s in zip(results, tensors, staged)])
