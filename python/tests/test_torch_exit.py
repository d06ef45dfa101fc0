"""tutti.torch at interpreter exit: the atexit handler stops every completion thread while a
future's callback, on one of them, drops the last reference to another group. That group's
destructor leaves the list of live groups; the handler must not hold the list's lock while it
waits for the threads (before, both waited for each other and the ranks never exited: tutti-run's
--timeout failed the test). Passes when every rank exits 0."""

import os
import time

import torch
import torch.distributed as dist

import tutti.torch  # noqa: F401  registers the backend "tutti"


def main():
    dist.init_process_group("tutti")
    rank, n = dist.get_rank(), dist.get_world_size()
    os.environ["TUTTI_TORCH_INLINE_BYTES"] = "-1"  # through the stream and the completion thread
    g = dist.new_group(list(range(n)))
    g2 = dist.new_group(list(range(n)))
    del os.environ["TUTTI_TORCH_INLINE_BYTES"]
    holder = [g2]
    dist.destroy_process_group(g2)  # torch lets go; `holder` has the last reference
    del g2
    t = torch.ones(4)
    if rank == n - 1:
        time.sleep(0.3)  # elsewhere the all_reduce is still pending when then() is attached

    def then(f):
        time.sleep(0.5)  # the atexit handler is stopping the completion threads meanwhile
        holder.clear()   # g2's destructor runs here, on g's completion thread
        return f.value()

    fut = dist.all_reduce(t, group=g, async_op=True).get_future().then(then)
    del fut
    print("rank %d: exiting with the callback pending" % rank, flush=True)


if __name__ == "__main__":
    main()
