/* Two helpers of the bootstrap's tests (test_bootstrap.c, test_sock.c), which link the
 * bootstrap's and util's sources directly. */
#ifndef TUTTI_TESTS_BS_ENV_H
#define TUTTI_TESTS_BS_ENV_H

#include <stdint.h>
#include <stdlib.h>

#include "util/param.h"
#include "util/time.h"

/* Milliseconds since `since_ns` (tt_time_ns). */
static inline int64_t elapsed_ms(uint64_t since_ns)
{
    return (int64_t)((tt_time_ns() - since_ns) / 1000000);
}

/* Sets an environment variable and makes Tutti's parameters read it again. */
static inline void set_env(const char *name, const char *value)
{
    setenv(name, value, 1);
    tt_param_reload();
}

#endif
