/*
 * clock.h - the monotonic clock: the one clock of every deadline, timer
 * and latency in the tree (wall-clock time is for logs and stored
 * timestamps only).
 */
#ifndef CODEC_CLOCK_H
#define CODEC_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CODEC_NS_PER_MS 1000000LL
#define CODEC_NS_PER_S  1000000000LL

/* codec_now_ns returns CLOCK_MONOTONIC in nanoseconds.  Never blocks; any
 * thread. */
static inline int64_t
codec_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * CODEC_NS_PER_S + ts.tv_nsec);
}

#endif /* CODEC_CLOCK_H */
