"""The exceptions the hvd package raises.

Every failing C call raises an HvdError whose message is the runtime's own detail
(hvd_last_error(): which tensor, which ranks, what differed) and whose `status`
attribute is the C status name ("HVD_MISMATCH", ...). Each status has its own
subclass, so callers can catch exactly what they expect; errors that the Python
layer detects before calling C raise the class the C layer would raise for them:
InvalidArgumentError for an unsupported dtype or device, and InvalidUsageError for
a CUDA tensor given to a libhvd built without CUDA.

Each class also derives from the built-in class Horovod 0.28 raises in that case,
so code written for Horovod catches it:
  every HvdError is a RuntimeError, and HorovodInternalError is HvdError itself
    (Horovod raises HorovodInternalError, a RuntimeError, when a collective fails:
    MismatchError, HvdTimeoutError, RemoteError, ShutDownError, InternalError);
  InvalidArgumentError, InvalidUsageError (a name enqueued twice while in flight)
    and NotInitializedError are also ValueErrors, as Horovod raises ValueError for
    bad arguments, duplicate names and calls before init.
"""


class HvdError(RuntimeError):
    """A failed collective or runtime call.

    Attributes:
      status: the C status name, e.g. "HVD_MISMATCH".
      code: the C status code (an int), or None for errors raised in Python.
      detail: the runtime's message without the prefix naming the call.
    """

    status = "HVD_INTERNAL"

    def __init__(self, message, status=None, code=None, detail=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.code = code
        self.detail = message if detail is None else detail


# Horovod's name for the same thing, so `except hvd.HorovodInternalError` works.
HorovodInternalError = HvdError


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by an elastic State's commit() when dprun has added or lost ranks since
    the job's current generation began (hvd.elastic.run then resets every worker).

    Attributes:
      skip_sync: True when the workers' state needs no broadcast after the reset.
    """

    def __init__(self, skip_sync=False):
        super().__init__("the job's ranks changed (dprun published a new generation)")
        self.skip_sync = skip_sync


class InvalidArgumentError(HvdError, ValueError):
    status = "HVD_INVALID_ARGUMENT"


class InvalidUsageError(HvdError, ValueError):
    status = "HVD_INVALID_USAGE"


class NotInitializedError(HvdError, ValueError):
    status = "HVD_NOT_INITIALIZED"


class MismatchError(HvdError):
    status = "HVD_MISMATCH"


class HvdTimeoutError(HvdError):
    status = "HVD_TIMEOUT"


class RemoteError(HvdError):
    status = "HVD_REMOTE_ERROR"


class ShutDownError(HvdError):
    status = "HVD_SHUT_DOWN"


class InternalError(HvdError):
    status = "HVD_INTERNAL"


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, InvalidUsageError, NotInitializedError, MismatchError,
                HvdTimeoutError, RemoteError, ShutDownError, InternalError)
}


def error_class(status_name):
    """The HvdError subclass for a C status name (HvdError for an unknown one)."""
    return _BY_STATUS.get(status_name, HvdError)
