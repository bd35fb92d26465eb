/*
 * session.c - the MCP client session: initialize, the pending-request
 * table and its deadlines, incoming messages and upcalls, lifetime (see
 * mcp.h for the DESIGN and the state diagram; the requests are
 * request.c's, the server's requests and log messages inbound.c's).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/idmap.h"
#include "codec/jsonrpc.h"
#include "codec/text.h"
#include "mcpkeep.h"
#include "transport/conn.h"
#include "transport/mcp.h"
#include "transport/session_impl.h"

static const char *const versions[] = {"2025-11-25", "2025-06-18",
                                       "2025-03-26", "2024-11-05"};

bool
mcp_version_supported(const char *v)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		if (strcmp(v, versions[i]) == 0) {
			return (true);
		}
	}
	return (false);
}

bool
mcp_session_ready(const mcp_session *s)
{
	return (s->st == ST_READY);
}

const char *
mcp_session_version(const mcp_session *s)
{
	return (s->version);
}

json_t *
mcp_session_server_info(const mcp_session *s)
{
	return (s->server_info);
}

json_t *
mcp_session_server_caps(const mcp_session *s)
{
	return (s->server_caps);
}

int64_t
mcp_session_cause(const mcp_session *s)
{
	return (s->cause);
}

unsigned
mcp_session_pending(const mcp_session *s)
{
	return ((unsigned)s->pending.count);
}

bool
mcp_session_modern(const mcp_session *s)
{
	return (s->modern);
}

/* ---- pending requests ------------------------------------------------ */

void
session_pend_free(pend *p)
{
	json_decref(p->items);
	json_decref(p->cursors);
	text_strv_free(p->headers);
	json_decref(p->params);
	json_decref(p->tool);
	free(p->trace[0]);
	free(p->trace[1]);
	json_decref(p->responses);
	json_decref(p->state);
	free(p->refused);
	free(p);
}

/* Completes p (already out of the table) and frees it. */
void
session_complete(mcp_session *s, pend *p, const mcp_error *err, json_t *result)
{
	if (p->inputs > 0) {
		modern_drop_inputs(s, p);
	}
	if (p->fn != NULL) {
		s->depth++;
		p->fn(p->arg, err, result);
		s->depth--;
	}
	session_pend_free(p);
}

const char *
session_method_of(const pend *p)
{
	static const char *names[] = {
	        "initialize",      "ping",
	        "tools/list",      "tools/call",
	        "server/discover", "subscriptions/listen"};

	return (p->kind == P_LIST           ? mcp_list_method(p->list)
	                : p->method != NULL ? p->method
	                                    : names[p->kind]);
}

/* What p's request sends: params, its progress token (the request id)
 * and, in the 2026-07-28 revision, the per-request _meta.  A new
 * reference, or NULL. */
static json_t *
wire_params(mcp_session *s, pend *p, json_t *params)
{
	json_t *w;

	if (s->modern || p->kind == P_DISCOVER) {
		w = modern_params(s, params, p->trace[0], p->trace[1]);
	} else if (p->progress != NULL) {
		w = params != NULL ? json_copy(params) : json_object();
	} else {
		return (params != NULL ? json_incref(params) : NULL);
	}
	if (w != NULL && p->progress != NULL) {
		json_t *meta = json_object_get(w, "_meta");
		if (!json_is_object(meta)) {
			json_object_set_new(w, "_meta", meta = json_object());
		}
		json_object_set_new(meta, "progressToken",
		                    json_integer((json_int_t)p->id));
	}
	return (w);
}

/* Whether a request of method on tool (its object, or NULL) must not go
 * twice: a tools/call of a tool that is not readOnly, is destructive and
 * not idempotent (MCP's defaults for an unannotated one). */
static bool
twice_unsafe(const char *method, json_t *tool)
{
	mcp_hints h;

	if (strcmp(method, "tools/call") != 0) {
		return (false);
	}
	mcp_tool_hints(tool, &h);
	return (!h.read_only && h.destructive && !h.idempotent);
}

