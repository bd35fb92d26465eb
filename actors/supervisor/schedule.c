/*
 * schedule.c - the health-tick schedule: each client's next check, spread
 * +-10%, one check per client at a time; tick lateness counted for
 * MSG_STATS (see supervisor.h).
 */
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "actors/client/client.h"
#include "actors/kernel/clock.h"
#include "actors/supervisor/sv_impl.h"
#include "codec/mp.h"

static void on_tick(kn_actor *self, void *arg);

void
sv_schedule(kn_actor *self, sv_self *sv, entry *e)
{
	int64_t ms;

	if (e->tick != 0) {
		kn_timer_cancel(self, e->tick);
		e->tick = 0;
	}
	if (strcmp(e->state, "healthy") == 0) {
		ms = e->sync_ms;
	} else if (strcmp(e->state, "unstable") == 0) {
		ms = sv->a.unstable_ms;
	} else {
		return; /* needs_reauth, disabled, pending: quiet */
	}
	/* +-10% jitter */
	sv->rnd   = sv->rnd * 1103515245u + 12345u;
	ms        = ms * 9 / 10 + (int64_t)((sv->rnd >> 8) % (ms / 5 + 1));
	e->due_ns = kn_now_ns() + ms * KN_NS_PER_MS;
	e->tick   = kn_timer_add(self, ms, on_tick, e);
}

static void
on_checked(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	actx    *x  = arg;
	sv_self *sv = x->sv;
	entry   *e  = sv_find(sv, x->id);
	mp_r     r;

	if (e != NULL) {
		e->checking = false;
		if (mp_r_open(&r, data, len) == 0 && status == 0) {
			const msgpack_object *st = mp_get(&r, "state");
			if (st != NULL && st->type == MSGPACK_OBJECT_STR) {
				snprintf(e->state, sizeof(e->state), "%.*s",
				         (int)st->via.str.size,
				         st->via.str.ptr);
			}
		}
		mp_r_close(&r);
		sv_schedule(self, sv, e);
	}
	sv_actx_free(x);
}

static void
on_tick(kn_actor *self, void *arg)
{
	entry *e = arg;
	actx  *x;

	int64_t late_us = (kn_now_ns() - e->due_ns) / 1000;
	int     b       = 0;

	while (b < 39 && late_us >= (1LL << b)) {
		b++;
	}
	e->sv->late[b]++;
	e->sv->ticks++;
	e->tick = 0;
	if (e->checking || (x = sv_actx_new(e->sv, e->id, 0)) == NULL) {
		return;
	}
	e->checking = true;
	if (kn_ask_async(self, e->actor, MSG_CL_CHECK, "\x80", 1, SV_ASK_MS,
	                 on_checked, x) != 0) {
		e->checking = false;
		sv_actx_free(x);
	}
}
