/* A rank killed with SIGKILL in the middle of collectives, in real processes started by hand
 * (not by tutti-run, which would end the whole job): every survivor must return an error within
 * 1 s of the kill, naming the dead rank, with the default deadline (TUTTI_TIMEOUT_MS unset).
 *
 * Each trial: the parent forks N ranks (N cycles through 2, 3, 4), rank 0 first, which makes the
 * unique id, so that the parent runs none of the library's threads when it forks
 * (tests/fork_rank.h); every rank runs the same pseudo-random sequence of collectives and sizes (AllReduce, Broadcast,
 * Reduce, AllGather, ReduceScatter, 8 B to 4 MiB); after a random delay the parent kills a random
 * rank. A survivor reports on a pipe the time its call failed, the error code and whether
 * ncclGetLastError names the dead rank. Nothing may hang: the parent kills stragglers after
 * 20 s and counts them as failures.
 *
 * `fault_kill [--trials N] [--seed S] [--apart]`; NCCL_SHM_DISABLE=1 in the environment runs it
 * over TCP; --apart gives each rank a host of its own (NCCL_HOSTID), so TCP connects every pair
 * and no rank can watch another's process, as on several hosts.
 * Prints one line per trial and a summary with the slowest survivor; exit 1 on any failure. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#include "fork_rank.h"
#include "now_s.h"

#define MAX_RANKS 4
#define MAX_BYTES (4u << 20)
#define STRAGGLER_S 20.0

/* What a survivor reports. */
struct report {
    int rank;
    int result;
    double failed_at;
    int names_dead; /* ncclGetLastError mentions "rank K" for the killed K */
    char text[256];
};

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Runs collectives until one fails; then reports and exits. `dead_rank` arrives on `in`
 * once the parent killed it. */
static int apart; /* --apart: each rank names a host of its own (NCCL_HOSTID) */

static void run_rank(int rank, int nranks, ncclUniqueId id, uint64_t seed, int in, int out)
{
    ncclComm_t comm;
    if (apart) {
        char host[32];
        snprintf(host, sizeof host, "fault-kill-host-%d", rank);
        setenv("NCCL_HOSTID", host, 1);
    }
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) _exit(3);
    float *send = malloc(MAX_BYTES), *recv = malloc(MAX_BYTES * MAX_RANKS);
    for (size_t i = 0; i < MAX_BYTES / sizeof(float); i++) send[i] = (float)(i % 7);
    ncclResult_t res = ncclSuccess;
    char ready = 'r';
    if (write(out, &ready, 1) != 1) _exit(4);
    while (res == ncclSuccess) {
        size_t bytes = (size_t)8 << (next_rand(&seed) % 20); /* 8 B .. 4 MiB */
        size_t count = bytes / sizeof(float);
        switch (next_rand(&seed) % 5) {
        case 0: res = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL); break;
        case 1: res = ncclBroadcast(send, recv, count, ncclFloat, 0, comm, NULL); break;
        case 2: res = ncclReduce(send, recv, count, ncclFloat, ncclSum, 0, comm, NULL); break;
        case 3: res = ncclAllGather(send, recv, count / (size_t)nranks, ncclFloat, comm, NULL);
            break;
        default:
            res = ncclReduceScatter(send, recv, count / (size_t)nranks, ncclFloat, ncclSum, comm,
                                    NULL);
            break;
        }
    }
    struct report r = {.rank = rank, .result = (int)res, .failed_at = now_s()};
    snprintf(r.text, sizeof r.text, "%s", ncclGetLastError(comm));
    int dead = -1;
    if (read(in, &dead, sizeof dead) == (ssize_t)sizeof dead) {
        char want[32];
        snprintf(want, sizeof want, "rank %d ", dead);
        r.names_dead = strstr(r.text, want) != NULL;
    }
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r) _exit(5);
    /* Stay alive until every survivor has reported: an exit here is a death the others would
     * rightly see. The parent closes the pipe at the end of the trial. */
    char end;
    while (read(in, &end, 1) > 0) {
    }
    ncclCommAbort(comm);
    _exit(0);
}

