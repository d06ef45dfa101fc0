"""The bindings' API beyond the collective matrix, on every rank of a tutti-run job: explicit
and nonblocking communicators from a unique id shared as bytes, buffer-protocol objects, host
streams, groups, split, shrink, revoke, abort, finalize, registration and windows, PreMulSum,
ncclMemAlloc arrays, and the error paths (bad datatype, wrong sizes, non-contiguous and
read-only buffers, destroyed communicators, ncclGetLastError's text in the exception).
"""

import array
import faulthandler
import gc
import signal
import sys
import traceback

import numpy as np

import tutti

results = []


# tutti-run stops a rank with SIGTERM (its --timeout, or a failed peer): say where it was.
faulthandler.register(signal.SIGTERM, all_threads=True)


def case(fn):
    results.append(fn)
    return fn


def raises(exc, fn, *args, match=None, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        if match is not None and match not in str(e):
            raise AssertionError("%s raised %r, whose text lacks %r" % (fn.__name__, e, match))
        return e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc.__name__))


def eq(got, want, what):
    if isinstance(got, np.ndarray) or isinstance(want, np.ndarray):
        ok = np.array_equal(np.asarray(got), np.asarray(want))
    else:
        ok = got == want
    if not ok:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


@case
def queries(world):
    eq(world.size, int(__import__("os").environ["WORLD_SIZE"]), "size")
    eq(world.rank, int(__import__("os").environ["RANK"]), "rank")
    eq(world.device, -1, "device of host ranks")
    eq(world.get_async_error(), tutti.Result.SUCCESS, "async error")


def shared_uid(world):
    """A unique id made on rank 0 and sent to the others as its 128 bytes."""
    raw = bytearray(128)
    if world.rank == 0:
        raw[:] = bytes(tutti.get_unique_id())
    world.broadcast(raw, root=0)
    return tutti.UniqueId(raw)


