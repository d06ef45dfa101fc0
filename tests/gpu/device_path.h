/* What the device-direct tests (fake_direct.c over the stand-in driver, gpu_direct.cu on a GPU)
 * share: which operations the statistics counted as device-direct, and the data of their
 * Send/Recv cases. */
#ifndef TT_TESTS_GPU_DEVICE_PATH_H
#define TT_TESTS_GPU_DEVICE_PATH_H

#include <stddef.h>
#include <stdint.h>
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

#endif
