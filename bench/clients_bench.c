/*
 * clients_bench.c - the runtime at scale, in one run:
 *
 *   clients per process  1, 100, 1,000 and 5,000 sticky HTTP clients (or
 *                        the counts given as arguments) against one
 *                        fastmcp server (in a child process, so its
 *                        sockets do not count against ours): boot time,
 *                        RSS and file descriptors per client, health-tick
 *                        lateness p50/p99 at a short interval (N/500 s,
 *                        at least 1 s: what 2 cores sustain), CPU while
 *                        ticking, and a tool call's p50 and CPU with
 *                        them all idle beside it; the largest count
 *                        left idle: fds once their loops rested
 *   state stream         transition -> subscriber latency p50/p99
 *   tool calls           the full API (mk_tool_call) vs the MCP client
 *                        alone vs plain libcurl, sequential and 16-way
 *
 * Goals (issue 4): <= 100 KiB RSS and <= 3 fds per idle sticky client;
 * tick lateness p99 <= 50 ms at 5,000 clients; full-API calls >= 0.50 of
 * plain libcurl's calls/s at 16-way.  This machine's fd limit is 20,000.
 */
#include <dirent.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calls.h"
#include "fastmcp.h"
#include "mcpkeep.h"

static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	        (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
}

static mk_runtime *
open_rt(const char *url)
{
	mk_runtime *rt;
	mk_options  o;

	mk_options_init(&o, sizeof(o));
	o.log_level  = MK_LOG_ERROR;
	o.stream_url = url;
	if (mk_runtime_open(&rt, &o) != 0) {
		die("runtime did not open");
	}
	return (rt);
}

/* What one sequential tool call costs with n idle clients in the process
 * (the goal: no more than with one): its p50, and the process's CPU per
 * call less what the ticks took meanwhile (tick_cpu: CPU seconds per
 * second). */
static void
call_cost(mk_runtime *rt, int n, double tick_cpu)
{
	enum { CALLS = 2000 };
	static int64_t lat[CALLS];
	mk_call        c  = {.size      = sizeof(mk_call),
	                     .client    = "c0",
	                     .tool      = "echo",
	                     .arguments = "{}"};
	double         c0 = cpu_s();
	int64_t        t0 = tp_now_ns();

	for (int i = 0; i < CALLS; i++) {
		mk_result *res = NULL;
		int64_t    t   = tp_now_ns();
		if (mk_tool_call(rt, &c, &res) != 0) {
			die("mk_tool_call failed");
		}
		lat[i] = tp_now_ns() - t;
		mk_result_free(&res);
	}
	double wall = (tp_now_ns() - t0) / 1e9, cpu = cpu_s() - c0;
	cpu0     = thread_cpu_ns();
	stats st = summarize(lat, CALLS, t0);
	printf("  %5d clients: a tool call on one of them: p50 %.1f us, p99 %.1f us, %.1f us of process CPU per call (the ticks' taken out)\n",
	       n, st.p50, st.p99, (cpu - tick_cpu * wall) * 1e6 / CALLS);
}

/* Loads n sticky clients c0..c(n-1) of fastmcp at port into rt, each
 * checked every interval_s; dies when the load fails. */
static void
load_clients(mk_runtime *rt, int n, int port, int interval_s)
{
	char url[64], more[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	snprintf(more, sizeof(more), ", \"tool_sync_interval\": \"%ds\"",
	         interval_s);
	load_sticky(rt, "c", n, url, more);
}

/* n sticky clients left idle (a check every 5 minutes): their fds after
 * the boot, and once their loops rested (30 s with nothing in them: curl's
 * multi handle, its wake-up pair and the idle connection freed); then
 * the first call on one, which connects again. */
static void
idle(int n, int port)
{
	char        url[64];
	mk_runtime *rt;
	int         fd0  = count_fds(), fd1, fd2;
	long        rss0 = rss_kib(), rss2;

	snprintf(url, sizeof(url), "inproc://clients-bench-idle-%d", n);
	rt = open_rt(url);
	load_clients(rt, n, port, 300);
	fd1 = count_fds();
	/* wait for the rests (polled, with a deadline: nothing announces
	 * them) */
	int64_t deadline = tp_now_ns() + 60 * (int64_t)1000000000;
	while ((fd2 = count_fds()) - fd0 > n / 1000 &&
	       tp_now_ns() < deadline) {
		struct timespec ts = {0, 100000000};
		nanosleep(&ts, NULL);
	}
	rss2           = rss_kib();
	mk_call    c   = {.size      = sizeof(mk_call),
	                  .client    = "c0",
	                  .tool      = "echo",
	                  .arguments = "{}"};
	mk_result *res = NULL;
	int64_t    t0  = tp_now_ns();
	if (mk_tool_call(rt, &c, &res) != 0) {
		die("mk_tool_call after a rest failed");
	}
	mk_result_free(&res);
	printf("  %5d idle clients: %.2f fds per client after the boot, %.2f once rested; RSS %.1f KiB per client; the first call after a rest %.0f us\n",
	       n, (double)(fd1 - fd0) / n, (double)(fd2 - fd0) / n,
	       (double)(rss2 - rss0) / n, (tp_now_ns() - t0) / 1e3);
	t0 = tp_now_ns();
	mk_runtime_close(&rt);
	printf("  %5d idle clients: shutdown once rested %.2f s\n", n,
	       (tp_now_ns() - t0) / 1e9);
}

/* o's string key, or "-". */
static const char *
jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return (s != NULL ? s : "-");
}

