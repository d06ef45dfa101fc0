/* Reads a job's shape from the launcher's variables and, for single-host jobs that name no
 * address, runs the rendezvous file (see env_init.h). Launchers are tried in a fixed order and
 * the first whose rank or size variable is set wins, so a variable set by an outer launcher
 * (an srun around tutti-run) never overrides the inner one. Every value is parsed strictly and
 * every error names the variable to fix. */
#include "core/env_init.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/sock.h"
#include "util/time.h"
#include "util/wait.h"

/* Launchers, in the order they are tried. */
static const struct {
    enum tt_env_launcher launcher;
    const char *name;
    const char *rank_var;
    const char *nranks_var;
} sources[] = {
    {TT_ENV_LAUNCHER_RANK, "tutti-run/torchrun", "RANK", "WORLD_SIZE"},
    {TT_ENV_LAUNCHER_OMPI, "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {TT_ENV_LAUNCHER_PMI, "MPICH/Hydra", "PMI_RANK", "PMI_SIZE"},
    {TT_ENV_LAUNCHER_SLURM, "Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v != NULL && *v != '\0') ? v : NULL;
}

/* Strict decimal integer in [lo, hi] from variable `name`. */
static ncclResult_t env_int(const char *name, long lo, long hi, int *out)
{
    const char *text = env(name);
    char *end = NULL;
    errno = 0;
    long v = text != NULL ? strtol(text, &end, 10) : 0;
    if (text == NULL || errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return TT_ERROR(ncclInvalidArgument, "%s=%s is not an integer in [%ld, %ld]", name,
                        text != NULL ? text : "", lo, hi);
    *out = (int)v;
    return ncclSuccess;
}

static ncclResult_t detect_rank(struct tt_env_job *out)
{
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        const char *rank_text = env(sources[i].rank_var);
        const char *nranks_text = env(sources[i].nranks_var);
        if (rank_text == NULL && nranks_text == NULL) continue;
        out->launcher = sources[i].launcher;
        out->launcher_name = sources[i].name;
        out->rank_var = sources[i].rank_var;
        out->nranks_var = sources[i].nranks_var;
        if (rank_text == NULL || nranks_text == NULL)
            return TT_ERROR(ncclInvalidArgument, "%s is set but %s is not (launcher: %s)",
                            rank_text != NULL ? out->rank_var : out->nranks_var,
                            rank_text != NULL ? out->nranks_var : out->rank_var,
                            out->launcher_name);
        TT_TRY(env_int(out->nranks_var, 1, INT32_MAX, &out->nranks));
        TT_TRY(env_int(out->rank_var, 0, INT32_MAX, &out->rank));
        if (out->rank >= out->nranks)
            return TT_ERROR(ncclInvalidArgument, "%s=%d is not below %s=%d", out->rank_var,
                            out->rank, out->nranks_var, out->nranks);
        return ncclSuccess;
    }
    /* No launcher: a job of one rank, as an MPI program started without mpirun. */
    out->launcher = TT_ENV_LAUNCHER_NONE;
    out->launcher_name = "none";
    out->rank = 0;
    out->nranks = 1;
    return ncclSuccess;
}

/* MASTER_ADDR:MASTER_PORT+1. torchrun's own TCPStore already listens on MASTER_PORT, so the
 * bootstrap root takes the next port. An IPv6 address is bracketed. */
static ncclResult_t master_addr(struct tt_env_job *out, const char *host)
{
    if (env("MASTER_PORT") == NULL)
        return TT_ERROR(ncclInvalidArgument, "MASTER_ADDR is set but MASTER_PORT is not");
    if (host == NULL)
        return TT_ERROR(ncclInvalidArgument, "MASTER_PORT is set but MASTER_ADDR is not");
    int port = 0;
    TT_TRY(env_int("MASTER_PORT", 1, 65534, &port));
    bool bracket = strchr(host, ':') != NULL && host[0] != '[';
    int n = snprintf(out->addr, sizeof out->addr, bracket ? "[%s]:%d" : "%s:%d", host,
                     port + 1);
    if (n < 0 || (size_t)n >= sizeof out->addr)
        return TT_ERROR(ncclInvalidArgument, "MASTER_ADDR is longer than %d characters",
                        TT_ENV_ADDR_BYTES - 8);
    out->rdzv = TT_ENV_RDZV_MASTER;
    return ncclSuccess;
}

/* The key of a single-host Open MPI or Slurm job's rendezvous file: the job's id, the same on
 * every rank and different for every job (Slurm: job and step). An empty key when this job is
 * not such a job: another launcher, several hosts, or no id. */
static void rdzv_file_key(const struct tt_env_job *job, char *key, size_t key_bytes)
{
    key[0] = '\0';
    const char *id = NULL;
    const char *step = NULL;
    const char *local_size = NULL;
    if (job->launcher == TT_ENV_LAUNCHER_OMPI) {
        id = env("PMIX_NAMESPACE");
        if (id == NULL) id = env("OMPI_MCA_ess_base_jobid");
        if (id == NULL) id = env("OMPI_MCA_orte_ess_jobid");
        local_size = env("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (local_size == NULL || atoi(local_size) != job->nranks) return;
    } else if (job->launcher == TT_ENV_LAUNCHER_SLURM) {
        id = env("SLURM_JOB_ID");
        step = env("SLURM_STEP_ID");
        const char *nodes = env("SLURM_STEP_NUM_NODES");
        if (nodes == NULL) nodes = env("SLURM_NNODES");
        if (nodes == NULL || strcmp(nodes, "1") != 0 || step == NULL) return;
    }
    if (id == NULL) return;
    snprintf(key, key_bytes, "%s%s%s", id, step != NULL ? "." : "", step != NULL ? step : "");
    /* The key becomes part of a file name: keep it to [A-Za-z0-9._-]. */
    for (char *c = key; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '-';
        if (!ok) *c = '_';
    }
}

ncclResult_t tt_env_detect(struct tt_env_job *out)
{
    memset(out, 0, sizeof *out);
    TT_TRY(detect_rank(out));

    const char *comm_id = tt_param_comm_id();
    if (comm_id != NULL && *comm_id != '\0') {
        if (strlen(comm_id) >= sizeof out->addr)
            return TT_ERROR(ncclInvalidArgument, "NCCL_COMM_ID is longer than %d characters",
                            TT_ENV_ADDR_BYTES - 1);
        snprintf(out->addr, sizeof out->addr, "%s", comm_id);
        out->rdzv = TT_ENV_RDZV_COMM_ID;
        return ncclSuccess;
    }
    const char *host = env("MASTER_ADDR");
    if (host != NULL || env("MASTER_PORT") != NULL) return master_addr(out, host);
    if (out->nranks == 1) {
        out->rdzv = TT_ENV_RDZV_ALONE;
        return ncclSuccess;
    }
    char key[128];
    rdzv_file_key(out, key, sizeof key);
    if (key[0] == '\0')
        return TT_ERROR(ncclInvalidArgument,
                        "%s started %d ranks but no rendezvous address is set: set "
                        "NCCL_COMM_ID=host:port on every rank (a free port on the host of rank "
                        "0, e.g. mpirun -x NCCL_COMM_ID=$(hostname):29500); see docs/launch.md",
                        out->launcher_name, out->nranks);
    const char *dir = env("TMPDIR");
    int n = snprintf(out->rdzv_path, sizeof out->rdzv_path, "%s/tutti-rdzv-%u-%s",
                     dir != NULL ? dir : "/tmp", (unsigned)geteuid(), key);
    if (n < 0 || (size_t)n >= sizeof out->rdzv_path)
        return TT_ERROR(ncclInvalidArgument, "TMPDIR=%s is too long for a rendezvous file; "
                        "set NCCL_COMM_ID=host:port instead", dir);
    out->rdzv = TT_ENV_RDZV_FILE;
    return ncclSuccess;
}

/* A free TCP port on 127.0.0.1: listen on port 0 as any listener does (tt_sock_listen: in
 * TUTTI_PORT_RANGE when set, and a port taken by number when TIME_WAIT entries hold all the
 * kernel would choose), read the port, close. The root listens on it next. */
ncclResult_t tt_env_rdzv_pick(struct tt_env_job *job)
{
    struct sockaddr_storage loopback, bound;
    struct sockaddr_in *a = (struct sockaddr_in *)&loopback;
    int fd = -1;
    memset(&loopback, 0, sizeof loopback);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ncclResult_t res = tt_sock_listen(&loopback, &fd, &bound);
    if (res != ncclSuccess) {
        char why[TT_REASON_BYTES];
        snprintf(why, sizeof why, "%s", tt_error_last());
        return TT_ERROR(res, "rendezvous: %s; set NCCL_COMM_ID=host:port", why);
    }
    tt_sock_close(&fd);
    snprintf(job->addr, sizeof job->addr, "127.0.0.1:%u", (unsigned)tt_sock_addr_port(&bound));
    return ncclSuccess;
}

ncclResult_t tt_env_rdzv_publish(const struct tt_env_job *job)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", job->rdzv_path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "rendezvous: cannot create %s: %s; set "
                        "NCCL_COMM_ID=host:port instead", tmp, tt_strerror(errno));
    char line[TT_ENV_ADDR_BYTES + 1];
    int bytes = snprintf(line, sizeof line, "%s\n", job->addr);
    bool ok = write(fd, line, (size_t)bytes) == bytes;
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (ok && rename(tmp, job->rdzv_path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        return TT_ERROR(ncclSystemError, "rendezvous: cannot publish %s: %s; set "
                        "NCCL_COMM_ID=host:port instead", job->rdzv_path, strerror(err));
    }
    TT_INFO(TT_SUB_INIT | TT_SUB_BOOTSTRAP, "rendezvous: published %s in %s", job->addr,
            job->rdzv_path);
    return ncclSuccess;
}

/* Reads the file if it is there and complete: 1 when job->addr was filled, 0 when not yet.
 * Only a file of our own user that nobody else may write is trusted. */
static ncclResult_t read_rdzv_file(struct tt_env_job *job, int *found)
{
    *found = 0;
    int fd = open(job->rdzv_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) return ncclSuccess;
    if (fd < 0)
        return TT_ERROR(ncclSystemError, "rendezvous: cannot open %s: %s", job->rdzv_path,
                        strerror(errno));
    struct stat st;
    char text[TT_ENV_ADDR_BYTES + 1];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 022) == 0)
        n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0)
        return TT_ERROR(ncclSystemError, "rendezvous: %s is not a private file of this user; "
                        "remove it or set NCCL_COMM_ID=host:port", job->rdzv_path);
    text[n] = '\0';
    char *newline = strchr(text, '\n');
    if (newline == NULL || newline == text || newline[1] != '\0')
        return TT_ERROR(ncclSystemError, "rendezvous: %s does not hold one host:port line; "
                        "remove it or set NCCL_COMM_ID=host:port", job->rdzv_path);
    size_t len = (size_t)(newline - text);
    if (len >= sizeof job->addr)
        return TT_ERROR(ncclSystemError, "rendezvous: %s holds a line of %zu bytes", job->rdzv_path,
                        len);
    memcpy(job->addr, text, len);
    job->addr[len] = '\0';
    *found = 1;
    return ncclSuccess;
}

