/*
 * actor.c - the client actor's inbox and dispatch: its start and stop,
 * the lifecycle asks (connect, reconnect, disable, enable, update,
 * settings) and the replies (see client.h; state.c has its state).
 *
 * DESIGN: one thread per client.  Its kernel wait is tp_loop_wait, so the
 * inbox eventfd, curl's sockets, stdio pipes and request deadlines wake
 * one curl_multi_poll().  Asks that need the network are deferred and
 * answered from the transport's callbacks.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/log.h"
#include "codec/envelope.h"

/* A client's view (its tools, config and state) travels to the
 * supervisor in one message: the largest tool list leaves room. */
static_assert(MCP_MAX_TOOLS_BYTES <= CODEC_PAYLOAD_MAX / 2,
              "a view with the largest tool list fits in one message");

/* ---- replies ------------------------------------------------------------ */

void
cl_reply_ok(client *cl, uint64_t corr)
{
	kn_reply_corr(kn_actor_kernel(cl->self), corr, 0, CODEC_EMPTY,
	              CODEC_EMPTY_LEN);
}

void
cl_reply_state(client *cl, uint64_t corr)
{
	cl_state_msg m = {.state = cl->state, .metrics = cl_metrics_text(cl)};

	kn_reply_msg(kn_actor_kernel(cl->self), corr, 0, &cl_state_msg_fields,
	             &m);
	free(m.metrics);
}

int
cl_status_of(const mcp_error *e)
{
	switch (e->kind) {
	case MCP_E_TIMEOUT:
		return (MK_ETIMEDOUT);
	case MCP_E_CANCELLED:
		return (MK_ECLOSED);
	case MCP_E_LOCAL:
		return (MK_ENOMEM);
	case MCP_E_LIMIT:
		return (MK_ESYS);
	case MCP_E_UNKNOWN:
		return (MK_EUNKNOWN);
	default:
		return (MK_EUPSTREAM);
	}
}

/* ---- the actor ------------------------------------------------------------
 */

static int
cl_init(kn_actor *self, void *arg, void **statep)
{
	client_args *a = arg;
	client      *cl;

	if ((cl = calloc(1, sizeof(*cl))) == NULL) {
		return (MK_ENOMEM);
	}
	cl_waker_init(
	        &cl->wk); /* the loop comes with the first network work */
	cl->self = self;
	cl->cfg  = a->cfg;
	lru_init(&cl->cache_lru, 0);
	a->cfg = NULL;                /* ours now */
	kn_log_client(cl->cfg->name); /* this thread works for it alone */
	cl->sv = kn_actor_hold(a->supervisor);
	cl->ps = a->persister != NULL ? kn_actor_hold(a->persister) : NULL;
	cl->cr = a->credential != NULL ? kn_actor_hold(a->credential) : NULL;
	cl->stream      = a->stream;
	cl->node_id     = a->node_id;
	cl->host        = a->host;
	cl->tracer      = a->tracer;
	cl->sync_ms     = cl->cfg->sync_ms ? cl->cfg->sync_ms : a->sync_ms;
	cl->exec_ms     = cl->cfg->exec_ms ? cl->cfg->exec_ms : a->exec_ms;
	cl->def_sync_ms = a->sync_ms;
	cl->def_changes = a->changes;
	cl->def_exec_ms = a->exec_ms;
	cl->tools       = json_array();
	cl_lists_init(cl);
	cl->state = cl->cfg->disabled ? CS_DISABLED
	        : cl->cfg->auth == CFG_AUTH_NONE ||
	                cl->cfg->auth == CFG_AUTH_HEADERS ||
	                cfg_acts_alone(cl->cfg)
	        ? CS_UNSTABLE /* until the first connect says otherwise */
	        : CS_PENDING; /* credentials are verified by an admin first */
	cl->shown = cl->state;
	kn_set_wake_arg(self, &cl->wk);
	/* an idle client keeps one connection (3 fds with curl's wake-up
	 * pair); calls raise it as they need (call.c) */
	cl->maxconn = 1;
	cl_cred_register(cl);
	/* the list shows the client while its first connect runs (in the
	 * state it starts in: there is no "connecting" state) */
	json_t *v = cl_view_json(cl);
	a->view   = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	a->state = cl_shown_state(cl);
	*statep  = cl;
	return (0);
}

