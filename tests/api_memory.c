/* Memory, registrations and windows, end to end through the public headers. Runs as every rank
 * of a 4-rank job under tutti-run (tuttiCommInitFromEnv):
 *
 *   - ncclMemAlloc/ncclMemFree, tuttiMemAllocHost, ncclCommRegister/Deregister,
 *     ncclCommWindowRegister/Deregister, and their argument checks; a child of fork() freeing
 *     an inherited block leaves the parent's data alone;
 *   - registering ordinary memory: its whole pages move into a memory file (seen in
 *     /proc/self/maps) with their contents, a collective on it is right, a second registration
 *     of the range shares the file, an overlapping one moves nothing, a child of fork() does not
 *     get the pages, deregistration gives private pages back, and a buffer freed while
 *     registered is not touched by its deregistration;
 *   - symmetric windows and roots: Broadcast's and Reduce's non-roots passing NULL buffers;
 *   - the pages of memory files that peers mapped are released when their owner frees or
 *     deregisters them, although the peers keep the mappings cached;
 *   - deregistering or registering a buffer that an operation queued on a stream still uses
 *     waits for that operation before moving the pages.
 *
 * The exit code is 1 when any check failed. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_checks.h"
#include "nccl.h"
#include "tutti.h"

/* ---- memory ------------------------------------------------------------------------------- */

/* An AllReduce from buf[0 .. COUNT) into buf[COUNT .. 2 COUNT), checked. */
static void allreduce_on(ncclComm_t world, int32_t *buf, const char *what)
{
    for (int i = 0; i < COUNT; i++) buf[i] = input_of(world_rank, i);
    CHECK_RES(ncclAllReduce(buf, buf + COUNT, COUNT, ncclInt32, ncclSum, world, NULL),
              ncclSuccess);
    for (int i = 0; i < COUNT; i++) {
        int32_t want = 0;
        for (int r = 0; r < NRANKS; r++) want += input_of(r, i);
        if (buf[COUNT + i] != want) {
            FAIL("AllReduce on %s: element %d = %d, want %d", what, i, buf[COUNT + i], want);
            break;
        }
    }
}

