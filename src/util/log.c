/* Logging and error reporting. The level and subsystem mask are read from the environment once
 * (tt_log_init, idempotent and thread-safe); the destination file is opened then too. A WARN
 * also becomes the calling thread's last error, which ncclGetLastError returns. */
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/err.h"
#include "util/param.h"

int tt_log_level_now = -1;
unsigned tt_log_subsys_now = TT_SUB_INIT | TT_SUB_ENV | TT_SUB_BOOTSTRAP;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static FILE *log_file;
static char log_host[64];
/* initial-exec: a few bytes, read on every call; no __tls_get_addr on the fast path. */
static _Thread_local int log_rank __attribute__((tls_model("initial-exec"))) = -1;
static _Thread_local char last_error[1024];
/* Whether last_error holds a message: an initial-exec flag, one load on every call's path,
 * where the 1 KiB buffer itself (too large for the static TLS block a dlopen'ed library may
 * use) costs a __tls_get_addr call. */
static _Thread_local bool has_error __attribute__((tls_model("initial-exec")));

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", TT_SUB_INIT},     {"COLL", TT_SUB_COLL},   {"P2P", TT_SUB_P2P},
    {"SHM", TT_SUB_SHM},       {"NET", TT_SUB_NET},     {"GRAPH", TT_SUB_GRAPH},
    {"TUNING", TT_SUB_TUNING}, {"ENV", TT_SUB_ENV},     {"ALLOC", TT_SUB_ALLOC},
    {"CALL", TT_SUB_CALL},     {"PROXY", TT_SUB_PROXY}, {"NVLS", TT_SUB_NVLS},
    {"BOOTSTRAP", TT_SUB_BOOTSTRAP}, {"REG", TT_SUB_REG}, {"PROFILE", TT_SUB_PROFILE},
    {"RAS", TT_SUB_RAS},       {"ALL", (unsigned)TT_SUB_ALL},
};

static int parse_level(const char *s)
{
    if (s == NULL || *s == '\0') return TT_LOG_WARN;
    if (strcasecmp(s, "NONE") == 0) return TT_LOG_NONE;
    if (strcasecmp(s, "VERSION") == 0) return TT_LOG_VERSION;
    if (strcasecmp(s, "WARN") == 0) return TT_LOG_WARN;
    if (strcasecmp(s, "INFO") == 0) return TT_LOG_INFO;
    if (strcasecmp(s, "ABORT") == 0) return TT_LOG_ABORT;
    if (strcasecmp(s, "TRACE") == 0) return TT_LOG_TRACE;
    fprintf(stderr, "tutti: NCCL_DEBUG=%s is not one of NONE, VERSION, WARN, INFO, ABORT, TRACE; "
                    "using WARN\n", s);
    return TT_LOG_WARN;
}

/* NCCL_DEBUG_SUBSYS: a comma-separated list of names; a leading ^ inverts the whole list. */
static unsigned parse_subsys(const char *s)
{
    if (s == NULL || *s == '\0') return TT_SUB_INIT | TT_SUB_ENV | TT_SUB_BOOTSTRAP;
    int invert = (*s == '^');
    if (invert) s++;
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++) {
            if (strcasecmp(tok, subsys_names[i].name) == 0) {
                mask |= subsys_names[i].bit;
                found = 1;
            }
        }
        if (!found) fprintf(stderr, "tutti: NCCL_DEBUG_SUBSYS: unknown subsystem '%s'\n", tok);
    }
    return invert ? ~mask : mask;
}

/* NCCL_DEBUG_FILE: %h is the host name, %p the pid; "%%" a percent sign. */
static FILE *open_log_file(const char *pattern)
{
    if (pattern == NULL || *pattern == '\0') return stderr;
    char path[512];
    size_t n = 0;
    bool whole = true;
    for (const char *p = pattern; *p && whole; p++) {
        char piece[64];
        const char *add = piece;
        if (p[0] == '%' && p[1] == 'h') {
            add = log_host;
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%d", (int)getpid());
            p++;
        } else {
            piece[0] = *p;
            piece[1] = '\0';
            if (p[0] == '%' && p[1] == '%') p++;
        }
        size_t len = strlen(add);
        whole = n + len < sizeof path;
        if (whole) {
            memcpy(path + n, add, len);
            n += len;
        }
    }
    path[n] = '\0';
    if (!whole) {
        /* A path cut short would name some other file: stderr instead, said once. */
        fprintf(stderr, "tutti: NCCL_DEBUG_FILE=%s expands to more than %zu characters; "
                        "logging to stderr\n", pattern, sizeof path - 1);
        return stderr;
    }
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "tutti: cannot open NCCL_DEBUG_FILE=%s; logging to stderr\n", path);
        return stderr;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