/* The clients listed by filter (mk_clients_json), parsed, or NULL. */
static json_t *
clients_of(mk_runtime *rt, const char *filter)
{
	char   *text = NULL;
	json_t *v;

	(void)mk_clients_json(rt, filter, &text);
	v = text != NULL ? json_loads(text, 0, NULL) : NULL;
	mk_free(text);
	return (v);
}

/* How many of the n clients are healthy after the boot, and why the
 * first few others are not (their last_failure). */
static void
healthy_report(mk_runtime *rt, int n)
{
	json_t *v = clients_of(rt, "{\"state\": \"healthy\", \"limit\": 1}"),
	       *c;
	json_int_t healthy =
	        json_integer_value(json_object_get(v, "total_count"));
	size_t i;

	json_decref(v);
	printf("  %5d clients: %lld healthy after boot\n", n,
	       (long long)healthy);
	if (healthy == n) {
		return;
	}
	v = clients_of(rt, "{\"state\": \"unstable\", \"limit\": 3}");
	json_array_foreach(json_object_get(v, "clients"), i, c)
	{
		json_t *lf = json_object_get(c, "last_failure");
		printf("         %s: %s: %s\n", jstr(c, "name"),
		       jstr(lf, "stage"), jstr(lf, "message"));
	}
	json_decref(v);
}

static void
scale(int n, int port)
{
	char        url[64];
	mk_runtime *rt;
	mk_stats    st = MK_STATS_INIT;
	int         fd0, fd1;
	long        rss0, rss1;
	int64_t     t0;
	double      boot_s, c0, c1;
	/* a short interval this machine sustains: 500 checks/s at most */
	int interval_s = n / 500 > 1 ? n / 500 : 1;

	snprintf(url, sizeof(url), "inproc://clients-bench-%d", n);
	fd0  = count_fds();
	rss0 = rss_kib();
	t0   = tp_now_ns();
	rt   = open_rt(url);
	load_clients(rt, n, port, interval_s);
	boot_s = (tp_now_ns() - t0) / 1e9;
	fd1    = count_fds();
	rss1   = rss_kib();
	healthy_report(rt, n);
	/* ticks every interval_s per client, spread: watch 3 rounds */
	c0                 = cpu_s();
	struct timespec ts = {3 * interval_s, 0};
	nanosleep(&ts, NULL); /* a measurement window, not synchronisation */
	c1 = cpu_s();
	if (mk_runtime_stats(rt, &st, 10000) != 0) {
		die("stats");
	}
	printf("  %5d clients: boot %.2f s (%.0f clients/s), RSS %.1f KiB and %.2f fds per client\n",
	       n, boot_s, n / boot_s, (double)(rss1 - rss0) / n,
	       (double)(fd1 - fd0) / n);
	printf("  %5d clients: a check every %d s each: %llu ticks, lateness p50 <= %llu us, p99 <= %llu us; CPU %.0f%% of a core\n",
	       n, interval_s, (unsigned long long)st.ticks,
	       (unsigned long long)st.tick_late_p50_us,
	       (unsigned long long)st.tick_late_p99_us,
	       (c1 - c0) * 100 / (3 * interval_s));
	call_cost(rt, n, (c1 - c0) / (3 * interval_s));
	t0 = tp_now_ns();
	mk_runtime_close(&rt);
	printf("  %5d clients: shutdown %.2f s\n", n,
	       (tp_now_ns() - t0) / 1e9);
}

/* ---- state-stream latency ------------------------------------------------
 */

