/* tutti-run: starts the ranks of a job on this host and watches over them.
 *
 * `tutti-run -n N prog args...` forks N processes, each the leader of a process group of its
 * own, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NCCL_COMM_ID, MASTER_ADDR
 * and MASTER_PORT set; with --nnodes/--node-rank/--rdzv one tutti-run per host starts that
 * host's slice of a larger job.
 * One loop, woken by poll() on the ranks' output pipes and on a self-pipe fed by the signal
 * handlers, forwards signals, tags output lines with the rank, enforces --timeout and reaps.
 * Invariant: tutti-run exits only once every rank it started has been reaped, and never leaves a
 * process of a rank's group behind when something went wrong: the first rank to fail (or the
 * timeout) makes it SIGTERM every rank's group, then SIGKILL them after a grace period. It does
 * not link libtutti, so its fallible functions return 0 or -1 after printing one message. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topo.h"
#include "tutti-run.h"
#include "util/time.h"

/* Signals are caught by a handler that only sets a flag and writes a byte to a self-pipe; the
 * loop does the work. The flags are the truth, the pipe only wakes poll(). Flags, not counts:
 * the same interrupt sent twice at once (`timeout` signals tutti-run and then its process
 * group) is one interrupt, not an escalation; a person's second Ctrl-C comes later. */
static const int caught_signals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
#define NCAUGHT ((int)(sizeof caught_signals / sizeof caught_signals[0]))
static volatile sig_atomic_t signal_pending[NCAUGHT];
static int signal_pipe[2] = {-1, -1};
/* Dispositions found at start-up, restored in each rank before exec (SIGPIPE is last). */
static struct sigaction saved_actions[NCAUGHT + 1];
static bool installed[NCAUGHT];

static void on_signal(int sig)
{
    int saved_errno = errno;
    for (int i = 0; i < NCAUGHT; i++)
        if (caught_signals[i] == sig) signal_pending[i] = 1;
    unsigned char byte = (unsigned char)sig;
    /* A full pipe means a wake-up is already pending, so a failed write loses nothing. */
    ssize_t n = write(signal_pipe[1], &byte, 1);
    (void)n;
    errno = saved_errno;
}

/* Installs the handlers (a signal ignored at start-up, as under nohup, stays ignored, and so
 * it does in the ranks) and ignores SIGPIPE: a closed stdout must not kill the launcher. */
static int setup_signals(void)
{
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "tutti-run: pipe: %s\n", strerror(errno));
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (int i = 0; i < NCAUGHT; i++) {
        sigaction(caught_signals[i], NULL, &saved_actions[i]);
        if (caught_signals[i] != SIGCHLD && saved_actions[i].sa_handler == SIG_IGN) continue;
        sigaction(caught_signals[i], &sa, NULL);
        installed[i] = true;
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &saved_actions[NCAUGHT]);
    /* Become the reaper of the ranks' orphans, so that none lingers as a zombie and the
     * final sweep can wait for them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    return 0;
}

static void set_int_env(const char *name, int value)
{
    char text[16];
    snprintf(text, sizeof text, "%d", value);
    setenv(name, text, 1);
}

/* The child's side of start_rank: its own process group, death with the launcher, the
 * dispositions and mask tutti-run found, stdin from /dev/null, output into the pipes, the
 * environment, exec. */
static void exec_rank(struct launcher *l, const struct rank_proc *r, int pipes[2][2],
                      pid_t launcher_pid, const sigset_t *old_mask) __attribute__((noreturn));
