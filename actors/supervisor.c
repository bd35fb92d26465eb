/*
 * supervisor.c - the supervisor actor (see supervisor.h).
 *
 * DESIGN: one thread; its table of clients is touched only there.  API
 * threads ask it; client actors tell it their views and answer its
 * asynchronous asks (connect, check, lifecycle), so it never waits on a
 * client - except to join a client's thread on remove, which is bounded
 * by that client's own shutdown.
 */
#include "actors/supervisor.h"

#include <assert.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/client/client.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/persister.h"
#include "codec/config.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/strmap.h"

#define SV_ASK_MS    60000 /* a client's answer to a check or lifecycle op */
#define SV_SYNC_MS   10000 /* the store making a lifecycle op durable */
#define LIST_DEFAULT 25
#define LIST_MAX     100

enum { BY_ID, BY_NAME }; /* the entry indexes */

typedef struct entry {
	char           *id;        /* client_id */
	char           *name;      /* name */
	kn_actor       *actor;     /* the client actor (owner reference) */
	char           *view;      /* its latest view, JSON text */
	char            state[32]; /* its latest state (the runtime's) */
	char            shown[32]; /* the state its view shows (filters) */
	char            conn[8];   /* connection_type */
	char            auth[24];  /* auth_type */
	int64_t         sync_ms;   /* healthy interval */
	uint64_t        tick;      /* timer id, 0 none */
	int64_t         due_ns;    /* when the tick should fire */
	bool            checking;  /* a check ask is out */
	bool            connected; /* the first connect answered */
	bool            sticky;    /* its connection mode */
	bool            restored;  /* came back from the store */
	struct sv_self *sv;        /* the supervisor, for timer callbacks */
	strmap_ent      ent[2];    /* in sv->idx[BY_ID] (key id) and
	                            * sv->idx[BY_NAME] (key name) */
	size_t pos;                /* index in sv->all */
} entry;

typedef struct sv_self {
	sv_args  a;        /* settings */
	strmap   idx[2];   /* BY_ID, BY_NAME: id or name -> entry */
	entry  **all;      /* every entry */
	size_t   n;        /* entries in all */
	size_t   cap;      /* allocated all */
	uint64_t pings;    /* pings answered */
	uint64_t ticks;    /* ticks fired */
	uint64_t late[40]; /* tick lateness histogram, log2 us */
	uint32_t rnd;      /* jitter state */
	json_t  *file;     /* the clients of the config file last loaded or
	                    * reloaded, by name (copies of their objects):
	                    * a reload's diff base; NULL before any */
} sv_self;

/* An async ask's context: what to do with the answer. */
typedef struct actx {
	sv_self     *sv;     /* the supervisor */
	char        *id;     /* the client it concerns */
	uint64_t     corr;   /* the API ask to answer, or 0 */
	bool         boot;   /* MSG_CL_CONNECT at boot */
	bool         update; /* MSG_CL_UPDATE: the reply waits for the store */
	struct load *load;   /* MSG_SV_LOAD or _RELOAD in progress, or NULL */
	json_t      *was;    /* a reload's update: the base entry it replaces
	                      * (back in the base if the update fails) */
} actx;

/* A config file being booted or reloaded. */
typedef struct load {
	struct sv_self *sv;      /* the supervisor */
	uint64_t        corr;    /* the API ask */
	size_t          left;    /* connects (and updates) not yet answered */
	size_t          count;   /* clients added */
	bool            reload;  /* MSG_SV_RELOAD: the reply is its summary */
	int             updated; /* reload: clients updated in place */
	int             removed; /* reload: clients removed */
	int             failed;  /* reload: clients not applied */
} load;

static entry *
lookup(sv_self *sv, int w, const char *s)
{
	strmap_ent *se = strmap_get(&sv->idx[w], s);

	/* se is the entry's ent[w] */
	return (se != NULL ? STRMAP_OF(se - w, entry, ent) : NULL);
}

static entry *
find(sv_self *sv, const char *id_or_name)
{
	entry *e = lookup(sv, BY_ID, id_or_name);

	return (e != NULL ? e : lookup(sv, BY_NAME, id_or_name));
}

/* Adds e to index w, keyed by its id or name. */
static int
index_add(sv_self *sv, int w, entry *e)
{
	e->ent[w].key = w == BY_ID ? e->id : e->name;
	return (strmap_put(&sv->idx[w], &e->ent[w]));
}

static void
index_del(sv_self *sv, int w, entry *e)
{
	strmap_del(&sv->idx[w], &e->ent[w]);
}

