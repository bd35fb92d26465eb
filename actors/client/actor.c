/*
 * actor.c - the client actor's inbox, dispatch, state and guards,
 * last_failure, state stream and view (see client.h).
 *
 * DESIGN: one thread per client.  Its kernel wait is tp_loop_wait, so the
 * inbox eventfd, curl's sockets, stdio pipes and request deadlines wake
 * one curl_multi_poll().  Asks that need the network are deferred and
 * answered from the transport's callbacks.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/persister.h"
#include "actors/supervisor/supervisor.h"
#include "codec/envelope.h"
#include "codec/mp.h"
#include "codec/text.h"

/* A client's view (its tools, config and state) travels to the
 * supervisor in one message: the largest tool list leaves room. */
static_assert(MCP_MAX_TOOLS_BYTES <= CODEC_PAYLOAD_MAX / 2,
              "a view with the largest tool list fits in one message");

/* ---- replies ------------------------------------------------------------ */

void
reply_ok(client *cl, uint64_t corr)
{
	kn_reply_corr(kn_actor_kernel(cl->self), corr, 0, CODEC_EMPTY,
	              CODEC_EMPTY_LEN);
}

void
reply_state(client *cl, uint64_t corr)
{
	cl_state_msg m = {.state = cl->state};

	kn_reply_msg(kn_actor_kernel(cl->self), corr, 0, &cl_state_msg_fields,
	             &m);
}

int
mk_status_of(const mcp_error *e)
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
	default:
		return (MK_EUPSTREAM);
	}
}

/* ---- the stream and the view ---------------------------------------------
 */

static void
pack_failure(client *cl, mp_w *w)
{
	if (!cl->lf_set) {
		msgpack_pack_nil(&w->pk);
		return;
	}
	mp_map(w, 4);
	mp_kv_str(w, "stage", cl->lf_stage);
	mp_kv_str(w, "message", cl->lf_message);
	mp_kv_str(w, "at", cl->lf_at);
	mp_kv_str(w, "since", cl->lf_since);
}

/* The state shown: per-user clients project a dead admin (discovery)
 * credential as needs_reauth over healthy and unstable - shown on the
 * list and the stream, never the runtime's own state (calls go on). */
static cl_state
shown_state(const client *cl)
{
	return (cl->admin_dead &&
	                        (cl->state == CS_HEALTHY ||
	                         cl->state == CS_UNSTABLE)
	                ? CS_REAUTH
	                : cl->state);
}

static void
publish_state(client *cl, cl_state old)
{
	char ts[32];
	mp_w w;

	mp_w_init(&w);
	mp_map(&w, 9);
	mp_kv_str(&w, "client_id", cl->cfg->id);
	mp_kv_str(&w, "name", cl->cfg->name);
	mp_kv_str(&w, "state", cl_state_name(shown_state(cl)));
	mp_key(&w, "old_state"); /* nil: a new client's first state */
	mp_str(&w, cl->announced ? cl_state_name(old) : NULL);
	mp_key(&w, "last_failure");
	pack_failure(cl, &w);
	mp_kv_int(&w, "generation", (int64_t)cl->gen);
	mp_kv_int(&w, "tools_count", (int64_t)json_array_size(cl->tools));
	mp_kv_str(&w, "time", kn_rfc3339(ts, sizeof(ts)));
	mp_kv_str(&w, "node_id", cl->node_id);
	kn_stream_publish(cl->stream, "state", w.sb.data, w.sb.size);
	mp_w_fini(&w);
}

const int64_t cm_bounds_ms[CM_BUCKETS] = {5,   10,   25,   50,   100,   250,
                                          500, 1000, 2500, 5000, 10000, 30000};
static const char *const cm_stages[CM_STAGES] = {
        "connect",        "ping",           "list_tools",
        "tool_discovery", "transport_lost", "credential"};

void
cm_failure(client *cl, const char *stage)
{
	for (int i = 0; i < CM_STAGES; i++) {
		if (strcmp(stage, cm_stages[i]) == 0) {
			cl->m.failures[i]++;
		}
	}
}

