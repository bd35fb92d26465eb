/*
 * transport_test.c - the MCP client against real servers, per transport:
 *
 *   transport_test http    server-everything streamableHttp + inject.mjs
 *   transport_test sse     server-everything sse + flood.mjs
 *   transport_test stdio   server-everything stdio + inject.mjs stdio
 *
 * Every wait is the loop run until a callback sets a flag, bounded by a
 * deadline; nothing sleeps.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "testutil.h"
#include "tputil.h"
#include "transport/mcp.h"

#define RUN_ON(fn, arg)                                                       \
	do {                                                                  \
		fprintf(stderr, "-- %s\n", #fn);                              \
		fn(arg);                                                      \
	} while (0)

/* ---- the common suite --------------------------------------------------- */

static void
list_all_tools(client *c)
{
	outcome o = {0};

	CHECK_EQ(mcp_list_tools(c->s, NULL, on_result, &o, NULL), 0);
	CHECK_EQ(tp_loop_run(c->l, &o.done, WAIT_MS), 0);
	CHECK(!o.failed);
	json_t *tools = json_object_get(o.result, "tools");
	int     echo = 0, sum = 0;
	size_t  i;
	json_t *t;
	CHECK(json_array_size(tools) >= 10);
	json_array_foreach(tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		mcp_hints   h;
		CHECK(n != NULL);
		if (strcmp(n, "echo") == 0) {
			echo = 1;
			mcp_tool_hints(t, &h);
			CHECK(h.read_only && !h.destructive && h.idempotent &&
			      !h.open_world);
		}
		sum |= strcmp(n, "get-sum") == 0;
	}
	CHECK(echo && sum);
	outcome_fini(&o);
}

static void
basic_calls(client *c)
{
	outcome o;

	call(c, "echo", json_pack("{s:s}", "message", "hi there"), 0, &o);
	CHECK(!o.failed);
	CHECK(strcmp(first_text(o.result), "Echo: hi there") == 0);
	outcome_fini(&o);

	call(c, "get-sum", json_pack("{s:i, s:i}", "a", 2, "b", 40), 0, &o);
	CHECK(!o.failed);
	CHECK(strstr(first_text(o.result), "42") != NULL);
	outcome_fini(&o);

	/* an unknown tool is a result with isError, not a JSON-RPC error */
	call(c, "no-such-tool", NULL, 0, &o);
	CHECK(!o.failed);
	CHECK(json_is_true(json_object_get(o.result, "isError")));
	outcome_fini(&o);

	call(c, "trigger-long-running-operation",
	     json_pack("{s:i, s:i}", "duration", 1, "steps", 3), 0, &o);
	CHECK(!o.failed);
	CHECK_EQ(o.progress, 3);
	CHECK(strstr(first_text(o.result), "completed") != NULL);
	outcome_fini(&o);

	/* ping */
	memset(&o, 0, sizeof(o));
	CHECK_EQ(mcp_ping(c->s, NULL, on_result, &o, NULL), 0);
	CHECK_EQ(tp_loop_run(c->l, &o.done, WAIT_MS), 0);
	CHECK(!o.failed && json_is_object(o.result));
	outcome_fini(&o);
}

typedef struct many {
	outcome o[100]; /* one per call, matched by its own text */
} many;

static void
on_many(void *arg, const mcp_error *err, json_t *result)
{
	outcome    *o = arg;
	const char *t;

	o->done = 1;
	if (err != NULL) {
		o->failed = 1;
		o->err    = *err;
		return;
	}
	t          = first_text(result);
	o->matched = t != NULL && strncmp(t, "Echo: ", 6) == 0 &&
	        strcmp(t + 6, o->expect) == 0;
}

