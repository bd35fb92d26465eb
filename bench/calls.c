/*
 * calls.c - tools/call loops shared by the benchmarks: a plain libcurl
 * keep-alive POST loop (sequential and a 16-way multi), and the MCP
 * client (transport/) alone (see calls.h).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"

#include "transport/mcp.h"

static const char call_json[] =
        "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"hi\"}}}";

int64_t
thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

int64_t cpu0; /* thread CPU at the start of a measurement */

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x < y ? -1 : x > y);
}

stats
summarize(int64_t *lat, int n, int64_t t0)
{
	stats s;

	s.calls_s = n / ((tp_now_ns() - t0) / 1e9);
	s.cpu_us  = (thread_cpu_ns() - cpu0) / 1e3 / n;
	qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
	s.p50 = lat[n / 2] / 1e3;
	s.p99 = lat[(int)(n * 0.99)] / 1e3;
	return (s);
}

void
die(const char *what)
{
	fprintf(stderr, "%s: %s\n", program_invocation_short_name, what);
	exit(1);
}

/* ---- plain libcurl -------------------------------------------------------
 */

static size_t
sink(char *b, size_t size, size_t n, void *arg)
{
	return (size * n);
}

static char session_id[256];

static size_t
grab_sid(char *b, size_t size, size_t n, void *arg)
{
	size_t len = size * n;

	if (len > 16 && strncasecmp(b, "mcp-session-id:", 15) == 0) {
		snprintf(session_id, sizeof(session_id), "%.*s",
		         (int)(len - 15), b + 15);
		session_id[strcspn(session_id, "\r\n")] = '\0';
		memmove(session_id, session_id + strspn(session_id, " "),
		        strlen(session_id) + 1);
	}
	return (len);
}

static CURL *
raw_easy(const char *url, struct curl_slist *h)
{
	CURL *e = curl_easy_init();

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	return (e);
}

/* initialize + initialized; returns the headers every call carries */
static struct curl_slist *
raw_session(const char *url)
{
	struct curl_slist *h = NULL;
	char               line[300];
	CURL              *e;

	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h,
	                      "Accept: application/json, text/event-stream");
	e = raw_easy(url, h);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, grab_sid);
	curl_easy_setopt(
	        e, CURLOPT_POSTFIELDS,
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" MCP_PROTOCOL_LATEST
	        "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"raw\",\"version\":\"1\"}}}");
	if (curl_easy_perform(e) != CURLE_OK || session_id[0] == '\0') {
		die("raw initialize failed");
	}
	snprintf(line, sizeof(line), "Mcp-Session-Id: %s", session_id);
	h = curl_slist_append(h, line);
	h = curl_slist_append(h, "MCP-Protocol-Version: " MCP_PROTOCOL_LATEST);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, NULL);
	curl_easy_setopt(
	        e, CURLOPT_POSTFIELDS,
	        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	curl_easy_perform(e);
	curl_easy_cleanup(e);
	return (h);
}

stats
raw_seq(const char *url, int n)
{
	struct curl_slist *h   = raw_session(url);
	CURL              *e   = raw_easy(url, h);
	int64_t           *lat = calloc((size_t)n, sizeof(*lat));
	int64_t            t0  = tp_now_ns();
	char               body[256];

	cpu0 = thread_cpu_ns();
	for (int i = 0; i < n; i++) {
		int64_t s = tp_now_ns();
		snprintf(body, sizeof(body), call_json, i + 2);
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
		if (curl_easy_perform(e) != CURLE_OK) {
			die("raw call failed");
		}
		lat[i] = tp_now_ns() - s;
	}
	stats st = summarize(lat, n, t0);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	free(lat);
	return (st);
}

stats
raw_multi(const char *url, int n)
{
	struct curl_slist *h = raw_session(url);
	CURLM             *m = curl_multi_init();
	CURL              *e[CONC];
	int64_t            start[CONC];
	int64_t           *lat    = calloc((size_t)n, sizeof(*lat));
	int                issued = 0, done = 0, running;
	int64_t            t0 = tp_now_ns();
	char               body[256];

	cpu0 = thread_cpu_ns();
	for (int i = 0; i < CONC; i++) {
		e[i] = raw_easy(url, h);
		curl_easy_setopt(e[i], CURLOPT_PRIVATE, (void *)(intptr_t)i);
		snprintf(body, sizeof(body), call_json, ++issued + 1);
		curl_easy_setopt(e[i], CURLOPT_COPYPOSTFIELDS, body);
		start[i] = tp_now_ns();
		curl_multi_add_handle(m, e[i]);
	}
	while (done < n) {
		CURLMsg *msg;
		int      left;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			intptr_t i;
			if (msg->data.result != CURLE_OK) {
				die("raw multi call failed");
			}
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
			                  &i);
			lat[done++] = tp_now_ns() - start[i];
			curl_multi_remove_handle(m, e[i]);
			if (issued < n) {
				snprintf(body, sizeof(body), call_json,
				         ++issued + 1);
				curl_easy_setopt(e[i], CURLOPT_COPYPOSTFIELDS,
				                 body);
				start[i] = tp_now_ns();
				curl_multi_add_handle(m, e[i]);
			}
		}
		if (done < n) {
			curl_multi_poll(m, NULL, 0, 1000, NULL);
		}
	}
	stats st = summarize(lat, n, t0);
	for (int i = 0; i < CONC; i++) {
		curl_easy_cleanup(e[i]);
	}
	curl_multi_cleanup(m);
	curl_slist_free_all(h);
	free(lat);
	return (st);
}

