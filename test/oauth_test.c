/*
 * oauth_test.c - auth_type oauth end to end against
 * test/peers/oauth.mjs: a real OAuth authorization server (oauth2-mock-
 * server, wrapped to rotate refresh tokens, fail on demand and count
 * every request) and an SDK MCP server that accepts only its bearer
 * tokens.  The browser's part of a flow is played by reading the
 * authorize redirect's Location.
 *
 * Covered: discovery (WWW-Authenticate -> RFC 9728 -> RFC 8414) with
 * dynamic registration and PKCE to a working tool call; a configured
 * client with client_secret_basic; 1,000 concurrent calls on an expired
 * token -> one refresh; rotating refresh tokens never reused (also
 * across a restart); invalid_grant -> needs_reauth, calls refused without
 * the network, reauthorize -> healthy; transient 503s retried; 3 s
 * tokens: an idle client refreshed about once per 80% of a lifetime, 100
 * callers after expiry -> one refresh; expires_in 1: refreshes at least
 * 1 s apart; unknown, reused and expired flow states rejected; a restart
 * in the middle of a flow; no secret in the log, on the stream or in the
 * list view.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actors/credential/credential_msg.h"
#include "actors/kernel/kernel.h"
#include "codec/mp.h"
#include "codec/msg.h"
#include "mcpkeep.h"
#include "oautil.h"
#include "peer.h"
#include "rtutil.h"
#include "runtime/runtime_impl.h"
#include "testutil.h"

#define NCALLS 1000

/* ---- the flow -------------------------------------------------------------
 */

/* Nothing configured but an empty oauth_config: discovered from the 401,
 * registered, authorized with PKCE; then a sticky one. */
static void
discovery_flow(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "disc.db");
	json_t     *v, *c;
	int         at = 0, rc;
	char       *out;

	as_admin("/admin/reset", "{}");
	CHECK_EQ(add_oauth(rt, "oa_pc", "{}", false), 0);
	v = view_of(rt, "oa_pc");
	CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
	json_decref(v);
	/* refused while pending, without the network */
	out = call_text(rt, "oa_pc", "whoami", "{}", &rc);
	CHECK_EQ(rc, MK_ESTATE);
	free(out);
	bootstrap(rt, "oa_pc", false);
	wait_state(&sb, &at, "oa_pc", "healthy", NULL);
	whoami_is(rt, "oa_pc", "admin");
	c = counters();
	CHECK_EQ(json_integer_value(json_object_get(c, "registrations")), 1);
	CHECK_EQ(
	        json_integer_value(json_object_get(
	                json_object_get(c, "by_grant"), "authorization_code")),
	        1);
	/* RFC 8707: the resource is the server */
	char res[128];
	snprintf(res, sizeof(res), "http://127.0.0.1:%d/mcp", srv.port);
	CHECK(strcmp(json_string_value(json_object_get(c, "resource_seen")),
	             res) == 0);
	json_decref(c);
	v = view_of(rt, "oa_pc");
	CHECK(json_array_size(json_object_get(v, "tools")) >= 5);
	json_decref(v);

	/* sticky, with a configured client and client_secret_basic */
	CHECK_EQ(
	        add_oauth(
	                rt, "oa_st",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	                true),
	        0);
	bootstrap(rt, "oa_st", false);
	wait_state(&sb, &at, "oa_st", "healthy", NULL);
	whoami_is(rt, "oa_st", "admin");
	c = counters();
	CHECK_EQ(json_integer_value(json_object_get(c, "registrations")), 1);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "by_auth"),
	                                         "basic")) >= 1);
	json_decref(c);
	/* the client secret is not in the list view */
	char *list = NULL;
	CHECK_EQ(mk_clients_json(rt, NULL, &list), 0);
	CHECK(strstr(list, "static-secret") == NULL);
	mk_free(list);
	close_rt(&rt, &sb);
}

/* ---- refresh
 * ----------------------------------------------------------------
 */

typedef struct fan {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done, ok;
} fan;

static void
on_call(void *arg, int rc, mk_result *res)
{
	fan *f = arg;

	pthread_mutex_lock(&f->mtx);
	int ok = rc == 0 && res != NULL && res->result != NULL &&
	        strstr(res->result, "admin") != NULL;
	if (!ok && res != NULL) {
		fprintf(stderr, "   call failed (%d): %s\n", rc,
		        res->error != NULL ? res->error : "?");
	}
	f->ok += ok;
	f->done++;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mtx);
	mk_result_free(&res);
}

/* Makes every stored token of the store name expired (as if the runtime
 * had been down past its expiry). */
static void
expire_stored(const char *name)
{
	char     db[128];
	sqlite3 *h;

	snprintf(db, sizeof(db), "%s/%s", dir, name);
	CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(h, "UPDATE oauth_tokens SET expires_at = 1",
	                      NULL, NULL, NULL),
	         SQLITE_OK);
	sqlite3_close(h);
}

static void
fan_out(mk_runtime *rt, const char *client, int n)
{
	fan f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	mk_call c = {.size      = sizeof(mk_call),
	             .client    = client,
	             .tool      = "whoami",
	             .arguments = "{}"};

	for (int i = 0; i < n; i++) {
		CHECK_EQ(mk_tool_call_async(rt, &c, on_call, &f), 0);
	}
	pthread_mutex_lock(&f.mtx);
	while (f.done < n) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WAIT_MS / 1000;
		CHECK_EQ(pthread_cond_timedwait(&f.cv, &f.mtx, &ts), 0);
	}
	pthread_mutex_unlock(&f.mtx);
	CHECK_EQ(f.ok, n);
}

/* 1,000 concurrent calls on an expired token: one refresh request; the
 * rotated refresh token is what is kept, and never spent twice. */
