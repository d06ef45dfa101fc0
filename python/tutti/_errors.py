"""TuttiError and its subclasses, one per NCCL result code, and the check that raises them.

A failed C call becomes an exception carrying NCCL's numeric code (`code`), the code's name as
ncclGetErrorString gives it (`name`) and the calling thread's ncclGetLastError message
(`message`), which names what went wrong (a peer rank, the variable to set ...).
"""

import enum

from . import _lib


class Result(enum.IntEnum):
    """ncclResult_t."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7


class TuttiError(RuntimeError):
    """A Tutti (NCCL) call failed. `code` is the ncclResult_t value, `name` its
    ncclGetErrorString text and `message` the ncclGetLastError text ("" when none)."""

    def __init__(self, code, name, message, call=None):
        self.code = int(code)
        self.name = name
        self.message = message
        self.call = call
        where = "%s failed with " % call if call else ""
        text = "%s%s (%d): %s" % (where, _code_name(code), self.code, message or name)
        super().__init__(text)

    def __reduce__(self):  # pickled whole, e.g. back from a multiprocessing worker
        return (type(self), (self.code, self.name, self.message, self.call))


class UnhandledCudaError(TuttiError):
    """ncclUnhandledCudaError (1)."""


class SystemCallError(TuttiError):
    """ncclSystemError (2): an operating-system call failed (memory, socket, file)."""


class InternalError(TuttiError):
    """ncclInternalError (3): a bug in the library."""


class InvalidArgumentError(TuttiError):
    """ncclInvalidArgument (4): a bad value was passed to a call."""


class InvalidUsageError(TuttiError):
    """ncclInvalidUsage (5): a call made in the wrong order or context."""


class RemoteError(TuttiError):
    """ncclRemoteError (6): another rank failed or went away."""


class InProgressError(TuttiError):
    """ncclInProgress (7) where a finished result was required."""


_BY_CODE = {
    1: UnhandledCudaError,
    2: SystemCallError,
    3: InternalError,
    4: InvalidArgumentError,
    5: InvalidUsageError,
    6: RemoteError,
    7: InProgressError,
}


def _code_name(code):
    try:
        return "nccl" + "".join(w.capitalize() for w in Result(code).name.split("_"))
    except ValueError:
        return "ncclResult"


def error_from(code, call=None, comm_handle=None):
    """The exception for result `code` of `call`, with the thread's last error message."""
    lib = _lib.lib()
    name = lib.ncclGetErrorString(code)
    name = name.decode("utf-8", "replace") if name else "unknown error"
    # Tutti keeps the message per thread and ignores the communicator; passing NULL also keeps
    # a handle that another thread's abort has just freed from ever reaching C.
    msg = lib.ncclGetLastError(None)
    msg = msg.decode("utf-8", "replace") if msg else ""
    cls = _BY_CODE.get(int(code), TuttiError)
    return cls(code, name, msg, call)


def check(code, call, comm_handle=None, allow_in_progress=False):
    """Raises for a failed result; returns the code otherwise (0, or 7 when allowed)."""
    if code == 0 or (allow_in_progress and code == Result.IN_PROGRESS):
        return code
    raise error_from(code, call, comm_handle)


def usage_error(code, call, message):
    """A TuttiError raised on the Python side (no C call was made)."""
    lib = _lib.lib()
    name = lib.ncclGetErrorString(code)
    name = name.decode("utf-8", "replace") if name else "unknown error"
    return _BY_CODE.get(int(code), TuttiError)(code, name, message, call)
