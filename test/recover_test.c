/*
 * recover_test.c - tool calls that recover against
 * test/peers/oauth.mjs: its MCP server takes only the tokens its
 * authorization server issued, and can revoke them all at once (the
 * upstream rotated while the runtime believes its token valid), refuse
 * every token, fail requests and forget sessions on demand; its tools
 * counted_destructive / _idempotent / _readonly / _none count their own
 * executions.
 *
 * Covered: the auth-failure classifier; per-user: a rotated token is
 * refreshed and the call retried, a retry that fails again is a clean
 * error after one refresh, a destructive call whose session's initialize
 * got the 401 (never sent) is sent after the refresh and runs once; shared
 * sticky: 50 concurrent calls after a rotation cause one refresh and one
 * reconnect, read-only and idempotent calls retried, destructive and
 * unannotated ones failing fast and never run twice; a reconnect slower than
 * the budget returns the original error in time and still completes; non-auth
 * failures never refresh; a forgotten session is re-made for a read-only call,
 * not for a destructive one; a recovering call keeps its deadline.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actors/client/client_impl.h"
#include "oautil.h"
#include "testutil.h"

static long
tool_count(const char *tool)
{
	json_t *c = counters();
	long    n = (long)json_integer_value(
	           json_object_get(json_object_get(c, "tools"), tool));

	json_decref(c);
	return (n);
}

static int64_t
generation(mk_runtime *rt, const char *name)
{
	json_t *v = view_of(rt, name);
	int64_t g = json_integer_value(json_object_get(v, "generation"));

	json_decref(v);
	return (g);
}

/* A call of tool (no identity); *res kept. */
static int
call_tool(mk_runtime *rt, const char *name, const char *tool, const char *user,
          int timeout_ms, mk_result **res)
{
	mk_call c = {.size       = sizeof(mk_call),
	             .client     = name,
	             .tool       = tool,
	             .arguments  = "{}",
	             .timeout_ms = timeout_ms,
	             .user_id    = user};

	return (mk_tool_call(rt, &c, res));
}

/* The recovery the result reports, or NULL (new reference). */
static json_t *
recovery_of(const mk_result *res)
{
	return (res != NULL && res->recovery != NULL
	                ? json_loads(res->recovery, 0, NULL)
	                : NULL);
}

