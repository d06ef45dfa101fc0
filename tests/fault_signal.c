/* SIGUSR1 with TUTTI_DUMP_SIGNAL=1: a rank blocked in an AllReduce its peer never issues logs
 * its stalled operation, naming the peer (the test's regular expression checks the log). Rank 1
 * joins and sleeps; rank 0 blocks; the parent signals rank 0 once it is in the AllReduce (a pipe
 * says when it calls; 300 ms after that), then kills rank 1, whose death ends rank 0's wait.
 * Rank 0 installed a SIGUSR1 handler of its own before its init: it must have been called too. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"

static volatile sig_atomic_t own_usr1_seen;
static void own_usr1(int sig)
{
    (void)sig;
    own_usr1_seen = 1;
}

int main(void)
{
    setenv("TUTTI_DUMP_SIGNAL", "1", 1);
    /* Rank 0 first: it makes the id (tests/fork_rank.h), so this process forks rank 1 with none
     * of the library's threads running. */
    ncclUniqueId id;
    int calling[2];
    if (pipe(calling) != 0) return 1;
    pid_t blocked = fork_rank(0, &id, 1);
    if (blocked < 0) return 1;
    if (blocked == 0) {
        close(calling[0]);
        /* The program's own SIGUSR1 handler, installed first: Tutti's calls it after its own. */
        struct sigaction own = {.sa_handler = own_usr1};
        sigemptyset(&own.sa_mask);
        sigaction(SIGUSR1, &own, NULL);
        ncclComm_t c;
        if (ncclCommInitRank(&c, 2, id, 0) != ncclSuccess) _exit(1);
        /* A child of this rank signals itself: that reaches no dump of this rank's (which would
         * say "0 operations stalled", nothing being in flight yet: the test's FAIL regex). */
        pid_t kid = fork();
        if (kid == 0) {
            raise(SIGUSR1);
            _exit(0);
        }
        if (kid > 0) waitpid(kid, NULL, 0);
        usleep(200000); /* a dump the child's signal started would be logged by now */
        own_usr1_seen = 0;
        if (write(calling[1], "c", 1) != 1) _exit(1);
        float x[4] = {0};
        ncclResult_t res = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, NULL);
        if (!own_usr1_seen) {
            fprintf(stderr, "fault_signal: the program's own SIGUSR1 handler was not called\n");
            _exit(3);
        }
        _exit(res == ncclRemoteError ? 0 : 2);
    }
    close(calling[1]); /* rank 0 alone holds it: its end (a failed init) is EOF here */
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
    char c;
    bool called = read(calling[0], &c, 1) == 1; /* EOF: rank 0 failed its init */
    close(calling[0]);
    /* Margins for a loaded machine: the call has begun and stalled by the signal, and the
     * dump it starts is logged before the kill ends the stall. */
    if (called) {
        usleep(1000000);
        kill(blocked, SIGUSR1);
    }
    sleep(2);
    kill(sleeper, SIGKILL);
    int status = 0;
    waitpid(sleeper, NULL, 0);
    waitpid(blocked, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
