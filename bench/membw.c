/*
 * membw.c - the memory-bandwidth ceiling of a shared-memory collective on this machine.
 *
 * For each size it times, on T threads pinned to distinct CPUs (T = min(nranks, CPUs)), the data
 * movement an ideal zero-copy implementation of a collective over nranks processes' buffers cannot
 * avoid, and the one-way hand-off of a cache line between two CPUs, the least any cross-process
 * collective pays per call. Sizes mean what they mean in nccl-tests; x_j is rank j's input and o_r
 * rank r's output:
 *   memcpy  o_0 = x_0                                          plain streaming copy
 *   ar      o_r[i] = x_0[i] + ... + x_{n-1}[i] for every r     all_reduce (n = 2: a = b + c, twice)
 *   rs      o[i] = x_0[i] + ... + x_{n-1}[i]                    reduce_scatter (o = the n outputs)
 *   fan     o_r = x_0 for every r                              all_gather, broadcast
 *   a2a     block j of o_r = block r of x_j                    alltoall
 * Each thread owns one contiguous slice of every array. Buffers are reused from one repetition to
 * the next, as a benchmark loop reuses its buffers, so sizes that fit the caches run at cache
 * speed. Every kernel runs twice, writing its outputs with plain stores and then with
 * non-temporal (streaming) stores, which skip reading the destination lines and win beyond the
 * caches; the figure kept is the best batch of either, since this is a ceiling.
 *
 * Usage: membw -n NRANKS [-k memcpy,ar,rs,fan,a2a] [-b MIN] [-e MAX] [-f FACTOR] [-m MULTIPLE]
 *              [-T SECONDS]
 * Output (CSV on stdout): kernel,nranks,threads,bytes,reps,best_us,gbps with gbps = bytes / best
 * time (1 GB = 1e9 B); the hand-off line has kernel "handoff", bytes 64 and best_us one way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum kernel { K_MEMCPY, K_AR, K_RS, K_FAN, K_A2A, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"memcpy", "ar", "rs", "fan", "a2a"};

#define MAX_RANKS 64
#define BLOCK_COUNT 1024 /* elements summed in a stack block before they are stored */

/* What every thread runs between two barriers; written by thread 0 only while the others wait. */
struct job {
    enum kernel kernel;
    int streaming; /* outputs written with non-temporal stores */
    size_t count; /* elements of one array */
    long reps;
    int quit;
};

static struct job job;
static float *inputs[MAX_RANKS];
static float *outputs[MAX_RANKS];
static int nranks;
static int nthreads;
static int cpus[MAX_RANKS];
static int ncpus;

static _Atomic int barrier_arrived;
static _Atomic int barrier_phase;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until `done` holds; yields the CPU after a while, so that a machine shared with other
 * work (or fewer CPUs than threads) does not turn a descheduled partner into a livelock. */
static void spin_wait(_Atomic int *word, int value)
{
    for (long spins = 0; atomic_load_explicit(word, memory_order_acquire) != value; spins++) {
        if (spins > 100000) {
            sched_yield();
        } else {
            cpu_relax();
        }
    }
}

/* Phase barrier: the last thread to arrive resets the count and advances the phase. */
static void barrier(void)
{
    int phase = atomic_load_explicit(&barrier_phase, memory_order_acquire);
    if (atomic_fetch_add(&barrier_arrived, 1) == nthreads - 1) {
        atomic_store(&barrier_arrived, 0);
        atomic_store_explicit(&barrier_phase, phase + 1, memory_order_release);
        return;
    }
    spin_wait(&barrier_phase, phase + 1);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    /* Pinning is best effort: a container may forbid it, and the kernels still run. */
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* dst[0, n) = src[0, n): memcpy, or with non-temporal stores when the job streams. */
static void put(float *restrict dst, const float *restrict src, size_t n)
{
#if defined(__x86_64__)
    if (job.streaming) {
        size_t i = 0;
        for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) {
            dst[i] = src[i];
        }
        for (; i + 4 <= n; i += 4) {
            _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        }
        for (; i < n; i++) {
            dst[i] = src[i];
        }
        return;
    }
#endif
    memcpy(dst, src, n * sizeof(float));
}

/* Two ranks: o_0 (and o_1 when nout is 2) = x_0 + x_1 over [lo, hi) in one pass (with streaming
 * stores, a stack block at a time). */
