/*
 * serve_test.c - `mcpkeep serve`, the daemon, over real HTTP: health and
 * readiness, the client list with its filters and paging, create (400
 * naming the field, 409 for a duplicate), update, delete, the recovery
 * endpoints' SPEC errors, tool execution, metrics, the admin token, a
 * non-loopback address refused without one, SIGHUP reloads, a boot that
 * does not hold up the daemon (a hung and a slow stdio server), 2,000
 * concurrent calls, --max-requests (503 busy), the status page in
 * Chromium, and SIGTERM stopping it cleanly, within 2 s even amid a boot
 * of 6,000 clients whose server never answers, and amid connections
 * still arriving.  The MCP server is
 * test/peers/inject.mjs; the daemon is the built program (MK_MCPKEEP).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <nng/supplemental/util/platform.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "svutil.h"
#include "testutil.h"

static peer mcp; /* inject.mjs */

static void
api(void)
{
	peer d = {0};
	char config[1024], body[512];
	long st;

	int stream_port = peer_free_port();
	snprintf(
	        config, sizeof(config),
	        "{\"server\": {\"stream\": [\"tcp://127.0.0.1:%d\"]}, \"mcp\": {\"client_configs\": [{\"name\": \"svc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}, {\"name\": \"svst\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}]}}",
	        stream_port, mcp.port, mcp.port);
	serve(&d, "api.json", config, NULL);
	/* the state stream, outward on tcp */
	nng_socket s;
	char       saddr[64];
	snprintf(saddr, sizeof(saddr), "tcp://127.0.0.1:%d", stream_port);
	CHECK_EQ(nng_sub0_open(&s), 0);
	CHECK_EQ(nng_socket_set(s, NNG_OPT_SUB_SUBSCRIBE, "state", 5), 0);
	CHECK_EQ(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, WAIT_MS), 0);
	CHECK_EQ(nng_dial(s, saddr, NULL, 0), 0);
	expect("GET", "/healthz", NULL, NULL, 200, "\"ok\"");
	expect("GET", "/readyz", NULL, NULL, 200, "\"ready\"");
	expect("GET", "/api/mcp/clients", NULL, NULL, 200,
	       "\"total_count\":2");
	expect("GET", "/api/mcp/clients?search=svst&limit=1", NULL, NULL, 200,
	       "\"count\":1");
	expect("GET", "/api/mcp/clients?limit=0", NULL, NULL, 400,
	       "limit must be 1 to 100");
	/* the query is percent- and form-decoded; a NUL byte is refused */
	expect("GET", "/api/mcp/clients?search=sv%73t", NULL, NULL, 200,
	       "\"total_count\":1");
	expect("GET", "/api/mcp/clients?search=sv+st", NULL, NULL, 200,
	       "\"total_count\":0");
	expect("GET", "/api/mcp/clients?search=%7a%zz%", NULL, NULL, 200,
	       "\"total_count\":0");
	expect("GET", "/api/mcp/clients?search=svst%00x", NULL, NULL, 400,
	       "the query has a NUL byte (%00)");
	/* create: good, duplicate, bad */
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"svc2\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	        mcp.port);
	expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	expect("POST", "/api/mcp/client", body, NULL, 409, "already exists");
	expect("POST", "/api/mcp/client",
	       "{\"name\": \"x\", \"connection_type\": \"carrier pigeon\"}",
	       NULL, 400, "connection_type");
	expect("POST", "/api/mcp/client", "[1, 2]", NULL, 400,
	       "the body must be a JSON object");
	expect("POST", "/api/mcp/client", "{\"name\":", NULL, 400,
	       "the body is not valid JSON (line 1, column 8)");
	/* a malformed body's text is not quoted back (it may hold a
	 * secret) */
	char *out = http("POST", "/api/mcp/client/svc/verify-headers",
	                 "{\"headers\": {\"x-api-key\": key-sekrit-77}}", NULL,
	                 &st);
	CHECK(st == 400 && strstr(out, "not valid JSON") != NULL &&
	      strstr(out, "sekrit") == NULL);
	free(out);
	char *big = malloc(2 * 1024 * 1024 + 1);
	CHECK(big != NULL);
	memset(big, ' ', 2 * 1024 * 1024);
	big[2 * 1024 * 1024] = '\0';
	expect("POST", "/api/mcp/client", big, NULL, 413,
	       "the request body is over 1048576 bytes");
	free(big);
	/* the recovery endpoints' SPEC answers */
	expect("POST", "/api/mcp/client/svc/reconnect", NULL, NULL, 400,
	       "client uses per-call connections; there is no persistent connection to reconnect");
	expect("POST", "/api/mcp/client/svst/reconnect", NULL, NULL, 200,
	       NULL);
	expect("PUT", "/api/mcp/client/svst", "{\"disabled\": true}", NULL,
	       200, NULL);
	for (;;) { /* its transition reached the tcp subscriber */
		nng_msg         *m;
		mk_stream_event *e;
		bool             done;
		CHECK_EQ(nng_recvmsg(s, &m, 0), 0);
		CHECK_EQ(mk_stream_event_parse(nng_msg_body(m), nng_msg_len(m),
		                               &e),
		         0);
		nng_msg_free(m);
		done = strcmp(e->name, "svst") == 0 &&
		        strcmp(e->state, "disabled") == 0;
		mk_stream_event_free(e);
		if (done) {
			break;
		}
	}
	/* (one more: the daemon's own, which serves /api/events) */
	CHECK(metric_within("mcpkeep_stream_subscribers", 2, 2));
	nng_close(s);
	CHECK(metric_within("mcpkeep_stream_subscribers", 1, 1));
	CHECK(metric_within("mcpkeep_state_transitions_total{client=\"svst\"}",
	                    2, 1e9));
	expect("POST", "/api/mcp/client/svst/reconnect", NULL, NULL, 400,
	       "enable it first");
	expect("POST", "/api/mcp/client/svst/reauthorize", NULL, NULL, 400,
	       "it has no OAuth flow");
	expect("POST", "/api/mcp/client/nobody/reconnect", NULL, NULL, 404,
	       "no MCP client");
	expect("POST", "/api/mcp/client/svc/refresh-tools", NULL, NULL, 200,
	       NULL);
	expect("POST", "/api/mcp/client/svc/user-oauth", NULL, NULL, 400,
	       "needs the caller's identity");
	/* tools */
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"svc\", \"tool\": \"echo\", \"arguments\": {\"message\": \"over http\"}}",
	       NULL, 200, "over http");
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"nobody\", \"tool\": \"echo\"}", NULL, 404,
	       "no such MCP client");
	expect("POST", "/api/mcp/tool/execute", "{\"client\": \"svc\"}", NULL,
	       400, "needs client and tool");
	/* a timeout past an int is refused, never cut (2^32 + 1 was 1 ms) */
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"svc\", \"tool\": \"echo\", \"arguments\": {\"message\": \"x\"}, \"timeout\": 4294967297}",
	       NULL, 400, "timeout must be from 0 to 2147483647 milliseconds");
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"svc\", \"tool\": \"echo\", \"arguments\": {\"message\": \"x\"}, \"timeout\": -5}",
	       NULL, 400, "timeout must be from 0 to 2147483647 milliseconds");
	/* delete */
	expect("DELETE", "/api/mcp/client/svc2", NULL, NULL, 200, NULL);
	out = http("GET", "/api/mcp/clients", NULL, NULL, &st);
	CHECK(st == 200 && strstr(out, "svc2") == NULL);
	free(out);
	/* the terminal commands */
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "%s clients --url %s | grep -q 'svc .*healthy'",
	         getenv("MK_MCPKEEP"), sv_base);
	CHECK_EQ(system(cmd), 0);
	snprintf(
	        cmd, sizeof(cmd),
	        "%s call svc echo '{\"message\": \"from the cli\"}' --url %s | grep -q 'from the cli'",
	        getenv("MK_MCPKEEP"), sv_base);
	CHECK_EQ(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s call nobody echo --url %s 2>/dev/null",
	         getenv("MK_MCPKEEP"), sv_base);
	int rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
	peer        w       = {0};
	const char *wargv[] = {getenv("MK_MCPKEEP"), "watch", saddr, NULL};
	CHECK_EQ(peer_start(&w, wargv, NULL,
	                    "watching tcp://127.0.0.1:([0-9]+)", WAIT_MS),
	         0);
	peer_stop(&w);
	CHECK(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0);
	/* metrics: calls by outcome with their latency, checks, failures
	 * by stage (a client whose server is not there) */
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"svst\", \"tool\": \"echo\"}", NULL, 400,
	       "MCP client svst is disabled");
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"gone\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	        peer_free_port());
	expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	CHECK(metric_within(
	        "mcpkeep_failures_total{client=\"gone\",stage=\"connect\"}", 1,
	        1e9));
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", 1, 1));
	CHECK(metric_within("mcpkeep_clients{state=\"unstable\"}", 1, 1));
	CHECK(metric_within(
	        "mcpkeep_tool_calls_total{client=\"svc\",outcome=\"ok\"}", 2,
	        2));
	CHECK(metric_within(
	        "mcpkeep_tool_calls_total{client=\"svst\",outcome=\"refused\"}",
	        1, 1));
	CHECK(metric_within(
	        "mcpkeep_tool_call_duration_seconds_count{client=\"svc\"}", 2,
	        2));
	/* (svc keeps no results: no cache_results) */
	CHECK(metric_within(
	        "mcpkeep_tool_cache_total{client=\"svc\",result=\"hits\"}", 0,
	        0));
	CHECK(metric_within(
	        "mcpkeep_tool_call_duration_seconds_bucket{client=\"svc\",le=\"+Inf\"}",
	        2, 2));
	CHECK(metric_within("mcpkeep_health_checks_total{client=\"svc\"}", 1,
	                    1e9));
	CHECK(metric_within(
	        "mcpkeep_failures_total{client=\"svc\",stage=\"connect\"}", 0,
	        0));
	expect("GET", "/nowhere", NULL, NULL, 404, "no such endpoint");
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The terminal commands with the admin token set: --token or
 * MCPKEEP_ADMIN_TOKEN; without it the daemon's 401 is said; an unknown
 * option is named.  (`call` with keys: gateway_test sdk.) */
