/*
 * conn.c - dials, make-before-break, generations.
 *
 * DESIGN: at most one dial runs per client; a second reconnect (or a check
 * that needs a connection) joins it as a waiter and is answered with its
 * outcome.  A sticky dial opens a new session, initializes, lists the
 * tools, and only then swaps it in: the old connection keeps serving until
 * that moment and is closed once its in-flight calls finish (http, sse).
 * stdio closes the old one first: two copies of a local server may collide.
 * Every swap bumps the generation; a result captured under an older one
 * (a disable, a newer dial) is dropped.  A per-call "dial" is a discovery:
 * connect, list, close.
 *
 * Ending is idempotent: dial_end runs once per dial (freeing the dial's
 * session fails its pending tools/list, whose callback comes back and
 * finds the dial ended), conn_close_all may run again.  A failed sticky
 * connect, or a lost connection, arms the backoff: automatic dials wait
 * for its own retry (full jitter, BACKOFF_BASE_MS doubling to
 * BACKOFF_CAP_MS), an admin's reconnect does not, a passing check resets
 * it (check.c).  No dial runs while the client is disabled or waits for
 * a reauthorization.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "codec/errors.h"

#define BACKOFF_BASE_MS 1000            /* the first retry's ceiling */
#define BACKOFF_CAP_MS  (5 * 60 * 1000) /* and the last one's */

/* ---- reconnect backoff ----------------------------------------------- */

static void
retry_tick(kn_actor *self, void *arg)
{
	client *cl = arg;

	cl->retry_timer = 0;
	cl_dial_start(cl, DIAL_BACKGROUND, 0, MSG_CL_RECONNECT);
}

void
cl_backoff_fail(client *cl)
{
	int64_t ceil = BACKOFF_BASE_MS, ms;

	for (unsigned i = 0; i < cl->fails && ceil < BACKOFF_CAP_MS; i++) {
		ceil *= 2;
	}
	if (ceil > BACKOFF_CAP_MS) {
		ceil = BACKOFF_CAP_MS;
	}
	cl->fails++;
	cl_counted(cl);
	/* full jitter: anywhere in [0, ceil], so many clients that failed
	 * together do not come back together */
	cl->rnd      = cl->rnd * 1103515245u + 12345u;
	ms           = (int64_t)((cl->rnd >> 8) % (uint64_t)(ceil + 1));
	cl->retry_ns = kn_now_ns() + ms * KN_NS_PER_MS;
	if (cl->retry_timer != 0) {
		kn_timer_cancel(cl->self, cl->retry_timer);
	}
	cl->retry_timer = kn_timer_add(cl->self, ms + 1, retry_tick, cl);
	kn_field f[]    = {KN_NUM("attempt", cl->fails),
	                   KN_NUM("next_retry_ms", ms)};
	KN_LOGF(MK_LOG_DEBUG, "client", f,
	        "%s: connect attempt %u failed; next in %lld ms",
	        cl->cfg->name, cl->fails, (long long)ms);
	cl_push_view(cl); /* (next_retry_at) */
}

void
cl_backoff_reset(client *cl, bool forget)
{
	if (forget && cl->fails != 0) {
		cl->fails = 0;
		cl_counted(cl);
	}
	cl->retry_ns = 0;
	if (cl->retry_timer != 0) {
		kn_timer_cancel(cl->self, cl->retry_timer);
		cl->retry_timer = 0;
	}
}

bool
cl_backoff_active(const client *cl)
{
	return (cl->retry_ns != 0 && kn_now_ns() < cl->retry_ns);
}

void
cl_conn_config(const client *cl, mcp_config *mc)
{
	const cfg_client *c = cl->cfg;

	memset(mc, 0, sizeof(*mc));
	mc->type         = c->conn == CFG_HTTP ? MCP_CONN_HTTP
	                : c->conn == CFG_SSE   ? MCP_CONN_SSE
	                                       : MCP_CONN_STDIO;
	mc->url          = c->url;
	mc->headers      = (const char *const *)(cl->hdrs != NULL ? cl->hdrs
	                                                          : c->headers);
	mc->command      = c->command;
	mc->args         = (const char *const *)c->args;
	mc->envs         = (const char *const *)c->envs;
	mc->timeout_ms   = CLIENT_CONNECT_MS;
	mc->client_name  = "mcpkeep";
	mc->capabilities = cl_input_caps(cl);
	mc->era          = cl_era(cl);
}

