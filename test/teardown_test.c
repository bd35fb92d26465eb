/*
 * teardown_test.c - a client closed while something of it waits: for each
 * way of closing it (disable, delete, a credential update that rotates
 * its OAuth config, a completed reauthorization, closing the runtime)
 * against test/peers/oauth.mjs holding one phase open (initialize,
 * notifications/initialized, tools/list, a tool call, a recovery's
 * refresh at the token endpoint), ROUNDS rounds each (MK_TEARDOWN_ROUNDS,
 * default 50).  No crash, no leak (ASan), no race (TSan), no hang (every
 * wait has a deadline), every waiting caller answered.
 *
 * Each round: the client is made healthy; the phase is armed at the
 * server; a tool call (and, for the dial phases, a reconnect in a thread)
 * is started; the test waits until the server holds the request; then it
 * closes the client, waits for every caller's answer, and lifts the hold.
 * The dial phases are reached through a dead session: the server forgets
 * its sessions, so the call's 404 starts a re-initialize (SPEC section
 * 7) whose request is held.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oautil.h"
#include "testutil.h"

/* The client of the round: "td", or for the refresh phase one per round
 * ("td_<round>"): refreshes of one token are at least 1 s apart (SPEC 6),
 * which would pace those rounds at a second each. */
static char NAME[32] = "td";

enum { OP_DISABLE, OP_DELETE, OP_UPDATE, OP_REAUTH, OP_CLOSE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
        "disable", "delete", "update-credentials", "reauthorize", "close"};

/* The phases held open, as the server's hold names them. */
typedef struct phase {
	const char *name; /* for messages */
	const char *hold; /* POST /admin/hold body */
	bool        dial; /* reached through a re-initialize */
} phase;
static const phase phases[] = {
        {"initialize", "{\"mcp\": \"initialize\"}", true},
        {"initialized", "{\"mcp\": \"notifications/initialized\"}", true},
        {"tools/list", "{\"mcp\": \"tools/list\"}", true},
        {"tools/call", "{\"mcp\": \"tools/call\"}", false},
        {"refresh", "{\"grant\": \"refresh_token\"}", false},
};

/* A caller's answer, signalled to the test thread. */
typedef struct answer {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	bool            done;
	int             rc;
} answer;

static void
answer_init(answer *a)
{
	pthread_mutex_init(&a->mtx, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->done = false;
	a->rc   = -1;
}

static void
answer_set(answer *a, int rc)
{
	pthread_mutex_lock(&a->mtx);
	a->done = true;
	a->rc   = rc;
	pthread_cond_signal(&a->cv);
	pthread_mutex_unlock(&a->mtx);
}

/* Waits (WAIT_MS at most) for the answer; its status. */
static int
answer_wait(answer *a, const char *what)
{
	struct timespec ts;
	int             rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&a->mtx);
	while (!a->done) {
		if (pthread_cond_timedwait(&a->cv, &a->mtx, &ts) ==
		    ETIMEDOUT) {
			fprintf(stderr, "no answer for %s\n", what);
			exit(1);
		}
	}
	rc = a->rc;
	pthread_mutex_unlock(&a->mtx);
	pthread_mutex_destroy(&a->mtx);
	pthread_cond_destroy(&a->cv);
	return (rc);
}

static void
call_done(void *arg, int rc, mk_result *res)
{
	mk_result_free(&res);
	answer_set(arg, rc);
}

typedef struct reconnect_arg {
	mk_runtime *rt;
	answer      a;
} reconnect_arg;

static void *
reconnect_thread(void *arg)
{
	reconnect_arg *r   = arg;
	char          *err = NULL;
	int            rc  = mk_client_reconnect(r->rt, NAME, &err);

	mk_free(err);
	answer_set(&r->a, rc);
	return (NULL);
}

static int seq_rt;

/* A runtime without a store, logging warnings to logpath. */
static mk_runtime *
open_plain(sub *sb)
{
	mk_runtime *rt;
	mk_options  o;
	char        url[64];

	snprintf(url, sizeof(url), "inproc://teardown-%d", ++seq_rt);
	mk_options_init(&o, sizeof(o));
	o.log_level          = MK_LOG_WARN;
	o.log_fd             = logfd;
	o.stream_url         = url;
	o.oauth_redirect_uri = "http://127.0.0.1:9/callback";
	o.unstable_check_ms  = 1000;
	CHECK_EQ(mk_runtime_open(&rt, &o), 0);
	sub_open(sb, mk_stream_url(rt));
	return (rt);
}

static const char oauth_cfg[] =
        "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}";

/* Brings the client to healthy, whatever the last round left. */
static void
ensure_healthy(mk_runtime *rt, sub *sb)
{
	json_t *v    = NULL;
	char   *err  = NULL;
	int     from = sub_at(sb);

	if ((v = view_find(rt, NAME)) == NULL) {
		CHECK_EQ(add_oauth(rt, NAME, oauth_cfg, true), 0);
		bootstrap(rt, NAME, false);
	} else if (strcmp(vstr(v, "state"), "disabled") == 0) {
		CHECK_EQ(mk_client_enable(rt, NAME, &err), 0);
	} else if (strcmp(vstr(v, "state"), "needs_reauth") == 0) {
		bootstrap(rt, NAME, true);
	} else if (strcmp(vstr(v, "state"), "healthy") == 0) {
		json_decref(v);
		return;
	}
	json_decref(v);
	mk_free(err);
	(void)wait_state(sb, &from, NAME, "healthy", NULL);
}

