/* TUTTI_FAULT makes failures deterministic: 3 ranks (forked, ring algorithm forced) run 1 MiB
 * AllReduces; rank 1 carries TUTTI_FAULT=rank=1,op=allreduce,seq=3,point=after_chunk:2,
 * action=A for each action A. Every other rank must fail its third AllReduce with the expected
 * code and a message naming rank 1, within the test's deadline (TUTTI_TIMEOUT_MS=2000):
 *
 *   exit     ncclRemoteError (rank 1 died)
 *   stall    ncclRemoteError (the deadline: rank 1 is stopped, not dead)
 *   close    ncclRemoteError (rank 1 failed: its connection closed on purpose)
 *   corrupt  ncclInvalidUsage (rank 2 sees a descriptor from another operation; the others
 *            learn it from rank 2)
 *
 * A malformed TUTTI_FAULT fails init with ncclInvalidArgument. `fault_inject tree` runs close
 * under Tree over TCP instead (NCCL_SHM_DISABLE=1), where rank 1 itself must report its failure
 * too: the connection it closed is one of Tree's, which its failure handlers then meet. Exit 1
 * on any failure. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"

#define NRANKS 3
#define COUNT (256 * 1024)

struct report {
    int calls;  /* AllReduces that succeeded */
    int result; /* of the one that failed */
    int names;  /* its message names rank 1 */
};

static void run_rank(int rank, ncclUniqueId id, const char *fault, int out)
{
    if (rank == 1) setenv("TUTTI_FAULT", fault, 1);
    ncclComm_t comm;
    struct report r = {0};
    r.result = ncclCommInitRank(&comm, NRANKS, id, rank);
    if (r.result == ncclSuccess) {
        float *buf = malloc(COUNT * sizeof(float));
        for (size_t i = 0; i < COUNT; i++) buf[i] = 1.0f;
        while (r.calls < 6 &&
               (r.result = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL)) ==
                   ncclSuccess)
            r.calls++;
        r.names = strstr(ncclGetLastError(comm), "rank 1") != NULL;
    }
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r) _exit(4);
    char c;
    while (read(out, &c, 1) > 0) {
    }
    _exit(0);
}

static int check_action(const char *action, int want, bool rank1_reports)
{
    char fault[128];
    snprintf(fault, sizeof fault, "rank=1,op=allreduce,seq=3,point=after_chunk:2,action=%s",
             action);
    ncclUniqueId id;
    int fds[NRANKS][2];
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[r]) != 0) return 1;
        pids[r] = fork_rank(r, &id, 1); /* rank 0 makes the id: this process runs no thread */
        if (pids[r] < 0) {
            for (int k = 0; k < r; k++) {
                kill(pids[k], SIGKILL);
                waitpid(pids[k], NULL, 0);
            }
            return 1;
        }
        if (pids[r] == 0) {
            close(fds[r][0]);
            run_rank(r, id, fault, fds[r][1]);
        }
        close(fds[r][1]);
    }
    int failures = 0;
    for (int r = 0; r < NRANKS; r++) {
        if (r == 1 && !rank1_reports) continue;
        struct report rep;
        alarm(30);
        ssize_t got = read(fds[r][0], &rep, sizeof rep);
        alarm(0);
        if (got != (ssize_t)sizeof rep) {
            fprintf(stderr, "%s: rank %d never reported\n", action, r);
            failures++;
            continue;
        }
        /* Under Tree a rank that did not use rank 1's closed connection in the third
         * AllReduce fails in the fourth. */
        bool calls_ok = rep.calls == 2 || (rank1_reports && r != 1 && rep.calls == 3);
        if (!calls_ok || rep.result != want || !rep.names) {
            fprintf(stderr, "%s: rank %d: %d AllReduces succeeded, then %d (%s), naming rank 1: "
                    "%s; want 2, then %d (%s), naming it\n", action, r, rep.calls, rep.result,
                    ncclGetErrorString(rep.result), rep.names ? "yes" : "no", want,
                    ncclGetErrorString(want));
            failures++;
        }
    }
    for (int r = 0; r < NRANKS; r++) {
        close(fds[r][0]);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
    }
    printf("%s: %s\n", action, failures ? "FAIL" : "ok");
    return failures;
}

static void on_alarm(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Before anything reads them: parameters are cached per process, and the ranks fork. */
    setenv("NCCL_ALGO", "Ring", 1);
    setenv("TUTTI_TIMEOUT_MS", "2000", 1);
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    int failures = 0;
    if (argc > 1 && strcmp(argv[1], "tree") == 0) {
        setenv("NCCL_ALGO", "Tree", 1);
        setenv("NCCL_SHM_DISABLE", "1", 1);
        int tree_failures = check_action("close", ncclRemoteError, true);
        printf("%d failures\n", tree_failures);
        return tree_failures ? 1 : 0;
    }
    failures += check_action("exit", ncclRemoteError, false);
    failures += check_action("stall", ncclRemoteError, false);
    failures += check_action("close", ncclRemoteError, false);
    failures += check_action("corrupt", ncclInvalidUsage, false);
    /* A malformed fault is refused at init. */
    setenv("TUTTI_FAULT", "rank=1,op=allreduce,seq=0,point=after_chunk:2,action=exit", 1);
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclGetUniqueId(&id);
    ncclResult_t res = ncclCommInitRank(&comm, 1, id, 0);
    if (res != ncclInvalidArgument) {
        fprintf(stderr, "malformed TUTTI_FAULT: init returned %d, want ncclInvalidArgument\n",
                (int)res);
        failures++;
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
