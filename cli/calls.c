/*
 * calls.c - tool calls (POST /api/mcp/tool/execute): the caller's
 * identity, a key's reach, the call made and answered from its callback.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

/* The identity of r's per-user calls: its key's name (mode vk) unless
 * the key trusts the headers; else the headers'. */
const char *
route_identity(const req *r, const char **mode)
{
	if (r->id_user != NULL) {
		*mode = "user";
		return (r->id_user);
	}
	if (r->id_session != NULL) {
		*mode = "session";
		return (r->id_session);
	}
	*mode = r->key != NULL ? "vk" : NULL;
	return (r->key != NULL ? r->key->name : NULL);
}

/* Who answers for the sign-ins r may start: its virtual key (whose
 * trusted headers may name any number of callers), or NULL. */
const char *
route_requester(const req *r)
{
	return (r->key != NULL ? r->key->name : NULL);
}

int
call_outcome(int rc, const mk_result *res)
{
	if (rc == 0) {
		json_t *j = res != NULL && res->result != NULL
		        ? json_loads(res->result, 0, NULL)
		        : NULL;
		int     o = json_is_true(json_object_get(j, "isError"))
		            ? USAGE_TOOL_ERROR
		            : USAGE_OK;
		json_decref(j);
		return (o);
	}
	if (rc == MK_ECLOSED && res != NULL && res->error_kind != NULL &&
	    strcmp(res->error_kind, "cancelled") == 0) {
		return (USAGE_CANCELLED);
	}
	return (rc == MK_EAUTH ? USAGE_AUTH_REQUIRED
	                : rc == MK_EUPSTREAM || rc == MK_ETIMEDOUT ||
	                        rc == MK_ECLOSED || rc == MK_EUNKNOWN
	                ? USAGE_UPSTREAM_ERROR
	                : USAGE_REFUSED);
}

const char *
call_caller(const req *r)
{
	return (r->key != NULL     ? r->key->name
	                : r->admin ? "(admin)"
	                           : "(anonymous)");
}

void
call_audit_as(const char *caller, const char *trace, const char *client,
              const char *tool, int outcome, int64_t t0)
{
	double ms = (double)(answer_mono_ns() - t0) / 1e6;

	mk_log(MK_LOG_INFO, "audit",
	       "call key=%s client=%.64s tool=%.128s outcome=%s %.1f ms trace=%.55s",
	       caller, client, tool, limits_outcome_name(outcome), ms,
	       trace != NULL ? trace : "-");
	limits_usage_record(caller, client, tool, outcome, ms);
}

void
call_audit(const req *r, const char *client, const char *tool, int outcome,
           int64_t t0)
{
	call_audit_as(call_caller(r), r->trace[0], client, tool, outcome, t0);
}

/* A tool call in flight: its request, and what its audit line names. */
typedef struct call {
	req        *r;
	int64_t     t0;
	const char *tool; /* in client's allocation, after it */
	char        client[];
} call;

/* A tool call, answered from its callback. */
static void
on_tool(void *arg, int rc, mk_result *res)
{
	call *c = arg;
	req  *r = c->r;

	call_audit(r, c->client, c->tool, call_outcome(rc, res), c->t0);
	limits_done(r->key != NULL ? r->key->name : NULL);
	free(c);
	if (rc == 0 && res != NULL && res->result != NULL) {
		json_t *j = json_loads(res->result, 0, NULL);
		json_t *o =
		        json_pack("{s:o}", "result",
		                  j != NULL ? j : json_string(res->result));
		if (res->recovery != NULL) {
			json_object_set_new(
			        o, "recovery",
			        json_loads(res->recovery, 0, NULL));
		}
		answer_json(r, 200, o);
	} else if (rc == MK_EAUTH && res != NULL &&
	           res->auth_required != NULL) {
		json_t *p = json_loads(res->auth_required, 0, NULL);
		answer_json(r, 401,
		            json_pack("{s:s, s:o}", "error",
		                      res->error != NULL ? res->error
		                                         : "authorize first",
		                      "mcp_auth_required",
		                      p != NULL ? p : json_null()));
	} else if (rc == MK_EUNKNOWN) {
		/* it may have run: said so, for the caller to reconcile */
		answer_json(r, 502,
		            json_pack("{s:s, s:s}", "error",
		                      res != NULL && res->error != NULL
		                              ? res->error
		                              : mk_strerror(rc),
		                      "outcome", "unknown"));
	} else {
		answer_error(r, answer_status_of(rc),
		             res != NULL && res->error != NULL
		                     ? res->error
		                     : mk_strerror(rc));
	}
	mk_result_free(&res);
}