static void
concurrent_100(client *c)
{
	static many m;
	int         all = 0;

	memset(&m, 0, sizeof(m));
	for (int i = 0; i < 100; i++) {
		json_t *a;
		snprintf(m.o[i].expect, sizeof(m.o[i].expect), "message-%d",
		         i);
		a = json_pack("{s:s}", "message", m.o[i].expect);
		CHECK_EQ(mcp_call_tool(c->s, "echo", a, NULL, on_many, &m.o[i],
		                       NULL),
		         0);
		json_decref(a);
	}
	CHECK(mcp_session_pending(c->s) > 0);
	while (!all) {
		int stop = 0;
		CHECK(tp_loop_run(c->l, &stop, 50) == MK_ETIMEDOUT ||
		      stop == 0);
		all = 1;
		for (int i = 0; i < 100; i++) {
			all &= m.o[i].done;
		}
		if (mcp_session_pending(c->s) == 0) {
			break;
		}
	}
	for (int i = 0; i < 100; i++) {
		CHECK(m.o[i].done && !m.o[i].failed);
		CHECK(m.o[i].matched);
	}
}

static void
timeout_and_cancel(client *c, const char *slow_tool, json_t *slow_args)
{
	outcome o;
	int64_t id;

	/* a request whose answer does not come in time */
	call(c, slow_tool, json_incref(slow_args), 300, &o);
	CHECK(o.failed);
	CHECK_EQ(o.err.kind, MCP_E_TIMEOUT);
	CHECK(strstr(o.err.message, "tools/call timed out after 300 ms"));
	/* a caller that gives up */
	memset(&o, 0, sizeof(o));
	CHECK_EQ(mcp_call_tool(c->s, slow_tool, slow_args, NULL, on_result, &o,
	                       &id),
	         0);
	CHECK_EQ(mcp_cancel(c->s, id, "test gave up"), 0);
	CHECK(o.done && o.failed);
	CHECK_EQ(o.err.kind, MCP_E_CANCELLED);
	CHECK_EQ(mcp_cancel(c->s, id, NULL), MK_ENOENT);
	json_decref(slow_args);
	/* the session still works */
	call(c, "echo", json_pack("{s:s}", "message", "after"), 0, &o);
	CHECK(!o.failed);
	outcome_fini(&o);
}

static void
common_suite(client *c, const char *slow_tool, json_t *slow_args)
{
	CHECK(mcp_version_supported(mcp_session_version(c->s)));
	CHECK(json_is_object(mcp_session_server_info(c->s)));
	RUN_ON(list_all_tools, c);
	RUN_ON(basic_calls, c);
	RUN_ON(concurrent_100, c);
	fprintf(stderr, "-- timeout_and_cancel\n");
	timeout_and_cancel(c, slow_tool, slow_args);
}

/* ---- helpers for the servers ------------------------------------------ */

static const char *
everything_js(void)
{
	return (peer_everything_js());
}

static char *
inject_js(void)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/inject.mjs", peer_dir());
	return (path);
}

/* Starts server-everything in mode ("streamableHttp" or "sse") on port
 * (0: a free one). */
static void
start_everything(peer *p, const char *mode, int port)
{
	CHECK_EQ(peer_everything(p, mode, port, WAIT_MS), 0);
}

static void
url_of(char *buf, size_t len, const peer *p, const char *path)
{
	snprintf(buf, len, "http://127.0.0.1:%d%s", p->port, path);
}

/* notifications/tools/list_changed (sent on the request's own stream)
 * reaches the session owner as an event. */
static void
list_changed_event(client *c)
{
	outcome o;

	fprintf(stderr, "-- tools/list_changed becomes an event\n");
	call(c, "notify_list_changed", NULL, 0, &o);
	CHECK(!o.failed);
	CHECK_EQ(c->changed, 1);
	outcome_fini(&o);
}

/* ---- Streamable HTTP ---------------------------------------------------- */

static void
http_everything(void)
{
	peer       p = {0};
	client     c;
	mcp_config cfg = {.type = MCP_CONN_HTTP};
	char       url[128];
	outcome    o;

	start_everything(&p, "streamableHttp", 0);
	url_of(url, sizeof(url), &p, "/mcp");
	cfg.url = url;
	CHECK_EQ(open_client(&c, &cfg), 0);
	common_suite(&c, "trigger-long-running-operation",
	             json_pack("{s:i, s:i}", "duration", 5, "steps", 1));

	/* restart the server on the same port: our session is gone */
	fprintf(stderr, "-- server restarted\n");
	int port = p.port;
	peer_stop(&p);
	start_everything(&p, "streamableHttp", port);
	call(&c, "echo", json_pack("{s:s}", "message", "x"), 0, &o);
	CHECK(o.failed);
	CHECK_EQ(o.err.kind, MCP_E_GONE);
	fprintf(stderr, "   %s\n", o.err.message);
	close_client(&c);
	/* a fresh session works */
	CHECK_EQ(open_client(&c, &cfg), 0);
	call(&c, "echo", json_pack("{s:s}", "message", "x"), 0, &o);
	CHECK(!o.failed);
	outcome_fini(&o);
	close_client(&c);
	peer_stop(&p);
}

