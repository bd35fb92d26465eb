/*
 * config.c - one client's config validated (see config.h): its fields,
 * stdio, headers, tools and credential sections, and its stored form.
 */
#include "model/config.h"

#include <ctype.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/text.h"
#include "mcpkeep.h"
#include "model/config_impl.h"

static const char *conn_names[] = {"http", "sse", "stdio"};
static const char *auth_names[] = {"none",           "headers",
                                   "oauth",          "per_user_headers",
                                   "per_user_oauth", "token_exchange"};

const char *
cfg_conn_name(cfg_conn c)
{
	return (conn_names[c]);
}

const char *
cfg_auth_name(cfg_auth a)
{
	return (auth_names[a]);
}

bool
cfg_auth_per_user(cfg_auth a)
{
	return (a >= CFG_AUTH_PER_USER_HEADERS);
}

/* A credential section (an object of the given keys): a resolved copy,
 * or NULL when absent. */
static int
section_of(cfg_pctx *x, json_t *o, const char *field, const char *const *keys,
           json_t **out)
{
	json_t     *v   = json_object_get(o, field), *e;
	json_t     *lit = cfg_lit_key(x->lit, field);
	const char *k;
	char        f[128];
	int         rv;

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		return (0);
	}
	if (!json_is_object(v)) {
		return (cfg_bad(x, field, "must be an object"));
	}
	if ((*out = json_object()) == NULL) {
		return (MK_ENOMEM);
	}
	json_object_foreach(v, k, e)
	{
		size_t i = 0;
		while (keys[i] != NULL && strcmp(keys[i], k) != 0) {
			i++;
		}
		snprintf(f, sizeof(f), "%s.%.60s", field, k);
		if (keys[i] == NULL) {
			rv = cfg_bad(x, f, "is not a known field");
		} else if (strcmp(k, "scopes") == 0) {
			char **sv = NULL;
			if ((rv = cfg_strv_of(x, f, e, cfg_lit_key(lit, k),
			                      &sv)) == 0) {
				json_t *a = json_array();
				for (size_t j = 0; sv[j] != NULL; j++) {
					json_array_append_new(
					        a, json_string(sv[j]));
				}
				json_object_set_new(*out, k, a);
				text_strv_free(sv);
			}
		} else {
			char *sv = NULL;
			if ((rv = cfg_str_of(x, f, e, cfg_lit_key(lit, k),
			                     &sv)) == 0) {
				json_object_set_new(*out, k, json_string(sv));
				free(sv);
			}
		}
		if (rv != 0) {
			json_decref(*out);
			*out = NULL;
			return (rv);
		}
	}
	return (0);
}

static int
enum_of(cfg_pctx *x, const char *field, json_t *v, const char **names, int n,
        int *out)
{
	if (json_is_string(v)) {
		for (int i = 0; i < n; i++) {
			if (strcmp(json_string_value(v), names[i]) == 0) {
				*out = i;
				return (0);
			}
		}
	}
	char list[200] = "";
	for (int i = 0; i < n; i++) {
		strncat(list, names[i], sizeof(list) - strlen(list) - 3);
		if (i + 1 < n) {
			strcat(list, ", ");
		}
	}
	return (cfg_bad(x, field, "must be one of %s", list));
}

bool
cfg_oauth_alone(cfg_auth a, const json_t *oauth)
{
	const char *g =
	        json_string_value(json_object_get(oauth, "grant_type"));

	return (a == CFG_AUTH_OAUTH && g != NULL &&
	        strcmp(g, "client_credentials") == 0);
}

bool
cfg_acts_alone(const cfg_client *c)
{
	return (cfg_oauth_alone(c->auth, c->oauth));
}

/* The credential sections' words that name a choice: absent, or one of
 * those we speak (else an error naming the field and the choices). */