static void sum2_slice(size_t lo, size_t hi, int nout)
{
    const float *restrict x0 = inputs[0];
    const float *restrict x1 = inputs[1];
    float *restrict o0 = outputs[0];
    float *restrict o1 = outputs[1];
    if (job.streaming) {
        float block[BLOCK_COUNT];
        for (size_t b = lo; b < hi; b += BLOCK_COUNT) {
            size_t n = hi - b < BLOCK_COUNT ? hi - b : BLOCK_COUNT;
            for (size_t i = 0; i < n; i++) {
                block[i] = x0[b + i] + x1[b + i];
            }
            put(o0 + b, block, n);
            if (nout == 2) {
                put(o1 + b, block, n);
            }
        }
        return;
    }
    if (nout == 1) {
        for (size_t i = lo; i < hi; i++) {
            o0[i] = x0[i] + x1[i];
        }
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        float s = x0[i] + x1[i];
        o0[i] = s;
        o1[i] = s;
    }
}

/* o_r[lo, hi) = sum of x_j[lo, hi) for r < nout: summed one stack block at a time, so that each
 * input is read once and the sum is stored straight into every output. */
static void sum_slice(size_t lo, size_t hi, int nout)
{
    float block[BLOCK_COUNT];
    if (nranks == 2) {
        sum2_slice(lo, hi, nout);
        return;
    }
    for (size_t b = lo; b < hi; b += BLOCK_COUNT) {
        size_t n = hi - b < BLOCK_COUNT ? hi - b : BLOCK_COUNT;
        for (size_t i = 0; i < n; i++) {
            block[i] = inputs[0][b + i] + inputs[1][b + i];
        }
        for (int j = 2; j < nranks; j++) {
            const float *restrict x = inputs[j] + b;
            for (size_t i = 0; i < n; i++) {
                block[i] += x[i];
            }
        }
        for (int r = 0; r < nout; r++) {
            put(outputs[r] + b, block, n);
        }
    }
}

/* Every output gets x_0[lo, hi), a block at a time so the block is read from memory once. */
static void fan_slice(size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b += 4 * BLOCK_COUNT) {
        size_t n = hi - b < 4 * BLOCK_COUNT ? hi - b : 4 * BLOCK_COUNT;
        for (int r = 0; r < nranks; r++) {
            put(outputs[r] + b, inputs[0] + b, n);
        }
    }
}

/* Output r's elements [lo, hi) come from block r of the inputs: element k of o_r lies in block
 * j = k / per_block and is element r * per_block + k % per_block of x_j. */
static void a2a_slice(size_t lo, size_t hi)
{
    size_t per_block = job.count / (size_t)nranks;
    if (per_block == 0) {
        return;
    }
    for (int r = 0; r < nranks; r++) {
        for (size_t k = lo; k < hi;) {
            size_t j = k / per_block;
            size_t end = (j + 1) * per_block < hi ? (j + 1) * per_block : hi;
            put(outputs[r] + k, inputs[j] + (size_t)r * per_block + k % per_block, end - k);
            k = end;
        }
    }
}

static void run_slice(int thread)
{
    size_t lo = job.count * (size_t)thread / (size_t)nthreads;
    size_t hi = job.count * (size_t)(thread + 1) / (size_t)nthreads;
    for (long rep = 0; rep < job.reps; rep++) {
        switch (job.kernel) {
        case K_MEMCPY:
            put(outputs[0] + lo, inputs[0] + lo, hi - lo);
            break;
        case K_AR:
            sum_slice(lo, hi, nranks);
            break;
        case K_RS:
            sum_slice(lo, hi, 1);
            break;
        case K_FAN:
            fan_slice(lo, hi);
            break;
        case K_A2A:
            a2a_slice(lo, hi);
            break;
        case K_COUNT:
            break;
        }
    }
}

/* When each thread started and finished its share of the current batch; a cache line each. */
struct work_span {
    _Alignas(64) double start_s;
    double end_s;
};
static struct work_span spans[MAX_RANKS];

static void run_timed_slice(int thread)
{
    spans[thread].start_s = now_s();
    run_slice(thread);
#if defined(__x86_64__)
    if (job.streaming) {
        _mm_sfence(); /* the streamed lines are written before the batch counts as done */
    }
#endif
    spans[thread].end_s = now_s();
}

/* Worker loop: barrier (job posted), run, barrier (job done), until the job says quit. */
static void *worker(void *arg)
{
    int thread = (int)(intptr_t)arg;
    pin(cpus[thread % ncpus]);
    for (;;) {
        barrier();
        if (job.quit) {
            return NULL;
        }
        run_timed_slice(thread);
        barrier();
    }
}