static void
cli_with_token(void)
{
	const char *none = "MCPKEEP_ADMIN_TOKEN=";
	const char *set  = "MCPKEEP_ADMIN_TOKEN=s3cret-admin";

	CHECK_EQ(sv_cli(none, "clients"), 1);
	CHECK(sv_cli_said("HTTP 401"));
	CHECK_EQ(sv_cli(none, "clients --token s3cret-admin"), 0);
	CHECK(sv_cli_said("0 of 0 clients"));
	CHECK_EQ(sv_cli(set, "clients --json"), 0);
	CHECK(sv_cli_said("\"clients\": []"));
	CHECK_EQ(sv_cli(none, "clients --bogus"), 2);
	CHECK(sv_cli_said("mcpkeep clients: unknown option '--bogus'"));
	CHECK_EQ(sv_cli(none, "clients --token ''"), 2);
	CHECK(sv_cli_said("mcpkeep clients: --token needs a value"));
	CHECK_EQ(sv_cli(none, "watch --nope"), 2);
	CHECK(sv_cli_said("mcpkeep watch: unknown option '--nope'"));
	CHECK_EQ(sv_cli(none, "call a b --nope"), 2);
	CHECK(sv_cli_said("mcpkeep call: unknown option '--nope'"));
	CHECK_EQ(sv_cli(none, "--version"), 0);
	CHECK(sv_cli_said("mcpkeep " MCPKEEP_VERSION));
}

static void
admin_token(void)
{
	peer        d     = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=s3cret-admin",
	                     "MCPKEEP_LOG=info", NULL};

	serve(&d, "tok.json", "{\"mcp\": {\"client_configs\": []}}", env);
	expect("GET", "/api/mcp/clients", NULL, NULL, 401, "admin token");
	expect("GET", "/api/mcp/clients", NULL, "wrong", 401, "admin token");
	expect("GET", "/api/mcp/clients", NULL, "s3cret-admin", 200,
	       "\"clients\"");
	expect("GET", "/healthz", NULL, NULL, 200, NULL);
	cli_with_token();
	/* rotated by a reload: the old token is refused from then on */
	write_config(
	        "tok.json",
	        "{\"server\": {\"admin_token\": \"rotated-admin\", \"listen\": \"127.0.0.1:1\", \"inputs\": [\"sampling\"]}, \"cluster\": {\"heartbeat_interval\": 2}, \"mcp\": {\"client_configs\": []}}");
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	CHECK(metric_within("mcpkeep_reloads_total{result=\"applied\"}", 1,
	                    1));
	expect("GET", "/api/mcp/clients", NULL, "s3cret-admin", 401,
	       "admin token");
	expect("GET", "/api/mcp/clients", NULL, "rotated-admin", 200,
	       "\"clients\"");
	peer_stop(&d);
	CHECK(peer_said(&d, "serve: reload: the admin token changed\n"));
	CHECK(peer_said(
	        &d,
	        "serve: reload: server.listen changed; it is read only at start (restart to apply it)\n"));
	CHECK(peer_said(
	        &d,
	        "serve: reload: cluster.heartbeat_interval changed; it is read only at start (restart to apply it)\n"));
	/* (before, a reload changed server.inputs silently: it was missing
	 * from the list of those read only at start) */
	CHECK(peer_said(
	        &d,
	        "serve: reload: server.inputs changed; it is read only at start (restart to apply it)\n"));
	CHECK(!peer_said(&d, "server.admin_token changed"));
	CHECK(!peer_said(&d, "rotated-admin") && !peer_said(&d, "s3cret"));

	/* on a non-loopback address, a reload that drops the token is
	 * refused whole */
	char pub[64];
	snprintf(pub, sizeof(pub), "0.0.0.0:%d", peer_free_port());
	serve_opt(
	        &d, "pub.json",
	        "{\"server\": {\"admin_token\": \"pub-admin\"}, \"mcp\": {\"client_configs\": []}}",
	        NULL, "--listen", pub);
	write_config("pub.json", "{\"mcp\": {\"client_configs\": []}}");
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	CHECK(metric_within("mcpkeep_reloads_total{result=\"refused\"}", 1,
	                    1));
	expect("GET", "/api/mcp/clients", NULL, NULL, 401, "admin token");
	expect("GET", "/api/mcp/clients", NULL, "pub-admin", 200,
	       "\"clients\"");
	peer_stop(&d);
	CHECK(peer_said(
	        &d,
	        "reload refused, nothing changed: the daemon serves a non-loopback address"));

	/* no token: a non-loopback address is refused */
	char path[128];
	write_config("notok.json", "{\"mcp\": {\"client_configs\": []}}");
	snprintf(path, sizeof(path), "%s/notok.json", sv_dir);
	char cmd[512];
	snprintf(
	        cmd, sizeof(cmd),
	        "env -u MCPKEEP_ADMIN_TOKEN timeout 30 %s serve -c %s --listen 0.0.0.0:%d 2>&1 | grep -q 'refusing to serve 0.0.0.0'",
	        getenv("MK_MCPKEEP"), path, peer_free_port());
	CHECK_EQ(system(cmd), 0);
}

/* Waits (bounded) for the daemon's list to show the reload: a removal
 * is no stream event, so the API is polled. */