static int
oauth_enums(cfg_pctx *x, const cfg_client *c)
{
	static const char *methods[]   = {"none", "client_secret_basic",
	                                  "client_secret_post",
	                                  "private_key_jwt"};
	static const char *grants[]    = {"authorization_code",
	                                  "client_credentials"};
	static const char *requested[] = {
	        "urn:ietf:params:oauth:token-type:access_token",
	        "urn:ietf:params:oauth:token-type:id-jag"};
	static const char *subjects[] = {
	        "urn:ietf:params:oauth:token-type:access_token",
	        "urn:ietf:params:oauth:token-type:id_token",
	        "urn:ietf:params:oauth:token-type:jwt"};
	static const struct {
		const char  *field;
		const char **names;
		int          n;
	} e[] = {
	        {"oauth_config.auth_method", methods, 4},
	        {"oauth_config.grant_type", grants, 2},
	        {"token_exchange.auth_method", methods + 1, 2},
	        {"token_exchange.requested_token_type", requested, 2},
	        {"token_exchange.subject_token_type", subjects, 3},
	};
	int rv, i;

	for (size_t k = 0; k < sizeof(e) / sizeof(e[0]); k++) {
		json_t *sec = k < 2 ? c->oauth : c->exchange;
		json_t *v = json_object_get(sec, strchr(e[k].field, '.') + 1);
		if (v != NULL &&
		    (rv = enum_of(x, e[k].field, v, e[k].names, e[k].n, &i)) !=
		            0) {
			return (rv);
		}
		if (k == 0 && v != NULL && i == 3 &&
		    json_object_get(c->oauth, "private_key") == NULL) {
			return (cfg_bad(
			        x, "oauth_config.private_key",
			        "is needed for auth_method private_key_jwt"));
		}
	}
	return (0);
}

bool
cfg_name_valid(const char *s)
{
	if (*s == '\0' || strlen(s) > 64) {
		return (false);
	}
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && *s != '_') {
			return (false);
		}
	}
	return (true);
}

static char *
new_id(void)
{
	unsigned char r[16];
	char          hex[33];

	if (RAND_bytes(r, sizeof(r)) != 1) {
		return (NULL);
	}
	for (int i = 0; i < 16; i++) {
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	}
	return (strdup(hex));
}

static const char *known_keys[] = {"name",
                                   "client_id",
                                   "connection_type",
                                   "connection_string",
                                   "stdio_config",
                                   "auth_type",
                                   "headers",
                                   "oauth_config",
                                   "per_user_header_keys",
                                   "token_exchange",
                                   "needs_session_stickiness",
                                   "tools_to_execute",
                                   "is_ping_available",
                                   "tool_sync_interval",
                                   "tool_execution_timeout",
                                   "max_concurrent_calls",
                                   "cache_results",
                                   "tool_changes",
                                   "disabled",
                                   NULL};

/* cache_results: {tool: ttl}, each ttl a duration from 1 s to a day;
 * kept as {tool: ms}. */
int
cfg_changes_of(const json_t *v)
{
	static const char *const names[] = {
	        [CFG_CHANGES_ACCEPT] = "accept",
	        [CFG_CHANGES_HOLD]   = "hold",
	        [CFG_CHANGES_BLOCK]  = "block",
	};
	const char *s = json_string_value(v);

	for (int i = CFG_CHANGES_ACCEPT; s != NULL && i <= CFG_CHANGES_BLOCK;
	     i++) {
		if (strcmp(s, names[i]) == 0) {
			return (i);
		}
	}
	return (-1);
}

static int
parse_cache(cfg_pctx *x, cfg_client *c, json_t *v)
{
	const char *tool;
	json_t     *ttl;
	int64_t     ms;

	if (!json_is_object(v) || (c->cache = json_object()) == NULL) {
		return (cfg_bad(x, "cache_results",
		                "must be an object of tool names to durations "
		                "(e.g. {\"search\": \"60s\"})"));
	}
	json_object_foreach(v, tool, ttl)
	{
		if (*tool == '\0' || cfg_duration(ttl, &ms) != 0 ||
		    ms < 1000 || ms > CFG_CACHE_TTL_MAX_MS) {
			return (cfg_bad(x, "cache_results",
			                "the ttl of tool \"%.64s\" must be a "
			                "duration from 1s to 24h",
			                tool));
		}
		json_object_set_new(c->cache, tool, json_integer(ms));
	}
	return (0);
}

