/*
 * tputil.c - see tputil.h.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tputil.h"

static void
on_ready(void *arg, mcp_session *s, const mcp_error *err)
{
	client *c = arg;

	c->ready = 1;
	if (err != NULL) {
		c->failed = 1;
		c->err    = *err;
	}
}

static void
on_event(void *arg, mcp_session *s, mcp_event ev, const mcp_error *err)
{
	client *c = arg;

	if (ev == MCP_EV_LOST) {
		c->lost     = 1;
		c->lost_err = *err;
	} else {
		c->changed++;
	}
}

static void
on_log(void *arg, mcp_session *s, const char *level, const char *logger,
       const char *text)
{
	client *c = arg;

	c->logs++;
	snprintf(c->log, sizeof(c->log), "%s %s: %s", level, logger, text);
}

/* Opens a session; returns 0 when READY, else the error kind. */
int
open_client(client *c, const mcp_config *cfg)
{
	mcp_handlers h = {
	        .ready = on_ready, .event = on_event, .arg = c, .log = on_log};

	memset(c, 0, sizeof(*c));
	CHECK_EQ(tp_loop_new(&c->l), 0);
	CHECK_EQ(mcp_session_open(&c->s, c->l, cfg, &h), 0);
	CHECK_EQ(tp_loop_run(c->l, &c->ready, TP_WAIT_MS), 0);
	if (c->failed) {
		fprintf(stderr, "   open: %s: %s\n",
		        mcp_errkind_name(c->err.kind), c->err.message);
		return (c->err.kind);
	}
	return (0);
}

void
close_client(client *c)
{
	int none = 0;

	mcp_session_free(&c->s);
	/* let a graceful close (DELETE, child exit) run a little */
	(void)tp_loop_run(c->l, &none, 200);
	tp_loop_free(&c->l);
}

void
on_result(void *arg, const mcp_error *err, json_t *result)
{
	outcome *o = arg;

	o->done = 1;
	if (err != NULL) {
		o->failed = 1;
		o->err    = *err;
	} else {
		o->result = json_incref(result);
	}
}

void
on_progress(void *arg, double progress, double total, const char *msg)
{
	outcome *o = arg;

	o->progress++;
}

const char *
first_text(json_t *result)
{
	json_t *c = json_array_get(json_object_get(result, "content"), 0);

	return (json_string_value(json_object_get(c, "text")));
}

/* Calls a tool and waits for the answer. */
void
call(client *c, const char *tool, json_t *args, int timeout_ms, outcome *o)
{
	mcp_req_opts opts = {.timeout_ms   = timeout_ms,
	                     .progress     = on_progress,
	                     .progress_arg = o};

	memset(o, 0, sizeof(*o));
	CHECK_EQ(mcp_call_tool(c->s, tool, args, &opts, on_result, o, NULL),
	         0);
	CHECK_EQ(tp_loop_run(c->l, &o->done, TP_WAIT_MS), 0);
	json_decref(args);
}

void
outcome_fini(outcome *o)
{
	json_decref(o->result);
	o->result = NULL;
}
