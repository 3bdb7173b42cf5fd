"""The registry of in-flight collectives behind the int handles that the async
calls of hvd.numpy and hvd.torch return.

A handle owns one or more C handles (several for a grouped call), the Python
objects whose memory the runtime reads or writes (kept referenced until the
collective completes, so the garbage collector can never free a buffer in use),
and a `finish` function that builds the result once every C handle succeeded
(for allgather, alltoall and reducescatter it copies the runtime-owned result out
before the C handle is released: host memory, or device memory for a device
tensor, whose copy the front-end queues on the stream the collective was enqueued
after, the order in which hvd_handle_release frees it).

A collective's name (the call's name: "allreduce.grad", or a group's base name)
stays in use from its enqueue until its handle is synchronized, so the same name
enqueued again before that raises InvalidUsageError (a ValueError, as in Horovod)
whether or not the first collective already completed: the outcome does not
depend on how fast the runtime is (basics.op_name checks in_flight()).

synchronize() waits in short slices so that Ctrl-C is honoured, always waits for
every C handle of the entry to complete before releasing anything (even when one
failed: a released-but-running collective could still write into its buffers),
and raises the first failure as an HvdError with the runtime's detail.

Stream-ordered completion (device collectives; Horovod's
HOROVOD_ENABLE_ASYNC_COMPLETION, on by default here): a handle registered with
an `order` (the front-end's StreamOrder for a device tensor, see below) is
synchronized without the host waiting for the GPU: synchronize() waits only until
every collective is queued on the device (hvd_wait_enqueued), makes the
consumer's stream (the framework's current stream at synchronize()) wait for
them on the device (hvd_handle_order_stream), asks the order to keep the buffers
valid until that stream has run past them, and returns. Kernels queued on that
stream afterwards see the results. A host read must synchronize that stream
first, as for any kernel's output (torch does so itself for .cpu(), .item(),
.tolist() and printing; a raw data_ptr read needs torch.cuda.synchronize()).
A failure found later on the device breaks the runtime: the next collective
raises it. Set STREAM_ORDERED = False to wait on the host instead (the results
are then complete on the device when synchronize() returns). Results the
runtime owns (allgather, alltoall, reducescatter: registered with owned=True)
are stream-ordered too when the consumer's stream is the one the collective was
enqueued after (order.on_enqueue_stream()): their copy out (finish) is queued on
that stream after the wait, and the runtime frees its buffer in that stream's
order, after the copy; with another consumer stream the host waits for them.

An order provides consumer_stream() -> the cudaStream_t (int) that must wait,
on_enqueue_stream() -> whether the framework's current stream is the one the
collective was enqueued after, and retain(keepalive) -> None, called after the
stream was ordered, which keeps the memory of the buffers the collective reads
and writes from being reused before that stream has run past the wait.

Thread safety: every function may be called from any thread; one handle must be
synchronized by one thread.
"""
import ctypes
import itertools
import threading

from hvd import _lib
from hvd import errors

_WAIT_SLICE_MS = 200

# Stream-ordered completion for handles registered with an order (module docstring).
STREAM_ORDERED = True

_lock = threading.Lock()
_entries = {}
_keys_in_flight = {}  # call name -> number of unsynchronized handles under it
_ids = itertools.count(1)
_abandoned = []  # Handles no caller will synchronize: see abandon().


class _Entry:
    __slots__ = ("c_handles", "names", "keepalive", "finish", "key", "order", "owned")

    def __init__(self, c_handles, names, keepalive, finish, key, order=None, owned=False):
        self.c_handles = c_handles
        self.names = names
        self.keepalive = keepalive
        self.finish = finish
        self.key = key
        self.order = order
        self.owned = owned


def _add(c_handles, names, keepalive, finish, key=None, order=None, owned=False):
    entry = _Entry(c_handles if type(c_handles) is list else list(c_handles),
                   names if type(names) is list else list(names), keepalive, finish, key, order,
                   owned)
    with _lock:
        handle = next(_ids)
        _entries[handle] = entry
        if key is not None:
            _keys_in_flight[key] = _keys_in_flight.get(key, 0) + 1
    return handle


def _remove(handle):
    """Drops `handle`'s entry and its call name's use; the entry, or None."""
    with _lock:
        entry = _entries.pop(handle, None)
        if entry is not None and entry.key is not None:
            left = _keys_in_flight[entry.key] - 1
            if left:
                _keys_in_flight[entry.key] = left
            else:
                del _keys_in_flight[entry.key]
    return entry


