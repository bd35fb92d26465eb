/*
 * peers_bench.c - mcpkeep's embedding API beside the MCP clients a host
 * would embed instead, in-process and against the same upstream: fastmcp
 * (a minimal C server, so the server is not the bottleneck; in a forked
 * child, so that its threads' memory is not ours):
 *
 *   mcpkeep   mk_tool_call on sticky clients (this process)
 *   TS SDK    @modelcontextprotocol/sdk's Client (bench/peers/sdk.mjs)
 *   Mastra    @mastra/mcp's MCPClient, a multi-server manager
 *             (bench/peers/mastra.mjs)
 *
 * For each: one tools/call of "echo", N calls sequentially on one
 * connection and N calls 16-way (16 callers, each with its own client or
 * server: its own session and connection, as agents do), calls/s and
 * p50/p99 latency after a warm-up; and the resident memory (VmRSS) that M
 * connections, open and initialized, add to the process, per connection.
 * Then one table, with mcpkeep's calls/s and memory against each.
 *
 * Usage: peers_bench [-n calls] [-m connections]   (4,000 and 1,000)
 * Needs MK_PEERS_DIR (test/peers, with its node_modules), MK_NODE (the
 * Node that runs both scripts) and MK_PEERS_SCRIPTS (bench/peers); fails,
 * naming what to install, when a peer is missing.  Never a timed test.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../calls.h"
#include "../fastmcp.h"
#include "mcpkeep.h"

/* One client's results: a table row. */
typedef struct result {
	char   name[64]; /* the row's label */
	stats  seq;      /* one caller */
	stats  conc;     /* CONC callers */
	double kib;      /* resident KiB per connection */
	double fds;      /* open fds per connection */
} result;

/* One measured run of mk_tool_call: callers take call slots in turn. */
typedef struct run {
	mk_runtime     *rt;   /* the runtime of clients c0..c(CONC-1) */
	int64_t        *lat;  /* one per call */
	int             n;    /* calls in the run */
	int             next; /* slots handed out */
	pthread_mutex_t mtx;  /* guards next */
} run;

/* One caller: a thread and the client only it calls. */
typedef struct caller {
	run *r;          /* the run */
	char client[16]; /* its client's name */
} caller;

static const char *peers, *node, *scripts; /* from the environment */

/* The next call's slot, or -1 when all are out. */
static int
take(run *r)
{
	int i;

	pthread_mutex_lock(&r->mtx);
	i = r->next < r->n ? r->next++ : -1;
	pthread_mutex_unlock(&r->mtx);
	return (i);
}

static void *
api_worker(void *arg)
{
	caller *c    = arg;
	mk_call call = {.size      = sizeof(mk_call),
	                .client    = c->client,
	                .tool      = "echo",
	                .arguments = "{}"};
	int     i;

	while ((i = take(c->r)) >= 0) {
		mk_result *res = NULL;
		int64_t    t0  = tp_now_ns();
		if (mk_tool_call(c->r->rt, &call, &res) != 0) {
			die(res != NULL && res->error ? res->error
			                              : "mk_tool_call");
		}
		c->r->lat[i] = tp_now_ns() - t0;
		mk_result_free(&res);
	}
	return (NULL);
}

/* n calls by conc threads, thread k on client ck; no warm-up. */
static stats
api_run(mk_runtime *rt, int n, int conc)
{
	run       r = {.rt = rt, .n = n};
	pthread_t t[CONC];
	caller    c[CONC];
	int64_t   t0;

	if ((r.lat = calloc((size_t)n, sizeof(*r.lat))) == NULL) {
		die("out of memory");
	}
	pthread_mutex_init(&r.mtx, NULL);
	t0 = tp_now_ns();
	for (int k = 0; k < conc; k++) {
		c[k].r = &r;
		snprintf(c[k].client, sizeof(c[k].client), "c%d", k);
		pthread_create(&t[k], NULL, api_worker, &c[k]);
	}
	for (int k = 0; k < conc; k++) {
		pthread_join(t[k], NULL);
	}
	cpu0      = thread_cpu_ns();
	stats out = summarize(r.lat, n, t0);
	pthread_mutex_destroy(&r.mtx);
	free(r.lat);
	return (out);
}

