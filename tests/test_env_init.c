/* End-to-end test of tuttiCommInitFromEnv: ranks build a communicator from their launcher's
 * variables and AllReduce their rank + 1, which must sum to n(n+1)/2 on every rank.
 *   test_env_init                 one rank, as started by tutti-run (or by nothing at all)
 *   test_env_init spawn MODE N    forks N ranks with the variables of MODE set: "torchrun"
 *                                 (MASTER_ADDR/MASTER_PORT), "ompi" and "slurm" (single host,
 *                                 no address: the rendezvous file), "hydra" (no address:
 *                                 every rank must fail with ncclInvalidArgument)
 * Exit 0 when every rank passed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h"
#include "root_port.h"

#include "world.h"

static int run_rank(void)
{
    int rank = -1, nranks = -1;
    ncclComm_t comm = world_open("test_env_init", &rank, &nranks);
    if (comm == NULL) return 1;
    double mine = rank + 1, sum = 0, want = nranks * (nranks + 1) / 2.0;
    ncclResult_t res = ncclAllReduce(&mine, &sum, 1, ncclDouble, ncclSum, comm, NULL);
    int ok = res == ncclSuccess && sum == want;
    if (!ok)
        fprintf(stderr, "FAIL rank %d of %d: AllReduce result %d, sum got %g, want %g\n", rank,
                nranks, (int)res, sum, want);
    ncclCommDestroy(comm);
    return ok ? 0 : 1;
}

static void set_int(const char *name, int value)
{
    char text[16];
    snprintf(text, sizeof text, "%d", value);
    setenv(name, text, 1);
}

/* The variables `mode` sets for `rank` of `nranks`. */
static void set_launcher_env(const char *mode, int rank, int nranks, int port, const char *job)
{
    if (strcmp(mode, "torchrun") == 0) {
        set_int("RANK", rank);
        set_int("WORLD_SIZE", nranks);
        set_int("LOCAL_RANK", rank);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        set_int("MASTER_PORT", port - 1);
    } else if (strcmp(mode, "ompi") == 0) {
        set_int("OMPI_COMM_WORLD_RANK", rank);
        set_int("OMPI_COMM_WORLD_SIZE", nranks);
        set_int("OMPI_COMM_WORLD_LOCAL_SIZE", nranks);
        setenv("PMIX_NAMESPACE", job, 1);
    } else if (strcmp(mode, "slurm") == 0) {
        set_int("SLURM_PROCID", rank);
        set_int("SLURM_NTASKS", nranks);
        setenv("SLURM_JOB_ID", job, 1);
        setenv("SLURM_STEP_ID", "0", 1);
        setenv("SLURM_STEP_NUM_NODES", "1", 1);
    } else {
        set_int("PMI_RANK", rank);
        set_int("PMI_SIZE", nranks);
    }
}

static int spawn(const char *mode, int nranks)
{
    static const char *const clear[] = {"RANK", "WORLD_SIZE", "NCCL_COMM_ID", "MASTER_ADDR",
                                        "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++) unsetenv(clear[i]);
    /* A failure must end the test, not hang it. */
    setenv("TUTTI_TIMEOUT_MS", "30000", 1);
    /* Tutti's root port under torchrun's variables (MASTER_PORT + 1), held for rank 0 */
    int root_fd = -1, port = root_port_hold(&root_fd);
    if (port < 0) exit(1);
    char job[64];
    snprintf(job, sizeof job, "test-env-init-%d", (int)getpid());
    int expect_fail = strcmp(mode, "hydra") == 0;
    pid_t pids[64];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            set_launcher_env(mode, r, nranks, port, job);
            fflush(stdout);
            _exit(run_rank());
        }
    }
    root_port_release(&root_fd);
    int failed = 0;
    for (int r = 0; r < nranks; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int passed = WIFEXITED(status) && (WEXITSTATUS(status) == 0) != expect_fail;
        if (!passed) {
            fprintf(stderr, "FAIL %s: rank %d: status 0x%x, want %s\n", mode, r, status,
                    expect_fail ? "an init error" : "exit 0");
            failed = 1;
        }
    }
    if (!failed) printf("test_env_init %s: %d ranks passed\n", mode, nranks);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "spawn") == 0) {
        int nranks = atoi(argv[3]);
        if (nranks < 1 || nranks > 64) {
            fprintf(stderr, "test_env_init: N must be in [1, 64]\n");
            return 2;
        }
        return spawn(argv[2], nranks);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: test_env_init [spawn torchrun|ompi|slurm|hydra N]\n");
        return 2;
    }
    return run_rank();
}