static void
single_flight(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "fan.db");
	int         at = 0;
	long        before;

	/* a per-call client: 1,000 fresh connections to one Node server
	 * take a while on a busy 2-core machine; the calls' deadline is 5
	 * minutes (the property is one refresh, not a speed) */
	CHECK_EQ(add_oauth(rt, "oa_fan",
	                   "{}, \"tool_execution_timeout\": \"300s\"", false),
	         0);
	bootstrap(rt, "oa_fan", false);
	wait_state(&sb, &at, "oa_fan", "healthy", NULL);
	close_rt(&rt, &sb);
	/* down past the token's expiry; the token endpoint slow, so the
	 * refresh ahead of expiry at boot and the callers meet */
	expire_stored("fan.db");
	as_admin("/admin/delay", "{\"ms\": 300}");
	before    = by_grant("refresh_token");
	rt        = open_rt(&sb, "fan.db");
	json_t *v = view_of(rt, "oa_fan");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0); /* known tools */
	json_decref(v);
	fan_out(rt, "oa_fan", NCALLS);
	as_admin("/admin/delay", "{\"ms\": 0}");
	CHECK_EQ(by_grant("refresh_token") - before, 1);
	fprintf(stderr,
	        "   %d calls on an expired token: 1 refresh (%lld asks joined it at the credential actor)\n",
	        NCALLS, (long long)cr_stat(rt, "refresh_joins"));
	close_rt(&rt, &sb);

	/* again after a restart: the stored (rotated) refresh token is the
	 * one spent; a reused one would count at the server */
	expire_stored("fan.db");
	rt = open_rt(&sb, "fan.db");
	fan_out(rt, "oa_fan", 10);
	CHECK_EQ(by_grant("refresh_token") - before, 2);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "refresh_reused"),
	         0);
	close_rt(&rt, &sb);
}

/* invalid_grant on refresh -> needs_reauth; refused without the network;
 * checks quiet; reauthorize -> healthy. */
static void
invalid_grant(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "grant.db");
	int         at = 0, rc;
	long        tokens, mcp;
	json_t     *v;
	event       e;
	char       *out;

	CHECK_EQ(add_oauth(rt, "oa_dead", "{}", false), 0);
	as_admin(
	        "/admin/fail-next",
	        "{\"status\": 400, \"error\": \"invalid_grant\", \"grant\": \"refresh_token\"}");
	as_admin("/admin/expires-in", "{\"seconds\": 1}");
	bootstrap(rt, "oa_dead", false);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	e = wait_state(&sb, &at, "oa_dead", "needs_reauth", "credential");
	CHECK(strstr(e.message, "invalid_grant") != NULL);
	v = view_of(rt, "oa_dead");
	CHECK(strcmp(vstr(json_object_get(v, "last_failure"), "stage"),
	             "credential") == 0);
	json_decref(v);
	tokens = admin(srv.port, "/admin/counters", NULL, "token_requests");
	mcp    = admin(srv.port, "/admin/counters", NULL, "mcp_unauthorized");
	json_t *c0 = counters();
	for (int i = 0; i < 20; i++) {
		out = call_text(rt, "oa_dead", "whoami", "{}", &rc);
		CHECK_EQ(rc, MK_ESTATE);
		free(out);
	}
	/* nothing reached either server */
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         tokens);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "mcp_unauthorized"),
	         mcp);
	json_t *c1 = counters();
	CHECK(json_equal(json_object_get(c0, "mcp_by_sub"),
	                 json_object_get(c1, "mcp_by_sub")));
	json_decref(c0);
	json_decref(c1);
	bootstrap(rt, "oa_dead", true);
	wait_state(&sb, &at, "oa_dead", "healthy", NULL);
	whoami_is(rt, "oa_dead", "admin");
	close_rt(&rt, &sb);
}

/* Transient 503s on refresh are retried; the client stays usable. */
static void
transient(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "503.db");
	int         at = 0;

	CHECK_EQ(add_oauth(rt, "oa_503", "{}", false), 0);
	bootstrap(rt, "oa_503", false);
	wait_state(&sb, &at, "oa_503", "healthy", NULL);
	close_rt(&rt, &sb);
	/* down past the token's expiry: its refresh at boot meets 503s */
	expire_stored("503.db");
	as_admin(
	        "/admin/fail-next",
	        "{\"status\": 503, \"count\": 2, \"grant\": \"refresh_token\"}");
	long before = by_grant("refresh_token");
	rt          = open_rt(&sb, "503.db");
	whoami_is(rt, "oa_503", "admin"); /* waits through the retries */
	CHECK_EQ(by_grant("refresh_token") - before, 3);
	CHECK_EQ(count_states(&sb, "oa_503", "needs_reauth"), 0);
	close_rt(&rt, &sb);
}

/* ---- short-lived tokens
 * ------------------------------------------------------
 * An authorization server that issues 3 s (or 1 s) access tokens.  The
 * windows below are measured windows: they count what the server saw in
 * a span of time (no event marks "nothing more happened").
 */

#define SHORT_S  3     /* the access tokens' life */
#define IDLE_MS  15000 /* the idle window */
#define FAN_IN   100   /* callers after expiry */
#define ONE_MS   5000  /* the window of 1 s tokens */
#define GAP_MS   1000  /* refreshes of one token are this far apart */
#define CLOCK_MS 10    /* the server's clock: ms, and slewed */

/* Refreshes ahead are at 80% of a token's life, +-10%: at most one per
 * 72% of it in a span of ms, and one more at each edge. */
static long
ahead_max(int64_t ms, int life_s)
{
	return ((long)(ms / (life_s * 720)) + 2);
}

/* An idle client with 3 s tokens: over IDLE_MS it is refreshed about
 * once per 80% of a lifetime (its health checks asking meanwhile), and
 * often enough that its token never lapses. */
