/*
 * boot.c - clients started: one added from the API, a config file loaded
 * at boot, the store's clients restored, a config file reloaded as a diff
 * against the last one, and the global settings (see supervisor.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/client/client.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/supervisor/sv_impl.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "model/config.h"

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

/* Whether a load (or reload) must give up its clients not yet started
 * (left) because the supervisor is stopping: starting thousands takes
 * seconds, and a stop does not wait for that.  Then ld answers
 * MK_ECLOSED; the caller starts no more. */
static bool
load_stopped(kn_actor *self, load *ld, size_t left)
{
	if (!kn_stopping(self)) {
		return (false);
	}
	KN_INFO("supervisor", "stopping: %zu clients not started", left);
	ld->stopped = left;
	return (true);
}

static void
load_step(kn_actor *self, load *ld)
{
	sv_diff_msg  d = {.added   = (int64_t)ld->count,
	                  .updated = ld->updated,
	                  .removed = ld->removed,
	                  .failed  = ld->failed};
	sv_count_msg c = {.count = (int64_t)ld->count};

	if (--ld->left != 0) {
		return;
	}
	if (ld->stopped != 0) {
		kn_reply_why(
		        self, ld->corr, MK_ECLOSED,
		        "the runtime is stopping: %zu clients not started",
		        ld->stopped);
	} else if (ld->reload) {
		kn_log(ld->failed != 0 ? MK_LOG_WARN : MK_LOG_INFO, "runtime",
		       "reloaded: %d added, %d updated, %d removed, %d failed",
		       (int)ld->count, ld->updated, ld->removed, ld->failed);
		sv_reply_msg(self, ld->sv, ld->corr,
		             CODEC_OF(sv_diff_msg, &d));
	} else {
		sv_reply_msg(self, ld->sv, ld->corr,
		             CODEC_OF(sv_count_msg, &c));
	}
	free(ld);
}

static void pump(kn_actor *self, sv_self *sv, load *ld, int k);
static void progress(load *ld);

/* How many slow connects a boot runs at once: the config's, else twice
 * the cores. */
static size_t
slow_at_once(unsigned configured)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	return (configured != 0     ? configured
	                : cores > 0 ? (size_t)cores * 2
	                            : 2);
}

/* A load's lanes: the slow one as configured (0: twice the cores). */
static void
lanes_init(load *ld, unsigned slow)
{
	ld->lanes[BOOT_SLOW].conc = slow_at_once(slow);
	ld->lanes[BOOT_NET].conc  = BOOT_NET_AT_ONCE;
}

/* The boot lane whose turns c's first connect waits for. */
static int
lane_of(const cfg_client *c)
{
	return (c->conn == CFG_STDIO || !c->sticky ? BOOT_SLOW : BOOT_NET);
}

/* The most a boot of so many clients in each lane takes: its lanes'
 * turns one after another (they run side by side), each turn as long
 * as a connect's ask may last, and the time to start them. */
static int
boot_ms(const size_t n[BOOT_LANES], unsigned slow)
{
	size_t  conc[BOOT_LANES] = {slow_at_once(slow), BOOT_NET_AT_ONCE};
	size_t  turns            = 0;
	int64_t ms;

	for (int k = 0; k < BOOT_LANES; k++) {
		turns += (n[k] + conc[k] - 1) / conc[k];
	}
	turns = turns != 0 ? turns : 1; /* (a reload's updates: one) */
	ms    = (int64_t)turns * CONNECT_ASK_MS + BOOT_SLACK_MS;
	return (ms < BOOT_MAX_MS ? (int)ms : BOOT_MAX_MS);
}

int
sv_boot_ms(const cfg_file *f)
{
	size_t n[BOOT_LANES] = {0};

	for (size_t i = 0; i < f->nclients; i++) {
		n[lane_of(f->clients[i])]++;
	}
	return (boot_ms(n, f->start_conc));
}

