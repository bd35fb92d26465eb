/*
 * check.c - health checks: ping (or a tool list) on a schedule.
 *
 * A sticky check is ping (when is_ping_available) then tools/list on the
 * live connection; a per-call check is a discovery (connect, list,
 * close).  Each operation gets a 5 s timeout and up to 3 retries with
 * backoff (0.5 s, 1 s, 2 s) for transient errors only: timeouts, refused
 * or reset connections, a lost stream, HTTP 5xx.  One check that exhausts
 * its retries marks the client unstable with the stage that failed; one
 * that passes marks it healthy.  A dead session (gone) re-dials as part
 * of the check.  After a failed sticky check a background
 * make-before-break reconnect starts.
 *
 * A check without a connection to check waits while the reconnect
 * backoff runs (its own connect reports); a passing one resets the
 * backoff.  check_soon runs one for a call that failed at the transport
 * (one running, one a second).  A check ended while its ping or
 * tools/list is out is freed by that request's callback.
 */
#include <stdlib.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"

#define CHECK_TIMEOUT_MS 5000
#define CHECK_RETRIES    3
#define CHECK_BACKOFF_MS 500
#define CHECK_SOON_MS    1000 /* check_soon: one check a second at most */

enum { PH_PING, PH_LIST, PH_DIAL };

bool
cl_transient(const mcp_error *e)
{
	switch (e->kind) {
	case MCP_E_TIMEOUT:
	case MCP_E_CONNECT:
	case MCP_E_LOST:
		return (true);
	case MCP_E_HTTP:
		return (e->http_status >= 500);
	default:
		return (false);
	}
}

static void run(client *cl);

/* The supervisor's ask gets the state; check_soon's (corr 0) nothing. */
static void
answer(client *cl, uint64_t corr)
{
	if (corr != 0) {
		cl_reply_state(cl, corr);
	}
}

/* Ends the running check once: answers the supervisor; the check is
 * freed now, or by its request's callback when one is out. */
static void
finish(client *cl)
{
	cl_check *k = cl->chk;

	cl->chk  = NULL;
	k->ended = true;
	kn_timer_cancel(cl->self, k->timer);
	cl_dial_forget_check(cl);
	kn_rfc3339(cl->checked_at, sizeof(cl->checked_at));
	cl_push_view(cl); /* (its checked_at) */
	answer(cl, k->corr);
	if (!k->busy) {
		free(k);
	}
}

static const char *
stage_of(const client *cl, int phase)
{
	switch (phase) {
	case PH_PING:
		return ("ping");
	case PH_LIST:
		return ("list_tools");
	default:
		return (cl->cfg->sticky ? "connect" : "tool_discovery");
	}
}

static void
retry_tick(kn_actor *self, void *arg)
{
	client *cl = arg;

	cl->chk->timer = 0;
	run(cl);
}

/* An operation failed: retry it, re-dial, or record the failure. */
static void
failed(client *cl, const mcp_error *err)
{
	cl_check *k = cl->chk;

	if (err->kind == MCP_E_GONE && k->phase != PH_DIAL) {
		k->phase = PH_DIAL; /* the session is gone: re-initialize */
		run(cl);
		return;
	}
	if (cl_transient(err) && k->attempt < CHECK_RETRIES) {
		int64_t delay = (int64_t)CHECK_BACKOFF_MS << k->attempt;
		k->attempt++;
		KN_DEBUG("client", "%s: %s failed (%s), retry %d in %lld ms",
		         cl->cfg->name, stage_of(cl, k->phase), err->message,
		         k->attempt, (long long)delay);
		k->timer = kn_timer_add(cl->self, delay, retry_tick, cl);
		return;
	}
	cl_fail(cl, CS_UNSTABLE, stage_of(cl, k->phase), err->message);
	if (cl->cfg->sticky && k->phase != PH_DIAL) {
		cl_dial_start(cl, DIAL_BACKGROUND, 0, MSG_CL_RECONNECT);
	}
	finish(cl);
}

