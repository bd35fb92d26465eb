/*
 * call.c - tool calls.
 *
 * Sticky: the call runs on the live connection (many at once); with no
 * usable connection it waits, within its deadline, for a dial that it
 * starts or joins.  Per-call: every call dials its own session,
 * initializes, calls and closes (DELETE).  The whole call runs under the
 * client's tool_execution_timeout (or the caller's, when shorter).
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "actors/supervisor/supervisor_msg.h"
#include "codec/mp.h"

static const char *
method_of(const cl_call *c)
{
	return (c->kind == CL_CALL_PROMPT             ? "prompts/get"
	                : c->kind == CL_CALL_RESOURCE ? "resources/read"
	                                              : "tools/call");
}

/* The trace id a call's log lines carry: its span's, else its caller's
 * traceparent's, else "". */
static const char *
trace_id_of(const cl_call *c, char buf[33])
{
	const char *tp = c->trace[0];

	if (c->span != NULL) {
		return (tr_trace_id(c->span));
	}
	if (tp == NULL || strlen(tp) < 35) {
		return ("");
	}
	memcpy(buf, tp + 3, 32);
	buf[32] = '\0';
	return (buf);
}

/* The end of c, for its span and the log (DEBUG): its outcome (ok,
 * error, auth, refused) and what failed, NULL when it succeeded. */
static void
call_ended(client *cl, cl_call *c, const char *outcome, const char *error)
{
	if (kn_log_enabled(MK_LOG_DEBUG)) { /* (every call: skipped cheaply) */
		char     tid[33];
		int64_t  ms  = (kn_now_ns() - c->t0) / KN_NS_PER_MS;
		kn_field f[] = {KN_STR("tool", c->tool),
		                KN_STR("outcome", outcome),
		                KN_NUM("duration_ms", ms),
		                KN_STR("trace_id", trace_id_of(c, tid)),
		                KN_STR("message", error)};
		kn_logf(MK_LOG_DEBUG, "client", f, error != NULL ? 5 : 4,
		        "%s: %s %s: %s in %lld ms%s%s", cl->cfg->name,
		        method_of(c), c->tool, outcome, (long long)ms,
		        error != NULL ? ": " : "", error != NULL ? error : "");
	}
	tr_attr(c->span, "mcpkeep.outcome", outcome);
	tr_end(&c->rspan, error);
	tr_end(&c->span, error);
}

static void
call_free(cl_call *c)
{
	tr_end(&c->rspan, NULL); /* (ended by call_ended: not answered) */
	tr_end(&c->span, NULL);
	if (c->slotted) {
		c->cl->slots--;
		cl_call_kick(c->cl); /* the next waiting call's turn */
	}
	if (c->ticket != 0) {
		(void)idmap_del(&c->cl->tickets, c->ticket);
	}
	free(c->cancelled);
	free(c->tool);
	json_decref(c->args);
	free(c->mode);
	free(c->identity);
	free(c->requester);
	free(c->trace[0]);
	free(c->trace[1]);
	if (c->subject != NULL) {
		OPENSSL_cleanse(c->subject, strlen(c->subject));
	}
	free(c->subject);
	if (c->cred != NULL) {
		OPENSSL_cleanse(c->cred, strlen(c->cred));
	}
	free(c->cred);
	free(c->hdrs);
	free(c->auth);
	free(c->step_scope);
	free(c->orig);
	free(c);
}

static const mcp_error *outcome(client *cl, cl_call *c, const mcp_error *err,
                                mcp_error *u);

