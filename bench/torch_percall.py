"""Where a dist.all_reduce call's time goes: the same sizes through every layer, in one job.

    /usr/bin/python3 bench/torch_percall.py [--build build/release] [-n 2]
        [--sizes 0,64K,1M] [--rounds 5] [--iters 400]

One torch job under tutti-run; every rank times, per call (the slower rank's mean over a loop
of --iters calls; the table gives the median over --rounds rounds, which alternate the rows):

  gloo            dist.all_reduce through a gloo group (c10d's floor with a real backend)
  tutti           dist.all_reduce through a "tutti" group (what users get)
  tutti async     dist.all_reduce(async_op=True) then Work.wait()
  inline off      dist.all_reduce through a "tutti" group made with TUTTI_TORCH_INLINE_BYTES=-1:
                  every collective handed to the host stream and the completion thread
  pg.allreduce    the group's allreduce([t]).wait() from Python, without dist.all_reduce's checks
  bindings        tutti's Python bindings, blocking comm.all_reduce on the same tensor's memory
                  (ctypes, no c10d, no threads): Tutti's collective plus ctypes
  bindings+stream the same on a host stream, then Stream.synchronize() (one hand-off)

Size 0 (an empty tensor) gives each layer's floor: Tutti only checks that every rank passed a
count of 0 (a handshake through the team mailboxes, docs/semantics.md) and moves nothing.
The tensors are made after the groups, so from 256 KiB they come from tutti.torch's allocator,
as the bench's do. The machine's load matters: say it when quoting.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from torch_allreduce import human, parse_size  # noqa: E402

ROWS = ("gloo", "tutti", "tutti async", "inline off", "pg.allreduce", "bindings",
        "bindings+stream")


def worker(args):
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(ROOT, "python"))
    import tutti
    import tutti.torch  # noqa: F401  (registers "tutti")

    torch.set_num_threads(1)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rdzv = os.path.join(tempfile.gettempdir(), "tutti_bench_percall_%d" % os.getppid())
    dist.init_process_group("gloo", init_method="file://" + rdzv, rank=rank, world_size=n)
    gloo = dist.new_group(backend="gloo")
    tg = dist.new_group(backend="tutti")
    os.environ["TUTTI_TORCH_INLINE_BYTES"] = "-1"
    tg_off = dist.new_group(backend="tutti")
    del os.environ["TUTTI_TORCH_INLINE_BYTES"]
    uid = [bytes(tutti.get_unique_id()) if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    comm = tutti.Comm(n, tutti.UniqueId(uid[0]), rank)
    stream = tutti.Stream()
    ar = dist.ReduceOp.SUM
    opts = dist.AllreduceOptions()
    opts.reduceOp = ar

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return float(t[0])

    for size in args.sizes:
        x = torch.ones(size // 4, dtype=torch.float32)
        arr = x.numpy()
        calls = {
            "gloo": lambda: dist.all_reduce(x, group=gloo),
            "tutti": lambda: dist.all_reduce(x, group=tg),
            "tutti async": lambda: dist.all_reduce(x, group=tg, async_op=True).wait(),
            "inline off": lambda: dist.all_reduce(x, group=tg_off),
            "pg.allreduce": lambda: tg.allreduce([x], opts).wait(),
            "bindings": lambda: comm.all_reduce(arr),
            "bindings+stream": lambda: (comm.all_reduce(arr, stream=stream),
                                        stream.synchronize()),
        }
        rows = {name: [] for name in ROWS}
        for r in range(args.rounds):
            order = ROWS if r % 2 == 0 else tuple(reversed(ROWS))
            for name in order:
                call = calls[name]
                iters = args.iters if name != "gloo" else max(20, args.iters // 10)
                for _ in range(max(3, iters // 10)):
                    call()
                dist.barrier(group=gloo)
                start = time.perf_counter()
                for _ in range(iters):
                    call()
                rows[name].append(slowest((time.perf_counter() - start) / iters))
        if rank == 0:
            print("PERCALL %d %s" % (size, " ".join(
                "%s=%s" % (name.replace(" ", "_"), ",".join("%.9f" % v for v in rows[name]))
                for name in ROWS)), flush=True)
    stream.synchronize()
    stream.destroy()
    comm.destroy()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("-n", "--nranks", type=int, default=2)
    parser.add_argument("--sizes", default="0,64K,1M")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=400)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(args)
        return
    build = os.path.abspath(args.build)
    env = dict(os.environ)
    env.setdefault("TUTTI_LIBRARY", os.path.join(build, "libtutti.so"))
    env.setdefault("TUTTI_TORCH_BUILD_DIR", os.path.join(build, "tutti-torch"))
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    cmd = [os.path.join(build, "tutti-run"), "-n", str(args.nranks), "--timeout", "900",
           sys.executable, os.path.abspath(__file__), "--worker", "--sizes",
           ",".join(str(s) for s in args.sizes), "--rounds", str(args.rounds), "--iters",
           str(args.iters)]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    if res.returncode != 0:
        sys.stderr.write(res.stdout)
        raise SystemExit("failed (%d)" % res.returncode)
    print("per call, us: median over %d rounds of the slower rank's mean over a loop "
          "(%d ranks)\n" % (args.rounds, args.nranks))
    print("| size | " + " | ".join(ROWS) + " |")
    print("|---:|" + "---:|" * len(ROWS))
    for line in res.stdout.splitlines():
        f = line.split()
        f = f[1:] if f and f[0].startswith("[") else f
        if f[:1] != ["PERCALL"]:
            continue
        vals = dict(kv.split("=") for kv in f[2:])
        cells = []
        for name in ROWS:
            v = [float(s) * 1e6 for s in vals[name.replace(" ", "_")].split(",")]
            cells.append("%.1f" % statistics.median(v))
        print("| %s | %s |" % (human(int(f[1])), " | ".join(cells)))
        print("|  (range) | " + " | ".join(
            "%.0f-%.0f" % (min(float(s) for s in vals[nm.replace(" ", "_")].split(",")) * 1e6,
                           max(float(s) for s in vals[nm.replace(" ", "_")].split(",")) * 1e6)
            for nm in ROWS) + " |")


if __name__ == "__main__":
    main()
