/*
 * mpi_coll.c - the sweep tutti-perf runs, over MPI, so that any MPI library can stand beside Tutti.
 *
 * One collective (float32, sum where it reduces) per run, sizes from -b to -e multiplied by -f,
 * sizes meaning what they mean in nccl-tests: the whole buffer for all_reduce and broadcast, the
 * receive buffer for all_gather, the send buffer for reduce_scatter and alltoall (so a per-rank
 * count is the size / 4 / nranks, rounded down). Timing follows tutti-perf: `warmup` calls, then
 * `iters` calls back to back, time per call = elapsed / iters, averaged over the ranks; algbw =
 * bytes / time, busbw = algbw * NCCL's factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter,
 * alltoall (n-1)/n; broadcast 1). Only the out-of-place form is timed (MPI_Bcast has one buffer).
 * After timing, one call on exact small-integer inputs is checked element by element against the
 * expected result and the wrong elements are counted over all ranks.
 *
 * Usage: mpirun -np N mpi_coll [-t COLL] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
 *                              [-c 0|1] [-T SECONDS]
 *   -T caps the timed loop of one size at about SECONDS (from the warmup's pace; at least 3
 *      calls), so that a library that is slow on an oversubscribed machine still finishes.
 * Output (rank 0, CSV): a "# library:" line, then
 *   collective,nranks,size,count,iters,time_us,algbw,busbw,wrong
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum coll { C_ALL_REDUCE, C_ALL_GATHER, C_REDUCE_SCATTER, C_BROADCAST, C_ALLTOALL, C_COUNT };
static const char *const coll_names[C_COUNT] = {"all_reduce", "all_gather", "reduce_scatter",
                                                "broadcast", "alltoall"};
/* Whether the size covers all ranks' pieces, so the per-rank count is size / 4 / nranks. */
static const int coll_per_rank[C_COUNT] = {0, 1, 1, 0, 1};

struct bench {
    enum coll coll;
    int rank;
    int nranks;
    size_t count; /* the per-call count argument */
    float *send;
    float *recv;
};

/* Rank r's input element i: small integers, so every sum below is exact in float32. */
static float input_value(int rank, size_t i)
{
    return (float)((size_t)(3 * rank + 1) + i % 13);
}