static void
wait_listed(const char *name, bool want)
{
	for (int i = 0; listed(name) != want; i++) {
		CHECK(i < 400);
		struct timespec ts = {0, 25 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the API, with a deadline */
	}
}

/* SIGHUP: the file applied as a diff; an invalid one changes nothing;
 * an API-made client stays. */
static void
reload(void)
{
	peer d = {0};
	char a[1024], b[1024], body[512];

	snprintf(
	        a, sizeof(a),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"ra\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}, {\"name\": \"rb\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}]}}",
	        mcp.port, mcp.port);
	serve(&d, "reload.json", a, NULL);
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"rapi\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	        mcp.port);
	expect("POST", "/api/mcp/client", body, NULL, 201, NULL);
	/* ra changed, rb gone, rc new */
	snprintf(
	        b, sizeof(b),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"ra\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tool_sync_interval\": \"5m\"}, {\"name\": \"rc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}]}}",
	        mcp.port, mcp.port);
	write_config("reload.json", b);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	wait_listed("rc", true);
	wait_listed("rb", false);
	CHECK(listed("ra") && listed("rapi"));
	/* invalid: nothing changes, it still serves */
	write_config(
	        "reload.json",
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"bad name\"}]}}");
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	write_config("reload.json", b); /* (what a later HUP would read) */
	expect("GET", "/healthz", NULL, NULL, 200, NULL);
	CHECK(listed("ra") && listed("rc") && listed("rapi"));
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The global tool_execution_timeout of config.json applies at start (a
 * hung call answers 504 after one second, not 30) and the global
 * tool_sync_interval at a SIGHUP (checks tick every second where the
 * default is ten minutes). */
static void
global_settings(void)
{
	peer d = {0};
	char entry[512], a[1024], b[1024];

	snprintf(
	        entry, sizeof(entry),
	        "{\"name\": \"gs\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
	        mcp.port);
	snprintf(
	        a, sizeof(a),
	        "{\"mcp\": {\"tool_execution_timeout\": \"1s\", \"client_configs\": [%s]}}",
	        entry);
	serve(&d, "global.json", a, NULL);
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", 1, 1));
	nng_time t0 = nng_clock();
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"gs\", \"tool\": \"hang\"}", NULL, 504, NULL);
	CHECK(nng_clock() - t0 < 10000);
	CHECK(metric_within("mcpkeep_health_checks_total{client=\"gs\"}", 0,
	                    0));
	snprintf(
	        b, sizeof(b),
	        "{\"mcp\": {\"tool_execution_timeout\": \"1s\", \"tool_sync_interval\": \"1s\", \"client_configs\": [%s]}}",
	        entry);
	write_config("global.json", b);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	CHECK(metric_within("mcpkeep_health_checks_total{client=\"gs\"}", 2,
	                    1e9));
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* /metrics reads the counters the supervisor keeps: a scrape of 16
 * clients costs a handful of inbox messages, not one ask per client, and
 * a call's count still shows (within the clients' push interval). */
static void
metrics_snapshot(void)
{
	enum { N = 16 };
	peer   d = {0};
	char   cfg[N * 200 + 128], *p = cfg;
	double m0, m1;
	char  *out;
	long   st;

	p += sprintf(p, "{\"mcp\": {\"client_configs\": [");
	for (int i = 0; i < N; i++) {
		p += sprintf(
		        p,
		        "%s{\"name\": \"ms%d\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
		        i ? ", " : "", i, mcp.port);
	}
	sprintf(p, "]}}");
	serve(&d, "snapshot.json", cfg, NULL);
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", N, N));
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"ms3\", \"tool\": \"echo\", \"arguments\": {\"message\": \"x\"}}",
	       NULL, 200, NULL);
	CHECK(metric_within(
	        "mcpkeep_tool_calls_total{client=\"ms3\",outcome=\"ok\"}", 1,
	        1));
	out = http("GET", "/metrics", NULL, NULL, &st);
	CHECK_EQ(st, 200);
	m0 = metric(out, "mcpkeep_messages_total");
	free(out);
	out = http("GET", "/metrics", NULL, NULL, &st);
	CHECK_EQ(st, 200);
	m1 = metric(out, "mcpkeep_messages_total");
	free(out);
	/* the runtime's, the store's and the credentials' stats and one list
	 * page: an ask per client would be 16 more */
	fprintf(stderr, "one scrape of %d clients: %.0f messages\n", N,
	        m1 - m0);
	CHECK(m0 > 0 && m1 - m0 < N);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The pid tool's answer through the daemon: the stdio server's pid. */
static long
stdio_pid(const char *client)
{
	char body[128], *out;
	long st, pid;

	snprintf(body, sizeof(body), "{\"client\": \"%s\", \"tool\": \"pid\"}",
	         client);
	out = http("POST", "/api/mcp/tool/execute", body, NULL, &st);
	CHECK_EQ(st, 200);
	json_t *j = json_loads(out, 0, NULL);
	pid       = strtol(
	              json_string_value(json_object_get(
	                      json_array_get(
	                              json_object_get(json_object_get(j, "result"),
	                                              "content"),
	                              0),
	                      "text")),
	              NULL, 10);
	json_decref(j);
	free(out);
	CHECK(pid > 0);
	return (pid);
}

/* PUT of fields that need no new connection keeps a stdio server's
 * process; a connection field restarts it. */
static void
update_stdio(void)
{
	peer d = {0};
	char config[1024], js[512], patch[1024];

	snprintf(js, sizeof(js), "%s/inject.mjs", peer_dir());
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"sd\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"]}, \"tools_to_execute\": [\"*\"]}]}, \"server\": {\"admin_token\": \"stdio-admin-token\"}}",
	        js);
	/* (without an admin token the API may not change a stdio client) */
	sv_admin = "stdio-admin-token";
	serve(&d, "stdio.json", config, NULL);
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", 1, 1));
	long pid = stdio_pid("sd");
	expect("PUT", "/api/mcp/client/sd", "{\"tool_sync_interval\": \"5m\"}",
	       NULL, 200, NULL);
	CHECK_EQ(stdio_pid("sd"), pid);
	expect("PUT", "/api/mcp/client/sd",
	       "{\"tools_to_execute\": [\"pid\"], \"tool_execution_timeout\": \"20s\", \"is_ping_available\": false}",
	       NULL, 200, NULL);
	CHECK_EQ(stdio_pid("sd"), pid);
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"sd\", \"tool\": \"echo\", \"arguments\": {\"message\": \"x\"}}",
	       NULL, 400, NULL);
	snprintf(
	        patch, sizeof(patch),
	        "{\"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"], \"envs\": [\"MK_SERVE=1\"]}}",
	        js);
	expect("PUT", "/api/mcp/client/sd", patch, NULL, 200, NULL);
	CHECK(stdio_pid("sd") != pid);
	sv_admin = NULL;
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The client_id of name in the list view (malloc'd), or NULL. */
static char *
listed_id(const char *name)
{
	long  st;
	char *out = http("GET", "/api/mcp/clients?limit=100", NULL, NULL, &st);
	json_t *all = json_loads(out, 0, NULL), *c;
	char   *id  = NULL;
	size_t  i;

	json_array_foreach(json_object_get(all, "clients"), i, c)
	{
		json_t *cfg = json_object_get(c, "config");
		if (strcmp(json_string_value(json_object_get(cfg, "name")),
		           name) == 0 &&
		    json_is_string(json_object_get(cfg, "client_id"))) {
			id = strdup(json_string_value(
			        json_object_get(cfg, "client_id")));
		}
	}
	json_decref(all);
	free(out);
	return (id);
}

/* Every /api/mcp/client/{id}/... path takes the client_id; the list
 * shows it (generated ones too); the stream's events carry it. */
static void
by_id(void)
{
	peer       d = {0};
	char       config[1024], path[160], body[256], saddr[64];
	nng_socket s;
	int        sport = peer_free_port();

	snprintf(
	        config, sizeof(config),
	        "{\"server\": {\"stream\": [\"tcp://127.0.0.1:%d\"]}, \"mcp\": {\"client_configs\": [{\"name\": \"idn\", \"client_id\": \"idn-1\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}, {\"name\": \"idg\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}]}}",
	        sport, mcp.port, mcp.port);
	serve(&d, "ids.json", config, NULL);
	snprintf(saddr, sizeof(saddr), "tcp://127.0.0.1:%d", sport);
	CHECK_EQ(nng_sub0_open(&s), 0);
	CHECK_EQ(nng_socket_set(s, NNG_OPT_SUB_SUBSCRIBE, "state", 5), 0);
	CHECK_EQ(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, WAIT_MS), 0);
	CHECK_EQ(nng_dial(s, saddr, NULL, 0), 0);
	char *named = listed_id("idn"), *gen = listed_id("idg");
	CHECK(named != NULL && strcmp(named, "idn-1") == 0);
	CHECK(gen != NULL && strlen(gen) == 32);
	const char *ids[] = {named, gen};
	for (int i = 0; i < 2; i++) {
		static const char *const acts[] = {"reconnect",
		                                   "refresh-tools", "disable",
		                                   "enable", NULL};
		for (int k = 0; acts[k] != NULL; k++) {
			snprintf(path, sizeof(path), "/api/mcp/client/%s/%s",
			         ids[i], acts[k]);
			expect("POST", path, NULL, NULL, 200, NULL);
		}
		snprintf(path, sizeof(path), "/api/mcp/client/%s", ids[i]);
		expect("PUT", path, "{\"tools_to_execute\": [\"echo\"]}", NULL,
		       200, NULL);
		snprintf(
		        body, sizeof(body),
		        "{\"client\": \"%s\", \"tool\": \"echo\", \"arguments\": {\"message\": \"by id\"}}",
		        ids[i]);
		expect("POST", "/api/mcp/tool/execute", body, NULL, 200,
		       "by id");
	}
	/* the disable reached the subscriber with the generated id */
	for (;;) {
		nng_msg         *m;
		mk_stream_event *e;
		bool             done;
		CHECK_EQ(nng_recvmsg(s, &m, 0), 0);
		CHECK_EQ(mk_stream_event_parse(nng_msg_body(m), nng_msg_len(m),
		                               &e),
		         0);
		nng_msg_free(m);
		done = strcmp(e->name, "idg") == 0 &&
		        strcmp(e->state, "disabled") == 0;
		CHECK(!done || strcmp(e->client_id, gen) == 0);
		mk_stream_event_free(e);
		if (done) {
			break;
		}
	}
	nng_close(s);
	/* an id that is another client's name is refused */
	snprintf(
	        body, sizeof(body),
	        "{\"name\": \"idx\", \"client_id\": \"idg\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	        mcp.port);
	expect("POST", "/api/mcp/client", body, NULL, 409, "already exists");
	snprintf(path, sizeof(path), "/api/mcp/client/%s", gen);
	expect("DELETE", path, NULL, NULL, 200, NULL);
	expect("DELETE", path, NULL, NULL, 404, "no MCP client");
	CHECK(listed_id("idg") == NULL);
	free(named);
	free(gen);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* 2,000 tool executions over HTTP at once, each its own connection: no
 * error, and every answer is its own request's. */
#define LOAD 2000
typedef struct lreq {
	char  *buf;
	size_t len;
	FILE  *mem;
	char   body[128], want[64];
} lreq;

static void
load(void)
{
	peer               d = {0};
	char               config[512], url[128];
	CURLM             *m = curl_multi_init();
	lreq              *s = calloc(LOAD, sizeof(*s));
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	int running, ok = 0, matched = 0;

	CHECK(m != NULL && s != NULL);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"busy\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}]}}",
	        mcp.port);
	/* (all from one address, as from a gateway in front: its cap
	 * raised to the total's) */
	serve_opt(&d, "load.json", config, NULL, "--max-connections-per-ip",
	          "2048");
	snprintf(url, sizeof(url), "%s/api/mcp/tool/execute", sv_base);
	curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
	for (int i = 0; i < LOAD; i++) {
		CURL *e = curl_easy_init();
		snprintf(s[i].want, sizeof(s[i].want), "load %d of %d", i,
		         LOAD);
		snprintf(
		        s[i].body, sizeof(s[i].body),
		        "{\"client\": \"busy\", \"tool\": \"echo\", \"arguments\": {\"message\": \"%s\"}}",
		        s[i].want);
		CHECK((s[i].mem = open_memstream(&s[i].buf, &s[i].len)) !=
		      NULL);
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, s[i].body);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, s[i].mem);
		curl_easy_setopt(e, CURLOPT_PRIVATE, &s[i]);
		curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 120000L);
		CHECK_EQ(curl_multi_add_handle(m, e), CURLM_OK);
	}
	do {
		CHECK_EQ(curl_multi_perform(m, &running), CURLM_OK);
		CHECK_EQ(curl_multi_poll(m, NULL, 0, 1000, NULL), CURLM_OK);
		CURLMsg *msg;
		int      left;
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			lreq *x;
			long  st = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
			                  (char **)&x);
			curl_easy_getinfo(msg->easy_handle,
			                  CURLINFO_RESPONSE_CODE, &st);
			fclose(x->mem);
			ok += msg->data.result == CURLE_OK && st == 200;
			/* its own message, whole (not "load 1" in "load 12")
			 */
			char quoted[80];
			snprintf(quoted, sizeof(quoted), "%s\"", x->want);
			matched += x->buf != NULL && strstr(x->buf, quoted);
			if (msg->data.result != CURLE_OK || st != 200) {
				fprintf(stderr, "load: %s: %ld %s\n",
				        curl_easy_strerror(msg->data.result),
				        st, x->buf ? x->buf : "");
			}
			free(x->buf);
			curl_multi_remove_handle(m, msg->easy_handle);
			curl_easy_cleanup(msg->easy_handle);
		}
	} while (running > 0);
	fprintf(stderr, "load: %d of %d answered 200, %d matched\n", ok, LOAD,
	        matched);
	CHECK_EQ(ok, LOAD);
	CHECK_EQ(matched, LOAD);
	expect("GET", "/metrics", NULL, NULL, 200,
	       "mcpkeep_tool_calls_total{client=\"busy\",outcome=\"ok\"} 2000");
	curl_slist_free_all(h);
	curl_multi_cleanup(m);
	free(s);
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
}

