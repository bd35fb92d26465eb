/*
 * routes.c - the daemon's one routing table (method, path, lane, who may
 * call) and its handlers: the admin API, the data plane (tool calls and
 * a caller's own credential flows), the probes, the page and its event
 * stream.
 *
 * DESIGN: a route's auth is decided by http.c before its body is read;
 * a handler sees only requests its route allows, and narrows what a
 * virtual key may reach (its clients and tools) itself.  Every answer is
 * JSON ({"error": "..."} with a status that fits), never a secret.
 * Without an admin token the API never creates or changes a stdio
 * client: a command line comes from config.json only.
 */
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

extern const char   status_html[]; /* cli/status.html, embedded */
extern const size_t status_html_len;

const char *const states[] = {
        "healthy",  "unstable", "needs_reauth", "pending_verification",
        "disabled", "error",    "degraded",     NULL};

static void page(req *r, const char *id, json_t *body);
static void healthz(req *r, const char *id, json_t *body);
static void readyz(req *r, const char *id, json_t *body);
static void oauth_callback(req *r, const char *id, json_t *body);
static void clients_list(req *r, const char *id, json_t *body);
static void client_write(req *r, const char *id, json_t *body);
static void client_remove(req *r, const char *id, json_t *body);
static void lifecycle(req *r, const char *id, json_t *body);
static void authorize(req *r, const char *id, json_t *body);
static void complete_oauth(req *r, const char *id, json_t *body);
static void verify_headers(req *r, const char *id, json_t *body);
static void verify_exchange(req *r, const char *id, json_t *body);
static void submit_headers(req *r, const char *id, json_t *body);
static void user_oauth(req *r, const char *id, json_t *body);
static void tool_execute(req *r, const char *id, json_t *body);

/* Every endpoint, with its lane and who may call it. */
static const route routes[] = {
        {"GET", "/", LANE_INLINE, AUTH_OPEN, page},
        {"GET", "/healthz", LANE_INLINE, AUTH_OPEN, healthz},
        {"GET", "/readyz", LANE_PROBE, AUTH_OPEN, readyz},
        {"GET", "/metrics", LANE_PROBE, AUTH_METRICS, metrics},
        {"GET", "/api/events", LANE_INLINE, AUTH_READ, events_open},
        {"GET", "/api/oauth/callback", LANE_ADMIN, AUTH_OPEN, oauth_callback},
        {"GET", "/api/mcp/clients", LANE_ADMIN, AUTH_READ, clients_list},
        {"POST", "/api/mcp/client", LANE_ADMIN, AUTH_ADMIN, client_write},
        {"PUT", "/api/mcp/client/*", LANE_ADMIN, AUTH_ADMIN, client_write},
        {"DELETE", "/api/mcp/client/*", LANE_ADMIN, AUTH_ADMIN, client_remove},
        {"POST", "/api/mcp/client/*/reconnect", LANE_ADMIN, AUTH_ADMIN,
         lifecycle},
        {"POST", "/api/mcp/client/*/disable", LANE_ADMIN, AUTH_ADMIN,
         lifecycle},
        {"POST", "/api/mcp/client/*/enable", LANE_ADMIN, AUTH_ADMIN,
         lifecycle},
        {"POST", "/api/mcp/client/*/refresh-tools", LANE_ADMIN, AUTH_ADMIN,
         lifecycle},
        {"POST", "/api/mcp/client/*/reauthorize", LANE_ADMIN, AUTH_ADMIN,
         authorize},
        {"POST", "/api/mcp/client/*/initiate-verification", LANE_ADMIN,
         AUTH_ADMIN, authorize},
        {"POST", "/api/mcp/client/*/complete-oauth", LANE_ADMIN, AUTH_ADMIN,
         complete_oauth},
        {"POST", "/api/mcp/client/*/verify-headers", LANE_ADMIN, AUTH_ADMIN,
         verify_headers},
        {"POST", "/api/mcp/client/*/verify-exchange", LANE_ADMIN, AUTH_ADMIN,
         verify_exchange},
        /* the data plane: a caller's own credential, and tool calls */
        {"POST", "/api/mcp/client/*/submit-headers", LANE_DATA, AUTH_CALL,
         submit_headers},
        {"POST", "/api/mcp/client/*/user-oauth", LANE_DATA, AUTH_CALL,
         user_oauth},
        {"POST", "/api/mcp/tool/execute", LANE_DATA, AUTH_CALL, tool_execute},
};

