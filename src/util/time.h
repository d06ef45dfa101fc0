/* Monotonic clock and deadlines. A deadline is an absolute CLOCK_MONOTONIC time in ns;
 * TT_NO_DEADLINE never passes. */
#ifndef TT_UTIL_TIME_H
#define TT_UTIL_TIME_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define TT_NO_DEADLINE UINT64_MAX

static inline uint64_t tt_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A deadline `timeout_ms` from now; timeout_ms <= 0 means none. */
static inline uint64_t tt_deadline_after_ms(int64_t timeout_ms)
{
    if (timeout_ms <= 0) return TT_NO_DEADLINE;
    return tt_time_ns() + (uint64_t)timeout_ms * 1000000ull;
}

static inline bool tt_deadline_passed(uint64_t deadline_ns)
{
    return deadline_ns != TT_NO_DEADLINE && tt_time_ns() >= deadline_ns;
}

/* Milliseconds left before the deadline, clamped to [0, cap_ms]. */
static inline int tt_deadline_left_ms(uint64_t deadline_ns, int cap_ms)
{
    if (deadline_ns == TT_NO_DEADLINE) return cap_ms;
    uint64_t now = tt_time_ns();
    if (now >= deadline_ns) return 0;
    uint64_t left = (deadline_ns - now + 999999ull) / 1000000ull;
    return left > (uint64_t)cap_ms ? cap_ms : (int)left;
}

#endif