/* The status page in a real browser (test/peers/page.mjs); the
 * screenshot is kept as an artifact (MK_ARTIFACTS, else the working
 * directory). */
/* A request on a thread of its own (one that will hang a while). */
typedef struct bg {
	pthread_t   th;
	const char *method, *path, *body;
	long        status; /* its answer's (0: none came) */
	atomic_bool done;
} bg;

static void *
bg_main(void *arg)
{
	bg   *b   = arg;
	char *out = http_try(b->method, b->path, b->body, NULL, &b->status);

	free(out);
	b->done = true;
	return (NULL);
}

static void
bg_start(bg *b, const char *method, const char *path, const char *body)
{
	*b = (bg) {.method = method, .path = path, .body = body};
	CHECK_EQ(pthread_create(&b->th, NULL, bg_main, b), 0);
}

/* Admin calls that block (reconnects of a hung server, as many as the
 * admin lane has workers) do not hold up tool calls, nor the reverse. */
static void
lanes(void)
{
	peer d = {0}, up = {0};
	bg   k[4];
	char config[1024];

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"stuck\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}, {\"name\": \"free\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}]}}",
	        up.port, mcp.port);
	serve(&d, "lanes.json", config, NULL);
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", 2, 2));
	CHECK_EQ(kill(up.pid, SIGSTOP), 0);
	for (int i = 0; i < 4; i++) {
		bg_start(&k[i], "POST", "/api/mcp/client/stuck/reconnect",
		         NULL);
	}
	CHECK(metric_within("mcpkeep_http_requests_in_flight", 4, 4));
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"free\", \"tool\": \"echo\", \"arguments\": {\"message\": \"through\"}}",
	       NULL, 200, "through");
	for (int i = 0; i < 4; i++) {
		CHECK(!k[i].done); /* the reconnects still hang */
	}
	CHECK_EQ(kill(up.pid, SIGCONT), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(k[i].th, NULL);
		CHECK_EQ(k[i].status, 200);
	}
	peer_stop(&d);
	peer_stop(&up);
}