static void
reply_result(client *cl, cl_call *c, const mcp_error *err, json_t *result)
{
	char     *text;
	mcp_error waited, unknown;

	json_t *rec   = c->path != NULL
	          ? json_pack("{s:b, s:s, s:b}", "ran", 1, "path", c->path,
	                      "retry_skipped", c->skipped)
	          : NULL;
	char   *rtext = rec != NULL ? json_dumps(rec, JSON_COMPACT) : NULL;

	json_decref(rec);
	err = outcome(cl, c, err, &unknown);
	cl_cm_call(cl, c, err != NULL ? CM_ERROR : CM_OK);
	if (err != NULL && err->kind == MCP_E_TIMEOUT) {
		/* how long it waited in all (a queue, its credential, the
		 * server), not what was left of its deadline when sent */
		int64_t all    = (kn_now_ns() - c->t0) / KN_NS_PER_MS;
		int64_t budget = (c->deadline - c->t0) / KN_NS_PER_MS;
		bool    ours   = strncmp(err->message, "tools/call timed out",
		                         strlen("tools/call timed out")) == 0;
		mcp_error_set(&waited, MCP_E_TIMEOUT,
		              "tools/call timed out after %lld ms%s%s",
		              (long long)(all < budget ? all : budget),
		              ours ? "" : ": ", ours ? "" : err->message);
		waited.http_status = err->http_status;
		err                = &waited;
	}
	call_ended(cl, c, err != NULL ? "error" : "ok",
	           err != NULL ? err->message : NULL);
	if (err != NULL) {
		cl_failed_msg f = {.error = (char *)err->message,
		                   .kind = (char *)mcp_errkind_name(err->kind),
		                   .http_status = err->http_status,
		                   .recovery    = rtext};
		kn_reply_msg(kn_actor_kernel(cl->self), c->corr,
		             cl_status_of(err), &cl_failed_msg_fields, &f);
		free(rtext);
		return;
	}
	if ((text = json_dumps(result, JSON_COMPACT)) == NULL) {
		kn_reply_why(cl->self, c->corr, MK_ENOMEM, "out of memory");
		free(rtext);
		return;
	}
	if (!json_is_true(json_object_get(result, "isError"))) {
		cl_cache_put(cl, c, text);
	}
	cl_result_msg ok = {.result = text, .recovery = rtext};
	kn_reply_msg(kn_actor_kernel(cl->self), c->corr, 0,
	             &cl_result_msg_fields, &ok);
	free(rtext);
	free(text);
}

static int
remaining_ms(const cl_call *c)
{
	int64_t left = (c->deadline - kn_now_ns()) / KN_NS_PER_MS;

	return (left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left);
}

/* The error of a call its caller gave up on (into e). */
static const mcp_error *
cancelled(const cl_call *c, mcp_error *e)
{
	return (mcp_error_set(e, MCP_E_CANCELLED, "tools/call cancelled: %s",
	                      c->cancelled));
}

static void
pc_unlink(client *cl, cl_call *c)
{
	if (c->pprev != NULL) {
		c->pprev->pnext = c->pnext;
	} else {
		cl->pcalls = c->pnext;
	}
	if (c->pnext != NULL) {
		c->pnext->pprev = c->pprev;
	}
	cl->calls--;
}

/* Answers the call and frees it, once: freeing a per-call session fails
 * its request, whose callback finds the call done. */
void
cl_call_finish(client *cl, cl_call *c, const mcp_error *err, json_t *result)
{
	if (c->done) {
		return;
	}
	c->done = true;
	reply_result(cl, c, err, result);
	if (c->pc) {
		pc_unlink(cl, c);
		mcp_session_free(&c->s); /* DELETE; finishes in the loop */
	}
	call_free(c);
}

void
cl_call_end_all(client *cl, const char *why)
{
	mcp_error e;

	mcp_error_set(&e, MCP_E_CANCELLED, "%s", why);
	while (cl->pcalls != NULL) {
		cl_call_finish(cl, cl->pcalls, &e, NULL);
	}
}

/* A call whose connection was cut after it went out (cl_cut) goes again,
 * once, under a new id, when the tool is safe to run twice (SPEC 7): a
 * per-call one on a fresh session, a sticky one in 2026-07-28 (which
 * resumes no stream) on the connection it has; a sticky one of the
 * earlier revisions goes with the session's recovery (recover.c). */
static bool
reissue(client *cl, cl_call *c, const mcp_error *err)
{
	if (!cl_cut(err) || !c->sent || c->reissued || remaining_ms(c) <= 0 ||
	    (!c->pc && (cl->era != MCP_ERA_MODERN || !cl_conn_usable(cl)))) {
		return (false);
	}
	if (!cl_retry_safe(cl, c)) {
		KN_DEBUG(
		        "client",
		        "%s: %s's connection was cut; not sent again: not safe to run twice",
		        cl->cfg->name, c->tool);
		return (false);
	}
	c->reissued = true;
	return (true);
}

/* A call cut after it went out and not sent again (not safe to run
 * twice) may or may not have run: outcome_unknown (into u), told to the
 * supervisor's ledger so that an operator can reconcile it; else err. */
