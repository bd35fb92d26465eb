/*
 * cluster_bench.c - mcpkeep nodes on one real PostgreSQL database (test/
 * pg.sh starts it): tool calls through 3 daemons beside 1 (the same
 * upstream, fastmcp; on 2 cores this shows what coordination costs, not
 * a speed-up: both are printed), and how long a client created on one
 * node takes to be listed on the others (p50/p99), and the refresh
 * fan-in: 300 callers on each node of a token a rotating authorization
 * server (oauth.mjs) issued, against the refresh requests it sees.
 * Never a timed test.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test/peer.h"
#include "../test/pgutil.h"
#include "calls.h"
#include "fastmcp.h"
#include "transport/loop.h"

#define N      4000 /* calls per run */
#define ROUNDS 40   /* config changes timed */

static char dir[] = "/tmp/mk-cbench-XXXXXX";
static int  ports[3];

typedef struct run {
	int64_t        *lat;
	int             next;
	int             nodes; /* calls spread over the first nodes */
	pthread_mutex_t mtx;
} run;

static int
take(run *r)
{
	int i;

	pthread_mutex_lock(&r->mtx);
	i = r->next < N ? r->next++ : -1;
	pthread_mutex_unlock(&r->mtx);
	return (i);
}

static size_t
sink(char *p, size_t size, size_t n, void *arg)
{
	return (size * n);
}

/* One request on e (a keep-alive handle): its status. */
static long
request(CURL *e, const char *method, const char *url, const char *body,
        char **out)
{
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	long st = 0;

	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
	if (out != NULL) {
		*out = NULL;
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, NULL);
		FILE *f = open_memstream(out, &(size_t) {0});
		curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
		if (curl_easy_perform(e) != CURLE_OK) {
			st = -1;
		}
		fclose(f);
	} else {
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
		if (curl_easy_perform(e) != CURLE_OK) {
			st = -1;
		}
	}
	if (st == 0) {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	}
	curl_slist_free_all(h);
	return (st);
}

static void *
worker(void *arg)
{
	run  *r = arg;
	CURL *e[3];
	char  url[3][96];
	int   i;

	for (int k = 0; k < r->nodes; k++) {
		e[k] = curl_easy_init();
		snprintf(url[k], sizeof(url[k]),
		         "http://127.0.0.1:%d/api/mcp/tool/execute", ports[k]);
	}
	while ((i = take(r)) >= 0) {
		int64_t t0 = tp_now_ns();
		if (request(e[i % r->nodes], "POST", url[i % r->nodes],
		            "{\"client\": \"b\", \"tool\": \"echo\", "
		            "\"arguments\": {}}",
		            NULL) != 200) {
			die("a tool call through a node");
		}
		r->lat[i] = tp_now_ns() - t0;
	}
	for (int k = 0; k < r->nodes; k++) {
		curl_easy_cleanup(e[k]);
	}
	return (NULL);
}

static stats
calls(int nodes, int conc)
{
	run       r = {.nodes = nodes};
	pthread_t t[CONC];
	int64_t   t0;

	if ((r.lat = calloc(N, sizeof(*r.lat))) == NULL) {
		die("out of memory");
	}
	pthread_mutex_init(&r.mtx, NULL);
	t0 = tp_now_ns();
	for (int k = 0; k < conc; k++) {
		pthread_create(&t[k], NULL, worker, &r);
	}
	for (int k = 0; k < conc; k++) {
		pthread_join(t[k], NULL);
	}
	stats out = summarize(r.lat, N, t0);
	pthread_mutex_destroy(&r.mtx);
	free(r.lat);
	return (out);
}

/* Whether node k lists client name. */
static bool
listed_on(CURL *e, int k, const char *name)
{
	char url[96], *out, want[64];
	bool found;
	long st;

	snprintf(url, sizeof(url),
	         "http://127.0.0.1:%d/api/mcp/clients?search=%s", ports[k],
	         name);
	st = request(e, "GET", url, NULL, &out);
	snprintf(want, sizeof(want), "\"name\":\"%s\"", name);
	found = st == 200 && out != NULL && strstr(out, want) != NULL;
	free(out);
	return (found);
}