/* --json: the log (the access log too) as JSON lines, with fields: a
 * transition's client, states, stage and message; a call's tool,
 * outcome, duration and its caller's trace id. */
static void
json_log(void)
{
	peer        d = {0}, up = {0};
	const char *env[]  = {"MCPKEEP_LOG=debug", NULL};
	const char *hdrs[] = {
	        "traceparent: "
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	        NULL};
	char config[512];
	long st = 0;

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"jup\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}]}}",
	        up.port);
	/* (at the default level: the transition is a WARN line, and the
	 * output's tail that peer_said reads holds it) */
	serve_opt(
	        &d, "lost.json",
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"jlost\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"mk-no-such-command\"}, \"tools_to_execute\": [\"*\"]}]}}",
	        NULL, "--json", NULL);
	CHECK(state_within("jlost", "unstable", WAIT_MS));
	peer_stop(&d);
	CHECK(peer_said(&d,
	                "\"client\":\"jlost\",\"old_state\":\"(new)\","
	                "\"state\":\"unstable\",\"stage\":\"connect\","
	                "\"message\":\""));
	serve_opt(&d, "json.json", config, env, "--json", NULL);
	expect("GET", "/healthz", NULL, NULL, 200, "\"ok\"");
	CHECK(state_within("jup", "healthy", WAIT_MS));
	free(http_req("POST", "/api/mcp/tool/execute",
	              "{\"client\": \"jup\", \"tool\": \"echo\", "
	              "\"arguments\": {\"message\": \"j\"}}",
	              hdrs, &st));
	CHECK_EQ(st, 200);
	peer_stop(&d);
	peer_stop(&up);
	CHECK(peer_said(
	        &d,
	        "\",\"level\":\"DEBUG\",\"component\":\"http\",\"msg\":\"GET /healthz 200 "));
	CHECK(peer_said(&d,
	                "\"client\":\"jup\",\"tool\":\"echo\","
	                "\"outcome\":\"ok\",\"duration_ms\":"));
	CHECK(peer_said(&d,
	                "\"trace_id\":"
	                "\"4bf92f3577b34da6a3ce929d0e0e4736\"}"));
}

/* What mcpkeep check warns of is logged at boot too (WARN): a client
 * that allows no tools, a stdio command not on PATH. */
static void
boot_warnings(void)
{
	peer d = {0};

	serve(&d, "warned.json",
	      "{\"mcp\": {\"client_configs\": [{\"name\": \"lost\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"mk-no-such-command\"}}]}}",
	      NULL);
	expect("GET", "/healthz", NULL, NULL, 200, "\"ok\"");
	peer_stop(&d);
	CHECK(peer_said(&d,
	                "config: mcp.client_configs[0].tools_to_execute: "
	                "client lost allows no tools"));
	CHECK(peer_said(
	        &d,
	        "config: mcp.client_configs[0].stdio_config.command: "
	        "client lost: its command \"mk-no-such-command\" is not "
	        "on PATH"));
}

/* --max-requests: past it a tool call is answered 503 with Retry-After
 * (memory stays bounded), but /healthz, /metrics and the admin API
 * still answer. */
static void
busy(void)
{
	peer   d = {0}, up = {0};
	bg     h[2];
	char   config[512], url[128], *out = NULL;
	size_t len = 0;
	long   st  = 0;

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"hot\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}]}}",
	        up.port);
	serve_opt(&d, "busy.json", config, NULL, "--max-requests", "2");
	CHECK(metric_within("mcpkeep_clients{state=\"healthy\"}", 1, 1));
	for (int i = 0; i < 2; i++) {
		bg_start(
		        &h[i], "POST", "/api/mcp/tool/execute",
		        "{\"client\": \"hot\", \"tool\": \"hang\", \"timeout\": 60000}");
	}
	/* both held (a scrape is not counted) */
	if (!metric_within("mcpkeep_http_requests_in_flight", 2, 2)) {
		fprintf(stderr, "held: %ld %ld\n", h[0].status, h[1].status);
		CHECK(0);
	}
	expect("GET", "/healthz", NULL, NULL, 200, "\"ok\"");
	/* the data plane is full; the admin API has a budget of its own */
	expect("GET", "/api/mcp/clients", NULL, NULL, 200, "\"hot\"");
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"hot\", \"tool\": \"echo\"}", NULL, 503,
	       "{\"error\":\"the daemon is busy: 2 requests in the works; retry later\"}");
	/* the answer says when to come back */
	CURL *e   = curl_easy_init();
	FILE *mem = open_memstream(&out, &len);
	snprintf(url, sizeof(url), "%s/api/mcp/tool/execute", sv_base);
	curl_easy_setopt(e, CURLOPT_URL, url);
	struct curl_slist *ct =
	        curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(e, CURLOPT_POSTFIELDS,
	                 "{\"client\": \"hot\", \"tool\": \"echo\"}");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, ct);
	curl_easy_setopt(e, CURLOPT_HEADER, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	curl_easy_cleanup(e);
	curl_slist_free_all(ct);
	fclose(mem);
	CHECK_EQ(st, 503);
	CHECK(strcasestr(out, "\r\nRetry-After: 1\r\n") != NULL);
	free(out);
	CHECK(metric_within("mcpkeep_http_requests_busy_total", 2, 2));
	/* the upstream goes: the held calls are answered, room again */
	peer_stop(&up);
	for (int i = 0; i < 2; i++) {
		pthread_join(h[i].th, NULL);
		CHECK_EQ(h[i].status, 502);
	}
	expect("GET", "/api/mcp/clients", NULL, NULL, 200, "\"hot\"");
	peer_stop(&d);
}

/* mcpkeep watch over /api/events: the admin sees every transition; a
 * virtual key only its clients'; a wrong credential exits 1. */
/* GET /api/mcp/client/{id}/history: a client's transitions, oldest
 * first, with the failure that moved it; a key sees its clients' only;
 * .../tools/history the same way. */
static void
history(void)
{
	peer        d     = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=history-admin-token", NULL};
	const char *key[] = {"X-MCP-Virtual-Key: history-key-0123456789",
	                     NULL};
	long        st    = 0;
	char       *out;

	serve(&d, "history.json",
	      "{\"mcp\": {\"client_configs\": [{\"name\": \"hist\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}]}, \"server\": {\"virtual_keys\": [{\"name\": \"hk\", \"value\": \"history-key-0123456789\", \"clients\": {\"other\": [\"*\"]}}]}}",
	      env);
	sv_admin = "history-admin-token";
	CHECK(state_within("hist", "unstable", WAIT_MS));
	expect("POST", "/api/mcp/client/hist/disable", NULL,
	       "history-admin-token", 200, NULL);
	out = http("GET", "/api/mcp/client/hist/history", NULL,
	           "history-admin-token", &st);
	CHECK_EQ(st, 200);
	json_t *root = json_loads(out, 0, NULL);
	json_t *h    = json_object_get(root, "history");
	free(out);
	CHECK_EQ(json_array_size(h), 2);
	json_t *t0 = json_array_get(h, 0), *t1 = json_array_get(h, 1);
	CHECK(strcmp(json_string_value(json_object_get(t0, "old_state")),
	             "(new)") == 0);
	CHECK(strcmp(json_string_value(json_object_get(t0, "state")),
	             "unstable") == 0);
	CHECK(strcmp(json_string_value(json_object_get(t0, "stage")),
	             "connect") == 0);
	CHECK(json_string_value(json_object_get(t0, "time")) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(t1, "old_state")),
	             "unstable") == 0);
	CHECK(strcmp(json_string_value(json_object_get(t1, "state")),
	             "disabled") == 0);
	CHECK(json_object_get(t1, "stage") == NULL);
	json_decref(root);
	expect("GET", "/api/mcp/client/nobody/history", NULL,
	       "history-admin-token", 404, "no MCP client");
	expect("GET", "/api/mcp/client/hist/history", NULL, "", 401, NULL);
	expect("GET", "/api/status", NULL, "", 401, NULL);
	expect("GET", "/api/status", NULL, "history-admin-token", 200,
	       "\"store\":\"memory\"");
	free(http_req("GET", "/api/mcp/client/hist/history", NULL, key, &st));
	CHECK_EQ(st, 403);
	/* its tool-list versions: none (it never listed); the same
	 * decisions */
	expect("GET", "/api/mcp/client/hist/tools/history", NULL,
	       "history-admin-token", 200, "{\"versions\":[]}");
	expect("GET", "/api/mcp/client/nobody/tools/history", NULL,
	       "history-admin-token", 404, "no MCP client nobody");
	expect("GET", "/api/mcp/client/hist/tools/history", NULL, "", 401,
	       NULL);
	free(http_req("GET", "/api/mcp/client/hist/tools/history", NULL, key,
	              &st));
	CHECK_EQ(st, 403);
	sv_admin = NULL;
	peer_stop(&d);
}

