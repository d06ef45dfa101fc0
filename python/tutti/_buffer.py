"""Turning Python buffers into (address, bytes, datatype) for the C calls, with the checks.

Accepted: numpy arrays and any object with the buffer protocol (memoryview, bytearray,
array.array, bytes for inputs). A buffer must be C-contiguous; an output must be writable. The
datatype comes from the buffer's element type unless the call names one with `dtype=`, which
must have the buffer's element size (byte buffers may hold any datatype). The returned Buf keeps
the object (and, for non-numpy objects, a memoryview holding its export) alive, so that a
bytearray cannot be resized under an operation that is still queued.
"""

import ctypes

from . import _types

try:
    import numpy as _np
except ImportError:  # numpy is optional for buffer-protocol objects
    _np = None


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _address_of(view):
    """The address of a contiguous memoryview's first byte (valid while `view` lives)."""
    pb = _PyBuffer()
    if _get_buffer(view, ctypes.byref(pb), 0) != 0:  # PyBUF_SIMPLE
        raise BufferError("cannot get the address of the buffer")
    try:
        return pb.buf or 0
    finally:
        _release_buffer(ctypes.byref(pb))


class Buf:
    """One resolved buffer: address, bytes, natural datatype (None when it has none), element
    size, and the objects that must stay alive while an operation uses it."""

    __slots__ = ("name", "ptr", "nbytes", "natural", "itemsize", "keep", "dtype", "count",
                 "why")

    def __init__(self, name, ptr, nbytes, natural, itemsize, keep, why=None):
        self.name, self.ptr, self.nbytes = name, ptr, nbytes
        self.natural, self.itemsize, self.keep = natural, itemsize, keep
        self.why = why  # why there is no natural datatype, when there is none
        self.dtype = None
        self.count = 0


def resolve(obj, name, writable):
    """A Buf for `obj` (the argument `name` of the call); raises TypeError or ValueError."""
    if _np is not None and isinstance(obj, _np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError("%s must be C-contiguous (got an array with strides %s; pass "
                             "numpy.ascontiguousarray(...))" % (name, obj.strides))
        if writable and not obj.flags.writeable:
            raise ValueError("%s must be writable (it receives the result), got a read-only "
                             "array" % name)
        if obj.dtype.hasobject:  # Python object pointers: never numbers to add or overwrite
            raise TypeError("%s holds Python objects (dtype %s); pass an array of numbers" %
                            (name, obj.dtype))
        if not obj.dtype.isnative:  # the library would read the bytes in its own order
            raise TypeError("%s is not in this machine's byte order (dtype %s); convert it "
                            "with .astype(%r)" % (name, obj.dtype,
                                                  obj.dtype.newbyteorder("=").str))
        why = None
        try:
            natural = _types.from_numpy_dtype(obj.dtype)
        except TypeError as e:  # still usable as raw bytes with an explicit dtype=
            natural, why = None, str(e)
        ptr = obj.__array_interface__["data"][0]
        return Buf(name, ptr, obj.nbytes, natural, obj.dtype.itemsize, obj, why)
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError("%s must be a numpy array or an object with the buffer protocol "
                        "(memoryview, bytearray, array.array), not %s" %
                        (name, type(obj).__name__)) from None
    if not view.c_contiguous:
        raise ValueError("%s must be a C-contiguous buffer" % name)
    if writable and view.readonly:
        raise ValueError("%s must be writable (it receives the result), got a read-only %s" %
                         (name, type(obj).__name__))
    if "O" in view.format:
        raise TypeError("%s holds Python objects (format %r); pass a buffer of numbers" %
                        (name, view.format))
    if view.itemsize > 1 and _types.foreign_order(view.format):
        raise TypeError("%s is not in this machine's byte order (format %r)" %
                        (name, view.format))
    natural = _types.from_format(view.format, view.itemsize)
    return Buf(name, _address_of(view), view.nbytes, natural, view.itemsize, (obj, view))


def assign_dtype(dtype, bufs):
    """Gives every Buf in `bufs` one datatype and its element count: `dtype` when given (it
    must match each buffer's element size, byte buffers excepted), else the first buffer's
    natural datatype, which every other buffer must share. Returns the DataType."""
    if dtype is not None:
        dt = _types.as_datatype(dtype)
        size = _types.ITEMSIZE[dt]
        for b in bufs:
            if b.itemsize != size and b.itemsize != 1:
                raise ValueError("%s has %d-byte elements but dtype %s has %d-byte elements" %
                                 (b.name, b.itemsize, dt.name.lower(), size))
            if b.nbytes % size:
                raise ValueError("%s holds %d bytes, not a whole number of %s elements" %
                                 (b.name, b.nbytes, dt.name.lower()))
    else:
        first = bufs[0]
        if first.natural is None:
            raise TypeError("%s: %s" % (first.name, first.why) if first.why else
                            "%s's element type has no NCCL datatype; pass dtype= (int8, uint8, "
                            "int32, uint32, int64, uint64, float16, float32, float64, "
                            "bfloat16, float8_e4m3, float8_e5m2)" % first.name)
        dt = first.natural
        for b in bufs[1:]:
            if b.natural != dt:
                raise TypeError("%s is %s but %s is %s; use one datatype (or pass dtype=)" %
                                (first.name, dt.name.lower(), b.name,
                                 b.natural.name.lower() if b.natural is not None
                                 else "of an unsupported type"))
        size = _types.ITEMSIZE[dt]
    for b in bufs:
        b.dtype = dt
        b.count = b.nbytes // size
    return dt
