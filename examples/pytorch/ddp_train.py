"""DistributedDataParallel training of a small CNN with BatchNorm over Tutti (or gloo, to compare).

    tutti-run -n 4 /usr/bin/python3 examples/pytorch/ddp_train.py --steps 100

Every rank trains on its own generated batches (deterministic: seeded by rank and step), so two
runs with the same arguments compute the same thing; the loss is printed every 10 steps by
rank 0, and --save writes the final parameters and buffers (torch.save of a state dict) for
comparison between backends and runs. The ranks meet through env://: tutti-run and torchrun set
its variables, and under mpirun (or srun) tutti.launch_env() fills them in from the launcher's
own; --rdzv names another init_method.

    mpirun -np 2 -x PYTHONPATH /usr/bin/python3 examples/pytorch/ddp_train.py --steps 100
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class SmallCNN(nn.Module):
    """Two conv+BatchNorm blocks and a linear classifier for 1x16x16 inputs, 10 classes."""

    def __init__(self, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.fc = nn.Linear(2 * width * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def batch(rank, step, size):
    """A learnable batch: class c is a bright 4x4 patch at a place c decides, plus noise."""
    gen = torch.Generator().manual_seed(1000003 * rank + step)
    labels = torch.randint(0, 10, (size,), generator=gen)
    images = 0.3 * torch.randn(size, 1, 16, 16, generator=gen)
    for i, c in enumerate(labels.tolist()):
        r, col = (c // 5) * 8 + 2, (c % 5) * 3
        images[i, 0, r:r + 4, col:col + 4] += 1.0
    return images, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="tutti", choices=("tutti", "gloo"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--save", help="write the final state dict here (rank 0)")
    parser.add_argument("--losses", help="write the loss of every step here (rank 0)")
    parser.add_argument("--rdzv", help="init_method (default: env:// or a file)")
    args = parser.parse_args()

    import tutti
    # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: tutti-run's or torchrun's as they are, else
    # from mpirun's or srun's variables (docs/python.md, "Launch").
    job = tutti.launch_env()
    rank, world = job["RANK"], job["WORLD_SIZE"]
    torch.set_num_threads(1)  # deterministic kernels, and no oversubscription of the host
    if args.backend == "tutti":
        import tutti.torch  # noqa: F401  (registers the backend)
    init = args.rdzv or "env://"
    dist.init_process_group(args.backend, init_method=init, rank=rank, world_size=world)

    torch.manual_seed(0)
    model = DDP(SmallCNN(args.width))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    start = time.perf_counter()
    for step in range(args.steps):
        images, labels = batch(rank, step, args.batch)
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print("step %d loss %.4f" % (step, losses[-1]), flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print("%s, %d ranks: %d steps in %.3f s (%.2f ms/step)" %
              (args.backend, world, args.steps, elapsed, 1000 * elapsed / max(args.steps, 1)),
              flush=True)
        if args.save:
            torch.save(model.module.state_dict(), args.save)
        if args.losses:
            with open(args.losses, "w") as f:
                f.write("\n".join("%.9g" % x for x in losses) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