static int
insert(sv_self *sv, entry *e)
{
	if (sv->n == sv->cap) {
		size_t  ncap = sv->cap ? 2 * sv->cap : 64;
		entry **na   = realloc(sv->all, ncap * sizeof(*na));
		if (na == NULL) {
			return (MK_ENOMEM);
		}
		sv->all = na;
		sv->cap = ncap;
	}
	if (index_add(sv, BY_ID, e) != 0) {
		return (MK_ENOMEM);
	}
	if (index_add(sv, BY_NAME, e) != 0) {
		index_del(sv, BY_ID, e);
		return (MK_ENOMEM);
	}
	e->pos           = sv->n;
	sv->all[sv->n++] = e;
	return (0);
}

static void
entry_free(entry *e)
{
	free(e->id);
	free(e->name);
	free(e->view);
	free(e);
}

/* Stops the client and forgets it. */
static void
drop(kn_actor *self, sv_self *sv, entry *e)
{
	if (e->tick != 0) {
		kn_timer_cancel(self, e->tick);
	}
	index_del(sv, BY_ID, e);
	index_del(sv, BY_NAME, e);
	sv->all[e->pos]      = sv->all[--sv->n];
	sv->all[e->pos]->pos = e->pos;
	kn_actor_destroy(&e->actor); /* joins its thread */
	entry_free(e);
}

static void reply_err(kn_actor *self, uint64_t corr, int status,
                      const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void
reply_err(kn_actor *self, uint64_t corr, int status, const char *fmt, ...)
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
static void
reply_stored(kn_actor *self, sv_self *sv, uint64_t corr, const void *data,
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
static void
reply_kv(kn_actor *self, sv_self *sv, uint64_t corr, const char *key,
         const char *val)
{
	mp_w w;

	mp_w_init(&w);
	mp_map(&w, 1);
	mp_kv_str(&w, key, val);
	if (sv != NULL) {
		reply_stored(self, sv, corr, w.sb.data, w.sb.size);
	} else {
		kn_reply_corr(kn_actor_kernel(self), corr, 0, w.sb.data,
		              w.sb.size);
	}
	mp_w_fini(&w);
}

static actx *
actx_new(sv_self *sv, const char *id, uint64_t corr)
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

static void
actx_free(actx *x)
{
	json_decref(x->was);
	free(x->id);
	free(x);
}

/* ---- the schedule --------------------------------------------------------
 */

static void on_tick(kn_actor *self, void *arg);

static void
schedule(kn_actor *self, sv_self *sv, entry *e)
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
	entry   *e  = find(sv, x->id);
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
		schedule(self, sv, e);
	}
	actx_free(x);
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
	if (e->checking || (x = actx_new(e->sv, e->id, 0)) == NULL) {
		return;
	}
	e->checking = true;
	if (kn_ask_async(self, e->actor, MSG_CL_CHECK, "\x80", 1, SV_ASK_MS,
	                 on_checked, x) != 0) {
		e->checking = false;
		actx_free(x);
	}
}

/* ---- add, load -------------------------------------------------------------
 */

/* The store forgets a client removed by an operator. */
static void
persist_del(kn_actor *self, sv_self *sv, const char *id)
{
	mp_w w;

	if (sv->a.persister == NULL) {
		return;
	}
	mp_w_init(&w);
	mp_map(&w, 1);
	mp_kv_str(&w, "id", id);
	if (kn_tell(sv->a.persister, self, MSG_PS_CLIENT_DEL, w.sb.data,
	            w.sb.size) != 0) {
		KN_ERROR("supervisor",
		         "MCP client %s was not removed from the "
		         "store",
		         id);
	}
	mp_w_fini(&w);
}

/* The tools an entry's view holds, as JSON text (malloc'd), or NULL. */
static char *
view_tools(const entry *e)
{
	json_t *v = e->view != NULL ? json_loads(e->view, 0, NULL) : NULL;
	json_t *t = json_object_get(v, "tools");
	char   *text =
                json_array_size(t) != 0 ? json_dumps(t, JSON_COMPACT) : NULL;

	json_decref(v);
	return (text);
}

