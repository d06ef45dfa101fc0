/* Host streams and the engine thread.
 *
 * A stream is a mutex-protected FIFO of submitted batches. The engine thread, started with the
 * first stream and stopped with the last, walks all streams and progresses the head batch of
 * each; a finished batch is popped, its first error kept for the next synchronize or query,
 * and waiters are woken. With nothing queued anywhere the thread sleeps on a condition
 * variable; with work that cannot move it backs off like any waiter (spin, yield, short sleep),
 * yielding at once when the peer it waits for runs on its CPU (tt_engine_peer_on_my_cpu).
 *
 * A synchronizing thread drives the streams itself (drive_until) instead of sleeping until the
 * engine thread wakes it, and the engine thread sleeps meanwhile: no wake-up lies on the way
 * back. The idle engine thread does not poll before sleeping: pollers take the cores from the
 * threads with work (both measured: docs/performance.md, "Measurements behind the code").
 *
 * The handle given to the user is the struct's address, checked against the list of live
 * streams before use, so a stale or foreign handle is an error, not a crash.
 *
 * Device streams (CUDA builds) get a host stream of their own, a shadow made on first use and
 * kept for the life of the process: its batches are gated by words the device stream writes
 * and waits for (device/device.h), so host work runs in the device stream's order, and the
 * engine drives them like any other stream's. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/stream.h"

#include "core/mem.h"

#include "device/device.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

struct tt_stream {
    const struct tt_device_stream_kind *kind; /* first: a host stream's is tt_device_host_stream */
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    struct tt_batch *head;
    struct tt_batch *tail;
    uint64_t queued;
    uint64_t completed;
    int users;          /* event calls inside it (stream_use), under list_lock */
    ncclResult_t error; /* first error of completed batches, until reported */
    char error_reason[TT_REASON_BYTES]; /* why, while error is set */
    struct tt_stream *next;
    /* Shadows of device streams only: */
    bool shadow;
    cudaStream_t device;         /* the device stream it orders work for */
    uint32_t *words;             /* its start/done words (device/device.h) */
    uint32_t device_seq;         /* the last sequence number given out (under order_lock) */
    pthread_mutex_t order_lock;  /* one enqueue at a time: sequence, device order, tickets */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work_cond;
    struct tt_stream *streams;
    int count;
    bool running;
    uint64_t gen; /* a thread runs while the generation it was started in is current */
    pthread_t thread;
    /* Bumped by every enqueue, so the thread never misses one. An enqueue does not take the
     * lock (a pass may hold it for milliseconds): it wakes the threads that announced their
     * sleep (`sleepers`, counted before their last look at work_seq: a count, not a flag, since
     * an old generation's thread may still be leaving its wait while the new one sleeps). */
    _Atomic uint64_t work_seq;
    _Atomic int sleepers;
    int drivers;       /* synchronizing threads driving the streams themselves */
    /* Threads pausing in back_off, which may sleep on a word in a communicator's shared
     * memory, counted by the half of pause_epoch they began in (tt_stream_wait_pauses). */
    uint64_t pause_epoch;
    int pausing[2];
} engine = {.lock = PTHREAD_MUTEX_INITIALIZER, .work_cond = PTHREAD_COND_INITIALIZER};

/* engine.streams and the streams' `users` counts change under engine.lock and list_lock both
 * (in that order); the checks of a handle on every call's path take list_lock alone, which no
 * pass holds, so they never wait for the progress of other operations. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;

/* Threads waiting for engine.lock from outside a progress loop (engine_lock). A loop holds the
 * lock across passes that move data, which may go on for the length of a large operation: it
 * lets such threads in between passes (engine_let_in), so that an enqueue, a stream check or an
 * abort does not wait for another operation to end (measured before: 2-5 ms on average and up
 * to 54 ms for an enqueue while a 64 MiB AllReduce ran). */
static _Atomic int engine_want;

static void engine_lock(void)
{
    atomic_fetch_add(&engine_want, 1);
    pthread_mutex_lock(&engine.lock);
    atomic_fetch_sub(&engine_want, 1);
}

/* In a progress loop, between passes: lets the threads waiting for the lock take it. */
static void engine_let_in(void)
{
    if (atomic_load_explicit(&engine_want, memory_order_relaxed) == 0) return;
    pthread_mutex_unlock(&engine.lock);
    for (int i = 0; i < 100 && atomic_load(&engine_want) > 0; i++) sched_yield();
    pthread_mutex_lock(&engine.lock);
}

