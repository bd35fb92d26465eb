/*
 * refresh.c - single-flight refresh of a token, and refresh ahead of
 * expiry (the timings are credential.h's).
 *
 * DESIGN: a token has at most one refresh request in flight; every ask
 * that needs it meanwhile joins its waiter list and gets its outcome.
 * Outcomes:
 *   2xx                  the new tokens replace the old ones only if the
 *                        refresh token spent is still the token's
 *                        (compare-and-swap: a reauthorization may have
 *                        replaced it meanwhile), stored durably before
 *                        anyone uses them;
 *   401 or invalid_client, for a dynamically registered client
 *                        the registration is made again (the
 *                        authorization server lost it) and the refresh
 *                        sent once more under it; what that answers
 *                        counts;
 *   401, or 400 with invalid_grant / unauthorized_client
 *                        permanent: the token is needs_reauth (stored),
 *                        its client told;
 *   5xx, network         transient: retried 3 times, 1 s * 2^n apart;
 *   other 4xx            failed (it may pass), the token left as it is.
 * Shared and admin tokens are refreshed ahead of expiry: at 80% of their
 * life, at most 5 minutes early, with +-10% jitter.  An ask refreshes a
 * token within a fifth of its life (at most CR_SKEW_S) of its expiry.
 * Every refresh request of a token starts CR_GAP_MS or more after its
 * previous one ended: one that would come sooner waits on the retry
 * timer, asks joining it, or (an ask for a token still unexpired) is not
 * needed yet - the token is used as it is.  So a token of any lifetime,
 * expires_in 1 included, is refreshed about once per 80% of its life at
 * most, and never twice within CR_GAP_MS.
 * Where a refresh is - waiting, leasing, refreshing, ... - is its state
 * (tokstate.h), moved by cr_tok_enter alone.
 */
#include <assert.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "codec/text.h"

#define AHEAD_MAX_S 300

static void start(cr_self *cr, token *t);

/* A token request's span: one per request sent (a retry is another). */
static void
span_start(cr_self *cr, token *t, const cclient *c, const char *grant)
{
	tr_end(&t->span, "superseded"); /* (never: one request at a time) */
	if ((t->span = tr_start(cr->tracer, "refresh", TR_CLIENT, NULL,
	                        NULL)) != NULL) {
		tr_attr(t->span, "mcpkeep.client",
		        c != NULL ? c->name : t->client_id);
		tr_attr(t->span, "mcpkeep.grant", grant);
		tr_attr(t->span, "mcpkeep.identity_mode", t->mode);
		tr_attr_num(t->span, "mcpkeep.attempt", t->attempt);
	}
}

/* Ends it with the token endpoint's answer (its error code, not its
 * body: never a token). */
static void
span_end(token *t, const oa_reply *r, const char *code)
{
	char why[320];

	if (t->span == NULL) {
		return;
	}
	tr_attr_num(t->span, "http.response.status_code", r->status);
	if (r->err != NULL) {
		snprintf(why, sizeof(why), "%.250s%s%s", r->err->message,
		         code[0] ? ": " : "", code);
	} else if (r->status >= 400) {
		snprintf(why, sizeof(why), "HTTP %ld%s%s", r->status,
		         code[0] ? " " : "", code);
	}
	tr_end(&t->span, r->err != NULL || r->status >= 400 ? why : NULL);
}

static void
answer_all(cr_self *cr, token *t, int status, const char *fmt,
           const char *detail)
{
	tokw *w;

	while ((w = t->waiters) != NULL) {
		t->waiters = w->next;
		if (status == 0) {
			cr_answer_token(cr, t, w->corr);
		} else {
			cr_reply_error(cr, w->corr, status,
			               status == MK_ESTATE ? "needs_reauth"
			                                   : NULL,
			               fmt, t->client_id, detail);
		}
		free(w);
	}
}

/* ---- the state machine (tokstate.h) ----------------------------------- */

static void on_timer(kn_actor *self, void *arg);

