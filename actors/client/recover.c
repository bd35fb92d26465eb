/*
 * recover.c - tool calls that recover: an auth failure
 * while the runtime believes the credential valid means the upstream and
 * the runtime diverged; a sticky session the server forgot is re-made.
 * Neither ever runs a destructive, non-idempotent tool twice.
 *
 * DESIGN: the classifier decides (auth_failure); non-auth failures never
 * get here.  Then, by mode:
 *   per-call (and per-user)  ForceRefresh -> a fresh connection -> one
 *            retry, synchronously, inside the call's one deadline;
 *   sticky   one background ForceRefresh + make-before-break reconnect
 *            per client (concurrent failures join it, a call that started
 *            on an older connection than the live one just retries on
 *            it); the caller waits for it at most RECOVER_WAIT_MS (capped
 *            by its deadline), then retries once if the tool still exists,
 *            else gets its original error while the reconnect goes on;
 *   session gone (404, 400 "No valid session ID provided", "expect
 *            initialize request"), or the connection cut under a call
 *            that is safe to run twice (cl_cut)  the same, without the
 *            refresh.
 * A 403 whose WWW-Authenticate says error="insufficient_scope" is a
 * step-up instead of a refresh (the credential actor's stepup.c): a
 * per-user caller gets mcp_auth_required with a new authorize_url, an
 * oauth client goes to needs_reauth; nothing is retried (a person must
 * consent first).
 * A retry is skipped when the tool is !readOnly && destructive &&
 * !idempotent (MCP's defaults: an unannotated tool is not retried); the
 * refresh and the reconnect still happen.  The reply says what ran.
 */
#include <ctype.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "transport/oauth.h"

#define RECOVER_WAIT_MS 10000 /* a caller's wait for a shared reconnect */

/* "401" or "403" standing alone: not inside a port, an id, a decimal or
 * a latency. */
static bool
status_word(const char *s)
{
	for (const char *p = s; (p = strpbrk(p, "4")) != NULL; p++) {
		if ((p[1] == '0' && (p[2] == '1' || p[2] == '3')) &&
		    (p == s ||
		     !(isalnum((unsigned char)p[-1]) || p[-1] == ':' ||
		       p[-1] == '.' || p[-1] == '_' || p[-1] == '-')) &&
		    !(isalnum((unsigned char)p[3]) || p[3] == '.' ||
		      p[3] == '_')) {
			return (true);
		}
	}
	return (false);
}

static bool
word(const char *s, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = s; (p = strcasestr(p, w)) != NULL; p++) {
		if ((p == s || !isalpha((unsigned char)p[-1])) &&
		    !isalpha((unsigned char)p[n])) {
			return (true);
		}
	}
	return (false);
}

bool
cl_auth_failure(const mcp_error *e)
{
	return (e != NULL &&
	        (e->kind == MCP_E_AUTH || e->http_status == 401 ||
	         e->http_status == 403 || status_word(e->message) ||
	         word(e->message, "unauthorized") ||
	         word(e->message, "forbidden")));
}

bool
cl_session_gone(const mcp_error *e)
{
	return (e != NULL &&
	        (e->kind == MCP_E_GONE ||
	         strcasestr(e->message, "expect initialize request") != NULL ||
	         strstr(e->message, "No valid session ID provided") != NULL));
}

bool
cl_cut(const mcp_error *e)
{
	return (e != NULL && (e->kind == MCP_E_LOST || e->maybe_ran));
}

json_t *
cl_tool_named(const client *cl, const char *name)
{
	size_t  i;
	json_t *t;

	json_array_foreach(cl->tools, i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n != NULL && strcmp(n, name) == 0) {
			return (t);
		}
	}
	return (NULL);
}

/* Whether c's tool is safe to run twice by its annotations. */
static bool
hints_safe(const client *cl, const cl_call *c)
{
	mcp_hints h;

	if (!cl_tool_hints(cl, c->tool, &h)) {
		return (false); /* unknown: the defaults say destructive */
	}
	return (!(!h.read_only && h.destructive && !h.idempotent));
}

bool
cl_retry_safe(const client *cl, const cl_call *c)
{
	return (c->kind != CL_CALL_TOOL || /* prompts/get, resources/read */
	        c->idem[0] != '\0' || hints_safe(cl, c));
}

void
cl_call_keyed(cl_call *c, mcp_session *s)
{
	const char   *param;
	json_t       *given;
	unsigned char r[16];
	bool          caps;

	if (c->kind != CL_CALL_TOOL || c->idem[0] != '\0' ||
	    hints_safe(c->cl, c)) {
		return;
	}
	param = mcp_tool_key_param(cl_tool_named(c->cl, c->tool));
	caps  = mcp_session_idempotent(s);
	given = param != NULL ? json_object_get(c->args, param) : NULL;
	if (param == NULL && !caps) {
		return;
	}
	if (json_is_string(given) &&
	    json_string_length(given) < sizeof(c->idem)) {
		/* the caller's own: sent as it is */
		snprintf(c->idem, sizeof(c->idem), "%s",
		         json_string_value(given));
	} else if (given != NULL || RAND_bytes(r, sizeof(r)) != 1) {
		return; /* (a key of its own we cannot carry: as it is) */
	} else {
		for (size_t i = 0; i < sizeof(r); i++) {
			snprintf(c->idem + 2 * i, 3, "%02x", r[i]);
		}
		if (param != NULL) {
			json_object_set_new(c->args, param,
			                    json_string(c->idem));
		}
	}
	c->idem_meta = caps;
}