/* Serializes and sends a request for p, entering it in the table.  A
 * negative timeout_ms is no deadline (subscriptions/listen). */
int
session_send_request(mcp_session *s, pend *p, json_t *params,
                     const char *const *headers)
{
	const char *method = p->kind == P_PING && s->modern
	        ? "server/discover"
	        : session_method_of(p);
	char      **hv     = NULL;
	json_t     *w;
	char       *json;
	int         rv;

	p->id       = ++s->next_id;
	p->deadline = p->timeout_ms < 0
	        ? INT64_MAX
	        : tp_now_ns() + (int64_t)p->timeout_ms * 1000000;
	if (params != p->params) { /* kept for a resend */
		json_decref(p->params);
		p->params = params != NULL ? json_incref(params) : NULL;
	}
	w = wire_params(s, p, params);
	if ((s->modern || p->kind == P_DISCOVER) && s->http) {
		hv      = modern_headers(method, w, p->tool, headers);
		headers = (const char *const *)hv;
		if (hv == NULL) {
			json_decref(w);
			return (MK_ENOMEM);
		}
	}
	json = codec_jr_request(p->id, method, w);
	json_decref(w);
	if (json == NULL) {
		text_strv_free(hv);
		return (MK_ENOMEM);
	}
	if ((rv = idmap_put(&s->pending, (uint64_t)p->id, p)) == 0) {
		s->conn->once = twice_unsafe(method, p->tool);
		rv = s->conn->ops->send(s->conn, p->id, json, strlen(json),
		                        p->timeout_ms, headers);
		s->conn->once = false;
		if (rv != 0) {
			idmap_del(&s->pending, (uint64_t)p->id);
		}
	}
	free(json);
	text_strv_free(hv);
	return (rv);
}

void
session_send_notification(mcp_session *s, const char *method, json_t *params)
{
	char *json = codec_jr_notification(method, params);

	if (json != NULL) {
		/* best effort: a notification has no answer to wait for */
		(void)s->conn->ops->send(s->conn, 0, json, strlen(json),
		                         s->timeout_ms, NULL);
		free(json);
	}
}

static void
fail_all(mcp_session *s, const mcp_error *err)
{
	pend *p;

	while ((p = idmap_pop(&s->pending, NULL)) != NULL) {
		session_complete(s, p, err, NULL);
	}
}

/* The session cannot go on: fail everything, tell the owner once. */
void
session_fail(mcp_session *s, const mcp_error *err)
{
	sstate was = s->st;

	if (was == ST_FAILED) {
		return;
	}
	s->st = ST_FAILED;
	fail_all(s, err);
	s->depth++;
	if (was == ST_READY) {
		if (s->h.event != NULL) {
			s->h.event(s->h.arg, s, MCP_EV_LOST, err);
		}
	} else if (s->h.ready != NULL) {
		s->h.ready(s->h.arg, s, err);
	}
	s->depth--;
}

/* ---- deadlines -------------------------------------------------------- */

static int64_t
ticker_next(void *arg)
{
	mcp_session *s    = arg;
	int64_t      best = -1;

	for (size_t i = 0; i < s->pending.cap; i++) {
		pend *p = s->pending.ents[i].val;
		if (s->pending.ents[i].id != 0 && p->deadline != INT64_MAX &&
		    (best < 0 || p->deadline < best)) {
			best = p->deadline;
		}
	}
	if (s->relisten_at != 0 && (best < 0 || s->relisten_at < best)) {
		best = s->relisten_at;
	}
	return (best);
}

