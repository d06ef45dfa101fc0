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


_group = _GroupState()


def group_start():
    """ncclGroupStart: calls until the matching group_end are issued together. Groups nest."""
    _errors.check(_lib.lib().ncclGroupStart(), "ncclGroupStart")
    _group.depth += 1


def group_end():
    """ncclGroupEnd. With NULL streams on blocking communicators the outermost one returns when
    every operation of the group is complete. Returns Result.IN_PROGRESS when the group's
    communicators are nonblocking and it has not finished yet."""
    if _group.depth == 0:
        raise _errors.usage_error(Result.INVALID_USAGE, "ncclGroupEnd",
                                  "group_end() without a matching group_start()")
    _group.depth -= 1
    outermost = _group.depth == 0
    keep, comms = (_group.keep, _group.comms) if outermost else (None, None)
    if outermost:
        _group.keep, _group.comms = [], []
    rc = _lib.lib().ncclGroupEnd()
    if outermost and rc == Result.IN_PROGRESS:
        for comm in comms:
            comm._keep.append(keep)
    _errors.check(rc, "ncclGroupEnd", allow_in_progress=True)
    return Result(rc)


def group_simulate_end():
    """ncclGroupSimulateEnd: ends the group without running it; returns the cost model's
    estimate of its time in microseconds."""
    if _group.depth == 0:
        raise _errors.usage_error(Result.INVALID_USAGE, "ncclGroupSimulateEnd",
                                  "group_simulate_end() without a matching group_start()")
    _group.depth -= 1
    if _group.depth == 0:
        _group.keep, _group.comms = [], []
    info = _lib.SimInfoStruct.initializer()
    _errors.check(_lib.lib().ncclGroupSimulateEnd(ctypes.byref(info)), "ncclGroupSimulateEnd")
    return info.estimatedTime


@contextlib.contextmanager
def group():
    """`with tutti.group(): ...` brackets calls with group_start()/group_end(). If the body
    raises, the group is still ended (NCCL has no way to cancel it) and the body's exception
    propagates; an error of group_end itself is then not reported."""
    group_start()
    try:
        yield
    except BaseException:
        try:
            group_end()
        except _errors.TuttiError:
            pass
        raise
    group_end()


# ---- Host streams -------------------------------------------------------------------------------

class Stream:
    """A Tutti host stream (tuttiStreamCreate): an in-order queue run by the library's progress
    thread. Operations given stream=s return at once; s.synchronize() waits for them and raises
    the first error among them. Buffers of queued operations are kept alive until then."""

    def __init__(self):
        h = ctypes.c_void_p()
        _errors.check(_lib.lib().tuttiStreamCreate(ctypes.byref(h)), "tuttiStreamCreate")
        self._handle = h.value
        self._pid = os.getpid()
        self._keep = []
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

    def _pending(self):
        with self._lock:
            return len(self._keep)

    def _release(self, count=None):
        """Drops the buffers of the first `count` operations held (all when None): those the
        library has finished with. Operations queued meanwhile by other threads stay held."""
        with self._lock:
            del self._keep[:len(self._keep) if count is None else count]

    def synchronize(self):
        """tuttiStreamSynchronize: waits for every queued operation; raises the first error."""
        held = self._pending()
        rc = _lib.lib().tuttiStreamSynchronize(self.handle)
        self._release(held)
        _errors.check(rc, "tuttiStreamSynchronize")

    def query(self):
        """tuttiStreamQuery: True when every queued operation is complete, False while some are
        not; raises the first error of the completed ones (others may still be queued, so
        their buffers stay held). Never blocks."""
        held = self._pending()
        rc = _lib.lib().tuttiStreamQuery(self.handle)
        if rc == Result.IN_PROGRESS:
            return False
        if rc == Result.SUCCESS:
            self._release(held)
        _errors.check(rc, "tuttiStreamQuery")
        return True

    def destroy(self):
        """tuttiStreamDestroy: waits for the queued operations, then frees the stream."""
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        rc = _lib.lib().tuttiStreamDestroy(h)
        self._release()
        _errors.check(rc, "tuttiStreamDestroy")

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


class Event:
    """A per-operation event (tuttiEventCreate): e.record(comm, stream) marks the point after the
    operations comm has issued so far on stream (a tutti.Stream; None: the communicator's own
    queue when it is nonblocking, else complete at once); e.query() says whether they completed
    and raises their error; e.synchronize() waits for them. It keeps no buffer alive: the stream
    does that until it is synchronized or queried."""

    def __init__(self):
        h = ctypes.c_void_p()
        _errors.check(_lib.lib().tuttiEventCreate(ctypes.byref(h)), "tuttiEventCreate")
        self._handle = h.value
        self._pid = os.getpid()

    def _h(self):
        if self._handle is None:
            raise _errors.usage_error(Result.INVALID_USAGE, "Event", "the event was destroyed")
        return self._handle

    def record(self, comm, stream=None):
        """tuttiEventRecord after comm's operations so far on stream."""
        _errors.check(_lib.lib().tuttiEventRecord(self._h(), comm.handle,
                                                  _stream_handle(stream)), "tuttiEventRecord")

    def query(self):
        """tuttiEventQuery: True once complete (raising the operations' error), else False."""
        rc = _lib.lib().tuttiEventQuery(self._h())
        if rc == Result.IN_PROGRESS:
            return False
        _errors.check(rc, "tuttiEventQuery")
        return True

    def synchronize(self):
        """tuttiEventSynchronize: waits; raises the operations' error."""
        _errors.check(_lib.lib().tuttiEventSynchronize(self._h()), "tuttiEventSynchronize")

    def wait(self, timeout=None):
        """tuttiEventWait: sleeps (without driving Tutti's engine, which another thread does)
        until complete or `timeout` seconds passed (None: no limit). True once complete
        (raising the operations' error), False when the time ran out."""
        us = -1 if timeout is None else max(0, int(timeout * 1e6))
        rc = _lib.lib().tuttiEventWait(self._h(), us)
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
