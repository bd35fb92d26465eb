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
#include "actors/persister.h"
#include "actors/supervisor/sv_impl.h"
#include "codec/errors.h"
#include "codec/mp.h"

void
sv_reply_err(kn_actor *self, uint64_t corr, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kn_reply_verror(kn_actor_kernel(self), corr, status, fmt, ap);
	va_end(ap);
}

/* A reply held until the store has synced what came before it. */
typedef struct held {
	uint64_t corr;   /* the API ask */
	size_t   len;    /* bytes of the reply */
	char     data[]; /* the reply */
} held;

static void
on_synced(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	held *h = arg;

	if (status != 0) {
		/* the store reports its own failure; the writes stay queued */
		KN_DEBUG("supervisor",
		         "reply sent before the store synced: %s",
		         codec_strerror(status));
	}
	kn_reply_corr(kn_actor_kernel(self), h->corr, 0, h->data, h->len);
	free(h);
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
	held *h;

	if (sv->a.persister != NULL &&
	    (h = malloc(sizeof(*h) + len)) != NULL) {
		h->corr = corr;
		h->len  = len;
		memcpy(h->data, data, len);
		if (kn_ask_async(self, sv->a.persister, MSG_PS_SYNC, "\x80", 1,
		                 SV_SYNC_MS, on_synced, h) == 0) {
			return;
		}
		free(h);
	}
	kn_reply_corr(kn_actor_kernel(self), corr, 0, data, len);
}

/* Answers {key: val}: through the store's sync when sv is not NULL. */
void
sv_reply_kv(kn_actor *self, sv_self *sv, uint64_t corr, const char *key,
            const char *val)
{
	mp_w w;

	mp_w_init(&w);
	mp_map(&w, 1);
	mp_kv_str(&w, key, val);
	if (sv != NULL) {
		sv_reply_stored(self, sv, corr, w.sb.data, w.sb.size);
	} else {
		kn_reply_corr(kn_actor_kernel(self), corr, 0, w.sb.data,
		              w.sb.size);
	}
	mp_w_fini(&w);
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
	}
	return (x);
}

void
sv_actx_free(actx *x)
{
	json_decref(x->was);
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

	if (e != NULL) {
		sv_schedule(self, x->sv, e);
	}
	if (status == 0 && x->update) {
		sv_reply_stored(self, x->sv, x->corr, data, len);
	} else {
		kn_reply_corr(kn_actor_kernel(self), x->corr, status, data,
		              len);
	}
	sv_actx_free(x);
}

static void
on_lifecycle(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	static const uint32_t to[] = {
	        [MSG_SV_DISABLE]   = MSG_CL_DISABLE,
	        [MSG_SV_ENABLE]    = MSG_CL_ENABLE,
	        [MSG_SV_RECONNECT] = MSG_CL_RECONNECT,
	        [MSG_SV_UPDATE]    = MSG_CL_UPDATE,
	        [MSG_SV_REFRESH]   = MSG_CL_CHECK,
	};
	uint64_t corr = kn_defer(msg);
	mp_r     r;
	char    *who, *patch;
	entry   *e;
	actx    *x;
	mp_w     w;
	int      rv;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	who   = mp_dup_str(mp_get(&r, "client"));
	patch = mp_dup_str(mp_get(&r, "patch"));
	mp_r_close(&r);
	e = who != NULL ? sv_find(sv, who) : NULL;
	if (e == NULL) {
		sv_reply_err(self, corr, MK_ENOENT, "no MCP client %.200s",
		             who ? who : "(none given)");
		free(who);
		free(patch);
		return;
	}
	free(who);
	if (msg->env.type == MSG_SV_REMOVE) {
		KN_INFO("supervisor", "removing MCP client %s", e->name);
		sv_persist_del(self, sv, e->id);
		sv_drop(self, sv, e);
		sv_reply_stored(self, sv, corr, "\x80", 1);
		free(patch);
		return;
	}
	if ((x = sv_actx_new(sv, e->id, corr)) == NULL) {
		free(patch);
		sv_reply_err(self, corr, MK_ENOMEM, "out of memory");
		return;
	}
	x->update = msg->env.type == MSG_SV_UPDATE;
	mp_w_init(&w);
	mp_map(&w, patch != NULL ? 1 : 0);
	if (patch != NULL) {
		mp_kv_str(&w, "patch", patch);
	}
	free(patch);
	rv = kn_ask_async(self, e->actor, to[msg->env.type], w.sb.data,
	                  w.sb.size, SV_ASK_MS, on_forwarded, x);
	mp_w_fini(&w);
	if (rv != 0) {
		sv_reply_err(self, corr, rv, "cannot reach MCP client %s",
		             e->name);
		sv_actx_free(x);
	}
}

/* ---- the list view ---------------------------------------------------- */

