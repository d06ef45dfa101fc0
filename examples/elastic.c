/* Training that carries on through a rank's death and takes in a replacement.
 *
 * `example_elastic` with no arguments is the launcher: it makes a unique id and starts three
 * ranks, each this program run again (`--rank R --id HEX`). Each step every rank adds its
 * gradient to the others' with an AllReduce and subtracts the sum from its copy of the model.
 * At step KILL_STEP rank 2 dies (SIGKILL). The survivors' AllReduce fails with
 * ncclRemoteError; they leave the failed communicator with ncclCommShrink(NCCL_SHRINK_ABORT),
 * agree on the last step they all finished (rank 0's model and step, broadcast), and go on as
 * two ranks. At step GROW_STEP rank 0 calls ncclCommGetUniqueId, starts a replacement (this
 * program again, `--join --id HEX`), and all three call ncclCommGrow; the replacement gets the
 * model by Broadcast and the three train to STEPS.
 *
 * Not under tutti-run, which ends the whole job when a rank dies: a job that means to survive
 * a death needs a launcher that lets it.
 *
 * Every gradient is a small integer, so every sum is exact: each rank compares every AllReduce
 * result and its final model bit for bit with values it computes on its own from who was in
 * the communicator at each step (the replacement's gradient differs from the dead rank's, so
 * its contribution is seen). Exit 0 when every check passed, 1 otherwise; the launcher also
 * fails when rank 2 did not die of SIGKILL or another rank did not exit 0. */
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h" /* ncclCommGetUniqueId, ncclCommGrow: NCCL 2.29, after nccl.h's 2.28 */

#define NRANKS 3
#define VICTIM 2
#define KILL_STEP 4
#define GROW_STEP 8
#define STEPS 12
#define COUNT 1024
#define REPLACEMENT_ID 3 /* the replacement's gradient is that of a fourth worker */
#define DEADLINE_S 120

extern char **environ;

static const char *self_path;
static int me = -1; /* for messages: the rank in the current communicator */

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "elastic rank %d: ", me);                                         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define NCCL_OK(call, comm)                                                                   \
    do {                                                                                      \
        ncclResult_t r_ = (call);                                                             \
        CHECK(r_ == ncclSuccess, "%s failed: %s (%s)", #call, ncclGetErrorString(r_),         \
              ncclGetLastError(comm));                                                        \
    } while (0)

/* Worker `worker`'s gradient at `step`: a small integer, so sums and the model stay exact. */
static float gradient(int worker, int step, int i)
{
    return (float)((worker * 5 + step * 3 + i) % 16);
}

/* Who trained at `step`, as worker numbers (the replacement is worker REPLACEMENT_ID), given
 * the step the survivors went on from after the death. */
static int members(int step, int resume_step, int *workers)
{
    if (step < resume_step) {
        for (int r = 0; r < NRANKS; r++) workers[r] = r;
        return NRANKS;
    }
    workers[0] = 0;
    workers[1] = 1;
    if (step < GROW_STEP) return 2;
    workers[2] = REPLACEMENT_ID;
    return 3;
}

static void expected_sum(int step, int resume_step, float *out)
{
    int workers[NRANKS];
    int n = members(step, resume_step, workers);
    for (int i = 0; i < COUNT; i++) {
        float s = 0.0f;
        for (int k = 0; k < n; k++) s += gradient(workers[k], step, i);
        out[i] = s;
    }
}

static void to_hex(const ncclUniqueId *id, char *hex)
{
    const unsigned char *b = (const unsigned char *)id;
    for (size_t i = 0; i < sizeof *id; i++) sprintf(hex + 2 * i, "%02x", b[i]);
}

static bool from_hex(const char *hex, ncclUniqueId *id)
{
    unsigned char *b = (unsigned char *)id;
    if (strlen(hex) != 2 * sizeof *id) return false;
    for (size_t i = 0; i < sizeof *id; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
        b[i] = (unsigned char)v;
    }
    return true;
}

static pid_t spawn_self(char *const argv[])
{
    pid_t pid;
    int err = posix_spawn(&pid, self_path, NULL, NULL, argv, environ);
    CHECK(err == 0, "posix_spawn %s: %s", self_path, strerror(err));
    return pid;
}