static void
classifier(void)
{
	struct {
		int         kind, status;
		const char *text;
		bool        auth;
	} cases[] = {
	        {MCP_E_HTTP, 401, "HTTP 401", true},
	        {MCP_E_HTTP, 0, "upstream said 403 to that", true},
	        {MCP_E_SERVER, 0, "Unauthorized: token revoked", true},
	        {MCP_E_SERVER, 0, "FORBIDDEN", true},
	        {MCP_E_HTTP, 0, "status=401", true},
	        {MCP_E_AUTH, 0, "whatever", true},
	        {MCP_E_CONNECT, 0, "connect to 127.0.0.1:4013 failed", false},
	        {MCP_E_CONNECT, 0, "port 4031 refused", false},
	        {MCP_E_SERVER, 0, "request 14031 failed", false},
	        {MCP_E_TIMEOUT, 0, "took 401ms, gave up", false},
	        {MCP_E_SERVER, 0, "version 4.01 unsupported", false},
	        {MCP_E_HTTP, 500, "internal error", false},
	        {MCP_E_SERVER, 0, "unauthorizedly worded", false},
	        {MCP_E_TIMEOUT, 0, "timed out after 30000 ms", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mcp_error e;
		mcp_error_set(&e, (mcp_errkind)cases[i].kind, "%s",
		              cases[i].text);
		e.http_status = cases[i].status;
		if (cl_auth_failure(&e) != cases[i].auth) {
			fprintf(stderr, "classifier: \"%s\" (HTTP %d)\n",
			        cases[i].text, cases[i].status);
			CHECK(0);
		}
	}
}

/* per_user_oauth: the caller's token rotated upstream. */
static void
per_user(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "ru.db");
	mk_result  *res = NULL;
	json_t     *p, *rec;
	int         at = 0;
	long        r0;

	CHECK_EQ(add_user(rt, "ru", "per_user_oauth", "\"oauth_config\": {}"),
	         0);
	bootstrap(rt, "ru", false);
	wait_state(&sb, &at, "ru", "healthy", NULL);
	p = auth_required(rt, "ru", "hank", NULL);
	authorize_as(rt, p, "hank");
	json_decref(p);
	whoami_as(rt, "ru", "hank", NULL, "hank");
	/* rotated: 401, refresh, retry */
	as_admin("/admin/revoke-all", "{}");
	r0      = by_grant("refresh_token");
	long ro = tool_count("counted_readonly");
	CHECK_EQ(call_tool(rt, "ru", "counted_readonly", "hank", 0, &res), 0);
	CHECK(res->result != NULL && strstr(res->result, "isError") == NULL);
	CHECK((rec = recovery_of(res)) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(rec, "path")),
	             "per_call") == 0);
	CHECK(json_is_false(json_object_get(rec, "retry_skipped")));
	json_decref(rec);
	mk_result_free(&res);
	CHECK_EQ(by_grant("refresh_token") - r0, 1);
	CHECK_EQ(tool_count("counted_readonly") - ro, 1);
	/* the retry fails too: a clean error, one refresh */
	as_admin("/admin/reject-all", "{\"on\": true}");
	r0 = by_grant("refresh_token");
	CHECK_EQ(call_tool(rt, "ru", "counted_readonly", "hank", 0, &res),
	         MK_EUPSTREAM);
	CHECK(res->error != NULL && strstr(res->error, "401") != NULL);
	CHECK(res->recovery != NULL);
	mk_result_free(&res);
	CHECK_EQ(by_grant("refresh_token") - r0, 1);
	as_admin("/admin/reject-all", "{\"on\": false}");
	/* a destructive tool refused before it was sent (its session's
	 * initialize got the 401) never ran: refreshed and sent, run once */
	as_admin("/admin/revoke-all", "{}");
	long de = tool_count("counted_destructive");
	CHECK_EQ(call_tool(rt, "ru", "counted_destructive", "hank", 0, &res),
	         0);
	CHECK((rec = recovery_of(res)) != NULL);
	CHECK(json_is_false(json_object_get(rec, "retry_skipped")));
	json_decref(rec);
	mk_result_free(&res);
	CHECK_EQ(tool_count("counted_destructive") - de, 1);
	whoami_as(rt, "ru", "hank", NULL, "hank"); /* the new token works */
	/* the counters saw it: three recoveries, none skipped */
	char   *mt = NULL;
	json_t *m;
	CHECK_EQ(mk_client_metrics_json(rt, "ru", &mt), 0);
	CHECK((m = json_loads(mt, 0, NULL)) != NULL);
	mk_free(mt);
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(m, "recoveries"), "per_call")),
	         3);
	CHECK_EQ(json_integer_value(json_object_get(m, "retries_skipped")), 0);
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(m, "calls"), "error")),
	         1);
	CHECK(json_integer_value(json_object_get(json_object_get(m, "calls"),
	                                         "auth_required")) >= 1);
	json_decref(m);
	CHECK_EQ(mk_client_metrics_json(rt, "nobody", &mt), MK_ENOENT);
	CHECK(mt == NULL);
	CHECK_EQ(mk_client_metrics_json(rt, NULL, &mt), MK_EINVAL);
	close_rt(&rt, &sb);
}

typedef struct batch {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done;
	int             ok[4], failed[4], skipped[4];
} batch;

typedef struct one {
	batch *b;
	int    kind; /* index into tools[] */
} one;

static const char *const tools[] = {"counted_readonly", "counted_idempotent",
                                    "counted_destructive", "counted_none"};

