/*
 * input_test.c - the servers' requests to their client, handed to the
 * host through the C API, against test/peers/streams.mjs (the SDK's
 * server; its tools elicit, sample and list roots through the client):
 *
 *   refused     no inputs offered: no capability declared, every request
 *               refused at once (the tool answers, nothing hangs)
 *   elicit      form elicitation: on_input and the stream's "pending",
 *               mk_inputs_json, a bad answer refused, the schema's
 *               defaults added to the answer (SEP-1034), "answered";
 *               per-call and sticky
 *   sample      sampling/createMessage answered by the host
 *   roots       static roots answered by the runtime itself
 *   url         a URL elicitation: an https URL reaches the host, a
 *               javascript: one is declined before it
 *   relayed     a call's own requests go to its caller (mk_call_how's
 *               input), not the host: two calls at once on one sticky
 *               connection, each asked its own (the server sent it on
 *               the call's answer stream)
 *   expired     nobody answers: the call ends at its own deadline, the
 *               request at the client's tool_execution_timeout
 *               ("expired", answered "cancel")
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "peer.h"
#include "rtutil.h"
#include "testutil.h"

static peer up; /* streams.mjs */

/* What on_input heard. */
static pthread_mutex_t heard_mtx = PTHREAD_MUTEX_INITIALIZER;
static int             heard;
static char            heard_method[64];

static void
on_input(void *arg, const mk_input *in)
{
	pthread_mutex_lock(&heard_mtx);
	heard++;
	snprintf(heard_method, sizeof(heard_method), "%s", in->method);
	pthread_mutex_unlock(&heard_mtx);
}

static int
heard_count(void)
{
	int n;

	pthread_mutex_lock(&heard_mtx);
	n = heard;
	pthread_mutex_unlock(&heard_mtx);
	return (n);
}

static mk_runtime *
open_rt(sub *sb, unsigned inputs)
{
	mk_options o;

	rt_options(&o, NULL);
	o.inputs   = inputs;
	o.on_input = on_input;
	o.roots =
	        "[{\"uri\": \"file:///work/project\", \"name\": \"project\"}]";
	return (rt_open_options(sb, &o));
}

static void
add_client(mk_runtime *rt, const char *name, bool sticky, const char *exec)
{
	char *err = NULL;

	CHECK_EQ(
	        add(rt, &err,
	            "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"http://127.0.0.1:%d/mcp\", \"tools_to_execute\": [\"*\"], \"needs_session_stickiness\": %s, \"tool_execution_timeout\": \"%s\"}",
	            name, up.port, sticky ? "true" : "false", exec),
	        0);
}

/* A tool call running on its own (mk_tool_call_async). */
typedef struct pending_call {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             done;
	int             rc;
	char           *text; /* the result's first text, or the error */
} pending_call;

static void
call_done(void *arg, int rc, mk_result *res)
{
	pending_call *pc = arg;
	json_t       *r =
                res && res->result ? json_loads(res->result, 0, NULL) : NULL;
	const char *txt = json_string_value(json_object_get(
	        json_array_get(json_object_get(r, "content"), 0), "text"));

	pthread_mutex_lock(&pc->mtx);
	pc->rc   = rc;
	pc->text = strdup(txt ? txt : res && res->error ? res->error : "");
	pc->done = 1;
	pthread_cond_signal(&pc->cv);
	pthread_mutex_unlock(&pc->mtx);
	json_decref(r);
	mk_result_free(&res);
}

static void
start_call(mk_runtime *rt, pending_call *pc, const char *client,
           const char *tool, const char *args, int timeout_ms)
{
	mk_call c = {.size       = sizeof(mk_call),
	             .client     = client,
	             .tool       = tool,
	             .arguments  = args,
	             .timeout_ms = timeout_ms};

	memset(pc, 0, sizeof(*pc));
	pthread_mutex_init(&pc->mtx, NULL);
	pthread_cond_init(&pc->cv, NULL);
	CHECK_EQ(mk_tool_call_async(rt, &c, call_done, pc), 0);
}

