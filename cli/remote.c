/*
 * remote.c - `mcpkeep watch`, `mcpkeep clients`, `mcpkeep call`: a
 * running daemon, seen from a terminal.  watch subscribes to its state
 * stream (server.stream, e.g. tcp://127.0.0.1:5560); clients and call use
 * its admin HTTP API.  Every request has a deadline; answers are capped.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define URL_DEFAULT "http://127.0.0.1:8080"
#define ANSWER_MAX  (16 * 1024 * 1024)

static const char clients_usage[] =
        "usage: mcpkeep clients [--url URL] [--token TOKEN | --key KEY] "
        "[--json]\n"
        "  the daemon's clients as a table, or with --json as the API\n"
        "  gives them (default URL " URL_DEFAULT "; TOKEN defaults to\n"
        "  MCPKEEP_ADMIN_TOKEN, KEY, a virtual key, to MCPKEEP_KEY)\n"
        "exit codes: 0 listed, 1 the daemon failed or is unreachable, 2 usage\n";

static const char call_usage[] =
        "usage: mcpkeep call CLIENT TOOL [JSON] [--url URL]\n"
        "                    [--token TOKEN | --key KEY] [--user ID]\n"
        "                    [--session ID] [--timeout MS]\n"
        "  calls TOOL of CLIENT through the daemon with the arguments JSON\n"
        "  (default {}); prints the result.  TOKEN (the admin token)\n"
        "  defaults to MCPKEEP_ADMIN_TOKEN, KEY (a virtual key; --vk too)\n"
        "  to MCPKEEP_KEY; --user and --session name a per-user caller\n"
        "exit codes: 0 the tool ran (its result may still be isError), 1 the\n"
        "call failed, 2 usage, 3 the caller must authorize first (mcp_auth_required)\n";

const char *
cli_credential(const char *token, const char *key, char *out, size_t len)
{
	const char *env_token = getenv("MCPKEEP_ADMIN_TOKEN");
	const char *env_key   = getenv("MCPKEEP_KEY");

	if (token == NULL && key == NULL) { /* (an empty one is unset) */
		token = env_token != NULL && *env_token != '\0' ? env_token
		                                                : NULL;
		key   = token == NULL && env_key != NULL && *env_key != '\0'
		          ? env_key
		          : NULL;
	}
	if (token != NULL) {
		snprintf(out, len, "Authorization: Bearer %s", token);
	} else if (key != NULL) {
		snprintf(out, len, "X-MCP-Virtual-Key: %s", key);
	} else {
		return (NULL);
	}
	return (out);
}

typedef struct buf {
	char  *data;
	size_t len;
} buf;

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	buf   *b   = arg;
	size_t add = size * n;
	char  *nd;

	if (b->len + add > ANSWER_MAX ||
	    (nd = realloc(b->data, b->len + add + 1)) == NULL) {
		return (0); /* too big: the transfer fails */
	}
	memcpy(nd + b->len, p, add);
	b->data = nd;
	b->len += add;
	b->data[b->len] = '\0';
	return (add);
}

json_t *
cli_request(const char *url, const char *body, const char *const *headers,
            long *status)
{
	CURL              *e = curl_easy_init();
	struct curl_slist *h = NULL;
	buf                b = {0};
	json_t            *j = NULL;
	CURLcode           rc;

	for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
		h = curl_slist_append(h, headers[i]);
	}
	if (body != NULL) {
		h = curl_slist_append(h, "Content-Type: application/json");
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 600000L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	if ((rc = curl_easy_perform(e)) != CURLE_OK) {
		fprintf(stderr, "mcpkeep: %s: %s\n", url,
		        curl_easy_strerror(rc));
		*status = 0;
	} else {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
		j = b.data != NULL ? json_loads(b.data, 0, NULL) : NULL;
	}
	free(b.data);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return (j);
}

static void
say_error(long status, json_t *j)
{
	const char *e = json_string_value(json_object_get(j, "error"));

	fprintf(stderr, "mcpkeep: HTTP %ld: %s\n", status,
	        e != NULL ? e : "(no answer)");
}

/* The options every command to a daemon takes: its rows. */
#define DAEMON_OPTS(base, token, key)                                         \
	{CLI_TEXT, "--url", (base)}, {CLI_TEXT, "--token", (token)},          \
	{                                                                     \
		CLI_TEXT, "--key", (key)                                      \
	}