static void test_memory(ncclComm_t world)
{
    const size_t bytes = 4096 * 3 + 5;
    unsigned char *p = NULL;
    CHECK_RES(ncclMemAlloc((void **)&p, bytes), ncclSuccess);
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
    CHECK_RES(ncclMemAlloc((void **)&buf, 2 * COUNT * sizeof *buf), ncclSuccess);
    if (buf != NULL) allreduce_on(world, buf, "ncclMemAlloc memory");

    /* Registrations and windows, on ncclMemAlloc memory and on ordinary memory. */
    void *handle = NULL, *handle2 = NULL;
    static char plain[8192];
    CHECK_RES(ncclCommRegister(world, p, bytes, &handle), ncclSuccess);
    CHECK_RES(ncclCommRegister(world, plain, sizeof plain, &handle2), ncclSuccess);
    if (handle == NULL || handle == handle2) FAIL("register: handles %p and %p", handle, handle2);
    ncclWindow_t win = NULL, win2 = NULL;
    CHECK_RES(
        ncclCommWindowRegister(world, buf, 2 * COUNT * sizeof *buf, &win, NCCL_WIN_COLL_SYMMETRIC),
        ncclSuccess);
    CHECK_RES(ncclCommWindowRegister(world, plain, sizeof plain, &win2, NCCL_WIN_DEFAULT),
              ncclSuccess);
    if (win == NULL || win == win2) FAIL("window register: windows %p and %p", (void *)win,
                                         (void *)win2);
    /* A window is not a registration handle, nor the other way round. */
    CHECK_ERR(ncclCommDeregister(world, (void *)win), ncclInvalidArgument, "handle");
    CHECK_ERR(ncclCommWindowDeregister(world, (ncclWindow_t)handle), ncclInvalidArgument, "window");
    CHECK_RES(ncclCommDeregister(world, handle), ncclSuccess);
    CHECK_ERR(ncclCommDeregister(world, handle), ncclInvalidArgument, "deregistered already");
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclSuccess);
    CHECK_ERR(ncclCommWindowDeregister(world, win), ncclInvalidArgument, "deregistered already");
    /* handle2 and win2 stay registered: destroying the communicator frees them. */

    CHECK_ERR(ncclCommRegister(NULL, plain, 8, &handle), ncclInvalidArgument, "comm");
    CHECK_ERR(ncclCommRegister(world, NULL, 8, &handle), ncclInvalidArgument, "buff");
    CHECK_ERR(ncclCommRegister(world, plain, 0, &handle), ncclInvalidArgument, "size");
    CHECK_ERR(ncclCommRegister(world, plain, 8, NULL), ncclInvalidArgument, "handle");
    CHECK_ERR(ncclCommDeregister(world, NULL), ncclInvalidArgument, "handle");
    CHECK_ERR(ncclCommWindowRegister(world, plain, 8, &win, 0x80), ncclInvalidArgument,
              "winFlags 0x80");
    CHECK_ERR(ncclCommWindowRegister(world, plain, 8, NULL, 0), ncclInvalidArgument, "win");
    CHECK_ERR(ncclCommWindowDeregister(world, NULL), ncclInvalidArgument, "win");

    CHECK_RES(ncclMemFree(p), ncclSuccess);
    CHECK_ERR(ncclMemFree(p), ncclInvalidArgument, "ncclMemAlloc");
    CHECK_ERR(ncclMemFree(plain), ncclInvalidArgument, "ncclMemAlloc");
    CHECK_RES(ncclMemFree(buf), ncclSuccess);
    CHECK_ERR(ncclMemFree(NULL), ncclInvalidArgument, "ptr");
    CHECK_ERR(ncclMemAlloc(NULL, 64), ncclInvalidArgument, "ptr");
    CHECK_ERR(ncclMemAlloc((void **)&p, 0), ncclInvalidArgument, "size is 0");

    /* tuttiMemAllocHost: host memory that the host's ranks share, as ncclMemAlloc's on a
     * thread without a CUDA device: it serves a collective alike, and ncclMemFree takes it. */
    int32_t *h = NULL;
    CHECK_RES(tuttiMemAllocHost((void **)&h, 2 * COUNT * sizeof *h), ncclSuccess);
    if (h != NULL) {
        allreduce_on(world, h, "tuttiMemAllocHost memory");
        CHECK_RES(ncclMemFree(h), ncclSuccess);
        CHECK_ERR(ncclMemFree(h), ncclInvalidArgument, "ncclMemAlloc");
    }
    CHECK_ERR(tuttiMemAllocHost(NULL, 64), ncclInvalidArgument, "ptr");
    CHECK_ERR(tuttiMemAllocHost((void **)&h, 0), ncclInvalidArgument, "size is 0");

    /* A child of fork() that frees a block it inherited (Python's garbage collector in a
     * DataLoader worker would) lets go of its own view only: the parent's data stays. */
    const size_t fork_bytes = 3 * 4096;
    CHECK_RES(tuttiMemAllocHost((void **)&p, fork_bytes), ncclSuccess);
    if (p != NULL) {
        for (size_t i = 0; i < fork_bytes; i++) p[i] = (unsigned char)(i * 13 + 5);
        fflush(NULL);
        pid_t child = fork();
        if (child == 0) _exit(ncclMemFree(p) == ncclSuccess ? 0 : 1);
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            FAIL("ncclMemFree in a child of fork(): status 0x%x", status);
        for (size_t i = 0; i < fork_bytes; i++) {
            if (p[i] != (unsigned char)(i * 13 + 5)) {
                FAIL("after a child of fork() freed its copy, byte %zu = %u, want %u", i, p[i],
                     (unsigned)(i * 13 + 5) & 255);
                break;
            }
        }
        CHECK_RES(ncclMemFree(p), ncclSuccess);
    }
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
    CHECK_RES(ncclCommRegister(world, p, bytes, &h1), ncclSuccess);
    CHECK_EQ_MSG(registered_maps(lo, hi, &exact), before + 1,
                 "registration files mapped after registering");
    CHECK_EQ_MSG(exact, 1, "a registration file spans the buffer's whole pages");
    check_pattern("registered buffer", p, bytes);

    /* The same range again shares the file; an overlapping range moves nothing. */
    CHECK_RES(ncclCommRegister(world, p, bytes, &h2), ncclSuccess);
    CHECK_RES(ncclCommRegister(world, p + 5 * page, 40 * page, &h3), ncclSuccess);
    CHECK_EQ_MSG(registered_maps(lo, hi, &exact), before + 1,
                 "registration files after registering twice and overlapping");

    /* A child of fork() does not get the registered pages (MADV_DONTFORK). */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) _exit(registered_maps(lo, hi, &exact) == before && !exact ? 0 : 1);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        FAIL("a child of fork() still maps the registered pages (status 0x%x)", status);

    /* An in-place AllReduce on the registered buffer: exact int32 sums. */
    size_t common = (1u << 18) + 1000; /* every rank's buffer holds this many */
    allreduce_checked(world, (int32_t *)p, common, "registered memory");
    for (size_t i = 0; i < bytes; i++) p[i] = pattern_at(i);

    CHECK_RES(ncclCommDeregister(world, h3), ncclSuccess);
    CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess);
    CHECK_EQ_MSG(registered_maps(lo, hi, &exact), before + 1,
                 "registration files while one of two registrations remains");
    CHECK_RES(ncclCommDeregister(world, h2), ncclSuccess);
    CHECK_EQ_MSG(registered_maps(lo, hi, &exact), before,
                 "registration files after the last deregistration");
    check_pattern("deregistered buffer", p, bytes);
    free(p);

    /* Freed while registered: the deregistration must leave whatever now lives there alone. */
    size_t len = 64 * page;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        FAIL("mmap of %zu bytes failed", len);
        return;
    }
    CHECK_RES(ncclCommRegister(world, m, len, &h1), ncclSuccess);
    CHECK_EQ_MSG(registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before + 1,
                 "registration files for an mmap'd buffer");
    munmap(m, len);
    unsigned char *again = mmap(m, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (again == m) {
        /* A new registration of the range drops the stale record and moves the new pages. */
        for (size_t i = 0; i < len; i++) again[i] = pattern_at(i);
        CHECK_RES(ncclCommRegister(world, again, len, &h2), ncclSuccess);
        CHECK_EQ_MSG(registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before + 1,
                     "registration files after registering the reused range");
        CHECK_EQ_MSG(exact, 1, "the reused range holds a registration file");
        check_pattern("reused range, registered", again, len);
        CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess);
        CHECK_EQ_MSG(registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before + 1,
                     "registration files after deregistering the freed buffer");
        check_pattern("reused range after the freed buffer's deregistration", again, len);
        CHECK_RES(ncclCommDeregister(world, h2), ncclSuccess);
        CHECK_EQ_MSG(registered_maps((uintptr_t)m, (uintptr_t)m + len, &exact), before,
                     "registration files after deregistering the reused range");
        check_pattern("reused range, deregistered", again, len);
        munmap(again, len);
    } else {
        CHECK_RES(ncclCommDeregister(world, h1), ncclSuccess);
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
    CHECK_RES(ncclMemAlloc((void **)&buf, 2 * N * sizeof *buf), ncclSuccess);
    if (buf == NULL) return;
    CHECK_RES(
        ncclCommWindowRegister(world, buf, 2 * N * sizeof *buf, &win, NCCL_WIN_COLL_SYMMETRIC),
        ncclSuccess);
    const int root = 1;
    for (int i = 0; i < N; i++) {
        buf[i] = input_of(world_rank, i);
        buf[N + i] = -1;
    }
    CHECK_RES(
        ncclBroadcast(world_rank == root ? buf : NULL, buf + N, N, ncclInt32, root, world, NULL),
        ncclSuccess);
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
              ncclSuccess);
    for (int i = 0; world_rank == rroot && i < N; i++) {
        int32_t want = 0;
        for (int r = 0; r < NRANKS; r++) want += input_of(r, i);
        if (buf[N + i] != want) {
            FAIL("Reduce, non-roots' recv NULL: element %d = %d, want %d", i, buf[N + i], want);
            break;
        }
    }
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclSuccess);
    CHECK_RES(ncclMemFree(buf), ncclSuccess);
}