/* done_cond times its waits (tt_stream_sleep_event) on the monotonic clock. */
static void done_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static void batch_free(struct tt_batch *b)
{
    tt_engine_batch_clear(b);
    free(b);
}

/* Whether a batch of a device stream may not start yet (the stream has not reached it); a
 * stopped communicator still ends it at once, so the stream goes on. */
static bool gate_closed(const struct tt_batch *b)
{
    if (b->gate == NULL || tt_device_word_reached(&b->gate[0], b->gate_seq)) return false;
    for (const struct tt_task *t = b->head; t; t = t->next)
        if (tt_state_stopped(t->st)) return false;
    return true;
}

/* One pass over every stream's head batch (engine lock held). Returns whether anything is
 * still queued; *progressed and `hint` as for tt_engine_progress. */
static bool engine_pass(bool *progressed, struct tt_wait_hint *hint, struct tt_batch **blocked)
{
    bool busy = false;
    struct tt_wait_hint batch_hint;
    tt_wait_hint_clear(hint);
    *blocked = NULL;
    for (struct tt_stream *s = engine.streams; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        struct tt_batch *b = s->head;
        pthread_mutex_unlock(&s->lock);
        if (b == NULL) continue;
        busy = true;
        if (gate_closed(b)) continue;
        bool done = false, moved = false;
        ncclResult_t res = tt_engine_progress(b, &done, &moved, &batch_hint);
        if (moved) *progressed = true;
        if (!done) {
            res = tt_engine_check_stall(b);
            done = res != ncclSuccess;
        }
        if (!done) {
            if (hint->word == NULL && hint->fd < 0) *hint = batch_hint;
            if (*blocked == NULL) *blocked = b;
            continue;
        }
        *progressed = true;
        pthread_mutex_lock(&s->lock);
        s->head = b->next;
        if (s->head == NULL) s->tail = NULL;
        if (res != ncclSuccess && s->error == ncclSuccess) {
            s->error = res;
            snprintf(s->error_reason, sizeof s->error_reason, "%s", b->reason ? b->reason : "");
        }
        s->completed++;
        b->result = res;
        tt_engine_complete_events(b);
        /* The device stream waits for this, whatever the result (the error is latched on the
         * communicator, as NCCL reports asynchronous failures). */
        if (b->gate != NULL) __atomic_store_n(&b->gate[1], b->gate_seq, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&s->done_cond);
        pthread_mutex_unlock(&s->lock);
        batch_free(b);
    }
    return busy;
}

/* One step of the backoff after a pass that moved nothing, `blocked` the first batch that could
 * not (engine lock held on entry and on return). */
static void back_off(struct tt_backoff *backoff, const struct tt_wait_hint *hint,
                     struct tt_batch *blocked)
{
    /* Spinning cannot help a peer that waits for this CPU: yield at once, as blocking calls
     * do (core/engine.c). The batch stays queued while the lock is held. There is none when
     * every queued batch waits for its device stream to reach it (gate closed). */
    if (blocked != NULL && backoff->polls < backoff->spin_limit &&
        (backoff->polls & 63) == 15 && tt_engine_peer_on_my_cpu(blocked))
        backoff->polls = backoff->spin_limit;
    /* Back off without the lock, so enqueues and stream changes go through. */
    int half = (int)(engine.pause_epoch & 1);
    engine.pausing[half]++;
    pthread_mutex_unlock(&engine.lock);
    tt_backoff_pause(backoff, hint);
    pthread_mutex_lock(&engine.lock);
    engine.pausing[half]--;
}

void tt_stream_wait_pauses(void)
{
    /* One waiter at a time: a second one's flip would send the pauses the first waits for
     * back into the half it then stops watching. */
    static pthread_mutex_t waiters = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&waiters);
    engine_lock();
    int half = (int)(engine.pause_epoch++ & 1); /* pauses from now on count in the other half */
    while (engine.pausing[half] > 0) {
        pthread_mutex_unlock(&engine.lock);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000};
        nanosleep(&ts, NULL);
        engine_lock();
    }
    pthread_mutex_unlock(&engine.lock);
    pthread_mutex_unlock(&waiters);
}

