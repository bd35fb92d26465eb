/*
 * config_test.c - config.json as model/config*.c read it: the error
 * texts that name what is wrong (unknown keys, types, a missing
 * variable, durations, duplicate names), env. references resolved in a
 * file and literal in an API body, the server settings (virtual keys
 * with their rules, allowed origins, stream_public, metrics_token), the
 * redacted view, and the file size bound.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "model/config.h"
#include "testutil.h"

/* text fails to parse with an error that contains want. */
static void
refused(const char *text, const char *want)
{
	char      err[CFG_ERR_MAX] = "";
	cfg_file *f                = NULL;

	CHECK_EQ(cfg_file_parse(text, strlen(text), &f, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(f == NULL);
	if (strstr(err, want) == NULL) {
		fprintf(stderr, "error \"%s\", wanted \"%s\"\n", err, want);
		CHECK(0);
	}
}

static cfg_file *
parsed(const char *text)
{
	char      err[CFG_ERR_MAX] = "";
	cfg_file *f                = NULL;

	if (cfg_file_parse(text, strlen(text), &f, err, sizeof(err)) != 0) {
		fprintf(stderr, "refused: %s\n", err);
		CHECK(0);
	}
	return (f);
}

static void
errors_name_the_field(void)
{
	refused("[]", "config: the top level must be an object");
	/* each section must be an object (a store or server that was not
	 * was read as absent) */
	refused("{\"mcp\": 1}", "config: field \"mcp\" must be an object");
	refused("{\"store\": \"x.db\"}",
	        "config: field \"store\" must be an object");
	refused("{\"server\": [\"127.0.0.1:8080\"]}",
	        "config: field \"server\" must be an object");
	refused("{\"mcp\": {}, \"extra\": 1}", "unknown field \"extra\"");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"colour\": 1}]}}",
	        "client \"a\"");
	refused("{\"mcp\": {\"tool_sync_interval\": \"5ms\"}}",
	        "\"mcp.tool_sync_interval\" must be a duration of at least 1s");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"cache_results\": [\"search\"]}]}}",
	        "client \"a\": field \"cache_results\": must be an object of "
	        "tool names to durations");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"cache_results\": {\"search\": \"5ms\"}}]}}",
	        "client \"a\": field \"cache_results\": the ttl of tool "
	        "\"search\" must be a duration from 1s to 24h");
	refused("{\"mcp\": {\"stdio_start_concurrency\": 0}}",
	        "config: field \"mcp.stdio_start_concurrency\" must be an "
	        "integer from 1 to 1024");
	refused("{\"mcp\": {\"stdio_start_concurrency\": \"4\"}}",
	        "\"mcp.stdio_start_concurrency\" must be an integer");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_CONFIG_TEST_NOPE\"}]}}",
	        "environment variable MK_CONFIG_TEST_NOPE is not set");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\"}, {\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\"}]}}",
	        "client \"a\": the name is used twice");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"max_concurrent_calls\": -1}]}}",
	        "client \"a\": field \"max_concurrent_calls\": must be an integer from 0 (no limit) to 100000");
	refused("{\"server\": {\"stream_public\": \"yes\"}}",
	        "field \"server.stream_public\": must be true or false");
	refused("{\"server\": {\"allowed_origins\": \"https://a\"}}",
	        "\"server.allowed_origins\": must be an array of strings");
	refused("{\"server\": {\"bind\": 1}}",
	        "unknown field \"server.bind\"");
	refused("{\"server\": {\"inputs\": [\"elicitation\", \"mind_reading\"]}}",
	        "field \"server.inputs\": entry 1 is not \"elicitation\", \"sampling\" or \"roots\"");
	refused("{\"server\": {\"inputs\": \"sampling\"}}",
	        "field \"server.inputs\": must be an array");
	refused("{\"server\": {\"roots\": [{\"uri\": \"https://x/\"}]}}",
	        "field \"server.roots[0]\": needs \"uri\": a file:// URI");
	refused("{\"server\": {\"roots\": [{\"uri\": \"file:///a\", \"label\": 1}]}}",
	        "unknown field \"server.roots[0].label\"");
	/* the words of a choice: one of those spoken */
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {\"auth_method\": \"client_secret_jwt\"}}]}}",
	        "field \"oauth_config.auth_method\": must be one of none, client_secret_basic, client_secret_post, private_key_jwt");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {\"grant_type\": \"password\"}}]}}",
	        "field \"oauth_config.grant_type\": must be one of authorization_code, client_credentials");
	refused("{\"mcp\": {\"client_configs\": [{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"auth_type\": \"token_exchange\", \"token_exchange\": {\"auth_method\": \"none\"}}]}}",
	        "field \"token_exchange.auth_method\": must be one of client_secret_basic, client_secret_post");
	refused("{ \"mcp\": ", "config: invalid JSON at line 1");
	/* a quoted key is one line: a newline in it cannot forge a log line */
	refused("{\"mcp\": {\"a\\nERROR forged\": 1}}",
	        "unknown field \"mcp.a?ERROR forged\"");
}