static void
stream_latency(int port)
{
	mk_runtime *rt = open_rt("inproc://clients-bench-stream");
	nng_socket  sub;
	char        cfg[256], *err = NULL;
	int64_t     lat[400];
	int         n = 0;

	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"lat\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true}",
	        port);
	if (mk_client_add(rt, cfg, NULL, &err) != 0 ||
	    nng_sub0_open(&sub) != 0 ||
	    nng_socket_set(sub, NNG_OPT_SUB_SUBSCRIBE, "state", 5) != 0 ||
	    nng_dial(sub, mk_stream_url(rt), NULL, 0) != 0) {
		die("stream latency setup");
	}
	for (int i = 0; i < 200; i++) {
		for (int k = 0; k < 2; k++) {
			nng_msg *m;
			int64_t  t0 = tp_now_ns();
			if ((k == 0 ? mk_client_disable(rt, "lat", NULL)
			            : mk_client_enable(rt, "lat", NULL)) !=
			            0 ||
			    nng_recvmsg(sub, &m, 0) != 0) {
				die("stream latency");
			}
			lat[n++] = tp_now_ns() - t0;
			nng_msg_free(m);
		}
	}
	cpu0     = thread_cpu_ns();
	stats st = summarize(lat, n, tp_now_ns());
	printf("  operation -> subscriber (disable/enable, incl. the ask): p50 %.1f us, p99 %.1f us over %d transitions\n",
	       st.p50, st.p99, n);
	nng_close(sub);
	mk_runtime_close(&rt);
}

/* ---- tool calls through the full API ---------------------------------- */

typedef struct worker {
	mk_runtime *rt;
	int         n;
	int64_t    *lat;
} worker;

static void *
api_worker(void *arg)
{
	worker *w = arg;
	mk_call c = {.size      = sizeof(mk_call),
	             .client    = "api",
	             .tool      = "echo",
	             .arguments = "{\"message\": \"hi\"}"};

	for (int i = 0; i < w->n; i++) {
		mk_result *res = NULL;
		int64_t    t0  = tp_now_ns();
		if (mk_tool_call(w->rt, &c, &res) != 0) {
			die("mk_tool_call failed");
		}
		w->lat[i] = tp_now_ns() - t0;
		mk_result_free(&res);
	}
	return (NULL);
}

static stats
api_run(mk_runtime *rt, int n, int conc)
{
	pthread_t t[CONC];
	worker    w[CONC];
	int64_t  *lat = calloc((size_t)n, sizeof(*lat));
	int64_t   t0  = tp_now_ns();

	cpu0 = thread_cpu_ns();
	for (int i = 0; i < conc; i++) {
		w[i] = (worker) {rt, n / conc, lat + i * (n / conc)};
		pthread_create(&t[i], NULL, api_worker, &w[i]);
	}
	for (int i = 0; i < conc; i++) {
		pthread_join(t[i], NULL);
	}
	stats st  = summarize(lat, (n / conc) * conc, t0);
	st.cpu_us = -1; /* the work is on runtime threads */
	free(lat);
	return (st);
}

static void
row(const char *what, stats s, stats base)
{
	printf("  %-34s %10.0f %9.1f %9.1f %7.2f\n", what, s.calls_s, s.p50,
	       s.p99, s.calls_s / base.calls_s);
}

static void
calls(int port)
{
	mk_runtime *rt = open_rt("inproc://clients-bench-calls");
	char        url[64], cfg[256], *err = NULL;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", port);
	snprintf(
	        cfg, sizeof(cfg),
	        "{\"name\": \"api\", \"connection_type\": \"http\", \"connection_string\": \"%s\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}",
	        url);
	if (mk_client_add(rt, cfg, NULL, &err) != 0) {
		die("add api client");
	}
	stats cs = raw_seq(url, 10000);
	stats ts = mk_run(url, 10000, 1);
	stats as = api_run(rt, 10000, 1);
	stats cm = raw_multi(url, 20000);
	stats tm = mk_run(url, 20000, CONC);
	stats am = api_run(rt, 20000, CONC);

	printf("  %-34s %10s %9s %9s %7s\n", "", "calls/s", "p50 us", "p99 us",
	       "ratio");
	row("libcurl keep-alive, sequential", cs, cs);
	row("MCP client alone, sequential", ts, cs);
	row("full API (mk_tool_call), sequential", as, cs);
	row("libcurl multi, 16-way", cm, cm);
	row("MCP client alone, 16-way", tm, cm);
	row("full API, 16 threads", am, cm);
	mk_runtime_close(&rt);
}

int
main(int argc, char **argv)
{
	pid_t pid;
	int   port;

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if ((port = fastmcp_child(&pid)) < 0) {
		die("fastmcp child did not start");
	}
	printf("mcpkeep clients benchmark (one run; fastmcp server in a child process)\n\nclients per process\n");
	if (argc > 1 && strcmp(argv[1], "calls") == 0) {
		calls(port); /* just the tool-call table */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return (0);
	}
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			scale(atoi(argv[i]), port);
		}
		idle(atoi(argv[argc - 1]), port);
	} else {
		scale(1, port);
		scale(100, port);
		scale(1000, port);
		scale(5000, port);
		idle(5000, port);
	}
	printf("\nstate stream\n");
	stream_latency(port);
	printf("\ntool calls against fastmcp\n");
	calls(port);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	curl_global_cleanup();
	return (0);
}
