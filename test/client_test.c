/*
 * client_test.c - client actors and the supervisor through the public API,
 * against real servers, observed on the state stream.
 *
 * Waits are on the state stream (a subscriber thread collects events and
 * signals a condition) or on API calls; each has a deadline.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/kernel.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "mcpkeep.h"
#include "model/config.h"
#include "peer.h"
#include "rtutil.h"
#include "runtime/runtime_impl.h"
#include "testutil.h"

static char js[512];

static void
start_everything(peer *p, const char *mode, int port)
{
	CHECK_EQ(peer_everything(p, mode, port, WAIT_MS), 0);
}

/* ---- SPEC section 1: modes ------------------------------------------------
 */

static void
modes_table(void)
{
	sub         sb;
	mk_runtime *rt   = rt_open(&sb);
	peer        http = {0}, sse = {0};
	char       *err = NULL;
	json_t     *v;
	int         rc;

	start_everything(&http, "streamableHttp", peer_free_port());
	start_everything(&sse, "sse", peer_free_port());

	/* none + http, stickiness omitted: per-call, discovered on add */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_http\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
	            http.port),
	        0);
	v = view_of(rt, "m_http");
	CHECK(strcmp(vstr(v, "connection_mode"), "per_call") == 0);
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	CHECK(json_array_size(json_object_get(v, "tools")) >= 10);
	json_decref(v);
	/* per-call: reconnect has nothing to reconnect */
	CHECK_EQ(mk_client_reconnect(rt, "m_http", &err), MK_EINVAL);
	CHECK(strcmp(err,
	             "client uses per-call connections; there is no persistent connection to reconnect") ==
	      0);
	mk_free(err);
	/* a per-call call dials, calls, closes */
	char *t =
	        call_text(rt, "m_http", "echo", "{\"message\": \"pc\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(t, "Echo: pc") != NULL);
	free(t);

	/* headers + http, stickiness true: sticky (header values redacted;
	 * a config file's env. reference shown as the reference) */
	setenv("MK_TEST_SECRET", "s3cr3t-value", 1);
	char file[1024];
	snprintf(
	        file, sizeof(file),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"m_sticky\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"headers\", \"headers\": {\"X-Key\": \"literal-secret\", \"X-Env\": \"env.MK_TEST_SECRET\"}, \"needs_session_stickiness\": true, \"tools_to_execute\": [\"echo\"]}]}}",
	        http.port);
	CHECK_EQ(mk_runtime_load(rt, file, &err), 0);
	v = view_of(rt, "m_sticky");
	CHECK(strcmp(vstr(v, "connection_mode"), "sticky") == 0);
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	{
		char *dump = json_dumps(v, 0);
		CHECK(strstr(dump, "literal-secret") == NULL);
		CHECK(strstr(dump, "s3cr3t-value") == NULL);
		CHECK(strstr(dump, "env.MK_TEST_SECRET") != NULL);
		free(dump);
	}
	json_decref(v);
	/* tools_to_execute filters */
	t = call_text(rt, "m_sticky", "get-sum", "{\"a\": 1, \"b\": 2}", &rc);
	CHECK_EQ(rc, MK_EINVAL);
	CHECK(strstr(t, "not in tools_to_execute") != NULL);
	free(t);
	t = call_text(rt, "m_sticky", "echo", "{\"message\": \"st\"}", &rc);
	CHECK_EQ(rc, 0);
	free(t);
	t = call_text(rt, "nobody", "echo", NULL, &rc);
	CHECK_EQ(rc, MK_ENOENT);
	free(t);

	/* none + sse: sticky; sse/stdio + stickiness false: rejected */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_sse\", \"connection_type\": \"sse\", \"connection_string\": \"http://127.0.0.1:%d/sse\"}",
	            sse.port),
	        0);
	v = view_of(rt, "m_sse");
	CHECK(strcmp(vstr(v, "connection_mode"), "sticky") == 0);
	json_decref(v);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_sse_false\", \"connection_type\": \"sse\", \"connection_string\": \"http://127.0.0.1:%d/sse\", \"needs_session_stickiness\": false}",
	            sse.port),
	        MK_EINVAL);
	CHECK(strcmp(err,
	             "needs_session_stickiness cannot be false for connection_type \"sse\": only 'http' supports a per-call connection") ==
	      0);
	mk_free(err);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_stdio_false\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\"}, \"auth_type\": \"oauth\", \"needs_session_stickiness\": false}"),
	        MK_EINVAL);
	CHECK(strcmp(err,
	             "needs_session_stickiness cannot be false for connection_type \"stdio\": only 'http' supports a per-call connection") ==
	      0);
	mk_free(err);

	/* none + stdio: sticky */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_stdio\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"node\", \"args\": [\"%s\", \"stdio\"]}}",
	            js),
	        0);
	v = view_of(rt, "m_stdio");
	CHECK(strcmp(vstr(v, "connection_mode"), "sticky") == 0);
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);

	/* oauth (server-level) + http: per-call, pending verification */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_oauth\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:1/mcp\", \"auth_type\": \"oauth\", \"oauth_config\": {}}"),
	        0);
	v = view_of(rt, "m_oauth");
	CHECK(strcmp(vstr(v, "connection_mode"), "per_call") == 0);
	CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
	CHECK(json_object_get(v, "last_failure") == NULL);
	json_decref(v);
	t = call_text(rt, "m_oauth", "echo", NULL, &rc);
	CHECK_EQ(rc, MK_ESTATE);
	free(t);

	/* per-user types: always per-call, stickiness ignored */
	static const char *pu[][3] = {
	        {"m_pu_headers", "per_user_headers", "sse"},
	        {"m_pu_oauth", "per_user_oauth", "stdio"},
	        {"m_exchange", "token_exchange", "http"},
	};
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"%s\", \"connection_string\": \"http://127.0.0.1:1/x\", \"stdio_config\": {\"command\": \"true\"}, \"auth_type\": \"%s\", \"needs_session_stickiness\": %s}",
		            pu[i][0], pu[i][2], pu[i][1],
		            i == 0 ? "false" : "true"),
		        0);
		v = view_of(rt, pu[i][0]);
		CHECK(strcmp(vstr(v, "connection_mode"), "per_call") == 0);
		CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
		json_decref(v);
	}

	/* a user's add of a sticky client that cannot connect: not kept */
	CHECK(add(rt, &err,
	          "{\"name\": \"m_dead\", \"connection_type\": \"sse\", \"connection_string\": \"http://127.0.0.1:%d/sse\"}",
	          peer_free_port()) == MK_EUPSTREAM);
	CHECK(strstr(err, "cannot connect to MCP client m_dead") != NULL);
	mk_free(err);
	CHECK_EQ(mk_client_remove(rt, "m_dead", &err), MK_ENOENT);
	mk_free(err);
	/* duplicate name */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_sse\", \"connection_type\": \"sse\", \"connection_string\": \"http://127.0.0.1:1/sse\"}"),
	        MK_EEXIST);
	mk_free(err);
	/* unknown field, named */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"m_bad\", \"connection_type\": \"http\", \"connection_string\": \"http://x/\", \"colour\": 1}"),
	        MK_EINVAL);
	CHECK(strcmp(err, "client \"m_bad\": unknown field \"colour\"") == 0);
	mk_free(err);

	/* remove */
	CHECK_EQ(mk_client_remove(rt, "m_stdio", &err), 0);
	t = call_text(rt, "m_stdio", "echo", NULL, &rc);
	CHECK_EQ(rc, MK_ENOENT);
	free(t);
	rt_close(&rt, &sb);
	peer_stop(&http);
	peer_stop(&sse);
}

/* ---- SPEC sections 2-5: lifecycles ------------------------------------ */

/* Boot with a dead server, then it comes up, then it dies and returns. */
/* RFC 3339 UTC ("2026-09-03T10:41:12.345Z") in ms since the epoch. */
static int64_t
rfc3339_ms(const char *t)
{
	struct tm tm = {0};
	char     *rest;

	rest = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
	CHECK(rest != NULL && rest[0] == '.' && rest[4] == 'Z');
	return ((int64_t)timegm(&tm) * 1000 + strtol(rest + 1, NULL, 10));
}

/* The list says when a healthy client's next check is due: at most its
 * interval (+10%) from now.  (Between a tick and its check's end it has
 * none: the view is read again.) */
