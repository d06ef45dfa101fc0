/* Seconds on the monotonic clock, for tests that time how soon a call returns. */
#ifndef TUTTI_TESTS_NOW_S_H
#define TUTTI_TESTS_NOW_S_H

#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