static void
http_inject(void)
{
	peer        p = {0};
	client      c;
	const char *conn_headers[] = {"X-Conn: c1", NULL};
	mcp_config  cfg            = {.type        = MCP_CONN_HTTP,
	                              .max_message = 1 << 20,
	                              .headers     = conn_headers};
	char        url[128];
	outcome     o;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	url_of(url, sizeof(url), &p, "/mcp");
	cfg.url = url;
	CHECK_EQ(open_client(&c, &cfg), 0);

	fprintf(stderr, "-- structured and isError results kept\n");
	call(&c, "structured", NULL, 0, &o);
	CHECK(!o.failed);
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(o.result, "structuredContent"),
	                 "answer")),
	         42);
	outcome_fini(&o);
	call(&c, "fail", NULL, 0, &o);
	CHECK(!o.failed && json_is_true(json_object_get(o.result, "isError")));
	CHECK(strcmp(first_text(o.result), "it failed") == 0);
	outcome_fini(&o);

	fprintf(stderr, "-- headers: per connection and per request\n");
	{
		const char  *req[] = {"X-Req: r1", NULL};
		mcp_req_opts ro    = {.headers = req};
		json_t      *seen;
		memset(&o, 0, sizeof(o));
		CHECK_EQ(mcp_call_tool(c.s, "headers", NULL, &ro, on_result,
		                       &o, NULL),
		         0);
		CHECK_EQ(tp_loop_run(c.l, &o.done, WAIT_MS), 0);
		CHECK(!o.failed);
		seen = json_loads(first_text(o.result), 0, NULL);
		CHECK(strcmp(json_string_value(
		                     json_object_get(seen, "x-conn")),
		             "c1") == 0);
		CHECK(strcmp(json_string_value(json_object_get(seen, "x-req")),
		             "r1") == 0);
		json_decref(seen);
		outcome_fini(&o);
		call(&c, "headers", NULL, 0, &o);
		seen = json_loads(first_text(o.result), 0, NULL);
		CHECK(json_object_get(seen, "x-req") == NULL);
		CHECK(json_object_get(seen, "x-conn") != NULL);
		json_decref(seen);
		outcome_fini(&o);
	}

	list_changed_event(&c);

	fprintf(stderr, "-- close sends DELETE: the server forgets us\n");
	{
		client c2;
		int    n = admin(p.port, "/admin/sessions", NULL, "sessions");
		CHECK_EQ(open_client(&c2, &cfg), 0);
		CHECK_EQ(admin(p.port, "/admin/sessions", NULL, "sessions"),
		         n + 1);
		mcp_session_free(&c2.s);
		for (int i = 0; i < 100 &&
		     admin(p.port, "/admin/sessions", NULL, "sessions") != n;
		     i++) {
			int none = 0;
			(void)tp_loop_run(c2.l, &none, 50);
		}
		CHECK_EQ(admin(p.port, "/admin/sessions", NULL, "sessions"),
		         n);
		tp_loop_free(&c2.l);
	}

	fprintf(stderr, "-- a response over the size limit\n");
	call(&c, "big", json_pack("{s:i}", "bytes", 2 << 20), 0, &o);
	CHECK(o.failed && o.err.kind == MCP_E_PROTOCOL);
	CHECK(strstr(o.err.message, "size limit") != NULL);
	call(&c, "big", json_pack("{s:i}", "bytes", 1000), 0, &o);
	CHECK(!o.failed && strlen(first_text(o.result)) == 1000);
	outcome_fini(&o);

	fprintf(stderr, "-- the server forgets the session\n");
	(void)admin(p.port, "/admin/drop-sessions", "{}", NULL);
	call(&c, "echo", json_pack("{s:s}", "message", "x"), 0, &o);
	CHECK(o.failed && o.err.kind == MCP_E_GONE);
	CHECK_EQ(o.err.http_status, 404);
	close_client(&c);

	fprintf(stderr, "-- the server is killed mid-call\n");
	CHECK_EQ(open_client(&c, &cfg), 0);
	memset(&o, 0, sizeof(o));
	CHECK_EQ(mcp_call_tool(c.s, "hang", NULL, NULL, on_result, &o, NULL),
	         0);
	{
		int none = 0;
		(void)tp_loop_run(c.l, &none, 300); /* the call is in */
	}
	peer_stop(&p);
	CHECK_EQ(tp_loop_run(c.l, &o.done, WAIT_MS), 0);
	CHECK(o.failed);
	CHECK(o.err.kind == MCP_E_LOST || o.err.kind == MCP_E_CONNECT);
	fprintf(stderr, "   %s: %s\n", mcp_errkind_name(o.err.kind),
	        o.err.message);
	close_client(&c);

	fprintf(stderr, "-- nobody listens\n");
	CHECK_EQ(open_client(&c, &cfg), MCP_E_CONNECT);
	close_client(&c);
}

