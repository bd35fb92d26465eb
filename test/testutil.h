/*
 * testutil.h - the few macros the tests share.  A failed check prints its
 * place and expression and exits non-zero, which meson reports as FAIL.
 */
#ifndef TEST_TESTUTIL_H
#define TEST_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CLOCK_MONOTONIC in ms, for deadlines and measured windows. */
static inline int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

#define CHECK(cond)                                                           \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: check failed: %s\n",          \
			        __FILE__, __LINE__, #cond);                   \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define CHECK_EQ(a, b)                                                        \
	do {                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		if (a_ != b_) {                                               \
			fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n",    \
			        __FILE__, __LINE__, #a, #b, a_, b_);          \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define RUN(fn)                                                               \
	do {                                                                  \
		fprintf(stderr, "-- %s\n", #fn);                              \
		fn();                                                         \
	} while (0)

/* In main(argc, argv): runs fn, or only the test named by argv[1]. */
#define RUN_IF(fn)                                                            \
	do {                                                                  \
		if (argc < 2 || strcmp(argv[1], #fn) == 0) {                  \
			RUN(fn);                                              \
		}                                                             \
	} while (0)

#endif /* TEST_TESTUTIL_H */
