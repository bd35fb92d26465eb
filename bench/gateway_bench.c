/*
 * gateway_bench.c - one tools/call, in one run, against fastmcp (a
 * minimal C server, so the server is not the bottleneck): the raw
 * transport (the MCP client alone on its loop), the embedding API
 * (mk_tool_call on a sticky client), HTTP through the daemon (POST
 * /api/mcp/tool/execute on a keep-alive connection) and the daemon's MCP
 * gateway (tools/call on /mcp, one session per connection: what an
 * agent's MCP client sends), driven by libcurl; then the TS SDK's client
 * (test/peers/sdkbench.mjs: what agents run) on /mcp beside the same
 * client on the upstream itself.  Sequential and 16-way.  Ratios are
 * calls/s against the raw transport of the same width, /mcp against
 * tool/execute, and the SDK's /mcp against its upstream.  Never a timed
 * test.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../test/peer.h"
#include "calls.h"
#include "drive.h"
#include "fastmcp.h"
#include "mcpkeep.h"
#include "transport/loop.h"

#define WIDTHS_MAX 8 /* -c's widths */

static int N = 4000; /* calls per run (-n) */

typedef struct run {
	int64_t        *lat;  /* one per call */
	int             next; /* calls handed out */
	pthread_mutex_t mtx;  /* guards next */
	mk_runtime     *rt;   /* the API runs */
	const char     *url;  /* the HTTP runs */
} run;

/* The next call's slot, or -1 when all N are out. */
static int
take(run *r)
{
	int i;

	pthread_mutex_lock(&r->mtx);
	i = r->next < N ? r->next++ : -1;
	pthread_mutex_unlock(&r->mtx);
	return (i);
}

static void *
api_worker(void *arg)
{
	run    *r = arg;
	mk_call c = {.size      = sizeof(mk_call),
	             .client    = "b",
	             .tool      = "echo",
	             .arguments = "{}"};
	int     i;

	while ((i = take(r)) >= 0) {
		mk_result *res = NULL;
		int64_t    t0  = tp_now_ns();
		if (mk_tool_call(r->rt, &c, &res) != 0) {
			die(res != NULL && res->error ? res->error
			                              : "API call");
		}
		r->lat[i] = tp_now_ns() - t0;
		mk_result_free(&res);
	}
	return (NULL);
}

static size_t
sink(char *p, size_t size, size_t n, void *arg)
{
	return (size * n);
}

static void *
http_worker(void *arg)
{
	run               *r = arg;
	CURL              *e = curl_easy_init();
	struct curl_slist *h =
	        curl_slist_append(NULL, "Content-Type: application/json");
	int i;

	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(
	        e, CURLOPT_POSTFIELDS,
	        "{\"client\": \"b\", \"tool\": \"echo\", \"arguments\": {}}");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
	while ((i = take(r)) >= 0) {
		long    st = 0;
		int64_t t0 = tp_now_ns();
		if (curl_easy_perform(e) != CURLE_OK ||
		    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st) !=
		            CURLE_OK ||
		    st != 200) {
			die("HTTP call");
		}
		r->lat[i] = tp_now_ns() - t0;
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return (NULL);
}

/* The session id an answer's headers name (arg: its buffer). */
static size_t
session_of(char *p, size_t size, size_t n, void *arg)
{
	char  *sid = arg;
	size_t len = size * n;

	if (len > 15 && strncasecmp(p, "Mcp-Session-Id:", 15) == 0) {
		snprintf(sid, 80, "%.*s", (int)strcspn(p + 16, "\r\n"),
		         p + 16);
	}
	return (len);
}

/* One POST of body on e; dies unless 200. */
static void
post(CURL *e, const char *body)
{
	long st = 0;

	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(e) != CURLE_OK ||
	    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st) != CURLE_OK ||
	    st != 200) {
		die("/mcp call");
	}
}