const char *
cr_token_broken(const token *t)
{
	tok_facts f = {.state     = t->state,
	               .req       = t->req != NULL,
	               .jag       = t->jag != NULL,
	               .timer     = t->timer != 0,
	               .take      = t->take != NULL,
	               .waiters   = t->waiters != NULL,
	               .prior     = t->prior != NULL,
	               .rereg     = t->rereg,
	               .attempt   = t->attempt,
	               .lease_gen = t->lease_gen};

	return (tok_broken(&f));
}

void
cr_token_assert(const token *t, const char *where)
{
	const char *why = cr_token_broken(t);

	if (why != NULL) {
		fprintf(stderr, "%s: token of %s, %s: %s\n", where,
		        t->client_id, tok_state_name(t->state), why);
		abort();
	}
}

/* Entering IDLE: the refresh is over, whatever it held let go. */
static void
idle(token *t, const char *why)
{
	if (t->req != NULL) {
		t->done_ns = kn_now_ns(); /* it ends here */
		oa_cancel(&t->req);
	}
	tr_end(&t->span, why);
	t->take = NULL; /* its answer, in flight, finds it so */
	cr_lease_release(t);
	text_secret_free(t->prior);
	t->prior = NULL;
	text_secret_free(t->jag);
	t->jag         = NULL;
	t->attempt     = 0;
	t->rereg       = false;
	t->lease_polls = 0;
}

int
cr_tok_enter(token *t, tok_state to, int64_t ms, const char *why)
{
	cr_self *cr = t->cr;

	assert(tok_allowed(t->state, to));
	KN_DEBUG("credential", "%s: token refresh %s -> %s: %s", t->client_id,
	         tok_state_name(t->state), tok_state_name(to), why);
	if (t->timer != 0) {
		kn_timer_cancel(cr->self, t->timer);
		t->timer = 0;
	}
	t->state = to;
	if (to == TOK_IDLE) {
		idle(t, why);
	} else if ((to == TOK_WAITING || to == TOK_PEER || to == TOK_UNSURE) &&
	           ms >= 0 &&
	           (t->timer = kn_timer_add(cr->self, ms, on_timer, t)) == 0) {
		t->state = TOK_IDLE;
		idle(t, "out of memory");
		answer_all(cr, t, MK_ENOMEM, "MCP client %s: %s",
		           "out of memory");
		return (MK_ENOMEM);
	}
	return (0);
}

/* Ends t's refresh: its waiters answered (status 0: with the token; else
 * the error fmt makes of the client and detail), and t IDLE. */
static void
finish(cr_self *cr, token *t, int status, const char *fmt, const char *detail)
{
	answer_all(cr, t, status, fmt, detail);
	(void)cr_tok_enter(t, TOK_IDLE, -1,
	                   detail != NULL ? detail : "answered");
}

void
cr_refresh_stop(token *t)
{
	if (t->ahead != 0) {
		kn_timer_cancel(t->cr->self, t->ahead);
		t->ahead = 0;
	}
	finish(t->cr, t, MK_ECLOSED, "MCP client %s: %s",
	       "the credential was dropped");
}

static void
on_timer(kn_actor *self, void *arg)
{
	token *t = arg;

	assert_token_state(t);
	t->timer = 0;
	if (t->state == TOK_WAITING) {
		start(t->cr, t);
	} else {
		cr_lease_take(t->cr, t); /* PEER, UNSURE: look again */
	}
}

/* ---- when ----------------------------------------------------------- */

void
cr_token_expiry(token *t, int64_t expires_in)
{
	int64_t now = cr_now_ms();

	t->life_ms    = expires_in > 0 ? expires_in * 1000 : 0;
	t->expires_ms = expires_in > 0 ? now + t->life_ms : 0;
	t->refreshed  = now / 1000;
}

void
cr_token_restore(token *t, const json_t *row)
{
	int64_t exp = json_integer_value(json_object_get(row, "expires_at"));
	int64_t at =
	        json_integer_value(json_object_get(row, "last_refreshed"));

	t->expires_ms = exp > 0 ? exp * 1000 : 0;
	t->refreshed  = at;
	t->life_ms    = at > 0 && exp > at ? (exp - at) * 1000 : 0;
}

/* How long before its expiry an ask refreshes t: a fifth of its life, at
 * most CR_SKEW_S; CR_SKEW_S when its life is unknown, and for an exchange
 * result (its TTL is expires_in - 30 s). */