static void
on_batch(void *arg, int rc, mk_result *res)
{
	one    *o   = arg;
	batch  *b   = o->b;
	json_t *rec = recovery_of(res);

	pthread_mutex_lock(&b->mtx);
	if (rc == 0) {
		b->ok[o->kind]++;
	} else {
		b->failed[o->kind]++;
	}
	b->skipped[o->kind] += rec != NULL &&
	        json_is_true(json_object_get(rec, "retry_skipped"));
	b->done++;
	pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->mtx);
	json_decref(rec);
	mk_result_free(&res);
}

/* A shared sticky client after an upstream rotation: 50 calls at once. */
static void
shared(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "rs.db");
	batch       b  = {PTHREAD_MUTEX_INITIALIZER,
	                  PTHREAD_COND_INITIALIZER,
	                  0,
	                  {0},
	                  {0},
	                  {0}};
	one         o[50];
	long        before[4], r0;
	int         at = 0;

	CHECK_EQ(add_oauth(rt, "rs", "{}", true), 0);
	bootstrap(rt, "rs", false);
	wait_state(&sb, &at, "rs", "healthy", NULL);
	whoami_is(rt, "rs", "admin");
	for (int k = 0; k < 4; k++) {
		before[k] = tool_count(tools[k]);
	}
	int64_t g0 = generation(rt, "rs");
	r0         = by_grant("refresh_token");
	as_admin("/admin/revoke-all", "{}");
	for (int i = 0; i < 50; i++) {
		/* 20 read-only, 10 of each other kind */
		o[i]      = (one) {&b, i < 20 ? 0 : 1 + (i - 20) / 10};
		mk_call c = {.size      = sizeof(mk_call),
		             .client    = "rs",
		             .tool      = tools[o[i].kind],
		             .arguments = "{}"};
		CHECK_EQ(mk_tool_call_async(rt, &c, on_batch, &o[i]), 0);
	}
	pthread_mutex_lock(&b.mtx);
	while (b.done < 50) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WAIT_MS / 1000;
		CHECK_EQ(pthread_cond_timedwait(&b.cv, &b.mtx, &ts), 0);
	}
	pthread_mutex_unlock(&b.mtx);
	fprintf(stderr,
	        "   ok/failed: readonly %d/%d idempotent %d/%d destructive %d/%d none %d/%d\n",
	        b.ok[0], b.failed[0], b.ok[1], b.failed[1], b.ok[2],
	        b.failed[2], b.ok[3], b.failed[3]);
	/* one refresh, one reconnect */
	CHECK_EQ(by_grant("refresh_token") - r0, 1);
	CHECK_EQ(generation(rt, "rs") - g0, 1);
	/* safe ones retried and done, each once */
	CHECK_EQ(b.ok[0], 20);
	CHECK_EQ(b.ok[1], 10);
	CHECK_EQ(tool_count(tools[0]) - before[0], 20);
	CHECK_EQ(tool_count(tools[1]) - before[1], 10);
	/* unsafe ones failed fast, never run twice (here: never at all) */
	CHECK_EQ(b.failed[2], 10);
	CHECK_EQ(b.failed[3], 10);
	CHECK_EQ(b.skipped[2], 10);
	CHECK_EQ(b.skipped[3], 10);
	CHECK(tool_count(tools[2]) - before[2] <= 10);
	CHECK(tool_count(tools[3]) - before[3] <= 10);
	whoami_is(rt, "rs", "admin");
	close_rt(&rt, &sb);
}

