/*
 * config_file.c - a whole config.json validated (see config.h): its
 * top level, the mcp section's globals and client list (names and ids
 * unique), the store and server sections, virtual keys.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/strmap.h"
#include "codec/text.h"
#include "mcpkeep.h"
#include "model/config.h"
#include "model/config_impl.h"

#define CFG_FILE_MAX (4u * 1024u * 1024u)

/* One virtual key's grants: client name (or "*") -> tool names (or
 * ["*"]). */
static int
grants_of(cfg_pctx *x, const char *field, json_t *v)
{
	const char *k;
	json_t     *tools, *t;
	size_t      i;

	if (!json_is_object(v) || json_object_size(v) == 0) {
		return (cfg_bad(
		        x, field,
		        "must be an object of client names to tool lists"));
	}
	json_object_foreach(v, k, tools)
	{
		if (!json_is_array(tools) || json_array_size(tools) == 0) {
			return (cfg_bad(
			        x, field,
			        "client \"%.64s\": must be a list of tool names, or [\"*\"]",
			        k));
		}
		json_array_foreach(tools, i, t)
		{
			if (!json_is_string(t) ||
			    *json_string_value(t) == '\0') {
				return (cfg_bad(
				        x, field,
				        "client \"%.64s\": a tool name must be a non-empty string",
				        k));
			}
		}
	}
	return (0);
}

/* The entry e of a list of named objects (field names it): only fields
 * of keys, and a "name" of 1 to 64 letters, digits, '_' or '-' not
 * taken by an entry of done.  Returns 0 or cfg_bad. */
static int
named_entry(cfg_pctx *x, const char *field, json_t *e, const char **keys,
            json_t *done)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *k;
	json_t     *f, *o;
	size_t      j;

	if (!json_is_object(e)) {
		return (cfg_bad(x, field, "must be an object"));
	}
	json_object_foreach(e, k, f)
	{
		if (!cfg_known(k, keys)) {
			return (cfg_bad(x, field, "unknown field \"%.60s\"",
			                k));
		}
	}
	if (name == NULL || *name == '\0' || strlen(name) > 64 ||
	    name[strspn(name,
	                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	                "WXYZ0123456789_-")] != '\0') {
		return (cfg_bad(
		        x, field,
		        "name must be 1 to 64 letters, digits, '_' or '-'"));
	}
	json_array_foreach(done, j, o)
	{
		if (strcmp(json_string_value(json_object_get(o, "name")),
		           name) == 0) {
			return (cfg_bad(x, field,
			                "the name \"%s\" is used twice",
			                name));
		}
	}
	return (0);
}

/*
 * server.tool_groups: each {name, clients} - a named subset of clients and
 * tools that /mcp/<name> serves; names unique, 1 to 64 letters, digits,
 * '_' or '-'.  The result is a copy the caller owns.
 */
static int
groups_of(cfg_pctx *x, json_t *v, json_t **out)
{
	static const char *keys[] = {"name", "clients", NULL};
	json_t            *all    = json_array(), *e;
	size_t             i;
	char               field[64];
	int                rv = 0;

	if (all == NULL) {
		return (MK_ENOMEM);
	}
	if (!json_is_array(v)) {
		json_decref(all);
		return (cfg_bad(x, "server.tool_groups", "must be an array"));
	}
	json_array_foreach(v, i, e)
	{
		snprintf(field, sizeof(field), "server.tool_groups[%zu]", i);
		if ((rv = named_entry(x, field, e, keys, all)) != 0 ||
		    (rv = grants_of(x, field,
		                    json_object_get(e, "clients"))) != 0) {
			break;
		}
		if (json_array_append_new(
		            all,
		            json_pack("{s:O, s:O}", "name",
		                      json_object_get(e, "name"), "clients",
		                      json_object_get(e, "clients"))) != 0) {
			rv = MK_ENOMEM;
			break;
		}
	}
	if (rv != 0) {
		json_decref(all);
		return (rv);
	}
	*out = all;
	return (0);
}