/* path matches pattern ("*": one non-empty segment, copied to *id). */
static bool
match(const char *pattern, const char *path, char **id)
{
	const char *star = strchr(pattern, '*');
	size_t      pre  = star != NULL ? (size_t)(star - pattern) : 0;

	if (star == NULL) {
		return (strcmp(pattern, path) == 0);
	}
	if (strncmp(pattern, path, pre) != 0) {
		return (false);
	}
	const char *seg = path + pre;
	size_t      n   = strcspn(seg, "/");
	if (n == 0 || strcmp(seg + n, star + 1) != 0) {
		return (false);
	}
	*id = strndup(seg, n);
	return (*id != NULL);
}

const route *
route_find(const char *method, const char *path, char **id, bool *other_method)
{
	*other_method = false;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		char *got = NULL;
		if (!match(routes[i].path, path, &got)) {
			continue;
		}
		if (strcmp(routes[i].method, method) == 0) {
			*id = got;
			return (&routes[i]);
		}
		free(got);
		*other_method = true;
	}
	return (NULL);
}

/* ---- the status page ---------------------------------------------------- */

static char csp[512];

/* The hash of the text between open and close in the page, as CSP's
 * 'sha256-...'. */
static int
inline_hash(const char *open, const char *close, char *out, size_t len)
{
	const char   *a = strstr(status_html, open), *b;
	unsigned char h[32];
	unsigned int  n = 32;
	unsigned char b64[48];

	if (a == NULL || (b = strstr(a += strlen(open), close)) == NULL) {
		return (-1);
	}
	EVP_Digest(a, (size_t)(b - a), h, &n, EVP_sha256(), NULL);
	EVP_EncodeBlock(b64, h, 32);
	snprintf(out, len, "'sha256-%s'", b64);
	return (0);
}

/* The page's Content-Security-Policy: its one script and one style, by
 * hash; nothing else runs, loads, frames it or is posted from it. */
int
page_init(void)
{
	char script[64], style[64];

	if (inline_hash("<script>", "</script>", script, sizeof(script)) !=
	            0 ||
	    inline_hash("<style>", "</style>", style, sizeof(style)) != 0) {
		return (-1);
	}
	snprintf(csp, sizeof(csp),
	         "default-src 'none'; script-src %s; style-src %s; "
	         "connect-src 'self'; img-src 'self'; base-uri 'none'; "
	         "form-action 'none'; frame-ancestors 'none'",
	         script, style);
	return (0);
}

const char *
page_csp(void)
{
	return (csp);
}

static void
page(req *r, const char *id, json_t *body)
{
	answer(r, 200, "text/html; charset=utf-8", status_html);
}

/* ---- probes ------------------------------------------------------------- */