/* Runs the posted job on every thread once and returns how long the work took: the longest any
 * thread spent on its share when the threads started within 5 % of that time of each other (they
 * ran side by side, sharing the memory system), else the whole span from the first start to the
 * last end. Waiting at the barriers is left out, so that on a machine shared with other work a
 * partner thread that is descheduled for a moment does not count as memory time. */
static double run_batch(void)
{
    barrier();
    run_timed_slice(0);
    barrier();
    double first = spans[0].start_s, last_start = first, last_end = spans[0].end_s, longest = 0;
    for (int t = 0; t < nthreads; t++) {
        double d = spans[t].end_s - spans[t].start_s;
        longest = d > longest ? d : longest;
        first = spans[t].start_s < first ? spans[t].start_s : first;
        last_start = spans[t].start_s > last_start ? spans[t].start_s : last_start;
        last_end = spans[t].end_s > last_end ? spans[t].end_s : last_end;
    }
    return last_start - first <= 0.05 * longest ? longest : last_end - first;
}

/* Best time per repetition of `kernel` on `count` elements: the batch length doubles until a batch
 * lasts at least 1 ms (so the barriers are amortized; the shorter of two batches decides, so that
 * one preempted batch does not stop the doubling early), then batches run until `target_s`
 * passes, at least three times. */
static double time_kernel(enum kernel kernel, size_t count, double target_s, long *reps_out)
{
    job.kernel = kernel;
    job.count = count;
    job.reps = 1;
    long reps = 0;
    for (;;) {
        double t0 = run_batch();
        double t1 = run_batch();
        reps += 2 * job.reps;
        if ((t0 < t1 ? t0 : t1) >= 1e-3 || job.reps >= (1L << 24)) {
            break;
        }
        job.reps *= 2;
    }
    double best = 1e30;
    double start = now_s();
    for (int batch = 0; batch < 3 || now_s() - start < target_s; batch++) {
        double t = run_batch() / (double)job.reps;
        best = t < best ? t : best;
        reps += job.reps;
    }
    *reps_out = reps;
    return best;
}

static _Atomic int pong_word;
static _Atomic int pong_quit;

/* The partner of the hand-off: answers every odd value with the next even one. */
static void *ponger(void *arg)
{
    (void)arg;
    pin(cpus[1]);
    for (int expect = 1; !atomic_load_explicit(&pong_quit, memory_order_relaxed); expect += 2) {
        long spins = 0;
        while (atomic_load_explicit(&pong_word, memory_order_acquire) != expect) {
            if (atomic_load_explicit(&pong_quit, memory_order_relaxed)) {
                return NULL;
            }
            if (++spins > 100000) {
                sched_yield();
            } else {
                cpu_relax();
            }
        }
        atomic_store_explicit(&pong_word, expect + 1, memory_order_release);
    }
    return NULL;
}

/* One-way cache-line hand-off between the first two CPUs: ping-pong in batches of 1000 round
 * trips for at least `target_s` and 20 batches; the best batch, half a round trip. Short batches
 * keep a moment of preemption on a busy machine from spoiling the figure. */
static double handoff_s(double target_s)
{
    const int rounds = 1000;
    double best = 1.0;
    pthread_t tid;
    pin(cpus[0]);
    atomic_store(&pong_word, 0);
    atomic_store(&pong_quit, 0);
    if (pthread_create(&tid, NULL, ponger, NULL) != 0) {
        return 0.0;
    }
    int value = 0;
    double start = now_s();
    for (int batch = 0; batch < 20 || now_s() - start < target_s; batch++) {
        double t0 = now_s();
        for (int i = 0; i < rounds; i++) {
            atomic_store_explicit(&pong_word, ++value, memory_order_release);
            spin_wait(&pong_word, ++value);
        }
        double t = (now_s() - t0) / rounds / 2.0;
        best = t < best ? t : best;
    }
    atomic_store(&pong_quit, 1);
    pthread_join(tid, NULL);
    return best;
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

static int parse_kernels(char *list, int *want)
{
    for (char *name = strtok(list, ","); name != NULL; name = strtok(NULL, ",")) {
        int k = 0;
        while (k < K_COUNT && strcmp(name, kernel_names[k]) != 0) {
            k++;
        }
        if (k == K_COUNT) {
            fprintf(stderr, "membw: unknown kernel %s (memcpy, ar, rs, fan, a2a)\n", name);
            return -1;
        }
        want[k] = 1;
    }
    return 0;
}

/* The CPUs this process may run on, in order; threads are pinned to them round-robin. */
static void list_cpus(void)
{
    cpu_set_t set;
    ncpus = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_RANKS; c++) {
            if (CPU_ISSET(c, &set)) {
                cpus[ncpus++] = c;
            }
        }
    }
    if (ncpus == 0) {
        cpus[ncpus++] = 0;
    }
}