static void
virtual_keys(void)
{
	refused("{\"server\": {\"virtual_keys\": {}}}", "must be an array");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"a b\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        "name must be 1 to 64 letters, digits, '_' or '-'");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"short-value\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        "the value of key \"k\" is shorter than 16 characters");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"c\": []}}]}}",
	        "client \"c\": must be a list of tool names, or [\"*\"]");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}, \"trust_identity_headers\": 1}]}}",
	        "trust_identity_headers must be true or false");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}}, {\"name\": \"j\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        "key \"j\" has the value of another key");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}, \"scope\": 1}]}}",
	        "unknown field \"scope\"");
	/* the limits: positive numbers, a burst only with a rate */
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}, \"calls_per_second\": 0}]}}",
	        "calls_per_second must be a number from 0.001 to 1000000");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}, \"max_calls_in_flight\": 2.5}]}}",
	        "max_calls_in_flight must be a whole number from 1 to 100000");
	refused("{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef\", \"clients\": {\"*\": [\"*\"]}, \"burst\": 5}]}}",
	        "burst needs calls_per_second");
	/* tool groups: named subsets */
	refused("{\"server\": {\"tool_groups\": [{\"name\": \"a/b\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        "field \"server.tool_groups[0]\": name must be 1 to 64 letters, digits, '_' or '-'");
	refused("{\"server\": {\"tool_groups\": [{\"name\": \"g\", \"clients\": {\"*\": [\"*\"]}}, {\"name\": \"g\", \"clients\": {\"a\": [\"x\"]}}]}}",
	        "the name \"g\" is used twice");
	refused("{\"server\": {\"tool_groups\": [{\"name\": \"g\", \"clients\": {}}]}}",
	        "must be an object of client names to tool lists");
	refused("{\"server\": {\"tool_groups\": [{\"name\": \"g\", \"clients\": {\"*\": [\"*\"]}, \"key\": 1}]}}",
	        "unknown field \"key\"");
	/* a value from the environment, resolved; never in an error */
	setenv("MK_CONFIG_TEST_VK", "vk-from-the-environment", 1);
	cfg_file *f = parsed(
	        "{\"server\": {\"virtual_keys\": [{\"name\": \"k\", \"value\": \"env.MK_CONFIG_TEST_VK\", \"clients\": {\"svc\": [\"echo\"]}, \"trust_identity_headers\": true}], \"allowed_origins\": [\"https://gw:8443\"], \"stream_public\": true, \"metrics_token\": \"m-token\"}}");
	json_t *k = json_array_get(f->vkeys, 0);
	CHECK(strcmp(json_string_value(json_object_get(k, "value")),
	             "vk-from-the-environment") == 0);
	CHECK(json_is_true(json_object_get(k, "trust_identity_headers")));
	CHECK(strcmp(f->origins[0], "https://gw:8443") == 0 &&
	      f->origins[1] == NULL);
	CHECK(f->stream_public);
	CHECK(strcmp(f->metrics_token, "m-token") == 0);
	cfg_file_free(&f);
	unsetenv("MK_CONFIG_TEST_VK");
}

