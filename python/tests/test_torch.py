"""tutti.torch on every rank of a tutti-run job: torch.distributed initialised with the
"tutti" backend through a FileStore (a file named after tutti-run's pid, which every rank
shares as its parent). Every operation is checked exactly against what it must produce,
computed here from the ranks' inputs: all_reduce with every operator over every datatype
(bool and complex included), broadcast, reduce, all_gather and reduce_scatter (lists, of
equal and of different sizes, and single tensors), all_to_all_single (equal and uneven splits), all_to_all of lists, gather,
scatter, barrier, send/recv and isend/irecv in both directions at once, batch_isend_irecv,
an irecv posted across an all_to_all of its size (run over TCP too: TUTTI_TORCH_TEST_ONLY),
non-contiguous tensors, async_op with wait(), is_completed() and get_future() (on a group
whose collectives all go through the host stream, and on one where small ones run inline, in
issue order behind a queued large one), subgroups, the
allocator of large tensors (reuse, fork() giving the child private pages, and its budget of
descriptors); teardown with an operation pending, a forked child's exit (those in
torch_lifecycle.py), a non-contiguous
leaf that requires grad as an output and an overlapping one refused; then the error paths, each on a subgroup of its own since a failed communicator stays failed:
mismatched sizes and datatypes across ranks, wrong arguments found locally, and the group's
timeout (inline and on the stream).
"""

import datetime
import faulthandler
import os
import signal
import tempfile
import time

import torch
import torch.distributed as dist

import tutti.torch as tutti_torch  # registers the backend "tutti"
from torch_lifecycle import (async_group, check_allocator, check_allocator_budget,  # noqa: F401
                             check_fork_exit, check_teardown, check_teardown_pending)


# tutti-run stops a rank with SIGTERM (its --timeout, or a failed peer): say where it was.
faulthandler.register(signal.SIGTERM, all_threads=True)


