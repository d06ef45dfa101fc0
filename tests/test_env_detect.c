/* Unit test of the launcher environment detection behind tuttiCommInitFromEnv (src/core/
 * env_detect.c): each case sets the variables one launcher would set and checks the rank, the
 * size, the rendezvous kind and address, or the error and the variable its message names. The
 * rendezvous file is exercised for real in a private TMPDIR, with a forked rank 0 publishing
 * late. No network traffic: a port is only bound and released. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/env_init.h"
#include "util/err.h"
#include "util/param.h"
#include "util/time.h"

#include "check.h"

/* The last error's message must mention `word` (the variable the user has to fix). */
#define CHECK_ERROR_NAMES(word)                                                                    \
    do {                                                                                           \
        if (strstr(tt_error_last(), (word)) == NULL)                                               \
            FAIL("error '%s' does not mention '%s'", tt_error_last(), (word));                     \
    } while (0)

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "NCCL_COMM_ID",
    "MASTER_ADDR", "MASTER_PORT", "TUTTI_TIMEOUT_MS",
};

/* Starts a case: a clean environment plus the NAME=VALUE pairs given, NULL-terminated. */
static void begin(const char *name, ...)
{
    check_where = name;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    va_list ap;
    va_start(ap, name);
    for (const char *var = va_arg(ap, const char *); var; var = va_arg(ap, const char *))
        setenv(var, va_arg(ap, const char *), 1);
    va_end(ap);
    tt_param_reload();
    tt_error_clear();
}