static const mcp_error *
outcome(client *cl, cl_call *c, const mcp_error *err, mcp_error *u)
{
	char           at[40], rid[24];
	sv_unknown_msg m;

	if (!cl_cut(err) || !c->sent || c->kind != CL_CALL_TOOL ||
	    c->cancelled != NULL || cl_retry_safe(cl, c)) {
		return (err);
	}
	mcp_error_set(u, MCP_E_UNKNOWN,
	              "tools/call %s: the connection failed after the call "
	              "was sent (%s): it may or may not have run; not sent "
	              "again: not safe to run twice",
	              c->tool, err->message);
	u->http_status = err->http_status;
	snprintf(rid, sizeof(rid), "%lld", (long long)c->sent_id);
	m = (sv_unknown_msg) {.client = cl->cfg->name,
	                      .tool   = c->tool,
	                      .caller = c->identity != NULL ? c->identity : "",
	                      .time   = kn_rfc3339(at, sizeof(at)),
	                      .request_id = rid,
	                      .error      = (char *)err->message};
	if (kn_tell_msg(cl->sv, cl->self, MSG_SV_UNKNOWN,
	                CODEC_OF(sv_unknown_msg, &m)) != 0) {
		KN_ERROR("client", "%s: %s: an unknown outcome not recorded",
		         cl->cfg->name, c->tool);
	}
	KN_WARN("client", "%s: %s", cl->cfg->name, u->message);
	return (u);
}

static void
done_sticky(void *arg, const mcp_error *err, json_t *result)
{
	cl_call *c  = arg;
	client  *cl = c->cl;

	c->sent_id = c->rid;
	c->rid     = 0;
	cl->calls--;
	cl_conn_call_done(cl, c->on);
	c->on = NULL;
	if (c->cancelled != NULL) {
		cl_call_finish(cl, c, err, result); /* nothing to retry */
		return;
	}
	if (reissue(cl, c, err)) {
		cl_call_rerun(cl, c);
		return;
	}
	if (err != NULL &&
	    (err->kind == MCP_E_CONNECT || err->kind == MCP_E_LOST)) {
		cl_check_soon(cl); /* the connection may be dead */
	}
	if (err != NULL && cl_recover_sticky(cl, c, err)) {
		return; /* it answers when it is done */
	}
	cl_call_finish(cl, c, err, result);
}

/* The server's progress on call arg: the caller's, as it came. */
static void
progress(void *arg, double done, double total, const char *message)
{
	cl_call *c = arg;

	c->progress(c->parg, done, total, message);
}

/* Sends c on s - a tools/call, prompts/get or resources/read - with
 * what is left of its time; fn answers it. */
static int
send_call(mcp_session *s, cl_call *c, mcp_result_fn fn)
{
	mcp_req_opts o = {.timeout_ms  = remaining_ms(c),
	                  .traceparent = c->span != NULL
	                          ? tr_traceparent(c->span, c->tp)
	                          : c->trace[0],
	                  .tracestate  = c->trace[1],
	                  .progress    = c->progress != NULL ? progress : NULL,
	                  .progress_arg = c};

	tr_end(&c->rspan, NULL); /* a recovery's retry goes */
	switch (c->kind) {
	case CL_CALL_PROMPT:
		return (mcp_get_prompt(s, c->tool, c->args, &o, fn, c,
		                       &c->rid));
	case CL_CALL_RESOURCE:
		return (mcp_read_resource(s, c->tool, &o, fn, c, &c->rid));
	default:
		o.tool = cl_tool_named(c->cl, c->tool);
		cl_call_keyed(c, s);
		o.idempotency_key = c->idem_meta ? c->idem : NULL;
		return (mcp_call_tool(s, c->tool, c->args, &o, fn, c,
		                      &c->rid));
	}
}

static void
run_sticky(client *cl, cl_call *c)
{
	mcp_error e;

	if (c->cancelled != NULL) { /* given up before it was sent */
		cl_call_finish(cl, c, cancelled(c, &e), NULL);
		return;
	}
	c->on   = cl->live;
	c->gen  = c->on->gen;
	c->sent = true;
	c->on->inflight++;
	if (++cl->calls > cl->maxconn && cl->maxconn < 64) {
		cl->maxconn = cl->calls < 64 ? cl->calls : 64;
		tp_loop_set_maxconnects(cl->loop, (long)cl->maxconn);
	}
	if (send_call(c->on->s, c, done_sticky) != 0) {
		done_sticky(c,
		            mcp_error_set(&e, MCP_E_LOCAL, "cannot send %s",
		                          method_of(c)),
		            NULL);
	}
}

/* ---- per-call ---------------------------------------------------------- */

