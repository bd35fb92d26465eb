/*
 * timer.c - binary-heap timers (see timer.h).
 */
#include "actors/kernel/timer.h"

#include <stdlib.h>

#include "mcpkeep.h"

struct kn_timer {
	int64_t     when; /* deadline, monotonic ns */
	uint64_t    id;   /* also the tie-breaker: ids increase */
	size_t      idx;  /* position in the heap */
	kn_timer_fn fn;   /* callback */
	void       *arg;  /* callback argument */
};

static int
before(const kn_timer *a, const kn_timer *b)
{
	return (a->when < b->when || (a->when == b->when && a->id < b->id));
}

static void
place(kn_timers *t, size_t i, kn_timer *tm)
{
	t->heap[i] = tm;
	tm->idx    = i;
}

static void
sift_up(kn_timers *t, size_t i)
{
	kn_timer *tm = t->heap[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(tm, t->heap[p])) {
			break;
		}
		place(t, i, t->heap[p]);
		i = p;
	}
	place(t, i, tm);
}

static void
sift_down(kn_timers *t, size_t i)
{
	kn_timer *tm = t->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= t->len) {
			break;
		}
		if (c + 1 < t->len && before(t->heap[c + 1], t->heap[c])) {
			c++;
		}
		if (!before(t->heap[c], tm)) {
			break;
		}
		place(t, i, t->heap[c]);
		i = c;
	}
	place(t, i, tm);
}

/* Takes tm out of the heap (not out of byid). */
static void
heap_remove(kn_timers *t, kn_timer *tm)
{
	size_t    i    = tm->idx;
	kn_timer *last = t->heap[--t->len];

	if (i == t->len) {
		return;
	}
	place(t, i, last);
	if (i > 0 && before(last, t->heap[(i - 1) / 2])) {
		sift_up(t, i);
	} else {
		sift_down(t, i);
	}
}

uint64_t
kn_timers_add(kn_timers *t, int64_t when_ns, kn_timer_fn fn, void *arg)
{
	kn_timer *tm;

	if (t->len == t->cap) {
		size_t     ncap = t->cap ? t->cap * 2 : 16;
		kn_timer **nh   = realloc(t->heap, ncap * sizeof(*nh));
		if (nh == NULL) {
			return (0);
		}
		t->heap = nh;
		t->cap  = ncap;
	}
	if ((tm = malloc(sizeof(*tm))) == NULL) {
		return (0);
	}
	tm->when = when_ns;
	tm->id   = ++t->next_id;
	tm->fn   = fn;
	tm->arg  = arg;
	if (idmap_put(&t->byid, tm->id, tm) != 0) {
		free(tm);
		return (0);
	}
	t->heap[t->len] = tm;
	tm->idx         = t->len++;
	sift_up(t, tm->idx);
	return (tm->id);
}

int
kn_timers_cancel(kn_timers *t, uint64_t id)
{
	kn_timer *tm = idmap_del(&t->byid, id);

	if (tm == NULL) {
		return (MK_ENOENT);
	}
	heap_remove(t, tm);
	free(tm);
	return (0);
}

int64_t
kn_timers_next(const kn_timers *t)
{
	return (t->len ? t->heap[0]->when : -1);
}

unsigned
kn_timers_run(kn_timers *t, int64_t now_ns, struct kn_actor *ctx)
{
	unsigned n = 0;

	while (t->len != 0 && t->heap[0]->when <= now_ns) {
		kn_timer   *tm  = t->heap[0];
		kn_timer_fn fn  = tm->fn;
		void       *arg = tm->arg;

		heap_remove(t, tm);
		idmap_del(&t->byid, tm->id);
		free(tm);
		fn(ctx, arg);
		n++;
	}
	return (n);
}

void
kn_timers_fini(kn_timers *t)
{
	for (size_t i = 0; i < t->len; i++) {
		free(t->heap[i]);
	}
	free(t->heap);
	idmap_fini(&t->byid);
	t->heap = NULL;
	t->len  = 0;
	t->cap  = 0;
}
