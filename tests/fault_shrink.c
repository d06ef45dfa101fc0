/* A second death during the shrink that was to leave the first behind. Four ranks; rank 3 dies
 * after the first AllReduce, and the survivors shrink it away (NCCL_SHRINK_ABORT), except
 * that one of them dies too instead of taking part:
 *
 *   survivor  rank 2 dies: new rank 0 (rank 0) cannot offer it the new id, and rank 1 waits for
 *             new rank 0's verdict.
 *   leader    rank 0 dies, the rank that was to be new rank 0: ranks 1 and 2 wait for its
 *             offer.
 *   split     no rank 3 death; rank 2 dies and the others split the communicator (colour 0)
 *             before they have noticed. The split's colours go round the bootstrap's ring,
 *             which the dead rank breaks next to two ranks only: the rank that fails there
 *             shuts its ring, so the failure goes round too (before, rank 0 waited for the
 *             deadline). Its error need not name rank 2.
 *
 * The ranks left must fail within LIMIT_S with an error naming the rank that died (before,
 * they waited for TUTTI_TIMEOUT_MS, 60 s here). With "apart" as the last argument each rank
 * names a host of its own (NCCL_HOSTID): no process can be watched, and only the dead rank's
 * closed bootstrap listener tells. Ranks are forked by hand (tests/fork_rank.h). */
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

#define NRANKS 4
#define LIMIT_S 10.0
/* split: how soon every rank must fail, and how long each holds its communicator after
 * failing before it aborts it (an abort closes the ring too, which must not be what tells the
 * others). */
#define SPLIT_LIMIT_S 5.0
#define SPLIT_HOLD_US 7000000

static int run_rank(int rank, ncclUniqueId id, int second, bool split, bool apart)
{
    if (apart) {
        char host[32];
        snprintf(host, sizeof host, "fault-shrink-host-%d", rank);
        setenv("NCCL_HOSTID", host, 1);
    }
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, NRANKS, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    float x = 1;
    if (ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
        fprintf(stderr, "rank %d: AllReduce: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    if (rank == 3 && !split) _exit(0); /* the first death */
    usleep(300000);                     /* rank 3 is gone */
    if (rank == second) _exit(0);
    int exclude[1] = {3};
    ncclComm_t shrunk = NULL;
    double t0 = now_s();
    ncclResult_t res = split ? ncclCommSplit(comm, 0, rank, &shrunk, NULL)
                             : ncclCommShrink(comm, exclude, 1, &shrunk, NULL,
                                              NCCL_SHRINK_ABORT);
    double took = now_s() - t0;
    const char *why = ncclGetLastError(NULL);
    char named[16];
    snprintf(named, sizeof named, "rank %d", second);
    int bad = 0;
    if (res == ncclSuccess || res == ncclInProgress) {
        fprintf(stderr, "rank %d: the shrink succeeded without rank %d\n", rank, second);
        bad = 1;
    } else if (!split && strstr(why, named) == NULL) {
        fprintf(stderr, "rank %d: the error does not name %s: %s\n", rank, named, why);
        bad = 1;
    }
    double limit = split ? SPLIT_LIMIT_S : LIMIT_S;
    if (took > limit) {
        fprintf(stderr, "rank %d: the call failed after %.1f s, want under %.0f s "
                "(TUTTI_TIMEOUT_MS is 60 s)\n", rank, took, limit);
        bad = 1;
    }
    printf("rank %d: %s failed after %.2f s (%s): %s\n", rank, split ? "split" : "shrink", took,
           ncclGetErrorString(res), why);
    if (shrunk != NULL) ncclCommAbort(shrunk);
    if (split) usleep(SPLIT_HOLD_US);
    ncclCommAbort(comm);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("TUTTI_TIMEOUT_MS", "60000", 1);
    bool split = argc > 1 && strcmp(argv[1], "split") == 0;
    int second = argc > 1 && strcmp(argv[1], "leader") == 0 ? 0 : 2;
    bool apart = strcmp(argv[argc - 1], "apart") == 0;
    ncclUniqueId id;
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) _exit(run_rank(r, id, second, split, apart));
    }
    int failures = 0;
    for (int r = 0; r < NRANKS; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "rank %d: ended with status %#x\n", r, status);
            failures++;
        }
    }
    printf("fault_shrink %s%s: %s\n", split ? "split" : second == 0 ? "leader" : "survivor",
           apart ? " apart" : "",
           failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