/* A destructive call cut after it was sent: 502 with "outcome":
 * "unknown", and in GET /api/mcp/calls?outcome=unknown (the admin's). */
static void
unknown_outcome(void)
{
	peer        d = {0}, up = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=unknown-admin-token", NULL};
	char        config[512];

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"cut\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}]}}",
	        up.port);
	serve(&d, "unknown.json", config, env);
	sv_admin = "unknown-admin-token";
	CHECK(state_within("cut", "healthy", WAIT_MS));
	expect("GET", "/api/mcp/calls?outcome=unknown", NULL,
	       "unknown-admin-token", 200, "{\"calls\":[]}");
	admin(up.port, "/admin/drop-calls", "{\"count\": 1}", NULL);
	expect("POST", "/api/mcp/tool/execute",
	       "{\"client\": \"cut\", \"tool\": \"counted_destructive\", "
	       "\"arguments\": {\"secret_arg\": \"s3cr3t\"}}",
	       "unknown-admin-token", 502, "\"outcome\":\"unknown\"");
	expect("GET", "/api/mcp/calls?outcome=unknown", NULL,
	       "unknown-admin-token", 200, "\"tool\":\"counted_destructive\"");
	long  st;
	char *out = http("GET", "/api/mcp/calls?outcome=unknown", NULL,
	                 "unknown-admin-token", &st);
	CHECK(strstr(out, "s3cr3t") == NULL &&
	      strstr(out, "secret_arg") == NULL);
	free(out);
	expect("GET", "/api/mcp/calls?outcome=ok", NULL, "unknown-admin-token",
	       400,
	       "outcome must be \\\"unknown\\\" (the calls that may or may not have run)");
	expect("GET", "/api/mcp/calls?outcome=unknown", NULL, "", 401, NULL);
	sv_admin = NULL;
	peer_stop(&d);
	peer_stop(&up);
}

static void
watch_events(void)
{
	peer        d = {0}, w = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=watch-admin-token", NULL};
	char        cmd[512];

	serve(&d, "watch.json",
	      "{\"mcp\": {\"client_configs\": []}, \"server\": {\"virtual_keys\": [{\"name\": \"wk\", \"value\": \"watch-key-0123456789\", \"clients\": {\"wa\": [\"*\"]}}]}}",
	      env);
	/* the stream is no one's without a credential */
	expect("GET", "/api/events", NULL, NULL, 401,
	       "this endpoint needs the admin token or a virtual key");
	const char *admin[] = {
	        getenv("MK_MCPKEEP"), "watch",   sv_base, "--token",
	        "watch-admin-token",  "--count", "1",     NULL};
	CHECK_EQ(peer_start(&w, admin, NULL,
	                    "connected to http://[0-9.]+:([0-9]+)/api/events",
	                    WAIT_MS),
	         0);
	expect("POST", "/api/mcp/client",
	       "{\"name\": \"wb\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}",
	       "watch-admin-token", 201, NULL);
	CHECK(peer_wait_exit(&w, WAIT_MS));
	peer_stop(&w);
	CHECK(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0);
	CHECK(peer_said(&w,
	                "wb                   (new) -> unstable  [connect]"));
	const char *key[] = {
	        getenv("MK_MCPKEEP"),   "watch",   sv_base, "--key",
	        "watch-key-0123456789", "--count", "1",     NULL};
	CHECK_EQ(peer_start(&w, key, NULL,
	                    "connected to http://[0-9.]+:([0-9]+)/api/events",
	                    WAIT_MS),
	         0);
	expect("POST", "/api/mcp/client/wb/disable", NULL, "watch-admin-token",
	       200, NULL);
	expect("POST", "/api/mcp/client",
	       "{\"name\": \"wa\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}",
	       "watch-admin-token", 201, NULL);
	CHECK(peer_wait_exit(&w, WAIT_MS));
	peer_stop(&w);
	CHECK(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0);
	CHECK(peer_said(&w, "wa                   (new) -> unstable"));
	CHECK(!peer_said(&w, "wb ")); /* (its snapshot too: not the key's) */
	/* a watcher that comes later is told the states as they are first
	 * (then their changes) */
	CHECK_EQ(peer_start(&w, admin, NULL,
	                    "connected to http://[0-9.]+:([0-9]+)/api/events",
	                    WAIT_MS),
	         0);
	/* (enabled, it cannot connect: 502, and a transition) */
	expect("POST", "/api/mcp/client/wb/enable", NULL, "watch-admin-token",
	       502, "cannot connect to MCP client wb");
	CHECK(peer_wait_exit(&w, WAIT_MS));
	peer_stop(&w);
	CHECK(peer_said(&w, "wb                   now disabled"));
	CHECK(peer_said(&w, "wa                   now unstable  [connect]"));
	snprintf(
	        cmd, sizeof(cmd),
	        "%s watch %s --key watch-key-wrong-000000 > %s/w.out 2>&1; test $? -eq 1 && grep -q 'HTTP 401' %s/w.out",
	        getenv("MK_MCPKEEP"), sv_base, sv_dir, sv_dir);
	CHECK_EQ(system(cmd), 0);
	peer_stop(&d);
}

static void
status_page(void)
{
	peer   d = {0}, b = {0}, m = {0};
	char   js[512], shot[512], pid[16], port[16];
	size_t cap    = 256 * 1024, len;
	char  *config = malloc(cap);

	/* a server of its own, for the page to kill; and 1,000 disabled
	 * clients, for the page's paging and filter */
	CHECK_EQ(peer_start_inject(&m, WAIT_MS), 0);
	CHECK(config != NULL);
	len = (size_t)snprintf(
	        config, cap,
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"svst\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}, {\"name\": \"dead\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}, {\"name\": \"mortal\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\", \"tools_to_execute\": [\"echo\"], \"tool_changes\": \"hold\"}",
	        mcp.port, peer_free_port(), m.port);
	for (int i = 0; i < 1000; i++) {
		len += (size_t)snprintf(
		        config + len, cap - len,
		        ", {\"name\": \"zz%04d\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\", \"disabled\": true, \"tools_to_execute\": [\"*\"]}",
		        i);
	}
	snprintf(config + len, cap - len, "]}}");
	serve(&d, "page.json", config, NULL);
	free(config);
	expect("GET", "/", NULL, NULL, 200, "<title>mcpkeep</title>");
	snprintf(js, sizeof(js), "%s/page.mjs", peer_dir());
	snprintf(shot, sizeof(shot), "%s/status-page.png",
	         getenv("MK_ARTIFACTS") != NULL ? getenv("MK_ARTIFACTS")
	                                        : ".");
	unlink(shot);
	snprintf(pid, sizeof(pid), "%d", (int)m.pid);
	snprintf(port, sizeof(port), "%d", m.port);
	const char *argv[] = {"node", js, sv_base, shot, pid, port, NULL};
	CHECK_EQ(peer_start(&b, argv, NULL, "page ok ([0-9]+)", 120000), 0);
	CHECK(peer_wait_exit(&b, 30000));
	peer_stop(&b);
	CHECK(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0);
	CHECK(access(shot, F_OK) == 0);
	fprintf(stderr, "the page's screenshot: %s\n", shot);
	peer_stop(&d);
	peer_stop(&m); /* (killed by the page: reaped here) */
}