/* ---- peers' mappings of freed memory ------------------------------------------------------ */

/* KiB resident in this process's mappings of Tutti's memory files whose name contains `name`,
 * leaving out mappings that overlap [skip_lo, skip_hi) (this rank's own buffer). */
static long memfd_rss_kib(const char *name, uintptr_t skip_lo, uintptr_t skip_hi)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) return -1;
    char line[512];
    long kib = 0;
    bool counting = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long start, end;
        long rss;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && strchr(line, '/') != NULL) {
            counting = strstr(line, name) != NULL && (end <= skip_lo || start >= skip_hi);
        } else if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {
            counting = false;
        } else if (counting && sscanf(line, "Rss: %ld kB", &rss) == 1) {
            kib += rss;
        }
    }
    fclose(f);
    return kib;
}

/* Returns once every rank has called it. */
static void barrier(ncclComm_t world)
{
    int32_t one = 1;
    CHECK_RES(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, world, NULL), ncclSuccess);
}

/* In-place AllReduce over `v`, registered as a symmetric window on every rank, checked exactly;
 * then checks that the peers' buffers named `file` are resident here (Direct mapped them: over
 * shared memory, or the release check below would prove nothing) before any rank deregisters. */
static void mapped_allreduce(ncclComm_t world, int32_t *v, size_t count, const char *file,
                             bool shm)
{
    ncclWindow_t win = NULL;
    CHECK_RES(ncclCommWindowRegister(world, v, count * sizeof *v, &win, NCCL_WIN_COLL_SYMMETRIC),
              ncclSuccess);
    allreduce_checked(world, v, count, file);
    long peers = memfd_rss_kib(file, (uintptr_t)v, (uintptr_t)(v + count));
    if (shm && peers <= 0)
        FAIL("no peer's %s buffer is resident here (%ld KiB): Direct did not map it", file, peers);
    barrier(world); /* every rank has looked before any rank lets its buffer go */
    CHECK_RES(ncclCommWindowDeregister(world, win), ncclSuccess);
}

