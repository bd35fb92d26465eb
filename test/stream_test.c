/*
 * stream_test.c - Streamable HTTP as 2025-11-25 has it, against
 * test/peers/streams.mjs (the SDK's server with an event store): a
 * response stream the server closes early is resumed with GET and
 * Last-Event-ID after the server's retry: time, and is not a cancel;
 * progress goes on across the break, and does not move the deadline;
 * the standalone GET stream carries the server's log messages and
 * the server's own notifications and is opened again when it ends; a
 * server without one (405) is not asked again; MCP-Protocol-Version on
 * every request after initialize; DELETE at the end.
 *
 * Waits are the loop run until a callback sets a flag, or the peer's
 * counters polled with a deadline (another process: nothing to wait on).
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "testutil.h"
#include "tputil.h"

/* Starts streams.mjs with the given retry: time and GET mode ("" the
 * peer's default). */
static void
start_streams(peer *p, int retry_ms, const char *get)
{
	char        js[512], retry[16];
	const char *argv[] = {"node", js,   "--port", "0", "--retry",
	                      retry,  NULL, NULL,     NULL};

	snprintf(js, sizeof(js), "%s/streams.mjs", peer_dir());
	snprintf(retry, sizeof(retry), "%d", retry_ms);
	if (get[0] != '\0') {
		argv[6] = "--get";
		argv[7] = get;
	}
	CHECK_EQ(peer_start(p, argv, NULL, "listening on port ([0-9]+)",
	                    TP_WAIT_MS),
	         0);
}

static void
open_on(client *c, const peer *p, bool listen)
{
	static char url[128];
	mcp_config cfg = {.type = MCP_CONN_HTTP, .url = url, .listen = listen};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/mcp", p->port);
	CHECK_EQ(open_client(c, &cfg), 0);
}

/* The peer's log of requests to /mcp. */
static json_t *
requests(const peer *p)
{
	json_t *j = admin_json(p->port, "/admin/requests", NULL);
	json_t *r = json_incref(json_object_get(j, "requests"));

	json_decref(j);
	CHECK(json_is_array(r));
	return (r);
}

/* How many requests of the log are an HTTP method, with a
 * Last-Event-ID or without (with_id < 0: either). */
static int
count_http(json_t *log, const char *method, int with_id)
{
	size_t  i;
	json_t *r;
	int     n = 0;

	json_array_foreach(log, i, r)
	{
		bool id = json_is_string(json_object_get(r, "last_event_id"));
		if (strcmp(json_string_value(json_object_get(r, "method")),
		           method) == 0 &&
		    (with_id < 0 || id == (with_id > 0))) {
			n++;
		}
	}
	return (n);
}

/* Runs c's loop (what it sends goes out) until the peer's counter
 * reaches min (bounded). */
static void
run_until_counter(client *c, const peer *p, const char *field, long min)
{
	int64_t end = now_ms() + TP_WAIT_MS;

	while (admin(p->port, "/admin/counters", NULL, field) < min &&
	       now_ms() < end) {
		int none = 0;
		(void)tp_loop_run(c->l, &none, 50);
	}
	CHECK(admin(p->port, "/admin/counters", NULL, field) >= min);
}

/* Runs c's loop until *count (one of c's counters) reaches n (bounded). */
static void
wait_count(client *c, const int *count, int n)
{
	int64_t end = now_ms() + TP_WAIT_MS;

	while (*count < n && now_ms() < end) {
		int none = 0;
		(void)tp_loop_run(c->l, &none, 50);
	}
	CHECK(*count >= n);
}

static void
resumed_after_drop(void)
{
	peer    p = {0};
	client  c;
	outcome o;
	int64_t t0;
	json_t *log, *r;
	size_t  i;

	start_streams(&p, 700, "");
	open_on(&c, &p, false);
	t0 = now_ms();
	call(&c, "drop_then_answer", json_pack("{s:i}", "ms", 100), 0, &o);
	CHECK(!o.failed);
	CHECK(strcmp(first_text(o.result), "answered after drop") == 0);
	/* the resumption waited the server's retry: (MUST) */
	CHECK(now_ms() - t0 >= 700);
	outcome_fini(&o);
	log = requests(&p);
	CHECK_EQ(count_http(log, "GET", 1), 1);
	CHECK_EQ(count_http(log, "GET", 0), 0); /* not listening */
	json_array_foreach(log, i, r)
	{
		const char *v = json_string_value(
		        json_object_get(r, "protocol_version"));
		const char *rpc = json_string_value(json_object_get(r, "rpc"));
		if (i == 0) { /* the 2026-07-28 request first: refused */
			CHECK(strcmp(rpc, "server/discover") == 0);
			CHECK(strcmp(v, "2026-07-28") == 0);
			CHECK_EQ(json_integer_value(
			                 json_object_get(r, "status")),
			         400);
			continue;
		}
		if (i == 1) { /* so the older era */
			CHECK(strcmp(rpc, "initialize") == 0 && v == NULL);
			continue;
		}
		/* every request after initialize names the version */
		CHECK(v != NULL && strcmp(v, "2025-11-25") == 0);
	}
	json_decref(log);
	/* a dropped stream is not a cancel */
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "cancelled"), 0);
	close_client(&c);
	wait_counter(p.port, "deletes", 1);
	peer_stop(&p);
}

