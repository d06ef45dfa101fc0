/* Communicators made from communicators, user operators and memory, end to end through the
 * public headers. Runs as every rank of a 4-rank job under tutti-run (tuttiCommInitFromEnv):
 *
 *   - ncclCommSplit: by parity with keys reversing the order, with ties broken by parent rank,
 *     with a rank passing NCCL_SPLIT_NOCOLOR, nested, with a config, and with one rank passing
 *     a bad colour (every rank must fail, and the parent must still work);
 *   - ncclCommInitRankScalable over ids broadcast by rank 0;
 *   - ncclCommInitAll: 4 ranks inside rank 0's process, driven by one thread each;
 *   - ncclRedOpCreatePreMulSum on float32 and int32 (scalar 2), the scalar copied at creation,
 *     destroyed operators, datatype mismatch, device scalars;
 *   - ncclMemAlloc/ncclMemFree, ncclCommRegister/Deregister, ncclCommWindowRegister/Deregister;
 *   - registering ordinary memory: its whole pages move into a memory file (seen in
 *     /proc/self/maps) with their contents, a collective on it is right, a second registration
 *     of the range shares the file, an overlapping one moves nothing, a child of fork() does not
 *     get the pages, deregistration gives private pages back, and a buffer freed while
 *     registered is not touched by its deregistration;
 *   - ncclCommShrink excluding rank 3 (which only destroys its parent), then a shrink with
 *     NCCL_SHRINK_ABORT excluding one more.
 *
 * Every new communicator is checked for its size, this rank's new rank (computed here from the
 * membership rule, not asked of the library) and an AllReduce whose exact sum follows from the
 * parent ranks of its members. Each failed check prints got and want with the rank; the exit
 * code is 1 when any check failed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl.h"
#include "tutti.h"

#define NRANKS 4
#define COUNT 7

static int failures;
static int world_rank = -1;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        failures++;                                                                             \
        fprintf(stderr, "api_lifecycle.c:%d: rank %d: ", __LINE__, world_rank);                 \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                    \
    } while (0)

/* Checks a call's result, and, when `needle` is not NULL, that ncclGetLastError mentions it. */
#define CHECK_RES(expr, want, needle) check_res(__LINE__, #expr, (expr), (want), (needle))

static void check_res(int line, const char *text, ncclResult_t got, ncclResult_t want,
                      const char *needle)
{
    if (got != want) {
        failures++;
        fprintf(stderr,
                "api_lifecycle.c:%d: rank %d: %s\n    got %d (%s), want %d (%s); last error: "
                "\"%s\"\n",
                line, world_rank, text, (int)got, ncclGetErrorString(got), (int)want,
                ncclGetErrorString(want), ncclGetLastError(NULL));
        return;
    }
    if (needle == NULL) return;
    const char *last = ncclGetLastError(NULL);
    if (last == NULL || strstr(last, needle) == NULL)
        FAIL("%s\n    last error \"%s\" does not mention \"%s\"", text, last ? last : "(NULL)",
             needle);
}

#define CHECK_INT(what, got, want)                                                              \
    do {                                                                                        \
        long long got_ = (long long)(got), want_ = (long long)(want);                           \
        if (got_ != want_) FAIL("%s: %s = %lld, want %lld", what, #got, got_, want_);          \
    } while (0)

/* The data each world rank contributes to the AllReduce checks: element i of world rank r. */
static int32_t input_of(int r, int i) { return (r + 1) * 1000 + i; }

/* Checks that `comm` has `size` ranks, that this rank is `want_rank` in it, and that an int32
 * AllReduce sums input_of(r, i) over exactly the world ranks in `members`. */
static void check_comm(const char *what, ncclComm_t comm, int size, int want_rank,
                       const int *members)
{
    int got_rank = -1, got_size = -1;
    if (comm == NULL) {
        FAIL("%s: communicator is NULL, want one of %d ranks", what, size);
        return;
    }
    CHECK_RES(ncclCommCount(comm, &got_size), ncclSuccess, NULL);
    CHECK_RES(ncclCommUserRank(comm, &got_rank), ncclSuccess, NULL);
    CHECK_INT(what, got_size, size);
    CHECK_INT(what, got_rank, want_rank);
    int32_t send[COUNT], recv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        send[i] = input_of(world_rank, i);
        recv[i] = -1;
    }
    CHECK_RES(ncclAllReduce(send, recv, COUNT, ncclInt32, ncclSum, comm, NULL), ncclSuccess,
              NULL);
    for (int i = 0; i < COUNT; i++) {
        int32_t want = 0;
        for (int m = 0; m < size; m++) want += input_of(members[m], i);
        if (recv[i] != want) {
            FAIL("%s: AllReduce element %d = %d, want %d", what, i, recv[i], want);
            break;
        }
    }
}

