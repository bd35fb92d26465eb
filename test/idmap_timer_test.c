/*
 * idmap_timer_test.c - the kernel's id map and timer heap, checked against
 * simple reference models.
 */
#include <stdint.h>

#include "actors/kernel/timer.h"
#include "codec/idmap.h"
#include "mcpkeep.h"
#include "testutil.h"

#define N 5000

static void
idmap_model(void)
{
	static void *model[N + 1];
	idmap        m    = {0};
	uint32_t     seed = 7;
	size_t       live = 0;

	for (int step = 0; step < 200000; step++) {
		uint64_t id;
		seed = seed * 1664525u + 1013904223u;
		id   = 1 + (seed >> 8) % N;
		if ((seed & 3) != 0 && model[id] == NULL) {
			CHECK_EQ(idmap_put(&m, id, (void *)(uintptr_t)id), 0);
			model[id] = (void *)(uintptr_t)id;
			live++;
		} else {
			CHECK(idmap_del(&m, id) == model[id]);
			if (model[id] != NULL) {
				live--;
			}
			model[id] = NULL;
		}
		CHECK_EQ(m.count, live);
		CHECK(idmap_get(&m, id) == model[id]);
	}
	for (uint64_t id = 1; id <= N; id++) {
		CHECK(idmap_get(&m, id) == model[id]);
	}
	CHECK(idmap_get(&m, 0) == NULL);
	while (m.count != 0) {
		uint64_t id;
		void    *v = idmap_pop(&m, &id);
		CHECK(v == model[id] && v != NULL);
		model[id] = NULL;
	}
	CHECK(idmap_pop(&m, NULL) == NULL);
	idmap_fini(&m);
}

typedef struct fired {
	int64_t when[N];
	int     order[N];
	int     n;
} fired;

static fired log_;

static void
on_fire(struct kn_actor *ctx, void *arg)
{
	(void)ctx;
	log_.order[log_.n++] = (int)(intptr_t)arg;
}

static void
timer_order_and_cancel(void)
{
	kn_timers t = {0};
	uint64_t  ids[N];
	uint32_t  seed         = 99;
	int       cancelled[N] = {0};

	for (int i = 0; i < N; i++) {
		seed         = seed * 1664525u + 1013904223u;
		log_.when[i] = (int64_t)(seed >> 20); /* many ties */
		ids[i]       = kn_timers_add(&t, log_.when[i], on_fire,
		                             (void *)(intptr_t)i);
		CHECK(ids[i] != 0);
	}
	for (int i = 0; i < N; i += 3) {
		CHECK_EQ(kn_timers_cancel(&t, ids[i]), 0);
		CHECK_EQ(kn_timers_cancel(&t, ids[i]), MK_ENOENT);
		cancelled[i] = 1;
	}
	CHECK_EQ(kn_timers_run(&t, -1, NULL), 0);
	kn_timers_run(&t, INT64_MAX, NULL);
	CHECK_EQ(log_.n, N - (N + 2) / 3);
	for (int i = 1; i < log_.n; i++) {
		int a = log_.order[i - 1], b = log_.order[i];
		/* deadline order; ties in the order added */
		CHECK(log_.when[a] < log_.when[b] ||
		      (log_.when[a] == log_.when[b] && a < b));
	}
	for (int i = 0; i < log_.n; i++) {
		CHECK(!cancelled[log_.order[i]]);
	}
	CHECK_EQ(kn_timers_next(&t), -1);
	/* discarded timers are freed */
	kn_timers_add(&t, 5, on_fire, NULL);
	CHECK_EQ(kn_timers_next(&t), 5);
	kn_timers_fini(&t);
}

int
main(void)
{
	RUN(idmap_model);
	RUN(timer_order_and_cancel);
	return (0);
}