static int64_t
skew_ms(const token *t)
{
	int64_t most = (int64_t)CR_SKEW_S * 1000;

	return (t->ephemeral || t->life_ms <= 0 || t->life_ms / 5 > most
	                ? most
	                : t->life_ms / 5);
}

/* Milliseconds until a refresh request of t may be sent (0: now):
 * CR_GAP_MS after the previous one ended, so the AS sees them at least
 * that far apart whatever the transit. */
static int64_t
gap_left_ms(const token *t)
{
	int64_t left;

	if (t->done_ns == 0 || t->ephemeral) {
		return (0);
	}
	left = CR_GAP_MS - (kn_now_ns() - t->done_ns) / KN_NS_PER_MS;
	return (left > 0 ? left : 0);
}

int64_t
cr_token_use_ms(const token *t)
{
	int64_t left;

	if (t->expires_ms == 0) {
		return (-1);
	}
	left = t->expires_ms - skew_ms(t) - cr_now_ms();
	return (left > 0 ? left : 0);
}

void
cr_token_use(cr_self *cr, token *t, bool force, uint64_t corr)
{
	int64_t now     = cr_now_ms();
	bool    expired = t->access == NULL ||
	        (t->expires_ms != 0 && now >= t->expires_ms);
	bool due = expired || cr_token_use_ms(t) == 0;

	if (!force && (!due || (!expired && gap_left_ms(t) > 0))) {
		cr_answer_token(cr, t, corr); /* good, or refreshed just now */
		return;
	}
	cr_refresh_join(cr, t, corr);
}

static void
ahead_tick(kn_actor *self, void *arg)
{
	token *t = arg;

	t->ahead = 0;
	assert_token_state(t);
	if (t->active && t->state == TOK_IDLE) {
		if (gap_left_ms(t) > 0) {
			cr_refresh_ahead(t->cr, t); /* one just ended */
			return;
		}
		KN_DEBUG("credential", "%s: refreshing ahead of expiry",
		         t->client_id);
		start(t->cr, t);
	}
}

void
cr_refresh_ahead(cr_self *cr, token *t)
{
	cclient *c = cr_client(cr, t->client_id);
	int64_t  life, lead, at;

	if (t->ahead != 0) {
		kn_timer_cancel(cr->self, t->ahead);
		t->ahead = 0;
	}
	if (t->expires_ms == 0 ||
	    (t->refresh == NULL && (c == NULL || !cr_client_credentials(c))) ||
	    !t->active ||
	    (strcmp(t->mode, "shared") != 0 &&
	     strcmp(t->mode, "admin") != 0)) {
		return;
	}
	/* its life; unknown (a stored token): what is left of it */
	life = t->life_ms > 0 ? t->life_ms : t->expires_ms - cr_now_ms();
	lead = life / 5 < AHEAD_MAX_S * 1000 ? life / 5 : AHEAD_MAX_S * 1000;
	if (lead < skew_ms(t)) {
		lead = skew_ms(t); /* before asks would refresh it anyway */
	}
	at = t->expires_ms - lead - cr_now_ms();
	at += (at / 10) * ((rand() % 201) - 100) / 100; /* +-10% */
	if (at < gap_left_ms(t)) {
		at = gap_left_ms(t);
	}
	t->ahead = kn_timer_add(cr->self, at, ahead_tick, t);
}

/* A caller's token (not the shared or the admin's one). */
static bool
is_callers(const token *t)
{
	return (strcmp(t->mode, "shared") != 0 &&
	        strcmp(t->mode, "admin") != 0);
}

/* A caller's credential was refused for good: every waiter is told how
 * to get another (a new OAuth flow, or the exchange's error). */
static void
answer_auth(cr_self *cr, token *t, const cclient *c)
{
	tokw *w;

	while ((w = t->waiters) != NULL) {
		t->waiters = w->next;
		if (c != NULL && c->auth == CFG_AUTH_PER_USER_OAUTH) {
			cr_flow_for(cr, (cclient *)c, t->mode, t->identity,
			            NULL, w->corr, true);
		} else if (c != NULL) {
			json_t *x =
			        json_pack("{s:s}", "exchange_error", t->err);
			cr_auth_reply(
			        cr, w->corr, c, "exchange", x,
			        "the authorization server rejected the exchange of your token");
			json_decref(x);
		} else {
			cr_reply_error(cr, w->corr, MK_ENOENT, NULL,
			               "the MCP client is gone");
		}
		free(w);
	}
}