/* ---- split -------------------------------------------------------------------------------- */

static void test_split(ncclComm_t world)
{
    ncclComm_t sub = NULL;

    /* Parity, keys reversing the order: colour c holds world ranks {c, c + 2}, the higher one
     * first. */
    CHECK_RES(ncclCommSplit(world, world_rank % 2, NRANKS - world_rank, &sub, NULL), ncclSuccess,
              NULL);
    {
        int members[2] = {world_rank % 2 + 2, world_rank % 2};
        check_comm("parity split", sub, 2, world_rank < 2 ? 1 : 0, members);
    }
    CHECK_RES(ncclCommDestroy(sub), ncclSuccess, NULL);

    /* Equal keys: the order is the parent's. Colour world_rank / 2: {0, 1} and {2, 3}. */
    sub = NULL;
    CHECK_RES(ncclCommSplit(world, world_rank / 2, 7, &sub, NULL), ncclSuccess, NULL);
    {
        int members[2] = {world_rank / 2 * 2, world_rank / 2 * 2 + 1};
        check_comm("tied-key split", sub, 2, world_rank % 2, members);
    }
    CHECK_RES(ncclCommDestroy(sub), ncclSuccess, NULL);

    /* World rank 1 joins nothing; the others form {0, 2, 3}, with a config. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    sub = (ncclComm_t)(uintptr_t)0x1;
    int color = world_rank == 1 ? NCCL_SPLIT_NOCOLOR : 5;
    CHECK_RES(ncclCommSplit(world, color, world_rank, &sub, &config), ncclSuccess, NULL);
    if (world_rank == 1) {
        if (sub != NULL) FAIL("NOCOLOR split: *newcomm = %p, want NULL", (void *)sub);
    } else {
        int members[3] = {0, 2, 3};
        check_comm("split without rank 1", sub, 3, world_rank == 0 ? 0 : world_rank - 1,
                   members);
        CHECK_RES(ncclCommDestroy(sub), ncclSuccess, NULL);
    }

    /* Nested: A = {0, 1, 2} and {3}; then A's ranks by parity of their rank in A: {0, 2}, {1}
     * and {3}. */
    ncclComm_t a = NULL, b = NULL;
    CHECK_RES(ncclCommSplit(world, world_rank < 3 ? 0 : 1, world_rank, &a, NULL), ncclSuccess,
              NULL);
    if (world_rank < 3) {
        int members[3] = {0, 1, 2};
        check_comm("outer split", a, 3, world_rank, members);
    } else {
        int members[1] = {3};
        check_comm("outer split", a, 1, 0, members);
    }
    int a_rank = -1;
    if (a != NULL) ncclCommUserRank(a, &a_rank);
    CHECK_RES(ncclCommSplit(a, a_rank % 2, 0, &b, NULL), ncclSuccess, NULL);
    if (world_rank == 0 || world_rank == 2) {
        int members[2] = {0, 2};
        check_comm("nested split", b, 2, world_rank / 2, members);
    } else {
        int members[1] = {world_rank};
        check_comm("nested split", b, 1, 0, members);
    }
    CHECK_RES(ncclCommDestroy(b), ncclSuccess, NULL);
    CHECK_RES(ncclCommDestroy(a), ncclSuccess, NULL);

    /* One rank passes a bad colour: every rank must fail, and the parent must keep working. */
    sub = (ncclComm_t)(uintptr_t)0x1;
    CHECK_RES(ncclCommSplit(world, world_rank == 2 ? -5 : 0, 0, &sub, NULL),
              ncclInvalidArgument, world_rank == 2 ? "color -5" : "rank 2");
    if (sub != NULL) FAIL("failed split: *newcomm = %p, want NULL", (void *)sub);
    {
        int members[NRANKS] = {0, 1, 2, 3};
        check_comm("parent after a failed split", world, NRANKS, world_rank, members);
    }

    /* Local argument errors: nothing is sent, so each rank fails alone. */
    CHECK_RES(ncclCommSplit(NULL, 0, 0, &sub, NULL), ncclInvalidArgument, "comm");
    CHECK_RES(ncclCommSplit(world, 0, 0, NULL, NULL), ncclInvalidArgument, "newcomm");
    config.magic = 0;
    CHECK_RES(ncclCommSplit(world, 0, 0, &sub, &config), ncclInvalidArgument,
              "NCCL_CONFIG_INITIALIZER");
}

