"""The collectives of horovod.torch 0.28, written once over a small tensor adapter
(hvd.numpy and hvd.torch each provide one), so both front-ends share their argument
handling, naming, buffer lifetime and result copying.

Terms: the *tensor* is what the caller passed; its *buffer* is the contiguous
tensor whose memory the runtime reads or writes (the tensor itself when it is
contiguous, else a contiguous copy, copied back into the tensor after an in-place
operation completes). Every async call returns an int handle for
hvd._handles.synchronize, which returns:
  allreduce, broadcast, allgather, reducescatter: the output tensor;
  grouped calls: a list of output tensors;
  alltoall: a tuple (output, received_splits).
The in-place variants (trailing underscore) return the tensor they were given,
modified in place.

The adapter provides (t is a tensor of that framework):
  dtype_code(t, what) -> hvd dtype, raising InvalidArgumentError for anything the
      runtime cannot take (wrong type, device, dtype);
  contiguous(t), clone(t), empty_like(t) -> contiguous tensors;
  fast_key(t) -> a hashable (dtype, shape, device) for a contiguous dense tensor
      (device -1 for host memory, else the CUDA device index), None for any other
      (PreparedAllreduce's check that a tensor fits);
  address(t), numel(t), shape(t) -> int, int, tuple;
  copy_(dst, src) -> copies src into dst in place;
  placement(t, what) -> (device, stream): device -1 for host memory, else the CUDA
      device id; stream None, or the framework's stream object (with a
      `cuda_stream` attribute, the cudaStream_t) that the collective must follow;
  from_memory(address, nbytes, shape, like, stream) -> a new tensor of like's
      dtype and device holding a copy of the bytes (device memory when like is on
      a device; the copy is queued on `stream`, the placement's stream);
  wrap_memory(address, nbytes, shape, like, owner) (optional) -> a tensor of
      like's dtype over the bytes themselves (host memory, like a host tensor),
      keeping `owner` referenced for as long as the memory is in use;
  int_list(splits) -> list of int; int32_vector(list) -> a framework int32 vector.

Device tensors. A tensor whose placement has device >= 0 goes through the device
forms of the C calls (hvd_allreduce_ex with its device and stream fields,
hvd_broadcast_ex, ...), with the caller's current stream, so the collective starts
after the work already queued on it. The C API's grouped calls take host tensors
only, so a group with a device tensor is enqueued one tensor at a time under the
same names (the runtime may still fuse them, but need not run them in one
response); if one is refused, the ones already enqueued are abandoned to the
handle registry, which keeps their buffers alive until they complete.
"""
import ctypes

from hvd import _handles
from hvd import _lib
from hvd import basics
from hvd import errors

Sum = _lib.SUM
Average = _lib.AVERAGE
Min = _lib.MIN
Max = _lib.MAX
Product = _lib.PRODUCT
# Horovod's adaptive summation (hvd.h, HVD_ADASUM): allreduce only, float dtypes.
Adasum = _lib.ADASUM

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
             Adasum: "Adasum"}


