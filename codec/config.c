/*
 * config.c - config.json validation (see config.h).
 */
#include "codec/config.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/text.h"
#include "mcpkeep.h"

#define CFG_FILE_MAX (4u * 1024u * 1024u)

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

/* Parse state for one client: its name (for messages), the error and
 * which of its strings are literal. */
typedef struct pctx {
	const char *client; /* name, or "?" before it is known */
	char       *err;    /* message buffer */
	size_t      errlen; /* its size */
	json_t     *lit;    /* the client's literal mask (config.h), or NULL */
} pctx;

/* The literal mask under key k (of an object) or index i (of an array)
 * of mask m: everything under a true is literal. */
static json_t *
lit_key(json_t *m, const char *k)
{
	return (json_is_true(m) ? m : json_object_get(m, k));
}

static json_t *
lit_idx(json_t *m, size_t i)
{
	return (json_is_true(m) ? m : json_array_get(m, i));
}

/* Whether v, at mask m, is an env. reference (not a literal value). */
static bool
is_ref(json_t *v, json_t *m)
{
	return (json_is_string(v) && !json_is_true(m) &&
	        strncmp(json_string_value(v), "env.", 4) == 0);
}

/* An error is one line of text: a key or name it quotes from the input
 * may hold control characters, which become '?' (no log line can be
 * split or forged through it). */
static void
one_line(char *s)
{
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f) {
			*s = '?';
		}
	}
}