static void exec_rank(struct launcher *l, const struct rank_proc *r, int pipes[2][2],
                      pid_t launcher_pid, const sigset_t *old_mask)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher_pid) _exit(EXIT_LAUNCH); /* the launcher died before prctl */
    for (int i = 0; i < NCAUGHT; i++)
        if (installed[i]) sigaction(caught_signals[i], &saved_actions[i], NULL);
    sigaction(SIGPIPE, &saved_actions[NCAUGHT], NULL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);

    if (l->nofile_raised) setrlimit(RLIMIT_NOFILE, &l->nofile); /* the rank's own limit */
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != STDIN_FILENO) {
        dup2(null_fd, STDIN_FILENO);
        close(null_fd);
    }
    /* dup2 clears close-on-exec on the copies; the originals close at exec. */
    if (l->tagging) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
    }
    const struct options *o = &l->opt;
    set_int_env("RANK", r->rank);
    set_int_env("WORLD_SIZE", o->nnodes * o->nproc);
    set_int_env("LOCAL_RANK", r->rank - o->node_rank * o->nproc);
    set_int_env("LOCAL_WORLD_SIZE", o->nproc);
    set_int_env("NODE_RANK", o->node_rank);
    setenv("NCCL_COMM_ID", l->comm_id, 1);
    /* For torch.distributed's env:// (its store listens on MASTER_PORT at rank 0). Tutti's
     * own init reads NCCL_COMM_ID first, so they change nothing for C programs. */
    setenv("MASTER_ADDR", l->master_addr, 1);
    setenv("MASTER_PORT", l->master_port, 1);
    if (l->secret[0] != '\0') setenv("TUTTI_SECRET", l->secret, 1);
    /* Rank 0 starts the root on the socket that has held its port since the port was picked
     * (src/bootstrap/root.c); the other ranks lose it at exec (close-on-exec). */
    if (l->root_fd >= 0 && r->rank == 0 && fcntl(l->root_fd, F_SETFD, 0) == 0)
        set_int_env("TUTTI_ROOT_FD", l->root_fd);
    else
        unsetenv("TUTTI_ROOT_FD"); /* not one an outer job passed down to tutti-run */
    /* Tagged output goes through a pipe, into which Python would write in 8 KiB blocks: a
     * rank's prints would show up late, and be lost when it is killed (a hang's last words). */
    if (l->tagging && getenv("PYTHONUNBUFFERED") == NULL) setenv("PYTHONUNBUFFERED", "1", 1);
    /* All ranks on this host: nothing needs to reach them from outside it. */
    if (o->nnodes == 1 && getenv("NCCL_SOCKET_IFNAME") == NULL)
        setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
    for (int i = 0; i < o->env_count; i++) putenv(o->env_sets[i]);
    int local = r->rank - o->node_rank * o->nproc;
    if (l->bind_sets != NULL &&
        sched_setaffinity(0, sizeof l->bind_sets[local], &l->bind_sets[local]) != 0)
        fprintf(stderr, "tutti-run: rank %d: cannot bind to its CPUs (%s); it runs unbound\n",
                r->rank, strerror(errno));

    execvp(o->argv[0], o->argv);
    fprintf(stderr, "tutti-run: rank %d: cannot execute '%s': %s\n", r->rank, o->argv[0],
            strerror(errno));
    _exit(127);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Forks rank `r`. Signals are blocked across fork() so that no handler runs in the child
 * before it has restored the dispositions. */
static int start_rank(struct launcher *l, struct rank_proc *r)
{
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    for (int s = 0; s < 2 && l->tagging; s++) {
        if (pipe2(pipes[s], O_CLOEXEC) != 0) {
            fprintf(stderr, "tutti-run: pipe for rank %d: %s\n", r->rank, strerror(errno));
            close_fd(&pipes[0][0]);
            close_fd(&pipes[0][1]);
            return -1;
        }
    }
    sigset_t all, old_mask;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old_mask);
    pid_t launcher_pid = getpid();
    pid_t pid = fork();
    if (pid == 0) exec_rank(l, r, pipes, launcher_pid, &old_mask);
    int fork_errno = errno;
    if (pid > 0) {
        /* Also done by the child; whichever runs first makes the group exist before any
         * signal is sent to it. EACCES means the child has already exec'd, its group made. */
        setpgid(pid, pid);
        sentinel_tell((int32_t)pid);
        r->pid = pid;
        r->running = true;
        l->nrunning++;
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    for (int s = 0; s < 2; s++) {
        close_fd(&pipes[s][1]);
        r->out[s].fd = pipes[s][0];
        r->out[s].dest_fd = s == 0 ? STDOUT_FILENO : STDERR_FILENO;
        if (r->out[s].fd >= 0) fcntl(r->out[s].fd, F_SETFL, O_NONBLOCK);
    }
    if (pid < 0) {
        fprintf(stderr, "tutti-run: fork for rank %d: %s\n", r->rank, strerror(fork_errno));
        close_fd(&r->out[0].fd);
        close_fd(&r->out[1].fd);
        return -1;
    }
    return 0;
}

