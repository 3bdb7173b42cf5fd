"""Completes the torch futures of dprun collectives, off the caller's thread.

torch.distributed hands out a Work per call and DDP, FSDP and comm hooks chain
work on its future, so a future must complete when its collective does, whether
or not anyone waits on the Work. One daemon thread per process does that for
every group: it checks the pending collectives (hvd.poll, in call order), and
between checks waits up to WAIT_MS on the oldest one, which in a group's call
order is usually the next to complete. A completed collective is synchronized
(its handle released and its result built; device collectives waited for on the
host, so the result is in place on the device before the future completes) and
its `finish` turns that into the future's value; the thread then completes the
future, running the callbacks chained on it, as torch's own backends run them on
their threads. A callback may start a collective and wait for it (PowerSGD's hook
does), so before running callbacks a thread hands the polling to another
(Completer). A failed collective fails the future, with the runtime's message.

Failing a future: torch's Python Future.set_exception marks the failure in its
Python wrapper only, so a C++ waiter (DDP's reducer, torch's Work wrapper) would
see success. A backend's future is therefore `new_future()`: the child, through
then(), of a raw future that the completer completes with the value or a Failure;
the child's callback raises the failure, which fails the child in C++ too.
"""
import collections
import threading
import time

import torch

from hvd import _handles
from hvd import errors

WAIT_MS = 1


class Failure:
    """A raw future's value for a failed collective (see the module docstring)."""
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _unwrap(raw):
    value = raw.value()
    if type(value) is Failure:
        raise value.error
    return value


class DprunWork(torch._C._distributed_c10d.Work):
    """The Work of a dprun collective, over its future: wait() raises the
    collective's error (torch's own Work over a future returns True either way),
    with an optional bound; get_future() is the future callbacks chain on."""

    def __init__(self, future, raw=None):
        super().__init__()
        self._future = future
        self._raw = raw

    def wait(self, timeout=None):
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        if seconds and seconds > 0 and not self._future.done():
            deadline = time.monotonic() + seconds
            while not self._future.done():
                if time.monotonic() >= deadline:
                    raise errors.HvdTimeoutError(
                        "dprun: Work.wait timed out after %.3f s" % seconds, status="HVD_TIMEOUT")
                time.sleep(0.0005)
        try:
            self._future.wait()
        except Exception:
            # torch wraps a callback's error in a RuntimeError; raise the original
            # (a MismatchError stays one).
            failure = self._raw.value() if self._raw is not None else None
            if type(failure) is Failure:
                raise failure.error from None
            raise
        return True

    def get_future(self):
        return self._future

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:  # noqa: BLE001
            return False
        return True

    def exception(self):
        try:
            self._future.value()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def result(self):
        return self._future.value()

    def synchronize(self):
        self.wait()


def new_future(devices=None):
    """(raw, future): complete `raw` with a value or a Failure; hand out `future`."""
    raw = torch.futures.Future(devices=devices) if devices else torch.futures.Future()
    return raw, raw.then(_unwrap)


class Pending:
    """One enqueued collective: its hvd handle, what turns the handle's result into
    the future's value, the raw future (new_future), the event that frees its name,
    and `describe`, a callable giving the text that prefixes its error."""
    __slots__ = ("handle", "finish", "future", "done", "describe", "host")

    def __init__(self, handle, finish, future, done, describe, host):
        self.handle = handle
        self.finish = finish
        self.future = future
        self.done = done
        self.describe = describe
        self.host = host


class Completer:
    """The pending collectives and the threads that complete them (module
    docstring). One thread at a time polls (the poller); a poller that finds
    collectives done gives up polling, to a waiting thread or to a new one (up to
    MAX_THREADS), before it completes their futures and runs their callbacks
    itself. Completing thus costs no hand-off to another thread, and a callback
    may wait for another collective (PowerSGD's hook does) while another thread
    polls for it."""
    MAX_THREADS = 32

    def __init__(self):
        self._cv = threading.Condition()
        self._pending = collections.deque()
        self._polling = False  # a thread holds the poller's role
        self._threads = 0
        self._idle = 0

    def add(self, pending):
        with self._cv:
            self._pending.append(pending)
            if not self._polling:
                self._wake()

    def _wake(self):
        """Under the lock: a thread to take the poller's role, waiting or new."""
        if self._idle:
            self._cv.notify()
        elif self._threads < self.MAX_THREADS:
            self._threads += 1
            threading.Thread(target=self._run, name="hvd-dist-completer", daemon=True).start()

    def _run(self):
        while True:
            with self._cv:
                while self._polling or not self._pending:
                    self._idle += 1
                    self._cv.wait()
                    self._idle -= 1
                self._polling = True
            finished = self._poll()
            with self._cv:
                for p in finished:
                    self._pending.remove(p)
                self._polling = False
                if self._pending:
                    self._wake()
            for p in finished:
                self._complete(p)

    def _poll(self):
        """As the poller: waits until some pending collectives are done; those."""
        while True:
            with self._cv:
                batch = list(self._pending)
            finished = [p for p in batch if self._done(p)]
            if finished:
                return finished
            try:
                _handles.wait(batch[0].handle, WAIT_MS)
            except errors.HvdError:
                pass  # _done reports it on the next pass

    @staticmethod
    def _done(p):
        try:
            return _handles.poll(p.handle)
        except errors.HvdError:
            return True  # synchronize() raises it

    @staticmethod
    def _complete(p):
        try:
            value = p.finish(_handles.synchronize(p.handle, host=p.host))
        except BaseException as e:  # noqa: BLE001 (every failure goes to the future)
            value = Failure(_described(e, p.describe()))
        p.done.set()
        p.future.set_result(value)


def _described(error, prefix):
    """`error` with `prefix` before its message, of the same class where it is an
    HvdError (so callers can still tell a mismatch from a timeout)."""
    if isinstance(error, errors.HvdError):
        return type(error)("%s: %s" % (prefix, error), status=error.status, code=error.code,
                           detail=getattr(error, "detail", None))
    return RuntimeError("%s: %s: %s" % (prefix, type(error).__name__, error))


COMPLETER = Completer()