static int
bad(pctx *x, const char *field, const char *fmt, ...)
{
	char    what[CFG_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (field != NULL) {
		snprintf(x->err, x->errlen, "client \"%s\": field \"%s\": %s",
		         x->client, field, what);
	} else {
		snprintf(x->err, x->errlen, "client \"%s\": %s", x->client,
		         what);
	}
	one_line(x->err);
	return (MK_EINVAL);
}

/* Resolves a string value, following "env.NAME" unless the mask lit
 * makes it literal. */
static int
str_of(pctx *x, const char *field, json_t *v, json_t *lit, char **out)
{
	const char *s;

	if (!json_is_string(v)) {
		return (bad(x, field, "must be a string"));
	}
	s = json_string_value(v);
	if (is_ref(v, lit)) {
		const char *e = getenv(s + 4);
		if (s[4] == '\0') {
			return (bad(x, field,
			            "\"env.\" needs a variable name"));
		}
		if (e == NULL) {
			return (bad(x, field,
			            "environment variable %.100s is not set",
			            s + 4));
		}
		s = e;
	}
	if ((*out = strdup(s)) == NULL) {
		return (MK_ENOMEM);
	}
	return (0);
}

/* An array of strings (each resolved) into a NULL-terminated vector. */
static int
strv_of(pctx *x, const char *field, json_t *v, json_t *lit, char ***out)
{
	size_t  i;
	json_t *e;
	char    f[96];
	int     rv;

	if (!json_is_array(v)) {
		return (bad(x, field, "must be an array of strings"));
	}
	if ((*out = calloc(json_array_size(v) + 1, sizeof(char *))) == NULL) {
		return (MK_ENOMEM);
	}
	json_array_foreach(v, i, e)
	{
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if ((rv = str_of(x, f, e, lit_idx(lit, i), &(*out)[i])) != 0) {
			text_strv_free(*out);
			*out = NULL;
			return (rv);
		}
	}
	return (0);
}

/* A credential section (an object of the given keys): a resolved copy,
 * or NULL when absent. */
static int
section_of(pctx *x, json_t *o, const char *field, const char *const *keys,
           json_t **out)
{
	json_t     *v   = json_object_get(o, field), *e;
	json_t     *lit = lit_key(x->lit, field);
	const char *k;
	char        f[128];
	int         rv;

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		return (0);
	}
	if (!json_is_object(v)) {
		return (bad(x, field, "must be an object"));
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
			rv = bad(x, f, "is not a known field");
		} else if (strcmp(k, "scopes") == 0) {
			char **sv = NULL;
			if ((rv = strv_of(x, f, e, lit_key(lit, k), &sv)) ==
			    0) {
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
			if ((rv = str_of(x, f, e, lit_key(lit, k), &sv)) ==
			    0) {
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
enum_of(pctx *x, const char *field, json_t *v, const char **names, int n,
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
	return (bad(x, field, "must be one of %s", list));
}

int
cfg_duration(json_t *v, int64_t *ms)
{
	const char *s;
	char       *end;
	double      n;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 ||
		    json_integer_value(v) > INT64_MAX / 1000) {
			return (-1);
		}
		*ms = json_integer_value(v) * 1000;
		return (0);
	}
	if (!json_is_string(v) ||
	    !isdigit((unsigned char)*json_string_value(v))) {
		return (-1);
	}
	s = json_string_value(v);
	n = strtod(s, &end);
	if (strcmp(end, "ms") == 0) {
		*ms = (int64_t)n;
	} else if (strcmp(end, "s") == 0 || *end == '\0') {
		*ms = (int64_t)(n * 1000);
	} else if (strcmp(end, "m") == 0) {
		*ms = (int64_t)(n * 60 * 1000);
	} else if (strcmp(end, "h") == 0) {
		*ms = (int64_t)(n * 3600 * 1000);
	} else {
		return (-1);
	}
	return (n < 0 || n > 1e9 ? -1 : 0);
}

static bool
valid_name(const char *s)
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

/* Whether a's client_id is b's name. */
static bool
names_clash(const cfg_client *a, const cfg_client *b)
{
	return (strcmp(a->id, b->name) == 0);
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
                                   "disabled",
                                   NULL};

static bool
known(const char *key, const char **keys)
{
	for (int i = 0; keys[i] != NULL; i++) {
		if (strcmp(key, keys[i]) == 0) {
			return (true);
		}
	}
	return (false);
}

static int
parse_stdio(pctx *x, cfg_client *c, json_t *sc)
{
	static const char *keys[] = {"command", "args", "envs", NULL};
	json_t            *lit    = lit_key(x->lit, "stdio_config");
	const char        *k;
	json_t            *v;
	int                rv;

	if (!json_is_object(sc)) {
		return (bad(x, "stdio_config", "must be an object"));
	}
	json_object_foreach(sc, k, v)
	{
		if (!known(k, keys)) {
			return (bad(x, "stdio_config",
			            "unknown field \"%.60s\"", k));
		}
	}
	if ((v = json_object_get(sc, "command")) == NULL) {
		return (bad(x, "stdio_config.command", "is required"));
	}
	if ((rv = str_of(x, "stdio_config.command", v, lit_key(lit, "command"),
	                 &c->command)) != 0) {
		return (rv);
	}
	if (c->command[0] == '\0') {
		return (bad(x, "stdio_config.command", "must not be empty"));
	}
	if ((v = json_object_get(sc, "args")) != NULL &&
	    (rv = strv_of(x, "stdio_config.args", v, lit_key(lit, "args"),
	                  &c->args)) != 0) {
		return (rv);
	}
	if ((v = json_object_get(sc, "envs")) != NULL &&
	    (rv = strv_of(x, "stdio_config.envs", v, lit_key(lit, "envs"),
	                  &c->envs)) != 0) {
		return (rv);
	}
	for (size_t i = 0; c->envs != NULL && c->envs[i] != NULL; i++) {
		const char *e = c->envs[i];
		size_t      n = strcspn(e, "=");
		if (n == 0) {
			return (bad(x, "stdio_config.envs",
			            "entries are NAME or NAME=value"));
		}
	}
	return (0);
}

static int
parse_headers(pctx *x, cfg_client *c, json_t *h)
{
	const char *k;
	json_t     *v;
	size_t      i = 0;
	char        f[160];
	int         rv;

	if (!json_is_object(h)) {
		return (bad(x, "headers", "must be an object of strings"));
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
			return (bad(x, f, "is not a valid header name"));
		}
		if ((rv = str_of(x, f, v,
		                 lit_key(lit_key(x->lit, "headers"), k),
		                 &val)) != 0) {
			return (rv);
		}
		if (strpbrk(val, "\r\n") != NULL) {
			free(val);
			return (bad(x, f, "value contains a line break"));
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
parse_tools(pctx *x, cfg_client *c, json_t *t)
{
	int rv;

	if (t == NULL || json_is_null(t)) {
		return (0); /* none */
	}
	if ((rv = strv_of(x, "tools_to_execute", t,
	                  lit_key(x->lit, "tools_to_execute"), &c->tools)) !=
	    0) {
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
parse_client(pctx *x, cfg_client *c, json_t *o)
{
	const char *k;
	json_t     *v;
	int         rv, e;

	if (!json_is_object(o)) {
		return (bad(x, NULL, "a client config must be an object"));
	}
	if (!json_is_string(v = json_object_get(o, "name"))) {
		return (bad(x, "name", "is required and must be a string"));
	}
	x->client = json_string_value(v);
	if (!valid_name(x->client)) {
		return (bad(x, "name",
		            "use letters, digits and '_' only (no '-', no "
		            "spaces), "
		            "at most 64"));
	}
	json_object_foreach(o, k, v)
	{
		if (!known(k, known_keys)) {
			return (bad(x, NULL, "unknown field \"%.60s\"", k));
		}
	}
	if ((c->name = strdup(x->client)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((v = json_object_get(o, "client_id")) != NULL) {
		if ((rv = str_of(x, "client_id", v,
		                 lit_key(x->lit, "client_id"), &c->id)) != 0) {
			return (rv);
		}
		if (c->id[0] == '\0' || strlen(c->id) > 64 ||
		    strspn(c->id,
		           "abcdefghijklmnopqrstuvwxyz"
		           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
		            strlen(c->id)) {
			return (bad(x, "client_id",
			            "use letters, digits, '_' and '-' only, "
			            "at most 64"));
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
			return (bad(
			        x, "stdio_config",
			        "is required for connection_type \"stdio\""));
		}
		if ((rv = parse_stdio(x, c, v)) != 0) {
			return (rv);
		}
	} else {
		if ((v = json_object_get(o, "connection_string")) == NULL) {
			return (bad(x, "connection_string",
			            "is required for connection_type \"%s\"",
			            conn_names[c->conn]));
		}
		if ((rv = str_of(x, "connection_string", v,
		                 lit_key(x->lit, "connection_string"),
		                 &c->url)) != 0) {
			return (rv);
		}
		if (strncmp(c->url, "http://", 7) != 0 &&
		    strncmp(c->url, "https://", 8) != 0) {
			return (bad(x, "connection_string",
			            "must be an http:// or https:// URL"));
		}
	}
	if ((v = json_object_get(o, "headers")) != NULL &&
	    (rv = parse_headers(x, c, v)) != 0) {
		return (rv);
	}
	if (c->auth == CFG_AUTH_HEADERS && c->headers == NULL) {
		return (bad(x, "headers",
		            "is required for auth_type \"headers\""));
	}
	c->sticky = c->conn != CFG_HTTP;
	if ((v = json_object_get(o, "needs_session_stickiness")) != NULL) {
		if (!json_is_boolean(v)) {
			return (bad(x, "needs_session_stickiness",
			            "must be true or false"));
		}
		if (!cfg_auth_per_user(c->auth)) {
			if (c->conn != CFG_HTTP && json_is_false(v)) {
				snprintf(x->err, x->errlen,
				         "needs_session_stickiness cannot be "
				         "false for "
				         "connection_type \"%s\": only 'http' "
				         "supports a "
				         "per-call connection",
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
			return (bad(x, "is_ping_available",
			            "must be true or false"));
		}
		c->ping = json_is_true(v);
	}
	if ((v = json_object_get(o, "disabled")) != NULL) {
		if (!json_is_boolean(v)) {
			return (bad(x, "disabled", "must be true or false"));
		}
		c->disabled = json_is_true(v);
	}
	if ((v = json_object_get(o, "tool_sync_interval")) != NULL &&
	    (cfg_duration(v, &c->sync_ms) != 0 || c->sync_ms < 1000)) {
		return (bad(
		        x, "tool_sync_interval",
		        "must be a duration of at least 1s (e.g. \"10m\")"));
	}
	if ((v = json_object_get(o, "tool_execution_timeout")) != NULL &&
	    (cfg_duration(v, &c->exec_ms) != 0 || c->exec_ms < 1)) {
		return (bad(x, "tool_execution_timeout",
		            "must be a positive duration (e.g. \"30s\") or "
		            "seconds"));
	}
	/* Credential sections: known keys, strings resolved (env.), scopes
	 * a string array; what they mean is the credential actor's. */
	static const char *const oauth_keys[] = {
	        "client_id", "client_secret",    "authorize_url",
	        "token_url", "registration_url", "scopes",
	        "resource",  "auth_method",      NULL};
	static const char *const exchange_keys[] = {
	        "token_url", "audience",    "client_id", "client_secret",
	        "scopes",    "auth_method", NULL};
	if ((rv = section_of(x, o, "oauth_config", oauth_keys, &c->oauth)) !=
	            0 ||
	    (rv = section_of(x, o, "token_exchange", exchange_keys,
	                     &c->exchange)) != 0) {
		return (rv);
	}
	if ((v = json_object_get(o, "per_user_header_keys")) != NULL &&
	    !json_is_array(v)) {
		return (bad(x, "per_user_header_keys",
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
	pctx        x = {"?", err, errlen, literal};
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
	json_decref(c->raw);
	json_decref(c->literal);
	free(c);
}

/* Redacts o's string at key unless it is a reference (at mask m, o's). */
static void
redact(json_t *o, const char *key, json_t *m)
{
	json_t *v = json_object_get(o, key);

	if (json_is_string(v) && !is_ref(v, lit_key(m, key))) {
		json_object_set_new(o, key, json_string("<redacted>"));
	}
}

json_t *
cfg_client_redacted(const cfg_client *c)
{
	json_t     *o   = json_deep_copy(c->raw), *h, *sc, *envs, *v;
	json_t     *lit = c->literal, *elit;
	const char *k;
	size_t      i;

	if (o == NULL) {
		return (NULL);
	}
	if ((h = json_object_get(o, "headers")) != NULL) {
		json_object_foreach(h, k, v)
		{
			redact(h, k, lit_key(lit, "headers"));
		}
	}
	redact(json_object_get(o, "oauth_config"), "client_secret",
	       lit_key(lit, "oauth_config"));
	redact(json_object_get(o, "token_exchange"), "client_secret",
	       lit_key(lit, "token_exchange"));
	sc   = json_object_get(o, "stdio_config");
	envs = json_object_get(sc, "envs");
	elit = lit_key(lit_key(lit, "stdio_config"), "envs");
	json_array_foreach(envs, i, v)
	{
		const char *s  = json_string_value(v);
		const char *eq = s != NULL ? strchr(s, '=') : NULL;
		if (eq != NULL &&
		    (json_is_true(lit_idx(elit, i)) ||
		     strncmp(eq + 1, "env.", 4) != 0)) {
			char buf[160];
			snprintf(buf, sizeof(buf), "%.*s=<redacted>",
			         (int)(eq - s) > 100 ? 100 : (int)(eq - s), s);
			json_array_set_new(envs, i, json_string(buf));
		}
	}
	/* a literal URL may carry a key in its query or userinfo */
	v = json_object_get(o, "connection_string");
	if (json_is_string(v) &&
	    !is_ref(v, lit_key(lit, "connection_string"))) {
		const char *u  = json_string_value(v);
		const char *q  = strchr(u, '?');
		const char *at = strchr(u, '@');
		const char *sl = strstr(u, "://");
		if (q != NULL || (at != NULL && sl != NULL && at > sl)) {
			char   buf[600];
			size_t n = q != NULL ? (size_t)(q - u) : strlen(u);
			if (at != NULL && sl != NULL && at > sl &&
			    (q == NULL || at < q)) {
				snprintf(buf, sizeof(buf),
				         "%.*s<redacted>@%.*s%s",
				         (int)(sl + 3 - u), u,
				         (int)(n - (size_t)(at + 1 - u)),
				         at + 1,
				         q != NULL ? "?<redacted>" : "");
			} else {
				snprintf(buf, sizeof(buf), "%.*s?<redacted>",
				         (int)n, u);
			}
			json_object_set_new(o, "connection_string",
			                    json_string(buf));
		}
	}
	return (o);
}

/* patch, red and raw at the same place: a string of patch equal to the
 * redacted one (and holding the marker) becomes raw's. */
static json_t *
unredact_at(json_t *patch, json_t *red, json_t *raw)
{
	json_t     *v;
	const char *k;
	size_t      i;

	if (json_is_string(patch) && json_is_string(red) && raw != NULL &&
	    strstr(json_string_value(patch), "<redacted>") != NULL &&
	    json_equal(patch, red)) {
		return (json_incref(raw));
	}
	if (json_is_object(patch) && json_is_object(red)) {
		json_object_foreach(patch, k, v)
		{
			json_t *n = unredact_at(v, json_object_get(red, k),
			                        json_object_get(raw, k));
			if (n != NULL) {
				json_object_set_new(patch, k, n);
			}
		}
	} else if (json_is_array(patch) && json_is_array(red)) {
		json_array_foreach(patch, i, v)
		{
			json_t *n = unredact_at(v, json_array_get(red, i),
			                        json_array_get(raw, i));
			if (n != NULL) {
				json_array_set_new(patch, i, n);
			}
		}
	}
	return (NULL);
}

void
cfg_unredact(json_t *patch, const cfg_client *c)
{
	json_t *red = cfg_client_redacted(c);

	if (red != NULL) {
		(void)unredact_at(patch, red, c->raw);
		json_decref(red);
	}
}

/* One virtual key's grants: client name (or "*") -> tool names (or
 * ["*"]). */
static int
grants_of(pctx *x, const char *field, json_t *v)
{
	const char *k;
	json_t     *tools, *t;
	size_t      i;

	if (!json_is_object(v) || json_object_size(v) == 0) {
		return (bad(
		        x, field,
		        "must be an object of client names to tool lists"));
	}
	json_object_foreach(v, k, tools)
	{
		if (!json_is_array(tools) || json_array_size(tools) == 0) {
			return (bad(x, field,
			            "client \"%.64s\": must be a list of tool "
			            "names, or [\"*\"]",
			            k));
		}
		json_array_foreach(tools, i, t)
		{
			if (!json_is_string(t) ||
			    *json_string_value(t) == '\0') {
				return (bad(x, field,
				            "client \"%.64s\": a tool name "
				            "must be a non-empty string",
				            k));
			}
		}
	}
	return (0);
}

/*
 * server.virtual_keys: each {name, value, clients, trust_identity_headers}
 * with its value resolved (env.); names and values unique, values at
 * least VKEY_MIN bytes (a key is a password a gateway hands out).  The
 * result is a copy the caller owns (values are secrets).
 */
static int
vkeys_of(pctx *x, json_t *v, json_t **out)
{
	static const char *keys[] = {"name", "value", "clients",
	                             "trust_identity_headers", NULL};
	json_t            *all    = json_array(), *e, *f;
	const char        *k;
	size_t             i;
	char               field[64], *value = NULL;
	int                rv = 0;

	if (all == NULL) {
		return (MK_ENOMEM);
	}
	if (!json_is_array(v)) {
		json_decref(all);
		return (bad(x, "server.virtual_keys", "must be an array"));
	}
	json_array_foreach(v, i, e)
	{
		snprintf(field, sizeof(field), "server.virtual_keys[%zu]", i);
		if (!json_is_object(e)) {
			rv = bad(x, field, "must be an object");
			break;
		}
		json_object_foreach(e, k, f)
		{
			if (!known(k, keys)) {
				rv = bad(x, field, "unknown field \"%.60s\"",
				         k);
				break;
			}
		}
		const char *name =
		        json_string_value(json_object_get(e, "name"));
		json_t *trust = json_object_get(e, "trust_identity_headers");
		if (rv != 0) {
			break;
		}
		if (name == NULL || *name == '\0' || strlen(name) > 64 ||
		    name[strspn(name,
		                "abcdefghijklmnopqrstuvwxyz"
		                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                "0123456789_-")] != '\0') {
			rv = bad(
			        x, field,
			        "name must be 1 to 64 letters, digits, '_' or "
			        "'-'");
			break;
		}
		if (trust != NULL && !json_is_boolean(trust)) {
			rv = bad(x, field,
			         "trust_identity_headers must be true or "
			         "false");
			break;
		}
		if ((rv = grants_of(x, field,
		                    json_object_get(e, "clients"))) != 0 ||
		    (rv = str_of(x, field, json_object_get(e, "value"), NULL,
		                 &value)) != 0) {
			break;
		}
		if (strlen(value) < VKEY_MIN) {
			/* (the length only: never the value) */
			rv = bad(x, field,
			         "the value of key \"%s\" is shorter than %d "
			         "characters",
			         name, VKEY_MIN);
			break;
		}
		json_t *o;
		size_t  j;
		json_array_foreach(all, j, o)
		{
			if (strcmp(json_string_value(
			                   json_object_get(o, "name")),
			           name) == 0) {
				rv = bad(x, field,
				         "the name \"%s\" is used twice",
				         name);
			} else if (strcmp(json_string_value(
			                          json_object_get(o, "value")),
			                  value) == 0) {
				rv = bad(x, field,
				         "key \"%s\" has the value of another "
				         "key",
				         name);
			}
		}
		if (rv != 0) {
			break;
		}
		o = json_pack("{s:s, s:s, s:O, s:b}", "name", name, "value",
		              value, "clients", json_object_get(e, "clients"),
		              "trust_identity_headers", json_is_true(trust));
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

/* The mask of p, a patch's value set where the config had r with mask
 * om: a string kept as it was keeps its meaning; an env. string the
 * patch brings is literal (other strings have nothing to resolve). */
static json_t *
lit_diff(json_t *p, json_t *r, json_t *om)
{
	json_t     *m, *v, *n;
	const char *k;
	size_t      i;
	bool        any = false;

	if (json_is_true(om)) {
		return (json_true());
	}
	if (json_is_string(p)) {
		if (json_is_string(r) && json_equal(p, r)) {
			return (NULL);
		}
		return (strncmp(json_string_value(p), "env.", 4) == 0
		                ? json_true()
		                : NULL);
	}
	if (json_is_object(p)) {
		m = json_object();
		json_object_foreach(p, k, v)
		{
			if ((n = lit_diff(v, json_object_get(r, k),
			                  json_object_get(om, k))) != NULL) {
				json_object_set_new(m, k, n);
			}
		}
		any = json_object_size(m) != 0;
	} else if (json_is_array(p)) {
		m = json_array();
		json_array_foreach(p, i, v)
		{
			n = lit_diff(v, json_array_get(r, i),
			             json_array_get(om, i));
			any |= n != NULL;
			json_array_append_new(m, n != NULL ? n : json_null());
		}
	} else {
		return (NULL);
	}
	if (!any) {
		json_decref(m);
		return (NULL);
	}
	return (m);
}

json_t *
cfg_literal_patched(const cfg_client *c, json_t *patch)
{
	json_t     *m, *v, *n;
	const char *k;

	if (json_is_true(c->literal)) {
		return (json_true());
	}
	m = json_is_object(c->literal) ? json_deep_copy(c->literal)
	                               : json_object();
	if (m == NULL) {
		return (json_true()); /* out of memory: never resolve */
	}
	json_object_foreach(patch, k, v)
	{
		n = lit_diff(v, json_object_get(c->raw, k),
		             json_object_get(c->literal, k));
		if (n != NULL) {
			json_object_set_new(m, k, n);
		} else {
			json_object_del(m, k);
		}
	}
	if (json_object_size(m) == 0) {
		json_decref(m);
		return (NULL);
	}
	return (m);
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

static int
file_fail(char *err, size_t errlen, int rv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	one_line(err);
	return (rv);
}

static int
parse_file(json_t *root, cfg_file *f, char *err, size_t errlen)
{
	static const char *top[]     = {"mcp", "store", "server", NULL};
	static const char *mcpk[]    = {"client_configs", "tool_sync_interval",
	                                "tool_execution_timeout", NULL};
	static const char *storek[]  = {"path", NULL};
	static const char *serverk[] = {"listen",        "admin_token",
	                                "stream",        "allowed_origins",
	                                "stream_public", "metrics_token",
	                                "virtual_keys",  NULL};
	pctx               x         = {"?", err, errlen, NULL};
	json_t            *mcp, *list, *v, *sec;
	const char        *k;
	size_t             i;
	int                rv;

	if (!json_is_object(root)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: the top level must be an object"));
	}
	json_object_foreach(root, k, v)
	{
		if (!known(k, top)) {
			return (file_fail(err, errlen, MK_EINVAL,
			                  "config: unknown field \"%.60s\"",
			                  k));
		}
	}
	mcp = json_object_get(root, "mcp");
	if (mcp != NULL && !json_is_object(mcp)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: field \"mcp\" must be an object"));
	}
	json_object_foreach(mcp, k, v)
	{
		if (!known(k, mcpk)) {
			return (file_fail(
			        err, errlen, MK_EINVAL,
			        "config: unknown field \"mcp.%.60s\"", k));
		}
	}
	f->sync_ms = CFG_SYNC_DEFAULT_MS;
	f->exec_ms = CFG_EXEC_DEFAULT_MS;
	if ((v = json_object_get(mcp, "tool_sync_interval")) != NULL &&
	    (cfg_duration(v, &f->sync_ms) != 0 || f->sync_ms < 1000)) {
		return (file_fail(
		        err, errlen, MK_EINVAL,
		        "config: field \"mcp.tool_sync_interval\" must be a "
		        "duration of at least 1s"));
	}
	if ((v = json_object_get(mcp, "tool_execution_timeout")) != NULL &&
	    (cfg_duration(v, &f->exec_ms) != 0 || f->exec_ms < 1)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: field "
		                  "\"mcp.tool_execution_timeout\" must be a "
		                  "positive duration"));
	}
	list = json_object_get(mcp, "client_configs");
	if (list != NULL && !json_is_array(list)) {
		return (file_fail(err, errlen, MK_EINVAL,
		                  "config: field \"mcp.client_configs\" must "
		                  "be an array"));
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
		for (size_t j = 0; j < i; j++) {
			if (strcmp(f->clients[j]->name, f->clients[i]->name) ==
			    0) {
				return (file_fail(err, errlen, MK_EINVAL,
				                  "client \"%s\": the name is "
				                  "used twice",
				                  f->clients[i]->name));
			}
			if (strcmp(f->clients[j]->id, f->clients[i]->id) ==
			    0) {
				return (file_fail(err, errlen, MK_EINVAL,
				                  "client \"%s\": client_id "
				                  "\"%s\" is used twice",
				                  f->clients[i]->name,
				                  f->clients[i]->id));
			}
			if (names_clash(f->clients[i], f->clients[j]) ||
			    names_clash(f->clients[j], f->clients[i])) {
				return (file_fail(err, errlen, MK_EINVAL,
				                  "client \"%s\": a client_id "
				                  "is another client's name "
				                  "(an {id} must name one "
				                  "client)",
				                  f->clients[i]->name));
			}
		}
	}
	x.client = "(store)";
	if ((sec = json_object_get(root, "store")) != NULL) {
		json_object_foreach(sec, k, v)
		{
			if (!known(k, storek)) {
				return (file_fail(err, errlen, MK_EINVAL,
				                  "config: unknown field "
				                  "\"store.%.60s\"",
				                  k));
			}
		}
		if ((v = json_object_get(sec, "path")) != NULL &&
		    (rv = str_of(&x, "store.path", v, NULL, &f->store_path)) !=
		            0) {
			return (rv);
		}
	}
	x.client = "(server)";
	if ((sec = json_object_get(root, "server")) != NULL) {
		json_object_foreach(sec, k, v)
		{
			if (!known(k, serverk)) {
				return (file_fail(err, errlen, MK_EINVAL,
				                  "config: unknown field "
				                  "\"server.%.60s\"",
				                  k));
			}
		}
		if ((v = json_object_get(sec, "listen")) != NULL &&
		    (rv = str_of(&x, "server.listen", v, NULL, &f->listen)) !=
		            0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "admin_token")) != NULL &&
		    (rv = str_of(&x, "server.admin_token", v, NULL,
		                 &f->admin_token)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "stream")) != NULL &&
		    (rv = strv_of(&x, "server.stream", v, NULL,
		                  &f->streams)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "allowed_origins")) != NULL &&
		    (rv = strv_of(&x, "server.allowed_origins", v, NULL,
		                  &f->origins)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "stream_public")) != NULL) {
			if (!json_is_boolean(v)) {
				return (bad(&x, "server.stream_public",
				            "must be true or false"));
			}
			f->stream_public = json_is_true(v);
		}
		if ((v = json_object_get(sec, "metrics_token")) != NULL &&
		    (rv = str_of(&x, "server.metrics_token", v, NULL,
		                 &f->metrics_token)) != 0) {
			return (rv);
		}
		if ((v = json_object_get(sec, "virtual_keys")) != NULL &&
		    (rv = vkeys_of(&x, v, &f->vkeys)) != 0) {
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
	free(f->listen);
	free(f->admin_token);
	free(f->metrics_token);
	text_strv_free(f->streams);
	text_strv_free(f->origins);
	json_decref(f->vkeys);
	free(f);
}