/* Sends `sig` to the process group of every rank started, running or not: an exited rank's
 * group may still hold its children. Once its leader was reaped, the group's id is free for
 * another process to take as soon as the group is empty, so an exited rank's group is only
 * signalled while a process of it is still tutti-run's child. */
static void signal_all(struct launcher *l, int sig)
{
    pid_t *gone = calloc((size_t)l->opt.nproc, sizeof *gone);
    int ngone = 0;
    /* A stopped process acts on a terminating signal only once continued: it gets SIGCONT
     * after it (a rank stopped reading the terminal would otherwise wait for SIGKILL). */
    bool wake = sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
    for (int i = 0; i < l->opt.nproc; i++) {
        if (l->ranks[i].pid <= 0 || l->ranks[i].forgotten) continue;
        if (l->ranks[i].running) {
            kill(-l->ranks[i].pid, sig);
            if (wake) kill(-l->ranks[i].pid, SIGCONT);
        } else if (gone != NULL) {
            gone[ngone++] = l->ranks[i].pid;
        }
    }
    if (ngone > 0) keep_groups_of_ours(gone, ngone);
    for (int i = 0; i < ngone; i++) {
        if (gone[i] <= 0) continue;
        kill(-gone[i], sig);
        if (wake) kill(-gone[i], SIGCONT);
    }
    free(gone);
}

static void begin_stop(struct launcher *l)
{
    if (l->stopping) return;
    l->stopping = true;
    signal_all(l, SIGTERM);
    l->kill_deadline_ns = tt_deadline_after_ms(KILL_GRACE_MS);
}

static void write_all(int fd, const char *data, size_t bytes)
{
    while (bytes > 0) {
        ssize_t n = write(fd, data, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
            poll(&p, 1, 100);
            continue;
        }
        if (n <= 0) return; /* stdout closed (EPIPE): the output has nowhere to go */
        data += n;
        bytes -= (size_t)n;
    }
}

/* Writes "[rank] " + line, adding the newline a split or unterminated line lacks, in one
 * write() so that lines of different ranks do not interleave. */
static void emit_line(int rank, int dest_fd, const char *line, size_t bytes)
{
    static char out[LINE_BYTES + 32];
    int n = snprintf(out, sizeof out, "[%d] ", rank);
    memcpy(out + n, line, bytes);
    size_t total = (size_t)n + bytes;
    if (bytes == 0 || line[bytes - 1] != '\n') out[total++] = '\n';
    write_all(dest_fd, out, total);
}

/* Reads what a pipe holds and emits each complete line; at end of file emits the rest.
 * Returns true when it read something (there may be more). */
static bool read_stream(int rank, struct out_stream *s)
{
    ssize_t n = read(s->fd, s->buf + s->used, LINE_BYTES - s->used);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (n <= 0) {
        if (s->used > 0) emit_line(rank, s->dest_fd, s->buf, s->used);
        s->used = 0;
        close_fd(&s->fd);
        return false;
    }
    s->used += (size_t)n;
    size_t start = 0;
    for (size_t i = s->used - (size_t)n; i < s->used; i++) {
        if (s->buf[i] != '\n') continue;
        emit_line(rank, s->dest_fd, s->buf + start, i + 1 - start);
        start = i + 1;
    }
    if (start == 0 && s->used == LINE_BYTES) {
        /* A line longer than the buffer: what we have becomes a line of its own. */
        emit_line(rank, s->dest_fd, s->buf, s->used);
        start = s->used;
    }
    memmove(s->buf, s->buf + start, s->used - start);
    s->used -= start;
    return true;
}

/* Emits what an exited rank left in its pipes, so that its last words precede the report: at
 * most DRAIN_READS reads per stream (a full pipe takes 4), since a process the rank left
 * behind may hold the pipe and keep writing, and the failure must still be handled (the rest
 * is read by the main loop as usual). */