static void
next_check_due(mk_runtime *rt, const char *name, int64_t interval_ms)
{
	for (int i = 0; i < 400; i++) {
		json_t         *v = view_of(rt, name);
		const char     *n = vstr(v, "next_check_at");
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		if (*n != '\0') {
			int64_t ms = now.tv_sec * 1000 + now.tv_nsec / 1000000;
			CHECK(rfc3339_ms(n) <= ms + interval_ms * 11 / 10 + 1);
			CHECK(rfc3339_ms(n) > ms - 60000);
			json_decref(v);
			return;
		}
		json_decref(v);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the view, not synchronising */
	}
	CHECK(!"a healthy client's view says when its next check is");
}

static void
boot_dead_then_heal(void)
{
	sub         sb, sb2;
	mk_runtime *rt   = rt_open(&sb);
	peer        p    = {0};
	int         port = peer_free_port(), at = 0, at2 = 0;
	char        cfg[1024], *err = NULL;
	event       e;
	json_t     *v;

	sub_open(&sb2, mk_stream_url(rt)); /* a second subscriber */
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"mcp\": {\"client_configs\": [{\"name\": \"b_http\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\"}]}}",
	        port);
	CHECK_EQ(mk_runtime_load(rt, cfg, &err), 0);
	e = wait_state(&sb, &at, "b_http", "unstable", "connect");
	CHECK(e.old_state[0] == '\0'); /* a new client's first state */
	CHECK(strstr(e.message, "Failed to connect") != NULL);
	/* the view says when the next connect is due (between attempts) */
	for (int i = 0; i < 400; i++) {
		v              = view_of(rt, "b_http");
		const char *nr = vstr(v, "next_retry_at");
		if (nr != NULL && *nr != '\0') {
			CHECK(strlen(nr) == 24 && nr[23] == 'Z');
			CHECK(strcmp(nr,
			             vstr(json_object_get(v, "last_failure"),
			                  "at")) >= 0);
			json_decref(v);
			break;
		}
		json_decref(v);
		CHECK(i < 399);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the view, not synchronising */
	}

	fprintf(stderr, "   the server comes up\n");
	start_everything(&p, "streamableHttp", port);
	e = wait_state(&sb, &at, "b_http", "healthy", NULL);
	CHECK(strcmp(e.old_state, "unstable") == 0);
	CHECK(e.stage[0] == '\0');
	v = view_of(rt, "b_http");
	CHECK(json_object_get(v, "last_failure") == NULL);
	CHECK(json_object_get(v, "next_retry_at") == NULL);
	json_decref(v);
	next_check_due(rt, "b_http", 1000);

	fprintf(stderr, "   the server is killed\n");
	peer_stop(&p);
	e = wait_state(&sb, &at, "b_http", "unstable", NULL);
	CHECK(strcmp(e.stage, "ping") == 0 ||
	      strcmp(e.stage, "list_tools") == 0);
	char since[40];
	snprintf(since, sizeof(since), "%s", e.since);
	/* a later failed check moves "at" but keeps "since" */
	for (int i = 0; i < 400; i++) {
		v             = view_of(rt, "b_http");
		json_t *lf    = json_object_get(v, "last_failure");
		int     moved = strcmp(vstr(lf, "at"), vstr(lf, "since")) != 0;
		if (moved) {
			CHECK(strcmp(vstr(lf, "since"), since) == 0);
			json_decref(v);
			break;
		}
		json_decref(v);
		CHECK(i < 399);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the view, not synchronising */
	}

	fprintf(stderr, "   the server is back\n");
	start_everything(&p, "streamableHttp", port);
	e = wait_state(&sb, &at, "b_http", "healthy", NULL);
	v = view_of(rt, "b_http");
	CHECK(json_object_get(v, "last_failure") == NULL);
	json_decref(v);

	/* the second subscriber saw the same transitions in the same order */
	wait_state(&sb2, &at2, "b_http", "healthy", NULL);
	wait_state(&sb2, &at2, "b_http", "unstable", NULL);
	wait_state(&sb2, &at2, "b_http", "healthy", NULL);
	pthread_mutex_lock(&sb.mtx);
	pthread_mutex_lock(&sb2.mtx);
	{
		int i = 0, j = 0;
		for (;;) {
			while (i < sb.n &&
			       strcmp(sb.ev[i].topic, "state") != 0) {
				i++;
			}
			while (j < sb2.n &&
			       strcmp(sb2.ev[j].topic, "state") != 0) {
				j++;
			}
			if (i >= sb.n || j >= sb2.n) {
				break;
			}
			CHECK(strcmp(sb.ev[i].state, sb2.ev[j].state) == 0);
			CHECK(strcmp(sb.ev[i].old_state,
			             sb2.ev[j].old_state) == 0);
			i++;
			j++;
		}
	}
	pthread_mutex_unlock(&sb2.mtx);
	pthread_mutex_unlock(&sb.mtx);
	sub_close(&sb2);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
sse_transport_lost(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	int         at  = 0;
	char       *err = NULL;
	event       e;

	start_everything(&p, "sse", peer_free_port());
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"s_sse\", \"connection_type\": \"sse\", \"connection_string\": \"http://127.0.0.1:%d/sse\"}",
	            p.port),
	        0);
	wait_state(&sb, &at, "s_sse", "healthy", NULL);
	peer_stop(&p);
	e = wait_state(&sb, &at, "s_sse", "unstable", "transport_lost");
	CHECK(strstr(e.message, "SSE stream lost") != NULL);
	rt_close(&rt, &sb);
}

/* stderr with newlines and tabs ends up normalised in last_failure. */
static void
message_normalised(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	int         at  = 0;
	char       *err = NULL;
	event       e;

	CHECK_EQ(
	        mk_runtime_load(
	                rt,
	                "{\"mcp\": {\"client_configs\": [{\"name\": \"n_sh\", \"connection_type\": \"stdio\", \"stdio_config\": {\"command\": \"sh\", \"args\": [\"-c\", \"printf 'first line\\\\n\\\\tsecond\\\\t\\\\tline' >&2; exit 3\"]}}]}}",
	                &err),
	        0);
	e = wait_state(&sb, &at, "n_sh", "unstable", "connect");
	CHECK(strcmp(e.message,
	             "server process exited with status 3; stderr: first line second line") ==
	      0);
	rt_close(&rt, &sb);
}

/* A proxy's HTML error page is said as its status and title, not as
 * markup. */
static void
html_error_page(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p  = {0};
	char        ijs[512], *err = NULL;
	const char *argv[] = {"node", ijs, "http", "--port", "0", NULL};
	int         at     = 0;
	event       e;

	snprintf(ijs, sizeof(ijs), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(&p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"proxied\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\"}",
	            p.port),
	        0);
	wait_state(&sb, &at, "proxied", "healthy", NULL);
	admin(p.port, "/admin/ping-mode", "{\"status\": 502, \"html\": true}",
	      NULL);
	e = wait_state(&sb, &at, "proxied", "unstable", NULL);
	CHECK(strstr(e.message, "HTTP 502: 502 Bad Gateway (an HTML page)") !=
	      NULL);
	CHECK(strchr(e.message, '<') == NULL);
	admin(p.port, "/admin/ping-mode", "{}", NULL);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

typedef struct batch {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done, ok, bad;
	const char     *want; /* a good result holds it; NULL: "completed" */
} batch;

static void
on_done(void *arg, int rc, mk_result *res)
{
	batch *b = arg;

	pthread_mutex_lock(&b->mtx);
	b->done++;
	if (rc == 0 && res != NULL && res->result != NULL &&
	    strstr(res->result, b->want != NULL ? b->want : "completed") !=
	            NULL) {
		b->ok++;
	} else {
		b->bad++;
		if (b->bad < 5) {
			fprintf(stderr, "   call failed: %d %s\n", rc,
			        res && res->error ? res->error : "");
		}
	}
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mtx);
	mk_result_free(&res);
}

/* Waits until n of b's calls answered. */
static void
batch_wait(batch *b, int n)
{
	pthread_mutex_lock(&b->mtx);
	while (b->done < n) {
		pthread_cond_wait(&b->cv, &b->mtx);
	}
	pthread_mutex_unlock(&b->mtx);
}

/* A call to client name that waits 300 ms for a slot and is refused
 * (MK_EBUSY) with an error that begins "MCP client <name> <want>". */
static void
late_refused(mk_runtime *rt, const char *name, const char *want)
{
	char       head[512];
	mk_result *res = NULL;
	mk_call    e   = {.size       = sizeof(mk_call),
	                  .client     = name,
	                  .tool       = "echo",
	                  .arguments  = "{\"message\": \"late\"}",
	                  .timeout_ms = 300};

	CHECK_EQ(mk_tool_call(rt, &e, &res), MK_EBUSY);
	snprintf(head, sizeof(head), "MCP client %s %s", name, want);
	if (strncmp(res->error, head, strlen(head)) != 0) {
		fprintf(stderr, "got: %s\n", res->error);
	}
	CHECK(strncmp(res->error, head, strlen(head)) == 0);
	CHECK(strstr(res->error, "; try again later") != NULL);
	mk_result_free(&res);
}

