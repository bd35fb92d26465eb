/*
 * actor.c - the supervisor actor: dispatch, replies (held until the store
 * synced), ask contexts, lifecycle ops forwarded to a client, the list
 * view's message, stats (see supervisor.h; sv_impl.h has the DESIGN).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "actors/supervisor/sv_impl.h"
#include "codec/errors.h"
#include "codec/mp.h"

/* A reply held until the store has synced what came before it. */
typedef struct held {
	sv_self  *sv;     /* the supervisor */
	uint64_t  corr;   /* the API ask */
	uint64_t  ticket; /* an API change's, 0: none */
	sv_change what;   /* the change's kind (with a ticket) */
	char     *id;     /* its client, or NULL */
	size_t    len;    /* bytes of the reply */
	char      data[]; /* the reply */
} held;

/* A refused change's answer, sent once it is undone. */
typedef struct undoing {
	uint64_t corr;   /* the API ask */
	int      status; /* the refusal */
	char    *why;    /* its text, or NULL */
	char    *name;   /* the client, or NULL */
} undoing;

/* The client went back to its config before the refused change: the
 * refusal is answered (a failed undo is logged). */
static void
on_undone(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	undoing *u   = arg;
	char    *why = status != 0 ? kn_error_text(data, len) : NULL;

	if (status != 0) {
		KN_WARN("supervisor", "MCP client %s: not undone: %s",
		        u->name != NULL ? u->name : "?",
		        why != NULL ? why : codec_strerror(status));
	}
	kn_reply_why(self, u->corr, u->status, "%s",
	             u->why != NULL ? u->why : codec_strerror(u->status));
	free(why);
	free(u->why);
	free(u->name);
	free(u);
}

/* The store refused e's API change (status, why): the runtime goes back
 * to before it (its writes are out of the store's queue), then corr is
 * answered. */
static void
undo(kn_actor *self, sv_self *sv, entry *e, sv_change what, uint64_t corr,
     int status, const char *why)
{
	cl_update_msg u = {.undo = true};
	undoing      *x;

	switch (what) {
	case SV_ADDED:
		KN_INFO("supervisor", "add of %s undone: not stored", e->name);
		sv_drop(self, sv, e);
		break;
	case SV_REMOVED:
		break; /* it stays */
	case SV_CHANGED:
		if (e->actor == NULL || (x = calloc(1, sizeof(*x))) == NULL) {
			break;
		}
		x->corr   = corr;
		x->status = status;
		x->why    = why != NULL ? strdup(why) : NULL;
		x->name   = strdup(e->name);
		if (kn_ask_async_msg(self, e->actor, MSG_CL_UPDATE,
		                     CODEC_OF(cl_update_msg, &u), SV_ASK_MS,
		                     on_undone, x) != 0) {
			on_undone(self, x, MK_ECLOSED, NULL, 0);
		}
		return;
	}
	kn_reply_why(self, corr, status, "%s",
	             why != NULL ? why : codec_strerror(status));
}

static void
on_synced(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	held      *h  = arg;
	sv_self   *sv = h->sv;
	entry     *e  = h->id != NULL ? sv_lookup(sv, BY_ID, h->id) : NULL;
	kn_kernel *k  = kn_actor_kernel(self);

	if (e != NULL) {
		e->storing = false;
	}
	if (status != 0 && h->ticket != 0) {
		/* refused: nothing of it is stored, nor will be */
		char *why = kn_error_text(data, len);
		if (e != NULL) {
			undo(self, sv, e, h->what, h->corr, status, why);
		} else {
			kn_reply_corr(k, h->corr, status, data, len);
		}
		free(why);
	} else {
		if (status != 0) {
			/* the store reports its own failure; the writes
			 * stay queued */
			KN_DEBUG("supervisor",
			         "reply sent before the store synced: %s",
			         codec_strerror(status));
		}
		if (e != NULL && h->ticket != 0 && h->what == SV_REMOVED) {
			sv_drop(self, sv, e);
		}
		kn_reply_corr(k, h->corr, 0, h->data, h->len);
	}
	free(h->id);
	free(h);
}