static long
held(void)
{
	return (admin(srv.port, "/admin/counters", NULL, "held"));
}

/* Waits until the server holds one more request than before.  The server
 * is another process with no event to wait on: its counter is polled,
 * with a deadline. */
static void
wait_held(long before, const char *what)
{
	for (int i = 0; i < WAIT_MS / 2; i++) {
		if (held() > before) {
			return;
		}
		usleep(2000);
	}
	fprintf(stderr, "the server never held %s\n", what);
	exit(1);
}

/* Closes the client the op's way. */
static void
close_client(mk_runtime **rt, sub *sb, int op, int round)
{
	char *err = NULL, patch[256];

	switch (op) {
	case OP_DISABLE:
		CHECK_EQ(mk_client_disable(*rt, NAME, &err), 0);
		break;
	case OP_DELETE:
		CHECK_EQ(mk_client_remove(*rt, NAME, &err), 0);
		break;
	case OP_UPDATE:
		snprintf(
		        patch, sizeof(patch),
		        "{\"oauth_config\": {\"client_id\": \"static-client\", \"client_secret\": \"static-secret\", \"scopes\": [\"round-%d\"]}}",
		        round);
		CHECK_EQ(mk_client_update(*rt, NAME, patch, &err), 0);
		break;
	case OP_REAUTH:
		bootstrap(*rt, NAME, true);
		break;
	default:
		mk_runtime_close(rt);
		sub_close(sb);
		break;
	}
	mk_free(err);
}

/* What the client shows after the op (and the hold lifted): the state
 * it went to, from stream index from on. */
static void
check_after(mk_runtime *rt, sub *sb, int op, int from)
{
	json_t *v;

	switch (op) {
	case OP_DISABLE:
		(void)wait_state(sb, &from, NAME, "disabled", NULL);
		break;
	case OP_DELETE:
		CHECK((v = view_find(rt, NAME)) == NULL);
		break;
	case OP_UPDATE:
		(void)wait_state(sb, &from, NAME, "needs_reauth",
		                 "credential");
		break;
	default:
		/* healthy now, or once the dial the hold kept finishes */
		v = view_of(rt, NAME);
		if (strcmp(vstr(v, "state"), "healthy") != 0) {
			(void)wait_state(sb, &from, NAME, "healthy", NULL);
		}
		json_decref(v);
		break;
	}
}

static void
round_of(mk_runtime **rt, sub *sb, const phase *ph, int op, int round)
{
	mk_call       c = {.size      = sizeof(mk_call),
	                   .client    = NAME,
	                   .tool      = "counted_readonly",
	                   .arguments = "{}"};
	answer        call_a;
	reconnect_arg rc_a = {.rt = *rt};
	pthread_t     thr;
	bool          thread = ph->dial && op != OP_CLOSE;
	long          before;
	int           from;
	char          what[128];

	snprintf(what, sizeof(what), "%s during %s, round %d", op_names[op],
	         ph->name, round);
	if (strcmp(ph->name, "refresh") == 0) {
		snprintf(NAME, sizeof(NAME), "td_%d", round);
	} else {
		snprintf(NAME, sizeof(NAME), "td");
	}
	ensure_healthy(*rt, sb);
	before = held();
	as_admin("/admin/hold", ph->hold);
	if (ph->dial) {
		as_admin("/admin/drop-sessions", "{}");
	} else if (strcmp(ph->name, "refresh") == 0) {
		as_admin("/admin/mcp-fail-next", "{\"status\": 401}");
	}
	answer_init(&call_a);
	CHECK_EQ(mk_tool_call_async(*rt, &c, call_done, &call_a), 0);
	wait_held(before, what);
	if (thread) {
		/* a second waiter: it joins the dial the call started */
		answer_init(&rc_a.a);
		CHECK_EQ(pthread_create(&thr, NULL, reconnect_thread, &rc_a),
		         0);
	}
	from = sub_at(sb);
	close_client(rt, sb, op, round);
	/* a reauthorization ends nothing: its callers finish with the
	 * held request */
	as_admin("/admin/hold", "{}");
	(void)answer_wait(&call_a, what);
	if (thread) {
		(void)answer_wait(&rc_a.a, what);
		CHECK_EQ(pthread_join(thr, NULL), 0);
	}
	if (op == OP_CLOSE) {
		*rt = open_plain(sb);
		return;
	}
	check_after(*rt, sb, op, from);
}

static void
stress(const phase *ph, int op, int rounds)
{
	sub         sb;
	mk_runtime *rt = open_plain(&sb);
	int64_t     t0 = now_ms();

	for (int r = 0; r < rounds; r++) {
		round_of(&rt, &sb, ph, op, r);
	}
	fprintf(stderr, "-- %s during %s: %d rounds, %lld ms\n", op_names[op],
	        ph->name, rounds, (long long)(now_ms() - t0));
	mk_runtime_close(&rt);
	sub_close(&sb);
}

int
main(void)
{
	const char *env    = getenv("MK_TEARDOWN_ROUNDS");
	int         rounds = env != NULL ? atoi(env) : 50;

	oauth_suite_begin();
	for (size_t p = 0; p < sizeof(phases) / sizeof(phases[0]); p++) {
		for (int op = 0; op < OP_COUNT; op++) {
			stress(&phases[p], op, rounds);
		}
	}
	oauth_suite_end();
	return (0);
}