static void
load_step(kn_actor *self, load *ld)
{
	mp_w w;

	if (--ld->left != 0) {
		return;
	}
	mp_w_init(&w);
	if (ld->reload) {
		kn_log(ld->failed != 0 ? MK_LOG_WARN : MK_LOG_INFO, "runtime",
		       "reloaded: %d added, %d updated, %d removed, %d failed",
		       (int)ld->count, ld->updated, ld->removed, ld->failed);
		mp_map(&w, 4);
		mp_kv_int(&w, "added", (int64_t)ld->count);
		mp_kv_int(&w, "updated", ld->updated);
		mp_kv_int(&w, "removed", ld->removed);
		mp_kv_int(&w, "failed", ld->failed);
	} else {
		mp_map(&w, 1);
		mp_kv_int(&w, "count", (int64_t)ld->count);
	}
	reply_stored(self, ld->sv, ld->corr, w.sb.data, w.sb.size);
	mp_w_fini(&w);
	free(ld);
}

static void
on_connected(kn_actor *self, void *arg, int status, const void *data,
             size_t len)
{
	actx    *x  = arg;
	sv_self *sv = x->sv;
	entry   *e  = find(sv, x->id);
	mp_r     r;
	char    *why = NULL;

	if (status != 0) {
		mp_r_open(&r, data, len);
		why = mp_dup_str(mp_get(&r, "error"));
		mp_r_close(&r);
	}
	if (e == NULL) {
		if (x->corr != 0) {
			reply_err(self, x->corr, MK_ECLOSED,
			          "the client was removed while connecting");
		}
	} else if (status != 0 && !x->boot && e->sticky) {
		/* a user's add of a sticky client that cannot connect: the
		 * error is returned and the client is not kept */
		KN_INFO("supervisor", "add of %s failed: %s", e->name,
		        why ? why : "?");
		if (x->corr != 0) {
			reply_err(self, x->corr, status, "%s",
			          why ? why : codec_strerror(status));
			x->corr = 0;
		}
		drop(self, sv, e);
		e = NULL;
	} else {
		e->connected = true;
		schedule(self, sv, e);

		if (x->corr != 0) {
			reply_kv(self, sv, x->corr, "id", e->id);
		}
	}
	if (x->load != NULL) {
		x->load->count += e != NULL;
		load_step(self, x->load);
	}
	free(why);
	actx_free(x);
}

/* Spawns a client actor for cfg (taken) and asks it to connect. */
static int
start_client(kn_actor *self, sv_self *sv, cfg_client *cfg, bool boot,
             bool restored, const char *tools, uint64_t corr, load *ld,
             char *err, size_t errlen)
{
	mp_w        w;
	client_args a = {
	        .cfg        = cfg,
	        .supervisor = self,
	        .stream     = sv->a.stream,
	        .node_id    = sv->a.node_id,
	        .sync_ms    = sv->a.sync_ms,
	        .exec_ms    = sv->a.exec_ms,
	        .persister  = sv->a.persister,
	        .credential = sv->a.credential,
	};
	char   name[96];
	entry *e;
	actx  *x;
	int    rv;

	if (find(sv, cfg->name) != NULL || find(sv, cfg->id) != NULL) {
		snprintf(err, errlen,
		         "an MCP client named %s (or with id %s) "
		         "already exists",
		         cfg->name, cfg->id);
		cfg_client_free(&cfg);
		return (MK_EEXIST);
	}
	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->id = strdup(cfg->id)) == NULL ||
	    (e->name = strdup(cfg->name)) == NULL) {
		if (e != NULL) {
			entry_free(e);
		}
		cfg_client_free(&cfg);
		snprintf(err, errlen, "out of memory");
		return (MK_ENOMEM);
	}
	e->sv       = sv;
	e->sticky   = cfg->sticky;
	e->restored = restored;
	e->sync_ms  = cfg->sync_ms ? cfg->sync_ms : sv->a.sync_ms;
	snprintf(e->conn, sizeof(e->conn), "%s", cfg_conn_name(cfg->conn));
	snprintf(e->auth, sizeof(e->auth), "%s", cfg_auth_name(cfg->auth));
	snprintf(e->state, sizeof(e->state), "unstable");
	snprintf(e->shown, sizeof(e->shown), "unstable");
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", cfg->name);
	if ((rv = kn_spawn(kn_actor_kernel(self), name, &client_ops, &a,
	                   &e->actor)) != 0) {
		cfg_client_free(&a.cfg); /* still ours if init did not run */
		free(a.view);
		entry_free(e);
		snprintf(err, errlen, "cannot start the client actor: %s",
		         codec_strerror(rv));
		return (rv);
	}
	e->view = a.view; /* its first, until it pushes one */
	if (a.state[0] != '\0') {
		snprintf(e->state, sizeof(e->state), "%s", a.state);
		snprintf(e->shown, sizeof(e->shown), "%s", a.state);
	}
	/* calls find the actor by name or by id */
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", e->id);
	if (strcmp(e->id, e->name) != 0 &&
	    (rv = kn_alias(e->actor, name)) != 0) {
		kn_actor_destroy(&e->actor);
		entry_free(e);
		snprintf(err, errlen, "cannot register the client id: %s",
		         codec_strerror(rv));
		return (rv);
	}
	if ((rv = insert(sv, e)) != 0 ||
	    (x = actx_new(sv, e->id, corr)) == NULL) {
		kn_actor_destroy(&e->actor);
		entry_free(e);
		snprintf(err, errlen, "out of memory");
		return (MK_ENOMEM);
	}
	x->boot = boot;
	x->load = ld;
	mp_w_init(&w);
	mp_map(&w, tools != NULL ? 3 : 2);
	mp_kv_bool(&w, "boot", boot);
	mp_kv_bool(&w, "restored", restored);
	if (tools != NULL) {
		mp_kv_str(&w, "tools", tools); /* known, e.g. from the store */
	}
	rv = kn_ask_async(self, e->actor, MSG_CL_CONNECT, w.sb.data, w.sb.size,
	                  CLIENT_CONNECT_MS + 5000, on_connected, x);
	mp_w_fini(&w);
	if (rv != 0) {
		actx_free(x);
		drop(self, sv, e);
		snprintf(err, errlen, "cannot reach the client actor: %s",
		         codec_strerror(rv));
		return (rv);
	}
	return (0);
}

