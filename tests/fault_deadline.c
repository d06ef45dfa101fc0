/* Deadlines through the public API, in real processes:
 *  1. init: 3 ranks expected, rank 2 never starts. Ranks 0 and 1 must fail ncclCommInitRank
 *     within the deadline (TUTTI_TIMEOUT_MS=2000) with an error whose text names rank 2.
 *  2. data path: 2 ranks; rank 1 joins the communicator but never calls the AllReduce. Rank 0
 *     must get an error within the deadline naming the AllReduce and rank 1, and later calls on
 *     the failed communicator must fail at once.
 *  3. mismatched windows: 2 ranks; rank 0 registers its buffers as symmetric windows of
 *     ncclMemAlloc memory, rank 1 ordinary ones as plain windows, and both run an AllGather of a
 *     size where symmetric windows would change the algorithm. Window registration is
 *     collective, so the ranks agree not to count on the windows: the AllGather must succeed
 *     with exact results.
 *  4. mismatched algorithms: 2 ranks with NCCL_ALGO set differently (Direct on rank 0, Ring on
 *     rank 1) for that AllGather. Both must fail within the deadline naming the other rank, and
 *     neither may crash.
 *  5. a point-to-point sender on another host whose receiver fails: 3 ranks, each its own host
 *     (NCCL_HOSTID), so every connection is TCP and no rank sees another's team mailbox. Rank 2
 *     (deadline 30 s) sends 64 MiB to rank 1, which stops receiving from it: rank 1 waits for a
 *     second Send that rank 0 never makes (after a first one, so that it fails in the data path,
 *     not while connecting) and fails at its 2 s deadline, then lives on for 7 s with
 *     its communicator failed but not destroyed. Rank 2 must fail long before its own deadline
 *     (rank 1's failed communicator writes its reason back up the connection, then shuts its
 *     side down), with rank 1's reason: it waited for rank 0. Run twice: the
 *     connection a shared pair (both ranks ask for one socket), then two one-way streams.
 * Nothing may hang: the parent kills stragglers. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"
#include "now_s.h"

#define TIMEOUT_MS 2000

static int fail(int rank, const char *what)
{
    fprintf(stderr, "rank %d: %s\n", rank, what);
    return 1;
}

/* Child of case 1: expects init to fail in time, naming rank 2. */
static int missing_rank_child(const ncclUniqueId *id, int rank)
{
    ncclComm_t comm = NULL;
    double t0 = now_s();
    ncclResult_t res = ncclCommInitRank(&comm, 3, *id, rank);
    double took = now_s() - t0;
    const char *msg = ncclGetLastError(NULL);
    printf("rank %d: init returned %d after %.2f s: %s\n", rank, (int)res, took, msg);
    if (res == ncclSuccess) return fail(rank, "init succeeded with a rank missing");
    if (took > 3.0 * TIMEOUT_MS / 1000.0) return fail(rank, "init failed too late");
    if (strstr(msg, "2") == NULL || strstr(msg, "rank") == NULL)
        return fail(rank, "the error does not name the missing rank 2");
    return 0;
}

/* Child of case 2: rank 1 never calls the collective; rank 0 must time out naming rank 1. */
static int silent_peer_child(const ncclUniqueId *id, int rank)
{
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, 2, *id, rank) != ncclSuccess) return fail(rank, "init failed");
    if (rank == 1) {
        sleep(4 * TIMEOUT_MS / 1000);
        ncclCommDestroy(comm);
        return 0;
    }
    float buf[1024] = {0};
    double t0 = now_s();
    ncclResult_t res = ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL);
    double took = now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ncclGetLastError(comm));
    printf("rank 0: allreduce returned %d after %.2f s: %s\n", (int)res, took, msg);
    if (res == ncclSuccess) return fail(rank, "allreduce succeeded without its peer");
    if (took < 0.9 * TIMEOUT_MS / 1000.0 || took > 3.0 * TIMEOUT_MS / 1000.0)
        return fail(rank, "allreduce did not fail at its deadline");
    if (strstr(msg, "AllReduce") == NULL || strstr(msg, "rank 1") == NULL)
        return fail(rank, "the error does not name the collective and rank 1");
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess)
        return fail(rank, "the error was not latched on the communicator");
    if (ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess)
        return fail(rank, "a failed communicator accepted another collective");
    ncclCommDestroy(comm);
    return 0;
}

/* AllGather of 64 KiB blocks over `send` and `recv` (count and 2 * count floats), each rank's
 * block holding rank + 1 everywhere; *took gets the call's duration. */
#define WINDOW_COUNT 16384
static ncclResult_t run_allgather(ncclComm_t comm, int rank, float *send, float *recv,
                                  double *took)
{
    for (size_t i = 0; i < WINDOW_COUNT; i++) send[i] = (float)(rank + 1);
    double t0 = now_s();
    ncclResult_t res = ncclAllGather(send, recv, WINDOW_COUNT, ncclFloat32, comm, NULL);
    *took = now_s() - t0;
    return res;
}