/* Whether t's requests go under a refresh lease: a cluster's stored
 * token, refreshed (an exchange's result is never stored; the
 * client_credentials grant spends nothing). */
static bool
leased(const cr_self *cr, const token *t, const cclient *c)
{
	return (cr->cluster && c != NULL &&
	        c->auth != CFG_AUTH_TOKEN_EXCHANGE &&
	        !cr_client_credentials(c) && !t->ephemeral);
}

static void on_reply(void *arg, const oa_reply *r);

/* An ID-JAG came (r, the IdP's token exchange answer): it is redeemed
 * at the MCP server's authorization server as a JWT authorization grant
 * (RFC 7523 section 2.1; the enterprise-managed authorization extension,
 * section 5), with the client it knows.  0: sent; else why. */
static int
redeem(cr_self *cr, token *t, cclient *c, const oa_reply *r, char *why,
       size_t len)
{
	json_t     *o    = json_loadb(r->body, r->len, 0, NULL);
	const char *type = cr_str(o, "issued_token_type");
	const char *jag  = cr_str(o, "access_token");
	oa_rules    g;
	oa_send     s    = {.url        = cr_meta_str(c->meta, "token_url"),
	                    .timeout_ms = CR_HTTP_MS,
	                    .guard      = cr_guard(c, "token_url", &g)};
	char       *form = NULL;
	int         rv   = -1;

	if (type == NULL || strcmp(type, CR_TYPE_ID_JAG) != 0 || jag == NULL) {
		snprintf(
		        why, len,
		        "the identity provider's answer is not an ID-JAG (issued_token_type %s)",
		        CR_TYPE_ID_JAG);
	} else if (s.url == NULL || (t->jag = strdup(jag)) == NULL ||
	           oa_form_add(
	                   &form, "grant_type",
	                   "urn:ietf:params:oauth:grant-type:jwt-bearer") !=
	                   0 ||
	           oa_form_add(&form, "assertion", t->jag) != 0 ||
	           cr_client_auth(c, &form, &s) != 0) {
		snprintf(
		        why, len, "%s",
		        s.url == NULL
		                ? "no token endpoint of the MCP server's authorization server is known"
		                : "out of memory");
	} else {
		s.form = form;
		cr->token_requests++;
		rv = oa_fetch(cr->loop, &s, on_reply, t, &t->req);
		if (rv != 0) {
			snprintf(why, len, "out of memory");
		}
	}
	if (o != NULL) { /* the ID-JAG is a credential */
		json_t *v = json_object_get(o, "access_token");
		if (json_is_string(v)) {
			OPENSSL_cleanse((char *)json_string_value(v),
			                strlen(json_string_value(v)));
		}
	}
	json_decref(o);
	if (form != NULL) {
		OPENSSL_cleanse(form, strlen(form));
	}
	free(form);
	if (rv != 0) {
		text_secret_free(t->jag);
		t->jag = NULL;
	}
	return (rv);
}

