/* Errors: one vocabulary (ncclResult_t) from top to bottom.
 *
 * An error is reported once, where it happens, with TT_ERROR: it is logged at WARN with the
 * file:line and becomes the calling thread's last error (ncclGetLastError). Callers propagate
 * it with TT_TRY, which leaves a "-> file:line" trail at INFO, or TT_TRY_GOTO for cleanup.
 * TT_ASSERT is for Tutti's own bugs only, never for a user's or a peer's mistake. */
#ifndef TT_UTIL_ERR_H
#define TT_UTIL_ERR_H

#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

/* Room for a failure's reason kept for a later status query (a communicator's, a stream's, an
 * event's). */
#define TT_REASON_BYTES 512

/* Logs `fmt` at WARN, records it as this thread's last error and returns `res`. */
ncclResult_t tt_error_at(ncclResult_t res, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Leaves the INFO-level "-> file:line" trail for an error passing through. */
void tt_error_trail(ncclResult_t res, const char *file, int line);
/* Records `fmt` as this thread's last error without logging it: for a status query that
 * reports an error already logged where it happened (and may be polled in a loop). */
void tt_error_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* This thread's last error message ("" when none). */
const char *tt_error_last(void);
/* Forgets this thread's last error (used at the start of public calls that succeed). */
void tt_error_clear(void);
/* strerror(err), or for EMFILE and ENFILE which limit was reached and how to raise it: for the
 * failure of a call that makes a descriptor (a socket, a shared-memory file, an eventfd). */
const char *tt_strerror(int err);

#define TT_ERROR(res, ...) tt_error_at((res), __FILE__, __LINE__, __VA_ARGS__)

#define TT_TRY(expr)                                                                            \
    do {                                                                                        \
        ncclResult_t tt_try_res_ = (expr);                                                      \
        if (tt_try_res_ != ncclSuccess) {                                                       \
            tt_error_trail(tt_try_res_, __FILE__, __LINE__);                                    \
            return tt_try_res_;                                                                 \
        }                                                                                       \
    } while (0)

#define TT_TRY_GOTO(expr, res, label)                                                           \
    do {                                                                                        \
        (res) = (expr);                                                                         \
        if ((res) != ncclSuccess) {                                                             \
            tt_error_trail((res), __FILE__, __LINE__);                                          \
            goto label;                                                                         \
        }                                                                                       \
    } while (0)

#define TT_ASSERT(cond)                                                                         \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "tutti: internal error at %s:%d: assertion '%s' failed\n",           \
                    __FILE__, __LINE__, #cond);                                                 \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* calloc that reports failure as ncclSystemError with the size asked for. */
ncclResult_t tt_calloc_at(void **out, size_t n, size_t elem_bytes, const char *file, int line);
#define TT_CALLOC(out, n)                                                                       \
    tt_calloc_at((void **)(out), (n), sizeof(**(out)), __FILE__, __LINE__)

#endif
