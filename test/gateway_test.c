/*
 * gateway_test.c - /mcp, the daemon as one MCP server: a real downstream
 * client (the TS SDK's Client over StreamableHTTPClientTransport,
 * test/peers/gwclient.mjs) lists and calls the tools of the clients its
 * key reaches, named <client>-<tool>; two keys see exactly their tools
 * and are refused the other's; the protocol's edges over raw HTTP
 * (sessions, versions, JSON-RPC errors, no key: 401).  The upstream MCP
 * server is test/peers/inject.mjs; the daemon is the built program.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer.h"
#include "rtutil.h"
#include "svutil.h"
#include "testutil.h"

static peer mcp; /* inject.mjs */

#define KEY_ALL         "gw-key-all-0123456789abcdef"
#define KEY_ALPHA       "gw-key-alpha-0123456789abcdef"
#define ADMIN           "gw-admin-token-0123456789"
#define KEY_SLOW        "gw-key-slow-0123456789abcdef"
#define DOCS_GROUP      "{\"alpha\": [\"echo\"], \"beta\": [\"*\"]}"
#define GW_MAX_SESSIONS 4096 /* (the daemon's bound) */
#define KEY_NARROW      "gw-key-narrow-0123456789abcdef"

/* Clients alpha (every tool), beta (echo only), gone (disabled), hd
 * (per_user_headers: each caller's own x-api-key, the admin's verified),
 * sticky (one session, reconnected make-before-break) and a
 * key for all of them, one for alpha's echo and structured only, and two
 * of alpha's with limits: slow (2 calls, then one per 100 s), narrow (one
 * call in flight). */
static void
gateway_config(char *config, size_t len, const char *alpha_only,
               const char *docs)
{
	snprintf(
	        config, len,
	        "{\"mcp\": {\"client_configs\": ["
	        "{\"name\": \"alpha\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"beta\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"echo\"]}, "
	        "{\"name\": \"gone\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"hd\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"per_user_headers\", \"per_user_header_keys\": [\"x-api-key\"], \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"sticky\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"local\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s/inject.mjs\", \"stdio\"], \"envs\": [\"PATH\"]}, \"tools_to_execute\": [\"echo\"]}]}, "
	        "\"server\": {\"admin_token\": \"" ADMIN
	        "\", \"virtual_keys\": ["
	        "{\"name\": \"all\", \"value\": \"" KEY_ALL
	        "\", \"clients\": {\"*\": [\"*\"]}}, "
	        "{\"name\": \"alpha_only\", \"value\": \"" KEY_ALPHA
	        "\", \"clients\": {\"alpha\": %s}}, "
	        "{\"name\": \"slow\", \"value\": \"" KEY_SLOW
	        "\", \"clients\": {\"alpha\": [\"*\"]}, \"calls_per_second\": 0.01, \"burst\": 2}, "
	        "{\"name\": \"narrow\", \"value\": \"" KEY_NARROW
	        "\", \"clients\": {\"alpha\": [\"*\"], \"sticky\": [\"slow\"]}, \"max_calls_in_flight\": 1}], "
	        "\"tool_groups\": [{\"name\": \"docs\", \"clients\": %s}]}}",
	        mcp.port, mcp.port, mcp.port, mcp.port, mcp.port, peer_dir(),
	        alpha_only, docs);
}

/* The daemon on gateway_config with alpha_only's grants as they are
 * first, gone disabled and hd's admin credential verified. */
static void
gateway_serve(peer *d)
{
	char config[4096];

	gateway_config(config, sizeof(config), "[\"echo\", \"structured\"]",
	               DOCS_GROUP);
	/* (INFO: the audit lines) */
	const char *env[] = {"MCPKEEP_LOG=info", NULL};
	serve_opt(d, "gateway.json", config, env, "--log", "info");
	sv_admin = ADMIN;
	CHECK(state_within("local", "healthy", WAIT_MS));
	expect("POST", "/api/mcp/client/gone/disable", NULL, ADMIN, 200, NULL);
	expect("POST", "/api/mcp/client/hd/verify-headers",
	       "{\"headers\": {\"x-api-key\": \"key-admin\"}}", ADMIN, 200,
	       NULL);
}

/* A driver's end: waits for c to exit by itself, then reads what it
 * wrote to out (JSON; new reference).  fatal_ok: a {"fatal"} is taken
 * too, else it fails the test, as a failed exit does. */
static json_t *
driver_result(peer *c, const char *out, bool fatal_ok)
{
	json_t *got;

	CHECK(peer_wait_exit(c, WAIT_MS));
	peer_stop(c);
	got = json_load_file(out, 0, NULL);
	CHECK(got != NULL);
	if (!fatal_ok && json_object_get(got, "fatal") != NULL) {
		fprintf(stderr, "%s: %s\n", out,
		        json_string_value(json_object_get(got, "fatal")));
		CHECK(0);
	}
	CHECK(fatal_ok ||
	      (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0));
	return (got);
}

/* Runs gwclient.mjs against the daemon's /mcp with key and calls (JSON
 * text); its findings (new reference). */
static json_t *
sdk_client_at(const char *path, const char *key, const char *calls,
              const char *bridge, bool fatal_ok)
{
	char js[512], url[128], out[512];
	peer c = {0};

	snprintf(js, sizeof(js), "%s/gwclient.mjs", peer_dir());
	snprintf(url, sizeof(url), "%s%s", sv_base, path);
	snprintf(out, sizeof(out), "%s/gwclient.json", sv_dir);
	const char *argv[] = {"node", js, url, key, calls, out, bridge, NULL};
	CHECK_EQ(peer_start(&c, argv, NULL, "gwclient done ([0-9]+)", WAIT_MS),
	         0);
	return (driver_result(&c, out, fatal_ok));
}

static json_t *
sdk_client_via(const char *key, const char *calls, const char *bridge)
{
	return (sdk_client_at("/mcp", key, calls, bridge, false));
}

static json_t *
sdk_client(const char *key, const char *calls)
{
	return (sdk_client_via(key, calls, NULL));
}

/* Whether the JSON array a holds the string s. */
static bool
holds(const json_t *a, const char *s)
{
	size_t  i;
	json_t *v;

	json_array_foreach(a, i, v)
	{
		if (strcmp(json_string_value(v), s) == 0) {
			return (true);
		}
	}
	return (false);
}

/* Whether a driver's call i (its result, as JSON) holds text. */
static bool
call_holds(json_t *got, size_t i, const char *text)
{
	char *j  = json_dumps(json_array_get(json_object_get(got, "calls"), i),
	                      JSON_COMPACT | JSON_ENSURE_ASCII);
	bool  in = j != NULL && strstr(j, text) != NULL;

	free(j);
	return (in);
}

/* The text of a CallToolResult's first content item. */
static const char *
text_of(const json_t *res)
{
	return (json_string_value(json_object_get(
	        json_array_get(json_object_get(res, "content"), 0), "text")));
}

/* The SDK's client, with each key: the tools it may call and nothing
 * else, in order; calls answered as the upstream answered them. */
