/*
 * session.c - the MCP client session: initialize, the pending-request
 * table, tools/list paging, tools/call with progress, cancellation (see
 * mcp.h for the DESIGN and the state diagram).
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

typedef enum sstate {
	ST_CONNECTING,   /* the transport is opening */
	ST_INITIALIZING, /* initialize sent */
	ST_READY,        /* requests allowed */
	ST_FAILED,       /* closed or failed: nothing more happens */
} sstate;

typedef enum pkind {
	P_INIT, /* initialize */
	P_PING, /* ping */
	P_LIST, /* tools/list, possibly one of several pages */
	P_CALL, /* tools/call */
} pkind;

/* A request waiting for its answer. */
typedef struct pend {
	int64_t         id;         /* JSON-RPC id (also the progressToken) */
	pkind           kind;       /* what it is */
	int64_t         deadline;   /* monotonic ns */
	int             timeout_ms; /* what the deadline came from */
	mcp_result_fn   fn;         /* completion */
	void           *arg;        /* completion argument */
	mcp_progress_fn progress;   /* tools/call progress, or NULL */
	void           *parg;       /* progress argument */
	json_t         *tools;      /* P_LIST: tools gathered so far */
	unsigned        pages;      /* P_LIST: pages fetched */
	size_t          bytes;      /* P_LIST: bytes of tools and cursors */
	json_t         *cursors;    /* P_LIST: cursors seen (object keys) */
	char          **headers; /* P_LIST: per-request headers, for pages */
} pend;

struct mcp_session {
	sstate       st;          /* see mcp.h */
	tp_loop     *loop;        /* where everything runs */
	tp_conn     *conn;        /* the transport */
	mcp_handlers h;           /* owner's callbacks */
	int          timeout_ms;  /* default request timeout */
	size_t       max_message; /* bytes per message */
	char        *client_name; /* clientInfo */
	char        *client_version;
	int64_t      next_id;     /* last request id used */
	idmap        pending;     /* id -> pend */
	tp_ticker    ticker;      /* request deadlines */
	char         version[16]; /* negotiated protocolVersion */
	json_t      *server_info; /* serverInfo from initialize */
	int          depth;       /* upcalls in progress on the stack */
	int          doomed;      /* freed during an upcall: free at depth 0 */
};

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

static bool
hint(json_t *ann, const char *key, bool dflt)
{
	json_t *v = json_object_get(ann, key);

	return (json_is_boolean(v) ? json_is_true(v) : dflt);
}

void
mcp_tool_hints(json_t *tool, mcp_hints *out)
{
	json_t *ann = json_object_get(tool, "annotations");

	out->read_only   = hint(ann, "readOnlyHint", false);
	out->destructive = hint(ann, "destructiveHint", true);
	out->idempotent  = hint(ann, "idempotentHint", false);
	out->open_world  = hint(ann, "openWorldHint", true);
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

unsigned
mcp_session_pending(const mcp_session *s)
{
	return ((unsigned)s->pending.count);
}

/* ---- pending requests ------------------------------------------------ */

static void
pend_free(pend *p)
{
	json_decref(p->tools);
	json_decref(p->cursors);
	text_strv_free(p->headers);
	free(p);
}

/* Completes p (already out of the table) and frees it. */
static void
complete(mcp_session *s, pend *p, const mcp_error *err, json_t *result)
{
	if (p->fn != NULL) {
		s->depth++;
		p->fn(p->arg, err, result);
		s->depth--;
	}
	pend_free(p);
}

static const char *
method_of(pkind k)
{
	static const char *names[] = {"initialize", "ping", "tools/list",
	                              "tools/call"};
	return (names[k]);
}

/* Serializes and sends a request for p, entering it in the table. */
static int
send_request(mcp_session *s, pend *p, json_t *params,
             const char *const *headers)
{
	char *json;
	int   rv;

	p->id       = ++s->next_id;
	p->deadline = tp_now_ns() + (int64_t)p->timeout_ms * 1000000;
	if ((json = codec_jr_request(p->id, method_of(p->kind), params)) ==
	    NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = idmap_put(&s->pending, (uint64_t)p->id, p)) == 0) {
		rv = s->conn->ops->send(s->conn, p->id, json, strlen(json),
		                        p->timeout_ms, headers);
		if (rv != 0) {
			idmap_del(&s->pending, (uint64_t)p->id);
		}
	}
	free(json);
	return (rv);
}

static void
send_notification(mcp_session *s, const char *method, json_t *params)
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
		complete(s, p, err, NULL);
	}
}

/* The session cannot go on: fail everything, tell the owner once. */
static void
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
		if (s->pending.ents[i].id != 0 &&
		    (best < 0 || p->deadline < best)) {
			best = p->deadline;
		}
	}
	return (best);
}