#define DRAIN_READS 64
static void drain_rank(struct rank_proc *r)
{
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < DRAIN_READS && r->out[s].fd >= 0 && read_stream(r->rank, &r->out[s]);
             k++) {
        }
}

static const char *signal_name(int sig, char *buf, size_t bytes)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev != NULL) snprintf(buf, bytes, "SIG%s", abbrev);
    else snprintf(buf, bytes, "%d", sig);
    return buf;
}

/* How long after the first failure other failures are still considered for the blame. */
#define BLAME_WINDOW_MS 200

/* Whether a failure with wait status `a` is more likely the cause of the job's failure than
 * one with `b`: a rank killed by a signal (tutti-run has sent none yet) is the cause, while a
 * rank that exits with an error a few milliseconds later is usually reporting that death. */
static bool likelier_cause(int a, int b)
{
    return WIFSIGNALED(a) && !WIFSIGNALED(b);
}

/* Names the rank blamed for the failure, makes its status tutti-run's, and stops the rest. */
static void blame_and_stop(struct launcher *l)
{
    char name[32];
    struct rank_proc *r = l->blame;
    int status = l->blame_status;
    if (WIFEXITED(status)) {
        l->exit_code = WEXITSTATUS(status);
        fprintf(stderr, "tutti-run: rank %d exited with status %d", r->rank, l->exit_code);
    } else {
        l->exit_code = 128 + WTERMSIG(status);
        fprintf(stderr, "tutti-run: rank %d exited with signal %s", r->rank,
                signal_name(WTERMSIG(status), name, sizeof name));
    }
    fprintf(stderr, " (the first rank to fail)");
    if (l->nrunning > 0)
        fprintf(stderr, "; stopping the other %d rank%s", l->nrunning,
                l->nrunning > 1 ? "s" : "");
    fprintf(stderr, "\n");
    l->blame = NULL;
    begin_stop(l);
}

/* Reaps every child that has ended; children that are not ranks are orphans we adopted as
 * subreaper. A rank's failure, before anything else decided the exit status, opens a window of
 * BLAME_WINDOW_MS: the failures reaped in it compete for the blame (likelier_cause, else the
 * first reaped), because ranks that fail within milliseconds of each other are often reaped in
 * another order than they died (a killed rank and the survivor that reported its death).
 * Returns false once no child of any kind is left. */
/* After something was reaped: the exited ranks whose groups are now empty are forgotten, by
 * tutti-run (signal_all skips them) and by the sentinel, since their ids are free for any
 * process to take once the pids wrap. */
static void forget_empty_groups(struct launcher *l)
{
    pid_t *gone = calloc((size_t)l->opt.nproc, sizeof *gone);
    int *which = calloc((size_t)l->opt.nproc, sizeof *which);
    int ngone = 0;
    for (int i = 0; i < l->opt.nproc && gone != NULL && which != NULL; i++) {
        if (l->ranks[i].pid <= 0 || l->ranks[i].running || l->ranks[i].forgotten) continue;
        which[ngone] = i;
        gone[ngone++] = l->ranks[i].pid;
    }
    if (ngone > 0) keep_groups_of_ours(gone, ngone);
    for (int k = 0; k < ngone; k++) {
        if (gone[k] != 0) continue;
        l->ranks[which[k]].forgotten = true;
        sentinel_tell(-(int32_t)l->ranks[which[k]].pid);
    }
    free(gone);
    free(which);
}