/* Waits for the call (bounded) and returns its text (the caller's). */
static char *
end_call(pending_call *pc, int *rc)
{
	struct timespec ts;
	char           *t;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&pc->mtx);
	while (!pc->done &&
	       pthread_cond_timedwait(&pc->cv, &pc->mtx, &ts) == 0) {
	}
	CHECK(pc->done);
	pthread_mutex_unlock(&pc->mtx);
	*rc = pc->rc;
	t   = pc->text;
	pthread_cond_destroy(&pc->cv);
	pthread_mutex_destroy(&pc->mtx);
	return (t);
}

typedef struct input_match {
	const char *state;
	const char *method;
} input_match;

static int
is_input(const event *e, const void *arg)
{
	const input_match *m = arg;

	return (strcmp(e->topic, "input") == 0 &&
	        strcmp(e->state, m->state) == 0 &&
	        strcmp(e->method, m->method) == 0);
}

static event
wait_input(sub *sb, int *from, const char *state, const char *method)
{
	input_match m = {state, method};

	return (wait_event(sb, from, is_input, &m, state));
}

static void
refused(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, 0);
	char       *out;
	int         rc;

	add_client(rt, "none", true, "30s");
	/* not declared: the SDK itself refuses to elicit */
	out = call_text(rt, "none", "elicit_form", "{\"message\": \"who?\"}",
	                &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "Client does not support form elicitation") != NULL);
	free(out);
	/* sent anyway: refused at once, not left waiting */
	out = call_text(rt, "none", "sample", "{\"prompt\": \"hi\"}", &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "-32601") != NULL); /* method not supported */
	free(out);
	out = call_text(rt, "none", "roots", NULL, &rc);
	CHECK(strstr(out, "-32601") != NULL); /* method not supported */
	free(out);
	out = call_text(rt, "none", "client_caps", NULL, &rc);
	CHECK(strstr(out, "elicitation") == NULL &&
	      strstr(out, "sampling") == NULL);
	free(out);
	CHECK_EQ(heard_count(), 0);
	rt_close(&rt, &sb);
}

static void
elicit_on(const char *client, bool sticky)
{
	sub          sb;
	mk_runtime  *rt = open_rt(&sb,
	                          MK_INPUT_ELICITATION | MK_INPUT_SAMPLING |
	                                  MK_INPUT_ROOTS);
	pending_call pc;
	int          from = 0, rc, before = heard_count();
	char        *list, *err = NULL, *out;
	event        e;
	json_t      *l, *r;

	add_client(rt, client, sticky, "30s");
	out = call_text(rt, client, "client_caps", NULL, &rc);
	CHECK(strstr(out, "elicitation") != NULL &&
	      strstr(out, "sampling") != NULL && strstr(out, "roots") != NULL);
	free(out);
	start_call(rt, &pc, client, "elicit_form", "{\"message\": \"who?\"}",
	           0);
	e = wait_input(&sb, &from, "pending", "elicitation/create");
	CHECK(strcmp(e.name, client) == 0 && strcmp(e.message, "who?") == 0);
	CHECK_EQ(heard_count(), before + 1);
	CHECK_EQ(mk_inputs_json(rt, client, &list), 0);
	CHECK((l = json_loads(list, 0, NULL)) != NULL &&
	      json_array_size(l) == 1);
	CHECK(strcmp(json_string_value(json_object_get(json_array_get(l, 0),
	                                               "request_id")),
	             e.request_id) == 0);
	json_decref(l);
	mk_free(list);
	CHECK_EQ(mk_input_answer(rt, client, e.request_id,
	                         "{\"action\": \"maybe\"}", &err),
	         MK_EINVAL);
	CHECK(strstr(err, "accept, decline or cancel") != NULL);
	mk_free(err);
	CHECK_EQ(mk_input_answer(rt, client, "in-999",
	                         "{\"action\": \"decline\"}", &err),
	         MK_ENOENT);
	mk_free(err);
	CHECK_EQ(
	        mk_input_answer(
	                rt, client, e.request_id,
	                "{\"action\": \"accept\", \"content\": {\"ok\": true, \"count\": 7}}",
	                NULL),
	        0);
	(void)wait_input(&sb, &from, "answered", "elicitation/create");
	out = end_call(&pc, &rc);
	CHECK_EQ(rc, 0);
	/* the answer's fields, and the default of the one it left out */
	CHECK((r = json_loads(out, 0, NULL)) != NULL);
	CHECK(strcmp(json_string_value(json_object_get(r, "action")),
	             "accept") == 0);
	CHECK(json_is_true(
	        json_object_get(json_object_get(r, "content"), "ok")));
	CHECK_EQ(json_integer_value(json_object_get(
	                 json_object_get(r, "content"), "count")),
	         7);
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(r, "content"), "name")),
	             "anon") == 0);
	json_decref(r);
	free(out);
	/* answered: no longer waiting */
	CHECK_EQ(mk_input_answer(rt, client, e.request_id, NULL, NULL),
	         MK_ENOENT);
	rt_close(&rt, &sb);
}

