"""The bindings in one process, without a launcher: unique ids, datatype and operator mapping,
scalar encodings against the independent reference, the ncclConfig_t layout, library lookup,
a one-rank communicator (every collective, a stream, errors), and import without numpy.
"""

import ctypes
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np

import reference as ref
import tutti
from tutti import DataType as D
from tutti import _lib, _types

cases = []


def case(fn):
    cases.append(fn)
    return fn


def eq(got, want, what):
    ok = np.array_equal(got, want) if isinstance(got, np.ndarray) else got == want
    if not ok:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


def raises(exc, fn, *args, match=None, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        if match is not None and match not in str(e):
            raise AssertionError("%r lacks %r" % (str(e), match))
        return e
    raise AssertionError("did not raise %s" % exc.__name__)


@case
def unique_ids():
    a, b = tutti.get_unique_id(), tutti.get_unique_id()
    eq(len(bytes(a)), 128, "id length")
    eq(a == b, False, "two ids differ")
    eq(tutti.UniqueId(bytes(a)), a, "bytes round trip")
    eq(tutti.UniqueId(bytearray(bytes(a))), a, "bytearray round trip")
    eq(pickle.loads(pickle.dumps(a)), a, "pickle round trip")


@case
def datatypes():
    for name, dt in [("int8", D.INT8), ("char", D.INT8), ("uint8", D.UINT8), ("int32", D.INT32),
                     ("uint32", D.UINT32), ("int64", D.INT64), ("uint64", D.UINT64),
                     ("float16", D.FLOAT16), ("half", D.FLOAT16), ("float32", D.FLOAT32),
                     ("float64", D.FLOAT64), ("double", D.FLOAT64), ("bfloat16", D.BFLOAT16),
                     ("float8_e4m3", D.FLOAT8_E4M3), ("float8_e5m2", D.FLOAT8_E5M2),
                     ("E5M2", D.FLOAT8_E5M2)]:
        eq(_types.as_datatype(name), dt, "name " + name)
    for dt in D:
        eq(_types.as_datatype(int(dt)), dt, "int %d" % dt)
        if dt not in ref.NEEDS_DTYPE:
            eq(_types.as_datatype(np.dtype(ref.STORAGE[dt])), dt, "numpy %s" % dt.name)
            eq(_types.as_datatype(ref.STORAGE[dt]), dt, "numpy type %s" % dt.name)
    # The C enumeration's values (nccl.h).
    eq([int(d) for d in D], list(range(12)), "ncclDataType_t values")
    eq([int(o) for o in tutti.RedOp], list(range(5)), "ncclRedOp_t values")
    raises(TypeError, _types.as_datatype, np.int16, match="no NCCL datatype")
    raises(TypeError, _types.as_datatype, np.bool_, match="no NCCL datatype")
    raises(ValueError, _types.as_datatype, 12, match="invalid datatype 12")
    raises(ValueError, _types.as_datatype, "float8", match="unknown datatype name")
    raises(TypeError, _types.as_datatype, True)
    eq(_types.from_format("<l", 8), D.INT64, "format <l")
    eq(_types.from_format("?", 1), None, "format ?")
    eq(_types.from_format(">f", 4), None, "big-endian format")
    eq(_types.from_format("=f", 4), D.FLOAT32, "native format")


@case
def scalar_encodings():
    # Every datatype's encoding of a few values, against reference.encode's own definition.
    for dt in D:
        vals = [0, 1, 2, 3, 100] if dt not in ref.FLOATS else \
            [0.0, -0.0, 1.0, 0.5, -2.0, 1 / 3, 448.0, 1e6, -1e6, 3.0e-5]
        for v in vals:
            want = ref.encode(np.array([v]), dt).tobytes()
            eq(_types.encode_scalar(v, dt), want, "encode %r as %s" % (v, dt.name))
    # fp8 saturates: infinity and anything past the largest finite value become it
    for dt in (D.FLOAT8_E4M3, D.FLOAT8_E5M2):
        top = ref.FP8_MAXCODE[dt]
        for v, sign in [(math.inf, 0), (-math.inf, 0x80), (1e30, 0), (-1e30, 0x80)]:
            eq(_types.encode_scalar(v, dt), bytes([sign | top]), "encode %r as %s" % (v, dt.name))
    eq(_types.encode_scalar(b"\x01\x02", "bfloat16"), b"\x01\x02", "raw scalar bytes")
    raises(ValueError, _types.encode_scalar, b"\x01", "bfloat16", match="2 long")
    raises(ValueError, _types.encode_scalar, 300, "uint8", match="out of range")
    raises(TypeError, _types.encode_scalar, 1.5, "int32", match="must be an int")


@case
def config_layout():
    # ncclConfig_t's size and every field's offset, as the C compiler sees include/nccl.h.
    size = ctypes.sizeof(_lib.ConfigStruct)
    fields = [f for f, _ in _lib.ConfigStruct._fields_]
    cc = shutil.which("cc")
    if cc:
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "layout.c")
            with open(src, "w") as f:
                f.write('#include <stdio.h>\n#include <stddef.h>\n#include "nccl.h"\n'
                        "int main(void) { printf(\"%zu\", sizeof(ncclConfig_t));\n" +
                        "".join('printf(" %%zu", offsetof(ncclConfig_t, %s));\n' % n
                                for n in fields) + "return 0; }\n")
            inc = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__)))), "include")
            subprocess.run([cc, "-I", inc, src, "-o", os.path.join(tmp, "layout")], check=True)
            out = subprocess.run([os.path.join(tmp, "layout")], capture_output=True,
                                 text=True, check=True).stdout.split()
        want = [int(v) for v in out]
        got = [size] + [getattr(_lib.ConfigStruct, n).offset for n in fields]
        eq(got, want, "ncclConfig_t size and offsets (ctypes vs C)")
    c = tutti.Config(blocking=False, comm_name="x", split_share=1)._struct()
    eq((c.size, c.magic, c.version), (size, 0xCAFEBEEF, 22809), "config header")
    eq((c.blocking, c.splitShare, c.minCTAs), (0, 1, -2 ** 31), "config fields")
    eq(c.commName, b"x", "commName")
    raises(TypeError, tutti.Config, nope=1, match="unknown Config field")


