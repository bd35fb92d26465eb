/*
 * mcp.c - /mcp and /mcp/<group>: POST (the JSON-RPC methods:
 * initialize, ping, the lists (lists.c), tools/call, prompts/get,
 * resources/read, each answered as one JSON body or, with progress, an
 * SSE stream; a 2026-07-28 request goes to modern.c), GET (the session's
 * stream of list changes) and DELETE (the session's end); the tool
 * groups.
 *
 * DESIGN: the gateway lists what the caller can call now - the tools of
 * every client its key reaches that can run calls (not disabled,
 * server-level needs_reauth or pending_verification; unstable stays: a
 * call is still attempted), allowed by the client's tools_to_execute and
 * the key - named "<client>-<tool>" (client names have no '-', so the
 * first '-' splits), in the order of client then tool name.  A call runs
 * through mk_tool_call (the runtime's recovery, retry safety and
 * deadline), prompts/get and resources/read too (mk_call_start).  What
 * the gateway refuses (unknown tool, not allowed, the client's state, a
 * limit) is a JSON-RPC error; what the upstream failed is a tool result
 * with isError and the reason, as MCP asks (a prompt's or a resource's:
 * a JSON-RPC error, they have no such result).  Each call
 * logs one INFO audit line: key name, client, tool, outcome, duration,
 * trace id - never a key or an argument.
 */
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gateway/gateway.h"

/* The protocol versions served, newest first. */
static const char *const versions[] = {GW_VERSION_LATEST, "2025-06-18",
                                       "2025-03-26", "2024-11-05", NULL};

static bool
version_known(const char *v)
{
	for (int i = 0; v != NULL && versions[i] != NULL; i++) {
		if (strcmp(versions[i], v) == 0) {
			return (true);
		}
	}
	return (false);
}

/* A notification or a response of the caller's: nothing to answer. */
static void
accepted(req *r)
{
	answer(r, 202, "application/json", "");
}

/* ---- calls ---------------------------------------------------------------
 */

/* A call in flight, as its caller may give it up - the session's
 * notifications/cancelled names it (the session and the request id),
 * and its SSE answer's stream closing before the answer does too -
 * with the call of the runtime to give up on.  Held by the call (until
 * its answer) and by its start (until the runtime named it), whichever
 * ends last frees it. */
typedef struct gw_flight {
	struct gw_flight  *next;
	struct gw_flight **pprev; /* what points at it; NULL: unlinked */
	char               sid[GW_SID_LEN + 1];    /* its session, or "" */
	char               stream[GW_SID_LEN + 1]; /* its stream, or "" */
	char               client[65];
	uint64_t           ticket; /* 0 until the runtime named the call */
	int                refs;
	char               id[]; /* the request id, as compact JSON */
} gw_flight;

static struct {
	pthread_mutex_t mtx;
	gw_flight      *head;
} F = {.mtx = PTHREAD_MUTEX_INITIALIZER};

static gw_flight *
flight_new(const char *sid, const char *stream, const json_t *id,
           const char *client)
{
	char      *text = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
	gw_flight *f =
	        text != NULL ? calloc(1, sizeof(*f) + strlen(text) + 1) : NULL;

	if (f != NULL) {
		snprintf(f->sid, sizeof(f->sid), "%s", sid != NULL ? sid : "");
		snprintf(f->stream, sizeof(f->stream), "%s", stream);
		snprintf(f->client, sizeof(f->client), "%s", client);
		memcpy(f->id, text, strlen(text) + 1);
		f->refs = 2;
		pthread_mutex_lock(&F.mtx);
		if ((f->next = F.head) != NULL) {
			F.head->pprev = &f->next;
		}
		F.head   = f;
		f->pprev = &F.head;
		pthread_mutex_unlock(&F.mtx);
	}
	free(text);
	return (f);
}

/* One holder lets go of f (the call's: done, it is unlinked; the
 * start's: ticket names it). */
static void
flight_drop(gw_flight *f, bool done, uint64_t ticket)
{
	if (f == NULL) {
		return;
	}
	pthread_mutex_lock(&F.mtx);
	if (!done) {
		f->ticket = ticket;
	} else if (f->pprev != NULL) { /* (in O(1): calls end often) */
		if ((*f->pprev = f->next) != NULL) {
			f->next->pprev = f->pprev;
		}
		f->pprev = NULL;
	}
	bool last = --f->refs == 0;
	pthread_mutex_unlock(&F.mtx);
	if (last) {
		free(f);
	}
}

