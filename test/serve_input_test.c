/*
 * serve_input_test.c - the daemon hands an MCP server's requests to a
 * person (server.inputs), against test/peers/streams.mjs: a tool call
 * that elicits waits while the request is on the state stream ("input",
 * "pending") and in GET /api/mcp/client/{id}/elicitations; POST
 * /api/mcp/client/{id}/elicitation/{request_id} answers it (the schema's
 * defaults filled in) and the call goes on; {} declines a sampling; the
 * endpoints want the admin token; `mcpkeep watch` shows the request
 * (from /api/events); a person answers on the status page; a virtual
 * key's /api/events carries no request (key_stream).
 */
#include <nng/nng.h>
#include <nng/protocol/pubsub0/sub.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "peer.h"
#include "svutil.h"
#include "testutil.h"

#define TOKEN "input-admin-token-0123456789"

static peer up; /* streams.mjs */

/* A tool call through the daemon, on its own thread. */
typedef struct bg_call {
	pthread_t   th;
	const char *body;
	long        status;
	char       *out;
} bg_call;

static void *
bg_main(void *arg)
{
	bg_call *c = arg;

	c->out = http_try("POST", "/api/mcp/tool/execute", c->body, NULL,
	                  &c->status);
	return (NULL);
}

/* Waits on the stream for an "input" event of method in state (the
 * caller's to free). */
static mk_stream_event *
next_input(nng_socket s, const char *method, const char *state)
{
	for (;;) {
		nng_msg         *m;
		mk_stream_event *e;
		CHECK_EQ(nng_recvmsg(s, &m, 0), 0);
		CHECK_EQ(mk_stream_event_parse(nng_msg_body(m), nng_msg_len(m),
		                               &e),
		         0);
		nng_msg_free(m);
		if (strcmp(e->method, method) == 0 &&
		    strcmp(e->state, state) == 0) {
			return (e);
		}
		mk_stream_event_free(e);
	}
}

/* test/peers/inputpage.mjs answers the request waiting on the page. */
static void
on_page(void)
{
	peer        b = {0};
	char        js[512], shot[512];
	const char *argv[] = {"node", js, sv_base, TOKEN, shot, NULL};

	snprintf(js, sizeof(js), "%s/inputpage.mjs", peer_dir());
	snprintf(shot, sizeof(shot), "%s/input-page.png",
	         getenv("MK_ARTIFACTS") != NULL ? getenv("MK_ARTIFACTS")
	                                        : ".");
	unlink(shot);
	CHECK_EQ(peer_start(&b, argv, NULL, "inputpage ok ([0-9]+)", 120000),
	         0);
	CHECK(peer_wait_exit(&b, 30000));
	peer_stop(&b);
	CHECK(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0);
	CHECK(access(shot, F_OK) == 0);
	fprintf(stderr, "the page's screenshot: %s\n", shot);
}