/* Holds the reply data for corr until the store synced ticket's writes
 * (0: every write before).  Returns 0, or an error (nothing held). */
static int
hold(kn_actor *self, sv_self *sv, uint64_t corr, const void *data, size_t len,
     uint64_t ticket, sv_change what, const char *id)
{
	ps_sync_msg m = {.ticket = (int64_t)ticket};
	held       *h;
	int         rv;

	if (sv->a.persister == NULL) {
		return (MK_ECLOSED);
	}
	if ((h = calloc(1, sizeof(*h) + len)) == NULL ||
	    (id != NULL && (h->id = strdup(id)) == NULL)) {
		free(h);
		return (MK_ENOMEM);
	}
	h->sv     = sv;
	h->corr   = corr;
	h->ticket = ticket;
	h->what   = what;
	h->len    = len;
	memcpy(h->data, data, len);
	if ((rv = kn_ask_async_msg(self, sv->a.persister, MSG_PS_SYNC,
	                           CODEC_OF(ps_sync_msg, &m), SV_SYNC_MS,
	                           on_synced, h)) != 0) {
		free(h->id);
		free(h);
	}
	return (rv);
}

/*
 * Answers a successful lifecycle ask once the writes it caused are
 * durable: the client actors and the supervisor told the persister first,
 * so its sync (after them in its inbox) covers them.  Without a store, or
 * when the sync cannot be asked, answers at once.
 */
void
sv_reply_stored(kn_actor *self, sv_self *sv, uint64_t corr, const void *data,
                size_t len)
{
	if (hold(self, sv, corr, data, len, 0, SV_CHANGED, NULL) != 0) {
		kn_reply_corr(kn_actor_kernel(self), corr, 0, data, len);
	}
}

void
sv_reply_change(kn_actor *self, sv_self *sv, uint64_t corr, const void *data,
                size_t len, uint64_t ticket, sv_change what, const char *id)
{
	entry *e = sv_lookup(sv, BY_ID, id);
	int    rv;

	if (sv->a.persister == NULL) {
		rv = 0; /* nothing to wait for */
	} else if ((rv = hold(self, sv, corr, data, len, ticket, what, id)) ==
	           0) {
		if (e != NULL) {
			e->storing = true;
		}
		return;
	}
	if (e != NULL) {
		e->storing = false;
	}
	if (rv != 0 && e != NULL) {
		undo(self, sv, e, what, corr, rv, "cannot ask the store");
		return;
	}
	if (rv != 0) {
		kn_reply_why(self, corr, rv, "cannot ask the store");
		return;
	}
	if (e != NULL && what == SV_REMOVED) {
		sv_drop(self, sv, e);
	}
	kn_reply_corr(kn_actor_kernel(self), corr, 0, data, len);
}

void
sv_reply_msg(kn_actor *self, sv_self *sv, uint64_t corr, const codec_fields *f,
             const void *m)
{
	msgpack_sbuffer b = codec_msg_packed(f, m);

	sv_reply_stored(self, sv, corr, b.data, b.size);
	codec_msg_wipe(f, &b);
}

actx *
sv_actx_new(sv_self *sv, const char *id, uint64_t corr)
{
	actx *x = calloc(1, sizeof(*x));

	if (x != NULL && (x->id = strdup(id)) == NULL) {
		free(x);
		return (NULL);
	}
	if (x != NULL) {
		x->sv   = sv;
		x->corr = corr;
		x->lane = -1;
	}
	return (x);
}

void
sv_actx_free(actx *x)
{
	json_decref(x->was);
	free(x->tools);
	free(x->id);
	free(x);
}

/* ---- lifecycle ops -------------------------------------------------------
 */