static void
sdk(void)
{
	peer    d = {0};
	json_t *got, *tools, *calls;

	gateway_serve(&d);
	got = sdk_client(
	        KEY_ALL,
	        "[{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"through the gateway\"}}, "
	        "{\"name\": \"alpha-structured\", \"arguments\": {}}, "
	        "{\"name\": \"alpha-fail\", \"arguments\": {}}, "
	        "{\"name\": \"beta-hang\", \"arguments\": {}}, "
	        "{\"name\": \"nosuch-echo\", \"arguments\": {}}, "
	        "{\"name\": \"local-echo\", \"arguments\": {\"message\": \"over stdio\"}}]");
	CHECK(strcmp(json_string_value(json_object_get(got, "protocol")),
	             "2025-11-25") == 0);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(got, "server"), "name")),
	             "mcpkeep") == 0);
	CHECK(json_is_true(json_object_get(got, "ended")));
	tools = json_object_get(got, "tools");
	/* alpha's every tool, beta's echo, nothing of the disabled client */
	CHECK(holds(tools, "alpha-echo") && holds(tools, "alpha-hang") &&
	      holds(tools, "alpha-structured") && holds(tools, "beta-echo"));
	CHECK(!holds(tools, "beta-hang") && !holds(tools, "gone-echo"));
	/* the stdio client's and the per-user one's (the admin's own) */
	CHECK(holds(tools, "local-echo") && holds(tools, "hd-echo"));
	/* sorted: client, then tool */
	for (size_t i = 1; i < json_array_size(tools); i++) {
		CHECK(strcmp(json_string_value(json_array_get(tools, i - 1)),
		             json_string_value(json_array_get(tools, i))) < 0);
	}
	calls = json_object_get(got, "calls");
	CHECK(strcmp(text_of(json_array_get(calls, 0)),
	             "through the gateway") == 0);
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(json_array_get(calls, 1),
	                                 "structuredContent"),
	                 "answer")),
	         42);
	/* the upstream's tool error stays a tool result */
	CHECK(json_is_true(
	        json_object_get(json_array_get(calls, 2), "isError")));
	CHECK(strcmp(text_of(json_array_get(calls, 2)), "it failed") == 0);
	/* not in beta's tools_to_execute; no such client: JSON-RPC errors */
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 3), "error")),
	             "tool hang is not in tools_to_execute of MCP client beta") !=
	      NULL);
	CHECK_EQ(json_integer_value(
	                 json_object_get(json_array_get(calls, 3), "code")),
	         -32602);
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 4), "error")),
	             "Unknown tool: nosuch-echo (no MCP client nosuch)") !=
	      NULL);
	CHECK(strcmp(text_of(json_array_get(calls, 5)), "over stdio") == 0);
	json_decref(got);

	/* mcpkeep call with a key or the admin token (keys are set: a
	 * caller without either is refused) */
	CHECK_EQ(sv_cli("MCPKEEP_ADMIN_TOKEN=",
	                "call alpha echo "
	                "'{\"message\": \"cli key\"}' "
	                "--key " KEY_ALPHA),
	         0);
	CHECK(sv_cli_said("cli key"));
	CHECK_EQ(sv_cli("MCPKEEP_ADMIN_TOKEN=" ADMIN,
	                "call alpha echo '{\"message\": \"cli admin\"}'"),
	         0);
	CHECK(sv_cli_said("cli admin"));
	CHECK_EQ(
	        sv_cli("MCPKEEP_ADMIN_TOKEN= MCPKEEP_KEY=", "call alpha echo"),
	        1);
	CHECK(sv_cli_said("HTTP 401"));
	CHECK_EQ(sv_cli("MCPKEEP_ADMIN_TOKEN= MCPKEEP_KEY=" KEY_ALPHA,
	                "clients"),
	         0);
	CHECK(sv_cli_said("alpha"));

	/* mcpkeep tools: what the server lists, and what is allowed */
	CHECK_EQ(sv_cli("MCPKEEP_ADMIN_TOKEN=" ADMIN, "tools beta"), 0);
	CHECK(sv_cli_said("beta                     echo"
	                  "                             allowed"));
	CHECK(sv_cli_said("beta                     hang"
	                  "                             not in "
	                  "tools_to_execute"));
	CHECK(sv_cli_said("beta: 1 of "));
	CHECK_EQ(sv_cli("MCPKEEP_ADMIN_TOKEN=" ADMIN, "tools nosuch"), 1);
	CHECK(sv_cli_said("no MCP client nosuch"));

	/* alpha_only: alpha's echo and structured, nothing else */
	got = sdk_client(
	        KEY_ALPHA,
	        "[{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"mine\"}}, "
	        "{\"name\": \"alpha-hang\", \"arguments\": {}}, "
	        "{\"name\": \"beta-echo\", \"arguments\": {\"message\": \"theirs\"}}]");
	tools = json_object_get(got, "tools");
	CHECK_EQ(json_array_size(tools), 2);
	CHECK(holds(tools, "alpha-echo") && holds(tools, "alpha-structured"));
	calls = json_object_get(got, "calls");
	CHECK(strcmp(text_of(json_array_get(calls, 0)), "mine") == 0);
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 1), "error")),
	             "tool alpha-hang is not allowed for virtual key "
	             "\"alpha_only\"") != NULL);
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 2), "error")),
	             "Unknown tool: beta-echo") != NULL);
	json_decref(got);
	peer_stop(&d);
	/* (a sanitizer's finding in the daemon fails its exit status) */
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	/* one audit line per call: the key's name, never its value */
	CHECK(peer_said(&d,
	                "call key=alpha_only client=alpha tool=echo "
	                "outcome=ok"));
	CHECK(!peer_said(&d, KEY_ALPHA) && !peer_said(&d, "theirs"));
}

/* `mcpkeep connect`: the SDK's client over stdio (as a desktop client
 * runs it) reaches the same tools through the bridge, which ends its
 * session when stdin ends. */
static void
bridge(void)
{
	peer    d = {0};
	json_t *got, *tools, *calls;

	gateway_serve(&d);
	got = sdk_client_via(
	        KEY_ALPHA,
	        "[{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"over stdio\"}}, "
	        "{\"name\": \"beta-echo\", \"arguments\": {\"message\": \"x\"}}]",
	        getenv("MK_MCPKEEP"));
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(got, "server"), "name")),
	             "mcpkeep") == 0);
	tools = json_object_get(got, "tools");
	CHECK_EQ(json_array_size(tools), 2);
	CHECK(holds(tools, "alpha-echo") && holds(tools, "alpha-structured"));
	calls = json_object_get(got, "calls");
	CHECK(strcmp(text_of(json_array_get(calls, 0)), "over stdio") == 0);
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 1), "error")),
	             "Unknown tool: beta-echo") != NULL);
	CHECK(json_is_true(json_object_get(got, "ended")));
	json_decref(got);
	/* without a key: the daemon's 401 is the initialize's answer */
	got = sdk_client_at("/mcp", "-", "[]", getenv("MK_MCPKEEP"), true);
	CHECK(strstr(json_string_value(json_object_get(got, "fatal")),
	             "/mcp needs a virtual key") != NULL);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* Starts gwclient.mjs as a watcher (GWCLIENT_WATCH) of path with key,
 * once it listed; for: GWCLIENT_WATCH_FOR, or NULL.  Its result file's
 * path in out (512 bytes), for driver_result. */
static void
watcher(peer *c, const char *key, const char *path, const char *for_,
        char *out)
{
	char js[512], url[128], want[128];

	snprintf(js, sizeof(js), "%s/gwclient.mjs", peer_dir());
	snprintf(url, sizeof(url), "%s%s", sv_base, path);
	static int n;
	snprintf(out, 512, "%s/watch-%d.json", sv_dir, ++n);
	snprintf(want, sizeof(want), "GWCLIENT_WATCH_FOR=%s",
	         for_ != NULL ? for_ : "");
	const char *argv[] = {"node", js, url, key, "[]", out, NULL};
	const char *env[]  = {"GWCLIENT_WATCH=1", for_ != NULL ? want : NULL,
	                      NULL};
	CHECK_EQ(peer_start(c, argv, env, "gwclient listed ([0-9]+)", WAIT_MS),
	         0);
}

/* Live changes: a session with its stream open hears list_changed when
 * what it sees changed (a client it reaches disabled), not for a change
 * it cannot see (another client disabled); its next list shows it. */
