/*
 * liveness_test.c - a dead connection never stays green, and what keeps
 * failing backs off.
 *
 * Covered: a tool call that fails at the transport on a healthy sticky
 * client schedules a check at once (debounced), so the client is
 * unstable within the check's retry budget, not tool_sync_interval
 * later; a make-before-break reconnect that fails (here the one a shared
 * auth-failure recovery starts, against test/peers/oauth.mjs) is a failed
 * connect: unstable, stage credential.
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

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void
start_inject(peer *p)
{
	char        js[512];
	const char *argv[] = {"node", js, "http", "--port", "0", NULL};

	snprintf(js, sizeof(js), "%s/inject.mjs", peer_dir());
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
}

static long
checks_of(mk_runtime *rt, const char *name)
{
	char   *out = NULL;
	json_t *m;
	long    n;

	CHECK_EQ(mk_client_metrics_json(rt, name, &out), 0);
	CHECK((m = json_loads(out, 0, NULL)) != NULL);
	n = (long)json_integer_value(json_object_get(m, "checks"));
	json_decref(m);
	mk_free(out);
	return (n);
}

static void
ignore_done(void *arg, int rc, mk_result *res)
{
	mk_result_free(&res);
}

/* The upstream dies under a healthy sticky client: one call that fails
 * at the transport makes it unstable within the check's own budget
 * (~3.5 s of retries), where tool_sync_interval (10 min) would have. */
static void
call_failure_checks(void)
{
	sub         sb;
	mk_runtime *rt = rt_open(&sb);
	peer        p;
	char       *err = NULL;
	int         rc, from = 0;
	mk_call     c = {.client    = "lv_dead",
	                 .tool      = "echo",
	                 .arguments = "{\"message\": \"hi\"}"};
	int64_t     t0;
	long        checks0;

	start_inject(&p);
	CHECK_EQ(add(rt, &err,
	             "{\"name\": \"lv_dead\", \"connection_type\": \"http\", "
	             "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	             "\"needs_session_stickiness\": true, "
	             "\"tools_to_execute\": [\"*\"]}",
	             p.port),
	         0);
	(void)wait_state(&sb, &from, "lv_dead", "healthy", NULL);
	checks0 = checks_of(rt, "lv_dead");
	peer_stop(&p);
	t0 = now_ms();
	free(call_text(rt, "lv_dead", "echo", "{\"message\": \"hi\"}", &rc));
	CHECK(rc != 0);
	/* a burst of failing calls still runs one check, not twenty */
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(mk_tool_call_async(rt, &c, ignore_done, NULL), 0);
	}
	event e = wait_state(&sb, &from, "lv_dead", "unstable", NULL);
	fprintf(stderr, "unstable after %lld ms, stage %s: %s\n",
	        (long long)(now_ms() - t0), e.stage, e.message);
	CHECK(now_ms() - t0 < 15000);
	CHECK(strcmp(e.stage, "ping") == 0 || strcmp(e.stage, "connect") == 0);
	CHECK(strstr(e.message, "127.0.0.1") != NULL ||
	      strstr(e.message, "onnect") != NULL);
	CHECK(checks_of(rt, "lv_dead") - checks0 <= 2);
	mk_free(err);
	rt_close(&rt, &sb);
}

/* A shared recovery's reconnect is refused (every /mcp request 401): the
 * client does not stay healthy on the connection it gave up. */
static void
failed_reconnect_unstable(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "lv.db");
	int         rc, from = 0;

	CHECK_EQ(add_oauth(rt, "lv_rec",
	                   "{\"client_id\": \"static-client\", "
	                   "\"client_secret\": \"static-secret\"}",
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

int
main(void)
{
	char        js[512];
	const char *argv[] = {"node", js, "--port", "0", NULL};

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	CHECK((logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND,
	                    0600)) >= 0);
	char seenpath[80];
	snprintf(seenpath, sizeof(seenpath), "%s/seen", dir);
	CHECK((seen = fopen(seenpath, "w")) != NULL);
	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	CHECK_EQ(peer_start(&srv, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	RUN(call_failure_checks);
	RUN(failed_reconnect_unstable);
	peer_stop(&srv);
	close(logfd);
	fclose(seen);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	curl_global_cleanup();
	return (0);
}
