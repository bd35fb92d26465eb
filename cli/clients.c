/*
 * clients.c - the clients as a caller may see them: every view, one found
 * by name or id, what a virtual key may reach (its clients and tools,
 * and the view cut to them); the client list; and the admin API's client
 * handlers (add, update, remove, reconnect, disable, enable,
 * refresh-tools).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

/* ---- virtual keys ------------------------------------------------------- */

static bool
listed_in(const json_t *names, const char *name)
{
	size_t  i;
	json_t *v;

	json_array_foreach(names, i, v)
	{
		const char *s = json_string_value(v);
		if (strcmp(s, "*") == 0 ||
		    (name != NULL && strcmp(s, name) == 0)) {
			return (true);
		}
	}
	return (false);
}

bool
clients_view_allows(const json_t *c, const char *tool)
{
	return (listed_in(json_object_get(json_object_get(c, "config"),
	                                  "tools_to_execute"),
	                  tool));
}

/* Whether key k may reach client (a name) - and its tool, when tool is
 * not NULL. */
bool
clients_grants_allow(const json_t *grants, const char *client,
                     const char *tool)
{
	json_t *tools;

	if (grants == NULL) {
		return (true);
	}
	if ((tools = json_object_get(grants, client)) == NULL) {
		tools = json_object_get(grants, "*");
	}
	return (tools != NULL && (tool == NULL || listed_in(tools, tool)));
}

bool
clients_key_allows(const vkey *k, const char *client, const char *tool)
{
	return (clients_grants_allow(k->clients, client, tool));
}

const char *
clients_name(const json_t *c)
{
	const char *n = json_string_value(
	        json_object_get(json_object_get(c, "config"), "name"));

	return (n != NULL ? n : "?");
}

/* Every client's view, paged through the list (100 at a time), each
 * with its counters when metrics is true (the ones the supervisor keeps:
 * no ask per client). */
json_t *
clients_all(bool metrics)
{
	json_t *all = json_array();

	for (size_t off = 0; all != NULL;) {
		char    filter[96], *text = NULL;
		json_t *page, *cs;

		snprintf(filter, sizeof(filter),
		         "{\"limit\": 100, \"offset\": %zu, \"metrics\": %s}",
		         off, metrics ? "true" : "false");
		if (mk_clients_json(D.rt, filter, &text) != 0) {
			json_decref(all);
			return (NULL);
		}
		page = json_loads(text, 0, NULL);
		mk_free(text);
		cs = json_object_get(page, "clients");
		if (json_array_size(cs) == 0) {
			json_decref(page);
			break;
		}
		json_array_extend(all, cs);
		off += json_array_size(cs);
		json_decref(page);
	}
	return (all);
}

/* The view of the client named (or with the id) id in *found (a new
 * reference; NULL when there is none).  Pages through the search for it
 * (100 at a time): names that hold its name may sort before it.
 * Returns 0, or the runtime's error (then *found is NULL). */
static int
client_find(const char *id, json_t **found)
{
	int rc;

	*found = NULL;
	for (size_t off = 0; *found == NULL;) {
		char   *f = NULL, *text = NULL;
		json_t *q = json_pack("{s:s, s:i, s:I}", "search", id, "limit",
		                      100, "offset", (json_int_t)off);
		json_t *page, *cs, *c;
		size_t  i;

		f = q != NULL ? json_dumps(q, JSON_COMPACT) : NULL;
		json_decref(q);
		rc = f == NULL ? MK_ENOMEM : mk_clients_json(D.rt, f, &text);
		free(f);
		if (rc != 0) {
			return (rc);
		}
		page = json_loads(text, 0, NULL);
		mk_free(text);
		if (page == NULL) {
			return (MK_ENOMEM);
		}
		cs = json_object_get(page, "clients");
		if (json_array_size(cs) == 0) {
			json_decref(page);
			return (0);
		}
		json_array_foreach(cs, i, c)
		{
			const json_t *cfg = json_object_get(c, "config");
			const char   *cid = json_string_value(
			          json_object_get(cfg, "client_id"));
			if (strcmp(clients_name(c), id) == 0 ||
			    (cid != NULL && strcmp(cid, id) == 0)) {
				*found = json_incref(c);
				break;
			}
		}
		off += json_array_size(cs);
		json_decref(page);
	}
	return (0);
}

/* The name of client id (a name or an id), malloc'd, or NULL. */
static char *
name_of(const char *id)
{
	json_t *c;
	char   *n;

	(void)client_find(id, &c);
	n = c != NULL ? strdup(clients_name(c)) : NULL;

	json_decref(c);
	return (n);
}