static void *engine_main(void *arg)
{
    uint64_t gen = (uint64_t)(uintptr_t)arg;
    tt_log_set_rank(-1);
    struct tt_backoff backoff;
    struct tt_wait_hint hint;
    tt_backoff_init(&backoff);
    pthread_mutex_lock(&engine.lock);
    while (engine.gen == gen) {
        bool progressed = false;
        uint64_t seen = atomic_load(&engine.work_seq);
        struct tt_batch *blocked;
        bool busy = engine_pass(&progressed, &hint, &blocked);
        if (progressed) {
            tt_backoff_reset(&backoff);
            engine_let_in();
            continue;
        }
        if (!busy) {
            /* Idle: sleep until an enqueue (or a stream's creation/destruction) signals. */
            atomic_fetch_add(&engine.sleepers, 1);
            while (atomic_load(&engine.work_seq) == seen && engine.gen == gen)
                pthread_cond_wait(&engine.work_cond, &engine.lock);
            atomic_fetch_sub(&engine.sleepers, 1);
            tt_backoff_reset(&backoff);
            continue;
        }
        /* A synchronizing thread is driving the streams (wait_drained): leave the polling to it
         * until it is done or new work comes (it drives the new work meanwhile). */
        if (engine.drivers > 0) {
            atomic_fetch_add(&engine.sleepers, 1);
            pthread_cond_wait(&engine.work_cond, &engine.lock);
            atomic_fetch_sub(&engine.sleepers, 1);
            continue;
        }
        back_off(&backoff, &hint, blocked);
    }
    pthread_mutex_unlock(&engine.lock);
    return NULL;
}

static bool stream_live(const struct tt_stream *s)
{
    for (struct tt_stream *it = engine.streams; it; it = it->next)
        if (it == s) return true;
    return false;
}

ncclResult_t tt_stream_check(cudaStream_t stream, const char *caller)
{
    if (stream == NULL) return ncclSuccess;
    pthread_mutex_lock(&list_lock);
    bool live = stream_live((const struct tt_stream *)(void *)stream);
    pthread_mutex_unlock(&list_lock);
    if (live) return ncclSuccess;
    /* Not one of ours: a device stream, if a device kind claims it (CUDA builds). */
    const struct tt_device_stream_kind *kind = tt_device_stream_kind(stream);
    if (kind != NULL)
        return TT_ERROR(ncclInvalidUsage,
                        "%s: stream %p is a %s stream, which this build cannot queue host "
                        "work on yet", caller, (void *)stream, kind->name);
    return TT_ERROR(ncclInvalidUsage,
                    "%s: stream %p is not a Tutti host stream (tuttiStreamCreate); CUDA "
                    "streams need a CUDA build, and host buffers may also use stream NULL",
                    caller, (void *)stream);
}

ncclResult_t tt_stream_check_op(cudaStream_t stream, const char *caller)
{
    if (stream == NULL) return ncclSuccess;
    pthread_mutex_lock(&list_lock);
    bool live = stream_live((const struct tt_stream *)(void *)stream);
    pthread_mutex_unlock(&list_lock);
    if (live || tt_device_stream_kind(stream) != NULL) return ncclSuccess;
    return tt_stream_check(stream, caller);
}

bool tt_stream_is_host(cudaStream_t stream)
{
    if (stream == NULL) return false;
    pthread_mutex_lock(&list_lock);
    bool live = stream_live((const struct tt_stream *)(void *)stream);
    pthread_mutex_unlock(&list_lock);
    return live;
}

/* Adds `s` to the live streams, starting the engine thread with the first one. On failure `s`
 * is left to the caller, which frees it. */
static ncclResult_t stream_add(struct tt_stream *s)
{
    engine_lock();
    if (!engine.running) {
        int err = pthread_create(&engine.thread, NULL, engine_main,
                                 (void *)(uintptr_t)engine.gen);
        if (err != 0) { /* `s` stays the caller's to free */
            pthread_mutex_unlock(&engine.lock);
            return TT_ERROR(ncclSystemError, "cannot start the progress thread: %s",
                            strerror(err));
        }
        engine.running = true;
        tt_mem_set_range_waiter(tt_stream_wait_range_idle);
    }
    pthread_mutex_lock(&list_lock);
    s->next = engine.streams;
    engine.streams = s;
    pthread_mutex_unlock(&list_lock);
    engine.count++;
    pthread_mutex_unlock(&engine.lock);
    return ncclSuccess;
}

