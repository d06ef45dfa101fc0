/* The timeline trace's buffer and its file (util/trace.h). The file is Chrome's trace-event
 * JSON ("JSON Object Format"): a metadata event naming each row, then one complete ("X") event
 * per operation and step, times in microseconds of CLOCK_MONOTONIC; "otherData" says which rank
 * wrote it and the offset of CLOCK_REALTIME, so that files from several hosts can be aligned. */
#include "util/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

#ifndef TUTTI_VERSION_STRING
#define TUTTI_VERSION_STRING "unknown"
#endif

#define HUGE_PAGE_BYTES (2u << 20)

bool tt_trace_expand(const char *pattern, int rank, uint64_t comm_id, char *out, size_t bytes)
{
    size_t used = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        char piece[300];
        if (p[0] == '%' && p[1] != '\0') {
            p++;
            switch (*p) {
            case 'r': snprintf(piece, sizeof piece, "%d", rank); break;
            case 'p': snprintf(piece, sizeof piece, "%d", (int)getpid()); break;
            case 'c': snprintf(piece, sizeof piece, "%llu", (unsigned long long)comm_id); break;
            case 'h':
                if (gethostname(piece, sizeof piece - 1) != 0) snprintf(piece, sizeof piece, "host");
                piece[sizeof piece - 1] = '\0';
                break;
            case '%': snprintf(piece, sizeof piece, "%%"); break;
            default: snprintf(piece, sizeof piece, "%%%c", *p); break;
            }
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        size_t n = strlen(piece);
        if (used + n + 1 > bytes) return false;
        memcpy(out + used, piece, n + 1);
        used += n;
    }
    return used > 0;
}

/* Whether the TSC can time this process: TUTTI_TRACE_CLOCK is not "monotonic", and the TSC
 * ticks at one rate whatever the CPU's power state (CPUID 0x80000007, EDX bit 8). The TSCs of
 * all CPUs are taken to agree, as they do on current hardware and on this project's virtual
 * machines (measured: within 10 ns across CPUs); where they do not, a rank that migrates would
 * jump, and TUTTI_TRACE_CLOCK=monotonic is the way out. */
static bool invariant_tsc(void)
{
    if (strcasecmp(tt_param_trace_clock(), "monotonic") == 0) return false;
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u) return false;
    if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) return false;
    return (edx >> 8) & 1u;
#else
    return false;
#endif
}

/* One reading of both clocks "at the same time": the TSC between two CLOCK_MONOTONIC reads,
 * paired with their midpoint, keeping the tightest of a few tries. A thread preempted between
 * two reads (a loaded host) would otherwise shift every time of this rank against the others'
 * by as long as it waited (seen: ranks hundreds of microseconds apart). */
static void read_clocks(const struct tt_trace *trace, uint64_t *tsc, uint64_t *mono)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 16; i++) {
        uint64_t before = tt_time_ns();
        uint64_t ticks = tt_trace_now(trace);
        uint64_t after = tt_time_ns();
        if (after - before < best) {
            best = after - before;
            *tsc = ticks;
            *mono = before + (after - before) / 2;
        }
        if (best < 2000) break; /* within 2 us: as good as it gets on a virtual machine */
    }
}

