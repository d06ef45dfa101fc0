/* tutti-run's pieces (tools/tutti-run.c, the loop; tools/tutti-run-setup.c, the options and
 * addresses; tools/tutti-run-guard.c, the sentinel and the process groups it may signal). Like
 * the rest of tutti-run, fallible functions return 0 or -1 after printing one message. */
#ifndef TUTTI_RUN_H
#define TUTTI_RUN_H

#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LINE_BYTES 16384  /* longest line tagged whole; a longer one is split */
#define KILL_GRACE_MS 2000 /* SIGTERM, then SIGKILL this much later */
#define DRAIN_MS 1000      /* output still read after the last rank has exited */
#define MAX_NPROC 4096
#define EXIT_LAUNCH 1
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124

/* One of a rank's output pipes while output is tagged. */
struct out_stream {
    int fd;         /* read end; -1 once closed (or when output is not tagged) */
    int dest_fd;    /* STDOUT_FILENO or STDERR_FILENO */
    size_t used;    /* bytes of an unfinished line in buf */
    char buf[LINE_BYTES];
};

struct rank_proc {
    int rank;      /* global rank */
    pid_t pid;     /* also the id of its process group; 0 until started */
    bool running;
    bool forgotten; /* exited and its group found empty: the sentinel was told to forget it */
    struct out_stream out[2];
};

struct options {
    int nproc;
    int nnodes;
    int node_rank;
    const char *rdzv; /* host:port, or NULL for a free port on 127.0.0.1 */
    int tag;          /* 1, 0, or -1 for the default: on when nproc > 1 */
    double timeout_s; /* 0: none */
    bool bind;        /* --bind: pin each rank to its cores (tools/topo.h) */
    char **env_sets;  /* -x arguments */
    int env_count;
    char **argv;      /* the program and its arguments */
};

struct launcher {
    struct options opt;
    bool tagging;
    char comm_id[300];
    char master_addr[300]; /* MASTER_ADDR and MASTER_PORT for torch.distributed's env:// */
    char master_port[16];
    char secret[4 + 64 + 1]; /* "key:" + hex of a fresh 256-bit secret, or "" */
    int root_fd;             /* without --rdzv: the root's listening socket, for rank 0; -1 */
    cpu_set_t *bind_sets;    /* --bind: each local rank's CPUs, else NULL */
    struct rlimit nofile;    /* the descriptor limit tutti-run was started with */
    bool nofile_raised;      /* raised for the pipes; the ranks get `nofile` back */
    struct rank_proc *ranks;
    int nrunning;
    int exit_code;      /* -1 until a failure or the timeout decides it */
    int interrupt_sig;  /* the last SIGINT/SIGTERM/SIGHUP forwarded, or 0 */
    int interrupts;     /* how many of those arrived */
    bool stopping;      /* the ranks have been sent SIGTERM */
    bool killed;        /* ... and SIGKILL */
    uint64_t timeout_deadline_ns;
    uint64_t kill_deadline_ns;
    /* The rank blamed for the job's failure, chosen among the ranks that failed within
     * BLAME_WINDOW_MS of the first (see reap()), its wait status, and when the choice is made. */
    struct rank_proc *blame;
    int blame_status;
    uint64_t blame_deadline_ns;
    /* poll() set of the loop: the self-pipe, then open output pipes and whose they are. */
    struct pollfd *fds;
    struct out_stream **streams;
    int *stream_rank;
};

/* --help and the command line (tutti-run-setup.c): 0 to run, 1 after --help, -1 on an error. */
int parse_options(int argc, char **argv, struct options *opt);
/* TUTTI_SECRET's value for a one-host job: "key:" and 64 hex digits. */
int make_secret(char out[4 + 64 + 1]);
/* NCCL_COMM_ID, MASTER_ADDR and MASTER_PORT, from --rdzv or two free local ports. */
int make_addresses(struct launcher *l);

/* The sentinel (tutti-run-guard.c): forked first; told each rank's process group (a pid), and
 * to forget one found empty (its pid negated: after the pids wrap, the id may lead an
 * unrelated group); kills those it knows if tutti-run dies without saying goodbye
 * (sentinel_tell(0)). */
void start_sentinel(void);
void sentinel_tell(int32_t pid);
/* Zeroes the entries of `pgids` with no process whose parent is tutti-run. */
void keep_groups_of_ours(pid_t *pgids, int n);

#endif