static void
cl_fini(kn_actor *self, void *state)
{
	client *cl = state;

	cl_check_abort(cl);
	cl_call_drop_held(cl, "MCP client is shutting down", true);
	cl_call_run_queued(cl, "MCP client is shutting down");
	cl_input_end_all(cl); /* answered while their sessions are open */
	cl_conn_close_all(cl);
	cl_call_end_all(cl, "MCP client is shutting down");
	cl_loop_free(cl);
	cl_cred_forget(cl);
	cl_cred_clear(cl);
	free(cl->step_scope);
	cl_cred_fini(cl);
	if (cl->cr != NULL) {
		kn_actor_release(&cl->cr);
	}
	json_decref(cl->tools);
	json_decref(cl->history);
	json_decref(cl->versions);
	json_decref(cl->approved);
	json_decref(cl->pin_held);
	cl_cache_clear(cl);
	strmap_fini(&cl->cache);
	cl_lists_fini(cl);
	json_decref(cl->undo);
	free(cl->lf_message);
	kn_actor_release(&cl->sv);
	if (cl->ps != NULL) {
		kn_actor_release(&cl->ps);
	}
	cfg_client_free(&cl->cfg);
	cl_waker_fini(&cl->wk);
	idmap_fini(&cl->tickets); /* (every call was answered above) */
	free(cl);
}

/* The first connect (or discovery), once the state allows it. */
static void
connect_now(client *cl, uint64_t corr, uint32_t type, bool boot)
{
	if (cl->state == CS_DISABLED || cl->state == CS_PENDING ||
	    cl->state == CS_REAUTH) {
		cl_save_once(cl);
		cl_push_view(cl);
		cl_reply_ok(cl, corr);
		return;
	}
	if (!cl->cfg->sticky && cl->hash[0] != '\0') {
		cl_save_once(cl);
		/* per-call with known tools: no synchronous discovery; the
		 * periodic check revisits it */
		cl_pass(cl);
		cl_reply_ok(cl, corr);
		return;
	}
	cl_dial_start(cl, boot ? DIAL_BOOT : DIAL_ADD, corr, type);
}

/* How a pending oauth client's credential lookup was started. */
enum { HOW_ADD, HOW_BOOT, HOW_ENABLE };

/* The credential of a pending oauth client, looked up at its connect
 * (or enable). */
static void
connect_cred(client *cl, void *arg, uint64_t corr, int status, const char *err)
{
	int how = (int)(uintptr_t)arg;

	if (status == 0 || (cl->state == CS_PENDING && status != MK_ESTATE)) {
		/* authorized (or it exists and a refresh failed): the
		 * connect decides */
		(void)cl_state_enter(cl, CS_UNSTABLE, CL_BY_CRED);
	}
	if (how == HOW_ENABLE && cl->state == CS_UNSTABLE) {
		cl_dial_start(cl, DIAL_RECONNECT, corr, MSG_CL_ENABLE);
		return;
	}
	connect_now(cl, corr, MSG_CL_CONNECT, how == HOW_BOOT);
}

static int
on_connect(kn_actor *self, client *cl, kn_msg *msg, cl_connect_msg *m)
{
	uint64_t corr;
	json_t  *tools = NULL;

	cl->unsaved = !m->restored;
	cl->ticket  = (uint64_t)m->ticket;
	if (m->tools != NULL &&
	    (tools = json_loads(m->tools, 0, NULL)) != NULL &&
	    json_is_array(tools) && tools_hash(tools, cl->hash) == 0) {
		/* restored from the store: seeds the hash, no event, no write
		 */
		json_decref(cl->tools);
		cl->tools = json_incref(tools);
	}
	json_decref(tools);
	corr = kn_defer(msg);
	if (!cl_pin_wait(cl, corr, m->boot)) {
		cl_connect_go(cl, corr, m->boot);
	}
	return (0);
}