/* Child of case 3: symmetric windows on rank 0, plain windows on ordinary memory on rank 1. */
static int window_mismatch_child(const ncclUniqueId *id, int rank)
{
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, 2, *id, rank) != ncclSuccess) return fail(rank, "init failed");
    const size_t count = WINDOW_COUNT;
    float *send = NULL, *recv = NULL;
    ncclWindow_t wins[2] = {NULL, NULL};
    if (rank == 0) {
        if (ncclMemAlloc((void **)&send, count * sizeof *send) != ncclSuccess ||
            ncclMemAlloc((void **)&recv, 2 * count * sizeof *recv) != ncclSuccess)
            return fail(rank, "ncclMemAlloc failed");
    } else {
        send = calloc(count, sizeof *send);
        recv = calloc(2 * count, sizeof *recv);
        if (send == NULL || recv == NULL) return fail(rank, "out of memory");
    }
    int flags = rank == 0 ? NCCL_WIN_COLL_SYMMETRIC : NCCL_WIN_DEFAULT;
    if (ncclCommWindowRegister(comm, send, count * sizeof *send, &wins[0], flags) != ncclSuccess ||
        ncclCommWindowRegister(comm, recv, 2 * count * sizeof *recv, &wins[1], flags) !=
            ncclSuccess)
        return fail(rank, "window registration failed");
    double took;
    ncclResult_t res = run_allgather(comm, rank, send, recv, &took);
    printf("rank %d: allgather returned %d after %.2f s: %s\n", rank, (int)res, took,
           res == ncclSuccess ? "" : ncclGetLastError(comm));
    if (res != ncclSuccess) return fail(rank, "the AllGather failed though the ranks agreed");
    for (size_t i = 0; i < 2 * count; i++) {
        if (recv[i] != (float)(i / count + 1)) return fail(rank, "the AllGather's result is wrong");
    }
    ncclCommWindowDeregister(comm, wins[0]);
    ncclCommWindowDeregister(comm, wins[1]);
    ncclCommDestroy(comm);
    return 0;
}

/* Child of case 4: NCCL_ALGO differs between the ranks (read at init, after the fork). The
 * ranks compare the settings that choose algorithms at init: it fails there on both, at once,
 * naming the other rank, instead of an operation waiting for the deadline. */
static int algo_mismatch_child(const ncclUniqueId *id, int rank)
{
    setenv("NCCL_ALGO", rank == 0 ? "Direct" : "Ring", 1);
    ncclComm_t comm = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t res = ncclCommInitRank(&comm, 2, *id, rank);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ncclGetLastError(NULL));
    printf("rank %d: init returned %d after %.2f s: %s\n", rank, (int)res, took, msg);
    if (res != ncclInvalidUsage) {
        if (res == ncclSuccess) ncclCommDestroy(comm);
        return fail(rank, "init with NCCL_ALGO differing between the ranks was not refused");
    }
    if (took > 3.0 * TIMEOUT_MS / 1000.0) return fail(rank, "the error came after the deadline");
    char other[32];
    snprintf(other, sizeof other, "%d", 1 - rank);
    if (strstr(msg, "different settings") == NULL || strstr(msg, other) == NULL)
        return fail(rank, "the error does not say the settings differ, naming the other rank");
    return 0;
}

/* Child of case 5. With p2p_one_way, rank 2 asks for 2 sockets per connection where rank 1
 * asks for 1, so their connection is two one-way streams rather than one shared pair. */
