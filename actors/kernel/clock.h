/*
 * clock.h - the kernel's two clocks: the monotonic one (codec/clock.h)
 * and the wall clock of log lines.
 */
#ifndef KN_CLOCK_H
#define KN_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "codec/clock.h"

#define KN_NS_PER_MS CODEC_NS_PER_MS
#define KN_NS_PER_S  CODEC_NS_PER_S

/* kn_now_ns is codec_now_ns: CLOCK_MONOTONIC in nanoseconds.  Never
 * blocks. */
static inline int64_t
kn_now_ns(void)
{
	return (codec_now_ns());
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
/* kn_rfc3339_in is the same for the time ms (>= 0) from now. */
char *kn_rfc3339_in(char *buf, size_t len, int64_t ms);

#endif /* KN_CLOCK_H */
