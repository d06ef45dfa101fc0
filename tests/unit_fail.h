/* Failure counting for the pure schedule tests (unit_ring, unit_tree): FAIL records a failure
 * and prints the first 20, so that one broken schedule does not bury the report. */
#ifndef TT_TESTS_UNIT_FAIL_H
#define TT_TESTS_UNIT_FAIL_H

#include <stdio.h>

static int failures;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        if (failures++ < 20) {                                                                  \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
        }                                                                                       \
    } while (0)

#endif