static int
parse_stdio(cfg_pctx *x, cfg_client *c, json_t *sc)
{
	static const char *keys[] = {"command", "args", "envs", NULL};
	json_t            *lit    = cfg_lit_key(x->lit, "stdio_config");
	const char        *k;
	json_t            *v;
	int                rv;

	if (!json_is_object(sc)) {
		return (cfg_bad(x, "stdio_config", "must be an object"));
	}
	json_object_foreach(sc, k, v)
	{
		if (!cfg_known(k, keys)) {
			return (cfg_bad(x, "stdio_config",
			                "unknown field \"%.60s\"", k));
		}
	}
	if ((v = json_object_get(sc, "command")) == NULL) {
		return (cfg_bad(x, "stdio_config.command", "is required"));
	}
	if ((rv = cfg_str_of(x, "stdio_config.command", v,
	                     cfg_lit_key(lit, "command"), &c->command)) != 0) {
		return (rv);
	}
	if (c->command[0] == '\0') {
		return (cfg_bad(x, "stdio_config.command",
		                "must not be empty"));
	}
	if ((v = json_object_get(sc, "args")) != NULL &&
	    (rv = cfg_strv_of(x, "stdio_config.args", v,
	                      cfg_lit_key(lit, "args"), &c->args)) != 0) {
		return (rv);
	}
	if ((v = json_object_get(sc, "envs")) != NULL &&
	    (rv = cfg_strv_of(x, "stdio_config.envs", v,
	                      cfg_lit_key(lit, "envs"), &c->envs)) != 0) {
		return (rv);
	}
	for (size_t i = 0; c->envs != NULL && c->envs[i] != NULL; i++) {
		const char *e = c->envs[i];
		size_t      n = strcspn(e, "=");
		if (n == 0) {
			return (cfg_bad(x, "stdio_config.envs",
			                "entries are NAME or NAME=value"));
		}
	}
	return (0);
}

static int
parse_headers(cfg_pctx *x, cfg_client *c, json_t *h)
{
	const char *k;
	json_t     *v;
	size_t      i = 0;
	char        f[160];
	int         rv;

	if (!json_is_object(h)) {
		return (cfg_bad(x, "headers", "must be an object of strings"));
	}
	if ((c->headers = calloc(json_object_size(h) + 1, sizeof(char *))) ==
	    NULL) {
		return (MK_ENOMEM);
	}
	json_object_foreach(h, k, v)
	{
		char *val;
		snprintf(f, sizeof(f), "headers.%.100s", k);
		if (*k == '\0' || strpbrk(k, ": \r\n") != NULL) {
			return (cfg_bad(x, f, "is not a valid header name"));
		}
		if ((rv = cfg_str_of(
		             x, f, v,
		             cfg_lit_key(cfg_lit_key(x->lit, "headers"), k),
		             &val)) != 0) {
			return (rv);
		}
		if (strpbrk(val, "\r\n") != NULL) {
			free(val);
			return (cfg_bad(x, f, "value contains a line break"));
		}
		if (asprintf(&c->headers[i], "%s: %s", k, val) < 0) {
			free(val);
			return (MK_ENOMEM);
		}
		free(val);
		i++;
	}
	return (0);
}

static int
parse_tools(cfg_pctx *x, cfg_client *c, json_t *t)
{
	int rv;

	if (t == NULL || json_is_null(t)) {
		return (0); /* none */
	}
	if ((rv = cfg_strv_of(x, "tools_to_execute", t,
	                      cfg_lit_key(x->lit, "tools_to_execute"),
	                      &c->tools)) != 0) {
		return (rv);
	}
	for (size_t i = 0; c->tools[i] != NULL; i++) {
		if (strcmp(c->tools[i], "*") == 0) {
			c->tools_all = true;
		}
	}
	return (0);
}

