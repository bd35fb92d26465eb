/*
 * clock.h - the kernel's two clocks.
 */
#ifndef KN_CLOCK_H
#define KN_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define KN_NS_PER_MS 1000000LL
#define KN_NS_PER_S  1000000000LL

/* kn_now_ns returns CLOCK_MONOTONIC in nanoseconds.  Never blocks. */
static inline int64_t
kn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * KN_NS_PER_S + ts.tv_nsec);
}

/* kn_deadline_ns turns a relative timeout in ms into a monotonic deadline. */
static inline int64_t
kn_deadline_ns(int timeout_ms)
{
	return (kn_now_ns() + (int64_t)timeout_ms * KN_NS_PER_MS);
}

/*
 * kn_rfc3339 writes the wall-clock time as RFC 3339 UTC with milliseconds
 * ("2026-09-03T10:41:12.345Z") into buf (at least 25 bytes).  Returns buf.
 */
char *kn_rfc3339(char *buf, size_t len);

#endif /* KN_CLOCK_H */