static int
cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x < y ? -1 : x > y);
}

/* Created on a, then polled on b and c every millisecond (a deadline of
 * 10 s): the time until both list it. */
static void
propagation(int upstream)
{
	CURL   *e = curl_easy_init();
	int64_t took[ROUNDS];
	char    body[256], url[96], name[32];

	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof(name), "prop%d", i);
		snprintf(body, sizeof(body),
		         "{\"name\": \"%s\", \"connection_type\": \"http\", "
		         "\"connection_string\": \"http://127.0.0.1:%d/mcp\"}",
		         name, upstream);
		snprintf(url, sizeof(url),
		         "http://127.0.0.1:%d/api/mcp/client", ports[0]);
		int64_t t0 = tp_now_ns();
		if (request(e, "POST", url, body, NULL) != 201) {
			die("a create on node a");
		}
		for (int k = 1; k < 3; k++) {
			while (!listed_on(e, k, name)) {
				if (tp_now_ns() - t0 > 10000000000LL) {
					die("a create never reached a node");
				}
				usleep(1000); /* the pace of the poll */
			}
		}
		took[i] = (tp_now_ns() - t0) / 1000;
	}
	qsort(took, ROUNDS, sizeof(took[0]), cmp);
	printf("\nconfig change propagation (create on a -> listed on b and c, %d rounds, polled every 1 ms)\n"
	       "  p50 %lld us   p99 %lld us   (the target: within 1 s)\n",
	       ROUNDS, (long long)took[ROUNDS / 2],
	       (long long)took[ROUNDS * 99 / 100]);
	curl_easy_cleanup(e);
}

/* The AS's counter (GET /admin/counters): by_grant.refresh_token. */
static long
refreshes_at(int as)
{
	CURL *e = curl_easy_init();
	char  u[96], *out = NULL, *p;
	long  n = -1;

	snprintf(u, sizeof(u), "http://127.0.0.1:%d/admin/counters", as);
	if (request(e, "GET", u, NULL, &out) == 200 && out != NULL &&
	    (p = strstr(out, "\"refresh_token\":")) != NULL) {
		n = strtol(p + 16, NULL, 10);
	} else if (out != NULL) {
		n = 0;
	}
	free(out);
	curl_easy_cleanup(e);
	return (n);
}

typedef struct fan {
	int port, n, ok;
} fan;

static void *
fan_run(void *arg)
{
	fan               *f = arg;
	CURLM             *m = curl_multi_init();
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	char     to[96];
	int      running = 0, left;
	CURLMsg *msg;

	snprintf(to, sizeof(to), "http://127.0.0.1:%d/api/mcp/tool/execute",
	         f->port);
	for (int k = 0; k < f->n; k++) {
		CURL *e = curl_easy_init();
		curl_easy_setopt(e, CURLOPT_URL, to);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS,
		                 "{\"client\": \"o\", \"tool\": \"whoami\", "
		                 "\"arguments\": {}}");
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 60000L);
		curl_multi_add_handle(m, e);
	}
	do {
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			long st = 0;
			curl_easy_getinfo(msg->easy_handle,
			                  CURLINFO_RESPONSE_CODE, &st);
			f->ok += st == 200;
			curl_multi_remove_handle(m, msg->easy_handle);
			curl_easy_cleanup(msg->easy_handle);
		}
		if (running > 0) {
			curl_multi_poll(m, NULL, 0, 1000, NULL);
		}
	} while (running > 0);
	curl_slist_free_all(h);
	curl_multi_cleanup(m);
	return (NULL);
}

