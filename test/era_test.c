/*
 * era_test.c - both eras of MCP through the C API.  A server that speaks
 * only 2026-07-28 (test/peers/modern.mjs: no npm package implements the
 * revision yet, so the peer is written from its text for the tests), one
 * that speaks only 2025-11-25 (test/peers/streams.mjs, the SDK's), and
 * one that speaks both (modern.mjs --eras both):
 *
 *   modern     stateless requests: server/discover first, then every
 *              request with _meta (protocolVersion, clientCapabilities,
 *              clientInfo) and Mcp-Method / Mcp-Name; a tool's
 *              x-mcp-header parameter as Mcp-Param-*; a tool with an
 *              invalid annotation dropped; no initialize, no ping (the
 *              check is tools/list); protocol_version in the view and on
 *              the stream; per-call and sticky
 *   legacy     initialize after the modern request is refused
 *   both       the newest: 2026-07-28
 *   stdio      the modern era over stdio (server/discover first);
 *              subscriptions/listen, and again after a reconnect
 *   mrtr       an input_required result: its elicitation goes to the
 *              host, the retry carries inputResponses and the untouched
 *              requestState; a sampling input too; static roots answer
 *              their input at once
 *   listening  subscriptions/listen: list_changed makes a relist
 *   ttl        a tool list's ttlMs shorter than tool_sync_interval drives
 *              the refresh
 *   reissue    a broken stream: the idempotent tool goes again under a
 *              new id, the unannotated one fails
 *   trace      the caller's W3C trace context in _meta (an invalid one
 *              dropped)
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "testutil.h"

static void
start_modern(peer *p, const char *eras, const char *ttl)
{
	char        js[512];
	const char *argv[] = {"node",   js,   "http",  "--port", "0",
	                      "--eras", eras, "--ttl", ttl,      NULL};

	snprintf(js, sizeof(js), "%s/modern.mjs", peer_dir());
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
}

static void
start_legacy(peer *p)
{
	char        js[512];
	const char *argv[] = {"node", js, "--port", "0", NULL};

	snprintf(js, sizeof(js), "%s/streams.mjs", peer_dir());
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
}

/* Adds client name over HTTP to port, sticky or not, with extra config
 * fields (a JSON fragment, or ""). */
static void
add_http(mk_runtime *rt, const char *name, int port, bool sticky,
         const char *extra)
{
	char *err = NULL;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"], \"needs_session_stickiness\": %s%s}",
	            name, port, sticky ? "true" : "false", extra),
	        0);
}

/* The peer's log of requests (a new reference). */
static json_t *
requests(const peer *p)
{
	json_t *j = admin_json(p->port, "/admin/requests", NULL);
	json_t *r = json_incref(json_object_get(j, "requests"));

	json_decref(j);
	CHECK(json_is_array(r));
	return (r);
}

/* The last request of the log with rpc method (borrowed from log). */
static json_t *
last_rpc(json_t *log, const char *method)
{
	json_t *found = NULL, *r;
	size_t  i;

	json_array_foreach(log, i, r)
	{
		const char *m = json_string_value(json_object_get(r, "rpc"));
		if (m != NULL && strcmp(m, method) == 0) {
			found = r;
		}
	}
	return (found);
}

static int
count_rpc(json_t *log, const char *method)
{
	json_t *r;
	size_t  i;
	int     n = 0;

	json_array_foreach(log, i, r)
	{
		const char *m = json_string_value(json_object_get(r, "rpc"));
		n += m != NULL && strcmp(m, method) == 0;
	}
	return (n);
}

static const char *
hdr(json_t *req, const char *name)
{
	return (json_string_value(
	        json_object_get(json_object_get(req, "headers"), name)));
}

static const char *
meta(json_t *req, const char *key)
{
	json_t *m = json_object_get(req, "meta");

	return (json_string_value(json_object_get(m, key)));
}