static void
done_per_call(void *arg, const mcp_error *err, json_t *result)
{
	cl_call *c  = arg;
	client  *cl = c->cl;

	if (c->done) {
		return; /* ended while its session was freed */
	}
	c->sent_id = c->rid;
	c->rid     = 0;
	if (err != NULL && c->cancelled == NULL) {
		/* done with this session either way (a retry opens a fresh
		 * one, maybe before recover_per_call returns) */
		mcp_session_free(&c->s);
		if (err->kind == MCP_E_CONNECT || err->kind == MCP_E_LOST) {
			cl_check_soon(cl); /* the server may be gone */
		}
		if (reissue(cl, c, err)) {
			cl_call_reopen(cl, c);
			return;
		}
		if (cl_recover_per_call(cl, c, err)) {
			return;
		}
	}
	cl_call_finish(cl, c, err, result);
}

static void
pc_ready(void *arg, mcp_session *s, const mcp_error *err)
{
	cl_call  *c = arg;
	mcp_error e;

	if (err != NULL) {
		cl_era_forget(c->cl);
		done_per_call(c, err, NULL);
		return;
	}
	cl_era_learn(c->cl, s);
	if (c->cancelled != NULL) { /* given up before it was sent */
		done_per_call(c, cancelled(c, &e), NULL);
		return;
	}
	c->sent = true;
	if (send_call(s, c, done_per_call) != 0) {
		done_per_call(c,
		              mcp_error_set(&e, MCP_E_LOCAL, "cannot send %s",
		                            method_of(c)),
		              NULL);
	}
}

/* The server's requests on a call's own session go to the host. */
static int
pc_request(void *arg, mcp_session *s, uint64_t token, const char *method,
           json_t *params)
{
	return (cl_input_request(((cl_call *)arg)->cl, s, token, method,
	                         params));
}

static void
pc_request_gone(void *arg, mcp_session *s, uint64_t token)
{
	cl_input_gone(((cl_call *)arg)->cl, s, token);
}

static void
pc_log(void *arg, mcp_session *s, const char *level, const char *logger,
       const char *text)
{
	cl_server_log(((cl_call *)arg)->cl, s, level, logger, text);
}

static void
open_per_call(client *cl, cl_call *c)
{
	mcp_handlers h = {.ready   = pc_ready,
	                  .arg     = c,
	                  .request = pc_request,
	                  .gone    = pc_request_gone,
	                  .log     = pc_log};
	mcp_config   mc;
	mcp_error    e;

	if (cl_loop(cl, &e) != 0) {
		done_per_call(c, &e, NULL);
		return;
	}
	cl_conn_config(cl, &mc);
	c->cred_sum = cl_cred_sum(cl);
	if (c->hdrs != NULL) {
		mc.headers =
		        (const char *const *)c->hdrs; /* the caller's own */
	}
	mc.timeout_ms = remaining_ms(c); /* initialize shares the deadline */
	if (mc.timeout_ms <= 0 ||
	    mcp_session_open(&c->s, cl->loop, &mc, &h) != 0) {
		done_per_call(
		        c,
		        mc.timeout_ms <= 0
		                ? mcp_error_set(
		                          &e, MCP_E_TIMEOUT,
		                          "tool call timed out waiting for its credential")
		                : mcp_error_set(&e, MCP_E_LOCAL,
		                                "cannot open a session"),
		        NULL);
	}
}

void
cl_call_auth_required(client *cl, cl_call *c, const char *err)
{
	cl_failed_msg f = {.error         = (char *)err,
	                   .kind          = "auth",
	                   .auth_required = c->auth};

	c->done = true;
	kn_reply_msg(kn_actor_kernel(cl->self), c->corr, MK_EAUTH,
	             &cl_failed_msg_fields, &f);
	cl_cm_call(cl, c, CM_AUTH);
	call_ended(cl, c, "auth", err);
	pc_unlink(cl, c);
	mcp_session_free(&c->s);
	call_free(c);
}

/* The call's credential came (or did not). */
static void
pc_cred(client *cl, void *arg, uint64_t seq, int status, const char *err)
{
	cl_call  *c = arg;
	mcp_error e;

	if (status == MK_EAUTH && c->auth != NULL) {
		/* no credential for this caller: the tool does not run */
		cl_call_auth_required(cl, c, err);
		return;
	}
	if (status == MK_EBUSY) {
		/* too many of its client's authorizations pending: the
		 * caller's to retry later, not an upstream failure */
		cl_cm_call(cl, c, CM_ERROR);
		call_ended(cl, c, "error", err);
		kn_reply_why(cl->self, c->corr, MK_EBUSY, "%s", err);
		pc_unlink(cl, c);
		call_free(c);
		return;
	}
	if (status != 0) {
		/* the credential could not be had: no upstream failure, so
		 * nothing to recover from */
		cl_call_finish(cl, c, mcp_error_set(&e, MCP_E_AUTH, "%s", err),
		               NULL);
		return;
	}
	open_per_call(cl, c);
}