static void finish_upcall(mcp_session *s);

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
		mcp_error_set(&e, MCP_E_TIMEOUT, "%s timed out after %d ms",
		              method_of(due->kind), due->timeout_ms);
		if (due->kind == P_INIT) {
			pend_free(due);
			session_fail(s, &e);
			return;
		}
		json_t *params =
		        json_pack("{s:I, s:s}", "requestId",
		                  (json_int_t)due->id, "reason", e.message);
		send_notification(s, "notifications/cancelled", params);
		json_decref(params);
		complete(s, due, &e, NULL);
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
	s->depth--;
	finish_upcall(s);
}

/* ---- incoming --------------------------------------------------------- */

static void
on_initialized(mcp_session *s, pend *p, json_t *result)
{
	json_t   *ver  = json_object_get(result, "protocolVersion");
	json_t   *info = json_object_get(result, "serverInfo");
	mcp_error e;

	pend_free(p);
	if (!json_is_object(result) || !json_is_string(ver) ||
	    !json_is_object(json_object_get(result, "capabilities"))) {
		session_fail(s,
		             mcp_error_set(
		                     &e, MCP_E_PROTOCOL,
		                     "initialize result lacks protocolVersion "
		                     "or capabilities"));
		return;
	}
	if (!mcp_version_supported(json_string_value(ver))) {
		session_fail(
		        s,
		        mcp_error_set(&e, MCP_E_PROTOCOL,
		                      "server answered protocolVersion "
		                      "\"%.40s\", which this "
		                      "client does not support (supported: "
		                      "2025-11-25, "
		                      "2025-06-18, 2025-03-26, 2024-11-05)",
		                      json_string_value(ver)));
		return;
	}
	snprintf(s->version, sizeof(s->version), "%s", json_string_value(ver));
	s->server_info = json_is_object(info) ? json_incref(info) : NULL;
	s->conn->ops->set_version(s->conn, s->version);
	send_notification(s, "notifications/initialized", NULL);
	s->st = ST_READY;
	s->depth++;
	if (s->h.ready != NULL) {
		s->h.ready(s->h.arg, s, NULL);
	}
	s->depth--;
}

/* Bytes of a tools array as compact JSON (the view's and the store's
 * form), counted without building the text. */
static size_t
tools_bytes(json_t *tools)
{
	size_t  n = 2, i;
	json_t *t;

	json_array_foreach(tools, i, t)
	{
		n += json_dumpb(t, NULL, 0, JSON_COMPACT) + (i != 0);
	}
	return (n);
}

/* Why a page cannot be added to p's list (into e), or NULL if it can:
 * a limit, or a cursor seen before.  Counts the page. */
static const mcp_error *
page_refused(pend *p, json_t *tools, json_t *cursor, mcp_error *e)
{
	size_t clen = json_is_string(cursor) ? json_string_length(cursor) : 0;

	p->pages++;
	p->bytes += tools_bytes(tools) + clen;
	if (p->bytes > MCP_MAX_TOOLS_BYTES) {
		return (mcp_error_set(e, MCP_E_PROTOCOL,
		                      "tools/list exceeds %zu MiB in total "
		                      "(%zu bytes of tools and cursors in %u "
		                      "pages)",
		                      MCP_MAX_TOOLS_BYTES >> 20, p->bytes,
		                      p->pages));
	}
	if (json_array_size(p->tools) + json_array_size(tools) >
	            MCP_MAX_TOOLS ||
	    p->pages > MCP_MAX_PAGES) {
		return (mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "tools/list exceeds %d tools or %d pages",
		        MCP_MAX_TOOLS, MCP_MAX_PAGES));
	}
	if (!json_is_string(cursor)) {
		return (NULL);
	}
	if (json_object_getn(p->cursors, json_string_value(cursor), clen) !=
	    NULL) {
		/* the cursor's value is the server's: not in the message */
		return (mcp_error_set(e, MCP_E_PROTOCOL,
		                      "tools/list repeats the cursor of an "
		                      "earlier page (page %u): paging stopped",
		                      p->pages));
	}
	if (json_object_setn_new(p->cursors, json_string_value(cursor), clen,
	                         json_null()) != 0) {
		return (mcp_error_set(e, MCP_E_LOCAL,
		                      "cannot keep the tools/list cursor"));
	}
	return (NULL);
}