static void
on_add(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	char        err[CFG_ERR_MAX];
	cfg_client *cfg;
	json_t     *o;
	mp_r        r;
	char       *text, *tools;
	uint64_t    corr = kn_defer(msg);
	int         rv;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	text  = mp_dup_str(mp_get(&r, "config"));
	tools = mp_dup_str(mp_get(&r, "tools"));
	mp_r_close(&r);
	o = text != NULL ? json_loads(text, 0, NULL) : NULL;
	free(text);
	if (o == NULL) {
		free(tools);
		reply_err(self, corr, MK_EINVAL,
		          "the client config is not JSON");
		return;
	}
	/* from the API: literal, its env. strings never looked up */
	rv = cfg_client_parse(o, json_true(), &cfg, err, sizeof(err));
	json_decref(o);
	if (rv != 0 ||
	    (rv = start_client(self, sv, cfg, false, false, tools, corr, NULL,
	                       err, sizeof(err))) != 0) {
		reply_err(self, corr, rv, "%s", err);
	}
	free(tools);
}

/* Restored clients from the persister's list: config as stored, the
 * stored id, known tools (no discovery for a per-call one). */
static void
restore(kn_actor *self, sv_self *sv, const char *text, uint64_t corr)
{
	json_t *list = json_loads(text, 0, NULL), *item;
	char    err[CFG_ERR_MAX];
	size_t  i;
	load   *ld;

	if (!json_is_array(list) || (ld = calloc(1, sizeof(*ld))) == NULL) {
		json_decref(list);
		reply_err(self, corr, MK_EINVAL,
		          "the stored client list is not "
		          "readable");
		return;
	}
	ld->corr = corr;
	ld->sv   = sv;
	ld->left = json_array_size(list) + 1; /* +1: released below */
	json_array_foreach(list, i, item)
	{
		cfg_client *c;
		json_t     *t     = json_object_get(item, "tools");
		char       *tools = json_is_array(t) ? json_dumps(t, 0) : NULL;
		const char *id =
		        json_string_value(json_object_get(item, "id"));

		if (cfg_client_parse_stored(json_object_get(item, "config"),
		                            &c, err, sizeof(err)) != 0 ||
		    id == NULL) {
			KN_WARN("supervisor", "stored client skipped: %s",
			        err);
			ld->left--;
		} else {
			free(c->id);
			c->id = strdup(id); /* the stored identity */
			if (c->id == NULL ||
			    start_client(self, sv, c, true, true, tools, 0, ld,
			                 err, sizeof(err)) != 0) {
				KN_ERROR("supervisor", "restore: %s", err);
				ld->left--;
			}
		}
		free(tools);
	}
	json_decref(list);
	load_step(self, ld);
}

/* The global settings: kept for clients added later, told to every
 * running client (each keeps its own value where it has one). */
