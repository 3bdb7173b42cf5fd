"""Elastic training, framework-neutral part: State, ObjectState and run_fn.

Horovod Elastic's model (horovod.common.elastic), over dprun's generations
(docs/elastic.md). A worker's training function runs inside run_fn; when a rank dies
its collectives fail (RemoteError, HvdTimeoutError, ShutDownError: the classes Horovod
calls HorovodInternalError), and when dprun adds or loses ranks, State.commit()
raises HostsUpdatedInterrupt. Either way the worker resets: shutdown, then init, which
joins dprun's next generation (its rank and size may change), restores its last
commit after a failure, broadcasts the state from the new rank 0 and calls the
function again.
"""

import ctypes
import functools

from hvd import _lib
from hvd import basics
from hvd import errors
from hvd.errors import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401

# The failures a reset can recover from: a rank lost or frozen, or the runtime gone.
# Bad arguments, mismatches and the like are the program's and propagate.
_RECOVERABLE = (errors.RemoteError, errors.HvdTimeoutError, errors.ShutDownError,
                errors.InternalError)
# Resets in a row that may fail before run_fn gives up (each waits for dprun).
_MAX_FAILED_RESETS = 3


def generation():
    """The dprun generation this worker's runtime joined; -1 outside an elastic job."""
    v = ctypes.c_int64(-1)
    _lib.check(_lib.lib().hvd_elastic_generation(ctypes.byref(v)), "hvd_elastic_generation")
    return v.value


def update_pending():
    """True when dprun has published a newer generation (ranks added or lost)."""
    v = ctypes.c_int(0)
    _lib.check(_lib.lib().hvd_elastic_update_pending(ctypes.byref(v)),
               "hvd_elastic_update_pending")
    return v.value == 1


class State(object):
    """State kept in host memory and synchronised across workers on every reset.

    Args:
      bcast_object: broadcasts a picklable object from rank 0 to every rank.
      get_rank: returns this worker's current rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called after every reset (a worker added or removed), e.g. to scale
        the learning rate with the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (the point a failure rolls back to), then checks whether
        dprun changed the ranks, raising HostsUpdatedInterrupt on every worker alike."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt if dprun published a newer generation. Rank 0's
        view is broadcast, so every worker raises at the same commit."""
        pending = update_pending() if basics.is_initialized() else False
        if self._bcast_object(pending):
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """Called after a reset, before the state is synchronised."""


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and exposed as
    attributes; sync() broadcasts rank 0's."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super(ObjectState, self).__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def _reset():
    """Leaves the current generation and joins the next (init waits for dprun)."""
    try:
        basics.shutdown()
    except errors.HvdError:
        pass  # the old runtime failed: that is why we are here
    basics.init()


def run_fn(func, reset=_reset):
    """Wraps func(state, ...) to survive resets (see the module's comment)."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        failed_resets = 0
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except _RECOVERABLE:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            while True:  # a rank may die during the reset too: join the next one
                try:
                    reset()
                    break
                except _RECOVERABLE:
                    failed_resets += 1
                    if failed_resets > _MAX_FAILED_RESETS:
                        raise
            state.on_reset()
    return wrapper