void
cm_call(client *cl, const call *c, int outcome)
{
	int64_t us = (kn_now_ns() - c->t0) / 1000;
	int     b  = 0;

	cl->m.calls[outcome]++;
	while (b < CM_BUCKETS && us > cm_bounds_ms[b] * 1000) {
		b++;
	}
	cl->m.buckets[b]++;
	cl->m.sum_us += (uint64_t)(us > 0 ? us : 0);
}

/* The counters, as mk_client_metrics_json gives them. */
static json_t *
metrics_json(const client *cl)
{
	json_t *f = json_object(), *b = json_array();

	for (int i = 0; i < CM_STAGES; i++) {
		json_object_set_new(
		        f, cm_stages[i],
		        json_integer((json_int_t)cl->m.failures[i]));
	}
	for (int i = 0; i <= CM_BUCKETS; i++) {
		json_array_append_new(
		        b, json_integer((json_int_t)cl->m.buckets[i]));
	}
	return (json_pack("{s:I, s:I, s:o, s:{s:I, s:I, s:I, s:I}, s:o, s:I, "
	                  "s:{s:I, s:I, s:I}, s:I, s:I, s:I}",
	                  "transitions", (json_int_t)cl->m.transitions,
	                  "checks", (json_int_t)cl->m.checks, "failures", f,
	                  "calls", "ok", (json_int_t)cl->m.calls[CM_OK],
	                  "error", (json_int_t)cl->m.calls[CM_ERROR],
	                  "auth_required", (json_int_t)cl->m.calls[CM_AUTH],
	                  "refused", (json_int_t)cl->m.calls[CM_REFUSED],
	                  "latency_buckets", b, "latency_sum_us",
	                  (json_int_t)cl->m.sum_us, "recoveries", "per_call",
	                  (json_int_t)cl->m.recoveries[0], "shared",
	                  (json_int_t)cl->m.recoveries[1], "session",
	                  (json_int_t)cl->m.recoveries[2], "retries_skipped",
	                  (json_int_t)cl->m.skipped, "relists",
	                  (json_int_t)cl->m.relists, "connect_failures_in_row",
	                  (json_int_t)cl->fails));
}

static void
on_metrics(client *cl, kn_msg *msg)
{
	json_t *m    = metrics_json(cl);
	char   *text = m != NULL ? json_dumps(m, JSON_COMPACT) : NULL;

	json_decref(m);
	if (text == NULL) {
		kn_reply_error(kn_actor_kernel(cl->self), kn_defer(msg),
		               MK_ENOMEM, "out of memory");
		return;
	}
	cl_metrics_msg out = {.json = text};
	kn_reply_msg(kn_actor_kernel(cl->self), kn_defer(msg), 0,
	             &cl_metrics_msg_fields, &out);
	free(text);
}

/* The config as given, with its client_id (generated ones too). */
static json_t *
view_config(const client *cl)
{
	json_t *c = cfg_client_redacted(cl->cfg);

	if (c != NULL) {
		json_object_set_new(c, "client_id", json_string(cl->cfg->id));
	}
	return (c);
}

static json_t *
view_json(client *cl)
{
	const char *state = cl_state_name(shown_state(cl));
	json_t     *v     = json_pack(
	                "{s:o*, s:o*, s:s, s:s, s:I}", "config", view_config(cl),
	                "tools", cl->tools ? tools_sorted(cl->tools) : json_array(),
	                "state", state, "connection_mode",
                cl->cfg->sticky ? "sticky" : "per_call", "generation",
	                (json_int_t)cl->gen);

	if (v != NULL && cl->lf_set) {
		json_object_set_new(v, "last_failure",
		                    json_pack("{s:s, s:s, s:s, s:s}", "stage",
		                              cl->lf_stage, "message",
		                              cl->lf_message, "at", cl->lf_at,
		                              "since", cl->lf_since));
	}
	return (v);
}

void
client_push_view(client *cl)
{
	json_t *v    = view_json(cl);
	char   *text = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;

	json_decref(v);
	if (text == NULL) {
		KN_ERROR("client", "%s: cannot build the client view",
		         cl->cfg->name);
		return;
	}
	sv_view_msg m = {.id      = cl->cfg->id,
	                 .name    = cl->cfg->name,
	                 .state   = cl->state,
	                 .shown   = shown_state(cl),
	                 .view    = text,
	                 .sync_ms = cl->sync_ms};
	if (kn_tell_msg(cl->sv, cl->self, MSG_SV_VIEW,
	                CODEC_OF(sv_view_msg, &m)) != 0) {
		KN_DEBUG("client", "%s: supervisor did not take the view",
		         cl->cfg->name);
	}
	free(text);
}

