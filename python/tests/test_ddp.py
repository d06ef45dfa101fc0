"""DistributedDataParallel over tutti.torch against gloo (issue 17's acceptance), as a user runs
it: examples/pytorch/ddp_train.py under tutti-run, at 2 and 4 ranks, with each backend; then
the final parameters and buffers are compared. At 2 ranks they must be bitwise equal to gloo's
(a sum of two gradients does not depend on the order) and to a second Tutti run; at 4 ranks
within 1e-6 relative (per tensor, in norm) of gloo's, whose sums run in another order. The loss
must decrease.

usage: test_ddp.py TUTTI_RUN STEPS WIDTH REPEAT_ALL [NRANKS...]   (one process, not under
tutti-run; REPEAT_ALL 1 repeats the Tutti run at every size, 0 at 2 ranks only)
"""

import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "pytorch",
                       "ddp_train.py")


def train(tutti_run, nranks, backend, steps, width, out_dir, tag):
    state = os.path.join(out_dir, "%s.pt" % tag)
    losses = os.path.join(out_dir, "%s.loss" % tag)
    # A run of 5 steps takes seconds: a hang fails long before CTest's limit (600 s for all
    # three runs of python_ddp), with tutti-run's word for it in the output below.
    limit = 120 + 3 * steps
    cmd = [tutti_run, "-n", str(nranks), "--timeout", str(limit), sys.executable, EXAMPLE,
           "--backend", backend, "--steps", str(steps), "--width", str(width),
           "--save", state, "--losses", losses]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "", flush=True)
    if run.returncode != 0:
        print(run.stdout)
        raise SystemExit("%s failed with status %d" % (" ".join(cmd), run.returncode))
    with open(losses) as f:
        curve = [float(x) for x in f.read().split()]
    return torch.load(state), curve


def compare(a, b, what, rel):
    assert a.keys() == b.keys(), what
    worst = 0.0
    for key in a:
        x, y = a[key], b[key]
        if rel == 0 or not x.is_floating_point():
            assert torch.equal(x, y), "%s: %s differs" % (what, key)
            continue
        d = float((x.double() - y.double()).norm() / max(float(y.double().norm()), 1e-30))
        worst = max(worst, d)
        assert d <= rel, "%s: %s differs by %.3g relative (limit %g)" % (what, key, d, rel)
    print("%s: %s" % (what, "bitwise equal" if rel == 0 else
                      "largest relative difference %.3g" % worst), flush=True)


def main():
    tutti_run, steps, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    repeat_all = sys.argv[4] == "1"
    sizes = [int(x) for x in sys.argv[5:]] or [2, 4]
    with tempfile.TemporaryDirectory(prefix="tutti_ddp_") as out:
        for n in sizes:
            tutti_a, curve = train(tutti_run, n, "tutti", steps, width, out, "tutti%d_a" % n)
            assert curve[-1] < curve[0], "%d ranks: the loss did not decrease: %s" % (n, curve)
            gloo, _ = train(tutti_run, n, "gloo", steps, width, out, "gloo%d" % n)
            if n == 2 or repeat_all:
                tutti_b, _ = train(tutti_run, n, "tutti", steps, width, out, "tutti%d_b" % n)
                compare(tutti_a, tutti_b, "%d ranks, two tutti runs" % n, 0)
            if n == 2:
                compare(tutti_a, gloo, "%d ranks, tutti against gloo" % n, 0)
            else:
                compare(tutti_a, gloo, "%d ranks, tutti against gloo" % n, 1e-6)
    print("DDP checks passed", flush=True)


if __name__ == "__main__":
    main()