/* ---- scalable init ------------------------------------------------------------------------ */

static void test_scalable(ncclComm_t world)
{
    ncclUniqueId ids[2];
    memset(ids, 0, sizeof ids);
    if (world_rank == 0) {
        CHECK_RES(ncclGetUniqueId(&ids[0]), ncclSuccess, NULL);
        CHECK_RES(ncclGetUniqueId(&ids[1]), ncclSuccess, NULL);
    }
    CHECK_RES(ncclBroadcast(ids, ids, sizeof ids, ncclUint8, 0, world, NULL), ncclSuccess, NULL);
    ncclComm_t comm = NULL;
    CHECK_RES(ncclCommInitRankScalable(&comm, NRANKS, world_rank, 2, ids, NULL), ncclSuccess,
              NULL);
    int members[NRANKS] = {0, 1, 2, 3};
    check_comm("scalable init", comm, NRANKS, world_rank, members);
    CHECK_RES(ncclCommDestroy(comm), ncclSuccess, NULL);

    CHECK_RES(ncclCommInitRankScalable(NULL, NRANKS, 0, 1, ids, NULL), ncclInvalidArgument,
              "newcomm");
    CHECK_RES(ncclCommInitRankScalable(&comm, 0, 0, 1, ids, NULL), ncclInvalidArgument,
              "nranks 0");
    CHECK_RES(ncclCommInitRankScalable(&comm, NRANKS, NRANKS, 1, ids, NULL), ncclInvalidArgument,
              "myrank 4");
    CHECK_RES(ncclCommInitRankScalable(&comm, NRANKS, 0, 0, ids, NULL), ncclInvalidArgument,
              "nId 0");
    CHECK_RES(ncclCommInitRankScalable(&comm, NRANKS, 0, 1, NULL, NULL), ncclInvalidArgument,
              "commIds");
}

/* ---- init all ----------------------------------------------------------------------------- */

struct init_all_thread {
    ncclComm_t comm;
    int index;
    int32_t recv[COUNT];
    ncclResult_t res;
    int rank, size;
};

static void *init_all_main(void *arg)
{
    struct init_all_thread *t = arg;
    int32_t send[COUNT];
    for (int i = 0; i < COUNT; i++) send[i] = (t->index + 1) * 10 + i;
    t->res = ncclCommUserRank(t->comm, &t->rank);
    if (t->res == ncclSuccess) t->res = ncclCommCount(t->comm, &t->size);
    if (t->res == ncclSuccess)
        t->res = ncclAllReduce(send, t->recv, COUNT, ncclInt32, ncclSum, t->comm, NULL);
    return NULL;
}

static void test_init_all(void)
{
    ncclComm_t comms[NRANKS] = {NULL};
    CHECK_RES(ncclCommInitAll(NULL, NRANKS, NULL), ncclInvalidArgument, "comm");
    CHECK_RES(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument, "ndev 0");
    int devlist[NRANKS] = {0, 1, 2, 3};
    CHECK_RES(ncclCommInitAll(comms, NRANKS, devlist), ncclSuccess, NULL);

    /* One thread per communicator: one thread driving all four would need a group. */
    struct init_all_thread threads[NRANKS];
    pthread_t tids[NRANKS];
    for (int t = 0; t < NRANKS; t++) {
        threads[t] = (struct init_all_thread){.comm = comms[t], .index = t};
        if (pthread_create(&tids[t], NULL, init_all_main, &threads[t]) != 0) {
            FAIL("pthread_create for communicator %d failed", t);
            for (int j = 0; j < t; j++) pthread_join(tids[j], NULL);
            return;
        }
    }
    for (int t = 0; t < NRANKS; t++) pthread_join(tids[t], NULL);
    for (int t = 0; t < NRANKS; t++) {
        struct init_all_thread *th = &threads[t];
        if (th->res != ncclSuccess) {
            FAIL("ncclCommInitAll communicator %d: a call returned %d (%s)", t, (int)th->res,
                 ncclGetErrorString(th->res));
            continue;
        }
        CHECK_INT("ncclCommInitAll rank", th->rank, t);
        CHECK_INT("ncclCommInitAll size", th->size, NRANKS);
        for (int i = 0; i < COUNT; i++) {
            /* sum over t of (t + 1) * 10 + i, for t = 0..3 */
            int32_t want = 100 + NRANKS * i;
            if (th->recv[i] != want) {
                FAIL("ncclCommInitAll communicator %d: element %d = %d, want %d", t, i,
                     th->recv[i], want);
                break;
            }
        }
    }
    for (int t = 0; t < NRANKS; t++) CHECK_RES(ncclCommDestroy(comms[t]), ncclSuccess, NULL);

    ncclComm_t one = NULL;
    CHECK_RES(ncclCommInitAll(&one, 1, NULL), ncclSuccess, NULL);
    int members[1] = {world_rank};
    check_comm("ncclCommInitAll of one", one, 1, 0, members);
    CHECK_RES(ncclCommDestroy(one), ncclSuccess, NULL);
}

