/* ucx_leak: communicators over the UCX transport, made and then aborted (or destroyed) again and
 * again, must leave no file descriptor and no thread behind. Two ranks, forked here, on two
 * "hosts" (NCCL_HOSTID) with NCCL_NET=UCX; each cycle inits, runs an AllReduce checked bit for
 * bit, and ends with ncclCommAbort (odd cycles) or ncclCommDestroy (even ones). The first cycle
 * may load what UCX keeps for the whole process (its modules, its async thread's state); the
 * counts after it are the reference every later cycle must return to.
 *
 * `ucx_leak [cycles]`; exit 77 when the build has no UCX (init says so), 1 on a leak or a wrong
 * result. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - (strcmp(dir, "/proc/self/fd") == 0); /* the fd of opendir itself */
}

/* One cycle: 0 ok, 1 failure, 77 no UCX. */
static int cycle(int rank, ncclUniqueId id, int k)
{
    ncclComm_t comm;
    ncclResult_t res = ncclCommInitRank(&comm, 2, id, rank);
    if (res == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "without UCX") != NULL)
        return 77;
    if (res != ncclSuccess) {
        fprintf(stderr, "rank %d cycle %d: init failed: %s\n", rank, k, ncclGetLastError(NULL));
        return 1;
    }
    enum { COUNT = 70000 };
    static float send[COUNT], recv[COUNT];
    for (int i = 0; i < COUNT; i++) send[i] = (float)(i % 1000 + rank * 1000 + k);
    int bad = 0;
    if (ncclAllReduce(send, recv, COUNT, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess) {
        fprintf(stderr, "rank %d cycle %d: AllReduce failed: %s\n", rank, k,
                ncclGetLastError(comm));
        bad = 1;
    }
    for (int i = 0; i < COUNT && !bad; i++) {
        float want = (float)(2 * (i % 1000) + 1000 + 2 * k);
        if (recv[i] != want) {
            fprintf(stderr, "rank %d cycle %d: element %d is %g, want %g\n", rank, k, i,
                    (double)recv[i], (double)want);
            bad = 1;
        }
    }
    if (k % 2 == 1) ncclCommAbort(comm);
    else ncclCommDestroy(comm);
    return bad;
}

static int run_rank(int rank, int cycles, const ncclUniqueId *ids)
{
    char host[32];
    snprintf(host, sizeof host, "ucxleak%d", rank);
    setenv("NCCL_HOSTID", host, 1);
    int fds = 0, threads = 0, failures = 0;
    for (int k = 0; k < cycles; k++) {
        int rc = cycle(rank, ids[k], k);
        if (rc != 0) return rc;
        int now_fds = count_entries("/proc/self/fd"), now_threads = count_entries("/proc/self/task");
        if (k == 0) {
            fds = now_fds;
            threads = now_threads;
            continue;
        }
        if (now_fds != fds || now_threads != threads) {
            fprintf(stderr, "rank %d: after cycle %d (%s): %d fds and %d threads, %d and %d after "
                    "cycle 0\n", rank, k, k % 2 ? "abort" : "destroy", now_fds, now_threads, fds,
                    threads);
            failures++;
        }
    }
    printf("rank %d: %d cycles, %d fds and %d threads after each\n", rank, cycles, fds, threads);
    return failures != 0;
}

int main(int argc, char **argv)
{
    int cycles = argc > 1 ? atoi(argv[1]) : 6;
    if (cycles < 2 || cycles > 100) cycles = 6;
    setenv("NCCL_NET", "UCX", 1);
    /* The roots live in a process of their own, outside the ranks whose threads are counted,
     * and this process forks the ranks running none of the library's threads
     * (tests/fork_rank.h). */
    ncclUniqueId ids[100];
    pid_t server = fork_id_server(ids, cycles);
    if (server < 0) return 1;
    fflush(NULL);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc = run_rank(r, cycles, ids);
            fflush(NULL);
            _exit(rc);
        }
    }
    int result = 0, skipped = 0;
    for (int r = 0; r < 2; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        if (rc == 77 && !skipped) {
            skipped = 1;
            for (int k = r + 1; k < 2; k++) kill(pids[k], SIGKILL); /* it may wait for this one */
        } else if (rc != 0 && !skipped) {
            result = 1;
        }
    }
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    if (skipped) {
        printf("skipped: this build has no UCX transport\n");
        return 77;
    }
    printf("%s\n", result == 0 ? "no leak" : "LEAK or failure");
    return result;
}
