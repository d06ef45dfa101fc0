/* Logging with NCCL's knobs: NCCL_DEBUG (level), NCCL_DEBUG_SUBSYS (which subsystems print at
 * INFO/TRACE), NCCL_DEBUG_FILE (destination, %h and %p expand to host and pid).
 * Every line starts "host:pid:tid [rank] NCCL LEVEL". The rank is per thread: the public entry
 * points set it from the communicator they serve. Thread-safe; a disabled level costs one load. */
#ifndef TT_UTIL_LOG_H
#define TT_UTIL_LOG_H

#include <stdbool.h>

enum tt_log_level {
    TT_LOG_NONE = 0,
    TT_LOG_VERSION = 1,
    TT_LOG_WARN = 2,
    TT_LOG_INFO = 3,
    TT_LOG_ABORT = 4,
    TT_LOG_TRACE = 5,
};

/* Subsystems, with NCCL's names and bits. */
enum tt_log_subsys {
    TT_SUB_INIT = 0x1,
    TT_SUB_COLL = 0x2,
    TT_SUB_P2P = 0x4,
    TT_SUB_SHM = 0x8,
    TT_SUB_NET = 0x10,
    TT_SUB_GRAPH = 0x20,
    TT_SUB_TUNING = 0x40,
    TT_SUB_ENV = 0x80,
    TT_SUB_ALLOC = 0x100,
    TT_SUB_CALL = 0x200,
    TT_SUB_PROXY = 0x400,
    TT_SUB_NVLS = 0x800,
    TT_SUB_BOOTSTRAP = 0x1000,
    TT_SUB_REG = 0x2000,
    TT_SUB_PROFILE = 0x4000,
    TT_SUB_RAS = 0x8000,
    TT_SUB_ALL = ~0,
};

extern int tt_log_level_now;     /* -1 until the environment has been read */
extern unsigned tt_log_subsys_now;

void tt_log_init(void);
/* Re-reads NCCL_DEBUG and NCCL_DEBUG_SUBSYS (ncclResetDebugInit); the log file stays. */
void tt_log_reload(void);
bool tt_log_enabled(enum tt_log_level level, unsigned subsys);
void tt_log_at(enum tt_log_level level, unsigned subsys, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The rank printed in this thread's log lines (-1 prints no rank). */
void tt_log_set_rank(int rank);
int tt_log_get_rank(void);
/* The calling thread's id (gettid), asked of the kernel once per thread. */
int tt_thread_id(void);

#define TT_WARN(...) tt_log_at(TT_LOG_WARN, TT_SUB_ALL, __FILE__, __LINE__, __VA_ARGS__)
/* The level is checked inline first: a disabled INFO or TRACE costs one load on hot paths. */
#define TT_LOG_MAYBE(level) (tt_log_level_now < 0 || tt_log_level_now >= (int)(level))
#define TT_INFO(sub, ...)                                                                       \
    do {                                                                                        \
        if (TT_LOG_MAYBE(TT_LOG_INFO) && tt_log_enabled(TT_LOG_INFO, (sub)))                    \
            tt_log_at(TT_LOG_INFO, (sub), __FILE__, __LINE__, __VA_ARGS__);                     \
    } while (0)
#define TT_TRACE(sub, ...)                                                                      \
    do {                                                                                        \
        if (TT_LOG_MAYBE(TT_LOG_TRACE) && tt_log_enabled(TT_LOG_TRACE, (sub)))                  \
            tt_log_at(TT_LOG_TRACE, (sub), __FILE__, __LINE__, __VA_ARGS__);                    \
    } while (0)

#endif