/* Refuses (403) a key that may not reach client id (and tool). */
bool
route_key_refuses(req *r, const char *id, const char *tool)
{
	char msg[300], *name = NULL;
	bool ok;

	if (r->key == NULL) {
		return (false);
	}
	ok = clients_key_allows(r->key, id, tool);
	if (!ok && (name = name_of(id)) != NULL) {
		ok = clients_key_allows(r->key, name,
		                        tool); /* (given by id) */
	}
	free(name);
	if (ok) {
		return (false);
	}
	if (tool != NULL && clients_key_allows(r->key, id, NULL)) {
		snprintf(
		        msg, sizeof(msg),
		        "virtual key \"%s\" may not call tool \"%.100s\" of client \"%.64s\"",
		        r->key->name, tool, id);
	} else {
		snprintf(msg, sizeof(msg),
		         "virtual key \"%s\" may not use client \"%.64s\"",
		         r->key->name, id);
	}
	answer_error(r, 403, msg);
	return (true);
}

/* A view cut to what key k may see: its allowed tools only. */
static void
view_for_key(json_t *c, const vkey *k)
{
	json_t *tools = json_object_get(c, "tools"), *keep = json_array(), *t;
	size_t  i;

	json_array_foreach(tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n != NULL && clients_key_allows(k, clients_name(c), n)) {
			json_array_append(keep, t);
		}
	}
	json_object_set_new(c, "tools", keep);
}

/* ---- the client list ---------------------------------------------------- */

/* A key's list: its clients only, paged here (limit, offset). */
static void
clients_for_key(req *r, long limit, long offset, bool metrics)
{
	json_t *all = clients_all(metrics), *out, *c;
	size_t  i;

	if (all == NULL) {
		answer_error(r, 503, "the runtime did not answer");
		return;
	}
	out = json_array();
	json_array_foreach(all, i, c)
	{
		if (clients_key_allows(r->key, clients_name(c), NULL)) {
			view_for_key(c, r->key);
			json_array_append(out, c);
		}
	}
	json_decref(all);
	size_t  total = json_array_size(out);
	json_t *page  = json_array();
	for (size_t k = (size_t)offset;
	     k < total && k < (size_t)(offset + limit); k++) {
		json_array_append(page, json_array_get(out, k));
	}
	json_decref(out);
	answer_json(r, 200,
	            json_pack("{s:o, s:I, s:I}", "clients", page, "count",
	                      (json_int_t)json_array_size(page), "total_count",
	                      (json_int_t)total));
}

void
route_clients_list(req *r, const char *id, json_t *body)
{
	static const char *const keys[] = {"state", "connection_type",
	                                   "auth_type", "search"};
	static const char *const nums[] = {"limit", "offset"};
	json_t                  *f      = json_object();
	char                    *v, *out = NULL;
	long                     got[2] = {25, 0};
	bool                     metrics;
	int                      rc;

	for (size_t i = 0; i < 4; i++) {
		if ((v = mk_query_param(r->query, keys[i])) != NULL) {
			json_object_set_new(f, keys[i], json_string(v));
			free(v);
		}
	}
	for (size_t i = 0; i < 2; i++) {
		if ((v = mk_query_param(r->query, nums[i])) != NULL) {
			char *end;
			long  n = strtol(v, &end, 10);
			if (*v == '\0' || *end != '\0' || n < 0 ||
			    (i == 0 && (n < 1 || n > 100))) {
				char msg[96];
				snprintf(msg, sizeof(msg), "%s must be %s",
				         nums[i],
				         i == 0 ? "1 to 100" : "0 or more");
				free(v);
				json_decref(f);
				answer_error(r, 400, msg);
				return;
			}
			json_object_set_new(f, nums[i], json_integer(n));
			got[i] = n;
			free(v);
		}
	}
	/* metrics=1: each view with its counters (the page's sparklines) */
	v       = mk_query_param(r->query, "metrics");
	metrics = v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
	free(v);
	json_object_set_new(f, "metrics", json_boolean(metrics));
	if (r->key != NULL) {
		json_decref(f);
		clients_for_key(r, got[0], got[1], metrics);
		return;
	}
	char *ftext = json_dumps(f, JSON_COMPACT);
	json_decref(f);
	rc = mk_clients_json(D.rt, ftext, &out);
	free(ftext);
	if (rc != 0) {
		answer_api(r, rc, NULL, 200, NULL);
		return;
	}
	answer(r, 200, "application/json", out);
	mk_free(out);
}

/* A client's array from get (its transitions, its tool-list versions)
 * as {key: [...]}; a key sees only its clients'. */
typedef int (*array_fn)(mk_runtime *rt, const char *name, char **out);