/* ---- legacy SSE --------------------------------------------------------- */

static void
sse_everything(void)
{
	peer       p = {0};
	client     c;
	mcp_config cfg = {.type = MCP_CONN_SSE};
	char       url[128];

	start_everything(&p, "sse", 0);
	url_of(url, sizeof(url), &p, "/sse");
	cfg.url = url;
	CHECK_EQ(open_client(&c, &cfg), 0);
	common_suite(&c, "trigger-long-running-operation",
	             json_pack("{s:i, s:i}", "duration", 5, "steps", 1));

	fprintf(stderr, "-- the stream is closed\n");
	peer_stop(&p);
	CHECK_EQ(tp_loop_run(c.l, &c.lost, WAIT_MS), 0);
	CHECK_EQ(c.lost_err.kind, MCP_E_LOST);
	fprintf(stderr, "   %s\n", c.lost_err.message);
	CHECK(!mcp_session_ready(c.s));
	close_client(&c);

	fprintf(stderr, "-- nobody listens\n");
	CHECK_EQ(open_client(&c, &cfg), MCP_E_CONNECT);
	close_client(&c);
}

/* Starts test/peers/flood.mjs (a legacy SSE server) and opens a session
 * to it with the given stream rate limit (0: the defaults). */
static void
open_flood(client *c, peer *p, char *url, size_t len, uint32_t rate,
           uint32_t burst)
{
	char        js[512];
	const char *argv[] = {"node", js, "--port", "0", NULL};
	mcp_config  cfg    = {.type         = MCP_CONN_SSE,
	                      .url          = url,
	                      .stream_rate  = rate,
	                      .stream_burst = burst};

	snprintf(js, sizeof(js), "%s/flood.mjs", peer_dir());
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	url_of(url, len, p, "/sse");
	CHECK_EQ(open_client(c, &cfg), 0);
}

/* Calls flood.mjs's flood tool: events notifications on the stream. */
static void
flood(client *c, int events, outcome *o)
{
	call(c, "flood", json_pack("{s:i}", "events", events), 120000, o);
}

/* A stream is limited per event and per time, never in total: 150,000
 * events (more than any per-response count) leave it working. */
static void
sse_long_stream(void)
{
	peer    p = {0};
	client  c;
	char    url[128];
	outcome o;

	/* a rate no test machine reaches: only a total could stop it */
	open_flood(&c, &p, url, sizeof(url), 1000000, 1000000);
	flood(&c, 150000, &o);
	if (o.failed) {
		fprintf(stderr, "   %s\n", o.err.message);
	}
	CHECK(!o.failed);
	CHECK(strcmp(first_text(o.result), "flooded 150000") == 0);
	outcome_fini(&o);
	call(&c, "echo", json_pack("{s:s}", "message", "still up"), 0, &o);
	CHECK(!o.failed && strcmp(first_text(o.result), "still up") == 0);
	outcome_fini(&o);
	CHECK(!c.lost && mcp_session_ready(c.s));
	close_client(&c);
	peer_stop(&p);
}

