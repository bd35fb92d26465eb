/*
 * check.c - mcpkeep check (a config.json checked without starting
 * anything), the same warnings logged at boot, and mcpkeep import (the
 * mcpServers format of desktop clients and mcp-hub, printed as a
 * mcpkeep config).
 */
#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char check_usage[] =
        "usage: mcpkeep check -c FILE [--json]\n"
        "  validates FILE without starting anything: each error and\n"
        "  warning with its path; --json prints the list as JSON\n"
        "exit codes: 0 valid (warnings may be listed), 1 invalid, 2 usage\n";

static const char import_usage[] =
        "usage: mcpkeep import [FILE]\n"
        "  reads {\"mcpServers\": {NAME: {command, args, env} | {url,\n"
        "  headers}}} (the format of desktop clients and mcp-hub) from\n"
        "  FILE or stdin and prints it as a mcpkeep config.json\n"
        "exit codes: 0 printed, 1 unreadable input, 2 usage\n";

void
cli_config_warnings(const char *text)
{
	char   *report = NULL;
	json_t *all, *p;
	size_t  i;

	if (mk_config_check(text, &report) != MK_OK) {
		mk_free(report);
		return; /* (the load says what is wrong) */
	}
	all = json_loads(report, 0, NULL);
	json_array_foreach(all, i, p)
	{
		mk_log(MK_LOG_WARN, "config", "%s: %s",
		       json_string_value(json_object_get(p, "path")),
		       json_string_value(json_object_get(p, "message")));
	}
	json_decref(all);
	mk_free(report);
}

int
cmd_check(int argc, char **argv)
{
	const char *file = NULL;
	char       *text, *report = NULL, ferr[300];
	bool        as_json = false;
	int         rc, errors = 0, warnings = 0;
	json_t     *all, *p;
	size_t      i;
	cli_opt     opt[] = {
	            {CLI_TEXT, "-c", &file},
	            {CLI_FLAG, "--json", &as_json},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("check", argc, argv, opt, check_usage)) != 0) {
		return (rc == 1 ? 0 : rc);
	}
	if (file == NULL) {
		fprintf(stderr, "mcpkeep check: -c FILE is required\n%s",
		        check_usage);
		return (2);
	}
	if ((text = cli_read_file(file, ferr, sizeof(ferr))) == NULL) {
		fprintf(stderr, "mcpkeep check: %s\n", ferr);
		return (1);
	}
	rc = mk_config_check(text, &report);
	free(text);
	if (rc != MK_OK && rc != MK_EINVAL) {
		fprintf(stderr, "mcpkeep check: %s\n", mk_strerror(rc));
		mk_free(report);
		return (1);
	}
	all = json_loads(report, 0, NULL);
	json_array_foreach(all, i, p)
	{
		const char *level =
		        json_string_value(json_object_get(p, "level"));
		const char *path =
		        json_string_value(json_object_get(p, "path"));
		bool error = strcmp(level, "error") == 0;
		errors += error;
		warnings += !error;
		if (!as_json) {
			printf("%s: %s: %s%s%s\n", file, level, path,
			       *path != '\0' ? ": " : "",
			       json_string_value(
			               json_object_get(p, "message")));
		}
	}
	if (as_json) {
		printf("%s\n", report);
	} else {
		printf("%s: %s (%d error%s, %d warning%s)\n", file,
		       errors > 0 ? "invalid" : "valid", errors,
		       errors == 1 ? "" : "s", warnings,
		       warnings == 1 ? "" : "s");
	}
	json_decref(all);
	mk_free(report);
	return (rc == MK_OK ? 0 : 1);
}

/* A server's name as a mcpkeep client's: letters, digits and '_' ("-"
 * splits the gateway's names), at most 64. */
static void
client_name(const char *from, char out[65])
{
	size_t n = 0;

	for (; *from != '\0' && n < 64; from++) {
		out[n++] = isalnum((unsigned char)*from) ? *from : '_';
	}
	out[n] = '\0';
	if (n == 0) {
		snprintf(out, 65, "server");
	}
}

/* One mcpServers entry as a client config (new reference), or NULL with
 * why. */