void
cl_call_reopen(client *cl, cl_call *c)
{
	open_per_call(cl, c);
}

void
cl_call_rerun(client *cl, cl_call *c)
{
	if (cl_conn_usable(cl)) {
		run_sticky(cl, c);
	} else {
		cl_call_finish(cl, c, c->orig, NULL);
	}
}

static void
run_per_call(client *cl, cl_call *c)
{
	c->pc    = true;
	c->pnext = cl->pcalls;
	if (c->pnext != NULL) {
		c->pnext->pprev = c;
	}
	cl->pcalls = c;
	cl->calls++;
	if (cfg_auth_per_user(cl->cfg->auth) && cl->cr != NULL) {
		cl_cred_fetch_user(cl, c, pc_cred); /* the caller's own */
		return;
	}
	if (cl_cred_needed(cl)) {
		cl_cred_fetch(cl, CRED_USE, pc_cred, c, 0);
		return;
	}
	open_per_call(cl, c);
}

/* ---- entry -------------------------------------------------------------- */

static bool
allowed(const cfg_client *cfg, const char *tool)
{
	if (cfg->tools_all) {
		return (true);
	}
	for (size_t i = 0; cfg->tools != NULL && cfg->tools[i] != NULL; i++) {
		if (strcmp(cfg->tools[i], tool) == 0) {
			return (true);
		}
	}
	return (false);
}

cl_call *
cl_call_of(client *cl, mcp_session *s, int64_t cause)
{
	cl_call *found = NULL;
	int      n     = 0;

	for (size_t i = 0; i < cl->tickets.cap; i++) {
		cl_call *c = cl->tickets.ents[i].val;
		if (cl->tickets.ents[i].id == 0 || c->rid == 0 ||
		    (c->pc                   ? c->s
		             : c->on != NULL ? c->on->s
		                             : NULL) != s) {
			continue;
		}
		if (cause != 0 && c->rid == cause) {
			return (c); /* the server said which */
		}
		found = c;
		n++;
	}
	/* else the one call out there (two: neither can be told apart),
	 * on a sticky connection only when it runs that call alone */
	return (n == 1 && (found->pc || found->on->inflight == 1) ? found
	                                                          : NULL);
}

/* A prompt's arguments are strings (PromptArgument values). */
static bool
prompt_args_ok(json_t *args)
{
	const char *k;
	json_t     *v;

	json_object_foreach(args, k, v)
	{
		if (!json_is_string(v)) {
			return (false);
		}
	}
	return (true);
}

/* ---- max_concurrent_calls ---------------------------------------------
 *
 * A client with max_concurrent_calls runs at most that many calls at
 * once (each holds a slot from admission to its answer, its recovery
 * and retries included); the others wait in order, each within its own
 * deadline, CL_HELD_MAX at most.  A call that finds the queue full, or
 * whose deadline passes in it, is refused with MK_EBUSY naming the
 * limit.  The upstream never sees more than the limit.
 *
 * A server over the network gets at most CL_NET_CALLS_MAX whatever the
 * config says: calls that hang would otherwise hold every connection
 * the loop may open to it (TP_HOST_CONNS_MAX), and the connect, checks
 * and listings that could see it is gone would wait behind them. */

static unsigned
max_calls(const client *cl)
{
	unsigned m = cl->cfg->max_calls;

	if (cl->cfg->conn != CFG_STDIO && (m == 0 || m > CL_NET_CALLS_MAX)) {
		m = CL_NET_CALLS_MAX;
	}
	return (m);
}

/* What max_calls(cl) is, for a refusal: the config's, or the room kept. */
static void
limit_text(const client *cl, char *buf, size_t len)
{
	unsigned m = max_calls(cl);

	if (m == cl->cfg->max_calls) {
		snprintf(buf, len,
		         "is at max_concurrent_calls (%u calls in flight", m);
	} else {
		snprintf(buf, len,
		         "has %u calls in flight (the most sent to one server "
		         "at once, leaving connections for its checks",
		         m);
	}
}

