/*
 * config_check.c - a config.json checked as an operator would want it
 * (mcpkeep check): every client's first error, not only the file's
 * first, and what is valid but likely wrong.
 *
 * DESIGN: each client is validated on its own (cfg_client_parse), then
 * the whole file (cfg_file_parse: the sections, unique names); an error
 * already told for a client is not told again.  A valid file is looked
 * at for the warnings: a client that allows no tools, a per-call client
 * checked every few seconds (each check is a new connection), a secret
 * written inline where "env.NAME" keeps it out of the file, an admin
 * token shorter than 16 characters.  Pure, as the rest of the config
 * code: what needs the file system (a stdio command on PATH) is the
 * runtime's (mk_config_check).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mcpkeep.h"
#include "model/config.h"

#define TOKEN_MIN    16    /* characters of an admin token */
#define PER_CALL_MIN 10000 /* ms between a per-call client's checks */
#define PROBLEMS_MAX 200   /* problems told, at most */

/* Adds {level, path, message} to problems (path printf-formatted). */
static void
tell(json_t *problems, const char *level, const char *message, const char *fmt,
     ...)
{
	char    path[200];
	va_list ap;

	if (json_array_size(problems) >= PROBLEMS_MAX) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	json_array_append_new(problems,
	                      json_pack("{s:s, s:s, s:s}", "level", level,
	                                "path", path, "message", message));
}

static bool
told(const json_t *problems, const char *message)
{
	const json_t *p;
	size_t        i;

	json_array_foreach(problems, i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "message")),
		           message) == 0) {
			return (true);
		}
	}
	return (false);
}

/* A header that usually carries a credential. */
static bool
secret_header(const char *name)
{
	static const char *const words[] = {"auth",   "key",    "token",
	                                    "secret", "cookie", "password"};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strcasestr(name, words[i]) != NULL) {
			return (true);
		}
	}
	return (false);
}

/* v is a string written in the file, not an env. reference. */
static bool
inline_string(const json_t *v)
{
	return (json_is_string(v) &&
	        strncmp(json_string_value(v), "env.", 4) != 0);
}

#define INLINE_SECRET                                                         \
	"a secret written inline: \"env.NAME\" reads it from the "            \
	"environment and keeps it out of the file"

static void
client_warnings(json_t *problems, const cfg_file *f, size_t i)
{
	const cfg_client *c   = f->clients[i];
	const json_t     *raw = c->raw, *v;
	const char       *k;
	char              msg[300];
	int64_t           sync = c->sync_ms > 0 ? c->sync_ms
	                  : f->sync_ms > 0      ? f->sync_ms
	                                        : CFG_SYNC_DEFAULT_MS;

	if (!c->tools_all && (c->tools == NULL || c->tools[0] == NULL)) {
		snprintf(msg, sizeof(msg),
		         "client %s allows no tools: every call is refused "
		         "(tools_to_execute names the tools it may call; "
		         "[\"*\"] allows all)",
		         c->name);
		tell(problems, "warning", msg,
		     "mcp.client_configs[%zu].tools_to_execute", i);
	}
	if (!c->sticky && c->conn != CFG_STDIO && sync < PER_CALL_MIN) {
		snprintf(msg, sizeof(msg),
		         "client %s is per-call and checked every %lld ms: "
		         "each check opens a new connection to its server "
		         "(a longer tool_sync_interval, or "
		         "needs_session_stickiness for one kept session)",
		         c->name, (long long)sync);
		tell(problems, "warning", msg,
		     "mcp.client_configs[%zu].tool_sync_interval", i);
	}
	json_object_foreach((json_t *)json_object_get(raw, "headers"), k, v)
	{
		if (secret_header(k) && inline_string(v)) {
			tell(problems, "warning", INLINE_SECRET,
			     "mcp.client_configs[%zu].headers.%.64s", i, k);
		}
	}
	static const char *const holders[] = {"oauth_config",
	                                      "token_exchange"};
	for (size_t h = 0; h < 2; h++) {
		if (inline_string(
		            json_object_get(json_object_get(raw, holders[h]),
		                            "client_secret"))) {
			tell(problems, "warning", INLINE_SECRET,
			     "mcp.client_configs[%zu].%s.client_secret", i,
			     holders[h]);
		}
	}
}