static void
expire_due(mcp_session *s, int64_t now)
{
	for (;;) {
		pend     *due = NULL;
		mcp_error e;

		for (size_t i = 0; i < s->pending.cap && due == NULL; i++) {
			pend *p = s->pending.ents[i].val;
			if (s->pending.ents[i].id != 0 && p->deadline <= now) {
				due = p;
			}
		}
		if (due == NULL || s->doomed) {
			return;
		}
		idmap_del(&s->pending, (uint64_t)due->id);
		s->conn->ops->abort(s->conn, due->id);
		if (due->kind == P_INIT || due->kind == P_DISCOVER) {
			/* (server/discover is 2026-07-28's initialize: the
			 * operator knows the handshake by that name) */
			mcp_error_set(&e, MCP_E_TIMEOUT,
			              "the server did not answer initialize "
			              "within %d ms",
			              due->timeout_ms);
		} else {
			mcp_error_set(&e, MCP_E_TIMEOUT,
			              "%s timed out after %d ms",
			              session_method_of(due), due->timeout_ms);
		}
		if (due->kind == P_INIT || due->kind == P_DISCOVER) {
			session_pend_free(due);
			session_fail(s, &e);
			return;
		}
		json_t *params =
		        json_pack("{s:I, s:s}", "requestId",
		                  (json_int_t)due->id, "reason", e.message);
		session_send_notification(s, "notifications/cancelled",
		                          params);
		json_decref(params);
		session_complete(s, due, &e, NULL);
	}
}

/* The deadline ticker: an upcall boundary (an owner that frees the
 * session from a timed-out request's callback is served here). */
static void
ticker_expire(void *arg, int64_t now)
{
	mcp_session *s = arg;

	s->depth++;
	expire_due(s, now);
	if (!s->doomed && s->relisten_at != 0 && s->relisten_at <= now) {
		s->relisten_at = 0;
		modern_listen(s);
	}
	s->depth--;
	session_finish_upcall(s);
}

/* ---- incoming --------------------------------------------------------- */

static void
on_initialized(mcp_session *s, pend *p, json_t *result)
{
	json_t   *ver  = json_object_get(result, "protocolVersion");
	json_t   *info = json_object_get(result, "serverInfo");
	mcp_error e;

	session_pend_free(p);
	if (!json_is_object(result) || !json_is_string(ver) ||
	    !json_is_object(json_object_get(result, "capabilities"))) {
		session_fail(
		        s,
		        mcp_error_set(
		                &e, MCP_E_PROTOCOL,
		                "initialize result lacks protocolVersion or capabilities"));
		return;
	}
	if (!mcp_version_supported(json_string_value(ver))) {
		session_fail(
		        s,
		        mcp_error_set(
		                &e, MCP_E_PROTOCOL,
		                "server answered protocolVersion \"%.40s\", which this client does not support (supported: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)",
		                json_string_value(ver)));
		return;
	}
	snprintf(s->version, sizeof(s->version), "%s", json_string_value(ver));
	s->server_info = json_is_object(info) ? json_incref(info) : NULL;
	s->server_caps = json_incref(json_object_get(result, "capabilities"));
	s->conn->ops->set_version(s->conn, s->version);
	session_send_notification(s, "notifications/initialized", NULL);
	session_ready(s);
}

void
session_ready(mcp_session *s)
{
	if (s->listen && s->modern) {
		modern_listen(s);
	} else if (s->listen && s->conn->ops->listen != NULL) {
		s->conn->ops->listen(s->conn);
	}
	s->st = ST_READY;
	s->depth++;
	if (s->h.ready != NULL) {
		s->h.ready(s->h.arg, s, NULL);
	}
	s->depth--;
}