/* GET /api/mcp/calls?outcome=unknown: the calls whose outcome is unknown
 * (the runtime's ledger, oldest first). */
void
route_calls(req *r, const char *id, json_t *body)
{
	char   *outcome = mk_query_param(r->query, "outcome"), *text = NULL;
	json_t *j;
	int     rc;

	(void)id;
	(void)body;
	if (outcome == NULL || strcmp(outcome, "unknown") != 0) {
		free(outcome);
		answer_error(r, 400,
		             "outcome must be \"unknown\" (the calls that may "
		             "or may not have run)");
		return;
	}
	free(outcome);
	if ((rc = mk_calls_unknown_json(D.rt, &text)) != 0) {
		answer_error(r, answer_status_of(rc), mk_strerror(rc));
		return;
	}
	j = json_loads(text, 0, NULL);
	mk_free(text);
	answer_json(r, 200,
	            json_pack("{s:o}", "calls", j != NULL ? j : json_array()));
}

void
route_tool_execute(req *r, const char *id, json_t *body)
{
	const char *client = http_field(body, "client");
	const char *tool   = http_field(body, "tool");
	json_t     *args   = json_object_get(body, "arguments");
	json_t     *to     = json_object_get(body, "timeout");
	const char *mode, *who = route_identity(r, &mode);
	char       *atext;
	int         rc;

	if (client == NULL || tool == NULL ||
	    (args != NULL && !json_is_object(args)) ||
	    (to != NULL && !json_is_integer(to))) {
		answer_error(
		        r, 400,
		        "the body needs client and tool (strings), arguments (an object) and optionally timeout (milliseconds)");
		return;
	}
	if (to != NULL &&
	    (json_integer_value(to) < 0 ||
	     json_integer_value(to) > INT32_MAX)) {
		/* never cut to an int: 4294967297 is not 1 ms */
		answer_error(
		        r, 400,
		        "timeout must be from 0 to 2147483647 milliseconds");
		return;
	}
	if (route_key_refuses(r, client, tool)) {
		return;
	}
	int64_t retry;
	int     limit = limits_take(r->key, &retry);
	if (limit != LIMIT_OK) {
		char why[300];
		r->busy = limit == LIMIT_RATE; /* (Retry-After) */
		answer_error(
		        r, 429,
		        limits_why(r->key, limit, retry, why, sizeof(why)));
		return;
	}
	size_t cl = strlen(client), tl = strlen(tool);
	call  *cc = malloc(sizeof(*cc) + cl + tl + 2);
	if (cc == NULL) {
		limits_done(r->key != NULL ? r->key->name : NULL);
		answer_error(r, 500, "out of memory");
		return;
	}
	memcpy(cc->client, client, cl + 1);
	memcpy(cc->client + cl + 1, tool, tl + 1);
	cc->tool   = cc->client + cl + 1;
	cc->r      = r;
	cc->t0     = answer_mono_ns();
	atext      = args != NULL ? json_dumps(args, JSON_COMPACT) : NULL;
	mk_trace t = {.traceparent = r->trace[0], .tracestate = r->trace[1]};
	mk_call  c = {
	         .size          = sizeof(mk_call),
	         .client        = client,
	         .tool          = tool,
	         .arguments     = atext,
	         .timeout_ms    = to != NULL ? (int)json_integer_value(to) : 0,
	         .user_id       = mode != NULL && mode[0] == 'u' ? who : NULL,
	         .virtual_key   = mode != NULL && mode[0] == 'v' ? who : NULL,
	         .session_id    = mode != NULL && mode[0] == 's' ? who : NULL,
	         .subject_token = r->bearer,
	         .requester     = route_requester(r),
	         .trace         = &t};
	rc = mk_tool_call_async(D.rt, &c, on_tool, cc);
	free(atext);
	if (rc != 0) {
		call_audit(r, cc->client, cc->tool, USAGE_REFUSED, cc->t0);
		limits_done(r->key != NULL ? r->key->name : NULL);
		free(cc);
		answer_error(r, answer_status_of(rc),
		             rc == MK_ENOENT ? "no such MCP client"
		                             : mk_strerror(rc));
	}
}