def forget_all():
    """Drops every handle (a new runtime starts: the old one's collectives all ended
    with its shutdown, failed or not). Their C handles are released; later calls with
    their ints raise InvalidArgumentError, and their names are free again."""
    with _lock:
        entries = list(_entries.values())
        _entries.clear()
        _keys_in_flight.clear()
        del _abandoned[:]
    release = _lib.lib().hvd_handle_release
    for entry in entries:
        for c in entry.c_handles:
            release(c)


def in_flight(key):
    """Whether a handle enqueued under call name `key` is not synchronized yet."""
    return key in _keys_in_flight  # One dict lookup: atomic under the GIL.


def register(c_handles, names, keepalive, finish, key=None, order=None, owned=False):
    """Takes ownership of `c_handles` (ints); returns the new handle. `key`, the
    call's name, stays in flight until the handle is synchronized. `order`: a
    StreamOrder for a device collective (module docstring), else None; `owned`:
    its results are the runtime's, copied out by `finish`."""
    if _abandoned:
        _reap()
    return _add(c_handles, names, keepalive, finish, key, order, owned)


class ResultOwner:
    """Owns a C handle whose result memory a tensor (or array) was made over,
    without a copy: the handle, and with it that memory, lives until the last
    reference to this object goes (the tensor's buffer holds it)."""
    __slots__ = ("c_handle",)

    def __init__(self, c_handle):
        self.c_handle = c_handle

    def __del__(self):
        try:
            _lib.lib().hvd_handle_release(self.c_handle)
        except Exception:  # noqa: BLE001 (interpreter exit: the process frees it)
            pass


class _ResultBytes:
    """The bytes of a runtime-owned result, exposed through NumPy's array
    interface (a ctypes array type per size would do too, but ctypes keeps every
    such type forever), holding the result's owner for as long as an array made
    over them lives."""
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address, nbytes, owner):
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}
        self.owner = owner


def result_bytes(address, nbytes, owner):
    """A writable uint8 NumPy array over `nbytes` at `address` that keeps `owner`
    (a ResultOwner) alive: what a front end makes its result tensor over."""
    import numpy as np
    return np.asarray(_ResultBytes(address, nbytes, owner))


def take(c_handles, i):
    """Takes C handle i out of the list a finish function was given: its slot
    becomes None, so synchronize() does not release it, and the returned
    ResultOwner releases it instead."""
    owner = ResultOwner(c_handles[i])
    c_handles[i] = None
    return owner


def abandon(c_handles, names, keepalive):
    """Takes the C handles of collectives that were enqueued although the call that
    enqueued them then failed (a device group is enqueued one tensor at a time, and
    a later tensor was refused). Keeps `keepalive` referenced until they complete,
    then releases them; checked on every later register()."""
    if not c_handles:
        return
    handle = _add(c_handles, names, keepalive, lambda _: None)
    with _lock:
        _abandoned.append(handle)


def _reap():
    """Releases the abandoned handles whose collectives have completed."""
    with _lock:
        candidates = list(_abandoned)
    for handle in candidates:
        try:
            done = poll(handle)
        except errors.HvdError:
            done = True
        if not done:
            continue
        with _lock:
            if handle not in _abandoned:
                continue  # Another thread took it.
            _abandoned.remove(handle)
        try:
            synchronize(handle)
        except errors.HvdError:
            pass  # The caller already got the error that made it abandon these.


def _get(handle):
    with _lock:
        entry = _entries.get(handle)
    if entry is None:
        raise errors.InvalidArgumentError(
            "unknown handle %r (already synchronized, or not returned by an hvd async call)"
            % (handle,))
    return entry


def poll(handle):
    """True once every collective of `handle` has completed (successfully or not)."""
    entry = _get(handle)
    done = ctypes.c_int()
    for c_handle, name in zip(entry.c_handles, entry.names):
        _lib.check(_lib.lib().hvd_poll(c_handle, ctypes.byref(done)), "hvd_poll(%s)" % name)
        if not done.value:
            return False
    return True


def wait(handle, timeout_ms):
    """Waits up to `timeout_ms` for every collective of `handle` to complete;
    True once they have (successfully or not: synchronize() says which)."""
    lib = _lib.lib()
    for c_handle in _get(handle).c_handles:
        if c_handle is not None and lib.hvd_wait(c_handle, timeout_ms) == _lib.IN_PROGRESS:
            return False
    return True