/* What a call's progress callback saw. */
typedef struct seen {
	int    n;     /* notifications */
	double last;  /* the last progress */
	double total; /* its total */
	bool   order; /* each above the one before */
} seen;

static void
on_progress(void *arg, double progress, double total, const char *message)
{
	seen *s = arg;

	s->order = s->order && progress > s->last;
	s->last  = progress;
	s->total = total;
	s->n++;
}

/* mk_call.progress: the server's notifications/progress reach the
 * caller in order and before the answer, on a sticky client and on a
 * per-call one. */
static void
progress_api(void)
{
	sub         sb;
	mk_runtime *rt      = rt_open(&sb);
	peer        p       = {0};
	char       *err     = NULL;
	const char *names[] = {"pgs", "pgp"};

	start_everything(&p, "streamableHttp", peer_free_port());
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"]}",
		            names[k], p.port, k == 0 ? "true" : "false"),
		        0);
		seen       s   = {.order = true};
		mk_result *res = NULL;
		mk_call    c   = {.size      = sizeof(mk_call),
		                  .client    = names[k],
		                  .tool      = "trigger-long-running-operation",
		                  .arguments = "{\"duration\": 0.4, \"steps\": 4}",
		                  .progress     = on_progress,
		                  .progress_arg = &s};
		CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
		CHECK(strstr(res->result, "Steps: 4") != NULL);
		mk_result_free(&res);
		/* every one before the answer, in order */
		CHECK_EQ(s.n, 4);
		CHECK(s.order && s.last == 4 && s.total == 4);
	}
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
make_before_break(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	batch       b   = {PTHREAD_MUTEX_INITIALIZER,
	                   PTHREAD_COND_INITIALIZER,
	                   0,
	                   0,
	                   0,
	                   NULL};
	mk_call     c   = {.size      = sizeof(mk_call),
	                   .client    = "mbb",
	                   .tool      = "trigger-long-running-operation",
	                   .arguments = "{\"duration\": 1, \"steps\": 1}"};
	char       *err = NULL;
	json_t     *v;
	int         gen;

	start_everything(&p, "streamableHttp", peer_free_port());
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"mbb\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
	            p.port),
	        0);
	v   = view_of(rt, "mbb");
	gen = (int)json_integer_value(json_object_get(v, "generation"));
	json_decref(v);
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(mk_tool_call_async(rt, &c, on_done, &b), 0);
	}
	/* reconnect while they run; a second one joins the first */
	CHECK_EQ(mk_client_reconnect(rt, "mbb", &err), 0);
	CHECK_EQ(mk_client_reconnect(rt, "mbb", &err), 0);
	pthread_mutex_lock(&b.mtx);
	while (b.done < 200) {
		pthread_cond_wait(&b.cv, &b.mtx);
	}
	pthread_mutex_unlock(&b.mtx);
	CHECK_EQ(b.ok, 200);
	v = view_of(rt, "mbb");
	CHECK(json_integer_value(json_object_get(v, "generation")) >= gen + 1);
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* max_concurrent_calls: the upstream never runs more than the limit at
 * once; the others wait their turn and succeed; one whose deadline
 * passes while it waits is refused naming the limit; sticky and
 * per-call alike. */
/* inject.mjs over Streamable HTTP, on a free port. */
static void
start_inject(peer *p)
{
	char        path[512];
	const char *argv[] = {"node", path, "http", "--port", "0", NULL};

	snprintf(path, sizeof(path), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
}

/* The counters' last 5 minutes (the page's sparkline) hold every call
 * of this young client, the ones not ok as errors, in the bucket of
 * now. */
static void
recent_matches(json_t *m)
{
	json_t     *c   = json_object_get(m, "calls");
	json_t     *r   = json_object_get(m, "recent");
	json_int_t  all = 0, ok, calls = 0, errors = 0, now = time(NULL);
	size_t      i;
	json_t     *n;
	const char *k;

	json_object_foreach(c, k, n)
	{
		all += json_integer_value(n);
	}
	ok = json_integer_value(json_object_get(c, "ok"));
	CHECK_EQ(json_integer_value(json_object_get(r, "bucket_s")), 10);
	CHECK_EQ(json_array_size(json_object_get(r, "calls")), 30);
	json_array_foreach(json_object_get(r, "calls"), i, n)
	{
		calls += json_integer_value(n);
	}
	json_array_foreach(json_object_get(r, "errors"), i, n)
	{
		errors += json_integer_value(n);
	}
	CHECK_EQ(calls, all);
	CHECK_EQ(errors, all - ok);
	CHECK(errors > 0 && ok > 0);
	/* the newest bucket ends within the next 10 s of the last call */
	json_int_t end = json_integer_value(json_object_get(r, "end"));
	CHECK(end > now - 300 && end <= now + 10);
}

static void
max_concurrent_calls(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, *t, name[16];
	int         rc;

	start_inject(&p);
	for (int k = 0; k < 2; k++) {
		batch   b = {PTHREAD_MUTEX_INITIALIZER,
		             PTHREAD_COND_INITIALIZER,
		             0,
		             0,
		             0,
		             "done"};
		mk_call c = {.size      = sizeof(mk_call),
		             .client    = name,
		             .tool      = "slow",
		             .arguments = "{\"ms\": 400, \"steps\": 0}"};
		snprintf(name, sizeof(name), "cap%d", k);
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"], \"max_concurrent_calls\": 2}",
		            name, p.port, k == 0 ? "true" : "false"),
		        0);
		for (int i = 0; i < 6; i++) {
			CHECK_EQ(mk_tool_call_async(rt, &c, on_done, &b), 0);
		}
		batch_wait(&b, 6);
		CHECK_EQ(b.ok, 6);
		/* (the counter is the server's, over both clients) */
		CHECK_EQ(admin(p.port, "/admin/counters", NULL, "slow_most"),
		         2);
		/* two hang in the slots: a third waits out its deadline */
		mk_call h = {.size       = sizeof(mk_call),
		             .client     = name,
		             .tool       = "hang",
		             .timeout_ms = 3000};
		b.done = b.ok = b.bad = 0;
		CHECK_EQ(mk_tool_call_async(rt, &h, on_done, &b), 0);
		CHECK_EQ(mk_tool_call_async(rt, &h, on_done, &b), 0);
		late_refused(rt, name,
		             "is at max_concurrent_calls (2 calls in flight): "
		             "the call waited ");
		batch_wait(&b, 2);
		/* the slots are free again */
		t = call_text(rt, name, "echo", "{\"message\": \"again\"}",
		              &rc);
		CHECK_EQ(rc, 0);
		CHECK(strstr(t, "again") != NULL);
		free(t);
		/* the refusal is counted (/metrics) */
		char   *m = NULL;
		json_t *j;
		CHECK_EQ(mk_client_metrics_json(rt, name, &m), 0);
		CHECK((j = json_loads(m, 0, NULL)) != NULL);
		CHECK_EQ(json_integer_value(json_object_get(
		                 json_object_get(j, "calls"), "refused")),
		         1);
		recent_matches(j);
		json_decref(j);
		mk_free(m);
	}
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* Calls that hang never take every connection to their server: the
 * reconnect that could see it is gone still gets one, and the calls past
 * the room wait for a slot (SPEC 7, max_concurrent_calls). */
