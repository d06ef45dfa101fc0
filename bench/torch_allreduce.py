"""dist.all_reduce through "tutti" and "gloo" side by side, with tutti-perf -R 2 as the mark.

    /usr/bin/python3 bench/torch_allreduce.py [--build build/release] [-n 2]
        [--sizes 64K,1M,16M,64M] [--rounds 3] [--ddp-steps 30]

One run, interleaved: each round launches (1) a torch job under tutti-run in which every rank
has a gloo group and a tutti group and times dist.all_reduce of ordinary float32 CPU tensors
(torch.empty, sum, in place) through each, alternating, then DDP training steps of
examples/pytorch's CNN through each, alternating; and (2) `tutti-perf -R 2` at the same sizes
(ncclMemAlloc buffers in symmetric windows: Tutti's best case; its in-place time is compared,
as dist.all_reduce is in place). The table gives the median over rounds of each figure (time
per call, the slower rank's) and the ratios gloo/tutti and tutti/tutti-perf. A third group,
"tutti, inline off" (TUTTI_TORCH_INLINE_BYTES=-1 when it is made), sends every collective
through the host stream and the completion thread, as tutti.torch did before small ones ran
inline: the hand-off's cost in the same run. Set TUTTI_TORCH_ALLOCATOR=0 to see tutti on
torch's own allocator.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise SystemExit("bad size %r" % text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %siB" % (n >> shift, unit)
    return "%d B" % n


# ---- the worker: one rank of the torch job ------------------------------------------------

def worker(args):
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
    import tutti.torch as tutti_torch

    torch.set_num_threads(1)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rdzv = os.path.join(tempfile.gettempdir(), "tutti_bench_torch_%d" % os.getppid())
    dist.init_process_group("gloo", init_method="file://" + rdzv, rank=rank, world_size=n)
    groups = {"gloo": dist.new_group(backend="gloo"), "tutti": dist.new_group(backend="tutti")}
    os.environ["TUTTI_TORCH_INLINE_BYTES"] = "-1"
    groups["tutti_async"] = dist.new_group(backend="tutti")
    del os.environ["TUTTI_TORCH_INLINE_BYTES"]

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t[0])

    for size in args.sizes:
        x = torch.ones(size // 4, dtype=torch.float32)
        iters = max(5, min(200, (256 << 20) // size))
        result = {}
        # the second pass is timed
        for name in ("gloo", "tutti", "tutti_async", "gloo", "tutti_async", "tutti"):
            g = groups[name]
            for _ in range(max(2, iters // 10)):
                dist.all_reduce(x, group=g)
            dist.barrier(group=g)
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x, group=g)
            result[name] = slowest((time.perf_counter() - start) / iters)
        if rank == 0:
            print("ALLREDUCE %d gloo %.9f tutti %.9f tutti_async %.9f" % (
                size, result["gloo"], result["tutti"], result["tutti_async"]), flush=True)

    if args.ddp_steps > 0:
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel as DDP
        from ddp_train import SmallCNN, batch

        models = {}
        for name in ("gloo", "tutti"):
            g = groups[name]
            torch.manual_seed(0)
            model = DDP(SmallCNN(args.ddp_width), process_group=g)
            models[name] = (model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
        step_s = {}
        for name in ("gloo", "tutti", "gloo", "tutti"):
            model, opt = models[name]
            dist.barrier(group=groups[name])
            start = time.perf_counter()
            for step in range(args.ddp_steps):
                images, labels = batch(rank, step, 32)
                opt.zero_grad()
                F.cross_entropy(model(images), labels).backward()
                opt.step()
            step_s[name] = slowest((time.perf_counter() - start) / args.ddp_steps)
        if rank == 0:
            print("DDP %d gloo %.9f tutti %.9f" % (args.ddp_width, step_s["gloo"],
                                                  step_s["tutti"]), flush=True)
    if rank == 0:
        print("ALLOCATOR %s" % (tutti_torch.allocator_stats(),), flush=True)
    dist.destroy_process_group()


# ---- the driver ---------------------------------------------------------------------------

def run(cmd, env=None):
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    if res.returncode != 0:
        sys.stderr.write(res.stdout)
        raise SystemExit("failed (%d): %s" % (res.returncode, " ".join(cmd)))
    return res.stdout


def perf_times(out):
    """{bytes: (in-place, out-of-place) seconds} from tutti-perf's table. dist.all_reduce is in
    place, so the in-place time is the one to compare with."""
    times = {}
    for line in out.splitlines():
        f = re.sub(r"^\[\d+\]\s*", "", line).split()
        if len(f) >= 10 and f[0].isdigit() and f[2] == "float":
            times[int(f[0])] = (float(f[9]) * 1e-6, float(f[5]) * 1e-6)
    return times


def driver(args):
    build = os.path.abspath(args.build)
    tutti_run = os.path.join(build, "tutti-run")
    perf = os.path.join(build, "tutti-perf")
    env = dict(os.environ)
    env.setdefault("TUTTI_LIBRARY", os.path.join(build, "libtutti.so"))
    env.setdefault("TUTTI_TORCH_BUILD_DIR", os.path.join(build, "tutti-torch"))
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    sizes_arg = ",".join(str(s) for s in args.sizes)
    rows = {s: {"gloo": [], "tutti": [], "tutti_async": [], "perf": [], "perf_oop": []}
            for s in args.sizes}
    ddp = {"gloo": [], "tutti": []}
    allocator = ""
    for r in range(args.rounds):
        sys.stderr.write("round %d of %d\n" % (r + 1, args.rounds))
        out = run([tutti_run, "-n", str(args.nranks), "--timeout", "900", sys.executable,
                   os.path.abspath(__file__), "--worker", "--sizes", sizes_arg,
                   "--ddp-steps", str(args.ddp_steps), "--ddp-width", str(args.ddp_width)],
                  env)
        for line in out.splitlines():
            f = re.sub(r"^\[\d+\]\s*", "", line).split()
            if f[:1] == ["ALLREDUCE"]:
                rows[int(f[1])]["gloo"].append(float(f[3]))
                rows[int(f[1])]["tutti"].append(float(f[5]))
                rows[int(f[1])]["tutti_async"].append(float(f[7]))
            elif f[:1] == ["DDP"]:
                ddp["gloo"].append(float(f[3]))
                ddp["tutti"].append(float(f[5]))
            elif f[:1] == ["ALLOCATOR"]:
                allocator = " ".join(f[1:])
        for size in args.sizes:
            iters = max(5, min(200, (256 << 20) // size))
            # -a 3: the slowest rank's time, as the dist.all_reduce columns take it.
            out = run([tutti_run, "-n", str(args.nranks), perf, "-b", str(size), "-e", str(size),
                       "-d", "float", "-o", "sum", "-R", "2", "-w", str(max(2, iters // 10)),
                       "-n", str(iters), "-a", "3"], env)
            ip, oop = perf_times(out)[size]
            rows[size]["perf"].append(ip)
            rows[size]["perf_oop"].append(oop)

    med = statistics.median
    print("dist.all_reduce, float32 sum in place, %d ranks, median of %d interleaved rounds "
          "(time per call, slower rank)\n" % (args.nranks, args.rounds))
    print("| size | gloo | tutti | tutti, inline off | tutti-perf -R 2 in place "
          "| (out of place) | gloo / tutti | tutti / tutti-perf in place "
          "| inline off / tutti-perf |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        g, t, ta, p, po = (med(rows[size][k])
                           for k in ("gloo", "tutti", "tutti_async", "perf", "perf_oop"))
        print("| %s | %.1f us | %.1f us | %.1f us | %.1f us | %.1f us | %.2fx | %.2f | %.2f |" %
              (human(size), g * 1e6, t * 1e6, ta * 1e6, p * 1e6, po * 1e6, g / t, t / p,
               ta / p))
    print("\nPer round (us): " + "; ".join(
        "%s gloo %s tutti %s inline-off %s perf %s" % (human(size), *(
            "/".join("%.0f" % (x * 1e6) for x in rows[size][k])
            for k in ("gloo", "tutti", "tutti_async", "perf"))) for size in args.sizes))
    if ddp["gloo"]:
        g, t = med(ddp["gloo"]), med(ddp["tutti"])
        print("\nDDP step (examples/pytorch CNN, width %d, batch 32 per rank): gloo %.2f ms, "
              "tutti %.2f ms, gloo / tutti %.2fx" % (args.ddp_width, g * 1e3, t * 1e3, g / t))
    print("\ntutti.torch allocator (installed, made, reused, live, cached bytes): %s" % allocator)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("-n", "--nranks", type=int, default=2)
    parser.add_argument("--sizes", default="64K,1M,16M,64M")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ddp-steps", type=int, default=30)
    parser.add_argument("--ddp-width", type=int, default=64)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
