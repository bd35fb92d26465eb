/*
 * cluster_test.c - three daemons (nodes a, b and c, the built program)
 * on one real PostgreSQL database (test/pg.sh): a client created on one
 * node is listed on the others, disabled on one it is disabled on all,
 * enabled again everywhere, deleted on one it is gone from all, and a
 * client a SIGHUP'd config brings to one node is on every node; the
 * nodes' states fold into degraded or unstable with node_states, a node
 * killed drops out within 3 heartbeats; tool lists checked by every node
 * are written once per change; a tool list approved on one node is
 * approved on all; a plain client written into the database is run by
 * no keyed node.  Lists
 * are polled (an HTTP client has no event for another node's change),
 * each wait bounded; the time a change took to reach the other nodes is
 * printed (bench/cluster_bench measures it).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "pgutil.h"
#include "rtutil.h"
#include "svutil.h"
#include "testutil.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static pgt         pg;
static peer        mcp;
static peer        node[3];
static char        base[3][64];
static char        url[160];
static const char *names[] = {"a", "b", "c"};

/* The node the next request goes to. */
static void
on(int i)
{
	strcpy(sv_base, base[i]); /* as long as serve() wrote it */
}

static char *
node_config(int i, const char *clients)
{
	static char text[2048];

	snprintf(text, sizeof(text),
	         "{\"store\": {\"url\": \"%s\"}, \"cluster\": {\"node_id\": "
	         "\"%s\", \"heartbeat_interval\": \"300ms\"}, \"mcp\": "
	         "{\"tool_sync_interval\": \"1s\", \"client_configs\": [%s]}}",
	         url, names[i], clients);
	return (text);
}

/* Starts node i on config clients, with env (and one option). */
static void
start_node_opt(int i, const char *clients, const char *const *env,
               const char *opt, const char *value)
{
	char cfg[64];

	snprintf(cfg, sizeof(cfg), "node-%s.json", names[i]);
	serve_opt(&node[i], cfg, node_config(i, clients), env, opt, value);
	snprintf(base[i], sizeof(base[i]), "%s", sv_base);
}

static void
start_node(int i, const char *clients, const char *const *env)
{
	start_node_opt(i, clients, env, NULL, NULL);
}

/* Waits (bounded) until node i lists client (want) or not. */
static int64_t
wait_listed(int i, const char *client, bool want, int64_t since)
{
	for (int64_t deadline = now_ms() + WAIT_MS;;) {
		on(i);
		if (listed(client) == want) {
			return (now_ms() - since);
		}
		if (now_ms() >= deadline) {
			fprintf(stderr, "node %s: %s still %s\n", names[i],
			        client, want ? "not listed" : "listed");
			exit(1);
		}
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the API, with a deadline */
	}
}

static void
shared_config(void)
{
	const char *env[] = {"MCPKEEP_ENCRYPTION_KEY=" KEY, NULL};
	char        body[512], file[1024];
	int64_t     t0;

	pgt_db(&pg, "shared", url, sizeof(url));
	for (int i = 0; i < 3; i++) {
		start_node(i, "", env);
	}
	/* created on a: listed on b and c */
	snprintf(body, sizeof(body),
	         "{\"name\": \"shared1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	         "\"headers\": {\"X-Api-Key\": \"HDR-SECRET-1\"}}",
	         mcp.port);
	on(0);
	t0 = now_ms();
	expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	fprintf(stderr, "   created on a: on b in %lld ms, on c in %lld ms\n",
	        (long long)wait_listed(1, "shared1", true, t0),
	        (long long)wait_listed(2, "shared1", true, t0));
	on(1);
	CHECK(state_within("shared1", "healthy", WAIT_MS));
	/* disabled on b: disabled everywhere; enabled on c: everywhere */
	expect("POST", "/api/mcp/client/shared1/disable", "{}", NULL, 200, "");
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("shared1", "disabled", WAIT_MS));
	}
	on(2);
	expect("POST", "/api/mcp/client/shared1/enable", "{}", NULL, 200, "");
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("shared1", "healthy", WAIT_MS));
	}
	/* deleted on c: gone everywhere */
	on(2);
	t0 = now_ms();
	expect("DELETE", "/api/mcp/client/shared1", NULL, NULL, 200, "");
	wait_listed(0, "shared1", false, t0);
	wait_listed(1, "shared1", false, t0);
	/* a SIGHUP on a with a new client: on every node */
	snprintf(file, sizeof(file),
	         "{\"name\": \"declared1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	         mcp.port);
	write_config("node-a.json", node_config(0, file));
	t0 = now_ms();
	CHECK_EQ(kill(node[0].pid, SIGHUP), 0);
	for (int i = 0; i < 3; i++) {
		wait_listed(i, "declared1", true, t0);
		on(i);
		CHECK(state_within("declared1", "healthy", WAIT_MS));
	}
	/* the secret header went to the database sealed */
	char out[16];
	pgt_sql(url,
	        "SELECT count(*) FROM mcp_clients WHERE "
	        "position('HDR-SECRET-1'::bytea in config) > 0",
	        out, sizeof(out));
	CHECK(strcmp(out, "0") == 0);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
}

/* The list on node i (first page): the client's entry, a new object. */
static json_t *
entry_of(int i, const char *client)
{
	long    st;
	char   *out;
	json_t *p, *c, *found = NULL;
	size_t  k;

	on(i);
	out = http("GET", "/api/mcp/clients?limit=100", NULL, NULL, &st);
	p   = json_loads(out, 0, NULL);
	free(out);
	json_array_foreach(json_object_get(p, "clients"), k, c)
	{
		if (strcmp(json_string_value(json_object_get(
		                   json_object_get(c, "config"), "name")),
		           client) == 0) {
			found = json_incref(c);
		}
	}
	json_decref(p);
	return (found);
}