/* The reconnect takes longer than the caller's budget. */
static void
slow_reconnect(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "slow.db");
	mk_result  *res = NULL;
	int         at  = 0;
	int64_t     t0, took;

	CHECK_EQ(add_oauth(rt, "slow", "{}", true), 0);
	bootstrap(rt, "slow", false);
	wait_state(&sb, &at, "slow", "healthy", NULL);
	int64_t g0 = generation(rt, "slow");
	as_admin("/admin/revoke-all", "{}");
	as_admin("/admin/delay", "{\"ms\": 12000}");
	t0 = now_ms();
	CHECK_EQ(call_tool(rt, "slow", "counted_readonly", NULL, 0, &res),
	         MK_EUPSTREAM);
	took = now_ms() - t0;
	mk_result_free(&res);
	fprintf(stderr, "   original error after %lld ms\n", (long long)took);
	CHECK(took >= 9000 && took < 12000); /* the 10 s budget */
	as_admin("/admin/delay", "{\"ms\": 0}");
	/* the reconnect completes on its own: the generation moves */
	for (int i = 0; generation(rt, "slow") == g0; i++) {
		CHECK(i < 400);
		struct timespec ts = {0, 25 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the view: a reconnect on the
		                       * same state is no stream event */
	}
	whoami_is(rt, "slow", "admin");
	close_rt(&rt, &sb);
}

/* Failures that are not about credentials never refresh. */
static void
non_auth(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "na.db");
	mk_result  *res = NULL;
	char       *err = NULL;
	int         at  = 0;
	long        t0;

	CHECK_EQ(add_oauth(rt, "na", "{}", false), 0);
	bootstrap(rt, "na", false);
	wait_state(&sb, &at, "na", "healthy", NULL);
	t0 = admin(srv.port, "/admin/counters", NULL, "token_requests");
	as_admin("/admin/mcp-fail-next", "{\"status\": 500}");
	CHECK_EQ(call_tool(rt, "na", "counted_readonly", NULL, 0, &res),
	         MK_EUPSTREAM);
	CHECK(res->recovery == NULL);
	mk_result_free(&res);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         t0);
	/* a timeout */
	mk_call slow = {.size       = sizeof(mk_call),
	                .client     = "na",
	                .tool       = "slow",
	                .arguments  = "{\"ms\": 3000}",
	                .timeout_ms = 300};
	CHECK_EQ(mk_tool_call(rt, &slow, &res), MK_ETIMEDOUT);
	CHECK(res->recovery == NULL);
	mk_result_free(&res);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         t0);
	/* connection refused */
	int port = peer_free_port();
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"gone\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"]}",
	            port),
	        0);
	CHECK(call_tool(rt, "gone", "echo", NULL, 0, &res) != 0);
	CHECK(res->recovery == NULL);
	mk_result_free(&res);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         t0);
	close_rt(&rt, &sb);
}

/* The server forgot the session: made again for a read-only call, never
 * replayed for a destructive one. */
static void
session_forgotten(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "sg.db");
	mk_result  *res = NULL;
	json_t     *rec;
	int         at = 0;

	CHECK_EQ(add_oauth(rt, "sg", "{}", true), 0);
	bootstrap(rt, "sg", false);
	wait_state(&sb, &at, "sg", "healthy", NULL);
	long r0 = by_grant("refresh_token");
	as_admin("/admin/drop-sessions", "{}");
	CHECK_EQ(call_tool(rt, "sg", "counted_readonly", NULL, 0, &res), 0);
	CHECK((rec = recovery_of(res)) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(rec, "path")),
	             "session") == 0);
	json_decref(rec);
	mk_result_free(&res);
	CHECK_EQ(by_grant("refresh_token"), r0); /* no refresh for that */
	as_admin("/admin/drop-sessions", "{}");
	long de = tool_count("counted_destructive");
	CHECK(call_tool(rt, "sg", "counted_destructive", NULL, 0, &res) != 0);
	CHECK((rec = recovery_of(res)) != NULL);
	CHECK(json_is_true(json_object_get(rec, "retry_skipped")));
	json_decref(rec);
	mk_result_free(&res);
	CHECK(tool_count("counted_destructive") - de <= 1);
	/* the re-made session serves (a read-only call joins the reconnect
	 * the destructive one started, if it is still running) */
	CHECK_EQ(call_tool(rt, "sg", "counted_readonly", NULL, 0, &res), 0);
	mk_result_free(&res);
	close_rt(&rt, &sb);
}