/* f's stream no longer says anything of its call. */
static void
flight_unstream(gw_flight *f)
{
	if (f != NULL) {
		pthread_mutex_lock(&F.mtx);
		f->stream[0] = '\0';
		pthread_mutex_unlock(&F.mtx);
	}
}

/* Gives up the call of session sid whose request id is id (JSON text),
 * or, sid NULL, the one answered on stream id; an answered or unknown
 * one is nothing. */
static void
give_up(const char *sid, const char *id, const char *why)
{
	char     client[65] = "";
	uint64_t ticket     = 0;

	pthread_mutex_lock(&F.mtx);
	for (gw_flight *f = F.head; f != NULL; f = f->next) {
		if (f->ticket != 0 &&
		    (sid != NULL ? strcmp(f->sid, sid) == 0 &&
		                     strcmp(f->id, id) == 0
		                 : strcmp(f->stream, id) == 0)) {
			memcpy(client, f->client, sizeof(client));
			ticket = f->ticket;
			break;
		}
	}
	pthread_mutex_unlock(&F.mtx);
	if (ticket != 0) {
		(void)mk_tool_call_cancel(D.rt, client, ticket, why);
	}
}

/* notifications/cancelled of session sid: its call requestId is given
 * up (the upstream told). */
static void
cancel(const char *sid, json_t *params)
{
	json_t     *rid = json_object_get(params, "requestId");
	const char *why = json_string_value(json_object_get(params, "reason"));
	char       *text;

	if ((json_is_string(rid) || json_is_integer(rid)) &&
	    (text = json_dumps(rid, JSON_COMPACT | JSON_ENCODE_ANY)) != NULL) {
		give_up(sid, text,
		        why != NULL ? why : "cancelled by the MCP client");
		free(text);
	}
}

void
gw_stream_gone(const char *stream)
{
	give_up(NULL, stream, "the MCP client closed the stream");
}

/* A call in flight: what its answer and audit line need.  Streamed (its
 * caller asked for progress), the request is answered with an SSE stream
 * at once and may be gone before the call ends: the call then keeps
 * copies of all it needs, and answers on the stream. */
typedef struct gw_call {
	req        *r;                   /* NULL once streamed */
	json_t     *id;                  /* its own copy */
	json_t     *token;               /* the progressToken, when streamed */
	char        sid[GW_SID_LEN + 1]; /* the stream's id */
	char        host[256];  /* the Host it was sent to (a sign-in URL) */
	char        caller[72]; /* call_caller */
	char        caller_owner[GW_OWNER_LEN]; /* gw_owner (2026-07-28) */
	char        key[72];    /* its key's name (limits), or "" */
	char        trace[64];  /* its traceparent, or "" */
	bool        url_elicit; /* its session takes URL elicitations */
	unsigned    takes;      /* the server requests its session takes */
	char        sess[GW_SID_LEN + 1]; /* its session, or "" */
	bool        modern;               /* a 2026-07-28 request */
	gw_kind     kind;   /* GW_TOOLS, GW_PROMPTS, GW_RESOURCES */
	gw_flight  *flight; /* its session may cancel it, or NULL */
	const char *client; /* in name */
	const char *tool;   /* in name: the tool, prompt or URI */
	int64_t     t0;
	char        name[]; /* "<client>\0<tool>" */
} gw_call;

json_t *
gw_result_msg(bool modern, json_t *id, json_t *result)
{
	if (modern && json_is_object(result)) {
		/* 2026-07-28: every result says its type and the server */
		if (!json_is_string(json_object_get(result, "resultType"))) {
			json_object_set_new(result, "resultType",
			                    json_string("complete"));
		}
		json_t *meta = json_object_get(result, "_meta");
		if (!json_is_object(meta)) {
			json_object_set_new(result, "_meta",
			                    meta = json_object());
		}
		json_object_set_new(meta, GW_META_SERVER,
		                    json_pack("{s:s, s:s}", "name", "mcpkeep",
		                              "version", MCPKEEP_VERSION));
	}
	return (json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	                  "result", result));
}

/* A JSON-RPC error message (data taken, may be NULL). */
static json_t *
error_msg(json_t *id, int code, const char *message, json_t *data)
{
	json_t *e = json_pack("{s:i, s:s}", "code", code, "message", message);

	if (data != NULL) {
		json_object_set_new(e, "data", data);
	}
	return (json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
	                  "error", e));
}

void
gw_result(req *r, json_t *id, json_t *result)
{
	answer_json(r, 200, gw_result_msg(r->mcp_modern, id, result));
}