/* Runs c now: it holds a slot. */
static void
admit(client *cl, cl_call *c)
{
	c->slotted = true;
	cl->slots++;
	if (!cl->cfg->sticky) {
		run_per_call(cl, c);
	} else if (cl_conn_usable(cl)) {
		run_sticky(cl, c);
	} else {
		c->next    = cl->queued; /* wait for a connection */
		cl->queued = c;
		cl_dial_start(cl, DIAL_BACKGROUND, 0, MSG_CL_RECONNECT);
	}
}

/* Takes c out of the calls waiting for a slot. */
static void
unhold(client *cl, cl_call *c)
{
	cl_call **pp = &cl->held, *prev = NULL;

	while (*pp != NULL && *pp != c) {
		prev = *pp;
		pp   = &(*pp)->next;
	}
	if (*pp == NULL) {
		return;
	}
	*pp = c->next;
	if (cl->held_tail == c) {
		cl->held_tail = prev;
	}
	c->next = NULL;
	cl->nheld--;
	if (c->htimer != 0) {
		kn_timer_cancel(cl->self, c->htimer);
		c->htimer = 0;
	}
}

/* Refuses a call that cannot wait for a slot (MK_EBUSY, or status). */
static void
refuse_held(client *cl, cl_call *c, int status, const char *why)
{
	cl_cm_call(cl, c, CM_REFUSED);
	call_ended(cl, c, "refused", why);
	kn_reply_why(cl->self, c->corr, status, "%s", why);
	call_free(c);
}

static void
held_expired(kn_actor *self, void *arg)
{
	cl_call *c  = arg;
	client  *cl = c->cl;
	char     why[400], limit[160];

	c->htimer = 0;
	unhold(cl, c);
	limit_text(cl, limit, sizeof(limit));
	snprintf(why, sizeof(why),
	         "MCP client %s %s): the call waited %lld ms for a slot; try "
	         "again later",
	         cl->cfg->name, limit,
	         (long long)((kn_now_ns() - c->t0) / KN_NS_PER_MS));
	refuse_held(cl, c, MK_EBUSY, why);
}

/* c waits for a slot, within its deadline. */
static void
hold(client *cl, cl_call *c)
{
	char why[400], limit[160];

	/* (waiting for the room kept for checks alone, as they once waited
	 * in libcurl's queue, calls are bounded by their callers' own
	 * limits - the daemon's lanes, a host's threads - not by this) */
	if ((cl->nheld >= CL_HELD_MAX && cl->cfg->max_calls != 0 &&
	     max_calls(cl) == cl->cfg->max_calls) ||
	    cl->held_off) {
		limit_text(cl, limit, sizeof(limit));
		snprintf(why, sizeof(why),
		         "MCP client %s %s, %u waiting); try again later",
		         cl->cfg->name, limit, cl->nheld);
		refuse_held(cl, c, MK_EBUSY, why);
		return;
	}
	if ((c->htimer = kn_timer_add(cl->self, remaining_ms(c), held_expired,
	                              c)) == 0) {
		refuse_held(cl, c, MK_ENOMEM, "out of memory");
		return;
	}
	if (cl->held_tail != NULL) {
		cl->held_tail->next = c;
	} else {
		cl->held = c;
	}
	cl->held_tail = c;
	cl->nheld++;
}

static void
admit_tick(kn_actor *self, void *arg)
{
	client  *cl = arg;
	cl_call *c;

	cl->kick = 0;
	while ((c = cl->held) != NULL && !cl->held_off &&
	       (max_calls(cl) == 0 || cl->slots < max_calls(cl))) {
		unhold(cl, c);
		admit(cl, c);
	}
}

void
cl_call_kick(client *cl)
{
	/* from a timer, not here: a slot frees inside a call's end */
	if (cl->held != NULL && cl->kick == 0 && !cl->held_off) {
		cl->kick = kn_timer_add(cl->self, 0, admit_tick, cl);
	}
}

void
cl_call_drop_held(client *cl, const char *why, bool off)
{
	cl_call *c;

	if (off) {
		cl->held_off = true;
		if (cl->kick != 0) {
			kn_timer_cancel(cl->self, cl->kick);
			cl->kick = 0;
		}
	}
	while ((c = cl->held) != NULL) {
		unhold(cl, c);
		refuse_held(cl, c, MK_ESTATE, why);
	}
}

/* The Mcp-Param headers a 2026-07-28 gateway's caller sent with c (JSON
 * text; NULL: not checked) are those c's tool and arguments make; else
 * c is answered (MK_EINVAL, "header_mismatch") and false. */