/* Waits (bounded) until node i shows client in state with n
 * node_states (0: none); the entry, a new object. */
static json_t *
wait_shown(int i, const char *client, const char *state, size_t n)
{
	for (int64_t deadline = now_ms() + WAIT_MS;;) {
		json_t     *e  = entry_of(i, client);
		json_t     *ns = json_object_get(e, "node_states");
		const char *st =
		        json_string_value(json_object_get(e, "state"));

		if (st != NULL && strcmp(st, state) == 0 &&
		    json_object_size(ns) == n && (n > 0 || ns == NULL)) {
			return (e);
		}
		if (now_ms() >= deadline) {
			char *seen =
			        e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
			fprintf(stderr,
			        "node %s: %s not %s with %zu node states "
			        "after %d ms; last seen: %s\n",
			        names[i], client, state, n, WAIT_MS,
			        seen != NULL ? seen : "absent from the list");
			free(seen);
		}
		json_decref(e);
		CHECK(now_ms() < deadline);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the API, with a deadline */
	}
}

static const char *
node_state(json_t *e, const char *n)
{
	return (json_string_value(json_object_get(
	        json_object_get(json_object_get(e, "node_states"), n),
	        "state")));
}

static void
aggregation(void)
{
	static const char svc[] =
	        "{\"name\": \"svc\", \"client_id\": \"svc-1\", "
	        "\"connection_type\": \"http\", \"connection_string\": "
	        "\"env.MCP_URL\", \"is_ping_available\": false}";
	peer        up = {0};
	char        good[96], dead[96], deadport[16];
	const char *env_good[] = {good, NULL}, *env_dead[] = {dead, NULL};
	json_t     *e;
	int64_t     t0;

	/* c reaches the same client through a dead port (its own env.) */
	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(good, sizeof(good), "MCP_URL=http://127.0.0.1:%d/mcp",
	         up.port);
	snprintf(deadport, sizeof(deadport), "port %d", peer_free_port());
	snprintf(dead, sizeof(dead), "MCP_URL=http://127.0.0.1:%s/mcp",
	         deadport + 5);
	pgt_db(&pg, "states", url, sizeof(url));
	start_node(0, svc, env_good);
	start_node(1, svc, env_good);
	/* one node, or all healthy: never degraded */
	e = wait_shown(0, "svc", "healthy", 0);
	json_decref(e);
	start_node(2, svc, env_dead);
	/* c failing: degraded, c's last_failure named, on every node */
	for (int i = 0; i < 3; i++) {
		e = wait_shown(i, "svc", "degraded", 3);
		CHECK(strcmp(node_state(e, "a"), "healthy") == 0);
		CHECK(strcmp(node_state(e, "b"), "healthy") == 0);
		CHECK(strcmp(node_state(e, "c"), "unstable") == 0);
		json_t *lf = json_object_get(
		        json_object_get(json_object_get(e, "node_states"),
		                        "c"),
		        "last_failure");
		const char *why =
		        json_string_value(json_object_get(lf, "message"));
		CHECK(json_string_value(json_object_get(lf, "stage")) != NULL);
		CHECK(why != NULL && strstr(why, deadport) != NULL);
		json_decref(e);
	}
	/* the page, in a real browser, on a: degraded, the states folded */
	char js[512], shot[512];
	peer br = {0};
	snprintf(js, sizeof(js), "%s/cluster_page.mjs", peer_dir());
	snprintf(shot, sizeof(shot), "%s/cluster-page.png",
	         getenv("MK_ARTIFACTS") != NULL ? getenv("MK_ARTIFACTS")
	                                        : ".");
	const char *argv[] = {"node", js, base[0], shot, NULL};
	CHECK_EQ(peer_start(&br, argv, NULL, "cluster page ok ([0-9]+)",
	                    120000),
	         0);
	CHECK(peer_wait_exit(&br, 30000));
	peer_stop(&br);
	CHECK(WIFEXITED(br.status) && WEXITSTATUS(br.status) == 0);
	fprintf(stderr, "   the page's screenshot: %s\n", shot);
	/* c killed: out of every view within 3 heartbeats */
	t0 = now_ms();
	CHECK_EQ(kill(-node[2].pid, SIGKILL), 0);
	e = wait_shown(0, "svc", "healthy", 0);
	json_decref(e);
	fprintf(stderr, "   c killed: a shows healthy after %lld ms\n",
	        (long long)(now_ms() - t0));
	/* 3 heartbeats of 300 ms, and a's next read: far below 10 */
	CHECK(now_ms() - t0 < 3000);
	peer_stop(&node[2]);
	/* c back, then the server gone for all: unstable, three states */
	start_node(2, svc, env_dead);
	e = wait_shown(0, "svc", "degraded", 3);
	json_decref(e);
	peer_stop(&up);
	for (int i = 0; i < 3; i++) {
		e = wait_shown(i, "svc", "unstable", 3);
		for (int n = 0; n < 3; n++) {
			CHECK(strcmp(node_state(e, names[n]), "unstable") ==
			      0);
		}
		json_decref(e);
	}
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
}

