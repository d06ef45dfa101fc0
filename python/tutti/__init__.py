"""Python bindings for Tutti, a collective communications library with NCCL's API.

    import numpy as np, tutti
    comm = tutti.Comm.from_env()          # under: tutti-run -n 4 python3 prog.py
    x = np.full(4, comm.rank, dtype=np.float32)
    comm.all_reduce(x)                    # in place; returns when done on this rank
    comm.destroy()

Pure Python over ctypes; numpy is needed only for tutti.empty/zeros. docs/python.md has the
whole API and how it maps to NCCL's calls.
"""

from ._errors import (InProgressError, InternalError, InvalidArgumentError,
                      InvalidUsageError, RemoteError, Result, SystemCallError, TuttiError,
                      UnhandledCudaError)
from ._types import DataType, RedOp
from ._ids import Config, UniqueId, get_unique_id
from ._group import Event, Stream, group, group_end, group_simulate_end, group_start
from ._comm import (NCCL_SPLIT_NOCOLOR, REVOKE_DEFAULT, SHRINK_ABORT, SHRINK_DEFAULT,
                    WIN_COLL_SYMMETRIC, WIN_DEFAULT, Comm, PreMulSum, Registration, Window,
                    init_from_env)
from ._memory import empty, zeros
from ._lib import library_path
from ._launch import launch_env

SUM, PROD, MAX, MIN, AVG = RedOp.SUM, RedOp.PROD, RedOp.MAX, RedOp.MIN, RedOp.AVG
(INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16, FLOAT8_E4M3,
 FLOAT8_E5M2) = tuple(DataType)

__all__ = [
    "TuttiError", "UnhandledCudaError", "SystemCallError", "InternalError",
    "InvalidArgumentError", "InvalidUsageError", "RemoteError", "InProgressError", "Result",
    "DataType", "RedOp", "Comm", "Config", "PreMulSum", "Registration", "Window", "Stream",
    "Event",
    "UniqueId", "get_unique_id", "group", "group_start", "group_end", "group_simulate_end",
    "init_from_env", "launch_env",
    "empty", "zeros", "library_path", "nccl_version", "version",
    "SUM", "PROD", "MAX", "MIN", "AVG",
    "NCCL_SPLIT_NOCOLOR", "WIN_DEFAULT", "WIN_COLL_SYMMETRIC", "SHRINK_DEFAULT", "SHRINK_ABORT",
    "REVOKE_DEFAULT",
]

__version__ = "0.1.0"


def version():
    """tuttiVersionString: the C library's version, e.g. "0.1.0"."""
    from . import _lib
    return _lib.lib().tuttiVersionString().decode()


def nccl_version():
    """ncclGetVersion: the NCCL API version code the library implements (22809 for 2.28.9)."""
    import ctypes
    from . import _errors, _lib
    v = ctypes.c_int()
    _errors.check(_lib.lib().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value