static void
changes(void)
{
	peer    d = {0}, c = {0};
	char    out[512];
	json_t *got, *ch;

	gateway_serve(&d);
	watcher(&c, KEY_ALPHA, "/mcp", NULL, out);
	/* the downstream sessions gauge counts its session */
	CHECK(metric_within("mcpkeep_gateway_sessions", 1, GW_MAX_SESSIONS));
	/* beta is not alpha_only's: nothing to tell; alpha is */
	expect("POST", "/api/mcp/client/beta/disable", NULL, ADMIN, 200, NULL);
	expect("POST", "/api/mcp/client/alpha/disable", NULL, ADMIN, 200,
	       NULL);
	got = driver_result(&c, out, false);
	ch  = json_object_get(got, "changes");
	CHECK(json_array_size(ch) >= 1);
	CHECK_EQ(json_array_size(json_array_get(ch, json_array_size(ch) - 1)),
	         0);
	CHECK_EQ(json_integer_value(json_object_get(got, "spurious")), 0);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* A key and a group edited by SIGHUP: their open sessions hear
 * notifications/tools/list_changed, and their next lists are what the
 * key and the group allow now (alpha_only loses alpha's echo, the group
 * docs loses alpha). */
static void
rekeyed(void)
{
	peer    d = {0}, c = {0}, g = {0};
	char    out[512], gout[512], config[4096];
	json_t *got, *ch;

	gateway_serve(&d);
	watcher(&c, KEY_ALPHA, "/mcp", NULL, out);
	watcher(&g, KEY_ALL, "/mcp/docs", NULL, gout);
	/* alpha_only loses alpha's echo; the group docs loses alpha */
	gateway_config(config, sizeof(config), "[\"structured\"]",
	               "{\"beta\": [\"*\"]}");
	write_config("gateway.json", config);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	got = driver_result(&g, gout, false);
	ch  = json_object_get(got, "changes");
	CHECK(json_array_size(ch) >= 1);
	CHECK(holds(json_array_get(ch, json_array_size(ch) - 1), "beta-echo"));
	CHECK(holds(json_object_get(got, "tools"), "alpha-echo"));
	json_decref(got);
	got = driver_result(&c, out, false);
	ch  = json_object_get(got, "changes");
	CHECK(json_array_size(ch) >= 1);
	json_t *last = json_array_get(ch, json_array_size(ch) - 1);
	CHECK_EQ(json_array_size(last), 1);
	CHECK(holds(last, "alpha-structured"));
	CHECK(holds(json_object_get(got, "tools"), "alpha-echo"));
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* A tool the upstream adds reaches an open session: the upstream's
 * tools/list_changed makes the sticky client list again, and the session
 * hears notifications/tools/list_changed; its next list has the tool,
 * which runs.  (The upstream tells only sessions whose GET stream is
 * open: it is told again until the session heard, each time the session
 * has not within half a second.) */
static void
added(void)
{
	peer    d = {0}, c = {0};
	char    out[512];
	json_t *got, *ch, *r;

	gateway_serve(&d);
	CHECK(state_within("sticky", "healthy", WAIT_MS));
	watcher(&c, KEY_ALL, "/mcp", "sticky-added", out);
	r = admin_json(mcp.port, "/admin/add-tool", "{\"name\": \"added\"}");
	CHECK(json_is_string(json_object_get(r, "added")));
	json_decref(r);
	for (int i = 0; i < WAIT_MS / 500 && !peer_wait_exit(&c, 500); i++) {
		json_decref(admin_json(mcp.port, "/admin/list-changed", "{}"));
	}
	got = driver_result(&c, out, false);
	ch  = json_object_get(got, "changes");
	CHECK(json_array_size(ch) >= 1);
	CHECK(holds(json_array_get(ch, json_array_size(ch) - 1),
	            "sticky-added"));
	CHECK(!holds(json_object_get(got, "tools"), "sticky-added"));
	json_decref(got);
	got = sdk_client(KEY_ALL,
	                 "[{\"name\": \"sticky-added\", "
	                 "\"arguments\": {}}]");
	CHECK(call_holds(got, 0, "added added"));
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* A destructive call cut after it was sent is a tool error whose _meta
 * says its outcome is unknown; a client whose server is gone keeps its
 * last good list on /mcp, each tool's _meta saying since when it is stale
 * and why. */
static void
stale(void)
{
	peer    d = {0}, up = {0};
	char    body[512];
	json_t *got, *m;

	gateway_serve(&d);
	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"lkg\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\", \"tools_to_execute\": [\"*\"]}",
	        up.port);
	expect("POST", "/api/mcp/client", body, ADMIN, 201, NULL);
	CHECK(state_within("lkg", "healthy", WAIT_MS));
	got = sdk_client(KEY_ALL, "[]");
	CHECK(holds(json_object_get(got, "tools"), "lkg-echo"));
	CHECK(json_object_get(json_object_get(got, "meta"), "lkg-echo") ==
	      NULL);
	json_decref(got);
	json_decref(
	        admin_json(up.port, "/admin/drop-calls", "{\"count\": 1}"));
	got = sdk_client(KEY_ALL,
	                 "[{\"name\": \"lkg-counted_destructive\", "
	                 "\"arguments\": {}}]");
	m   = json_array_get(json_object_get(got, "calls"), 0);
	CHECK(json_is_true(json_object_get(m, "isError")));
	CHECK(strcmp(json_string_value(
	                     json_object_get(json_object_get(m, "_meta"),
	                                     "dev.mcpkeep/outcome")),
	             "unknown") == 0);
	CHECK(call_holds(got, 0, "it may or may not have run"));
	json_decref(got);
	peer_stop(&up);
	CHECK(state_within("lkg", "unstable", WAIT_MS));
	got = sdk_client(KEY_ALL, "[]");
	m   = json_object_get(json_object_get(got, "meta"), "lkg-echo");
	CHECK(holds(json_object_get(got, "tools"), "lkg-echo"));
	CHECK(json_string_value(
	              json_object_get(m, "dev.mcpkeep/stale_since")) != NULL);
	CHECK(strstr(json_string_value(
	                     json_object_get(m, "dev.mcpkeep/stale_reason")),
	             "Failed to connect") != NULL);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* tool_changes hold through the daemon: a changed tool is not listed on
 * /mcp until the admin approves the list by its digest (POST
 * .../tools/approve), which needs the admin token and the digest; the
 * hold and the approval are counted in /metrics and the approval is on
 * /api/events. */
static void
held(void)
{
	peer        d = {0}, up = {0};
	char        body[512], digest[128], *out, *seen = NULL;
	long        st;
	json_t     *got, *v, *root;
	const char *pending;
	int         ev;

	gateway_serve(&d);
	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"pinned\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"], \"tool_changes\": \"hold\"}",
	        up.port);
	expect("POST", "/api/mcp/client", body, ADMIN, 201, NULL);
	CHECK(state_within("pinned", "healthy", WAIT_MS));
	json_decref(admin_json(up.port, "/admin/describe",
	                       "{\"description\": \"now it mails\"}"));
	expect("POST", "/api/mcp/client/pinned/refresh-tools", NULL, ADMIN,
	       200, NULL);
	got = sdk_client(KEY_ALL, "[]");
	CHECK(!holds(json_object_get(got, "tools"), "pinned-echo"));
	CHECK(holds(json_object_get(got, "tools"), "pinned-counted_none"));
	json_decref(got);
	out  = http("GET", "/api/mcp/clients?search=pinned", NULL, ADMIN, &st);
	root = json_loads(out, 0, NULL);
	free(out);
	v       = json_array_get(json_object_get(root, "clients"), 0);
	pending = json_string_value(json_object_get(v, "tools_pending"));
	CHECK(pending != NULL && strlen(pending) == 64);
	CHECK(json_object_get(json_object_get(v, "tools_held"), "echo") !=
	      NULL);
	snprintf(digest, sizeof(digest), "{\"digest\": \"%s\"}", pending);
	json_decref(root);
	CHECK(metric_within("mcpkeep_tools_held{client=\"pinned\"}", 1, 1));
	CHECK(metric_within("mcpkeep_tool_changes_total{client=\"pinned\","
	                    "decision=\"held\"}",
	                    1, 1));
	ev = sv_events("Authorization: Bearer " ADMIN, &st, NULL);
	CHECK(ev >= 0 && st == 200);
	expect("POST", "/api/mcp/client/pinned/tools/approve", "{}", ADMIN,
	       400, "field \\\"digest\\\" must be the list's digest");
	expect("POST", "/api/mcp/client/pinned/tools/approve", digest, "", 401,
	       NULL);
	expect("POST", "/api/mcp/client/nobody/tools/approve", digest, ADMIN,
	       404, "no MCP client nobody");
	expect("POST", "/api/mcp/client/pinned/tools/approve", digest, ADMIN,
	       200, "\"approved\"");
	CHECK(metric_within("mcpkeep_tools_held{client=\"pinned\"}", 0, 0));
	CHECK(metric_within("mcpkeep_tool_changes_total{client=\"pinned\","
	                    "decision=\"approved\"}",
	                    1, 1));
	/* the approval on /api/events */
	CHECK(sv_until(ev, "\"state\":\"approved\"", WAIT_MS, &seen));
	CHECK(strstr(seen, "event: pin\ndata: {\"client_id\"") != NULL);
	free(seen);
	close(ev);
	got = sdk_client(KEY_ALL, "[]");
	CHECK(holds(json_object_get(got, "tools"), "pinned-echo"));
	json_decref(got);
	peer_stop(&d);
	peer_stop(&up);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* Sign-in through the gateway: a caller without a credential is told
 * where to put it - a tool result with the URL, or, to a client that
 * takes URL-mode elicitations, the URLElicitationRequired error (-32042)
 * carrying it - and after it did, the retried call in the same session
 * runs with it. */
static void
signin(void)
{
	peer        d = {0};
	json_t     *got, *calls, *e;
	const char *url;

	gateway_serve(&d);
	got   = sdk_client(KEY_ALL,
	                   "[{\"name\": \"hd-headers\", \"arguments\": {}}]");
	calls = json_object_get(got, "calls");
	CHECK(json_is_true(
	        json_object_get(json_array_get(calls, 0), "isError")));
	CHECK(strstr(text_of(json_array_get(calls, 0)),
	             "MCP server hd needs your own header values") != NULL);
	CHECK(strstr(text_of(json_array_get(calls, 0)), "/api/mcp/client/") !=
	      NULL);
	json_decref(got);
	/* (the client runs with the test's environment) */
	setenv("GWCLIENT_ELICIT", "1", 1);
	got = sdk_client(
	        KEY_ALL,
	        "[{\"name\": \"hd-headers\", \"arguments\": {}}, "
	        "{\"submit\": {\"headers\": {\"x-api-key\": \"key-of-all\"}}}, "
	        "{\"name\": \"hd-headers\", \"arguments\": {}}]");
	unsetenv("GWCLIENT_ELICIT");
	calls = json_object_get(got, "calls");
	CHECK_EQ(json_integer_value(
	                 json_object_get(json_array_get(calls, 0), "code")),
	         -32042);
	e = json_array_get(
	        json_object_get(
	                json_object_get(json_array_get(calls, 0), "data"),
	                "elicitations"),
	        0);
	url = json_string_value(json_object_get(e, "url"));
	CHECK(strcmp(json_string_value(json_object_get(e, "mode")), "url") ==
	      0);
	CHECK(url != NULL && strncmp(url, sv_base, strlen(sv_base)) == 0 &&
	      strstr(url, "/submit-headers?session_id=") != NULL);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(calls, 1),
	                                            "submitted")),
	         200);
	CHECK(strstr(text_of(json_array_get(calls, 2)), "key-of-all") != NULL);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(!peer_said(&d, "key-of-all"));
}