static void
progress_across_drop(void)
{
	peer    p = {0};
	client  c;
	outcome o;

	start_streams(&p, 100, "");
	open_on(&c, &p, false);
	call(&c, "progress_drop",
	     json_pack("{s:i, s:i}", "steps", 4, "ms", 400), 0, &o);
	CHECK(!o.failed);
	CHECK(strcmp(first_text(o.result), "done") == 0);
	CHECK_EQ(o.progress, 4); /* two before the break, two after */
	CHECK(admin(p.port, "/admin/counters", NULL, "resumes") >= 1);
	outcome_fini(&o);
	close_client(&c);
	peer_stop(&p);
}

/* Progress does not move the deadline: a request ends at its own. */
static void
hard_deadline(void)
{
	peer    p = {0};
	client  c;
	outcome o;

	start_streams(&p, 100, "");
	open_on(&c, &p, false);
	call(&c, "progress_drop",
	     json_pack("{s:i, s:i}", "steps", 10, "ms", 4000), 1000, &o);
	CHECK(o.failed && o.err.kind == MCP_E_TIMEOUT);
	CHECK(o.progress >= 1); /* it was progressing */
	close_client(&c);
	peer_stop(&p);
}

/* A stream that never comes back: the request ends at its deadline, and
 * only then is it cancelled, once. */
static void
timeout_cancels_once(void)
{
	peer    p = {0};
	client  c;
	outcome o;
	json_t *ids;

	start_streams(&p, 100, "");
	open_on(&c, &p, false);
	call(&c, "drop_no_resume", NULL, 1500, &o);
	CHECK(o.failed && o.err.kind == MCP_E_TIMEOUT);
	run_until_counter(&c, &p, "cancelled", 1); /* the cancel goes out */
	ids = admin_json(p.port, "/admin/counters", NULL);
	CHECK_EQ(json_array_size(json_object_get(ids, "cancelled_ids")), 1);
	json_decref(ids);
	close_client(&c);
	peer_stop(&p);
}

static void
standalone_stream(void)
{
	peer   p = {0};
	client c;

	start_streams(&p, 100, "");
	open_on(&c, &p, true);
	run_until_counter(&c, &p, "get_streams", 1);
	(void)admin(p.port, "/admin/list-changed", "{}", NULL);
	wait_count(&c, &c.changed, 1);
	/* the server ends the stream: it is opened again, resumed */
	(void)admin(p.port, "/admin/close-get", "{}", NULL);
	run_until_counter(&c, &p, "resumes", 1);
	(void)admin(p.port, "/admin/list-changed", "{}", NULL);
	wait_count(&c, &c.changed, 2);
	/* the server's log messages come on it too */
	(void)admin(
	        p.port, "/admin/log-message",
	        "{\"level\": \"warning\", \"logger\": \"disk\", \"data\": \"almost full\"}",
	        NULL);
	wait_count(&c, &c.logs, 1);
	CHECK(strcmp(c.log, "warning disk: almost full") == 0);
	close_client(&c);
	wait_counter(p.port, "deletes", 1);
	peer_stop(&p);
}

/* 405: the server offers no standalone stream; it is not asked again
 * (the window is longer than the first back-off of a failed stream). */
static void
no_standalone_stream(void)
{
	peer    p = {0};
	client  c;
	outcome o;
	json_t *log;
	int     none = 0;

	start_streams(&p, 100, "405");
	open_on(&c, &p, true);
	call(&c, "echo", json_pack("{s:s}", "message", "x"), 0, &o);
	CHECK(!o.failed);
	outcome_fini(&o);
	(void)tp_loop_run(c.l, &none, 2500);
	log = requests(&p);
	CHECK_EQ(count_http(log, "GET", -1), 1);
	json_decref(log);
	CHECK_EQ(admin(p.port, "/admin/counters", NULL, "get_streams"), 0);
	close_client(&c);
	peer_stop(&p);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	RUN(resumed_after_drop);
	RUN(progress_across_drop);
	RUN(hard_deadline);
	RUN(timeout_cancels_once);
	RUN(standalone_stream);
	RUN(no_standalone_stream);
	curl_global_cleanup();
	return (0);
}