bool
cl_conn_usable(const client *cl)
{
	return (cl->live != NULL && mcp_session_ready(cl->live->s));
}

void
cl_conn_free(cl_sconn *c)
{
	c->closing = true;
	mcp_session_free(&c->s); /* fails its calls with MCP_E_CANCELLED */
	free(c);
}

static void
unlink_draining(client *cl, cl_sconn *c)
{
	for (cl_sconn **pp = &cl->draining; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

void
cl_conn_call_done(client *cl, cl_sconn *c)
{
	c->inflight--;
	if (c->draining && c->inflight == 0 && !c->closing) {
		unlink_draining(cl, c);
		cl_conn_free(c); /* the old connection's last call finished */
	}
}

void
cl_conn_release(client *cl, cl_sconn *c)
{
	if (c->inflight == 0) {
		cl_conn_free(c);
		return;
	}
	c->draining  = true; /* the last call frees it (call.c) */
	c->next      = cl->draining;
	cl->draining = c;
}

static void relist(client *cl);

static void
relisted(void *arg, const mcp_error *err, json_t *result)
{
	client *cl = arg;

	cl->relisting = false;
	if (err == NULL) {
		json_t *tools = cl_era_tools(cl, result);
		cl_set_tools(cl, tools);
		json_decref(tools);
	}
	/* a failure is the next check's to find */
	if (cl->relist_again) {
		cl->relist_again = false;
		if (err == NULL) {
			relist(cl);
		}
	}
}

/* notifications/tools/list_changed: list again on the live session (the
 * hash decides whether anything changed); a burst of them while one
 * relist is out makes one more, not one each. */
static void
relist(client *cl)
{
	mcp_req_opts o = {.timeout_ms = CLIENT_CONNECT_MS};

	if (cl->relisting) {
		cl->relist_again = true;
		return;
	}
	if (cl->live == NULL ||
	    mcp_list_tools(cl->live->s, &o, relisted, cl, NULL) != 0) {
		return;
	}
	cl->relisting = true;
	cl->m.relists++;
	cl_counted(cl);
}

/* The server's requests on a sticky connection go to the host. */
static int
conn_request(void *arg, mcp_session *s, uint64_t token, const char *method,
             json_t *params)
{
	return (cl_input_request(((cl_sconn *)arg)->cl, s, token, method,
	                         params));
}

static void
conn_request_gone(void *arg, mcp_session *s, uint64_t token)
{
	cl_input_gone(((cl_sconn *)arg)->cl, s, token);
}

/* The server's log messages: the operator's at DEBUG (kn_log makes
 * its control characters spaces). */
void
cl_server_log(void *arg, mcp_session *s, const char *level, const char *logger,
              const char *text)
{
	client *cl = arg;

	KN_DEBUG("client", "%s: server log %s%s%s: %s", cl->cfg->name, level,
	         logger[0] != '\0' ? " " : "", logger, text);
}

static void
conn_log(void *arg, mcp_session *s, const char *level, const char *logger,
         const char *text)
{
	cl_server_log(((cl_sconn *)arg)->cl, s, level, logger, text);
}

/* The live connection is gone: its calls already failed. */
static void
on_conn_event(void *arg, mcp_session *s, mcp_event ev, const mcp_error *err)
{
	cl_sconn *c  = arg;
	client   *cl = c->cl;

	if (ev != MCP_EV_LOST) {
		if (c != cl->live) {
			return;
		}
		if (ev == MCP_EV_TOOLS_CHANGED) {
			relist(cl);
		} else {
			cl_lists_fetch(cl, ev == MCP_EV_PROMPTS_CHANGED,
			               ev == MCP_EV_RESOURCES_CHANGED);
		}
		return;
	}
	if (c->draining) {
		if (c->inflight == 0) {
			unlink_draining(cl, c);
			cl_conn_free(c);
		}
		return;
	}
	if (c != cl->live) {
		return; /* a dial's session: the dial's callbacks report it */
	}
	cl->live = NULL;
	cl->gen++;
	if (c->inflight == 0) {
		cl_conn_free(c);
	} else {
		cl_conn_release(cl, c);
	}
	cl_fail(cl, CS_UNSTABLE, "transport_lost", err->message);
	cl_backoff_fail(cl); /* its reconnect waits: a server that dies as
	                      * soon as it starts is not restarted in a loop */
}

static void
answer_waiters(client *cl, const mcp_error *err)
{
	cl_waiter *w;

	while ((w = cl->waiters) != NULL) {
		cl->waiters = w->next;
		if (w->type == MSG_NONE) {
			cl_check_on_dial(cl, err); /* a check's own dial */
		} else if (w->type == MSG_CL_CHECK) {
			cl_reply_state(cl, w->corr);
		} else if (err == NULL) {
			cl_reply_ok(cl, w->corr);
		} else {
			kn_reply_why(cl->self, w->corr, cl_status_of(err),
			             "cannot connect to MCP client %s: %s",
			             cl->cfg->name, err->message);
		}
		free(w);
	}
}

/* A dial's reason, as spans and log fields name it. */
static const char *
dial_why_name(cl_dwhy why)
{
	static const char *const names[] = {
	        [DIAL_ADD]        = "add",
	        [DIAL_BOOT]       = "boot",
	        [DIAL_RECONNECT]  = "reconnect",
	        [DIAL_BACKGROUND] = "background",
	        [DIAL_CHECK]      = "check",
	        [DIAL_DISCOVERY]  = "discovery",
	};

	return (names[why]);
}

/* The stage a failed dial is recorded under. */
static const char *
stage_of(cl_dwhy why, const mcp_error *err)
{
	return (why == DIAL_DISCOVERY          ? "tool_discovery"
	                : cl_auth_failure(err) ? "credential"
	                                       : "connect");
}

/* Ends the dial: success (tools set) or failure (err set).  Once only:
 * freeing its session fails the session's requests, whose callbacks
 * come back here and find the dial ended. */
static void
dial_end(cl_dial *d, const mcp_error *err, json_t *tools)
{
	client   *cl = d->cl;
	cl_sconn *c  = d->c;
	bool      stale;
	mcp_error why;

	if (d->ended) {
		return;
	}
	d->ended = true;
	stale    = cl->gen != d->gen0 || cl->state == CS_DISABLED ||
	        cl->state == CS_REAUTH;
	kn_timer_cancel(cl->self, d->timer);
	cl->dial = NULL;
	if (err == NULL && stale) {
		err = mcp_error_set(
		        &why, MCP_E_CANCELLED,
		        "superseded: the client changed while connecting");
	}
	int64_t  ms  = (kn_now_ns() - d->t0) / KN_NS_PER_MS;
	kn_field f[] = {KN_STR("why", dial_why_name(d->why)),
	                KN_NUM("duration_ms", ms),
	                KN_STR("message", err != NULL ? err->message : NULL)};
	kn_logf(MK_LOG_DEBUG, "client", f, err != NULL ? 3 : 2,
	        "%s: %s connect %s in %lld ms", cl->cfg->name,
	        dial_why_name(d->why), err != NULL ? "failed" : "done",
	        (long long)ms);
	tr_end(&d->span, err != NULL ? err->message : NULL);
	if (err != NULL) {
		cl_conn_free(c);
		cl_era_forget(cl); /* the next connect asks again */
		if (!(d->why == DIAL_ADD && cl->cfg->sticky)) {
			cl_save_once(cl); /* kept, if unstable */
		}
		if (!stale && !(d->why == DIAL_ADD && cl->cfg->sticky)) {
			if (d->why == DIAL_DISCOVERY) {
				/* silent here: the check records its own
				 * outcome after its retries */
				KN_DEBUG("client", "%s: dial failed: %s",
				         cl->cfg->name, err->message);
			} else {
				/* a failed reconnect is a failed connect,
				 * make-before-break or not */
				cl_fail(cl, CS_UNSTABLE, stage_of(d->why, err),
				        err->message);
			}
			/* before the waiters: a check among them
			 * sees the backoff */
			if (cl->cfg->sticky) {
				cl_backoff_fail(cl);
			}
		}
		answer_waiters(cl, err);
		cl_call_run_queued(cl, err->message);
		free(d);
		cl_recover_on_dial(cl, err);
		return;
	}
	if (cl->cfg->sticky) {
		cl_sconn *old = cl->live;
		c->gen        = ++cl->gen;
		cl->live      = c;
		if (old != NULL) {
			cl_conn_release(cl, old);
		}
	} else if (!cl_lists_adopt(cl, c)) {
		cl_conn_free(c); /* a discovery keeps nothing open (but
		                  * while its prompts and resources come) */
	}
	cl_backoff_reset(cl, false); /* connected: no retry due; the count
	                              * waits for a passing check */
	cl_save_once(cl);            /* the config before its tools */
	cl_set_tools(cl, tools);
	cl_pass(cl);
	if (cl->cfg->sticky) {
		cl_push_view(cl); /* the generation moved */
		cl_lists_fetch(cl, true, true);
	}
	answer_waiters(cl, NULL);
	cl_call_run_queued(cl, NULL);
	free(d);
	cl_recover_on_dial(cl, NULL);
}

static void
dial_listed(void *arg, const mcp_error *err, json_t *result)
{
	cl_dial *d     = arg;
	json_t  *tools = NULL;

	if (err == NULL) {
		cl_era_learn(d->cl, d->c->s);
		tools = cl_era_tools(d->cl, result);
	}
	dial_end(d, err, tools);
	json_decref(tools);
}

static void
dial_ready(void *arg, mcp_session *s, const mcp_error *err)
{
	cl_sconn    *c = arg;
	cl_dial     *d = c->cl->dial;
	mcp_req_opts o = {.timeout_ms = CLIENT_CONNECT_MS};
	mcp_error    e;

	if (err != NULL) {
		dial_end(d, err, NULL);
		return;
	}
	d->listing = true;
	if (mcp_list_tools(s, &o, dial_listed, d, NULL) != 0) {
		dial_end(d,
		         mcp_error_set(&e, MCP_E_LOCAL,
		                       "cannot send tools/list"),
		         NULL);
	}
}

static void
dial_timeout(kn_actor *self, void *arg)
{
	cl_dial  *d = arg;
	mcp_error e;

	dial_end(d,
	         mcp_error_set(&e, MCP_E_TIMEOUT,
	                       "connect timed out after %d ms",
	                       CLIENT_CONNECT_MS),
	         NULL);
}

/* The session's ready callback lands here while it is being dialed, and
 * its events go to the connection it becomes. */
static void
conn_ready(void *arg, mcp_session *s, const mcp_error *err)
{
	cl_sconn *c = arg;

	if (c->cl->dial != NULL && c->cl->dial->c == c) {
		dial_ready(arg, s, err);
	}
}

/* Opens the dial's session. */
static void
dial_open(cl_dial *d)
{
	client      *cl = d->cl;
	mcp_handlers h  = {.ready   = conn_ready,
	                   .event   = on_conn_event,
	                   .arg     = d->c,
	                   .request = conn_request,
	                   .gone    = conn_request_gone,
	                   .log     = conn_log};
	mcp_config   mc;
	mcp_error    e;
	int          rv;

	if (cl_loop(cl, &e) != 0) {
		dial_end(d, &e, NULL);
		return;
	}
	cl_conn_config(cl, &mc);
	mc.listen = cl->cfg->sticky; /* a sticky session hears the server */
	if ((rv = mcp_session_open(&d->c->s, cl->loop, &mc, &h)) != 0) {
		dial_end(d,
		         mcp_error_set(&e, MCP_E_LOCAL,
		                       "cannot open a session (%s)",
		                       codec_strerror(rv)),
		         NULL);
	}
}

/* The credential for a dial came (or did not). */
static void
dial_cred(client *cl, void *arg, uint64_t seq, int status, const char *err)
{
	cl_dial  *d = cl->dial;
	mcp_error e;

	if (d == NULL || d->seq != seq) {
		return; /* that dial is over */
	}
	if (status != 0) {
		dial_end(d, mcp_error_set(&e, MCP_E_AUTH, "%s", err), NULL);
		return;
	}
	dial_open(d);
}

/* No dial now: the client is disabled or needs_reauth (authoritative:
 * nothing connects until an admin acts), or an automatic one waits for
 * the backoff's own connect.  e says why. */
static bool
dial_refused(const client *cl, cl_dwhy why, mcp_error *e)
{
	if (cl->state == CS_DISABLED || cl->state == CS_REAUTH) {
		mcp_error_set(e, MCP_E_CANCELLED, "MCP client %s is %s",
		              cl->cfg->name,
		              cl->state == CS_DISABLED
		                      ? "disabled"
		                      : "waiting for reauthorization");
		return (true);
	}
	if ((why == DIAL_BACKGROUND || why == DIAL_CHECK) &&
	    cl_backoff_active(cl)) {
		mcp_error_set(e, MCP_E_CONNECT,
		              "reconnecting in %lld ms after: %s",
		              (long long)((cl->retry_ns - kn_now_ns()) /
		                          KN_NS_PER_MS),
		              cl->lf_set ? cl->lf_message : "a failure");
		return (true);
	}
	return (false);
}

void
cl_dial_start(client *cl, cl_dwhy why, uint64_t corr, uint32_t type)
{
	mcp_error  e;
	cl_waiter *w;
	cl_dial   *d;

	if (corr != 0 || type == MSG_NONE) {
		if ((w = calloc(1, sizeof(*w))) == NULL) {
			kn_reply_why(cl->self, corr, MK_ENOMEM,
			             "out of memory");
			return;
		}
		w->corr     = corr;
		w->type     = type;
		w->next     = cl->waiters;
		cl->waiters = w;
	}
	if (cl->dial != NULL) {
		/* join it, as what the joiner asked for */
		if (cl->dial->why == DIAL_BACKGROUND &&
		    why != DIAL_BACKGROUND) {
			cl->dial->why = why == DIAL_ADD ? DIAL_RECONNECT : why;
		}
		return;
	}
	if (!cl->cfg->sticky && why == DIAL_CHECK) {
		why = DIAL_DISCOVERY;
	}
	if (dial_refused(cl, why, &e)) {
		answer_waiters(cl, &e);
		cl_call_run_queued(cl, e.message);
		cl_recover_on_dial(cl, &e);
		return;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->c = calloc(1, sizeof(*d->c))) == NULL) {
		free(d);
		answer_waiters(
		        cl, mcp_error_set(&e, MCP_E_LOCAL, "out of memory"));
		return;
	}
	d->cl    = cl;
	d->why   = why;
	d->c->cl = cl;
	if (cl->cfg->sticky && cl->cfg->conn == CFG_STDIO &&
	    cl->live != NULL) {
		cl_sconn *old = cl->live; /* break before make */
		cl->live      = NULL;
		cl->gen++;
		cl_conn_release(cl, old);
	}
	d->gen0  = cl->gen;
	d->seq   = ++cl->dial_seq;
	d->t0    = kn_now_ns();
	cl->dial = d;
	if ((d->span = tr_start(cl->tracer, "connect", TR_CLIENT, NULL,
	                        NULL)) != NULL) {
		tr_attr(d->span, "mcpkeep.client", cl->cfg->name);
		tr_attr(d->span, "mcpkeep.connect.why", dial_why_name(why));
		tr_attr(d->span, "mcpkeep.mode",
		        cl->cfg->sticky ? "sticky" : "per_call");
	}
	d->timer = kn_timer_add(cl->self, CLIENT_CONNECT_MS, dial_timeout, d);
	if (cl_cred_needed(cl)) {
		/* the credential first; the deadline covers it */
		cl_cred_fetch(cl, CRED_USE, dial_cred, NULL, d->seq);
		return;
	}
	dial_open(d);
}

void
cl_dial_forget_check(client *cl)
{
	for (cl_waiter **pp = &cl->waiters; *pp != NULL;) {
		cl_waiter *w = *pp;
		if (w->type == MSG_NONE) {
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
	}
}

void
cl_conn_close_all(client *cl)
{
	mcp_error e;
	cl_sconn *c;

	cl->gen++; /* whatever is in flight is now stale */
	cl_backoff_reset(cl, false);
	cl_recover_abort(cl, "the client was closed");

	if (cl->dial != NULL) {
		dial_end(cl->dial,
		         mcp_error_set(&e, MCP_E_CANCELLED,
		                       "the client was closed"),
		         NULL);
	}
	if ((c = cl->live) != NULL) {
		cl->live = NULL;
		cl_conn_free(c);
	}
	while ((c = cl->draining) != NULL) {
		cl->draining = c->next;
		cl_conn_free(c);
	}
	if ((c = cl->lconn) != NULL) { /* (its lists fail: none waits) */
		cl->lconn = NULL;
		cl_conn_free(c);
	}
}