/* The token endpoint's answer to a refresh (or an exchange). */
static void
on_reply(void *arg, const oa_reply *r)
{
	token   *t     = arg;
	cr_self *cr    = t->cr;
	cclient *c     = cr_client(cr, t->client_id);
	bool     ex    = c != NULL && c->auth == CFG_AUTH_TOKEN_EXCHANGE;
	bool     cc    = c != NULL && cr_client_credentials(c);
	bool     first = t->access == NULL;
	char     code[64], why[256];
	oa_token nt;

	/* its request ended (oa_fetch's holder, t->req, cleared already) */
	assert(t->state == TOK_REFRESHING && t->req == NULL && t->timer == 0 &&
	       t->take == NULL);
	t->done_ns = kn_now_ns();
	oa_error_code(r->body, r->len, code, sizeof(code));
	span_end(t, r, code);
	if (r->err == NULL && ex && cr_id_jag(c) && t->jag == NULL) {
		/* the IdP's answer: an ID-JAG to redeem */
		if (redeem(cr, t, c, r, why, sizeof(why)) == 0) {
			return; /* still refreshing: its second request */
		}
		KN_WARN("credential", "%s: token exchange failed: %s",
		        t->client_id, why);
		answer_all(cr, t, MK_EUPSTREAM,
		           "token exchange for MCP client %s failed: %s", why);
		goto out;
	}
	text_secret_free(t->jag); /* redeemed (or refused) */
	t->jag = NULL;
	if (r->err == NULL) {
		if (oa_token_parse(r->body, r->len, &nt, why, sizeof(why)) !=
		    0) {
			KN_WARN("credential", "%s: token refresh failed: %s",
			        t->client_id, why);
			answer_all(
			        cr, t, MK_EUPSTREAM,
			        "token refresh for MCP client %s failed: %s",
			        why);
			goto out;
		}
		if (!cc &&
		    (t->refresh == NULL || t->prior == NULL ||
		     strcmp(t->refresh, t->prior) != 0)) {
			/* replaced meanwhile (a reauthorization): the newer
			 * tokens win; this answer is dropped */
			oa_token_fini(&nt);
			answer_all(cr, t, 0, NULL, NULL);
			goto out;
		}
		if (t->access != NULL) {
			OPENSSL_cleanse(t->access, strlen(t->access));
			free(t->access);
		}
		t->access = nt.access;
		nt.access = NULL;
		if (nt.refresh != NULL) { /* rotated */
			OPENSSL_cleanse(t->refresh, strlen(t->refresh));
			free(t->refresh);
			t->refresh = nt.refresh;
			nt.refresh = NULL;
		}
		if (nt.scope != NULL) {
			free(t->scopes);
			t->scopes = nt.scope;
			nt.scope  = NULL;
		}
		/* an exchange's result is cached for expires_in - 30 s (5 min
		 * when absent): the skew applied on use gives the 30 s */
		cr_token_expiry(t,
		                nt.expires_in > 0 ? nt.expires_in
		                        : ex      ? 300 + CR_SKEW_S
		                                  : 0);
		oa_token_fini(&nt);
		if (t->lease_gen > 0) {
			cr_lease_put(cr, t); /* written back under the lease */
		} else {
			cr_token_store(cr, t);
		}
		KN_DEBUG("credential", "%s: token %s",
		         c != NULL ? c->name : "?",
		         ex ? "exchanged" : "refreshed");
		answer_all(cr, t, 0, NULL, NULL);
		cr_refresh_ahead(cr, t);
		if (!is_callers(t)) {
			cr_notify(cr, t->client_id,
			          first ? "active" : "refreshed", NULL);
		}
		goto out;
	}
	if (r->status == 400 && strcmp(code, "invalid_grant") == 0 &&
	    leased(cr, t, c) && t->lease_gen == 0) {
		answer_all(
		        cr, t, MK_EUPSTREAM,
		        "token refresh for MCP client %s failed: %s",
		        "refused while the store was away (another node may "
		        "have refreshed it): looking again when it is back");
		cr_lease_unsure(cr, t); /* keeps t->prior, what it spent */
		return;
	}
	if (!ex && c != NULL && !t->rereg && cr_registered(c) &&
	    (r->status == 401 || strcmp(code, "invalid_client") == 0)) {
		/* waiters keep waiting; the refresh token is kept */
		t->rereg = true;
		(void)cr_tok_enter(
		        t, TOK_REREGISTERING, -1,
		        "the registration is lost (invalid_client)");
		if (cr_reregister(c, t) != 0) {
			finish(cr, t, MK_ENOMEM, "MCP client %s: %s",
			       "out of memory");
		}
		return;
	}
	if (is_callers(t) && r->status >= 400 && r->status < 500 &&
	    (ex || r->status == 401 || strcmp(code, "invalid_grant") == 0 ||
	     strcmp(code, "unauthorized_client") == 0)) {
		/* a caller's own credential: refused for this caller only */
		snprintf(t->err, sizeof(t->err), "%s",
		         code[0] ? code : "rejected");
		t->active = false;
		cr_token_store(cr, t);
		answer_auth(cr, t, c);
		goto out;
	}
	if (r->status == 401 ||
	    (r->status == 400 &&
	     (strcmp(code, "invalid_grant") == 0 ||
	      strcmp(code, "unauthorized_client") == 0)) ||
	    (ex && r->status >= 400 && r->status < 500)) {
		snprintf(
		        why, sizeof(why),
		        "%s rejected by the authorization server (HTTP %ld%s%s)",
		        cc ? "the client_credentials grant" : "token refresh",
		        r->status, code[0] ? " " : "", code);
		KN_WARN("credential", "%s: %s: needs reauthorization",
		        t->client_id, why);
		t->active = false;
		cr_token_store(cr, t);
		answer_all(cr, t, MK_ESTATE, "MCP client %s: %s", why);
		cr_notify(cr, t->client_id, "needs_reauth", why);
		goto out;
	}
	if ((r->status >= 500 || r->status == 0) && t->attempt < CR_RETRIES) {
		int64_t ms = (int64_t)CR_RETRY_BASE_MS << t->attempt;
		KN_DEBUG("credential",
		         "%s: token refresh failed (%s); retry in %lld ms",
		         t->client_id, r->err->message, (long long)ms);
		t->attempt++;
		(void)cr_tok_enter(t, TOK_WAITING, ms, "a retry");
		return; /* waiters keep waiting */
	}
	snprintf(why, sizeof(why), "%.180s%s%s", r->err->message,
	         code[0] ? ": " : "", code);
	KN_WARN("credential", "%s: token refresh failed: %s", t->client_id,
	        why);
	answer_all(cr, t, MK_EUPSTREAM,
	           "token refresh for MCP client %s failed: %s", why);
out:
	(void)cr_tok_enter(t, TOK_IDLE, -1, "answered");
}

