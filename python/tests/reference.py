"""Test helpers: every NCCL datatype's bits computed independently in numpy, inputs whose
reductions are exact, and reference results for every collective.

Nothing here uses the tutti package's own conversions: bfloat16 and fp8 are encoded and decoded
from their definitions, so a wrong conversion in the bindings or the library cannot hide behind
the same wrong conversion in the reference. Inputs are small integers (powers of two for the
averages that round), chosen per datatype and operator so that every partial result is exact
and the result does not depend on the order of the reduction.
"""

import sys

import numpy as np

from tutti import DataType as D

ALL_DTYPES = list(D)
FLOATS = {D.FLOAT16, D.FLOAT32, D.FLOAT64, D.BFLOAT16, D.FLOAT8_E4M3, D.FLOAT8_E5M2}
STORAGE = {D.INT8: np.int8, D.UINT8: np.uint8, D.INT32: np.int32, D.UINT32: np.uint32,
           D.INT64: np.int64, D.UINT64: np.uint64, D.FLOAT16: np.float16,
           D.FLOAT32: np.float32, D.FLOAT64: np.float64, D.BFLOAT16: np.uint16,
           D.FLOAT8_E4M3: np.uint8, D.FLOAT8_E5M2: np.uint8}
# Datatypes numpy cannot name: the call must say dtype= explicitly.
NEEDS_DTYPE = {D.BFLOAT16, D.FLOAT8_E4M3, D.FLOAT8_E5M2}