static void
on_response(mcp_session *s, codec_jr_msg *m)
{
	pend     *p = idmap_del(&s->pending, (uint64_t)m->id);
	mcp_error e;

	if (p == NULL) {
		return; /* late (timed out, cancelled) or not ours */
	}
	if (m->kind == JR_ERROR) {
		mcp_error_set(&e, MCP_E_SERVER,
		              "%s failed: %.400s (code %lld)",
		              session_method_of(p), m->err_message,
		              (long long)m->err_code);
		e.rpc_code = m->err_code;
		if (p->kind == P_INIT) {
			session_pend_free(p);
			session_fail(s, &e);
		} else if (p->kind == P_DISCOVER) {
			session_pend_free(p);
			modern_probe_error(s, &e);
		} else if (p->kind == P_LISTEN) {
			session_pend_free(p);
			modern_listen_ended(s);
		} else {
			session_complete(s, p, &e, NULL);
		}
		return;
	}
	switch (p->kind) {
	case P_INIT:
		on_initialized(s, p, m->result);
		break;
	case P_DISCOVER:
		session_pend_free(p);
		modern_probe_result(s, m->result);
		break;
	case P_LISTEN: /* the server ended it gracefully */
		session_pend_free(p);
		modern_listen_ended(s);
		break;
	case P_LIST:
		session_on_page(s, p, m->result);
		break;
	case P_CALL:
		if (!json_is_object(m->result)) {
			session_complete(
			        s, p,
			        mcp_error_set(&e, MCP_E_PROTOCOL,
			                      "%s result is not an object",
			                      session_method_of(p)),
			        NULL);
			break;
		}
		if (s->modern &&
		    json_is_string(json_object_get(m->result, "resultType")) &&
		    strcmp(json_string_value(
		                   json_object_get(m->result, "resultType")),
		           "input_required") == 0) {
			modern_input_required(s, p, m->result);
			break;
		}
		session_complete(s, p, NULL, m->result);
		break;
	case P_PING:
		session_complete(s, p, NULL, m->result);
		break;
	}
}

static void
on_progress(mcp_session *s, json_t *params)
{
	json_t *tok = json_object_get(params, "progressToken");
	json_t *pr  = json_object_get(params, "progress");
	json_t *tot = json_object_get(params, "total");
	json_t *msg = json_object_get(params, "message");
	pend   *p;

	if (!json_is_integer(tok) || !json_is_number(pr) ||
	    (p = idmap_get(&s->pending, (uint64_t)json_integer_value(tok))) ==
	            NULL ||
	    p->progress == NULL) {
		return;
	}
	s->depth++;
	p->progress(p->parg, json_number_value(pr),
	            json_is_number(tot) ? json_number_value(tot) : -1,
	            json_is_string(msg) ? json_string_value(msg) : NULL);
	s->depth--;
}

/* A notifications/<list>/list_changed, to the owner. */
static void
list_changed(mcp_session *s, const char *method)
{
	static const struct {
		const char *method;
		mcp_event   ev;
	} lists[] = {
	        {"notifications/tools/list_changed", MCP_EV_TOOLS_CHANGED},
	        {"notifications/prompts/list_changed", MCP_EV_PROMPTS_CHANGED},
	        {"notifications/resources/list_changed",
	         MCP_EV_RESOURCES_CHANGED},
	};

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		if (strcmp(method, lists[i].method) == 0) {
			s->h.event(s->h.arg, s, lists[i].ev, NULL);
			return;
		}
	}
}

static void
up_message(void *arg, json_t *raw, int64_t cause)
{
	mcp_session *s = arg;
	codec_jr_msg m;
	char         why[200];

	if (s->doomed || codec_jr_classify(raw, &m, why, sizeof(why)) != 0) {
		return; /* malformed: its request will time out or fail */
	}
	s->depth++;
	switch (m.kind) {
	case JR_RESULT:
	case JR_ERROR:
		on_response(s, &m);
		break;
	case JR_NOTIFICATION:
		if (strcmp(m.method, "notifications/progress") == 0) {
			on_progress(s, m.params);
		} else if (
		        strcmp(m.method,
		               "notifications/subscriptions/acknowledged") ==
		                0 &&
		        modern_ours(s, m.params)) {
			s->listen_wait = 1000; /* listening: the next end waits
			                        * from the start again */
		} else if (strcmp(m.method, "notifications/message") == 0) {
			session_on_log(s, m.params);
		} else if (s->h.event != NULL && modern_ours(s, m.params)) {
			list_changed(s, m.method);
		}
		break;
	case JR_REQUEST:
		s->cause = cause; /* (mcp_session_cause, during the upcall) */
		session_on_request(s, &m);
		s->cause = 0;
		break;
	}
	s->depth--;
	session_finish_upcall(s);
}