/*
 * server.virtual_keys: each {name, value, clients, trust_identity_headers,
 * calls_per_second, burst, max_calls_in_flight} with its value resolved
 * (env.); names and values unique, values at least VKEY_MIN bytes (a key
 * is a password a gateway hands out); the limits absent (none) or
 * positive numbers.  The result is a copy the caller owns (values are
 * secrets).
 */

/* A key's limit field: absent (0), else a number in 1..max (a rate may
 * be a fraction of one, at least 0.001).  Returns 0 or cfg_bad. */
static int
limit_of(cfg_pctx *x, const char *field, const json_t *e, const char *name,
         bool fraction, double max, double *out)
{
	json_t *v = json_object_get(e, name);
	double  d = json_number_value(v);

	*out = 0;
	if (v == NULL) {
		return (0);
	}
	if (!json_is_number(v) || d < (fraction ? 0.001 : 1) || d > max ||
	    (!fraction && !json_is_integer(v))) {
		return (cfg_bad(x, field, "%s must be %s from %s to %.0f",
		                name, fraction ? "a number" : "a whole number",
		                fraction ? "0.001" : "1", max));
	}
	*out = d;
	return (0);
}
static int
vkeys_of(cfg_pctx *x, json_t *v, json_t **out)
{
	static const char *keys[] = {"name",
	                             "value",
	                             "clients",
	                             "trust_identity_headers",
	                             "calls_per_second",
	                             "burst",
	                             "max_calls_in_flight",
	                             NULL};
	double             rate, burst, inflight;
	json_t            *all = json_array(), *e;
	size_t             i;
	char               field[64], *value = NULL;
	int                rv = 0;

	if (all == NULL) {
		return (MK_ENOMEM);
	}
	if (!json_is_array(v)) {
		json_decref(all);
		return (cfg_bad(x, "server.virtual_keys", "must be an array"));
	}
	json_array_foreach(v, i, e)
	{
		snprintf(field, sizeof(field), "server.virtual_keys[%zu]", i);
		if ((rv = named_entry(x, field, e, keys, all)) != 0) {
			break;
		}
		const char *name =
		        json_string_value(json_object_get(e, "name"));
		json_t *trust = json_object_get(e, "trust_identity_headers");
		if (trust != NULL && !json_is_boolean(trust)) {
			rv = cfg_bad(
			        x, field,
			        "trust_identity_headers must be true or false");
			break;
		}
		if ((rv = limit_of(x, field, e, "calls_per_second", true, 1e6,
		                   &rate)) != 0 ||
		    (rv = limit_of(x, field, e, "burst", false, 1e6,
		                   &burst)) != 0 ||
		    (rv = limit_of(x, field, e, "max_calls_in_flight", false,
		                   1e5, &inflight)) != 0) {
			break;
		}
		if (burst != 0 && rate == 0) {
			rv = cfg_bad(x, field, "burst needs calls_per_second");
			break;
		}
		if ((rv = grants_of(x, field,
		                    json_object_get(e, "clients"))) != 0 ||
		    (rv = cfg_str_of(x, field, json_object_get(e, "value"),
		                     NULL, &value)) != 0) {
			break;
		}
		if (strlen(value) < VKEY_MIN) {
			/* (the length only: never the value) */
			rv = cfg_bad(
			        x, field,
			        "the value of key \"%s\" is shorter than %d characters",
			        name, VKEY_MIN);
			break;
		}
		json_t *o;
		size_t  j;
		json_array_foreach(all, j, o)
		{
			if (strcmp(json_string_value(
			                   json_object_get(o, "value")),
			           value) == 0) {
				rv = cfg_bad(
				        x, field,
				        "key \"%s\" has the value of another key",
				        name);
			}
		}
		if (rv != 0) {
			break;
		}
		o = json_pack("{s:s, s:s, s:O, s:b, s:f, s:f, s:f}", "name",
		              name, "value", value, "clients",
		              json_object_get(e, "clients"),
		              "trust_identity_headers", json_is_true(trust),
		              "calls_per_second", rate, "burst", burst,
		              "max_calls_in_flight", inflight);
		if (o == NULL || json_array_append_new(all, o) != 0) {
			rv = MK_ENOMEM;
			break;
		}
		OPENSSL_cleanse(value, strlen(value));
		free(value);
		value = NULL;
	}
	if (value != NULL) {
		OPENSSL_cleanse(value, strlen(value));
		free(value);
	}
	if (rv != 0) {
		json_decref(all);
		return (rv);
	}
	*out = all;
	return (0);
}