/* A 2026-07-28 (stateless: no session needed) tools/call of name with
 * args through /mcp with key; its status, *out its body (malloc'd). */
static long
modern_call(const char *key, const char *name, const char *args, char **out)
{
	char a[128], n[160], body[512];
	long st;

	snprintf(a, sizeof(a), "Authorization: Bearer %s", key);
	snprintf(n, sizeof(n), "Mcp-Name: %s", name);
	snprintf(
	        body, sizeof(body),
	        "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {\"name\": \"%s\", \"arguments\": %s, \"_meta\": {\"io.modelcontextprotocol/protocolVersion\": \"2026-07-28\", \"io.modelcontextprotocol/clientCapabilities\": {}}}}",
	        name, args);
	const char *h[] = {a,
	                   n,
	                   "MCP-Protocol-Version: 2026-07-28",
	                   "Mcp-Method: tools/call",
	                   "Accept: application/json, text/event-stream",
	                   NULL};
	*out            = http_req("POST", "/mcp", body, h, &st);
	return (st);
}

static void *
slow_sticky(void *arg)
{
	char **out = arg;

	(void)modern_call(KEY_NARROW, "sticky-slow",
	                  "{\"ms\": 1500, \"steps\": 0}", out);
	return (NULL);
}

/* A call in flight through the gateway while its client reconnects
 * make-before-break: it still succeeds (the runtime's path). */
static void
reconnect(void)
{
	peer      d   = {0};
	char     *out = NULL;
	pthread_t th;

	gateway_serve(&d);
	CHECK(pthread_create(&th, NULL, slow_sticky, &out) == 0);
	CHECK(metric_within("mcpkeep_key_calls_in_flight{key=\"narrow\"}", 1,
	                    1));
	expect("POST", "/api/mcp/client/sticky/reconnect", NULL, ADMIN, 200,
	       NULL);
	pthread_join(th, NULL);
	CHECK(out != NULL && strstr(out, "\"text\":\"done\"") != NULL &&
	      strstr(out, "\"resultType\":\"complete\"") != NULL);
	free(out);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* Progress: a call whose caller sent a progressToken is answered as an
 * SSE stream - the upstream's notifications/progress, then the result. */
static void
progress(void)
{
	peer    d = {0};
	json_t *got, *call;

	gateway_serve(&d);
	got = sdk_client(
	        KEY_ALL,
	        "[{\"name\": \"alpha-slow\", \"arguments\": {\"ms\": 600, \"steps\": 3}, \"progress\": true}, "
	        "{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"after\"}, \"progress\": true}]");
	call = json_array_get(json_object_get(got, "calls"), 0);
	CHECK(strcmp(text_of(call), "done") == 0);
	CHECK_EQ(json_integer_value(json_object_get(call, "_progress")), 3);
	/* (a call without progress of its own: answered on the stream) */
	call = json_array_get(json_object_get(got, "calls"), 1);
	CHECK(strcmp(text_of(call), "after") == 0);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(peer_said(&d, "call key=all client=alpha tool=slow outcome=ok"));
}

/* The error code and message of a {status, body} a modern client kept;
 * its status must be want. */
static const char *
modern_refusal(const json_t *got, const char *what, long want, int code)
{
	const json_t *x = json_object_get(got, what);
	const json_t *e = json_object_get(json_object_get(x, "body"), "error");

	CHECK_EQ(json_integer_value(json_object_get(x, "status")), want);
	CHECK_EQ(json_integer_value(json_object_get(e, "code")), code);
	return (json_string_value(json_object_get(e, "message")));
}

/* The 2026-07-28 stateless form, driven by a client written from the
 * revision's text: discover, list, call; the headers checked against the
 * body (a forged Mcp-Name refused), the _meta fields and the version; a
 * listen acknowledged, then told of a change its key sees. */
static void
modern(void)
{
	peer    d = {0}, c = {0};
	char    js[512], url[128], out[512];
	json_t *got, *x;

	gateway_serve(&d);
	snprintf(js, sizeof(js), "%s/modern_client.mjs", peer_dir());
	snprintf(url, sizeof(url), "%s/mcp", sv_base);
	snprintf(out, sizeof(out), "%s/modern.json", sv_dir);
	const char *argv[] = {"node", js, url, KEY_ALPHA, out, NULL};
	CHECK_EQ(peer_start(&c, argv, NULL, "modern listening ([0-9]+)",
	                    WAIT_MS),
	         0);
	expect("POST", "/api/mcp/client/alpha/disable", NULL, ADMIN, 200,
	       NULL);
	got = driver_result(&c, out, false);
	x   = json_object_get(json_object_get(got, "discover"), "result");
	CHECK(strcmp(json_string_value(json_object_get(x, "resultType")),
	             "complete") == 0);
	CHECK(holds(json_object_get(x, "supportedVersions"), "2026-07-28"));
	CHECK(strcmp(json_string_value(json_object_get(x, "cacheScope")),
	             "public") == 0);
	x = json_object_get(json_object_get(got, "list"), "result");
	CHECK_EQ(json_array_size(json_object_get(x, "tools")), 2);
	CHECK(strcmp(json_string_value(json_object_get(x, "cacheScope")),
	             "private") == 0);
	CHECK(json_integer_value(json_object_get(x, "ttlMs")) > 0);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(
	                             json_object_get(x, "_meta"),
	                             "io.modelcontextprotocol/serverInfo"),
	                     "name")),
	             "mcpkeep") == 0);
	x = json_object_get(json_object_get(got, "call"), "result");
	CHECK(strcmp(text_of(x), "stateless") == 0);
	CHECK(strstr(modern_refusal(got, "forged", 400, -32020),
	             "Mcp-Name \"alpha-structured\" does not match") != NULL);
	CHECK(strstr(modern_refusal(got, "no_method", 400, -32020),
	             "Mcp-Method (absent)") != NULL);
	CHECK(strstr(modern_refusal(got, "no_caps", 400, -32602),
	             "clientCapabilities") != NULL);
	CHECK(strstr(modern_refusal(got, "old", 400, -32022),
	             "Unsupported protocol version 2099-01-01") != NULL);
	CHECK(strstr(modern_refusal(got, "unknown", 404, -32601),
	             "Method not found") != NULL);
	x = json_object_get(json_object_get(got, "ack"), "params");
	CHECK(json_is_true(json_object_get(json_object_get(x, "notifications"),
	                                   "toolsListChanged")));
	json_t *subid =
	        json_object_get(json_object_get(x, "_meta"),
	                        "io.modelcontextprotocol/subscriptionId");
	CHECK(subid != NULL);
	x = json_object_get(json_object_get(got, "changed"), "params");
	CHECK(json_equal(
	        json_object_get(json_object_get(x, "_meta"),
	                        "io.modelcontextprotocol/subscriptionId"),
	        subid));
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* /mcp/<group>: a named subset, as each caller may reach it; no such
 * group: refused. */