/* Answers g's call with msg (taken): its response, or the last message
 * of its stream. */
static void
deliver(gw_call *g, json_t *msg)
{
	if (g->modern && gw_park_done(g, msg)) {
		return; /* (its caller's latest retry gets it) */
	}
	if (g->r != NULL) {
		answer_json(g->r, 200, msg);
		return;
	}
	char *text = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (text != NULL) {
		(void)events_notify(g->sid, text);
	}
	events_end_mcp(g->sid);
	free(text);
	json_decref(msg);
}

/* The server's progress on g's call, on its stream (a runtime thread;
 * never after the answer). */
static void
on_progress(void *arg, double done, double total, const char *message)
{
	gw_call *g = arg;
	json_t  *p = json_pack("{s:O, s:f}", "progressToken", g->token,
	                       "progress", done);
	char    *text;

	if (total > 0) {
		json_object_set_new(p, "total", json_real(total));
	}
	if (message != NULL) {
		json_object_set_new(p, "message", json_string(message));
	}
	json_t *n = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
	                      "notifications/progress", "params", p);
	if ((text = n != NULL ? json_dumps(n, JSON_COMPACT) : NULL) != NULL) {
		(void)events_notify(g->sid, text);
	}
	free(text);
	json_decref(n);
}

/* A tool result that is an error (MCP: the model sees why). */
static json_t *
tool_error(const char *text)
{
	return (json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
	                  "text", text, "isError", 1));
}

/* A caller without a credential: the URL to sign in at (an OAuth
 * authorize URL) or to POST its header values to (absolute: the
 * daemon's own origin, as the request reached it).  Either a tool
 * result with isError and the URL (the model tells the user), or, to a
 * client that takes URL-mode elicitations, the URLElicitationRequired
 * error (-32042) carrying one: it shows the URL, then calls again. */
static json_t *
sign_in(gw_call *g, const char *auth_required)
{
	json_t     *p = json_loads(auth_required, 0, NULL), *m;
	const char *url =
	        json_string_value(json_object_get(p, "authorize_url"));
	const char *sub = json_string_value(json_object_get(p, "submit_url"));
	const char *eid = json_string_value(json_object_get(p, "session_id"));
	char        text[600], full[2200], both[2900];

	if (url == NULL && sub != NULL) {
		snprintf(full, sizeof(full), "http://%s%s", g->host, sub);
		url = full;
	}
	snprintf(text, sizeof(text),
	         sub != NULL ? "MCP server %s needs your own header values: "
	                       "POST them ({\"headers\": {...}}) to the URL, "
	                       "then ask again"
	                     : "MCP server %s needs you to sign in at the "
	                       "URL, then ask again",
	         g->client);
	if (g->kind != GW_TOOLS && !(url != NULL && g->url_elicit)) {
		/* (no tool result to carry it: the error says it) */
		snprintf(both, sizeof(both), "%s: %s", text,
		         url != NULL ? url : "(no URL given)");
		m = error_msg(g->id, -32000, both, NULL);
	} else if (url != NULL && g->url_elicit) {
		m = error_msg(g->id, -32042, text,
		              json_pack("{s:[{s:s, s:s, s:s, s:s}]}",
		                        "elicitations", "mode", "url",
		                        "elicitationId",
		                        eid != NULL ? eid : g->client, "url",
		                        url, "message", text));
	} else {
		snprintf(both, sizeof(both), "%s: %s", text,
		         url != NULL ? url : "(no URL given)");
		m = gw_result_msg(g->modern, g->id, tool_error(both));
	}
	json_decref(p);
	return (m);
}

/* What the gateway calls g's item in an answer: its own name for it. */
static void
item_name(const gw_call *g, char *out, size_t len)
{
	snprintf(out, len, g->kind == GW_RESOURCES ? GW_URI "%s/%s" : "%s-%s",
	         g->client, g->tool);
}

/* An unknown item: a JSON-RPC error (resources: MCP's -32002). */
static json_t *
unknown(json_t *id, gw_kind k, const char *name, const char *why)
{
	char msg[600];

	snprintf(msg, sizeof(msg), "%s: %.400s%.150s",
	         k == GW_TOOLS             ? "Unknown tool"
	                 : k == GW_PROMPTS ? "Unknown prompt"
	                                   : "Resource not found",
	         name, why);
	return (error_msg(id, k == GW_RESOURCES ? -32002 : -32602, msg, NULL));
}