static bool
headers_match(client *cl, cl_call *c, const char *sent)
{
	json_t *got, *tool;
	char    why[300];
	bool    ok;

	if (sent == NULL || (tool = cl_tool_named(cl, c->tool)) == NULL) {
		return (true); /* (an unknown tool: the server says so) */
	}
	got = json_loads(sent, 0, NULL);
	snprintf(why, sizeof(why),
	         "Header mismatch: the Mcp-Param headers "
	         "are not a JSON object");
	ok = json_is_object(got) &&
	        mcp_param_headers_match(tool, c->args, got, why, sizeof(why));
	json_decref(got);
	if (!ok) {
		cl_failed_msg f = {.error = why, .kind = "header_mismatch"};
		kn_reply_msg(kn_actor_kernel(cl->self), c->corr, MK_EINVAL,
		             &cl_failed_msg_fields, &f);
	}
	return (ok);
}

int
cl_on_call(kn_actor *self, client *cl, kn_msg *msg, cl_call_msg *mp)
{
	uint64_t    corr = kn_defer(msg);
	cl_call_msg m    = *mp; /* the call takes the strings it keeps */
	cl_call    *c;
	int64_t     timeout;
	char       *params_sent = NULL, why[512];

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		(void)kn_reply_why(self, corr, MK_ENOMEM, "out of memory");
		return (0);
	}
	c->cl    = cl;
	c->corr  = corr;
	c->t0    = kn_now_ns();
	*mp      = (cl_call_msg) {0};
	c->tool  = m.tool; /* the call owns them now */
	c->kind  = (int)m.kind;
	c->input = (int (*)(void *, const char *, const char *, const char *))(
	                   uintptr_t)m.input;
	c->iarg      = (void *)(uintptr_t)m.input_arg;
	c->mode      = m.mode;
	c->identity  = m.identity;
	c->subject   = m.subject;
	c->requester = m.requester;
	c->progress  = (void (*)(void *, double, double, const char *))(
                              uintptr_t)m.progress;
	c->parg         = (void *)(uintptr_t)m.progress_arg;
	c->trace[0]     = m.traceparent;
	c->trace[1]     = m.tracestate;
	uint64_t ticket = (uint64_t)m.ticket;
	m.tool = m.mode = m.identity = m.subject = m.requester = NULL;
	m.traceparent = m.tracestate = NULL;
	params_sent                  = m.param_headers;
	m.param_headers              = NULL;
	timeout                      = m.timeout_ms;
	c->args = m.arguments != NULL ? json_loads(m.arguments, 0, NULL)
	                              : json_object();
	cl_call_msg_clear(&m);
	if (c->tool == NULL || !json_is_object(c->args) ||
	    c->kind < CL_CALL_TOOL || c->kind > CL_CALL_RESOURCE) {
		kn_reply_why(
		        cl->self, corr, MK_EINVAL,
		        "a tool call needs a tool name and an arguments object");
		goto refuse;
	}
	if (c->kind == CL_CALL_PROMPT && !prompt_args_ok(c->args)) {
		kn_reply_why(cl->self, corr, MK_EINVAL,
		             "prompts/get arguments must all be strings");
		goto refuse;
	}
	if (cfg_auth_per_user(cl->cfg->auth) &&
	    (c->identity == NULL || *c->identity == '\0')) {
		kn_reply_why(
		        cl->self, corr, MK_EINVAL,
		        "MCP client %s uses per-user credentials: the call needs the caller's identity - a user id (X-MCP-User-Id), a virtual key (X-MCP-Virtual-Key) or a session id (X-MCP-Session-Id)",
		        cl->cfg->name);
		goto refuse;
	}
	if (cl->state == CS_DISABLED || cl->state == CS_REAUTH ||
	    cl->state == CS_PENDING) {
		kn_reply_why(cl->self, corr, MK_ESTATE, "MCP client %s is %s",
		             cl->cfg->name,
		             cl->state == CS_DISABLED ? "disabled"
		                     : cl->state == CS_REAUTH
		                     ? "waiting for reauthorization"
		                     : "pending verification");
		goto refuse;
	}
	if (c->kind == CL_CALL_TOOL && !allowed(cl->cfg, c->tool)) {
		kn_reply_why(
		        cl->self, corr, MK_EINVAL,
		        "tool %.200s is not in tools_to_execute of MCP client %s",
		        c->tool, cl->cfg->name);
		goto refuse;
	}
	if (c->kind == CL_CALL_TOOL &&
	    cl_pin_refuses(cl, c->tool, why, sizeof(why))) {
		kn_reply_why(cl->self, corr, MK_ESTATE, "%s", why);
		goto refuse;
	}
	if (c->kind == CL_CALL_TOOL && !headers_match(cl, c, params_sent)) {
		goto refuse; /* (answered) */
	}
	free(params_sent);
	if (timeout <= 0 || timeout > cl->exec_ms) {
		timeout = cl->exec_ms;
	}
	c->deadline = kn_now_ns() + timeout * KN_NS_PER_MS;
	if (cl_cache_answer(cl, c)) {
		return (0); /* a kept result: the upstream untouched */
	}
	if (ticket != 0) {
		if (idmap_put(&cl->tickets, ticket, c) != 0) {
			kn_reply_why(cl->self, corr, MK_ENOMEM,
			             "out of memory");
			goto refuse;
		}
		c->ticket = ticket;
	}
	if ((c->span = tr_start(cl->tracer, method_of(c), TR_CLIENT,
	                        c->trace[0], NULL)) != NULL) {
		tr_attr(c->span, "mcp.method.name", method_of(c));
		tr_attr(c->span,
		        c->kind == CL_CALL_TOOL ? "gen_ai.tool.name"
		                : c->kind == CL_CALL_PROMPT
		                ? "gen_ai.prompt.name"
		                : "mcp.resource.uri",
		        c->tool);
		tr_attr(c->span, "mcpkeep.client", cl->cfg->name);
	}
	if (max_calls(cl) != 0 &&
	    (cl->slots >= max_calls(cl) || cl->held != NULL)) {
		hold(cl, c); /* (in order: none jumps the queue) */
	} else {
		admit(cl, c);
	}
	return (0);