static bool reap(struct launcher *l)
{
    bool reaped = false;
    for (;;) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
        if (pid < 0 && errno == EINTR) continue;
        if (pid <= 0) {
            if (reaped) forget_empty_groups(l);
            return pid == 0;
        }
        struct rank_proc *r = NULL;
        for (int i = 0; i < l->opt.nproc && r == NULL; i++)
            if (l->ranks[i].pid == pid && l->ranks[i].running) r = &l->ranks[i];
        if (WIFSTOPPED(status)) {
            /* Not an exit: said, since the job waits for that rank now (a read from the
             * terminal stops a background process group with SIGTTIN). */
            char name[32];
            if (r != NULL)
                fprintf(stderr, "tutti-run: rank %d (pid %d) was stopped by %s%s; the job "
                                "waits for it\n", r->rank, (int)pid,
                        signal_name(WSTOPSIG(status), name, sizeof name),
                        WSTOPSIG(status) == SIGTTIN || WSTOPSIG(status) == SIGTTOU
                            ? " (it used the terminal)" : "");
            continue;
        }
        reaped = true;
        if (r == NULL) continue;
        r->running = false;
        l->nrunning--;
        bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (!failed || l->exit_code >= 0 || l->stopping) continue;
        if (l->interrupts > 0) {
            /* Interrupted: every rank was told to end and ends as it chooses (one may be
             * saving a checkpoint), so none is stopped for another's end. The first to end
             * with a status other than dying of the interrupt gives tutti-run its status. */
            if (!WIFSIGNALED(status) || WTERMSIG(status) != l->interrupt_sig)
                l->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            continue;
        }
        drain_rank(r);
        if (l->blame == NULL) {
            l->blame_deadline_ns = tt_deadline_after_ms(BLAME_WINDOW_MS);
        } else if (!likelier_cause(status, l->blame_status)) {
            continue;
        }
        l->blame = r;
        l->blame_status = status;
    }
}

/* A second interrupt stops the ranks as a failure does (SIGTERM, SIGKILL KILL_GRACE_MS later):
 * ranks blocked where the first one does not reach (a call that ignores it) still end. A third
 * kills them at once. */
static void escalate(struct launcher *l)
{
    if (!l->stopping) {
        fprintf(stderr, "tutti-run: interrupted again; stopping the %d rank%s still running "
                        "(SIGKILL in %d s)\n", l->nrunning, l->nrunning == 1 ? "" : "s",
                KILL_GRACE_MS / 1000);
        begin_stop(l);
    } else if (!l->killed) {
        fprintf(stderr, "tutti-run: interrupted again; killing the ranks\n");
        signal_all(l, SIGKILL);
        l->killed = true;
    }
}

/* Acts on the signals caught since the last call: forwards them to the ranks. */
static void handle_signals(struct launcher *l)
{
    unsigned char drain[64];
    while (read(signal_pipe[0], drain, sizeof drain) > 0) {
    }
    for (int i = 0; i < NCAUGHT; i++) {
        if (!signal_pending[i]) continue;
        signal_pending[i] = 0;
        int sig = caught_signals[i];
        if (sig == SIGCHLD) continue; /* reap() runs on every pass */
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            l->interrupt_sig = sig;
            if (++l->interrupts > 1) {
                escalate(l);
                continue;
            }
        }
        signal_all(l, sig);
    }
}

static void check_deadlines(struct launcher *l)
{
    if (!l->stopping && l->nrunning > 0 && tt_deadline_passed(l->timeout_deadline_ns)) {
        fprintf(stderr, "tutti-run: --timeout %g s reached with %d rank%s still running; "
                        "stopping them\n", l->opt.timeout_s, l->nrunning,
                l->nrunning == 1 ? "" : "s");
        if (l->exit_code < 0) l->exit_code = EXIT_TIMEOUT;
        begin_stop(l);
    }
    if (l->stopping && !l->killed && tt_deadline_passed(l->kill_deadline_ns)) {
        signal_all(l, SIGKILL);
        l->killed = true;
    }
}

static int min_left_ms(uint64_t a_ns, uint64_t b_ns, int cap_ms)
{
    int a = tt_deadline_left_ms(a_ns, cap_ms);
    int b = tt_deadline_left_ms(b_ns, cap_ms);
    return a < b ? a : b;
}

/* The loop. Each pass: act on signals, reap, enforce deadlines, then sleep in poll() on the
 * self-pipe and the open output pipes until something happens or the next deadline. Once the
 * last rank has exited, whatever is left in the ranks' groups is killed and the remaining
 * output is drained for at most DRAIN_MS (a process that left its group may hold a pipe). */