/* Whether c's tool is still the server's (a prompt's or a resource's
 * request goes as it is: the server answers if it has it). */
static bool
still_served(const client *cl, const cl_call *c)
{
	return (c->kind != CL_CALL_TOOL || cl_tool_named(cl, c->tool) != NULL);
}

/* Starts the recovery of c: its original error kept, its path named. */
static bool
begin(client *cl, cl_call *c, const mcp_error *err, const char *path)
{
	if (c->recovered || kn_now_ns() >= c->deadline ||
	    (c->orig = malloc(sizeof(*c->orig))) == NULL) {
		return (false);
	}
	*c->orig     = *err;
	c->recovered = true;
	c->path      = path;
	/* a call refused before its tools/call went out (its per-call
	 * session's initialize, its credential) never ran: sending it after
	 * the refresh runs it once, whatever its annotations */
	c->skipped = c->sent && !cl_retry_safe(cl, c);
	cl->m.recoveries[strcmp(path, "per_call") == 0         ? 0
	                         : strcmp(path, "shared") == 0 ? 1
	                                                       : 2]++;
	cl->m.skipped += c->skipped;
	cl_counted(cl);
	if ((c->rspan = tr_start(cl->tracer, "recover", TR_INTERNAL, NULL,
	                         c->span)) != NULL) {
		tr_attr(c->rspan, "mcpkeep.recovery.path", path);
		tr_attr(c->rspan, "mcpkeep.recovery.after", err->message);
		tr_attr_num(c->rspan, "mcpkeep.retry_skipped", c->skipped);
	}
	kn_field f[] = {KN_STR("tool", c->tool), KN_STR("path", path),
	                KN_STR("message", err->message),
	                KN_STR("trace_id", tr_trace_id(c->span))};
	KN_LOGF(MK_LOG_DEBUG, "client", f, "%s: %s: %s recovery after: %s%s",
	        cl->cfg->name, c->tool, path, err->message,
	        c->skipped ? "; its retry is skipped (not safe to repeat)"
	                   : "");
	return (true);
}

/* The scopes a 403 insufficient_scope challenge (RFC 6750 section 3.1)
 * asks for, into out; false when err is not one (or names none). */
static bool
insufficient_scope(const mcp_error *err, char *out, size_t len)
{
	char code[64];

	return (err->http_status == 403 &&
	        oa_www_param(err->www_authenticate, "error", code,
	                     sizeof(code)) &&
	        strcmp(code, "insufficient_scope") == 0 &&
	        oa_www_param(err->www_authenticate, "scope", out, len) &&
	        out[0] != '\0');
}

/* ---- per-call ---------------------------------------------------------- */

static void
pc_refreshed(client *cl, void *arg, uint64_t seq, int status, const char *err)
{
	cl_call  *c = arg;
	mcp_error e;

	if (status == MK_EAUTH && c->auth != NULL) {
		cl_call_auth_required(cl, c, err); /* a step-up's new flow */
		return;
	}
	if (c->step_scope != NULL) {
		/* a step-up: what it said (needs_reauth, or its limit); an
		 * answer it only joined says nothing new: the 403 */
		cl_call_finish(
		        cl, c,
		        status != 0 && err != NULL
		                ? mcp_error_set(&e, MCP_E_AUTH, "%s", err)
		                : c->orig,
		        NULL);
		return;
	}
	if (c->skipped || status != 0 || kn_now_ns() >= c->deadline) {
		/* the refresh happened (or could not); no retry */
		cl_call_finish(cl, c, c->orig, NULL);
		return;
	}
	cl_call_reopen(cl, c);
}

bool
cl_recover_per_call(client *cl, cl_call *c, const mcp_error *err)
{
	char scope[MCP_WWWAUTH_MAX];
	bool step = insufficient_scope(err, scope, sizeof(scope));

	if (!cl_auth_failure(err) || !begin(cl, c, err, "per_call")) {
		return (false);
	}
	if (step && cl_cred_needed(cl) && cfg_auth_per_user(cl->cfg->auth)) {
		c->step_scope = strdup(scope);
		cl_cred_fetch_user(cl, c, pc_refreshed);
	} else if (step && cl_cred_needed(cl)) {
		free(cl->step_scope);
		cl->step_scope = strdup(scope);
		c->step_scope  = strdup(scope);
		cl_cred_fetch_until(cl, CRED_STEP, pc_refreshed, c, 0,
		                    c->deadline);
	} else if (cfg_auth_per_user(cl->cfg->auth) && cl->cr != NULL) {
		c->force = true; /* this caller's own, refreshed */
		cl_cred_fetch_user(cl, c, pc_refreshed);
	} else if (cl_cred_needed(cl)) {
		/* refreshed only when the credential it failed with is still
		 * the one held: one that changed since (a refresh ahead,
		 * another node's refresh taken) is the answer already */
		cl_cred_fetch_until(
		        cl,
		        cl_cred_sum(cl) != c->cred_sum ? CRED_USE : CRED_FORCE,
		        pc_refreshed, c, 0, c->deadline);
	} else {
		pc_refreshed(cl, c, 0, 0,
		             NULL); /* headers: nothing to refresh */
	}
	return (true);
}

