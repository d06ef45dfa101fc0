/* ncclCommAbort from another thread, while a call on the same communicator is blocked, in real
 * processes: the abort must return within 1 s, the blocked call must return an error, and
 * nothing may crash (run it under ASan to see use after free). Each trial forks 2 ranks; rank 0
 * blocks a thread in a call and aborts from its main thread 100 ms later:
 *
 *   stopped   rank 1 joins the communicator but never issues the AllReduce rank 0 waits in;
 *   dead      rank 1 is killed while rank 0 waits (the call may fail on its own first);
 *   init      rank 1 never starts: rank 0's nonblocking init waits for it, then is aborted.
 *
 * `fault_abort [--trials N]` cycles through the three; exit 1 on any failure. The slowest
 * Abort is printed.
 *
 * `fault_abort --cycles N` instead runs N init -> fault -> Abort cycles in this one process
 * (rank 0 here, rank 1 a child: a peer killed mid-job, or never started while a nonblocking
 * init waits) and checks that the process's fds (/proc/self/fd), threads (/proc/self/task) and
 * the tutti-* entries of /dev/shm are the same before and after. /dev/shm is a private tmpfs
 * when a mount namespace can be made (so other jobs on the host do not disturb the count). */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <sys/mount.h>
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
#include "tutti.h"

#include "private_shm.h"
#include "now_s.h"

enum mode { STOPPED, DEAD, INIT, NMODES };
static const char *const mode_names[NMODES] = {"stopped", "dead", "init"};

struct blocked {
    ncclComm_t comm;
    ncclResult_t result;
    atomic_int calling; /* set just before the AllReduce */
    float buf[1024];
};

static void *block_in_allreduce(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->calling, 1);
    b->result = ncclAllReduce(b->buf, b->buf, 1024, ncclFloat, ncclSum, b->comm, NULL);
    return NULL;
}

/* Rank 0 of a trial: returns 0 when the abort behaved. */
static bool first_trial;

static int rank0(enum mode mode, ncclUniqueId id, pid_t peer)
{
    ncclComm_t comm = NULL;
    if (mode == INIT) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t res = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
        if (res != ncclInProgress && res != ncclSuccess) return 1;
        usleep(100000);
        double t0 = now_s();
        ncclCommAbort(comm);
        double took = now_s() - t0;
        printf("abort %s %.6f\n", mode_names[mode], took);
        if (took > 1.0) {
            fprintf(stderr, "init: ncclCommAbort took %.3f s\n", took);
            return 1;
        }
        return 0;
    }
    if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess) return 1;
    struct blocked *b = calloc(1, sizeof *b);
    b->comm = comm;
    pthread_t thread;
    pthread_create(&thread, NULL, block_in_allreduce, b);
    /* The thread may start late on a loaded machine: the 100 ms count from its call. The
     * dump's trial (the first, which fault_dump runs alone) gives it a second to be seen
     * stalled: a thread that announced its call may be held off the CPU before it makes it. */
    while (!atomic_load(&b->calling)) usleep(1000);
    usleep(first_trial ? 1000000 : 100000);
    /* Who is stuck: the blocked AllReduce, waiting for rank 1 (checked by the fault_dump test
     * through the log). */
    if (mode == STOPPED && tuttiCommDump(comm) != ncclSuccess) {
        fprintf(stderr, "tuttiCommDump failed: %s\n", ncclGetLastError(comm));
        return 1;
    }
    if (mode == DEAD) kill(peer, SIGKILL);
    double t0 = now_s();
    ncclResult_t res = ncclCommAbort(comm);
    double took = now_s() - t0;
    printf("abort %s %.6f\n", mode_names[mode], took);
    pthread_join(thread, NULL);
    int bad = 0;
    if (res != ncclSuccess) {
        fprintf(stderr, "%s: ncclCommAbort returned %d\n", mode_names[mode], (int)res);
        bad = 1;
    }
    if (took > 1.0) {
        fprintf(stderr, "%s: ncclCommAbort took %.3f s\n", mode_names[mode], took);
        bad = 1;
    }
    if (b->result == ncclSuccess || b->result == ncclInProgress) {
        fprintf(stderr, "%s: the blocked AllReduce returned %d after the abort\n",
                mode_names[mode], (int)b->result);
        bad = 1;
    }
    free(b);
    return bad;
}

/* The id is made by rank 0's process and the peer is forked by this process, which has no
 * thread of its own: a fork() copies only the calling thread, and a lock another thread held at
 * that moment (the allocator's, under ASan) would stay locked in the child for good. */