static void
up_failed(void *arg, int64_t id, const mcp_error *err)
{
	mcp_session *s = arg;
	pend        *p = idmap_del(&s->pending, (uint64_t)id);

	if (p == NULL) {
		return;
	}
	s->depth++;
	if (p->kind == P_INIT) {
		session_pend_free(p);
		session_fail(s, err);
	} else if (p->kind == P_DISCOVER) {
		session_pend_free(p);
		modern_probe_error(s, err);
	} else if (p->kind == P_LISTEN) {
		session_pend_free(p);
		modern_listen_ended(s);
	} else if (s->modern && err->kind == MCP_E_LOST && !p->reissued &&
	           p->kind != P_CALL) {
		/* no resumability in 2026-07-28: a request that is safe to
		 * repeat goes again under a new id (a call's is the owner's
		 * choice: it knows the tool) */
		p->reissued      = true;
		int64_t deadline = p->deadline;
		if (session_send_request(s, p, p->params,
		                         (const char *const *)p->headers) ==
		    0) {
			p->deadline = deadline;
		} else {
			session_complete(s, p, err, NULL);
		}
	} else {
		session_complete(s, p, err, NULL);
	}
	s->depth--;
	session_finish_upcall(s);
}

static void
up_lost(void *arg, const mcp_error *err)
{
	mcp_session *s = arg;

	s->depth++;
	session_fail(s, err);
	s->depth--;
	session_finish_upcall(s);
}

static void
up_opened(void *arg, const mcp_error *err)
{
	mcp_session *s = arg;
	pend        *p;
	mcp_error    e;
	int          rv;

	s->depth++;
	if (err != NULL) {
		session_fail(s, err);
		goto out;
	}
	s->st = ST_INITIALIZING;
	switch (s->era) {
	case MCP_ERA_MODERN: /* known: no probe */
		s->modern = true;
		snprintf(s->version, sizeof(s->version), "%s",
		         MCP_PROTOCOL_MODERN);
		s->conn->ops->set_version(s->conn, s->version);
		session_ready(s);
		break;
	case MCP_ERA_LEGACY:
		session_initialize(s);
		break;
	case MCP_ERA_AUTO: /* the modern request first */
		s->conn->ops->set_version(s->conn, MCP_PROTOCOL_MODERN);
		if ((p = calloc(1, sizeof(*p))) == NULL) {
			session_fail(s,
			             mcp_error_set(&e, MCP_E_LOCAL,
			                           "out of memory"));
			break;
		}
		p->kind       = P_DISCOVER;
		p->timeout_ms = s->timeout_ms;
		if ((rv = session_send_request(s, p, NULL, NULL)) != 0) {
			session_pend_free(p);
			session_fail(
			        s,
			        mcp_error_set(
			                &e, MCP_E_LOCAL,
			                "cannot send server/discover (code %d)",
			                rv));
		}
		break;
	}
out:
	s->depth--;
	session_finish_upcall(s);
}

void
session_initialize(mcp_session *s)
{
	json_t   *params;
	pend     *p;
	mcp_error e;
	int       rv;

	s->modern = false;
	s->conn->ops->set_version(s->conn, "");
	params = json_pack("{s:s, s:O, s:{s:s, s:s}}", "protocolVersion",
	                   MCP_PROTOCOL_LATEST, "capabilities", s->caps,
	                   "clientInfo", "name", s->client_name, "version",
	                   s->client_version);
	if ((p = calloc(1, sizeof(*p))) == NULL || params == NULL) {
		free(p);
		json_decref(params);
		session_fail(s,
		             mcp_error_set(&e, MCP_E_LOCAL, "out of memory"));
		return;
	}
	p->kind       = P_INIT;
	p->timeout_ms = s->timeout_ms;
	rv            = session_send_request(s, p, params, NULL);
	json_decref(params);
	if (rv != 0) {
		session_pend_free(p);
		session_fail(s,
		             mcp_error_set(&e, MCP_E_LOCAL,
		                           "cannot send initialize (code %d)",
		                           rv));
	}
}

/* ---- lifetime ------------------------------------------------------- */