/* ---- state and last_failure ------------------------------------------------
 */

/* Publishes the state if it differs from the one last published (or
 * was never published), else just refreshes the view. */
void
client_transition(client *cl)
{
	cl_state old = cl->shown, now = shown_state(cl);

	if (now == old && cl->announced) {
		client_push_view(cl);
		return;
	}
	if (cl->lf_set) {
		KN_INFO("client", "%s: %s -> %s (stage %s: %s)", cl->cfg->name,
		        cl_state_name(old), cl_state_name(now), cl->lf_stage,
		        cl->lf_message);
	} else {
		KN_INFO("client", "%s: %s -> %s", cl->cfg->name,
		        cl_state_name(old), cl_state_name(now));
	}
	/* the supervisor has the view before anyone hears of the change */
	client_push_view(cl);
	publish_state(cl, old);
	cl->m.transitions++;
	cl->shown     = now;
	cl->announced = true;
}

/*
 * The client's state machine: every change of cl->state goes through
 * client_state_enter, which lets it through only when this table allows
 * from -> to for its cause.  A result (a check, a dial, a call's
 * transport) moves only between healthy and unstable: the authoritative
 * states (disabled, needs_reauth, pending_verification) are never
 * overwritten by one.  An admin's act disables from anywhere and
 * enables out of disabled; the credential's word makes needs_reauth
 * from a live or pending client and ends needs_reauth or pending
 * (unstable: the connect that follows decides).
 */
#define TO(s) (1u << (s))
static const unsigned allowed[CL_BY_COUNT][CS_COUNT] = {
        [CL_BY_RESULT] =
                {
                        [CS_HEALTHY]  = TO(CS_HEALTHY) | TO(CS_UNSTABLE),
                        [CS_UNSTABLE] = TO(CS_HEALTHY) | TO(CS_UNSTABLE),
                },
        [CL_BY_ADMIN] =
                {
                        [CS_HEALTHY]  = TO(CS_DISABLED),
                        [CS_UNSTABLE] = TO(CS_DISABLED),
                        [CS_REAUTH]   = TO(CS_DISABLED),
                        [CS_PENDING]  = TO(CS_DISABLED),
                        [CS_DISABLED] = TO(CS_UNSTABLE) | TO(CS_PENDING),
                },
        [CL_BY_CRED] =
                {
                        [CS_HEALTHY]  = TO(CS_REAUTH),
                        [CS_UNSTABLE] = TO(CS_REAUTH),
                        [CS_REAUTH]   = TO(CS_REAUTH) | TO(CS_UNSTABLE),
                        [CS_PENDING]  = TO(CS_REAUTH) | TO(CS_UNSTABLE),
                },
};
#undef TO

bool
client_state_enter(client *cl, cl_state to, cl_cause by)
{
	static const char *const causes[] = {"a result", "an admin",
	                                     "the credential"};
	cl_state                 from     = cl->state;

	if ((allowed[by][from] & (1u << to)) == 0) {
		if (by != CL_BY_RESULT) {
			/* (a result meeting an authoritative state is the
			 * guard at work; anything else is a bug) */
			KN_ERROR("client",
			         "%s: %s -> %s by %s is not a transition of "
			         "the state machine: refused",
			         cl->cfg->name, cl_state_name(from),
			         cl_state_name(to), causes[by]);
		}
		return (false);
	}
	cl->state = to;
	return (true);
}

void
client_set_state(client *cl, cl_state s)
{
	if (!client_state_enter(cl, s, CL_BY_ADMIN)) {
		return;
	}
	if (s == CS_DISABLED || s == CS_PENDING) {
		/* changed without a failed attempt: no reason to carry */
		cl->lf_set = false;
	}
	client_transition(cl);
}