/* A tools/list page arrived: keep it, ask for the next or finish. */
static void
on_page(mcp_session *s, pend *p, json_t *result)
{
	json_t          *tools  = json_object_get(result, "tools");
	json_t          *cursor = json_object_get(result, "nextCursor");
	const mcp_error *why;
	mcp_error        e;
	int              rv;

	if (!json_is_array(tools) ||
	    (cursor != NULL && !json_is_string(cursor) &&
	     !json_is_null(cursor))) {
		complete(s, p,
		         mcp_error_set(
		                 &e, MCP_E_PROTOCOL,
		                 "tools/list result without a tools array"),
		         NULL);
		return;
	}
	if ((why = page_refused(p, tools, cursor, &e)) != NULL) {
		complete(s, p, why, NULL);
		return;
	}
	json_array_extend(p->tools, tools);
	if (!json_is_string(cursor)) {
		json_t *all = json_pack("{s:O}", "tools", p->tools);
		complete(s, p, NULL, all);
		json_decref(all);
		return;
	}
	json_t *params = json_pack("{s:O}", "cursor", cursor);
	rv = send_request(s, p, params, (const char *const *)p->headers);
	json_decref(params);
	if (rv != 0) {
		complete(s, p,
		         mcp_error_set(&e, MCP_E_LOCAL,
		                       "cannot request the next tools/list "
		                       "page (code %d)",
		                       rv),
		         NULL);
	}
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
		              method_of(p->kind), m->err_message,
		              (long long)m->err_code);
		e.rpc_code = m->err_code;
		if (p->kind == P_INIT) {
			pend_free(p);
			session_fail(s, &e);
		} else {
			complete(s, p, &e, NULL);
		}
		return;
	}
	switch (p->kind) {
	case P_INIT:
		on_initialized(s, p, m->result);
		break;
	case P_LIST:
		on_page(s, p, m->result);
		break;
	case P_CALL:
		if (!json_is_object(m->result)) {
			complete(s, p,
			         mcp_error_set(
			                 &e, MCP_E_PROTOCOL,
			                 "tools/call result is not an object"),
			         NULL);
			break;
		}
		complete(s, p, NULL, m->result);
		break;
	case P_PING:
		complete(s, p, NULL, m->result);
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

/* Server-to-client requests: answer ping; refuse what we do not offer. */
static void
on_server_request(mcp_session *s, codec_jr_msg *m)
{
	json_t *id = json_object_get(m->raw, "id");
	json_t *resp;
	char   *json;

	if (strcmp(m->method, "ping") == 0) {
		resp = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id",
		                 id, "result");
	} else {
		resp = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
		                 "id", id, "error", "code", -32601, "message",
		                 "method not supported by this client");
	}
	json = resp != NULL ? json_dumps(resp, JSON_COMPACT) : NULL;
	json_decref(resp);
	if (json != NULL) {
		(void)s->conn->ops->send(s->conn, 0, json, strlen(json),
		                         s->timeout_ms, NULL);
		free(json);
	}
}

static void
up_message(void *arg, json_t *raw)
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
		} else if (strcmp(m.method,
		                  "notifications/tools/list_changed") == 0 &&
		           s->h.event != NULL) {
			s->h.event(s->h.arg, s, MCP_EV_TOOLS_CHANGED, NULL);
		}
		break;
	case JR_REQUEST:
		on_server_request(s, &m);
		break;
	}
	s->depth--;
	finish_upcall(s);
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
		pend_free(p);
		session_fail(s, err);
	} else {
		complete(s, p, err, NULL);
	}
	s->depth--;
	finish_upcall(s);
}

static void
up_lost(void *arg, const mcp_error *err)
{
	mcp_session *s = arg;

	s->depth++;
	session_fail(s, err);
	s->depth--;
	finish_upcall(s);
}

static void
up_opened(void *arg, const mcp_error *err)
{
	mcp_session *s = arg;
	pend        *p;
	json_t      *params;
	mcp_error    e;
	int          rv;

	s->depth++;
	if (err != NULL) {
		session_fail(s, err);
		goto out;
	}
	s->st  = ST_INITIALIZING;
	params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
	                   MCP_PROTOCOL_LATEST, "capabilities", "clientInfo",
	                   "name", s->client_name, "version",
	                   s->client_version);
	if ((p = calloc(1, sizeof(*p))) == NULL || params == NULL) {
		free(p);
		json_decref(params);
		session_fail(s,
		             mcp_error_set(&e, MCP_E_LOCAL, "out of memory"));
		goto out;
	}
	p->kind       = P_INIT;
	p->timeout_ms = s->timeout_ms;
	rv            = send_request(s, p, params, NULL);
	json_decref(params);
	if (rv != 0) {
		pend_free(p);
		session_fail(s,
		             mcp_error_set(&e, MCP_E_LOCAL,
		                           "cannot send initialize (code %d)",
		                           rv));
	}
out:
	s->depth--;
	finish_upcall(s);
}