/* A flood over the stream's rate ends the stream with an error that
 * names the rate. */
static void
sse_flood_over_rate(void)
{
	peer    p = {0};
	client  c;
	char    url[128];
	outcome o;

	/* 100 a second: the 5,000 events the peer writes at once exceed it
	 * whatever the machine's speed */
	open_flood(&c, &p, url, sizeof(url), 100, 100);
	flood(&c, 5000, &o);
	CHECK(o.failed);
	CHECK_EQ(tp_loop_run(c.l, &c.lost, WAIT_MS), 0);
	fprintf(stderr, "   %s: %s\n", mcp_errkind_name(c.lost_err.kind),
	        c.lost_err.message);
	CHECK_EQ(c.lost_err.kind, MCP_E_LOST);
	CHECK(strstr(c.lost_err.message,
	             "the stream exceeded 100 events per second") != NULL);
	CHECK(strstr(c.lost_err.message, "size limit") == NULL);
	CHECK(!mcp_session_ready(c.s));
	close_client(&c);
	peer_stop(&p);
}

/* ---- stdio -------------------------------------------------------------- */

/* Our children that are zombies now. */
static int
zombies(void)
{
	DIR           *d = opendir("/proc");
	struct dirent *e;
	int            n = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char  path[300], buf[512];
		FILE *f;
		int   ppid;
		char  st;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if ((f = fopen(path, "r")) == NULL) {
			continue;
		}
		if (fgets(buf, sizeof(buf), f) != NULL) {
			char *rp = strrchr(buf, ')');
			if (rp != NULL &&
			    sscanf(rp + 2, "%c %d", &st, &ppid) == 2 &&
			    ppid == getpid() && st == 'Z') {
				n++;
			}
		}
		fclose(f);
	}
	if (d != NULL) {
		closedir(d);
	}
	return (n);
}

static void
stdio_everything(void)
{
	const char *args[] = {everything_js(), "stdio", NULL};
	mcp_config  cfg    = {
	            .type = MCP_CONN_STDIO, .command = "node", .args = args};
	client c;

	CHECK_EQ(open_client(&c, &cfg), 0);
	common_suite(&c, "trigger-long-running-operation",
	             json_pack("{s:i, s:i}", "duration", 5, "steps", 1));
	close_client(&c);
	CHECK_EQ(zombies(), 0);
}

static void
stdio_inject(void)
{
	const char *args[] = {inject_js(), "stdio", NULL};
	mcp_config  cfg    = {.type        = MCP_CONN_STDIO,
	                      .command     = "node",
	                      .args        = args,
	                      .max_message = 64 * 1024};
	client      c;
	outcome     o;

	CHECK_EQ(open_client(&c, &cfg), 0);
	fprintf(stderr, "-- garbage on stdout is skipped\n");
	call(&c, "garbage", NULL, 0, &o);
	CHECK(!o.failed && strcmp(first_text(o.result), "ok") == 0);
	outcome_fini(&o);
	call(&c, "echo", json_pack("{s:s}", "message", "still"), 0, &o);
	CHECK(!o.failed && strcmp(first_text(o.result), "still") == 0);
	outcome_fini(&o);

	list_changed_event(&c);

	fprintf(stderr, "-- the child exits mid-call\n");
	call(&c, "exit", NULL, 0, &o);
	CHECK(o.failed && o.err.kind == MCP_E_LOST);
	CHECK(strstr(o.err.message, "exited with status 3") != NULL);
	CHECK(c.lost);
	close_client(&c);
	CHECK_EQ(zombies(), 0);

	fprintf(stderr, "-- a line over the size limit\n");
	CHECK_EQ(open_client(&c, &cfg), 0);
	call(&c, "big", json_pack("{s:i}", "bytes", 100000), 0, &o);
	CHECK(o.failed && o.err.kind == MCP_E_PROTOCOL);
	CHECK(strstr(o.err.message, "stdout line over 65536 bytes") != NULL);
	close_client(&c);

	fprintf(stderr, "-- a hung call times out; cancel\n");
	CHECK_EQ(open_client(&c, &cfg), 0);
	timeout_and_cancel(&c, "hang", json_object());
	close_client(&c);
	CHECK_EQ(zombies(), 0);
}

