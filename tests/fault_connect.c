/* A peer that dies while point-to-point connections are being set up. Rank 1 exits at its first
 * connection (TUTTI_FAULT=rank=1,...,point=connect,action=exit: after it has the descriptions
 * of the sides it connects with, before it attaches to them). Rank 0 must fail with
 * ncclRemoteError naming rank 1 within a few seconds, with TUTTI_TIMEOUT_MS at 60 s. The
 * scenario is the first argument:
 *
 *   (none)    two ranks; rank 1 dies in its ncclSend to rank 0, and rank 0's receive side waits
 *             for it to attach. Before, that wait looked only at the abort flag and the
 *             deadline (and waited forever with TUTTI_TIMEOUT_MS=0).
 *   late      three ranks; rank 1 dies in its ncclRecv from rank 0. Rank 0, in one group, sends
 *             to rank 1 and receives from rank 2, which calls 2 s late, so rank 0 attaches to
 *             rank 1's side with rank 1 long gone. Over TCP that is a connect to rank 1's
 *             listener, which is closed: before, the send side took the refusals for a peer not
 *             listening yet and retried them until the deadline.
 *   elsewhere three ranks; rank 1 dies in its ncclRecv from rank 2, and rank 0's ncclRecv from
 *             rank 1 waits for a description rank 1 never posts.
 *   team      three ranks; rank 1 dies in its init, once it has made its host mailbox and
 *             before the team's exchange (point=team): rank 0's init must fail, and nothing
 *             may be left in /dev/shm (rank 1's mailbox was, before).
 *
 * With "apart" as the last argument each rank names a host of its own (NCCL_HOSTID), as ranks
 * on several hosts would: no rank can watch another's process. Then "late" fails on the
 * refusal of rank 1's transport listener, and "elsewhere" on the refusal of its bootstrap
 * listener, which rank 0 probes while it waits (before, it waited until the deadline).
 *
 * Where the test may mount a private /dev/shm (root, or a user namespace), no tutti-* entry may
 * be left in it at the end: the shared-memory segment rank 1 made for its receive side names a
 * file that rank 1 no longer lives to remove, so its sender must (before, every scenario left
 * one 4 MiB file behind).
 *
 * Rank 2's own outcome is not checked; it is left to end by itself (killed only after LIMIT_S),
 * so that what it made is removed. The ranks are forked by hand (tests/fork_rank.h), not by
 * tutti-run, which would stop rank 0 as soon as rank 1 exits. NCCL_SHM_DISABLE=1 in the environment runs it over TCP. Exit 1 on
 * any failure. */
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
#include "private_shm.h"
#include "now_s.h"

#define LIMIT_S 10.0
#define LATE_S 2 /* how late rank 2 calls in "late" */

enum scenario { SENDER_DIES, LATE, ELSEWHERE, TEAM };

/* Rank 1: the call it dies in. */
static void die(enum scenario sc, float *buf, ncclComm_t comm)
{
    if (sc == SENDER_DIES)
        ncclSend(buf, 256, ncclFloat, 0, comm, NULL);
    else
        ncclRecv(buf, 256, ncclFloat, sc == LATE ? 0 : 2, comm, NULL);
    fprintf(stderr, "rank 1: the fault did not fire\n");
}

/* Rank 0: the call that must fail. */
static ncclResult_t survive(enum scenario sc, float *buf, ncclComm_t comm)
{
    if (sc != LATE) return ncclRecv(buf, 256, ncclFloat, 1, comm, NULL);
    ncclGroupStart();
    ncclSend(buf, 256, ncclFloat, 1, comm, NULL);
    ncclRecv(buf + 128, 128, ncclFloat, 2, comm, NULL);
    return ncclGroupEnd();
}

