/* A rank whose init fails before it reaches the bootstrap root, while its process lives on.
 * Three ranks call ncclCommInitRank; the failing rank F (the argument: 1 by default, or 0, whose
 * process hosts the root) is given TUTTI_PORT_RANGE=P-P where P is a port this test holds, so
 * it cannot listen and its init fails at once ("no free port"). Rank F then stays alive (it is
 * killed at the end), so nothing but a message can tell the others: over the network to the
 * root for rank 1, inside the process for rank 0.
 *
 * The two others must fail within LIMIT_S (TUTTI_TIMEOUT_MS is 60 s) with ncclRemoteError, an
 * error naming rank F, its code (ncclSystemError) and that its init failed before it joined;
 * rank F's own error must stay its own (the port range), not that of telling the root. Before,
 * for rank 1 they waited for the whole TUTTI_TIMEOUT_MS and were then told that rank 1 "never
 * reached the bootstrap root"; for rank 0 they failed at once, told only that a rank in the
 * root's process failed (or that the root refused them), which named nobody.
 *
 * The ranks are forked by hand (tests/fork_rank.h); rank 0's process hosts the root, and it
 * stays alive after its verdict: were it to exit, rank 2 might find the root gone before it was
 * told (and fail as fast, on the closed connection). Exit 1 on any failure. */
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"
#include "now_s.h"

#define NRANKS 3
#define LIMIT_S 10.0

/* A listening socket on every address, port chosen by the kernel: no rank can listen on that
 * port while it is open. The port, or -1. */
static int hold_port(int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *fd_out = fd;
    return ntohs(a.sin_port);
}

/* Ranks 0 and 2 write their verdict here: one byte, 1 when it holds. */
static int verdicts[2];
static int failing = 1;

static int run_rank(int rank, ncclUniqueId id, int port)
{
    if (rank == failing) {
        char range[32];
        snprintf(range, sizeof range, "%d-%d", port, port);
        setenv("TUTTI_PORT_RANGE", range, 1);
    }
    ncclComm_t comm = NULL;
    double t0 = now_s();
    ncclResult_t res = ncclCommInitRank(&comm, NRANKS, id, rank);
    double took = now_s() - t0;
    const char *why = ncclGetLastError(NULL);
    printf("rank %d: init %s after %.2f s: %s\n", rank, ncclGetErrorString(res), took, why);
    if (res == ncclSuccess) {
        fprintf(stderr, "rank %d: init succeeded, with rank %d unable to listen\n", rank,
                failing);
        ncclCommDestroy(comm);
        return 1;
    }
    if (rank == failing) {
        if (strstr(why, "TUTTI_PORT_RANGE") == NULL) {
            fprintf(stderr, "rank %d: its error is not its own (the port range)\n", rank);
            return 1;
        }
        for (;;) pause(); /* alive until the test kills it */
    }
    /* ncclRemoteError, naming the rank and its own code (no free port: ncclSystemError). */
    char name[48];
    snprintf(name, sizeof name, "rank %d's init failed (ncclSystemError)", failing);
    bool named = res == ncclRemoteError && strstr(why, name) != NULL &&
                 strstr(why, "before it joined") != NULL;
    if (!named)
        fprintf(stderr, "rank %d: want ncclRemoteError saying that rank %d's init failed "
                "(ncclSystemError) before it joined\n", rank, failing);
    if (took > LIMIT_S)
        fprintf(stderr, "rank %d: failed after %.1f s, want under %.0f s\n", rank, took,
                LIMIT_S);
    char ok = named && took <= LIMIT_S;
    if (write(verdicts[1], &ok, 1) != 1) return 1;
    if (rank == 0)
        for (;;) pause(); /* the root's process lives on */
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1) failing = atoi(argv[1]);
    if (failing < 0 || failing > 1) {
        fprintf(stderr, "usage: fault_withdraw [0|1]\n");
        return 2;
    }
    setenv("TUTTI_TIMEOUT_MS", "60000", 1);
    int held = -1;
    int port = hold_port(&held);
    if (port < 0) {
        perror("fault_withdraw: holding a port");
        return 1;
    }
    if (pipe(verdicts) != 0) {
        perror("fault_withdraw: pipe");
        return 1;
    }
    ncclUniqueId id;
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) _exit(run_rank(r, id, port));
    }
    close(verdicts[1]);
    int failures = 0;
    for (int k = 0; k < 2; k++) {
        char ok = 0;
        if (read(verdicts[0], &ok, 1) != 1 || !ok) failures++;
    }
    int status = 0;
    if (waitpid(pids[failing], &status, WNOHANG) == pids[failing]) {
        fprintf(stderr, "rank %d: ended early with status %#x\n", failing, status);
        failures++;
    }
    for (int r = 0; r < NRANKS; r++) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
    }
    close(held);
    printf("fault_withdraw: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