ncclResult_t tt_trace_create(struct tt_trace **out, int rank, int nranks, uint64_t comm_id)
{
    *out = NULL;
    const char *pattern = tt_param_trace_file();
    bool events = pattern[0] != '\0';
    if (!events && tt_param_stats() == 0) return ncclSuccess;
    struct tt_trace *trace = calloc(1, sizeof *trace);
    if (trace == NULL) return TT_ERROR(ncclSystemError, "out of memory for a trace");
    pthread_mutex_init(&trace->stats_lock, NULL);
    atomic_init(&trace->used, 0);
    trace->rank = rank;
    trace->nranks = nranks;
    trace->comm_id = comm_id;
    trace->owner = (int)getpid();
    trace->tsc = invariant_tsc();
    read_clocks(trace, &trace->tsc0, &trace->mono0);
    if (!events) { /* counters only: no buffer, so every claim finds it full */
        *out = trace;
        return ncclSuccess;
    }
    if (!tt_trace_expand(pattern, rank, comm_id, trace->path, sizeof trace->path)) {
        tt_trace_close(trace);
        return TT_ERROR(ncclInvalidArgument, "TUTTI_TRACE_FILE=%s: the file name is too long",
                        pattern);
    }
    trace->capacity = (uint64_t)tt_param_trace_events();
    /* Every page is touched now, at init: a page fault while recording (several microseconds
     * in a virtual machine) would delay this rank's operation and make its peers' waits sleep
     * (measured: docs/observe.md, "What it costs"). */
    size_t bytes = trace->capacity * sizeof *trace->events;
    bytes = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    trace->events = aligned_alloc(HUGE_PAGE_BYTES, bytes);
    if (trace->events == NULL) {
        trace->path[0] = '\0';
        tt_trace_close(trace);
        return TT_ERROR(ncclSystemError, "out of memory for %llu trace events (TUTTI_TRACE_EVENTS)",
                        (unsigned long long)tt_param_trace_events());
    }
    /* Huge pages where the kernel gives them on request: a virtual machine's TLB misses on a
     * stream of fresh 4 KiB pages cost more than the rest of a record. */
    (void)madvise(trace->events, bytes, MADV_HUGEPAGE);
    memset(trace->events, 0, bytes);
    TT_INFO(TT_SUB_INIT, "rank %d: tracing up to %llu events into %s", rank,
            (unsigned long long)trace->capacity, trace->path);
    *out = trace;
    return ncclSuccess;
}

/* Two communicators of one process whose pattern expands to one name (no %c in it) must not
 * overwrite each other: the second and later get "-c<number>" before the extension. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char **names_written;
static size_t names_count;

static void claim_name(struct tt_trace *trace)
{
    pthread_mutex_lock(&names_lock);
    bool taken = false;
    for (size_t i = 0; i < names_count && !taken; i++)
        taken = strcmp(names_written[i], trace->path) == 0;
    if (taken) {
        char *dot = strrchr(trace->path, '.');
        char *slash = strrchr(trace->path, '/');
        char ext[64] = "";
        if (dot != NULL && (slash == NULL || dot > slash) && strlen(dot) < sizeof ext) {
            snprintf(ext, sizeof ext, "%s", dot);
            *dot = '\0';
        }
        size_t len = strlen(trace->path);
        snprintf(trace->path + len, sizeof trace->path - len, "-c%llu%s",
                 (unsigned long long)trace->comm_id, ext);
    }
    char **grown = realloc(names_written, (names_count + 1) * sizeof *grown);
    if (grown != NULL) {
        names_written = grown;
        char *copy = strdup(trace->path);
        if (copy != NULL) names_written[names_count++] = copy;
    }
    pthread_mutex_unlock(&names_lock);
}

/* A JSON string's characters (the host name is the only text not our own). */
static void put_json_text(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

static void put_lane_name(FILE *f, int rank, int lane)
{
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"",
            rank, lane);
    if (lane == TT_TRACE_LANE_COLL) fprintf(f, "collectives");
    else if (lane % 2 == 1) fprintf(f, "send to %d", (lane - 1) / 2);
    else fprintf(f, "recv from %d", (lane - 2) / 2);
    fprintf(f, "\"}}");
}

/* Converts the trace's clock to CLOCK_MONOTONIC nanoseconds: ticks scaled by the ratio the two
 * clocks advanced by between create and now. */
struct clock_map {
    uint64_t tsc0, mono0;
    double ns_per_tick; /* 0: the times are nanoseconds already */
};

static struct clock_map clock_map_now(const struct tt_trace *trace)
{
    struct clock_map map = {.tsc0 = trace->tsc0, .mono0 = trace->mono0};
    if (trace->tsc) {
        uint64_t mono1, tsc1;
        read_clocks(trace, &tsc1, &mono1);
        /* Too short a run to measure the ratio well: assume 1 GHz rather than divide by ~0. */
        map.ns_per_tick = tsc1 - trace->tsc0 > 1000000 && mono1 > trace->mono0
                              ? (double)(mono1 - trace->mono0) / (double)(tsc1 - trace->tsc0)
                              : 1.0;
    }
    return map;
}