/* The object of client name in the list view (new reference), or NULL;
 * *total gets its total_count. */
static json_t *
listed_client(const char *name, json_int_t *total)
{
	long  st;
	char *out = http("GET", "/api/mcp/clients?limit=100", NULL, NULL, &st);
	json_t *all = json_loads(out, 0, NULL), *c, *found = NULL;
	size_t  i;

	CHECK_EQ(st, 200);
	*total = json_integer_value(json_object_get(all, "total_count"));
	json_array_foreach(json_object_get(all, "clients"), i, c)
	{
		const char *n = json_string_value(
		        json_object_get(json_object_get(c, "config"), "name"));
		if (n != NULL && strcmp(n, name) == 0) {
			found = json_incref(c);
		}
	}
	json_decref(all);
	free(out);
	return (found);
}

/* A stdio server that never answers initialize (its connect would run
 * the whole 30 s): the daemon serves at once - /healthz, the page, the
 * API listing both clients, /readyz 503 "booting" - defers a SIGHUP,
 * and a SIGTERM stops it promptly, the boot unfinished. */
static void
boot_sigterm(void)
{
	peer        d     = {0};
	const char *env[] = {"MCPKEEP_LOG=info", NULL};
	char        config[1024];
	json_int_t  total;
	json_t     *c;

	snprintf(
	        config, sizeof(config),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"hang\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"sleep 600\"]}}, {\"name\": \"fine\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}]}}",
	        mcp.port);
	/* started with a low soft fd limit, which it raises to the hard */
	struct rlimit lim, low;
	char          said[128];
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
	low          = lim;
	low.rlim_cur = lim.rlim_max > 1024 ? 1024 : lim.rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	nng_time t0 = nng_clock();
	/* the banner well before the 30 s connect timeout */
	serve_start(&d, "hang.json", config, env, NULL, NULL, 10000);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
	expect("GET", "/healthz", NULL, NULL, 200, "\"ok\"");
	expect("GET", "/", NULL, NULL, 200, "<title>mcpkeep</title>");
	expect("GET", "/readyz", NULL, NULL, 503, "\"booting\"");
	/* both listed (and counted), hang as the runtime has it while its
	 * first connect runs: unstable, no failure yet */
	c = listed_client("hang", &total);
	CHECK(c != NULL && total == 2);
	CHECK(strcmp(json_string_value(json_object_get(c, "state")),
	             "unstable") == 0);
	CHECK(json_object_get(c, "last_failure") == NULL);
	json_decref(c);
	c = listed_client("fine", &total);
	CHECK(c != NULL);
	json_decref(c);
	CHECK(nng_clock() - t0 < 10000);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	expect("GET", "/readyz", NULL, NULL, 503, "\"booting\"");
	nng_time t1 = nng_clock();
	peer_stop(&d); /* SIGTERM; SIGKILL after 5 s */
	CHECK(nng_clock() - t1 < 5000);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(peer_said(&d, "serve: boot: connecting 2 clients\n"));
	snprintf(
	        said, sizeof(said),
	        "runtime: file descriptors: limit %llu (soft, was %llu), hard %llu\n",
	        (unsigned long long)lim.rlim_max,
	        (unsigned long long)low.rlim_cur,
	        (unsigned long long)lim.rlim_max);
	CHECK(peer_said(&d, said));
	CHECK(peer_said(
	        &d,
	        "serve: reload deferred: the boot is still connecting clients; the SIGHUP applies when it ends\n"));
	CHECK(peer_said(
	        &d,
	        "serve: boot: stopping before the first connects ended\n"));
	CHECK(!peer_said(&d, "reload: the boot ended"));
}

/* A server that accepts connections and never answers (the test's own
 * listening socket; its accept thread holds what it accepted). */
typedef struct mute {
	int       fd;     /* the listening socket */
	int       port;   /* its port on 127.0.0.1 */
	pthread_t th;     /* the accept thread */
	int      *held;   /* accepted connections */
	size_t    n, cap; /* in held, allocated */
} mute;

static void *
mute_main(void *arg)
{
	mute *m = arg;
	int   c;

	/* out of descriptors, it stops: the backlog holds the rest */
	while ((c = accept(m->fd, NULL, NULL)) >= 0 || errno == EINTR ||
	       errno == ECONNABORTED) {
		if (c < 0) {
			continue;
		}
		if (m->n == m->cap) {
			size_t ncap = m->cap ? m->cap * 2 : 1024;
			int   *nh   = realloc(m->held, ncap * sizeof(*nh));
			if (nh == NULL) {
				close(c);
				continue;
			}
			m->held = nh;
			m->cap  = ncap;
		}
		m->held[m->n++] = c;
	}
	return (NULL); /* shut down by mute_stop */
}