static void
short_idle(void)
{
	sub             sb;
	mk_runtime     *rt = open_rt(&sb, "idle.db");
	int             at = 0;
	long            r0, n;
	struct timespec idle = {IDLE_MS / 1000, (IDLE_MS % 1000) * 1000000};

	CHECK_EQ(add_oauth(rt, "oa_idle", "{}", false), 0);
	as_admin("/admin/expires-in", "{\"seconds\": 3}");
	bootstrap(rt, "oa_idle", false);
	wait_state(&sb, &at, "oa_idle", "healthy", NULL);
	r0 = by_grant("refresh_token");
	nanosleep(&idle, NULL); /* the window measured */
	n = by_grant("refresh_token") - r0;
	fprintf(stderr, "   idle %d s on %d s tokens: refreshes %ld\n",
	        IDLE_MS / 1000, SHORT_S, n);
	CHECK(n <= ahead_max(IDLE_MS, SHORT_S));
	CHECK(n >= IDLE_MS / (SHORT_S * 1000) - 1);
	whoami_is(rt, "oa_idle", "admin");
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	close_rt(&rt, &sb);
}

/* FAN_IN concurrent callers on an expired token (the runtime was down
 * past it) whose refresh brings 3 s tokens: one refresh, whose token
 * they all use; a fan-out slower than 72% of a lifetime may meet one
 * refresh ahead per 72% of it. */
static void
short_fan_in(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "fanin.db");
	int         at = 0;
	long        r0, n;
	int64_t     t0, took;

	CHECK_EQ(add_oauth(rt, "oa_fanin", "{}", false), 0);
	bootstrap(rt, "oa_fanin", false);
	wait_state(&sb, &at, "oa_fanin", "healthy", NULL);
	close_rt(&rt, &sb);
	expire_stored("fanin.db");
	as_admin("/admin/expires-in", "{\"seconds\": 3}");
	r0 = by_grant("refresh_token");
	t0 = now_ms();
	rt = open_rt(&sb, "fanin.db");
	fan_out(rt, "oa_fanin", FAN_IN);
	took = now_ms() - t0;
	n    = by_grant("refresh_token") - r0;
	fprintf(stderr,
	        "   %d callers after expiry: refreshes %ld in %lld ms\n",
	        FAN_IN, n, (long long)took);
	CHECK(n >= 1);
	CHECK(n <= ahead_max(took, SHORT_S) - 1);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	close_rt(&rt, &sb);
}

/* The refresh_at entries from index from on: their count, and the least
 * gap between two of them (ms; INT64_MAX with fewer than two). */
static long
refresh_gaps(size_t from, int64_t *least)
{
	json_t *c  = counters();
	json_t *ra = json_object_get(c, "refresh_at");
	size_t  n  = json_array_size(ra);

	*least = INT64_MAX;
	for (size_t i = from + 1; i < n; i++) {
		int64_t gap = json_integer_value(json_array_get(ra, i)) -
		        json_integer_value(json_array_get(ra, i - 1));
		*least = gap < *least ? gap : *least;
	}
	json_decref(c);
	return (n > from ? (long)(n - from) : 0);
}

/* expires_in 1 (each token is due for refresh as soon as it is issued):
 * while calls keep asking for it over ONE_MS, its refreshes are at least
 * GAP_MS apart as the server saw them (the gap runs from the end of the
 * previous request: transit only widens it). */
static void
one_second(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "one.db");
	int         at = 0, rc, calls = 0, ok = 0;
	int64_t     t0, least;
	long        n;

	CHECK_EQ(add_oauth(rt, "oa_one", "{}", false), 0);
	as_admin("/admin/expires-in", "{\"seconds\": 1}");
	bootstrap(rt, "oa_one", false);
	wait_state(&sb, &at, "oa_one", "healthy", NULL);
	size_t from = (size_t)refresh_gaps(0, &least);
	for (t0 = now_ms(); now_ms() - t0 < ONE_MS; calls++) {
		char *out = call_text(rt, "oa_one", "whoami", "{}", &rc);
		ok += rc == 0 && strstr(out, "admin") != NULL;
		free(out);
	}
	n = refresh_gaps(from, &least);
	fprintf(stderr,
	        "   %d s on 1 s tokens: refreshes %ld, least gap %lld ms; %d of %d calls answered\n",
	        ONE_MS / 1000, n, (long long)least, ok, calls);
	CHECK(n >= 2);
	CHECK(n <= ONE_MS / GAP_MS + 2);
	CHECK(least >= GAP_MS - CLOCK_MS);
	CHECK(ok >= 1);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	close_rt(&rt, &sb);
}

/* ---- flows
 * ------------------------------------------------------------------
 */

/* complete-oauth names the client whose OAuth config the flow is of, by
 * client_id or name; another client's flow is refused and stays usable
 * by its own. */
static void
complete_by_id(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "byid.db");
	char       *url = NULL, *state = NULL, *err = NULL, *id;
	char        code[256], st[64];
	json_t     *v;
	int         at = 0;

	CHECK_EQ(add_oauth(rt, "oa_id", "{}", false), 0);
	CHECK_EQ(add_oauth(rt, "oa_other", "{}", false), 0);
	v  = view_of(rt, "oa_id");
	id = strdup(json_string_value(
	        json_object_get(json_object_get(v, "config"), "client_id")));
	json_decref(v);
	CHECK_EQ(mk_client_initiate_verification(rt, id, &url, &state, &err),
	         0);
	authorize(url, code, sizeof(code), st, sizeof(st));
	CHECK_EQ(mk_client_complete_oauth(rt, "oa_other", st, code, &err),
	         MK_EINVAL);
	CHECK(strstr(err, "belongs to another MCP client") != NULL);
	mk_free(err);
	CHECK_EQ(mk_client_complete_oauth(rt, "nobody", st, code, &err),
	         MK_ENOENT);
	mk_free(err);
	CHECK_EQ(mk_client_complete_oauth(rt, id, st, code, &err), 0);
	/* the client hears of its credential from the credential actor */
	wait_state(&sb, &at, "oa_id", "healthy", NULL);
	whoami_is(rt, id, "admin");
	mk_free(url);
	mk_free(state);
	free(id);
	close_rt(&rt, &sb);
}

