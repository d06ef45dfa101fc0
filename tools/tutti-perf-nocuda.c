/* tutti-perf's device mode in a build without CUDA: -G says why it cannot run. */
#include <stdio.h>

#include "tutti-perf.h"

cudaStream_t tp_stream;

bool tp_dev_init(char *why, size_t why_bytes)
{
    snprintf(why, why_bytes, "this Tutti was built without CUDA (cmake --preset cuda)");
    return false;
}

/* Never called: tp_dev_init failed. */
void *tp_dev_alloc(size_t bytes) { return NULL; }
void tp_dev_free(void *p) {}
void tp_dev_put(void *dst, const void *src, size_t bytes) {}
void tp_dev_get(void *dst, const void *src, size_t bytes) {}
void tp_dev_sync(void) {}
void tp_dev_timer_start(void) {}
double tp_dev_timer_stop_us(void) { return 0; }
double tp_dev_copy_gbs(size_t bytes, int iters) { return 0; }
const char *tp_dev_name(void) { return ""; }