/* The tool lists the nodes' stores wrote, all told. */
static double
tool_writes(void)
{
	double sum = 0;
	long   st;

	for (int i = 0; i < 3; i++) {
		on(i);
		char *m = http("GET", "/metrics", NULL, NULL, &st);
		sum += metric(m, "mcpkeep_store_tool_writes_total");
		free(m);
	}
	return (sum);
}

/* Waits (bounded) until every node's health ticks reach ticks[i] + 2. */
static void
two_more_checks(double *ticks)
{
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(metric_within("mcpkeep_health_ticks_total", ticks[i] + 2,
		                    1e12));
	}
}

static void
read_ticks(double *ticks)
{
	long st;

	for (int i = 0; i < 3; i++) {
		on(i);
		char *m  = http("GET", "/metrics", NULL, NULL, &st);
		ticks[i] = metric(m, "mcpkeep_health_ticks_total");
		free(m);
	}
}

/* Every node discovers the tools and checks them each second: an
 * unchanged list is written by none, a changed one once, by one. */
static void
tool_lists(void)
{
	static const char tl[] =
	        "{\"name\": \"tl\", \"client_id\": \"tl-1\", \"connection_type\": "
	        "\"http\", \"connection_string\": \"env.MCP_URL\", "
	        "\"is_ping_available\": false}";
	peer        up = {0};
	char        good[96];
	const char *env[] = {good, NULL};
	double      ticks[3];

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(good, sizeof(good), "MCP_URL=http://127.0.0.1:%d/mcp",
	         up.port);
	pgt_db(&pg, "tools", url, sizeof(url));
	for (int i = 0; i < 3; i++) {
		start_node(i, tl, env);
		CHECK(state_within("tl", "healthy", WAIT_MS));
	}
	CHECK_EQ(tool_writes(), 1); /* the first node's discovery */
	read_ticks(ticks);
	two_more_checks(ticks);
	CHECK_EQ(tool_writes(), 1);
	/* the server's list changes: each node sees it, one writes it */
	admin(up.port, "/admin/describe", "{\"description\": \"changed\"}",
	      NULL);
	read_ticks(ticks);
	two_more_checks(ticks);
	CHECK_EQ(tool_writes(), 2);
	char out[64];
	pgt_sql(url,
	        "SELECT count(*) FROM mcp_tools WHERE position('changed' in "
	        "tools) > 0",
	        out, sizeof(out));
	CHECK(strcmp(out, "1") == 0);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	peer_stop(&up);
}

/* Waits (bounded) until node i holds client's echo back (want) or not;
 * the entry, a new object. */
static json_t *
wait_held(int i, const char *client, bool want)
{
	for (int64_t deadline = now_ms() + WAIT_MS;;) {
		json_t *e = entry_of(i, client);
		bool held = json_object_get(json_object_get(e, "tools_held"),
		                            "echo") != NULL;

		if (e != NULL && held == want) {
			return (e);
		}
		json_decref(e);
		if (now_ms() > deadline) {
			fprintf(stderr, "node %s: %s's echo is %sheld\n",
			        names[i], client, held ? "" : "not ");
			CHECK(0);
		}
		usleep(50 * 1000); /* polling the list, bounded */
	}
}

/* tool_changes hold on several nodes: each holds a changed tool back
 * from its own check; an approval made on one is every node's (a row
 * each reads, told to the others), a node started later included. */
static void
approvals(void)
{
	static const char pc[] =
	        "{\"name\": \"pc\", \"connection_type\": \"http\", "
	        "\"connection_string\": \"env.MCP_URL\", "
	        "\"needs_session_stickiness\": true, \"is_ping_available\": "
	        "false, \"tools_to_execute\": [\"*\"], \"tool_changes\": "
	        "\"hold\"}";
	peer        up = {0};
	char        good[96], body[160];
	const char *env[] = {good, NULL};
	json_t     *e;

	CHECK_EQ(peer_start_inject(&up, WAIT_MS), 0);
	snprintf(good, sizeof(good), "MCP_URL=http://127.0.0.1:%d/mcp",
	         up.port);
	pgt_db(&pg, "approvals", url, sizeof(url));
	for (int i = 0; i < 2; i++) {
		start_node(i, pc, env);
		CHECK(state_within("pc", "healthy", WAIT_MS));
	}
	admin(up.port, "/admin/describe", "{\"description\": \"changed\"}",
	      NULL);
	json_decref(wait_held(0, "pc", true));
	e = wait_held(1, "pc", true);
	snprintf(body, sizeof(body), "{\"digest\": \"%s\"}",
	         json_string_value(json_object_get(e, "tools_pending")));
	json_decref(e);
	on(1);
	expect("POST", "/api/mcp/client/pc/tools/approve", body, NULL, 200,
	       "");
	json_decref(wait_held(1, "pc", false));
	json_decref(wait_held(0, "pc", false)); /* told */
	start_node(2, pc, env);
	CHECK(state_within("pc", "healthy", WAIT_MS));
	e = entry_of(2, "pc");
	CHECK(e != NULL && json_object_get(e, "tools_held") == NULL);
	json_decref(e);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	admin(up.port, "/admin/describe",
	      "{\"description\": \"Answers the message\"}", NULL);
	peer_stop(&up);
}

/* ---- the database restarted under load ---------------------------------- */

typedef struct load {
	int             port; /* node a */
	pthread_mutex_t mtx;
	bool            stop;
	long            ok, failed;
} load;

static size_t
drop(char *p, size_t size, size_t n, void *arg)
{
	return (size * n);
}

