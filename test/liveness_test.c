/*
 * liveness_test.c - a dead connection never stays green, and what keeps
 * failing backs off.
 *
 * Covered: a tool call that fails at the transport on a healthy client,
 * sticky or per-call, schedules a check at once (debounced), so the client is
 * unstable within the check's retry budget, not tool_sync_interval
 * later; a make-before-break reconnect that fails (here the one a shared
 * auth-failure recovery starts, against test/peers/oauth.mjs) is a failed
 * connect: unstable, stage credential; a stdio server that dies at start
 * is restarted with exponential backoff (full jitter, 1 s doubling to
 * 5 min), not in a loop, and its first error line is in last_failure;
 * an explicit reconnect does not wait for the backoff; a burst of
 * notifications/tools/list_changed makes one relist, not one each.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oautil.h"
#include "testutil.h"

static void
ignore_done(void *arg, int rc, mk_result *res)
{
	mk_result_free(&res);
}

/* The upstream dies under a healthy client (sticky, or per-call): one
 * call that fails at the transport makes it unstable within the check's
 * own budget (~3.5 s of retries), where tool_sync_interval (10 min)
 * would have. */
static void
dead_upstream(const char *name, bool sticky, const char *stage)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p;
	char       *err = NULL;
	int         rc, from = 0;
	mk_call     c = {.size      = sizeof(mk_call),
	                 .client    = name,
	                 .tool      = "echo",
	                 .arguments = "{\"message\": \"hi\"}"};
	int64_t     t0;
	long        checks0;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": %s, \"tools_to_execute\": [\"*\"]}",
	            name, p.port, sticky ? "true" : "false"),
	        0);
	(void)wait_state(&sb, &from, name, "healthy", NULL);
	checks0 = client_metric(rt, name, "checks");
	peer_stop(&p);
	t0 = now_ms();
	free(call_text(rt, name, "echo", "{\"message\": \"hi\"}", &rc));
	CHECK(rc != 0);
	/* a burst of failing calls still runs one check, not twenty */
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(mk_tool_call_async(rt, &c, ignore_done, NULL), 0);
	}
	event e = wait_state(&sb, &from, name, "unstable", NULL);
	fprintf(stderr, "unstable after %lld ms, stage %s: %s\n",
	        (long long)(now_ms() - t0), e.stage, e.message);
	CHECK(now_ms() - t0 < 15000);
	CHECK(strcmp(e.stage, stage) == 0 || strcmp(e.stage, "connect") == 0);
	CHECK(strstr(e.message, "127.0.0.1") != NULL ||
	      strstr(e.message, "onnect") != NULL);
	CHECK(client_metric(rt, name, "checks") - checks0 <= 2);
	mk_free(err);
	rt_close(&rt, &sb);
}

static void
call_failure_checks(void)
{
	dead_upstream("lv_dead", true, "ping");
}

/* The same for a per-call client: it has no connection to lose, but its
 * failed call is checked at once too. */
static void
per_call_failure_checks(void)
{
	dead_upstream("lv_dead_pc", false, "tool_discovery");
}

/* A shared recovery's reconnect is refused (every /mcp request 401): the
 * client does not stay healthy on the connection it gave up. */
static void
failed_reconnect_unstable(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "lv.db");
	int         rc, from = 0;

	CHECK_EQ(
	        add_oauth(
	                rt, "lv_rec",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	                true),
	        0);
	bootstrap(rt, "lv_rec", false);
	(void)wait_state(&sb, &from, "lv_rec", "healthy", NULL);
	as_admin("/admin/mcp-fail-next", "{\"status\": 401, \"count\": 1000}");
	free(call_text(rt, "lv_rec", "counted_readonly", "{}", &rc));
	CHECK(rc != 0);
	event e = wait_state(&sb, &from, "lv_rec", "unstable", "credential");
	fprintf(stderr, "unstable, stage %s: %s\n", e.stage, e.message);
	CHECK(strstr(e.message, "401") != NULL);
	as_admin("/admin/mcp-fail-next", "{\"status\": 200, \"count\": 0}");
	close_rt(&rt, &sb);
}

static long
lines_in(const char *path)
{
	FILE *f = fopen(path, "r");
	long  n = 0;
	int   ch;

	if (f == NULL) {
		return (0);
	}
	while ((ch = fgetc(f)) != EOF) {
		n += ch == '\n';
	}
	fclose(f);
	return (n);
}

/* Loads one stdio client lv_NAME running sh -c script. */
static void
load_sh(mk_runtime *rt, const char *name, const char *script)
{
	json_t *cfg = json_pack(
	        "{s:{s:[{s:s, s:s, s:{s:s, s:[s, s], s:[s, s]}, s:[s]}]}}",
	        "mcp", "client_configs", "name", name, "connection_type",
	        "stdio", "stdio_config", "command", "sh", "args", "-c", script,
	        "envs", "PATH", "MK_INJECT_EXIT_MS=0", "tools_to_execute",
	        "*");
	char *text = json_dumps(cfg, JSON_COMPACT), *err = NULL;

	CHECK_EQ(mk_runtime_load(rt, text, &err), 0);
	free(text);
	json_decref(cfg);
	mk_free(err);
}