/* ---- user operators ----------------------------------------------------------------------- */

static void test_premulsum(ncclComm_t world)
{
    /* float32: x = (r + 1) + i / 2 and scalar 2, so every partial sum is exact. */
    float fscalar = 2.0f;
    ncclRedOp_t fop = ncclSum, iop = ncclSum;
    CHECK_RES(ncclRedOpCreatePreMulSum(&fop, &fscalar, ncclFloat32, ncclScalarHostImmediate,
                                       world),
              ncclSuccess, NULL);
    /* The scalar was read at creation: changing it now must not matter. */
    fscalar = 100.0f;
    if ((int)fop < (int)ncclNumOps) FAIL("user operator %d is a built-in value", (int)fop);
    float fsend[COUNT], frecv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        fsend[i] = (float)(world_rank + 1) + 0.5f * (float)i;
        frecv[i] = -1.0f;
    }
    CHECK_RES(ncclAllReduce(fsend, frecv, COUNT, ncclFloat32, fop, world, NULL), ncclSuccess,
              NULL);
    for (int i = 0; i < COUNT; i++) {
        double want = 0;
        for (int r = 0; r < NRANKS; r++) want += 2.0 * ((r + 1) + 0.5 * i);
        if (frecv[i] != (float)want) {
            FAIL("PreMulSum float32 element %d = %.9g, want %.9g", i, (double)frecv[i], want);
            break;
        }
    }

    /* int32 with scalar 2, through Reduce to root 1. */
    int32_t iscalar = 2;
    CHECK_RES(ncclRedOpCreatePreMulSum(&iop, &iscalar, ncclInt32, ncclScalarHostImmediate,
                                       world),
              ncclSuccess, NULL);
    if (iop == fop) FAIL("two live operators share the value %d", (int)iop);
    int32_t isend[COUNT], irecv[COUNT];
    for (int i = 0; i < COUNT; i++) {
        isend[i] = input_of(world_rank, i);
        irecv[i] = -1;
    }
    CHECK_RES(ncclReduce(isend, irecv, COUNT, ncclInt32, iop, 1, world, NULL), ncclSuccess,
              NULL);
    if (world_rank == 1) {
        for (int i = 0; i < COUNT; i++) {
            int32_t want = 0;
            for (int r = 0; r < NRANKS; r++) want += 2 * input_of(r, i);
            if (irecv[i] != want) {
                FAIL("PreMulSum int32 element %d = %d, want %d", i, irecv[i], want);
                break;
            }
        }
    }

    /* An operator serves only its own datatype; the check needs no peer, so all ranks fail. */
    CHECK_RES(ncclAllReduce(isend, irecv, COUNT, ncclFloat32, iop, world, NULL),
              ncclInvalidArgument, "int32");
    CHECK_RES(ncclRedOpDestroy(fop, world), ncclSuccess, NULL);
    CHECK_RES(ncclAllReduce(fsend, frecv, COUNT, ncclFloat32, fop, world, NULL),
              ncclInvalidArgument, "ncclRedOpCreatePreMulSum");
    CHECK_RES(ncclRedOpDestroy(fop, world), ncclInvalidArgument, "already destroyed");
    CHECK_RES(ncclRedOpDestroy(iop, world), ncclSuccess, NULL);
    CHECK_RES(ncclRedOpDestroy(ncclSum, world), ncclInvalidArgument, "built-in");
    CHECK_RES(ncclRedOpDestroy((ncclRedOp_t)-3, world), ncclInvalidArgument, "op -3");
    CHECK_RES(ncclRedOpDestroy((ncclRedOp_t)1000, NULL), ncclInvalidArgument, "comm");

    /* A freed value may come back; it must then work like a new operator. */
    double dscalar = 2.0;
    ncclRedOp_t dop = ncclSum;
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, ncclScalarHostImmediate,
                                       world),
              ncclSuccess, NULL);
    double dsend = world_rank + 1, drecv = -1;
    CHECK_RES(ncclAllReduce(&dsend, &drecv, 1, ncclFloat64, dop, world, NULL), ncclSuccess,
              NULL);
    if (drecv != 20.0) FAIL("PreMulSum float64 = %g, want 20", drecv);
    CHECK_RES(ncclRedOpDestroy(dop, world), ncclSuccess, NULL);

    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, ncclScalarDevice, world),
              ncclInvalidArgument, "CUDA build");
    CHECK_RES(ncclRedOpCreatePreMulSum(NULL, &dscalar, ncclFloat64, ncclScalarHostImmediate,
                                       world),
              ncclInvalidArgument, "op");
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, NULL, ncclFloat64, ncclScalarHostImmediate, world),
              ncclInvalidArgument, "scalar");
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclNumTypes, ncclScalarHostImmediate,
                                       world),
              ncclInvalidArgument, "datatype 12");
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, (ncclScalarResidence_t)9,
                                       world),
              ncclInvalidArgument, "residence 9");
    CHECK_RES(ncclRedOpCreatePreMulSum(&dop, &dscalar, ncclFloat64, ncclScalarHostImmediate,
                                       NULL),
              ncclInvalidArgument, "comm");
}

