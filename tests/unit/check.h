/* The smallest test harness: CHECK records a failure and goes on; main
 * returns check_report(), which prints the counts and fails the ctest. */
#ifndef FOLIO_TEST_CHECK_H
#define FOLIO_TEST_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (cond) {                                                                       \
            check_passed++;                                                               \
        } else {                                                                          \
            check_failed++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                                 \
    } while (0)

static inline int check_report(void)
{
    printf("%d checks passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
