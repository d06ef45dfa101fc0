/* Helpers shared by the public entry points in src/api/. The library is compiled with
 * -fvisibility=hidden; these macros are the only way a symbol becomes visible, which keeps the
 * exported set to nccl*, pnccl* and tutti* (tools/check_symbols.sh checks it).
 *
 * Each NCCL function is defined once under its p-prefixed name (pncclAllReduce) and exported;
 * the plain name (ncclAllReduce) is an alias of the same code, so a profiler that interposes
 * ncclAllReduce can still call pncclAllReduce. */
#ifndef TT_API_H
#define TT_API_H

#include <stddef.h>

#include "nccl.h"

/* Marks a definition as part of the library's exported interface. */
#define TT_API __attribute__((visibility("default")))

/* Exports `name` (e.g. ncclAllReduce) as an alias of the already defined p##name. Use it at file
 * scope, after the definition. */
#define TT_API_ALIAS(name)                                                                      \
    extern __typeof__(p##name) name __attribute__((alias("p" #name), visibility("default")))

/* Argument checks shared by the entry points. Each reports the error once, naming the caller
 * and the argument, and returns its code; ncclSuccess when the argument is fine. */
ncclResult_t tt_api_check_ptr(const void *ptr, const char *caller, const char *arg);
ncclResult_t tt_api_check_dtype(ncclDataType_t dtype, const char *caller);
ncclResult_t tt_api_check_stream(cudaStream_t stream, const char *caller);
/* `rank` (named `arg` in the message) must lie in [0, nranks). */
ncclResult_t tt_api_check_rank(int rank, int nranks, const char *caller, const char *arg);
/* A buffer of `count` elements must not be NULL unless count == 0. */
ncclResult_t tt_api_check_buffer(const void *buff, size_t count, const char *caller,
                                 const char *arg);


#endif