static void call(const struct bench *b)
{
    int n = (int)b->count;
    switch (b->coll) {
    case C_ALL_REDUCE:
        MPI_Allreduce(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_ALL_GATHER:
        MPI_Allgather(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(b->send, b->recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_BROADCAST:
        MPI_Bcast(b->recv, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case C_ALLTOALL:
        MPI_Alltoall(b->send, n, MPI_FLOAT, b->recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case C_COUNT:
        break;
    }
}

/* Elements the send (and, for broadcast, the receive) buffer holds, and the receive buffer. */
static size_t send_count(const struct bench *b)
{
    int many = b->coll == C_REDUCE_SCATTER || b->coll == C_ALLTOALL;
    return many ? b->count * (size_t)b->nranks : b->count;
}

static size_t recv_count(const struct bench *b)
{
    int many = b->coll == C_ALL_GATHER || b->coll == C_ALLTOALL;
    return many ? b->count * (size_t)b->nranks : b->count;
}

/* Fills the inputs with this rank's values: send element i of rank r is input_value(r, i); for
 * broadcast the root's receive buffer is the input. */
static void fill(const struct bench *b)
{
    float *in = b->coll == C_BROADCAST ? b->recv : b->send;
    size_t n = b->coll == C_BROADCAST ? b->count : send_count(b);
    if (b->coll == C_BROADCAST && b->rank != 0) {
        memset(b->recv, 0, b->count * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        in[i] = input_value(b->rank, i);
    }
}

/* The value receive element i of this rank must hold after the call. */
static float expected(const struct bench *b, size_t i)
{
    float sum = 0.0f;
    switch (b->coll) {
    case C_ALL_REDUCE:
        for (int r = 0; r < b->nranks; r++) {
            sum += input_value(r, i);
        }
        return sum;
    case C_ALL_GATHER:
        return input_value((int)(i / b->count), i % b->count);
    case C_REDUCE_SCATTER:
        for (int r = 0; r < b->nranks; r++) {
            sum += input_value(r, (size_t)b->rank * b->count + i);
        }
        return sum;
    case C_BROADCAST:
        return input_value(0, i);
    case C_ALLTOALL:
        return input_value((int)(i / b->count), (size_t)b->rank * b->count + i % b->count);
    case C_COUNT:
        break;
    }
    return 0.0f;
}

/* One call on fresh inputs; returns the number of wrong receive elements over all ranks and
 * prints the first wrong one of each rank. */
static long check(struct bench *b)
{
    long wrong = 0, total = 0;
    fill(b);
    if (b->coll != C_BROADCAST) {
        memset(b->recv, 0xff, recv_count(b) * sizeof(float));
    }
    call(b);
    for (size_t i = 0; i < recv_count(b); i++) {
        float want = expected(b, i);
        if (b->recv[i] != want) {
            if (wrong == 0) {
                fprintf(stderr, "mpi_coll: %s count %zu rank %d element %zu: got %g want %g\n",
                        coll_names[b->coll], b->count, b->rank, i, (double)b->recv[i],
                        (double)want);
            }
            wrong++;
        }
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

static double bus_factor(enum coll coll, int nranks)
{
    if (coll == C_ALL_REDUCE) {
        return 2.0 * (nranks - 1) / nranks;
    }
    if (coll == C_BROADCAST) {
        return 1.0;
    }
    return (double)(nranks - 1) / nranks;
}

static int parse_bytes(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') {
        shift = 10;
    } else if (*end == 'M' || *end == 'm') {
        shift = 20;
    } else if (*end == 'G' || *end == 'g') {
        shift = 30;
    }
    if (errno != 0 || end == text || (shift != 0 && end[1] != '\0') ||
        (shift == 0 && *end != '\0')) {
        return -1;
    }
    *out = (size_t)(v << shift);
    return 0;
}

/* Times one size; rank 0 prints its line. */
static void run_size(struct bench *b, size_t bytes, int iters, int warmup, int check_on,
                     double cap_s)
{
    size_t total = bytes / sizeof(float);
    b->count = coll_per_rank[b->coll] ? total / (size_t)b->nranks : total;
    size_t real_bytes = (coll_per_rank[b->coll] ? b->count * (size_t)b->nranks : b->count) *
                        sizeof(float);
    fill(b);
    double t0 = MPI_Wtime();
    for (int i = 0; i < warmup; i++) {
        call(b);
    }
    /* All ranks must agree on the count of timed calls: the slowest rank's warmup pace decides. */
    if (cap_s > 0 && warmup > 0) {
        double pace = (MPI_Wtime() - t0) / warmup, slowest;
        MPI_Allreduce(&pace, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (slowest * iters > cap_s) {
            int fit = (int)(cap_s / slowest);
            iters = fit < 3 ? 3 : fit;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        call(b);
    }
    double us = (MPI_Wtime() - t0) / iters * 1e6, sum_us;
    MPI_Allreduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    us = sum_us / b->nranks;
    long wrong = check_on ? check(b) : -1;
    if (b->rank == 0) {
        double algbw = us > 0 ? (double)real_bytes / us / 1e3 : 0.0;
        printf("%s,%d,%zu,%zu,%d,%.3f,%.4f,%.4f,%ld\n", coll_names[b->coll], b->nranks,
               real_bytes, b->count, iters, us, algbw, algbw * bus_factor(b->coll, b->nranks),
               wrong);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    struct bench b = {.coll = C_ALL_REDUCE};
    size_t min_bytes = 8, max_bytes = 32u << 20;
    double factor = 2.0, cap_s = 0.0;
    int iters = 20, warmup = 5, check_on = 1, opt, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
    while ((opt = getopt(argc, argv, "t:b:e:f:n:w:c:T:h")) != -1) {
        switch (opt) {
        case 't': {
            int c = 0;
            while (c < C_COUNT && strcmp(optarg, coll_names[c]) != 0) {
                c++;
            }
            bad |= c == C_COUNT;
            b.coll = (enum coll)c;
            break;
        }
        case 'b':
            bad |= parse_bytes(optarg, &min_bytes) != 0;
            break;
        case 'e':
            bad |= parse_bytes(optarg, &max_bytes) != 0;
            break;
        case 'f':
            factor = atof(optarg);
            bad |= factor <= 1.0;
            break;
        case 'n':
            iters = atoi(optarg);
            bad |= iters < 1;
            break;
        case 'w':
            warmup = atoi(optarg);
            bad |= warmup < 0;
            break;
        case 'c':
            check_on = atoi(optarg) != 0;
            break;
        case 'T':
            cap_s = atof(optarg);
            break;
        default:
            bad = 1;
            break;
        }
    }
    if (bad || min_bytes > max_bytes) {
        if (b.rank == 0) {
            fprintf(stderr, "usage: mpirun -np N mpi_coll [-t all_reduce|all_gather|"
                            "reduce_scatter|broadcast|alltoall] [-b MIN] [-e MAX] [-f FACTOR>1] "
                            "[-n ITERS] [-w WARMUP] [-c 0|1] [-T SECONDS]\n");
        }
        MPI_Finalize();
        return 2;
    }
    /* Buffers for the largest size: send and receive each hold max_bytes (rounded up to a whole
     * number of per-rank pieces). */
    size_t max_count = max_bytes / sizeof(float) + (size_t)b.nranks;
    b.send = malloc(max_count * sizeof(float));
    b.recv = malloc(max_count * sizeof(float));
    if (b.send == NULL || b.recv == NULL) {
        fprintf(stderr, "mpi_coll: rank %d cannot allocate 2 x %zu bytes\n", b.rank, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(b.send, 0, max_count * sizeof(float));
    memset(b.recv, 0, max_count * sizeof(float));
    if (b.rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        version[strcspn(version, "\n,")] = '\0';
        printf("# library: %s\n", version);
        printf("collective,nranks,size,count,iters,time_us,algbw,busbw,wrong\n");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes;) {
        run_size(&b, bytes, iters, warmup, check_on, cap_s);
        size_t next = (size_t)((double)bytes * factor);
        bytes = next > bytes ? next : bytes + sizeof(float);
    }
    free(b.send);
    free(b.recv);
    MPI_Finalize();
    return 0;
}
