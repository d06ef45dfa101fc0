"""numpy arrays over Tutti's shareable host memory, freed with ncclMemFree when the array is
collected.

The memory comes from tuttiMemAllocHost, which is what ncclMemAlloc gives a thread without a
current CUDA device (with one, ncclMemAlloc gives device memory, as NCCL's does, which numpy
cannot read). It is shareable between the ranks of a host, so collectives on it take the
single-copy paths without registration. The array's base is a _MemBlock owning the
allocation; numpy keeps it alive as long as any view of the array exists.
"""

import ctypes
import os
import threading

from . import _errors, _lib, _types

_live = 0
_live_lock = threading.Lock()


def live_blocks():
    """How many memory blocks made by empty()/zeros() are not freed yet (for tests)."""
    return _live


class _MemBlock:
    def __init__(self, nbytes, shape, storage):
        global _live
        ptr = ctypes.c_void_p()
        # Size 0 is refused; an empty array still owns one byte.
        _errors.check(_lib.lib().tuttiMemAllocHost(ctypes.byref(ptr), max(nbytes, 1)),
                      "tuttiMemAllocHost")
        self.ptr = ptr.value
        self.pid = os.getpid()
        self.__array_interface__ = {"shape": shape, "typestr": storage.str,
                                    "data": (self.ptr, False), "version": 3}
        with _live_lock:
            _live += 1

    def __del__(self):
        global _live
        if not self.ptr:
            return
        ptr, self.ptr = self.ptr, None
        if os.getpid() != self.pid:
            # A child of fork() (a DataLoader worker) shares the pages with its parent and must
            # not call Tutti (docs/semantics.md, "fork()"): its mapping ends with the process.
            return
        try:
            _lib.lib().ncclMemFree(ptr)
        except Exception:  # at interpreter exit the module may already be torn down
            return
        with _live_lock:
            _live -= 1


def empty(shape, dtype="float32"):
    """An uninitialised numpy array of `shape` over shareable host memory. dtype is a numpy dtype
    or a tutti datatype name; bfloat16 and fp8 give uint16/uint8 arrays holding their bits."""
    import numpy as np

    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError("negative dimension in shape %s" % (shape,))
    dt = _types.as_datatype(dtype)
    storage = np.dtype(_types.STORAGE[dt])
    nbytes = storage.itemsize
    for n in shape:
        nbytes *= n
    block = _MemBlock(nbytes, shape, storage)
    return np.asarray(block)


def zeros(shape, dtype="float32"):
    """empty(), filled with zero bits."""
    a = empty(shape, dtype)
    a.fill(0)
    return a