/* A stdio server that fails at start says why first, then a lot of
 * noise: last_failure has that first error line as well as the tail. */
static void
first_error_line(void)
{
	sub         sb;
	mk_runtime *rt   = rt_open(&sb);
	int         from = 0;

	load_sh(rt, "lv_noisy",
	        "echo 'Error: cannot read /etc/lv.conf' >&2; i=0; while [ $i -lt 40 ]; do echo noise line $i >&2; i=$((i+1)); done; exit 1");
	event e = wait_state(&sb, &from, "lv_noisy", "unstable", "connect");
	fprintf(stderr, "unstable: %s\n", e.message);
	CHECK(strstr(e.message, "exited with status 1") != NULL);
	CHECK(strstr(e.message, "Error: cannot read /etc/lv.conf") != NULL);
	CHECK(strstr(e.message, "noise line 39") != NULL);
	rt_close(&rt, &sb);
}

/* A stdio server that dies right after every start (as soon as its
 * handshake is done: no check can pass, so nothing resets the backoff)
 * is restarted with backoff: over a 6 s window at most 6 starts, where
 * an immediate restart made 14; once it is fixed, an admin's reconnect
 * connects at once. */
static void
restart_backoff(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	char        starts[128], ok[128], script[512], *err = NULL;
	int         from = 0;
	long        n0, n1;

	snprintf(starts, sizeof(starts), "%s/starts", dir);
	snprintf(ok, sizeof(ok), "%s/fixed", dir);
	snprintf(
	        script, sizeof(script),
	        "echo x >> %s; [ -f %s ] && unset MK_INJECT_EXIT_MS; exec node %s/inject.mjs stdio",
	        starts, ok, peer_dir());
	load_sh(rt, "lv_flap", script);
	/* connect or transport_lost: it dies around its handshake */
	event e;
	do {
		e = wait_state(&sb, &from, "lv_flap", "unstable", NULL);
	} while (e.stage[0] == '\0');
	fprintf(stderr, "unstable: %s\n", e.message);
	CHECK(strstr(e.message, "exited with status 5") != NULL);
	n0 = lines_in(starts);
	usleep(6 * 1000 * 1000); /* a measured window, not a wait */
	n1 = lines_in(starts);
	fprintf(stderr, "%ld starts in 6 s (after %ld); %ld lost in a row\n",
	        n1 - n0, n0,
	        client_metric(rt, "lv_flap", "connect_failures_in_row"));
	CHECK(n1 - n0 <= 6);
	CHECK(client_metric(rt, "lv_flap", "connect_failures_in_row") >= 3);
	CHECK(fclose(fopen(ok, "w")) == 0);
	CHECK_EQ(mk_client_reconnect(rt, "lv_flap", &err), 0);
	mk_free(err);
	rt_close(&rt, &sb);
}

/* 50 notifications/tools/list_changed in a burst: one relist runs, one
 * more follows for those that came meanwhile. */
static void
list_changed_coalesced(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p;
	char       *err = NULL;
	int         rc, from = 0;

	CHECK_EQ(peer_start_inject(&p, WAIT_MS), 0);
	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"lv_burst\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
	            p.port),
	        0);
	(void)wait_state(&sb, &from, "lv_burst", "healthy", NULL);
	free(call_text(rt, "lv_burst", "notify_list_changed",
	               "{\"count\": 50}", &rc));
	CHECK_EQ(rc, 0);
	/* the relists are the client's own requests, with no event: the
	 * counter is polled, with a deadline, then watched for a second */
	for (int i = 0;
	     i < 500 && client_metric(rt, "lv_burst", "relists") < 1; i++) {
		usleep(10000);
	}
	usleep(1000 * 1000);
	fprintf(stderr, "%ld relists for 50 notifications\n",
	        client_metric(rt, "lv_burst", "relists"));
	CHECK(client_metric(rt, "lv_burst", "relists") >= 1);
	CHECK(client_metric(rt, "lv_burst", "relists") <= 2);
	mk_free(err);
	rt_close(&rt, &sb);
	peer_stop(&p);
}

/* liveness_test [name]: that test, or all of them */
int
main(int argc, char **argv)
{
	oauth_suite_begin();
	RUN_IF(call_failure_checks);
	RUN_IF(per_call_failure_checks);
	RUN_IF(failed_reconnect_unstable);
	RUN_IF(first_error_line);
	RUN_IF(restart_backoff);
	RUN_IF(list_changed_coalesced);
	oauth_suite_end();
	return (0);
}