def _wait(c_handle, name, wait=None):
    """Waits for one C handle with `wait` (default hvd_wait); returns None or the
    HvdError it failed with."""
    if wait is None:
        wait = _lib.lib().hvd_wait
    code = wait(c_handle, _WAIT_SLICE_MS)
    while code == _lib.IN_PROGRESS:
        code = wait(c_handle, _WAIT_SLICE_MS)
    if code == _lib.SUCCESS:
        return None
    return _lib.make_error(code, "collective %r" % name)


def _stream_ordered(entry):
    """Whether `entry` is synchronized by ordering a stream (module docstring)."""
    return (entry.order is not None and STREAM_ORDERED and _lib.has("hvd_wait_enqueued")
            and (not entry.owned or entry.order.on_enqueue_stream()))


def _order_consumer(entry):
    """Makes the consumer's stream wait for every collective of `entry` (queued on
    the device by now) and keeps its buffers alive; None or the HvdError."""
    lib = _lib.lib()
    stream = entry.order.consumer_stream()
    for c_handle, name in zip(entry.c_handles, entry.names):
        code = lib.hvd_handle_order_stream(c_handle, stream)
        if code != _lib.SUCCESS:
            return _lib.make_error(code, "hvd_handle_order_stream(%s)" % name)
    entry.order.retain(entry.keepalive)
    return None


def synchronize(handle, host=False):
    """Waits for `handle` (for a device collective, until the consumer's stream
    is ordered after it: module docstring; with `host`, until the device has
    finished it), releases it and returns its output."""
    entry = _get(handle)
    if entry.order is None and len(entry.c_handles) == 1:
        return _synchronize_one(handle, entry)
    failure = None
    ordered = not host and _stream_ordered(entry)
    wait = _lib.lib().hvd_wait_enqueued if ordered else None
    for c_handle, name in zip(entry.c_handles, entry.names):
        err = _wait(c_handle, name, wait)
        if err is not None and failure is None:
            failure = err
    if ordered and failure is None:
        failure = _order_consumer(entry)
    if ordered and failure is not None:
        # Nothing is released while the device may still use its buffers.
        for c_handle, name in zip(entry.c_handles, entry.names):
            _wait(c_handle, name)
    try:
        if failure is None:
            return entry.finish(entry.c_handles)
    finally:
        _remove(handle)
        for c_handle in entry.c_handles:
            if c_handle is not None:  # (None: taken by finish, see take())
                _lib.lib().hvd_handle_release(c_handle)
    raise failure


def _synchronize_one(handle, entry):
    """synchronize() of a host collective with one C handle (a gradient's
    allreduce: the hot path), in fewer steps."""
    lib = _lib.lib()
    c_handle = entry.c_handles[0]
    code = lib.hvd_wait(c_handle, _WAIT_SLICE_MS)
    while code == _lib.IN_PROGRESS:
        code = lib.hvd_wait(c_handle, _WAIT_SLICE_MS)
    try:
        if code == _lib.SUCCESS:
            return entry.finish(entry.c_handles)
    finally:
        _remove(handle)
        if entry.c_handles[0] is not None:  # (None: taken by finish, see take())
            lib.hvd_handle_release(c_handle)
    raise _lib.make_error(code, "collective %r" % entry.names[0])


def pending_count():
    """The number of handles not yet synchronized (for tests and diagnostics)."""
    with _lock:
        return len(_entries)


def handle_result(c_handle, name):
    """(address, nbytes, shape) of the runtime-owned result of a completed C handle."""
    data = ctypes.c_void_p()
    nbytes = ctypes.c_int64()
    ndim = ctypes.c_int()
    shape = ctypes.POINTER(ctypes.c_int64)()
    _lib.check(_lib.lib().hvd_handle_result(c_handle, ctypes.byref(data), ctypes.byref(nbytes),
                                            ctypes.byref(ndim), ctypes.byref(shape)),
               "hvd_handle_result(%s)" % name)
    dims = tuple(shape[i] for i in range(ndim.value))
    return data.value or 0, nbytes.value, dims


def received_splits(c_handle, name):
    """The rows an alltoall received from each rank, as a list of ints."""
    splits = ctypes.POINTER(ctypes.c_int64)()
    n = ctypes.c_int()
    _lib.check(_lib.lib().hvd_handle_received_splits(c_handle, ctypes.byref(splits),
                                                     ctypes.byref(n)),
               "hvd_handle_received_splits(%s)" % name)
    return [splits[i] for i in range(n.value)]