/* A modern request as the revision has it: its _meta and headers. */
static void
check_modern_request(json_t *req, const char *method, const char *name)
{
	json_t *m = json_object_get(req, "meta");

	CHECK(req != NULL);
	CHECK(strcmp(meta(req, "io.modelcontextprotocol/protocolVersion"),
	             "2026-07-28") == 0);
	CHECK(json_is_object(json_object_get(
	        m, "io.modelcontextprotocol/clientCapabilities")));
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(
	                             m, "io.modelcontextprotocol/clientInfo"),
	                     "name")),
	             "mcpkeep") == 0);
	CHECK(strcmp(hdr(req, "mcp-method"), method) == 0);
	CHECK(strcmp(hdr(req, "mcp-protocol-version"), "2026-07-28") == 0);
	CHECK(name == NULL ? hdr(req, "mcp-name") == NULL
	                   : strcmp(hdr(req, "mcp-name"), name) == 0);
	CHECK(hdr(req, "mcp-session-id") == NULL);
	CHECK_EQ(json_integer_value(json_object_get(req, "status")), 200);
}

static bool
has_tool(json_t *view, const char *name)
{
	json_t *t;
	size_t  i;

	json_array_foreach(json_object_get(view, "tools"), i, t)
	{
		if (strcmp(json_string_value(json_object_get(t, "name")),
		           name) == 0) {
			return (true);
		}
	}
	return (false);
}

static void
modern_on(bool sticky)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	json_t     *v, *log;
	char       *out;
	int         rc, from = 0;
	event       e;

	start_modern(&p, "modern", "60000");
	add_http(rt, "mod", p.port, sticky, "");
	e = wait_state(&sb, &from, "mod", "healthy", NULL);
	CHECK(strcmp(e.protocol_version, "2026-07-28") == 0);
	v = view_of(rt, "mod");
	CHECK(strcmp(vstr(v, "protocol_version"), "2026-07-28") == 0);
	CHECK(has_tool(v, "with_header") && has_tool(v, "echo"));
	CHECK(!has_tool(v, "bad_header")); /* "Bad Header" is no token */
	json_decref(v);
	out = call_text(rt, "mod", "echo", "{\"message\": \"stateless\"}",
	                &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "stateless") != NULL);
	free(out);
	out = call_text(rt, "mod", "with_header", "{\"region\": \"us-west1\"}",
	                &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "us-west1") != NULL);
	free(out);
	CHECK_EQ(mk_client_refresh_tools(rt, "mod", NULL), 0);
	log = requests(&p);
	CHECK(strcmp(json_string_value(
	                     json_object_get(json_array_get(log, 0), "rpc")),
	             "server/discover") == 0);
	check_modern_request(json_array_get(log, 0), "server/discover", NULL);
	check_modern_request(last_rpc(log, "tools/list"), "tools/list", NULL);
	check_modern_request(last_rpc(log, "tools/call"), "tools/call",
	                     "with_header");
	CHECK(strcmp(hdr(last_rpc(log, "tools/call"), "mcp-param-region"),
	             "us-west1") == 0);
	/* no handshake, no ping: the check was tools/list */
	CHECK_EQ(count_rpc(log, "initialize"), 0);
	CHECK_EQ(count_rpc(log, "ping"), 0);
	CHECK_EQ(count_rpc(log, "notifications/initialized"), 0);
	json_decref(log);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
modern(void)
{
	modern_on(false);
	modern_on(true);
}

static void
legacy(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	json_t     *v;
	char       *out;
	int         rc;

	start_legacy(&p);
	add_http(rt, "old", p.port, true, "");
	v = view_of(rt, "old");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	CHECK(strcmp(vstr(v, "protocol_version"), "2025-11-25") == 0);
	json_decref(v);
	out = call_text(rt, "old", "echo", "{\"message\": \"classic\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "classic") != NULL);
	free(out);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
both(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	json_t     *v;

	start_modern(&p, "both", "60000");
	add_http(rt, "dual", p.port, true, "");
	v = view_of(rt, "dual");
	CHECK(strcmp(vstr(v, "protocol_version"), "2026-07-28") == 0);
	json_decref(v);
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "initialize"), 0);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
stdio_modern(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	char       *err = NULL, *out;
	json_t     *v;
	int         rc;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"modio\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s/modern.mjs\", \"stdio\"], \"envs\": [\"PATH\"]}, \"tools_to_execute\": [\"*\"]}",
	            peer_dir()),
	        0);
	v = view_of(rt, "modio");
	CHECK(strcmp(vstr(v, "protocol_version"), "2026-07-28") == 0);
	/* over stdio x-mcp-header means nothing: no tool is dropped */
	CHECK(has_tool(v, "bad_header"));
	json_decref(v);
	out = call_text(rt, "modio", "echo", "{\"message\": \"piped\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "piped") != NULL);
	free(out);
	rt_close(&rt, &sb);
}

