/* A minimal check macro for the C unit tests: prints ok/FAIL per check and counts
 * failures; a test's main() ends with CHECK_SUMMARY(). */
#ifndef LA_TESTS_CHECK_H
#define LA_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond) \
	do { \
		if (cond) { \
			printf("ok   %s\n", #cond); \
		} else { \
			printf("FAIL %s (line %d)\n", #cond, __LINE__); \
			failures++; \
		} \
	} while (0)

#define CHECK_SUMMARY() \
	(printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures), \
	 failures ? 1 : 0)

#endif
