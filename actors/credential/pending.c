/*
 * pending.c - the callers' pending flows of each client: counted, bounded,
 * and swept at expiry.
 *
 * Flows wait for a browser (OAuth) or a caller's header values; anyone who
 * can make a call can start one, so each client holds at most
 * CR_USER_FLOWS_MAX callers' flows of each kind, each requester (a virtual
 * key whose trusted headers name the callers) at most CR_BY_FLOWS_MAX, so
 * one key cannot take a client's every slot, and every flow is dropped
 * (memory and store) when it expires: one timer at the soonest
 * expiry, and a sweep before each new caller's flow.  Both queues are in
 * expiry order (every flow lives CR_FLOW_TTL_S; restored ones are sorted),
 * so a sweep looks at the expired ones only.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"

typedef struct fcount {
	strmap_ent ent;  /* key: client id or requester */
	char      *id;   /* owns ent.key */
	unsigned   n[2]; /* callers' flows: OAuth, header */
} fcount;

static void
count(strmap *m, const char *id, bool header, int delta)
{
	fcount *f = (fcount *)strmap_get(m, id);

	if (f == NULL && delta > 0) {
		if ((f = calloc(1, sizeof(*f))) == NULL ||
		    (f->id = strdup(id)) == NULL) {
			free(f);
			return; /* uncounted: the bound is a little late */
		}
		f->ent.key = f->id;
		(void)strmap_put(m, &f->ent);
	}
	if (f == NULL) {
		return;
	}
	f->n[header] = delta < 0 && f->n[header] < (unsigned)-delta
	        ? 0
	        : f->n[header] + (unsigned)delta;
	if (f->n[0] == 0 && f->n[1] == 0) {
		strmap_del(m, &f->ent);
		free(f->id);
		free(f);
	}
}

void
cr_flow_count(cr_self *cr, const char *client, const char *by, bool header,
              int delta)
{
	count(&cr->pending, client, header, delta);
	if (by != NULL) {
		count(&cr->pending_by, by, header, delta);
	}
}

static unsigned
counted(strmap *m, const char *id, bool header)
{
	fcount *f = id != NULL ? (fcount *)strmap_get(m, id) : NULL;

	return (f != NULL ? f->n[header] : 0);
}

static void
sweep_tick(kn_actor *self, void *arg)
{
	cr_self *cr = arg;

	cr->sweep = 0;
	cr_sweep_arm(cr, CR_SWEEP_BATCH);
}

void
cr_sweep_arm(cr_self *cr, int max)
{
	int64_t a = cr_flows_sweep(cr, &max), b = cr_hflows_sweep(cr, &max);
	int64_t next = a == 0 ? b : b == 0 ? a : a < b ? a : b;
	int64_t at   = next * 1000; /* time() reaches next from here on */

	if (next == 0 || (cr->sweep != 0 && cr->sweep_at <= at)) {
		return;
	}
	if (cr->sweep != 0) {
		kn_timer_cancel(cr->self, cr->sweep);
	}
	int64_t ms   = at - cr_now_ms();
	cr->sweep    = kn_timer_add(cr->self, ms > 0 ? ms : 1, sweep_tick, cr);
	cr->sweep_at = at;
}

/* Whether the client or the requester by is at its bound. */
static bool
full(cr_self *cr, const cclient *c, const char *by, bool header)
{
	return (counted(&cr->pending, c->id, header) >= CR_USER_FLOWS_MAX ||
	        counted(&cr->pending_by, by, header) >= CR_BY_FLOWS_MAX);
}

int
cr_flow_room(cr_self *cr, const cclient *c, const char *by, bool header,
             uint64_t corr)
{
	cr_sweep_arm(cr, CR_SWEEP_BATCH); /* the expired make room */
	if (full(cr, c, by, header)) {
		/* at a bound: every expired one goes before a refusal */
		cr_sweep_arm(cr, INT_MAX);
	}
	if (counted(&cr->pending, c->id, header) >= CR_USER_FLOWS_MAX) {
		KN_WARN("credential",
		        "%s: %u pending authorizations: a new one is refused",
		        c->name, counted(&cr->pending, c->id, header));
		cr_reply_error(
		        cr, corr, MK_EBUSY, NULL,
		        "too many pending authorizations for MCP client \"%s\" (%d); try again later",
		        c->name, CR_USER_FLOWS_MAX);
		return (MK_EBUSY);
	}
	if (counted(&cr->pending_by, by, header) >= CR_BY_FLOWS_MAX) {
		KN_WARN("credential",
		        "%s: %u pending authorizations started by \"%s\": a new one is refused",
		        c->name, counted(&cr->pending_by, by, header), by);
		cr_reply_error(
		        cr, corr, MK_EBUSY, NULL,
		        "too many pending authorizations started by \"%s\" (%d); try again later",
		        by, CR_BY_FLOWS_MAX);
		return (MK_EBUSY);
	}
	return (0);
}

static int
by_expiry(const void *a, const void *b)
{
	json_int_t x = json_integer_value(
	        json_object_get(*(json_t *const *)a, "expires_at"));
	json_int_t y = json_integer_value(
	        json_object_get(*(json_t *const *)b, "expires_at"));

	return (x < y ? -1 : x > y);
}

void
cr_rows_by_expiry(json_t *rows)
{
	size_t   n = json_array_size(rows);
	json_t **v = n > 1 ? calloc(n, sizeof(*v)) : NULL;

	if (v == NULL) {
		return; /* none, one, or no memory: queued as they come */
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = json_incref(json_array_get(rows, i));
	}
	qsort(v, n, sizeof(*v), by_expiry);
	json_array_clear(rows);
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(rows, v[i]);
	}
	free(v);
}

static void
counts_fini(strmap *m)
{
	strmap_ent *e;
	uint64_t    id;

	while ((e = idmap_pop(&m->m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			free(((fcount *)e)->id);
			free(e);
		}
	}
	strmap_fini(m);
}

void
cr_pending_fini(cr_self *cr)
{
	counts_fini(&cr->pending);
	counts_fini(&cr->pending_by);
}