void
cr_refresh_done(cr_self *cr, token *t, bool adopted)
{
	t->done_ns = kn_now_ns();
	if (!adopted) {
		finish(cr, t, MK_EUPSTREAM,
		       "token refresh for MCP client %s failed: %s",
		       "another node's refresh of it did not finish");
	} else if (!t->active) {
		finish(cr, t, MK_ESTATE, "MCP client %s: %s",
		       "another node's refresh was refused: needs "
		       "reauthorization");
	} else {
		finish(cr, t, 0, NULL, NULL);
		cr_refresh_ahead(cr, t);
		if (!is_callers(t)) {
			/* its client lets go of the header it holds */
			cr_notify(cr, t->client_id, "refreshed", NULL);
		}
	}
}

void
cr_refresh_resume(cr_self *cr, token *t, const char *err)
{
	char why[300];

	if (t->state != TOK_DISCOVERING && t->state != TOK_REREGISTERING) {
		return; /* stopped meanwhile */
	}
	assert_token_state(t);
	if (err == NULL) {
		start(cr, t);
		return;
	}
	if (t->state == TOK_DISCOVERING) {
		/* the discovery an ID-JAG exchange waited for failed: this
		 * ask fails, the next one discovers again */
		KN_WARN("credential", "%s: OAuth discovery failed: %s",
		        t->client_id, err);
		finish(cr, t, MK_EUPSTREAM,
		       "token exchange for MCP client %s failed: %s", err);
		return;
	}
	snprintf(
	        why, sizeof(why),
	        "the authorization server no longer knows this client and registering it again failed: %.200s",
	        err);
	KN_WARN("credential", "%s: %s: needs reauthorization", t->client_id,
	        why);
	t->active = false;
	cr_token_store(cr, t);
	finish(cr, t, MK_ESTATE, "MCP client %s: %s", why);
	if (!is_callers(t)) {
		cr_notify(cr, t->client_id, "needs_reauth", why);
	}
}

/* grant_type=refresh_token, with the client's resource and auth. */
static int
refresh_form(const cclient *c, const char *rt, char **form, oa_send *s)
{
	const char *res = cr_str(c->meta, "resource");

	if (oa_form_add(form, "grant_type", "refresh_token") != 0 ||
	    oa_form_add(form, "refresh_token", rt) != 0 ||
	    (res != NULL && oa_form_add(form, "resource", res) != 0)) {
		return (MK_ENOMEM);
	}
	return (cr_client_auth(c, form, s));
}

