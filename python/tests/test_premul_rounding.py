"""ncclAvg and PreMulSum on float16, and PreMulSum with per-rank scalars: every algorithm
gives NCCL's result.

NCCL's pre-multiplication yields the element type, so each rank's product is rounded to it
before the sum (the kernels do the same for bfloat16 and float8, which unit_reduce checks).
Inputs where the rounding shows (every rank holds 1 + 2^-10 in float16, so (1/3 rounded) x that
input lies between two float16 values) are reduced; the expected bits are computed here with
numpy, following NCCL's order of roundings: the scalar to the datatype, the product in float
rounded to the datatype, the sum in float, the result rounded to the datatype. Then each rank
passes a scalar of its own (rank + 1), which multiplies its own input only. The job runs once
per algorithm (NCCL_ALGO, tests/python.cmake); every one must agree.
"""

import sys

import numpy as np

import tutti


def as_f32(bits_f16):
    return np.float32(np.array([bits_f16], dtype=np.uint16).view(np.float16)[0])


def f16_round(x):
    return np.float32(np.float16(np.float32(x)))


def main():
    comm = tutti.Comm.from_env()
    n, rank = comm.size, comm.rank
    failures = 0
    x = as_f32(0x3C01)  # 1.0009765625
    for op, scalar in (("avg", None), ("premul", 3.0)):
        s = f16_round(1.0 / n) if op == "avg" else f16_round(scalar)
        p = f16_round(np.float32(s) * x)
        total = np.float32(0)
        for _ in range(n):
            total = np.float32(total + p)
        want = np.float16(total).view(np.uint16)
        buf = np.full(4099, x, dtype=np.float16)
        if op == "avg":
            comm.all_reduce(buf, op="avg")
        else:
            with comm.premul_sum(scalar, np.float16) as pm:
                comm.all_reduce(buf, op=pm)
        got = buf.view(np.uint16)
        bad = np.nonzero(got != want)[0]
        if bad.size:
            failures += 1
            print("FAIL %s float16 on rank %d: element %d is 0x%04x, want 0x%04x" %
                  (op, rank, bad[0], got[bad[0]], want))
    # A scalar of each rank's own (as a program weighting its local batch passes): each input is
    # multiplied by its own rank's scalar, on every algorithm. Exact in float32.
    for count in (4099, 1 << 20):
        buf = np.full(count, 1.5 + rank, dtype=np.float32)
        with comm.premul_sum(float(rank + 1), np.float32) as pm:
            comm.all_reduce(buf, op=pm)
        want = np.float32(sum((r + 1) * (1.5 + r) for r in range(n)))
        bad = np.nonzero(buf != want)[0]
        if bad.size:
            failures += 1
            print("FAIL premul with per-rank scalars, %d floats, on rank %d: element %d is %r, "
                  "want %r" % (count, rank, bad[0], buf[bad[0]], want))
    comm.destroy()
    print("premul rounding on rank %d: %s" % (rank, "FAILED" if failures else "passed"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