static void
on_forwarded(kn_actor *self, void *arg, int status, const void *data,
             size_t len)
{
	actx  *x = arg;
	entry *e = sv_find(x->sv, x->id);

	if (e != NULL && status == 0 && x->check) {
		sv_checked(e, data, len); /* (its counters are ours now) */
	}
	if (e != NULL) {
		sv_schedule(self, x->sv, e);
	}
	if (status == 0 && x->ticket != 0 && e != NULL) {
		sv_reply_change(self, x->sv, x->corr, data, len, x->ticket,
		                SV_CHANGED, x->id);
	} else {
		if (e != NULL) {
			e->storing = false;
		}
		kn_reply_corr(kn_actor_kernel(self), x->corr, status, data,
		              len);
	}
	sv_actx_free(x);
}

/* A lifecycle ask, forwarded to the client's actor (an update's with its
 * patch). */
static void
lifecycle(kn_actor *self, sv_self *sv, kn_msg *msg, const char *client,
          const char *patch)
{
	static const uint32_t to[] = {
	        [MSG_SV_DISABLE]   = MSG_CL_DISABLE,
	        [MSG_SV_ENABLE]    = MSG_CL_ENABLE,
	        [MSG_SV_RECONNECT] = MSG_CL_RECONNECT,
	        [MSG_SV_UPDATE]    = MSG_CL_UPDATE,
	        [MSG_SV_REFRESH]   = MSG_CL_CHECK,
	};
	uint64_t      corr = kn_defer(msg);
	cl_update_msg u    = {0};
	cl_ticket_msg t    = {0};
	bool          change;
	entry        *e;
	actx         *x;
	int           rv;

	e = client != NULL ? sv_find(sv, client) : NULL;
	if (e == NULL) {
		kn_reply_why(self, corr, MK_ENOENT, "no MCP client %.200s",
		             client ? client : "(none given)");
		return;
	}
	change = msg->env.type != MSG_SV_RECONNECT &&
	        msg->env.type != MSG_SV_REFRESH;
	if (change && e->storing) {
		kn_reply_why(
		        self, corr, MK_EBUSY,
		        "a change of MCP client %s is being stored: try again",
		        e->name);
		return;
	}
	if (msg->env.type == MSG_SV_REMOVE) {
		uint64_t ticket = ++sv->tickets;
		KN_INFO("supervisor", "removing MCP client %s", e->name);
		sv_persist_del(self, sv, e->id, ticket);
		/* dropped once the store has it: refused, it stays */
		sv_reply_change(self, sv, corr, CODEC_EMPTY, CODEC_EMPTY_LEN,
		                ticket, SV_REMOVED, e->id);
		return;
	}
	if (e->actor == NULL) {
		kn_reply_why(
		        self, corr, MK_ESTATE,
		        "MCP client %s could not be started from the store: remove it, or declare it again",
		        e->name);
		return;
	}
	if ((x = sv_actx_new(sv, e->id, corr)) == NULL) {
		kn_reply_why(self, corr, MK_ENOMEM, "out of memory");
		return;
	}
	x->check = msg->env.type == MSG_SV_REFRESH;
	if (change) {
		/* its config write is part of its answer */
		x->ticket  = ++sv->tickets;
		e->storing = true;
	}
	u.patch  = (char *)patch; /* an update's (only read) */
	u.ticket = t.ticket = (int64_t)x->ticket;
	rv                  = kn_ask_async_msg(
	                         self, e->actor, to[msg->env.type],
                msg->env.type == MSG_SV_UPDATE ? &cl_update_msg_fields
	                                 : change ? &cl_ticket_msg_fields
	                                          : &codec_no_fields,
                msg->env.type == MSG_SV_UPDATE ? (const void *)&u
	                                                        : (const void *)&t,
	                         SV_ASK_MS, on_forwarded, x);
	if (rv != 0) {
		kn_reply_why(self, corr, rv, "cannot reach MCP client %s",
		             e->name);
		e->storing = false;
		sv_actx_free(x);
	}
}

static int
on_lifecycle(kn_actor *self, sv_self *sv, kn_msg *msg, sv_client_msg *m)
{
	lifecycle(self, sv, msg, m->client, NULL);
	return (0);
}

