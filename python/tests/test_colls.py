"""Every collective x every datatype x every reduction operator (the five built-ins and a
PreMulSum user operator) x in place and out of place, compared bit for bit with references
computed in numpy (reference.py). Run under tutti-run -n N; every rank checks its own results.
"""

import faulthandler
import signal

import numpy as np

import reference as ref
import tutti

OPS = ["sum", "prod", "max", "min", "avg", "premul"]
COUNTS = [0, 1, 7, 1000, 40001]


# tutti-run stops a rank with SIGTERM (its --timeout, or a failed peer): say where it was.
faulthandler.register(signal.SIGTERM, all_threads=True)


def main():
    comm = tutti.Comm.from_env()
    rank, n = comm.rank, comm.size
    fail = ref.Failures(rank)
    seed = 0

    def alloc(count, dt):
        # Alternate plain numpy memory and ncclMemAlloc memory (tutti.empty).
        if seed % 2:
            return tutti.empty(count, dt)
        return np.empty(count, dtype=ref.STORAGE[dt])

    def inputs(dt, op, count):
        vals = [ref.make_input(dt, op, n, r, count, seed) for r in range(n)]
        return vals, [ref.encode(v, dt) for v in vals]

    for dt in ref.ALL_DTYPES:
        # bfloat16 and fp8 must be named; the others are inferred, except every third case.
        kw = {"dtype": dt} if dt in ref.NEEDS_DTYPE else {}
        for op in OPS:
            if op == "premul":
                redop = comm.premul_sum(2, dt)
            else:
                redop = getattr(tutti.RedOp, op.upper())
            for count in COUNTS:
                seed += 1
                if seed % 3 == 0:
                    kw = {"dtype": dt.name.lower()}
                vals, enc = inputs(dt, op, count)
                want = ref.reduce_ref(vals, dt, op, n)
                what = "%s %s count %d" % (dt.name.lower(), op, count)
                root = seed % n

                # AllReduce, out of place and in place.
                send, recv = alloc(count, dt), alloc(count, dt)
                send[:] = enc[rank]
                comm.all_reduce(send, recv, redop, **kw)
                fail.check(recv, want, "all_reduce " + what)
                fail.check(send, enc[rank], "all_reduce sendbuf untouched " + what)
                comm.all_reduce(send, op=redop, **kw)
                fail.check(send, want, "all_reduce in place " + what)

                # Reduce to a varying root.
                send[:] = enc[rank]
                recv[:] = 0
                comm.reduce(send, recv, redop, root=root, **kw)
                if rank == root:
                    fail.check(recv, want, "reduce root %d %s" % (root, what))
                comm.reduce(send, op=redop, root=root, **kw)
                if rank == root:
                    fail.check(send, want, "reduce in place root %d %s" % (root, what))

                # ReduceScatter: rank r's block of each input is its r-th `count` elements.
                vals, enc = inputs(dt, op, count * n)
                full = ref.reduce_ref(vals, dt, op, n)
                mine = full[rank * count:(rank + 1) * count]
                big = alloc(count * n, dt)
                big[:] = enc[rank]
                comm.reduce_scatter(big, recv, redop, **kw)
                fail.check(recv, mine, "reduce_scatter " + what)
                comm.reduce_scatter(big, big[rank * count:(rank + 1) * count], redop, **kw)
                fail.check(big[rank * count:(rank + 1) * count], mine,
                           "reduce_scatter in place " + what)

                # ReduceScatterV: block r holds count - r elements (none past count), at the
                # counts' running sums; then in place, with a gap of one after each block.
                cnt = [max(count - r, 0) for r in range(n)]
                at = np.cumsum([0] + cnt)
                vals, enc = inputs(dt, op, int(at[-1]))
                full = ref.reduce_ref(vals, dt, op, n)
                mine = full[at[rank]:at[rank] + cnt[rank]]
                big = alloc(int(at[-1]), dt)
                big[:] = enc[rank]
                out = alloc(cnt[rank], dt)
                comm.reduce_scatter_v(big, out, cnt, op=redop, **kw)
                fail.check(out, mine, "reduce_scatter_v " + what)
                fail.check(big, enc[rank], "reduce_scatter_v sendbuf untouched " + what)
                gapped = [int(at[r]) + r for r in range(n)]
                wide = alloc(int(at[-1]) + n, dt)
                for r in range(n):
                    wide[gapped[r]:gapped[r] + cnt[r]] = enc[rank][at[r]:at[r] + cnt[r]]
                    wide[gapped[r] + cnt[r]] = enc[rank][0] if count else 0
                before = wide.copy()
                own = wide[gapped[rank]:gapped[rank] + cnt[rank]]
                comm.reduce_scatter_v(wide, own, cnt, gapped, op=redop, **kw)
                fail.check(own, mine, "reduce_scatter_v in place " + what)
                before[gapped[rank]:gapped[rank] + cnt[rank]] = mine
                fail.check(wide, before, "reduce_scatter_v in place, the rest " + what)
            if op == "premul":
                redop.destroy()

        for count in COUNTS:
            seed += 1
            what = "%s count %d" % (dt.name.lower(), count)
            root = seed % n
            enc = [ref.encode(ref.make_input(dt, "sum", n, r, count * n, seed), dt)
                   for r in range(n)]
            block = [e[:count] for e in enc]

            # Broadcast, out of place and in place.
            send, recv = alloc(count, dt), alloc(count, dt)
            send[:] = block[rank]
            recv[:] = 0
            comm.broadcast(send, recv, root=root, **kw)
            fail.check(recv, block[root], "broadcast root %d %s" % (root, what))
            comm.broadcast(send, root=root, **kw)
            fail.check(send, block[root], "broadcast in place root %d %s" % (root, what))

            # AllGather: block r of the result is rank r's input.
            gathered = np.concatenate(block) if count else np.zeros(0, ref.STORAGE[dt])
            send[:] = block[rank]
            big = alloc(count * n, dt)
            big[:] = 0
            comm.all_gather(send, big, **kw)
            fail.check(big, gathered, "all_gather " + what)
            big[:] = 0
            big[rank * count:(rank + 1) * count] = block[rank]
            comm.all_gather(big[rank * count:(rank + 1) * count], big, **kw)
            fail.check(big, gathered, "all_gather in place " + what)

            # AllGatherV: rank r gives its first count - r elements (none past count).
            cnt = [max(count - r, 0) for r in range(n)]
            want = np.concatenate([enc[r][:cnt[r]] for r in range(n)])
            src = alloc(cnt[rank], dt)
            src[:] = enc[rank][:cnt[rank]]
            dst = alloc(int(sum(cnt)), dt)
            comm.all_gather_v(src, dst, cnt, **kw)
            fail.check(dst, want, "all_gather_v " + what)

            # AlltoAllV: rank i sends (i + j) % 3 * count elements to rank j, from its input's
            # start (every block from the same elements), to the counts' running sums.
            sc = [(rank + j) % 3 * count for j in range(n)]
            rc = [(i + rank) % 3 * count for i in range(n)]
            src = alloc(max(sc + [0]), dt)
            src[:] = enc[rank][:len(src)] if len(src) <= len(enc[rank]) else 0
            dst = alloc(sum(rc), dt)
            comm.alltoall_v(src, sc, dst, rc, [0] * n, **kw)
            want = np.concatenate([enc[i][:rc[i]] for i in range(n)])
            fail.check(dst, want, "alltoall_v " + what)

            # AlltoAll: block j of rank i's input goes to block i of rank j's output.
            src = alloc(count * n, dt)
            src[:] = enc[rank]
            dst = alloc(count * n, dt)
            comm.alltoall(src, dst, **kw)
            want = np.concatenate([enc[r][rank * count:(rank + 1) * count] for r in range(n)])
            fail.check(dst, want, "alltoall " + what)

            # Gather to and Scatter from a varying root.
            big[:] = 0
            comm.gather(send, big if rank == root else None, root=root, **kw)
            if rank == root:
                fail.check(big, gathered, "gather root %d %s" % (root, what))
            recv[:] = 0
            comm.scatter(src if rank == root else None, recv, root=root, **kw)
            fail.check(recv, enc[root][rank * count:(rank + 1) * count],
                       "scatter root %d %s" % (root, what))

            # Send/Recv around the ring, both directions at once, in one group.
            right, left = (rank + 1) % n, (rank - 1) % n
            from_left, from_right = alloc(count, dt), alloc(count, dt)
            with tutti.group():
                comm.send(send, right, **kw)
                comm.send(send, left, **kw)
                comm.recv(from_left, left, **kw)
                comm.recv(from_right, right, **kw)
            fail.check(from_left, block[left], "recv from left " + what)
            fail.check(from_right, block[right], "recv from right " + what)

    comm.destroy()
    fail.finish("collectives on %d ranks" % n)


if __name__ == "__main__":
    main()