/* Refresh and retry share the call's one deadline. */
static void
deadline(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "dl.db");
	mk_result  *res = NULL;
	json_t     *p;
	int         at = 0;
	int64_t     t0, took;

	CHECK_EQ(add_user(rt, "dl", "per_user_oauth", "\"oauth_config\": {}"),
	         0);
	bootstrap(rt, "dl", false);
	wait_state(&sb, &at, "dl", "healthy", NULL);
	p = auth_required(rt, "dl", "ivy", NULL);
	authorize_as(rt, p, "ivy");
	json_decref(p);
	as_admin("/admin/revoke-all", "{}");
	as_admin("/admin/delay", "{\"ms\": 5000}");
	t0 = now_ms();
	CHECK(call_tool(rt, "dl", "counted_readonly", "ivy", 2000, &res) != 0);
	took = now_ms() - t0;
	mk_result_free(&res);
	as_admin("/admin/delay", "{\"ms\": 0}");
	fprintf(stderr, "   a 2 s call answered after %lld ms\n",
	        (long long)took);
	CHECK(took < 2000 + 1500);
	close_rt(&rt, &sb);
}

/* A call that waited for its credential's refresh and then for the
 * server until its deadline says how long it waited in all, not what
 * was left of its deadline when it was sent. */
static void
waited_in_all(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "wa.db");
	mk_result  *res = NULL;
	json_t     *p;
	int         at = 0;

	CHECK_EQ(add_user(rt, "wa", "per_user_oauth", "\"oauth_config\": {}"),
	         0);
	bootstrap(rt, "wa", false);
	wait_state(&sb, &at, "wa", "healthy", NULL);
	as_admin("/admin/expires-in", "{\"seconds\": 1}");
	p = auth_required(rt, "wa", "ivy", NULL);
	authorize_as(rt, p, "ivy");
	json_decref(p);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	/* ivy's token due: the clock has to pass its expiry (1 s) */
	usleep(1200 * 1000);
	as_admin("/admin/delay", "{\"ms\": 1000}");
	as_admin("/admin/hold", "{\"mcp\": \"tools/call\"}");
	CHECK(call_tool(rt, "wa", "counted_readonly", "ivy", 2000, &res) != 0);
	as_admin("/admin/hold", "{}");
	as_admin("/admin/delay", "{\"ms\": 0}");
	fprintf(stderr, "   %s\n", res != NULL ? res->error : "?");
	CHECK(res != NULL && res->error != NULL &&
	      strcmp(res->error, "tools/call timed out after 2000 ms") == 0);
	mk_result_free(&res);
	close_rt(&rt, &sb);
}

typedef struct waited {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	bool            done;
	int             rc;
	json_t         *rec; /* its recovery */
} waited;

static void
on_waited(void *arg, int rc, mk_result *res)
{
	waited *w = arg;

	pthread_mutex_lock(&w->mtx);
	w->rc   = rc;
	w->rec  = recovery_of(res);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mtx);
	mk_result_free(&res);
}

/* A per-call call that opened with a token replaced while it was out
 * (refreshed meanwhile: ahead of expiry, or another node's taken) and
 * then refused with it takes the new one and is retried: no second
 * refresh for a credential that is not the one held any more. */