int
cmd_clients(int argc, char **argv)
{
	const char *base = URL_DEFAULT, *token = NULL, *key = NULL;
	char        url[512], auth[512];
	const char *headers[2] = {NULL, NULL};
	long        status;
	json_t     *j;
	bool        as_json = false;
	int         rc;
	cli_opt     opt[] = {
	            DAEMON_OPTS(&base, &token, &key),
	            {CLI_FLAG, "--json", &as_json},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("clients", argc, argv, opt, clients_usage)) != 0) {
		return (rc == 1 ? 0 : rc);
	}
	snprintf(url, sizeof(url), "%s/api/mcp/clients?limit=100", base);
	headers[0] = cli_credential(token, key, auth, sizeof(auth));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	j = cli_request(url, NULL, headers, &status);
	if (status != 200 || j == NULL) {
		say_error(status, j);
		json_decref(j);
		curl_global_cleanup();
		return (1);
	}
	if (as_json) {
		char *out = json_dumps(j, JSON_INDENT(2));
		printf("%s\n", out != NULL ? out : "null");
		free(out);
		json_decref(j);
		curl_global_cleanup();
		return (0);
	}
	printf("%-24s %-22s %-9s %5s  %s\n", "NAME", "STATE", "MODE", "TOOLS",
	       "LAST FAILURE");
	size_t  i;
	json_t *c;
	json_array_foreach(json_object_get(j, "clients"), i, c)
	{
		json_t *lf = json_object_get(c, "last_failure");
		printf("%-24s %-22s %-9s %5zu  %s%s%s\n",
		       json_string_value(json_object_get(
		               json_object_get(c, "config"), "name")),
		       json_string_value(json_object_get(c, "state")),
		       json_string_value(
		               json_object_get(c, "connection_mode")),
		       json_array_size(json_object_get(c, "tools")),
		       lf != NULL ? json_string_value(
		                            json_object_get(lf, "stage"))
		                  : "",
		       lf != NULL ? ": " : "",
		       lf != NULL ? json_string_value(
		                            json_object_get(lf, "message"))
		                  : "");
	}
	printf("%lld of %lld clients\n",
	       (long long)json_integer_value(json_object_get(j, "count")),
	       (long long)json_integer_value(
	               json_object_get(j, "total_count")));
	json_decref(j);
	curl_global_cleanup();
	return (0);
}

int
cmd_call(int argc, char **argv)
{
	const char *base = URL_DEFAULT, *client = NULL, *tool = NULL;
	const char *args = "{}", *who[3] = {NULL, NULL, NULL}, *token = NULL;
	long        status;
	char        url[512], hdr[3][300], auth[512];
	const char *headers[5] = {NULL};
	int         nh = 0, timeout = 0, rc;
	cli_opt     opt[] = {
	            {CLI_TEXT, "--url", &base},
	            {CLI_TEXT, "--user", &who[0]},
	            {CLI_TEXT, "--vk", &who[1]},
	            {CLI_TEXT, "--key", &who[1]},
	            {CLI_TEXT, "--token", &token},
	            {CLI_TEXT, "--session", &who[2]},
	            {CLI_NUM, "--timeout", &timeout},
	            {CLI_ARG, "CLIENT", &client},
	            {CLI_ARG, "TOOL", &tool},
	            {CLI_ARG, "JSON", &args},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("call", argc, argv, opt, call_usage)) != 0) {
		return (rc == 1 ? 0 : rc);
	}
	json_t *a = json_loads(args, 0, NULL);
	if (client == NULL || tool == NULL || !json_is_object(a)) {
		fprintf(stderr, "mcpkeep call: %s\n%s",
		        client == NULL || tool == NULL
		                ? "CLIENT and TOOL are needed"
		                : "JSON must be an object",
		        call_usage);
		json_decref(a);
		return (2);
	}
	const char *names[] = {"X-MCP-User-Id", "X-MCP-Virtual-Key",
	                       "X-MCP-Session-Id"};
	if (who[1] == NULL) { /* (a key is its own credential) */
		headers[nh] = cli_credential(token, NULL, auth, sizeof(auth));
		nh += headers[nh] != NULL;
	}
	for (int k = 0; k < 3; k++) {
		if (who[k] != NULL) {
			snprintf(hdr[k], sizeof(hdr[k]), "%s: %s", names[k],
			         who[k]);
			headers[nh++] = hdr[k];
		}
	}
	json_t *body = json_pack("{s:s, s:s, s:o}", "client", client, "tool",
	                         tool, "arguments", a);
	if (timeout > 0) {
		json_object_set_new(body, "timeout", json_integer(timeout));
	}
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	snprintf(url, sizeof(url), "%s/api/mcp/tool/execute", base);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	json_t *j = cli_request(url, text, headers, &status);
	free(text);
	int code = 0;
	if (status == 200) {
		char *out = json_dumps(json_object_get(j, "result"),
		                       JSON_INDENT(2));
		printf("%s\n", out != NULL ? out : "null");
		free(out);
	} else if (status == 401 && json_object_get(j, "mcp_auth_required")) {
		char *out = json_dumps(json_object_get(j, "mcp_auth_required"),
		                       JSON_INDENT(2));
		fprintf(stderr, "mcpkeep: authorize first:\n%s\n",
		        out != NULL ? out : "");
		free(out);
		code = 3;
	} else {
		say_error(status, j);
		code = 1;
	}
	json_decref(j);
	curl_global_cleanup();
	return (code);
}