static int
file_fail(char *err, size_t errlen, int rv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	cfg_one_line(err);
	return (rv);
}

/* A client's name and client_id in the maps of clients_unique. */
typedef struct seen {
	strmap_ent name; /* key: the client's name */
	strmap_ent id;   /* key: its client_id */
} seen;

/* Checks that no two clients of f share a name or a client_id, and that
 * no client_id is another client's name (an {id} must name one client):
 * with maps, since a file may hold thousands.  Returns 0, MK_EINVAL
 * (err says which client) or MK_ENOMEM. */
static int
clients_unique(const cfg_file *f, char *err, size_t errlen)
{
	strmap names = {0}, ids = {0};
	seen  *s  = calloc(f->nclients + 1, sizeof(*s));
	int    rv = s != NULL ? 0 : MK_ENOMEM;

	for (size_t i = 0; rv == 0 && i < f->nclients; i++) {
		const cfg_client *c = f->clients[i];

		if (strmap_get(&names, c->name) != NULL) {
			rv = file_fail(err, errlen, MK_EINVAL,
			               "client \"%s\": the name is used twice",
			               c->name);
		} else if (strmap_get(&ids, c->id) != NULL) {
			rv = file_fail(
			        err, errlen, MK_EINVAL,
			        "client \"%s\": client_id \"%s\" is used twice",
			        c->name, c->id);
		} else if (strmap_get(&names, c->id) != NULL ||
		           strmap_get(&ids, c->name) != NULL) {
			rv = file_fail(
			        err, errlen, MK_EINVAL,
			        "client \"%s\": a client_id is another client's name (an {id} must name one client)",
			        c->name);
		} else {
			s[i].name.key = c->name;
			s[i].id.key   = c->id;
			if (strmap_put(&names, &s[i].name) != 0 ||
			    strmap_put(&ids, &s[i].id) != 0) {
				rv = MK_ENOMEM;
			}
		}
	}
	strmap_fini(&names);
	strmap_fini(&ids);
	free(s);
	return (rv);
}

/* Refuses the first key of section o (its path prefix: "", "mcp.", ...)
 * that is not one of keys. */
static int
unknown_in(json_t *o, const char *prefix, const char **keys, char *err,
           size_t errlen)
{
	const char *k;
	json_t     *v;

	json_object_foreach(o, k, v)
	{
		if (!cfg_known(k, keys)) {
			return (file_fail(err, errlen, MK_EINVAL,
			                  "config: unknown field \"%s%.60s\"",
			                  prefix, k));
		}
	}
	return (0);
}

/* The section name of root in *out: NULL when absent; one that is not an
 * object is refused. */
static int
section(json_t *root, const char *name, json_t **out, char *err, size_t errlen)
{
	*out = json_object_get(root, name);
	if (*out != NULL && !json_is_object(*out)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: field \"%s\" must be an object",
		                  name));
	}
	return (0);
}

/* server.inputs: ["elicitation", "sampling", "roots"], any of them. */
static int
inputs_of(cfg_pctx *x, json_t *v, unsigned *out)
{
	static const char *kinds[] = {"elicitation", "sampling", "roots"};
	size_t             i;
	json_t            *e;

	if (!json_is_array(v)) {
		return (cfg_bad(
		        x, "server.inputs",
		        "must be an array of \"elicitation\", \"sampling\", \"roots\""));
	}
	json_array_foreach(v, i, e)
	{
		unsigned bit = 0;
		for (size_t k = 0; k < 3 && json_is_string(e); k++) {
			if (strcmp(json_string_value(e), kinds[k]) == 0) {
				bit = 1u << k;
			}
		}
		if (bit == 0) {
			return (cfg_bad(
			        x, "server.inputs",
			        "entry %zu is not \"elicitation\", \"sampling\" or \"roots\"",
			        i));
		}
		*out |= bit;
	}
	return (0);
}