@case
def explicit_comm(world):
    uid = shared_uid(world)
    with tutti.Comm(world.size, uid, world.rank, config=tutti.Config(comm_name="py")) as c:
        eq((c.rank, c.size), (world.rank, world.size), "explicit comm rank/size")
        x = np.full(5, c.rank + 1, dtype=np.int64)
        c.all_reduce(x)
        eq(x, np.full(5, c.size * (c.size + 1) // 2), "explicit comm all_reduce")
    eq(c.handle, None, "handle after leaving with")


@case
def scalable_init(world):
    uids = [shared_uid(world), shared_uid(world)]
    c = tutti.Comm.init_scalable(world.size, uids, world.rank)
    x = np.ones(3, dtype=np.uint8)
    c.all_reduce(x)
    eq(x, np.full(3, world.size, dtype=np.uint8), "scalable init all_reduce")
    c.destroy()


@case
def nonblocking_comm(world):
    uid = shared_uid(world)
    c = tutti.Comm(world.size, bytes(uid), world.rank, config=tutti.Config(blocking=False))
    c.wait(timeout=60)
    x = np.full(1000, 2.0)
    c.all_reduce(x)
    c.wait(timeout=60)
    eq(x, np.full(1000, 2.0 * world.size), "nonblocking all_reduce")
    # A group on a nonblocking communicator.
    y = np.ones(3, dtype=np.int32)
    with tutti.group():
        c.all_reduce(y)
        c.all_reduce(y)
    c.wait(timeout=60)
    eq(y, np.full(3, world.size ** 2), "nonblocking group")
    c.destroy()


@case
def buffer_protocol(world):
    n, r = world.size, world.rank
    # bytearray (uint8) in place, array.array of doubles, a memoryview, bytes as an input.
    b = bytearray([r + 1] * 4)
    world.all_reduce(b)
    eq(list(b), [n * (n + 1) // 2] * 4, "bytearray all_reduce")
    a = array.array("d", [r, 1.5])
    out = array.array("d", [0.0, 0.0])
    world.all_reduce(a, out, tutti.MAX)
    eq(list(out), [n - 1.0, 1.5], "array.array all_reduce max")
    m = memoryview(bytearray(4 * n)).cast("i")
    world.all_gather(bytes(array.array("i", [r])), m, dtype="int32")
    eq(m.tolist(), list(range(n)), "memoryview all_gather from bytes")
    # A read-only numpy input.
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    dst = np.zeros(4, dtype=np.float32)
    world.all_reduce(ro, dst)
    eq(dst, np.arange(4, dtype=np.float32) * n, "read-only input")
    # A 2-D C-contiguous array counts all its elements.
    two = np.ones((3, 4), dtype=np.uint32)
    world.all_reduce(two, op="sum")
    eq(two, np.full((3, 4), n), "2-D all_reduce")


@case
def streams(world):
    n = world.size
    with tutti.Stream() as s:
        xs = [np.full(10000, float(i)) for i in range(4)]
        for x in xs:
            world.all_reduce(x, stream=s)
        # The queue holds the buffers: dropping our references must not free them.
        tmp = np.full(7, 3, dtype=np.int8)
        world.all_reduce(tmp, stream=s)
        del tmp
        gc.collect()
        s.synchronize()
        for i, x in enumerate(xs):
            eq(x, np.full(10000, float(i) * n), "stream all_reduce %d" % i)
        eq(s.query(), True, "query after synchronize")
        y = np.ones(1 << 16, dtype=np.float32)
        world.all_reduce(y, stream=s)
        while not s.query():
            pass
        eq(y, np.full(1 << 16, float(n), dtype=np.float32), "stream query loop")
        # A blocking call after a stream call on the same communicator runs after it.
        z = np.ones(5)
        world.all_reduce(z, stream=s)
        world.all_reduce(z)
        s.synchronize()
        eq(z, np.full(5, float(n * n)), "stream then blocking")
    raises(tutti.InvalidUsageError, world.all_reduce, np.ones(2), stream=s, match="destroyed")
    raises(TypeError, world.all_reduce, np.ones(2), stream=1)


@case
def events(world):
    n = world.size
    with tutti.Stream() as s, tutti.Event() as first, tutti.Event() as last:
        eq(first.query(), True, "an event never recorded is complete")
        a, b = np.full(50000, 1.0), np.full(50000, 2.0)
        world.all_reduce(a, stream=s)
        first.record(world, s)
        world.all_reduce(b, stream=s)
        last.record(world, s)
        eq(last.wait(), True, "Event.wait() without a limit")
        last.synchronize()
        eq(first.query(), True, "an earlier event after a later one completed")
        eq(a, np.full(50000, float(n)), "first all_reduce")
        eq(b, np.full(50000, 2.0 * n), "second all_reduce")
        s.synchronize()
        x = np.ones(3)
        world.all_reduce(x)
        first.record(world)  # blocking: complete at once
        eq(first.query(), True, "event after a blocking call")
        world.dump()
    raises(TypeError, tutti.Event().record, world, stream=1)


@case
def stream_error(world):
    """An operation that fails after its call returned: rank 0 queues an all_reduce that the
    other ranks never join, then revokes the communicator; synchronize raises the failure."""
    import time
    c = world.split(0)
    if world.rank == 0:
        with tutti.Stream() as s:
            c.all_reduce(np.ones(4), stream=s)
            time.sleep(0.05)
            eq(s.query(), False, "query while the peers are absent")
            c.revoke()
            e = raises(tutti.TuttiError, s.synchronize)
            if "failed" not in e.message:
                raise AssertionError("the stream's error lacks the library's text: %r" % e)
            eq(c.get_async_error(), tutti.Result(e.code), "the error latched on the comm")
    world.all_reduce(np.ones(1))
    c.abort()


@case
def groups(world):
    n, r = world.size, world.rank
    a, b = np.ones(4), np.full(4, 2, dtype=np.int32)
    with tutti.group():
        world.all_reduce(a)
        with tutti.group():
            world.all_reduce(b, op=tutti.PROD)
        world.broadcast(np.full(1, float(r)), a[:1], root=n - 1)
    eq(a, np.array([n - 1.0, n, n, n]), "group all_reduce + broadcast")
    eq(b, np.full(4, 2 ** n), "nested group")
    tutti.group_start()
    tutti.group_end()
    raises(tutti.InvalidUsageError, tutti.group_end, match="without a matching")


@case
def streams_in_groups(world):
    """A stream used inside a group: C queues the group's operations on it only at group_end,
    so Python keeps the stream (a temporary one too) and the buffers until then, and refuses
    to destroy it meanwhile; a synchronize inside the group drops no hold."""
    n = world.size
    xs = [np.full(1000, float(i)) for i in range(3)]
    with tutti.group():
        world.all_reduce(xs[0], stream=tutti.Stream())  # dropped at once by the caller
        gc.collect()
    s = tutti.Stream()
    tutti.group_start()
    world.all_reduce(xs[1], stream=s)
    world.all_reduce(xs[2], stream=s)
    raises(tutti.InvalidUsageError, s.destroy, match="open group")
    s.synchronize()  # nothing queued yet
    eq(len(s._keep), 0, "holds before group_end (taken at group_end)")
    tutti.group_end()
    eq(len(s._keep), 2, "holds after group_end, until the stream is synchronized")
    s.synchronize()
    eq(len(s._keep), 0, "holds after synchronize")
    for i, x in enumerate(xs):
        eq(x, np.full(1000, float(i) * n), "group all_reduce %d on a stream" % i)
    # Events release what they follow: a loop that only waits on events does not grow.
    with tutti.Event() as e:
        for i in range(5):
            world.all_reduce(np.ones(100), stream=s)
            e.record(world, s)
            e.wait()
        eq(len(s._keep), 0, "holds after waiting on the last event")
    s.destroy()


@case
def stream_left_on_error(world):
    """A `with` body that raises leaves a stream whose operation cannot complete (an
    all_reduce only rank 0 issues) at once, instead of waiting for TUTTI_TIMEOUT_MS; the
    communicator's abort ends the operation, and the stream with it."""
    import time
    c = world.split(0)
    t0 = time.monotonic()
    try:
        with tutti.Stream() as s:
            if c.rank == 0:
                c.all_reduce(np.ones(8), stream=s)
            raise KeyError("the body failed")
    except KeyError:
        pass
    took = time.monotonic() - t0
    if took > 5:
        raise AssertionError("leaving the with block took %.1f s" % took)
    parked = any(p is s for p in tutti._group._parked)
    eq(parked, c.rank == 0, "the busy stream is parked, an idle one destroyed")
    world.all_reduce(np.ones(1))  # every rank has left its block
    c.abort()
    eq(any(p is s for p in tutti._group._parked), False, "reaped after the abort")
    eq(s._handle, None, "the parked stream destroyed")


@case
def dropped_registration(world):
    """A Registration dropped without deregister() deregisters itself: the library must not
    keep the registration of memory that is then freed."""
    x = np.ones(1 << 15)
    r = world.register(x)
    handle = r.handle
    del r
    gc.collect()
    lib = tutti._lib.lib()
    rc = lib.ncclCommDeregister(world.handle, handle)
    eq(rc, tutti.Result.INVALID_ARGUMENT, "deregistering the collected registration again")


@case
def unsafe_buffers(world):
    """Arrays whose bytes the library must not treat as numbers, even with dtype=: Python
    object pointers, and numbers in the other byte order."""
    raises(TypeError, world.all_reduce, np.empty(4, dtype=object), dtype="int64",
           match="Python objects")
    raises(TypeError, world.all_reduce, np.ones(4, dtype=">f4"), dtype="float32",
           match="byte order")
    raises(TypeError, world.all_reduce, np.ones(4, dtype=">f4"), match="byte order")
    big = memoryview(bytearray(16)).cast("B").cast("I")
    eq(big.format, "I", "a native memoryview is accepted")
    world.all_reduce(np.zeros(4, dtype="<f4"))  # this machine's order, said explicitly


@case
def int_ranges_and_pickling(world):
    """Values C takes as int are range-checked (ctypes would wrap them), and a TuttiError
    survives pickling (multiprocessing sends exceptions back that way)."""
    import pickle
    raises(ValueError, world.split, 2 ** 32 - 1, match="C int")
    raises(ValueError, world.split, 0, key=2 ** 31, match="C int")
    e = raises(tutti.InvalidArgumentError, world.all_reduce, np.ones(2), op=99)
    back = pickle.loads(pickle.dumps(e))
    eq((type(back), back.code, back.message, back.call, str(back)),
       (type(e), e.code, e.message, e.call, str(e)), "a pickled TuttiError")


@case
def async_error_message(world):
    """A failure that happens after its call returned reaches the exception with its reason:
    a count that differs on the last rank, on a nonblocking-style host stream."""
    c = world.split(0)
    n = 4 + (1 if c.rank == c.size - 1 else 0)
    with tutti.Stream() as s:
        c.all_reduce(np.ones(n), stream=s)
        e = raises(tutti.InvalidUsageError, s.synchronize)
        if "count mismatch" not in e.message:
            raise AssertionError("the stream's error lacks the failure's reason: %r" % e)
    world.all_reduce(np.ones(1))
    c.abort()


@case
def split_and_queries(world):
    n, r = world.size, world.rank
    sub = world.split(r % 2, key=-r)
    members = [q for q in range(n) if q % 2 == r % 2]
    eq(sub.size, len(members), "split size")
    eq(sub.rank, sorted(members, reverse=True).index(r), "split rank ordered by key")
    x = np.array([r], dtype=np.int64)
    sub.all_reduce(x)
    eq(int(x[0]), sum(members), "split all_reduce")
    sub.finalize()
    sub.destroy()
    sub.destroy()  # a second destroy does nothing
    # Rank 0 joins no communicator.
    other = world.split(None if r == 0 else 1)
    if r == 0:
        eq(other, None, "NOCOLOR split")
    else:
        eq(other.size, n - 1, "split without rank 0")
        other.destroy()


@case
def shrink(world):
    n, r = world.size, world.rank
    if n < 2:
        return
    if r == n - 1:
        return  # the excluded rank does not call shrink
    small = world.shrink([n - 1])
    eq(small.size, n - 1, "shrunk size")
    x = np.ones(3, dtype=np.uint64)
    small.all_reduce(x)
    eq(x, np.full(3, n - 1, dtype=np.uint64), "shrunk all_reduce")
    small.destroy()


@case
def grow(world):
    """ncclCommGrow: rank 0 makes the grow's id and starts a new process that joins as rank n;
    every rank (the new one too) then sums rank + 1 and checks it exactly."""
    import subprocess
    import sys
    n, r = world.size, world.rank
    uid = world.grow_id() if r == 0 else None
    child = None
    if r == 0:
        code = ("import sys, numpy as np, tutti\n"
                "n = int(sys.argv[1])\n"
                "c = tutti.Comm.join_grow(n + 1, bytes.fromhex(sys.argv[2]), n)\n"
                "x = np.full(5, n + 1, dtype=np.int64)\n"
                "c.all_reduce(x)\n"
                "want = (n + 1) * (n + 2) // 2\n"
                "c.destroy()\n"
                "sys.exit(0 if (x == want).all() and c is not None else 1)\n")
        child = subprocess.Popen([sys.executable, "-c", code, str(n), bytes(uid).hex()])
    big = world.grow(n + 1, uid)
    eq(big.size, n + 1, "grown size")
    eq(big.rank, r, "an existing rank keeps its rank")
    x = np.full(5, r + 1, dtype=np.int64)
    big.all_reduce(x)
    eq(x, np.full(5, (n + 1) * (n + 2) // 2, dtype=np.int64), "grown all_reduce")
    big.destroy()
    if child is not None:
        eq(child.wait(timeout=60), 0, "the new rank's exit status")
    raises(TypeError, world.grow, n + 1, "not an id")
    raises(TypeError, tutti.Comm.join_grow, n + 1, None, n)


@case
def revoke_abort(world):
    c = world.split(0)
    c.revoke()
    e = raises(tutti.TuttiError, c.all_reduce, np.ones(4))
    if not e.message:
        raise AssertionError("no ncclGetLastError text after revoke: %r" % e)
    c.destroy()
    c2 = world.split(0)
    c2.abort()
    raises(tutti.InvalidArgumentError, c2.all_reduce, np.ones(4), match="destroyed or aborted")
    eq(repr(c2), "<tutti.Comm destroyed>", "repr")


@case
def abort_while_blocked(world):
    """Another thread aborts a communicator while this one is blocked in it: ctypes releases
    the GIL during the call, so the abort runs and the blocked call raises in bounded time."""
    import threading
    import time
    c = world.split(0)
    if world.rank != 0:
        c.abort()
        return
    t = threading.Timer(0.3, c.abort)
    t.start()
    start = time.monotonic()
    raises(tutti.TuttiError, c.recv, np.zeros(4), 1)  # rank 1 never sends
    t.join()
    if time.monotonic() - start > 20:
        raise AssertionError("blocked recv took %.1f s to fail" % (time.monotonic() - start))
    eq(c.handle, None, "aborted handle")


@case
def premul_sum(world):
    n = world.size
    with world.premul_sum(0.5, "float32") as half:
        x = np.full(6, 4.0, dtype=np.float32)
        world.all_reduce(x, op=half)
        eq(x, np.full(6, 2.0 * n, dtype=np.float32), "premul 0.5")
    raises(tutti.InvalidArgumentError, world.all_reduce, np.ones(2, np.float32), op=half,
           match="PreMulSum operator was destroyed")
    with world.premul_sum(3, tutti.INT32) as three:
        y = np.ones(2, dtype=np.int32)
        world.reduce_scatter(np.ones(n, dtype=np.int32), y[:1], op=three)
        eq(int(y[0]), 3 * n, "premul int32 reduce_scatter")
        e = raises(tutti.InvalidArgumentError, world.all_reduce, np.ones(2), op=three)
        if "float64" not in e.message and "datatype" not in e.message:
            raise AssertionError("premul dtype mismatch message: %r" % e.message)


@case
def registration(world):
    n = world.size
    x = np.ones(1 << 15)
    with world.register(x):
        world.all_reduce(x)
    eq(x, np.full(1 << 15, float(n)), "registered all_reduce")
    w = tutti.zeros(1 << 16, "float32")
    w += 1
    with world.window_register(w):
        world.all_reduce(w)
    eq(w, np.full(1 << 16, float(n), dtype=np.float32), "window all_reduce")
    b = tutti.empty((2, 3), "bfloat16")
    eq((b.dtype, b.shape), (np.dtype(np.uint16), (2, 3)), "bfloat16 empty")
    before = tutti._memory.live_blocks()
    del w, b
    gc.collect()
    eq(tutti._memory.live_blocks(), before - 2, "ncclMemFree on collection")
    # A view keeps the block alive.
    v = tutti.empty(100, "int8")[10:20]
    gc.collect()
    v[:] = 1
    world.all_reduce(v)
    eq(v, np.full(10, n, dtype=np.int8), "view of ncclMemAlloc array")


@case
def argument_errors(world):
    n = world.size
    f = np.zeros(4, dtype=np.float32)
    raises(TypeError, world.all_reduce, np.zeros(4, dtype=np.int16), match="no NCCL datatype")
    raises(TypeError, world.all_reduce, np.zeros(4, dtype=np.complex64), match="dtype=")
    raises(TypeError, world.all_reduce, np.zeros(4, dtype=">f4"), match="byte order")
    raises(ValueError, world.all_reduce, np.zeros(4, dtype=np.float32)[::-1],
           match="C-contiguous")
    raises(ValueError, world.all_reduce, f, dtype="float128", match="unknown datatype")
    raises(ValueError, world.all_reduce, f, dtype=99, match="invalid datatype 99")
    raises(ValueError, world.all_reduce, f, dtype="float64", match="4-byte elements")
    raises(TypeError, world.all_reduce, f, np.zeros(4), match="float32 but recvbuf is float64")
    raises(ValueError, world.all_reduce, np.zeros((4, 4), np.float32)[:, 1],
           match="C-contiguous")
    raises(ValueError, world.all_reduce, f, np.zeros(3, np.float32), match="needs 4")
    raises(ValueError, world.all_reduce, f, b"\0" * 16, dtype="float32", match="writable")
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    raises(ValueError, world.all_reduce, ro, match="writable")
    raises(ValueError, world.all_gather, f, np.zeros(4 * n - 1, np.float32),
           match="needs %d" % (4 * n))
    raises(ValueError, world.reduce_scatter, np.zeros(n * 2 + 1, np.float32), f,
           match="not a multiple")
    raises(ValueError, world.broadcast, f, root=n, match="root %d out of range" % n)
    raises(ValueError, world.send, f, -1, match="peer -1 out of range")
    raises(TypeError, world.all_reduce, [1.0, 2.0], match="buffer protocol")
    # The vector variants check their layouts before C.
    raises(ValueError, world.all_gather_v, f, np.zeros(4 * n, np.float32), [4] * (n + 1),
           match="needs %d counts" % n)
    raises(ValueError, world.all_gather_v, f, np.zeros(4 * n - 1, np.float32), [4] * n,
           match="needs %d" % (4 * n))
    raises(ValueError, world.reduce_scatter_v, f, f, [1] * n, [0] * (n - 1) + [-1],
           match="must not be negative")
    raises(ValueError, world.reduce_scatter_v, np.zeros(n, np.float32), f, [2] * n,
           match="needs %d" % (2 * n))
    raises(TypeError, world.alltoall_v, f, [1.5] * n, f, [1] * n, match="must be an int")
    raises(ValueError, world.alltoall_v, np.zeros(n, np.float32), [1] * n,
           np.zeros(2 * n - 1, np.float32), [2] * n, match="needs %d" % (2 * n))
    raises(TypeError, world.all_reduce, f, op=1.5)
    raises(ValueError, world.all_reduce, f, op="median", match="unknown reduction op")
    raises(TypeError, tutti.Comm, 2, b"x" * 128, "0")
    raises(ValueError, tutti.UniqueId, b"short", match="128 bytes")
    raises(TypeError, tutti.Config, blockin=0)
    # Errors found by the C library carry its code, name and ncclGetLastError's text.
    e = raises(tutti.InvalidArgumentError, world.all_reduce, f, op=77)
    eq(e.code, 4, "error code")
    eq(e.code, tutti.Result.INVALID_ARGUMENT, "error code as Result")
    if "op 77" not in e.message or "ncclAllReduce" not in str(e):
        raise AssertionError("ncclGetLastError text missing: %r" % str(e))
    if not e.name:
        raise AssertionError("no ncclGetErrorString name")
    # Every argument error above was caught before C: the communicator still works.
    x = np.ones(2)
    world.all_reduce(x)
    eq(x, np.full(2, float(n)), "comm usable after argument errors")


def main():
    world = tutti.init_from_env()
    rank = world.rank
    failed = 0
    for fn in results:
        try:
            fn(world)
        except Exception:
            failed += 1
            print("rank %d: FAIL %s\n%s" % (rank, fn.__name__, traceback.format_exc()),
                  flush=True)
    world.destroy()
    print("rank %d: %d API cases, %d failed" % (rank, len(results), failed), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