int
sv_restore_ms(const char *list)
{
	json_t     *l             = json_loads(list, 0, NULL), *item;
	size_t      n[BOOT_LANES] = {0}, i;
	cfg_client *c;
	char        err[CFG_ERR_MAX];

	json_array_foreach(l, i, item)
	{
		if (cfg_client_parse_stored(json_object_get(item, "config"),
		                            &c, err, sizeof(err)) == 0) {
			n[lane_of(c)]++;
			cfg_client_free(&c);
		}
	}
	json_decref(l);
	return (boot_ms(n, 0));
}

static void
on_connected(kn_actor *self, void *arg, int status, const void *data,
             size_t len)
{
	actx    *x   = arg;
	sv_self *sv  = x->sv;
	entry   *e   = sv_find(sv, x->id);
	char    *why = status != 0 ? kn_error_text(data, len) : NULL;

	if (e != NULL && x->serial != 0 && e->serial != x->serial) {
		/* the entry it started was replaced under the same id (a
		 * declared client over another node's of the same name):
		 * this answer is not the new one's */
		e = NULL;
	}
	if (e == NULL) {
		if (x->corr != 0) {
			kn_reply_why(
			        self, x->corr, MK_ECLOSED,
			        "the client was removed while connecting");
		}
	} else if (status != 0 && !x->boot && e->sticky) {
		/* a user's add of a sticky client that cannot connect: the
		 * error is returned and the client is not kept */
		KN_INFO("supervisor", "add of %s failed: %s", e->name,
		        why ? why : "?");
		if (x->corr != 0) {
			kn_reply_why(self, x->corr, status, "%s",
			             why ? why : codec_strerror(status));
			x->corr = 0;
		}
		sv_drop(self, sv, e);
		e = NULL;
	} else {
		e->connected = true;
		sv_schedule(self, sv, e);

		if (x->corr != 0) {
			sv_id_msg       m = {.id = e->id};
			msgpack_sbuffer b =
			        codec_msg_packed(CODEC_OF(sv_id_msg, &m));
			sv_reply_change(self, sv, x->corr, b.data, b.size,
			                x->ticket, SV_ADDED, e->id);
			codec_msg_wipe(&sv_id_msg_fields, &b);
		}
	}
	if (x->load != NULL) {
		x->load->count += e != NULL;
		if (x->boot) {
			progress(x->load);
		}
		if (x->lane >= 0) {
			x->load->lanes[x->lane].out--;
			pump(self, sv, x->load, x->lane);
		}
		load_step(self, x->load);
	}
	free(why);
	sv_actx_free(x);
}

/* Asks e's actor to connect (x: its context; tools: the known ones, or
 * NULL), a slow one counted out. */
static int
connect_send(kn_actor *self, entry *e, actx *x, const char *tools)
{
	cl_connect_msg m = {.boot     = x->boot,
	                    .restored = e->restored,
	                    .tools    = (char *)tools,
	                    .ticket   = (int64_t)x->ticket};
	int            rv;

	rv = kn_ask_async_msg(self, e->actor, MSG_CL_CONNECT,
	                      CODEC_OF(cl_connect_msg, &m), CONNECT_ASK_MS,
	                      on_connected, x);
	if (rv == 0 && x->lane >= 0) {
		x->load->lanes[x->lane].out++;
	}
	return (rv);
}

/* Sends the connects waiting in ld's lane k, in order, while fewer than
 * its conc are out.  One whose client went meanwhile (or when the supervisor
 * is stopping) counts as answered: the caller's own answer is still to be
 * counted, so ld outlives this. */
static void
pump(kn_actor *self, sv_self *sv, load *ld, int k)
{
	boot_lane *l = &ld->lanes[k];
	actx      *x;
	entry     *e;

	while (l->out < l->conc && (x = l->queue) != NULL) {
		if ((l->queue = x->next) == NULL) {
			l->tail = NULL;
		}
		x->next = NULL;
		e       = sv_find(sv, x->id);
		if (e != NULL && e->serial == x->serial &&
		    !kn_stopping(self) &&
		    connect_send(self, e, x, x->tools) == 0) {
			free(x->tools);
			x->tools = NULL;
			continue;
		}
		if (e != NULL && e->serial == x->serial &&
		    !kn_stopping(self)) {
			KN_ERROR("supervisor",
			         "boot: %s: cannot reach the "
			         "client actor",
			         e->name);
			sv_drop(self, sv, e);
		}
		load_step(self, ld);
		sv_actx_free(x);
	}
}

