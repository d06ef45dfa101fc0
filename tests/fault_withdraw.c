/* A rank whose init fails before it reaches the bootstrap root, while its process lives on.
 * Three ranks call ncclCommInitRank; rank 1 is given TUTTI_PORT_RANGE=P-P where P is a port
 * this test holds, so it cannot listen and its init fails at once ("no free port"). Rank 1
 * then stays alive (it is killed at the end), so nothing but a message can tell the others.
 *
 * Ranks 0 and 2 must fail within LIMIT_S (TUTTI_TIMEOUT_MS is 60 s), with an error naming rank
 * 1 and saying that its init failed before it joined; rank 1's own error must stay its own
 * (the port range), not that of telling the root. Before, ranks 0 and 2 waited for the whole
 * TUTTI_TIMEOUT_MS and were then told that rank 1 "never reached the bootstrap root".
 *
 * The ranks are forked by hand (tests/fork_rank.h); rank 0's process hosts the root, and it
 * too stays alive after its verdict: were it to exit, rank 2 might find the root gone before
 * it was told (and fail as fast, on the closed connection). Exit 1 on any failure. */
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

#define NRANKS 3
#define LIMIT_S 10.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static int run_rank(int rank, ncclUniqueId id, int port)
{
    if (rank == 1) {
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
        fprintf(stderr, "rank %d: init succeeded, with rank 1 unable to listen\n", rank);
        ncclCommDestroy(comm);
        return 1;
    }
    if (rank == 1) {
        if (strstr(why, "TUTTI_PORT_RANGE") == NULL) {
            fprintf(stderr, "rank 1: its error is not its own (the port range)\n");
            return 1;
        }
        for (;;) pause(); /* alive until the test kills it */
    }
    bool named = strstr(why, "rank 1") != NULL && strstr(why, "before it joined") != NULL;
    if (!named) fprintf(stderr, "rank %d: the error does not say that rank 1 failed\n", rank);
    if (took > LIMIT_S)
        fprintf(stderr, "rank %d: failed after %.1f s, want under %.0f s\n", rank, took,
                LIMIT_S);
    char ok = named && took <= LIMIT_S;
    if (write(verdicts[1], &ok, 1) != 1) return 1;
    if (rank == 0)
        for (;;) pause(); /* the root's process lives on */
    return 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
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
    if (waitpid(pids[1], &status, WNOHANG) == pids[1]) {
        fprintf(stderr, "rank 1: ended early with status %#x\n", status);
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