static void
session_destroy(mcp_session *s)
{
	inbound *ib;

	tp_loop_ticker_del(s->loop, &s->ticker);
	json_decref(s->server_info);
	json_decref(s->server_caps);
	json_decref(s->caps);
	while ((ib = idmap_pop(&s->inbound, NULL)) != NULL) {
		json_decref(ib->id);
		free(ib->key);
		free(ib);
	}
	idmap_fini(&s->inbound);
	idmap_fini(&s->pending);
	free(s->client_name);
	free(s->client_version);
	free(s);
}

void
session_finish_upcall(mcp_session *s)
{
	if (s->depth == 0 && s->doomed) {
		session_destroy(s);
	}
}

int
mcp_session_open(mcp_session **sp, tp_loop *l, const mcp_config *cfg,
                 const mcp_handlers *h)
{
	mcp_session *s;
	tp_conn_up   up;
	int          rv;

	*sp = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		return (MK_ENOMEM);
	}
	s->loop = l;
	s->h    = *h;
	s->timeout_ms =
	        cfg->timeout_ms > 0 ? cfg->timeout_ms : MCP_TIMEOUT_DEFAULT_MS;
	s->max_message = cfg->max_message;
	s->listen      = cfg->listen;
	s->era         = cfg->type == MCP_CONN_SSE ? MCP_ERA_LEGACY /* 2024 */
	                                           : cfg->era;
	s->http        = cfg->type == MCP_CONN_HTTP;
	s->listen_wait = 1000;
	s->client_name =
	        strdup(cfg->client_name ? cfg->client_name : "mcpkeep");
	s->client_version = strdup(cfg->client_version ? cfg->client_version
	                                               : MCPKEEP_VERSION);
	s->ticker         = (tp_ticker) {
	                .next = ticker_next, .expire = ticker_expire, .arg = s};
	s->caps = cfg->capabilities != NULL
	        ? json_loads(cfg->capabilities, 0, NULL)
	        : json_object();
	if (s->client_name == NULL || s->client_version == NULL ||
	    !json_is_object(s->caps)) {
		rv = s->caps != NULL && !json_is_object(s->caps) ? MK_EINVAL
		                                                 : MK_ENOMEM;
		goto fail;
	}
	tp_loop_ticker_add(l, &s->ticker);
	up = (tp_conn_up) {.opened  = up_opened,
	                   .message = up_message,
	                   .failed  = up_failed,
	                   .lost    = up_lost,
	                   .arg     = s};
	switch (cfg->type) {
	case MCP_CONN_HTTP:
		rv = tp_http_open(&s->conn, l, cfg, &up);
		break;
	case MCP_CONN_SSE:
		rv = tp_sse_open(&s->conn, l, cfg, &up);
		break;
	case MCP_CONN_STDIO:
		rv = tp_stdio_open(&s->conn, l, cfg, &up);
		break;
	default:
		rv = MK_EINVAL;
	}
	if (rv != 0) {
		goto fail;
	}
	*sp = s;
	return (0);
fail:
	session_destroy(s);
	return (rv);
}

void
mcp_session_free(mcp_session **sp)
{
	mcp_session *s;
	mcp_error    e;

	if (sp == NULL || (s = *sp) == NULL) {
		return;
	}
	*sp = NULL;
	if (s->doomed) {
		return;
	}
	s->doomed = 1;
	s->st     = ST_FAILED;
	if (s->h.gone != NULL) { /* the owner forgets what it was answering */
		uint64_t tok;
		inbound *ib;
		while ((ib = idmap_pop(&s->inbound, &tok)) != NULL) {
			if (ib->p != NULL) {
				ib->p->inputs--;
			}
			json_decref(ib->id);
			free(ib->key);
			free(ib);
			s->h.gone(s->h.arg, s, tok);
		}
	}
	s->h = (mcp_handlers) {0}; /* nobody left to tell */
	fail_all(s, mcp_error_set(&e, MCP_E_CANCELLED, "session closed"));
	if (s->conn != NULL) {
		s->conn->ops->close(s->conn);
		s->conn = NULL;
	}
	session_finish_upcall(s);
}