static void
groups(void)
{
	peer    d = {0};
	json_t *got, *tools, *calls;

	gateway_serve(&d);
	got = sdk_client_at(
	        "/mcp/docs", KEY_ALL,
	        "[{\"name\": \"alpha-structured\", \"arguments\": {}}, "
	        "{\"name\": \"beta-echo\", \"arguments\": {\"message\": \"in docs\"}}]",
	        NULL, false);
	tools = json_object_get(got, "tools");
	CHECK_EQ(json_array_size(tools), 2);
	CHECK(holds(tools, "alpha-echo") && holds(tools, "beta-echo"));
	calls = json_object_get(got, "calls");
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 0), "error")),
	             "Unknown tool: alpha-structured") != NULL);
	CHECK(strcmp(text_of(json_array_get(calls, 1)), "in docs") == 0);
	json_decref(got);
	/* the group through a key: what both allow */
	got   = sdk_client_at("/mcp/docs", KEY_ALPHA, "[]", NULL, false);
	tools = json_object_get(got, "tools");
	CHECK_EQ(json_array_size(tools), 1);
	CHECK(holds(tools, "alpha-echo"));
	json_decref(got);
	got = sdk_client_at("/mcp/nosuch", KEY_ALL, "[]", NULL, true);
	/* (the SDK quotes the answer's JSON) */
	CHECK(strstr(json_string_value(json_object_get(got, "fatal")),
	             "no tool group \\\"nosuch\\\"") != NULL);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* A tool/execute call of alpha's tool with key; its status, *out its
 * body (malloc'd) when out is not NULL. */
static long
execute(const char *key, const char *tool, const char *args, char **out)
{
	char  h[128], body[256];
	long  st;
	char *got;

	snprintf(h, sizeof(h), "X-MCP-Virtual-Key: %s", key);
	snprintf(
	        body, sizeof(body),
	        "{\"client\": \"alpha\", \"tool\": \"%s\", \"arguments\": %s}",
	        tool, args);
	const char *hs[] = {h, NULL};
	got = http_req("POST", "/api/mcp/tool/execute", body, hs, &st);
	if (out != NULL) {
		*out = got;
	} else {
		free(got);
	}
	return (st);
}

static void *
slow_narrow(void *arg)
{
	long *st = arg;

	*st = execute(KEY_NARROW, "slow", "{\"ms\": 6000, \"steps\": 0}",
	              NULL);
	return (NULL);
}

/* A key's limits: past its rate a JSON-RPC error (on /mcp) or 429 (on
 * tool/execute) naming the limit; past its calls in flight the same,
 * until one ends; each refusal counted in /metrics. */
static void
limits(void)
{
	peer      d = {0};
	json_t   *got, *calls;
	char     *out;
	pthread_t th;

	gateway_serve(&d);
	got = sdk_client(
	        KEY_SLOW,
	        "[{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"1\"}}, "
	        "{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"2\"}}, "
	        "{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"3\"}}]");
	calls = json_object_get(got, "calls");
	CHECK(strcmp(text_of(json_array_get(calls, 1)), "2") == 0);
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 2), "error")),
	             "virtual key \"slow\" is over its limit of 0.01 calls per second (calls_per_second); retry in ") !=
	      NULL);
	CHECK_EQ(json_integer_value(
	                 json_object_get(json_array_get(calls, 2), "code")),
	         -32000);
	json_decref(got);
	CHECK_EQ(execute(KEY_SLOW, "echo", "{\"message\": \"4\"}", &out), 429);
	CHECK(strstr(out, "is over its limit of 0.01 calls per second") !=
	      NULL);
	free(out);
	/* narrow: one call in flight (a slow one, 6 s: the next is sent long
	 * before it ends), the next refused */
	static long hung;
	CHECK(pthread_create(&th, NULL, slow_narrow, &hung) == 0);
	CHECK(metric_within("mcpkeep_key_calls_in_flight{key=\"narrow\"}", 1,
	                    1));
	CHECK_EQ(execute(KEY_NARROW, "echo", "{\"message\": \"x\"}", &out),
	         429);
	CHECK(strstr(out,
	             "virtual key \\\"narrow\\\" has 1 calls in flight, its max_calls_in_flight; retry when one ends") !=
	      NULL);
	free(out);
	pthread_join(th, NULL);
	CHECK_EQ(hung, 200);
	CHECK_EQ(execute(KEY_NARROW, "echo", "{\"message\": \"y\"}", NULL),
	         200);
	CHECK(metric_within(
	        "mcpkeep_key_calls_refused_total{key=\"slow\",limit=\"calls_per_second\"}",
	        2, 2));
	CHECK(metric_within(
	        "mcpkeep_key_calls_total{key=\"narrow\",client=\"alpha\",tool=\"echo\",outcome=\"ok\"}",
	        1, 1));
	CHECK(metric_within(
	        "mcpkeep_key_calls_total{key=\"narrow\",client=\"alpha\",tool=\"slow\",outcome=\"ok\"}",
	        1, 1));
	/* each call's latency, per key, client and tool */
	CHECK(metric_within(
	        "mcpkeep_key_call_duration_ms_count{key=\"narrow\",client=\"alpha\",tool=\"echo\"}",
	        1, 1));
	CHECK(metric_within(
	        "mcpkeep_key_call_duration_ms_bucket{key=\"narrow\",client=\"alpha\",tool=\"echo\",le=\"+Inf\"}",
	        1, 1));
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* mcp-remote (npm), the stdio bridge desktop clients use, driven by the
 * SDK's client: the key's tools, a call. */
