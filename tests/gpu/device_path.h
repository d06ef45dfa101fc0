/* What the device-direct tests (fake_direct.c over the stand-in driver, gpu_direct.cu on a GPU)
 * share: which operations the statistics counted as device-direct, the data of their
 * Send/Recv cases, and the setup of their failure tests (run_failure). */
#ifndef TT_TESTS_GPU_DEVICE_PATH_H
#define TT_TESTS_GPU_DEVICE_PATH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

/* The operations of `collective` that tuttiCommStats counted under algorithm "Device" (the
 * device-direct path); -1 when the communicator does not count (TUTTI_STATS unset). */
static inline long long device_path_ops(ncclComm_t comm, const char *collective)
{
    tuttiCommStat_t rows[64];
    int n = 0;
    if (tuttiCommStats(comm, rows, 64, &n) != ncclSuccess) return -1;
    long long ops = 0;
    for (int j = 0; j < n && j < 64; j++)
        if (strcmp(rows[j].collective, collective) == 0 && strcmp(rows[j].algorithm, "Device") == 0)
            ops += (long long)rows[j].ops;
    return ops;
}

/* Element i of what rank `from` sends rank `to` in Send/Recv case `op`. */
static inline uint32_t device_path_word(int from, int to, int op, size_t i)
{
    return (uint32_t)from * 2654435761u ^ (uint32_t)to * 40503u ^ (uint32_t)op * 977u ^
           (uint32_t)i * 2246822519u;
}

/* The failure tests: --abort, --dead, --third, --destroy (each test's run_failure says what
 * they check); FAIL_NONE for any other argument. */
enum fail_mode { FAIL_NONE = -1, FAIL_ABORT, FAIL_DEAD, FAIL_THIRD, FAIL_DESTROY };
static inline int fail_mode_of(int argc, char **argv)
{
    static const char *const names[] = {"--abort", "--dead", "--third", "--destroy"};
    for (int m = 0; argc > 1 && m < 4; m++)
        if (strcmp(argv[1], names[m]) == 0) return m;
    return FAIL_NONE;
}

/* The rank of failure test `mode` that takes no part: the last one, which exits at once
 * (fail_exits), or one that stays idle and aborts late. -1, with a message, when the mode
 * needs another number of ranks. */
static inline int fail_idle_rank(int mode, int nranks, const char *prog)
{
    if ((mode == FAIL_ABORT && nranks != 2) || (mode == FAIL_THIRD && nranks != 3)) {
        fprintf(stderr, "%s: --abort runs with 2 ranks, --third with 3\n", prog);
        return -1;
    }
    return mode == FAIL_DEAD || mode == FAIL_DESTROY ? nranks - 1 : mode == FAIL_THIRD ? 2 : 1;
}
static inline int fail_exits(int mode)
{
    return mode == FAIL_DEAD || mode == FAIL_DESTROY;
}

#endif
