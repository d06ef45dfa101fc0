/* SIGUSR1 with TUTTI_DUMP_SIGNAL=1: a rank blocked in an AllReduce its peer never issues logs
 * its stalled operation, naming the peer (the test's regular expression checks the log). Rank 1
 * joins and sleeps; rank 0 blocks; the parent signals rank 0 after a second, then kills rank 1,
 * whose death ends rank 0's wait. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"

int main(void)
{
    setenv("TUTTI_DUMP_SIGNAL", "1", 1);
    /* Rank 0 first: it makes the id (tests/fork_rank.h), so this process forks rank 1 with none
     * of the library's threads running. */
    ncclUniqueId id;
    pid_t blocked = fork_rank(0, &id, 1);
    if (blocked < 0) return 1;
    if (blocked == 0) {
        ncclComm_t c;
        if (ncclCommInitRank(&c, 2, id, 0) != ncclSuccess) _exit(1);
        float x[4] = {0};
        ncclResult_t res = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, NULL);
        _exit(res == ncclRemoteError ? 0 : 2);
    }
    pid_t sleeper = fork_rank(1, &id, 1);
    if (sleeper == 0) {
        ncclComm_t c;
        if (ncclCommInitRank(&c, 2, id, 1) != ncclSuccess) _exit(1);
        sleep(30);
        _exit(0);
    }
    if (sleeper < 0) {
        kill(blocked, SIGKILL);
        waitpid(blocked, NULL, 0);
        return 1;
    }
    sleep(1);
    kill(blocked, SIGUSR1);
    sleep(1);
    kill(sleeper, SIGKILL);
    int status = 0;
    waitpid(sleeper, NULL, 0);
    waitpid(blocked, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