static void
remote(void)
{
	peer    d = {0};
	json_t *got;
	char    proxy[512], *home = getenv("HOME");
	char   *was = home != NULL ? strdup(home) : NULL;

	gateway_serve(&d);
	snprintf(proxy, sizeof(proxy),
	         "%s/node_modules/mcp-remote/dist/proxy.js", peer_dir());
	/* (it keeps its state under $HOME/.mcp-auth: the test's folder) */
	setenv("GWCLIENT_REMOTE", proxy, 1);
	setenv("HOME", sv_dir, 1);
	got = sdk_client(
	        KEY_ALPHA,
	        "[{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"via mcp-remote\"}}]");
	unsetenv("GWCLIENT_REMOTE");
	if (was != NULL) {
		setenv("HOME", was, 1);
		free(was);
	}
	CHECK_EQ(json_array_size(json_object_get(got, "tools")), 2);
	CHECK(strcmp(text_of(json_array_get(json_object_get(got, "calls"), 0)),
	             "via mcp-remote") == 0);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The inspector's CLI (npm @modelcontextprotocol/inspector-cli) with
 * args against /mcp with key; what it printed, as JSON (new reference).
 * It runs in its build folder: it looks for its package.json relative
 * to the working directory. */
static json_t *
inspector(const char *key, const char *args)
{
	char cmd[2048], out[512];
	peer c = {0};

	snprintf(out, sizeof(out), "%s/inspector.json", sv_dir);
	snprintf(
	        cmd, sizeof(cmd),
	        "cd %s/node_modules/@modelcontextprotocol/inspector-cli/build && node index.js %s/mcp --header 'Authorization: Bearer %s' %s > %s; echo \"inspector done 1 $?\"",
	        peer_dir(), sv_base, key, args, out);
	const char *argv[] = {"sh", "-c", cmd, NULL};
	CHECK_EQ(peer_start(&c, argv, NULL, "inspector done ([0-9]+) 0",
	                    WAIT_MS),
	         0);
	return (driver_result(&c, out, false));
}

/* The inspector's CLI mode: tools/list and tools/call through /mcp. */
static void
inspector_cli(void)
{
	peer    d = {0};
	json_t *got, *tools, *t;
	size_t  i;
	bool    echo = false;

	gateway_serve(&d);
	got   = inspector(KEY_ALPHA, "--method tools/list");
	tools = json_object_get(got, "tools");
	CHECK_EQ(json_array_size(tools), 2);
	json_array_foreach(tools, i, t)
	{
		echo |= strcmp(json_string_value(json_object_get(t, "name")),
		               "alpha-echo") == 0 &&
		        json_object_get(t, "inputSchema") != NULL;
	}
	CHECK(echo);
	json_decref(got);
	got = inspector(KEY_ALPHA,
	                "--method tools/call --tool-name alpha-echo "
	                "--tool-arg message=inspected");
	CHECK(strcmp(text_of(got), "inspected") == 0);
	json_decref(got);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* A JSON-RPC POST to /mcp with key, session and MCP-Protocol-Version
 * (each NULL: none); the answer (new reference, NULL when not JSON) and
 * *st its status. */
static json_t *
rpc(const char *key, const char *session, const char *version,
    const char *body, long *st)
{
	char        a[128], s[128], v[128];
	const char *h[5];
	int         n = 0;
	char       *out;
	json_t     *j;

	if (key != NULL) {
		snprintf(a, sizeof(a), "Authorization: Bearer %s", key);
		h[n++] = a;
	}
	if (session != NULL) {
		snprintf(s, sizeof(s), "Mcp-Session-Id: %s", session);
		h[n++] = s;
	}
	if (version != NULL) {
		snprintf(v, sizeof(v), "MCP-Protocol-Version: %s", version);
		h[n++] = v;
	}
	h[n++] = "Accept: application/json, text/event-stream";
	h[n]   = NULL;
	out    = http_req("POST", "/mcp", body, h, st);
	j      = out != NULL ? json_loads(out, 0, NULL) : NULL;
	free(out);
	return (j);
}

/* The JSON-RPC error message of answer j. */
static const char *
rpc_error(const json_t *j)
{
	const char *m = json_string_value(
	        json_object_get(json_object_get(j, "error"), "message"));

	return (m != NULL ? m : "");
}

/* The protocol's edges, over raw HTTP. */
static void
edges(void)
{
	peer    d = {0};
	json_t *j;
	long    st;

	gateway_serve(&d);
	const char *init =
	        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": \"2025-03-26\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"t\", \"version\": \"1\"}}}";
	const char *list =
	        "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/list\"}";
	/* no key: 401 with a JSON-RPC error */
	sv_admin = "";
	j        = rpc(NULL, NULL, NULL, init, &st);
	CHECK_EQ(st, 401);
	CHECK(strstr(rpc_error(j), "/mcp needs a virtual key") != NULL);
	json_decref(j);
	j = rpc("not-a-key", NULL, NULL, init, &st);
	CHECK_EQ(st, 401);
	CHECK(strstr(rpc_error(j), "neither a virtual key nor the admin") !=
	      NULL);
	json_decref(j);
	/* an older version is agreed as asked; an unknown one gets ours */
	j = rpc(KEY_ALL, NULL, NULL, init, &st);
	CHECK_EQ(st, 200);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(j, "result"), "protocolVersion")),
	             "2025-03-26") == 0);
	json_decref(j);
	j = rpc(KEY_ALL, NULL, NULL,
	        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": \"1999-01-01\"}}",
	        &st);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(j, "result"), "protocolVersion")),
	             "2025-11-25") == 0);
	json_decref(j);
	/* without a session, with an unknown one, another key's: refused */
	j = rpc(KEY_ALL, NULL, NULL, list, &st);
	CHECK_EQ(st, 400);
	CHECK(strstr(rpc_error(j), "Mcp-Session-Id header is required") !=
	      NULL);
	json_decref(j);
	j = rpc(KEY_ALL, "0123456789abcdef0123456789abcdef", NULL, list, &st);
	CHECK_EQ(st, 404);
	CHECK(strstr(rpc_error(j), "Session not found") != NULL);
	json_decref(j);
	/* an unsupported MCP-Protocol-Version: 400 */
	j = rpc(KEY_ALL, NULL, "2099-01-01", init, &st);
	CHECK_EQ(st, 400);
	CHECK(strstr(rpc_error(j), "unsupported MCP-Protocol-Version") !=
	      NULL);
	json_decref(j);
	/* not JSON-RPC: -32600 */
	j = rpc(KEY_ALL, NULL, NULL, "{\"id\": 1, \"method\": \"ping\"}", &st);
	CHECK_EQ(st, 400);
	CHECK_EQ(json_integer_value(
	                 json_object_get(json_object_get(j, "error"), "code")),
	         -32600);
	json_decref(j);
	/* the admin token reaches every client */
	j = rpc(ADMIN, NULL, NULL, init, &st);
	CHECK_EQ(st, 200);
	json_decref(j);
	sv_admin = ADMIN;
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* Cancellation: the SDK's client gives up on a call at its first
 * progress (notifications/cancelled); the upstream's `slow` hears it
 * and stops, and the session goes on. */
