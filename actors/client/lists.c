/*
 * lists.c - the server's prompts, resources and resource templates (the
 * lists beside its tools): listed on each new sticky connection and
 * again on the server's list_changed - a per-call client's at each
 * discovery, on the discovery's session, kept open until they are in -
 * within mcp.h's bounds, held in the client's view.  A change pushes the view
 * and publishes a "lists" event (the content hash of the three, and how many
 * items they hold).
 *
 * DESIGN: only what the server declared is asked for (capabilities
 * "prompts", "resources"); a list it does not declare is empty.  A list
 * that fails keeps the one held before (the next connection or notice
 * asks again); like tools/list, a burst of notices while one list is
 * out makes one more, not one each.  Tools stay conn.c's: they are
 * hashed, stored and decide the connection's health; these do not.
 */
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/log.h"
#include "codec/mp.h"

static bool
declared(mcp_session *s, mcp_list_kind k)
{
	json_t *caps = mcp_session_server_caps(s);

	return (json_is_object(json_object_get(
	        caps, k == MCP_LIST_PROMPTS ? "prompts" : "resources")));
}

/* Publishes the three lists' hash and size once one changed. */
static void
publish(client *cl)
{
	json_t       *all = json_array();
	char          hash[TOOLS_HASH_HEX];
	int64_t       n = 0;
	cl_list_event ev;

	for (int k = MCP_LIST_PROMPTS; all != NULL && k < MCP_LIST_KINDS;
	     k++) {
		json_t *l = cl->lists[k].items;
		json_array_append_new(
		        all, l != NULL ? json_incref(l) : json_array());
		n += (int64_t)json_array_size(l);
	}
	/* (an array of arrays: hashed as they are, in the server's order) */
	if (all == NULL || tools_hash(all, hash) != 0) {
		json_decref(all);
		return;
	}
	json_decref(all);
	ev = (cl_list_event) {
	        .client_id = cl->cfg->id,
	        .name      = cl->cfg->name,
	        .hash      = hash,
	        .count     = n,
	};
	kn_stream_publish_msg(cl->stream, "lists",
	                      CODEC_OF(cl_list_event, &ev));
}

/* A list changed: the view and the stream hear of it. */
static void
changed(client *cl)
{
	cl_push_view(cl);
	publish(cl);
}

/* Holds items (NULL: none) as list k; true when that changed it. */
static bool
set_list(client *cl, mcp_list_kind k, json_t *items)
{
	json_t *old = cl->lists[k].items;

	if ((old == NULL ? json_array_size(items) == 0
	                 : items != NULL && json_equal(old, items))) {
		return (false);
	}
	json_decref(old);
	cl->lists[k].items = items != NULL && json_array_size(items) > 0
	        ? json_incref(items)
	        : NULL;
	return (true);
}

static void ask(client *cl, mcp_list_kind k);

static void
listed(void *arg, const mcp_error *err, json_t *result)
{
	cl_list *l  = arg;
	client  *cl = l->cl;

	l->out = false;
	if (err != NULL) {
		/* kept as it was: the next connection or notice asks again */
		KN_DEBUG("client", "%s: %s failed: %s", cl->cfg->name,
		         mcp_list_method(l->kind), err->message);
	} else if (set_list(cl, l->kind,
	                    json_object_get(result, mcp_list_key(l->kind)))) {
		changed(cl);
	}
	if (l->again) { /* (a notice, or a new connection, meanwhile) */
		l->again = false;
		ask(cl, l->kind);
	}
	if (cl->lconn != NULL && --cl->lwait == 0) {
		cl_sconn *c = cl->lconn;
		cl->lconn   = NULL;
		cl_conn_free(c); /* (its own upcall: freed once it returns) */
	}
}

/* Asks the live connection for list k (once at a time). */
static void
ask(client *cl, mcp_list_kind k)
{
	cl_list     *l = &cl->lists[k];
	mcp_req_opts o = {.timeout_ms = CLIENT_CONNECT_MS};

	if (l->out) {
		l->again = true;
		return;
	}
	if (cl->live == NULL) {
		return;
	}
	if (!declared(cl->live->s, k)) {
		if (set_list(cl, k, NULL)) {
			changed(cl);
		}
		return;
	}
	if (mcp_list(cl->live->s, k, &o, listed, l, NULL) == 0) {
		l->out = true;
	}
}

bool
cl_lists_adopt(client *cl, cl_sconn *c)
{
	mcp_req_opts o   = {.timeout_ms = CLIENT_CONNECT_MS};
	bool         any = false;

	if (cl->lconn != NULL) {
		return (false); /* the last discovery's are still coming */
	}
	cl->lconn = c;
	cl->lwait = 1; /* (held while they are sent) */
	for (int k = MCP_LIST_PROMPTS; k < MCP_LIST_KINDS; k++) {
		cl_list *l = &cl->lists[k];
		if (!declared(c->s, (mcp_list_kind)k)) {
			any |= set_list(cl, (mcp_list_kind)k, NULL);
		} else if (!l->out &&
		           mcp_list(c->s, (mcp_list_kind)k, &o, listed, l,
		                    NULL) == 0) {
			l->out = true;
			cl->lwait++;
		}
	}
	if (any) {
		changed(cl);
	}
	if (--cl->lwait == 0) {
		cl->lconn = NULL;
		return (false); /* nothing asked: the caller frees it */
	}
	return (true);
}

void
cl_lists_init(client *cl)
{
	for (int k = MCP_LIST_PROMPTS; k < MCP_LIST_KINDS; k++) {
		cl->lists[k].cl   = cl;
		cl->lists[k].kind = (mcp_list_kind)k;
	}
}

void
cl_lists_fetch(client *cl, bool prompts, bool resources)
{
	if (prompts) {
		ask(cl, MCP_LIST_PROMPTS);
	}
	if (resources) {
		ask(cl, MCP_LIST_RESOURCES);
		ask(cl, MCP_LIST_TEMPLATES);
	}
}

void
cl_lists_view(client *cl, json_t *view)
{
	static const char *const names[MCP_LIST_KINDS] = {
	        NULL, "prompts", "resources", "resource_templates"};

	for (int k = MCP_LIST_PROMPTS; k < MCP_LIST_KINDS; k++) {
		json_t *l = cl->lists[k].items;
		json_object_set_new(view, names[k],
		                    l != NULL ? json_incref(l) : json_array());
	}
}

void
cl_lists_fini(client *cl)
{
	for (int k = MCP_LIST_PROMPTS; k < MCP_LIST_KINDS; k++) {
		json_decref(cl->lists[k].items);
		cl->lists[k].items = NULL;
	}
}