refuse:
	free(params_sent);
	cl_cm_outcome(cl, CM_REFUSED);
	call_free(c);
	return (0);
}

void
cl_call_run_queued(client *cl, const char *failure)
{
	cl_call *c;

	while ((c = cl->queued) != NULL) {
		cl->queued = c->next;
		if (failure == NULL && kn_now_ns() < c->deadline &&
		    cl_conn_usable(cl)) {
			run_sticky(cl, c);
			continue;
		}
		char why[512];
		int  status = MK_EUPSTREAM;
		cl_cm_call(cl, c, CM_ERROR);
		if (failure != NULL) {
			snprintf(why, sizeof(why),
			         "no connection to MCP client %s: %s",
			         cl->cfg->name, failure);
		} else if (kn_now_ns() >= c->deadline) {
			status = MK_ETIMEDOUT;
			snprintf(
			        why, sizeof(why),
			        "tool call timed out waiting for a connection");
		} else {
			snprintf(why, sizeof(why),
			         "no connection to MCP client %s",
			         cl->cfg->name);
		}
		call_ended(cl, c, "error", why);
		kn_reply_why(cl->self, c->corr, status, "%s", why);
		call_free(c);
	}
}

/* ---- cancellation -------------------------------------------------------
 */

/* Takes c out of the calls waiting for a connection: true if it was. */
static bool
unqueue(client *cl, cl_call *c)
{
	for (cl_call **pp = &cl->queued; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return (true);
		}
	}
	return (false);
}

int
cl_on_cancel(kn_actor *self, client *cl, kn_msg *msg, cl_cancel_msg *m)
{
	cl_call  *c;
	mcp_error e;

	if ((c = idmap_get(&cl->tickets, (uint64_t)m->ticket)) == NULL ||
	    c->cancelled != NULL || c->done ||
	    (c->cancelled = strdup(m->reason != NULL ? m->reason
	                                             : "by the caller")) ==
	            NULL) {
		return (0); /* answered already (or never known) */
	}
	KN_DEBUG("client", "%s: %s cancelled by its caller", cl->cfg->name,
	         c->tool);
	if (c->htimer != 0) {
		unhold(cl, c); /* waiting for a slot */
		cl_call_finish(cl, c, cancelled(c, &e), NULL);
	} else if (unqueue(cl, c)) {
		cl_call_finish(cl, c, cancelled(c, &e), NULL);
	} else if (c->rid != 0) {
		/* out: the server is told; its callback answers the call */
		mcp_session *s = c->pc  ? c->s
		        : c->on != NULL ? c->on->s
		                        : NULL;
		if (s != NULL) {
			(void)mcp_cancel(s, c->rid, c->cancelled);
		}
	}
	/* else on its way (a credential, a session, a recovery): it is
	 * answered where it would be sent */
	return (0);
}