void tt_trace_count(struct tt_trace *trace, const char *name, const char *algo, uint64_t bytes,
                    uint64_t ticks)
{
    pthread_mutex_lock(&trace->stats_lock);
    int i = 0;
    while (i < trace->nstats &&
           (trace->stats[i].name != name || trace->stats[i].algo != algo))
        i++;
    if (i == trace->nstats && i < TT_TRACE_STATS)
        trace->stats[trace->nstats++] = (struct tt_trace_stat){.name = name, .algo = algo};
    if (i < trace->nstats) {
        trace->stats[i].ops++;
        trace->stats[i].bytes += bytes;
        trace->stats[i].ticks += ticks;
    }
    pthread_mutex_unlock(&trace->stats_lock);
}

int tt_trace_stats(struct tt_trace *trace, struct tt_trace_stat *out, int max)
{
    struct clock_map map = clock_map_now(trace);
    pthread_mutex_lock(&trace->stats_lock);
    int n = trace->nstats;
    for (int i = 0; i < n && i < max; i++) {
        out[i] = trace->stats[i];
        if (map.ns_per_tick != 0)
            out[i].ticks = (uint64_t)((double)out[i].ticks * map.ns_per_tick);
    }
    pthread_mutex_unlock(&trace->stats_lock);
    return n;
}

static uint64_t to_ns(const struct clock_map *m, uint64_t t)
{
    if (m->ns_per_tick == 0) return t;
    return m->mono0 + (uint64_t)((double)(int64_t)(t - m->tsc0) * m->ns_per_tick);
}

static void put_event(FILE *f, int rank, const struct clock_map *m,
                      const struct tt_trace_event *e)
{
    uint64_t start_ns = to_ns(m, e->start), end_ns = to_ns(m, e->end);
    if (end_ns < start_ns) end_ns = start_ns;
    /* Microseconds with nanosecond digits, as Chrome and Perfetto read them. */
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
               "\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"args\":{\"seq\":%llu",
            e->name ? e->name : "?", e->kind == TT_TRACE_OP ? "op" : "step", rank, e->lane,
            (unsigned long long)(start_ns / 1000), (unsigned long long)(start_ns % 1000),
            (unsigned long long)((end_ns - start_ns) / 1000),
            (unsigned long long)((end_ns - start_ns) % 1000), (unsigned long long)e->seq);
    if (e->kind == TT_TRACE_OP) {
        fprintf(f, ",\"count\":%llu,\"bytes\":%llu", (unsigned long long)e->count,
                (unsigned long long)e->bytes);
        if (e->dtype) fprintf(f, ",\"dtype\":\"%s\"", e->dtype);
        if (e->redop) fprintf(f, ",\"redop\":\"%s\"", e->redop);
        if (e->algo) fprintf(f, ",\"algo\":\"%s\"", e->algo);
        if (e->proto) fprintf(f, ",\"proto\":\"%s\"", e->proto);
        if (e->root >= 0) fprintf(f, ",\"root\":%d", e->root);
    } else {
        fprintf(f, ",\"step\":%d,\"bytes\":%llu", e->step, (unsigned long long)e->bytes);
    }
    if (e->send_to >= 0) fprintf(f, ",\"send_to\":%d", e->send_to);
    if (e->recv_from >= 0) fprintf(f, ",\"recv_from\":%d", e->recv_from);
    fprintf(f, "}}");
}

/* Writes into a temporary name and renames it into place, so that a process killed while
 * writing leaves no half-written JSON under the trace's name (tutti-trace merge reads them). */