static void
flows_rejected(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "flows.db");
	char       *url = NULL, *state = NULL, *err = NULL;
	char        code[256], st[64], db[128];

	CHECK_EQ(add_oauth(rt, "oa_fl", "{}", false), 0);
	/* unknown */
	CHECK_EQ(mk_oauth_complete(rt, "0123456789abcdef0123456789abcdef", "c",
	                           NULL, &err),
	         MK_EINVAL);
	CHECK(strcmp(err, "unknown or already used OAuth state") == 0);
	mk_free(err);
	/* reused */
	CHECK_EQ(mk_client_initiate_verification(rt, "oa_fl", &url, &state,
	                                         &err),
	         0);
	authorize(url, code, sizeof(code), st, sizeof(st));
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), 0);
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), MK_EINVAL);
	CHECK(strcmp(err, "unknown or already used OAuth state") == 0);
	mk_free(err);
	mk_free(url);
	mk_free(state);
	/* not an OAuth client */
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"plain\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"auth_type\": \"headers\", \"headers\": {\"x-api-key\": \"key-carol\"}}",
	            srv.port),
	        0);
	CHECK_EQ(mk_client_initiate_verification(rt, "plain", &url, &state,
	                                         &err),
	         MK_EINVAL);
	CHECK(strstr(err, "uses auth_type headers: it has no OAuth flow"));
	mk_free(err);
	/* a flow that expires while the runtime is down is gone */
	CHECK_EQ(mk_client_initiate_verification(rt, "oa_fl", &url, &state,
	                                         &err),
	         0);
	authorize(url, code, sizeof(code), st, sizeof(st));
	close_rt(&rt, &sb);
	snprintf(db, sizeof(db), "%s/flows.db", dir);
	sqlite3 *h;
	CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
	CHECK_EQ(sqlite3_exec(h, "UPDATE oauth_flows SET expires_at = 1", NULL,
	                      NULL, NULL),
	         SQLITE_OK);
	sqlite3_close(h);
	rt = open_rt(&sb, "flows.db");
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), MK_EINVAL);
	CHECK(strcmp(err, "unknown or already used OAuth state") == 0);
	mk_free(err);
	mk_free(url);
	mk_free(state);
	close_rt(&rt, &sb);
}

/* A restart between initiate and complete loses nothing. */
static void
restart_mid_flow(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "mid.db");
	char       *url = NULL, *state = NULL, *err = NULL;
	char        code[256], st[64];
	int         at = 0;

	CHECK_EQ(add_oauth(rt, "oa_mid", "{}", true), 0);
	CHECK_EQ(mk_client_initiate_verification(rt, "oa_mid", &url, &state,
	                                         &err),
	         0);
	close_rt(&rt, &sb);
	authorize(url, code, sizeof(code), st, sizeof(st));
	rt        = open_rt(&sb, "mid.db");
	json_t *v = view_of(rt, "oa_mid");
	CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
	json_decref(v);
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), 0);
	wait_state(&sb, &at, "oa_mid", "healthy", NULL);
	whoami_is(rt, "oa_mid", "admin");
	close_rt(&rt, &sb);
	/* and the authorized client comes back healthy (it connected while
	 * the runtime opened), no new flow */
	long flows = admin(srv.port, "/admin/counters", NULL, "authorize");
	rt         = open_rt(&sb, "mid.db");
	v          = view_of(rt, "oa_mid");
	CHECK(strcmp(vstr(v, "state"), "healthy") == 0);
	json_decref(v);
	whoami_is(rt, "oa_mid", "admin");
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "authorize"), flows);
	close_rt(&rt, &sb);
	mk_free(url);
	mk_free(state);
}

/* ---- per-user
 * ---------------------------------------------------------------
 */

