/*
 * timer.h - one-shot timers on the monotonic clock, kept in a binary heap.
 *
 * Owned by one actor thread; not thread-safe.  Timers fire in deadline
 * order, ties in the order they were added.  A callback may add and cancel
 * timers, including itself (a no-op once it fired).
 */
#ifndef KN_TIMER_H
#define KN_TIMER_H

#include <stdint.h>

#include "codec/idmap.h"

struct kn_actor;

/* ctx is what kn_timers_run was given (the actor); arg the timer's own. */
typedef void (*kn_timer_fn)(struct kn_actor *ctx, void *arg);

typedef struct kn_timer kn_timer;

typedef struct kn_timers {
	kn_timer **heap;    /* min-heap on (when, seq) */
	size_t     len;     /* timers in the heap */
	size_t     cap;     /* allocated heap slots */
	idmap      byid;    /* id -> timer, for cancel */
	uint64_t   next_id; /* last id handed out */
} kn_timers;

/* kn_timers_add arms a timer for when_ns (CLOCK_MONOTONIC).  Returns its
 * id (never 0), or 0 when out of memory. */
uint64_t kn_timers_add(kn_timers *t, int64_t when_ns, kn_timer_fn fn,
                       void *arg);

/* kn_timers_cancel disarms a timer.  Returns 0, or MK_ENOENT when it
 * already fired or never existed. */
int kn_timers_cancel(kn_timers *t, uint64_t id);

/* kn_timers_next returns the earliest deadline, or -1 when none. */
int64_t kn_timers_next(const kn_timers *t);

/* kn_timers_run fires, in order, every timer due at now_ns.  Returns how
 * many fired. */
unsigned kn_timers_run(kn_timers *t, int64_t now_ns, struct kn_actor *ctx);

/* kn_timers_fini frees every timer without firing it. */
void kn_timers_fini(kn_timers *t);

#endif /* KN_TIMER_H */