void
cl_connect_go(client *cl, uint64_t corr, bool boot)
{
	if (cl->state == CS_PENDING && cl_cred_needed(cl)) {
		/* a stored credential ends the pending state at once */
		cl_cred_fetch(cl, CRED_PEEK, connect_cred,
		              (void *)(uintptr_t)(boot ? HOW_BOOT : HOW_ADD),
		              corr);
		return;
	}
	connect_now(cl, corr, MSG_CL_CONNECT, boot);
}

static int
on_reconnect(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	/* (a reply its asker gave up on is counted late, not a failure) */
	if (!cl->cfg->sticky) {
		(void)kn_reply_why(
		        self, kn_defer(msg), MK_EINVAL,
		        "client uses per-call connections; there is no persistent connection to reconnect");
	} else if (cl->state == CS_DISABLED) {
		(void)kn_reply_why(
		        self, kn_defer(msg), MK_ESTATE,
		        "MCP client %s is disabled: enable it first",
		        cl->cfg->name);
	} else {
		cl_dial_start(cl, DIAL_RECONNECT, kn_defer(msg),
		              msg->env.type);
	}
	return (0);
}

static void
do_disable(client *cl)
{
	if (cl->state != CS_DISABLED) {
		cl_check_abort(cl);
		cl_conn_close_all(cl);
		cl_call_run_queued(cl, "MCP client was disabled");
		cl_call_drop_held(cl, "MCP client was disabled", false);
		cl_set_state(cl, CS_DISABLED);
		cl_loop_release(cl); /* no fds while disabled */
	}
}

/* An API disable or enable is part of the config: stored, so it holds
 * after a restart and on every node. */
static void
keep_disabled(client *cl, bool disabled)
{
	if (cl->cfg->disabled != disabled &&
	    json_object_set_new(cl->cfg->raw, "disabled",
	                        json_boolean(disabled)) == 0) {
		cl->cfg->disabled = disabled;
		cl_persist_config(cl);
	}
}

/* An API change's ticket (disable, enable, update): its config write
 * carries it, and the config it replaces is kept for an undo; 0 when the
 * change is not the API's. */
static void
take_ticket(client *cl, int64_t t)
{
	cl->ticket = (uint64_t)t;
	if (t != 0) {
		json_decref(cl->undo);
		cl->undo = cfg_client_stored(cl->cfg);
	}
}

static int
on_disable(kn_actor *self, client *cl, kn_msg *msg, cl_ticket_msg *m)
{
	take_ticket(cl, m->ticket);
	keep_disabled(cl, true);
	do_disable(cl);
	cl->ticket = 0;
	(void)kn_reply(self, msg, 0, CODEC_EMPTY, CODEC_EMPTY_LEN);
	return (0);
}

static void
enable_corr(client *cl, uint64_t corr, uint32_t type)
{
	if (cl->state != CS_DISABLED) {
		cl_reply_ok(cl, corr);
		return;
	}
	if (cl_cred_needed(cl) && !cfg_acts_alone(cl->cfg)) {
		cl_set_state(cl, CS_PENDING); /* until the credential says */
		cl_cred_fetch(cl, CRED_PEEK, connect_cred,
		              (void *)(uintptr_t)HOW_ENABLE, corr);
		return;
	}
	if (cl->cfg->auth != CFG_AUTH_NONE &&
	    cl->cfg->auth != CFG_AUTH_HEADERS && !cfg_acts_alone(cl->cfg)) {
		cl_set_state(cl, CS_PENDING);
		cl_reply_ok(cl, corr);
		return;
	}
	/* out of disabled; what it is now the connect decides (and only
	 * that is published: no made-up state in between) */
	(void)cl_state_enter(cl, CS_UNSTABLE, CL_BY_ADMIN);
	cl_dial_start(cl, DIAL_RECONNECT, corr, type);
}