/* ---- lifetime ------------------------------------------------------- */

static void
session_destroy(mcp_session *s)
{
	tp_loop_ticker_del(s->loop, &s->ticker);
	json_decref(s->server_info);
	idmap_fini(&s->pending);
	free(s->client_name);
	free(s->client_version);
	free(s);
}

/* After an upcall: a free requested inside it happens now. */
static void
finish_upcall(mcp_session *s)
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
	s->client_name =
	        strdup(cfg->client_name ? cfg->client_name : "mcpkeep");
	s->client_version = strdup(cfg->client_version ? cfg->client_version
	                                               : MCPKEEP_VERSION);
	s->ticker         = (tp_ticker) {
	                .next = ticker_next, .expire = ticker_expire, .arg = s};
	if (s->client_name == NULL || s->client_version == NULL) {
		rv = MK_ENOMEM;
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
	s->h      = (mcp_handlers) {0}; /* nobody left to tell */
	fail_all(s, mcp_error_set(&e, MCP_E_CANCELLED, "session closed"));
	if (s->conn != NULL) {
		s->conn->ops->close(s->conn);
		s->conn = NULL;
	}
	finish_upcall(s);
}

/* ---- requests --------------------------------------------------------- */

static int
start(mcp_session *s, pkind kind, json_t *params, const mcp_req_opts *o,
      mcp_result_fn fn, void *arg, int64_t *idp)
{
	pend *p;
	int   rv;

	if (s->st != ST_READY || s->doomed) {
		return (MK_EINVAL);
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		return (MK_ENOMEM);
	}
	p->kind = kind;
	p->fn   = fn;
	p->arg  = arg;
	p->timeout_ms =
	        o != NULL && o->timeout_ms > 0 ? o->timeout_ms : s->timeout_ms;
	if (o != NULL) {
		p->progress = o->progress;
		p->parg     = o->progress_arg;
	}
	if (kind == P_LIST &&
	    ((p->tools = json_array()) == NULL ||
	     (p->cursors = json_object()) == NULL ||
	     (o != NULL && o->headers != NULL &&
	      (p->headers = text_strv_dup(o->headers)) == NULL))) {
		pend_free(p);
		return (MK_ENOMEM);
	}
	if (kind == P_CALL && p->progress != NULL) {
		/* the token is the request id: known only when sent */
		json_t *meta = json_pack("{s:I}", "progressToken",
		                         (json_int_t)(s->next_id + 1));
		json_object_set_new(params, "_meta", meta);
	}
	if ((rv = send_request(s, p, params, o ? o->headers : NULL)) != 0) {
		pend_free(p);
		return (rv);
	}
	if (idp != NULL) {
		*idp = p->id;
	}
	return (0);
}

int
mcp_ping(mcp_session *s, const mcp_req_opts *o, mcp_result_fn fn, void *arg,
         int64_t *idp)
{
	return (start(s, P_PING, NULL, o, fn, arg, idp));
}

int
mcp_list_tools(mcp_session *s, const mcp_req_opts *o, mcp_result_fn fn,
               void *arg, int64_t *idp)
{
	return (start(s, P_LIST, NULL, o, fn, arg, idp));
}

int
mcp_call_tool(mcp_session *s, const char *name, json_t *arguments,
              const mcp_req_opts *o, mcp_result_fn fn, void *arg, int64_t *idp)
{
	json_t *params;
	int     rv;

	if (name == NULL ||
	    (arguments != NULL && !json_is_object(arguments))) {
		return (MK_EINVAL);
	}
	params = json_pack("{s:s, s:o}", "name", name, "arguments",
	                   arguments != NULL ? json_incref(arguments)
	                                     : json_object());
	if (params == NULL) {
		return (MK_ENOMEM);
	}
	rv = start(s, P_CALL, params, o, fn, arg, idp);
	json_decref(params);
	return (rv);
}

int
mcp_cancel(mcp_session *s, int64_t id, const char *reason)
{
	pend     *p = idmap_del(&s->pending, (uint64_t)id);
	json_t   *params;
	mcp_error e;

	if (p == NULL) {
		return (MK_ENOENT);
	}
	s->conn->ops->abort(s->conn, id);
	params =
	        json_pack("{s:I, s:s}", "requestId", (json_int_t)id, "reason",
	                  reason != NULL ? reason : "cancelled by the client");
	send_notification(s, "notifications/cancelled", params);
	json_decref(params);
	complete(s, p,
	         mcp_error_set(&e, MCP_E_CANCELLED, "%s cancelled: %s",
	                       method_of(p->kind),
	                       reason != NULL ? reason : "by the client"),
	         NULL);
	return (0);
}