static void
elicitation(void)
{
	peer        d = {0}, w = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=" TOKEN, NULL};
	int         sport = peer_free_port();
	char        config[1024], saddr[64], path[160], line[160];
	nng_socket  s;
	bg_call     c = {
	            .body = "{\"client\": \"asker\", \"tool\": \"elicit_form\", \"arguments\": {\"message\": \"Your name?\\u001b[2J\"}}"};
	mk_stream_event *e;

	snprintf(
	        config, sizeof(config),
	        "{\"server\": {\"stream\": [\"tcp://127.0.0.1:%d\"], \"inputs\": [\"elicitation\", \"sampling\"]}, \"mcp\": {\"client_configs\": [{\"name\": \"asker\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}]}}",
	        sport, up.port);
	serve(&d, "inputs.json", config, env);
	sv_admin = TOKEN;
	snprintf(saddr, sizeof(saddr), "tcp://127.0.0.1:%d", sport);
	long   st;
	char  *m0   = http("GET", "/metrics", NULL, NULL, &st);
	double subs = metric(m0, "mcpkeep_stream_subscribers");
	free(m0);
	CHECK(subs >= 0);
	CHECK_EQ(nng_sub0_open(&s), 0);
	CHECK_EQ(nng_socket_set(s, NNG_OPT_SUB_SUBSCRIBE, "input", 5), 0);
	CHECK_EQ(nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, WAIT_MS), 0);
	CHECK_EQ(nng_dial(s, saddr, NULL, NNG_FLAG_NONBLOCK), 0);
	/* the dial goes on in the background: the events come once the
	 * daemon counts this subscriber (a CI run once missed them all) */
	CHECK(metric_within("mcpkeep_stream_subscribers", subs + 1, 1e9));
	CHECK(state_within("asker", "healthy", WAIT_MS));
	/* a person at a terminal follows /api/events */
	const char *watch[] = {getenv("MK_MCPKEEP"),
	                       "watch",
	                       sv_base,
	                       "--token",
	                       TOKEN,
	                       "--count",
	                       "2",
	                       NULL};
	CHECK_EQ(peer_start(&w, watch, NULL,
	                    "connected to http://[0-9.]+:([0-9]+)/api/events",
	                    WAIT_MS),
	         0);

	CHECK_EQ(pthread_create(&c.th, NULL, bg_main, &c), 0);
	e = next_input(s, "elicitation/create", "pending");
	/* the server's text as it sent it (an escape sequence in it) */
	CHECK(strcmp(e->message, "Your name?\x1b[2J") == 0);
	expect("GET", "/api/mcp/client/asker/elicitations", NULL, NULL, 200,
	       e->request_id);
	expect("GET", "/api/mcp/client/asker/elicitations", NULL, "wrong", 401,
	       "admin token");
	snprintf(path, sizeof(path), "/api/mcp/client/asker/elicitation/%s",
	         e->request_id);
	expect("POST", path, "{\"action\": \"accept\"}", "wrong", 401,
	       "admin token");
	expect("POST", path, "{\"action\": \"perhaps\"}", NULL, 400,
	       "accept, decline or cancel");
	expect("POST", path,
	       "{\"action\": \"accept\", \"content\": {\"ok\": true}}", NULL,
	       200, NULL);
	mk_stream_event_free(next_input(s, "elicitation/create", "answered"));
	CHECK(peer_wait_exit(&w, WAIT_MS)); /* its two events came */
	peer_stop(&w);
	snprintf(line, sizeof(line),
	         "elicitation/create %s: pending  Your name? [2J",
	         e->request_id);
	/* the escape sequence never reached the terminal */
	CHECK(peer_said(&w, line) && !peer_said(&w, "\x1b"));
	snprintf(line, sizeof(line), "elicitation/create %s: answered",
	         e->request_id);
	CHECK(peer_said(&w, line));
	mk_stream_event_free(e);
	pthread_join(c.th, NULL);
	CHECK_EQ(c.status, 200);
	/* what the person sent, and the defaults of what they left out */
	CHECK(strstr(c.out, "accept") != NULL &&
	      strstr(c.out, "anon") != NULL);
	free(c.out);
	expect("POST", path, "{\"action\": \"accept\"}", NULL, 404,
	       "is waiting");

	/* {} declines: the server hears an error */
	c.body =
	        "{\"client\": \"asker\", \"tool\": \"sample\", \"arguments\": {\"prompt\": \"hi\"}}";
	CHECK_EQ(pthread_create(&c.th, NULL, bg_main, &c), 0);
	e = next_input(s, "sampling/createMessage", "pending");
	snprintf(path, sizeof(path), "/api/mcp/client/asker/elicitation/%s",
	         e->request_id);
	mk_stream_event_free(e);
	expect("POST", path, "{}", NULL, 200, NULL);
	pthread_join(c.th, NULL);
	CHECK_EQ(c.status, 200);
	CHECK(strstr(c.out, "declined") != NULL);
	free(c.out);

	/* a person answers on the status page, in a browser */
	c.body =
	        "{\"client\": \"asker\", \"tool\": \"elicit_form\", \"arguments\": {\"message\": \"Your name?\"}}";
	CHECK_EQ(pthread_create(&c.th, NULL, bg_main, &c), 0);
	mk_stream_event_free(next_input(s, "elicitation/create", "pending"));
	on_page();
	pthread_join(c.th, NULL);
	CHECK_EQ(c.status, 200);
	CHECK(strstr(c.out, "Ada") != NULL && strstr(c.out, "accept") != NULL);
	free(c.out);
	nng_close(s);
	sv_admin = NULL;
	peer_stop(&d);
	CHECK(!peer_said(&d, TOKEN));
}