static void
per_user_headers(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "uh.db");
	char       *err = NULL;
	json_t     *p, *v;
	mk_result  *res = NULL;
	int         at  = 0;

	CHECK_EQ(add_user(rt, "uh", "per_user_headers",
	                  "\"per_user_header_keys\": [\"x-api-key\"]"),
	         0);
	v = view_of(rt, "uh");
	CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
	json_decref(v);
	/* the admin's sample: wrong keys refused, then retained */
	CHECK_EQ(mk_client_verify_headers(rt, "uh", "{\"x-other\": \"v\"}",
	                                  &err),
	         MK_EINVAL);
	CHECK(strstr(err,
	             "header x-other is not one of the per_user_header_keys of MCP client uh") !=
	      NULL);
	mk_free(err);
	CHECK_EQ(mk_client_verify_headers(rt, "uh", "{}", &err), MK_EINVAL);
	CHECK(strstr(err, "header x-api-key is missing") != NULL);
	mk_free(err);
	CHECK_EQ(mk_client_verify_headers(
	                 rt, "uh", "{\"x-api-key\": \"key-admin\"}", &err),
	         0);
	wait_state(&sb, &at, "uh", "healthy", NULL);
	/* no identity: a clear error naming the three ways */
	CHECK_EQ(call_as(rt, "uh", NULL, NULL, &res), MK_EINVAL);
	CHECK(strstr(res->error, "X-MCP-User-Id") != NULL &&
	      strstr(res->error, "X-MCP-Virtual-Key") != NULL &&
	      strstr(res->error, "X-MCP-Session-Id") != NULL);
	mk_result_free(&res);
	/* alice has none: told how, the tool does not run */
	long before =
	        admin(srv.port, "/admin/counters", NULL, "token_requests");
	json_t *c0 = counters();
	p          = auth_required(rt, "uh", "alice", NULL);
	CHECK(strcmp(json_string_value(json_object_get(p, "kind")),
	             "headers") == 0);
	json_t *keys = json_pack("[s]", "x-api-key");
	CHECK(json_equal(json_object_get(p, "required_header_keys"), keys));
	json_decref(keys);
	const char *sid = json_string_value(json_object_get(p, "session_id"));
	CHECK(sid != NULL);
	CHECK(strstr(json_string_value(json_object_get(p, "submit_url")),
	             sid));
	json_t *c1 = counters();
	CHECK(json_equal(json_object_get(c0, "mcp_by_sub"),
	                 json_object_get(c1, "mcp_by_sub")));
	json_decref(c0);
	json_decref(c1);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         before);
	/* another identity's or another client's submission is none */
	CHECK_EQ(mk_user_headers_submit(rt, "uh", "user", "mallory", sid,
	                                "{\"x-api-key\": \"key-m\"}", &err),
	         MK_ENOENT);
	CHECK(strstr(err, "no such header session for this caller") != NULL);
	mk_free(err);
	err = NULL;
	CHECK_EQ(mk_user_headers_submit(rt, "uh", "user", "alice", sid,
	                                "{\"x-api-key\": \"key-alice\"}",
	                                &err),
	         0);
	json_decref(p);
	whoami_as(rt, "uh", "alice", NULL, "alice");
	/* the session is used up */
	CHECK_EQ(mk_user_headers_submit(rt, "uh", "user", "alice",
	                                "0123456789abcdef0123456789abcdef",
	                                "{\"x-api-key\": \"key-x\"}", &err),
	         MK_EINVAL);
	CHECK(strstr(err, "unknown, used or expired header session") != NULL);
	mk_free(err);
	close_rt(&rt, &sb);
	/* kept across a restart, sealed or not */
	rt = open_rt(&sb, "uh.db");
	whoami_as(rt, "uh", "alice", NULL, "alice");
	close_rt(&rt, &sb);
}

typedef struct mix {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done, ok;
} mix;

typedef struct mixcall {
	mix        *m;
	const char *want;
} mixcall;

static void
on_mixed(void *arg, int rc, mk_result *res)
{
	mixcall *mc = arg;
	mix     *m  = mc->m;

	pthread_mutex_lock(&m->mtx);
	m->ok += rc == 0 && res != NULL && res->result != NULL &&
	        strstr(res->result, mc->want) != NULL;
	m->done++;
	pthread_cond_signal(&m->cv);
	pthread_mutex_unlock(&m->mtx);
	mk_result_free(&res);
}

static void
per_user_oauth(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "uo.db");
	json_t     *p, *c0, *c1;
	int         at = 0;

	CHECK_EQ(add_user(rt, "uo", "per_user_oauth", "\"oauth_config\": {}"),
	         0);
	/* the admin's bootstrap: retained for discovery */
	bootstrap(rt, "uo", false);
	wait_state(&sb, &at, "uo", "healthy", NULL);
	/* bob and carol each authorize for themselves */
	p = auth_required(rt, "uo", "bob", NULL);
	authorize_as(rt, p, "bob");
	json_decref(p);
	p = auth_required(rt, "uo", "carol", NULL);
	authorize_as(rt, p, "carol");
	json_decref(p);
	whoami_as(rt, "uo", "bob", NULL, "bob");
	/* a caller's flow started up front (not from a refused call) */
	char *url = NULL, *state = NULL, *err = NULL, code[256], st[64];
	char  hinted[4096];
	CHECK_EQ(mk_user_oauth_start(rt, "uo", "user", "zed", NULL, &url,
	                             &state, &err),
	         0);
	snprintf(hinted, sizeof(hinted), "%s&login_hint=zed", url);
	authorize(hinted, code, sizeof(code), st, sizeof(st));
	CHECK(strcmp(st, state) == 0);
	CHECK_EQ(mk_oauth_complete(rt, st, code, NULL, &err), 0);
	whoami_as(rt, "uo", "zed", NULL, "zed");
	mk_free(url);
	mk_free(state);
	CHECK_EQ(mk_user_oauth_start(rt, "uo", "admin", "x", NULL, &url,
	                             &state, &err),
	         MK_EINVAL);
	/* interleaved, concurrently: each request carries its own token */
	c0    = counters();
	mix m = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	mixcall *mc = calloc(NCALLS, sizeof(*mc));
	for (int i = 0; i < NCALLS; i++) {
		const char *who = i % 2 ? "bob" : "carol";
		mk_call     c   = {.size      = sizeof(mk_call),
		                   .client    = "uo",
		                   .tool      = "whoami",
		                   .arguments = "{}",
		                   .user_id   = who};
		mc[i]           = (mixcall) {&m, who};
		CHECK_EQ(mk_tool_call_async(rt, &c, on_mixed, &mc[i]), 0);
	}
	pthread_mutex_lock(&m.mtx);
	while (m.done < NCALLS) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WAIT_MS / 1000;
		CHECK_EQ(pthread_cond_timedwait(&m.cv, &m.mtx, &ts), 0);
	}
	pthread_mutex_unlock(&m.mtx);
	CHECK_EQ(m.ok, NCALLS);
	free(mc);
	c1         = counters();
	json_t *b0 = json_object_get(json_object_get(c0, "mcp_by_sub"), "bob");
	json_t *b1 = json_object_get(json_object_get(c1, "mcp_by_sub"), "bob");
	json_t *a0 =
	        json_object_get(json_object_get(c0, "mcp_by_sub"), "admin");
	json_t *a1 =
	        json_object_get(json_object_get(c1, "mcp_by_sub"), "admin");
	/* each call is initialize + call (+ DELETE): bob's requests grew by
	 * his calls' share; the admin's credential was not used for them */
	CHECK(json_integer_value(b1) - json_integer_value(b0) >=
	      NCALLS / 2 * 2);
	CHECK(json_integer_value(a1) == json_integer_value(a0));
	json_decref(c0);
	json_decref(c1);
	close_rt(&rt, &sb);
}