static void
calls_leave_room(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	char       *err = NULL, name[16];

	for (int k = 0; k < 2; k++) {
		peer    p = {0};
		batch   b = {PTHREAD_MUTEX_INITIALIZER,
		             PTHREAD_COND_INITIALIZER,
		             0,
		             0,
		             0,
		             "never"};
		mk_call h = {.size       = sizeof(mk_call),
		             .client     = name,
		             .tool       = "hang",
		             .timeout_ms = 120000};

		start_inject(&p);
		snprintf(name, sizeof(name), "room%d", k);
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"]}",
		            name, p.port, k == 0 ? "true" : "false"),
		        0);
		for (int i = 0; i < 64; i++) {
			CHECK_EQ(mk_tool_call_async(rt, &h, on_done, &b), 0);
		}
		wait_counter(p.port, "hanging", 60);
		/* before, the 64 calls held all 64 connections and these
		 * waited out their 30 s ("connect timed out after 30000 ms")
		 */
		if (mk_client_refresh_tools(rt, name, &err) != 0 ||
		    (k == 1 &&
		     (mk_client_disable(rt, name, &err) != 0 ||
		      mk_client_enable(rt, name, &err) != 0))) {
			fprintf(stderr, "%s: %s\n", name, err);
			CHECK(0);
		}
		/* (before, its check's ping waited too: healthy -> unstable)
		 */
		json_t *v = view_of(rt, name);
		CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
		json_decref(v);
		late_refused(rt, name,
		             "has 60 calls in flight (the most sent to one "
		             "server at once, leaving connections for its "
		             "checks): the call waited ");
		CHECK_EQ(admin(p.port, "/admin/counters", NULL, "hanging"),
		         60);
		peer_stop(&p); /* the calls end (their outcome unknown) */
		batch_wait(&b, 64);
		CHECK_EQ(b.ok, 0);
		CHECK_EQ(mk_client_remove(rt, name, &err), 0);
	}
	rt_close(&rt, &sb);
	free(err);
}

/* mk_tool_call_cancel: a call the server has is cancelled there (its
 * `slow` stops at its next step) and answered "cancelled"; one waiting
 * for a slot is answered at once and never sent; sticky and per-call. */
typedef struct gaveup {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	bool            done;
	int             rc;
	char            kind[32], error[256];
} gaveup;

static void
on_gaveup(void *arg, int rc, mk_result *res)
{
	gaveup *g = arg;

	pthread_mutex_lock(&g->mtx);
	g->done = true;
	g->rc   = rc;
	snprintf(g->kind, sizeof(g->kind), "%s",
	         res != NULL && res->error_kind != NULL ? res->error_kind
	                                                : "");
	snprintf(g->error, sizeof(g->error), "%s",
	         res != NULL && res->error != NULL ? res->error : "");
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mtx);
	mk_result_free(&res);
}

/* Starts call c, cancels it once ready() holds, and checks the answer. */
static void
cancel_one(mk_runtime *rt, const mk_call *c, int port, const char *field,
           long min)
{
	gaveup   g      = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                   .cv  = PTHREAD_COND_INITIALIZER};
	uint64_t ticket = 0;

	CHECK_EQ(mk_call_start(rt, c, NULL, on_gaveup, &g, &ticket), 0);
	CHECK(ticket != 0);
	if (field != NULL) {
		wait_counter(port, field, min); /* the server runs it */
	}
	CHECK_EQ(
	        mk_tool_call_cancel(rt, c->client, ticket, "the user gave up"),
	        0);
	pthread_mutex_lock(&g.mtx);
	while (!g.done) {
		pthread_cond_wait(&g.cv, &g.mtx);
	}
	pthread_mutex_unlock(&g.mtx);
	CHECK_EQ(g.rc, MK_ECLOSED);
	CHECK(strcmp(g.kind, "cancelled") == 0);
	CHECK(strcmp(g.error, "tools/call cancelled: the user gave up") == 0);
	/* a second cancel of an answered call is nothing */
	CHECK_EQ(mk_tool_call_cancel(rt, c->client, ticket, "again"), 0);
}

static void
cancel_api(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, name[16];
	int         rc;

	start_inject(&p);
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "cx%d", k);
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"], \"max_concurrent_calls\": 1}",
		            name, p.port, k == 0 ? "true" : "false"),
		        0);
		/* running at the server: it stops */
		mk_call s = {.size      = sizeof(mk_call),
		             .client    = name,
		             .tool      = "slow",
		             .arguments = "{\"ms\": 20000, \"steps\": 200}"};
		cancel_one(rt, &s, p.port, "slow_running", 1);
		wait_counter(p.port, "slow_cancelled", k + 1);
		/* waiting for the slot a hung call holds: never sent */
		gaveup  h  = {.mtx = PTHREAD_MUTEX_INITIALIZER,
		              .cv  = PTHREAD_COND_INITIALIZER};
		mk_call hc = {.size       = sizeof(mk_call),
		              .client     = name,
		              .tool       = "hang",
		              .timeout_ms = 3000};
		CHECK_EQ(mk_call_start(rt, &hc, NULL, on_gaveup, &h, NULL), 0);
		mk_call e = {.size      = sizeof(mk_call),
		             .client    = name,
		             .tool      = "counted_none",
		             .arguments = "{}"};
		cancel_one(rt, &e, p.port, NULL, 0);
		pthread_mutex_lock(&h.mtx);
		while (!h.done) {
			pthread_cond_wait(&h.cv, &h.mtx);
		}
		pthread_mutex_unlock(&h.mtx);
		CHECK_EQ(h.rc, MK_ETIMEDOUT);
	}
	/* the cancelled counted_none never ran: the next one counts 1 */
	char *t = call_text(rt, "cx0", "counted_none", "{}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(t, "\"text\":\"1\"") != NULL);
	free(t);
	CHECK_EQ(mk_tool_call_cancel(rt, "nosuch", 1, NULL), MK_ENOENT);
	CHECK_EQ(mk_tool_call_cancel(rt, "cx0", 0, NULL), MK_EINVAL);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

typedef struct recon {
	mk_runtime *rt;     /* the runtime */
	const char *client; /* whom to reconnect */
	int         rc;     /* the outcome */
} recon;

static void *
reconnect_main(void *arg)
{
	recon *r   = arg;
	char  *err = NULL;

	r->rc = mk_client_reconnect(r->rt, r->client, &err);
	mk_free(err);
	return (NULL);
}

/* Disable while a reconnect hangs (the server is stopped): the client
 * stays disabled when the server wakes up. */
static void
disable_during_reconnect(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p  = {0};
	recon       r  = {rt, "dis", -1};
	pthread_t   t;
	char       *err = NULL;
	int         at  = 0;
	json_t     *v;

	start_everything(&p, "streamableHttp", peer_free_port());
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"dis\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}",
	            p.port),
	        0);
	wait_state(&sb, &at, "dis", "healthy", NULL);
	kill(p.pid, SIGSTOP); /* connects, then never answers */
	pthread_create(&t, NULL, reconnect_main, &r);
	CHECK_EQ(mk_client_disable(rt, "dis", &err), 0);
	wait_state(&sb, &at, "dis", "disabled", NULL);
	pthread_join(t, NULL);
	CHECK(r.rc != 0); /* the reconnect was overtaken by the disable */
	kill(p.pid, SIGCONT);
	/* a check or a late result never overwrites disabled */
	v = view_of(rt, "dis");
	CHECK(strcmp(vstr(v, "state"), "disabled") == 0);
	json_decref(v);
	CHECK_EQ(mk_client_reconnect(rt, "dis", &err), MK_ESTATE);
	mk_free(err);
	int   rc;
	char *txt = call_text(rt, "dis", "echo", NULL, &rc);
	CHECK_EQ(rc, MK_ESTATE);
	free(txt);
	CHECK_EQ(mk_client_enable(rt, "dis", &err), 0);
	wait_state(&sb, &at, "dis", "healthy", NULL);
	CHECK_EQ(count_states(&sb, "dis", "unstable"), 0);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* A check whose ping fails after a reconnect swapped the connection: the
 * stale failure is dropped. */