/* The flow started on node 0, the browser's part done by curl. */
static void
authorize(void)
{
	CURL *e = curl_easy_init();
	char  u[128], *out = NULL, *loc = NULL, *p, *q;
	long  st;

	snprintf(u, sizeof(u),
	         "http://127.0.0.1:%d/api/mcp/client/o/initiate-verification",
	         ports[0]);
	if (request(e, "POST", u, "{}", &out) != 200 || out == NULL ||
	    (p = strstr(out, "\"authorize_url\":\"")) == NULL ||
	    (q = strchr(p + 17, '"')) == NULL) {
		die("initiate-verification on node a");
	}
	*q = '\0';
	for (char *s = p + 17, *d = p + 17;; s++) {
		/* JSON's escaped slashes */
		if (s[0] == '\\' && s[1] == '/') {
			s++;
		}
		if ((*d++ = *s) == '\0') {
			break;
		}
	}
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, p + 17);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	if (curl_easy_perform(e) != CURLE_OK ||
	    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st) != CURLE_OK ||
	    st != 302 ||
	    curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK ||
	    loc == NULL) {
		die("the authorization server's redirect");
	}
	char cb[2048];
	snprintf(cb, sizeof(cb), "%s", loc);
	if (request(e, "GET", cb, NULL, NULL) != 200) {
		die("the OAuth callback on node a");
	}
	free(out);
	curl_easy_cleanup(e);
}

/* 300 callers on each node once the token is due: refresh requests. */
static void
fan_in(int as)
{
	pthread_t th[3];
	fan       f[3];
	int64_t   deadline = tp_now_ns() + 120000000000LL;
	long      before;

	authorize();
	/* every node holds it once its client answers */
	for (int k = 0; k < 3; k++) {
		f[k] = (fan) {.port = ports[k], .n = 1};
		while (fan_run(&f[k]), f[k].ok == 0) {
			if (tp_now_ns() > deadline) {
				die("a node never had the token");
			}
			usleep(50000);
		}
	}
	/* the refresh ahead (at 80% of 20 s, +-10%, on each node): then
	 * 900 callers */
	before = refreshes_at(as);
	while (refreshes_at(as) == before) {
		if (tp_now_ns() > deadline) {
			die("no refresh came");
		}
		usleep(100000); /* the pace of the poll */
	}
	int64_t t0 = tp_now_ns();
	for (int k = 0; k < 3; k++) {
		f[k] = (fan) {.port = ports[k], .n = 300};
		pthread_create(&th[k], NULL, fan_run, &f[k]);
	}
	for (int k = 0; k < 3; k++) {
		pthread_join(th[k], NULL);
	}
	printf("\nrefresh fan-in across 3 nodes (a rotating authorization server, 20 s tokens: the next refresh is 14 s away at the soonest)\n"
	       "  3 nodes' refreshes ahead of expiry, then 900 concurrent callers (300 a node) in %.1f s: %d answered\n"
	       "  refresh requests at the AS from the first until the last answer: %ld\n",
	       (double)(tp_now_ns() - t0) / 1e9, f[0].ok + f[1].ok + f[2].ok,
	       refreshes_at(as) - before);
}

static void
start_node(peer *d, int k, const char *url, const char *client)
{
	char        cpath[256], listen[64], line[1024];
	const char *env[] = {"MCPKEEP_LOG=error", NULL};
	FILE       *f;

	snprintf(cpath, sizeof(cpath), "%s/node%d.json", dir, k);
	if ((f = fopen(cpath, "w")) == NULL) {
		die("config file");
	}
	snprintf(line, sizeof(line),
	         "{\"store\": {\"url\": \"%s\"}, \"cluster\": {\"node_id\": "
	         "\"n%d\"}, \"mcp\": {\"client_configs\": [%s]}}",
	         url, k, client);
	fputs(line, f);
	fclose(f);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", peer_free_port());
	const char *argv[] = {getenv("MK_MCPKEEP"),
	                      "serve",
	                      "-c",
	                      cpath,
	                      "--listen",
	                      listen,
	                      "--max-connections-per-ip",
	                      "1024",
	                      NULL};
	if (peer_start(d, argv, env, "serving http://127.0.0.1:([0-9]+)",
	               30000) != 0) {
		die("a node did not start");
	}
	ports[k] = d->port;
	/* a call answers once its client is up */
	CURL *e = curl_easy_init();
	char  u[96];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/api/mcp/tool/execute",
	         d->port);
	for (int i = 0;
	     request(e, "POST", u,
	             "{\"client\": \"b\", \"tool\": \"echo\", \"arguments\": {}}",
	             NULL) != 200;
	     i++) {
		if (i > 1500) {
			die("a node's client never answered");
		}
		usleep(20000);
	}
	curl_easy_cleanup(e);
}