static void supervise(struct launcher *l)
{
    struct pollfd *fds = l->fds;
    uint64_t drain_deadline_ns = TT_NO_DEADLINE;
    bool children_left = true;
    for (;;) {
        handle_signals(l);
        children_left = reap(l);
        if (l->blame != NULL && (l->nrunning == 0 || tt_deadline_passed(l->blame_deadline_ns)))
            blame_and_stop(l);
        check_deadlines(l);
        if (l->nrunning == 0 && drain_deadline_ns == TT_NO_DEADLINE) {
            signal_all(l, SIGKILL);
            sentinel_tell(0); /* tutti-run ends the ranks' groups itself from here */
            drain_deadline_ns = tt_deadline_after_ms(DRAIN_MS);
        }
        int nfds = 0;
        fds[nfds++] = (struct pollfd){.fd = signal_pipe[0], .events = POLLIN};
        for (int i = 0; i < l->opt.nproc; i++) {
            for (int s = 0; s < 2; s++) {
                if (l->ranks[i].out[s].fd < 0) continue;
                l->streams[nfds] = &l->ranks[i].out[s];
                l->stream_rank[nfds] = l->ranks[i].rank;
                fds[nfds++] = (struct pollfd){.fd = l->ranks[i].out[s].fd, .events = POLLIN};
            }
        }
        if (l->nrunning == 0 && ((nfds == 1 && !children_left) ||
                                 tt_deadline_passed(drain_deadline_ns)))
            break;
        uint64_t next_ns = l->stopping ? (l->killed ? TT_NO_DEADLINE : l->kill_deadline_ns)
                                       : l->timeout_deadline_ns;
        if (l->blame != NULL && l->blame_deadline_ns < next_ns) next_ns = l->blame_deadline_ns;
        /* Adopted orphans are reaped on SIGCHLD; the cap re-checks in case one was missed. */
        int wait_ms = min_left_ms(next_ns, drain_deadline_ns, l->nrunning == 0 ? 20 : 1000);
        if (poll(fds, (nfds_t)nfds, wait_ms) <= 0) continue;
        for (int i = 1; i < nfds; i++)
            if (fds[i].revents != 0) read_stream(l->stream_rank[i], l->streams[i]);
    }
    /* What the ranks wrote before they exited is still in the pipes when writing to a slow
     * stdout took the drain time: emitted now, within drain_rank's bound. */
    for (int i = 0; i < l->opt.nproc; i++) {
        drain_rank(&l->ranks[i]);
        for (int s = 0; s < 2; s++) {
            struct out_stream *st = &l->ranks[i].out[s];
            if (st->used > 0) emit_line(l->ranks[i].rank, st->dest_fd, st->buf, st->used);
            close_fd(&st->fd);
        }
    }
}

/* --bind: each local rank's CPUs, from the host's topology (tools/topo.h). */
static int make_bind_sets(struct launcher *l)
{
    struct tt_topo topo;
    char err[256];
    if (!tt_topo_load(&topo, err, sizeof err)) {
        fprintf(stderr, "tutti-run: --bind: %s\n", err);
        return -1;
    }
    int n = l->opt.nproc;
    int *pus = malloc(TT_TOPO_MAX_PUS * sizeof *pus);
    l->bind_sets = calloc((size_t)n, sizeof *l->bind_sets);
    if (pus == NULL || l->bind_sets == NULL) {
        fprintf(stderr, "tutti-run: out of memory for --bind\n");
        free(pus);
        tt_topo_free(&topo);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        struct tt_topo_place where;
        int npus = tt_topo_place(&topo, r, n, &where, pus, TT_TOPO_MAX_PUS);
        CPU_ZERO(&l->bind_sets[r]);
        for (int i = 0; i < npus; i++)
            if (pus[i] >= 0 && pus[i] < CPU_SETSIZE) CPU_SET(pus[i], &l->bind_sets[r]);
    }
    free(pus);
    tt_topo_free(&topo);
    return 0;
}

/* Two pipes per rank stay open in tutti-run: the soft descriptor limit is raised to what the
 * job needs (within the hard limit) and restored in the ranks (exec_rank); a job that still
 * does not fit is refused with the reason, before any rank starts. */