/* ---- memory ------------------------------------------------------------------------------- */

static void test_memory(ncclComm_t world)
{
    const size_t bytes = 4096 * 3 + 5;
    unsigned char *p = NULL;
    CHECK_RES(ncclMemAlloc((void **)&p, bytes), ncclSuccess, NULL);
    if (p != NULL) {
        for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(i * 7 + 1);
        for (size_t i = 0; i < bytes; i++) {
            if (p[i] != (unsigned char)(i * 7 + 1)) {
                FAIL("ncclMemAlloc byte %zu = %u, want %u", i, p[i], (unsigned)(i * 7 + 1) & 255);
                break;
            }
        }
    }
    /* ncclMemAlloc memory works as a collective's buffer. */
    int32_t *buf = NULL;
    CHECK_RES(ncclMemAlloc((void **)&buf, 2 * COUNT * sizeof *buf), ncclSuccess, NULL);
    if (buf != NULL) {
        for (int i = 0; i < COUNT; i++) buf[i] = input_of(world_rank, i);
        CHECK_RES(ncclAllReduce(buf, buf + COUNT, COUNT, ncclInt32, ncclSum, world, NULL),
                  ncclSuccess, NULL);
        for (int i = 0; i < COUNT; i++) {
            int32_t want = 0;
            for (int r = 0; r < NRANKS; r++) want += input_of(r, i);
            if (buf[COUNT + i] != want) {
                FAIL("AllReduce on ncclMemAlloc memory: element %d = %d, want %d", i,
                     buf[COUNT + i], want);
                break;
            }
        }
    }

    /* Registrations and windows, on ncclMemAlloc memory and on ordinary memory. */
    void *handle = NULL, *handle2 = NULL;
    static char plain[8192];
    CHECK_RES(ncclCommRegister(world, p, bytes, &handle), ncclSuccess, NULL);
    CHECK_RES(ncclCommRegister(world, plain, sizeof plain, &handle2), ncclSuccess, NULL);
    if (handle == NULL || handle == handle2) FAIL("register: handles %p and %p", handle, handle2);
    ncclWindow_t win = NULL, win2 = NULL;
    CHECK_RES(ncclCommWindowRegister(world, buf, 2 * COUNT * sizeof *buf, &win,
                                     NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess, NULL);
    CHECK_RES(ncclCommWindowRegister(world, plain, sizeof plain, &win2, NCCL_WIN_DEFAULT),
              ncclSuccess, NULL);
    if (win == NULL || win == win2) FAIL("window register: windows %p and %p", (void *)win,
                                         (void *)win2);
    /* A window is not a registration handle, nor the other way round. */
    CHECK_RES(ncclCommDeregister(world, (void *)win), ncclInvalidArgument, "handle");
    CHECK_RES(ncclCommWindowDeregister(world, (ncclWindow_t)handle), ncclInvalidArgument,
              "window");
    CHECK_RES(ncclCommDeregister(world, handle), ncclSuccess, NULL);
    CHECK_RES(ncclCommDeregister(world, handle), ncclInvalidArgument, "deregistered already");
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclSuccess, NULL);
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclInvalidArgument, "deregistered already");
    /* handle2 and win2 stay registered: destroying the communicator frees them. */

    CHECK_RES(ncclCommRegister(NULL, plain, 8, &handle), ncclInvalidArgument, "comm");
    CHECK_RES(ncclCommRegister(world, NULL, 8, &handle), ncclInvalidArgument, "buff");
    CHECK_RES(ncclCommRegister(world, plain, 0, &handle), ncclInvalidArgument, "size");
    CHECK_RES(ncclCommRegister(world, plain, 8, NULL), ncclInvalidArgument, "handle");
    CHECK_RES(ncclCommDeregister(world, NULL), ncclInvalidArgument, "handle");
    CHECK_RES(ncclCommWindowRegister(world, plain, 8, &win, 0x80), ncclInvalidArgument,
              "winFlags 0x80");
    CHECK_RES(ncclCommWindowRegister(world, plain, 8, NULL, 0), ncclInvalidArgument, "win");
    CHECK_RES(ncclCommWindowDeregister(world, NULL), ncclInvalidArgument, "win");

    CHECK_RES(ncclMemFree(p), ncclSuccess, NULL);
    CHECK_RES(ncclMemFree(p), ncclInvalidArgument, "ncclMemAlloc");
    CHECK_RES(ncclMemFree(plain), ncclInvalidArgument, "ncclMemAlloc");
    CHECK_RES(ncclMemFree(buf), ncclSuccess, NULL);
    CHECK_RES(ncclMemFree(NULL), ncclInvalidArgument, "ptr");
    CHECK_RES(ncclMemAlloc(NULL, 64), ncclInvalidArgument, "ptr");
    CHECK_RES(ncclMemAlloc((void **)&p, 0), ncclInvalidArgument, "size is 0");
}