/* A boot of many clients says how far it got: every tenth. */
static void
progress(load *ld)
{
	size_t step = ld->total / 10;

	ld->done++;
	if (ld->total >= 20 &&
	    (ld->done % step == 0 || ld->done == ld->total)) {
		KN_INFO("supervisor", "boot: connected %zu/%zu", ld->done,
		        ld->total);
	}
}

/* Spawns a client actor for cfg (taken) and asks it to connect. */
static int
start_client(kn_actor *self, sv_self *sv, cfg_client *cfg, bool boot,
             bool restored, const char *tools, uint64_t corr, load *ld,
             char *err, size_t errlen)
{
	cl_connect_msg m    = {0};
	int            lane = ld == NULL || !boot ? -1 : lane_of(cfg);
	client_args    a    = {
	              .cfg        = cfg,
	              .supervisor = self,
	              .stream     = sv->a.stream,
	              .node_id    = sv->a.node_id,
	              .sync_ms    = sv->a.sync_ms,
	              .changes    = sv->a.changes,
	              .exec_ms    = sv->a.exec_ms,
	              .persister  = sv->a.persister,
	              .credential = sv->a.credential,
	              .host       = sv->a.host,
	              .tracer     = sv->a.tracer,
        };
	char   name[96];
	entry *e;
	actx  *x;
	int    rv;

	if (sv_find(sv, cfg->name) != NULL || sv_find(sv, cfg->id) != NULL) {
		snprintf(
		        err, errlen,
		        "an MCP client named %s (or with id %s) already exists",
		        cfg->name, cfg->id);
		cfg_client_free(&cfg);
		return (MK_EEXIST);
	}
	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->id = strdup(cfg->id)) == NULL ||
	    (e->name = strdup(cfg->name)) == NULL) {
		if (e != NULL) {
			sv_entry_free(e);
		}
		cfg_client_free(&cfg);
		snprintf(err, errlen, "out of memory");
		return (MK_ENOMEM);
	}
	e->sv       = sv;
	e->serial   = ++sv->serials;
	e->sticky   = cfg->sticky;
	e->restored = restored;
	e->sync_ms  = cfg->sync_ms ? cfg->sync_ms : sv->a.sync_ms;
	snprintf(e->conn, sizeof(e->conn), "%s", cfg_conn_name(cfg->conn));
	snprintf(e->auth, sizeof(e->auth), "%s", cfg_auth_name(cfg->auth));
	e->state = e->shown = CS_UNSTABLE;
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", cfg->name);
	if ((rv = kn_spawn(kn_actor_kernel(self), name, &client_ops, &a,
	                   &e->actor)) != 0) {
		cfg_client_free(&a.cfg); /* still ours if init did not run */
		free(a.view);
		sv_entry_free(e);
		snprintf(err, errlen, "cannot start the client actor: %s",
		         codec_strerror(rv));
		return (rv);
	}
	e->view  = a.view; /* its first, until it pushes one */
	e->state = e->shown = a.state;
	/* calls find the actor by name or by id */
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", e->id);
	if (strcmp(e->id, e->name) != 0 &&
	    (rv = kn_alias(e->actor, name)) != 0) {
		kn_actor_destroy(&e->actor);
		sv_entry_free(e);
		snprintf(err, errlen, "cannot register the client id: %s",
		         codec_strerror(rv));
		return (rv);
	}
	if ((rv = sv_insert(sv, e)) != 0 ||
	    (x = sv_actx_new(sv, e->id, corr)) == NULL) {
		kn_actor_destroy(&e->actor);
		sv_entry_free(e);
		snprintf(err, errlen, "out of memory");
		return (MK_ENOMEM);
	}
	x->boot   = boot;
	x->load   = ld;
	x->serial = e->serial;
	x->lane   = lane;
	if (corr != 0) {
		/* an API add: its config write is part of its answer */
		x->ticket = m.ticket = (int64_t)++sv->tickets;
	}
	if (lane >= 0 && ld->lanes[lane].out >= ld->lanes[lane].conc) {
		/* its turn comes when a connect before it ends */
		if (tools != NULL && (x->tools = strdup(tools)) == NULL) {
			sv_actx_free(x);
			sv_drop(self, sv, e);
			snprintf(err, errlen, "out of memory");
			return (MK_ENOMEM);
		}
		boot_lane *l = &ld->lanes[lane];
		if (l->tail != NULL) {
			l->tail->next = x;
		} else {
			l->queue = x;
		}
		l->tail = x;
		return (0);
	}
	rv = connect_send(self, e, x, tools);
	if (rv != 0) {
		sv_actx_free(x);
		sv_drop(self, sv, e);
		snprintf(err, errlen, "cannot reach the client actor: %s",
		         codec_strerror(rv));
		return (rv);
	}
	return (0);
}

