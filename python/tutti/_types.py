"""NCCL datatypes and reduction operators, and how Python names and numpy dtypes map to them.

numpy has no bfloat16 or fp8 dtypes, so those travel as raw bits: a uint16 array holds
bfloat16 values and a uint8 array holds fp8 values, and the call names the real datatype with
`dtype=` ("bfloat16", "float8_e4m3", "float8_e5m2"). ml_dtypes' bfloat16/float8 numpy dtypes
are recognised by name when present. Scalars for ncclRedOpCreatePreMulSum are encoded here in
each datatype's own representation, rounding to nearest even (fp8 saturating, as NCCL does).
"""

import enum
import math
import struct
import sys


class DataType(enum.IntEnum):
    """ncclDataType_t."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11


class RedOp(enum.IntEnum):
    """ncclRedOp_t's built-in operators (PreMulSum operators are made by Comm.premul_sum)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


# Bytes per element, and the numpy dtype name that stores the datatype's bits.
ITEMSIZE = {DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
            DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4,
            DataType.FLOAT64: 8, DataType.BFLOAT16: 2, DataType.FLOAT8_E4M3: 1,
            DataType.FLOAT8_E5M2: 1}
STORAGE = {DataType.INT8: "int8", DataType.UINT8: "uint8", DataType.INT32: "int32",
           DataType.UINT32: "uint32", DataType.INT64: "int64", DataType.UINT64: "uint64",
           DataType.FLOAT16: "float16", DataType.FLOAT32: "float32",
           DataType.FLOAT64: "float64", DataType.BFLOAT16: "uint16",
           DataType.FLOAT8_E4M3: "uint8", DataType.FLOAT8_E5M2: "uint8"}

_NAMES = {
    "int8": DataType.INT8, "char": DataType.INT8, "uint8": DataType.UINT8,
    "int32": DataType.INT32, "int": DataType.INT32, "uint32": DataType.UINT32,
    "int64": DataType.INT64, "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16, "half": DataType.FLOAT16, "fp16": DataType.FLOAT16,
    "float32": DataType.FLOAT32, "float": DataType.FLOAT32, "fp32": DataType.FLOAT32,
    "float64": DataType.FLOAT64, "double": DataType.FLOAT64, "fp64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16, "bf16": DataType.BFLOAT16,
    "float8_e4m3": DataType.FLOAT8_E4M3, "float8_e4m3fn": DataType.FLOAT8_E4M3,
    "fp8_e4m3": DataType.FLOAT8_E4M3, "e4m3": DataType.FLOAT8_E4M3,
    "float8_e5m2": DataType.FLOAT8_E5M2, "fp8_e5m2": DataType.FLOAT8_E5M2,
    "e5m2": DataType.FLOAT8_E5M2,
}
_OPS = {"sum": RedOp.SUM, "prod": RedOp.PROD, "max": RedOp.MAX, "min": RedOp.MIN,
        "avg": RedOp.AVG}

# Buffer-protocol format characters (struct module) by kind: (kind, itemsize) -> DataType.
_BY_KIND = {("i", 1): DataType.INT8, ("u", 1): DataType.UINT8, ("i", 4): DataType.INT32,
            ("u", 4): DataType.UINT32, ("i", 8): DataType.INT64, ("u", 8): DataType.UINT64,
            ("f", 2): DataType.FLOAT16, ("f", 4): DataType.FLOAT32, ("f", 8): DataType.FLOAT64}
_FORMAT_KIND = {"b": "i", "B": "u", "c": "u", "h": "i", "H": "u", "i": "i", "I": "u",
                "l": "i", "L": "u", "q": "i", "Q": "u", "n": "i", "N": "u", "e": "f", "f": "f",
                "d": "f"}


def as_datatype(dtype):
    """A DataType from a DataType/int, a name ("bfloat16"), or a numpy dtype (or type).
    Raises TypeError or ValueError naming what is accepted."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, bool):
        raise TypeError("dtype must be a tutti.DataType, a name or a numpy dtype, not bool")
    if isinstance(dtype, int):
        try:
            return DataType(dtype)
        except ValueError:
            raise ValueError("invalid datatype %d (valid: 0 to 11)" % dtype) from None
    if isinstance(dtype, str):
        key = dtype.lower()
        if key in _NAMES:
            return _NAMES[key]
        try:
            import numpy
            return from_numpy_dtype(numpy.dtype(dtype))
        except (ImportError, TypeError):
            pass
        raise ValueError("unknown datatype name %r (valid: %s)" % (dtype, ", ".join(_NAMES)))
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        try:
            nd = numpy.dtype(dtype)
        except TypeError:
            nd = None
        if nd is not None:
            return from_numpy_dtype(nd)
    raise TypeError("dtype must be a tutti.DataType, a name or a numpy dtype, not %r" % (dtype,))


_BY_NUMPY = {}  # numpy dtype -> DataType, filled on first sight (dtype.name is slow)

# ml_dtypes' types that are NCCL's: its "float8_e4m3" is IEEE-like (infinities, largest 240),
# not NCCL's e4m3 (float8_e4m3fn: no infinities, largest 448), so it has no datatype here.
_ML_DTYPES = {"bfloat16": DataType.BFLOAT16, "float8_e4m3fn": DataType.FLOAT8_E4M3,
              "float8_e5m2": DataType.FLOAT8_E5M2}


def from_numpy_dtype(nd):
    """The DataType of a numpy dtype; TypeError for those NCCL lacks (bool, int16, complex ...)."""
    dt = _BY_NUMPY.get(nd)
    if dt is not None:
        return dt
    if not nd.isnative:
        raise TypeError("numpy dtype %s is not in this machine's byte order; convert it with "
                        ".astype(%r)" % (nd, nd.newbyteorder("=").str))
    if nd.kind == "V" and nd.name in _ML_DTYPES:  # ml_dtypes' bfloat16 / float8 types
        dt = _ML_DTYPES[nd.name]
    else:
        dt = _BY_KIND.get((nd.kind, nd.itemsize))
    if dt is None:
        raise TypeError("numpy dtype %s has no NCCL datatype (supported: int8, uint8, int32, "
                        "uint32, int64, uint64, float16, float32, float64; bfloat16 and fp8 "
                        "as uint16/uint8 arrays with dtype=)" % nd)
    _BY_NUMPY[nd] = dt
    return dt


def foreign_order(fmt):
    """Whether buffer-protocol format `fmt` names a byte order other than this machine's."""
    foreign = ">!" if sys.byteorder == "little" else "<"
    return bool(fmt[:1]) and fmt[0] in foreign