static void
cancel(void)
{
	peer    d = {0};
	json_t *got, *calls;

	gateway_serve(&d);
	long before =
	        admin(mcp.port, "/admin/counters", NULL, "slow_cancelled");
	got = sdk_client(
	        KEY_ALL,
	        "[{\"name\": \"alpha-slow\", \"arguments\": {\"ms\": 20000, \"steps\": 200}, \"cancel_on_progress\": true}, "
	        "{\"name\": \"alpha-echo\", \"arguments\": {\"message\": \"after\"}}]");
	calls = json_object_get(got, "calls");
	CHECK(strstr(json_string_value(json_object_get(
	                     json_array_get(calls, 0), "error")),
	             "the user gave up") != NULL);
	CHECK(strcmp(text_of(json_array_get(calls, 1)), "after") == 0);
	json_decref(got);
	/* the upstream's call stopped: it heard the cancellation */
	before = before > 0 ? before : 0;
	wait_counter(mcp.port, "slow_cancelled", before + 1);

	/* a streamed call whose caller closes the stream: given up too */
	char        body[512], req[1400], *seen = NULL;
	const char *host = strstr(sv_base, "://") + 3;
	int         fd;
	snprintf(
	        body, sizeof(body),
	        "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"tools/call\", \"params\": {\"name\": \"alpha-slow\", \"arguments\": {\"ms\": 20000, \"steps\": 200}, \"_meta\": {\"progressToken\": 99, \"io.modelcontextprotocol/protocolVersion\": \"2026-07-28\", \"io.modelcontextprotocol/clientCapabilities\": {}}}}");
	snprintf(
	        req, sizeof(req),
	        "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer " KEY_ALL
	        "\r\nMcp-Name: alpha-slow\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
	        host, strlen(body), body);
	CHECK((fd = sv_raw(req)) >= 0);
	CHECK(sv_until(fd, ": open", WAIT_MS, &seen)); /* streamed */
	free(seen);
	wait_counter(mcp.port, "slow_running", 1); /* the upstream runs it */
	close(fd);
	wait_counter(mcp.port, "slow_cancelled", before + 2);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(peer_said(&d, "client=alpha tool=slow outcome=cancelled"));
}

/* Whether entry i of a driver's calls is an error of code whose message
 * holds text (NULL: any). */
static void
call_failed(json_t *calls, size_t i, int code, const char *text)
{
	json_t     *c   = json_array_get(calls, i);
	const char *msg = json_string_value(json_object_get(c, "error"));

	CHECK_EQ(json_integer_value(json_object_get(c, "code")), code);
	CHECK(msg != NULL && (text == NULL || strstr(msg, text) != NULL));
}

/* The prompts, resources and resource templates of a real server
 * (server-everything over stdio, beside inject.mjs, which has none),
 * through /mcp to the TS SDK's client: listed under the gateway's names
 * (<client>-<prompt>, mcpkeep://<client>/<uri>), prompts/get and
 * resources/read routed back to their client (a template's expansion
 * too), the result's URIs renamed; what the caller's key does not reach
 * is unknown to it; a resource the upstream adds (its gzip tool) reaches
 * the open session as notifications/resources/list_changed. */
static void
lists(void)
{
	peer d = {0};
	char config[2048];

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": ["
	        "{\"name\": \"every\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"]}, \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"alpha\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}]}, "
	        "\"server\": {\"admin_token\": \"" ADMIN
	        "\", \"virtual_keys\": ["
	        "{\"name\": \"all\", \"value\": \"" KEY_ALL
	        "\", \"clients\": {\"*\": [\"*\"]}}, "
	        "{\"name\": \"alpha_only\", \"value\": \"" KEY_ALPHA
	        "\", \"clients\": {\"alpha\": [\"*\"]}}]}}",
	        peer_everything_js(), mcp.port);
	serve(&d, "lists.json", config, NULL);
	sv_admin = ADMIN;
	CHECK(state_within("every", "healthy", WAIT_MS));
	setenv("GWCLIENT_LISTS", "1", 1);
	json_t *got = sdk_client(
	        KEY_ALL,
	        "[{\"prompt\": \"every-args-prompt\", \"arguments\": {\"city\": \"Paris\"}}, "
	        "{\"read\": \"mcpkeep://every/demo://resource/dynamic/text/7\"}, "
	        "{\"read\": \"mcpkeep://every/demo://resource/static/document/architecture.md\"}, "
	        "{\"prompt\": \"every-no-such-prompt\"}, "
	        "{\"read\": \"mcpkeep://nobody/demo://x\"}, "
	        "{\"read\": \"demo://resource/dynamic/text/7\"}, "
	        "{\"name\": \"every-gzip-file-as-resource\", \"arguments\": {\"name\": \"t.gz\", \"data\": \"data:text/plain;base64,aGVsbG8=\"}}, "
	        "{\"await_resources_changed\": true}]");
	json_t *prompts = json_object_get(got, "prompts");
	json_t *res     = json_object_get(got, "resources");
	json_t *calls   = json_object_get(got, "calls");
	CHECK(holds(prompts, "every-simple-prompt"));
	CHECK(holds(prompts, "every-args-prompt"));
	CHECK(holds(
	        res,
	        "mcpkeep://every/demo://resource/static/document/architecture.md"));
	CHECK(holds(
	        json_object_get(got, "templates"),
	        "mcpkeep://every/demo://resource/dynamic/text/{resourceId}"));
	CHECK(!holds(res, "mcpkeep://every/demo://resource/session/t.gz"));
	/* prompts/get: the upstream's messages */
	json_t *msg0 = json_array_get(
	        json_object_get(json_array_get(calls, 0), "messages"), 0);
	CHECK(json_is_string(
	        json_object_get(json_object_get(msg0, "content"), "text")));
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(msg0, "content"), "text")),
	             "What's weather in Paris?") == 0);
	/* resources/read of a template's expansion: the URI as listed */
	json_t *c1 = json_array_get(
	        json_object_get(json_array_get(calls, 1), "contents"), 0);
	CHECK(json_is_string(json_object_get(c1, "uri")) &&
	      json_is_string(json_object_get(c1, "text")));
	CHECK(strcmp(json_string_value(json_object_get(c1, "uri")),
	             "mcpkeep://every/demo://resource/dynamic/text/7") == 0);
	CHECK(strncmp(json_string_value(json_object_get(c1, "text")),
	              "Resource 7:", 11) == 0);
	CHECK(json_array_size(json_object_get(json_array_get(calls, 2),
	                                      "contents")) == 1);
	/* the upstream's refusal, then the gateway's: no such client, and
	 * a URI that is not the gateway's */
	call_failed(calls, 3, -32000, "prompts/get failed");
	call_failed(calls, 4, -32002,
	            "Resource not found: mcpkeep://nobody/demo://x");
	call_failed(calls, 5, -32002, NULL);
	/* the upstream added a resource: the session heard of it */
	CHECK(holds(json_object_get(got, "resources_after"),
	            "mcpkeep://every/demo://resource/session/t.gz"));
	json_decref(got);

	/* a key that does not reach every sees none of its lists */
	got = sdk_client(
	        KEY_ALPHA,
	        "[{\"prompt\": \"every-args-prompt\", \"arguments\": {\"city\": \"Paris\"}}, "
	        "{\"read\": \"mcpkeep://every/demo://resource/dynamic/text/7\"}]");
	CHECK_EQ(json_array_size(json_object_get(got, "prompts")), 0);
	CHECK_EQ(json_array_size(json_object_get(got, "resources")), 0);
	CHECK_EQ(json_array_size(json_object_get(got, "templates")), 0);
	calls = json_object_get(got, "calls");
	call_failed(calls, 0, -32602, "Unknown prompt: every-args-prompt");
	call_failed(calls, 1, -32002, NULL);
	json_decref(got);
	unsetenv("GWCLIENT_LISTS");
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The result of a message a modern client kept as what. */
static const json_t *
result_of(const json_t *got, const char *what)
{
	return (json_object_get(json_object_get(got, what), "result"));
}

/* The same to a 2026-07-28 caller (modern_client.mjs mrtr): as
 * multi round-trip requests - the call answered input_required with the
 * upstream's request and a requestState, the retry with the answer
 * answered with the call's result; a retry without the answer asked
 * again; a made-up, finished or another caller's state refused; the
 * first round of a streamed answer does not give the call up; no
 * capability: declined. */