/* A resources/read result's contents, named as the gateway lists them. */
static void
resource_uris(const gw_call *g, json_t *result)
{
	json_t *c;
	size_t  i;

	json_array_foreach(json_object_get(result, "contents"), i, c)
	{
		const char *u = json_string_value(json_object_get(c, "uri"));
		char       *nu;
		if (u != NULL &&
		    asprintf(&nu, GW_URI "%s/%s", g->client, u) >= 0) {
			json_object_set_new(c, "uri", json_string(nu));
			free(nu);
		}
	}
}

/* An upstream's request this call caused (the client actor's thread):
 * to the call's session, on its answer's stream; to a 2026-07-28 caller,
 * as its answer (input_required), the call parked until it retries. */
static int
on_input(void *arg, const char *request_id, const char *method,
         const char *params)
{
	gw_call *g = arg;

	if (g->modern) {
		char name[600], kname[620];
		item_name(g, name, sizeof(name));
		snprintf(kname, sizeof(kname), "%d:%s", (int)g->kind, name);
		gw_park_to to = {.owner  = g,
		                 .r      = g->r,
		                 .stream = g->sid,
		                 .id     = g->id,
		                 .caller = g->caller_owner,
		                 .client = g->client,
		                 .name   = kname,
		                 .takes  = g->takes};
		/* (its stream ends with the first round: not a give-up) */
		flight_unstream(g->flight);
		return (gw_park_ask(&to, request_id, method, params));
	}
	gw_relay_to to = {.owner  = g,
	                  .sid    = g->sess,
	                  .stream = g->sid,
	                  .client = g->client,
	                  .takes  = g->takes};

	return (gw_relay_send(&to, request_id, method, params));
}

static void
on_call(void *arg, int rc, mk_result *res)
{
	gw_call    *g   = arg;
	const char *why = res != NULL && res->error != NULL ? res->error
	                                                    : mk_strerror(rc);
	json_t     *out = rc == 0 && res != NULL && res->result != NULL
	            ? json_loads(res->result, 0, NULL)
	            : NULL;
	char        name[600], msg[700];

	item_name(g, name, sizeof(name));
	flight_drop(g->flight, true, 0);
	gw_relay_drop(g);
	call_audit_as(g->caller, g->trace[0] != '\0' ? g->trace : NULL,
	              g->client, g->kind == GW_TOOLS ? g->tool : name,
	              call_outcome(rc, res), g->t0);
	limits_done(g->key[0] != '\0' ? g->key : NULL);
	if (rc == MK_ECLOSED && res != NULL && res->error_kind != NULL &&
	    strcmp(res->error_kind, "cancelled") == 0) {
		/* its caller gave up: nobody reads this */
		deliver(g,
		        error_msg(g->id, -32800, "Request cancelled", NULL));
	} else if (json_is_object(out)) {
		if (g->kind == GW_RESOURCES) {
			resource_uris(g, out);
		}
		deliver(g, gw_result_msg(g->modern, g->id, out));
		out = NULL; /* taken */
	} else if (rc == MK_EAUTH && res != NULL &&
	           res->auth_required != NULL) {
		deliver(g, sign_in(g, res->auth_required));
	} else if (rc == MK_EUNKNOWN && g->kind == GW_TOOLS) {
		/* it may have run: the model is told, and so is whoever
		 * reads _meta */
		json_t *te = tool_error(why);
		json_object_set_new(
		        te, "_meta",
		        json_pack("{s:s}", GW_META "outcome", "unknown"));
		deliver(g, gw_result_msg(g->modern, g->id, te));
	} else if (rc == 0 || rc == MK_EUPSTREAM || rc == MK_EUNKNOWN ||
	           rc == MK_ETIMEDOUT || rc == MK_ECLOSED || rc == MK_EAUTH) {
		/* the upstream's failure: a result the model can read (a
		 * prompt or a resource has none: an error) */
		why = rc == 0 ? "the MCP server's result is not a JSON object"
		              : why;
		deliver(g,
		        g->kind == GW_TOOLS
		                ? gw_result_msg(g->modern, g->id,
		                                tool_error(why))
		                : error_msg(g->id, -32000, why, NULL));
	} else if (rc == MK_ENOENT) {
		snprintf(msg, sizeof(msg), " (no MCP client %s)", g->client);
		deliver(g, unknown(g->id, g->kind, name, msg));
	} else if (rc == MK_EINVAL && res != NULL && res->error_kind != NULL &&
	           strcmp(res->error_kind, "header_mismatch") == 0) {
		/* 2026-07-28: an Mcp-Param header that is not the body's */
		json_t *e = error_msg(g->id, -32020, why, NULL);
		if (g->r != NULL) {
			answer_json(g->r, 400, e);
		} else {
			deliver(g, e);
		}
	} else {
		/* the gateway's refusal: the client's state, a limit */
		deliver(g,
		        error_msg(g->id, rc == MK_EINVAL ? -32602 : -32000,
		                  why, NULL));
	}
	json_decref(out);
	mk_result_free(&res);
	json_decref(g->id);
	json_decref(g->token);
	free(g);
}

