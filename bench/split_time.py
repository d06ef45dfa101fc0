"""Seconds per ncclCommSplit through the Python bindings, 4 splits in a row (the first pays for
its connections). Under a passphrase TUTTI_SECRET each init of rank 0 used to repeat the
NCCL_COMM_ID id's Argon2id derivation:

    TUTTI_SECRET='a passphrase' PYTHONPATH=python build/release/tutti-run -n 2 \\
        /usr/bin/python3 bench/split_time.py
"""
import time

import tutti


def main():
    c = tutti.Comm.from_env()
    ts = []
    for _ in range(4):
        t0 = time.perf_counter()
        s = c.split(0, c.rank)
        ts.append(time.perf_counter() - t0)
        s.destroy()
    if c.rank == 0:
        print("split times (s):", " ".join("%.3f" % t for t in ts), flush=True)
    c.destroy()


if __name__ == "__main__":
    main()