bool
client_failure(client *cl, const char *stage, const char *message)
{
	char *norm = text_failure_message(message);

	if (norm == NULL) {
		return (false);
	}
	kn_rfc3339(cl->lf_at, sizeof(cl->lf_at));
	if (!cl->lf_set) {
		memcpy(cl->lf_since, cl->lf_at, sizeof(cl->lf_since));
	}
	free(cl->lf_message);
	cl->lf_message = norm;
	snprintf(cl->lf_stage, sizeof(cl->lf_stage), "%s", stage);
	cl->lf_set = true;
	cm_failure(cl, stage);
	KN_DEBUG("client", "%s: %s failed: %s", cl->cfg->name, stage, norm);
	return (true);
}

void
client_fail(client *cl, cl_state s, const char *stage, const char *message)
{
	/* authoritative states are never overwritten by a result */
	if ((allowed[CL_BY_RESULT][cl->state] & (1u << s)) == 0 ||
	    !client_failure(cl, stage, message)) {
		return;
	}
	(void)client_state_enter(cl, s, CL_BY_RESULT);
	client_transition(cl); /* or, unchanged, a view with the new "at" */
}

void
client_pass(client *cl)
{
	if ((cl->state == CS_HEALTHY && !cl->lf_set && cl->announced) ||
	    !client_state_enter(cl, CS_HEALTHY, CL_BY_RESULT)) {
		return; /* nothing changed: no view to push */
	}
	cl->lf_set = false;
	client_transition(cl);
}

void
client_set_tools(client *cl, json_t *tools)
{
	char hash[TOOLS_HASH_HEX];
	mp_w w;

	if (tools_hash(tools, hash) != 0 || strcmp(hash, cl->hash) == 0) {
		return; /* unchanged: no event, no write */
	}
	json_decref(cl->tools);
	cl->tools = json_incref(tools);
	memcpy(cl->hash, hash, sizeof(hash));
	mp_w_init(&w);
	mp_map(&w, 4);
	mp_kv_str(&w, "client_id", cl->cfg->id);
	mp_kv_str(&w, "name", cl->cfg->name);
	mp_kv_str(&w, "hash", cl->hash);
	mp_kv_int(&w, "count", (int64_t)json_array_size(tools));
	client_push_view(cl);
	kn_stream_publish(cl->stream, "tools", w.sb.data, w.sb.size);
	mp_w_fini(&w);
	if (cl->ps != NULL) {
		ps_tools_msg m = {.id    = cl->cfg->id,
		                  .hash  = cl->hash,
		                  .tools = json_dumps(tools, JSON_COMPACT)};
		if (m.tools == NULL ||
		    kn_tell_msg(cl->ps, cl->self, MSG_PS_TOOLS_PUT,
		                CODEC_OF(ps_tools_msg, &m)) != 0) {
			KN_ERROR("client",
			         "%s: the changed tool list was not "
			         "stored",
			         cl->cfg->name);
		}
		free(m.tools);
	}
}

void
client_save_once(client *cl)
{
	if (cl->unsaved) {
		cl->unsaved = false;
		client_persist_config(cl);
	}
}

