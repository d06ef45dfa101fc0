"""Communicators, PreMulSum operators and registrations.

Every method checks its Python arguments (buffer kinds, contiguity, writability, sizes,
datatypes) and raises TypeError or ValueError before any C call; a failing C call raises a
TuttiError subclass carrying NCCL's code and ncclGetLastError's message. Buffers handed to an
operation that has not completed when its call returns (on a host stream, inside a group, on a
nonblocking communicator) are kept alive by this module until the stream is synchronised, the
group ended, or the communicator reports it idle.
"""

import ctypes
import os
import operator
import threading
import time
import warnings

from . import _buffer, _errors, _lib, _types
from ._errors import Result
from ._group import _group, _in_group, _stream_handle, reap_parked
from ._ids import UniqueId, _as_uid, _config_ptr

NCCL_SPLIT_NOCOLOR = -1
WIN_DEFAULT = 0x00
WIN_COLL_SYMMETRIC = 0x01
SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01
REVOKE_DEFAULT = 0x00


class PreMulSum:
    """A reduction operator made by ncclRedOpCreatePreMulSum: each rank's input is multiplied
    by the scalar, then summed. Valid for its communicator and datatype only; pass it as op=."""

    def __init__(self, comm, value, dtype):
        self.comm, self._value, self.dtype = comm, value, dtype

    @property
    def op_value(self):
        """The ncclRedOp_t value."""
        if self._value is None:
            raise _errors.usage_error(Result.INVALID_ARGUMENT, "PreMulSum",
                                      "the PreMulSum operator was destroyed")
        return self._value

    def destroy(self):
        """ncclRedOpDestroy."""
        if self._value is None:
            return
        v, self._value = self._value, None
        h = self.comm._h("ncclRedOpDestroy")
        _errors.check(_lib.lib().ncclRedOpDestroy(v, h), "ncclRedOpDestroy", h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()


# Buffers whose release could not be proven safe (a window dropped without its collective
# deregistration, holds of a communicator destroyed with operations of unknown state): kept
# until the process ends rather than freed under the library.
_kept_forever = []


class Registration:
    """A buffer registered with ncclCommRegister; deregister() (or leaving a `with`) undoes it.
    It holds the buffer while registered; dropped unregistered, it deregisters itself (the
    library must not keep a registration of memory that is freed and perhaps reused)."""

    def __init__(self, comm, handle, buf):
        self.comm, self.handle, self._buf = comm, handle, buf
        self._pid = os.getpid()

    def __del__(self):
        if getattr(self, "handle", None) is None or self._pid != os.getpid():
            return
        if getattr(self.comm, "_handle", None) is None:
            return  # the communicator's destroy or abort dropped its registrations
        try:
            self.deregister()
        except Exception:
            _kept_forever.append(self._buf)

    def deregister(self):
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        h = self.comm._h("ncclCommDeregister")
        _errors.check(_lib.lib().ncclCommDeregister(h, handle), "ncclCommDeregister", h)
        self._buf = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.deregister()


class Window(Registration):
    """A window registered with ncclCommWindowRegister (a collective call). Its deregistration
    is collective too, so a Window dropped without deregister() cannot undo itself: its buffer
    is then kept until the process ends, with a ResourceWarning."""

    def __del__(self):
        if getattr(self, "handle", None) is None or self._pid != os.getpid():
            return
        if getattr(self.comm, "_handle", None) is None:
            return
        _kept_forever.append(self._buf)
        warnings.warn("a tutti Window was dropped without deregister(); its buffer stays "
                      "allocated until the process ends", ResourceWarning)

    def deregister(self):
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        h = self.comm._h("ncclCommWindowDeregister")
        _errors.check(_lib.lib().ncclCommWindowDeregister(h, handle),
                      "ncclCommWindowDeregister", h)
        self._buf = None


def _check_rank(value, nranks, what):
    value = _check_int(value, what)
    if not 0 <= value < nranks:
        raise ValueError("%s %d out of range for a communicator of %d ranks" %
                         (what, value, nranks))
    return value


class Comm:
    """One rank's communicator. Comm(nranks, uid, rank, config=None) is ncclCommInitRank(Config);
    Comm.from_env() is tuttiCommInitFromEnv (under tutti-run, torchrun, mpirun, srun).
    A communicator is freed by destroy() or abort() (or by leaving a `with` block), not by the
    garbage collector: NCCL's destroy must be called in the same order on every rank."""

    def __init__(self, nranks, uid, rank, config=None):
        nranks = _check_int(nranks, "nranks")
        rank = _check_int(rank, "rank")
        uid = _as_uid(uid)
        h = ctypes.c_void_p()
        lib = _lib.lib()
        cfg, keep = _config_ptr(config)
        if cfg is None:
            rc = lib.ncclCommInitRank(ctypes.byref(h), nranks, uid._struct(), rank)
            call = "ncclCommInitRank"
        else:
            rc = lib.ncclCommInitRankConfig(ctypes.byref(h), nranks, uid._struct(), rank, cfg)
            call = "ncclCommInitRankConfig"
        _errors.check(rc, call, allow_in_progress=True)
        del keep
        self._init(h.value)

    def _init(self, handle):
        self._handle = handle
        self._keep = []  # buffers of operations still running on a nonblocking communicator
        self._keep_lock = threading.Lock()
        self._nranks = None

    def _hold(self, keep):
        with self._keep_lock:
            self._keep.append(keep)

    @classmethod
    def from_env(cls):
        """tuttiCommInitFromEnv: rank and size from the launcher's variables."""
        h = ctypes.c_void_p()
        rc = _lib.lib().tuttiCommInitFromEnv(ctypes.byref(h))
        _errors.check(rc, "tuttiCommInitFromEnv", allow_in_progress=True)
        return cls._wrap(h.value)

    @classmethod
    def init_scalable(cls, nranks, uids, rank, config=None):
        """ncclCommInitRankScalable: like Comm(), with several ids (the same list on every
        rank) to spread the rendezvous."""
        nranks = _check_int(nranks, "nranks")
        rank = _check_int(rank, "rank")
        uids = [_as_uid(u) for u in uids]
        if not uids:
            raise ValueError("init_scalable needs at least one unique id")
        arr = (_lib.UniqueIdStruct * len(uids))(*[u._struct() for u in uids])
        h = ctypes.c_void_p()
        cfg, keep = _config_ptr(config)
        rc = _lib.lib().ncclCommInitRankScalable(ctypes.byref(h), nranks, rank, len(uids), arr,
                                                 cfg)
        _errors.check(rc, "ncclCommInitRankScalable", allow_in_progress=True)
        del keep
        return cls._wrap(h.value)

    @classmethod
    def init_all(cls, ndev):
        """ncclCommInitAll: all `ndev` ranks of a new clique inside this process, as a list
        (drive them from one thread inside a group, or from one thread each)."""
        ndev = _check_int(ndev, "ndev")
        if ndev < 1:
            raise ValueError("init_all needs at least one rank, got %d" % ndev)
        out = (ctypes.c_void_p * ndev)()
        _errors.check(_lib.lib().ncclCommInitAll(out, ndev, None), "ncclCommInitAll",
                      allow_in_progress=True)
        return [cls._wrap(h) for h in out]

    @classmethod
    def _wrap(cls, handle):
        c = cls.__new__(cls)
        c._init(handle)
        return c

    # -- state and queries --

    def _h(self, call):
        if self._handle is None:
            raise _errors.usage_error(Result.INVALID_ARGUMENT, call,
                                      "the communicator was destroyed or aborted")
        return self._handle

    @property
    def handle(self):
        """The ncclComm_t as an int (None once destroyed)."""
        return self._handle

    def _query(self, fn, call):
        h = self._h(call)
        out = ctypes.c_int()
        _errors.check(getattr(_lib.lib(), fn)(h, ctypes.byref(out)), call, h)
        return out.value

    @property
    def rank(self):
        """ncclCommUserRank."""
        return self._query("ncclCommUserRank", "ncclCommUserRank")

    @property
    def size(self):
        """ncclCommCount: the number of ranks."""
        if self._nranks is None:
            self._nranks = self._query("ncclCommCount", "ncclCommCount")
        return self._nranks

    nranks = size

    @property
    def device(self):
        """ncclCommCuDevice: the CUDA device, -1 for a communicator of host processes."""
        return self._query("ncclCommCuDevice", "ncclCommCuDevice")

    def get_async_error(self):
        """ncclCommGetAsyncError: Result.SUCCESS, Result.IN_PROGRESS (a nonblocking
        communicator still working) or the latched error's code. Does not raise for it."""
        h = self._h("ncclCommGetAsyncError")
        out = ctypes.c_int()
        with self._keep_lock:
            held = len(self._keep)
        _errors.check(_lib.lib().ncclCommGetAsyncError(h, ctypes.byref(out)),
                      "ncclCommGetAsyncError", h)
        # Idle: what was issued before the query has ended. After an error, operations of
        # the failed batch may still be running: their buffers stay held until destroy/abort.
        if out.value == Result.SUCCESS:
            with self._keep_lock:
                del self._keep[:held]
        return Result(out.value)

    def wait(self, timeout=None, poll_s=0.0005):
        """For nonblocking communicators: polls get_async_error until it stops reporting
        IN_PROGRESS; raises the latched error, or TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            rc = self.get_async_error()
            if rc != Result.IN_PROGRESS:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("communicator still in progress after %g s" % timeout)
            time.sleep(poll_s)
        if rc != Result.SUCCESS:
            raise _errors.error_from(rc, "ncclCommGetAsyncError", self._handle)

    # -- lifecycle --

    def finalize(self):
        """ncclCommFinalize: completes the queued operations, then refuses new ones."""
        h = self._h("ncclCommFinalize")
        return Result(_errors.check(_lib.lib().ncclCommFinalize(h), "ncclCommFinalize", h,
                                    allow_in_progress=True))

    def _free(self, fn, call):
        if self._handle is None:
            return
        h = self._handle
        rc = getattr(_lib.lib(), fn)(h)
        if rc in (Result.SUCCESS, Result.IN_PROGRESS):
            self._handle = None
            with self._keep_lock:
                # The library may have left the communicator to be freed once another thread
                # leaves its call, with operations still queued: their buffers stay.
                if self._keep:
                    _kept_forever.append(self._keep)
                self._keep = []
            reap_parked()  # streams whose operations this ended
        _errors.check(rc, call, None, allow_in_progress=True)

    def destroy(self):
        """ncclCommDestroy. Idempotent on the Python side: a second call does nothing."""
        self._free("ncclCommDestroy", "ncclCommDestroy")

    def abort(self):
        """ncclCommAbort: stops whatever is in flight and frees the communicator."""
        self._free("ncclCommAbort", "ncclCommAbort")

    def dump(self):
        """tuttiCommDump: logs (NCCL_DEBUG=WARN) the operations stalled right now and whom
        each waits for."""
        h = self._h("tuttiCommDump")
        _errors.check(_lib.lib().tuttiCommDump(h), "tuttiCommDump", h)

    def revoke(self, flags=REVOKE_DEFAULT):
        """ncclCommRevoke: fails the operations in flight and refuses new ones; the communicator
        can still be shrunk or destroyed."""
        h = self._h("ncclCommRevoke")
        _errors.check(_lib.lib().ncclCommRevoke(h, flags), "ncclCommRevoke", h,
                      allow_in_progress=True)

    def split(self, color, key=0, config=None):
        """ncclCommSplit: a new communicator of the ranks passing the same color, ordered by
        key; color None (or NCCL_SPLIT_NOCOLOR) joins none and returns None."""
        color = NCCL_SPLIT_NOCOLOR if color is None else color
        color = _check_int(color, "color")
        key = _check_int(key, "key")
        h = self._h("ncclCommSplit")
        out = ctypes.c_void_p()
        cfg, keep = _config_ptr(config)
        rc = _lib.lib().ncclCommSplit(h, color, key, ctypes.byref(out), cfg)
        _errors.check(rc, "ncclCommSplit", h, allow_in_progress=True)
        del keep
        return Comm._wrap(out.value) if out.value else None

    def shrink(self, exclude, config=None, abort=False):
        """ncclCommShrink: a communicator of this one's ranks minus `exclude` (a list of ranks),
        renumbered densely. abort=True aborts the parent's operations first
        (NCCL_SHRINK_ABORT). An excluded rank must not call it."""
        exclude = [_check_int(r, "excluded rank") for r in exclude]
        arr = (ctypes.c_int * max(len(exclude), 1))(*exclude)
        h = self._h("ncclCommShrink")
        out = ctypes.c_void_p()
        cfg, keep = _config_ptr(config)
        rc = _lib.lib().ncclCommShrink(h, arr, len(exclude), ctypes.byref(out), cfg,
                                       SHRINK_ABORT if abort else SHRINK_DEFAULT)
        _errors.check(rc, "ncclCommShrink", h, allow_in_progress=True)
        del keep
        return Comm._wrap(out.value) if out.value else None

    def grow_id(self):
        """ncclCommGetUniqueId: the id of a grow of this communicator. Exactly one existing rank
        (the coordinator) makes it, with nothing in flight, and gives its bytes to the new ranks
        out of band."""
        h = self._h("ncclCommGetUniqueId")
        s = _lib.UniqueIdStruct()
        _errors.check(_lib.lib().ncclCommGetUniqueId(h, ctypes.byref(s)),
                      "ncclCommGetUniqueId", h)
        return UniqueId(ctypes.string_at(ctypes.addressof(s), _lib.NCCL_UNIQUE_ID_BYTES))

    def grow(self, nranks, uid=None, config=None):
        """ncclCommGrow on an existing rank: a communicator of `nranks` ranks, this one's keeping
        their ranks and new ones (Comm.join_grow) taking the rest. `uid` is grow_id()'s id on
        the coordinator and None on every other existing rank."""
        nranks = _check_int(nranks, "nranks")
        h = self._h("ncclCommGrow")
        return Comm._grow(h, nranks, None if uid is None else _as_uid(uid), -1, config)

    @classmethod
    def join_grow(cls, nranks, uid, rank, config=None):
        """ncclCommGrow on a new rank: joins the grow whose id the coordinator handed over, as
        `rank` (from the old size up to nranks - 1)."""
        nranks = _check_int(nranks, "nranks")
        rank = _check_int(rank, "rank")
        return cls._grow(None, nranks, _as_uid(uid), rank, config)

    @classmethod
    def _grow(cls, handle, nranks, uid, rank, config):
        out = ctypes.c_void_p()
        cfg, keep = _config_ptr(config)
        sid = uid._struct() if uid is not None else None
        rc = _lib.lib().ncclCommGrow(handle, nranks, ctypes.byref(sid) if sid is not None else None,
                                     rank, ctypes.byref(out), cfg)
        _errors.check(rc, "ncclCommGrow", handle, allow_in_progress=True)
        del keep
        return cls._wrap(out.value)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    def __repr__(self):
        if self._handle is None:
            return "<tutti.Comm destroyed>"
        return "<tutti.Comm at 0x%x>" % self._handle

    # -- operators and registration --

    def premul_sum(self, scalar, dtype):
        """ncclRedOpCreatePreMulSum with a host scalar (ncclScalarHostImmediate): an operator
        computing sum(scalar * x) for `dtype`. `scalar` is a number (rounded into dtype) or the
        bytes of one element of dtype."""
        dt = _types.as_datatype(dtype)
        raw = _types.encode_scalar(scalar, dt)
        box = ctypes.create_string_buffer(raw, len(raw))
        h = self._h("ncclRedOpCreatePreMulSum")
        out = ctypes.c_int()
        rc = _lib.lib().ncclRedOpCreatePreMulSum(ctypes.byref(out), box, int(dt), 1, h)
        _errors.check(rc, "ncclRedOpCreatePreMulSum", h)
        return PreMulSum(self, out.value, dt)

    def register(self, buf):
        """ncclCommRegister over a whole writable buffer; returns a Registration."""
        b = _buffer.resolve(buf, "buf", writable=True)
        h = self._h("ncclCommRegister")
        out = ctypes.c_void_p()
        rc = _lib.lib().ncclCommRegister(h, b.ptr, b.nbytes, ctypes.byref(out))
        _errors.check(rc, "ncclCommRegister", h)
        return Registration(self, out.value, b.keep)

    def window_register(self, buf, flags=WIN_COLL_SYMMETRIC):
        """ncclCommWindowRegister (every rank calls it); returns a Window."""
        b = _buffer.resolve(buf, "buf", writable=True)
        h = self._h("ncclCommWindowRegister")
        out = ctypes.c_void_p()
        rc = _lib.lib().ncclCommWindowRegister(h, b.ptr, b.nbytes, ctypes.byref(out), flags)
        _errors.check(rc, "ncclCommWindowRegister", h)
        return Window(self, out.value, b.keep)

    # -- issuing operations --

    def _issue(self, call, args, bufs, stream):
        """Calls `call` with `args` (the communicator and stream appended) and keeps `bufs`
        alive for as long as the operation may still run."""
        h = self._h(call)
        sh = _stream_handle(stream)
        keep = [b.keep for b in bufs if b is not None]
        # Held before the call: an exception (KeyboardInterrupt) right after it must not leave
        # a queued operation unheld; one that failed to queue only stays held a while longer.
        if _group.depth > 0:
            _in_group(self, stream, keep)
        elif stream is not None:
            stream._hold(keep)
        rc = getattr(_lib.lib(), call)(*args, h, sh)
        if rc == Result.IN_PROGRESS and stream is None and _group.depth == 0:
            self._hold(keep)
        _errors.check(rc, call, h, allow_in_progress=True)
        return rc

    def _typed(self, dtype, *pairs):
        """Resolves (object, name, writable) triples, skipping None objects, and gives them
        one datatype. An object passed twice (in place) is resolved once, as writable."""
        if len(pairs) == 2 and pairs[0][0] is pairs[1][0] and pairs[0][0] is not None:
            b = _buffer.resolve(pairs[0][0], "%s (in place)" % pairs[0][1], True)
            return [_buffer.assign_dtype(dtype, [b]), b, b]
        bufs = [None if obj is None else _buffer.resolve(obj, name, writable)
                for obj, name, writable in pairs]
        present = [b for b in bufs if b is not None]
        dt = _buffer.assign_dtype(dtype, present)
        return [dt] + bufs

    @staticmethod
    def _need(buf, count, what):
        if buf.count < count:
            raise ValueError("%s holds %d %s elements but %s needs %d" %
                             (buf.name, buf.count, buf.dtype.name.lower(), what, count))

    # -- collectives --

    def all_reduce(self, sendbuf, recvbuf=None, op=_types.RedOp.SUM, *, dtype=None,
                   stream=None):
        """ncclAllReduce: recvbuf = op over all ranks of sendbuf (in place when recvbuf is None
        or the same buffer). Returns recvbuf."""
        recvbuf = sendbuf if recvbuf is None else recvbuf
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        self._need(r, s.count, "all_reduce of sendbuf")
        redop = _types.as_redop(op)
        self._issue("ncclAllReduce", (s.ptr, r.ptr, s.count, int(dt), redop), (s, r), stream)
        return recvbuf

    def broadcast(self, sendbuf, recvbuf=None, root=0, *, dtype=None, stream=None):
        """ncclBroadcast: recvbuf on every rank = sendbuf of `root` (in place when recvbuf is
        None). Away from the root sendbuf may be None when recvbuf is given; the element count
        is then recvbuf's. Returns recvbuf."""
        if recvbuf is None:
            recvbuf = sendbuf
        if recvbuf is None:
            raise TypeError("broadcast needs sendbuf or recvbuf")
        dt, r, s = self._typed(dtype, (recvbuf, "recvbuf", True), (sendbuf, "sendbuf", False))
        count = s.count if s is not None else r.count
        self._need(r, count, "broadcast")
        root = _check_rank(root, self.size, "root")
        if s is None and self.rank == root:
            raise ValueError("the root of a broadcast needs sendbuf")
        sptr = s.ptr if s is not None else r.ptr
        self._issue("ncclBroadcast", (sptr, r.ptr, count, int(dt), root), (s, r), stream)
        return recvbuf

    def reduce(self, sendbuf, recvbuf=None, op=_types.RedOp.SUM, root=0, *, dtype=None,
               stream=None):
        """ncclReduce: recvbuf at `root` = op over all ranks of sendbuf (in place when recvbuf
        is None). recvbuf is significant at the root only. Returns recvbuf."""
        recvbuf = sendbuf if recvbuf is None else recvbuf
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        self._need(r, s.count, "reduce of sendbuf")
        root = _check_rank(root, self.size, "root")
        redop = _types.as_redop(op)
        self._issue("ncclReduce", (s.ptr, r.ptr, s.count, int(dt), redop, root), (s, r),
                    stream)
        return recvbuf

    def all_gather(self, sendbuf, recvbuf, *, dtype=None, stream=None):
        """ncclAllGather: block i of recvbuf (nranks blocks of len(sendbuf)) receives rank i's
        sendbuf. In place when sendbuf is recvbuf's block `rank`. Returns recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        self._need(r, s.count * self.size, "all_gather (nranks x sendbuf)")
        self._issue("ncclAllGather", (s.ptr, r.ptr, s.count, int(dt)), (s, r), stream)
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf, op=_types.RedOp.SUM, *, dtype=None,
                       stream=None):
        """ncclReduceScatter: sendbuf holds nranks equal blocks; rank i receives the reduction
        of block i. In place when recvbuf is sendbuf's block `rank`. Returns recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        n = self.size
        if s.count % n:
            raise ValueError("sendbuf holds %d elements, not a multiple of the %d ranks" %
                             (s.count, n))
        count = s.count // n
        self._need(r, count, "reduce_scatter (len(sendbuf) / nranks)")
        redop = _types.as_redop(op)
        self._issue("ncclReduceScatter", (s.ptr, r.ptr, count, int(dt), redop), (s, r), stream)
        return recvbuf

    def alltoall(self, sendbuf, recvbuf, *, dtype=None, stream=None):
        """ncclAlltoAll: block j of sendbuf goes to rank j; block i of recvbuf comes from rank
        i (nranks equal blocks). Returns recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        n = self.size
        if s.count % n:
            raise ValueError("sendbuf holds %d elements, not a multiple of the %d ranks" %
                             (s.count, n))
        self._need(r, s.count, "alltoall (len(sendbuf))")
        self._issue("ncclAlltoAll", (s.ptr, r.ptr, s.count // n, int(dt)), (s, r), stream)
        return recvbuf

    def gather(self, sendbuf, recvbuf=None, root=0, *, dtype=None, stream=None):
        """ncclGather: at `root`, block i of recvbuf receives rank i's sendbuf. recvbuf is
        needed (and used) at the root only. Returns recvbuf."""
        root = _check_rank(root, self.size, "root")
        at_root = self.rank == root
        if at_root and recvbuf is None:
            raise ValueError("the root of a gather needs recvbuf")
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False),
                               (recvbuf if at_root else None, "recvbuf", True))
        if at_root:
            self._need(r, s.count * self.size, "gather (nranks x sendbuf)")
        self._issue("ncclGather", (s.ptr, r.ptr if r is not None else None, s.count, int(dt),
                                   root), (s, r), stream)
        return recvbuf

    def scatter(self, sendbuf, recvbuf, root=0, *, dtype=None, stream=None):
        """ncclScatter: rank i receives block i of `root`'s sendbuf (nranks blocks of
        len(recvbuf)). sendbuf is needed (and read) at the root only. Returns recvbuf."""
        root = _check_rank(root, self.size, "root")
        at_root = self.rank == root
        if at_root and sendbuf is None:
            raise ValueError("the root of a scatter needs sendbuf")
        dt, r, s = self._typed(dtype, (recvbuf, "recvbuf", True),
                               (sendbuf if at_root else None, "sendbuf", False))
        if at_root:
            self._need(s, r.count * self.size, "scatter (nranks x recvbuf)")
        self._issue("ncclScatter", (s.ptr if s is not None else None, r.ptr, r.count, int(dt),
                                    root), (s, r), stream)
        return recvbuf

    # -- vector variants (Tutti extensions) --

    def _layout(self, counts, displs, what):
        """counts and displs (None: the counts' running sums) as ctypes size_t arrays of one
        entry per rank, and the number of elements the layout spans."""
        n = self.size
        counts = [_check_count(c, "%s counts" % what) for c in counts]
        if len(counts) != n:
            raise ValueError("%s needs %d counts (one per rank), got %d" % (what, n, len(counts)))
        if displs is None:
            displs, at = [], 0
            for c in counts:
                displs.append(at)
                at += c
        else:
            displs = [_check_count(d, "%s displs" % what) for d in displs]
            if len(displs) != n:
                raise ValueError("%s needs %d displs (one per rank), got %d" %
                                 (what, n, len(displs)))
        span = max((d + c for c, d in zip(counts, displs) if c), default=0)
        arr = ctypes.c_size_t * n
        return arr(*counts), arr(*displs), span

    def alltoall_v(self, sendbuf, sendcounts, recvbuf, recvcounts, sdispls=None, rdispls=None,
                   *, dtype=None, stream=None):
        """tuttiAlltoAllV: sendcounts[j] elements at sendbuf[sdispls[j]:] go to rank j;
        recvcounts[i] elements from rank i land at recvbuf[rdispls[i]:]. Displacements default
        to the counts' running sums; recvcounts[i] must equal rank i's sendcounts[this rank].
        Returns recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        sc, sd, s_span = self._layout(sendcounts, sdispls, "alltoall_v send")
        rc, rd, r_span = self._layout(recvcounts, rdispls, "alltoall_v recv")
        self._need(s, s_span, "alltoall_v's send layout")
        self._need(r, r_span, "alltoall_v's receive layout")
        self._issue("tuttiAlltoAllV", (s.ptr, sc, sd, r.ptr, rc, rd, int(dt)), (s, r), stream)
        return recvbuf

    def all_gather_v(self, sendbuf, recvbuf, counts, displs=None, *, dtype=None, stream=None):
        """tuttiAllGatherV: rank i's sendbuf (counts[i] elements) lands at recvbuf[displs[i]:]
        on every rank (displs default to the counts' running sums). counts and displs must be
        the same on every rank. In place when sendbuf is recvbuf's own block. Returns
        recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        c, d, span = self._layout(counts, displs, "all_gather_v")
        self._need(s, c[self.rank], "all_gather_v (counts[rank])")
        self._need(r, span, "all_gather_v's layout")
        self._issue("tuttiAllGatherV", (s.ptr, r.ptr, c, d, int(dt)), (s, r), stream)
        return recvbuf

    def reduce_scatter_v(self, sendbuf, recvbuf, counts, displs=None, op=_types.RedOp.SUM, *,
                         dtype=None, stream=None):
        """tuttiReduceScatterV: block i of sendbuf (counts[i] elements at displs[i], by default
        the counts' running sums) is reduced over the ranks into rank i's recvbuf. counts and
        displs must be the same on every rank. In place when recvbuf is sendbuf's own block.
        Returns recvbuf."""
        dt, s, r = self._typed(dtype, (sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True))
        c, d, span = self._layout(counts, displs, "reduce_scatter_v")
        self._need(s, span, "reduce_scatter_v's layout")
        self._need(r, c[self.rank], "reduce_scatter_v (counts[rank])")
        redop = _types.as_redop(op)
        self._issue("tuttiReduceScatterV", (s.ptr, r.ptr, c, d, int(dt), redop), (s, r),
                    stream)
        return recvbuf

    # -- point to point --

    def send(self, buf, peer, *, dtype=None, stream=None):
        """ncclSend of the whole buffer to `peer`; pair it with a matching recv there (inside a
        group when both ranks send and receive)."""
        dt, b = self._typed(dtype, (buf, "buf", False))
        peer = _check_rank(peer, self.size, "peer")
        self._issue("ncclSend", (b.ptr, b.count, int(dt), peer), (b,), stream)

    def recv(self, buf, peer, *, dtype=None, stream=None):
        """ncclRecv into the whole buffer from `peer`. Returns buf."""
        dt, b = self._typed(dtype, (buf, "buf", True))
        peer = _check_rank(peer, self.size, "peer")
        self._issue("ncclRecv", (b.ptr, b.count, int(dt), peer), (b,), stream)
        return buf


def _check_index(value, what):
    """`value` as an int (numpy integers accepted); TypeError for anything else."""
    if isinstance(value, bool):
        raise TypeError("%s must be an int, not bool" % what)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__)) from None


def _check_int(value, what):
    """`value` as an int that fits C's int (ctypes would silently wrap it: a color of 2**32 - 1
    would become NCCL_SPLIT_NOCOLOR); TypeError or ValueError otherwise."""
    value = _check_index(value, what)
    if not -2**31 <= value < 2**31:
        raise ValueError("%s %d does not fit a C int (32 bits)" % (what, value))
    return value


def _check_count(value, what):
    """A count or displacement (C's size_t): an int >= 0."""
    value = _check_index(value, what)
    if value >= 2**64:
        raise ValueError("%s %d does not fit a size_t" % (what, value))
    if value < 0:
        raise ValueError("%s must not be negative, got %d" % (what, value))
    return value


def init_from_env():
    """tuttiCommInitFromEnv; the same as Comm.from_env()."""
    return Comm.from_env()