static void
stale_check_dropped(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p  = {0};
	char        js2[512], *err = NULL;
	const char *argv[] = {"node", js2, "http", "--port", "0", NULL};
	int         at     = 0;
	json_t     *v;

	snprintf(js2, sizeof(js2), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(&p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"stale\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1s\"}",
	            p.port),
	        0);
	wait_state(&sb, &at, "stale", "healthy", NULL);
	admin(p.port, "/admin/ping-mode",
	      "{\"delay_ms\": 2000, \"status\": 500}", NULL);
	/* wait until a check's ping is held by the server */
	wait_counter(p.port, "pings_seen", 1);
	CHECK_EQ(mk_client_reconnect(rt, "stale", &err), 0);
	admin(p.port, "/admin/ping-mode", "{}", NULL);
	/* the held ping fails now, on a connection that is no more */
	wait_counter(p.port, "pings_done", 1);
	/* the next checks pass; the stale failure never showed */
	v = view_of(rt, "stale");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	CHECK_EQ(count_states(&sb, "stale", "unstable"), 0);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static void
update_client(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, *t;
	json_t     *v;
	int         rc, gen, at = 0;
	recon       r = {rt, "upd", -1};
	pthread_t   th;

	start_everything(&p, "streamableHttp", peer_free_port());
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"upd\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"echo\"]}",
	            p.port),
	        0);
	wait_state(&sb, &at, "upd", "healthy", NULL);
	t = call_text(rt, "upd", "get-sum", "{\"a\": 1, \"b\": 1}", &rc);
	CHECK_EQ(rc, MK_EINVAL);
	free(t);
	/* at once: no reconnect */
	CHECK_EQ(mk_client_update(rt, "upd", "{\"tools_to_execute\": [\"*\"]}",
	                          &err),
	         0);
	t = call_text(rt, "upd", "get-sum", "{\"a\": 1, \"b\": 1}", &rc);
	CHECK_EQ(rc, 0);
	free(t);
	/* immutable and invalid fields: refused, nothing applied */
	CHECK_EQ(mk_client_update(rt, "upd", "{\"connection_type\": \"sse\"}",
	                          &err),
	         MK_EINVAL);
	CHECK(strcmp(err,
	             "client \"upd\": field \"connection_type\" cannot be changed") ==
	      0);
	mk_free(err);
	CHECK_EQ(mk_client_update(rt, "upd",
	                          "{\"tool_sync_interval\": \"0s\"}", &err),
	         MK_EINVAL);
	CHECK(strstr(err, "tool_sync_interval") != NULL);
	mk_free(err);
	/* a credential change re-dials: a new generation */
	v   = view_of(rt, "upd");
	gen = (int)json_integer_value(json_object_get(v, "generation"));
	json_decref(v);
	CHECK_EQ(mk_client_update(rt, "upd", "{\"headers\": {\"X-A\": \"1\"}}",
	                          &err),
	         0);
	v = view_of(rt, "upd");
	CHECK(json_integer_value(json_object_get(v, "generation")) > gen);
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	/* while a reconnect hangs, a credential update is refused */
	kill(p.pid, SIGSTOP);
	pthread_create(&th, NULL, reconnect_main, &r);
	/* the patch is also invalid: until the reconnect runs it is
	 * refused at once for that (and changes nothing) */
	for (int i = 0;; i++) {
		rc = mk_client_update(
		        rt, "upd",
		        "{\"headers\": {\"X-A\": \"2\"}, \"tool_sync_interval\": \"0s\"}",
		        &err);
		if (rc == MK_EBUSY) {
			break;
		}
		CHECK_EQ(rc, MK_EINVAL);
		mk_free(err);
		err = NULL;
		CHECK(i < 200);
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling for the reconnect to start */
	}
	CHECK(strcmp(err,
	             "reconnect or connection credential update already in progress for MCP client upd") ==
	      0);
	mk_free(err);
	kill(p.pid, SIGCONT);
	pthread_join(th, NULL);
	CHECK_EQ(r.rc, 0);
	/* disabled through the config */
	CHECK_EQ(mk_client_update(rt, "upd", "{\"disabled\": true}", &err), 0);
	wait_state(&sb, &at, "upd", "disabled", NULL);
	CHECK_EQ(mk_client_update(rt, "upd", "{\"disabled\": false}", &err),
	         0);
	wait_state(&sb, &at, "upd", "healthy", NULL);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* Per-call with tools known (as the store will restore them): no
 * synchronous discovery, no tools event, the hash seeded. */
static void
known_tools_restored(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	kn_answer   a;
	mp_w        w;
	json_t     *v;
	int         port = peer_free_port(); /* nobody listens: a discovery
	                                      * would fail */
	char cfg[512];

	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"known\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	        port);
	mp_w_init(&w);
	mp_map(&w, 2);
	mp_kv_str(&w, "config", cfg);
	mp_kv_str(
	        &w, "tools",
	        "[{\"name\": \"zeta\", \"inputSchema\": {}}, {\"inputSchema\": {}, \"name\": \"alpha\"}]");
	CHECK_EQ(kn_ask(rt->supervisor, MSG_SV_ADD, w.sb.data, w.sb.size,
	                WAIT_MS, &a),
	         0);
	free(a.data);
	mp_w_fini(&w);
	v = view_of(rt, "known");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	CHECK(json_object_get(v, "last_failure") == NULL);
	/* sorted by name in the view */
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_array_get(json_object_get(v, "tools"), 0),
	                     "name")),
	             "alpha") == 0);
	json_decref(v);
	pthread_mutex_lock(&sb.mtx);
	for (int i = 0; i < sb.n; i++) {
		CHECK(strcmp(sb.ev[i].topic, "tools") !=
		      0); /* seeded: silent */
	}
	pthread_mutex_unlock(&sb.mtx);
	rt_close(&rt, &sb);
}

/* Waits until name is unstable at stage with a message holding text;
 * checks that its view still lists ntools tools. */
static void
wait_list_failed(sub *sb, mk_runtime *rt, const char *name, const char *stage,
                 const char *text, size_t ntools)
{
	int     at = 0;
	event   e  = wait_state(sb, &at, name, "unstable", stage);
	json_t *v;

	fprintf(stderr, "   %s: %s\n", name, e.message);
	CHECK(strstr(e.message, text) != NULL);
	v = view_of(rt, name); /* still in the list view */
	CHECK(strcmp(vstr(v, "state"), "unstable") == 0);
	CHECK(strcmp(vstr(json_object_get(v, "last_failure"), "stage"),
	             stage) == 0);
	CHECK_EQ(json_array_size(json_object_get(v, "tools")), ntools);
	json_decref(v);
}

/* Against an inject server whose tools/list is set by big (the body of
 * POST /admin/big-tools) once its clients are healthy: a sticky and a
 * per-call client fail their checks with text, keeping their tools. */
static void
big_list_fails(const char *big, const char *text)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p  = {0};
	char        js2[512], *err = NULL;
	const char *argv[]  = {"node", js2, "http", "--port", "0", NULL};
	const char *names[] = {"big_st", "big_pc"};
	int         at      = 0;
	size_t      n;
	json_t     *v;

	snprintf(js2, sizeof(js2), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(&p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tool_sync_interval\": \"1s\"}",
		            names[i], p.port, i == 0 ? "true" : "false"),
		        0);
		wait_state(&sb, &at, names[i], "healthy", NULL);
	}
	v = view_of(rt, "big_st");
	n = json_array_size(json_object_get(v, "tools"));
	json_decref(v);
	CHECK(n >= 10);
	/* set once, never back: a list paged across a change would mix */
	admin(p.port, "/admin/big-tools", big, NULL);
	wait_list_failed(&sb, rt, "big_st", "list_tools", text, n);
	wait_list_failed(&sb, rt, "big_pc", "tool_discovery", text, n);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* The last good list stays while the server is away (listed, marked
 * stale since the failure, with its reason) and while it answers an
 * empty list once; the second empty answer in a row is believed. */
static void
last_known_good(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL;
	int         at  = 0, port;
	size_t      n;
	json_t     *v;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	port = p.port;
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"lkg\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tool_sync_interval\": \"1h\"}",
	            port),
	        0);
	wait_state(&sb, &at, "lkg", "healthy", NULL);
	v = view_of(rt, "lkg");
	n = json_array_size(json_object_get(v, "tools"));
	CHECK(n >= 10 && json_object_get(v, "tools_stale_since") == NULL);
	json_decref(v);
	/* one empty answer: kept; two in a row: believed */
	int tools0 = count_topic(&sb, "tools");
	admin(port, "/admin/big-tools", "{\"empty\": true}", NULL);
	check_client(rt, "lkg");
	v = view_of(rt, "lkg");
	CHECK_EQ(json_array_size(json_object_get(v, "tools")), n);
	json_decref(v);
	CHECK_EQ(count_topic(&sb, "tools"), tools0);
	check_client(rt, "lkg");
	v = view_of(rt, "lkg");
	CHECK_EQ(json_array_size(json_object_get(v, "tools")), 0);
	json_decref(v);
	admin(port, "/admin/big-tools", "{}", NULL);
	check_client(rt, "lkg");
	v = view_of(rt, "lkg");
	CHECK_EQ(json_array_size(json_object_get(v, "tools")), n);
	json_decref(v);
	/* the server gone: unstable, the list kept and marked */
	peer_stop(&p);
	check_client(rt, "lkg");
	wait_state(&sb, &at, "lkg", "unstable", NULL);
	v          = view_of(rt, "lkg");
	json_t *lf = json_object_get(v, "last_failure");
	CHECK_EQ(json_array_size(json_object_get(v, "tools")), n);
	CHECK(strcmp(vstr(v, "tools_stale_since"), vstr(lf, "since")) == 0);
	CHECK(strcmp(vstr(v, "tools_stale_reason"), vstr(lf, "message")) == 0);
	CHECK(strstr(vstr(v, "tools_stale_reason"), "Failed to connect") !=
	      NULL);
	json_decref(v);
	rt_close(&rt, &sb);
}