static void log_init_once(void)
{
    gethostname(log_host, sizeof log_host - 1);
    char *dot = strchr(log_host, '.');
    if (dot) *dot = '\0';
    tt_log_subsys_now = parse_subsys(tt_param_debug_subsys());
    log_file = open_log_file(tt_param_debug_file());
    __atomic_store_n(&tt_log_level_now, parse_level(tt_param_debug()), __ATOMIC_RELEASE);
}

void tt_log_init(void) { pthread_once(&log_once, log_init_once); }

void tt_log_reload(void)
{
    tt_log_init();
    tt_param_reload();
    tt_log_subsys_now = parse_subsys(tt_param_debug_subsys());
    __atomic_store_n(&tt_log_level_now, parse_level(tt_param_debug()), __ATOMIC_RELEASE);
}

bool tt_log_enabled(enum tt_log_level level, unsigned subsys)
{
    int now = __atomic_load_n(&tt_log_level_now, __ATOMIC_ACQUIRE);
    if (now < 0) {
        tt_log_init();
        now = tt_log_level_now;
    }
    if ((int)level > now) return false;
    return level <= TT_LOG_WARN || (subsys & tt_log_subsys_now) != 0;
}

void tt_log_set_rank(int rank) { log_rank = rank; }
int tt_log_get_rank(void) { return log_rank; }

/* The calling thread's id, cached; a child of fork() starts over (its one thread is new). */
static _Thread_local int thread_id;
static void forget_thread_id(void) { thread_id = 0; }
static pthread_once_t thread_id_once = PTHREAD_ONCE_INIT;
static void watch_forks(void) { pthread_atfork(NULL, NULL, forget_thread_id); }

int tt_thread_id(void)
{
    if (thread_id == 0) {
        pthread_once(&thread_id_once, watch_forks);
        thread_id = (int)syscall(SYS_gettid);
    }
    return thread_id;
}

__attribute__((format(printf, 4, 0))) static void log_vwrite(enum tt_log_level level,
                                                              const char *file, int line,
                                                              const char *fmt, va_list ap)
{
    static const char *names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char prefix[160];
    int tid = tt_thread_id();
    if (log_rank >= 0)
        snprintf(prefix, sizeof prefix, "%s:%d:%d [%d] NCCL %s", log_host, (int)getpid(), tid,
                 log_rank, names[level]);
    else
        snprintf(prefix, sizeof prefix, "%s:%d:%d [-] NCCL %s", log_host, (int)getpid(), tid,
                 names[level]);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (level == TT_LOG_TRACE)
        fprintf(log_file, "%s %s:%d %s\n", prefix, base, line, msg);
    else if (level == TT_LOG_WARN)
        fprintf(log_file, "%s %s:%d %s\n", prefix, base, line, msg);
    else
        fprintf(log_file, "%s %s\n", prefix, msg);
}

void tt_log_at(enum tt_log_level level, unsigned subsys, const char *file, int line,
               const char *fmt, ...)
{
    if (!tt_log_enabled(level, subsys)) return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, file, line, fmt, ap);
    va_end(ap);
}

ncclResult_t tt_error_at(ncclResult_t res, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    has_error = true;
    va_end(ap);
    tt_log_at(TT_LOG_WARN, TT_SUB_ALL, file, line, "%s", last_error);
    return res;
}

void tt_error_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    has_error = true;
    va_end(ap);
}

void tt_error_trail(ncclResult_t res, const char *file, int line)
{
    TT_INFO(TT_SUB_ALL, "%s:%d -> %d", file, line, (int)res);
}

const char *tt_error_last(void) { return last_error; }

const char *tt_strerror(int err)
{
    /* Literals: a thread-local buffer would grow the library's static TLS (check_tls_size). */
    if (err == EMFILE)
        return "too many open files in this process (its limit, RLIMIT_NOFILE, is reached: "
               "raise it with ulimit -n)";
    if (err == ENFILE) return "too many open files in the system (raise fs.file-max)";
    return strerror(err);
}
void tt_error_clear(void)
{
    if (has_error) {
        last_error[0] = '\0';
        has_error = false;
    }
}

ncclResult_t tt_calloc_at(void **out, size_t n, size_t elem_bytes, const char *file, int line)
{
    *out = calloc(n ? n : 1, elem_bytes ? elem_bytes : 1);
    if (*out == NULL)
        return tt_error_at(ncclSystemError, file, line, "out of memory allocating %zu x %zu bytes",
                           n, elem_bytes);
    return ncclSuccess;
}