/* The refusal of a call before it runs: a JSON-RPC error. */
static void
refuse(req *r, json_t *id, int code, const char *fmt, const char *name,
       const char *key)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, name, key);
	answer_rpc_error(r, 200, id, code, msg);
}

/* Reads the client and the upstream's name (*item, in full) of the
 * item full names; false when it names none. */
static bool
split(gw_kind k, const char *full, char client[65], const char **item)
{
	const char *dash = strchr(full, '-');
	size_t      cl   = dash != NULL ? (size_t)(dash - full) : 0;

	if (k == GW_RESOURCES) {
		return (gw_resource_split(full, client, item));
	}
	/* (a client's name is 1 to 64 characters) */
	if (cl == 0 || cl >= 65 || dash[1] == '\0') {
		return (false);
	}
	memcpy(client, full, cl);
	client[cl] = '\0';
	*item      = dash + 1;
	return (true);
}

void
gw_ask(req *r, const json_t *group, const gw_agreed *agreed, json_t *id,
       json_t *params, gw_kind k)
{
	static const mk_call_kind as[GW_KINDS] = {MK_CALL_TOOL, MK_CALL_PROMPT,
	                                          MK_CALL_RESOURCE, 0};
	const char               *full         = json_string_value(
	                              json_object_get(params, k == GW_RESOURCES ? "uri" : "name"));
	json_t     *args = json_object_get(params, "arguments");
	const char *mode, *who = route_identity(r, &mode), *item;
	char        client[65];
	gw_call    *g;

	if (full == NULL || (args != NULL && !json_is_object(args))) {
		answer_rpc_error(
		        r, 200, id, -32602,
		        k == GW_TOOLS
		                ? "Invalid params: tools/call needs name (a string) and arguments (an object)"
		                : k == GW_PROMPTS
		                ? "Invalid params: prompts/get needs name (a string) and arguments (an object of strings)"
		                : "Invalid params: resources/read needs uri (a string)");
		return;
	}
	if (!split(k, full, client, &item) ||
	    (r->key != NULL && !clients_key_allows(r->key, client, NULL)) ||
	    (group != NULL &&
	     !clients_grants_allow(group, client,
	                           k == GW_TOOLS ? item : NULL))) {
		answer_json(r, 200, unknown(id, k, full, ""));
		return;
	}
	if (k == GW_TOOLS && r->key != NULL &&
	    !clients_key_allows(r->key, client, item)) {
		refuse(r, id, -32602,
		       "tool %.300s is not allowed for virtual key \"%.64s\"",
		       full, r->key->name);
		return;
	}
	if (r->mcp_modern && gw_park_retry_of(params)) {
		char kname[620];
		snprintf(kname, sizeof(kname), "%d:%s", (int)k, full);
		gw_park_retry(r, id, kname, params);
		return;
	}
	size_t cl = strlen(client), il = strlen(item);
	if ((g = calloc(1, sizeof(*g) + cl + il + 2)) == NULL) {
		answer_rpc_error(r, 200, id, -32603, "out of memory");
		return;
	}
	int64_t retry;
	int     limit = limits_take(r->key, &retry);
	if (limit != LIMIT_OK) {
		char why[300];
		free(g);
		answer_rpc_error(
		        r, 200, id, -32000,
		        limits_why(r->key, limit, retry, why, sizeof(why)));
		return;
	}
	/* a caller that asked for progress, or whose session takes the
	 * upstream's requests (and takes a stream) gets the answer as an
	 * SSE stream: the progress and the requests, then the response */
	json_t     *token  = json_object_get(json_object_get(params, "_meta"),
	                                     "progressToken");
	const char *accept = http_header(r, "Accept");
	const char *sid    = http_header(r, "Mcp-Session-Id");
	bool        asks = agreed->takes != 0 && sid != NULL && !r->mcp_modern;
	bool        stream =
	        (json_is_string(token) || json_is_integer(token) || asks) &&
	        accept != NULL && strstr(accept, "text/event-stream") != NULL;
	memcpy(g->name, client, cl + 1);
	memcpy(g->name + cl + 1, item, il + 1);
	g->client     = g->name;
	g->tool       = g->name + cl + 1;
	g->kind       = k;
	g->r          = r;
	g->url_elicit = agreed->url_elicit;
	g->takes      = agreed->takes;
	snprintf(g->sess, sizeof(g->sess), "%s", sid != NULL ? sid : "");
	snprintf(g->host, sizeof(g->host), "%s",
	         http_header(r, "Host") != NULL ? http_header(r, "Host")
	                                        : "127.0.0.1");
	g->id = json_deep_copy(id); /* (its own: the body is freed
	                             * by this thread, the copy by
	                             * the answer's) */
	g->t0     = answer_mono_ns();
	g->modern = r->mcp_modern;
	snprintf(g->caller, sizeof(g->caller), "%s", call_caller(r));
	if (g->modern) {
		gw_owner(r, g->caller_owner, sizeof(g->caller_owner));
	}
	snprintf(g->key, sizeof(g->key), "%s",
	         r->key != NULL ? r->key->name : "");
	snprintf(g->trace, sizeof(g->trace), "%s",
	         r->trace[0] != NULL ? r->trace[0] : "");
	char    *atext = args != NULL ? json_dumps(args, JSON_COMPACT) : NULL;
	mk_trace t = {.traceparent = r->trace[0], .tracestate = r->trace[1]};
	mk_call  c = {.size      = sizeof(mk_call),
	              .client    = g->client,
	              .tool      = g->tool,
	              .arguments = atext,
	              .user_id   = mode != NULL && mode[0] == 'u' ? who : NULL,
	              .virtual_key =
                             mode != NULL && mode[0] == 'v' ? who : NULL,
	              .session_id = mode != NULL && mode[0] == 's' ? who : NULL,
	              .requester  = route_requester(r),
	              .trace      = &t};
	mk_call_how how   = MK_CALL_HOW_INIT;
	how.kind          = as[k];
	char *params_sent = NULL; /* 2026-07-28: checked against the tool */
	if (g->modern && k == GW_TOOLS) {
		json_t *h   = http_headers_with(r, "Mcp-Param-");
		params_sent = h != NULL ? json_dumps(h, JSON_COMPACT) : NULL;
		json_decref(h);
		how.param_headers = params_sent != NULL ? params_sent : "{}";
	}
	if (stream) {
		if (gw_stream_id(g->sid) != 0 ||
		    events_open_mcp(r, g->sid) != 0) {
			if (g->sid[0] == '\0') {
				answer_rpc_error(r, 500, id, -32603,
				                 "out of memory");
			}
			limits_done(g->key[0] != '\0' ? g->key : NULL);
			json_decref(g->id);
			free(g);
			free(atext);
			return; /* (answered) */
		}
		/* r is answered and may go: the call keeps its copies */
		g->r = NULL;
		if (json_is_string(token) || json_is_integer(token)) {
			g->token       = json_deep_copy(token);
			c.progress     = on_progress;
			c.progress_arg = g;
		}
	}
	/* the upstream's requests it causes are its caller's: asked on its
	 * stream, or (no stream, a session that does not take them)
	 * declined */
	how.input     = on_input;
	how.input_arg = g;
	gw_flight *fl = g->flight = (sid != NULL && !g->modern) || stream
	        ? flight_new(g->modern ? NULL : sid, g->sid, id, g->client)
	        : NULL;
	uint64_t   ticket         = 0;
	int        rc = mk_call_start(D.rt, &c, &how, on_call, g, &ticket);
	free(atext);
	free(params_sent);
	if (rc != 0) {
		on_call(g, rc, NULL); /* (drops the call's hold) */
	}
	flight_drop(fl, false, ticket); /* (g may be gone: fl is not) */
}