static void
settings_apply(kn_actor *self, sv_self *sv, int64_t sync_ms, int64_t exec_ms)
{
	mp_w w;

	sv->a.sync_ms = sync_ms;
	sv->a.exec_ms = exec_ms;
	mp_w_init(&w);
	mp_map(&w, 2);
	mp_kv_int(&w, "sync_ms", sync_ms);
	mp_kv_int(&w, "exec_ms", exec_ms);
	for (size_t i = 0; i < sv->n; i++) {
		if (kn_tell(sv->all[i]->actor, self, MSG_CL_SETTINGS,
		            w.sb.data, w.sb.size) != 0) {
			KN_ERROR("supervisor",
			         "MCP client %s did not take the global "
			         "settings",
			         sv->all[i]->name);
		}
	}
	mp_w_fini(&w);
}

static void
on_settings(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	mp_r    r;
	int64_t sync_ms, exec_ms;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	sync_ms = mp_int(mp_get(&r, "sync_ms"), 0);
	exec_ms = mp_int(mp_get(&r, "exec_ms"), 0);
	mp_r_close(&r);
	if (sync_ms < 1000 || exec_ms < 1) {
		reply_err(self, kn_defer(msg), MK_EINVAL,
		          "tool_sync_interval must be >= 1s and "
		          "tool_execution_timeout positive");
		return;
	}
	settings_apply(self, sv, sync_ms, exec_ms);
	kn_reply(self, msg, 0, "\x80", 1);
}

/* The clients of f by name: copies, so that no object is shared with a
 * client actor's thread. */
static json_t *
file_clients(const cfg_file *f)
{
	json_t *by = json_object();

	for (size_t i = 0; by != NULL && i < f->nclients; i++) {
		json_object_set_new(by, f->clients[i]->name,
		                    json_deep_copy(f->clients[i]->raw));
	}
	return (by);
}

static void
on_load(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	char      err[CFG_ERR_MAX];
	cfg_file *f;
	mp_r      r;
	char     *text, *stored, **tools;
	load     *ld;
	uint64_t  corr = kn_defer(msg);
	int       rv;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	text   = mp_dup_str(mp_get(&r, "file"));
	stored = mp_dup_str(mp_get(&r, "restore"));
	mp_r_close(&r);
	if (stored != NULL) {
		restore(self, sv, stored, corr);
		free(stored);
		free(text);
		return;
	}
	if (text == NULL) {
		reply_err(self, corr, MK_EINVAL, "no config text");
		return;
	}
	rv = cfg_file_parse(text, strlen(text), &f, err, sizeof(err));
	free(text);
	if (rv != 0) {
		reply_err(self, corr, rv, "%s", err);
		return;
	}
	/* all checks before anything changes */
	for (size_t i = 0; i < f->nclients; i++) {
		entry *e = find(sv, f->clients[i]->name);
		if ((e != NULL && !e->restored) ||
		    (e == NULL && find(sv, f->clients[i]->id) != NULL)) {
			reply_err(self, corr, MK_EEXIST,
			          "client \"%s\": an MCP client with that "
			          "name or id "
			          "already exists",
			          f->clients[i]->name);
			cfg_file_free(&f);
			return;
		}
	}
	if ((ld = calloc(1, sizeof(*ld))) == NULL ||
	    (tools = calloc(f->nclients + 1, sizeof(*tools))) == NULL) {
		free(ld);
		cfg_file_free(&f);
		reply_err(self, corr, MK_ENOMEM, "out of memory");
		return;
	}
	json_decref(sv->file);
	sv->file = file_clients(f);
	settings_apply(self, sv, f->sync_ms, f->exec_ms);
	/* a declared client replaces the one restored under its name: the
	 * file's config, the stored id and known tools */
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *c = f->clients[i];
		entry      *e = find(sv, c->name);
		if (e != NULL) {
			tools[i] = view_tools(e);
			if (json_object_get(c->raw, "client_id") == NULL) {
				free(c->id);
				c->id = strdup(e->id);
			}
			drop(self, sv, e);
		}
	}
	ld->corr = corr;
	ld->sv   = sv;
	ld->left = f->nclients + 1; /* +1: released below */
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *c = f->clients[i];
		f->clients[i] = NULL;
		if (c->id == NULL ||
		    start_client(self, sv, c, true, false, tools[i], 0, ld,
		                 err, sizeof(err)) != 0) {
			KN_ERROR("supervisor", "boot: %s", err);
			ld->left--;
		}
		free(tools[i]);
	}
	free(tools);
	f->nclients = 0;
	cfg_file_free(&f);
	load_step(self, ld);
}

/* ---- reload -------------------------------------------------------------
 */

/* Whether a field that an update cannot change differs between two
 * configs of a client (present in one only counts). */
