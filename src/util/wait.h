/* Waiting without burning a shared core: poll a few thousand times, then yield, then sleep
 * (on a futex when the waiter knows which word will change, on poll() when it waits for a
 * socket, else a short nanosleep). Wakers that publish a futex word call tt_wait_wake, which
 * makes a system call only when somebody sleeps on that word. Every sleep is short (at most
 * TT_WAIT_SLEEP_MAX_US), so callers re-check their deadline and abort flag between sleeps. */
#ifndef TT_UTIL_WAIT_H
#define TT_UTIL_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TT_WAIT_SLEEP_MAX_US 2000

/* What a blocked operation is waiting for. A transport fills it when it cannot proceed. */
struct tt_wait_hint {
    /* Shared-memory waits: the 64-bit counter that must change from `seen`, and the
     * counter of sleepers the waker checks. Both live in memory shared with the waker. */
    _Atomic uint64_t *word;
    uint64_t seen;
    _Atomic uint32_t *sleepers;
    /* Socket waits: fd and poll() events, or fd < 0; and a second socket whose readiness also
     * ends the wait (fd2 < 0: none), such as a send socket with bytes still to write while
     * the op waits for data on another. */
    int fd;
    short events;
    int fd2;
    short events2;
};

static inline void tt_wait_hint_clear(struct tt_wait_hint *h)
{
    h->word = NULL;
    h->sleepers = NULL;
    h->seen = 0;
    h->fd = -1;
    h->events = 0;
    h->fd2 = -1;
    h->events2 = 0;
}

struct tt_backoff {
    uint32_t polls;
    uint32_t spin_limit;
};

/* Spins TUTTI_SPIN polls before yielding. */
void tt_backoff_init(struct tt_backoff *b);
/* Spins `spin_limit` polls before yielding (a communicator's adaptive choice). */
void tt_backoff_init_spin(struct tt_backoff *b, uint32_t spin_limit);
static inline void tt_backoff_reset(struct tt_backoff *b) { b->polls = 0; }
/* One step of the ladder: returns after a pause (spin), a sched_yield or a short sleep on
 * what `hint` names (NULL hint: plain sleep). */
void tt_backoff_pause(struct tt_backoff *b, const struct tt_wait_hint *hint);

/* Publisher side of a futex word shared between processes: wake its sleepers, if any. */
void tt_wait_wake(_Atomic uint64_t *word, _Atomic uint32_t *sleepers);

static inline void tt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
