/* tutti-run's guard over the ranks' process groups: the sentinel that kills them if tutti-run is
 * killed outright, and which groups of exited ranks may still be signalled (tools/tutti-run.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tutti-run.h"

/* ---- The sentinel -------------------------------------------------------------------------
 *
 * PR_SET_PDEATHSIG kills each rank's leader when tutti-run itself dies uncatchably (SIGKILL,
 * the OOM killer), but not what the leader started: a script's python would live on. So a
 * sentinel process, forked before the ranks, learns each rank's process group through a pipe;
 * when the pipe ends without tutti-run's goodbye (tutti-run died), it kills every group. It
 * leads a group of its own and ignores the interrupts, so a terminal's Ctrl-C to tutti-run's
 * group leaves it to do that. */
static int sentinel_fd = -1;

static void sentinel_main(int from_launcher)
{
    const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) signal(ignored[i], SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) { /* holds no pipe of tutti-run's output open (`| tee` ends with it) */
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
        if (null_fd > STDERR_FILENO) close(null_fd);
    }
    pid_t *groups = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        int32_t pid = 0;
        ssize_t got = read(from_launcher, &pid, sizeof pid);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)sizeof pid) break; /* end of file: tutti-run is gone */
        if (pid == 0) _exit(0);                /* its goodbye: it ended the ranks itself */
        if (pid < 0) { /* a group found empty: its id may be anyone's after the pids wrap */
            for (size_t i = 0; i < n; i++)
                if (groups[i] == -pid) groups[i--] = groups[--n];
            continue;
        }
        if (n == cap) {
            size_t grown = cap ? 2 * cap : 64;
            pid_t *g = realloc(groups, grown * sizeof *g);
            if (g == NULL) continue;
            groups = g;
            cap = grown;
        }
        groups[n++] = (pid_t)pid;
    }
    for (size_t i = 0; i < n; i++) kill(-groups[i], SIGKILL);
    _exit(0);
}

/* Best effort: without a sentinel (no pipe or process to spare) the ranks' leaders still die
 * with tutti-run. */
void start_sentinel(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        sentinel_main(p[0]);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return;
    }
    sentinel_fd = p[1];
}

void sentinel_tell(int32_t pid)
{
    if (sentinel_fd < 0) return;
    ssize_t put;
    do
        put = write(sentinel_fd, &pid, sizeof pid);
    while (put < 0 && errno == EINTR);
    if (pid == 0) {
        close(sentinel_fd);
        sentinel_fd = -1;
    }
}

/* The process groups, among `pgids`, that still hold a process whose parent is tutti-run: an
 * exited rank's group whose members live on (the leader's orphans came to tutti-run, the
 * subreaper). Marked by zeroing the others. */
void keep_groups_of_ours(pid_t *pgids, int n)
{
    bool *ours = calloc((size_t)n, sizeof *ours);
    DIR *proc = opendir("/proc");
    if (ours == NULL || proc == NULL) { /* unknown: none is signalled */
        for (int i = 0; i < n; i++) pgids[i] = 0;
        free(ours);
        if (proc != NULL) closedir(proc);
        return;
    }
    pid_t me = getpid();
    for (struct dirent *e; (e = readdir(proc)) != NULL;) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[300], stat[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (f == NULL) continue;
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[got] = '\0';
        const char *after = strrchr(stat, ')'); /* the name may hold anything */
        int ppid = 0, pgrp = 0;
        char state;
        if (after == NULL || sscanf(after + 1, " %c %d %d", &state, &ppid, &pgrp) != 3 ||
            ppid != me)
            continue;
        for (int i = 0; i < n; i++) ours[i] |= pgids[i] == pgrp;
    }
    closedir(proc);
    for (int i = 0; i < n; i++)
        if (!ours[i]) pgids[i] = 0;
    free(ours);
}