static int run_rank(int rank, ncclUniqueId id, enum scenario sc, int apart)
{
    if (apart) {
        char host[32];
        snprintf(host, sizeof host, "fault-connect-host-%d", rank);
        setenv("NCCL_HOSTID", host, 1);
        setenv("NCCL_ALGO", "Ring", 1); /* no Tree links at init, where the fault would fire */
    }
    if (rank == 1)
        setenv("TUTTI_FAULT", sc == SENDER_DIES ? "rank=1,op=send,seq=1,point=connect,action=exit"
                              : sc == TEAM      ? "rank=1,point=team,action=exit"
                                : "rank=1,op=recv,seq=1,point=connect,action=exit", 1);
    ncclComm_t comm;
    double t0 = now_s();
    ncclResult_t init = ncclCommInitRank(&comm, sc == SENDER_DIES ? 2 : 3, id, rank);
    if (sc == TEAM) {
        if (rank != 0) return 0; /* rank 1 exits inside; rank 2's outcome is not this test's */
        double took = now_s() - t0;
        const char *why = ncclGetLastError(NULL);
        int bad = init == ncclSuccess || strstr(why, "rank 1") == NULL || took > LIMIT_S;
        printf("rank 0: init failed after %.2f s (%s): %s\n", took, ncclGetErrorString(init),
               why);
        if (bad) fprintf(stderr, "rank 0: want init to fail within %.0f s naming rank 1\n",
                         LIMIT_S);
        return bad;
    }
    if (init != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(NULL));
        return 2;
    }
    float buf[256] = {0};
    if (rank == 1) {
        die(sc, buf, comm); /* exits inside, at the fault */
        return 2;
    }
    if (rank == 2) {
        /* Its outcome is not this test's, but it must end by itself, so that what it made is
         * removed: killed while a connection of its own waited for a dead or failed peer (in
         * "elsewhere", rank 1), it would leave that segment in /dev/shm. The parent kills it
         * only if it still runs after LIMIT_S. */
        if (sc == LATE) sleep(LATE_S);
        (void)ncclSend(buf, 256, ncclFloat, sc == LATE ? 0 : 1, comm, NULL);
        ncclCommAbort(comm);
        return 0;
    }
    t0 = now_s();
    ncclResult_t res = survive(sc, buf, comm);
    double took = now_s() - t0 - (sc == LATE ? LATE_S : 0);
    const char *why = ncclGetLastError(NULL);
    int bad = 0;
    if (res != ncclRemoteError) {
        fprintf(stderr, "rank 0: returned %d (%s), want ncclRemoteError\n", (int)res,
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
    printf("rank 0: failed %.2f s after it could: %s\n", took, why);
    ncclCommAbort(comm);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("TUTTI_TIMEOUT_MS", "60000", 1);
    enum scenario sc = SENDER_DIES;
    if (argc > 1 && strcmp(argv[1], "late") == 0) sc = LATE;
    if (argc > 1 && strcmp(argv[1], "elsewhere") == 0) sc = ELSEWHERE;
    if (argc > 1 && strcmp(argv[1], "team") == 0) sc = TEAM;
    int apart = strcmp(argv[argc - 1], "apart") == 0;
    int nranks = sc == SENDER_DIES ? 2 : 3;
    bool private_shm = private_dev_shm();
    ncclUniqueId id;
    pid_t pids[3];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) _exit(run_rank(r, id, sc, apart));
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
    if (nranks == 3) {
        double until = now_s() + LIMIT_S;
        while (waitpid(pids[2], NULL, WNOHANG) == 0) {
            if (now_s() > until) {
                fprintf(stderr, "rank 2: still running after %.0f s; killed\n", LIMIT_S);
                kill(pids[2], SIGKILL);
                waitpid(pids[2], NULL, 0);
                break;
            }
            usleep(10000);
        }
    }
    int left = private_shm ? count_entries("/dev/shm", "tutti-") : 0;
    if (left != 0) {
        fprintf(stderr, "%d tutti-* entries left in the test's private /dev/shm:\n", left);
        fflush(stderr);
        if (system("ls -l /dev/shm >&2") != 0) fprintf(stderr, "(could not list them)\n");
        failures++;
    }
    if (!private_shm) printf("(no private /dev/shm: what is left there is not checked)\n");
    printf("fault_connect: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