/* Peers keep their mappings of a rank's memory files cached after the rank frees them; the pages
 * must nevertheless go back to the system when the owner frees them (ncclMemFree) or deregisters
 * ordinary memory, not when the peers evict the mapping. */
static void test_peer_maps_released(ncclComm_t world)
{
    const size_t count = (size_t)1 << 20; /* int32s: 4 MiB */
    const size_t bytes = count * sizeof(int32_t);
    const char *shm_off = getenv("NCCL_SHM_DISABLE");
    bool shm = shm_off == NULL || strcmp(shm_off, "1") != 0;

    int32_t *a = NULL;
    CHECK_RES(ncclMemAlloc((void **)&a, bytes), ncclSuccess);
    if (a == NULL) return;
    mapped_allreduce(world, a, count, "memfd:tutti-mem", shm);
    CHECK_RES(ncclMemFree(a), ncclSuccess);

    int32_t *m = malloc(bytes);
    if (m == NULL) {
        FAIL("malloc of %zu bytes failed", bytes);
        return;
    }
    mapped_allreduce(world, m, count, "memfd:tutti-registered", shm);
    free(m);

    /* Once every rank has freed both, nothing of any rank's memory files may stay resident. */
    barrier(world);
    CHECK_EQ_MSG((int)memfd_rss_kib("memfd:tutti-", 0, 0), 0,
                 "KiB of freed memory files still resident");
}

/* Deregistering a buffer that an operation queued on a stream still uses: the pages move only
 * once that operation has ended. Every rank registers the same-sized buffer and runs one
 * AllReduce on it (so the peers map and cache its memory file); then rank 0 queues another
 * AllReduce on it and deregisters at once, while the others issue theirs 200 ms later. Moving
 * the pages at once would leave the queued operation publishing (and the peers reading and
 * writing) a memory file the deregistration had emptied. Then the same with a registration. */
static void test_register_in_flight(ncclComm_t world)
{
    const size_t count = (size_t)1 << 20; /* int32s: 4 MiB */
    const size_t bytes = count * sizeof(int32_t);
    int32_t *v = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cudaStream_t s = NULL;
    if (v == MAP_FAILED || !CHECK_RES(tuttiStreamCreate(&s), ncclSuccess)) {
        FAIL("no buffer or stream for the registration in flight");
        return;
    }
    for (int round = 0; round < 2; round++) {
        bool dereg = round == 0;
        void *h = NULL;
        if (dereg) {
            CHECK_RES(ncclCommRegister(world, v, bytes, &h), ncclSuccess);
            allreduce_checked(world, v, count, "registered, before the one in flight");
        }
        for (size_t i = 0; i < count; i++) v[i] = input_of(world_rank, (int)(i % 100000));
        if (world_rank != 0) usleep(200 * 1000);
        CHECK_RES(ncclAllReduce(v, v, count, ncclInt32, ncclSum, world, s), ncclSuccess);
        if (world_rank == 0 && dereg) CHECK_RES(ncclCommDeregister(world, h), ncclSuccess);
        if (world_rank == 0 && !dereg)
            CHECK_RES(ncclCommRegister(world, v, bytes, &h), ncclSuccess);
        CHECK_RES(tuttiStreamSynchronize(s), ncclSuccess);
        for (size_t i = 0; i < count; i++) {
            int32_t want = 0;
            for (int r = 0; r < NRANKS; r++) want += input_of(r, (int)(i % 100000));
            if (v[i] != want) {
                FAIL("AllReduce queued while rank 0 %sregistered its buffer: element %zu = %d, "
                     "want %d", dereg ? "de" : "", i, v[i], want);
                break;
            }
        }
        if (world_rank != 0 && dereg) CHECK_RES(ncclCommDeregister(world, h), ncclSuccess);
        if (world_rank == 0 && !dereg) CHECK_RES(ncclCommDeregister(world, h), ncclSuccess);
        barrier(world);
    }
    CHECK_RES(tuttiStreamDestroy(s), ncclSuccess);
    munmap(v, bytes);
}