static void
mute_start(mute *m)
{
	struct sockaddr_in sa  = {.sin_family = AF_INET};
	socklen_t          len = sizeof(sa);

	memset(m, 0, sizeof(*m));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK((m->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	CHECK_EQ(bind(m->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(m->fd, 4096), 0);
	CHECK_EQ(getsockname(m->fd, (struct sockaddr *)&sa, &len), 0);
	m->port = ntohs(sa.sin_port);
	CHECK_EQ(pthread_create(&m->th, NULL, mute_main, m), 0);
}

static void
mute_stop(mute *m)
{
	shutdown(m->fd, SHUT_RDWR); /* accept fails: the thread ends */
	pthread_join(m->th, NULL);
	close(m->fd);
	for (size_t i = 0; i < m->n; i++) {
		close(m->held[i]);
	}
	free(m->held);
}

/* A boot of 6,000 clients whose server accepts and never answers: a
 * SIGTERM while it is still connecting them (the supervisor still
 * starting clients, its inbox full of their news) stops the daemon at
 * once: 1.2-1.5 s on a quiet 2-core machine (17 s before, for ever with
 * 20,000 clients), the time the clients started by then take to stop;
 * asserted within 5 s, so that a machine busy with other builds passes.
 * The stop is a flag the actors' loops read, so it needs no room in a
 * full inbox, and the supervisor gives up the clients not yet started. */
static void
boot_sigterm_many(void)
{
	enum { N = 6000 };
	peer          d    = {0};
	const char   *tsan = getenv("TSAN_OPTIONS");
	const char   *asan = getenv("ASAN_OPTIONS");
	char          topts[1024], aopts[1024];
	const char   *env[] = {"MCPKEEP_LOG=info", topts, aopts, NULL};
	struct rlimit lim;
	mute          m;
	char         *config, *p;
	size_t        cap = (size_t)N * 192 + 64;

	/* a thread-sanitized daemon would sleep 1 s more at exit (the rest
	 * of the options kept) */
	snprintf(topts, sizeof(topts), "TSAN_OPTIONS=%s%satexit_sleep_ms=0",
	         tsan != NULL ? tsan : "",
	         tsan != NULL && *tsan != '\0' ? ":" : "");
	/* nor scan 6,000 clients' memory for leaks at exit (seconds under
	 * ASan; every other test checks for leaks) */
	snprintf(aopts, sizeof(aopts), "ASAN_OPTIONS=%s%sdetect_leaks=0",
	         asan != NULL ? asan : "",
	         asan != NULL && *asan != '\0' ? ":" : "");

	/* the accepted connections are held here: the soft limit up to the
	 * hard one (the daemon raises its own) */
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
	lim.rlim_cur = lim.rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
	mute_start(&m);
	CHECK((config = malloc(cap)) != NULL);
	p = config + sprintf(config, "{\"mcp\": {\"client_configs\": [");
	for (int i = 0; i < N; i++) {
		p += sprintf(
		        p,
		        "%s{\"name\": \"m%d\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}",
		        i ? ", " : "", i, m.port);
	}
	sprintf(p, "]}}");
	/* the banner comes once the clients exist or the daemon stopped
	 * waiting for that (5 s): either way their connects go on */
	serve_start(&d, "many.json", config, env, NULL, NULL, 120000);
	free(config);
	expect("GET", "/readyz", NULL, NULL, 503, "\"booting\"");
	nng_time t0 = nng_clock();
	CHECK_EQ(kill(d.pid, SIGTERM), 0);
	int      gone = peer_wait_exit(&d, 30000);
	nng_time ms   = nng_clock() - t0;
	fprintf(stderr, "boot_sigterm_many: %s %lld ms after the SIGTERM\n",
	        gone ? "exited" : "still running", (long long)ms);
	peer_stop(&d);
	mute_stop(&m);
	CHECK(gone && ms < 5000);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(peer_said(&d, "serve: boot: connecting 6000 clients\n"));
	CHECK(peer_said(
	        &d,
	        "serve: boot: stopping before the first connects ended\n"));
	CHECK(!peer_said(&d, "cannot queue TERM"));
}

/* A stdio server that starts 3 s late: /readyz is 503 until its connect
 * ended, then 200; the log says how each client came out (one failed:
 * its stage and message), then the summary; a SIGHUP during the boot is
 * applied after it. */
static void
boot_slow(void)
{
	peer        d     = {0};
	const char *env[] = {"MCPKEEP_LOG=info", NULL};
	char        config[1536], more[1536], fmt[1024], js[512];
	json_int_t  total;
	json_t     *c;

	snprintf(js, sizeof(js), "%s/inject.mjs", peer_dir());
	snprintf(
	        fmt, sizeof(fmt),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"slow\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"sleep 3; exec node %s stdio\"]}}, {\"name\": \"fine\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}, {\"name\": \"gone\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"exit 3\"]}}%%s]}}",
	        js, mcp.port);
	snprintf(config, sizeof(config), fmt, "");
	nng_time t0 = nng_clock();
	serve_start(&d, "slow.json", config, env, NULL, NULL, 10000);
	CHECK(nng_clock() - t0 < 2500); /* not after slow's 3 s */
	expect("GET", "/readyz", NULL, NULL, 503, "\"booting\"");
	c = listed_client("slow", &total);
	CHECK(c != NULL && total == 3);
	json_decref(c);
	/* a SIGHUP now waits for the boot's end */
	snprintf(
	        more, sizeof(more), fmt,
	        ", {\"name\": \"later\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\"}");
	write_config("slow.json", more);
	CHECK_EQ(kill(d.pid, SIGHUP), 0);
	CHECK(ready_within(WAIT_MS));
	CHECK(nng_clock() - t0 >= 3000); /* (slow's connect ended first) */
	c = listed_client("slow", &total);
	CHECK(c != NULL &&
	      strcmp(json_string_value(json_object_get(c, "state")),
	             "healthy") == 0);
	json_decref(c);
	CHECK(metric_within("mcpkeep_reloads_total{result=\"applied\"}", 1,
	                    1));
	CHECK(listed("later"));
	peer_stop(&d);
	CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	CHECK(peer_said(&d, "serve: boot: connecting 3 clients\n"));
	CHECK(peer_said(&d, "serve: boot: slow: healthy\n"));
	CHECK(peer_said(&d, "serve: boot: fine: healthy\n"));
	CHECK(peer_said(&d, "serve: boot: gone: unstable (stage connect: "));
	/* a failure at WARN when it starts */
	CHECK(peer_said(&d,
	                "WARN  client: gone: (new) -> unstable (stage "
	                "connect: "));
	CHECK(peer_said(&d, "serve: boot: 3 clients in "));
	CHECK(peer_said(&d, " ms: 2 healthy, 1 unstable\n"));
	CHECK(peer_said(
	        &d,
	        "serve: reload deferred: the boot is still connecting clients"));
	CHECK(peer_said(
	        &d,
	        "serve: reload: the boot ended: applying the SIGHUP that came during it\n"));
}

/* Connections arriving all the while a SIGTERM stops the daemon:
 * libmicrohttpd's threads keep serving and accepting until the daemon
 * stops taking new ones, and it exits 0 every time (quiescing its epoll
 * listener from another thread raced them and aborted it: "Failed to
 * remove listen FD from epoll set"). */
typedef struct hammer {
	int             port;
	atomic_bool     stop;
	pthread_mutex_t mtx;      /* guards answered */
	pthread_cond_t  cv;       /* answered grew */
	int             answered; /* 200s seen */
	pthread_t       th[4];
} hammer;

static void *
hammer_main(void *arg)
{
	hammer *h = arg;
	char    req[128], buf[4096];
	int     n = snprintf(req, sizeof(req),
	                     "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	                     h->port);

	/* one connection kept alive at a time, its requests back to back
	 * (a libmicrohttpd thread always busy); another once it closed */
	while (!atomic_load(&h->stop)) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port   = htons(h->port)};
		int                fd = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t            got;

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0) {
			continue;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			while (!atomic_load(&h->stop) &&
			       write(fd, req, (size_t)n) == n &&
			       (got = read(fd, buf, sizeof(buf) - 1)) > 0) {
				buf[got] = '\0';
				if (strstr(buf, " 200 ") != NULL) {
					pthread_mutex_lock(&h->mtx);
					h->answered++;
					pthread_cond_signal(&h->cv);
					pthread_mutex_unlock(&h->mtx);
				}
			}
		}
		close(fd);
	}
	return (NULL);
}

static void
stop_amid_connections(void)
{
	const char *so   = getenv("MK_EPOLL_DEL_SLOW");
	const char *asan = getenv("ASAN_OPTIONS");
	char        pre[512], aopts[1024];
	const char *env[] = {pre, aopts, NULL};

	CHECK(so != NULL);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", so);
	/* (the module is not the first library loaded, ASan's runtime is) */
	snprintf(aopts, sizeof(aopts),
	         "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
	         asan != NULL ? asan : "",
	         asan != NULL && *asan != '\0' ? ":" : "");
	for (int round = 0; round < 3; round++) {
		peer            d = {0};
		hammer          h = {.mtx = PTHREAD_MUTEX_INITIALIZER,
		                     .cv  = PTHREAD_COND_INITIALIZER};
		struct timespec until;

		serve(&d, "amid.json", "{\"mcp\": {\"client_configs\": []}}",
		      env);
		h.port = d.port;
		for (int i = 0; i < 4; i++) {
			CHECK_EQ(pthread_create(&h.th[i], NULL, hammer_main,
			                        &h),
			         0);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += WAIT_MS / 1000;
		pthread_mutex_lock(&h.mtx);
		while (h.answered < 50 &&
		       pthread_cond_timedwait(&h.cv, &h.mtx, &until) == 0) {
		}
		CHECK(h.answered >= 50);
		pthread_mutex_unlock(&h.mtx);
		peer_stop(&d); /* SIGTERM, the requests still coming */
		atomic_store(&h.stop, true);
		for (int i = 0; i < 4; i++) {
			pthread_join(h.th[i], NULL);
		}
		CHECK(!peer_said(&d, "Fatal error"));
		CHECK(WIFEXITED(d.status) && WEXITSTATUS(d.status) == 0);
	}
}

int
main(int argc, char **argv)
{
	sv_begin(&mcp);
	RUN_IF(api);
	RUN_IF(admin_token);
	RUN_IF(reload);
	RUN_IF(global_settings);
	RUN_IF(metrics_snapshot);
	RUN_IF(update_stdio);
	RUN_IF(by_id);
	RUN_IF(load);
	RUN_IF(busy);
	RUN_IF(lanes);
	RUN_IF(json_log);
	RUN_IF(boot_warnings);
	RUN_IF(boot_sigterm);
	RUN_IF(boot_slow);
	RUN_IF(boot_sigterm_many);
	RUN_IF(stop_amid_connections);
	RUN_IF(history);
	RUN_IF(unknown_outcome);
	RUN_IF(watch_events);
	RUN_IF(status_page);
	sv_end(&mcp);
	return (0);
}