/* A call of tool on client name, its connection cut once the request
 * arrived: it carries an idempotency key, goes again with the same key,
 * and runs once. */
static void
keyed(mk_runtime *rt, peer *p, const char *name, const char *tool)
{
	mk_result *res = NULL;
	mk_call    c   = {.size       = sizeof(mk_call),
	                  .client     = name,
	                  .tool       = tool,
	                  .arguments  = "{}",
	                  .timeout_ms = 10000};
	long       ran = admin(p->port, "/admin/counters", NULL, tool);
	long       replays =
	        admin(p->port, "/admin/counters", NULL, "keys_replayed");

	admin(p->port, "/admin/drop-calls", "{\"count\": 1}", NULL);
	CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
	mk_result_free(&res);
	CHECK_EQ(admin(p->port, "/admin/counters", NULL, tool), ran + 1);
	CHECK_EQ(admin(p->port, "/admin/counters", NULL, "keys_replayed"),
	         replays + 1);
}

/* A call whose connection is cut after it was sent: a destructive tool
 * is answered outcome_unknown (MK_EUNKNOWN) and lands in the ledger; a
 * read-only one goes again and runs once, and so does a destructive one
 * that carries an idempotency key (the tool takes one, or the server
 * declares tools.idempotency); sticky and per-call. */
static void
outcome_unknown(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, *text = NULL, name[16];
	int         at = 0;
	json_t     *all, *e;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "cut%d", k);
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"]}",
		            name, p.port, k == 0 ? "true" : "false"),
		        0);
		wait_state(&sb, &at, name, "healthy", NULL);
		long       ran = admin(p.port, "/admin/counters", NULL,
		                       "counted_destructive");
		mk_result *res = NULL;
		mk_call    c   = {.size       = sizeof(mk_call),
		                  .client     = name,
		                  .tool       = "counted_readonly",
		                  .arguments  = "{}",
		                  .timeout_ms = 10000};
		/* a call just before: the next one reuses its kept-alive
		 * connection, the case where libcurl sends a request again,
		 * unasked, when the connection dies before any answer */
		CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
		mk_result_free(&res);
		c.tool = "counted_destructive";
		admin(p.port, "/admin/drop-calls", "{\"count\": 1}", NULL);
		CHECK_EQ(mk_tool_call(rt, &c, &res), MK_EUNKNOWN);
		CHECK(strcmp(res->error_kind, "outcome_unknown") == 0);
		CHECK(strstr(res->error, "it may or may not have run") !=
		      NULL);
		/* sticky: it went out on the connection the call before
		 * left (libcurl kept it: its cache counts the GET stream on
		 * top), and libcurl, which would send it again, could not */
		CHECK(k == 1 ||
		      strstr(res->error, "before any answer") != NULL);
		mk_result_free(&res);
		/* (cut before it ran: never sent again) */
		CHECK_EQ(admin(p.port, "/admin/counters", NULL,
		               "counted_destructive"),
		         ran);
		/* a read-only one recovers: sent again, run once */
		long ro = admin(p.port, "/admin/counters", NULL,
		                "counted_readonly");
		admin(p.port, "/admin/drop-calls", "{\"count\": 1}", NULL);
		c.tool = "counted_readonly";
		CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
		mk_result_free(&res);
		CHECK_EQ(admin(p.port, "/admin/counters", NULL,
		               "counted_readonly"),
		         ro + 1);
		/* a tool that takes an idempotency key gets one: sent again
		 * with the same key, it runs once */
		keyed(rt, &p, name, "counted_keyed");
	}
	/* a server that declares tools.idempotency: the key in _meta */
	admin(p.port, "/admin/idempotency", "{\"declare\": true}", NULL);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"cutcap\", \"connection_type\": \"http\", "
	            "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	            "\"needs_session_stickiness\": true, \"tools_to_execute\": "
	            "[\"*\"]}",
	            p.port),
	        0);
	wait_state(&sb, &at, "cutcap", "healthy", NULL);
	keyed(rt, &p, "cutcap", "counted_destructive");
	admin(p.port, "/admin/idempotency", "{\"declare\": false}", NULL);
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "calls_dropped"), 7);
	/* the ledger: both unknown calls, never their arguments */
	CHECK_EQ(mk_calls_unknown_json(rt, &text), 0);
	CHECK((all = json_loads(text, 0, NULL)) != NULL);
	mk_free(text);
	CHECK_EQ(json_array_size(all), 2);
	for (size_t i = 0; i < 2; i++) {
		e = json_array_get(all, i);
		snprintf(name, sizeof(name), "cut%zu", i);
		CHECK(strcmp(vstr(e, "client"), name) == 0);
		CHECK(strcmp(vstr(e, "tool"), "counted_destructive") == 0);
		CHECK(strcmp(vstr(e, "caller"), "") == 0);
		CHECK(atoll(vstr(e, "request_id")) > 0);
		CHECK(*vstr(e, "time") != '\0' && *vstr(e, "error") != '\0');
		CHECK(json_object_get(e, "arguments") == NULL);
	}
	json_decref(all);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static int
is_tools_of(const event *e, const void *name)
{
	return (strcmp(e->topic, "tools") == 0 && strcmp(e->name, name) == 0);
}

static int
is_pin_of(const event *e, const void *name)
{
	return (strcmp(e->topic, "pin") == 0 && strcmp(e->name, name) == 0);
}

/* cache_results: a read-only, idempotent tool's result is kept for its
 * ttl by arguments (whatever their key order), the upstream untouched; a
 * tool without both hints never is; a new list clears them; hits and
 * misses counted. */
static void
result_cache(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, *t1, *t2;
	int         at  = 0, rc;
	long        n0;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"rc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"], \"cache_results\": {\"counted_cacheable\": \"60s\", \"counted_readonly\": 60}}",
	            p.port),
	        0);
	wait_state(&sb, &at, "rc", "healthy", NULL);
	n0 = admin(p.port, "/admin/counters", NULL, "counted_cacheable");
	t1 = call_text(rt, "rc", "counted_cacheable", "{}", &rc);
	CHECK_EQ(rc, 0);
	t2 = call_text(rt, "rc", "counted_cacheable", "{}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strcmp(t1, t2) == 0); /* the kept result */
	free(t1);
	free(t2);
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "counted_cacheable"),
	         n0 + 1);
	/* other arguments: another result; the same ones in another order:
	 * kept */
	free(call_text(rt, "rc", "counted_cacheable", "{\"x\": 1, \"y\": 2}",
	               &rc));
	free(call_text(rt, "rc", "counted_cacheable", "{\"y\": 2, \"x\": 1}",
	               &rc));
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "counted_cacheable"),
	         n0 + 2);
	/* readOnlyHint without idempotentHint: never kept */
	long r0 = admin(p.port, "/admin/counters", NULL, "counted_readonly");
	free(call_text(rt, "rc", "counted_readonly", "{}", &rc));
	free(call_text(rt, "rc", "counted_readonly", "{}", &rc));
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "counted_readonly"),
	         r0 + 2);
	char   *m = NULL;
	json_t *j, *c;
	CHECK_EQ(mk_client_metrics_json(rt, "rc", &m), 0);
	CHECK((j = json_loads(m, 0, NULL)) != NULL);
	mk_free(m);
	c = json_object_get(j, "cache");
	CHECK_EQ(json_integer_value(json_object_get(c, "hits")), 2);
	CHECK_EQ(json_integer_value(json_object_get(c, "misses")), 2);
	json_decref(j);
	/* a change naming a tool its server lists without both hints is
	 * refused (one not listed yet can only be warned of), and changes
	 * nothing: the kept result still answers */
	CHECK_EQ(
	        mk_client_update(
	                rt, "rc",
	                "{\"cache_results\": {\"counted_readonly\": \"60s\"}}",
	                &err),
	        MK_EINVAL);
	CHECK(strcmp(err,
	             "client \"rc\": cache_results: tool counted_readonly is "
	             "not annotated readOnlyHint and idempotentHint by its "
	             "server: its results cannot be kept") == 0);
	mk_free(err);
	err = NULL;
	free(call_text(rt, "rc", "counted_cacheable", "{}", &rc));
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "counted_cacheable"),
	         n0 + 2);
	/* a new list (a tool added: list_changed) clears them */
	admin(p.port, "/admin/add-tool", "{\"name\": \"rc_new\"}", NULL);
	(void)wait_event(&sb, &at, is_tools_of, "rc", "rc's new list");
	free(call_text(rt, "rc", "counted_cacheable", "{}", &rc));
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "counted_cacheable"),
	         n0 + 3);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* The call's error (MK_ESTATE when want is not NULL: its text holds
 * want), or 0 when it ran. */