void
cl_check_on_dial(client *cl, const mcp_error *err)
{
	if (cl->chk == NULL) {
		return;
	}
	if (err != NULL) {
		failed(cl, err);
		return;
	}
	finish(cl); /* dial_end already set tools and state */
}

static void
op_done(void *arg, const mcp_error *err, json_t *result)
{
	cl_check *k  = arg;
	client   *cl = k->cl;

	k->busy = false;
	if (k->ended) {
		free(k); /* it ended while this request was out */
		return;
	}
	if (cl->gen != k->gen0) {
		finish(cl); /* the connection changed under us: stale */
		return;
	}
	if (err != NULL) {
		failed(cl, err);
		return;
	}
	if (k->phase == PH_PING) {
		k->phase   = PH_LIST;
		k->attempt = 0;
		run(cl);
		return;
	}
	json_t *tools = cl_era_tools(cl, result);
	cl_set_tools(cl, tools);
	json_decref(tools);
	cl_pass(cl);
	cl_backoff_reset(cl, true);
	finish(cl);
}

static void
run(client *cl)
{
	cl_check    *k = cl->chk;
	mcp_req_opts o = {.timeout_ms = CHECK_TIMEOUT_MS};
	mcp_error    e;
	int          rv;

	if (k->phase == PH_DIAL || !cl->cfg->sticky || !cl_conn_usable(cl)) {
		if (cl->cfg->sticky && cl_backoff_active(cl)) {
			finish(cl); /* the backoff's connect reports */
			return;
		}
		k->phase = PH_DIAL;
		cl_dial_start(cl,
		              cl->cfg->sticky ? DIAL_CHECK : DIAL_DISCOVERY, 0,
		              MSG_NONE);
		return;
	}
	k->gen0 = cl->gen;
	rv      = k->phase == PH_PING
	             ? mcp_ping(cl->live->s, &o, op_done, k, NULL)
	             : mcp_list_tools(cl->live->s, &o, op_done, k, NULL);
	k->busy = rv == 0;
	if (rv != 0) {
		failed(cl,
		       mcp_error_set(&e, MCP_E_LOCAL, "cannot send %s",
		                     stage_of(cl, k->phase)));
	}
}

void
cl_check_start(client *cl, uint64_t corr)
{
	cl_check *k;

	if (cl->state == CS_DISABLED || cl->state == CS_REAUTH ||
	    cl->state == CS_PENDING || cl->chk != NULL || cl->admin_dead) {
		answer(cl, corr); /* quiet, or one is running */
		return;
	}
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		answer(cl, corr);
		return;
	}
	k->cl   = cl;
	k->corr = corr;
	/* 2026-07-28 has no ping: tools/list alone */
	k->phase =
	        cl->cfg->ping && cl->era != MCP_ERA_MODERN ? PH_PING : PH_LIST;
	cl->chk = k;
	cl->m.checks++; /* (its reply takes the counters to the supervisor) */
	run(cl);
}

static void
soon_tick(kn_actor *self, void *arg)
{
	client *cl = arg;

	cl->soon_timer = 0;
	cl_check_soon(cl);
}

void
cl_check_soon(client *cl)
{
	int64_t now  = kn_now_ns();
	int64_t wait = cl->soon_ns + CHECK_SOON_MS * KN_NS_PER_MS - now;

	if (cl->chk != NULL || cl->soon_timer != 0) {
		return; /* one is running, or due */
	}
	if (cl->soon_ns != 0 && wait > 0) {
		cl->soon_timer = kn_timer_add(
		        cl->self, wait / KN_NS_PER_MS + 1, soon_tick, cl);
		return;
	}
	cl->soon_ns = now;
	KN_DEBUG("client", "%s: a call failed at the transport: checking now",
	         cl->cfg->name);
	cl_check_start(cl, 0);
}

void
cl_check_abort(client *cl)
{
	if (cl->chk != NULL) {
		finish(cl);
	}
	if (cl->soon_timer != 0) {
		kn_timer_cancel(cl->self, cl->soon_timer);
		cl->soon_timer = 0;
	}
}