def from_format(fmt, itemsize):
    """The DataType of a buffer-protocol format string, or None when it has none."""
    if foreign_order(fmt):  # not this machine's byte order: no datatype fits
        return None
    fmt = fmt.lstrip("@=<>!")
    if len(fmt) != 1:
        return None
    kind = _FORMAT_KIND.get(fmt)
    return _BY_KIND.get((kind, itemsize)) if kind else None


def as_redop(op):
    """An ncclRedOp_t value from a RedOp, a name ("sum") or an object with .value (PreMulSum)."""
    if isinstance(op, RedOp):
        return int(op)
    if isinstance(op, str):
        try:
            return int(_OPS[op.lower()])
        except KeyError:
            raise ValueError("unknown reduction op %r (valid: %s)" % (op, ", ".join(_OPS)))
    value = getattr(op, "op_value", None)
    if value is not None:
        return int(value)
    if isinstance(op, int) and not isinstance(op, bool):
        return op
    raise TypeError("op must be a tutti.RedOp, a name or a PreMulSum op, not %r" % (op,))


def _fp8_value(code, e4m3):
    """The value of fp8 `code` (0..255); NaN for the NaN codes, inf for e5m2's infinities."""
    sign = -1.0 if code & 0x80 else 1.0
    if e4m3:
        e, m, bias, mbits = (code >> 3) & 0xF, code & 7, 7, 3
        if e == 15 and m == 7:
            return math.nan
    else:
        e, m, bias, mbits = (code >> 2) & 0x1F, code & 3, 15, 2
        if e == 31:
            return sign * math.inf if m == 0 else math.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mbits)
    return sign * (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)


def _fp8_encode(x, e4m3):
    """x rounded to nearest even into fp8, saturating to the largest finite value."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    finite = [(c, _fp8_value(c, e4m3)) for c in range(0x80)]
    finite = [(c, v) for c, v in finite if math.isfinite(v)]
    top = max(finite, key=lambda cv: cv[1])
    if a >= top[1]:  # infinity included, whose distance to every value ties
        return sign | top[0]
    best = None
    for c, v in finite:
        d = abs(v - a)
        if best is None or d < best[1] or (d == best[1] and c % 2 == 0):
            best = (c, d)
    return sign | best[0]


def encode_scalar(value, dtype):
    """`value` (a Python number, or bytes already in the datatype's representation) as the
    bytes of one element of `dtype`."""
    dtype = as_datatype(dtype)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != ITEMSIZE[dtype]:
            raise ValueError("scalar bytes for %s must be %d long, got %d" %
                             (dtype.name.lower(), ITEMSIZE[dtype], len(raw)))
        return raw
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    ints = {DataType.INT8: "b", DataType.UINT8: "B", DataType.INT32: "i",
            DataType.UINT32: "I", DataType.INT64: "q", DataType.UINT64: "Q"}
    if dtype in ints:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError("a scalar for %s must be an int, not %r" % (dtype.name.lower(), value))
        try:
            return struct.pack("=" + ints[dtype], value)
        except struct.error:
            raise ValueError("scalar %d out of range for %s" % (value, dtype.name.lower()))
    value = float(value)
    if dtype == DataType.FLOAT16:
        try:
            return struct.pack("=e", value)
        except OverflowError:  # beyond float16's range: rounds to infinity, as in C
            return struct.pack("=e", math.copysign(math.inf, value))
    if dtype == DataType.FLOAT32:
        return struct.pack("=f", value)
    if dtype == DataType.FLOAT64:
        return struct.pack("=d", value)
    if dtype == DataType.BFLOAT16:
        bits = struct.unpack("=I", struct.pack("=f", value))[0]
        if math.isnan(value):
            return struct.pack("=H", (bits >> 16) | 0x40)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return struct.pack("=H", bits & 0xFFFF)
    return bytes([_fp8_encode(value, dtype == DataType.FLOAT8_E4M3)])