/* env. in a file resolves; in an API body (literal) it is the text. */
static void
env_file_and_api(void)
{
	char        err[CFG_ERR_MAX];
	cfg_client *c = NULL;
	json_t     *o;

	setenv("MK_CONFIG_TEST_URL", "http://127.0.0.1:9/mcp", 1);
	setenv("MK_CONFIG_TEST_KEY", "header-secret", 1);
	o = json_loads(
	        "{\"name\": \"e\", \"connection_type\": \"http\", \"connection_string\": \"env.MK_CONFIG_TEST_URL\", \"auth_type\": \"headers\", \"headers\": {\"X-K\": \"env.MK_CONFIG_TEST_KEY\"}}",
	        0, NULL);
	CHECK(o != NULL);
	CHECK_EQ(cfg_client_parse(o, NULL, &c, err, sizeof(err)), 0);
	CHECK(strcmp(c->url, "http://127.0.0.1:9/mcp") == 0);
	CHECK(strcmp(c->headers[0], "X-K: header-secret") == 0);
	/* the view keeps the reference, never the value */
	json_t *red  = cfg_client_redacted(c);
	char   *text = json_dumps(red, 0);
	CHECK(strstr(text, "env.MK_CONFIG_TEST_KEY") != NULL);
	CHECK(strstr(text, "header-secret") == NULL);
	free(text);
	json_decref(red);
	cfg_client_free(&c);
	/* literal: the URL is not one, and says nothing of the variable */
	CHECK_EQ(cfg_client_parse(o, json_true(), &c, err, sizeof(err)),
	         MK_EINVAL);
	CHECK(strstr(err, "must be an http:// or https:// URL") != NULL);
	CHECK(strstr(err, "not set") == NULL);
	json_decref(o);
	unsetenv("MK_CONFIG_TEST_URL");
	unsetenv("MK_CONFIG_TEST_KEY");
}

static void
durations(void)
{
	const char *ok[] = {"\"250ms\"", "\"30s\"", "\"10m\"", "\"1h\"", "7"};
	int64_t     want[] = {250, 30000, 600000, 3600000, 7000};
	const char *bad[]  = {"\"\"",
	                      "\"s\"",
	                      "\"-1s\"",
	                      "\"1x\"",
	                      "true",
	                      "-3",
	                      "\"9999999999999999999h\""};
	int64_t     ms;

	for (size_t i = 0; i < 5; i++) {
		json_t *v = json_loads(ok[i], JSON_DECODE_ANY, NULL);
		CHECK_EQ(cfg_duration(v, &ms), 0);
		CHECK_EQ(ms, want[i]);
		json_decref(v);
	}
	for (size_t i = 0; i < 7; i++) {
		json_t *v = json_loads(bad[i], JSON_DECODE_ANY, NULL);
		CHECK(v != NULL);
		if (cfg_duration(v, &ms) == 0) {
			fprintf(stderr, "duration %s taken as %lld ms\n",
			        bad[i], (long long)ms);
			CHECK(0);
		}
		json_decref(v);
	}
}

static void
size_bound(void)
{
	size_t    n   = 4 * 1024 * 1024 + 1;
	char     *big = malloc(n + 1), err[CFG_ERR_MAX];
	cfg_file *f   = NULL;

	CHECK(big != NULL);
	memset(big, ' ', n);
	big[0]     = '{';
	big[n - 1] = '}';
	big[n]     = '\0';
	CHECK_EQ(cfg_file_parse(big, n, &f, err, sizeof(err)), MK_ETOOBIG);
	CHECK(strstr(err, "exceeds the") != NULL);
	free(big);
}

/* The problem of problems at path (level and a part of its message),
 * or fails. */