ncclResult_t tt_stream_create(cudaStream_t *out)
{
    struct tt_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return TT_ERROR(ncclSystemError, "out of memory creating a stream");
    s->kind = &tt_device_host_stream;
    pthread_mutex_init(&s->lock, NULL);
    done_cond_init(&s->done_cond);
    s->error = ncclSuccess;
    ncclResult_t res = stream_add(s);
    if (res != ncclSuccess) {
        pthread_cond_destroy(&s->done_cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return res;
    }
    *out = (cudaStream_t)(void *)s;
    return ncclSuccess;
}

/* The shadow of device stream `device`, made on first use. Shadows live as long as the process:
 * a device stream's end is not announced to Tutti, and a handle used again later (a new stream
 * at the same address) finds its shadow's sequence going on, which is all it needs. */
static ncclResult_t shadow_get(cudaStream_t device, struct tt_stream **out)
{
    static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&make_lock);
    pthread_mutex_lock(&list_lock);
    struct tt_stream *s = engine.streams;
    while (s != NULL && !(s->shadow && s->device == device)) s = s->next;
    pthread_mutex_unlock(&list_lock);
    ncclResult_t res = ncclSuccess;
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s == NULL) res = TT_ERROR(ncclSystemError, "out of memory for a device stream");
        if (res == ncclSuccess) res = tt_device_words_create(&s->words);
        if (res == ncclSuccess) {
            s->kind = tt_device_stream_kind(device);
            s->shadow = true;
            s->device = device;
            pthread_mutex_init(&s->lock, NULL);
            done_cond_init(&s->done_cond);
            pthread_mutex_init(&s->order_lock, NULL);
            res = stream_add(s);
        }
        if (res != ncclSuccess) {
            free(s); /* the words, if made, are a few pinned bytes: left to the process */
            s = NULL;
        }
    }
    pthread_mutex_unlock(&make_lock);
    *out = s;
    return res;
}

ncclResult_t tt_stream_enqueue_device(cudaStream_t stream, struct tt_batch *b)
{
    struct tt_stream *s;
    ncclResult_t res = shadow_get(stream, &s);
    if (res != ncclSuccess) {
        tt_engine_batch_clear(b);
        free(b);
        return res;
    }
    /* The sequence, the device stream's order and the lanes' tickets are taken together, so
     * the shadow's queue, the device stream and the lanes agree on one order. */
    pthread_mutex_lock(&s->order_lock);
    uint32_t seq = ++s->device_seq;
    bool waits = false;
    struct tt_device_stage *stages = b->stages;
    b->stages = NULL;
    res = tt_device_stream_order(stream, s->words, seq, stages, &waits);
    if (res != ncclSuccess) {
        /* The operation does not run. If the stream already waits for it, an empty batch in
         * its place writes `done` in turn, so the stream is not stuck. */
        tt_engine_batch_clear(b);
        if (!waits) {
            free(b);
            pthread_mutex_unlock(&s->order_lock);
            return res;
        }
    } else {
        tt_engine_submit(b);
    }
    b->gate = s->words;
    b->gate_seq = seq;
    tt_stream_enqueue((cudaStream_t)(void *)s, b);
    pthread_mutex_unlock(&s->order_lock);
    return res;
}

static _Atomic uint64_t enqueues;

ncclResult_t tt_stream_enqueue(cudaStream_t stream, struct tt_batch *b)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    b->next = NULL;
    b->enqueued = atomic_fetch_add_explicit(&enqueues, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = b; else s->head = b;
    s->tail = b;
    s->queued++;
    pthread_mutex_unlock(&s->lock);
    /* Sequentially consistent both: a thread that announced its sleep after this load sees the
     * new work_seq at its last look, and one that announced it before is woken here (it holds
     * the lock from that look until it waits). */
    atomic_fetch_add(&engine.work_seq, 1);
    if (atomic_load(&engine.sleepers) > 0) {
        pthread_mutex_lock(&engine.lock);
        pthread_cond_broadcast(&engine.work_cond); /* the current thread among any leaving */
        pthread_mutex_unlock(&engine.lock);
    }
    return ncclSuccess;
}

uint64_t tt_stream_pending(cudaStream_t stream)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    pthread_mutex_lock(&s->lock);
    uint64_t pending = s->queued - s->completed;
    pthread_mutex_unlock(&s->lock);
    return pending;
}