static void test_detect(void)
{
    struct tt_env_job job;

    begin("no launcher", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.launcher, TT_ENV_LAUNCHER_NONE);
    CHECK_EQ(job.rank, 0);
    CHECK_EQ(job.nranks, 1);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_ALONE);

    begin("tutti-run", "RANK", "2", "WORLD_SIZE", "4", "NCCL_COMM_ID", "10.0.0.1:29400", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.launcher, TT_ENV_LAUNCHER_RANK);
    CHECK_EQ(job.rank, 2);
    CHECK_EQ(job.nranks, 4);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_COMM_ID);
    CHECK_STR(job.addr, "10.0.0.1:29400");

    begin("RANK wins over Slurm", "RANK", "1", "WORLD_SIZE", "2", "SLURM_PROCID", "0",
          "SLURM_NTASKS", "8", "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.rank, 1);
    CHECK_EQ(job.nranks, 2);
    CHECK_STR(job.rank_var, "RANK");

    begin("torchrun", "RANK", "3", "WORLD_SIZE", "8", "MASTER_ADDR", "node7", "MASTER_PORT",
          "29500", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_MASTER);
    CHECK_STR(job.addr, "node7:29501");

    begin("torchrun IPv6", "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "fe80::1",
          "MASTER_PORT", "100", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_STR(job.addr, "[fe80::1]:101");

    begin("NCCL_COMM_ID wins over MASTER_ADDR", "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR",
          "a", "MASTER_PORT", "5", "NCCL_COMM_ID", "b:6", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_COMM_ID);
    CHECK_STR(job.addr, "b:6");

    begin("Open MPI", "OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "6",
          "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.launcher, TT_ENV_LAUNCHER_OMPI);
    CHECK_EQ(job.rank, 5);
    CHECK_EQ(job.nranks, 6);

    begin("Hydra", "PMI_RANK", "1", "PMI_SIZE", "3", "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.launcher, TT_ENV_LAUNCHER_PMI);
    CHECK_EQ(job.rank, 1);
    CHECK_EQ(job.nranks, 3);

    begin("Slurm", "SLURM_PROCID", "0", "SLURM_NTASKS", "1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.launcher, TT_ENV_LAUNCHER_SLURM);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_ALONE);
}

static void test_errors(void)
{
    struct tt_env_job job;

    begin("RANK without WORLD_SIZE", "RANK", "0", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("WORLD_SIZE");

    begin("WORLD_SIZE without RANK", "WORLD_SIZE", "2", "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("RANK is not");

    begin("rank not below size", "RANK", "4", "WORLD_SIZE", "4", "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("RANK=4");

    begin("rank not a number", "OMPI_COMM_WORLD_RANK", "1x", "OMPI_COMM_WORLD_SIZE", "4",
          "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("OMPI_COMM_WORLD_RANK");

    begin("negative rank", "PMI_RANK", "-1", "PMI_SIZE", "4", "NCCL_COMM_ID", "h:1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("PMI_RANK");

    begin("size zero", "SLURM_PROCID", "0", "SLURM_NTASKS", "0", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("SLURM_NTASKS");

    begin("size too large", "RANK", "0", "WORLD_SIZE", "99999999999", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("WORLD_SIZE");

    begin("MASTER_ADDR alone", "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("MASTER_PORT");

    begin("MASTER_PORT at the top", "RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h",
          "MASTER_PORT", "65535", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("MASTER_PORT");

    begin("no address, Hydra", "PMI_RANK", "0", "PMI_SIZE", "2", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("NCCL_COMM_ID");

    begin("no address, RANK", "RANK", "0", "WORLD_SIZE", "2", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("NCCL_COMM_ID");

    begin("no address, Slurm on two hosts", "SLURM_PROCID", "0", "SLURM_NTASKS", "2",
          "SLURM_JOB_ID", "7", "SLURM_STEP_ID", "0", "SLURM_STEP_NUM_NODES", "2", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("NCCL_COMM_ID");

    begin("no address, Open MPI on two hosts", "OMPI_COMM_WORLD_RANK", "0",
          "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "PMIX_NAMESPACE",
          "prterun-x-1@1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclInvalidArgument);
    CHECK_ERROR_NAMES("NCCL_COMM_ID");
}

static void test_file_paths(const char *dir)
{
    struct tt_env_job job;
    char want[PATH_MAX + 64];

    begin("Slurm, one host", "SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_JOB_ID", "77",
          "SLURM_STEP_ID", "3", "SLURM_STEP_NUM_NODES", "1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_FILE);
    snprintf(want, sizeof want, "%s/tutti-rdzv-%u-77.3", dir, (unsigned)geteuid());
    CHECK_STR(job.rdzv_path, want);

    begin("Open MPI, one host", "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "4",
          "OMPI_COMM_WORLD_LOCAL_SIZE", "4", "PMIX_NAMESPACE", "prterun-h/x-12@1", NULL);
    CHECK_EQ(tt_env_detect(&job), ncclSuccess);
    CHECK_EQ(job.rdzv, TT_ENV_RDZV_FILE);
    snprintf(want, sizeof want, "%s/tutti-rdzv-%u-prterun-h_x-12_1", dir, (unsigned)geteuid());
    CHECK_STR(job.rdzv_path, want);
}

/* A job of two ranks meeting through the file: this process is rank 1 and waits; a forked
 * rank 0 publishes 300 ms later. */
static void test_file_rendezvous(void)
{
    struct tt_env_job job1, job0;
    begin("file rendezvous", "OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
          "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "OMPI_MCA_ess_base_jobid", "4242",
          "TUTTI_TIMEOUT_MS", "20000", NULL);
    CHECK_EQ(tt_env_detect(&job1), ncclSuccess);
    job0 = job1;
    job0.rank = 0;
    CHECK_EQ(tt_env_rdzv_pick(&job0), ncclSuccess);
    CHECK(strncmp(job0.addr, "127.0.0.1:", 10) == 0, "a one-host job listens on loopback, got %s",
          job0.addr);
    uint64_t start_ns = tt_time_ns(); /* before the child's 300 ms begin */
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        _exit(tt_env_rdzv_publish(&job0) == ncclSuccess ? 0 : 1);
    }
    CHECK(pid > 0, "fork");
    CHECK_EQ(tt_env_rdzv_wait(&job1), ncclSuccess);
    uint64_t waited_ms = (tt_time_ns() - start_ns) / 1000000;
    CHECK_STR(job1.addr, job0.addr);
    CHECK(waited_ms >= 250, "waited %lld ms", (long long)waited_ms);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK_EQ(status, 0);

    struct stat st;
    CHECK_EQ(stat(job0.rdzv_path, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    tt_env_rdzv_remove(&job0);
    CHECK(stat(job0.rdzv_path, &st) != 0 && errno == ENOENT, "rendezvous file %s left behind",
          job0.rdzv_path);

    /* Nobody publishes: the wait ends at TUTTI_TIMEOUT_MS with an error naming the file. */
    check_where = "file rendezvous timeout";
    setenv("TUTTI_TIMEOUT_MS", "200", 1);
    tt_param_reload();
    start_ns = tt_time_ns();
    CHECK_EQ(tt_env_rdzv_wait(&job1), ncclSystemError);
    waited_ms = (tt_time_ns() - start_ns) / 1000000;
    CHECK(waited_ms >= 190 && waited_ms < 5000, "waited %lld ms", (long long)waited_ms);
    CHECK_ERROR_NAMES(job1.rdzv_path);

    /* A file others may write is not trusted, nor one that is not a single line. */
    check_where = "file rendezvous untrusted";
    CHECK_EQ(tt_env_rdzv_publish(&job0), ncclSuccess);
    chmod(job0.rdzv_path, 0666);
    CHECK_EQ(tt_env_rdzv_wait(&job1), ncclSystemError);
    CHECK_ERROR_NAMES("private");
    FILE *f = fopen(job0.rdzv_path, "w");
    CHECK(f != NULL, "fopen: %s", strerror(errno));
    if (f != NULL) {
        fputs("127.0.0.1:1", f); /* no newline: incomplete */
        fclose(f);
    }
    chmod(job0.rdzv_path, 0600);
    CHECK_EQ(tt_env_rdzv_wait(&job1), ncclSystemError);
    CHECK_ERROR_NAMES("host:port line");
    tt_env_rdzv_remove(&job0);
}

int main(void)
{
    /* The expected errors would each print a WARN; the checks read tt_error_last instead. */
    setenv("NCCL_DEBUG", "NONE", 1);
    char dir[] = "/tmp/tutti-test-env-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setenv("TMPDIR", dir, 1);
    test_detect();
    test_errors();
    test_file_paths(dir);
    test_file_rendezvous();
    rmdir(dir);
    if (check_failures > 0) {
        fprintf(stderr, "test_env_detect: %d check(s) failed\n", check_failures);
        return 1;
    }
    printf("test_env_detect: all checks passed\n");
    return 0;
}