static bool write_file(struct tt_trace *trace)
{
    char tmp[sizeof trace->path + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", trace->path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        TT_WARN("rank %d: cannot write the trace %s (TUTTI_TRACE_FILE): %s", trace->rank,
                tmp, strerror(errno));
        return false;
    }
    uint64_t used = atomic_load(&trace->used);
    uint64_t n = used < trace->capacity ? used : trace->capacity;
    int rank = trace->rank;
    fprintf(f, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
               "\"args\":{\"name\":\"rank %d\"}}", rank, rank);
    fprintf(f, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
               "\"args\":{\"sort_index\":%d}}", rank, rank);
    /* Name each row once: rows are few (collectives, and per peer two). */
    int lanes = 2 + 2 * trace->nranks;
    bool *seen = calloc((size_t)lanes, sizeof *seen);
    for (uint64_t i = 0; seen != NULL && i < n; i++) {
        int lane = trace->events[i].lane;
        if (trace->events[i].kind == 0 || lane < 0 || lane >= lanes || seen[lane]) continue;
        seen[lane] = true;
        put_lane_name(f, rank, lane);
    }
    free(seen);
    struct clock_map map = clock_map_now(trace);
    uint64_t written = 0;
    for (uint64_t i = 0; i < n; i++) {
        const struct tt_trace_event *e = &trace->events[i];
        if (e->kind == 0) continue; /* claimed but never filled (an aborted operation) */
        put_event(f, rank, &map, e);
        written++;
    }
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    uint64_t mono = tt_time_ns();
    int64_t offset = (int64_t)((uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec) -
                     (int64_t)mono;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"writer\":\"tutti\","
               "\"version\":\"%s\",\"rank\":%d,\"nranks\":%d,\"pid\":%d,\"comm\":%llu,"
               "\"host\":\"", TUTTI_VERSION_STRING, rank, trace->nranks, (int)getpid(),
            (unsigned long long)trace->comm_id);
    put_json_text(f, host);
    fprintf(f, "\",\"clock\":\"CLOCK_MONOTONIC\",\"realtime_minus_monotonic_ns\":%lld,"
               "\"events\":%llu,\"dropped\":%llu}}\n",
            (long long)offset, (unsigned long long)written,
            (unsigned long long)(used > trace->capacity ? used - trace->capacity : 0));
    bool ok = fflush(f) == 0 && !ferror(f);
    ok = (fclose(f) == 0) && ok;
    ok = ok && rename(tmp, trace->path) == 0;
    if (!ok) {
        TT_WARN("rank %d: writing the trace %s failed: %s", rank, trace->path, strerror(errno));
        unlink(tmp);
    }
    else if (used > trace->capacity)
        TT_WARN("rank %d: the trace %s lost %llu events past TUTTI_TRACE_EVENTS=%llu", rank,
                trace->path, (unsigned long long)(used - trace->capacity),
                (unsigned long long)trace->capacity);
    else TT_INFO(TT_SUB_INIT, "rank %d: wrote %llu trace events to %s", rank,
                 (unsigned long long)written, trace->path);
    return ok;
}

/* The counters at INFO, one line per collective and algorithm, when the communicator ends. */
static void log_stats(struct tt_trace *trace)
{
    struct tt_trace_stat rows[TT_TRACE_STATS];
    int n = tt_trace_stats(trace, rows, TT_TRACE_STATS);
    for (int i = 0; i < n && i < TT_TRACE_STATS; i++)
        TT_INFO(TT_SUB_INIT, "rank %d stats: %s %s: %llu ops, %llu bytes, %.3f ms", trace->rank,
                rows[i].name, rows[i].algo ? rows[i].algo : "-",
                (unsigned long long)rows[i].ops, (unsigned long long)rows[i].bytes,
                (double)rows[i].ticks / 1e6);
}

void tt_trace_write_now(struct tt_trace *trace)
{
    if (trace == NULL || trace->path[0] == '\0' || trace->events == NULL ||
        trace->owner != (int)getpid() || atomic_exchange(&trace->written, true))
        return;
    claim_name(trace);
    write_file(trace);
}

void tt_trace_close(struct tt_trace *trace)
{
    if (trace == NULL) return;
    if (TT_LOG_MAYBE(TT_LOG_INFO)) log_stats(trace);
    tt_trace_write_now(trace);
    pthread_mutex_destroy(&trace->stats_lock);
    free(trace->events);
    free(trace);
}