static bool
fixed_changed(json_t *a, json_t *b)
{
	static const char *const fixed[] = {"name",
	                                    "client_id",
	                                    "connection_type",
	                                    "connection_string",
	                                    "auth_type",
	                                    NULL};

	for (int i = 0; fixed[i] != NULL; i++) {
		json_t *x = json_object_get(a, fixed[i]);
		json_t *y = json_object_get(b, fixed[i]);
		if ((x == NULL) != (y == NULL) ||
		    (x != NULL && !json_equal(x, y))) {
			return (true);
		}
	}
	return (false);
}

static void
on_reload_updated(kn_actor *self, void *arg, int status, const void *data,
                  size_t len)
{
	actx       *x    = arg;
	sv_self    *sv   = x->sv;
	entry      *e    = find(sv, x->id);
	const char *name = json_string_value(json_object_get(x->was, "name"));
	mp_r        r;

	if (e != NULL) {
		schedule(self, sv, e);
	}
	if (status == 0) {
		x->load->updated++;
	} else {
		char *why;
		mp_r_open(&r, data, len);
		why = mp_dup_str(mp_get(&r, "error"));
		mp_r_close(&r);
		KN_ERROR("runtime", "reload: %s: %s", name,
		         why != NULL ? why : codec_strerror(status));
		free(why);
		x->load->failed++;
		/* not applied: the next reload tries again */
		if (sv->file != NULL && name != NULL) {
			json_object_set(sv->file, name, x->was);
		}
	}
	load_step(self, x->load);
	actx_free(x);
}

/* Asks e to take the file's new config c (whole, resolved as a file's);
 * counted in ld when asked. */
static void
reload_update(kn_actor *self, sv_self *sv, entry *e, const cfg_client *c,
              json_t *was, load *ld)
{
	char *text = json_dumps(c->raw, JSON_COMPACT);
	actx *x    = text != NULL ? actx_new(sv, e->id, 0) : NULL;
	mp_w  w;
	int   rv = MK_ENOMEM;

	if (x != NULL) {
		x->load = ld;
		x->was  = json_incref(was);
		mp_w_init(&w);
		mp_map(&w, 2);
		mp_kv_str(&w, "patch", text);
		mp_kv_bool(&w, "file", true);
		ld->left++;
		rv = kn_ask_async(self, e->actor, MSG_CL_UPDATE, w.sb.data,
		                  w.sb.size, SV_ASK_MS, on_reload_updated, x);
		mp_w_fini(&w);
		if (rv != 0) {
			ld->left--;
			actx_free(x);
		}
	}
	if (rv != 0) {
		KN_ERROR("runtime", "reload: %s: cannot reach the client: %s",
		         c->name, codec_strerror(rv));
		ld->failed++;
		json_object_set(sv->file, c->name, was);
	}
	free(text);
}

/* Starts the file's client c (taken) for a reload, replacing the entry
 * e of its name when it was the file's (was) or restored; counted in
 * ld.  Returns false when it did not start. */
static bool
reload_add(kn_actor *self, sv_self *sv, entry *e, cfg_client *c, json_t *was,
           load *ld)
{
	char  err[CFG_ERR_MAX], name[72];
	char *tools = NULL;

	snprintf(name, sizeof(name), "%s", c->name);
	if (e != NULL && was == NULL && e->restored) {
		/* as a load does: the stored id and known tools */
		tools = view_tools(e);
		if (json_object_get(c->raw, "client_id") == NULL) {
			free(c->id);
			c->id = strdup(e->id);
		}
		drop(self, sv, e);
	} else if (e != NULL && was != NULL) {
		/* a field that cannot change did: another client */
		persist_del(self, sv, e->id);
		drop(self, sv, e);
	}
	ld->left++;
	if (c->id == NULL) {
		snprintf(err, sizeof(err), "out of memory");
		cfg_client_free(&c);
	}
	if (c == NULL ||
	    start_client(self, sv, c, true, false, tools, 0, ld, err,
	                 sizeof(err)) != 0) {
		ld->left--;
		ld->failed++;
		KN_ERROR("runtime", "reload: %s: %s", name, err);
		free(tools);
		return (false);
	}
	free(tools);
	return (true);
}

/*
 * A config file again, as a diff against the one last loaded: its global
 * settings, then its vanished clients removed, changed ones updated (or
 * replaced), new ones added.  Clients not of the file stay.  Replies
 * when every connect and update answered; an invalid file changes
 * nothing.
 */
