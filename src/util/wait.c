/* The spin -> yield -> sleep ladder. Several ranks may share one core (4 ranks on 2 cores is a
 * tested case), so a waiter must give its core away quickly once spinning stops paying off;
 * the futex sleep keeps wake-up latency to a few microseconds when the waker sees a sleeper. */
#include "util/wait.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/param.h"

/* Few yields: with a CPU-bound stranger on the core, each sched_yield can hand it a whole time
 * slice (milliseconds), while a futex sleep is woken by the publisher within microseconds. */
#define YIELDS 4
/* A socket wait polls with a system call (recvmsg), a microsecond or more each: after this
 * many it sleeps in poll(), which the kernel ends the moment data arrives. Spinning the full
 * TUTTI_SPIN there took milliseconds and, with ranks sharing cores, kept the peer that was to
 * send off the CPU (an 8-byte exchange over TCP at load 8: 4 ms). */
#define SOCKET_SPIN 64

void tt_backoff_init_spin(struct tt_backoff *b, uint32_t spin_limit)
{
    b->polls = 0;
    b->spin_limit = spin_limit > 1000000 ? 1000000 : spin_limit;
}

void tt_backoff_init(struct tt_backoff *b)
{
    int64_t spin = tt_param_spin();
    tt_backoff_init_spin(b, spin < 0 ? 0 : (uint32_t)(spin > 1000000 ? 1000000 : spin));
}

static void futex_sleep(_Atomic uint64_t *word, uint64_t seen, _Atomic uint32_t *sleepers,
                        long timeout_us)
{
    /* Announce the sleeper before the final check, so a waker that publishes after our check
     * sees the sleeper (both sides use sequentially consistent operations). */
    atomic_fetch_add(sleepers, 1);
    if (atomic_load(word) == seen) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = timeout_us * 1000};
        /* The futex compares the low 32 bits of the little-endian counter. */
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, (uint32_t)seen, &ts, NULL, 0);
    }
    atomic_fetch_sub(sleepers, 1);
}

void tt_backoff_pause(struct tt_backoff *b, const struct tt_wait_hint *hint)
{
    uint32_t n = b->polls++;
    uint32_t spin = b->spin_limit;
    if (hint != NULL && hint->word == NULL && hint->fd >= 0 && spin > SOCKET_SPIN)
        spin = SOCKET_SPIN;
    if (n < spin) {
        tt_cpu_relax();
        return;
    }
    if (n < spin + YIELDS) {
        sched_yield();
        return;
    }
    /* Sleep longer the longer we have been waiting, up to the cap. */
    uint32_t over = n - spin - YIELDS;
    long us = over < 10 ? 20 : over < 100 ? 200 : TT_WAIT_SLEEP_MAX_US;
    if (hint != NULL && hint->word != NULL && hint->sleepers != NULL) {
        futex_sleep(hint->word, hint->seen, hint->sleepers, us);
    } else if (hint != NULL && hint->fd >= 0) {
        struct pollfd pfd[2] = {{.fd = hint->fd, .events = hint->events, .revents = 0},
                                {.fd = hint->fd2, .events = hint->events2, .revents = 0}};
        poll(pfd, hint->fd2 >= 0 ? 2 : 1, (int)((us + 999) / 1000));
    } else {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
        nanosleep(&ts, NULL);
    }
}

void tt_wait_wake(_Atomic uint64_t *word, _Atomic uint32_t *sleepers)
{
    if (atomic_load(sleepers) != 0) syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}