static int
parse_client(cfg_pctx *x, cfg_client *c, json_t *o)
{
	const char *k;
	json_t     *v;
	int         rv, e;

	if (!json_is_object(o)) {
		return (cfg_bad(x, NULL, "a client config must be an object"));
	}
	if (!json_is_string(v = json_object_get(o, "name"))) {
		return (cfg_bad(x, "name",
		                "is required and must be a string"));
	}
	x->client = json_string_value(v);
	if (!cfg_name_valid(x->client)) {
		return (cfg_bad(
		        x, "name",
		        "use letters, digits and '_' only (no '-', no spaces), at most 64"));
	}
	json_object_foreach(o, k, v)
	{
		if (!cfg_known(k, known_keys)) {
			return (cfg_bad(x, NULL, "unknown field \"%.60s\"",
			                k));
		}
	}
	if ((c->name = strdup(x->client)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((v = json_object_get(o, "client_id")) != NULL) {
		if ((rv = cfg_str_of(x, "client_id", v,
		                     cfg_lit_key(x->lit, "client_id"),
		                     &c->id)) != 0) {
			return (rv);
		}
		if (c->id[0] == '\0' || strlen(c->id) > 64 ||
		    strspn(c->id,
		           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
		            strlen(c->id)) {
			return (cfg_bad(
			        x, "client_id",
			        "use letters, digits, '_' and '-' only, at most 64"));
		}
	} else if ((c->id = new_id()) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = enum_of(x, "connection_type",
	                  json_object_get(o, "connection_type"), conn_names, 3,
	                  &e)) != 0) {
		return (rv);
	}
	c->conn = (cfg_conn)e;
	c->auth = CFG_AUTH_NONE;
	if ((v = json_object_get(o, "auth_type")) != NULL) {
		if ((rv = enum_of(x, "auth_type", v, auth_names, 6, &e)) !=
		    0) {
			return (rv);
		}
		c->auth = (cfg_auth)e;
	}
	if (c->conn == CFG_STDIO) {
		if ((v = json_object_get(o, "stdio_config")) == NULL) {
			return (cfg_bad(
			        x, "stdio_config",
			        "is required for connection_type \"stdio\""));
		}
		if ((rv = parse_stdio(x, c, v)) != 0) {
			return (rv);
		}
	} else {
		if ((v = json_object_get(o, "connection_string")) == NULL) {
			return (cfg_bad(
			        x, "connection_string",
			        "is required for connection_type \"%s\"",
			        conn_names[c->conn]));
		}
		if ((rv = cfg_str_of(x, "connection_string", v,
		                     cfg_lit_key(x->lit, "connection_string"),
		                     &c->url)) != 0) {
			return (rv);
		}
		if (strncmp(c->url, "http://", 7) != 0 &&
		    strncmp(c->url, "https://", 8) != 0) {
			return (cfg_bad(x, "connection_string",
			                "must be an http:// or https:// URL"));
		}
	}
	if ((v = json_object_get(o, "headers")) != NULL &&
	    (rv = parse_headers(x, c, v)) != 0) {
		return (rv);
	}
	if (c->auth == CFG_AUTH_HEADERS && c->headers == NULL) {
		return (cfg_bad(x, "headers",
		                "is required for auth_type \"headers\""));
	}
	c->sticky = c->conn != CFG_HTTP;
	if ((v = json_object_get(o, "needs_session_stickiness")) != NULL) {
		if (!json_is_boolean(v)) {
			return (cfg_bad(x, "needs_session_stickiness",
			                "must be true or false"));
		}
		if (!cfg_auth_per_user(c->auth)) {
			if (c->conn != CFG_HTTP && json_is_false(v)) {
				snprintf(
				        x->err, x->errlen,
				        "needs_session_stickiness cannot be false for connection_type \"%s\": only 'http' supports a per-call connection",
				        conn_names[c->conn]);
				return (MK_EINVAL);
			}
			c->sticky = json_is_true(v) || c->conn != CFG_HTTP;
		}
	}
	if (cfg_auth_per_user(c->auth)) {
		c->sticky = false; /* always per-call */
	}
	if ((rv = parse_tools(x, c, json_object_get(o, "tools_to_execute"))) !=
	    0) {
		return (rv);
	}
	c->ping = true;
	if ((v = json_object_get(o, "is_ping_available")) != NULL) {
		if (!json_is_boolean(v)) {
			return (cfg_bad(x, "is_ping_available",
			                "must be true or false"));
		}
		c->ping = json_is_true(v);
	}
	if ((v = json_object_get(o, "disabled")) != NULL) {
		if (!json_is_boolean(v)) {
			return (cfg_bad(x, "disabled",
			                "must be true or false"));
		}
		c->disabled = json_is_true(v);
	}
	if ((v = json_object_get(o, "tool_sync_interval")) != NULL &&
	    (cfg_duration(v, &c->sync_ms) != 0 || c->sync_ms < 1000)) {
		return (cfg_bad(
		        x, "tool_sync_interval",
		        "must be a duration of at least 1s (e.g. \"10m\")"));
	}
	if ((v = json_object_get(o, "tool_execution_timeout")) != NULL &&
	    (cfg_duration(v, &c->exec_ms) != 0 || c->exec_ms < 1)) {
		return (cfg_bad(
		        x, "tool_execution_timeout",
		        "must be a positive duration (e.g. \"30s\") or seconds"));
	}
	if ((v = json_object_get(o, "max_concurrent_calls")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > CFG_MAX_CALLS_MAX) {
			return (cfg_bad(x, "max_concurrent_calls",
			                "must be an integer from 0 (no limit) "
			                "to %d",
			                CFG_MAX_CALLS_MAX));
		}
		c->max_calls = (unsigned)json_integer_value(v);
	}
	if ((v = json_object_get(o, "tool_changes")) != NULL &&
	    (c->changes = cfg_changes_of(v)) < 0) {
		return (cfg_bad(x, "tool_changes",
		                "must be \"accept\", \"hold\" or \"block\""));
	}
	if ((v = json_object_get(o, "cache_results")) != NULL &&
	    (rv = parse_cache(x, c, v)) != 0) {
		return (rv);
	}
	/* Credential sections: known keys, strings resolved (env.), scopes
	 * a string array; what they mean is the credential actor's. */
	static const char *const oauth_keys[]    = {"client_id",
	                                            "client_secret",
	                                            "authorize_url",
	                                            "token_url",
	                                            "registration_url",
	                                            "scopes",
	                                            "resource",
	                                            "auth_method",
	                                            "grant_type",
	                                            "client_metadata_url",
	                                            "private_key",
	                                            "private_key_id",
	                                            NULL};
	static const char *const exchange_keys[] = {"token_url",
	                                            "audience",
	                                            "client_id",
	                                            "client_secret",
	                                            "scopes",
	                                            "auth_method",
	                                            "requested_token_type",
	                                            "subject_token_type",
	                                            NULL};
	if ((rv = section_of(x, o, "oauth_config", oauth_keys, &c->oauth)) !=
	            0 ||
	    (rv = section_of(x, o, "token_exchange", exchange_keys,
	                     &c->exchange)) != 0) {
		return (rv);
	}
	if ((rv = oauth_enums(x, c)) != 0) {
		return (rv);
	}
	if ((v = json_object_get(o, "per_user_header_keys")) != NULL &&
	    !json_is_array(v)) {
		return (cfg_bad(x, "per_user_header_keys",
		                "must be an array of strings"));
	}
	c->raw     = json_incref(o);
	c->literal = json_incref(x->lit);
	return (0);
}

int
cfg_client_parse(json_t *obj, json_t *literal, cfg_client **out, char *err,
                 size_t errlen)
{
	cfg_pctx    x = {"?", err, errlen, literal};
	cfg_client *c;
	int         rv;

	*out = NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = parse_client(&x, c, obj)) != 0) {
		if (rv == MK_ENOMEM) {
			snprintf(err, errlen, "out of memory");
		}
		cfg_client_free(&c);
		return (rv);
	}
	*out = c;
	return (0);
}