/* A virtual key's /api/events carries no "input" events (an
 * elicitation's message is the admin's): the admin's stream has the
 * request, the key's the state events after it, and not the request. */
static void
key_stream(void)
{
	peer        d     = {0};
	const char *env[] = {"MCPKEEP_ADMIN_TOKEN=" TOKEN, NULL};
	char        config[1024], path[160], id[64], *seen = NULL;
	long        st;
	int         fa, fk;
	bg_call     c = {
	            .body = "{\"client\": \"asker\", \"tool\": \"elicit_form\", \"arguments\": {\"message\": \"the admins question\"}}"};

	snprintf(
	        config, sizeof(config),
	        "{\"server\": {\"inputs\": [\"elicitation\"], \"virtual_keys\": [{\"name\": \"ik\", \"value\": \"input-key-0123456789\", \"clients\": {\"asker\": [\"*\"]}}]}, \"mcp\": {\"client_configs\": [{\"name\": \"asker\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"needs_session_stickiness\": true, \"tools_to_execute\": [\"*\"]}]}}",
	        up.port);
	serve(&d, "keyinputs.json", config, env);
	sv_admin = TOKEN;
	CHECK(state_within("asker", "healthy", WAIT_MS));
	fa = sv_events("Authorization: Bearer " TOKEN, &st, NULL);
	CHECK_EQ(st, 200);
	fk = sv_events("X-MCP-Virtual-Key: input-key-0123456789", &st, NULL);
	CHECK_EQ(st, 200);
	CHECK_EQ(pthread_create(&c.th, NULL, bg_main, &c), 0);
	CHECK(sv_until(fa, "the admins question", WAIT_MS, &seen));
	char *rid = strstr(seen, "\"request_id\":\"");
	CHECK(rid != NULL);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(rid + 14, "\""),
	         rid + 14);
	free(seen);
	snprintf(path, sizeof(path), "/api/mcp/client/asker/elicitation/%s",
	         id);
	expect("POST", path, "{\"action\": \"decline\"}", NULL, 200, NULL);
	pthread_join(c.th, NULL);
	CHECK_EQ(c.status, 200);
	free(c.out);
	/* an event the key sees, after the request's */
	expect("POST", "/api/mcp/client/asker/disable", NULL, NULL, 200, NULL);
	CHECK(sv_until(fk, "\"state\":\"disabled\"", WAIT_MS, &seen));
	CHECK(strstr(seen, "event: input") == NULL);
	CHECK(strstr(seen, "the admins question") == NULL);
	free(seen);
	CHECK(sv_until(fa, "\"state\":\"disabled\"", WAIT_MS, NULL));
	close(fa);
	close(fk);
	sv_admin = NULL;
	peer_stop(&d);
}

int
main(int argc, char **argv)
{
	peer        mcp = {0};
	char        js[512];
	const char *av[] = {"node", js, "--port", "0", NULL};

	sv_begin(&mcp);
	snprintf(js, sizeof(js), "%s/streams.mjs", peer_dir());
	CHECK_EQ(peer_start(&up, av, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	RUN_IF(elicitation);
	RUN_IF(key_stream);
	peer_stop(&up);
	sv_end(&mcp);
	return (0);
}