static int trial(int t, enum mode mode)
{
    ncclUniqueId id;
    int go[2], idp[2], pidp[2];
    if (pipe(go) != 0 || pipe(idp) != 0 || pipe(pidp) != 0) return 1;
    fflush(stdout);
    pid_t me = fork();
    if (me == 0) {
        close(go[0]);
        close(go[1]);
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(1);
        if (write(idp[1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
        pid_t peer = -1;
        if (mode != INIT && read(pidp[0], &peer, sizeof peer) != (ssize_t)sizeof peer) _exit(1);
        _exit(rank0(mode, id, peer));
    }
    close(idp[1]);
    close(pidp[0]);
    pid_t peer = -1;
    bool have_id = read(idp[0], &id, sizeof id) == (ssize_t)sizeof id;
    close(idp[0]);
    if (have_id && mode != INIT) {
        peer = fork();
        if (peer == 0) {
            close(go[1]);
            ncclComm_t comm;
            if (ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess) _exit(3);
            char c;
            while (read(go[0], &c, 1) > 0) {
            }
            ncclCommAbort(comm);
            _exit(0);
        }
        if (write(pidp[1], &peer, sizeof peer) != (ssize_t)sizeof peer) kill(me, SIGKILL);
    }
    close(pidp[1]);
    close(go[0]);
    int status = 0;
    waitpid(me, &status, 0);
    close(go[1]);
    if (peer > 0) {
        kill(peer, SIGKILL);
        waitpid(peer, NULL, 0);
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok)
        fprintf(stderr, "trial %d (%s): rank 0 %s %d\n", t, mode_names[mode],
                WIFSIGNALED(status) ? "died of signal" : "exited with",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return ok ? 0 : 1;
}

struct census {
    int fds, threads, shm;
};

static struct census take_census(void)
{
    return (struct census){.fds = count_entries("/proc/self/fd", ""),
                           .threads = count_entries("/proc/self/task", ""),
                           .shm = count_entries("/dev/shm", "tutti-")};
}

/* One init -> fault -> Abort cycle with rank 0 in this process. Returns 0 when it behaved. */
static int cycle(int c)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    float buf[256];
    if (c % 3 == 2) {
        /* Mid-init: rank 1 never comes. */
        if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t res = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
        if (res != ncclInProgress && res != ncclSuccess) return 1;
        usleep(20000);
        return ncclCommAbort(comm) != ncclSuccess;
    }
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    /* This process has threads (roots, listeners): the peer starts from a fresh image, so it
     * inherits no lock another thread held at the fork. */
    char hex[2 * sizeof id + 1];
    for (size_t i = 0; i < sizeof id; i++) sprintf(hex + 2 * i, "%02x", ((uint8_t *)&id)[i]);
    fflush(stdout);
    pid_t peer = fork();
    if (peer == 0) {
        execl("/proc/self/exe", "fault_abort", "--peer", hex, (char *)NULL);
        _exit(127);
    }
    int bad = 0;
    if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess) {
        fprintf(stderr, "cycle %d: init failed: %s\n", c, ncclGetLastError(NULL));
        bad = 1;
    } else {
        memset(buf, 0, sizeof buf);
        if (ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
            fprintf(stderr, "cycle %d: AllReduce failed: %s\n", c, ncclGetLastError(comm));
            bad = 1;
        }
        kill(peer, SIGKILL);
        waitpid(peer, NULL, 0);
        peer = -1;
        if (ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, NULL) == ncclSuccess) {
            fprintf(stderr, "cycle %d: an AllReduce with a dead peer succeeded\n", c);
            bad = 1;
        }
    }
    if (comm != NULL) ncclCommAbort(comm);
    if (peer > 0) {
        kill(peer, SIGKILL);
        waitpid(peer, NULL, 0);
    }
    return bad;
}

/* The peer of a cycle: joins, takes part in one AllReduce, waits to be killed. */
static int peer_main(const char *hex)
{
    ncclUniqueId id;
    for (size_t i = 0; i < sizeof id; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 2;
        ((uint8_t *)&id)[i] = (uint8_t)v;
    }
    ncclComm_t pc;
    if (ncclCommInitRank(&pc, 2, id, 1) != ncclSuccess) return 3;
    float pbuf[256] = {0};
    ncclAllReduce(pbuf, pbuf, 256, ncclFloat, ncclSum, pc, NULL);
    pause(); /* killed by rank 0 */
    return 0;
}

static int cycles(int n)
{
    bool private_shm = private_dev_shm();
    /* The root thread of the last id ends on its own once both ranks arrived, or at its
     * deadline; let the threads of a cycle settle before counting. */
    struct census before = take_census();
    int failures = 0;
    for (int c = 0; c < n; c++) failures += cycle(c);
    struct census after = take_census();
    for (int i = 0; i < 50 && (after.threads != before.threads || after.fds != before.fds); i++) {
        usleep(100000); /* a detached root thread of the last mid-init cycle may still run */
        after = take_census();
    }
    printf("%d init -> fault -> Abort cycles (%s /dev/shm): fds %d -> %d, threads %d -> %d, "
           "tutti-* in /dev/shm %d -> %d\n", n, private_shm ? "private" : "the host's",
           before.fds, after.fds, before.threads, after.threads, before.shm, after.shm);
    if (after.fds != before.fds || after.threads != before.threads || after.shm != before.shm) {
        fprintf(stderr, "FAIL: the cycles leaked; now:\n");
        fflush(stderr);
        if (system("ls -l /proc/$PPID/fd; cat /proc/$PPID/task/*/comm") != 0)
            fprintf(stderr, "(could not list them)\n");
        failures++;
    }
    printf("%d cycle failures\n", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int trials = 12;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--cycles") == 0) return cycles(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--peer") == 0) return peer_main(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--trials") == 0) trials = atoi(argv[2]);
    int failures = 0;
    for (int t = 0; t < trials; t++) {
        first_trial = t == 0;
        failures += trial(t, (enum mode)(t % NMODES));
    }
    printf("%d trials, %d failures\n", trials, failures);
    return failures ? 1 : 0;
}