/* Whether any stream has a batch queued (engine lock held). */
static bool any_queued(void)
{
    bool queued = false;
    for (struct tt_stream *it = engine.streams; it != NULL && !queued; it = it->next) {
        pthread_mutex_lock(&it->lock);
        queued = it->head != NULL;
        pthread_mutex_unlock(&it->lock);
    }
    return queued;
}

struct drain_target {
    struct tt_stream *s;
    uint64_t target;
};

static bool drained(void *arg)
{
    struct drain_target *d = arg;
    pthread_mutex_lock(&d->s->lock);
    bool done = d->s->completed >= d->target;
    pthread_mutex_unlock(&d->s->lock);
    return done;
}

/* Waits until until(arg) holds, driving the streams itself meanwhile (engine passes, backing
 * off like the engine thread), so that no wake-up lies on the way back; the engine thread
 * sleeps until it is done. A stuck batch fails after TUTTI_TIMEOUT_MS without progress, so this
 * wait ends. */
static void drive_until(bool (*until)(void *), void *arg)
{
    if (until(arg)) return;
    /* The passes below may fail other threads' batches here, which sets this thread's last
     * error: the caller's own is put back after them (its batches keep their reasons). */
    const char *last = tt_error_last();
    char *saved = last[0] != '\0' ? strdup(last) : NULL;
    struct tt_backoff backoff;
    struct tt_wait_hint hint;
    tt_backoff_init(&backoff);
    engine_lock();
    engine.drivers++;
    for (;;) {
        bool progressed = false;
        struct tt_batch *blocked;
        bool busy = engine_pass(&progressed, &hint, &blocked);
        if (until(arg)) break;
        if (progressed || !busy) {
            tt_backoff_reset(&backoff);
            engine_let_in();
            continue;
        }
        back_off(&backoff, &hint, blocked);
    }
    /* The engine thread takes over again where streams still have work (else the next enqueue
     * wakes it: waking it for nothing costs a context switch where CPUs are shared). */
    if (--engine.drivers == 0 && any_queued()) pthread_cond_signal(&engine.work_cond);
    pthread_mutex_unlock(&engine.lock);
    if (saved != NULL) {
        tt_error_note("%s", saved);
        free(saved);
    } else {
        tt_error_clear();
    }
}

/* Waits until the batches queued before the call have finished. */
static void wait_drained(struct tt_stream *s)
{
    pthread_mutex_lock(&s->lock);
    struct drain_target d = {.s = s, .target = s->queued};
    pthread_mutex_unlock(&s->lock);
    drive_until(drained, &d);
}

void tt_stream_record(cudaStream_t stream, struct tt_event_rec *rec)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL) {
        rec->stream = stream;
        rec->next = s->tail->events;
        s->tail->events = rec;
        atomic_store_explicit(&rec->state, TT_EVENT_PENDING, memory_order_release);
    } else {
        /* Everything before the record has completed already, possibly with an error that
         * nobody took yet (an operation that failed at once, before its caller could record
         * an event behind it): that is the first error among them. */
        tt_event_rec_finish(rec, s->error, s->error_reason);
    }
    pthread_mutex_unlock(&s->lock);
}

/* An event call's hold on the stream its event was recorded on, which another thread may
 * destroy once the event completed (tt_stream_destroy waits for the holds): NULL when that
 * stream is gone already (the event completed, so there is nothing to do there). */
static struct tt_stream *stream_use(cudaStream_t stream)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    pthread_mutex_lock(&list_lock);
    bool live = s != NULL && stream_live(s);
    if (live) s->users++;
    pthread_mutex_unlock(&list_lock);
    return live ? s : NULL;
}

static void stream_unuse(struct tt_stream *s)
{
    pthread_mutex_lock(&list_lock);
    s->users--;
    pthread_mutex_unlock(&list_lock);
}

void tt_stream_unrecord(cudaStream_t stream, struct tt_event_rec *rec)
{
    struct tt_stream *s = stream_use(stream);
    if (s == NULL) return;
    pthread_mutex_lock(&s->lock);
    for (struct tt_batch *b = s->head; b != NULL; b = b->next) {
        for (struct tt_event_rec **p = &b->events; *p != NULL; p = &(*p)->next) {
            if (*p == rec) {
                *p = rec->next;
                rec->next = NULL;
                atomic_store_explicit(&rec->state, TT_EVENT_IDLE, memory_order_release);
                /* A thread sleeping on it (tt_stream_sleep_event) looks again. */
                pthread_cond_broadcast(&s->done_cond);
                goto out;
            }
        }
    }
out:
    pthread_mutex_unlock(&s->lock);
    stream_unuse(s);
}

