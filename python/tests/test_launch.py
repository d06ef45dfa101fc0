"""What a launcher gives torch.distributed and Tutti: run under `tutti-run -n N` (mode
tutti-run) or `mpirun -np N` (mode mpirun, through launch_mpirun.sh).

tutti-run: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT are set, MASTER_PORT is not
NCCL_COMM_ID's port, and Tutti's own init still meets at NCCL_COMM_ID (checked with MASTER_*
pointed at an unreachable address). mpirun: tutti.launch_env() derives the same variables from
Open MPI's, with a MASTER_PORT every rank agrees on. Both: a Tutti communicator from the
environment and dist.init_process_group("tutti") through env:// each run an exact AllReduce.
Exits 77 after the Tutti part when torch (and what tutti.torch compiles with) is missing.
"""
import faulthandler
import os
import shutil
import signal
import sys

import numpy as np

import tutti


# tutti-run stops a rank with SIGTERM (its --timeout, or a failed peer): say where it was.
faulthandler.register(signal.SIGTERM, all_threads=True)


def check(cond, what):
    if not cond:
        raise SystemExit("rank %s: FAILED: %s" % (os.environ.get("RANK", "?"), what))


def tutti_part(mode):
    before = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                            "MASTER_PORT", "NCCL_COMM_ID")}
    job = tutti.launch_env()
    rank, size = job["RANK"], job["WORLD_SIZE"]
    if mode == "tutti-run":
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            check(before[k] is not None, "tutti-run did not set %s" % k)
            check(str(job[k]) == before[k], "launch_env changed %s=%s to %s" % (k, before[k],
                                                                               job[k]))
        check(job["LOCAL_RANK"] == rank, "one host: LOCAL_RANK %d != RANK %d" % (
            job["LOCAL_RANK"], rank))
        check(before["MASTER_ADDR"] == "127.0.0.1", "MASTER_ADDR=%s" % before["MASTER_ADDR"])
        host, _, root_port = before["NCCL_COMM_ID"].rpartition(":")
        check(host == "127.0.0.1" and root_port.isdigit() and
              int(root_port) != job["MASTER_PORT"],
              "NCCL_COMM_ID=%s is not 127.0.0.1 and a port other than MASTER_PORT=%d" % (
                  before["NCCL_COMM_ID"], job["MASTER_PORT"]))
        # Tutti's init reads NCCL_COMM_ID before MASTER_*: point these where nothing listens.
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "192.0.2.1", "9"
    else:
        check(before["RANK"] is None and before["MASTER_ADDR"] is None,
              "mpirun set RANK or MASTER_ADDR itself: nothing to test")
        check(rank == int(os.environ["OMPI_COMM_WORLD_RANK"]), "RANK %d" % rank)
        check(size == int(os.environ["OMPI_COMM_WORLD_SIZE"]), "WORLD_SIZE %d" % size)
        check(job["LOCAL_RANK"] == int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]), "LOCAL_RANK")
        check(job["MASTER_ADDR"] == "127.0.0.1", "MASTER_ADDR=%s" % job["MASTER_ADDR"])
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            check(os.environ.get(k) == str(job[k]), "%s not exported" % k)
    with tutti.Comm.from_env() as comm:
        check(comm.rank == rank and comm.size == size, "Comm.from_env: rank %d of %d" % (
            comm.rank, comm.size))
        x = np.array([rank + 1, job["MASTER_PORT"], -job["MASTER_PORT"]], dtype=np.int64)
        comm.all_reduce(x[:1])
        comm.all_reduce(x[1:], op=tutti.MAX)
        check(x[0] == size * (size + 1) // 2, "AllReduce sum %d" % x[0])
        check(x[1] == job["MASTER_PORT"] and -x[2] == job["MASTER_PORT"],
              "ranks disagree on MASTER_PORT (%d here, max %d, min %d)" % (
                  job["MASTER_PORT"], x[1], -x[2]))
    if mode == "tutti-run":
        os.environ["MASTER_ADDR"] = before["MASTER_ADDR"]
        os.environ["MASTER_PORT"] = before["MASTER_PORT"]
    return rank, size


def torch_part(rank, size):
    missing = [what for what, ok in (
        ("g++", shutil.which("c++")), ("ninja-build", shutil.which("ninja")),
        ("pybind11-dev", os.path.isfile("/usr/include/pybind11/pybind11.h")),
        ("libtorch-dev", os.path.isdir("/usr/include/torch/csrc/distributed"))) if not ok]
    if missing:
        print("SKIP: torch part: tutti.torch needs %s" % ", ".join(missing))
        raise SystemExit(77)
    try:
        import torch
        import torch.distributed as dist
        import tutti.torch  # noqa: F401  (registers "tutti"; compiles the shim the first time)
    except Exception as e:  # noqa: BLE001
        print("SKIP: torch part: %s" % e)
        raise SystemExit(77)
    dist.init_process_group("tutti")  # env://, from the variables alone
    check(dist.get_rank() == rank and dist.get_world_size() == size, "process group shape")
    t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t)
    want = torch.arange(1000, dtype=torch.float32) * (size * (size + 1) // 2)
    check(torch.equal(t, want), "torch all_reduce")
    dist.destroy_process_group()


def main():
    mode = sys.argv[1]
    rank, size = tutti_part(mode)
    torch_part(rank, size)
    print("rank %d of %d: %s launch ok" % (rank, size, mode))


if __name__ == "__main__":
    main()