/* ---- the endpoint --------------------------------------------------------
 */

static void
initialize(req *r, json_t *id, json_t *params)
{
	const char *want =
	        json_string_value(json_object_get(params, "protocolVersion"));
	const char *v = version_known(want) ? want : GW_VERSION_LATEST;
	char        sid[GW_SID_LEN + 1];
	gw_agreed   a = {.url_elicit =
	                         json_object_get(
	                                 json_object_get(
	                                         json_object_get(params,
	                                                         "capabilities"),
	                                         "elicitation"),
	                                 "url") != NULL};
	snprintf(a.version, sizeof(a.version), "%s", v);
	a.takes = gw_takes(json_object_get(params, "capabilities"));
	int rc  = gw_session_new(r, &a, sid);

	if (rc == MK_EBUSY) {
		answer_rpc_error(
		        r, 503, id, -32000,
		        "too many MCP sessions are open (" GW_STR(
		                GW_SESSIONS_MAX) "); try again later");
		return;
	}
	if (rc != 0 || (r->session_out = strdup(sid)) == NULL) {
		answer_rpc_error(r, 500, id, -32603, "out of memory");
		return;
	}
	gw_result(r, id,
	          json_pack("{s:s, s:o, s:{s:s, s:s}, s:s}", "protocolVersion",
	                    v, "capabilities", gw_capabilities(), "serverInfo",
	                    "name", "mcpkeep", "version", MCPKEEP_VERSION,
	                    "instructions", GW_INSTRUCTIONS));
}