static int
is_tools(const event *e, const void *arg)
{
	return (strcmp(e->topic, "tools") == 0 &&
	        strcmp(e->name, (const char *)arg) == 0);
}

/* subscriptions/listen over stdio, and again in the new process after a
 * reconnect: each listens, and its list_changed makes a relist (the
 * peer's admin endpoints on a port of the test's choosing). */
static void
stdio_listen(void)
{
	sub         sb;
	mk_runtime *rt   = rt_open(&sb);
	int         port = peer_free_port(), from;
	char       *err  = NULL;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"modlisten\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s/modern.mjs\", \"stdio\", \"--admin-port\", \"%d\"], \"envs\": [\"PATH\"]}, \"tools_to_execute\": [\"*\"]}",
	            peer_dir(), port),
	        0);
	for (int round = 0; round < 2; round++) {
		char body[96];
		wait_counter(port, "listens", 1);
		from = sub_at(&sb);
		snprintf(body, sizeof(body),
		         "{\"description\": \"round %d\", \"notify\": true}",
		         round);
		(void)admin(port, "/admin/tools", body, NULL);
		(void)wait_event(&sb, &from, is_tools, "modlisten",
		                 "the relist");
		if (round == 0) { /* a new process: it must listen again */
			CHECK_EQ(mk_client_reconnect(rt, "modlisten", &err),
			         0);
		}
	}
	rt_close(&rt, &sb);
}

/* A tool call on its own thread (input_required waits for the host). */
typedef struct bg {
	pthread_t   th;
	mk_runtime *rt;
	const char *client, *tool;
	char       *out;
	int         rc;
} bg;

static void *
bg_main(void *arg)
{
	bg *b = arg;

	b->out = call_text(b->rt, b->client, b->tool, NULL, &b->rc);
	return (NULL);
}

typedef struct input_match {
	const char *method;
} input_match;

static int
is_pending(const event *e, const void *arg)
{
	const input_match *m = arg;

	return (strcmp(e->topic, "input") == 0 &&
	        strcmp(e->state, "pending") == 0 &&
	        strcmp(e->method, m->method) == 0);
}

static void
mrtr(void)
{
	peer        p = {0};
	sub         sb;
	mk_options  o;
	mk_runtime *rt;
	bg          b    = {.client = "asks", .tool = "ask_name"};
	input_match m    = {"elicitation/create"};
	int         from = 0;
	event       e;
	json_t     *log, *first, *retry;

	rt_options(&o, NULL);
	o.inputs = MK_INPUT_ELICITATION | MK_INPUT_SAMPLING | MK_INPUT_ROOTS;
	o.roots  = "[{\"uri\": \"file:///srv/data\", \"name\": \"data\"}]";
	rt       = rt_open_options(&sb, &o);
	start_modern(&p, "modern", "60000");
	add_http(rt, "asks", p.port, false, "");
	b.rt = rt;
	CHECK_EQ(pthread_create(&b.th, NULL, bg_main, &b), 0);
	e = wait_event(&sb, &from, is_pending, &m, "the elicitation");
	CHECK(strcmp(e.message, "What is your name?") == 0);
	/* an empty form: the schema's default fills the name */
	CHECK_EQ(mk_input_answer(rt, "asks", e.request_id,
	                         "{\"action\": \"accept\", \"content\": {}}",
	                         NULL),
	         0);
	pthread_join(b.th, NULL);
	CHECK_EQ(b.rc, 0);
	CHECK(strstr(b.out, "hello anon") != NULL);
	free(b.out);
	log   = requests(&p);
	first = retry = NULL;
	for (size_t i = 0; i < json_array_size(log); i++) {
		json_t *r = json_array_get(log, i);
		if (strcmp(json_string_value(json_object_get(r, "rpc")),
		           "tools/call") == 0) {
			first = first == NULL ? r : first;
			retry = r;
		}
	}
	CHECK(first != retry);
	CHECK(json_object_get(first, "input_responses") == NULL ||
	      json_is_null(json_object_get(first, "input_responses")));
	CHECK(json_is_string(json_object_get(retry, "request_state")));
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(
	                             json_object_get(retry, "input_responses"),
	                             "name"),
	                     "action")),
	             "accept") == 0);
	CHECK(json_integer_value(json_object_get(first, "rpc_id")) !=
	      json_integer_value(json_object_get(retry, "rpc_id")));
	json_decref(log);

	/* a sampling input, answered by the host */
	b        = (bg) {.rt = rt, .client = "asks", .tool = "ask_sample"};
	m.method = "sampling/createMessage";
	CHECK_EQ(pthread_create(&b.th, NULL, bg_main, &b), 0);
	e = wait_event(&sb, &from, is_pending, &m, "the sampling");
	CHECK_EQ(
	        mk_input_answer(
	                rt, "asks", e.request_id,
	                "{\"role\": \"assistant\", \"content\": {\"type\": \"text\", \"text\": \"hi there\"}, \"model\": \"host\"}",
	                NULL),
	        0);
	pthread_join(b.th, NULL);
	CHECK(strstr(b.out, "sampled: hi there") != NULL);
	free(b.out);

	/* static roots: the input is answered at once, the retry follows */
	char *out = call_text(rt, "asks", "ask_roots", NULL, &b.rc);
	CHECK_EQ(b.rc, 0);
	CHECK(strstr(out, "roots: file:///srv/data") != NULL);
	free(out);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