/* ---- sticky ---------------------------------------------------------------
 */

static void
unlink_recovering(client *cl, cl_call *c)
{
	for (cl_call **pp = &cl->recovering; *pp != NULL; pp = &(*pp)->rnext) {
		if (*pp == c) {
			*pp = c->rnext;
			return;
		}
	}
}

static void
wait_over(kn_actor *self, void *arg)
{
	cl_call *c  = arg;
	client  *cl = c->cl;

	c->rtimer = 0;
	unlink_recovering(cl, c);
	/* the reconnect goes on without this caller */
	cl_call_finish(cl, c, c->orig, NULL);
}

static void
rec_refreshed(client *cl, void *arg, uint64_t seq, int status, const char *err)
{
	mcp_error e;

	if (!cl->rec_active || seq != cl->rec_seq) {
		return; /* that recovery was aborted (the client closed) */
	}
	if (status != 0 || cl->state == CS_REAUTH) {
		/* the refresh failed: no new connection to wait for */
		cl_recover_on_dial(
		        cl,
		        mcp_error_set(&e, MCP_E_AUTH, "%s",
		                      err != NULL ? err : "refresh"));
		return;
	}
	cl_dial_start(cl, DIAL_BACKGROUND, 0, MSG_CL_RECONNECT);
}

bool
cl_recover_sticky(client *cl, cl_call *c, const mcp_error *err)
{
	/* a connection cut under a call safe to run twice: re-made, the
	 * call sent again on the new one (an unsafe one: outcome_unknown) */
	bool gone = cl_session_gone(err) ||
	        (cl_cut(err) && c->sent && cl_retry_safe(cl, c));
	bool stale;

	if ((!cl_auth_failure(err) && !gone) ||
	    !begin(cl, c, err, gone ? "session" : "shared")) {
		return (false);
	}
	/* the connection it failed on was replaced since: that recovery
	 * (or reconnect) is what this one would have been */
	stale = c->gen < cl->gen;
	if (c->skipped) {
		/* fails fast; the recovery still runs for the next callers */
		cl_call_finish(cl, c, c->orig, NULL);
		c = NULL;
	} else if (cl_conn_usable(cl) && stale) {
		/* a newer connection is already serving: the race was lost
		 * to a reconnect that is done; retry on it */
		cl_call_rerun(cl, c);
		return (true);
	} else {
		int64_t left   = (c->deadline - kn_now_ns()) / KN_NS_PER_MS;
		c->rnext       = cl->recovering;
		cl->recovering = c;
		c->rtimer      = kn_timer_add(
		             cl->self,
                        left < RECOVER_WAIT_MS ? left : RECOVER_WAIT_MS,
		             wait_over, c);
	}
	if (!cl->rec_active && !stale) {
		char scope[MCP_WWWAUTH_MAX];
		cl->rec_active = true; /* one refresh, one reconnect */
		if (!gone && cl_cred_needed(cl) &&
		    insufficient_scope(err, scope, sizeof(scope))) {
			free(cl->step_scope);
			cl->step_scope = strdup(scope);
			cl_cred_fetch(cl, CRED_STEP, rec_refreshed, NULL,
			              ++cl->rec_seq);
		} else if (!gone && cl_cred_needed(cl)) {
			cl_cred_fetch(cl, CRED_FORCE, rec_refreshed, NULL,
			              ++cl->rec_seq);
		} else {
			cl_dial_start(cl, DIAL_BACKGROUND, 0,
			              MSG_CL_RECONNECT);
		}
	}
	return (true);
}

void
cl_recover_on_dial(client *cl, const mcp_error *err)
{
	cl_call *c;

	cl->rec_active = false;
	while ((c = cl->recovering) != NULL) {
		cl->recovering = c->rnext;
		kn_timer_cancel(cl->self, c->rtimer);
		c->rtimer = 0;
		if (err == NULL && cl_conn_usable(cl) && still_served(cl, c) &&
		    kn_now_ns() < c->deadline) {
			cl_call_rerun(cl, c);
		} else {
			cl_call_finish(cl, c, c->orig, NULL);
		}
	}
}

void
cl_recover_abort(client *cl, const char *why)
{
	cl_call *c;

	while ((c = cl->recovering) != NULL) {
		cl->recovering = c->rnext;
		kn_timer_cancel(cl->self, c->rtimer);
		c->rtimer = 0;
		cl_call_finish(cl, c, c->orig, NULL);
	}
	cl->rec_active = false;
	cl->rec_seq++; /* its refresh, if out, is dropped */
	(void)why;
}