static bool event_done(void *arg)
{
    const struct tt_event_rec *rec = arg;
    return atomic_load_explicit(&rec->state, memory_order_acquire) != TT_EVENT_PENDING;
}

void tt_stream_wait_event(cudaStream_t stream, struct tt_event_rec *rec)
{
    (void)stream;
    drive_until(event_done, rec);
}

void tt_stream_sleep_event(cudaStream_t stream, struct tt_event_rec *rec, int64_t timeout_us)
{
    struct tt_stream *s = stream_use(stream);
    if (s == NULL) return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_us >= 0) {
        int64_t ns = until.tv_nsec + (timeout_us % 1000000) * 1000;
        until.tv_sec += (time_t)(timeout_us / 1000000 + ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
    }
    /* The state changes under the stream's lock, before done_cond's broadcast: no lost wake. */
    pthread_mutex_lock(&s->lock);
    /* Recorded again elsewhere meanwhile (it was taken off this stream): the caller looks. */
    while (!event_done(rec) && rec->stream == stream) {
        if (timeout_us < 0) {
            pthread_cond_wait(&s->done_cond, &s->lock);
        } else if (pthread_cond_timedwait(&s->done_cond, &s->lock, &until) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    stream_unuse(s);
}

/* Reports and forgets the stream's first error since the last report, with its reason (the
 * failure itself was logged where it happened). */
static ncclResult_t take_error(struct tt_stream *s, const char *caller)
{
    pthread_mutex_lock(&s->lock);
    ncclResult_t res = s->error;
    if (res != ncclSuccess)
        tt_error_note("%s: an operation on stream %p failed: %s", caller, (void *)s,
                      s->error_reason[0] ? s->error_reason
                                         : "(no reason recorded; see the WARN lines on stderr)");
    s->error = ncclSuccess;
    pthread_mutex_unlock(&s->lock);
    return res;
}

ncclResult_t tt_stream_synchronize(cudaStream_t stream)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    wait_drained(s);
    return take_error(s, "tuttiStreamSynchronize");
}

ncclResult_t tt_stream_query(cudaStream_t stream)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    pthread_mutex_lock(&s->lock);
    bool busy = s->completed < s->queued;
    pthread_mutex_unlock(&s->lock);
    if (busy) return ncclInProgress;
    return take_error(s, "tuttiStreamQuery");
}

ncclResult_t tt_stream_destroy(cudaStream_t stream)
{
    struct tt_stream *s = (struct tt_stream *)(void *)stream;
    wait_drained(s);
    engine_lock();
    pthread_mutex_lock(&list_lock);
    for (struct tt_stream **it = &engine.streams; *it; it = &(*it)->next) {
        if (*it == s) {
            *it = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&list_lock);
    /* An event call holding it (stream_use) leaves at once: its event has completed. */
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->done_cond);
    pthread_mutex_unlock(&s->lock);
    for (;;) {
        pthread_mutex_lock(&list_lock);
        int users = s->users;
        pthread_mutex_unlock(&list_lock);
        if (users == 0) break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000};
        nanosleep(&ts, NULL);
    }
    bool last = --engine.count == 0;
    if (last) {
        engine.gen++;
        engine.running = false;
        pthread_cond_signal(&engine.work_cond);
    }
    pthread_t thread = engine.thread;
    pthread_mutex_unlock(&engine.lock);
    if (last) pthread_join(thread, NULL);
    pthread_cond_destroy(&s->done_cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return ncclSuccess;
}

bool tt_stream_scan(bool engine_locked, tt_stream_visit visit, void *arg)
{
    bool stopped = false;
    if (!engine_locked) engine_lock();
    for (struct tt_stream *s = engine.streams; s != NULL && !stopped; s = s->next) {
        pthread_mutex_lock(&s->lock);
        for (struct tt_batch *b = s->head; b != NULL && !stopped; b = b->next)
            stopped = visit((cudaStream_t)(void *)s, b, b == s->head, arg);
        pthread_mutex_unlock(&s->lock);
    }
    if (!engine_locked) pthread_mutex_unlock(&engine.lock);
    return stopped;
}

void tt_stream_drive_until(bool (*until)(void *), void *arg)
{
    drive_until(until, arg);
}