/* One training step on `comm`: returns the AllReduce's result; on success checks the sum and
 * updates the model. */
static ncclResult_t train_step(ncclComm_t comm, int worker, int step, int resume_step,
                               float *model)
{
    static float grad[COUNT], sum[COUNT], want[COUNT];
    for (int i = 0; i < COUNT; i++) grad[i] = gradient(worker, step, i);
    ncclResult_t res = ncclAllReduce(grad, sum, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (res != ncclSuccess) return res;
    expected_sum(step, resume_step, want);
    CHECK(memcmp(sum, want, sizeof sum) == 0, "step %d: the AllReduce's sum is wrong", step);
    for (int i = 0; i < COUNT; i++) model[i] -= sum[i];
    return ncclSuccess;
}

/* The model every rank must hold after STEPS, computed without any communication. */
static void check_model(const float *model, int resume_step)
{
    static float want[COUNT], sum[COUNT];
    memset(want, 0, sizeof want);
    for (int step = 0; step < STEPS; step++) {
        expected_sum(step, resume_step, sum);
        for (int i = 0; i < COUNT; i++) want[i] -= sum[i];
    }
    CHECK(memcmp(model, want, sizeof want) == 0, "the final model is wrong");
}

/* Rank 0 sends its model and next step (the state everyone goes on from) to the others. */
static void share_state(ncclComm_t comm, float *state)
{
    NCCL_OK(ncclBroadcast(state, state, COUNT + 1, ncclFloat, 0, comm, NULL), comm);
}

/* After the grow: the last steps, the model check, and the communicator's end. */
static void finish(ncclComm_t comm, int worker, int step, int resume_step, float *model)
{
    for (; step < STEPS; step++)
        NCCL_OK(train_step(comm, worker, step, resume_step, model), comm);
    check_model(model, resume_step);
    NCCL_OK(ncclCommFinalize(comm), comm);
    NCCL_OK(ncclCommDestroy(comm), NULL);
}

static int run_rank(int rank, const ncclUniqueId *id)
{
    static float state[COUNT + 1]; /* the model, then the next step */
    float *model = state;
    ncclComm_t comm, shrunk, grown;
    me = rank;
    NCCL_OK(ncclCommInitRank(&comm, NRANKS, *id, rank), NULL);
    int step = 0;
    ncclResult_t res = ncclSuccess;
    for (; step < KILL_STEP + 2; step++) {
        if (rank == VICTIM && step == KILL_STEP) raise(SIGKILL);
        res = train_step(comm, rank, step, KILL_STEP, model);
        if (res != ncclSuccess) break;
    }
    CHECK(res == ncclRemoteError, "step %d: the AllReduce after the death returned %s, not "
          "ncclRemoteError", step, ncclGetErrorString(res));
    printf("elastic rank %d: step %d failed (%s); shrinking\n", rank, step,
           ncclGetLastError(comm));

    int exclude[1] = {VICTIM};
    NCCL_OK(ncclCommShrink(comm, exclude, 1, &shrunk, NULL, NCCL_SHRINK_ABORT), comm);
    NCCL_OK(ncclCommAbort(comm), NULL);
    /* The survivors may have stopped at different steps (one may have finished step
     * KILL_STEP - 1 while the other saw the death in it): they go on from rank 0's state. */
    state[COUNT] = (float)step;
    share_state(shrunk, state);
    int resume_step = (int)state[COUNT];
    CHECK(resume_step == KILL_STEP || resume_step == KILL_STEP - 1,
          "rank 0 went on from step %d", resume_step);
    for (step = resume_step; step < GROW_STEP; step++)
        NCCL_OK(train_step(shrunk, rank, step, resume_step, model), shrunk);

    ncclUniqueId gid;
    pid_t joiner = -1;
    if (rank == 0) {
        NCCL_OK(ncclCommGetUniqueId(shrunk, &gid), shrunk);
        char hex[2 * sizeof gid + 1];
        to_hex(&gid, hex);
        char *argv[] = {(char *)self_path, "--join", "--id", hex, NULL};
        joiner = spawn_self(argv);
    }
    NCCL_OK(ncclCommGrow(shrunk, NRANKS, rank == 0 ? &gid : NULL, -1, &grown, NULL), shrunk);
    int nranks;
    NCCL_OK(ncclCommCount(grown, &nranks), grown);
    CHECK(nranks == NRANKS, "the grown communicator has %d ranks", nranks);
    NCCL_OK(ncclCommDestroy(shrunk), NULL);
    state[COUNT] = (float)(GROW_STEP * 256 + resume_step); /* both facts the joiner needs */
    share_state(grown, state);
    finish(grown, rank, GROW_STEP, resume_step, model);
    if (rank == 0) {
        int status;
        CHECK(waitpid(joiner, &status, 0) == joiner, "waitpid(replacement)");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the replacement failed (0x%x)",
              status);
    }
    printf("elastic rank %d: trained %d steps (died at %d, regrown at %d); every check passed\n",
           rank, STEPS, KILL_STEP, GROW_STEP);
    return 0;
}