@case
def library_lookup():
    eq(os.path.realpath(tutti.library_path()), os.path.realpath(os.environ["TUTTI_LIBRARY"])
       if "TUTTI_LIBRARY" in os.environ else os.path.realpath(tutti.library_path()),
       "TUTTI_LIBRARY is used")
    eq(tutti.version(), tutti.__version__, "library and package versions")
    eq(tutti.nccl_version(), 22809, "ncclGetVersion")
    env = dict(os.environ, TUTTI_LIBRARY="/nonexistent/libtutti.so")
    p = subprocess.run([sys.executable, "-c", "import tutti; tutti.get_unique_id()"], env=env,
                       capture_output=True, text=True)
    if p.returncode == 0 or "TUTTI_LIBRARY" not in p.stderr or "/nonexistent" not in p.stderr:
        raise AssertionError("a bad TUTTI_LIBRARY must fail clearly: %r" % p.stderr)
    # Without TUTTI_LIBRARY the source tree's package finds build/release.
    env = {k: v for k, v in os.environ.items() if k != "TUTTI_LIBRARY"}
    p = subprocess.run([sys.executable, "-c", "import tutti; print(tutti.library_path())"],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip().endswith("libtutti.so"):
        raise AssertionError("lookup without TUTTI_LIBRARY: %r %r" % (p.stdout, p.stderr))


@case
def without_numpy():
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import array, tutti\n"
            "c = tutti.Comm.from_env()\n"
            "a = array.array('f', [1.5, 2.5]); c.all_reduce(a, op='max')\n"
            "b = bytearray(b'ab'); c.broadcast(b, root=0)\n"
            "assert list(a) == [1.5, 2.5] and b == b'ab'\n"
            "c.destroy(); print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if p.returncode != 0 or p.stdout.strip() != "ok":
        raise AssertionError("bindings without numpy: %r" % p.stderr)


@case
def one_rank():
    for var in ("RANK", "WORLD_SIZE", "NCCL_COMM_ID"):
        os.environ.pop(var, None)
    with tutti.Comm.from_env() as c:
        eq((c.rank, c.size, c.device), (0, 1, -1), "one-rank queries")
        x = np.arange(6, dtype=np.float64)
        y = np.zeros(6)
        c.all_reduce(x, y, tutti.AVG)
        eq(y, x, "avg over one rank")
        c.broadcast(x, y, root=0)
        c.reduce(x, y, tutti.MIN)
        c.all_gather(x, y)
        c.reduce_scatter(x, y)
        c.alltoall(x, y)
        c.gather(x, y)
        c.scatter(x, y)
        eq(y, x, "one-rank collectives copy")
        with tutti.group():
            c.send(x[:3], 0)
            c.recv(y[3:], 0)
        eq(y[3:], x[:3], "send to self")
        # A group whose body raises runs none of its operations, as in C when a call inside
        # fails: here the error is Python's own (an object array), which C never sees.
        y = np.zeros(6)
        try:
            with tutti.group():
                c.all_reduce(x, y)
                c.all_reduce(np.array([object()] * 6))
        except TypeError:
            pass
        else:
            raise AssertionError("an object array was accepted")
        eq(y, np.zeros(6), "the operation before the error in a group (none runs)")
        eq(tutti._group._group.depth, 0, "group depth after a discarded group")

        def nested():  # an inner group raises and the outer one goes on: nothing runs
            with tutti.group():
                c.all_reduce(x, y)
                try:
                    with tutti.group():
                        c.all_reduce(np.array([object()] * 6))
                except TypeError:
                    pass
        raises(tutti.InvalidUsageError, nested, match="inner tutti.group")
        eq(y, np.zeros(6), "an outer group's operation after an inner one raised (none runs)")
        eq(tutti._group._group.depth, 0, "group depth after a discarded nested group")
        c.all_reduce(x, y)
        eq(y, x, "a call after a discarded group")
        with tutti.Stream() as s:
            z = np.ones(1000, dtype=np.float16)
            c.all_reduce(z, op=tutti.PROD, stream=s)
            s.synchronize()
            eq(z, np.ones(1000, dtype=np.float16), "stream on one rank")
        uid = tutti.get_unique_id()
        with tutti.Comm(1, uid, 0) as c1:
            eq(c1.size, 1, "explicit one-rank comm")
        raises(ValueError, tutti.Comm, 1, b"\0" * 12, 0, match="128 bytes")
    raises(tutti.InvalidArgumentError, c.all_reduce, x, match="destroyed")
    # The rank out of range is the C library's check: its text reaches the exception.
    e = raises(tutti.InvalidArgumentError, tutti.Comm, 2, tutti.get_unique_id(), 5)
    if "5" not in e.message:
        raise AssertionError("ncclCommInitRank message: %r" % e.message)


@case
def init_all_and_simulate():
    comms = tutti.Comm.init_all(2)
    eq([(c.rank, c.size) for c in comms], [(0, 2), (1, 2)], "init_all ranks")
    xs = [np.full(4, float(i + 1)) for i in range(2)]
    with tutti.group():  # one thread drives both ranks
        for c, x in zip(comms, xs):
            c.all_reduce(x)
    eq(xs[0], np.full(4, 3.0), "init_all all_reduce")
    tutti.group_start()
    comms[0].all_reduce(xs[0])
    comms[1].all_reduce(xs[1])
    t = tutti.group_simulate_end()
    if not t > 0:
        raise AssertionError("simulated time %r" % t)
    eq(xs[0], np.full(4, 3.0), "simulate runs nothing")
    for c in comms:
        c.destroy()
    raises(tutti.InvalidUsageError, tutti.group_simulate_end, match="without a matching")


@case
def memory_across_fork():
    """A child of fork() that drops an inherited tutti.empty array (a DataLoader worker's
    garbage collector would) leaves the parent's data alone."""
    import gc

    a = tutti.empty(3 * 4096 // 4, "int32")
    a[:] = np.arange(a.size, dtype=np.int32) * 7 + 3
    want = a.copy()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            del a
            gc.collect()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    eq(os.waitstatus_to_exitcode(status), 0, "child's exit")
    eq(a, want, "the parent's array after the child dropped its copy")


def main():
    failed = 0
    for fn in cases:
        try:
            fn()
        except Exception:
            failed += 1
            print("FAIL %s\n%s" % (fn.__name__, traceback.format_exc()), flush=True)
    print("%d local cases, %d failed" % (len(cases), failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