/* The admin's discovery credential dies: the list and the stream show
 * needs_reauth (stage credential), the callers keep working;
 * reauthorized, it is healthy again. */
static void
admin_projection(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "proj.db");
	json_t     *p, *v;
	int         at = 0;

	CHECK_EQ(add_user(rt, "upj", "per_user_oauth", "\"oauth_config\": {}"),
	         0);
	bootstrap(rt, "upj", false);
	wait_state(&sb, &at, "upj", "healthy", NULL);
	p = auth_required(rt, "upj", "dave", NULL);
	authorize_as(rt, p, "dave");
	json_decref(p);
	/* the admin's token again, short-lived, its refresh to be refused */
	as_admin(
	        "/admin/fail-next",
	        "{\"status\": 400, \"error\": \"invalid_grant\", \"grant\": \"refresh_token\"}");
	as_admin("/admin/expires-in", "{\"seconds\": 1}");
	bootstrap(rt, "upj", true);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	event e = wait_state(&sb, &at, "upj", "needs_reauth", "credential");
	CHECK(strstr(e.message, "invalid_grant") != NULL);
	v = view_of(rt, "upj");
	CHECK(strcmp(vstr(v, "state"), "needs_reauth") == 0);
	json_decref(v);
	/* the state filter goes by what the list shows, not the runtime's
	 * own reading (healthy: calls go on) */
	char *list = NULL;
	CHECK_EQ(mk_clients_json(rt, "{\"state\": \"needs_reauth\"}", &list),
	         0);
	CHECK(strstr(list, "\"name\":\"upj\"") != NULL);
	mk_free(list);
	CHECK_EQ(mk_clients_json(rt, "{\"state\": \"healthy\"}", &list), 0);
	CHECK(strstr(list, "\"name\":\"upj\"") == NULL);
	mk_free(list);
	whoami_as(rt, "upj", "dave", NULL, "dave"); /* callers work on */
	bootstrap(rt, "upj", true);
	wait_state(&sb, &at, "upj", "healthy", NULL);
	close_rt(&rt, &sb);
}

static void
token_exchange(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "tx.db");
	char       *err = NULL, extra[512];
	json_t     *p, *c, *v;
	int         at = 0;
	const char *X  = "urn:ietf:params:oauth:grant-type:token-exchange";
	long        x0;

	snprintf(
	        extra, sizeof(extra),
	        "\"token_exchange\": {\"token_url\": \"http://127.0.0.1:%d/token\", \"audience\": \"https://api.example\", \"client_id\": \"static-client\", \"client_secret\": \"static-secret\", \"scopes\": [\"read\"]}",
	        srv.port);
	CHECK_EQ(add_user(rt, "tx", "token_exchange", extra), 0);
	v = view_of(rt, "tx");
	CHECK(strcmp(vstr(v, "state"), "pending_verification") == 0);
	json_decref(v);
	/* the admin's own token, exchanged now and retained */
	CHECK_EQ(mk_client_verify_exchange(rt, "tx", "user-admin", &err), 0);
	wait_state(&sb, &at, "tx", "healthy", NULL);
	/* a caller: exchanged once, then from the cache */
	x0 = by_grant(X);
	whoami_as(rt, "tx", "erin", "user-erin", "erin");
	whoami_as(rt, "tx", "erin", "user-erin", "erin");
	CHECK_EQ(by_grant(X) - x0, 1);
	c          = counters();
	json_t *le = json_object_get(c, "last_exchange");
	CHECK(strcmp(json_string_value(json_object_get(le, "audience")),
	             "https://api.example") == 0);
	CHECK(strcmp(json_string_value(json_object_get(le, "scope")),
	             "read") == 0);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "by_auth"),
	                                         "basic")) >= 1);
	json_decref(c);
	/* without a subject token, and with a rejected one */
	p = auth_required(rt, "tx", "erin", NULL);
	CHECK(strcmp(json_string_value(json_object_get(p, "kind")),
	             "exchange") == 0);
	CHECK(json_is_true(json_object_get(p, "subject_token_missing")));
	json_decref(p);
	p = auth_required(rt, "tx", "erin", "bad-token");
	CHECK(strcmp(json_string_value(json_object_get(p, "exchange_error")),
	             "invalid_grant") == 0);
	json_decref(p);
	/* the TTL is expires_in - 30 s: 30 s tokens are exchanged every
	 * time, an hour's are not */
	as_admin("/admin/expires-in", "{\"seconds\": 30}");
	x0 = by_grant(X);
	whoami_as(rt, "tx", "frank", "user-frank", "frank");
	whoami_as(rt, "tx", "frank", "user-frank", "frank");
	CHECK_EQ(by_grant(X) - x0, 2);
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	/* another identity with the same subject gets its own entry */
	x0             = by_grant(X);
	mk_result *res = NULL;
	mk_call    vk  = {.size          = sizeof(mk_call),
	                  .client        = "tx",
	                  .tool          = "whoami",
	                  .arguments     = "{}",
	                  .virtual_key   = "vk-1",
	                  .subject_token = "user-erin"};
	CHECK_EQ(mk_tool_call(rt, &vk, &res), 0);
	mk_result_free(&res);
	CHECK_EQ(by_grant(X) - x0, 1);
	/* evicted by the subject token: both identities' entries go, and
	 * the next call exchanges again */
	unsigned n;
	CHECK_EQ(mk_credentials_evict(rt, NULL, NULL, NULL, "user-erin", &n,
	                              &err),
	         0);
	CHECK_EQ(n, 2);
	x0 = by_grant(X);
	whoami_as(rt, "tx", "erin", "user-erin", "erin");
	CHECK_EQ(by_grant(X) - x0, 1);
	close_rt(&rt, &sb);
}