static int raise_fd_limit(struct launcher *l)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
    l->nofile = rl;
    l->nofile_raised = false;
    rlim_t need = (rlim_t)l->opt.nproc * 2 + 64;
    if (!l->tagging || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr, "tutti-run: -n %d needs about %llu file descriptors (two pipes per "
                        "rank), and the hard limit is %llu: raise it (ulimit -Hn) or pass "
                        "--no-tag\n", l->opt.nproc, (unsigned long long)need,
                (unsigned long long)rl.rlim_max);
        return -1;
    }
    struct rlimit raised = {.rlim_cur = need, .rlim_max = rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
        fprintf(stderr, "tutti-run: cannot raise the descriptor limit to %llu for -n %d: %s\n",
                (unsigned long long)need, l->opt.nproc, strerror(errno));
        return -1;
    }
    l->nofile_raised = true;
    return 0;
}

int main(int argc, char **argv)
{
    struct launcher l;
    memset(&l, 0, sizeof l);
    l.exit_code = -1;
    l.root_fd = -1;
    const struct options *o = &l.opt;
    int parsed = parse_options(argc, argv, &l.opt);
    if (parsed != 0) {
        if (parsed < 0) fprintf(stderr, "tutti-run: try 'tutti-run --help'\n");
        l.exit_code = parsed < 0 ? EXIT_USAGE : 0;
        goto out;
    }
    l.tagging = o->tag == 1 || (o->tag == -1 && o->nproc > 1);
    start_sentinel(); /* before the root's socket and the ranks' pipes, which it must not hold */
    if (make_addresses(&l) != 0) {
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }
    if (o->nnodes == 1 && getenv("TUTTI_SECRET") == NULL && make_secret(l.secret) != 0) {
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }
    if (o->nnodes > 1 && getenv("TUTTI_SECRET") == NULL)
        fprintf(stderr, "tutti-run: warning: no TUTTI_SECRET across %d nodes: whoever can reach "
                        "%s can join the job; set the same TUTTI_SECRET on every node "
                        "(docs/security.md)\n", o->nnodes, l.comm_id);
    if (raise_fd_limit(&l) != 0) {
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }
    size_t nfds = (size_t)o->nproc * 2 + 1;
    l.ranks = calloc((size_t)o->nproc, sizeof *l.ranks);
    l.fds = calloc(nfds, sizeof *l.fds);
    l.streams = calloc(nfds, sizeof *l.streams);
    l.stream_rank = calloc(nfds, sizeof *l.stream_rank);
    if (l.ranks == NULL || l.fds == NULL || l.streams == NULL || l.stream_rank == NULL) {
        fprintf(stderr, "tutti-run: out of memory for %d ranks\n", o->nproc);
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }
    if (setup_signals() != 0) {
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }

    if (o->bind && make_bind_sets(&l) != 0) {
        l.exit_code = EXIT_LAUNCH;
        goto out;
    }
    l.timeout_deadline_ns = o->timeout_s > 0
                                ? tt_time_ns() + (uint64_t)(o->timeout_s * 1e9)
                                : TT_NO_DEADLINE;
    for (int i = 0; i < o->nproc; i++) {
        l.ranks[i].rank = o->node_rank * o->nproc + i;
        l.ranks[i].out[0].fd = l.ranks[i].out[1].fd = -1;
    }
    for (int i = 0; i < o->nproc; i++) {
        if (start_rank(&l, &l.ranks[i]) != 0) {
            l.exit_code = EXIT_LAUNCH;
            begin_stop(&l);
            break;
        }
    }
    if (l.root_fd >= 0) close(l.root_fd); /* rank 0 has its own */
    l.root_fd = -1;
    supervise(&l);
    if (l.exit_code < 0) l.exit_code = l.interrupt_sig != 0 ? 128 + l.interrupt_sig : 0;
out:
    if (l.root_fd >= 0) close(l.root_fd);
    free(l.bind_sets);
    free(l.stream_rank);
    free(l.streams);
    free(l.fds);
    free(l.ranks);
    free(l.opt.env_sets);
    return l.exit_code;
}