static void
changed_meanwhile(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "cm.db");
	waited      w  = {.mtx = PTHREAD_MUTEX_INITIALIZER,
	                  .cv  = PTHREAD_COND_INITIALIZER};
	mk_call     c  = {.size   = sizeof(mk_call),
	                  .client = "cm",
	                  .tool   = "counted_readonly"};
	int         at = 0;
	long        r0;
	char       *id;

	CHECK_EQ(add_oauth(rt, "cm", "{}", false), 0);
	bootstrap(rt, "cm", false);
	wait_state(&sb, &at, "cm", "healthy", NULL);
	id = id_of(&sb, "cm");
	/* its session's initialize held at the server (its token checked
	 * already): its tools/call comes after, with the same token */
	as_admin("/admin/hold", "{\"mcp\": \"initialize\"}");
	long held = admin(srv.port, "/admin/counters", NULL, "held");
	CHECK_EQ(mk_tool_call_async(rt, &c, on_waited, &w), 0);
	for (int i = 0;
	     admin(srv.port, "/admin/counters", NULL, "held") == held; i++) {
		CHECK(i < 400);
		usleep(25 * 1000); /* polling the server's counter, bounded */
	}
	/* its token revoked, then refreshed (a new one, live) */
	as_admin("/admin/revoke-all", "{}");
	r0 = by_grant("refresh_token");
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	CHECK_EQ(by_grant("refresh_token") - r0, 1);
	as_admin("/admin/hold", "{}");
	pthread_mutex_lock(&w.mtx);
	while (!w.done) {
		pthread_cond_wait(&w.cv, &w.mtx);
	}
	pthread_mutex_unlock(&w.mtx);
	CHECK_EQ(w.rc, 0);
	CHECK(w.rec != NULL);
	CHECK(strcmp(json_string_value(json_object_get(w.rec, "path")),
	             "per_call") == 0);
	json_decref(w.rec);
	CHECK_EQ(by_grant("refresh_token") - r0, 1); /* not refreshed again */
	free(id);
	close_rt(&rt, &sb);
}

/* The spans of trace, from the collector (test/peers/otlp.mjs), by
 * name: the first of that name whose attribute key is value (key NULL:
 * any), or NULL. */
static json_t *
span_named(json_t *all, const char *name, const char *key, const char *value)
{
	size_t  i;
	json_t *s;

	json_array_foreach(json_object_get(all, "spans"), i, s)
	{
		const char *v = json_string_value(json_object_get(
		        json_object_get(s, "attributes"), key));
		if (strcmp(json_string_value(json_object_get(s, "name")),
		           name) == 0 &&
		    (key == NULL || (v != NULL && strcmp(v, value) == 0))) {
			return (s);
		}
	}
	return (NULL);
}

static const char *
sfield(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return (v != NULL ? v : "");
}

static long
status_of(json_t *span)
{
	return ((long)json_integer_value(
	        json_object_get(json_object_get(span, "status"), "code")));
}

/* With telemetry: a call that recovers after a rotation is one trace
 * under its caller's context - the call's span (the caller's span its
 * parent), its recovery's under it, the refresh and the connects beside
 * them - in the collector, as OTLP/HTTP JSON it accepted (otlp.mjs
 * checks the encoding); the upstream got the call's span as its parent.
 * With the collector refusing, calls go on and the spans are counted
 * dropped. */