static void
on_list(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	char         err[96];
	uint64_t     corr = kn_defer(msg);
	mp_r         r;
	char        *ftext, *out;
	json_t      *res;
	sv_list_spec spec;
	int          rv;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	ftext = mp_dup_str(mp_get(&r, "filter"));
	mp_r_close(&r);
	rv = sv_list_spec_parse(ftext, &spec, err, sizeof(err));
	free(ftext);
	if (rv != 0) {
		sv_reply_err(self, corr, rv, "%s", err);
		return;
	}
	res = sv_list_page(sv->all, sv->n, &spec);
	out = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
	if (out != NULL) {
		sv_reply_kv(self, NULL, corr, "json", out);
	} else {
		sv_reply_err(self, corr, MK_ENOMEM, "out of memory");
	}
	free(out);
	json_decref(res);
	json_decref(spec.filter);
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

	/* clients stop newest first, as the kernel would */
	while (sv->n != 0) {
		sv_drop(self, sv, sv->all[sv->n - 1]);
	}
	KN_DEBUG("supervisor", "stopping after %llu pings",
	         (unsigned long long)sv->pings);
	json_decref(sv->file);
	strmap_fini(&sv->idx[BY_ID]);
	strmap_fini(&sv->idx[BY_NAME]);
	free(sv->all);
	free(sv);
}

static const struct {
	const char *name;
	size_t      off;
} stat_fields[] = {
        {"actors", offsetof(mk_stats, actors)},
        {"messages", offsetof(mk_stats, messages)},
        {"asks", offsetof(mk_stats, asks)},
        {"late_replies", offsetof(mk_stats, late_replies)},
        {"expired", offsetof(mk_stats, expired)},
        {"handler_errors", offsetof(mk_stats, handler_errors)},
        {"ticks", offsetof(mk_stats, ticks)},
        {"tick_late_p50_us", offsetof(mk_stats, tick_late_p50_us)},
        {"tick_late_p99_us", offsetof(mk_stats, tick_late_p99_us)},
};
#define NSTATS (sizeof(stat_fields) / sizeof(stat_fields[0]))

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
on_stats(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	mp_w     w;
	mk_stats st;
	int      rv;

	kn_kernel_stats(kn_actor_kernel(self), &st);
	st.ticks            = sv->ticks;
	st.tick_late_p50_us = sv->ticks ? quantile(sv, 0.5) : 0;
	st.tick_late_p99_us = sv->ticks ? quantile(sv, 0.99) : 0;
	mp_w_init(&w);
	mp_map(&w, NSTATS);
	for (size_t i = 0; i < NSTATS; i++) {
		mp_kv_int(&w, stat_fields[i].name,
		          (int64_t) *
		                  (uint64_t *)((char *)&st +
		                               stat_fields[i].off));
	}
	rv = kn_reply(self, msg, 0, w.sb.data, w.sb.size);
	mp_w_fini(&w);
	return (rv);
}

static int
sv_handle(kn_actor *self, void *state, kn_msg *msg)
{
	sv_self *sv = state;

	switch (msg->env.type) {
	case MSG_PING:
		sv->pings++;
		return (kn_reply(self, msg, 0, msg->env.payload,
		                 msg->env.payload_len));
	case MSG_STATS:
		return (on_stats(self, sv, msg));
	case MSG_SV_ADD:
		sv_on_add(self, sv, msg);
		return (0);
	case MSG_SV_LOAD:
		sv_on_load(self, sv, msg);
		return (0);
	case MSG_SV_RELOAD:
		sv_on_reload(self, sv, msg);
		return (0);
	case MSG_SV_REMOVE:
	case MSG_SV_DISABLE:
	case MSG_SV_ENABLE:
	case MSG_SV_RECONNECT:
	case MSG_SV_UPDATE:
	case MSG_SV_REFRESH:
		on_lifecycle(self, sv, msg);
		return (0);
	case MSG_SV_LIST:
		on_list(self, sv, msg);
		return (0);
	case MSG_SV_VIEW:
		sv_on_view(sv, self, msg);
		return (0);
	case MSG_SV_SETTINGS:
		sv_on_settings(self, sv, msg);
		return (0);
	default:
		assert(!"supervisor: unexpected message");
		return (MK_EINTERNAL);
	}
}

const kn_actor_ops supervisor_ops = {
        .init   = sv_init,
        .handle = sv_handle,
        .fini   = sv_fini,
};

int
supervisor_stats_decode(const void *buf, size_t len, mk_stats *out)
{
	mp_r r;
	int  rv;

	memset(out, 0, sizeof(*out));
	if ((rv = mp_r_open(&r, buf, len)) == 0) {
		for (size_t j = 0; j < NSTATS; j++) {
			*(uint64_t *)((char *)out + stat_fields[j].off) =
			        (uint64_t)mp_int(
			                mp_get(&r, stat_fields[j].name), 0);
		}
	}
	mp_r_close(&r);
	return (rv);
}