static void
on_reload(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	char        err[CFG_ERR_MAX];
	uint64_t    corr = kn_defer(msg);
	cfg_file   *f;
	json_t     *old, *now, *c;
	const char *name;
	load       *ld;
	mp_r        r;
	char       *text;
	int         rv;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	text = mp_dup_str(mp_get(&r, "file"));
	mp_r_close(&r);
	if (text == NULL) {
		reply_err(self, corr, MK_EINVAL, "no config text");
		return;
	}
	rv = cfg_file_parse(text, strlen(text), &f, err, sizeof(err));
	free(text);
	if (rv != 0) {
		reply_err(self, corr, rv, "%s", err);
		return;
	}
	if ((ld = calloc(1, sizeof(*ld))) == NULL ||
	    (now = file_clients(f)) == NULL) {
		free(ld);
		cfg_file_free(&f);
		reply_err(self, corr, MK_ENOMEM, "out of memory");
		return;
	}
	ld->sv     = sv;
	ld->corr   = corr;
	ld->reload = true;
	ld->left   = 1; /* released below */
	old        = sv->file;
	sv->file   = now;
	settings_apply(self, sv, f->sync_ms, f->exec_ms);
	json_object_foreach(old, name, c)
	{
		entry *e = lookup(sv, BY_NAME, name);
		if (json_object_get(now, name) == NULL && e != NULL) {
			KN_INFO("runtime", "reload: removing MCP client %s",
			        name);
			persist_del(self, sv, e->id);
			drop(self, sv, e);
			ld->removed++;
		}
	}
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *cc  = f->clients[i];
		json_t     *was = json_object_get(old, cc->name);
		entry      *e   = lookup(sv, BY_NAME, cc->name);
		char        nm[72];

		f->clients[i] = NULL;
		snprintf(nm, sizeof(nm), "%s", cc->name);
		if (was != NULL && json_equal(was, cc->raw)) {
			cfg_client_free(&cc);
		} else if (was != NULL && e != NULL &&
		           !fixed_changed(was, cc->raw)) {
			reload_update(self, sv, e, cc, was, ld);
			cfg_client_free(&cc);
		} else if (!reload_add(self, sv, e, cc, was, ld)) {
			/* not the file's: the next reload tries again */
			json_object_del(now, nm);
		}
	}
	f->nclients = 0;
	cfg_file_free(&f);
	json_decref(old);
	load_step(self, ld);
}

/* ---- lifecycle ops -------------------------------------------------------
 */

static void
on_forwarded(kn_actor *self, void *arg, int status, const void *data,
             size_t len)
{
	actx  *x = arg;
	entry *e = find(x->sv, x->id);

	if (e != NULL) {
		schedule(self, x->sv, e);
	}
	if (status == 0 && x->update) {
		reply_stored(self, x->sv, x->corr, data, len);
	} else {
		kn_reply_corr(kn_actor_kernel(self), x->corr, status, data,
		              len);
	}
	actx_free(x);
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
	e = who != NULL ? find(sv, who) : NULL;
	if (e == NULL) {
		reply_err(self, corr, MK_ENOENT, "no MCP client %.200s",
		          who ? who : "(none given)");
		free(who);
		free(patch);
		return;
	}
	free(who);
	if (msg->env.type == MSG_SV_REMOVE) {
		KN_INFO("supervisor", "removing MCP client %s", e->name);
		persist_del(self, sv, e->id);
		drop(self, sv, e);
		reply_stored(self, sv, corr, "\x80", 1);
		free(patch);
		return;
	}
	if ((x = actx_new(sv, e->id, corr)) == NULL) {
		free(patch);
		reply_err(self, corr, MK_ENOMEM, "out of memory");
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
		reply_err(self, corr, rv, "cannot reach MCP client %s",
		          e->name);
		actx_free(x);
	}
}

static void
on_view(sv_self *sv, kn_actor *self, kn_msg *msg)
{
	mp_r    r;
	char   *id, *state, *shown, *view;
	int64_t sync_ms;
	entry  *e;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	id      = mp_dup_str(mp_get(&r, "id"));
	state   = mp_dup_str(mp_get(&r, "state"));
	shown   = mp_dup_str(mp_get(&r, "shown"));
	view    = mp_dup_str(mp_get(&r, "view"));
	sync_ms = mp_int(mp_get(&r, "sync_ms"), 0);
	mp_r_close(&r);
	if (id != NULL && state != NULL && view != NULL &&
	    (e = find(sv, id)) != NULL) {
		bool changed = strcmp(e->state, state) != 0 ||
		        (sync_ms > 0 && sync_ms != e->sync_ms);
		if (sync_ms > 0) {
			e->sync_ms = sync_ms;
		}
		free(e->view);
		e->view = view;
		view    = NULL;
		snprintf(e->state, sizeof(e->state), "%s", state);
		snprintf(e->shown, sizeof(e->shown), "%s",
		         shown != NULL ? shown : state);
		if (changed && e->connected && !e->checking) {
			schedule(self, sv, e);
		}
	}
	free(id);
	free(state);
	free(shown);
	free(view);
}