static void
elicit(void)
{
	elicit_on("percall", false);
	elicit_on("sticky", true);
}

static void
sample(void)
{
	sub          sb;
	mk_runtime  *rt = open_rt(&sb, MK_INPUT_SAMPLING);
	pending_call pc;
	int          from = 0, rc;
	char        *out;
	event        e;

	add_client(rt, "sampler", true, "30s");
	start_call(rt, &pc, "sampler", "sample", "{\"prompt\": \"6 x 7?\"}",
	           0);
	e = wait_input(&sb, &from, "pending", "sampling/createMessage");
	CHECK_EQ(
	        mk_input_answer(
	                rt, "sampler", e.request_id,
	                "{\"role\": \"assistant\", \"content\": {\"type\": \"text\", \"text\": \"42\"}, \"model\": \"host-model\"}",
	                NULL),
	        0);
	out = end_call(&pc, &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "\"42\"") != NULL &&
	      strstr(out, "host-model") != NULL);
	free(out);
	rt_close(&rt, &sb);
}

static void
roots(void)
{
	sub         sb;
	mk_runtime *rt     = open_rt(&sb, MK_INPUT_ROOTS);
	int         before = heard_count(), rc;
	char       *out;

	add_client(rt, "rooted", false, "30s");
	out = call_text(rt, "rooted", "roots", NULL, &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, "file:///work/project") != NULL &&
	      strstr(out, "project") != NULL);
	free(out);
	CHECK_EQ(heard_count(), before); /* answered without the host */
	rt_close(&rt, &sb);
}

static void
url(void)
{
	sub          sb;
	mk_runtime  *rt = open_rt(&sb, MK_INPUT_ELICITATION);
	pending_call pc;
	int          from = 0, rc, before;
	char        *out;
	event        e;

	add_client(rt, "linker", true, "30s");
	before = heard_count();
	out    = call_text(
	           rt, "linker", "elicit_url",
	           "{\"url\": \"javascript:alert(1)\", \"message\": \"go\"}",
	           &rc);
	CHECK(strstr(out, "decline") != NULL);
	free(out);
	CHECK_EQ(heard_count(), before); /* never shown */
	start_call(
	        rt, &pc, "linker", "elicit_url",
	        "{\"url\": \"https://auth.example.com/connect\", \"message\": \"go\"}",
	        0);
	e = wait_input(&sb, &from, "pending", "elicitation/create");
	CHECK_EQ(mk_input_answer(rt, "linker", e.request_id,
	                         "{\"action\": \"accept\"}", NULL),
	         0);
	out = end_call(&pc, &rc);
	CHECK(strstr(out, "accept") != NULL);
	free(out);
	rt_close(&rt, &sb);
}