listening(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt   = rt_open(&sb);
	int         from = 0;

	start_modern(&p, "modern", "60000");
	add_http(rt, "lsn", p.port, true, "");
	wait_counter(p.port, "listens", 1);
	from = sub_at(&sb);
	(void)admin(p.port, "/admin/tools",
	            "{\"description\": \"echo, changed\", \"notify\": true}",
	            NULL);
	(void)wait_event(&sb, &from, is_tools, "lsn", "the relist");
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* tools/list's ttlMs (1.5 s) is shorter than tool_sync_interval (10 m):
 * the list is read again by it. */
static void
ttl(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);

	start_modern(&p, "modern", "1500");
	add_http(rt, "fresh", p.port, true,
	         ", \"tool_sync_interval\": \"10m\"");
	wait_counter(p.port, "lists", 3); /* the connect's, then 2 refreshes */
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
reissue(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	json_t     *ids;
	char       *out;
	int         rc;

	start_modern(&p, "modern", "60000");
	add_http(rt, "brk", p.port, true, "");
	out = call_text(rt, "brk", "break_once", "{\"key\": \"a\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "ok after break") != NULL);
	free(out);
	ids = admin_json(p.port, "/admin/counters", NULL);
	CHECK_EQ(json_array_size(json_object_get(ids, "break_ids")), 2);
	CHECK(json_integer_value(
	              json_array_get(json_object_get(ids, "break_ids"), 0)) !=
	      json_integer_value(
	              json_array_get(json_object_get(ids, "break_ids"), 1)));
	json_decref(ids);
	/* not safe to run twice: not sent again, and its outcome is
	 * unknown (it may have run) */
	out = call_text(rt, "brk", "break_unsafe", "{\"key\": \"b\"}", &rc);
	CHECK_EQ(rc, MK_EUNKNOWN);
	CHECK(strstr(out, "ended before its result") != NULL);
	CHECK(strstr(out, "it may or may not have run") != NULL);
	free(out);
	ids = admin_json(p.port, "/admin/counters", NULL);
	CHECK_EQ(json_array_size(json_object_get(ids, "break_ids")), 3);
	json_decref(ids);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* The caller's trace context reaches a 2026-07-28 server's _meta; one
 * that is not W3C Trace Context does not. */
static void
trace(void)
{
	peer        p = {0};
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	mk_call     c  = {
	             .size = sizeof(mk_call), .client = "traced", .tool = "trace"};
	mk_trace good = {
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	        "rojo=00f067aa0ba902b7"};
	mk_trace bad = {
	        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	        "rojo=1"};
	mk_result *res = NULL;

	start_modern(&p, "modern", "60000");
	add_http(rt, "traced", p.port, false, "");
	c.trace = &good;
	CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
	CHECK(strstr(res->result, good.traceparent) != NULL &&
	      strstr(res->result, "rojo=00f067aa0ba902b7") != NULL);
	mk_result_free(&res);
	/* (the deprecated wrapper: its trace replaces the call's) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK_EQ(mk_tool_call_traced(rt, &c, &bad, &res), 0);
#pragma GCC diagnostic pop
	CHECK(strstr(res->result, "traceparent") == NULL &&
	      strstr(res->result, "rojo") == NULL);
	mk_result_free(&res);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* With telemetry the server's parent is the runtime's span of the call
 * (the caller's trace goes on through it, its vendor part as it came);
 * without a caller's context the call starts a trace the server joins. */
static void
trace_exported(void)
{
	peer       p = {0}, col = {0};
	sub        sb;
	mk_options o;
	char       url[64], want[64];
	mk_call    c = {
	           .size = sizeof(mk_call), .client = "spanned", .tool = "trace"};
	mk_trace good = {
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	        "rojo=00f067aa0ba902b7"};
	mk_result *res = NULL;

	CHECK_EQ(peer_start_otlp(&col, WAIT_MS), 0);
	start_modern(&p, "modern", "60000");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", col.port);
	rt_options(&o, NULL);
	o.otlp_endpoint = url;
	mk_runtime *rt  = rt_open_options(&sb, &o);
	add_http(rt, "spanned", p.port, false, "");
	c.trace = &good;
	CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
	json_t *seen = json_loads(res->result, 0, NULL);
	mk_result_free(&res);
	c.trace = NULL;
	CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
	json_t *fresh = json_loads(res->result, 0, NULL);
	mk_result_free(&res);
	rt_close(&rt, &sb); /* the close posts the spans */

	json_t     *all      = admin_json(col.port, "/spans", NULL);
	json_t     *calls[2] = {NULL, NULL}, *s;
	size_t      i, n = 0;
	const char *text[2];
	json_array_foreach(json_object_get(all, "spans"), i, s)
	{
		if (strcmp(json_string_value(json_object_get(s, "name")),
		           "tools/call") == 0 &&
		    n < 2) {
			calls[n++] = s;
		}
	}
	CHECK_EQ(n, 2);
	for (int k = 0; k < 2; k++) {
		json_t *r  = k == 0 ? seen : fresh;
		json_t *sc = json_array_get(json_object_get(r, "content"), 0);
		text[k]    = json_string_value(json_object_get(sc, "text"));
		CHECK(text[k] != NULL);
	}
	/* the first: the caller's trace, the span's parent the caller's */
	snprintf(want, sizeof(want), "00-%s-%s-01",
	         json_string_value(json_object_get(calls[0], "traceId")),
	         json_string_value(json_object_get(calls[0], "spanId")));
	CHECK(strcmp(json_string_value(json_object_get(calls[0], "traceId")),
	             "4bf92f3577b34da6a3ce929d0e0e4736") == 0);
	CHECK(strcmp(json_string_value(
	                     json_object_get(calls[0], "parentSpanId")),
	             "00f067aa0ba902b7") == 0);
	CHECK(strstr(text[0], want) != NULL);
	CHECK(strstr(text[0], "rojo=00f067aa0ba902b7") != NULL);
	/* the second: a new trace, the server's parent the call's span */
	snprintf(want, sizeof(want), "00-%s-%s-01",
	         json_string_value(json_object_get(calls[1], "traceId")),
	         json_string_value(json_object_get(calls[1], "spanId")));
	CHECK(json_object_get(calls[1], "parentSpanId") == NULL);
	CHECK(strstr(text[1], want) != NULL);
	json_decref(seen);
	json_decref(fresh);
	json_decref(all);
	peer_stop(&p);
	peer_stop(&col);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	RUN_IF(modern);
	RUN_IF(legacy);
	RUN_IF(both);
	RUN_IF(stdio_modern);
	RUN_IF(stdio_listen);
	RUN_IF(mrtr);
	RUN_IF(listening);
	RUN_IF(ttl);
	RUN_IF(reissue);
	RUN_IF(trace);
	RUN_IF(trace_exported);
	curl_global_cleanup();
	return (0);
}