/* ---- the list view ---------------------------------------------------- */

static int
by_name(const void *a, const void *b)
{
	return (strcmp((*(entry *const *)a)->name,
	               (*(entry *const *)b)->name));
}

static bool
matches(const entry *e, json_t *f)
{
	const char *st = json_string_value(json_object_get(f, "state"));
	const char *ct =
	        json_string_value(json_object_get(f, "connection_type"));
	const char *at = json_string_value(json_object_get(f, "auth_type"));
	const char *q  = json_string_value(json_object_get(f, "search"));

	/* (what the list shows: per-user needs_reauth is a projection) */
	return ((st == NULL || strcmp(st, e->shown) == 0) &&
	        (ct == NULL || strcmp(ct, e->conn) == 0) &&
	        (at == NULL || strcmp(at, e->auth) == 0) &&
	        (q == NULL || strcasestr(e->name, q) != NULL ||
	         strcasestr(e->id, q) != NULL));
}

static void
on_list(kn_actor *self, sv_self *sv, kn_msg *msg)
{
	uint64_t   corr = kn_defer(msg);
	mp_r       r;
	char      *ftext, *out;
	json_t    *f, *list, *res;
	entry    **sorted;
	json_int_t limit, offset, total = 0;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	ftext = mp_dup_str(mp_get(&r, "filter"));
	mp_r_close(&r);
	f = ftext != NULL && *ftext ? json_loads(ftext, 0, NULL)
	                            : json_object();
	free(ftext);
	if (!json_is_object(f)) {
		json_decref(f);
		reply_err(self, corr, MK_EINVAL,
		          "the filter must be a JSON object");
		return;
	}
	limit  = json_is_integer(json_object_get(f, "limit"))
	         ? json_integer_value(json_object_get(f, "limit"))
	         : LIST_DEFAULT;
	offset = json_is_integer(json_object_get(f, "offset"))
	        ? json_integer_value(json_object_get(f, "offset"))
	        : 0;
	if (limit < 1 || limit > LIST_MAX || offset < 0) {
		json_decref(f);
		reply_err(self, corr, MK_EINVAL,
		          "limit must be 1..%d and offset >= 0", LIST_MAX);
		return;
	}
	sorted = malloc((sv->n ? sv->n : 1) * sizeof(*sorted));
	list   = json_array();
	if (sorted == NULL || list == NULL) {
		free(sorted);
		json_decref(list);
		json_decref(f);
		reply_err(self, corr, MK_ENOMEM, "out of memory");
		return;
	}
	if (sv->n != 0) {
		memcpy(sorted, sv->all, sv->n * sizeof(*sorted));
	}
	qsort(sorted, sv->n, sizeof(*sorted), by_name);
	for (size_t i = 0; i < sv->n; i++) {
		if (!matches(sorted[i], f)) {
			continue;
		}
		if (total >= offset && total < offset + limit &&
		    sorted[i]->view != NULL) {
			json_array_append_new(
			        list, json_loads(sorted[i]->view, 0, NULL));
		}
		total++;
	}
	res = json_pack("{s:o, s:I, s:I}", "clients", list, "count",
	                (json_int_t)json_array_size(list), "total_count",
	                total);
	out = res != NULL ? json_dumps(res, JSON_COMPACT) : NULL;
	if (out != NULL) {
		reply_kv(self, NULL, corr, "json", out);
	} else {
		reply_err(self, corr, MK_ENOMEM, "out of memory");
	}
	free(out);
	json_decref(res);
	json_decref(f);
	free(sorted);
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
		drop(self, sv, sv->all[sv->n - 1]);
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
		on_add(self, sv, msg);
		return (0);
	case MSG_SV_LOAD:
		on_load(self, sv, msg);
		return (0);
	case MSG_SV_RELOAD:
		on_reload(self, sv, msg);
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
		on_view(sv, self, msg);
		return (0);
	case MSG_SV_SETTINGS:
		on_settings(self, sv, msg);
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