static void
server_warnings(json_t *problems, const cfg_file *f, const json_t *root)
{
	const json_t *server = json_object_get(root, "server"), *k;
	char          msg[200];
	size_t        i;

	if (inline_string(json_object_get(server, "admin_token"))) {
		tell(problems, "warning", INLINE_SECRET, "server.admin_token");
	}
	if (f->admin_token != NULL && strlen(f->admin_token) < TOKEN_MIN) {
		snprintf(msg, sizeof(msg),
		         "the admin token is %zu characters: use at least %d "
		         "(e.g. openssl rand -hex 32)",
		         strlen(f->admin_token), TOKEN_MIN);
		tell(problems, "warning", msg, "server.admin_token");
	}
	if (inline_string(json_object_get(server, "metrics_token"))) {
		tell(problems, "warning", INLINE_SECRET,
		     "server.metrics_token");
	}
	json_array_foreach(json_object_get(server, "virtual_keys"), i, k)
	{
		if (inline_string(json_object_get(k, "value"))) {
			tell(problems, "warning", INLINE_SECRET,
			     "server.virtual_keys[%zu].value", i);
		}
	}
}

int
cfg_file_check(const char *text, size_t len, json_t **out, cfg_file **file)
{
	json_t      *problems = json_array(), *root, *clients, *c;
	json_error_t jerr;
	cfg_file    *f = NULL;
	char         err[CFG_ERR_MAX], msg[CFG_ERR_MAX + 64];
	size_t       i;
	bool         bad = false;

	*out = NULL;
	if (file != NULL) {
		*file = NULL;
	}
	if (problems == NULL) {
		return (MK_ENOMEM);
	}
	if ((root = json_loadb(text, len, 0, &jerr)) == NULL) {
		snprintf(msg, sizeof(msg), "not JSON: line %d: %s", jerr.line,
		         jerr.text);
		tell(problems, "error", msg, "");
		*out = problems;
		return (MK_EINVAL);
	}
	clients = json_object_get(json_object_get(root, "mcp"),
	                          "client_configs");
	/* each client alone; the file then without those that failed, so
	 * that its own error (a name twice, a section) is found too */
	for (i = json_array_size(clients); i-- > 0;) {
		cfg_client *cc = NULL;
		c              = json_array_get(clients, i);
		if (json_is_object(c) &&
		    cfg_client_parse(c, NULL, &cc, err, sizeof(err)) != 0) {
			tell(problems, "error", err, "mcp.client_configs[%zu]",
			     i);
			json_array_remove(clients, i);
			bad = true;
		}
		cfg_client_free(&cc);
	}
	for (size_t a = 0, n = json_array_size(problems); a < n / 2; a++) {
		json_t *x = json_incref(json_array_get(problems, a));
		json_array_set(problems, a,
		               json_array_get(problems, n - 1 - a));
		json_array_set_new(problems, n - 1 - a, x); /* (in order) */
	}
	char *rest = bad ? json_dumps(root, JSON_COMPACT) : NULL;
	int   rv   = bad && rest == NULL
	            ? MK_ENOMEM
	            : cfg_file_parse(rest != NULL ? rest : text,
                                 rest != NULL ? strlen(rest) : len, &f, err,
                                 sizeof(err));
	free(rest);
	if (rv != 0) {
		if (!told(problems, err)) {
			tell(problems, "error", err, "");
		}
		bad = true;
	} else if (bad) {
		cfg_file_free(&f); /* (no warnings for an invalid file) */
	} else {
		for (i = 0; i < f->nclients; i++) {
			client_warnings(problems, f, i);
		}
		server_warnings(problems, f, root);
		if (file != NULL) {
			*file = f; /* (the caller's look goes on) */
		} else {
			cfg_file_free(&f);
		}
	}
	json_decref(root);
	*out = problems;
	return (bad ? MK_EINVAL : 0);
}
