/*
 * recover_bench.c - calls that recover, measured (never a timed test),
 * against test/peers/oauth.mjs (a real authorization server and an MCP
 * server that takes only its tokens and can revoke them all):
 *
 *   latency    a call that recovers from an upstream rotation (refresh,
 *              a new connection, the retry) beside a clean call: shared
 *              sticky, and per-user per-call; p50 of each
 *   fan-in     1,000 concurrent calls that all meet the rotation: token
 *              requests at the authorization server and reconnects
 *              (without the joining, 1,000 of each)
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test/oautil.h"
#include "calls.h"
#include "transport/loop.h"

#define CLEAN  200
#define ROUNDS 25
#define FAN    1000

static int
cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x < y ? -1 : x > y);
}

static double
p50(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	return (v[n / 2] / 1e3);
}

static int64_t
one(mk_runtime *rt, const char *client, const char *user)
{
	mk_call    c   = {.size      = sizeof(mk_call),
	                  .client    = client,
	                  .tool      = "counted_readonly",
	                  .arguments = "{}",
	                  .user_id   = user};
	mk_result *res = NULL;
	int64_t    t0  = tp_now_ns();

	if (mk_tool_call(rt, &c, &res) != 0) {
		die(res != NULL && res->error != NULL ? res->error : "a call");
	}
	mk_result_free(&res);
	return (tp_now_ns() - t0);
}

/* p50 of clean calls, and of calls right after a rotation. */
static void
latency(mk_runtime *rt, const char *client, const char *user,
        const char *label)
{
	int64_t clean[CLEAN], rec[ROUNDS];

	for (int i = 0; i < CLEAN; i++) {
		clean[i] = one(rt, client, user);
	}
	for (int i = 0; i < ROUNDS; i++) {
		as_admin("/admin/revoke-all", "{}");
		rec[i] = one(rt, client, user);
	}
	double c = p50(clean, CLEAN), r = p50(rec, ROUNDS);
	printf("| recovered call, %-22s | %8.0f us | clean %6.0f us | %6.1f |\n",
	       label, r, c, r / c);
}

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
	f->ok += rc == 0;
	f->done++;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mtx);
	mk_result_free(&res);
}

static int64_t
generation(mk_runtime *rt, const char *name)
{
	json_t *v = view_of(rt, name);
	int64_t g = json_integer_value(json_object_get(v, "generation"));

	json_decref(v);
	return (g);
}

int
main(void)
{
	sub         sb;
	mk_runtime *rt;
	char        js[512], seenpath[96];
	const char *argv[] = {"node", js, "--port", "0", NULL};
	int         at     = 0;
	json_t     *p;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (peer_dir() == NULL || mkdtemp(dir) == NULL) {
		die("MK_PEERS_DIR unset, or no temporary folder");
	}
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	snprintf(seenpath, sizeof(seenpath), "%s/seen", dir);
	if ((logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0 ||
	    (seen = fopen(seenpath, "w")) == NULL) {
		die("log files");
	}
	setenv("MCPKEEP_LOG", "error", 1);
	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	if (peer_start(&srv, argv, NULL, "listening on port ([0-9]+)",
	               30000) != 0) {
		die("oauth.mjs did not start");
	}
	rt = open_rt(&sb, "bench.db");
	if (add_oauth(rt, "shared", "{}", true) != 0 ||
	    add_user(rt, "peruser", "per_user_oauth",
	             "\"oauth_config\": {}") != 0) {
		die("add");
	}
	bootstrap(rt, "shared", false);
	bootstrap(rt, "peruser", false);
	wait_state(&sb, &at, "shared", "healthy", NULL);
	p = auth_required(rt, "peruser", "bob", NULL);
	authorize_as(rt, p, "bob");
	json_decref(p);

	printf("\n| recovery (oauth.mjs) | result | baseline | ratio |\n"
	       "|---|---|---|---|\n");
	latency(rt, "shared", NULL, "shared sticky");
	latency(rt, "peruser", "bob", "per-user per-call");

	fan  f  = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	long r0 = by_grant("refresh_token");
	int64_t g0 = generation(rt, "shared");
	mk_call c  = {.size      = sizeof(mk_call),
	              .client    = "shared",
	              .tool      = "counted_readonly",
	              .arguments = "{}"};
	as_admin("/admin/revoke-all", "{}");
	for (int i = 0; i < FAN; i++) {
		if (mk_tool_call_async(rt, &c, on_call, &f) != 0) {
			die("a call");
		}
	}
	pthread_mutex_lock(&f.mtx);
	while (f.done < FAN) {
		pthread_cond_wait(&f.cv, &f.mtx);
	}
	pthread_mutex_unlock(&f.mtx);
	printf("| %d concurrent 401s: AS requests | %ld | %d (one each) | %.3f |\n",
	       FAN, by_grant("refresh_token") - r0, FAN,
	       (double)(by_grant("refresh_token") - r0) / FAN);
	printf("| %d concurrent 401s: reconnects | %lld | %d | %.3f |\n", FAN,
	       (long long)(generation(rt, "shared") - g0), FAN,
	       (double)(generation(rt, "shared") - g0) / FAN);
	printf("| %d concurrent 401s: calls that succeeded | %d | %d | %.3f |\n",
	       FAN, f.ok, FAN, (double)f.ok / FAN);
	close_rt(&rt, &sb);
	peer_stop(&srv);
	fclose(seen);
	close(logfd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0) {
		die("rm");
	}
	curl_global_cleanup();
	return (0);
}
