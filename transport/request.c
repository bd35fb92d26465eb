/*
 * request.c - the MCP session's requests: ping, the lists (every page,
 * within the limits of mcp.h, no cursor twice), tools/call (with
 * progress), prompts/get, resources/read, cancellation; and tool
 * annotations read with their defaults.
 */
#include <stdlib.h>
#include <string.h>

#include "codec/text.h"
#include "mcpkeep.h"
#include "transport/mcp.h"
#include "transport/session_impl.h"

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
mcp_session_idempotent(const mcp_session *s)
{
	json_t *t = json_object_get(
	        json_object_get(mcp_session_server_caps(s), "tools"),
	        "idempotency");

	return (json_is_object(t) || json_is_true(t));
}

const char *
mcp_tool_key_param(json_t *tool)
{
	static const char *const names[] = {"idempotencyKey",
	                                    "idempotency_key"};
	json_t *props = json_object_get(json_object_get(tool, "inputSchema"),
	                                "properties");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		json_t *p = json_object_get(props, names[i]);
		json_t *t = json_object_get(p, "type");
		if (json_is_object(p) &&
		    (t == NULL ||
		     (json_is_string(t) &&
		      strcmp(json_string_value(t), "string") == 0))) {
			return (names[i]);
		}
	}
	return (NULL);
}

static const struct {
	const char *method, *key;
	size_t      items, bytes;
} lists[MCP_LIST_KINDS] = {
        [MCP_LIST_TOOLS]     = {"tools/list", "tools", MCP_MAX_TOOLS,
                                MCP_MAX_TOOLS_BYTES},
        [MCP_LIST_PROMPTS]   = {"prompts/list", "prompts", MCP_MAX_ITEMS,
                                MCP_MAX_LIST_BYTES},
        [MCP_LIST_RESOURCES] = {"resources/list", "resources", MCP_MAX_ITEMS,
                                MCP_MAX_LIST_BYTES},
        [MCP_LIST_TEMPLATES] = {"resources/templates/list",
                                "resourceTemplates", MCP_MAX_ITEMS,
                                MCP_MAX_LIST_BYTES},
};

const char *
mcp_list_method(mcp_list_kind k)
{
	return (lists[k].method);
}

const char *
mcp_list_key(mcp_list_kind k)
{
	return (lists[k].key);
}

/* Bytes of a list's array as compact JSON (the view's and the store's
 * form), counted without building the text. */
static size_t
items_bytes(json_t *items)
{
	size_t  n = 2, i;
	json_t *t;

	json_array_foreach(items, i, t)
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
	const char *method = lists[p->list].method, *key = lists[p->list].key;

	p->bytes += items_bytes(tools) + clen;
	if (p->bytes > lists[p->list].bytes) {
		return (mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "%s exceeds %zu MiB in total (%zu bytes of %s and cursors in %u pages)",
		        method, lists[p->list].bytes >> 20, p->bytes, key,
		        p->pages));
	}
	if (json_array_size(p->items) + json_array_size(tools) >
	            lists[p->list].items ||
	    p->pages > MCP_MAX_PAGES) {
		return (mcp_error_set(
		        e, MCP_E_PROTOCOL, "%s exceeds %zu %s or %d pages",
		        method, lists[p->list].items, key, MCP_MAX_PAGES));
	}
	if (!json_is_string(cursor)) {
		return (NULL);
	}
	if (json_object_getn(p->cursors, json_string_value(cursor), clen) !=
	    NULL) {
		/* the cursor's value is the server's: not in the message */
		return (mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "%s repeats the cursor of an earlier page (page %u): paging stopped",
		        method, p->pages));
	}
	if (json_object_setn_new(p->cursors, json_string_value(cursor), clen,
	                         json_null()) != 0) {
		return (mcp_error_set(e, MCP_E_LOCAL,
		                      "cannot keep the %s cursor", method));
	}
	return (NULL);
}

/* A list's page arrived: keep it, ask for the next or finish. */
void
session_on_page(mcp_session *s, pend *p, json_t *result)
{
	const char      *key    = lists[p->list].key;
	json_t          *tools  = json_object_get(result, key);
	json_t          *cursor = json_object_get(result, "nextCursor");
	const mcp_error *why;
	mcp_error        e;
	int              rv;

	if (!json_is_array(tools) ||
	    (cursor != NULL && !json_is_string(cursor) &&
	     !json_is_null(cursor))) {
		session_complete(s, p,
		                 mcp_error_set(&e, MCP_E_PROTOCOL,
		                               "%s result without a %s array",
		                               lists[p->list].method, key),
		                 NULL);
		return;
	}
	if ((why = page_refused(p, tools, cursor, &e)) != NULL) {
		session_complete(s, p, why, NULL);
		return;
	}
	json_array_extend(p->items, tools);
	if (json_is_integer(json_object_get(result, "ttlMs")) &&
	    json_integer_value(json_object_get(result, "ttlMs")) >= 0 &&
	    (p->ttl_ms < 0 ||
	     json_integer_value(json_object_get(result, "ttlMs")) <
	             p->ttl_ms)) {
		p->ttl_ms =
		        json_integer_value(json_object_get(result, "ttlMs"));
	}
	if (!json_is_string(cursor)) {
		json_t *all = json_pack("{s:O}", key, p->items);
		if (all != NULL && p->ttl_ms >= 0) {
			json_object_set_new(
			        all, "ttlMs",
			        json_integer((json_int_t)p->ttl_ms));
		}
		session_complete(s, p, NULL, all);
		json_decref(all);
		return;
	}
	json_t *params = json_pack("{s:O}", "cursor", cursor);
	rv             = session_send_request(s, p, params,
	                                      (const char *const *)p->headers);
	json_decref(params);
	if (rv != 0) {
		session_complete(
		        s, p,
		        mcp_error_set(
		                &e, MCP_E_LOCAL,
		                "cannot request the next %s page (code %d)",
		                lists[p->list].method, rv),
		        NULL);
	}
}