/* The resident set in KiB, as /proc/self/status's VmRSS says it. */
static long
vmrss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char  line[256];
	long  kib = -1;

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
			break;
		}
	}
	if (f != NULL) {
		fclose(f);
	}
	if (kib < 0) {
		die("no VmRSS in /proc/self/status");
	}
	return (kib);
}

static mk_runtime *
open_rt(void)
{
	mk_runtime *rt;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_ERROR;
	if (mk_runtime_open(&rt, &o) != 0) {
		die("runtime did not open");
	}
	return (rt);
}

/* Loads a config of n sticky clients named prefix0.. on url; blocks
 * until every first connect finished, and dies unless all are healthy
 * (want: the healthy count expected after it). */
static void
load_clients(mk_runtime *rt, const char *prefix, int n, const char *url,
             int want)
{
	char *json    = NULL;
	int   healthy = -1;

	load_sticky(rt, prefix, n, url, "");
	if (mk_clients_json(rt, "{\"state\": \"healthy\", \"limit\": 1}",
	                    &json) != 0 ||
	    strstr(json, "\"total_count\":") == NULL ||
	    sscanf(strstr(json, "\"total_count\":") + 14, "%d", &healthy) !=
	            1 ||
	    healthy != want) {
		fprintf(stderr, "%d of %d clients healthy\n", healthy, want);
		die("clients did not connect");
	}
	mk_free(json);
}

/* mcpkeep: memory first (a fresh runtime: one client, then m more), then
 * the calls on a runtime of CONC clients. */
static result
mcpkeep(const char *url, int n, int m)
{
	result      r  = {.name = "mcpkeep (mk_tool_call)"};
	mk_runtime *rt = open_rt();
	long        rss0, fd0;

	/* one client first, so that what the first one sets up once
	 * is not counted */
	load_clients(rt, "warm", 1, url, 1);
	rss0 = vmrss_kib();
	fd0  = count_fds();
	load_clients(rt, "m", m, url, m + 1);
	r.kib = (double)(vmrss_kib() - rss0) / m;
	r.fds = (double)(count_fds() - fd0) / m;
	mk_runtime_close(&rt);

	rt = open_rt();
	load_clients(rt, "c", CONC, url, CONC);
	(void)api_run(rt, 20, 1); /* a warm-up of 20 calls per caller */
	r.seq = api_run(rt, n, 1);
	(void)api_run(rt, 20 * CONC, CONC);
	r.conc = api_run(rt, n, CONC);
	mk_runtime_close(&rt);
	return (r);
}

/* Dies unless path (under MK_PEERS_DIR) exists, naming what to install. */
static void
need(const char *path, const char *what)
{
	char full[1024];

	snprintf(full, sizeof(full), "%s/%s", peers, path);
	if (access(full, F_OK) != 0) {
		fprintf(stderr,
		        "peers_bench: %s is not installed (%s missing): run tools/peers.sh (npm ci in test/peers)\n",
		        what, full);
		exit(1);
	}
}

/* stats from the script's {"calls_s", "p50_us", "p99_us"}. */
static int
unpack_stats(json_t *o, stats *s)
{
	return (json_unpack(o, "{s:F, s:F, s:F}", "calls_s", &s->calls_s,
	                    "p50_us", &s->p50, "p99_us", &s->p99));
}

/* A Node peer: runs script at url and reads its one JSON line (the last
 * line that starts with '{': a library may log before it). */