static void
call_held(mk_runtime *rt, const char *name, const char *tool, const char *want)
{
	mk_result *res = NULL;
	mk_call    c   = {.size      = sizeof(mk_call),
	                  .client    = name,
	                  .tool      = tool,
	                  .arguments = "{}"};
	int        rc  = mk_tool_call(rt, &c, &res);

	if (want == NULL) {
		CHECK_EQ(rc, 0);
	} else {
		CHECK_EQ(rc, MK_ESTATE);
		CHECK(strstr(res->error, want) != NULL ||
		      !fprintf(stderr, "error: %s\n", res->error));
	}
	mk_result_free(&res);
}

/* tool_changes hold: a changed tool and a new one are held back (marked
 * in the view, refused, named why) until the list is approved by its
 * digest; a rejection keeps them refused; block takes them only with a
 * new config. */
static void
tool_pinning(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, digest[80];
	int         at = 0, pins = 0;
	json_t     *v, *want;
	event       e;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(
		        add(rt, &err,
		            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"], \"tool_sync_interval\": \"1h\", \"tool_changes\": \"%s\"}",
		            k == 0 ? "pin" : "blk", p.port,
		            k == 0 ? "hold" : "block"),
		        0);
		wait_state(&sb, &at, k == 0 ? "pin" : "blk", "healthy", NULL);
	}
	call_held(rt, "pin", "echo", NULL); /* the first list: approved */
	admin(p.port, "/admin/describe", "{\"description\": \"pinned?\"}",
	      NULL);
	check_client(rt, "pin");
	check_client(rt, "blk");
	call_held(
	        rt, "pin", "echo",
	        "tool echo of MCP client pin is held: it changed its "
	        "description since the list was approved (tool_changes hold: "
	        "approve the list first)");
	call_held(rt, "pin", "counted_none", NULL); /* (unchanged) */
	e = wait_event(&sb, &pins, is_pin_of, "pin", "pin's held tools");
	CHECK(strcmp(e.state, "held") == 0 && e.count == 1 &&
	      strcmp(e.message, "echo: description") == 0);
	v    = view_of(rt, "pin");
	want = json_loads("{\"echo\": {\"fields\": [\"description\"]}}", 0,
	                  NULL);
	CHECK(json_equal(json_object_get(v, "tools_held"), want));
	json_decref(want);
	snprintf(digest, sizeof(digest), "%s", vstr(v, "tools_pending"));
	CHECK(strlen(digest) == 64);
	json_decref(v);
	/* a wrong digest, a rejection, then the approval */
	CHECK_EQ(mk_client_tools_approve(rt, "pin", "0123", &err), MK_EINVAL);
	CHECK(strstr(err, "digest 0123 is not MCP client pin's list now") !=
	      NULL);
	mk_free(err);
	/* a config change approves nothing under hold */
	CHECK_EQ(mk_client_update(rt, "pin",
	                          "{\"tool_execution_timeout\": "
	                          "\"20s\"}",
	                          &err),
	         0);
	call_held(rt, "pin", "echo", "approve the list first");
	CHECK_EQ(mk_client_tools_reject(rt, "pin", digest, &err), 0);
	call_held(rt, "pin", "echo",
	          "(tool_changes hold: the change was "
	          "rejected)");
	e = wait_event(&sb, &pins, is_pin_of, "pin", "pin's rejection");
	CHECK(strcmp(e.state, "rejected") == 0 && strcmp(e.hash, digest) == 0);
	CHECK_EQ(mk_client_tools_approve(rt, "pin", digest, &err), 0);
	call_held(rt, "pin", "echo", NULL);
	e = wait_event(&sb, &pins, is_pin_of, "pin", "pin's approval");
	CHECK(strcmp(e.state, "approved") == 0 && e.count == 0 &&
	      strcmp(e.hash, digest) == 0);
	v = view_of(rt, "pin");
	CHECK(json_object_get(v, "tools_held") == NULL);
	json_decref(v);
	CHECK_EQ(mk_client_metrics_json(rt, "pin", &err), 0);
	v = json_loads(err, 0, NULL);
	mk_free(err);
	want = json_pack("{s:i, s:i, s:i}", "held", 1, "approved", 1,
	                 "rejected", 1);
	CHECK(json_equal(json_object_get(v, "tool_changes"), want));
	json_decref(want);
	json_decref(v);
	/* block: no approval; a new config takes the list */
	call_held(rt, "blk", "echo",
	          "(tool_changes block: change the "
	          "client's config to take it)");
	CHECK_EQ(mk_client_tools_approve(rt, "blk", digest, &err), MK_ESTATE);
	CHECK(strstr(err, "has tool_changes block") != NULL);
	mk_free(err);
	CHECK_EQ(mk_client_update(rt, "blk",
	                          "{\"tool_execution_timeout\": "
	                          "\"20s\"}",
	                          &err),
	         0);
	call_held(rt, "blk", "echo", NULL);
	/* mcp.tool_changes: the default of a client that sets none */
	CHECK_EQ(add(rt, &err,
	             "{\"name\": \"dflt\", \"connection_type\": \"http\", "
	             "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	             "\"needs_session_stickiness\": true, "
	             "\"tools_to_execute\": [\"*\"], \"tool_sync_interval\": "
	             "\"1h\"}",
	             p.port),
	         0);
	wait_state(&sb, &at, "dflt", "healthy", NULL);
	CHECK_EQ(mk_runtime_configure(
	                 rt, "{\"mcp\": {\"tool_changes\": \"block\"}}", &err),
	         0);
	admin(p.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	check_client(rt, "dflt");
	call_held(rt, "dflt", "echo", "(tool_changes block: change the");
	CHECK_EQ(mk_runtime_configure(rt, "{}", &err), 0);
	call_held(rt, "dflt", "echo", NULL); /* (accept again) */
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* Until a tool's change is approved its annotations are not trusted: the
 * retry-safety rule and the cache read it as unannotated. */
static void
pin_untrusted(void)
{
	cfg_client cfg = {.name = "u", .changes = CFG_CHANGES_HOLD};
	client     cl  = {.cfg = &cfg, .pin_known = true};
	mcp_hints  h;

	cl.tools    = json_loads("[{\"name\": \"read\", \"annotations\": "
	                            "{\"readOnlyHint\": true}}]",
	                         0, NULL);
	cl.approved = json_object();
	cl.pin_held = json_loads("{\"read\": {\"new\": true}}", 0, NULL);
	CHECK(cl_tool_hints(&cl, "read", &h));
	CHECK(!h.read_only && h.destructive);
	json_object_clear(cl.pin_held);
	CHECK(cl_tool_hints(&cl, "read", &h));
	CHECK(h.read_only);
	cl.pin_known = false; /* not yet read: nothing is trusted */
	CHECK(cl_tool_hints(&cl, "read", &h));
	CHECK(!h.read_only);
	cfg.changes = CFG_CHANGES_ACCEPT;
	CHECK(cl_tool_hints(&cl, "read", &h));
	CHECK(h.read_only);
	CHECK(!cl_tool_hints(&cl, "none", &h));
	json_decref(cl.tools);
	json_decref(cl.approved);
	json_decref(cl.pin_held);
}

/* A tool list over MCP_MAX_TOOLS_BYTES in total, or one whose cursor
 * never advances, is a failed check that keeps the last good list. */
static void
tools_list_bounded(void)
{
	fprintf(stderr, "   3 pages of 3 MiB\n");
	big_list_fails("{\"pages\": 3, \"bytes\": 3145728}",
	               "tools/list exceeds 8 MiB in total");
	fprintf(stderr, "   a cursor that never advances\n");
	big_list_fails("{\"pages\": 2, \"bytes\": 10, \"repeat\": true}",
	               "tools/list repeats the cursor of an earlier page");
}

/* The client's state machine holds what SPEC section 2 says, for every
 * state and cause: a result never leaves an authoritative state (nor
 * enters one); only an admin leaves disabled, and an admin can disable
 * from anywhere; needs_reauth is left only for unstable (authorized) or
 * disabled; only the credential makes needs_reauth. */
static void
state_machine(void)
{
	cfg_client cfg = {.name = "sm"};
	client     cl  = {.cfg = &cfg};
	int        n   = 0;

	for (int by = 0; by < CL_BY_COUNT; by++) {
		for (int from = 0; from < CS_COUNT; from++) {
			for (int to = 0; to < CS_COUNT; to++) {
				bool auth_from = from == CS_DISABLED ||
				        from == CS_REAUTH ||
				        from == CS_PENDING;
				bool auth_to = to == CS_DISABLED ||
				        to == CS_REAUTH || to == CS_PENDING;
				cl.state = (cl_state)from;
				bool ok  = cl_state_enter(&cl, (cl_state)to,
				                          (cl_cause)by);
				CHECK_EQ(cl.state, ok ? to : from);
				n += ok;
				if (from == CS_ERROR || to == CS_ERROR) {
					/* the supervisor's, never an actor's
					 */
					CHECK(!ok);
					continue;
				}
				if (by == CL_BY_RESULT) {
					CHECK(!ok || (!auth_from && !auth_to));
				}
				if (from == CS_DISABLED && by != CL_BY_ADMIN) {
					CHECK(!ok);
				}
				if (to == CS_DISABLED) {
					CHECK_EQ(ok,
					         by == CL_BY_ADMIN &&
					                 from != CS_DISABLED);
				}
				if (from == CS_REAUTH && to != CS_REAUTH) {
					CHECK(!ok || to == CS_UNSTABLE ||
					      to == CS_DISABLED);
				}
				if (to == CS_REAUTH && from != CS_REAUTH) {
					CHECK(!ok || by == CL_BY_CRED);
				}
			}
		}
	}
	/* a result can heal and fail; the rest is the table's */
	cl.state = CS_UNSTABLE;
	CHECK(cl_state_enter(&cl, CS_HEALTHY, CL_BY_RESULT));
	CHECK(n > 4);
}

static int
is_lists(const event *e, const void *name)
{
	return (strcmp(e->topic, "lists") == 0 &&
	        strcmp(e->name, (const char *)name) == 0);
}

/* Whether view array a holds an item whose field is value. */
static bool
has_item(json_t *a, const char *field, const char *value)
{
	size_t  i;
	json_t *it;

	json_array_foreach(a, i, it)
	{
		const char *v = json_string_value(json_object_get(it, field));
		if (v != NULL && strcmp(v, value) == 0) {
			return (true);
		}
	}
	return (false);
}

/* The server's prompts, resources and templates (server-everything):
 * held in the client's view once a sticky connection is made, or a
 * per-call client's discovery ran (a "lists" event says so), and asked
 * through the embedding API - on the sticky
 * connection and on a per-call one's own session alike; bad asks are
 * refused before they run. */
static void
prompts_resources(void)
{
	sub         sb;
	mk_runtime *rt  = rt_open(&sb);
	peer        p   = {0};
	char       *err = NULL, *out;
	int         rc;
	json_t     *v;

	start_everything(&p, "streamableHttp", peer_free_port());
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"ev\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}",
	            p.port),
	        0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"pc\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	            p.port),
	        0);
	for (int i = 0; i < 2; i++) { /* (a per-call one's: its discovery's) */
		const char *cl   = i == 0 ? "ev" : "pc";
		int         from = 0;
		bool        all  = false;
		while (!all) { /* (each list's arrival is an event) */
			(void)wait_event(&sb, &from, is_lists, cl,
			                 "a client's lists");
			v   = view_of(rt, cl);
			all = has_item(json_object_get(v, "prompts"), "name",
			               "args-prompt") &&
			        has_item(json_object_get(v, "resources"),
			                 "uri",
			                 "demo://resource/static/document/"
			                 "architecture.md") &&
			        has_item(json_object_get(v,
			                                 "resource_templates"),
			                 "uriTemplate",
			                 "demo://resource/dynamic/text/"
			                 "{resourceId}");
			json_decref(v);
		}
	}
	for (int i = 0; i < 2; i++) {
		const char *cl = i == 0 ? "ev" : "pc";
		out = ask_text(rt, MK_CALL_PROMPT, cl, "args-prompt",
		               "{\"city\": \"Oslo\"}", &rc);
		CHECK_EQ(rc, MK_OK);
		CHECK(strstr(out, "What's weather in Oslo?") != NULL);
		free(out);
		out = ask_text(rt, MK_CALL_RESOURCE, cl,
		               "demo://resource/dynamic/text/3", NULL, &rc);
		CHECK_EQ(rc, MK_OK);
		CHECK(strstr(out, "Resource 3:") != NULL);
		free(out);
	}
	/* the server's refusal, then the runtime's */
	out = ask_text(rt, MK_CALL_PROMPT, "ev", "no-such-prompt", NULL, &rc);
	CHECK_EQ(rc, MK_EUPSTREAM);
	CHECK(strstr(out, "prompts/get failed") != NULL);
	free(out);
	out = ask_text(rt, MK_CALL_PROMPT, "ev", "args-prompt",
	               "{\"city\": 7}", &rc);
	CHECK_EQ(rc, MK_EINVAL);
	CHECK(strcmp(out, "prompts/get arguments must all be strings") == 0);
	free(out);
	out = ask_text(rt, (mk_call_kind)7, "ev", "args-prompt", NULL, &rc);
	CHECK_EQ(rc, MK_EINVAL);
	free(out);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