static void
relay_modern(void)
{
	peer          c = {0};
	char          js[512], url[128], out[512];
	const json_t *x;
	const char   *k;
	json_t       *v;

	snprintf(js, sizeof(js), "%s/modern_client.mjs", peer_dir());
	snprintf(url, sizeof(url), "%s/mcp", sv_base);
	snprintf(out, sizeof(out), "%s/mrtr.json", sv_dir);
	const char *argv[] = {"node", js,     url,       KEY_ALL,
	                      out,    "mrtr", KEY_ALPHA, NULL};
	CHECK_EQ(peer_start(&c, argv, NULL, "modern done ([0-9]+)", WAIT_MS),
	         0);
	json_t *got = driver_result(&c, out, false);
	x           = result_of(got, "first");
	CHECK(strcmp(json_string_value(json_object_get(x, "resultType")),
	             "input_required") == 0);
	CHECK(json_is_string(json_object_get(x, "requestState")));
	CHECK_EQ(json_object_size(json_object_get(x, "inputRequests")), 1);
	json_object_foreach(json_object_get((json_t *)x, "inputRequests"), k,
	                    v)
	{
		CHECK(strcmp(json_string_value(json_object_get(v, "method")),
		             "elicitation/create") == 0);
		CHECK(json_is_object(json_object_get(
		        json_object_get(v, "params"), "requestedSchema")));
	}
	x = result_of(got, "again");
	CHECK(strcmp(json_string_value(json_object_get(x, "resultType")),
	             "input_required") == 0);
	CHECK(json_equal(
	        json_object_get(x, "inputRequests"),
	        json_object_get(result_of(got, "first"), "inputRequests")));
	const char *refused[] = {"forged", "other", "stale"};
	for (size_t i = 0; i < 3; i++) {
		x = json_object_get(json_object_get(got, refused[i]), "error");
		CHECK_EQ(json_integer_value(json_object_get(x, "code")),
		         -32602);
		CHECK(strstr(json_string_value(json_object_get(x, "message")),
		             "requestState is not one of this request's") !=
		      NULL);
	}
	x = result_of(got, "done");
	CHECK(strcmp(json_string_value(json_object_get(x, "resultType")),
	             "complete") == 0);
	char *t = json_dumps(x, JSON_COMPACT);
	CHECK(t != NULL && strstr(t, "Name: Ada Lovelace") != NULL);
	free(t);
	CHECK(strcmp(json_string_value(json_object_get(got, "sampled_asked")),
	             "sampling/createMessage") == 0);
	t = json_dumps(result_of(got, "sampled"), JSON_COMPACT);
	CHECK(t != NULL && strstr(t, "relayed by modern") != NULL);
	free(t);
	t = json_dumps(result_of(got, "declined"), JSON_COMPACT);
	CHECK(t != NULL && strstr(t, "User declined") != NULL);
	free(t);
	/* a 2026-07-28 upstream's input_required, to a 2026-07-28 caller */
	CHECK(strcmp(json_string_value(json_object_get(got, "nested_asked")),
	             "elicitation/create") == 0);
	CHECK(strcmp(text_of(result_of(got, "nested")), "hello Grace") == 0);
	/* x-mcp-header: the Mcp-Param header must be the argument's */
	const char *same[] = {"param_ok", "param_b64"};
	for (size_t i = 0; i < 2; i++) {
		x = json_object_get(got, same[i]);
		CHECK_EQ(json_integer_value(json_object_get(x, "status")),
		         200);
		CHECK(strcmp(text_of(json_object_get(
		                     json_object_get(x, "body"), "result")),
		             "eu-west") == 0);
	}
	CHECK(strstr(modern_refusal(got, "param_forged", 400, -32020),
	             "Header mismatch: Mcp-Param-Region does not match") !=
	      NULL);
	CHECK(strstr(modern_refusal(got, "param_missing", 400, -32020),
	             "Header mismatch: Mcp-Param-Region is absent") != NULL);
	json_decref(got);
}

/* An upstream's requests during a call (server-everything's elicitation
 * and sampling tools, server.inputs offering them) reach the downstream
 * session that made the call - the TS SDK's client answers them on its
 * own - and its answers reach the upstream; none waits in the admin's
 * list.  A session that did not declare the capability is not asked:
 * the upstream hears "decline". */
static void
relay(void)
{
	peer d = {0};
	char config[2048];

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": ["
	        "{\"name\": \"every\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"]}, \"tools_to_execute\": [\"*\"]}, "
	        "{\"name\": \"mod\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s/modern.mjs\", \"stdio\"], \"envs\": [\"PATH\"]}, \"tools_to_execute\": [\"*\"]}]}, "
	        "\"server\": {\"admin_token\": \"" ADMIN
	        "\", \"inputs\": [\"elicitation\", \"sampling\"], \"virtual_keys\": ["
	        "{\"name\": \"all\", \"value\": \"" KEY_ALL
	        "\", \"clients\": {\"*\": [\"*\"]}}, "
	        "{\"name\": \"alpha\", \"value\": \"" KEY_ALPHA
	        "\", \"clients\": {\"*\": [\"*\"]}}]}}",
	        peer_everything_js(), peer_dir());
	serve(&d, "relay.json", config, NULL);
	sv_admin = ADMIN;
	CHECK(state_within("every", "healthy", WAIT_MS));
	CHECK(state_within("mod", "healthy", WAIT_MS));
	const char *calls =
	        "[{\"name\": \"every-trigger-elicitation-request\", \"arguments\": {}}, "
	        "{\"name\": \"every-trigger-sampling-request\", \"arguments\": {\"prompt\": \"hi\", \"maxTokens\": 10}}]";
	setenv("GWCLIENT_ANSWER", "1", 1);
	json_t *got = sdk_client(KEY_ALL, calls);
	unsetenv("GWCLIENT_ANSWER");
	json_t *asked = json_object_get(got, "asked");
	CHECK_EQ(json_integer_value(
	                 json_object_get(asked, "elicitation/create")),
	         1);
	CHECK_EQ(json_integer_value(
	                 json_object_get(asked, "sampling/createMessage")),
	         1);
	/* the answers reached the upstream (a default filled in too) */
	CHECK(call_holds(got, 0, "Name: Ada Lovelace"));
	CHECK(call_holds(got, 0, "It was a dark and stormy night"));
	CHECK(call_holds(got, 1, "relayed by gwclient"));
	json_decref(got);
	/* no capability: not asked, declined */
	got = sdk_client(KEY_ALL, calls);
	CHECK_EQ(json_object_size(json_object_get(got, "asked")), 0);
	CHECK(call_holds(got, 0, "User declined"));
	CHECK(json_is_true(json_object_get(
	        json_array_get(json_object_get(got, "calls"), 1), "isError")));
	json_decref(got);
	relay_modern();
	/* nothing was the admin's */
	expect("GET", "/api/mcp/client/every/elicitations", NULL, ADMIN, 200,
	       "{\"inputs\":[]}");
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

int
main(int argc, char **argv)
{
	sv_begin(&mcp);
	RUN_IF(sdk);
	RUN_IF(edges);
	RUN_IF(bridge);
	RUN_IF(remote);
	RUN_IF(inspector_cli);
	RUN_IF(changes);
	RUN_IF(rekeyed);
	RUN_IF(limits);
	RUN_IF(groups);
	RUN_IF(signin);
	RUN_IF(modern);
	RUN_IF(reconnect);
	RUN_IF(progress);
	RUN_IF(cancel);
	RUN_IF(lists);
	RUN_IF(relay);
	RUN_IF(stale);
	RUN_IF(held);
	RUN_IF(added); /* (last: its tool stays upstream) */
	sv_end(&mcp);
	return (0);
}
