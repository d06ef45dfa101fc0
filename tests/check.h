/* The one family of checks the tests share. A failed check prints one line (one write, so that
 * threads and ranks do not interleave inside it): file:line, the context the test set (its rank,
 * when it has one, and the case under test), the expression and both sides; and it counts in
 * check_failures. Past CHECK_MAX_PRINTED failures the rest are only counted, so that one broken
 * schedule does not bury the report. A test ends with `return check_failures ? 1 : 0;`.
 *
 *   FAIL(fmt, ...)           a failure described by the test itself
 *   CHECK(cond, fmt, ...)    cond must hold; the format says where the test stands
 *   CHECK_EQ(got, want)      integers (or pointers) compared as 64-bit values, both printed in
 *                            decimal and hex: bit-exact checks of float data compare the bits
 *   CHECK_EQ_MSG(got, want, fmt, ...)
 *                            the same, with where the test stands (index, dtype ...)
 *   CHECK_STR(got, want)     C strings, both printed
 * and, when nccl.h is included before this header:
 *   CHECK_RES(expr, want)    an ncclResult_t, both printed by name, with ncclGetLastError
 *   CHECK_ERR(expr, want, needle)
 *                            the same, and ncclGetLastError must mention `needle`
 *   CHECK_FAILS(expr)        an ncclResult_t that is an error (not ncclSuccess, not
 *                            ncclInProgress), whichever
 * Every check evaluates to whether it held, for `if (!CHECK(...)) return;`.
 *
 * The counter is atomic, so checks may fail in several threads at once. It is static, one per
 * file, unless the program is made of several files that check: they define CHECK_EXTERN
 * before including this header, and one of them defines check_failures, check_rank and
 * check_where. */
#ifndef TUTTI_TESTS_CHECK_H
#define TUTTI_TESTS_CHECK_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CHECK_MAX_PRINTED 20

#ifdef CHECK_EXTERN
extern atomic_int check_failures;
extern int check_rank;
extern const char *check_where;
#else
static atomic_int check_failures;
/* The rank printed with each failure; -1 (the default) prints none. */
static int check_rank = -1;
/* The case under test, printed with each failure when not NULL (single-threaded tests). */
static const char *check_where;
#endif

/* The file's name without its directories, so that messages read the same from any build. */
static inline const char *check_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline void check_fail(const char *file, int line, const char *fmt, ...)
{
    if (atomic_fetch_add(&check_failures, 1) >= CHECK_MAX_PRINTED) return;
    char msg[1024];
    file = check_base_name(file);
    int n = check_rank >= 0 ? snprintf(msg, sizeof msg, "%s:%d: rank %d: ", file, line, check_rank)
                            : snprintf(msg, sizeof msg, "%s:%d: ", file, line);
    if (n < 0 || (size_t)n >= sizeof msg) n = 0;
    if (check_where != NULL) {
        int m = snprintf(msg + n, sizeof msg - (size_t)n, "[%s] ", check_where);
        if (m > 0 && (size_t)(n + m) < sizeof msg) n += m;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
}

#define FAIL(...) check_fail(__FILE__, __LINE__, __VA_ARGS__)

/* The format and its arguments describe where the check stands (index, dtype ...). */
#define CHECK(cond, ...) ((cond) ? true : (check_what(__FILE__, __LINE__, #cond, __VA_ARGS__), false))

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline void check_what(const char *file, int line, const char *text, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    check_fail(file, line, "%s: %s does not hold", what, text);
}

#define CHECK_EQ(got, want) CHECK_EQ_MSG(got, want, "%s", "")
#define CHECK_EQ_MSG(got, want, ...)                                                            \
    check_eq(__FILE__, __LINE__, #got, (int64_t)(got), (int64_t)(want), __VA_ARGS__)

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static inline bool check_eq(const char *file, int line, const char *text, int64_t got,
                            int64_t want, const char *fmt, ...)
{
    if (got == want) return true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    check_fail(file, line, "%s%s%s = %lld (0x%llx), want %lld (0x%llx)", what, what[0] ? ": " : "",
               text, (long long)got, (unsigned long long)got, (long long)want,
               (unsigned long long)want);
    return false;
}

#define CHECK_STR(got, want) check_str(__FILE__, __LINE__, #got, (got), (want))

static inline bool check_str(const char *file, int line, const char *text, const char *got,
                             const char *want)
{
    if (got != NULL && want != NULL && strcmp(got, want) == 0) return true;
    check_fail(file, line, "%s = \"%s\", want \"%s\"", text, got ? got : "(NULL)",
               want ? want : "(NULL)");
    return false;
}

#ifdef NCCL_H_
#define CHECK_RES(expr, want) check_res(__FILE__, __LINE__, #expr, (expr), (want))

static inline bool check_res(const char *file, int line, const char *text, ncclResult_t got,
                             ncclResult_t want)
{
    if (got == want) return true;
    check_fail(file, line, "%s\n    got %d (%s), want %d (%s); last error: \"%s\"", text, (int)got,
               ncclGetErrorString(got), (int)want, ncclGetErrorString(want),
               ncclGetLastError(NULL));
    return false;
}

#define CHECK_FAILS(expr) check_fails(__FILE__, __LINE__, #expr, (expr))

static inline bool check_fails(const char *file, int line, const char *text, ncclResult_t got)
{
    if (got != ncclSuccess && got != ncclInProgress) return true;
    check_fail(file, line, "%s\n    got %d (%s), want an error", text, (int)got,
               ncclGetErrorString(got));
    return false;
}

#define CHECK_ERR(expr, want, needle)                                                           \
    check_err(__FILE__, __LINE__, #expr, (expr), (want), (needle))

static inline bool check_err(const char *file, int line, const char *text, ncclResult_t got,
                             ncclResult_t want, const char *needle)
{
    if (!check_res(file, line, text, got, want)) return false;
    const char *last = ncclGetLastError(NULL);
    if (last != NULL && strstr(last, needle) != NULL) return true;
    check_fail(file, line, "%s\n    last error \"%s\" does not mention \"%s\"", text,
               last ? last : "(NULL)", needle);
    return false;
}
#endif

/* A call that must succeed, in programs built from the library's sources rather than against
 * libtutti (the bootstrap tests): the reason comes from tt_error_last (util/err.h, included
 * before this file). */
#ifdef TT_UTIL_ERR_H
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        ncclResult_t res_ = (expr);                                                             \
        if (res_ != ncclSuccess)                                                                \
            FAIL("%s: got %d (%s), want ncclSuccess", #expr, (int)res_, tt_error_last());       \
    } while (0)
#endif

#endif
