"""The vector variants against the equal-block calls, through the Python bindings, with equal
counts so that both forms apply: AllGather / AllGatherV and ReduceScatter / ReduceScatterV of
float32, 4 KiB and 1 MiB per rank, medians of 5 rounds of 200 calls. Every result is checked.

    PYTHONPATH=python build/release/tutti-run -n 2 /usr/bin/python3 bench/vector_variants.py
"""
import time

import numpy as np

import tutti


def main():
    c = tutti.Comm.from_env()
    n, r = c.size, c.rank
    for per in (1024, 262144):  # float32 elements per rank: 4 KiB, 1 MiB
        s = np.full(per, r + 1, np.float32)
        out = np.empty(per * n, np.float32)
        cnt = [per] * n
        gathered = np.repeat(np.arange(1, n + 1, dtype=np.float32), per)
        calls = (("all_gather", lambda: c.all_gather(s, out), gathered),
                 ("all_gather_v", lambda: c.all_gather_v(s, out, cnt), gathered),
                 ("reduce_scatter", lambda: c.reduce_scatter(out, s), None),
                 ("reduce_scatter_v", lambda: c.reduce_scatter_v(out, s, cnt), None))
        res = {}
        for name, fn, want in calls:
            s[:] = r + 1
            out[:] = gathered
            for _ in range(20):
                fn()
            if want is not None and not np.array_equal(out, want):
                raise AssertionError("%s gave wrong data" % name)
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(200):
                    fn()
                ts.append((time.perf_counter() - t0) / 200 * 1e6)
            res[name] = sorted(ts)[2]
        out[:] = gathered
        c.reduce_scatter_v(out, s, cnt)
        if not np.array_equal(s, np.full(per, n * (r + 1), np.float32)):
            raise AssertionError("reduce_scatter_v gave wrong data")
        if r == 0:
            print("%d ranks, %d B per rank: " % (n, per * 4) +
                  ", ".join("%s %.1f us" % kv for kv in res.items()), flush=True)
    c.destroy()


if __name__ == "__main__":
    main()