static void
problem(const json_t *problems, const char *level, const char *path,
        const char *part)
{
	const json_t *p;
	size_t        i;

	json_array_foreach(problems, i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "level")),
		           level) == 0 &&
		    strcmp(json_string_value(json_object_get(p, "path")),
		           path) == 0 &&
		    strstr(json_string_value(json_object_get(p, "message")),
		           part) != NULL) {
			return;
		}
	}
	char *all = json_dumps(problems, JSON_COMPACT);
	fprintf(stderr, "no %s at \"%s\" with \"%s\" in %s\n", level, path,
	        part, all);
	free(all);
	CHECK(0);
}

/* mcpkeep check's findings: every client's first error (not only the
 * file's first), the file's own error (a name twice) once; a valid
 * file's warnings, each with its path. */
static void
check(void)
{
	const char *bad =
	        "{\"mcp\": {\"client_configs\": ["
	        "{\"name\": \"a\", \"connection_type\": \"http\", \"connection_string\": \"ftp://x\"}, "
	        "{\"name\": \"ok\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\"}, "
	        "{\"name\": \"ok\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\"}, "
	        "{\"name\": \"c\", \"connection_type\": \"bogus\"}]}}";
	const char *warn =
	        "{\"mcp\": {\"client_configs\": ["
	        "{\"name\": \"none\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\"}}, "
	        "{\"name\": \"often\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"tool_sync_interval\": 1, \"tools_to_execute\": [\"*\"], \"auth_type\": \"headers\", \"headers\": {\"Authorization\": \"Bearer abc\", \"X-Region\": \"eu\", \"X-Api-Key\": \"env.HOME\"}}, "
	        "{\"name\": \"kept\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": 1, \"tools_to_execute\": [\"echo\"]}]}, "
	        "\"server\": {\"admin_token\": \"short\", \"virtual_keys\": [{\"name\": \"k\", \"value\": \"0123456789abcdef0123\", \"clients\": {\"*\": [\"*\"]}}]}}";
	const char *fine =
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"kept\", \"connection_type\": \"http\", \"connection_string\": \"http://h/mcp\", \"tools_to_execute\": [\"*\"]}]}, "
	        "\"server\": {\"admin_token\": \"env.MK_CHECK_TOKEN\"}}";
	json_t *p = NULL;

	CHECK_EQ(cfg_file_check(bad, strlen(bad), &p, NULL), MK_EINVAL);
	problem(p, "error", "mcp.client_configs[0]", "connection_string");
	CHECK(strcmp(json_string_value(
	                     json_object_get(json_array_get(p, 0), "path")),
	             "mcp.client_configs[0]") == 0); /* (in order) */
	problem(p, "error", "mcp.client_configs[3]", "connection_type");
	problem(p, "error", "", "\"ok\"");
	CHECK_EQ(json_array_size(p), 3);
	json_decref(p);

	CHECK_EQ(cfg_file_check(warn, strlen(warn), &p, NULL), 0);
	problem(p, "warning", "mcp.client_configs[0].tools_to_execute",
	        "client none allows no tools");
	problem(p, "warning", "mcp.client_configs[1].tool_sync_interval",
	        "client often is per-call and checked every 1000 ms");
	problem(p, "warning", "mcp.client_configs[1].headers.Authorization",
	        "inline");
	problem(p, "warning", "server.admin_token", "5 characters");
	problem(p, "warning", "server.admin_token", "inline");
	problem(p, "warning", "server.virtual_keys[0].value", "inline");
	/* (not X-Region: no secret; not X-Api-Key: env.; not kept: sticky) */
	CHECK_EQ(json_array_size(p), 6);
	json_decref(p);

	setenv("MK_CHECK_TOKEN", "0123456789abcdef0123456789abcdef", 1);
	CHECK_EQ(cfg_file_check(fine, strlen(fine), &p, NULL), 0);
	CHECK_EQ(json_array_size(p), 0);
	json_decref(p);
	CHECK_EQ(cfg_file_check("{", 1, &p, NULL), MK_EINVAL);
	problem(p, "error", "", "not JSON");
	json_decref(p);
}

int
main(void)
{
	RUN(errors_name_the_field);
	RUN(virtual_keys);
	RUN(env_file_and_api);
	RUN(durations);
	RUN(size_bound);
	RUN(check);
	return (0);
}