json_t *
gw_capabilities(void)
{
	return (json_pack("{s:{s:b}, s:{s:b}, s:{s:b}}", "tools",
	                  "listChanged", 1, "prompts", "listChanged", 1,
	                  "resources", "listChanged", 1));
}

bool
gw_method(req *r, const json_t *group, const char *sid,
          const gw_agreed *agreed, json_t *id, const char *method,
          json_t *params)
{
	static const struct {
		const char *method;
		gw_kind     kind;
		bool        call;
	} methods[] = {
	        {"tools/list", GW_TOOLS, false},
	        {"tools/call", GW_TOOLS, true},
	        {"prompts/list", GW_PROMPTS, false},
	        {"prompts/get", GW_PROMPTS, true},
	        {"resources/list", GW_RESOURCES, false},
	        {"resources/templates/list", GW_TEMPLATES, false},
	        {"resources/read", GW_RESOURCES, true},
	};

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strcmp(method, methods[i].method) != 0) {
			continue;
		}
		if (methods[i].call) {
			gw_ask(r, group, agreed, id, params, methods[i].kind);
		} else {
			gw_list(r, group, sid, id, params, methods[i].kind);
		}
		return (true);
	}
	return (false);
}

/* The tool groups (server.tool_groups): name -> clients. */
static struct {
	pthread_mutex_t mtx;
	json_t         *groups;
} G = {.mtx = PTHREAD_MUTEX_INITIALIZER};

void
gw_groups_set(const char *json_text)
{
	json_t *a = json_text != NULL ? json_loads(json_text, 0, NULL) : NULL;
	json_t *m = json_object(), *e, *old;
	size_t  i;

	json_array_foreach(a, i, e)
	{
		json_object_set(m,
		                json_string_value(json_object_get(e, "name")),
		                json_object_get(e, "clients"));
	}
	json_decref(a);
	pthread_mutex_lock(&G.mtx);
	old      = G.groups;
	G.groups = m;
	pthread_mutex_unlock(&G.mtx);
	json_decref(old);
}

json_t *
gw_group(const char *name)
{
	json_t *g;

	pthread_mutex_lock(&G.mtx);
	g = json_deep_copy(json_object_get(G.groups, name));
	pthread_mutex_unlock(&G.mtx);
	return (g);
}

static void dispatch(req *r, const json_t *group, json_t *body);

/* A call (tools/call, prompts/get, resources/read) in a session's
 * form: handed to the client at once, answered from its completion.
 * What else comes (a list built from every client's view, a session's
 * start, an upstream's request answered, the 2026-07-28 form) may take
 * a while: a worker runs it. */
static bool
direct(const json_t *body)
{
	const char *m = json_string_value(json_object_get(body, "method"));
	json_t     *params = json_object_get(body, "params");

	return (m != NULL &&
	        (strcmp(m, "tools/call") == 0 ||
	         strcmp(m, "prompts/get") == 0 ||
	         strcmp(m, "resources/read") == 0) &&
	        json_object_get(json_object_get(params, "_meta"),
	                        GW_META_VERSION) == NULL);
}

void
route_mcp(req *r, const char *name, json_t *body)
{
	json_t *group;
	char    msg[160];

	if (!direct(body) && http_to_worker(r, body)) {
		return; /* (r is the worker's) */
	}
	group = name != NULL ? gw_group(name) : NULL;
	if (name != NULL && group == NULL) {
		snprintf(msg, sizeof(msg), "no tool group \"%.64s\"", name);
		answer_rpc_error(r, 404, json_object_get(body, "id"), -32001,
		                 msg);
		return;
	}
	dispatch(r, group, body);
	json_decref(group);
}