#define P2P_BYTES (64u << 20)
static bool p2p_one_way, p2p_ucx;
static int p2p_receiver_failed_child(const ncclUniqueId *id, int rank)
{
    char host[32];
    snprintf(host, sizeof host, "fd-p2p-host-%d", rank);
    setenv("NCCL_HOSTID", host, 1);
    if (rank == 2) setenv("TUTTI_TIMEOUT_MS", "30000", 1);
    if (rank == 2 && p2p_one_way) setenv("NCCL_NSOCKS_PERTHREAD", "2", 1);
    ncclComm_t comm = NULL;
    if (ncclCommInitRank(&comm, 3, *id, rank) != ncclSuccess) return fail(rank, "init failed");
    char *buf = calloc(P2P_BYTES, 1);
    if (buf == NULL) return fail(rank, "out of memory");
    /* One small message first from ranks 0 and 2 to rank 1, so that their connections are up
     * and rank 1 fails in the data path, not while connecting. */
    ncclResult_t res = ncclGroupStart();
    if (rank == 1) {
        ncclRecv(buf, 1, ncclInt8, 0, comm, NULL);
        ncclRecv(buf + 1, 1, ncclInt8, 2, comm, NULL);
    } else {
        ncclSend(buf, 1, ncclInt8, 1, comm, NULL);
    }
    if (res != ncclSuccess || ncclGroupEnd() != ncclSuccess)
        return fail(rank, "the first messages failed");
    if (rank == 0) { /* never sends to rank 1 again */
        sleep(9);
        ncclCommDestroy(comm);
        free(buf);
        return 0;
    }
    double t0 = now_s();
    if (rank == 1) {
        res = ncclRecv(buf, 1, ncclInt8, 0, comm, NULL);
        printf("rank 1: recv from rank 0 returned %d after %.2f s\n", (int)res, now_s() - t0);
        if (res == ncclSuccess) return fail(rank, "a receive from a silent rank succeeded");
        sleep(7); /* failed, not destroyed: nothing reads rank 2's frames any more */
        ncclCommDestroy(comm);
        free(buf);
        return 0;
    }
    if (p2p_ucx) {
        /* Once rank 1 has failed, one send of a few frames, all within the credit window: it
         * needs no slot, so only the connection's peer_error can see the receiver's bye. */
        usleep(2500000);
        t0 = now_s();
        res = ncclSend(buf, 2u << 20, ncclInt8, 1, comm, NULL);
    }
    /* Until one fails: kernels whose socket buffers grow large might take a whole 64 MiB. */
    for (int k = 0; k < 16 && res == ncclSuccess && !p2p_ucx; k++)
        res = ncclSend(buf, P2P_BYTES, ncclInt8, 1, comm, NULL);
    double took = now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ncclGetLastError(comm));
    printf("rank 2: send to rank 1 returned %d after %.2f s: %s\n", (int)res, took, msg);
    if (res == ncclSuccess) return fail(rank, "sends nobody receives succeeded");
    if (took > (p2p_ucx ? 3.0 : 6.0))
        return fail(rank, "the sender learned of its receiver's failure too late");
    /* Over UCX (fault_deadline_ucx) the receiver's bye carries no reason. */
    if (p2p_ucx) {
        if (strstr(msg, "Send") == NULL || strstr(msg, "peer rank 1 stopped receiving") == NULL)
            return fail(rank, "the error does not name the Send and rank 1's stop");
        ncclCommDestroy(comm);
        free(buf);
        return 0;
    }
    if (strstr(msg, "Send") == NULL || strstr(msg, "peer rank 1 failed") == NULL)
        return fail(rank, "the error does not name the Send and rank 1's failure");
    /* Rank 1's own reason, sent back up the connection: what it waited for. */
    if (strstr(msg, "waiting for data from rank 0") == NULL)
        return fail(rank, "the error does not say what rank 1 waited for");
    ncclCommDestroy(comm);
    free(buf);
    return 0;
}

/* Runs `nchildren` children (ranks 0..nchildren-1) and waits at most `limit_s`. */
static int run_case(const char *name, int nchildren,
                    int (*child)(const ncclUniqueId *, int), double limit_s)
{
    ncclUniqueId id;
    pid_t pids[4];
    for (int r = 0; r < nchildren; r++) {
        /* Rank 0 makes the id, so that this process runs no thread when it forks. */
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) {
            fprintf(stderr, "%s: rank %d did not start\n", name, r);
            for (int k = 0; k < r; k++) {
                kill(pids[k], SIGKILL);
                waitpid(pids[k], NULL, 0);
            }
            return 1;
        }
        if (pids[r] == 0) {
            int rc = child(&id, r);
            fflush(stdout); /* _exit skips stdio's buffers, and the log wants these lines */
            _exit(rc);
        }
    }
    int failed = 0;
    double end = now_s() + limit_s;
    for (int r = 0; r < nchildren; r++) {
        int status = 0;
        while (waitpid(pids[r], &status, WNOHANG) == 0) {
            if (now_s() > end) {
                fprintf(stderr, "%s: rank %d hangs; killing it\n", name, r);
                kill(pids[r], SIGKILL);
                waitpid(pids[r], &status, 0);
                failed = 1;
                break;
            }
            usleep(10000);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    printf("%s: %s\n", name, failed ? "FAILED" : "ok");
    return failed;
}

int main(int argc, char **argv)
{
    setenv("TUTTI_TIMEOUT_MS", "2000", 1);
    int failed = 0;
    /* `fault_deadline p2p-ucx`: case 5 alone, under NCCL_NET=UCX (set by the caller). */
    if (argc > 1 && strcmp(argv[1], "p2p-ucx") == 0) {
        p2p_ucx = true;
        return run_case("point-to-point receiver failing on another host, over UCX", 3,
                        p2p_receiver_failed_child, 30.0);
    }
    failed |= run_case("missing rank at init", 2, missing_rank_child, 15.0);
    failed |= run_case("silent peer in AllReduce", 2, silent_peer_child, 20.0);
    failed |= run_case("symmetric windows on one rank only", 2, window_mismatch_child, 20.0);
    failed |= run_case("NCCL_ALGO differing between ranks", 2, algo_mismatch_child, 20.0);
    failed |= run_case("point-to-point receiver failing on another host", 3,
                       p2p_receiver_failed_child, 30.0);
    p2p_one_way = true;
    failed |= run_case("point-to-point receiver failing on another host, one-way sockets", 3,
                       p2p_receiver_failed_child, 30.0);
    return failed;
}