static json_t *
client_of(const char *name, json_t *s, const char **why)
{
	const char *cmd  = json_string_value(json_object_get(s, "command"));
	const char *url  = json_string_value(json_object_get(s, "url"));
	const char *type = json_string_value(json_object_get(s, "type"));
	json_t     *c    = json_object(), *v;
	char        cn[65];
	const char *k;
	size_t      i;

	client_name(name, cn);
	json_object_set_new(c, "name", json_string(cn));
	if (cmd != NULL) {
		json_t *envs = json_array(), *args = json_array();
		json_array_foreach(json_object_get(s, "args"), i, v)
		{
			if (json_is_string(v)) {
				json_array_append(args, v);
			}
		}
		json_array_append_new(envs, json_string("PATH"));
		json_array_append_new(envs, json_string("HOME"));
		json_object_foreach(json_object_get(s, "env"), k, v)
		{
			char *e;
			if (json_is_string(v) &&
			    asprintf(&e, "%s=%s", k, json_string_value(v)) >=
			            0) {
				json_array_append_new(envs, json_string(e));
				free(e);
			}
		}
		json_object_set_new(c, "connection_type",
		                    json_string("stdio"));
		json_object_set_new(c, "stdio_config",
		                    json_pack("{s:s, s:o, s:o}", "command",
		                              cmd, "args", args, "envs",
		                              envs));
	} else if (url != NULL) {
		bool sse = (type != NULL && strcmp(type, "sse") == 0) ||
		        (strlen(url) >= 4 &&
		         strcmp(url + strlen(url) - 4, "/sse") == 0);
		json_object_set_new(c, "connection_type",
		                    json_string(sse ? "sse" : "http"));
		json_object_set_new(c, "connection_string", json_string(url));
		if (!sse) { /* (one kept session, as a desktop client has) */
			json_object_set_new(c, "needs_session_stickiness",
			                    json_true());
		}
		if (json_object_size(json_object_get(s, "headers")) > 0) {
			json_object_set_new(c, "auth_type",
			                    json_string("headers"));
			json_object_set(c, "headers",
			                json_object_get(s, "headers"));
		}
	} else {
		json_decref(c);
		*why = "has neither command nor url";
		return (NULL);
	}
	/* a desktop client offers every tool of its servers */
	json_object_set_new(c, "tools_to_execute", json_pack("[s]", "*"));
	if (json_is_true(json_object_get(s, "disabled"))) {
		json_object_set_new(c, "disabled", json_true());
	}
	return (c);
}

int
cmd_import(int argc, char **argv)
{
	json_error_t jerr;
	json_t      *in, *servers, *s, *clients = json_array();
	const char  *name, *why = NULL;

	const char *file = NULL;
	int         rc;
	cli_opt     opt[] = {
	            {CLI_ARG, "FILE", &file},
	            CLI_OPTS_END,
        };

	if ((rc = cli_args("import", argc, argv, opt, import_usage)) != 0) {
		json_decref(clients);
		return (rc == 1 ? 0 : rc);
	}
	in      = file != NULL ? json_load_file(file, 0, &jerr)
	                       : json_loadf(stdin, 0, &jerr);
	servers = json_object_get(in, "mcpServers");
	if (servers == NULL) { /* (mcp-hub and VS Code: "servers") */
		servers = json_object_get(in, "servers");
	}
	if (!json_is_object(servers)) {
		fprintf(stderr, "mcpkeep import: %s: %s\n",
		        file != NULL ? file : "stdin",
		        in == NULL ? jerr.text
		                   : "no \"mcpServers\" object of servers");
		json_decref(in);
		json_decref(clients);
		return (1);
	}
	json_object_foreach(servers, name, s)
	{
		json_t *c =
		        json_is_object(s) ? client_of(name, s, &why) : NULL;
		if (c == NULL) {
			fprintf(stderr,
			        "mcpkeep import: server \"%s\" %s: left out\n",
			        name, why != NULL ? why : "is not an object");
			continue;
		}
		json_array_append_new(clients, c);
	}
	json_t *out = json_pack("{s:{s:o}}", "mcp", "client_configs", clients);
	char   *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text != NULL) {
		printf("%s\n", text);
	}
	fprintf(stderr,
	        "mcpkeep import: %zu servers; check the result with "
	        "mcpkeep check -c FILE (a header value written inline is "
	        "better as \"env.NAME\")\n",
	        json_array_size(json_object_get(json_object_get(out, "mcp"),
	                                        "client_configs")));
	bool printed = text != NULL;
	free(text);
	json_decref(out);
	json_decref(in);
	return (printed ? 0 : 1); /* (a server left out was said) */
}