int
main(void)
{
	char url[160], client[1024], up[96], js[512];
	pgt  pg;
	peer node[3] = {{0}}, as = {0};
	int  port;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (getenv("MK_MCPKEEP") == NULL || mkdtemp(dir) == NULL) {
		die("needs MK_MCPKEEP (the built mcpkeep) and /tmp");
	}
	if ((port = fastmcp_start()) < 0) {
		die("fastmcp did not start");
	}
	snprintf(up, sizeof(up), "http://127.0.0.1:%d/mcp", port);
	snprintf(js, sizeof(js), "%s/oauth.mjs",
	         getenv("MK_PEERS_DIR") != NULL ? getenv("MK_PEERS_DIR")
	                                        : ".");
	const char *as_argv[] = {"node", js, "--port", "0", NULL};
	if (peer_start(&as, as_argv, NULL, "listening on port ([0-9]+)",
	               30000) != 0) {
		die("oauth.mjs did not start (MK_PEERS_DIR)");
	}
	CURL *e = curl_easy_init();
	char  u[96];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/admin/expires-in",
	         as.port);
	if (request(e, "POST", u, "{\"seconds\": 20}", NULL) != 200) {
		die("oauth.mjs expires-in");
	}
	curl_easy_cleanup(e);
	snprintf(
	        client, sizeof(client),
	        "{\"name\": \"b\", \"client_id\": \"b-1\", \"connection_type\": "
	        "\"http\", \"connection_string\": \"%s\", "
	        "\"needs_session_stickiness\": true, \"tools_to_execute\": "
	        "[\"*\"]}, {\"name\": \"o\", \"client_id\": \"o-1\", "
	        "\"connection_type\": \"http\", \"connection_string\": "
	        "\"http://127.0.0.1:%d/mcp\", \"auth_type\": \"oauth\", "
	        "\"oauth_config\": {}, \"tools_to_execute\": [\"*\"]}",
	        up, as.port);
	pgt_start(&pg);
	pgt_db(&pg, "bench", url, sizeof(url));
	start_node(&node[0], 0, url, client);
	printf("mcpkeep cluster benchmark: one tools/call on fastmcp through the daemons, %d calls a run, nodes on one PostgreSQL database (ratio = calls/s vs 1 node, same width)\n",
	       N);
	stats one[2], three[2];
	for (int w = 0; w < 2; w++) {
		(void)calls(1, w ? CONC : 1); /* warm-up */
		one[w] = calls(1, w ? CONC : 1);
	}
	start_node(&node[1], 1, url, client);
	start_node(&node[2], 2, url, client);
	for (int w = 0; w < 2; w++) {
		(void)calls(3, w ? CONC : 1);
		three[w] = calls(3, w ? CONC : 1);
	}
	for (int w = 0; w < 2; w++) {
		printf("\n%s\n  %-34s %9s %9s %9s %7s\n",
		       w ? "16-way" : "sequential", "", "calls/s", "p50 us",
		       "p99 us", "ratio");
		printf("  %-34s %9.0f %9.1f %9.1f %7.2f\n", "1 node",
		       one[w].calls_s, one[w].p50, one[w].p99, 1.0);
		printf("  %-34s %9.0f %9.1f %9.1f %7.2f\n",
		       "3 nodes (round robin)", three[w].calls_s, three[w].p50,
		       three[w].p99, three[w].calls_s / one[w].calls_s);
	}
	propagation(port);
	fan_in(as.port);
	for (int k = 0; k < 3; k++) {
		peer_stop(&node[k]);
	}
	peer_stop(&as);
	pgt_stop(&pg);
	snprintf(client, sizeof(client), "rm -rf %s", dir);
	if (system(client) != 0) {
		die("cleanup");
	}
	curl_global_cleanup();
	return (0);
}