/* ---- registered ordinary memory ----------------------------------------------------------- */

/* How many mappings of Tutti's registration files /proc/self/maps lists, and whether one of them
 * spans exactly [lo, hi). Parses a static buffer, so a child of fork() may call it too. */
static int registered_maps(uintptr_t lo, uintptr_t hi, int *exact)
{
    static char text[1 << 20];
    size_t len = 0;
    ssize_t got;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) return -1;
    while (len < sizeof text - 1 && (got = (ssize_t)fread(text + len, 1, sizeof text - 1 - len,
                                                           f)) > 0)
        len += (size_t)got;
    fclose(f);
    text[len] = '\0';
    int n = 0;
    *exact = 0;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        unsigned long start, end;
        if (strstr(line, "tutti-registered") != NULL &&
            sscanf(line, "%lx-%lx", &start, &end) == 2) {
            n++;
            if (start == lo && end == hi) *exact = 1;
        }
        line = next;
    }
    return n;
}

static unsigned char pattern_at(size_t i) { return (unsigned char)(i * 131 + 7); }

static void check_pattern(const char *what, const unsigned char *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) {
        if (p[i] != pattern_at(i)) {
            FAIL("%s: byte %zu = %u, want %u", what, i, p[i], pattern_at(i));
            return;
        }
    }
}