/* RFC 8693 token exchange: the subject token, its type,
 * audience, optional scope, and the client's authentication
 * (client_secret_basic, or client_secret_post by auth_method). */
static int
exchange_form(const cclient *c, const char *subject, char **form, oa_send *s)
{
	json_t     *x          = c->exchange;
	bool        jag        = cr_id_jag(c);
	const char *aud        = cr_str(x, "audience");
	const char *st         = cr_str(x, "subject_token_type");
	const char *res        = jag ? cr_meta_str(c->meta, "resource") : NULL;
	const char *id         = cr_str(x, "client_id");
	const char *sec        = cr_str(x, "client_secret");
	const char *how        = cr_str(x, "auth_method");
	json_t     *sc         = json_object_get(x, "scopes");
	char        scope[512] = "";
	size_t      i;
	json_t     *v;

	json_array_foreach(sc, i, v)
	{
		snprintf(scope + strlen(scope), sizeof(scope) - strlen(scope),
		         "%s%s", scope[0] ? " " : "",
		         json_string_value(v) != NULL ? json_string_value(v)
		                                      : "");
	}
	if (oa_form_add(form, "grant_type",
	                "urn:ietf:params:oauth:grant-type:token-exchange") !=
	            0 ||
	    oa_form_add(form, "subject_token", subject) != 0 ||
	    oa_form_add(
	            form, "subject_token_type",
	            st != NULL
	                    ? st
	                    : "urn:ietf:params:oauth:token-type:access_token") !=
	            0 ||
	    (jag &&
	     oa_form_add(form, "requested_token_type", CR_TYPE_ID_JAG) != 0) ||
	    (aud != NULL && oa_form_add(form, "audience", aud) != 0) ||
	    (res != NULL && oa_form_add(form, "resource", res) != 0) ||
	    (scope[0] != '\0' && oa_form_add(form, "scope", scope) != 0)) {
		return (MK_ENOMEM);
	}
	if (jag && aud == NULL) {
		/* the extension: audience is the issuer identifier of the
		 * MCP server's authorization server */
		aud = cr_meta_str(c->meta, "issuer");
		if (aud == NULL || oa_form_add(form, "audience", aud) != 0) {
			return (MK_ENOMEM);
		}
	}
	if (id != NULL && sec != NULL &&
	    (how == NULL || strcmp(how, "client_secret_post") != 0)) {
		s->basic_id   = id;
		s->basic_pass = sec;
		return (0);
	}
	if (id != NULL &&
	    (oa_form_add(form, "client_id", id) != 0 ||
	     (sec != NULL && oa_form_add(form, "client_secret", sec) != 0))) {
		return (MK_ENOMEM);
	}
	return (0);
}

/* grant_type=client_credentials (RFC 6749 section 4.4): the client on
 * its own behalf, with its scope, resource and auth. */
static int
grant_form(const cclient *c, char **form, oa_send *s)
{
	const char *scope = cr_meta_str(c->meta, "scope");
	const char *res   = cr_meta_str(c->meta, "resource");

	if (oa_form_add(form, "grant_type", "client_credentials") != 0 ||
	    (scope != NULL && oa_form_add(form, "scope", scope) != 0) ||
	    (res != NULL && oa_form_add(form, "resource", res) != 0)) {
		return (MK_ENOMEM);
	}
	return (cr_client_auth(c, form, s));
}

/* What a token's request is: its client (or NULL), an exchange or a
 * client_credentials grant (else a refresh), and its endpoint (or
 * NULL: none known). */
typedef struct kind {
	cclient    *c;
	bool        ex, cc;
	const char *url;
} kind;

static kind
kind_of(cr_self *cr, const token *t)
{
	kind k = {.c = cr_client(cr, t->client_id)};

	k.ex  = k.c != NULL && k.c->auth == CFG_AUTH_TOKEN_EXCHANGE;
	k.cc  = k.c != NULL && cr_client_credentials(k.c);
	k.url = k.ex ? cr_str(k.c->exchange, "token_url")
	        : k.c != NULL && k.c->meta != NULL
	        ? cr_str(k.c->meta, "token_url")
	        : NULL;
	return (k);
}