static int
on_update(kn_actor *self, sv_self *sv, kn_msg *msg, sv_update_msg *m)
{
	lifecycle(self, sv, msg, m->client, m->patch);
	return (0);
}

/* ---- the list view ---------------------------------------------------- */

static int
on_list(kn_actor *self, sv_self *sv, kn_msg *msg, sv_list_msg *m)
{
	char         err[96];
	uint64_t     corr = kn_defer(msg);
	sv_json_msg  out;
	json_t      *res;
	sv_list_spec spec;
	int          rv;

	rv = sv_list_spec_parse(m->filter, &spec, err, sizeof(err));
	if (rv != 0) {
		kn_reply_why(self, corr, rv, "%s", err);
		return (0);
	}
	spec.node = sv->a.node_id;
	res       = sv_list_page(sv->all, sv->n, &spec);
	out.json  = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
	if (out.json != NULL) {
		kn_reply_msg(kn_actor_kernel(self), corr, 0,
		             CODEC_OF(sv_json_msg, &out));
	} else {
		kn_reply_why(self, corr, MK_ENOMEM, "out of memory");
	}
	sv_json_msg_clear(&out);
	json_decref(res);
	json_decref(spec.filter);
	return (0);
}
/* ---- the actor ---------------------------------------------------------- */

static int
sv_init(kn_actor *self, void *arg, void **statep)
{
	sv_self *sv = calloc(1, sizeof(*sv));

	if (sv == NULL) {
		return (MK_ENOMEM);
	}
	sv->a   = *(const sv_args *)arg;
	sv->rnd = (uint32_t)(uintptr_t)sv;
	*statep = sv;
	return (0);
}

static void
sv_fini(kn_actor *self, void *state)
{
	sv_self *sv = state;

	/* clients stop newest first, as the kernel would, SV_STOP_WAVE at a
	 * time: each wave is asked at once and then joined, so that their
	 * shutdowns overlap without thousands contending at once */
	while (sv->n != 0) {
		size_t lo = sv->n > SV_STOP_WAVE ? sv->n - SV_STOP_WAVE : 0;

		for (size_t i = lo; i < sv->n; i++) {
			if (sv->all[i]->actor != NULL) {
				kn_stop_begin(sv->all[i]->actor);
			}
		}
		while (sv->n > lo) {
			sv_drop(self, sv, sv->all[sv->n - 1]);
		}
	}
	KN_DEBUG("supervisor", "stopping after %llu pings",
	         (unsigned long long)sv->pings);
	json_decref(sv->file);
	json_decref(sv->unknown);
	sv_peers_msg_clear(&sv->peers);
	strmap_fini(&sv->idx[BY_ID]);
	strmap_fini(&sv->idx[BY_NAME]);
	free(sv->all);
	free(sv);
}

/* The upper bound of the bucket holding the q-th quantile, in us. */
static uint64_t
quantile(const sv_self *sv, double q)
{
	uint64_t seen = 0, want = (uint64_t)((double)sv->ticks * q);

	for (int b = 0; b < 40; b++) {
		seen += sv->late[b];
		if (seen > want) {
			return (1ULL << b);
		}
	}
	return (0);
}

static int
on_stats(kn_actor *self, sv_self *sv, kn_msg *msg, codec_no *none)
{
	mk_stats     st;
	sv_stats_msg m;

	kn_kernel_stats(kn_actor_kernel(self), &st);
	m = (sv_stats_msg) {
	        .actors           = (int64_t)st.actors,
	        .messages         = (int64_t)st.messages,
	        .asks             = (int64_t)st.asks,
	        .late_replies     = (int64_t)st.late_replies,
	        .expired          = (int64_t)st.expired,
	        .handler_errors   = (int64_t)st.handler_errors,
	        .ticks            = (int64_t)sv->ticks,
	        .tick_late_p50_us = sv->ticks ? (int64_t)quantile(sv, 0.5) : 0,
	        .tick_late_p99_us =
	                sv->ticks ? (int64_t)quantile(sv, 0.99) : 0,
	};
	return (kn_reply_msg(kn_actor_kernel(self), kn_defer(msg), 0,
	                     CODEC_OF(sv_stats_msg, &m)));
}