/* Opens a session on the gateway at url with e (its headers h): sid. */
static struct curl_slist *
gw_open(CURL *e, const char *url, struct curl_slist *h, char sid[80])
{
	char line[128];

	h = curl_slist_append(h,
	                      "Accept: application/json, text/event-stream");
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, session_of);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, sid);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
	sid[0] = '\0';
	post(e,
	     "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"bench\", \"version\": \"1\"}}}");
	if (sid[0] == '\0') {
		die("/mcp gave no session");
	}
	snprintf(line, sizeof(line), "Mcp-Session-Id: %s", sid);
	h = curl_slist_append(h, line);
	h = curl_slist_append(h, "MCP-Protocol-Version: 2025-11-25");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, NULL);
	return (h);
}

static void *
mcp_worker(void *arg)
{
	run               *r = arg;
	CURL              *e = curl_easy_init();
	char               sid[80];
	struct curl_slist *h = gw_open(
	        e, r->url,
	        curl_slist_append(NULL, "Content-Type: application/json"),
	        sid);
	int i;

	while ((i = take(r)) >= 0) {
		int64_t t0 = tp_now_ns();
		post(e,
		     "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\", \"params\": {\"name\": \"b-echo\", \"arguments\": {}}}");
		r->lat[i] = tp_now_ns() - t0;
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return (NULL);
}

/* N calls by conc threads of fn; the calling thread's CPU is not the
 * cost here, so cpu_us is left out of the table. */
static stats
threads(void *(*fn)(void *), mk_runtime *rt, const char *url, int conc)
{
	run        r = {.rt = rt, .url = url};
	pthread_t *t = calloc((size_t)conc, sizeof(*t));
	int64_t    t0;

	if (t == NULL || (r.lat = calloc((size_t)N, sizeof(*r.lat))) == NULL) {
		die("out of memory");
	}
	pthread_mutex_init(&r.mtx, NULL);
	t0 = tp_now_ns();
	for (int k = 0; k < conc; k++) {
		pthread_create(&t[k], NULL, fn, &r);
	}
	for (int k = 0; k < conc; k++) {
		pthread_join(t[k], NULL);
	}
	cpu0      = thread_cpu_ns();
	stats out = summarize(r.lat, N, t0);
	pthread_mutex_destroy(&r.mtx);
	free(r.lat);
	free(t);
	return (out);
}

static void
row(const char *what, stats s, stats base)
{
	printf("  %-34s %9.0f %9.1f %9.1f %7.2f\n", what, s.calls_s, s.p50,
	       s.p99, s.calls_s / base.calls_s);
}

/* The TS SDK's client (sdkbench.mjs): N calls of tool at url, conc
 * clients side by side. */
static stats
sdk(const char *url, const char *tool, int conc)
{
	char  cmd[1024], line[256];
	stats s = {0};
	FILE *p;

	snprintf(
	        cmd, sizeof(cmd),
	        "cd '%s' && NODE_NO_WARNINGS=1 node sdkbench.mjs '%s' %s %d %d",
	        getenv("MK_PEERS_DIR"), url, tool, N, conc);
	if ((p = popen(cmd, "r")) == NULL ||
	    fgets(line, sizeof(line), p) == NULL ||
	    sscanf(line, "{\"calls_s\":%lf,\"p50_us\":%lf,\"p99_us\":%lf",
	           &s.calls_s, &s.p50, &s.p99) != 3) {
		die("sdkbench.mjs");
	}
	if (pclose(p) != 0) {
		die("sdkbench.mjs failed");
	}
	return (s);
}

static size_t
discard(char *b, size_t size, size_t n, void *arg)
{
	return (size * n);
}

/* The daemon answers at once and connects its clients behind: measure
 * once /readyz says the boot is over (polled: no event reaches a
 * process outside, with a deadline). */
static void
wait_ready(int port)
{
	char  url[64];
	CURL *e      = curl_easy_init();
	long  status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	for (int i = 0; i < 1500 && status != 200; i++) {
		if (curl_easy_perform(e) == CURLE_OK) {
			curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		}
		if (status != 200) {
			usleep(20000);
		}
	}
	curl_easy_cleanup(e);
	if (status != 200) {
		die("the daemon never became ready");
	}
}

static void
usage(void)
{
	fprintf(stderr,
	        "usage: gateway_bench [-n calls, >= 100] "
	        "[-c widths, e.g. 1,16,64]\n");
	exit(2);
}

/* -n calls and -c widths ("1,16"): the same binary runs bigger on a
 * larger machine. */
static int
args(int argc, char **argv, int *widths)
{
	int nw = 0, o;

	while ((o = getopt(argc, argv, "n:c:")) != -1) {
		if (o == 'n' && (N = atoi(optarg)) < 100) {
			usage();
		} else if (o == 'c' &&
		           (nw = numbers_of(optarg, widths, WIDTHS_MAX)) < 1) {
			usage();
		} else if (o != 'n' && o != 'c') {
			usage();
		}
	}
	if (nw == 0) {
		widths[nw++] = 1;
		widths[nw++] = CONC;
	}
	return (nw);
}

/* The same load driver (drive.c) straight to the upstream and through
 * the daemon's tool/execute and its gateway's tools/call (one session),
 * at each width: the daemon's ratio to the raw floor, and the
 * sequential p50 it adds. */
static void
driven(int up_port, int d_port, const int *widths, int nw)
{
	CURL              *e = curl_easy_init();
	char               sid[80], url[64], hdrs[256];
	struct curl_slist *h;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", d_port);
	h = gw_open(e, url,
	            curl_slist_append(NULL, "Content-Type: application/json"),
	            sid);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	snprintf(hdrs, sizeof(hdrs),
	         "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n"
	         "Accept: application/json, text/event-stream\r\n",
	         sid);
	drive_req up = {
	        .port    = up_port,
	        .path    = "/mcp",
	        .headers = "Mcp-Session-Id: bench\r\n",
	        .body    = "{\"jsonrpc\": \"2.0\", \"id\":7, \"method\": \"tools/call\", \"params\": {\"name\": \"echo\", \"arguments\": {}}}",
	        .n       = N};
	drive_req dm = {
	        .port = d_port,
	        .path = "/api/mcp/tool/execute",
	        .body = "{\"client\": \"b\", \"tool\": \"echo\", \"arguments\": {}}",
	        .n = N};
	drive_req gw = {
	        .port    = d_port,
	        .path    = "/mcp",
	        .headers = hdrs,
	        .body    = "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {\"name\": \"b-echo\", \"arguments\": {}}}",
	        .n       = N};
	double p50_gap = -1, gw_gap = -1;

	printf("\none load driver (bench/drive.c: keep-alive connections, one "
	       "thread, epoll) straight to the upstream and through the "
	       "daemon\n  %-34s %5s %9s %9s %9s %7s\n",
	       "", "conns", "calls/s", "p50 us", "p99 us", "ratio");
	for (int i = 0; i < nw; i++) {
		up.conns = dm.conns = gw.conns = widths[i];
		stats raw                      = drive(&up);
		stats dae                      = drive(&dm);
		stats mcp                      = drive(&gw);
		printf("  %-34s %5d %9.0f %9.1f %9.1f %7.2f\n",
		       "upstream, raw (the floor)", widths[i], raw.calls_s,
		       raw.p50, raw.p99, 1.0);
		printf("  %-34s %5d %9.0f %9.1f %9.1f %7.2f\n",
		       "daemon POST /api/mcp/tool/execute", widths[i],
		       dae.calls_s, dae.p50, dae.p99,
		       dae.calls_s / raw.calls_s);
		printf("  %-34s %5d %9.0f %9.1f %9.1f %7.2f\n",
		       "daemon POST /mcp tools/call", widths[i], mcp.calls_s,
		       mcp.p50, mcp.p99, mcp.calls_s / raw.calls_s);
		if (widths[i] == 1) {
			p50_gap = dae.p50 - raw.p50;
			gw_gap  = mcp.p50 - raw.p50;
		}
	}
	if (p50_gap >= 0) {
		printf("  the daemon's sequential p50 minus the raw p50: %.0f us (tool/execute), %.0f us (/mcp)\n",
		       p50_gap, gw_gap);
	}
}

int
main(int argc, char **argv)
{
	char        url[128], cfg[512], path[] = "/tmp/mk-sbench-XXXXXX";
	char        cpath[600], listen[64], exec_url[128], *err = NULL;
	int         port;
	mk_runtime *rt;
	mk_options  o;
	peer        d = {0};
	FILE       *f;
	int         widths[WIDTHS_MAX], nw = args(argc, argv, widths);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (getenv("MK_MCPKEEP") == NULL || getenv("MK_PEERS_DIR") == NULL ||
	    mkdtemp(path) == NULL) {
		die("needs MK_MCPKEEP (the built mcpkeep), MK_PEERS_DIR and "
		    "/tmp");
	}
	if ((port = fastmcp_start()) < 0) {
		die("fastmcp did not start");
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"b\", \"connection_type\": \"http\", \"connection_string\": \"%s\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
	        url);

	/* the embedding API */
	mk_options_init(&o, sizeof(o));
	o.log_level = MK_LOG_ERROR;
	if (mk_runtime_open(&rt, &o) != 0 ||
	    mk_client_add(rt, cfg, NULL, &err) != 0) {
		die(err != NULL ? err : "runtime");
	}

	/* the daemon, with the same client */
	snprintf(cpath, sizeof(cpath), "%s/serve.json", path);
	if ((f = fopen(cpath, "w")) == NULL) {
		die("config file");
	}
	fprintf(f, "{\"mcp\": {\"client_configs\": [%s]}}", cfg);
	fclose(f);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", peer_free_port());
	char        store[600];
	const char *env[] = {"MCPKEEP_LOG=error", NULL};
	snprintf(store, sizeof(store), "%s/store.db", path);
	const char *cmd[] = {getenv("MK_MCPKEEP"),
	                     "serve",
	                     "-c",
	                     cpath,
	                     "--listen",
	                     listen,
	                     "--store",
	                     store,
	                     NULL};
	if (peer_start(&d, cmd, env, "serving http://127.0.0.1:([0-9]+)",
	               30000) != 0) {
		die("the daemon did not start");
	}
	wait_ready(d.port);
	snprintf(exec_url, sizeof(exec_url),
	         "http://127.0.0.1:%d/api/mcp/tool/execute", d.port);
	char mcp_url[128];
	snprintf(mcp_url, sizeof(mcp_url), "http://127.0.0.1:%d/mcp", d.port);

	printf("mcpkeep gateway benchmark: one tools/call on fastmcp, %d calls a run (ratio = calls/s vs the raw transport, same width; SDK rows: vs the SDK on the upstream)\n",
	       N);
	for (int w = 0; w < nw; w++) {
		int conc = widths[w];
		/* a warm-up of each, then the measured runs */
		(void)threads(api_worker, rt, NULL, conc);
		(void)threads(http_worker, NULL, exec_url, conc);
		(void)threads(mcp_worker, NULL, mcp_url, conc);
		stats raw  = mk_run(url, N, conc);
		stats api  = threads(api_worker, rt, NULL, conc);
		stats http = threads(http_worker, NULL, exec_url, conc);
		stats gw   = threads(mcp_worker, NULL, mcp_url, conc);
		printf("\n%d-way%s\n  %-34s %9s %9s %9s %7s\n", conc,
		       conc == 1 ? " (sequential)" : "", "", "calls/s",
		       "p50 us", "p99 us", "ratio");
		row("raw transport (MCP client alone)", raw, raw);
		row("embedding API (mk_tool_call)", api, raw);
		row("HTTP through the daemon", http, raw);
		row("/mcp tools/call (the gateway)", gw, raw);
		stats sdk_up = sdk(url, "echo", conc);
		stats sdk_gw = sdk(mcp_url, "b-echo", conc);
		row("TS SDK client on the upstream", sdk_up, sdk_up);
		row("TS SDK client on /mcp", sdk_gw, sdk_up);
		printf("  /mcp vs tool/execute: %.2f\n",
		       gw.calls_s / http.calls_s);
	}
	driven(port, d.port, widths, nw);
	peer_stop(&d);
	mk_runtime_close(&rt);
	snprintf(cpath, sizeof(cpath), "rm -rf %s", path);
	if (system(cpath) != 0) {
		die("cleanup");
	}
	curl_global_cleanup();
	return (0);
}
