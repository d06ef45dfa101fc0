"""Groups (ncclGroupStart/End) and host streams (tuttiStream*), and keeping buffers alive.

An operation issued inside a group, on a host stream or on a nonblocking communicator may still
run after its call returns. Its Python buffer objects are held here until the outermost
group_end, the stream's synchronize (or a query saying done), or the communicator reporting
itself idle, so that dropping the last reference early never frees memory under the library.
Group state is per thread, as NCCL's groups are.
"""

import contextlib
import ctypes
import os
import threading

from . import _errors, _lib
from ._errors import Result


# ---- Keeping buffers alive ----------------------------------------------------------------------

class _GroupState(threading.local):
    def __init__(self):
        self.depth = 0
        self.keep = []
        self.comms = []
        self.streams = []  # (Stream, keep) of the operations issued on host streams
        self.failed = False  # an inner `with group()` raised: none of the group may run


_group = _GroupState()


def _in_group(comm, stream, keep):
    """Holds an operation issued inside the open group: its buffers until the outermost
    group_end, and its stream too. C queues the group's operations on their streams only then:
    the stream must live until that, and its holds start then (a synchronize inside the group
    must not drop them)."""
    _group.keep.append(keep)
    if comm not in _group.comms:
        _group.comms.append(comm)
    if stream is not None:
        if not any(s is stream for s, _ in _group.streams):
            stream._enter_group()
        _group.streams.append((stream, keep))


def _close_group(queued):
    """The outermost group ended (`queued`: its operations went to their streams): each stream
    holds its operations' buffers from now on, and may be destroyed again."""
    streams, _group.keep, _group.comms, _group.streams = _group.streams, [], [], []
    left = []
    for stream, keep in streams:
        if queued:
            stream._hold(keep)
        if not any(s is stream for s in left):
            left.append(stream)
    for stream in left:
        stream._leave_group()


def group_start():
    """ncclGroupStart: calls until the matching group_end are issued together. Groups nest."""
    _errors.check(_lib.lib().ncclGroupStart(), "ncclGroupStart")
    if _group.depth == 0:
        _group.failed = False
    _group.depth += 1


def group_end():
    """ncclGroupEnd. With NULL streams on blocking communicators the outermost one returns when
    every operation of the group is complete. Returns Result.IN_PROGRESS when the group's
    communicators are nonblocking and it has not finished yet."""
    if _group.depth == 0:
        raise _errors.usage_error(Result.INVALID_USAGE, "ncclGroupEnd",
                                  "group_end() without a matching group_start()")
    outermost = _group.depth == 1
    if outermost and _group.failed:
        # An inner level raised and its caller went on: as in C, none of the group runs.
        _group_discard()
        raise _errors.usage_error(Result.INVALID_USAGE, "ncclGroupEnd",
                                  "an inner tutti.group() raised; none of the group's "
                                  "operations ran")
    keep, comms = _group.keep, _group.comms
    rc = _lib.lib().ncclGroupEnd()
    _group.depth -= 1  # after the C call: C's group is open until it returns
    if outermost:
        # Whatever the result: a failed group may still have queued some of its operations.
        _close_group(True)
        if rc == Result.IN_PROGRESS:
            for comm in comms:
                comm._hold(keep)
    _errors.check(rc, "ncclGroupEnd", allow_in_progress=True)
    return Result(rc)


def group_simulate_end():
    """ncclGroupSimulateEnd: ends the group without running it; returns the cost model's
    estimate of its time in microseconds."""
    if _group.depth == 0:
        raise _errors.usage_error(Result.INVALID_USAGE, "ncclGroupSimulateEnd",
                                  "group_simulate_end() without a matching group_start()")
    info = _lib.SimInfoStruct.initializer()
    rc = _lib.lib().ncclGroupSimulateEnd(ctypes.byref(info))
    _group.depth -= 1
    if _group.depth == 0:
        _close_group(False)  # nothing ran
    _errors.check(rc, "ncclGroupSimulateEnd")
    return info.estimatedTime


def _group_discard():
    """Ends the innermost group level without running anything (ncclGroupSimulateEnd, whose
    estimate is dropped): the outermost level's discard drops every operation of the group."""
    info = _lib.SimInfoStruct.initializer()
    _lib.lib().ncclGroupSimulateEnd(ctypes.byref(info))
    _group.depth -= 1
    if _group.depth == 0:
        _group.failed = False
        _close_group(False)  # nothing ran
    else:
        _group.failed = True  # the outermost end discards the rest too