/* Tool calls on node a, one after another, until told to stop. */
static void *
caller(void *arg)
{
	load              *l = arg;
	CURL              *e = curl_easy_init();
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	char to[96];

	snprintf(to, sizeof(to), "http://127.0.0.1:%d/api/mcp/tool/execute",
	         l->port);
	curl_easy_setopt(e, CURLOPT_URL, to);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS,
	                 "{\"client\": \"svc\", \"tool\": \"echo\", "
	                 "\"arguments\": {\"message\": \"x\"}}");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, drop);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
	for (;;) {
		long st = 0;
		pthread_mutex_lock(&l->mtx);
		bool stop = l->stop;
		pthread_mutex_unlock(&l->mtx);
		if (stop) {
			break;
		}
		bool good = curl_easy_perform(e) == CURLE_OK &&
		        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st) ==
		                CURLE_OK &&
		        st == 200;
		pthread_mutex_lock(&l->mtx);
		good ? l->ok++ : l->failed++;
		pthread_mutex_unlock(&l->mtx);
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return (NULL);
}

/* Waits (bounded) until node i's /readyz answers want. */
static void
ready_is(int i, long want)
{
	for (int64_t deadline = now_ms() + WAIT_MS;;) {
		long st = 0;
		on(i);
		free(http_try("GET", "/readyz", NULL, NULL, &st));
		if (st == want) {
			return;
		}
		CHECK(now_ms() < deadline);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL); /* polling the probe, with a deadline */
	}
}

static void
db_restart(void)
{
	static const char svc[] =
	        "{\"name\": \"svc\", \"client_id\": \"svc-1\", "
	        "\"connection_type\": \"http\", \"connection_string\": "
	        "\"env.MCP_URL\", \"needs_session_stickiness\": true, "
	        "\"tools_to_execute\": [\"*\"]}";
	char        good[96], body[256], *out;
	const char *env[] = {good, NULL};
	load        l     = {0};
	pthread_t   th;
	long        st;

	snprintf(good, sizeof(good), "MCP_URL=http://127.0.0.1:%d/mcp",
	         mcp.port);
	pgt_db(&pg, "restart", url, sizeof(url));
	start_node(0, svc, env);
	start_node(1, svc, env);
	on(0);
	CHECK(state_within("svc", "healthy", WAIT_MS));
	snprintf(body, sizeof(body),
	         "{\"name\": \"before1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	         mcp.port);
	expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	wait_listed(1, "before1", true, now_ms());
	/* calls on a all through; the database goes away meanwhile */
	l.port = node[0].port;
	pthread_mutex_init(&l.mtx, NULL);
	CHECK(pthread_create(&th, NULL, caller, &l) == 0);
	pgt_ctl(&pg, "stop");
	/* a change on a: refused (503), nothing of it kept - it would be
	 * acknowledged without being on disk */
	snprintf(body, sizeof(body),
	         "{\"name\": \"during1\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
	         mcp.port);
	on(0);
	out = http("POST", "/api/mcp/client", body, NULL, &st);
	CHECK_EQ(st, 503);
	CHECK(strstr(out, "the store cannot write: ") != NULL);
	CHECK(strstr(out, PGT_PASSWORD) == NULL);
	free(out);
	ready_is(0, 503); /* a says so */
	out = http("GET", "/metrics", NULL, NULL, &st);
	CHECK(metric(out, "mcpkeep_store_healthy") == 0);
	CHECK(strstr(out, PGT_PASSWORD) == NULL);
	free(out);
	CHECK(!listed("during1"));
	/* back: the change made again lands, and b hears of it */
	pgt_ctl(&pg, "start");
	for (int64_t deadline = now_ms() + WAIT_MS; st != 201;) {
		CHECK(now_ms() < deadline);
		free(http("POST", "/api/mcp/client", body, NULL, &st));
		if (st != 201) {
			usleep(200 *
			       1000); /* the store's reconnect, bounded */
		}
	}
	ready_is(0, 200);
	wait_listed(1, "during1", true, now_ms());
	pthread_mutex_lock(&l.mtx);
	l.stop = true;
	pthread_mutex_unlock(&l.mtx);
	pthread_join(th, NULL);
	fprintf(stderr, "   calls on a meanwhile: %ld answered, %ld failed\n",
	        l.ok, l.failed);
	CHECK(l.ok > 0);
	CHECK_EQ(l.failed, 0);
	pthread_mutex_destroy(&l.mtx);
	/* nothing lost: a restarted has both */
	peer_stop(&node[0]);
	start_node(0, svc, env);
	CHECK(listed("before1"));
	CHECK(listed("during1"));
	for (int i = 0; i < 2; i++) {
		peer_stop(&node[i]);
	}
}

/* ---- one refresh per token across the nodes ----------------------------- */

/* n concurrent tool calls on node i (curl multi): how many answered 200. */
typedef struct burst {
	int  port, n, ok;
	char why[512]; /* a failed call's answer, the first */
} burst;

typedef struct answer {
	char   text[256];
	size_t n;
	bool   retried; /* its connection, once */
} answer;

static size_t
keep(char *p, size_t size, size_t n, void *arg)
{
	answer *a = arg;
	size_t  k = size * n;

	if (a->n + 1 < sizeof(a->text)) {
		size_t c = k < sizeof(a->text) - 1 - a->n
		        ? k
		        : sizeof(a->text) - 1 - a->n;
		memcpy(a->text + a->n, p, c);
		a->n += c;
		a->text[a->n] = '\0';
	}
	return (k);
}

/* One call's handle on m. */
static CURL *
burst_call(CURLM *m, const char *to, struct curl_slist *h, answer *a)
{
	CURL *e = curl_easy_init();

	memset(a, 0, sizeof(*a));
	curl_easy_setopt(e, CURLOPT_URL, to);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS,
	                 "{\"client\": \"o\", \"tool\": \"whoami\", "
	                 "\"arguments\": {}}");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(e, CURLOPT_PRIVATE, a);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 60000L);
	curl_multi_add_handle(m, e);
	return (e);
}