/* ---- through the MCP client --------------------------------------------- */

typedef struct run {
	mcp_session *s;
	int          n, issued, done, ready, failed;
	int64_t     *lat;
	int64_t     *start; /* per slot */
} run;

typedef struct slot {
	run *r;
	int  i;
} slot;

static void issue(run *r, slot *sl);

static void
on_done(void *arg, const mcp_error *err, json_t *res)
{
	slot *sl = arg;
	run  *r  = sl->r;

	if (err != NULL) {
		fprintf(stderr, "call failed: %s\n", err->message);
		r->failed = 1;
		r->done   = r->n;
		return;
	}
	r->lat[r->done++] = tp_now_ns() - r->start[sl->i];
	if (r->issued < r->n) {
		issue(r, sl);
	}
}

static void
issue(run *r, slot *sl)
{
	static json_t *args;

	if (args == NULL) {
		args = json_pack("{s:s}", "message", "hi");
	}
	r->start[sl->i] = tp_now_ns();
	r->issued++;
	if (mcp_call_tool(r->s, "echo", args, NULL, on_done, sl, NULL) != 0) {
		die("mcp_call_tool refused");
	}
}

static void
on_ready(void *arg, mcp_session *s, const mcp_error *err)
{
	run *r = arg;

	if (err != NULL) {
		die(err->message);
	}
	r->ready = 1;
}

stats
mk_run(const char *url, int n, int conc)
{
	tp_loop     *l;
	run          r     = {.n = n};
	mcp_config   cfg   = {.type = MCP_CONN_HTTP, .url = url};
	mcp_handlers h     = {.ready = on_ready, .arg = &r};
	slot        *sl    = calloc((size_t)conc, sizeof(*sl));
	int64_t     *start = calloc((size_t)conc, sizeof(*start));
	int64_t      t0;

	r.lat   = calloc((size_t)n, sizeof(*r.lat));
	r.start = start;
	if (sl == NULL || start == NULL || r.lat == NULL) {
		die("out of memory");
	}
	if (tp_loop_new(&l) != 0 || mcp_session_open(&r.s, l, &cfg, &h) != 0 ||
	    tp_loop_run(l, &r.ready, 30000) != 0) {
		die("session did not open");
	}
	t0   = tp_now_ns();
	cpu0 = thread_cpu_ns();
	for (int i = 0; i < conc; i++) {
		sl[i] = (slot) {&r, i};
		issue(&r, &sl[i]);
	}
	while (r.done < n) {
		tp_loop_wait(l, NULL, 0, 1000);
	}
	if (r.failed) {
		die("a call failed");
	}
	stats st = summarize(r.lat, n, t0);
	mcp_session_free(&r.s);
	tp_loop_free(&l);
	free(r.lat);
	free(start);
	free(sl);
	return (st);
}

int
numbers_of(const char *s, int *out, int max)
{
	int   n = 0;
	char *end;

	do {
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > 1000000 || n == max ||
		    (*end != ',' && *end != '\0')) {
			return (-1);
		}
		out[n++] = (int)v;
		s        = end + 1;
	} while (*end != '\0');
	return (n);
}

void
load_sticky(mk_runtime *rt, const char *prefix, int n, const char *url,
            const char *more)
{
	size_t cap = (size_t)n * (strlen(url) + strlen(more) + 200) + 64;
	size_t len = 0;
	char  *cfg = malloc(cap), *err = NULL;

	if (cfg == NULL) {
		die("out of memory");
	}
	len += (size_t)snprintf(cfg, cap, "{\"mcp\": {\"client_configs\": [");
	for (int i = 0; i < n; i++) {
		len += (size_t)snprintf(
		        cfg + len, cap - len,
		        "%s{\"name\": \"%s%d\", \"connection_type\": \"http\", \"connection_string\": \"%s\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]%s}",
		        i ? ", " : "", prefix, i, url, more);
	}
	snprintf(cfg + len, cap - len, "]}}");
	if (mk_runtime_load(rt, cfg, &err) != 0) {
		fprintf(stderr, "load: %s\n", err != NULL ? err : "?");
		die("the clients did not load");
	}
	free(cfg);
}

int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int  n = 0;

	while (d != NULL && readdir(d) != NULL) {
		n++;
	}
	if (d != NULL) {
		closedir(d);
	}
	return (n);
}

long
rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long  size, res = 0;

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &size, &res) != 2) {
			res = 0;
		}
		fclose(f);
	}
	return (res * (sysconf(_SC_PAGESIZE) / 1024));
}