/* server.roots: [{"uri": "file://...", "name": "..."}]. */
static int
roots_of(cfg_pctx *x, json_t *v, json_t **out)
{
	static const char *keys[] = {"uri", "name", NULL};
	size_t             i;
	json_t            *e;
	char               field[48], dotted[52];
	int                rv;

	if (!json_is_array(v)) {
		return (cfg_bad(x, "server.roots",
		                "must be an array of {\"uri\", \"name\"}"));
	}
	json_array_foreach(v, i, e)
	{
		const char *uri = json_string_value(json_object_get(e, "uri"));
		json_t     *name = json_object_get(e, "name");
		snprintf(field, sizeof(field), "server.roots[%zu]", i);
		if (!json_is_object(e)) {
			return (cfg_bad(x, field, "must be an object"));
		}
		snprintf(dotted, sizeof(dotted), "%s.", field);
		if ((rv = unknown_in(e, dotted, keys, x->err, x->errlen)) !=
		    0) {
			return (rv);
		}
		if (uri == NULL || strncmp(uri, "file://", 7) != 0) {
			return (cfg_bad(x, field,
			                "needs \"uri\": a file:// URI"));
		}
		if (name != NULL && !json_is_string(name)) {
			return (cfg_bad(x, field,
			                "\"name\" must be a string"));
		}
	}
	*out = json_incref(v);
	return (0);
}

/* A declared client without a client_id gets one made from what makes it
 * that client - the fields an update cannot change, as written (env.
 * names, not their values): the first 16 bytes of SHA-256 of them, in
 * hex.  Every node that reads the same file makes the same one, so nodes
 * booting together on an empty shared store write one row, not one
 * each; a reload that changes one of them makes another client, with
 * another id.  Returns 0 or MK_ENOMEM. */
static int
declared_id(cfg_client *c, json_t *v)
{
	static const char *const fixed[] = {"name", "connection_type",
	                                    "connection_string", "auth_type"};
	unsigned char            md[EVP_MAX_MD_SIZE];
	unsigned int             n = 0;
	char                     hex[33], *text = NULL;
	json_t                  *k = json_object();

	for (size_t i = 0; k != NULL && i < 4; i++) {
		json_t *f = json_object_get(v, fixed[i]);
		if (f != NULL && json_object_set(k, fixed[i], f) != 0) {
			json_decref(k);
			k = NULL;
		}
	}
	text = k != NULL ? json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(k);
	if (text == NULL ||
	    EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL) != 1 ||
	    n < 16) {
		free(text);
		return (MK_ENOMEM);
	}
	free(text);
	for (int i = 0; i < 16; i++) {
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	}
	free(c->id);
	return ((c->id = strdup(hex)) != NULL ? 0 : MK_ENOMEM);
}