/* ForceRefresh (SPEC section 6), asked the way a recovering call will:
 * oauth refreshes past the expiry check, headers is a no-op, an
 * exchange is redone, a dead shared token answers without the network. */
/* The (generated) id of client name, as the store dir/db holds it. */
static char *
id_in_store(const char *dbname, const char *name)
{
	char          db[128];
	sqlite3      *h;
	sqlite3_stmt *q;
	char         *id = NULL;

	snprintf(db, sizeof(db), "%s/%s", dir, dbname);
	CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
	CHECK_EQ(sqlite3_prepare_v2(
	                 h, "SELECT id FROM mcp_clients WHERE name = ?1", -1,
	                 &q, NULL),
	         SQLITE_OK);
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
	id = strdup((const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	sqlite3_close(h);
	return (id);
}

static void
force_refresh(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "force.db");
	char       *err = NULL, extra[512], *id;
	int         at  = 0;
	long        t0;

	/* oauth: one refresh, though the token is fresh */
	CHECK_EQ(add_oauth(rt, "f_oa", "{}", false), 0);
	bootstrap(rt, "f_oa", false);
	wait_state(&sb, &at, "f_oa", "healthy", NULL);
	id = id_of(&sb, "f_oa");
	t0 = by_grant("refresh_token");
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	CHECK_EQ(by_grant("refresh_token") - t0, 1);
	free(id);
	/* headers: nothing is asked of anyone */
	CHECK_EQ(add_user(rt, "f_uh", "per_user_headers",
	                  "\"per_user_header_keys\": [\"x-api-key\"]"),
	         0);
	CHECK_EQ(mk_client_verify_headers(
	                 rt, "f_uh", "{\"x-api-key\": \"key-admin\"}", &err),
	         0);
	wait_state(&sb, &at, "f_uh", "healthy", NULL);
	id = id_of(&sb, "f_uh");
	t0 = admin(srv.port, "/admin/counters", NULL, "token_requests");
	CHECK_EQ(force(rt, id, "admin", "", NULL), 0);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         t0);
	free(id);
	/* token_exchange: exchanged again */
	snprintf(
	        extra, sizeof(extra),
	        "\"token_exchange\": {\"token_url\": \"http://127.0.0.1:%d/token\", \"audience\": \"a\", \"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	        srv.port);
	CHECK_EQ(add_user(rt, "f_tx", "token_exchange", extra), 0);
	CHECK_EQ(mk_client_verify_exchange(rt, "f_tx", "user-admin", &err), 0);
	wait_state(&sb, &at, "f_tx", "healthy", NULL);
	whoami_as(rt, "f_tx", "gus", "user-gus", "gus");
	id            = id_of(&sb, "f_tx");
	const char *X = "urn:ietf:params:oauth:grant-type:token-exchange";
	t0            = by_grant(X);
	CHECK_EQ(force(rt, id, "user", "gus", "user-gus"), 0);
	CHECK_EQ(by_grant(X) - t0, 1);
	free(id);
	/* a dead shared token: "token expired", no request */
	id = id_of(&sb, "f_oa");
	as_admin(
	        "/admin/fail-next",
	        "{\"status\": 400, \"error\": \"invalid_grant\", \"grant\": \"refresh_token\"}");
	CHECK_EQ(force(rt, id, "shared", "", NULL), MK_ESTATE);
	wait_state(&sb, &at, "f_oa", "needs_reauth", "credential");
	t0 = admin(srv.port, "/admin/counters", NULL, "token_requests");
	CHECK_EQ(force(rt, id, "shared", "", NULL), MK_ESTATE);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         t0);
	free(id);
	close_rt(&rt, &sb);
}

/* A new OAuth config rotates the credential (SPEC section 6). */
static void
rotation(void)
{
	sub         sb;
	mk_runtime *rt  = open_rt(&sb, "rot.db");
	char       *err = NULL;
	int         at  = 0, rc;
	event       e;
	char       *out;

	CHECK_EQ(add_oauth(rt, "rot", "{}", true), 0);
	bootstrap(rt, "rot", false);
	wait_state(&sb, &at, "rot", "healthy", NULL);
	CHECK_EQ(mk_client_update(
	                 rt, "rot",
	                 "{\"oauth_config\": {\"scopes\": [\"mcp:tools\"]}}",
	                 &err),
	         0);
	e = wait_state(&sb, &at, "rot", "needs_reauth", "credential");
	CHECK(strcmp(e.message,
	             "credential was rotated and must be reauthorized") == 0);
	out = call_text(rt, "rot", "whoami", "{}", &rc);
	CHECK_EQ(rc, MK_ESTATE);
	free(out);
	bootstrap(rt, "rot", true);
	wait_state(&sb, &at, "rot", "healthy", NULL);
	whoami_is(rt, "rot", "admin");
	close_rt(&rt, &sb);
}

/* ---- the caches
 * -------------------------------------------------------------
 */

typedef struct gets {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done, ok;
} gets;

static void
on_get_answer(void *arg, int status, const void *data, size_t len)
{
	gets *g = arg;

	pthread_mutex_lock(&g->mtx);
	g->ok += status == 0;
	g->done++;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mtx);
}

static void
submit_for(mk_runtime *rt, const char *client, const char *user)
{
	char    hdr[64], *err = NULL;
	json_t *p = auth_required(rt, client, user, NULL);

	snprintf(hdr, sizeof(hdr), "{\"x-api-key\": \"key-%s\"}", user);
	CHECK_EQ(mk_user_headers_submit(
	                 rt, client, "user", user,
	                 json_string_value(json_object_get(p, "session_id")),
	                 hdr, &err),
	         0);
	json_decref(p);
}