static void
client_array(req *r, const char *id, array_fn get, const char *key)
{
	char   *text = NULL;
	json_t *j;
	int     rc;

	if (route_key_refuses(r, id, NULL)) {
		return;
	}
	if ((rc = get(D.rt, id, &text)) != 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "no MCP client %.64s", id);
		answer_error(r, answer_status_of(rc),
		             rc == MK_ENOENT ? msg : mk_strerror(rc));
		return;
	}
	j = json_loads(text, 0, NULL);
	mk_free(text);
	answer_json(r, 200,
	            json_pack("{s:o}", key, j != NULL ? j : json_array()));
}

void
route_client_history(req *r, const char *id, json_t *body)
{
	(void)body;
	client_array(r, id, mk_client_history_json, "history");
}

void
route_client_tool_versions(req *r, const char *id, json_t *body)
{
	(void)body;
	client_array(r, id, mk_client_tool_versions_json, "versions");
}

/* ---- the admin API ------------------------------------------------------ */

/* Without an admin token, a command line comes from config.json only:
 * true (answered 403) when body would make or change a stdio client (its
 * own type looked up by name or id: answered 503 when the runtime does
 * not say). */
static bool
stdio_refused(req *r, const char *id, json_t *body)
{
	const char *type = http_field(body, "connection_type");
	bool        stdio;

	pthread_mutex_lock(&D.mtx);
	bool token = D.token != NULL;
	pthread_mutex_unlock(&D.mtx);
	if (token) {
		return (false);
	}
	stdio = (type != NULL && strcmp(type, "stdio") == 0) ||
	        json_object_get(body, "stdio_config") != NULL;
	if (!stdio && id != NULL) {
		json_t *c;
		if (client_find(id, &c) != 0) {
			answer_error(r, 503, "the runtime did not answer");
			return (true);
		}
		type  = json_string_value(json_object_get(
		         json_object_get(c, "config"), "connection_type"));
		stdio = type != NULL && strcmp(type, "stdio") == 0;
		json_decref(c);
	}
	if (stdio) {
		answer_error(
		        r, 403,
		        "stdio clients are made and changed only in config.json while the daemon has no admin token");
	}
	return (stdio);
}

/* POST /api/mcp/client (id NULL: a new client) and PUT
 * /api/mcp/client/{id} (a patch). */
void
route_client_write(req *r, const char *id, json_t *body)
{
	char *cid = NULL, *err = NULL, *text;
	int   rc;

	if (body == NULL) {
		answer_error(r, 400,
		             id == NULL ? "the body must be a client config"
		                        : "the body must be a JSON object");
		return;
	}
	if (stdio_refused(r, id, body)) {
		return;
	}
	text = json_dumps(body, JSON_COMPACT);
	rc   = text == NULL    ? MK_ENOMEM
	          : id == NULL ? mk_client_add(D.rt, text, &cid, &err)
	                       : mk_client_update(D.rt, id, text, &err);
	free(text);
	answer_api(r, rc, err, id == NULL ? 201 : 200,
	           rc == 0 && id == NULL ? json_pack("{s:s}", "id", cid)
	                                 : NULL);
	mk_free(cid);
}

void
route_client_remove(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc  = mk_client_remove(D.rt, id, &err);

	answer_api(r, rc, err, 200, NULL);
}

/* reconnect, disable, enable, refresh-tools: by the path's last part. */
void
route_lifecycle(req *r, const char *id, json_t *body)
{
	const char *action = strrchr(r->path, '/') + 1;
	char       *err    = NULL;
	int         rc;

	rc = strcmp(action, "reconnect") == 0
	        ? mk_client_reconnect(D.rt, id, &err)
	        : strcmp(action, "disable") == 0
	        ? mk_client_disable(D.rt, id, &err)
	        : strcmp(action, "enable") == 0
	        ? mk_client_enable(D.rt, id, &err)
	        : mk_client_refresh_tools(D.rt, id, &err);
	answer_api(r, rc, err, 200, NULL);
}

/* tool_changes hold: the held list approved or rejected, by digest. */
static void
tools_decide(req *r, const char *id, json_t *body, bool approve)
{
	const char *digest = http_field(body, "digest");
	char       *err    = NULL, msg[128];
	int         rc;

	if (digest == NULL) {
		answer_error(r, 400,
		             "field \"digest\" must be the list's digest (the "
		             "client's tools_pending)");
		return;
	}
	rc = approve ? mk_client_tools_approve(D.rt, id, digest, &err)
	             : mk_client_tools_reject(D.rt, id, digest, &err);
	if (rc == MK_ENOENT) {
		snprintf(msg, sizeof(msg), "no MCP client %.64s", id);
		answer_error(r, 404, msg);
		return;
	}
	answer_api(
	        r, rc, err, 200,
	        json_pack("{s:s}", approve ? "approved" : "rejected", digest));
}

void
route_tools_approve(req *r, const char *id, json_t *body)
{
	tools_decide(r, id, body, true);
}

void
route_tools_reject(req *r, const char *id, json_t *body)
{
	tools_decide(r, id, body, false);
}