void
client_persist_config(client *cl)
{
	ps_client_msg m = {.id = cl->cfg->id, .name = cl->cfg->name};

	if (cl->ps == NULL) {
		return;
	}
	json_t *stored = cfg_client_stored(cl->cfg); /* its literal mask too */
	m.config = stored != NULL ? json_dumps(stored, JSON_COMPACT) : NULL;
	json_decref(stored);
	if (m.config == NULL ||
	    kn_tell_msg(cl->ps, cl->self, MSG_PS_CLIENT_PUT,
	                CODEC_OF(ps_client_msg, &m)) != 0) {
		KN_ERROR("client", "%s: the config was not stored",
		         cl->cfg->name);
	}
	free(m.config);
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
	waker_init(&cl->wk); /* the loop comes with the first network work */
	cl->self = self;
	cl->cfg  = a->cfg;
	a->cfg   = NULL; /* ours now */
	cl->sv   = kn_actor_hold(a->supervisor);
	cl->ps   = a->persister != NULL ? kn_actor_hold(a->persister) : NULL;
	cl->cr   = a->credential != NULL ? kn_actor_hold(a->credential) : NULL;
	cl->stream      = a->stream;
	cl->node_id     = a->node_id;
	cl->sync_ms     = cl->cfg->sync_ms ? cl->cfg->sync_ms : a->sync_ms;
	cl->exec_ms     = cl->cfg->exec_ms ? cl->cfg->exec_ms : a->exec_ms;
	cl->def_sync_ms = a->sync_ms;
	cl->def_exec_ms = a->exec_ms;
	cl->tools       = json_array();
	cl->state       = cl->cfg->disabled ? CS_DISABLED
	              : cl->cfg->auth == CFG_AUTH_NONE ||
                        cl->cfg->auth == CFG_AUTH_HEADERS
	              ? CS_UNSTABLE /* until the first connect says otherwise */
	              : CS_PENDING; /* credentials are verified by an admin first */
	cl->shown       = cl->state;
	kn_set_wake_arg(self, &cl->wk);
	/* an idle client keeps one connection (3 fds with curl's wake-up
	 * pair); calls raise it as they need (call.c) */
	cl->maxconn = 1;
	cred_register(cl);
	/* the list shows the client while its first connect runs (in the
	 * state it starts in: there is no "connecting" state) */
	json_t *v = view_json(cl);
	a->view   = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	a->state = shown_state(cl);
	*statep  = cl;
	return (0);
}

static void
cl_fini(kn_actor *self, void *state)
{
	client *cl = state;

	check_abort(cl);
	call_run_queued(cl, "MCP client is shutting down");
	conn_close_all(cl);
	call_end_all(cl, "MCP client is shutting down");
	client_loop_free(cl);
	cred_forget(cl);
	cred_clear(cl);
	cred_fini(cl);
	if (cl->cr != NULL) {
		kn_actor_release(&cl->cr);
	}
	json_decref(cl->tools);
	free(cl->lf_message);
	kn_actor_release(&cl->sv);
	if (cl->ps != NULL) {
		kn_actor_release(&cl->ps);
	}
	cfg_client_free(&cl->cfg);
	waker_fini(&cl->wk);
	free(cl);
}

/* The first connect (or discovery), once the state allows it. */
static void
connect_now(client *cl, uint64_t corr, uint32_t type, bool boot)
{
	if (cl->state == CS_DISABLED || cl->state == CS_PENDING ||
	    cl->state == CS_REAUTH) {
		client_save_once(cl);
		client_push_view(cl);
		reply_ok(cl, corr);
		return;
	}
	if (!cl->cfg->sticky && cl->hash[0] != '\0') {
		client_save_once(cl);
		/* per-call with known tools: no synchronous discovery; the
		 * periodic check revisits it */
		client_pass(cl);
		reply_ok(cl, corr);
		return;
	}
	dial_start(cl, boot ? DIAL_BOOT : DIAL_ADD, corr, type);
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
		(void)client_state_enter(cl, CS_UNSTABLE, CL_BY_CRED);
	}
	if (how == HOW_ENABLE && cl->state == CS_UNSTABLE) {
		dial_start(cl, DIAL_RECONNECT, corr, MSG_CL_ENABLE);
		return;
	}
	connect_now(cl, corr, MSG_CL_CONNECT, how == HOW_BOOT);
}

static void
on_connect(client *cl, kn_msg *msg)
{
	cl_connect_msg m;
	bool           boot;
	char          *known;
	json_t        *tools = NULL;

	(void)cl_connect_msg_unpack(msg->env.payload, msg->env.payload_len,
	                            &m);
	boot        = m.boot;
	known       = m.tools;
	cl->unsaved = !m.restored;
	if (known != NULL && (tools = json_loads(known, 0, NULL)) != NULL &&
	    json_is_array(tools) && tools_hash(tools, cl->hash) == 0) {
		/* restored from the store: seeds the hash, no event, no write
		 */
		json_decref(cl->tools);
		cl->tools = json_incref(tools);
	}
	free(known);
	json_decref(tools);
	if (cl->state == CS_PENDING && cred_needed(cl)) {
		/* a stored credential ends the pending state at once */
		uint64_t corr = kn_defer(msg);
		cred_fetch(cl, CRED_PEEK, connect_cred,
		           (void *)(uintptr_t)(boot ? HOW_BOOT : HOW_ADD),
		           corr);
		return;
	}
	connect_now(cl, kn_defer(msg), msg->env.type, boot);
}