/* An array of `bytes` (plus slack), its start moved by `stagger` cache lines so that the arrays do
 * not all share one offset modulo the page size, which would make their streams collide in the
 * caches' sets. */
static float *alloc_array(size_t bytes, int stagger, float value)
{
    char *raw;
    if (posix_memalign((void **)&raw, 4096, bytes + 8192) != 0) {
        return NULL;
    }
    float *a = (float *)(raw + (size_t)stagger * 17 * 64);
    for (size_t i = 0; i < bytes / sizeof(float); i++) {
        a[i] = value + (float)(i & 63);
    }
    return a;
}

int main(int argc, char **argv)
{
    size_t min_bytes = 8, max_bytes = 256u << 20, multiple = 4;
    double factor = 2.0, target_s = 0.05;
    int want[K_COUNT] = {0};
    char kernels_arg[256] = "memcpy,ar";
    int opt;
    nranks = 2;
    while ((opt = getopt(argc, argv, "n:k:b:e:f:m:T:h")) != -1) {
        int bad = 0;
        switch (opt) {
        case 'n':
            nranks = atoi(optarg);
            bad = nranks < 2 || nranks > MAX_RANKS;
            break;
        case 'k':
            snprintf(kernels_arg, sizeof(kernels_arg), "%s", optarg);
            break;
        case 'b':
            bad = parse_bytes(optarg, &min_bytes) != 0;
            break;
        case 'e':
            bad = parse_bytes(optarg, &max_bytes) != 0;
            break;
        case 'f':
            factor = atof(optarg);
            bad = factor <= 1.0;
            break;
        case 'm':
            bad = parse_bytes(optarg, &multiple) != 0 || multiple == 0 || multiple % 4 != 0;
            break;
        case 'T':
            target_s = atof(optarg);
            break;
        default:
            bad = 1;
            break;
        }
        if (bad) {
            fprintf(stderr, "usage: membw -n NRANKS(2..%d) [-k memcpy,ar,rs,fan,a2a] [-b MIN] "
                            "[-e MAX] [-f FACTOR>1] [-m MULTIPLE_OF_4] [-T SECONDS]\n",
                    MAX_RANKS);
            return 2;
        }
    }
    if (parse_kernels(kernels_arg, want) != 0) {
        return 2;
    }
    list_cpus();
    nthreads = nranks < ncpus ? nranks : ncpus;

    for (int r = 0; r < nranks; r++) {
        inputs[r] = alloc_array(max_bytes, 2 * r, (float)r);
        outputs[r] = alloc_array(max_bytes, 2 * r + 1, 0.0f);
        if (inputs[r] == NULL || outputs[r] == NULL) {
            fprintf(stderr, "membw: cannot allocate %d x 2 arrays of %zu bytes\n", nranks,
                    max_bytes);
            return 1;
        }
    }
    printf("kernel,nranks,threads,bytes,reps,best_us,gbps\n");
    if (ncpus >= 2) {
        printf("handoff,2,2,64,0,%.4f,0\n", handoff_s(target_s) * 1e6);
    } else {
        printf("handoff,2,1,64,0,0,0\n");
    }
    fflush(stdout);

    pthread_t tids[MAX_RANKS];
    pin(cpus[0]);
    for (int t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[t], NULL, worker, (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "membw: pthread_create failed\n");
            return 1;
        }
    }
    for (size_t want_bytes = min_bytes; want_bytes <= max_bytes;) {
        size_t bytes = want_bytes / multiple * multiple;
        for (int k = 0; k < K_COUNT && bytes > 0; k++) {
            if (!want[k]) {
                continue;
            }
            long reps = 0, more;
            double best = 1e30;
            for (int streaming = 0; streaming < 2; streaming++) {
                job.streaming = streaming;
                double t = time_kernel((enum kernel)k, bytes / sizeof(float), target_s, &more);
                best = t < best ? t : best;
                reps += more;
            }
            printf("%s,%d,%d,%zu,%ld,%.4f,%.4f\n", kernel_names[k], nranks, nthreads, bytes, reps,
                   best * 1e6, (double)bytes / best / 1e9);
            fflush(stdout);
        }
        size_t next = (size_t)((double)want_bytes * factor);
        want_bytes = next > want_bytes ? next : want_bytes + 4;
    }
    job.quit = 1;
    barrier();
    for (int t = 1; t < nthreads; t++) {
        pthread_join(tids[t], NULL);
    }
    return 0;
}