/* TUTTI_SHAREABLE_BYTES, the ranks' promise of shareable buffers (run with TUTTI_STATS=1 and
 * cross-memory copies priced out of reach, TUTTI_CMA_COST=5000): an 8 MiB AllReduce on
 * ncclMemAlloc memory, checked exactly, runs Direct (over the mapped buffers) with the promise
 * and another algorithm without it, as the counters of tuttiCommStats say. */
static void test_shareable_promise(ncclComm_t world)
{
    const size_t count = (size_t)2 << 20; /* int32s: 8 MiB */
    const char *text = getenv("TUTTI_SHAREABLE_BYTES");
    bool promised = text != NULL && strtoull(text, NULL, 0) > 0;
    int32_t *v = NULL;
    CHECK_RES(ncclMemAlloc((void **)&v, count * sizeof *v), ncclSuccess);
    if (v == NULL) return;
    allreduce_checked(world, v, count, "ncclMemAlloc memory");
    CHECK_RES(ncclMemFree(v), ncclSuccess);
    tuttiCommStat_t rows[16];
    int nrows = 0;
    uint64_t direct = 0, all = 0;
    if (CHECK_RES(tuttiCommStats(world, rows, 16, &nrows), ncclSuccess))
        for (int i = 0; i < nrows && i < 16; i++) {
            if (strcmp(rows[i].collective, "AllReduce") != 0) continue;
            all += rows[i].ops;
            if (strcmp(rows[i].algorithm, "Direct") == 0) direct += rows[i].ops;
        }
    CHECK_EQ_MSG((int)all, 1, "AllReduce operations counted");
    CHECK_EQ_MSG((int)direct, promised ? 1 : 0, promised
                     ? "AllReduces run by Direct with TUTTI_SHAREABLE_BYTES set"
                     : "AllReduces run by Direct without TUTTI_SHAREABLE_BYTES, CMA priced out");
}

int main(int argc, char **argv)
{
    int exit_code = 0;
    ncclComm_t world = api_world("api_memory", &exit_code);
    if (world == NULL) return exit_code;
    /* One check alone: `in_flight`, run with NCCL_ALGO=Direct, whose peers map the buffer's
     * memory file (the other checks count the files mapped here, which Direct's peers add to);
     * `shareable`, run with the environment test_shareable_promise names. */
    const char *mode = argc > 1 ? argv[1] : "";
    void (*alone)(ncclComm_t) = strcmp(mode, "in_flight") == 0 ? test_register_in_flight
                                : strcmp(mode, "shareable") == 0 ? test_shareable_promise
                                                                 : NULL;
    if (alone != NULL) {
        alone(world);
        CHECK_RES(ncclCommDestroy(world), ncclSuccess);
        printf("api_memory %s rank %d: %s (%d failed checks)\n", mode, world_rank,
               check_failures ? "FAILED" : "passed", check_failures);
        return check_failures != 0;
    }
    test_memory(world);
    test_registered_pages(world);
    test_window_roots(world);
    test_peer_maps_released(world);
    test_register_in_flight(world);
    CHECK_RES(ncclCommDestroy(world), ncclSuccess);
    printf("api_memory rank %d: %s (%d failed checks)\n", world_rank,
           check_failures ? "FAILED" : "passed", check_failures);
    return check_failures != 0;
}