/* route_mcp of a group's (NULL: every client's) request. */
static void
dispatch(req *r, const json_t *group, json_t *body)
{
	json_t     *id     = json_object_get(body, "id");
	json_t     *params = json_object_get(body, "params");
	const char *method = http_field(body, "method");
	const char *pv     = http_header(r, "MCP-Protocol-Version");
	const char *sid    = http_header(r, "Mcp-Session-Id");
	char        msg[200];
	gw_agreed   agreed;

	if (body == NULL ||
	    !json_is_string(json_object_get(body, "jsonrpc")) ||
	    strcmp(http_field(body, "jsonrpc"), "2.0") != 0 ||
	    (id != NULL && !json_is_string(id) && !json_is_integer(id)) ||
	    (params != NULL && !json_is_object(params))) {
		answer_rpc_error(
		        r, 400,
		        id != NULL &&
		                        (json_is_string(id) ||
		                         json_is_integer(id))
		                ? id
		                : NULL,
		        -32600,
		        "Invalid Request: a JSON-RPC 2.0 object (jsonrpc \"2.0\", a string or integer id, params an object)");
		return;
	}
	if (method == NULL) {
		/* a response: an upstream's request relayed to its session
		 * (nothing else is asked of a client) */
		if (sid == NULL || !gw_session_use(r, sid, &agreed) ||
		    !gw_relay_answer(r, sid, body)) {
			accepted(r);
		}
		return;
	}
	const char *mpv = json_string_value(json_object_get(
	        json_object_get(params, "_meta"), GW_META_VERSION));
	if (mpv != NULL && !version_known(mpv)) {
		/* 2026-07-28's stateless form (modern.c): the version in each
		 * request's _meta, no session */
		gw_modern(r, group, body);
		return;
	}
	if (pv != NULL && !version_known(pv)) {
		snprintf(msg, sizeof(msg),
		         "Bad Request: unsupported MCP-Protocol-Version %.32s "
		         "(this server speaks %s to %s)",
		         pv, versions[3], versions[0]);
		answer_rpc_error(r, 400, id, -32600, msg);
		return;
	}
	if (strcmp(method, "initialize") == 0 && id != NULL) {
		initialize(r, id, params);
		return;
	}
	if (sid == NULL) {
		answer_rpc_error(
		        r, 400, id, -32600,
		        "Bad Request: Mcp-Session-Id header is required (initialize first)");
		return;
	}
	if (!gw_session_use(r, sid, &agreed)) {
		answer_rpc_error(
		        r, 404, id, -32001,
		        "Session not found: it ended or expired; initialize again");
		return;
	}
	if (id == NULL) {
		if (strcmp(method, "notifications/cancelled") == 0) {
			cancel(sid, params);
		}
		accepted(r); /* a notification */
	} else if (strcmp(method, "ping") == 0) {
		gw_result(r, id, json_object());
	} else if (!gw_method(r, group, sid, &agreed, id, method, params)) {
		snprintf(msg, sizeof(msg), "Method not found: %.100s", method);
		answer_rpc_error(r, 200, id, -32601, msg);
	}
}

void
route_mcp_end(req *r, const char *unused, json_t *body)
{
	const char *sid = http_header(r, "Mcp-Session-Id");

	if (sid == NULL) {
		answer_rpc_error(
		        r, 400, NULL, -32600,
		        "Bad Request: Mcp-Session-Id header is required");
	} else if (!gw_session_end(r, sid)) {
		answer_rpc_error(r, 404, NULL, -32001, "Session not found");
	} else {
		events_end_mcp(sid);
		answer(r, 204, "application/json", "");
	}
}

void
route_mcp_stream(req *r, const char *unused, json_t *body)
{
	const char *sid    = http_header(r, "Mcp-Session-Id");
	const char *accept = http_header(r, "Accept");
	gw_agreed   agreed;

	if (accept == NULL || strstr(accept, "text/event-stream") == NULL) {
		answer_rpc_error(r, 406, NULL, -32600,
		                 "Not Acceptable: the stream needs Accept: "
		                 "text/event-stream");
	} else if (sid == NULL) {
		answer_rpc_error(
		        r, 400, NULL, -32600,
		        "Bad Request: Mcp-Session-Id header is required (initialize first)");
	} else if (!gw_session_use(r, sid, &agreed)) {
		answer_rpc_error(r, 404, NULL, -32001, "Session not found");
	} else if (!gw_session_stream(sid, true)) {
		answer_rpc_error(
		        r, 409, NULL, -32000,
		        "Conflict: this session's stream is open already");
	} else if (events_open_mcp(r, sid) != 0) {
		(void)gw_session_stream(sid, false); /* (answered) */
	} else {
		gw_changed(); /* (its first look: what it sees now) */
	}
}