/* ---- requests --------------------------------------------------------- */

/* Sends the request what names (its kind, method, list). */
static int
start(mcp_session *s, pend what, json_t *params, const mcp_req_opts *o,
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
	p->kind   = what.kind;
	p->method = what.method;
	p->list   = what.list;
	p->fn     = fn;
	p->arg    = arg;
	p->timeout_ms =
	        o != NULL && o->timeout_ms > 0 ? o->timeout_ms : s->timeout_ms;
	if (o != NULL) {
		p->progress = o->progress;
		p->parg     = o->progress_arg;
		p->tool     = o->tool != NULL ? json_incref(o->tool) : NULL;
		if ((o->traceparent != NULL &&
		     (p->trace[0] = strdup(o->traceparent)) == NULL) ||
		    (o->tracestate != NULL &&
		     (p->trace[1] = strdup(o->tracestate)) == NULL)) {
			session_pend_free(p);
			return (MK_ENOMEM);
		}
	}
	p->ttl_ms = -1;
	if (p->kind == P_LIST &&
	    ((p->items = json_array()) == NULL ||
	     (p->cursors = json_object()) == NULL ||
	     (o != NULL && o->headers != NULL &&
	      (p->headers = text_strv_dup(o->headers)) == NULL))) {
		session_pend_free(p);
		return (MK_ENOMEM);
	}
	/* a progress token is the request id: set when sent */
	if ((rv = session_send_request(s, p, params, o ? o->headers : NULL)) !=
	    0) {
		session_pend_free(p);
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
	return (start(s, (pend) {.kind = P_PING}, NULL, o, fn, arg, idp));
}

int
mcp_list(mcp_session *s, mcp_list_kind k, const mcp_req_opts *o,
         mcp_result_fn fn, void *arg, int64_t *idp)
{
	return (start(s, (pend) {.kind = P_LIST, .list = k}, NULL, o, fn, arg,
	              idp));
}

int
mcp_list_tools(mcp_session *s, const mcp_req_opts *o, mcp_result_fn fn,
               void *arg, int64_t *idp)
{
	return (mcp_list(s, MCP_LIST_TOOLS, o, fn, arg, idp));
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
	if (params != NULL && o != NULL && o->idempotency_key != NULL) {
		json_object_set_new(params, "_meta",
		                    json_pack("{s:s}", "idempotencyKey",
		                              o->idempotency_key));
	}
	if (params == NULL) {
		return (MK_ENOMEM);
	}
	rv = start(s, (pend) {.kind = P_CALL, .method = "tools/call"}, params,
	           o, fn, arg, idp);
	json_decref(params);
	return (rv);
}

int
mcp_get_prompt(mcp_session *s, const char *name, json_t *arguments,
               const mcp_req_opts *o, mcp_result_fn fn, void *arg,
               int64_t *idp)
{
	json_t *params;
	int     rv;

	if (name == NULL ||
	    (arguments != NULL && !json_is_object(arguments))) {
		return (MK_EINVAL);
	}
	if ((params = json_pack("{s:s}", "name", name)) == NULL ||
	    (arguments != NULL && json_object_size(arguments) > 0 &&
	     json_object_set(params, "arguments", arguments) != 0)) {
		json_decref(params);
		return (MK_ENOMEM);
	}
	rv = start(s, (pend) {.kind = P_CALL, .method = "prompts/get"}, params,
	           o, fn, arg, idp);
	json_decref(params);
	return (rv);
}

int
mcp_read_resource(mcp_session *s, const char *uri, const mcp_req_opts *o,
                  mcp_result_fn fn, void *arg, int64_t *idp)
{
	json_t *params;
	int     rv;

	if (uri == NULL) {
		return (MK_EINVAL);
	}
	if ((params = json_pack("{s:s}", "uri", uri)) == NULL) {
		return (MK_ENOMEM);
	}
	rv = start(s, (pend) {.kind = P_CALL, .method = "resources/read"},
	           params, o, fn, arg, idp);
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
	session_send_notification(s, "notifications/cancelled", params);
	json_decref(params);
	session_complete(
	        s, p,
	        mcp_error_set(&e, MCP_E_CANCELLED, "%s cancelled: %s",
	                      session_method_of(p),
	                      reason != NULL ? reason : "by the client"),
	        NULL);
	session_finish_upcall(s); /* its callback may have freed s */
	return (0);
}