static void test_registered_pages(ncclComm_t world)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* Large enough for malloc to mmap it, so it starts just past a page boundary and ends inside
     * a page: a partial page at either end. Its size differs from rank to rank, so the edges do. */
    const size_t count = (1u << 18) + 1000 + 17 * (size_t)world_rank; /* int32 elements */
    const size_t bytes = count * sizeof(int32_t);
    unsigned char *p = malloc(bytes);
    if (p == NULL) {
        FAIL("malloc of %zu bytes failed", bytes);
        return;
    }
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + bytes) / page * page;
    for (size_t i = 0; i < bytes; i++) p[i] = pattern_at(i);
    int exact = 0;
    int before = registered_maps(lo, hi, &exact);
    void *h1 = NULL, *h2 = NULL, *h3 = NULL;
    CHECK_RES(ncclCommRegister(world, p, bytes, &h1), ncclSuccess, NULL);
    CHECK_INT("registration files mapped after registering", registered_maps(lo, hi, &exact),
              before + 1);
    CHECK_INT("a registration file spans the buffer's whole pages", exact, 1);
    check_pattern("registered buffer", p, bytes);

    /* The same range again shares the file; an overlapping range moves nothing. */
    CHECK_RES(ncclCommRegister(world, p, bytes, &h2), ncclSuccess, NULL);
    CHECK_RES(ncclCommRegister(world, p + 5 * page, 40 * page, &h3), ncclSuccess, NULL);
    CHECK_INT("registration files after registering twice and overlapping",
              registered_maps(lo, hi, &exact), before + 1);

    /* A child of fork() does not get the registered pages (MADV_DONTFORK). */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) _exit(registered_maps(lo, hi, &exact) == before && !exact ? 0 : 1);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        FAIL("a child of fork() still maps the registered pages (status 0x%x)", status);

    /* An in-place AllReduce on the registered buffer: exact int32 sums. */
    int32_t *v = (int32_t *)p;
    size_t common = (1u << 18) + 1000; /* every rank's buffer holds this many */
    for (size_t i = 0; i < common; i++) v[i] = input_of(world_rank, (int)(i % 100000));
    CHECK_RES(ncclAllReduce(v, v, common, ncclInt32, ncclSum, world, NULL), ncclSuccess, NULL);
    for (size_t i = 0; i < common; i++) {
        int32_t want = 0;
        for (int r = 0; r < NRANKS; r++) want += input_of(r, (int)(i % 100000));
        if (v[i] != want) {
            FAIL("AllReduce on registered memory: element %zu = %d, want %d", i, v[i], want);
            break;
        }
    }
    for (size_t i = 0; i < bytes; i++) p[i] = pattern_at(i);

    CHECK_RES(ncclCommDeregister(world, h3), ncclSuccess, NULL);
    CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess, NULL);
    CHECK_INT("registration files while one of two registrations remains",
              registered_maps(lo, hi, &exact), before + 1);
    CHECK_RES(ncclCommDeregister(world, h2), ncclSuccess, NULL);
    CHECK_INT("registration files after the last deregistration",
              registered_maps(lo, hi, &exact), before);
    check_pattern("deregistered buffer", p, bytes);
    free(p);

    /* Freed while registered: the deregistration must leave whatever now lives there alone. */
    size_t len = 64 * page;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        FAIL("mmap of %zu bytes failed", len);
        return;
    }
    CHECK_RES(ncclCommRegister(world, m, len, &h1), ncclSuccess, NULL);
    CHECK_INT("registration files for an mmap'd buffer", registered_maps((uintptr_t)m,
              (uintptr_t)m + len, &exact), before + 1);
    munmap(m, len);
    unsigned char *again = mmap(m, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (again == m) {
        /* A new registration of the range drops the stale record and moves the new pages. */
        for (size_t i = 0; i < len; i++) again[i] = pattern_at(i);
        CHECK_RES(ncclCommRegister(world, again, len, &h2), ncclSuccess, NULL);
        CHECK_INT("registration files after registering the reused range",
                  registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before + 1);
        CHECK_INT("the reused range holds a registration file", exact, 1);
        check_pattern("reused range, registered", again, len);
        CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess, NULL);
        CHECK_INT("registration files after deregistering the freed buffer",
                  registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before + 1);
        check_pattern("reused range after the freed buffer's deregistration", again, len);
        CHECK_RES(ncclCommDeregister(world, h2), ncclSuccess, NULL);
        CHECK_INT("registration files after deregistering the reused range",
                  registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before);
        check_pattern("reused range, deregistered", again, len);
        munmap(again, len);
    } else {
        CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess, NULL);
        if (again != MAP_FAILED) munmap(again, len);
    }
}

/* Symmetric windows steer the algorithm choice, so every rank must judge them by the buffers
 * every rank passes: Broadcast's non-roots may pass a NULL send buffer and Reduce's non-roots a
 * NULL receive buffer while the root's buffers lie in windows. Both must still agree (64 KiB:
 * Direct over the mapped buffers) and compute the right result. */
static void test_window_roots(ncclComm_t world)
{
    enum { N = 16384 }; /* int32s: 64 KiB, where the windows change the choice */
    int32_t *buf = NULL;
    ncclWindow_t win = NULL;
    CHECK_RES(ncclMemAlloc((void **)&buf, 2 * N * sizeof *buf), ncclSuccess, NULL);
    if (buf == NULL) return;
    CHECK_RES(ncclCommWindowRegister(world, buf, 2 * N * sizeof *buf, &win,
                                     NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess, NULL);
    const int root = 1;
    for (int i = 0; i < N; i++) {
        buf[i] = input_of(world_rank, i);
        buf[N + i] = -1;
    }
    CHECK_RES(ncclBroadcast(world_rank == root ? buf : NULL, buf + N, N, ncclInt32, root, world,
                            NULL),
              ncclSuccess, NULL);
    for (int i = 0; i < N; i++) {
        if (buf[N + i] != input_of(root, i)) {
            FAIL("Broadcast, non-roots' send NULL: element %d = %d, want %d", i, buf[N + i],
                 input_of(root, i));
            break;
        }
    }
    const int rroot = 2;
    for (int i = 0; i < N; i++) buf[N + i] = -1;
    CHECK_RES(ncclReduce(buf, world_rank == rroot ? buf + N : NULL, N, ncclInt32, ncclSum, rroot,
                         world, NULL),
              ncclSuccess, NULL);
    for (int i = 0; world_rank == rroot && i < N; i++) {
        int32_t want = 0;
        for (int r = 0; r < NRANKS; r++) want += input_of(r, i);
        if (buf[N + i] != want) {
            FAIL("Reduce, non-roots' recv NULL: element %d = %d, want %d", i, buf[N + i], want);
            break;
        }
    }
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclSuccess, NULL);
    CHECK_RES(ncclMemFree(buf), ncclSuccess, NULL);
}