/* Starts a token request (first or a retry): a refresh, an exchange,
 * or a client_credentials grant; a refresh of a shared store's token
 * under its lease (lease.c). */
static void
start(cr_self *cr, token *t)
{
	kind     k = kind_of(cr, t);
	cclient *c = k.c;

	if (k.ex && cr_id_jag(c) && (c->meta == NULL || c->disc != NULL)) {
		/* the ID-JAG's audience and redeemer are discovered first */
		if (cr_disc_token(c, t) != 0) {
			finish(cr, t, MK_ENOMEM, "MCP client %s: %s",
			       "out of memory");
			return;
		}
		if (c->disc != NULL) { /* resumed by cr_refresh_resume */
			(void)cr_tok_enter(t, TOK_DISCOVERING, -1,
			                   "an ID-JAG's endpoints discovered");
			return;
		}
	}
	k = kind_of(cr, t); /* (the discovery may have found it) */
	if ((t->refresh == NULL && !k.cc) || k.url == NULL) {
		finish(cr, t, MK_ESTATE, "MCP client %s: %s",
		       k.url != NULL
		               ? "the token expired and there is no refresh token: reauthorize"
		               : "no token endpoint is known: reauthorize");
		return;
	}
	if (!k.cc && t->prior == NULL &&
	    (t->prior = strdup(t->refresh)) == NULL) {
		finish(cr, t, MK_ENOMEM, "MCP client %s: %s", "out of memory");
		return;
	}
	if (leased(cr, t, c) && (t->lease_gen == 0 || t->attempt > 0)) {
		/* it sends, or another node did; a retry renews the lease
		 * (or, when the store was away, tries again to take one) */
		t->lease_gen = 0;
		cr_lease_take(cr, t);
		return;
	}
	cr_refresh_send(cr, t);
}

void
cr_refresh_send(cr_self *cr, token *t)
{
	kind     k  = kind_of(cr, t);
	cclient *c  = k.c;
	bool     ex = k.ex, cc = k.cc;
	char    *form = NULL;
	oa_send  s    = {.url = k.url, .timeout_ms = CR_HTTP_MS};
	oa_rules g;
	int      rv;

	if (k.url == NULL || (!cc && t->prior == NULL)) {
		finish(cr, t, MK_ESTATE, "MCP client %s: %s",
		       "no token endpoint is known: reauthorize");
		return;
	}
	if (!ex) {
		s.guard = cr_guard(c, "token_url", &g);
	}
	rv = ex      ? exchange_form(c, t->prior, &form, &s)
	        : cc ? grant_form(c, &form, &s)
	             : refresh_form(c, t->prior, &form, &s);
	if (rv == 0) {
		s.form = form;
		if (ex) {
			cr->exchanges++;
		} else {
			cr->refreshes++;
		}
		cr->token_requests++;
		span_start(cr, t, c,
		           ex           ? "token_exchange"
		                   : cc ? "client_credentials"
		                        : "refresh_token");
		rv = oa_fetch(cr->loop, &s, on_reply, t, &t->req);
	}
	if (form != NULL) {
		OPENSSL_cleanse(form, strlen(form));
	}
	free(form);
	if (rv != 0) {
		tr_end(&t->span, "out of memory");
		finish(cr, t, MK_ENOMEM, "MCP client %s: %s", "out of memory");
	} else {
		(void)cr_tok_enter(t, TOK_REFRESHING, -1, "sent");
	}
}

void
cr_refresh_join(cr_self *cr, token *t, uint64_t corr)
{
	tokw   *w = calloc(1, sizeof(*w));
	int64_t left;

	if (w == NULL) {
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	assert_token_state(t);
	w->corr    = corr;
	w->next    = t->waiters;
	t->waiters = w;
	if (t->state != TOK_IDLE) {
		cr->joins++; /* single flight: one request for all */
		return;
	}
	if ((left = gap_left_ms(t)) > 0) {
		/* CR_GAP_MS after the last request */
		(void)cr_tok_enter(t, TOK_WAITING, left, "the gap");
		return;
	}
	start(cr, t);
}