ncclResult_t tt_env_rdzv_wait(struct tt_env_job *job)
{
    int64_t timeout_ms = tt_param_timeout_ms();
    uint64_t deadline_ns = tt_deadline_after_ms(timeout_ms);
    struct tt_backoff backoff;
    tt_backoff_init(&backoff);
    /* The file is looked at once per step of the ladder; the spin steps are left out, since a
     * look is a system call and rank 0 needs the CPU to start. */
    backoff.spin_limit = 0;
    for (;;) {
        int found = 0;
        TT_TRY(read_rdzv_file(job, &found));
        if (found) break;
        if (tt_deadline_passed(deadline_ns))
            return TT_ERROR(ncclSystemError,
                            "rendezvous: rank %d waited %lld ms for rank 0 to publish its "
                            "address in %s; is rank 0 running? (TUTTI_TIMEOUT_MS; set "
                            "NCCL_COMM_ID=host:port to skip the file)",
                            job->rank, (long long)timeout_ms, job->rdzv_path);
        tt_backoff_pause(&backoff, NULL);
    }
    TT_INFO(TT_SUB_INIT | TT_SUB_BOOTSTRAP, "rendezvous: read %s from %s", job->addr,
            job->rdzv_path);
    return ncclSuccess;
}

void tt_env_rdzv_remove(const struct tt_env_job *job)
{
    if (job->rdzv == TT_ENV_RDZV_FILE && job->rdzv_path[0] != '\0') unlink(job->rdzv_path);
}