int
sv_on_add(kn_actor *self, sv_self *sv, kn_msg *msg, sv_add_msg *m)
{
	char        err[CFG_ERR_MAX];
	cfg_client *cfg;
	json_t     *o;
	uint64_t    corr = kn_defer(msg);
	int         rv;

	o = m->config != NULL ? json_loads(m->config, 0, NULL) : NULL;
	if (o == NULL) {
		kn_reply_why(self, corr, MK_EINVAL,
		             "the client config is not JSON");
		return (0);
	}
	/* from the API: literal, its env. strings never looked up */
	rv = cfg_client_parse(o, json_true(), &cfg, err, sizeof(err));
	json_decref(o);
	if (rv != 0 ||
	    (rv = start_client(self, sv, cfg, false, false, m->tools, corr,
	                       NULL, err, sizeof(err))) != 0) {
		kn_reply_why(self, corr, rv, "%s", err);
	}
	return (0);
}

/* The answer of a client actor to another node's config. */
static void
on_synced(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	char *why = status != 0 ? kn_error_text(data, len) : NULL;

	if (status != 0) {
		KN_WARN("supervisor",
		        "MCP client %s: another node's config not applied: %s",
		        (char *)arg,
		        why != NULL ? why : codec_strerror(status));
	}
	free(why);
	free(arg);
}

int
sv_on_sync(kn_actor *self, sv_self *sv, kn_msg *msg, sv_sync_msg *m)
{
	char          err[CFG_ERR_MAX];
	cl_update_msg u = {.stored = true};
	cfg_client   *c = NULL;
	json_t       *o;
	entry        *e, *same;

	if (m->id == NULL) {
		return (0);
	}
	e = sv_lookup(sv, BY_ID, m->id);
	if (m->config == NULL) {
		if (e != NULL) {
			KN_INFO("supervisor",
			        "MCP client %s was removed on another node",
			        e->name);
			sv_drop(self, sv, e);
		}
		goto out;
	}
	o = json_loads(m->config, 0, NULL);
	if (cfg_client_parse_stored(o, &c, err, sizeof(err)) != 0) {
		KN_WARN("supervisor",
		        "another node's client %s not applied: %s", m->id,
		        err);
		json_decref(o);
		goto out;
	}
	json_decref(o);
	if (e != NULL && e->actor != NULL) {
		/* known: its actor compares and applies */
		u.patch   = m->config;
		char *arg = strdup(e->name);
		if (arg == NULL ||
		    kn_ask_async_msg(self, e->actor, MSG_CL_UPDATE,
		                     CODEC_OF(cl_update_msg, &u), SV_ASK_MS,
		                     on_synced, arg) != 0) {
			free(arg);
		}
		cfg_client_free(&c);
		goto out;
	}
	if (e != NULL ||
	    ((same = sv_lookup(sv, BY_NAME, c->name)) != NULL &&
	     strcmp(same->id, m->id) != 0)) {
		sv_drop(self, sv, e != NULL ? e : same); /* the store's wins */
	}
	free(c->id);
	if ((c->id = strdup(m->id)) == NULL) {
		cfg_client_free(&c);
		goto out;
	}
	KN_INFO("supervisor", "MCP client %s was added on another node",
	        c->name);
	if (start_client(self, sv, c, false, true, m->tools, 0, NULL, err,
	                 sizeof(err)) != 0) {
		KN_WARN("supervisor",
		        "another node's client %s not started: %s", m->id,
		        err);
	}
out:
	return (0);
}