static void
on_reconnect(client *cl, kn_msg *msg)
{
	if (!cl->cfg->sticky) {
		kn_reply_why(cl->self, kn_defer(msg), MK_EINVAL,
		             "client uses per-call connections; there is no "
		             "persistent "
		             "connection to reconnect");
		return;
	}
	if (cl->state == CS_DISABLED) {
		kn_reply_why(cl->self, kn_defer(msg), MK_ESTATE,
		             "MCP client %s is disabled: enable it first",
		             cl->cfg->name);
		return;
	}
	dial_start(cl, DIAL_RECONNECT, kn_defer(msg), msg->env.type);
}

static void
do_disable(client *cl)
{
	if (cl->state != CS_DISABLED) {
		check_abort(cl);
		conn_close_all(cl);
		call_run_queued(cl, "MCP client was disabled");
		client_set_state(cl, CS_DISABLED);
		client_loop_release(cl); /* no fds while disabled */
	}
}

static void
on_disable(client *cl, kn_msg *msg)
{
	do_disable(cl);
	kn_reply(cl->self, msg, 0, CODEC_EMPTY, CODEC_EMPTY_LEN);
}

static void
enable_corr(client *cl, uint64_t corr, uint32_t type)
{
	if (cl->state != CS_DISABLED) {
		reply_ok(cl, corr);
		return;
	}
	if (cred_needed(cl)) {
		client_set_state(cl,
		                 CS_PENDING); /* until the credential says */
		cred_fetch(cl, CRED_PEEK, connect_cred,
		           (void *)(uintptr_t)HOW_ENABLE, corr);
		return;
	}
	if (cl->cfg->auth != CFG_AUTH_NONE &&
	    cl->cfg->auth != CFG_AUTH_HEADERS) {
		client_set_state(cl, CS_PENDING);
		reply_ok(cl, corr);
		return;
	}
	/* out of disabled; what it is now the connect decides (and only
	 * that is published: no made-up state in between) */
	(void)client_state_enter(cl, CS_UNSTABLE, CL_BY_ADMIN);
	dial_start(cl, DIAL_RECONNECT, corr, type);
}

static void
on_enable(client *cl, kn_msg *msg)
{
	enable_corr(cl, kn_defer(msg), msg->env.type);
}