static void
stdio_process(void)
{
	const char *fds[] = {
	        "-c", "ls /proc/self/fd | tr '\\n' ' ' >&2; exit 7", NULL};
	const char *envs[] = {"MK_SET=x", "MK_INHERIT", NULL};
	const char *show[] = {
	        "-c",
	        "echo \"$MK_SET-$MK_INHERIT-${MK_SECRET:-unset}\" >&2; exit 1",
	        NULL};
	mcp_config cfg = {.type = MCP_CONN_STDIO, .command = "sh"};
	client     c;

	fprintf(stderr, "-- the child gets fds 0-2 only; stderr in errors\n");
	cfg.args = fds;
	CHECK_EQ(open_client(&c, &cfg), MCP_E_LOST);
	CHECK(strstr(c.err.message, "exited with status 7; stderr: 0 1 2 3") !=
	      NULL);
	close_client(&c);

	fprintf(stderr, "-- environment: listed names only\n");
	setenv("MK_INHERIT", "y", 1);
	setenv("MK_SECRET", "leak", 1);
	cfg.args = show;
	cfg.envs = envs;
	CHECK_EQ(open_client(&c, &cfg), MCP_E_LOST);
	CHECK(strstr(c.err.message, "stderr: x-y-unset") != NULL);
	close_client(&c);

	fprintf(stderr, "-- a server that never answers the handshake\n");
	const char *mute[] = {"-c", "exec sleep 30", NULL};
	cfg.args           = mute;
	cfg.envs           = NULL;
	cfg.timeout_ms     = 300;
	CHECK_EQ(open_client(&c, &cfg), MCP_E_TIMEOUT);
	CHECK(strcmp(c.err.message,
	             "the server did not answer initialize within 300 ms") ==
	      0);
	close_client(&c);
	cfg.timeout_ms = 0;

	fprintf(stderr, "-- a command that does not exist\n");
	cfg.command = "/nonexistent/mcp-server";
	cfg.args    = NULL;
	CHECK_EQ(open_client(&c, &cfg), MCP_E_CONNECT);
	CHECK(strstr(c.err.message, "cannot start") != NULL);
	close_client(&c);
	CHECK_EQ(zombies(), 0);
}

/* A loop that rests: idle for its rest time, it gives back curl's multi
 * handle, the wake-up pair and the connection (and the session's kept
 * curl handles); the next call makes them again and works; another rest
 * gives them back again. */
static void
http_rest(void)
{
	peer       p = {0};
	client     c;
	mcp_config cfg = {.type = MCP_CONN_HTTP};
	char       url[128];
	outcome    o;
	int        awake;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	url_of(url, sizeof(url), &p, "/mcp");
	cfg.url = url;
	CHECK_EQ(open_client(&c, &cfg), 0);
	tp_loop_set_rest(c.l, 50);
	for (int round = 0; round < 2; round++) {
		call(&c, "echo", json_pack("{s:s}", "message", "x"), 0, &o);
		CHECK(!o.failed);
		outcome_fini(&o);
		CHECK(!tp_loop_resting(c.l));
		awake         = peer_open_fds();
		int64_t until = tp_now_ns() + (int64_t)WAIT_MS * 1000000;
		while (!tp_loop_resting(c.l) && tp_now_ns() < until) {
			(void)tp_loop_wait(c.l, NULL, 0, 100);
		}
		CHECK(tp_loop_resting(c.l));
		/* the wake-up pair and the connection */
		CHECK(peer_open_fds() <= awake - 3);
	}
	close_client(&c);
	peer_stop(&p);
}

int
main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN); /* a test process, not the library */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	if (strcmp(which, "http") == 0) {
		RUN(http_everything);
		RUN(http_inject);
		RUN(http_rest);
	} else if (strcmp(which, "sse") == 0) {
		RUN(sse_everything);
		RUN(sse_long_stream);
		RUN(sse_flood_over_rate);
	} else if (strcmp(which, "stdio") == 0) {
		RUN(stdio_everything);
		RUN(stdio_inject);
		RUN(stdio_process);
	} else {
		fprintf(stderr, "usage: transport_test http|sse|stdio\n");
		return (2);
	}
	curl_global_cleanup();
	return (0);
}