static int
parse_file(json_t *root, cfg_file *f, char *err, size_t errlen)
{
	static const char *top[]      = {"mcp",     "store",     "server",
	                                 "cluster", "telemetry", NULL};
	static const char *telk[]     = {"otlp_endpoint", NULL};
	static const char *clusterk[] = {"node_id", "heartbeat_interval",
	                                 NULL};
	static const char *mcpk[]     = {
	            "client_configs",         "tool_sync_interval",
	            "tool_execution_timeout", "stdio_start_concurrency",
	            "tool_changes",           NULL};
	static const char *storek[]  = {"path", "url", NULL};
	static const char *serverk[] = {
	        "listen",          "admin_token",   "stream",
	        "allowed_origins", "stream_public", "metrics_token",
	        "virtual_keys",    "tool_groups",   "client_metadata_url",
	        "inputs",          "roots",         NULL};
	cfg_pctx x = {"?", err, errlen, NULL};
	json_t  *mcp, *list, *v, *sec;
	size_t   i;
	int      rv;

	if (!json_is_object(root)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: the top level must be an object"));
	}
	if ((rv = unknown_in(root, "", top, err, errlen)) != 0) {
		return (rv);
	}
	if ((rv = section(root, "mcp", &mcp, err, errlen)) != 0 ||
	    (rv = unknown_in(mcp, "mcp.", mcpk, err, errlen)) != 0) {
		return (rv);
	}
	f->sync_ms = CFG_SYNC_DEFAULT_MS;
	f->exec_ms = CFG_EXEC_DEFAULT_MS;
	if ((v = json_object_get(mcp, "tool_sync_interval")) != NULL &&
	    (cfg_duration(v, &f->sync_ms) != 0 || f->sync_ms < 1000)) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.tool_sync_interval\" must be a duration of at least 1s"));
	}
	if ((v = json_object_get(mcp, "tool_execution_timeout")) != NULL &&
	    (cfg_duration(v, &f->exec_ms) != 0 || f->exec_ms < 1)) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.tool_execution_timeout\" must be a positive duration"));
	}
	if ((v = json_object_get(mcp, "stdio_start_concurrency")) != NULL &&
	    (!json_is_integer(v) || json_integer_value(v) < 1 ||
	     json_integer_value(v) > 1024)) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.stdio_start_concurrency\" must be an integer from 1 to 1024"));
	}
	f->start_conc = (unsigned)json_integer_value(v); /* 0: the default */
	if ((v = json_object_get(mcp, "tool_changes")) != NULL &&
	    (f->changes = cfg_changes_of(v)) < 0) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.tool_changes\" must be \"accept\", \"hold\" or \"block\""));
	}
	list = json_object_get(mcp, "client_configs");
	if (list != NULL && !json_is_array(list)) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.client_configs\" must be an array"));
	}
	if ((f->clients = calloc(json_array_size(list) + 1,
	                         sizeof(*f->clients))) == NULL) {
		return (MK_ENOMEM);
	}
	json_array_foreach(list, i, v)
	{
		if ((rv = cfg_client_parse(v, NULL, &f->clients[i], err,
		                           errlen)) != 0) {
			return (rv);
		}
		f->nclients++;
		if (json_object_get(v, "client_id") == NULL &&
		    declared_id(f->clients[i], v) != 0) {
			return (MK_ENOMEM);
		}
	}
	if ((rv = clients_unique(f, err, errlen)) != 0) {
		return (rv);
	}
	x.client = "(store)";
	if ((rv = section(root, "store", &sec, err, errlen)) != 0) {
		return (rv);
	}
	if (sec != NULL) {
		if ((rv = unknown_in(sec, "store.", storek, err, errlen)) !=
		    0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "path")) != NULL &&
		    (rv = cfg_str_of(&x, "store.path", v, NULL,
		                     &f->store_path)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "url")) != NULL &&
		    (rv = cfg_str_of(&x, "store.url", v, NULL,
		                     &f->store_url)) != 0) {
			return (rv);
		}
		if (f->store_url != NULL &&
		    strncmp(f->store_url, "postgresql://", 13) != 0 &&
		    strncmp(f->store_url, "postgres://", 11) != 0) {
			return (cfg_bad(&x, "store.url",
			                "expected a postgresql:// URL"));
		}
		if (f->store_url != NULL && f->store_path != NULL) {
			return (cfg_bad(
			        &x, "store.url",
			        "set store.path (a SQLite file) or store.url (PostgreSQL), not both"));
		}
	}
	x.client = "(cluster)";
	if ((rv = section(root, "cluster", &sec, err, errlen)) != 0) {
		return (rv);
	}
	if (sec != NULL) {
		if ((rv = unknown_in(sec, "cluster.", clusterk, err,
		                     errlen)) != 0 ||
		    ((v = json_object_get(sec, "node_id")) != NULL &&
		     (rv = cfg_str_of(&x, "cluster.node_id", v, NULL,
		                      &f->node_id)) != 0)) {
			return (rv);
		}
		if ((v = json_object_get(sec, "heartbeat_interval")) != NULL &&
		    (cfg_duration(v, &f->heartbeat_ms) != 0 ||
		     f->heartbeat_ms < 100 || f->heartbeat_ms > 3600000)) {
			return (cfg_bad(&x, "cluster.heartbeat_interval",
			                "must be a duration of 100ms to 1h"));
		}
	}
	x.client = "(telemetry)";
	if ((rv = section(root, "telemetry", &sec, err, errlen)) != 0) {
		return (rv);
	}
	if (sec != NULL &&
	    ((rv = unknown_in(sec, "telemetry.", telk, err, errlen)) != 0 ||
	     ((v = json_object_get(sec, "otlp_endpoint")) != NULL &&
	      (rv = cfg_str_of(&x, "telemetry.otlp_endpoint", v, NULL,
	                       &f->otlp_endpoint)) != 0))) {
		return (rv);
	}
	if (f->otlp_endpoint != NULL &&
	    strncmp(f->otlp_endpoint, "http://", 7) != 0 &&
	    strncmp(f->otlp_endpoint, "https://", 8) != 0) {
		return (cfg_bad(&x, "telemetry.otlp_endpoint",
		                "must be an http:// or https:// URL (the "
		                "collector's base URL, e.g. "
		                "http://127.0.0.1:4318)"));
	}
	x.client = "(server)";
	if ((rv = section(root, "server", &sec, err, errlen)) != 0) {
		return (rv);
	}
	if (sec != NULL) {
		if ((rv = unknown_in(sec, "server.", serverk, err, errlen)) !=
		    0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "listen")) != NULL &&
		    (rv = cfg_str_of(&x, "server.listen", v, NULL,
		                     &f->listen)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "admin_token")) != NULL &&
		    (rv = cfg_str_of(&x, "server.admin_token", v, NULL,
		                     &f->admin_token)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "stream")) != NULL &&
		    (rv = cfg_strv_of(&x, "server.stream", v, NULL,
		                      &f->streams)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "allowed_origins")) != NULL &&
		    (rv = cfg_strv_of(&x, "server.allowed_origins", v, NULL,
		                      &f->origins)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "stream_public")) != NULL) {
			if (!json_is_boolean(v)) {
				return (cfg_bad(&x, "server.stream_public",
				                "must be true or false"));
			}
			f->stream_public = json_is_true(v);
		}
		if ((v = json_object_get(sec, "metrics_token")) != NULL &&
		    (rv = cfg_str_of(&x, "server.metrics_token", v, NULL,
		                     &f->metrics_token)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "client_metadata_url")) !=
		            NULL &&
		    (rv = cfg_str_of(&x, "server.client_metadata_url", v, NULL,
		                     &f->client_metadata_url)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "virtual_keys")) != NULL &&
		    (rv = vkeys_of(&x, v, &f->vkeys)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "tool_groups")) != NULL &&
		    (rv = groups_of(&x, v, &f->groups)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "inputs")) != NULL &&
		    (rv = inputs_of(&x, v, &f->inputs)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "roots")) != NULL &&
		    (rv = roots_of(&x, v, &f->roots)) != 0) {
			return (rv);
		}
	}
	return (0);
}

