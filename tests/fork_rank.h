/* Forking the ranks of a job safely: rank 0's process makes the job's unique ids, as an
 * application's rank 0 does, and the ranks are forked by a process that never called the
 * library and so runs no thread of its own.
 *
 * Why: ncclGetUniqueId starts the bootstrap root's thread in the calling process, and a fork()
 * copies only the calling thread. A lock another thread holds at that moment stays locked in
 * the child for good: the allocator's under ASan (GCC 12's libasan has no fork handlers), or any
 * of the library's own. A parent that makes the id and then forks the ranks one by one races
 * its root thread, which accepts and allocates for the ranks already started, and a rank
 * forked at the wrong moment hangs on its first malloc (docs/semantics.md, "fork()"). */
#ifndef TUTTI_TESTS_FORK_RANK_H
#define TUTTI_TESTS_FORK_RANK_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"

/* fork() for one rank of a job. Rank 0's child makes `nids` unique ids into ids[] and the
 * parent receives them, so fork rank 0 first; other ranks' children find ids[] as the parent
 * had it. Returns 0 in the child, the child's pid in the parent and -1 (after saying why on
 * stderr) when the fork fails or rank 0 could not make the ids. The caller must not have called
 * the library before. */
static inline pid_t fork_rank(int rank, ncclUniqueId *ids, int nids)
{
    int p[2];
    if (rank == 0 && pipe(p) != 0) {
        perror("fork_rank: pipe");
        return -1;
    }
    fflush(stdout); /* or the child prints the parent's pending lines again */
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) perror("fork_rank: fork");
    if (rank != 0) return pid;
    if (pid == 0) {
        close(p[0]);
        for (int k = 0; k < nids; k++) {
            if (ncclGetUniqueId(&ids[k]) != ncclSuccess) {
                fprintf(stderr, "fork_rank: ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
                _exit(3);
            }
        }
        size_t bytes = (size_t)nids * sizeof *ids;
        if (write(p[1], ids, bytes) != (ssize_t)bytes) _exit(3);
        close(p[1]);
        return 0;
    }
    close(p[1]);
    size_t got = 0, bytes = (size_t)nids * sizeof *ids;
    while (pid > 0 && got < bytes) {
        ssize_t n = read(p[0], (char *)ids + got, bytes - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(p[0]);
    if (pid > 0 && got < bytes) {
        fprintf(stderr, "fork_rank: rank 0 made no unique id\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* A process of its own that makes `nids` unique ids into ids[] and then serves their bootstrap
 * roots until the caller kills it (SIGKILL, then waitpid): for a test whose ranks must not host
 * the roots themselves (one that counts a rank's threads and fds). Returns its pid, or -1. */
static inline pid_t fork_id_server(ncclUniqueId *ids, int nids)
{
    pid_t pid = fork_rank(0, ids, nids);
    if (pid == 0) {
        for (;;) pause();
    }
    return pid;
}

#endif
