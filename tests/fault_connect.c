/* A peer that dies in the middle of a point-to-point connection's setup: both ranks have posted
 * their connection descriptions, then rank 1 exits before it attaches to rank 0's side
 * (TUTTI_FAULT=rank=1,op=send,seq=1,point=connect,action=exit). Rank 0, in its first ncclRecv
 * from rank 1, must fail with ncclRemoteError naming rank 1 within a few seconds, with
 * TUTTI_TIMEOUT_MS at 60 s: before, the receive side's wait for the peer to attach looked only
 * at the abort flag and the deadline (and waited forever with TUTTI_TIMEOUT_MS=0).
 *
 * The ranks are forked by hand (tests/fork_rank.h), not by tutti-run, which would stop rank 0
 * as soon as rank 1 exits. NCCL_SHM_DISABLE=1 in the environment runs it over TCP. Exit 1 on
 * any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"

#define LIMIT_S 10.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_rank(int rank, ncclUniqueId id)
{
    if (rank == 1) setenv("TUTTI_FAULT", "rank=1,op=send,seq=1,point=connect,action=exit", 1);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    float buf[256] = {0};
    if (rank == 1) {
        ncclSend(buf, 256, ncclFloat, 0, comm, NULL); /* exits inside, at the fault */
        fprintf(stderr, "rank 1: the fault did not fire\n");
        return 2;
    }
    double t0 = now_s();
    ncclResult_t res = ncclRecv(buf, 256, ncclFloat, 1, comm, NULL);
    double took = now_s() - t0;
    const char *why = ncclGetLastError(NULL);
    int bad = 0;
    if (res != ncclRemoteError) {
        fprintf(stderr, "rank 0: ncclRecv returned %d (%s), want ncclRemoteError\n", (int)res,
                ncclGetErrorString(res));
        bad = 1;
    }
    if (strstr(why, "rank 1") == NULL) {
        fprintf(stderr, "rank 0: the error does not name rank 1: %s\n", why);
        bad = 1;
    }
    if (took > LIMIT_S) {
        fprintf(stderr, "rank 0: the error came after %.1f s (TUTTI_TIMEOUT_MS is 60 s)\n",
                took);
        bad = 1;
    }
    printf("rank 0: ncclRecv failed after %.2f s: %s\n", took, why);
    ncclCommAbort(comm);
    return bad;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("TUTTI_TIMEOUT_MS", "60000", 1);
    ncclUniqueId id;
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) _exit(run_rank(r, id));
    }
    int failures = 0;
    for (int r = 0; r < 2; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int want = r == 1 ? 71 : 0; /* TUTTI_FAULT's exit status */
        if (!WIFEXITED(status) || WEXITSTATUS(status) != want) {
            fprintf(stderr, "rank %d: ended with status %#x, want exit %d\n", r, status, want);
            failures++;
        }
    }
    printf("fault_connect: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