static int
on_enable(kn_actor *self, client *cl, kn_msg *msg, cl_ticket_msg *m)
{
	take_ticket(cl, m->ticket);
	keep_disabled(cl, false);
	enable_corr(cl, kn_defer(msg), msg->env.type);
	cl->ticket = 0;
	return (0);
}

/* The effective intervals: the config's own, else the global ones. */
static void
apply_intervals(client *cl)
{
	cl_era_intervals(cl); /* sync_ms */
	cl->exec_ms = cl->cfg->exec_ms ? cl->cfg->exec_ms : cl->def_exec_ms;
	cl_call_kick(cl); /* max_concurrent_calls may have risen */
}

static const char *const immutable[] = {
        "name",      "client_id", "connection_type", "connection_string",
        "auth_type", NULL};

/* Config fields whose change needs a new connection; the others
 * (tools_to_execute, tool_sync_interval, tool_execution_timeout,
 * is_ping_available, disabled) apply in place. */
static const char *const conn_fields[] = {"connection_type",
                                          "connection_string",
                                          "headers",
                                          "stdio_config",
                                          "auth_type",
                                          "oauth_config",
                                          "token_exchange",
                                          "per_user_header_keys",
                                          "needs_session_stickiness",
                                          NULL};

/* Whether key differs between a and b; absent from both is no change
 * (json_equal is false when both are NULL). */
static bool
field_changed(json_t *a, json_t *b, const char *key)
{
	json_t *x = json_object_get(a, key), *y = json_object_get(b, key);

	return ((x == NULL) != (y == NULL) ||
	        (x != NULL && !json_equal(x, y)));
}

/* Whether two literal masks (config.h) differ at key. */
static bool
literal_changed(json_t *a, json_t *b, const char *key)
{
	json_t *x = json_is_true(a) ? a : json_object_get(a, key);
	json_t *y = json_is_true(b) ? b : json_object_get(b, key);

	return ((x == NULL) != (y == NULL) ||
	        (x != NULL && !json_equal(x, y)));
}

/* Applies a config patch: immutable fields refused, the result
 * validated as a whole; a change of credentials or connection re-dials
 * (make-before-break for a sticky client), refused while a dial runs.
 * An API patch is merged and literal where it brings an env. string
 * (cfg_literal_patched); a file's ("file") is the whole new config,
 * resolved as a file's; a stored one ("stored": another node wrote it)
 * is the whole config with its literal mask, and changes nothing when
 * it is this one's. */
