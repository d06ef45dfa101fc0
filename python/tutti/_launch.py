"""launch_env(): the variables torch.distributed's env:// needs, under any launcher.

tutti-run and torchrun set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
themselves; mpirun, mpiexec and srun set their own names. launch_env() fills in whatever of
the five is missing, from the same launcher variables and in the same order as
tuttiCommInitFromEnv (src/core/env_detect.c), so that `dist.init_process_group("tutti")` (or
"gloo") works unchanged after it. Variables already set are never changed.
"""

import os
import socket

# (rank, size, local rank, local size) per launcher, in tuttiCommInitFromEnv's order.
_LAUNCHERS = (
    ("tutti-run/torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)


def _get(name):
    v = os.environ.get(name) if name else None
    return v if v else None


def _int(name, lo, hi):
    text = _get(name)
    try:
        v = int(text, 10)
    except (TypeError, ValueError):
        v = None
    if v is None or not lo <= v <= hi:
        raise ValueError("%s=%s is not an integer in [%d, %d]" % (name, text or "", lo, hi))
    return v


def _free_port_pair():
    """A free port P on 127.0.0.1 (for the c10d store) whose neighbour P+1 is free too: a
    later Comm.from_env() in this job, finding MASTER_* but no NCCL_COMM_ID, starts Tutti's
    root at MASTER_ADDR:MASTER_PORT+1 (src/core/env_detect.c)."""
    for _ in range(64):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            p = a.getsockname()[1]
            if p >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", p + 1))
                except OSError:
                    continue
        return p
    raise RuntimeError("launch_env: cannot find two free ports on 127.0.0.1; set MASTER_ADDR "
                       "and MASTER_PORT")


def _agree_on_port(rank):
    """Rank 0's free port, told to every rank over a Tutti communicator made from the
    launcher's variables (on one host without an address: its rendezvous file)."""
    import array
    from ._comm import Comm
    port = array.array("i", [_free_port_pair() if rank == 0 else 0])
    with Comm.from_env() as comm:
        comm.broadcast(port, root=0)
    return port[0]


def launch_env():
    """Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
    os.environ where they are missing, and returns the six as a dict.

    Rank and size: RANK/WORLD_SIZE, else OMPI_COMM_WORLD_*, PMI_*, SLURM_* (the first launcher
    with either variable set), else a job of one rank. MASTER_ADDR/MASTER_PORT, the first that
    applies: both already set (by the user, tutti-run or torchrun); NCCL_COMM_ID=host:port set
    (host and port - 1, so that Tutti's MASTER_PORT+1 rule names NCCL_COMM_ID again); one
    rank: 127.0.0.1 and a free port; several ranks: 127.0.0.1 and a free port that rank 0
    picks and sends to the others over a short-lived Tutti communicator made from the
    launcher's variables, which on one host meets through its rendezvous file and elsewhere
    fails asking for NCCL_COMM_ID. That step is collective: call launch_env() on every rank.
    """
    out = {}
    for name, rank_var, size_var, lrank_var, lsize_var in _LAUNCHERS:
        if _get(rank_var) is None and _get(size_var) is None:
            continue
        if _get(rank_var) is None or _get(size_var) is None:
            raise ValueError("%s is set but %s is not (launcher: %s)" % (
                rank_var if _get(rank_var) else size_var,
                size_var if _get(rank_var) else rank_var, name))
        size = _int(size_var, 1, 2**31 - 1)
        rank = _int(rank_var, 0, size - 1)
        lrank = _int(lrank_var, 0, size - 1) if _get(lrank_var) else None
        lsize = _int(lsize_var, 1, size) if _get(lsize_var) else None
        break
    else:
        rank, size, lrank, lsize = 0, 1, 0, 1
    if lrank is None:  # no local variables: every rank on this host, as one host is the rule
        lrank, lsize = rank, size
    out.update(RANK=rank, WORLD_SIZE=size, LOCAL_RANK=lrank,
               LOCAL_WORLD_SIZE=lsize if lsize is not None else size)

    addr, port = _get("MASTER_ADDR"), _get("MASTER_PORT")
    if (addr is None) != (port is None):
        raise ValueError("%s is set but %s is not: set both or neither" % (
            "MASTER_ADDR" if addr else "MASTER_PORT", "MASTER_PORT" if addr else "MASTER_ADDR"))
    if addr is None:
        comm_id = _get("NCCL_COMM_ID")
        if comm_id is not None:
            host, _, p = comm_id.rpartition(":")
            if not host or not p.isdigit() or not 2 <= int(p) <= 65535:
                raise ValueError("NCCL_COMM_ID=%s is not host:port (port 2..65535)" % comm_id)
            addr, port = host.strip("[]"), str(int(p) - 1)
        elif size == 1:
            addr, port = "127.0.0.1", str(_free_port_pair())
        else:
            addr, port = "127.0.0.1", str(_agree_on_port(rank))
    out.update(MASTER_ADDR=addr, MASTER_PORT=int(port))
    for k, v in out.items():
        os.environ.setdefault(k, str(v))
    return out