/* One trial; returns the number of failures and the slowest survivor's delay in *worst. */
static int trial(int t, int nranks, uint64_t seed, double *worst)
{
    ncclUniqueId id;
    pid_t pids[MAX_RANKS];
    int to_child[MAX_RANKS][2], from_child[MAX_RANKS][2];
    for (int r = 0; r < nranks; r++) {
        if (pipe(to_child[r]) != 0 || pipe(from_child[r]) != 0) return 1;
        pids[r] = fork_rank(r, &id, 1); /* rank 0 makes the id: this process runs no thread */
        if (pids[r] < 0) {
            fprintf(stderr, "trial %d: rank %d did not start\n", t, r);
            for (int k = 0; k < r; k++) {
                kill(pids[k], SIGKILL);
                waitpid(pids[k], NULL, 0);
            }
            return 1;
        }
        if (pids[r] == 0) {
            close(to_child[r][1]);
            close(from_child[r][0]);
            run_rank(r, nranks, id, seed, to_child[r][0], from_child[r][1]);
        }
        close(to_child[r][0]);
        close(from_child[r][1]);
    }
    int failures = 0;
    for (int r = 0; r < nranks; r++) {
        char c;
        if (read(from_child[r][0], &c, 1) != 1) {
            fprintf(stderr, "trial %d: rank %d did not start\n", t, r);
            failures++;
        }
    }
    uint64_t s = seed ^ 0x9e3779b97f4a7c15ull;
    int victim = (int)(next_rand(&s) % (uint64_t)nranks);
    usleep((useconds_t)(next_rand(&s) % 200000));
    kill(pids[victim], SIGKILL);
    double killed_at = now_s();
    for (int r = 0; r < nranks; r++)
        if (r != victim && write(to_child[r][1], &victim, sizeof victim) != sizeof victim)
            failures++;
    for (int r = 0; r < nranks; r++) {
        if (r == victim) continue;
        struct report rep;
        /* Bounded: a straggler is killed by the alarm below. */
        alarm((unsigned)STRAGGLER_S);
        ssize_t got = read(from_child[r][0], &rep, sizeof rep);
        alarm(0);
        if (got != (ssize_t)sizeof rep) {
            fprintf(stderr, "trial %d (%d ranks, rank %d killed): rank %d never reported (hang)\n",
                    t, nranks, victim, r);
            failures++;
            continue;
        }
        double delay = rep.failed_at - killed_at;
        if (delay > *worst) *worst = delay;
        bool ok = rep.result == ncclRemoteError && rep.names_dead && delay <= 1.0;
        if (!ok) {
            fprintf(stderr,
                    "trial %d (%d ranks, rank %d killed): rank %d got %d (%s) after %.3f s, "
                    "names the dead rank: %s; last error: %s\n",
                    t, nranks, victim, r, rep.result, ncclGetErrorString(rep.result), delay,
                    rep.names_dead ? "yes" : "no", rep.text);
            failures++;
        }
    }
    for (int r = 0; r < nranks; r++) close(to_child[r][1]);
    for (int r = 0; r < nranks; r++) {
        /* Survivors abort and exit once the pipe closes; stragglers are killed. */
        for (int i = 0; i < 100 && waitpid(pids[r], NULL, WNOHANG) == 0; i++) usleep(10000);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        close(from_child[r][0]);
    }
    printf("trial %d: %d ranks, rank %d killed: %s\n", t, nranks, victim,
           failures ? "FAIL" : "ok");
    return failures;
}

static void on_alarm(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    int trials = 20;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--apart") == 0) apart = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--trials") == 0) trials = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 0);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL); /* interrupts a blocked read, without SA_RESTART */
    signal(SIGPIPE, SIG_IGN);
    int failures = 0;
    double worst = 0;
    for (int t = 0; t < trials; t++) {
        uint64_t s = seed * 1000003u + (uint64_t)t + 1;
        failures += trial(t, 2 + t % 3, s, &worst);
    }
    printf("%d trials, %d failures; slowest survivor erred %.3f s after the kill\n", trials,
           failures, worst);
    return failures ? 1 : 0;
}
