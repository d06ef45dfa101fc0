"""tutti.torch on every rank of a tutti-run job: torch.distributed initialised with the
"tutti" backend through a FileStore (a file named after tutti-run's pid, which every rank
shares as its parent), then allreduce (sum, avg, max), broadcast, reduce, all_gather and
reduce_scatter (lists and single tensors), all_to_all_single, gather, scatter, barrier and
send/recv on CPU tensors, compared exactly with what they must produce, and the clear errors
of what is not supported.
"""

import os
import tempfile

import torch
import torch.distributed as dist

import tutti.torch as tutti_torch  # registers the backend "tutti"


def main():
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rdzv = os.path.join(tempfile.gettempdir(), "tutti_torch_test_%d" % os.getppid())
    dist.init_process_group("tutti", init_method="file://" + rdzv, rank=rank, world_size=n)
    assert dist.get_backend() == "tutti", dist.get_backend()
    assert tutti_torch.extension() is not None
    ranks_sum = n * (n - 1) // 2

    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.int8,
                  torch.uint8, torch.float16, torch.bfloat16):
        x = torch.full((1000,), rank + 1, dtype=dtype)
        dist.all_reduce(x)
        assert torch.equal(x, torch.full((1000,), n * (n + 1) // 2, dtype=dtype)), (dtype, x)

    x = torch.arange(6, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    assert torch.equal(x, torch.arange(6, dtype=torch.float64) * n), x
    x = torch.full((4,), float(2 * rank))
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.equal(x, torch.full((4,), float(n - 1))), x
    work = dist.all_reduce(torch.ones(3), async_op=True)
    work.wait()
    assert torch.equal(work.get_future().value()[0], torch.full((3,), float(n)))

    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b, torch.full((5,), float(n - 1))), b

    r = torch.full((3,), rank, dtype=torch.int64)
    dist.reduce(r, dst=0)
    if rank == 0:
        assert torch.equal(r, torch.full((3,), ranks_sum)), r

    outs = [torch.zeros(2, 3) for _ in range(n)]
    dist.all_gather(outs, torch.full((2, 3), float(rank)))
    for q in range(n):
        assert torch.equal(outs[q], torch.full((2, 3), float(q))), outs
    flat = torch.zeros(n * 4, dtype=torch.int32)
    dist.all_gather_into_tensor(flat, torch.full((4,), rank, dtype=torch.int32))
    assert torch.equal(flat, torch.arange(n, dtype=torch.int32).repeat_interleave(4)), flat

    rs = torch.zeros(3, dtype=torch.int64)
    dist.reduce_scatter(rs, [torch.full((3,), q * 10 + rank, dtype=torch.int64)
                             for q in range(n)])
    assert torch.equal(rs, torch.full((3,), n * rank * 10 + ranks_sum)), rs
    rst = torch.zeros(2)
    dist.reduce_scatter_tensor(rst, torch.arange(2 * n, dtype=torch.float32),
                               op=dist.ReduceOp.MAX)
    assert torch.equal(rst, torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32)), rst

    a2a = torch.zeros(2 * n)
    dist.all_to_all_single(a2a, torch.arange(2 * n, dtype=torch.float32) + 100 * rank)
    want = torch.tensor([100.0 * q + 2 * rank + i for q in range(n) for i in range(2)])
    assert torch.equal(a2a, want), a2a

    root = n - 1
    glist = [torch.zeros(2, dtype=torch.int32) for _ in range(n)] if rank == root else None
    dist.gather(torch.full((2,), rank, dtype=torch.int32), glist, dst=root)
    if rank == root:
        for q in range(n):
            assert torch.equal(glist[q], torch.full((2,), q, dtype=torch.int32)), glist
    sc = torch.zeros(3)
    slist = [torch.full((3,), float(q * q)) for q in range(n)] if rank == 0 else None
    dist.scatter(sc, slist, src=0)
    assert torch.equal(sc, torch.full((3,), float(rank * rank))), sc

    dist.barrier()

    if rank == 0:
        dist.send(torch.arange(5, dtype=torch.float32), dst=1)
    elif rank == 1:
        got = torch.zeros(5)
        dist.recv(got, src=0)
        assert torch.equal(got, torch.arange(5, dtype=torch.float32)), got

    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND should be refused")
    except RuntimeError as e:
        assert "not supported" in str(e), e
    try:  # a sum of bools would not be a bool: refused until it maps to a logical op
        dist.all_reduce(torch.ones(2, dtype=torch.bool))
        raise AssertionError("bool should be refused")
    except RuntimeError as e:
        assert "not supported" in str(e), e
    try:  # every row to rank 0: uneven splits
        dist.all_to_all_single(torch.zeros(n), torch.zeros(n), [n] + [0] * (n - 1), [1] * n)
        raise AssertionError("uneven all_to_all should be refused")
    except RuntimeError as e:
        assert "uneven split sizes is not supported" in str(e), e
    try:
        dist.all_reduce(torch.ones(4)[::2])
        raise AssertionError("a strided tensor should be refused")
    except RuntimeError as e:
        assert "contiguous" in str(e), e

    dist.destroy_process_group()
    print("rank %d: tutti.torch checks passed" % rank, flush=True)


if __name__ == "__main__":
    main()