static void *
burst_run(void *arg)
{
	burst             *b   = arg;
	CURLM             *m   = curl_multi_init();
	answer            *ans = calloc((size_t)b->n, sizeof(*ans));
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	char     to[96];
	int      running = 0, left;
	CURLMsg *msg;

	CHECK(m != NULL && ans != NULL);
	snprintf(to, sizeof(to), "http://127.0.0.1:%d/api/mcp/tool/execute",
	         b->port);
	for (int k = 0; k < b->n; k++) {
		(void)burst_call(m, to, h, &ans[k]);
	}
	do {
		CHECK(curl_multi_perform(m, &running) == CURLM_OK);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			answer *a;
			long    st = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
			                  &a);
			curl_easy_getinfo(msg->easy_handle,
			                  CURLINFO_RESPONSE_CODE, &st);
			CURLcode rc = msg->data.result;
			curl_multi_remove_handle(m, msg->easy_handle);
			curl_easy_cleanup(msg->easy_handle);
			if (st == 0 && rc == CURLE_COULDNT_CONNECT &&
			    !a->retried) {
				/* the listen queue full under load: the
				 * connection (not the call) tried again */
				a->retried = true;
				(void)burst_call(m, to, h, a);
				a->retried = true;
				running++;
				continue;
			}
			b->ok += st == 200;
			if (st != 200 && b->why[0] == '\0') {
				snprintf(b->why, sizeof(b->why),
				         "%ld (%s) %.200s", st,
				         curl_easy_strerror(rc), a->text);
			}
		}
		if (running > 0) {
			CHECK(curl_multi_poll(m, NULL, 0, 1000, NULL) ==
			      CURLM_OK);
		}
	} while (running > 0);
	free(ans);
	curl_slist_free_all(h);
	curl_multi_cleanup(m);
	return (NULL);
}

/* The authorization server's counter ("a.b": b of the object a). */
static long
as_count(peer *as, const char *field)
{
	return (admin(as->port, "/admin/counters", NULL, field));
}

/* The flow started on node i, its callback answered on node cb; the
 * callback's path and query into path_out (when not NULL). */
static void
authorize_via(int i, int cb, const char *client, char *path_out, size_t len)
{
	char    path[128], *out, *loc = NULL;
	long    st;
	json_t *j;

	on(i);
	snprintf(path, sizeof(path),
	         "/api/mcp/client/%s/initiate-verification", client);
	out = http("POST", path, NULL, NULL, &st);
	CHECK_EQ(st, 200);
	CHECK((j = json_loads(out, 0, NULL)) != NULL);
	free(out);
	CURL *e = curl_easy_init();
	curl_easy_setopt(
	        e, CURLOPT_URL,
	        json_string_value(json_object_get(j, "authorize_url")));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, drop);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	CHECK_EQ(st, 302);
	curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc);
	CHECK(loc != NULL && strncmp(loc, base[i], strlen(base[i])) == 0);
	if (path_out != NULL) {
		snprintf(path_out, len, "%s", loc + strlen(base[i]));
	}
	on(cb); /* the browser reaches another node (a load balancer) */
	out = http_req("GET", loc + strlen(base[i]), NULL, NULL, &st);
	CHECK_EQ(st, 200);
	CHECK(strstr(out, "Authorized") != NULL);
	free(out);
	curl_easy_cleanup(e);
	json_decref(j);
}

static void
authorize_on(int i, const char *client)
{
	authorize_via(i, i, client, NULL, 0);
}

/* oauth.mjs (its access tokens living expires_s; 0: its default) and
 * the three nodes on database db, each with the OAuth client "o" on it. */
static void
oauth_cluster(peer *as, const char *db, int expires_s)
{
	char        js[512], client[512], body[64];
	const char *argv[] = {"node", js, "--port", "0", NULL};

	snprintf(js, sizeof(js), "%s/oauth.mjs", peer_dir());
	CHECK_EQ(peer_start(as, argv, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	if (expires_s > 0) {
		snprintf(body, sizeof(body), "{\"seconds\": %d}", expires_s);
		admin(as->port, "/admin/expires-in", body, NULL);
	}
	snprintf(
	        client, sizeof(client),
	        "{\"name\": \"o\", \"client_id\": \"o-1\", \"connection_type\": "
	        "\"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	        "\"auth_type\": \"oauth\", \"oauth_config\": {}, "
	        "\"tools_to_execute\": [\"*\"]}",
	        as->port);
	pgt_db(&pg, db, url, sizeof(url));
	for (int i = 0; i < 3; i++) {
		start_node_opt(i, client, NULL, "--max-connections-per-ip",
		               "1024");
	}
}

/* Waits until the AS's counter field reaches n, for at most ms. */
static void
as_wait(peer *as, const char *field, long n, int ms)
{
	for (int64_t deadline = now_ms() + ms; as_count(as, field) < n;) {
		CHECK(now_ms() < deadline);
		usleep(200 * 1000); /* polling the server's counter, bounded */
	}
}

/* Nodes from..2 (but skip) healthy, then n calls on each at once, every
 * one answered. */
static void
calls_everywhere(int from, int skip, int n)
{
	pthread_t th[3];
	burst     b[3];

	for (int i = from; i < 3; i++) {
		if (i != skip) {
			on(i);
			CHECK(state_within("o", "healthy", WAIT_MS));
			b[i] = (burst) {.port = node[i].port, .n = n};
			CHECK(pthread_create(&th[i], NULL, burst_run, &b[i]) ==
			      0);
		}
	}
	for (int i = from; i < 3; i++) {
		if (i != skip) {
			pthread_join(th[i], NULL);
			if (b[i].ok != n) {
				fprintf(stderr,
				        "node %s: %d of %d answered; %s\n%s\n",
				        names[i], b[i].ok, n, b[i].why,
				        node[i].tail);
			}
			CHECK_EQ(b[i].ok, n);
		}
	}
}

/* "o" authorized on a, healthy on every node; the AS's counters zeroed. */
static void
authorized_everywhere(peer *as)
{
	authorize_on(0, "o");
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("o", "healthy", WAIT_MS));
	}
	admin(as->port, "/admin/reset", "{}", NULL);
}