static int run_replacement(const ncclUniqueId *gid)
{
    static float state[COUNT + 1];
    ncclComm_t grown;
    me = VICTIM;
    NCCL_OK(ncclCommGrow(NULL, NRANKS, gid, VICTIM, &grown, NULL), NULL);
    share_state(grown, state);
    int packed = (int)state[COUNT], step = packed / 256, resume_step = packed % 256;
    CHECK(step == GROW_STEP, "told to start at step %d", step);
    /* The model it was sent is the one the survivors hold after GROW_STEP steps. */
    static float want[COUNT], sum[COUNT];
    for (int s = 0; s < GROW_STEP; s++) {
        expected_sum(s, resume_step, sum);
        for (int i = 0; i < COUNT; i++) want[i] -= sum[i];
    }
    CHECK(memcmp(state, want, sizeof want) == 0, "the model it was sent is wrong");
    finish(grown, REPLACEMENT_ID, step, resume_step, state);
    printf("elastic replacement: joined as rank %d at step %d; every check passed\n", VICTIM,
           step);
    return 0;
}

static int launch(void)
{
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id), NULL);
    char hex[2 * sizeof id + 1];
    to_hex(&id, hex);
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", r);
        char *argv[] = {(char *)self_path, "--rank", rank, "--id", hex, NULL};
        pids[r] = spawn_self(argv);
    }
    int failures = 0, left = NRANKS, status[NRANKS];
    time_t deadline = time(NULL) + DEADLINE_S;
    while (left > 0 && time(NULL) < deadline) {
        for (int r = 0; r < NRANKS; r++) {
            if (pids[r] < 0) continue;
            if (waitpid(pids[r], &status[r], WNOHANG) != pids[r]) continue;
            pids[r] = -1;
            left--;
        }
        if (left > 0) usleep(20000);
    }
    for (int r = 0; r < NRANKS; r++) {
        if (pids[r] >= 0) {
            fprintf(stderr, "elastic: rank %d still running after %d s; killed\n", r,
                    DEADLINE_S);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            failures++;
            continue;
        }
        bool ok = r == VICTIM ? WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL
                              : WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
        if (!ok) {
            fprintf(stderr, "elastic: rank %d ended with status 0x%x\n", r, status[r]);
            failures++;
        }
    }
    printf("elastic: %s\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    self_path = "/proc/self/exe"; /* argv[0] may be a bare name found on PATH */
    setvbuf(stdout, NULL, _IOLBF, 0);
    ncclUniqueId id;
    if (argc == 1) return launch();
    if (argc == 5 && strcmp(argv[1], "--rank") == 0 && strcmp(argv[3], "--id") == 0 &&
        from_hex(argv[4], &id))
        return run_rank(atoi(argv[2]), &id);
    if (argc == 4 && strcmp(argv[1], "--join") == 0 && strcmp(argv[2], "--id") == 0 &&
        from_hex(argv[3], &id))
        return run_replacement(&id);
    fprintf(stderr, "usage: %s (launches the job; --rank/--join are its ranks)\n", argv[0]);
    return 2;
}
