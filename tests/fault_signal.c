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

int main(void)
{
    setenv("TUTTI_DUMP_SIGNAL", "1", 1);
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    pid_t sleeper = fork();
    if (sleeper == 0) {
        ncclComm_t c;
        if (ncclCommInitRank(&c, 2, id, 1) != ncclSuccess) _exit(1);
        sleep(30);
        _exit(0);
    }
    pid_t blocked = fork();
    if (blocked == 0) {
        ncclComm_t c;
        if (ncclCommInitRank(&c, 2, id, 0) != ncclSuccess) _exit(1);
        float x[4] = {0};
        ncclResult_t res = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, NULL);
        _exit(res == ncclRemoteError ? 0 : 2);
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