/* A rotating refresh token (each works once; a reuse is invalid_grant):
 * authorized on a, the token reaches b and c; when it is due, every
 * node's refresh (ahead of expiry, and 300 callers each) comes down to
 * one request at the authorization server.  With a gone, b and c refresh
 * with what a discovered and registered. */
static void
refresh_once(void)
{
	peer as = {0};

	oauth_cluster(&as, "refresh", 40);
	authorized_everywhere(&as);
	/* each node refreshes ahead, at 32 s (+-10%): one of them does */
	as_wait(&as, "by_grant.refresh_token", 1, 60000);
	/* 300 callers on each node at once (before the next refresh, 28.8 s
	 * away at the soonest: on a machine slower than that, that one too,
	 * and no more) */
	int64_t t0 = now_ms();
	calls_everywhere(0, -1, 300);
	int64_t took = now_ms() - t0;
	long    n    = as_count(&as, "by_grant.refresh_token");
	fprintf(stderr,
	        "   900 calls in %lld ms; refresh requests at the AS: %ld, "
	        "reused: %ld\n",
	        (long long)took, n, as_count(&as, "refresh_reused"));
	CHECK(n == 1 || (n == 2 && took >= 28800));
	CHECK_EQ(as_count(&as, "refresh_reused"), 0);
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("o", "healthy", WAIT_MS));
	}
	/* a, which authorized and discovered, killed: the next refresh is
	 * b's or c's, with the registration a stored */
	CHECK_EQ(kill(-node[0].pid, SIGKILL), 0);
	peer_stop(&node[0]);
	as_wait(&as, "by_grant.refresh_token", n + 1, 60000);
	t0 = now_ms();
	calls_everywhere(1, -1, 300);
	took   = now_ms() - t0;
	long m = as_count(&as, "by_grant.refresh_token");
	CHECK(m == n + 1 || (m == n + 2 && took >= 28800));
	CHECK_EQ(as_count(&as, "refresh_reused"), 0);
	for (int i = 1; i < 3; i++) {
		on(i);
		CHECK(state_within("o", "healthy", WAIT_MS));
		peer_stop(&node[i]);
	}
	peer_stop(&as);
}

/* The refresh's leaseholder killed while its request waits at the
 * authorization server (held, then dropped unseen: the refresh token is
 * not spent): its lease times out, one more refresh comes from another
 * node, and nothing is lost. */
static void
refresh_killed(void)
{
	char owner[64];
	peer as   = {0};
	int  dead = -1;

	oauth_cluster(&as, "killed", 10);
	authorized_everywhere(&as);
	admin(as.port, "/admin/hold", "{\"grant\": \"refresh_token\"}", NULL);
	/* the first refresh (ahead, at about 8 s) is held at the server */
	as_wait(&as, "held", 1, 60000);
	pgt_sql(url,
	        "SELECT lease_owner FROM oauth_tokens WHERE lease_owner "
	        "IS NOT NULL",
	        owner, sizeof(owner));
	for (int i = 0; i < 3; i++) {
		dead = strcmp(owner, names[i]) == 0 ? i : dead;
	}
	CHECK(dead >= 0);
	fprintf(stderr, "   node %s holds the lease: killed\n", names[dead]);
	CHECK_EQ(kill(-node[dead].pid, SIGKILL), 0);
	peer_stop(&node[dead]);
	/* the token of the refresh to come lives 40 s, so the calls below
	 * end well before the one after it is due (28.8 s at the soonest) */
	admin(as.port, "/admin/expires-in", "{\"seconds\": 40}", NULL);
	admin(as.port, "/admin/hold", "{}", NULL);
	/* its request dropped unseen; the lease expires (15 s) and another
	 * node refreshes, once */
	as_wait(&as, "by_grant.refresh_token", 2, 90000);
	int64_t t0 = now_ms();
	CHECK_EQ(as_count(&as, "gone"), 1);
	calls_everywhere(0, dead, 300);
	fprintf(stderr,
	        "   refresh requests at the AS: %ld (one dropped), "
	        "reused: %ld\n",
	        as_count(&as, "by_grant.refresh_token"),
	        as_count(&as, "refresh_reused"));
	/* (on a machine slower than 28.8 s, the next one was due too) */
	long n = as_count(&as, "by_grant.refresh_token");
	CHECK(n == 2 || (n == 3 && now_ms() - t0 >= 28800));
	CHECK_EQ(as_count(&as, "refresh_reused"), 0);
	for (int i = 0; i < 3; i++) {
		if (i != dead) {
			on(i);
			CHECK(state_within("o", "healthy", WAIT_MS));
			peer_stop(&node[i]);
		}
	}
	peer_stop(&as);
}