void
cfg_client_free(cfg_client **cp)
{
	cfg_client *c;

	if (cp == NULL || (c = *cp) == NULL) {
		return;
	}
	*cp = NULL;
	free(c->name);
	free(c->id);
	free(c->url);
	free(c->command);
	text_strv_free(c->args);
	text_strv_free(c->envs);
	text_strv_free(c->headers);
	text_strv_free(c->tools);
	json_decref(c->oauth);
	json_decref(c->exchange);
	json_decref(c->cache);
	json_decref(c->raw);
	json_decref(c->literal);
	free(c);
}

json_t *
cfg_client_stored(const cfg_client *c)
{
	json_t *o = json_deep_copy(c->raw);

	if (o != NULL && c->literal != NULL &&
	    json_object_set(o, CFG_LITERAL_KEY, c->literal) != 0) {
		json_decref(o);
		return (NULL);
	}
	return (o);
}

int
cfg_client_parse_stored(json_t *stored, cfg_client **out, char *err,
                        size_t errlen)
{
	json_t *o, *lit;
	int     rv;

	if (!json_is_object(stored) ||
	    json_object_get(stored, CFG_LITERAL_KEY) == NULL) {
		return (cfg_client_parse(stored, NULL, out, err, errlen));
	}
	if ((o = json_deep_copy(stored)) == NULL) {
		snprintf(err, errlen, "out of memory");
		*out = NULL;
		return (MK_ENOMEM);
	}
	lit = json_incref(json_object_get(o, CFG_LITERAL_KEY));
	(void)json_object_del(o, CFG_LITERAL_KEY);
	if (!json_is_object(lit)) {
		/* a mask that is not a shape: everything literal */
		json_decref(lit);
		lit = json_true();
	}
	rv = cfg_client_parse(o, lit, out, err, errlen);
	json_decref(lit);
	json_decref(o);
	return (rv);
}