/* A stored client that cannot start is listed, state `error` and why in
 * its last_failure, with no actor: it can be removed, or replaced by a
 * config file's client of its name; every other ask is refused. */
static void
keep_failed(sv_self *sv, const char *id, const char *name, json_t *tools,
            const char *why)
{
	char          at[40], text[CFG_ERR_MAX + 64];
	char         *msg;
	entry        *e;
	json_t       *v;
	model_failure lf = {.stage = "connect", .at = at, .since = at};

	if (id == NULL || name == NULL || !cfg_name_valid(name) ||
	    sv_find(sv, id) != NULL || sv_find(sv, name) != NULL) {
		return; /* a row too damaged to be shown: skipped, as logged */
	}
	snprintf(text, sizeof(text),
	         "the stored client could not be started: %s", why);
	msg = text_failure_message(text);
	kn_rfc3339(at, sizeof(at));
	lf.message = msg != NULL ? msg : "";
	v = json_pack("{s:{s:s, s:s}, s:o, s:s, s:n, s:i, s:o}", "config",
	              "name", name, "client_id", id, "tools",
	              json_is_array(tools) ? json_incref(tools) : json_array(),
	              "state", cl_state_name(CS_ERROR), "connection_mode",
	              "generation", 0, "last_failure",
	              model_failure_json(&lf));
	if (v == NULL || (e = calloc(1, sizeof(*e))) == NULL) {
		json_decref(v);
		free(msg);
		return;
	}
	e->lf = model_failure_dup(&lf);
	free(msg);
	e->id       = strdup(id);
	e->name     = strdup(name);
	e->view     = json_dumps(v, JSON_COMPACT);
	e->sv       = sv;
	e->restored = true;
	e->state = e->shown = CS_ERROR;
	json_decref(v);
	if (e->id == NULL || e->name == NULL || e->view == NULL ||
	    e->lf == NULL || sv_insert(sv, e) != 0) {
		sv_entry_free(e);
	}
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
		kn_reply_why(self, corr, MK_EINVAL,
		             "the stored client list is not readable");
		return;
	}
	ld->corr = corr;
	ld->sv   = sv;
	ld->left = json_array_size(list) + 1; /* +1: released below */
	lanes_init(ld, 0);
	ld->total = json_array_size(list);
	json_array_foreach(list, i, item)
	{
		cfg_client *c;
		json_t     *t = json_object_get(item, "tools");
		char       *tools;
		const char *id;

		if (load_stopped(self, ld, json_array_size(list) - i)) {
			ld->left -= json_array_size(list) - i;
			break;
		}
		tools = json_is_array(t) ? json_dumps(t, 0) : NULL;
		id    = json_string_value(json_object_get(item, "id"));

		if (cfg_client_parse_stored(json_object_get(item, "config"),
		                            &c, err, sizeof(err)) != 0 ||
		    id == NULL) {
			KN_WARN("supervisor", "stored client not started: %s",
			        err);
			keep_failed(sv, id,
			            json_string_value(
			                    json_object_get(item, "name")),
			            t, err);
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
settings_apply(kn_actor *self, sv_self *sv, const sv_settings_msg *s)
{
	cl_settings_msg m = {.sync_ms = s->sync_ms,
	                     .exec_ms = s->exec_ms,
	                     .changes = s->changes};

	sv->a.sync_ms = s->sync_ms;
	sv->a.exec_ms = s->exec_ms;
	sv->a.changes = (int)s->changes;
	for (size_t i = 0; i < sv->n; i++) {
		if (sv->all[i]->actor != NULL &&
		    kn_tell_msg(sv->all[i]->actor, self, MSG_CL_SETTINGS,
		                CODEC_OF(cl_settings_msg, &m)) != 0) {
			KN_ERROR(
			        "supervisor",
			        "MCP client %s did not take the global settings",
			        sv->all[i]->name);
		}
	}
}

int
sv_on_settings(kn_actor *self, sv_self *sv, kn_msg *msg, sv_settings_msg *m)
{

	if (m->sync_ms < 1000 || m->exec_ms < 1) {
		kn_reply_why(
		        self, kn_defer(msg), MK_EINVAL,
		        "tool_sync_interval must be >= 1s and tool_execution_timeout positive");
		return (0);
	}
	settings_apply(self, sv, m);
	kn_reply(self, msg, 0, CODEC_EMPTY, CODEC_EMPTY_LEN);
	return (0);
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

/* The config file text parsed, or NULL when it is not one: the ask corr
 * is answered why. */
static cfg_file *
file_parsed(kn_actor *self, const char *text, uint64_t corr)
{
	char      err[CFG_ERR_MAX];
	cfg_file *f;
	int       rv;

	if (text == NULL) {
		kn_reply_why(self, corr, MK_EINVAL, "no config text");
		return (NULL);
	}
	if ((rv = cfg_file_parse(text, strlen(text), &f, err, sizeof(err))) !=
	    0) {
		kn_reply_why(self, corr, rv, "%s", err);
		return (NULL);
	}
	return (f);
}

int
sv_on_load(kn_actor *self, sv_self *sv, kn_msg *msg, sv_load_msg *m)
{
	char      err[CFG_ERR_MAX];
	cfg_file *f;
	char    **tools;
	load     *ld;
	uint64_t  corr = kn_defer(msg);

	if (m->restore != NULL) {
		restore(self, sv, m->restore, corr);
		return (0);
	}
	if ((f = file_parsed(self, m->file, corr)) == NULL) {
		return (0); /* answered */
	}
	/* all checks before anything changes */
	for (size_t i = 0; i < f->nclients; i++) {
		entry *e = sv_find(sv, f->clients[i]->name);
		if ((e != NULL && !e->restored) ||
		    (e == NULL && sv_find(sv, f->clients[i]->id) != NULL)) {
			kn_reply_why(
			        self, corr, MK_EEXIST,
			        "client \"%s\": an MCP client with that name or id already exists",
			        f->clients[i]->name);
			cfg_file_free(&f);
			return (0);
		}
	}
	if ((ld = calloc(1, sizeof(*ld))) == NULL ||
	    (tools = calloc(f->nclients + 1, sizeof(*tools))) == NULL) {
		free(ld);
		cfg_file_free(&f);
		kn_reply_why(self, corr, MK_ENOMEM, "out of memory");
		return (0);
	}
	json_decref(sv->file);
	sv->file = file_clients(f);
	settings_apply(self, sv,
	               &(sv_settings_msg) {.sync_ms = f->sync_ms,
	                                   .exec_ms = f->exec_ms,
	                                   .changes = f->changes});
	/* a declared client replaces the one restored under its name: the
	 * file's config, the stored id and known tools */
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *c = f->clients[i];
		entry      *e = sv_find(sv, c->name);
		if (e != NULL) {
			tools[i] = view_tools(e);
			if (json_object_get(c->raw, "client_id") == NULL) {
				free(c->id);
				c->id = strdup(e->id);
			}
			sv_drop(self, sv, e);
		}
	}
	ld->corr = corr;
	ld->sv   = sv;
	ld->left = f->nclients + 1; /* +1: released below */
	lanes_init(ld, f->start_conc);
	ld->total = f->nclients;
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *c = f->clients[i];
		if (load_stopped(self, ld, f->nclients - i)) {
			ld->left -= f->nclients - i;
			while (i < f->nclients) {
				free(tools[i++]); /* (the clients stay f's) */
			}
			break;
		}
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
	cfg_file_free(&f);
	load_step(self, ld);
	return (0);
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
	entry      *e    = sv_find(sv, x->id);
	const char *name = json_string_value(json_object_get(x->was, "name"));

	if (e != NULL) {
		sv_schedule(self, sv, e);
	}
	if (status == 0) {
		x->load->updated++;
	} else {
		char *why = kn_error_text(data, len);
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
	sv_actx_free(x);
}

/* Asks e to take the file's new config c (whole, resolved as a file's);
 * counted in ld when asked. */
static void
reload_update(kn_actor *self, sv_self *sv, entry *e, const cfg_client *c,
              json_t *was, load *ld)
{
	char *text = json_dumps(c->raw, JSON_COMPACT);
	actx *x    = text != NULL ? sv_actx_new(sv, e->id, 0) : NULL;
	int   rv   = MK_ENOMEM;

	if (x != NULL) {
		x->load         = ld;
		x->was          = json_incref(was);
		cl_update_msg m = {.patch = text, .file = true};
		ld->left++;
		rv = kn_ask_async_msg(self, e->actor, MSG_CL_UPDATE,
		                      CODEC_OF(cl_update_msg, &m), SV_ASK_MS,
		                      on_reload_updated, x);
		if (rv != 0) {
			ld->left--;
			sv_actx_free(x);
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
		sv_drop(self, sv, e);
	} else if (e != NULL && was != NULL) {
		/* a field that cannot change did: another client */
		sv_persist_del(self, sv, e->id, 0);
		sv_drop(self, sv, e);
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
int
sv_on_reload(kn_actor *self, sv_self *sv, kn_msg *msg, sv_file_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	cfg_file   *f;
	json_t     *old, *now, *c;
	const char *name;
	load       *ld;

	if ((f = file_parsed(self, m->file, corr)) == NULL) {
		return (0); /* answered */
	}
	if ((ld = calloc(1, sizeof(*ld))) == NULL ||
	    (now = file_clients(f)) == NULL) {
		free(ld);
		cfg_file_free(&f);
		kn_reply_why(self, corr, MK_ENOMEM, "out of memory");
		return (0);
	}
	ld->sv     = sv;
	ld->corr   = corr;
	ld->reload = true;
	ld->left   = 1; /* released below */
	lanes_init(ld, f->start_conc);
	old      = sv->file;
	sv->file = now;
	settings_apply(self, sv,
	               &(sv_settings_msg) {.sync_ms = f->sync_ms,
	                                   .exec_ms = f->exec_ms,
	                                   .changes = f->changes});
	json_object_foreach(old, name, c)
	{
		entry *e = sv_lookup(sv, BY_NAME, name);
		if (json_object_get(now, name) == NULL && e != NULL) {
			KN_INFO("runtime", "reload: removing MCP client %s",
			        name);
			sv_persist_del(self, sv, e->id, 0);
			sv_drop(self, sv, e);
			ld->removed++;
		}
	}
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client *cc  = f->clients[i];
		json_t     *was = json_object_get(old, cc->name);
		entry      *e   = sv_lookup(sv, BY_NAME, cc->name);
		char        nm[72];

		if (load_stopped(self, ld, f->nclients - i)) {
			break; /* (the rest stay f's) */
		}
		f->clients[i] = NULL;
		snprintf(nm, sizeof(nm), "%s", cc->name);
		if (was != NULL && json_equal(was, cc->raw)) {
			cfg_client_free(&cc);
		} else if (was != NULL && e != NULL && e->actor != NULL &&
		           !fixed_changed(was, cc->raw)) {
			reload_update(self, sv, e, cc, was, ld);
			cfg_client_free(&cc);
		} else if (!reload_add(self, sv, e, cc, was, ld)) {
			/* not the file's: the next reload tries again */
			json_object_del(now, nm);
		}
	}
	cfg_file_free(&f);
	json_decref(old);
	load_step(self, ld);
	return (0);
}