/* The leaseholder's refresh fails twice (503), each answer 7 s late: its
 * retries run past one lease's life (15 s), and each retry takes the
 * lease again first, so the other nodes (refreshing ahead too) never
 * take it over and spend the same refresh token: 3 requests, 1 of them
 * a success, nothing reused, every node healthy after. */
static void
refresh_retried(void)
{
	char owner[64] = "";
	peer as        = {0};

	oauth_cluster(&as, "retried", 20);
	authorized_everywhere(&as);
	admin(as.port, "/admin/delay", "{\"ms\": 7000}", NULL);
	admin(as.port, "/admin/fail-next",
	      "{\"status\": 503, \"error\": \"temporarily_unavailable\", "
	      "\"count\": 2, \"grant\": \"refresh_token\"}",
	      NULL);
	/* the first refresh ahead (at about 16 s), its two retries, and the
	 * lease released by the tokens' write */
	as_wait(&as, "by_grant.refresh_token", 3, 90000);
	for (int64_t deadline = now_ms() + 30000; strcmp(owner, "-") != 0;) {
		CHECK(now_ms() < deadline);
		usleep(200 * 1000); /* polling the lease's row, bounded */
		pgt_sql(url,
		        "SELECT COALESCE(lease_owner, '-') FROM oauth_tokens",
		        owner, sizeof(owner));
	}
	fprintf(stderr,
	        "   refresh requests at the AS: %ld (two failed), reused: %ld\n",
	        as_count(&as, "by_grant.refresh_token"),
	        as_count(&as, "refresh_reused"));
	admin(as.port, "/admin/delay", "{\"ms\": 0}", NULL);
	calls_everywhere(0, -1, 100);
	CHECK_EQ(as_count(&as, "by_grant.refresh_token"), 3);
	CHECK_EQ(as_count(&as, "refresh_reused"), 0);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	peer_stop(&as);
}

/* The database away when the token is due: every node refreshes without
 * a lease, the first spends the refresh token and the others are
 * refused (invalid_grant).  They store nothing and wait for the store:
 * when it is back the winner's write lands and they take its tokens, so
 * no node needs reauthorization and no refresh is sent again. */
static void
refresh_store_away(void)
{
	char status[32] = "";
	peer as         = {0};

	oauth_cluster(&as, "away", 30);
	int64_t t0 = now_ms(); /* the token is issued after this */
	authorized_everywhere(&as);
	pgt_ctl(&pg, "stop");
	CHECK(now_ms() - t0 < 21000); /* before any refresh (21.6 s) */
	/* each node's refresh ahead (at about 24 s), none leased */
	as_wait(&as, "by_grant.refresh_token", 3, 60000);
	fprintf(stderr,
	        "   store away: refresh requests at the AS: %ld, reused: %ld\n",
	        as_count(&as, "by_grant.refresh_token"),
	        as_count(&as, "refresh_reused"));
	CHECK_EQ(as_count(&as, "refresh_reused"), 2);
	pgt_ctl(&pg, "start");
	/* the two refused nodes answer once the winner's write lands (it
	 * waited for the store, up to its 5 s retry) and they take it; calls
	 * before that fail (the refused nodes hold no live token) */
	for (int i = 0; i < 3; i++) {
		burst one = {.port = node[i].port, .n = 1};
		for (int64_t deadline = now_ms() + 30000; one.ok < 1;) {
			CHECK(now_ms() < deadline);
			burst_run(&one);
		}
	}
	calls_everywhere(0, -1, 100);
	CHECK_EQ(as_count(&as, "by_grant.refresh_token"), 3);
	pgt_sql(url, "SELECT status FROM oauth_tokens", status,
	        sizeof(status));
	CHECK(strcmp(status, "active") == 0);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	peer_stop(&as);
}

/* A keyed cluster takes no client written around it: a plain stdio
 * client inserted into the database and told with NOTIFY is listed and
 * run by no node, and each node's log says why (the clients each node
 * creates after it reach the other, so both have read it). */
static void
forged_row(void)
{
	const char *env[] = {"MCPKEEP_ENCRYPTION_KEY=" KEY, NULL};
	char        ran[256], sql[1024], body[512];
	struct stat sb;

	pgt_db(&pg, "forged", url, sizeof(url));
	for (int i = 0; i < 2; i++) {
		start_node(i, "", env);
	}
	snprintf(ran, sizeof(ran), "%s/forged-ran", sv_dir);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO mcp_clients (id, name, config, digest, "
	         "created_at, updated_at) VALUES ('id-evil', 'evil', "
	         "convert_to('{\"name\": \"evil\", \"connection_type\": "
	         "\"stdio\", \"stdio_config\": {\"command\": \"touch\", "
	         "\"args\": [\"%s\"]}}', 'UTF8'), 'x', 0, 0); SELECT "
	         "pg_notify('mk_clients', '{\"op\": \"put\", \"id\": "
	         "\"id-evil\", \"node\": \"mallory\"}')",
	         ran);
	pgt_sql(url, sql, NULL, 0);
	for (int i = 0; i < 2; i++) {
		snprintf(body, sizeof(body),
		         "{\"name\": \"after_%s\", \"connection_type\": "
		         "\"http\", \"connection_string\": "
		         "\"http://127.0.0.1:%d/mcp\"}",
		         names[i], mcp.port);
		on(i);
		expect("POST", "/api/mcp/client", body, NULL, 201, "\"id\"");
	}
	wait_listed(1, "after_a", true, now_ms());
	wait_listed(0, "after_b", true, now_ms());
	for (int i = 0; i < 2; i++) {
		on(i);
		CHECK(!listed("evil"));
	}
	CHECK(stat(ran, &sb) != 0);
	for (int i = 0; i < 2; i++) {
		peer_stop(&node[i]);
		CHECK(peer_said(
		        &node[i],
		        "mcp_clients row id-evil (client evil): config "
		        "is not sealed"));
	}
}