/* Bounded caches filled from the store, single-flight, evicted on
 * demand. */
static void
caches(void)
{
	sub         sb;
	mk_runtime *rt;
	char       *err = NULL, name[16], *id;
	int         at  = 0;
	unsigned    n;
	int64_t     f0;

	cache_max = 2;
	rt        = open_rt(&sb, "cache.db");
	CHECK_EQ(add_user(rt, "uc", "per_user_headers",
	                  "\"per_user_header_keys\": [\"x-api-key\"]"),
	         0);
	CHECK_EQ(mk_client_verify_headers(
	                 rt, "uc", "{\"x-api-key\": \"key-admin\"}", &err),
	         0);
	wait_state(&sb, &at, "uc", "healthy", NULL);
	for (int i = 1; i <= 4; i++) {
		snprintf(name, sizeof(name), "u%d", i);
		submit_for(rt, "uc", name);
		whoami_as(rt, "uc", name, NULL, name);
	}
	CHECK(cr_stat(rt, "cached_headers") <= 2); /* the bound holds */
	f0 = cr_stat(rt, "fills");
	whoami_as(rt, "uc", "u1", NULL, "u1"); /* evicted: read back */
	CHECK_EQ(cr_stat(rt, "fills") - f0, 1);
	close_rt(&rt, &sb);

	/* after a restart nothing of the callers is in memory: 50 asks at
	 * once for one caller read the store once */
	rt     = open_rt(&sb, "cache.db");
	id     = id_in_store("cache.db", "uc");
	f0     = cr_stat(rt, "fills");
	gets g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	mp_w w;
	mp_w_init(&w);
	mp_map(&w, 3);
	mp_kv_str(&w, "id", id);
	mp_kv_str(&w, "mode", "user");
	mp_kv_str(&w, "identity", "u3");
	for (int i = 0; i < 50; i++) {
		CHECK_EQ(kn_ask_cb(rt->credential, MSG_CR_GET, w.sb.data,
		                   w.sb.size, WAIT_MS, on_get_answer, &g),
		         0);
	}
	mp_w_fini(&w);
	pthread_mutex_lock(&g.mtx);
	while (g.done < 50) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += WAIT_MS / 1000;
		CHECK_EQ(pthread_cond_timedwait(&g.cv, &g.mtx, &ts), 0);
	}
	pthread_mutex_unlock(&g.mtx);
	CHECK_EQ(g.ok, 50);
	CHECK_EQ(cr_stat(rt, "fills") - f0, 1);
	/* evicted by identity: read again next time */
	CHECK_EQ(mk_credentials_evict(rt, "uc", "user", "u3", NULL, &n, &err),
	         0);
	CHECK_EQ(n, 1);
	f0 = cr_stat(rt, "fills");
	whoami_as(rt, "uc", "u3", NULL, "u3");
	CHECK_EQ(cr_stat(rt, "fills") - f0, 1);
	/* by client: everything of it */
	CHECK_EQ(mk_credentials_evict(rt, "uc", NULL, NULL, NULL, &n, &err),
	         0);
	CHECK(n >= 1);
	CHECK_EQ(cr_stat(rt, "cached_headers"), 0);
	CHECK_EQ(mk_credentials_evict(rt, "nope", NULL, NULL, NULL, &n, &err),
	         MK_ENOENT);
	mk_free(err);
	free(id);
	close_rt(&rt, &sb);
	cache_max = 0;
}

/* ---- secrets
 * ------------------------------------------------------------------
 */

/* No token, code or secret the servers handed out is in the log. */
static void
no_secret_logged(void)
{
	json_t *issued = admin_json(srv.port, "/admin/issued", NULL);
	FILE   *f;

	fflush(seen);
	/* the log, then what the stream, the list and errors showed */
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "cat %s/seen >> %s", dir, logpath);
	CHECK_EQ(system(cmd), 0);
	f           = fopen(logpath, "r");
	char  *text = NULL;
	size_t len  = 0, n;
	char   buf[65536];
	int    checked = 0;

	CHECK(issued != NULL && f != NULL);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		text = realloc(text, len + n + 1);
		memcpy(text + len, buf, n);
		len += n;
	}
	fclose(f);
	CHECK(text != NULL && len > 1000); /* debug logging happened */
	text[len]           = '\0';
	const char *kinds[] = {"access", "refresh", "codes"};
	for (int k = 0; k < 3; k++) {
		size_t  i;
		json_t *t;
		json_array_foreach(json_object_get(issued, kinds[k]), i, t)
		{
			CHECK(strstr(text, json_string_value(t)) == NULL);
			checked++;
		}
	}
	CHECK(strstr(text, "static-secret") == NULL);
	CHECK(strstr(text, "user-erin") == NULL); /* subject tokens */
	CHECK(strstr(text, "key-alice") == NULL); /* header values */
	CHECK(checked > 20);
	fprintf(stderr, "   %d secrets, none in %zu bytes of log\n", checked,
	        len);
	free(text);
	json_decref(issued);
}

int
main(void)
{
	oauth_suite_begin();
	RUN(discovery_flow);
	RUN(single_flight);
	RUN(invalid_grant);
	RUN(transient);
	RUN(short_idle);
	RUN(short_fan_in);
	RUN(one_second);
	RUN(flows_rejected);
	RUN(complete_by_id);
	RUN(restart_mid_flow);
	RUN(per_user_headers);
	RUN(per_user_oauth);
	RUN(admin_projection);
	RUN(token_exchange);
	RUN(force_refresh);
	RUN(rotation);
	RUN(caches);
	RUN(no_secret_logged);
	oauth_suite_end();
	return (0);
}