static void
apply_update(client *cl, kn_msg *msg, const cl_update_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	char        err[CFG_ERR_MAX];
	json_t     *patch, *merged, *lit;
	cfg_client *ncfg;
	bool        redial = false, was_sticky = cl->cfg->sticky;
	bool        file = m->file, stored = m->stored;
	int         rv, mode;

	patch = m->patch != NULL ? json_loads(m->patch, 0, NULL) : NULL;
	if (m->undo) {
		/* the whole config the refused change replaced */
		json_decref(patch);
		patch  = cl->undo != NULL ? json_deep_copy(cl->undo) : NULL;
		stored = true;
		file   = false;
		if (patch == NULL) {
			cl_reply_ok(cl, corr);
			return;
		}
	}
	if (!json_is_object(patch)) {
		json_decref(patch);
		kn_reply_why(cl->self, corr, MK_EINVAL,
		             "the update must be a JSON object");
		return;
	}
	json_t *slit = NULL; /* a stored config's literal mask */
	if (stored) {
		slit = json_incref(json_object_get(patch, CFG_LITERAL_KEY));
		json_object_del(patch, CFG_LITERAL_KEY);
		if (json_equal(patch, cl->cfg->raw) &&
		    (slit == NULL) == (cl->cfg->literal == NULL) &&
		    (slit == NULL || json_equal(slit, cl->cfg->literal))) {
			json_decref(patch);
			json_decref(slit);
			cl_reply_ok(cl, corr); /* this node's already */
			return;
		}
	} else if (!file) {
		/* a view sent back keeps the secrets it could not see */
		cfg_unredact(patch, cl->cfg);
	}
	/* the id as the view shows it (a generated one is not in raw) */
	json_t *given = json_object_get(patch, "client_id");
	if (!file && !stored && json_is_string(given) &&
	    strcmp(json_string_value(given), cl->cfg->id) == 0) {
		json_object_del(patch, "client_id");
	}
	for (int i = 0; immutable[i] != NULL; i++) {
		if (json_object_get(patch, immutable[i]) != NULL &&
		    field_changed(patch, cl->cfg->raw, immutable[i])) {
			json_decref(patch);
			json_decref(slit);
			kn_reply_why(
			        cl->self, corr, MK_EINVAL,
			        "client \"%s\": field \"%s\" cannot be changed",
			        cl->cfg->name, immutable[i]);
			return;
		}
	}
	if (file || stored) {
		merged = json_deep_copy(patch);
		lit    = slit;
	} else {
		merged = json_deep_copy(cl->cfg->raw);
		json_object_update(merged, patch);
		lit = cfg_literal_patched(cl->cfg, patch);
	}
	json_decref(patch);
	for (int i = 0; conn_fields[i] != NULL; i++) {
		redial |= field_changed(merged, cl->cfg->raw, conn_fields[i]);
		/* the same text resolved another way is another value */
		redial |=
		        literal_changed(lit, cl->cfg->literal, conn_fields[i]);
	}
	/* a new OAuth config of an oauth client is a rotation: the
	 * credential actor voids the old grant and the client waits for a
	 * reauthorization instead of dialing with it */
	bool rotated = cl_cred_needed(cl) &&
	        field_changed(merged, cl->cfg->raw, "oauth_config");
	if (rotated && cl->cfg->auth == CFG_AUTH_OAUTH) {
		redial = false;
	}
	if (redial && cl->dial != NULL) {
		json_decref(merged);
		json_decref(lit);
		kn_reply_why(
		        cl->self, corr, MK_EBUSY,
		        "reconnect or connection credential update already in progress for MCP client %s",
		        cl->cfg->name);
		return;
	}
	rv = cfg_client_parse(merged, lit, &ncfg, err, sizeof(err));
	json_decref(merged);
	json_decref(lit);
	if (rv == 0 && !stored &&
	    cl_cache_refuses(cl, ncfg, err, sizeof(err))) {
		cfg_client_free(&ncfg);
		rv = MK_EINVAL;
	}
	if (rv != 0) {
		kn_reply_why(cl->self, corr, rv == MK_ENOMEM ? rv : MK_EINVAL,
		             "%s", err);
		return;
	}
	/* the id is the client's identity: a generated one is kept */
	free(ncfg->id);
	ncfg->id = strdup(cl->cfg->id);
	mode     = cl_pin_mode(cl);
	cfg_client_free(&cl->cfg);
	cl->cfg = ncfg;
	cl_cache_clear(cl); /* (its ttls may have changed) */
	cl_pin_config(cl, mode);
	cl_cred_clear(cl); /* its header lines pointed into the old config */
	apply_intervals(cl);
	kn_log_client(ncfg->name);
	KN_INFO("client", "%s: config updated%s", ncfg->name,
	        redial ? "; reconnecting" : "");
	if (!stored) {
		/* (a stored one is there: written again, it could bring
		 * back a client another node has deleted since) */
		cl_persist_config(cl);
	}
	cl_cred_register(cl); /* a new OAuth config is a rotation there */
	if (ncfg->disabled && cl->state != CS_DISABLED) {
		do_disable(cl);
	} else if (!ncfg->disabled && cl->state == CS_DISABLED) {
		enable_corr(cl, corr, msg->env.type);
		return;
	} else if (redial && cl->state != CS_DISABLED &&
	           cl->state != CS_PENDING) {
		if (was_sticky && !ncfg->sticky) {
			cl_conn_close_all(
			        cl); /* now per-call: nothing stays */
		}
		/* make-before-break: the old session keeps its credentials
		 * and serves until the new one is up */
		cl_dial_start(cl, DIAL_RECONNECT, corr, msg->env.type);
		return;
	}
	cl_push_view(cl);
	cl_reply_ok(cl, corr);
}