/* A flow started on a, its callback on b: authorized on every node; the
 * callback again, on any node, is refused (single use, cluster-wide). */
static void
flow_across(void)
{
	char  cb[2048];
	peer  as = {0};
	long  st;
	char *out;

	oauth_cluster(&as, "flows", 0);
	authorize_via(0, 1, "o", cb, sizeof(cb));
	for (int i = 0; i < 3; i++) {
		on(i);
		CHECK(state_within("o", "healthy", WAIT_MS));
	}
	CHECK_EQ(as_count(&as, "by_grant.authorization_code"), 1);
	for (int i = 0; i < 3; i++) {
		on(i);
		out = http_req("GET", cb, NULL, NULL, &st);
		CHECK_EQ(st, 400);
		CHECK(strstr(out, "Not authorized") != NULL);
		free(out);
	}
	CHECK_EQ(as_count(&as, "by_grant.authorization_code"), 1);
	for (int i = 0; i < 3; i++) {
		peer_stop(&node[i]);
	}
	peer_stop(&as);
}

/* Starts node *arg on its config file, written already. */
static void *
start_th(void *arg)
{
	const int *i = arg;
	char       cfg[64];

	snprintf(cfg, sizeof(cfg), "node-%s.json", names[*i]);
	serve_spawn(&node[*i], cfg, NULL, NULL, NULL, WAIT_MS);
	snprintf(base[*i], sizeof(base[*i]), "http://127.0.0.1:%d",
	         node[*i].port);
	return (NULL);
}

/* Nodes 0..n-1 started at the same moment on an empty database with one
 * shared config whose clients have no client_id: every node ready
 * within 10 s, one row per name, no node logs an error; 20 times, with
 * two nodes and with three. */
static void
boot_together(void)
{
	char      clients[512], rows[64];
	pthread_t th[3];
	int       st[3];

	snprintf(clients, sizeof(clients),
	         "{\"name\": \"bt_one\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}, "
	         "{\"name\": \"bt_two\", \"connection_type\": \"http\", "
	         "\"connection_string\": \"http://127.0.0.1:%d/mcp\", "
	         "\"needs_session_stickiness\": true}",
	         mcp.port, mcp.port);
	for (int round = 0; round < 20; round++) {
		int n = 2 + round % 2;
		pgt_db(&pg, "together", url, sizeof(url));
		for (int i = 0; i < n; i++) {
			char cfg[64];
			snprintf(cfg, sizeof(cfg), "node-%s.json", names[i]);
			write_config(cfg, node_config(i, clients));
			st[i] = i;
		}
		for (int i = 0; i < n; i++) {
			CHECK(pthread_create(&th[i], NULL, start_th, &st[i]) ==
			      0);
		}
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
		}
		for (int i = 0; i < n; i++) {
			on(i);
			CHECK(ready_within(10000));
			if (!state_within("bt_two", "healthy", 10000)) {
				char *l = http("GET", "/api/mcp/clients", NULL,
				               NULL, NULL);
				fprintf(stderr, "round %d, node %s: %s\n",
				        round, names[i],
				        l != NULL ? l : "(no list)");
				free(l);
				CHECK(0);
			}
		}
		pgt_sql(url,
		        "SELECT count(*) || ' ' || count(DISTINCT name) FROM "
		        "mcp_clients",
		        rows, sizeof(rows));
		for (int i = 0; i < n; i++) {
			peer_stop(&node[i]);
			if (peer_said(&node[i], "ERROR") ||
			    peer_said(&node[i], "duplicate key")) {
				fprintf(stderr, "round %d, node %s:\n%s\n",
				        round, names[i], node[i].tail);
				CHECK(!"a node logged an error");
			}
		}
		CHECK(strcmp(rows, "2 2") == 0);
	}
	fprintf(stderr, "   20 rounds: every node ready, one row per name\n");
}

int
main(int argc, char **argv)
{
	struct rlimit fds;

	/* 900 callers at once hold 900 sockets: the soft limit up to the
	 * hard one */
	if (getrlimit(RLIMIT_NOFILE, &fds) == 0) {
		fds.rlim_cur = fds.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &fds);
	}
	sv_begin(&mcp);
	pgt_start(&pg);
	RUN_IF(shared_config);
	RUN_IF(boot_together);
	RUN_IF(aggregation);
	RUN_IF(tool_lists);
	RUN_IF(approvals);
	RUN_IF(db_restart);
	RUN_IF(refresh_once);
	RUN_IF(flow_across);
	RUN_IF(refresh_killed);
	RUN_IF(refresh_retried);
	RUN_IF(refresh_store_away);
	RUN_IF(forged_row);
	pgt_stop(&pg);
	sv_end(&mcp);
	return (0);
}