static void
healthz(req *r, const char *id, json_t *body)
{
	answer_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void
readyz(req *r, const char *id, json_t *body)
{
	mk_stats st = MK_STATS_INIT;

	pthread_mutex_lock(&D.mtx);
	bool booting = D.booting;
	pthread_mutex_unlock(&D.mtx);
	r->boot = booting; /* (expected: no warning) */
	int ok  = !booting && mk_runtime_stats(D.rt, &st, 2000) == 0 &&
	        st.store_state != MK_STORE_FAILING;
	answer_json(r, ok ? 200 : 503,
	            json_pack("{s:s}", "status",
	                      ok                ? "ready"
	                              : booting ? "booting"
	                                        : "not ready"));
}

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

/* Whether key k may reach client (a name) - and its tool, when tool is
 * not NULL. */
bool
key_allows(const vkey *k, const char *client, const char *tool)
{
	json_t *tools = json_object_get(k->clients, client);

	if (tools == NULL) {
		tools = json_object_get(k->clients, "*");
	}
	return (tools != NULL && (tool == NULL || listed_in(tools, tool)));
}

const char *
client_name(const json_t *c)
{
	const char *n = json_string_value(
	        json_object_get(json_object_get(c, "config"), "name"));

	return (n != NULL ? n : "?");
}

/* Every client's view, paged through the list (100 at a time), each
 * with its counters when metrics is true. */
json_t *
all_clients(bool metrics)
{
	json_t *all = json_array(), *c;
	size_t  i;

	for (size_t off = 0; all != NULL;) {
		char    filter[64], *text = NULL;
		json_t *page, *cs;

		snprintf(filter, sizeof(filter),
		         "{\"limit\": 100, \"offset\": %zu}", off);
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
	json_array_foreach(metrics ? all : NULL, i, c)
	{
		char *m = NULL;
		/* (a client removed meanwhile has none: it shows zeros) */
		if (mk_client_metrics_json(D.rt, client_name(c), &m) == 0) {
			json_object_set_new(c, "metrics",
			                    json_loads(m, 0, NULL));
		}
		mk_free(m);
	}
	return (all);
}

/* The view of the client named (or with the id) id: new reference, or
 * NULL. */
static json_t *
client_find(const char *id)
{
	char   *f = NULL, *text = NULL;
	json_t *q = json_pack("{s:s, s:i}", "search", id, "limit", 100);
	json_t *page, *c, *found = NULL;
	size_t  i;

	f = q != NULL ? json_dumps(q, JSON_COMPACT) : NULL;
	json_decref(q);
	if (f == NULL || mk_clients_json(D.rt, f, &text) != 0) {
		free(f);
		return (NULL);
	}
	free(f);
	page = json_loads(text, 0, NULL);
	mk_free(text);
	json_array_foreach(json_object_get(page, "clients"), i, c)
	{
		const json_t *cfg = json_object_get(c, "config");
		const char   *cid =
		        json_string_value(json_object_get(cfg, "client_id"));
		if (strcmp(client_name(c), id) == 0 ||
		    (cid != NULL && strcmp(cid, id) == 0)) {
			found = json_incref(c);
			break;
		}
	}
	json_decref(page);
	return (found);
}

/* The name of client id (a name or an id), malloc'd, or NULL. */
static char *
name_of(const char *id)
{
	json_t *c = client_find(id);
	char   *n = c != NULL ? strdup(client_name(c)) : NULL;

	json_decref(c);
	return (n);
}

/* Refuses (403) a key that may not reach client id (and tool). */
static bool
key_refuses(req *r, const char *id, const char *tool)
{
	char msg[300], *name = NULL;
	bool ok;

	if (r->key == NULL) {
		return (false);
	}
	ok = key_allows(r->key, id, tool);
	if (!ok && (name = name_of(id)) != NULL) {
		ok = key_allows(r->key, name, tool); /* (given by id) */
	}
	free(name);
	if (ok) {
		return (false);
	}
	if (tool != NULL && key_allows(r->key, id, NULL)) {
		snprintf(msg, sizeof(msg),
		         "virtual key \"%s\" may not call tool \"%.100s\" of "
		         "client \"%.64s\"",
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
		if (n != NULL && key_allows(k, client_name(c), n)) {
			json_array_append(keep, t);
		}
	}
	json_object_set_new(c, "tools", keep);
}

/* ---- the client list ---------------------------------------------------- */

/* A key's list: its clients only, paged here (limit, offset). */
static void
clients_for_key(req *r, long limit, long offset)
{
	json_t *all = all_clients(false), *out, *c;
	size_t  i;

	if (all == NULL) {
		answer_error(r, 503, "the runtime did not answer");
		return;
	}
	out = json_array();
	json_array_foreach(all, i, c)
	{
		if (key_allows(r->key, client_name(c), NULL)) {
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

static void
clients_list(req *r, const char *id, json_t *body)
{
	static const char *const keys[] = {"state", "connection_type",
	                                   "auth_type", "search"};
	static const char *const nums[] = {"limit", "offset"};
	json_t                  *f      = json_object();
	char                    *v, *out = NULL;
	long                     got[2] = {25, 0};
	int                      rc;

	for (size_t i = 0; i < 4; i++) {
		if ((v = query_get(r->query, keys[i])) != NULL) {
			json_object_set_new(f, keys[i], json_string(v));
			free(v);
		}
	}
	for (size_t i = 0; i < 2; i++) {
		if ((v = query_get(r->query, nums[i])) != NULL) {
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
	if (r->key != NULL) {
		json_decref(f);
		clients_for_key(r, got[0], got[1]);
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

/* ---- the admin API ------------------------------------------------------ */

/* The string field key of the body object, or NULL. */
static const char *
field(json_t *body, const char *key)
{
	return (json_string_value(json_object_get(body, key)));
}

/* Without an admin token, a command line comes from config.json only:
 * true (answered 403) when body would make or change a stdio client. */
static bool
stdio_refused(req *r, const char *id, json_t *body)
{
	const char *type = field(body, "connection_type");
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
		json_t *c = client_find(id);
		type      = json_string_value(json_object_get(
		             json_object_get(c, "config"), "connection_type"));
		stdio     = type != NULL && strcmp(type, "stdio") == 0;
		json_decref(c);
	}
	if (stdio) {
		answer_error(
		        r, 403,
		        "stdio clients are made and changed only in "
		        "config.json while the daemon has no admin token");
	}
	return (stdio);
}

/* POST /api/mcp/client (id NULL: a new client) and PUT
 * /api/mcp/client/{id} (a patch). */
static void
client_write(req *r, const char *id, json_t *body)
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

static void
client_remove(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc  = mk_client_remove(D.rt, id, &err);

	answer_api(r, rc, err, 200, NULL);
}

/* reconnect, disable, enable, refresh-tools: by the path's last part. */
static void
lifecycle(req *r, const char *id, json_t *body)
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

/* An authorize URL and its flow's id, or the error. */
static void
answer_flow(req *r, int rc, char *err, char *url, char *state)
{
	answer_api(r, rc, err, 200,
	           rc == 0 ? json_pack("{s:s, s:s}", "authorize_url", url,
	                               "session_id", state)
	                   : NULL);
	mk_free(url);
	mk_free(state);
}

/* reauthorize, initiate-verification */
static void
authorize(req *r, const char *id, json_t *body)
{
	char *err = NULL, *url = NULL, *state = NULL;
	int   rc = strstr(r->path, "/reauthorize") != NULL
	          ? mk_client_reauthorize(D.rt, id, &url, &state, &err)
	          : mk_client_initiate_verification(D.rt, id, &url, &state,
	                                            &err);

	answer_flow(r, rc, err, url, state);
}

static void
complete_oauth(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc;

	if (field(body, "state") == NULL || field(body, "code") == NULL) {
		answer_error(r, 400, "the body needs state and code");
		return;
	}
	rc = mk_client_complete_oauth(D.rt, id, field(body, "state"),
	                              field(body, "code"), &err);
	answer_api(r, rc, err, 200, NULL);
}

/* The headers object of body as JSON text (a secret), or NULL. */
static char *
headers_text(json_t *body)
{
	json_t *h = json_object_get(body, "headers");

	return (json_is_object(h) ? json_dumps(h, JSON_COMPACT) : NULL);
}

static void
verify_headers(req *r, const char *id, json_t *body)
{
	char *err = NULL, *text = headers_text(body);
	int   rc;

	if (text == NULL) {
		answer_error(r, 400, "the body needs headers: an object");
		return;
	}
	rc = mk_client_verify_headers(D.rt, id, text, &err);
	secret_free(text);
	answer_api(r, rc, err, 200, NULL);
}

static void
verify_exchange(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc;

	if (field(body, "subject_token") == NULL) {
		answer_error(r, 400, "the body needs subject_token");
		return;
	}
	rc = mk_client_verify_exchange(D.rt, id, field(body, "subject_token"),
	                               &err);
	answer_api(r, rc, err, 200, NULL);
}

static void
oauth_callback(req *r, const char *id, json_t *body)
{
	char *state = query_get(r->query, "state");
	char *code  = query_get(r->query, "code");
	char *err   = NULL, page[1024];
	int   rc    = state != NULL && code != NULL
	             ? mk_oauth_complete(D.rt, state, code, NULL, &err)
	             : MK_EINVAL;

	snprintf(page, sizeof(page),
	         "<!doctype html><html><head><meta charset=\"utf-8\">"
	         "<title>mcpkeep</title></head><body><h1>%s</h1><p>%s</p>"
	         "</body></html>",
	         rc == 0 ? "Authorized" : "Not authorized",
	         rc == 0 ? "The MCP client is authorized: you may close this "
	                   "window."
	                 : "The authorization could not be completed: start "
	                   "it again.");
	free(state);
	secret_free(code);
	mk_free(err);
	answer(r, rc == 0 ? 200 : 400, "text/html; charset=utf-8", page);
}

/* ---- the data plane ----------------------------------------------------- */

static void
submit_headers(req *r, const char *id, json_t *body)
{
	char *sid  = query_get(r->query, "session_id");
	char *text = headers_text(body), *err = NULL;
	int   rc;

	if (sid == NULL || text == NULL) {
		free(sid);
		secret_free(text);
		answer_error(r, 400,
		             "submit-headers needs ?session_id= and a headers "
		             "object");
		return;
	}
	if (key_refuses(r, id, NULL)) {
		free(sid);
		secret_free(text);
		return;
	}
	rc = mk_user_headers_submit(D.rt, sid, text, &err);
	secret_free(text);
	free(sid);
	answer_api(r, rc, err, 200, NULL);
}

/* The identity of r's per-user calls: its key's name (mode vk) unless
 * the key trusts the headers; else the headers'. */
static const char *
identity(const req *r, const char **mode)
{
	if (r->id_user != NULL) {
		*mode = "user";
		return (r->id_user);
	}
	if (r->id_session != NULL) {
		*mode = "session";
		return (r->id_session);
	}
	*mode = r->key != NULL ? "vk" : NULL;
	return (r->key != NULL ? r->key->name : NULL);
}

static void
user_oauth(req *r, const char *id, json_t *body)
{
	char       *err = NULL, *url = NULL, *state = NULL;
	const char *mode, *who = identity(r, &mode);
	int         rc;

	if (key_refuses(r, id, NULL)) {
		return;
	}
	if (mode == NULL) {
		answer_error(
		        r, 400,
		        "user-oauth needs the caller's identity (a virtual "
		        "key, X-MCP-User-Id or X-MCP-Session-Id)");
		return;
	}
	rc = mk_user_oauth_start(D.rt, id, mode, who, &url, &state, &err);
	answer_flow(r, rc, err, url, state);
}

/* A tool call, answered from its callback. */
static void
on_tool(void *arg, int rc, mk_result *res)
{
	req *r = arg;

	if (rc == 0 && res != NULL && res->result != NULL) {
		json_t *j = json_loads(res->result, 0, NULL);
		json_t *o =
		        json_pack("{s:o}", "result",
		                  j != NULL ? j : json_string(res->result));
		if (res->recovery != NULL) {
			json_object_set_new(
			        o, "recovery",
			        json_loads(res->recovery, 0, NULL));
		}
		answer_json(r, 200, o);
	} else if (rc == MK_EAUTH && res != NULL &&
	           res->auth_required != NULL) {
		json_t *p = json_loads(res->auth_required, 0, NULL);
		answer_json(r, 401,
		            json_pack("{s:s, s:o}", "error",
		                      res->error != NULL ? res->error
		                                         : "authorize first",
		                      "mcp_auth_required",
		                      p != NULL ? p : json_null()));
	} else {
		answer_error(r, status_of(rc),
		             res != NULL && res->error != NULL
		                     ? res->error
		                     : mk_strerror(rc));
	}
	mk_result_free(&res);
}

static void
tool_execute(req *r, const char *id, json_t *body)
{
	const char *client = field(body, "client");
	const char *tool   = field(body, "tool");
	json_t     *args   = json_object_get(body, "arguments");
	json_t     *to     = json_object_get(body, "timeout");
	const char *mode, *who = identity(r, &mode);
	char       *atext;
	int         rc;

	if (client == NULL || tool == NULL ||
	    (args != NULL && !json_is_object(args)) ||
	    (to != NULL && !json_is_integer(to))) {
		answer_error(
		        r, 400,
		        "the body needs client and tool (strings), arguments "
		        "(an object) and optionally timeout (milliseconds)");
		return;
	}
	if (to != NULL &&
	    (json_integer_value(to) < 0 ||
	     json_integer_value(to) > INT32_MAX)) {
		/* never cut to an int: 4294967297 is not 1 ms */
		answer_error(r, 400,
		             "timeout must be from 0 to 2147483647 "
		             "milliseconds");
		return;
	}
	if (key_refuses(r, client, tool)) {
		return;
	}
	atext     = args != NULL ? json_dumps(args, JSON_COMPACT) : NULL;
	mk_call c = {
	        .client        = client,
	        .tool          = tool,
	        .arguments     = atext,
	        .timeout_ms    = to != NULL ? (int)json_integer_value(to) : 0,
	        .user_id       = mode != NULL && mode[0] == 'u' ? who : NULL,
	        .virtual_key   = mode != NULL && mode[0] == 'v' ? who : NULL,
	        .session_id    = mode != NULL && mode[0] == 's' ? who : NULL,
	        .subject_token = r->bearer};
	rc = mk_tool_call_async(D.rt, &c, on_tool, r);
	free(atext);
	if (rc != 0) {
		answer_error(r, status_of(rc),
		             rc == MK_ENOENT ? "no such MCP client"
		                             : mk_strerror(rc));
	}
}