static int
on_update(kn_actor *self, client *cl, kn_msg *msg, cl_update_msg *m)
{
	take_ticket(cl, m->undo ? 0 : m->ticket);
	apply_update(cl, msg, m);
	cl->ticket = 0;
	return (0);
}

static int
on_settings(kn_actor *self, client *cl, kn_msg *msg, cl_settings_msg *m)
{
	int mode = cl_pin_mode(cl);

	cl->def_sync_ms = m->sync_ms;
	cl->def_exec_ms = m->exec_ms;
	cl->def_changes = (int)m->changes;
	if (cl_pin_mode(cl) != mode) {
		cl_pin_config(cl, mode);
	}
	apply_intervals(cl);
	cl_push_view(cl); /* the supervisor reschedules on its sync_ms */
	return (0);
}

/* What holds of a client's sessions between two of its handlers: the
 * live one serves (a session of its own, not draining, not being freed);
 * a replaced one drains only while calls run on it (the last frees it);
 * a dial in progress is the client's, not ended, on a session of its
 * own.  O(1): the newest replaced one stands for the rest. */
static void
assert_sessions(const client *cl)
{
	const cl_sconn *l = cl->live, *d = cl->draining;

	assert(l == NULL ||
	       (l->cl == cl && l->s != NULL && !l->draining && !l->closing &&
	        l->inflight >= 0));
	assert(d == NULL ||
	       (d->cl == cl && d->draining && !d->closing && d->inflight > 0 &&
	        d != l));
	assert(cl->dial == NULL ||
	       (cl->dial->cl == cl && !cl->dial->ended &&
	        (cl->dial->c == NULL || cl->dial->c != l)));
	(void)l;
	(void)d;
}

/* What holds of a client between two of its handlers (SQLite's
 * assert_pager_state is the model): a state of its own (error is the
 * supervisor's), nothing dialled nor connected while disabled, its
 * sessions whole, and the queue of calls waiting for a slot whole (O(1):
 * it is checked on every message). */
static void
assert_client_state(const void *state)
{
	const client *cl = state;

	assert((unsigned)cl->state < CS_COUNT && cl->state != CS_ERROR);
	assert(cl->state != CS_DISABLED ||
	       (cl->dial == NULL && cl->live == NULL));
	assert_sessions(cl);
	assert((cl->held == NULL) == (cl->nheld == 0) &&
	       (cl->held == NULL) == (cl->held_tail == NULL) &&
	       (cl->held_tail == NULL || cl->held_tail->next == NULL));
	(void)cl;
}

static int
on_check(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	cl_check_start(cl, kn_defer(msg));
	return (0);
}

static int
on_approvals(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	cl_pin_start(cl, true);
	return (0);
}

static int
on_snapshot(kn_actor *self, client *cl, kn_msg *msg, codec_no *none)
{
	cl_snapshot(cl);
	return (0);
}

KN_ROUTES(cl_routes, cl_msgs, CL_MESSAGES);

const kn_actor_ops client_ops = {
        .routes = &cl_routes,
        .check  = assert_client_state,
        .init   = cl_init,
        .fini   = cl_fini,
        .wait   = cl_wait,
        .wake   = cl_wake,
};