def _fp8_table(e4m3):
    """The values of fp8 codes 0..255 (NaN for NaN codes), from the format's definition."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if e4m3:
        e, m, bias, mb = (codes >> 3) & 0xF, codes & 7, 7, 3
    else:
        e, m, bias, mb = (codes >> 2) & 0x1F, codes & 3, 15, 2
    normal = (1.0 + m / 2.0 ** mb) * np.exp2(e.astype(np.float64) - bias)
    sub = m * 2.0 ** (1 - bias - mb)
    val = sign * np.where(e == 0, sub, normal)
    if e4m3:
        val[(e == 15) & (m == 7)] = np.nan
    else:
        val[(e == 31)] = np.where(m[e == 31] == 0, sign[e == 31] * np.inf, np.nan)
    return val


FP8 = {D.FLOAT8_E4M3: _fp8_table(True), D.FLOAT8_E5M2: _fp8_table(False)}
# The largest finite positive code: e4m3 0x7e (448), e5m2 0x7b (57344).
FP8_MAXCODE = {D.FLOAT8_E4M3: 0x7E, D.FLOAT8_E5M2: 0x7B}


def _fp8_encode(v, dt):
    """float64 -> fp8 codes, round to nearest even, saturating (NCCL's SATFINITE)."""
    table = FP8[dt]
    top = FP8_MAXCODE[dt]
    pos = table[:top + 1]  # increasing with the code
    a = np.abs(v)
    hi = np.clip(np.searchsorted(pos, a), 0, top)
    lo = np.clip(hi - 1, 0, top)
    dlo, dhi = np.abs(a - pos[lo]), np.abs(pos[hi] - a)
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(a >= pos[top], top, pick)
    return (pick | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def encode(values, dt):
    """Exact-or-rounded-to-nearest-even conversion of float64/int values to the storage bits."""
    values = np.asarray(values)
    if dt not in FLOATS:
        return values.astype(STORAGE[dt])
    v = values.astype(np.float64)
    if dt == D.BFLOAT16:
        bits = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if dt in FP8:
        return _fp8_encode(v, dt)
    with np.errstate(over="ignore"):  # beyond float16's range: infinity, as intended
        return v.astype(STORAGE[dt])


def decode(stored, dt):
    """Storage bits -> float64 (floats) or Python-int-safe int64/uint64 arrays (integers)."""
    stored = np.asarray(stored)
    if dt == D.BFLOAT16:
        return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dt in FP8:
        return FP8[dt][stored]
    if dt in FLOATS:
        return stored.astype(np.float64)
    return stored.astype(np.uint64 if dt in (D.UINT8, D.UINT32, D.UINT64) else np.int64)


# Per datatype, the magnitude of inputs whose sums over up to 3 ranks (and doubled, for the
# PreMulSum scalar 2) stay exact: e5m2 holds every integer up to 8, e4m3 up to 16, bfloat16
# up to 256, float16 up to 2048.
SUM_RANGE = {D.INT8: 20, D.UINT8: 40, D.INT32: 1000, D.UINT32: 1000, D.INT64: 1000,
             D.UINT64: 1000, D.FLOAT16: 300, D.FLOAT32: 1000, D.FLOAT64: 1000,
             D.BFLOAT16: 40, D.FLOAT8_E4M3: 2, D.FLOAT8_E5M2: 1}
SIGNED = {D.INT8, D.INT32, D.INT64} | FLOATS


def make_input(dt, op, nranks, rank, count, seed):
    """Rank `rank`'s input of one case as float64/int values (not yet encoded)."""
    rng = np.random.default_rng([seed, rank])
    lim = {"prod": 2, "max": 100, "min": 100}.get(op, SUM_RANGE[dt])
    if op in ("max", "min"):
        lim = min(lim, SUM_RANGE[dt] * 2)
    if op == "avg" and dt in FLOATS and nranks & (nranks - 1):
        # 1/nranks is inexact: the same power of two on every rank, so that x * (1/n) is exact
        # and n such terms round once whatever the order.
        rng = np.random.default_rng([seed, 0])
        return rng.choice(np.array([0.0, 1.0, 2.0, 4.0, -1.0, -2.0, -4.0]), count)
    lo = -lim if dt in SIGNED else 0
    vals = rng.integers(lo, lim + 1, count)
    return vals.astype(np.float64) if dt in FLOATS else vals


def reduce_ref(inputs, dt, op, nranks):
    """The reduction of the ranks' inputs (decoded values) as storage bits."""
    if dt not in FLOATS:
        # Inputs are small: int64 holds every partial result exactly, for unsigned types too.
        ints = [np.asarray(a, dtype=np.int64) for a in inputs]
        if op == "sum":
            acc = np.sum(ints, axis=0)
        elif op == "premul":
            acc = np.sum([2 * a for a in ints], axis=0)
        elif op == "prod":
            acc = np.prod(ints, axis=0)
        elif op == "max":
            acc = np.max(ints, axis=0)
        elif op == "min":
            acc = np.min(ints, axis=0)
        elif op == "avg":
            s = np.sum(ints, axis=0)
            # Integer average: sum, then divide truncating toward zero.
            acc = np.sign(s) * (np.abs(s) // nranks)
        return np.asarray(acc, dtype=np.int64).astype(STORAGE[dt])
    fl = [np.asarray(a, dtype=np.float64) for a in inputs]
    if op == "sum":
        acc = np.sum(fl, axis=0)
    elif op == "premul":
        acc = np.sum([2.0 * a for a in fl], axis=0)
    elif op == "prod":
        acc = np.prod(fl, axis=0)
    elif op == "max":
        acc = np.max(fl, axis=0)
    elif op == "min":
        acc = np.min(fl, axis=0)
    elif op == "avg":
        recip = decode(encode(np.array([1.0 / nranks]), dt), dt)[0]  # 1/n rounded into dt
        terms = [decode(encode(a * recip, dt), dt) for a in fl]
        acc = np.sum(terms, axis=0)
    return encode(acc, dt)


def same_bits(got, want):
    got = np.ascontiguousarray(got)
    want = np.ascontiguousarray(want)
    return got.nbytes == want.nbytes and np.array_equal(got.view(np.uint8), want.view(np.uint8))


class Failures:
    def __init__(self, rank):
        self.rank = rank
        self.count = 0
        self.checks = 0

    def check(self, got, want, what):
        self.checks += 1
        if same_bits(got, want):
            return
        self.count += 1
        if self.count <= 10:
            g = np.ascontiguousarray(got).view(np.uint8)
            w = np.ascontiguousarray(want).view(np.uint8)
            n = min(len(g), len(w))
            idx = next((i for i in range(n) if g[i] != w[i]), n)
            print("rank %d: MISMATCH %s: byte %d got %s want %s (got %s, want %s)" %
                  (self.rank, what, idx, g[idx:idx + 8].tolist(), w[idx:idx + 8].tolist(),
                   np.asarray(got)[:8], np.asarray(want)[:8]), flush=True)

    def finish(self, name):
        print("rank %d: %s: %d checks, %d failed" % (self.rank, name, self.checks, self.count),
              flush=True)
        sys.exit(1 if self.count else 0)