def expect_error(fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        text = str(e)
        for needle in needles:
            assert needle in text, "expected %r in the error, got: %s" % (needle, text)
        return text
    raise AssertionError("no error raised; expected one mentioning %r" % (needles,))


def check_all_reduce(rank, n):
    dtypes = (torch.float32, torch.float64, torch.int32, torch.int64, torch.int8, torch.uint8,
              torch.float16, torch.bfloat16)
    for dtype in dtypes:
        for count in (0, 1, 7, 1000, 70001):
            x = torch.full((count,), rank + 1, dtype=dtype)
            dist.all_reduce(x)
            assert torch.equal(x, torch.full((count,), n * (n + 1) // 2, dtype=dtype)), (dtype, x)
        x = torch.arange(6, dtype=dtype) + rank
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        assert torch.equal(x, torch.arange(6, dtype=dtype) + n - 1), (dtype, x)
        x = torch.arange(6, dtype=dtype) + rank
        dist.all_reduce(x, op=dist.ReduceOp.MIN)
        assert torch.equal(x, torch.arange(6, dtype=dtype)), (dtype, x)
        x = torch.full((5,), 1 + (rank % 2), dtype=dtype)  # 1 and 2: the product is 2^(n//2)
        dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
        assert torch.equal(x, torch.full((5,), 2 ** (n // 2), dtype=dtype)), (dtype, x)
    x = torch.full((4,), float(2 * rank))
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.equal(x, torch.full((4,), float(n - 1))), x
    # bool: a sum is a logical or, a product a logical and
    x = torch.tensor([rank == 0, False, True])
    dist.all_reduce(x)
    assert torch.equal(x, torch.tensor([True, False, True])), x
    x = torch.tensor([rank == 0, True])
    dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
    assert torch.equal(x, torch.tensor([False, True])), x
    # complex: sums of pairs of reals
    x = torch.tensor([complex(rank, -rank), complex(1, 2)], dtype=torch.complex64)
    dist.all_reduce(x)
    s = float(n * (n - 1) // 2)
    assert torch.equal(x, torch.tensor([complex(s, -s), complex(n, 2 * n)],
                                       dtype=torch.complex64)), x
    # non-contiguous: every other element of a larger tensor, the rest untouched
    base = torch.full((10,), -1.0)
    view = base[::2]
    view.fill_(float(rank))
    dist.all_reduce(view)
    assert torch.equal(base[::2], torch.full((5,), s)), base
    assert torch.equal(base[1::2], torch.full((5,), -1.0)), base


def check_async(rank, n, g=None):
    works = []
    tensors = []
    for i in range(8):
        t = torch.full((1 << (i + 6),), float(rank + i))
        tensors.append(t)
        works.append(dist.all_reduce(t, group=g, async_op=True))
    futs = [w.get_future() for w in works]
    for i, w in enumerate(works):
        w.wait()
        assert w.is_completed() and w.is_success()
        want = torch.full((1 << (i + 6),), float(n * (n - 1) // 2 + n * i))
        assert torch.equal(tensors[i], want), i
        assert torch.equal(futs[i].wait()[0], want), i
    # a future completes without anyone calling wait(): the completion thread does it
    t = torch.ones(100)
    fut = dist.all_reduce(t, group=g, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((100,), 2.0 * n))
    w = dist.broadcast(torch.zeros(3), src=0, group=g, async_op=True)
    deadline = time.time() + 30
    while not w.is_completed():
        assert time.time() < deadline, "is_completed() never became true"
        time.sleep(0.001)
    w.wait(datetime.timedelta(seconds=30))


def check_issue_order(rank, n):
    """Operations queued on one stream see each other's results in issue order, also where
    the shim copies through a contiguous buffer (a non-contiguous tensor, a list): an input is
    copied when its turn comes, and a collective that copies results back completes first."""
    g = async_group(n)
    total = float(n * (n - 1) // 2)
    x = torch.zeros(4, 2).t()  # non-contiguous, 8 elements
    x.fill_(float(rank))
    if rank == n - 1:
        time.sleep(0.3)
    h = dist.all_reduce(x, group=g, async_op=True)
    dist.broadcast(x, src=0, group=g)  # rank 0 sends the sum the all_reduce made
    h.wait()
    assert torch.equal(x, torch.full((2, 4), total)), x
    # the last rank comes late, so that elsewhere the first operation is still pending when
    # the second is issued
    outs = [torch.zeros(3) for _ in range(n)]
    if rank == n - 1:
        time.sleep(0.3)
    h = dist.all_gather(outs, torch.full((3,), rank + 1.0), group=g, async_op=True)
    dist.all_reduce(outs[n - 1], group=g)  # every rank holds n there once the gather is done
    h.wait()
    assert torch.equal(outs[n - 1], torch.full((3,), float(n * n))), outs
    y = torch.full((2,), float(rank), dtype=torch.float64)
    if rank == n - 1:
        time.sleep(0.3)
    h = dist.all_reduce(y, group=g, async_op=True)
    rs = torch.zeros(2, dtype=torch.float64)
    dist.reduce_scatter(rs, [y] * n, group=g)  # reads y once the all_reduce is done
    h.wait()
    assert torch.equal(rs, torch.full((2,), total * n, dtype=torch.float64)), rs
    dist.destroy_process_group(g)


def check_release_in_callback(rank, n):
    """A group whose last reference a future's callback lets go, on the group's completion
    thread, is destroyed there: that thread could not join itself (std::terminate before)."""
    g = async_group(n)
    holder = [g]
    if rank == n - 1:
        time.sleep(0.3)  # elsewhere the all_reduce is still pending when then() is attached
    t = torch.ones(4)
    fut = dist.all_reduce(t, group=g, async_op=True).get_future()
    chained = fut.then(lambda f, h=holder: (h.clear(), f.value())[1])
    dist.destroy_process_group(g)
    del g, holder
    chained.wait()
    assert torch.equal(t, torch.full((4,), float(n))), t
    dist.barrier()


def check_wait_in_callback(rank, n):
    """A future's callback, run on the group's completion thread, issues an operation of the
    same group and waits for its future (as torch's PowerSGD hook does): the operation
    completes there and then (before, the thread waited for a future only it completes, for
    good). The group sends every collective through its stream."""
    g = async_group(n)
    t, u = torch.full((4,), float(rank)), torch.ones(4)

    def then(f):
        w = dist.all_reduce(u, group=g, async_op=True)
        w.get_future().wait()
        return f.value()[0] + u

    if rank == n - 1:
        time.sleep(0.3)  # elsewhere the all_reduce is still pending when then() is attached
    got = dist.all_reduce(t, group=g, async_op=True).get_future().then(then).wait()
    want = float(n * (n - 1) // 2) + n
    assert torch.equal(got, torch.full((4,), want)), got
    dist.destroy_process_group(g)


def check_inline(rank, n):
    """Collectives up to TUTTI_TORCH_INLINE_BYTES run on the calling thread when nothing is
    queued ahead of them: complete when returned. Behind a larger one that went on the stream
    they queue too, and everything completes in issue order with the right sums."""
    os.environ["TUTTI_TORCH_INLINE_BYTES"] = "4096"
    try:
        g = dist.new_group(list(range(n)))
    finally:
        del os.environ["TUTTI_TORCH_INLINE_BYTES"]
    small = torch.full((1024,), float(rank))  # 4096 bytes: inline
    w = dist.all_reduce(small, group=g, async_op=True)
    assert w.is_completed() and w.is_success()
    ranks_sum = float(n * (n - 1) // 2)
    assert torch.equal(small, torch.full((1024,), ranks_sum)), small
    assert torch.equal(w.get_future().wait()[0], small)
    w.wait()
    # a large one, then small ones: these must not overtake it
    big = torch.full((1 << 16,), float(rank))
    smalls = [torch.full((4,), float(rank + i)) for i in range(6)]
    works = [dist.all_reduce(big, group=g, async_op=True)]
    works += [dist.all_reduce(t, group=g, async_op=True) for t in smalls]
    order = []
    # A future is marked complete before its callbacks run (on the thread that completed it):
    # what shows a callback ran is the future then() returns.
    chained = [w.get_future().then(lambda f, i=i: order.append(i)) for i, w in enumerate(works)]
    for w in works:
        w.wait()
    for c in chained:
        c.wait()
    assert torch.equal(big, torch.full((1 << 16,), ranks_sum)), big
    for i, t in enumerate(smalls):
        assert torch.equal(t, torch.full((4,), ranks_sum + n * i)), (i, t)
    assert sorted(order) == list(range(len(works))), order  # every future completed
    # every kind of collective inline, non-contiguous output included
    base = torch.full((8,), -1.0)
    view = base[::2]
    view.fill_(float(rank))
    dist.all_reduce(view, group=g)
    assert torch.equal(base[::2], torch.full((4,), ranks_sum)) and \
        torch.equal(base[1::2], torch.full((4,), -1.0)), base
    outs = [torch.zeros(3) for _ in range(n)]
    dist.all_gather(outs, torch.full((3,), float(rank)), group=g)
    for r in range(n):
        assert torch.equal(outs[r], torch.full((3,), float(r))), outs
    dist.barrier(group=g)


def check_collectives(rank, n):
    ranks_sum = n * (n - 1) // 2
    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b, torch.full((5,), float(n - 1))), b

    r = torch.full((3,), rank, dtype=torch.int64)
    dist.reduce(r, dst=0)
    want = torch.full((3,), ranks_sum) if rank == 0 else torch.full((3,), rank)
    assert torch.equal(r, want), r
    r = torch.full((3,), rank + 1.0)
    dist.reduce(r, dst=n - 1, op=dist.ReduceOp.MAX)
    if rank == n - 1:
        assert torch.equal(r, torch.full((3,), float(n))), r

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
    # lists of different sizes (tuttiAllGatherV, tuttiReduceScatterV): block q has q + 1
    # elements of width 2, non-contiguous outputs among them
    outs = [torch.zeros(2, q + 1).t() for q in range(n)]
    dist.all_gather(outs, torch.full((rank + 1, 2), rank * 10.0 + 1))
    for q in range(n):
        assert torch.equal(outs[q], torch.full((q + 1, 2), q * 10.0 + 1)), outs
    rs = torch.zeros(rank + 2, dtype=torch.int32)
    dist.reduce_scatter(rs, [torch.arange(q + 2, dtype=torch.int32) * (rank + 1)
                             for q in range(n)], op=dist.ReduceOp.SUM)
    assert torch.equal(rs, torch.arange(rank + 2, dtype=torch.int32) * (n * (n + 1) // 2)), rs
    rs = torch.zeros(rank + 1)
    dist.reduce_scatter(rs, [torch.full((q + 1,), float(rank + q)) for q in range(n)],
                        op=dist.ReduceOp.MIN)
    assert torch.equal(rs, torch.full((rank + 1,), float(rank))), rs
    # complex: each element moves as two reals (torch's all_gather views complex tensors as
    # real itself, so the process group is called directly, as torch 2.x's may)
    outs = [torch.zeros(q + 1, dtype=torch.complex64) for q in range(n)]
    pg = dist.distributed_c10d._get_default_group()
    pg.allgather([outs], [torch.full((rank + 1,), complex(rank, -rank),
                                     dtype=torch.complex64)]).wait()
    for q in range(n):
        assert torch.equal(outs[q], torch.full((q + 1,), complex(q, -q),
                                               dtype=torch.complex64)), outs
    rs = torch.zeros(rank + 1, dtype=torch.complex128)
    dist.reduce_scatter(rs, [torch.full((q + 1,), complex(q, rank), dtype=torch.complex128)
                             for q in range(n)])
    assert torch.equal(rs, torch.full((rank + 1,), complex(n * rank, n * (n - 1) // 2),
                                      dtype=torch.complex128)), rs
    rst = torch.zeros(2)
    dist.reduce_scatter_tensor(rst, torch.arange(2 * n, dtype=torch.float32),
                               op=dist.ReduceOp.MAX)
    assert torch.equal(rst, torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float32)), rst
    rst = torch.zeros(1000, dtype=torch.float64)
    dist.reduce_scatter_tensor(rst, torch.arange(1000 * n, dtype=torch.float64) + rank)
    want = (torch.arange(1000, dtype=torch.float64) + 1000 * rank) * n + ranks_sum
    assert torch.equal(rst, want), rst

    a2a = torch.zeros(2 * n)
    dist.all_to_all_single(a2a, torch.arange(2 * n, dtype=torch.float32) + 100 * rank)
    want = torch.tensor([100.0 * q + 2 * rank + i for q in range(n) for i in range(2)])
    assert torch.equal(a2a, want), a2a
    # uneven: rank r sends q+1 rows of width 3 to rank q, all holding 10*r + q
    inp = torch.cat([torch.full((q + 1, 3), 10.0 * rank + q) for q in range(n)])
    out = torch.zeros(n * (rank + 1), 3)
    dist.all_to_all_single(out, inp, output_split_sizes=[rank + 1] * n,
                           input_split_sizes=[q + 1 for q in range(n)])
    want = torch.cat([torch.full((rank + 1, 3), 10.0 * q + rank) for q in range(n)])
    assert torch.equal(out, want), out
    # splits that are equal on rank 0 only: every rank must still run the same call
    rows = lambda r, q: 1 if r == 0 or q == 0 else 2  # noqa: E731
    inp = torch.cat([torch.full((rows(rank, q),), 10 * rank + q, dtype=torch.int32)
                     for q in range(n)])
    out = torch.zeros(sum(rows(q, rank) for q in range(n)), dtype=torch.int32)
    dist.all_to_all_single(out, inp, output_split_sizes=[rows(q, rank) for q in range(n)],
                           input_split_sizes=[rows(rank, q) for q in range(n)])
    want = torch.cat([torch.full((rows(q, rank),), 10 * q + rank, dtype=torch.int32)
                      for q in range(n)])
    assert torch.equal(out, want), out
    # lists of different sizes
    ins = [torch.full((q + rank + 1,), rank * 100 + q, dtype=torch.int64) for q in range(n)]
    outs = [torch.zeros(rank + q + 1, dtype=torch.int64) for q in range(n)]
    dist.all_to_all(outs, ins)
    for q in range(n):
        assert torch.equal(outs[q], torch.full((rank + q + 1,), q * 100 + rank)), outs

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


def check_p2p(rank, n):
    if rank < 2:
        peer = 1 - rank
        # both ranks send first, large enough not to fit the FIFO: needs one stream per direction
        big = 3 << 20
        out = torch.arange(big, dtype=torch.float32) + rank
        got = torch.zeros(big)
        s = dist.isend(out, dst=peer)
        r = dist.irecv(got, src=peer)
        s.wait()
        r.wait()
        assert torch.equal(got, torch.arange(big, dtype=torch.float32) + peer)
        dist.send(torch.full((5,), float(rank)), dst=peer)
        got = torch.zeros(5)
        dist.recv(got, src=peer)
        assert torch.equal(got, torch.full((5,), float(peer))), got
    # a ring of isend/irecv through batch_isend_irecv
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(4, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, torch.full((4,), rank, dtype=torch.int64), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, torch.full((4,), prv, dtype=torch.int64)), got


def check_p2p_ring_first_contact(rank, n):
    """batch_isend_irecv's ring as a group's very first point-to-point operation, each rank
    sending before it receives from peers it never met: one Tutti group (torch's coalescing
    manager), so the connections are made all at once (before, each rank's send waited for
    its next rank's, in a circle, until TUTTI_TIMEOUT_MS)."""
    g = dist.new_group(list(range(n)))
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(4, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, torch.full((4,), rank, dtype=torch.int64), nxt, g),
           dist.P2POp(dist.irecv, got, prv, g)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, torch.full((4,), prv, dtype=torch.int64)), got
    # An operation of the batch that the shim refuses (a type Tutti has not) fails the whole
    # batch, as a call that fails inside a C group does: the send to self and its receive
    # before it never ran.
    mine = torch.zeros(4, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, torch.full((4,), 7, dtype=torch.int64), rank, g),
           dist.P2POp(dist.irecv, mine, rank, g),
           dist.P2POp(dist.isend, torch.ones(4, dtype=torch.int16), nxt, g)]
    expect_error(lambda: dist.batch_isend_irecv(ops), "not supported")
    time.sleep(0.2)
    assert torch.equal(mine, torch.zeros(4, dtype=torch.int64)), mine
    dist.destroy_process_group(g)


def check_after_p2p(rank, n):
    """Once a process has sent or received, its collectives are asynchronous again even when
    small: rank 0 issues an all_reduce with async_op=True, then sends to rank 1, which receives
    before it joins the all_reduce. Run inline, rank 0's all_reduce would wait for rank 1 and
    rank 1's recv for rank 0 until the group's timeout (tutti-run's --timeout fails the test
    first)."""
    t = torch.full((16,), float(rank))
    msg = torch.zeros(4)
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        dist.send(torch.full((4,), 7.0), dst=1)
        w.wait()
    elif rank == 1:
        dist.recv(msg, src=0)
        assert torch.equal(msg, torch.full((4,), 7.0)), msg
        dist.all_reduce(t)
    else:
        dist.all_reduce(t)
    assert torch.equal(t, torch.full((16,), float(n * (n - 1) // 2))), t


def check_p2p_beside_all_to_all(rank, n):
    """Point-to-point never takes a collective's data: once ranks 0 and 1 are connected, rank 0
    posts an irecv from rank 1, then joins an all_to_all_single whose blocks have the receive's
    size; rank 1 joins the all_to_all, then sends. Across hosts (TCP) an all_to_all is sends and
    receives matched in issue order, so on one communicator the receive took rank 1's block and
    the all_to_all rank 1's send (wrong data, no error); tutti.torch gives point-to-point a
    communicator of its own, as ProcessGroupNCCL does."""
    k = 4
    if rank < 2:  # connected first: the irecv below then waits for nobody to set up
        w = torch.zeros(1)
        if rank == 0:
            dist.send(w, dst=1)
            dist.recv(w, src=1)
        else:
            dist.recv(w, src=0)
            dist.send(w, dst=0)
    inp = torch.arange(k * n, dtype=torch.float32) + 1000 * rank
    out = torch.zeros(k * n)
    if rank == 0:
        got = torch.zeros(k)
        r = dist.irecv(got, src=1)
        dist.all_to_all_single(out, inp)
        r.wait()
        assert torch.equal(got, torch.full((k,), -1.0)), got
    elif rank == 1:
        dist.all_to_all_single(out, inp)
        dist.send(torch.full((k,), -1.0), dst=0)
    else:
        dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank * k, rank * k + k, dtype=torch.float32) + 1000 * q
                      for q in range(n)])
    assert torch.equal(out, want), out


def check_subgroups(rank, n):
    evens = list(range(0, n, 2))
    g = dist.new_group(evens)
    if rank in evens:
        # Sequence numbers count the group's collectives, alike on every member.
        g._set_sequence_number_for_group()
        assert g._get_sequence_number_for_group() == 0, g._get_sequence_number_for_group()
        x = torch.full((3,), float(rank))
        dist.all_reduce(x, group=g)
        assert torch.equal(x, torch.full((3,), float(sum(evens)))), x
        seq = torch.tensor([g._get_sequence_number_for_group()], dtype=torch.int64)
        seqs = [torch.zeros(1, dtype=torch.int64) for _ in evens]
        dist.all_gather(seqs, seq, group=g)
        assert [int(s) for s in seqs] == [1] * len(evens), seqs


def check_outputs_special(rank, n):
    """A non-contiguous leaf that requires grad is written like any tensor (the copy back is
    not autograd's business), and an output whose elements share memory is refused before
    anything runs."""
    x = torch.ones(3, 4).t().detach().requires_grad_()
    assert not x.is_contiguous() and x.is_leaf
    dist.all_reduce(x)
    assert torch.equal(x.detach(), torch.full((4, 3), float(n))), x
    expect_error(lambda: dist.all_reduce(torch.zeros(1).expand(4)), "share memory")
    # Outputs of a gather into a list are copied out of one buffer: leaves that require grad
    # too, on the completion thread (where grad mode is on).
    outs = [torch.zeros(3).requires_grad_() for _ in range(n)]
    w = dist.all_gather(outs, torch.full((3,), float(rank)), async_op=True)
    w.wait()
    for r, o in enumerate(outs):
        assert torch.equal(o.detach(), torch.full((3,), float(r))), (r, o)
    y = torch.ones(2)
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((2,), float(n)))


def check_errors(rank, n):
    # found before anything is issued: the communicator stays usable
    expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32),
                                         op=dist.ReduceOp.BAND), "not supported")
    expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)),
                 "tensors of type Short are not supported")
    expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool),
                                         op=dist.ReduceOp.AVG), "AVG of bool")
    expect_error(lambda: dist.all_to_all_single(torch.zeros(n), torch.zeros(n),
                                                [n] + [0] * (n - 1), [2] * n),
                 "input split sizes add up to")
    x = torch.zeros(2 * n)
    expect_error(lambda: dist.all_to_all_single(x, x, [1] * n, [1] * n), "overlap")
    expect_error(lambda: dist.all_to_all_single(x[1:], x[:-1]), "overlap")
    # interleaved views share no element: each is staged through a copy of its own
    xy = torch.zeros(n, 2)
    xy[:, 0] = torch.arange(n) + 10 * rank
    dist.all_to_all_single(xy[:, 1], xy[:, 0])
    assert torch.equal(xy[:, 1], torch.arange(n) * 10.0 + rank), xy
    expect_error(lambda: dist.all_gather_into_tensor(torch.zeros(n + 1), torch.zeros(1)),
                 "world_size x the input's elements")
    expect_error(lambda: dist.reduce_scatter_tensor(torch.zeros(2), torch.zeros(2 * n + 1)),
                 "world_size x the output's elements")
    expect_error(lambda: dist.all_gather_into_tensor(torch.zeros(n, dtype=torch.int32),
                                                     torch.zeros(1)), "types differ")
    expect_error(lambda: dist.all_gather([torch.zeros(1 + (q == rank)) for q in range(n)],
                                         torch.zeros(1)), "this rank's output tensor")
    expect_error(lambda: dist.reduce_scatter(torch.zeros(1), [torch.zeros(1 + (q == rank))
                                                              for q in range(n)]),
                 "this rank's input tensor")
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(n)))

    # across ranks: every rank gets ncclInvalidUsage from Tutti's descriptor check
    g = dist.new_group(list(range(n)))
    text = expect_error(lambda: dist.all_reduce(torch.ones(4 + rank), group=g), "all_reduce",
                        "failed")
    assert "invalid usage" in text, text
    g = dist.new_group(list(range(n)))
    dtype = torch.float32 if rank == 0 else torch.int32
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=dtype), group=g), "failed",
                 "invalid usage")
    g = async_group(n)  # the same, reported by the operation's event, with its reason
    text = expect_error(lambda: dist.all_reduce(torch.ones(4 + rank), group=g), "all_reduce",
                        "failed", "count mismatch")
    assert "invalid usage" in text, text

    # the group's timeout: rank 0 waits for an all_reduce nobody else joins, run inline (the
    # completion thread watches its deadline) and on the stream
    for g in (dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=1)),
              async_group(n, timeout=datetime.timedelta(seconds=1))):
        if rank == 0:
            start = time.time()
            expect_error(lambda: dist.all_reduce(torch.ones(2), group=g), "all_reduce",
                         "timed out after 1000 ms")
            assert time.time() - start < 30
            expect_error(lambda: dist.all_reduce(torch.ones(2), group=g), "revoked")
        dist.barrier()
    # A failed operation's tensors stay with its group, not back in the allocator's hands: a
    # late peer may still write into addresses this rank had posted. Rank 0's operation, 512
    # KiB from the allocator, fails at the group's timeout; the block stays live when Python
    # lets go of the tensor.
    g = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=1))
    if rank == 0 and tutti_torch.allocator_stats()[0]:
        big = torch.ones(1 << 17)
        live = tutti_torch.allocator_stats()[3]
        try:
            dist.all_reduce(big, group=g)
            raise AssertionError("an all_reduce nobody joined did not time out")
        except RuntimeError:
            pass
        del big
        got = tutti_torch.allocator_stats()[3]
        assert got == live, "live blocks %d, want %d (the failed operation's)" % (got, live)
    dist.barrier()