/* Every running client publishes its state; answered once each has been
 * told (its event follows, in its own order with its transitions). */
static int
on_snapshot(kn_actor *self, sv_self *sv, kn_msg *msg, codec_no *none)
{
	for (size_t i = 0; i < sv->n; i++) {
		if (sv->all[i]->actor != NULL &&
		    kn_tell(sv->all[i]->actor, self, MSG_CL_SNAPSHOT,
		            CODEC_EMPTY, CODEC_EMPTY_LEN) != 0) {
			KN_WARN("supervisor",
			        "MCP client %s did not take the snapshot ask",
			        sv->all[i]->name);
		}
	}
	(void)kn_reply(self, msg, 0, CODEC_EMPTY, CODEC_EMPTY_LEN);
	return (0);
}

/* A call whose outcome is unknown, into the ledger (the oldest out). */
static int
on_unknown(kn_actor *self, sv_self *sv, kn_msg *msg, sv_unknown_msg *m)
{
	json_t *e;

	e = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?}", "client",
	              m->client, "tool", m->tool, "caller", m->caller, "time",
	              m->time, "request_id", m->request_id, "error", m->error);
	if (e == NULL ||
	    (sv->unknown == NULL && (sv->unknown = json_array()) == NULL)) {
		json_decref(e);
		return (0);
	}
	json_array_append_new(sv->unknown, e);
	if (json_array_size(sv->unknown) > SV_UNKNOWN_MAX) {
		json_array_remove(sv->unknown, 0);
	}
	return (0);
}

static int
on_unknowns(kn_actor *self, sv_self *sv, kn_msg *msg, codec_no *none)
{
	sv_json_msg out = {.json = sv->unknown != NULL
	                           ? json_dumps(sv->unknown, JSON_COMPACT)
	                           : strdup("[]")};

	if (out.json == NULL) {
		kn_reply_why(self, kn_defer(msg), MK_ENOMEM, "out of memory");
		return (0);
	}
	kn_reply_msg(kn_actor_kernel(self), kn_defer(msg), 0,
	             CODEC_OF(sv_json_msg, &out));
	sv_json_msg_clear(&out);
	return (0);
}

/* The kernel's ping: the reply echoes the payload. */
static int
sv_handle(kn_actor *self, void *state, kn_msg *msg)
{
	sv_self *sv = state;

	if (msg->env.type != MSG_PING) {
		return (MK_EPROTO);
	}
	sv->pings++;
	return (kn_reply(self, msg, 0, msg->env.payload,
	                 msg->env.payload_len));
}

KN_ROUTES(sv_routes, supervisor_msgs, SV_MESSAGES);

const kn_actor_ops supervisor_ops = {
        .routes = &sv_routes,
        .init   = sv_init,
        .handle = sv_handle,
        .fini   = sv_fini,
};

int
supervisor_stats_decode(const void *buf, size_t len, mk_stats *out)
{
	sv_stats_msg m;
	int          rv;

	memset(out, 0, sizeof(*out));
	if ((rv = sv_stats_msg_unpack(buf, len, &m)) == 0) {
		out->actors           = (uint64_t)m.actors;
		out->messages         = (uint64_t)m.messages;
		out->asks             = (uint64_t)m.asks;
		out->late_replies     = (uint64_t)m.late_replies;
		out->expired          = (uint64_t)m.expired;
		out->handler_errors   = (uint64_t)m.handler_errors;
		out->ticks            = (uint64_t)m.ticks;
		out->tick_late_p50_us = (uint64_t)m.tick_late_p50_us;
		out->tick_late_p99_us = (uint64_t)m.tick_late_p99_us;
	}
	return (rv);
}