static int
is_snapshot(const event *e, const void *arg)
{
	return (strcmp(e->topic, "state") == 0 && e->snapshot &&
	        strcmp(e->name, arg) == 0);
}

/* A subscriber that comes after the clients' transitions asks for a
 * snapshot and learns each client's state as it is now (old_state the
 * state itself, snapshot set), once; transitions say snapshot 0. */
static void
snapshot(void)
{
	peer        up = {0};
	sub         sb, late;
	mk_runtime *rt  = rt_open(&sb);
	mk_stats    st  = MK_STATS_INIT;
	char       *err = NULL;
	int         at = 0, from = 0;

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	CHECK_EQ(add(rt, &err,
	             "{\"name\": \"snap\", \"connection_type\": \"http\", "
	             "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	             "\"tools_to_execute\": [\"*\"]}",
	             up.port),
	         0);
	CHECK_EQ(add(rt, &err,
	             "{\"name\": \"snapoff\", \"connection_type\": \"http\", "
	             "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	             "\"disabled\": true}",
	             up.port),
	         0);
	event e = wait_state(&sb, &at, "snap", "healthy", NULL);
	CHECK_EQ(e.snapshot, 0);
	sub_open(&late, mk_stream_url(rt));
	/* (nng attaches the subscriber on its own threads: its count says
	 * when) */
	for (int i = 0; i < 1000 && st.stream_subscribers < 2; i++) {
		CHECK_EQ(mk_runtime_stats(rt, &st, 0), 0);
		nanosleep(&(struct timespec) {0, 10000000}, NULL);
	}
	CHECK_EQ(st.stream_subscribers, 2);
	CHECK_EQ(mk_stream_snapshot(rt, 0), 0);
	e = wait_event(&late, &from, is_snapshot, "snap", "snap's snapshot");
	CHECK(strcmp(e.state, "healthy") == 0);
	CHECK(strcmp(e.old_state, "healthy") == 0);
	CHECK(e.tools_count > 0);
	from = 0;
	e    = wait_event(&late, &from, is_snapshot, "snapoff",
	                  "snapoff's snapshot");
	CHECK(strcmp(e.state, "disabled") == 0);
	CHECK_EQ(mk_stream_snapshot(NULL, 0), MK_EHANDLE);
	sub_close(&late);
	rt_close(&rt, &sb);
	peer_stop(&up);
	free(err);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	snprintf(js, sizeof(js), "%s", peer_everything_js());
	RUN_IF(state_machine);
	RUN_IF(modes_table);
	RUN_IF(boot_dead_then_heal);
	RUN_IF(sse_transport_lost);
	RUN_IF(message_normalised);
	RUN_IF(html_error_page);
	RUN_IF(make_before_break);
	RUN_IF(progress_api);
	RUN_IF(max_concurrent_calls);
	RUN_IF(calls_leave_room);
	RUN_IF(cancel_api);
	RUN_IF(disable_during_reconnect);
	RUN_IF(stale_check_dropped);
	RUN_IF(known_tools_restored);
	RUN_IF(update_client);
	RUN_IF(tools_list_bounded);
	RUN_IF(last_known_good);
	RUN_IF(outcome_unknown);
	RUN_IF(result_cache);
	RUN_IF(tool_pinning);
	RUN_IF(pin_untrusted);
	RUN_IF(prompts_resources);
	RUN_IF(snapshot);
	curl_global_cleanup();
	return (0);
}