def main():
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Named after this job (tutti-run's pid and its NCCL_COMM_ID's port), so a file that a
    # killed run left behind under a reused pid is not taken for this job's store.
    job = "%d_%s" % (os.getppid(), os.environ.get("NCCL_COMM_ID", "").rsplit(":", 1)[-1])
    rdzv = os.path.join(tempfile.gettempdir(), "tutti_torch_test_%s" % job)
    dist.init_process_group("tutti", init_method="file://" + rdzv, rank=rank, world_size=n)
    assert dist.get_backend() == "tutti", dist.get_backend()
    assert tutti_torch.extension() is not None
    only = os.environ.get("TUTTI_TORCH_TEST_ONLY")
    if only:  # one check, e.g. over TCP (tests/python.cmake)
        globals()["check_" + only](rank, n)
        dist.destroy_process_group()
        print("rank %d: tutti.torch check %s passed" % (rank, only), flush=True)
        return
    check_all_reduce(rank, n)
    check_async(rank, n)
    check_async(rank, n, async_group(n))
    check_inline(rank, n)
    check_issue_order(rank, n)
    check_release_in_callback(rank, n)
    check_wait_in_callback(rank, n)
    check_collectives(rank, n)
    check_p2p_ring_first_contact(rank, n)
    check_p2p(rank, n)
    check_after_p2p(rank, n)
    check_p2p_beside_all_to_all(rank, n)
    check_subgroups(rank, n)
    check_allocator(rank, n)
    check_teardown(rank, n)
    check_teardown_pending(rank, n)
    check_fork_exit(rank, n)
    check_outputs_special(rank, n)
    check_allocator_budget(rank, n)
    check_errors(rank, n)
    dist.destroy_process_group()
    print("rank %d: tutti.torch checks passed" % rank, flush=True)


if __name__ == "__main__":
    main()