static void
expired(void)
{
	sub          sb;
	mk_runtime  *rt = open_rt(&sb, MK_INPUT_ELICITATION);
	pending_call pc;
	int          from = 0, rc;
	char        *out;

	add_client(rt, "slowpoke", true, "3s");
	start_call(rt, &pc, "slowpoke", "elicit_form", "{\"message\": \"?\"}",
	           1000);
	(void)wait_input(&sb, &from, "pending", "elicitation/create");
	out = end_call(&pc, &rc);
	CHECK_EQ(rc, MK_ETIMEDOUT); /* the call keeps its own deadline */
	free(out);
	(void)wait_input(&sb, &from, "expired", "elicitation/create");
	rt_close(&rt, &sb);
}

/* What the callers of relayed heard: call i's request id and message. */
static struct {
	pthread_mutex_t mtx;
	pthread_cond_t  cv;
	int             n;
	char            rid[2][40];
	char            msg[2][64];
} R = {.mtx = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int
on_relay(void *arg, const char *request_id, const char *method,
         const char *params)
{
	int     i = (int)(intptr_t)arg;
	json_t *p = json_loads(params, 0, NULL);

	pthread_mutex_lock(&R.mtx);
	snprintf(R.rid[i], sizeof(R.rid[i]), "%s", request_id);
	snprintf(R.msg[i], sizeof(R.msg[i]), "%s %s", method,
	         json_string_value(json_object_get(p, "message")));
	R.n++;
	pthread_cond_broadcast(&R.cv);
	pthread_mutex_unlock(&R.mtx);
	json_decref(p);
	return (0);
}

static void
relayed(void)
{
	sub          sb;
	mk_runtime  *rt = open_rt(&sb, MK_INPUT_ELICITATION);
	pending_call pc[2];
	char        *err    = NULL, args[64], want[64], answer[96], *out;
	int          before = heard_count(), rc;

	add_client(rt, "shared", true, "30s");
	for (int i = 0; i < 2; i++) {
		mk_call     c   = {.size      = sizeof(mk_call),
		                   .client    = "shared",
		                   .tool      = "elicit_form",
		                   .arguments = args};
		mk_call_how how = MK_CALL_HOW_INIT;
		uint64_t    ticket;
		snprintf(args, sizeof(args), "{\"message\": \"who is %d?\"}",
		         i);
		how.input     = on_relay;
		how.input_arg = (void *)(intptr_t)i;
		memset(&pc[i], 0, sizeof(pc[i]));
		pthread_mutex_init(&pc[i].mtx, NULL);
		pthread_cond_init(&pc[i].cv, NULL);
		CHECK_EQ(mk_call_start(rt, &c, &how, call_done, &pc[i],
		                       &ticket),
		         0);
	}
	/* both wait at once: each must reach its own caller */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&R.mtx);
	while (R.n < 2 && pthread_cond_timedwait(&R.cv, &R.mtx, &ts) == 0) {
	}
	CHECK_EQ(R.n, 2);
	pthread_mutex_unlock(&R.mtx);
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "elicitation/create who is %d?",
		         i);
		CHECK(strcmp(R.msg[i], want) == 0);
		snprintf(
		        answer, sizeof(answer),
		        "{\"action\": \"accept\", \"content\": {\"ok\": true, \"name\": \"caller%d\"}}",
		        i);
		CHECK_EQ(mk_input_answer(rt, "shared", R.rid[i], answer, &err),
		         0);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "\"name\":\"caller%d\"", i);
		out = end_call(&pc[i], &rc);
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, want) != NULL);
		free(out);
	}
	CHECK_EQ(heard_count(), before); /* none was the host's */
	rt_close(&rt, &sb);
}

int
main(int argc, char **argv)
{
	char        js[512];
	const char *av[] = {"node", js, "--port", "0", NULL};

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CHECK(peer_dir() != NULL);
	snprintf(js, sizeof(js), "%s/streams.mjs", peer_dir());
	CHECK_EQ(peer_start(&up, av, NULL, "listening on port ([0-9]+)",
	                    WAIT_MS),
	         0);
	RUN_IF(refused);
	RUN_IF(elicit);
	RUN_IF(sample);
	RUN_IF(roots);
	RUN_IF(url);
	RUN_IF(relayed);
	RUN_IF(expired);
	peer_stop(&up);
	curl_global_cleanup();
	return (0);
}