static void
traced(void)
{
	peer        col = {0};
	char        url[64];
	const char *tp =
	        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	mk_trace   trace = {tp, NULL};
	mk_call    c     = {.size   = sizeof(mk_call),
	                    .client = "tr",
	                    .tool   = "counted_readonly"};
	mk_result *res   = NULL;
	mk_stats   st    = MK_STATS_INIT;
	sub        sb;
	int        at = 0;

	CHECK_EQ(peer_start_otlp(&col, WAIT_MS), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", col.port);
	otlp_endpoint  = url;
	mk_runtime *rt = open_rt(&sb, "tr.db");
	otlp_endpoint  = NULL;
	CHECK_EQ(add_oauth(rt, "tr", "{}", true), 0);
	bootstrap(rt, "tr", false);
	wait_state(&sb, &at, "tr", "healthy", NULL);
	as_admin("/admin/revoke-all", "{}");
	c.trace = &trace;
	CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
	c.trace = NULL;
	CHECK(res->recovery != NULL && strstr(res->recovery, "shared"));
	mk_result_free(&res);
	/* the exporter posts each second: the collector's list is polled,
	 * with a deadline (another process: nothing to wait on) */
	for (int i = 0; i < 100; i++) {
		json_t *all = admin_json(col.port, "/spans", NULL);
		bool    in = span_named(all, "tools/call", NULL, NULL) != NULL;
		json_decref(all);
		if (in) {
			break;
		}
		usleep(100 * 1000);
	}
	/* the collector refuses: calls still answer, spans are dropped */
	CHECK_EQ(admin(col.port, "/admin/mode", "{\"status\": 503}", "status"),
	         503);
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(mk_tool_call(rt, &c, &res), 0);
		mk_result_free(&res);
	}
	for (int i = 0; i < 100 && st.spans_dropped == 0; i++) {
		/* the exporter posts each second: nothing to wait on but its
		 * counter (polled, with a deadline) */
		CHECK_EQ(mk_runtime_stats(rt, &st, 5000), 0);
		if (st.spans_dropped == 0) {
			usleep(100 * 1000);
		}
	}
	CHECK(st.spans_dropped > 0);
	CHECK(st.spans_exported > 0);
	CHECK_EQ(admin(col.port, "/admin/mode", "{}", "status"), 0);
	close_rt(&rt, &sb); /* the close posts what is queued */

	json_t *all = admin_json(col.port, "/spans", NULL);
	CHECK(all != NULL);
	CHECK_EQ(json_integer_value(json_object_get(all, "rejected")), 0);
	json_t *call = span_named(all, "tools/call", "gen_ai.tool.name",
	                          "counted_readonly");
	CHECK(call != NULL);
	CHECK(strcmp(sfield(call, "traceId"),
	             "4bf92f3577b34da6a3ce929d0e0e4736") == 0);
	CHECK(strcmp(sfield(call, "parentSpanId"), "00f067aa0ba902b7") == 0);
	CHECK_EQ(json_integer_value(json_object_get(call, "kind")), 3);
	CHECK_EQ(status_of(call), 1);
	CHECK(strcmp(sfield(json_object_get(call, "attributes"),
	                    "mcpkeep.client"),
	             "tr") == 0);
	CHECK(strcmp(sfield(json_object_get(call, "resource"), "service.name"),
	             "mcpkeep") == 0);
	json_t *rec =
	        span_named(all, "recover", "mcpkeep.recovery.path", "shared");
	CHECK(rec != NULL);
	CHECK(strcmp(sfield(rec, "traceId"), sfield(call, "traceId")) == 0);
	CHECK(strcmp(sfield(rec, "parentSpanId"), sfield(call, "spanId")) ==
	      0);
	json_t *ref =
	        span_named(all, "refresh", "mcpkeep.grant", "refresh_token");
	CHECK(ref != NULL);
	CHECK_EQ(status_of(ref), 1);
	CHECK(strcmp(sfield(json_object_get(ref, "attributes"),
	                    "mcpkeep.client"),
	             "tr") == 0);
	/* the first connect (authorized: the connect decides) */
	CHECK(span_named(all, "connect", "mcpkeep.connect.why", "reconnect") !=
	      NULL);
	/* the reconnect after the rotation */
	CHECK(span_named(all, "connect", "mcpkeep.connect.why",
	                 "background") != NULL);
	/* no secret in any span */
	char *text = json_dumps(all, JSON_COMPACT);
	CHECK(strstr(text, "Bearer") == NULL &&
	      strstr(text, "access_token") == NULL);
	free(text);
	json_decref(all);
	peer_stop(&col);
}

int
main(void)
{
	oauth_suite_begin();
	RUN(classifier);
	RUN(per_user);
	RUN(shared);
	RUN(non_auth);
	RUN(session_forgotten);
	RUN(deadline);
	RUN(waited_in_all);
	RUN(changed_meanwhile);
	RUN(slow_reconnect);
	RUN(traced);
	oauth_suite_end();
	return (0);
}