@contextlib.contextmanager
def group():
    """`with tutti.group(): ...` brackets calls with group_start()/group_end(). If the body
    raises, none of the group's operations run, as in C when a call inside a group fails (the
    error may come from Python's own checks, which C never saw): the group is ended without
    running (ncclGroupSimulateEnd) and the body's exception propagates. The peers then wait
    for this rank's operations and fail at their deadline, naming it. Nested, the whole group
    is discarded: an outer level that catches the exception and goes on gets the error from
    its own end, and nothing ran."""
    group_start()
    try:
        yield
    except BaseException:
        _group_discard()
        raise
    group_end()


# ---- Host streams -------------------------------------------------------------------------------

class Stream:
    """A Tutti host stream (tuttiStreamCreate): an in-order queue run by the library's progress
    thread. Operations given stream=s return at once; s.synchronize() waits for them and raises
    the first error among them. Buffers of queued operations are kept alive until then."""

    def __init__(self):
        reap_parked()
        h = ctypes.c_void_p()
        _errors.check(_lib.lib().tuttiStreamCreate(ctypes.byref(h)), "tuttiStreamCreate")
        self._handle = h.value
        self._pid = os.getpid()
        self._keep = []   # the buffers of queued operations, oldest first
        self._base = 0    # how many holds were released before _keep[0]
        self._groups = 0  # open groups (of any thread) holding operations for this stream
        self._lock = threading.Lock()

    @property
    def handle(self):
        """The stream's address, as C sees it (a cudaStream_t)."""
        if self._handle is None:
            raise _errors.usage_error(Result.INVALID_USAGE, "Stream",
                                      "the stream was destroyed")
        return self._handle

    def _hold(self, keep):
        with self._lock:
            self._keep.append(keep)

    def _mark(self):
        """The position after the operations held so far (for _release_to)."""
        with self._lock:
            return self._base + len(self._keep)

    def _release_to(self, mark=None):
        """Drops the buffers of the operations held before `mark` (all when None): those the
        library has finished with, the stream being in order. Operations queued meanwhile by
        other threads stay held, and a mark already passed releases nothing."""
        with self._lock:
            # A mark is never past the end: base + len(_keep) only grows.
            n = len(self._keep) if mark is None else max(0, mark - self._base)
            del self._keep[:n]
            self._base += n

    def _enter_group(self):
        with self._lock:
            self._groups += 1

    def _leave_group(self):
        with self._lock:
            self._groups -= 1

    def _busy(self):
        """Whether C still has operations queued on it (never blocks)."""
        return _lib.lib().tuttiStreamQuery(self._handle) == Result.IN_PROGRESS

    def synchronize(self):
        """tuttiStreamSynchronize: waits for every queued operation; raises the first error."""
        mark = self._mark()
        rc = _lib.lib().tuttiStreamSynchronize(self.handle)
        self._release_to(mark)
        _errors.check(rc, "tuttiStreamSynchronize")

    def query(self):
        """tuttiStreamQuery: True when every queued operation is complete, False while some are
        not; raises the first error of the completed ones (others may still be queued, so
        their buffers stay held). Never blocks."""
        mark = self._mark()
        rc = _lib.lib().tuttiStreamQuery(self.handle)
        if rc == Result.IN_PROGRESS:
            return False
        # Done, failed or not: every operation queued before the query has ended.
        self._release_to(mark)
        _errors.check(rc, "tuttiStreamQuery")
        return True

    def destroy(self):
        """tuttiStreamDestroy: waits for the queued operations, then frees the stream.
        Refused while an open group holds an operation for it (C queues it at group_end)."""
        if self._handle is None:
            return
        with self._lock:
            if self._groups > 0:
                raise _errors.usage_error(
                    Result.INVALID_USAGE, "tuttiStreamDestroy",
                    "an open group holds an operation issued on this stream; end the group "
                    "(group_end) before destroying the stream")
            h, self._handle = self._handle, None
        rc = _lib.lib().tuttiStreamDestroy(h)
        self._release_to()
        _errors.check(rc, "tuttiStreamDestroy")

    def _park(self):
        """Leaves a stream whose operations are still queued, with their buffers, to be
        destroyed once they have ended (reap_parked): a `with` body that raised, or the
        garbage collector, must not wait for operations that may only end at an abort or at
        their deadline."""
        with _parked_lock:
            _parked.append(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self._handle is not None and self._groups == 0 and \
                self._pid == os.getpid() and self._busy():
            self._park()
            return
        self.destroy()

    def __del__(self):
        # A child of fork() must not call Tutti (docs/semantics.md, "fork()"): it leaves the
        # parent's handle alone.
        if getattr(self, "_handle", None) is not None and self._pid == os.getpid():
            try:
                if self._busy():
                    self._park()  # kept alive by the list
                else:
                    self.destroy()
            except Exception:
                pass


_parked = []
_parked_lock = threading.Lock()


def reap_parked():
    """Destroys the parked streams (Stream._park) whose operations have all ended: called when
    a communicator is destroyed or aborted and when a stream is created."""
    if not _parked:
        return
    with _parked_lock:
        done = [s for s in _parked if not s._busy()]
        _parked[:] = [s for s in _parked if not any(s is d for d in done)]
    for s in done:
        try:
            s.destroy()
        except Exception:  # its operations' error: reported by their own calls
            pass


class Event:
    """A per-operation event (tuttiEventCreate): e.record(comm, stream) marks the point after the
    operations comm has issued so far on stream (a tutti.Stream; None: the communicator's own
    queue when it is nonblocking, else complete at once); e.query() says whether they completed
    and raises their error; e.synchronize() waits for them. The stream keeps the operations'
    buffers alive; once the event is seen complete, those of the operations before it are
    released."""

    def __init__(self):
        h = ctypes.c_void_p()
        _errors.check(_lib.lib().tuttiEventCreate(ctypes.byref(h)), "tuttiEventCreate")
        self._handle = h.value
        self._pid = os.getpid()
        self._recorded = None  # (stream, mark) of the last record on a host stream

    def _ended(self, rc):
        """After a query of the event: once it is complete, every operation recorded before it
        has ended (the stream is in order), so their buffers go."""
        if rc != Result.IN_PROGRESS and self._recorded is not None:
            stream, mark = self._recorded
            self._recorded = None
            stream._release_to(mark)

    def _h(self):
        if self._handle is None:
            raise _errors.usage_error(Result.INVALID_USAGE, "Event", "the event was destroyed")
        return self._handle

    def record(self, comm, stream=None):
        """tuttiEventRecord after comm's operations so far on stream."""
        mark = stream._mark() if isinstance(stream, Stream) else None
        _errors.check(_lib.lib().tuttiEventRecord(self._h(), comm.handle,
                                                  _stream_handle(stream)), "tuttiEventRecord")
        self._recorded = (stream, mark) if mark is not None else None

    def query(self):
        """tuttiEventQuery: True once complete (raising the operations' error), else False."""
        rc = _lib.lib().tuttiEventQuery(self._h())
        self._ended(rc)
        if rc == Result.IN_PROGRESS:
            return False
        _errors.check(rc, "tuttiEventQuery")
        return True

    def synchronize(self):
        """tuttiEventSynchronize: waits; raises the operations' error."""
        rc = _lib.lib().tuttiEventSynchronize(self._h())
        self._ended(rc)
        _errors.check(rc, "tuttiEventSynchronize")

    def wait(self, timeout=None):
        """tuttiEventWait: sleeps (without driving Tutti's engine, which another thread does)
        until complete or `timeout` seconds passed (None: no limit). True once complete
        (raising the operations' error), False when the time ran out."""
        us = -1 if timeout is None else max(0, int(timeout * 1e6))
        rc = _lib.lib().tuttiEventWait(self._h(), us)
        self._ended(rc)
        if rc == Result.IN_PROGRESS:
            return False
        _errors.check(rc, "tuttiEventWait")
        return True

    def destroy(self):
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        _errors.check(_lib.lib().tuttiEventDestroy(h), "tuttiEventDestroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        # A child of fork() must not call Tutti (docs/semantics.md, "fork()"): it leaves the
        # parent's handle alone.
        if getattr(self, "_handle", None) is not None and self._pid == os.getpid():
            try:
                self.destroy()
            except Exception:
                pass


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, Stream):
        return stream.handle
    raise TypeError("stream must be a tutti.Stream or None, not %s" % type(stream).__name__)
