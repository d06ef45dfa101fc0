"""Finding and loading libtutti.so, and the ctypes prototypes of the C API.

The library is looked up once, on first use, in this order: the file named by TUTTI_LIBRARY;
a libtutti.so installed next to this package; the build tree of the repository this package
sits in (build/release, then build/debug); ctypes.util.find_library("tutti"). Every function
used by the bindings gets its argument and result types here, so that no call elsewhere can
pass a Python int where C expects a pointer.
"""

import ctypes
import ctypes.util
import os
import threading

NCCL_UNIQUE_ID_BYTES = 128
NCCL_CONFIG_UNDEF_INT = -2147483648
NCCL_CONFIG_MAGIC = 0xCAFEBEEF
NCCL_VERSION_CODE = 22809


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    """ncclConfig_t (ncclConfig_v22800), field for field."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("cgaClusterSize", ctypes.c_int),
        ("minCTAs", ctypes.c_int),
        ("maxCTAs", ctypes.c_int),
        ("netName", ctypes.c_char_p),
        ("splitShare", ctypes.c_int),
        ("trafficClass", ctypes.c_int),
        ("commName", ctypes.c_char_p),
        ("collnetEnable", ctypes.c_int),
        ("CTAPolicy", ctypes.c_int),
        ("shrinkShare", ctypes.c_int),
        ("nvlsCTAs", ctypes.c_int),
        ("nChannelsPerNetPeer", ctypes.c_int),
        ("nvlinkCentricSched", ctypes.c_int),
    ]

    INT_FIELDS = ("blocking", "cgaClusterSize", "minCTAs", "maxCTAs", "splitShare",
                  "trafficClass", "collnetEnable", "CTAPolicy", "shrinkShare", "nvlsCTAs",
                  "nChannelsPerNetPeer", "nvlinkCentricSched")

    @classmethod
    def initializer(cls):
        """NCCL_CONFIG_INITIALIZER: every field unset."""
        c = cls()
        c.size = ctypes.sizeof(cls)
        c.magic = NCCL_CONFIG_MAGIC
        c.version = NCCL_VERSION_CODE
        for name in cls.INT_FIELDS:
            setattr(c, name, NCCL_CONFIG_UNDEF_INT)
        c.netName = None
        c.commName = None
        return c


class SimInfoStruct(ctypes.Structure):
    """ncclSimInfo_t (ncclSimInfo_v22200)."""

    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint),
                ("version", ctypes.c_uint), ("estimatedTime", ctypes.c_float)]

    @classmethod
    def initializer(cls):
        """NCCL_SIM_INFO_INITIALIZER."""
        return cls(ctypes.sizeof(cls), 0x74685283, NCCL_VERSION_CODE, -1.0)


_p = ctypes.c_void_p
_i = ctypes.c_int
_sz = ctypes.c_size_t
_res = ctypes.c_int  # ncclResult_t

# name: (result type, argument types)
_PROTOTYPES = {
    "ncclGetVersion": (_res, [ctypes.POINTER(_i)]),
    "ncclGetErrorString": (ctypes.c_char_p, [_res]),
    "ncclGetLastError": (ctypes.c_char_p, [_p]),
    "ncclGetUniqueId": (_res, [ctypes.POINTER(UniqueIdStruct)]),
    "ncclCommInitRank": (_res, [ctypes.POINTER(_p), _i, UniqueIdStruct, _i]),
    "ncclCommInitRankConfig": (_res, [ctypes.POINTER(_p), _i, UniqueIdStruct, _i,
                                      ctypes.POINTER(ConfigStruct)]),
    "ncclCommInitRankScalable": (_res, [ctypes.POINTER(_p), _i, _i, _i,
                                        ctypes.POINTER(UniqueIdStruct),
                                        ctypes.POINTER(ConfigStruct)]),
    "ncclCommInitAll": (_res, [ctypes.POINTER(_p), _i, ctypes.POINTER(_i)]),
    "ncclGroupSimulateEnd": (_res, [ctypes.POINTER(SimInfoStruct)]),
    "tuttiCommInitFromEnv": (_res, [ctypes.POINTER(_p)]),
    "tuttiVersionString": (ctypes.c_char_p, []),
    "ncclCommFinalize": (_res, [_p]),
    "ncclCommDestroy": (_res, [_p]),
    "ncclCommAbort": (_res, [_p]),
    "ncclCommRevoke": (_res, [_p, _i]),
    "ncclCommSplit": (_res, [_p, _i, _i, ctypes.POINTER(_p), ctypes.POINTER(ConfigStruct)]),
    "ncclCommShrink": (_res, [_p, ctypes.POINTER(_i), _i, ctypes.POINTER(_p),
                              ctypes.POINTER(ConfigStruct), _i]),
    "ncclCommGetUniqueId": (_res, [_p, ctypes.POINTER(UniqueIdStruct)]),
    "ncclCommGrow": (_res, [_p, _i, ctypes.POINTER(UniqueIdStruct), _i, ctypes.POINTER(_p),
                            ctypes.POINTER(ConfigStruct)]),
    "ncclCommGetAsyncError": (_res, [_p, ctypes.POINTER(_res)]),
    "ncclCommCount": (_res, [_p, ctypes.POINTER(_i)]),
    "ncclCommCuDevice": (_res, [_p, ctypes.POINTER(_i)]),
    "ncclCommUserRank": (_res, [_p, ctypes.POINTER(_i)]),
    "ncclCommRegister": (_res, [_p, _p, _sz, ctypes.POINTER(_p)]),
    "ncclCommDeregister": (_res, [_p, _p]),
    "ncclCommWindowRegister": (_res, [_p, _p, _sz, ctypes.POINTER(_p), _i]),
    "ncclCommWindowDeregister": (_res, [_p, _p]),
    "ncclMemAlloc": (_res, [ctypes.POINTER(_p), _sz]),
    "ncclMemFree": (_res, [_p]),
    "tuttiMemAllocHost": (_res, [ctypes.POINTER(_p), _sz]),
    "ncclRedOpCreatePreMulSum": (_res, [ctypes.POINTER(_i), _p, _i, _i, _p]),
    "ncclRedOpDestroy": (_res, [_i, _p]),
    "ncclReduce": (_res, [_p, _p, _sz, _i, _i, _i, _p, _p]),
    "ncclBroadcast": (_res, [_p, _p, _sz, _i, _i, _p, _p]),
    "ncclAllReduce": (_res, [_p, _p, _sz, _i, _i, _p, _p]),
    "ncclReduceScatter": (_res, [_p, _p, _sz, _i, _i, _p, _p]),
    "ncclAllGather": (_res, [_p, _p, _sz, _i, _p, _p]),
    "ncclAlltoAll": (_res, [_p, _p, _sz, _i, _p, _p]),
    "ncclGather": (_res, [_p, _p, _sz, _i, _i, _p, _p]),
    "ncclScatter": (_res, [_p, _p, _sz, _i, _i, _p, _p]),
    "ncclSend": (_res, [_p, _sz, _i, _i, _p, _p]),
    "tuttiAlltoAllV": (_res, [_p, _p, _p, _p, _p, _p, _i, _p, _p]),
    "tuttiAllGatherV": (_res, [_p, _p, _p, _p, _i, _p, _p]),
    "tuttiReduceScatterV": (_res, [_p, _p, _p, _p, _i, _i, _p, _p]),
    "ncclRecv": (_res, [_p, _sz, _i, _i, _p, _p]),
    "ncclGroupStart": (_res, []),
    "ncclGroupEnd": (_res, []),
    "tuttiStreamCreate": (_res, [ctypes.POINTER(_p)]),
    "tuttiStreamDestroy": (_res, [_p]),
    "tuttiStreamSynchronize": (_res, [_p]),
    "tuttiStreamQuery": (_res, [_p]),
    "tuttiEventCreate": (_res, [ctypes.POINTER(_p)]),
    "tuttiEventDestroy": (_res, [_p]),
    "tuttiEventRecord": (_res, [_p, _p, _p]),
    "tuttiEventQuery": (_res, [_p]),
    "tuttiEventSynchronize": (_res, [_p]),
    "tuttiEventWait": (_res, [_p, ctypes.c_int64]),
    "tuttiCommDump": (_res, [_p]),
}

_lock = threading.Lock()
_lib = None
_path = None


def _candidates():
    env = os.environ.get("TUTTI_LIBRARY")
    if env:
        # An explicit choice is final: a wrong path must fail, not fall back silently.
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libtutti.so", "libtutti.so.0"):
        yield os.path.join(here, name)
    repo = os.path.dirname(os.path.dirname(here))
    for preset in ("release", "debug"):
        yield os.path.join(repo, "build", preset, "libtutti.so")
    found = ctypes.util.find_library("tutti")
    if found:
        yield found


def library_path():
    """The path of the libtutti.so in use (loading it if need be)."""
    lib()
    return _path


def lib():
    """The loaded library, with every prototype set."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for cand in _candidates():
            explicit = bool(os.environ.get("TUTTI_LIBRARY"))
            if not explicit and os.sep in cand and not os.path.exists(cand):
                tried.append(cand + " (absent)")
                continue
            try:
                handle = ctypes.CDLL(cand)
            except OSError as e:
                tried.append("%s (%s)" % (cand, e))
                if explicit:
                    break
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib, _path = handle, cand
            return _lib
        raise ImportError("tutti: cannot load libtutti.so; tried: " + "; ".join(tried) +
                          ". Set TUTTI_LIBRARY to its path, or build it with "
                          "'cmake --preset release && cmake --build --preset release'.")