def resolve_op(op, average):
    """Horovod's rule: `average` (deprecated) or `op`, not both; neither means Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        import warnings
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        op = Average if average else Sum
    if op is None:
        op = Average
    if op not in _OP_NAMES:
        raise errors.InvalidArgumentError("unknown reduce op %r" % (op,))
    return op


def _shape_array(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


# Shape arrays by shape, and encoded names by name: a training step enqueues the
# same ones every step. The C calls copy what they read, so sharing is safe;
# bounded so that ever-new names (noname counters) cannot grow them for ever.
_CACHE_LIMIT = 1 << 16
_shape_arrays = {}
_encoded = {}


def _cached_shape(shape):
    arr = _shape_arrays.get(shape)
    if arr is None:
        if len(_shape_arrays) >= _CACHE_LIMIT:
            _shape_arrays.clear()
        arr = _shape_arrays[shape] = _shape_array(shape)
    return arr


def _cached_name(name):
    enc = _encoded.get(name)
    if enc is None:
        if len(_encoded) >= _CACHE_LIMIT:
            _encoded.clear()
        enc = _encoded[name] = name.encode()
    return enc


def _allreduce_args(name, send, recv, count, shape, dtype, op, pre, post, ps, device, c_stream):
    """(hvd_allreduce_args_t, the objects its pointers refer to), every field set
    in one constructor call (the struct's fields in order: _lib.AllreduceArgs)."""
    encoded = _cached_name(name)
    c_shape = _cached_shape(shape)
    args = _lib.AllreduceArgs(_lib.ALLREDUCE_ARGS_SIZE, encoded, send or None, recv or None,
                              count, dtype, op, float(pre), float(post), ps, device,
                              c_stream, c_shape, len(shape))
    return args, (encoded, c_shape)


# The argument struct of the last allreduce under each name, with what it was
# built from but the buffers. hvd_allreduce_ex copies what it reads before it
# returns, and a name is never in flight twice (basics.op_name), so the struct of
# a name is reused with only its buffer addresses set: a training step enqueues
# the same names with the same shapes every step.
_args_by_name = {}


def _reused_allreduce_args(name, send, recv, count, shape, dtype, op, pre, post, ps, device,
                           c_stream):
    """As _allreduce_args, reusing the struct last built for `name` when nothing but
    the buffers differs."""
    key = (count, shape, dtype, op, pre, post, ps, device, c_stream)
    cached = _args_by_name.get(name)
    if cached is not None and cached[0] == key:
        args = cached[1]
        args.sendbuf = send or None
        args.recvbuf = recv or None
        return args, cached[2]
    args, keep = _allreduce_args(name, send, recv, count, shape, dtype, op, pre, post, ps,
                                 device, c_stream)
    if len(_args_by_name) >= _CACHE_LIMIT:
        _args_by_name.clear()
    _args_by_name[name] = (key, args, keep)
    return args, keep


class PreparedAllreduce:
    """An in-place allreduce under one name, prepared for many starts (a gradient's,
    once per step: the hook's hot path, issue 25). The first start builds the C
    argument struct; a later start of a tensor like the last one (the adapter's
    fast_key: same dtype, shape and device, contiguous) only sets its buffer
    addresses (and, on a device, the current stream), calls hvd_allreduce_ex and
    registers the handle (with its StreamOrder on a device). Any other tensor (a
    non-contiguous one, or Adasum on a device) takes the general path,
    Frontend.allreduce_async, with the same arguments, so the result is the same
    either way; so are the errors (the name's checks run on every start)."""

    __slots__ = ("_frontend", "_name", "_op", "_pre", "_post", "_process_set", "_key",
                 "_full", "_args", "_keep", "_c_handle", "_refs")

    def __init__(self, frontend, name, op, prescale_factor, postscale_factor, process_set):
        self._frontend = frontend
        self._name, self._op, self._process_set = name, resolve_op(op, None), process_set
        self._pre, self._post = float(prescale_factor), float(postscale_factor)
        self._key = None

    def _prepare(self, tensor, key):
        f, a = self._frontend, self._frontend.a
        ps = 0 if self._process_set is None else basics.process_set_id(self._process_set)
        full = basics.op_name("allreduce", self._name, ps)
        dtype = a.dtype_code(tensor, full)
        device, _, c_stream = f._placement(tensor, full, "hvd_allreduce_ex")
        address = a.address(tensor)
        args, keep = _allreduce_args(full, address, address, a.numel(tensor), a.shape(tensor),
                                     dtype, self._op, self._pre, self._post, ps, device, c_stream)
        # _keep: the encoded name and shape array that `args` points to.
        self._full, self._args, self._keep = full, args, keep
        self._c_handle = ctypes.c_void_p()
        self._refs = (ctypes.byref(args), ctypes.byref(self._c_handle))
        self._key = key

    def start(self, tensor):
        """Enqueues the allreduce of `tensor` in place; the handle's synchronize()
        returns `tensor`."""
        f = self._frontend
        key = f.a.fast_key(tensor)
        if key is None or (key[2] >= 0 and self._op == Adasum):  # (device Adasum: staged)
            return f.allreduce_async(tensor, None, self._name, self._op, self._pre, self._post,
                                     self._process_set, inplace=True)
        if key != self._key or (self._process_set is not None and
                                self._process_set.process_set_id != self._args.process_set):
            self._prepare(tensor, key)  # (a set removed and added again has a new id)
        elif _handles.in_flight(self._full):
            basics.op_name("allreduce", self._name, self._args.process_set)  # raises
        args = self._args
        args.sendbuf = args.recvbuf = f.a.address(tensor) or None
        order = None
        if key[2] >= 0:  # after the work queued on the device's current stream
            device, stream = f.a.placement(tensor, self._full)
            args.device, args.stream = device, getattr(stream, "cuda_stream", None) or None
            order = f._order(device, stream)
        code = _lib.lib().hvd_allreduce_ex(*self._refs)
        if code:
            _lib.check(code, "hvd_allreduce_ex(%s)" % self._full)
        return _handles.register([self._c_handle.value], [self._full], tensor, _Returns(tensor),
                                 key=self._full, order=order)


class _Returns:
    """finish() of a call whose result is an object known at enqueue."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __call__(self, _):
        return self.value


def _encode(names):
    return [n.encode() for n in names]


class Frontend:
    """The async collectives over one adapter; see the module docstring."""

    def __init__(self, adapter):
        self.a = adapter

    # ---- helpers ---------------------------------------------------------------------

    def _buffer(self, tensor, what):
        dtype = self.a.dtype_code(tensor, what)
        return self.a.contiguous(tensor), dtype

    def _order(self, device, stream):
        """The adapter's StreamOrder for a device collective (stream-ordered
        completion, hvd._handles), else None."""
        if device < 0:
            return None
        make = getattr(self.a, "stream_order", None)
        return make(device, stream) if make is not None else None

    def _placement(self, buf, what, device_call):
        """(device, stream, cudaStream_t or None) of `buf`; for a device tensor also
        checks that the library has `device_call`."""
        device, stream = self.a.placement(buf, what)
        if device >= 0:
            _lib.require(device_call, what)
        return device, stream, getattr(stream, "cuda_stream", None) or None

    @staticmethod
    def _enqueue_each(c_call, calls, names, keepalive):
        """The C handles of calls[i](handle_out) -> status (C function `c_call` for
        tensor names[i]), run in order. If one fails, abandons the handles of those
        before it and raises its error."""
        handles = []
        for call, name in zip(calls, names):
            c_handle = ctypes.c_void_p()
            code = call(ctypes.byref(c_handle))
            if code != _lib.SUCCESS:
                err = _lib.make_error(code, "%s(%s)" % (c_call, name))
                _handles.abandon(handles, names[:len(handles)], keepalive)
                raise err
            handles.append(c_handle.value)
        return handles

    def _copy_back(self, tensor, buf):
        if buf is not tensor:
            self.a.copy_(tensor, buf)
        return tensor

    def _shaped(self, tensor, what):
        """(buffer, dtype, shape) for the shape-based calls, which need ndim >= 1."""
        buf, dtype = self._buffer(tensor, what)
        shape = self.a.shape(buf)
        if len(shape) == 0:
            raise errors.InvalidArgumentError(
                "%s: needs a tensor with at least one dimension, got a scalar" % what)
        return buf, dtype, shape

    def _result(self, handles, i, name, like, device, stream):
        """The result that C handle handles[i] owns (an allgather's, alltoall's or
        reducescatter's), as a tensor like `like` (placed on `device`, -1 for the
        host). In host memory the tensor is made over the runtime's buffer without
        a copy and takes the handle, which is released when the tensor is freed
        (_handles.take); a device result is copied out."""
        address, nbytes, shape = _handles.handle_result(handles[i], name)
        if nbytes and device < 0 and hasattr(self.a, "wrap_memory"):
            return self.a.wrap_memory(address, nbytes, shape, like, _handles.take(handles, i))
        return self.a.from_memory(address, nbytes, shape, like, stream)

    # ---- allreduce ------------------------------------------------------------------

    def prepare_allreduce(self, name, op=None, prescale_factor=1.0, postscale_factor=1.0,
                          process_set=None):
        """A PreparedAllreduce (in place) under `name`, for repeated starts."""
        return PreparedAllreduce(self, name, op, prescale_factor, postscale_factor, process_set)

    def allreduce_async(self, tensor, average=None, name=None, op=None, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=None, inplace=False):
        # The hot path of a gradient hook: one placement, the argument
        # struct built in one constructor call, shape arrays and encoded names
        # cached, ctypes passing references itself.
        if average is not None or op not in _OP_NAMES:
            op = resolve_op(op, average)
        ps = 0 if process_set is None else basics.process_set_id(process_set)
        full = basics.op_name("allreduce", name, ps)
        dtype = self.a.dtype_code(tensor, full)
        buf = self.a.contiguous(tensor)
        out = buf if inplace else self.a.empty_like(buf)
        device, stream, c_stream = self._placement(buf, full, "hvd_allreduce_ex")
        args, _ = _reused_allreduce_args(full, self.a.address(buf), self.a.address(out),
                                         self.a.numel(buf), self.a.shape(buf), dtype, op,
                                         prescale_factor, postscale_factor, ps, device,
                                         c_stream)
        c_handle = ctypes.c_void_p()
        code = _lib.lib().hvd_allreduce_ex(ctypes.byref(args), ctypes.byref(c_handle))
        if code:
            _lib.check(code, "hvd_allreduce_ex(%s)" % full)
        if not inplace:
            finish, keepalive = _Returns(out), (tensor, buf, out)
        elif buf is tensor:
            finish, keepalive = _Returns(tensor), tensor
        else:
            finish = lambda _: self._copy_back(tensor, buf)  # noqa: E731
            keepalive = (tensor, buf)
        return _handles.register([c_handle.value], [full], keepalive, finish, key=full,
                                 order=self._order(device, stream))

    def _allreduce_args(self, name, buf, out, dtype, op, prescale_factor, postscale_factor, ps):
        """(hvd_allreduce_args_t, the objects its pointers refer to) for one tensor,
        with its shape, and the device and stream fields set for a device tensor."""
        device, _, c_stream = self._placement(buf, name, "hvd_allreduce_ex")
        return _allreduce_args(name, self.a.address(buf), self.a.address(out), self.a.numel(buf),
                               self.a.shape(buf), dtype, op, prescale_factor, postscale_factor,
                               ps, device, c_stream)

    def grouped_allreduce_async(self, tensors, average=None, name=None, op=None,
                                prescale_factor=1.0, postscale_factor=1.0, process_set=None,
                                inplace=False):
        op = resolve_op(op, average)
        ps = basics.process_set_id(process_set)
        tensors = list(tensors)
        base = basics.op_name("grouped_allreduce", name, ps)
        names = ["%s.%d" % (base, i) for i in range(len(tensors))]
        bufs, dtypes = zip(*[self._buffer(t, n) for t, n in zip(tensors, names)]) if tensors \
            else ((), ())
        outs = list(bufs) if inplace else [self.a.empty_like(b) for b in bufs]
        if inplace:
            finish = lambda _: [self._copy_back(t, b) for t, b in zip(tensors, bufs)]  # noqa
        else:
            finish = lambda _: outs  # noqa: E731
        built = [self._allreduce_args(nm, b, o, d, op, prescale_factor, postscale_factor, ps)
                 for nm, b, o, d in zip(names, bufs, outs, dtypes)]
        n = len(tensors)
        c_args = (ctypes.POINTER(_lib.AllreduceArgs) * max(n, 1))(
            *[ctypes.pointer(a) for a, _ in built])
        c_handles = (ctypes.c_void_p * max(n, 1))()
        _lib.check(_lib.lib().hvd_grouped_allreduce_ex(n, c_args, c_handles),
                   "hvd_grouped_allreduce_ex(%s)" % base)
        order = None
        if n:
            device, stream, _ = self._placement(bufs[0], names[0], "hvd_grouped_allreduce_ex")
            order = self._order(device, stream)
        return _handles.register(list(c_handles[:n]), names,
                                 (tensors, bufs, outs, built, c_args), finish, key=base,
                                 order=order)

    # ---- grouped calls on shaped tensors (allgather, reducescatter) ------------------

    def _shaped_group(self, tensors, name, ps, group_op, prefix, device_call):
        """Names, shaped buffers, C shape arrays, placements and the finish function
        of a grouped call whose results the handles own. `prefix` names a one-tensor
        call by itself ("allgather"), else each tensor is `group_op`.<i>."""
        tensors = list(tensors)
        if prefix is None:
            base = basics.op_name(group_op, name, ps)
            names = ["%s.%d" % (base, i) for i in range(len(tensors))]
        else:
            base = basics.op_name(prefix, name, ps)
            names = [base]
        shaped = [self._shaped(t, nm) for t, nm in zip(tensors, names)]
        shapes = [_shape_array(s) for _, _, s in shaped]
        places = [self._placement(b, nm, device_call) for (b, _, _), nm in zip(shaped, names)]

        def finish(handles):
            return [self._result(handles, i, nm, b, device, stream)
                    for i, (nm, (b, _, _), (device, stream, _))
                    in enumerate(zip(names, shaped, places))]
        return tensors, base, names, shaped, shapes, places, finish

    def _enqueue_shaped(self, c_call, per_tensor, grouped, tensors, base, names, shaped,
                        shapes, places, finish):
        """Enqueues a _shaped_group: tensor by tensor with `per_tensor`(encoded name,
        buffer, shape, dtype, placement, handle) when any is on a device, else in one
        `grouped`(n, names, sendbufs, shapes, ndims, dtypes, handles) call."""
        if any(device >= 0 for device, _, _ in places):
            encoded = _encode(names)
            keep = (tensors, shaped, shapes, encoded, places)
            c_handles = self._enqueue_each(c_call + "_ex", [
                lambda h, e=e, b=b, c=c, d=d, p=p: per_tensor(e, b, c, d, p, h)
                for e, (b, d, _), c, p in zip(encoded, shaped, shapes, places)], names, keep)
            # Stream-ordered when every tensor followed one stream of one device.
            (device, stream, _), same = places[0], len({(d, c) for d, _, c in places}) == 1
            return _handles.register(c_handles, names, keep, finish, key=base, owned=True,
                                     order=self._order(device, stream) if same else None)
        n = len(shaped)
        c_names = (ctypes.c_char_p * max(n, 1))(*_encode(names))
        c_send = (ctypes.c_void_p * max(n, 1))(*[self.a.address(b) or None for b, _, _ in shaped])
        c_shapes = (ctypes.POINTER(ctypes.c_int64) * max(n, 1))(
            *[ctypes.cast(s, ctypes.POINTER(ctypes.c_int64)) for s in shapes])
        c_ndims = (ctypes.c_int * max(n, 1))(*[len(s) for _, _, s in shaped])
        c_dtypes = (ctypes.c_int * max(n, 1))(*[d for _, d, _ in shaped])
        c_handles = (ctypes.c_void_p * max(n, 1))()
        _lib.check(grouped(n, c_names, c_send, c_shapes, c_ndims, c_dtypes, c_handles),
                   "%s(%s)" % (c_call.replace("hvd_", "hvd_grouped_") + "_async", base))
        return _handles.register(list(c_handles[:n]), names, (tensors, shaped, shapes), finish,
                                 key=base)

    # ---- allgather ------------------------------------------------------------------

    def grouped_allgather_async(self, tensors, name=None, process_set=None, prefix=None):
        ps = basics.process_set_id(process_set)
        group = self._shaped_group(tensors, name, ps, "grouped_allgather", prefix,
                                   "hvd_allgather_ex")
        return self._enqueue_shaped(
            "hvd_allgather",
            lambda e, b, c, d, p, h: _lib.lib().hvd_allgather_ex(
                e, self.a.address(b) or None, c, len(self.a.shape(b)), d, ps, p[0], p[2], h),
            lambda n, names, send, shapes, ndims, dtypes, handles:
                _lib.lib().hvd_grouped_allgather_async(n, names, send, shapes, ndims, dtypes, ps,
                                                       handles),
            *group)

    def allgather_async(self, tensor, name=None, process_set=None):
        handle = self.grouped_allgather_async([tensor], name, process_set, prefix="allgather")
        entry = _handles._get(handle)
        inner = entry.finish
        entry.finish = lambda hs: inner(hs)[0]
        return handle

    # ---- broadcast ------------------------------------------------------------------

    def broadcast_async(self, tensor, root_rank, name=None, process_set=None, inplace=False):
        ps = basics.process_set_id(process_set)
        root = basics.set_root_rank(process_set, root_rank)
        full = basics.op_name("broadcast", name, ps)
        dtype = self.a.dtype_code(tensor, full)
        buf = self.a.contiguous(tensor) if inplace else self.a.clone(tensor)
        device, stream, c_stream = self._placement(buf, full, "hvd_broadcast_ex")
        encoded = full.encode()
        c_handle = ctypes.c_void_p()
        if device >= 0:
            _lib.check(_lib.lib().hvd_broadcast_ex(encoded, self.a.address(buf) or None,
                                                   self.a.numel(buf), dtype, root, ps, device,
                                                   c_stream, ctypes.byref(c_handle)),
                       "hvd_broadcast_ex(%s)" % full)
        else:
            _lib.check(_lib.lib().hvd_broadcast_async(encoded, self.a.address(buf) or None,
                                                      self.a.numel(buf), dtype, root, ps,
                                                      ctypes.byref(c_handle)),
                       "hvd_broadcast_async(%s)" % full)
        if inplace:
            finish = lambda _: self._copy_back(tensor, buf)  # noqa: E731
        else:
            finish = lambda _: buf  # noqa: E731
        return _handles.register([c_handle.value], [full], (tensor, buf, encoded), finish,
                                 key=full, order=self._order(device, stream))

    # ---- alltoall -------------------------------------------------------------------

    def alltoall_async(self, tensor, splits=None, name=None, process_set=None):
        ps = basics.process_set_id(process_set)
        full = basics.op_name("alltoall", name, ps)
        buf, dtype, shape = self._shaped(tensor, full)
        c_shape = _shape_array(shape)
        if splits is None:
            c_splits, nsplits = None, 0
        else:
            split_list = self.a.int_list(splits)
            c_splits = (ctypes.c_int64 * max(len(split_list), 1))(*split_list)
            nsplits = len(split_list)
        device, stream, c_stream = self._placement(buf, full, "hvd_alltoall_ex")
        encoded = full.encode()
        c_handle = ctypes.c_void_p()
        if device >= 0:
            _lib.check(_lib.lib().hvd_alltoall_ex(encoded, self.a.address(buf) or None, c_shape,
                                                  len(shape), dtype, c_splits, nsplits, ps,
                                                  device, c_stream, ctypes.byref(c_handle)),
                       "hvd_alltoall_ex(%s)" % full)
        else:
            _lib.check(_lib.lib().hvd_alltoall_async(encoded, self.a.address(buf) or None,
                                                     c_shape, len(shape), dtype, c_splits,
                                                     nsplits, ps, ctypes.byref(c_handle)),
                       "hvd_alltoall_async(%s)" % full)

        def finish(handles):
            splits = self.a.int32_vector(_handles.received_splits(handles[0], full))
            return self._result(handles, 0, full, buf, device, stream), splits
        return _handles.register([c_handle.value], [full], (tensor, buf, c_shape, c_splits),
                                 finish, key=full, order=self._order(device, stream), owned=True)

    # ---- reducescatter --------------------------------------------------------------

    def grouped_reducescatter_async(self, tensors, name=None, op=Average, prescale_factor=1.0,
                                    postscale_factor=1.0, process_set=None, prefix=None):
        op = resolve_op(op, None)
        ps = basics.process_set_id(process_set)
        pre, post = float(prescale_factor), float(postscale_factor)
        group = self._shaped_group(tensors, name, ps, "grouped_reducescatter", prefix,
                                   "hvd_reducescatter_ex")
        return self._enqueue_shaped(
            "hvd_reducescatter",
            lambda e, b, c, d, p, h: _lib.lib().hvd_reducescatter_ex(
                e, self.a.address(b) or None, c, len(self.a.shape(b)), d, op, pre, post, ps,
                p[0], p[2], h),
            lambda n, names, send, shapes, ndims, dtypes, handles:
                _lib.lib().hvd_grouped_reducescatter_async(n, names, send, shapes, ndims, dtypes,
                                                           op, pre, post, ps, handles),
            *group)

    def reducescatter_async(self, tensor, name=None, op=Average, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
        handle = self.grouped_reducescatter_async([tensor], name, op, prescale_factor,
                                                  postscale_factor, process_set,
                                                  prefix="reducescatter")
        entry = _handles._get(handle)
        inner = entry.finish
        entry.finish = lambda hs: inner(hs)[0]
        return handle


# ---- blocking calls that need no tensors --------------------------------------------

def barrier(process_set=None):
    """Returns once every rank of the set has entered the barrier (waiting through
    the async form where the library has it, so Ctrl-C is honoured)."""
    ps = basics.process_set_id(process_set)
    what = "barrier(process set %d)" % ps
    if not _lib.has("hvd_barrier_async"):
        _lib.check(_lib.lib().hvd_barrier(ps), "hvd_barrier(process set %d)" % ps)
        return
    c_handle = ctypes.c_void_p()
    _lib.check(_lib.lib().hvd_barrier_async(ps, ctypes.byref(c_handle)), "hvd_" + what)
    _handles.synchronize(_handles.register([c_handle.value], [what], None, lambda _: None))


def join(process_set=None):
    """For uneven data: returns once every rank of the set has joined; until then this
    rank contributes the identity to the others' allreduces. Returns the global rank
    of the last rank to join."""
    ps = basics.process_set_id(process_set)
    what = "join(process set %d)" % ps
    if not _lib.has("hvd_join_async"):
        last = ctypes.c_int(-1)
        _lib.check(_lib.lib().hvd_join(ps, ctypes.byref(last)), "hvd_" + what)
        return basics.global_rank(process_set, last.value)

    def finish(handles):
        last = ctypes.c_int(-1)
        _lib.check(_lib.lib().hvd_handle_join_rank(handles[0], ctypes.byref(last)),
                   "hvd_handle_join_rank")
        return basics.global_rank(process_set, last.value)
    c_handle = ctypes.c_void_p()
    _lib.check(_lib.lib().hvd_join_async(ps, ctypes.byref(c_handle)), "hvd_" + what)
    return _handles.synchronize(_handles.register([c_handle.value], [what], None, finish))
