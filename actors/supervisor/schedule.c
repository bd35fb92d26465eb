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
	switch (e->state) {
	case CS_HEALTHY:
		ms = e->sync_ms;
		break;
	case CS_UNSTABLE:
		ms = sv->a.unstable_ms;
		break;
	case CS_REAUTH:
	case CS_PENDING:
	case CS_DISABLED:
	case CS_COUNT:
	default:
		return; /* quiet */
	}
	/* +-10% jitter */
	sv->rnd   = sv->rnd * 1103515245u + 12345u;
	ms        = ms * 9 / 10 + (int64_t)((sv->rnd >> 8) % (ms / 5 + 1));
	e->due_ns = kn_now_ns() + ms * KN_NS_PER_MS;
	kn_rfc3339_in(e->due, sizeof(e->due), ms);
	e->tick = kn_timer_add(self, ms, on_tick, e);
}

void
sv_checked(entry *e, const void *data, size_t len)
{
	cl_state_msg m;

	if (cl_state_msg_unpack(data, len, &m) == 0) {
		assert(m.state >= 0 && m.state < CS_COUNT);
		e->state = (cl_state)m.state;
		if (m.metrics != NULL) {
			free(e->metrics); /* the check's counters */
			e->metrics = m.metrics;
			m.metrics  = NULL;
		}
		cl_state_msg_clear(&m);
	}
}

static void
on_checked(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	actx    *x  = arg;
	sv_self *sv = x->sv;
	entry   *e  = sv_find(sv, x->id);

	if (e != NULL) {
		e->checking = false;
		if (status == 0) {
			sv_checked(e, data, len);
		}
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
	if (kn_ask_async(self, e->actor, MSG_CL_CHECK, CODEC_EMPTY,
	                 CODEC_EMPTY_LEN, SV_ASK_MS, on_checked, x) != 0) {
		e->checking = false;
		sv_actx_free(x);
	}
}