static const char tools_usage[] =
        "usage: mcpkeep tools [CLIENT] [--url URL] [--token TOKEN | --key KEY]\n"
        "  each client's tools as its server lists them, and whether its\n"
        "  tools_to_execute allows each (a call of any other is refused)\n"
        "exit codes: 0 listed, 1 the daemon failed, is unreachable or has no\n"
        "such client, 2 usage\n";

/* Whether tool is in the allow-list allowed (["*"]: all). */
static bool
allowed_by(const json_t *allowed, const char *tool)
{
	const json_t *t;
	size_t        i;

	json_array_foreach(allowed, i, t)
	{
		const char *s = json_string_value(t);
		if (s != NULL &&
		    (strcmp(s, "*") == 0 || strcmp(s, tool) == 0)) {
			return (true);
		}
	}
	return (false);
}

/* Prints client c's tools, allowed or not; false when c is not named
 * want (NULL: any). */
static bool
print_tools(const json_t *c, const char *want)
{
	const json_t *cfg  = json_object_get(c, "config");
	const char   *name = json_string_value(json_object_get(cfg, "name"));
	const json_t *allowed = json_object_get(cfg, "tools_to_execute");
	const json_t *t;
	size_t        i, n = 0;

	if (name == NULL || (want != NULL && strcmp(name, want) != 0)) {
		return (false);
	}
	json_array_foreach(json_object_get(c, "tools"), i, t)
	{
		const char *tn = json_string_value(json_object_get(t, "name"));
		bool        ok = tn != NULL && allowed_by(allowed, tn);
		n += ok;
		printf("%-24s %-32s %s\n", name, tn != NULL ? tn : "?",
		       ok ? "allowed" : "not in tools_to_execute");
	}
	printf("%s: %zu of %zu tools allowed%s\n", name, n,
	       json_array_size(json_object_get(c, "tools")),
	       json_array_size(allowed) == 0
	               ? " (tools_to_execute is absent or empty: it allows "
	                 "no tools)"
	               : "");
	return (true);
}

int
cmd_tools(int argc, char **argv)
{
	const char *base = URL_DEFAULT, *token = NULL, *key = NULL;
	const char *want = NULL, *headers[2] = {NULL, NULL};
	char        url[600], auth[600];
	long        status;
	bool        found = false;
	int         rc;
	cli_opt     opt[] = {
	            DAEMON_OPTS(&base, &token, &key),
	            {CLI_ARG, "CLIENT", &want},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("tools", argc, argv, opt, tools_usage)) != 0) {
		return (rc == 1 ? 0 : rc);
	}
	headers[0] = cli_credential(token, key, auth, sizeof(auth));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf("%-24s %-32s %s\n", "CLIENT", "TOOL", "");
	for (long off = 0;;) {
		snprintf(url, sizeof(url),
		         "%s/api/mcp/clients?limit=100&offset=%ld", base, off);
		json_t *j  = cli_request(url, NULL, headers, &status);
		json_t *cs = json_object_get(j, "clients"), *c;
		size_t  i;
		if (status != 200 || j == NULL) {
			say_error(status, j);
			json_decref(j);
			curl_global_cleanup();
			return (1);
		}
		json_array_foreach(cs, i, c)
		{
			found |= print_tools(c, want);
		}
		off += (long)json_array_size(cs);
		bool more = json_array_size(cs) > 0 &&
		        off < json_integer_value(
		                      json_object_get(j, "total_count"));
		json_decref(j);
		if (!more) {
			break;
		}
	}
	curl_global_cleanup();
	if (want != NULL && !found) {
		fprintf(stderr, "mcpkeep tools: no MCP client %s\n", want);
		return (1);
	}
	return (0);
}
