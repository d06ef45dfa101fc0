/* Many communicators under a low limit on open files. Four ranks each set their soft limit
 * (RLIMIT_NOFILE) to 256, as low shell defaults do, leave the hard limit as it is, and split
 * their world communicator SPLITS times, keeping every new communicator and checking an
 * AllReduce on each: some 10 descriptors per communicator, so far more than 256 in all.
 *
 *   raise  (default) Tutti raises the soft limit to the hard one at init, as NCCL's bootstrap
 *          does: every split succeeds, the sums are right, the soft limit equals the hard one
 *          afterwards and each rank held more than 256 descriptors at its peak.
 *   keep   TUTTI_RAISE_NOFILE=0 leaves the limit: a rank runs out of descriptors part of the
 *          way. Every rank must then fail within FAIL_WITHIN_S, not at its deadline (the
 *          others' connects to a root that ended were retried until then), and at least one
 *          error must say that the process is out of files and how to raise the limit.
 *
 * The ranks are forked by hand (tests/fork_rank.h), not by tutti-run, which would stop the
 * others at the first rank's failure. Exit 77 (skipped) where the hard limit is below 2048. */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"
#include "now_s.h"

#define NRANKS 4
#define SPLITS 60
#define SOFT_LIMIT 256
#define LIMIT_S 60

/* A rank's outcomes, as its exit status. */
enum { RANK_OK = 0, RANK_FAILED_CLEARLY = 10, RANK_FAILED = 11, RANK_WRONG = 12 };

/* How soon the failing call must return (TUTTI_TIMEOUT_MS is 30 s). */
#define FAIL_WITHIN_S 10.0

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (d == NULL) return -1;
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

static int run_rank(int rank, ncclUniqueId id, bool keep)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t hard = rl.rlim_max;
    ncclComm_t world, comms[SPLITS];
    int made = 0, peak = 0;
    ncclResult_t res = ncclCommInitRank(&world, NRANKS, id, rank);
    if (res != ncclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(NULL));
        return RANK_WRONG;
    }
    double t0 = 0;
    for (; made < SPLITS; made++) {
        t0 = now_s();
        res = ncclCommSplit(world, 0, rank, &comms[made], NULL);
        if (res != ncclSuccess) break;
        float x = (float)(rank + 1);
        res = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms[made], NULL);
        if (res != ncclSuccess) {
            made++; /* it exists: aborted below */
            break;
        }
        if (x != (float)(NRANKS * (NRANKS + 1) / 2)) {
            fprintf(stderr, "rank %d: AllReduce on communicator %d gave %g\n", rank, made,
                    (double)x);
            return RANK_WRONG;
        }
        int fds = open_fds();
        if (fds > peak) peak = fds;
    }
    double took = now_s() - t0;
    char why[512];
    snprintf(why, sizeof why, "%s", res == ncclSuccess ? "" : ncclGetLastError(NULL));
    getrlimit(RLIMIT_NOFILE, &rl);
    for (int k = 0; k < made; k++) {
        if (res == ncclSuccess)
            ncclCommDestroy(comms[k]);
        else
            ncclCommAbort(comms[k]);
    }
    if (res == ncclSuccess)
        ncclCommDestroy(world);
    else
        ncclCommAbort(world);
    if (!keep) {
        if (res != ncclSuccess) {
            fprintf(stderr, "rank %d: split or AllReduce %d failed: %s\n", rank, made, why);
            return RANK_WRONG;
        }
        if (rl.rlim_cur != hard && hard != RLIM_INFINITY) {
            fprintf(stderr, "rank %d: soft limit %llu after init, want the hard %llu\n", rank,
                    (unsigned long long)rl.rlim_cur, (unsigned long long)hard);
            return RANK_WRONG;
        }
        if (peak <= SOFT_LIMIT) {
            fprintf(stderr, "rank %d: at most %d descriptors were open: the test proves "
                    "nothing (make SPLITS larger)\n", rank, peak);
            return RANK_WRONG;
        }
        printf("rank %d: %d communicators, up to %d descriptors open, soft limit now %llu\n",
               rank, SPLITS + 1, peak, (unsigned long long)rl.rlim_cur);
        return RANK_OK;
    }
    if (rl.rlim_cur != SOFT_LIMIT) {
        fprintf(stderr, "rank %d: TUTTI_RAISE_NOFILE=0, yet the soft limit is %llu\n", rank,
                (unsigned long long)rl.rlim_cur);
        return RANK_WRONG;
    }
    if (res == ncclSuccess) {
        fprintf(stderr, "rank %d: all %d splits fit under %d descriptors: the test proves "
                "nothing\n", rank, SPLITS, SOFT_LIMIT);
        return RANK_WRONG;
    }
    bool clear = strstr(why, "ulimit -n") != NULL;
    printf("rank %d: failed at communicator %d after %.2f s (%s): %s\n", rank, made, took,
           ncclGetErrorString(res), why);
    if (took > FAIL_WITHIN_S) {
        fprintf(stderr, "rank %d: the failing call took %.1f s, want under %.0f s\n", rank,
                took, FAIL_WITHIN_S);
        return RANK_WRONG;
    }
    return clear ? RANK_FAILED_CLEARLY : RANK_FAILED;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool keep = argc > 1 && strcmp(argv[1], "keep") == 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || (rl.rlim_max != RLIM_INFINITY &&
                                               rl.rlim_max < 2048)) {
        printf("fault_fdlimit: the hard limit on open files is below 2048; skipped\n");
        return 77;
    }
    /* Before the ranks start: rank 0's process makes the id, its first call to the library. */
    rl.rlim_cur = SOFT_LIMIT;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        perror("fault_fdlimit: setrlimit");
        return 1;
    }
    if (keep) setenv("TUTTI_RAISE_NOFILE", "0", 1);
    setenv("TUTTI_TIMEOUT_MS", "30000", 1);
    ncclUniqueId id;
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pids[r] = fork_rank(r, &id, 1);
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) _exit(run_rank(r, id, keep));
    }
    int failures = 0, clear = 0, ended = 0;
    int status[NRANKS];
    bool done[NRANKS] = {false};
    double t0 = now_s();
    while (ended < NRANKS && now_s() - t0 < LIMIT_S) {
        for (int r = 0; r < NRANKS; r++)
            if (!done[r] && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
                done[r] = true;
                ended++;
            }
        usleep(20000);
    }
    for (int r = 0; r < NRANKS; r++) {
        if (!done[r]) {
            fprintf(stderr, "rank %d: still running after %d s: killed\n", r, LIMIT_S);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            failures++;
            continue;
        }
        int code = WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1;
        bool want = keep ? code == RANK_FAILED_CLEARLY || code == RANK_FAILED : code == RANK_OK;
        clear += code == RANK_FAILED_CLEARLY;
        if (!want) {
            fprintf(stderr, "rank %d: ended with status %#x\n", r, status[r]);
            failures++;
        }
    }
    if (keep && clear == 0) {
        fprintf(stderr, "no rank's error says the process ran out of files (ulimit -n)\n");
        failures++;
    }
    printf("fault_fdlimit %s: %s in %.2f s\n", keep ? "keep" : "raise",
           failures ? "FAIL" : "PASS", now_s() - t0);
    return failures ? 1 : 0;
}