/* ---- shrink ------------------------------------------------------------------------------- */

/* World rank 3 leaves: it destroys its world communicator and takes no part in the shrink.
 * Then, of the three left, the one of rank 2 leaves a shrink with NCCL_SHRINK_ABORT. */
static void test_shrink(ncclComm_t world)
{
    int exclude[1] = {3};
    ncclComm_t shrunk = NULL, smaller = NULL;
    /* Local argument errors first, on every rank: nothing is sent. */
    int twice[2] = {(world_rank + 1) % NRANKS, (world_rank + 1) % NRANKS};
    CHECK_RES(ncclCommShrink(world, twice, 2, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "listed twice");
    int bad_rank[1] = {NRANKS};
    CHECK_RES(ncclCommShrink(world, bad_rank, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludeRanksList[0] = 4");
    int self[1] = {world_rank};
    CHECK_RES(ncclCommShrink(world, self, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludes itself");
    CHECK_RES(ncclCommShrink(world, exclude, 1, &shrunk, NULL, 0x10), ncclInvalidArgument,
              "shrinkFlags 0x10");
    CHECK_RES(ncclCommShrink(world, NULL, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "excludeRanksList");
    CHECK_RES(ncclCommShrink(world, exclude, -1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "negative");
    CHECK_RES(ncclCommShrink(world, exclude, 1, NULL, NULL, NCCL_SHRINK_DEFAULT),
              ncclInvalidArgument, "newcomm");

    if (world_rank == 3) {
        CHECK_RES(ncclCommDestroy(world), ncclSuccess, NULL);
        return;
    }
    CHECK_RES(ncclCommShrink(world, exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT),
              ncclSuccess, NULL);
    int members[3] = {0, 1, 2};
    check_comm("shrink without rank 3", shrunk, 3, world_rank, members);
    CHECK_RES(ncclCommDestroy(world), ncclSuccess, NULL);

    if (world_rank == 2) {
        CHECK_RES(ncclCommDestroy(shrunk), ncclSuccess, NULL);
        return;
    }
    int exclude2[1] = {2};
    CHECK_RES(ncclCommShrink(shrunk, exclude2, 1, &smaller, NULL, NCCL_SHRINK_ABORT),
              ncclSuccess, NULL);
    int members2[2] = {0, 1};
    check_comm("abort-shrink without rank 2", smaller, 2, world_rank, members2);
    CHECK_RES(ncclCommDestroy(smaller), ncclSuccess, NULL);
    CHECK_RES(ncclCommDestroy(shrunk), ncclSuccess, NULL);
}

int main(void)
{
    ncclComm_t world = NULL;
    ncclResult_t res = tuttiCommInitFromEnv(&world);
    if (res != ncclSuccess) {
        fprintf(stderr, "tuttiCommInitFromEnv: %s (%s)\n", ncclGetErrorString(res),
                ncclGetLastError(NULL));
        return 1;
    }
    int nranks = 0;
    ncclCommUserRank(world, &world_rank);
    ncclCommCount(world, &nranks);
    if (nranks != NRANKS) {
        printf("api_lifecycle: skipped: needs %d ranks (tutti-run -n %d), got %d\n", NRANKS,
               NRANKS, nranks);
        ncclCommDestroy(world);
        return 77;
    }
    test_split(world);
    test_scalable(world);
    if (world_rank == 0) test_init_all();
    test_premulsum(world);
    test_memory(world);
    test_registered_pages(world);
    test_window_roots(world);
    test_shrink(world);
    printf("api_lifecycle rank %d: %s (%d failed checks)\n", world_rank,
           failures ? "FAILED" : "passed", failures);
    return failures != 0;
}