int
cfg_file_parse(const char *text, size_t len, cfg_file **out, char *err,
               size_t errlen)
{
	json_error_t je;
	json_t      *root;
	cfg_file    *f;
	int          rv;

	*out = NULL;
	if (len > CFG_FILE_MAX) {
		return (file_fail(
		        err, errlen, MK_ETOOBIG,
		        "config: %zu bytes exceeds the %u-byte limit", len,
		        CFG_FILE_MAX));
	}
	if ((root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)) ==
	    NULL) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: invalid JSON at line %d column %d: %s",
		        je.line, je.column, je.text));
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		json_decref(root);
		return (MK_ENOMEM);
	}
	rv = parse_file(root, f, err, errlen);
	json_decref(root);
	if (rv != 0) {
		cfg_file_free(&f);
		return (rv);
	}
	*out = f;
	return (0);
}

void
cfg_file_free(cfg_file **fp)
{
	cfg_file *f;

	if (fp == NULL || (f = *fp) == NULL) {
		return;
	}
	*fp = NULL;
	for (size_t i = 0; i < f->nclients; i++) {
		cfg_client_free(&f->clients[i]);
	}
	free(f->clients);
	free(f->store_path);
	free(f->store_url);
	free(f->node_id);
	free(f->listen);
	free(f->admin_token);
	free(f->metrics_token);
	free(f->client_metadata_url);
	free(f->otlp_endpoint);
	json_decref(f->roots);
	text_strv_free(f->streams);
	text_strv_free(f->origins);
	json_decref(f->vkeys);
	json_decref(f->groups);
	free(f);
}