/* The effective intervals: the config's own, else the global ones. */
static void
apply_intervals(client *cl)
{
	cl->sync_ms = cl->cfg->sync_ms ? cl->cfg->sync_ms : cl->def_sync_ms;
	cl->exec_ms = cl->cfg->exec_ms ? cl->cfg->exec_ms : cl->def_exec_ms;
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
 * resolved as a file's. */
static void
on_update(client *cl, kn_msg *msg)
{
	uint64_t      corr = kn_defer(msg);
	char          err[CFG_ERR_MAX];
	json_t       *patch, *merged, *lit;
	cfg_client   *ncfg;
	bool          redial = false, was_sticky = cl->cfg->sticky, file;
	cl_update_msg m;
	int           rv;

	(void)cl_update_msg_unpack(msg->env.payload, msg->env.payload_len, &m);
	file  = m.file;
	patch = m.patch != NULL ? json_loads(m.patch, 0, NULL) : NULL;
	cl_update_msg_clear(&m);
	if (!json_is_object(patch)) {
		json_decref(patch);
		kn_reply_why(cl->self, corr, MK_EINVAL,
		             "the update must be a JSON object");
		return;
	}
	if (!file) {
		/* a view sent back keeps the secrets it could not see */
		cfg_unredact(patch, cl->cfg);
	}
	/* the id as the view shows it (a generated one is not in raw) */
	json_t *given = json_object_get(patch, "client_id");
	if (!file && json_is_string(given) &&
	    strcmp(json_string_value(given), cl->cfg->id) == 0) {
		json_object_del(patch, "client_id");
	}
	for (int i = 0; immutable[i] != NULL; i++) {
		if (json_object_get(patch, immutable[i]) != NULL &&
		    field_changed(patch, cl->cfg->raw, immutable[i])) {
			json_decref(patch);
			kn_reply_why(cl->self, corr, MK_EINVAL,
			             "client \"%s\": field \"%s\" cannot be "
			             "changed",
			             cl->cfg->name, immutable[i]);
			return;
		}
	}
	if (file) {
		merged = json_deep_copy(patch);
		lit    = NULL;
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
	bool rotated = cred_needed(cl) &&
	        field_changed(merged, cl->cfg->raw, "oauth_config");
	if (rotated && cl->cfg->auth == CFG_AUTH_OAUTH) {
		redial = false;
	}
	if (redial && cl->dial != NULL) {
		json_decref(merged);
		json_decref(lit);
		kn_reply_why(
		        cl->self, corr, MK_EBUSY,
		        "reconnect or connection credential update already in "
		        "progress for MCP client %s",
		        cl->cfg->name);
		return;
	}
	rv = cfg_client_parse(merged, lit, &ncfg, err, sizeof(err));
	json_decref(merged);
	json_decref(lit);
	if (rv != 0) {
		kn_reply_why(cl->self, corr, rv == MK_ENOMEM ? rv : MK_EINVAL,
		             "%s", err);
		return;
	}
	/* the id is the client's identity: a generated one is kept */
	free(ncfg->id);
	ncfg->id = strdup(cl->cfg->id);
	cfg_client_free(&cl->cfg);
	cl->cfg = ncfg;
	cred_clear(cl); /* its header lines pointed into the old config */
	apply_intervals(cl);
	KN_INFO("client", "%s: config updated%s", ncfg->name,
	        redial ? "; reconnecting" : "");
	client_persist_config(cl);
	cred_register(cl); /* a new OAuth config is a rotation there */
	if (ncfg->disabled && cl->state != CS_DISABLED) {
		do_disable(cl);
	} else if (!ncfg->disabled && cl->state == CS_DISABLED) {
		enable_corr(cl, corr, msg->env.type);
		return;
	} else if (redial && cl->state != CS_DISABLED &&
	           cl->state != CS_PENDING) {
		if (was_sticky && !ncfg->sticky) {
			conn_close_all(cl); /* now per-call: nothing stays */
		}
		/* make-before-break: the old session keeps its credentials
		 * and serves until the new one is up */
		dial_start(cl, DIAL_RECONNECT, corr, msg->env.type);
		return;
	}
	client_push_view(cl);
	reply_ok(cl, corr);
}

static void
on_settings(client *cl, kn_msg *msg)
{
	cl_settings_msg m;

	if (cl_settings_msg_unpack(msg->env.payload, msg->env.payload_len,
	                           &m) == 0) {
		cl->def_sync_ms = m.sync_ms;
		cl->def_exec_ms = m.exec_ms;
	}
	apply_intervals(cl);
	client_push_view(cl); /* the supervisor reschedules on its sync_ms */
}

static int
cl_handle(kn_actor *self, void *state, kn_msg *msg)
{
	client *cl = state;

	switch (msg->env.type) {
	case MSG_CL_CONNECT:
		on_connect(cl, msg);
		return (0);
	case MSG_CL_CHECK:
		check_start(cl, kn_defer(msg));
		return (0);
	case MSG_CL_CALL:
		call_start(cl, msg);
		return (0);
	case MSG_CL_RECONNECT:
		on_reconnect(cl, msg);
		return (0);
	case MSG_CL_DISABLE:
		on_disable(cl, msg);
		return (0);
	case MSG_CL_ENABLE:
		on_enable(cl, msg);
		return (0);
	case MSG_CL_UPDATE:
		on_update(cl, msg);
		return (0);
	case MSG_CL_CRED:
		cred_on_notice(cl, msg);
		return (0);
	case MSG_CL_METRICS:
		on_metrics(cl, msg);
		return (0);
	case MSG_CL_SETTINGS:
		on_settings(cl, msg);
		return (0);
	default:
		assert(!"client: unexpected message");
		return (MK_EINTERNAL);
	}
}

const kn_actor_ops client_ops = {
        .init   = cl_init,
        .handle = cl_handle,
        .fini   = cl_fini,
        .wait   = cl_wait,
        .wake   = cl_wake,
};