static result
node_peer(const char *label, const char *script, const char *url, int n, int m)
{
	char        cmd[2048], line[4096], last[4096] = "";
	const char *version = "?";
	result      r       = {0};
	json_t     *j;
	FILE       *p;

	snprintf(cmd, sizeof(cmd),
	         "NODE_NO_WARNINGS=1 '%s' --expose-gc '%s/%s' '%s' %d %d",
	         node, scripts, script, url, n, m);
	if ((p = popen(cmd, "r")) == NULL) {
		die("popen");
	}
	while (fgets(line, sizeof(line), p) != NULL) {
		if (line[0] == '{') {
			snprintf(last, sizeof(last), "%s", line);
		}
	}
	if (pclose(p) != 0) {
		fprintf(stderr, "peers_bench: %s failed\n", cmd);
		exit(1);
	}
	if ((j = json_loads(last, 0, NULL)) == NULL ||
	    json_unpack(j, "{s:s, s:F, s:F}", "version", &version,
	                "kib_per_conn", &r.kib, "fds_per_conn", &r.fds) != 0 ||
	    unpack_stats(json_object_get(j, "seq"), &r.seq) != 0 ||
	    unpack_stats(json_object_get(j, "conc"), &r.conc) != 0) {
		fprintf(stderr, "peers_bench: %s printed: %s\n", script, last);
		exit(1);
	}
	snprintf(r.name, sizeof(r.name), "%s %s", label, version);
	json_decref(j);
	return (r);
}

static void
row(const result *r, const result *mk)
{
	printf("%-28s %8.0f %8.1f %8.1f %8.0f %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f\n",
	       r->name, r->seq.calls_s, r->seq.p50, r->seq.p99,
	       r->conc.calls_s, r->conc.p50, r->conc.p99, r->kib,
	       mk->conc.calls_s / r->conc.calls_s,
	       mk->seq.calls_s / r->seq.calls_s, r->kib / mk->kib);
}

int
main(int argc, char **argv)
{
	int    n = 4000, m = 1000, opt, port;
	char   url[64];
	pid_t  pid;
	result res[3];

	while ((opt = getopt(argc, argv, "n:m:")) != -1) {
		if (opt == 'n' && atoi(optarg) > 0) {
			n = atoi(optarg);
		} else if (opt == 'm' && atoi(optarg) > 0) {
			m = atoi(optarg);
		} else {
			fprintf(stderr,
			        "usage: peers_bench [-n calls] [-m connections]\n");
			return (2);
		}
	}
	peers   = getenv("MK_PEERS_DIR");
	node    = getenv("MK_NODE");
	scripts = getenv("MK_PEERS_SCRIPTS");
	if (peers == NULL || node == NULL || scripts == NULL) {
		die("needs MK_PEERS_DIR (test/peers), MK_NODE and "
		    "MK_PEERS_SCRIPTS (bench/peers): run it with meson test "
		    "--benchmark peers");
	}
	need("node_modules/@modelcontextprotocol/sdk/package.json",
	     "the TS SDK (@modelcontextprotocol/sdk)");
	need("node_modules/@mastra/mcp/package.json", "Mastra (@mastra/mcp)");
	need("node_modules/@mastra/core/package.json",
	     "Mastra's core (@mastra/core)");
	if (access(node, X_OK) != 0) {
		fprintf(stderr,
		        "peers_bench: Node 22 (the npm package node@22 in test/peers) is not installed (%s missing): run tools/peers.sh (npm ci in test/peers)\n",
		        node);
		return (1);
	}

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if ((port = fastmcp_child(&pid)) < 0) {
		die("fastmcp child did not start");
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	res[0] = mcpkeep(url, n, m);
	res[1] = node_peer("TS SDK Client", "sdk.mjs", url, n, m);
	res[2] = node_peer("Mastra MCPClient", "mastra.mjs", url, n, m);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	printf("peers benchmark: one tools/call of \"echo\" on fastmcp (a child process), %d calls a run, memory with %d connections open; one run\n",
	       n, m);
	printf("mcpkeep vs it: calls/s mcpkeep / it (16-way, sequential); memory it / mcpkeep (above 1: mcpkeep ahead)\n\n");
	printf("%-28s %26s %26s %8s %23s\n", "", "sequential (1 connection)",
	       "16-way (16 connections)", "memory", "mcpkeep vs it");
	printf("%-28s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "client",
	       "calls/s", "p50 us", "p99 us", "calls/s", "p50 us", "p99 us",
	       "KiB/conn", "16-way", "seq", "memory");
	for (int i = 0; i < 3; i++) {
		row(&res[i], &res[0]);
	}
	printf("\nfds per connection: mcpkeep %.2f, TS SDK %.2f, Mastra %.2f (Node's fetch keeps one socket pool per origin, which its clients share)\n",
	       res[0].fds, res[1].fds, res[2].fds);
	curl_global_cleanup();
	return (0);
}
