/*
 * flow.c - authorization-code flows with PKCE S256: a
 * flow made, restored and swept, and completed by its code.  A flow is
 * stored before its authorize URL is given out; it is used once (claimed
 * when its code arrives, deleted after), and expires after 15 minutes.
 * Its client's endpoints are resolved first (discovery.c).
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"

void
cr_flow_free(flow *f)
{
	oa_cancel(&f->req);
	if (f->verifier != NULL) {
		OPENSSL_cleanse(f->verifier, strlen(f->verifier));
	}
	free(f->verifier);
	free(f->client_id);
	free(f->mode);
	free(f->identity);
	free(f->redirect);
	free(f->by);
	free(f);
}

#define FLOW_OF(l) ((flow *)((char *)(l)-offsetof(flow, q)))

/* f is no longer pending: claimed or gone. */
static void
flow_unqueue(cr_self *cr, flow *f)
{
	lru_remove(&cr->flowq, &f->q);
	if (f->counted) {
		cr_flow_count(cr, f->client_id, f->by, false, -1);
		f->counted = false;
	}
}

static void
flow_drop_as(cr_self *cr, flow *f, bool expired)
{
	json_t *key = json_pack("{s:s}", "state", f->state);

	flow_unqueue(cr, f);
	strmap_del(&cr->flows, &f->ent);
	cr->nflows--;
	if (expired) {
		cr_unpersist(cr, "oauth_flows", key);
	} else {
		(void)cr_persist(cr, "oauth_flows", key, true, NULL, NULL);
	}
	json_decref(key);
	cr_flow_free(f);
}

static void
flow_drop(cr_self *cr, flow *f)
{
	flow_drop_as(cr, f, false);
}

static flow *
flow_new(cr_self *cr, const char *client, const char *mode,
         const char *identity, const char *by, const char *verifier,
         const char *state, const char *redirect, int64_t expires_at)
{
	flow *f = calloc(1, sizeof(*f));

	if (f == NULL) {
		return (NULL);
	}
	snprintf(f->state, sizeof(f->state), "%s", state);
	f->client_id  = strdup(client);
	f->mode       = strdup(mode);
	f->identity   = strdup(identity);
	f->verifier   = strdup(verifier);
	f->redirect   = strdup(redirect);
	f->by         = by != NULL ? strdup(by) : NULL;
	f->expires_at = expires_at;
	f->cr         = cr;
	f->ent.key    = f->state;
	if (f->client_id == NULL || f->mode == NULL || f->identity == NULL ||
	    f->verifier == NULL || f->redirect == NULL ||
	    (by != NULL && f->by == NULL) ||
	    strmap_put(&cr->flows, &f->ent) != 0) {
		cr_flow_free(f);
		return (NULL);
	}
	cr->nflows++;
	lru_touch(&cr->flowq, &f->q); /* the newest expires last */
	if ((f->counted = cr_callers_mode(mode))) {
		cr_flow_count(cr, client, by, false, 1);
	}
	return (f);
}

int64_t
cr_flows_sweep(cr_self *cr, int *max)
{
	int64_t   now = cr_now();
	lru_link *l;

	while (*max > 0 && (l = lru_oldest(&cr->flowq)) != NULL &&
	       FLOW_OF(l)->expires_at <= now) {
		cr->swept++;
		(*max)--;
		flow_drop_as(cr, FLOW_OF(l), true);
	}
	l = lru_oldest(&cr->flowq);
	return (l != NULL ? FLOW_OF(l)->expires_at : 0);
}

void
cr_flows_restore(cr_self *cr, json_t *rows)
{
	size_t  i;
	json_t *r;

	cr_rows_by_expiry(rows);
	json_array_foreach(rows, i, r)
	{
		const char *st = cr_str(r, "state");
		const char *cl = cr_str(r, "client_id");
		const char *mo = cr_str(r, "mode");
		const char *id = cr_str(r, "identity");
		const char *ve = cr_str(r, "pkce_verifier");
		const char *re = cr_str(r, "redirect_uri");
		int64_t     exp =
		        json_integer_value(json_object_get(r, "expires_at"));

		if (st == NULL || cl == NULL || mo == NULL || id == NULL ||
		    ve == NULL || re == NULL || strlen(st) != OA_STATE_LEN) {
			KN_WARN("credential",
			        "a stored OAuth flow is incomplete: skipped");
			continue;
		}
		if (exp <= cr_now()) {
			json_t *key = json_pack("{s:s}", "state", st);
			(void)cr_persist(cr, "oauth_flows", key, true, NULL,
			                 NULL);
			json_decref(key);
			continue; /* expired while we were down */
		}
		(void)flow_new(cr, cl, mo, id, NULL, ve, st, re, exp);
	}
}

typedef struct made {
	cr_self *cr;
	uint64_t corr;
	char    *url;
	char     state[OA_STATE_LEN + 1];
	bool     auth;   /* answer mcp_auth_required */
	char    *client; /* its client's id */
} made;

/* The flow is on disk: its authorize URL may go out. */
static void
flow_stored(kn_actor *self, void *arg, int status, const void *data,
            size_t len)
{
	made *m = arg;

	cclient *c = cr_client(m->cr, m->client);

	if (status != 0) {
		cr_reply_error(m->cr, m->corr, MK_ESYS, NULL,
		               "the OAuth flow could not be stored: %s",
		               codec_strerror(status));
	} else if (m->auth && c != NULL) {
		json_t *x = json_pack("{s:s, s:s}", "authorize_url", m->url,
		                      "session_id", m->state);
		cr_auth_reply(
		        m->cr, m->corr, c, "oauth", x,
		        "authorize this MCP client for your identity first");
		json_decref(x);
	} else {
		cr_flow_msg out = {.authorize_url = m->url, .state = m->state};
		kn_reply_msg(kn_actor_kernel(self), m->corr, 0,
		             CODEC_OF(cr_flow_msg, &out));
	}
	free(m->url);
	free(m->client);
	free(m);
}

void
cr_make_flow(cr_self *cr, cclient *c, const char *mode, const char *identity,
             const char *by, uint64_t corr, bool auth)
{
	char        state[OA_STATE_LEN + 1], ver[OA_VERIFIER_LEN + 1];
	char        ch[OA_CHALLENGE_LEN + 1];
	const char *at    = cr_meta_str(c->meta, "authorize_url");
	const char *scope = cr_meta_str(c->meta, "scope");
	const char *res   = cr_meta_str(c->meta, "resource");
	char       *q     = NULL, *url;
	made       *m;
	flow       *f;
	json_t     *row;

	if (cr_callers_mode(mode) &&
	    cr_flow_room(cr, c, by, false, corr) != 0) {
		return; /* answered */
	}
	if (oa_random_state(state) != 0 || oa_pkce(ver, ch) != 0 ||
	    oa_form_add(&q, "response_type", "code") != 0 ||
	    oa_form_add(&q, "client_id", cr_meta_str(c->meta, "client_id")) !=
	            0 ||
	    oa_form_add(&q, "redirect_uri", cr->redirect) != 0 ||
	    oa_form_add(&q, "state", state) != 0 ||
	    oa_form_add(&q, "code_challenge", ch) != 0 ||
	    oa_form_add(&q, "code_challenge_method", "S256") != 0 ||
	    (scope != NULL && oa_form_add(&q, "scope", scope) != 0) ||
	    (res != NULL && oa_form_add(&q, "resource", res) != 0)) {
		free(q);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	size_t n = strlen(at) + strlen(q) + 2;
	if ((url = malloc(n)) == NULL || (m = calloc(1, sizeof(*m))) == NULL) {
		free(url);
		free(q);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	snprintf(url, n, "%s%s%s", at, strchr(at, '?') ? "&" : "?", q);
	free(q);
	f = flow_new(cr, c->id, mode, identity, by, ver, state, cr->redirect,
	             cr_now() + CR_FLOW_TTL_S);
	OPENSSL_cleanse(ver, sizeof(ver));
	if (f == NULL) {
		free(url);
		free(m);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	cr_sweep_arm(cr, CR_SWEEP_BATCH);
	m->cr     = cr;
	m->corr   = corr;
	m->url    = url;
	m->auth   = auth;
	m->client = strdup(c->id);
	memcpy(m->state, state, sizeof(state));
	row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "state",
	                f->state, "client_id", f->client_id, "mode", f->mode,
	                "identity", f->identity, "pkce_verifier", f->verifier,
	                "redirect_uri", f->redirect, "status", "pending",
	                "expires_at", (json_int_t)f->expires_at);
	if (row == NULL ||
	    cr_persist(cr, "oauth_flows", row, false, flow_stored, m) != 0) {
		flow_stored(cr->self, m, MK_ENOMEM, NULL, 0);
	}
	json_decref(row);
	KN_INFO("credential", "%s: OAuth flow started (%s)", c->name, mode);
}

int
cr_on_initiate(kn_actor *self, cr_self *cr, kn_msg *msg, cr_initiate_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	const char *who, *mode, *identity;
	cclient    *c;

	who      = m->client;
	mode     = m->mode != NULL ? m->mode : "shared";
	identity = m->identity != NULL ? m->identity : "";
	c        = who != NULL ? cr_client(cr, who) : NULL;
	if (c == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s",
		               who ? who : "(none given)");
	} else if (c->auth != CFG_AUTH_OAUTH &&
	           c->auth != CFG_AUTH_PER_USER_OAUTH) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses auth_type %s: it has no OAuth flow",
		        c->name, cfg_auth_name(c->auth));
	} else if (cr_client_credentials(c)) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses the client_credentials grant: it has no authorization flow (its token is fetched by the runtime; after a refusal, reconnect it or fix oauth_config)",
		        c->name);
	} else if (c->auth == CFG_AUTH_OAUTH && cr_callers_mode(mode)) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses one shared OAuth token: there is no flow per caller",
		        c->name);
	} else {
		/* per_user_oauth: the admin's bootstrap (discovery) flow, or
		 * a caller's own; a reauthorization looks at the metadata
		 * again (it may have moved) */
		if (m->again && !cr_callers_mode(mode) &&
		    cr_rediscover(c) != 0) {
			cr_reply_error(cr, corr, MK_ENOMEM, NULL,
			               "out of memory");
			return (0);
		}
		cr_flow_for(cr, c,
		            c->auth == CFG_AUTH_PER_USER_OAUTH &&
		                            !cr_callers_mode(mode)
		                    ? "admin"
		                    : mode,
		            cr_callers_mode(mode) ? identity : "",
		            cr_callers_mode(mode) ? m->by : NULL, corr, false);
	}
	return (0);
}

/* ---- completing a flow ----------------------------------------------------
 */

typedef struct done {
	cr_self *cr;
	uint64_t corr;
	char    *client_id;
} done;

static void
token_stored(kn_actor *self, void *arg, int status, const void *data,
             size_t len)
{
	done            *d   = arg;
	cr_client_id_msg out = {.client_id = d->client_id};

	if (status != 0) {
		KN_WARN("credential",
		        "%s: the new token is not on disk yet: %s",
		        d->client_id, codec_strerror(status));
	}
	cr_notify(d->cr, d->client_id, "active",
	          NULL); /* (first: cr_notify) */
	kn_reply_msg(kn_actor_kernel(self), d->corr, 0,
	             CODEC_OF(cr_client_id_msg, &out));
	free(d->client_id);
	free(d);
}

static void
on_code(void *arg, const oa_reply *r)
{
	flow    *f  = arg;
	cr_self *cr = f->cr;
	char     code[64], why[256];
	oa_token nt;
	token   *t;
	done    *d = NULL;

	f->req = NULL;
	if (r->err != NULL) {
		cclient *c = cr_client(cr, f->client_id);
		oa_error_code(r->body, r->len, code, sizeof(code));
		if (c != NULL &&
		    (r->status == 401 ||
		     strcmp(code, "invalid_client") == 0) &&
		    cr_reregister(c, NULL) == 0) {
			/* the code was issued to the lost registration (RFC
			 * 6749 section 4.1.3): it cannot be redeemed by the
			 * new one, but a new authorization can */
			cr_reply_error(
			        cr, f->corr, MK_EINVAL, NULL,
			        "the authorization server no longer knows MCP client %s's registration (invalid_client): it is being registered again; start the authorization again",
			        c->name);
			flow_drop(cr, f);
			return;
		}
		cr_reply_error(
		        cr, f->corr, MK_EINVAL, NULL,
		        "the authorization server refused the code: %s%s%s",
		        r->err->message, code[0] ? ": " : "", code);
		flow_drop(cr, f);
		return;
	}
	if (oa_token_parse(r->body, r->len, &nt, why, sizeof(why)) != 0) {
		cr_reply_error(cr, f->corr, MK_EUPSTREAM, NULL, "%s", why);
		flow_drop(cr, f);
		return;
	}
	if ((t = cr_token(cr, f->client_id, f->mode, f->identity, true)) ==
	            NULL ||
	    (d = calloc(1, sizeof(*d))) == NULL ||
	    (d->client_id = strdup(f->client_id)) == NULL) {
		free(d);
		oa_token_fini(&nt);
		cr_reply_error(cr, f->corr, MK_ENOMEM, NULL, "out of memory");
		flow_drop(cr, f);
		return;
	}
	cr_refresh_stop(t); /* a refresh of the old grant is moot */
	free(t->access);
	free(t->refresh);
	free(t->scopes);
	t->access  = nt.access;
	t->refresh = nt.refresh;
	t->scopes  = nt.scope;
	cr_token_expiry(t, nt.expires_in);
	t->active = true;
	d->cr     = cr;
	d->corr   = f->corr;
	KN_INFO("credential", "%s: authorized (%s)", f->client_id, f->mode);
	flow_drop(cr, f);
	cr_refresh_ahead(cr, t);
	/* durable before the caller hears "authorized" */
	json_t *row = cr_token_row(t);
	if (row == NULL ||
	    cr_persist(cr, "oauth_tokens", row, false, token_stored, d) != 0) {
		token_stored(cr->self, d, MK_ENOMEM, NULL, 0);
	}
	json_decref(row);
}

/* Why the authorization response's iss (RFC 9207) is refused, or NULL:
 * it must be there when the authorization server says it sends it, and
 * be the client's issuer whenever it is there (a mix-up attack: another
 * authorization server's response brought to this flow). */
static const char *
iss_refused(const cclient *c, const char *iss)
{
	const char *want = cr_meta_str(c->meta, "issuer");

	if (iss == NULL || *iss == '\0') {
		return (json_is_true(json_object_get(c->meta, "iss_required"))
		                ? "the authorization response carries no iss, though the authorization server says it sends one (RFC 9207): refused"
		                : NULL);
	}
	return (want != NULL && !cr_same_issuer(iss, want)
	                ? "the authorization response's iss is not this client's authorization server (RFC 9207): refused"
	                : NULL);
}

/* Completes f (this node's, claimed for this callback when clustered)
 * with its code: the checks, then the code exchanged. */
static void
complete_flow(cr_self *cr, uint64_t corr, flow *f, const char *who,
              const char *code, const char *iss)
{
	const char *why;
	char       *form = NULL;
	cclient    *c;

	if (who != NULL && (c = cr_client(cr, who)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s", who);
	} else if (who != NULL && strcmp(c->id, f->client_id) != 0) {
		/* the flow stays: its own client may still complete it */
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "the OAuth flow belongs to another MCP client than %.200s",
		        who);
	} else if (f->expires_at <= cr_now()) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL,
		               "the OAuth flow expired: start it again");
		flow_drop(cr, f);
	} else if (code == NULL || *code == '\0') {
		cr_reply_error(cr, corr, MK_EINVAL, NULL,
		               "the OAuth callback carries no code");
	} else if ((c = cr_client(cr, f->client_id)) == NULL ||
	           c->meta == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "the OAuth flow's MCP client is gone");
		flow_drop(cr, f);
	} else if ((why = iss_refused(c, iss)) != NULL) {
		KN_WARN("credential", "%s: %s", c->name, why);
		cr_reply_error(cr, corr, MK_EINVAL, NULL, "%s", why);
		flow_drop(cr, f); /* its code may be an attacker's */
	} else {
		oa_rules    g;
		oa_send     s   = {.url = cr_meta_str(c->meta, "token_url"),
		                   .timeout_ms = CR_HTTP_MS,
		                   .guard      = cr_guard(c, "token_url", &g)};
		const char *res = cr_meta_str(c->meta, "resource");
		f->claiming     = true; /* single use from here on */
		f->corr         = corr;
		flow_unqueue(cr, f);
		if (oa_form_add(&form, "grant_type", "authorization_code") !=
		            0 ||
		    oa_form_add(&form, "code", code) != 0 ||
		    oa_form_add(&form, "redirect_uri", f->redirect) != 0 ||
		    oa_form_add(&form, "code_verifier", f->verifier) != 0 ||
		    (res != NULL &&
		     oa_form_add(&form, "resource", res) != 0) ||
		    cr_client_auth(c, &form, &s) != 0) {
			cr_reply_error(cr, corr, MK_ENOMEM, NULL,
			               "out of memory");
			flow_drop(cr, f);
		} else {
			s.form = form;
			cr->token_requests++;
			if (oa_fetch(cr->loop, &s, on_code, f, &f->req) != 0) {
				cr_reply_error(cr, corr, MK_ENOMEM, NULL,
				               "out of memory");
				flow_drop(cr, f);
			}
		}
		if (form != NULL) {
			OPENSSL_cleanse(form, strlen(form));
		}
		free(form);
	}
}

/* A callback on a node of a cluster: the flow is claimed in the store
 * first (it may have been started on another node, and it is used once
 * across all of them). */
typedef struct claim {
	cr_self *cr;
	uint64_t corr;
	char     state[OA_STATE_LEN + 1];
	char    *code;   /* the authorization code (secret) */
	char    *client; /* the callback's client, or NULL */
	char    *iss;    /* the callback's iss, or NULL */
} claim;

static void
claim_free(claim *c)
{
	text_secret_free(c->code);
	free(c->client);
	free(c->iss);
	free(c);
}

/* Forgets this node's copy of a flow another node claimed (the row is
 * that node's to delete). */
static void
flow_forget(cr_self *cr, flow *f)
{
	flow_unqueue(cr, f);
	strmap_del(&cr->flows, &f->ent);
	cr->nflows--;
	cr_flow_free(f);
}

/* The endpoints another node discovered for the flow's client, read;
 * then the flow completed. */
static void
on_claim_meta(kn_actor *self, void *arg, int status, const void *data,
              size_t len)
{
	claim   *c  = arg;
	cr_self *cr = c->cr;
	flow    *f  = (flow *)strmap_get(&cr->flows, c->state);

	if (status == 0) {
		cr_meta_take(cr, data, len);
	}
	if (f == NULL || f->claiming) {
		cr_reply_error(cr, c->corr, MK_EINVAL, NULL,
		               "unknown or already used OAuth state");
	} else {
		complete_flow(cr, c->corr, f, c->client, c->code, c->iss);
	}
	claim_free(c);
}

/* Asks for fc's stored endpoints (this node has not discovered them):
 * true when asked. */
static bool
ask_meta(cr_self *cr, claim *c, cclient *fc)
{
	json_t    *k    = json_pack("{s:s}", "id", fc->id);
	char      *text = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL;
	ps_key_msg q    = {.table = "oauth_configs", .key = text};
	bool       ok   = text != NULL &&
	        kn_ask_async_msg(cr->self, cr->ps, MSG_PS_ROW_GET,
	                         CODEC_OF(ps_key_msg, &q), 30000,
	                         on_claim_meta, c) == 0;

	json_decref(k);
	free(text);
	return (ok);
}

static void
on_claimed(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	claim        *c  = arg;
	cr_self      *cr = c->cr;
	flow         *f  = (flow *)strmap_get(&cr->flows, c->state);
	ps_leased_msg m  = {0};
	json_t       *r  = NULL;
	cclient      *who, *fc;

	if (status == 0 && ps_leased_msg_unpack(data, len, &m) == 0 &&
	    m.row != NULL) {
		r = json_loads(m.row, 0, NULL);
	}
	ps_leased_msg_clear(&m);
	if (status != 0) {
		cr_reply_error(cr, c->corr, MK_ESYS, NULL,
		               "the OAuth flow cannot be claimed: %s",
		               "the store is not available");
	} else if (r == NULL) {
		if (f != NULL && !f->claiming) {
			flow_forget(cr, f); /* another node's now */
		}
		cr_reply_error(cr, c->corr, MK_EINVAL, NULL,
		               "unknown or already used OAuth state");
	} else if (c->client != NULL &&
	           (who = cr_client(cr, c->client)) != NULL &&
	           cr_str(r, "client_id") != NULL &&
	           strcmp(who->id, cr_str(r, "client_id")) != 0) {
		/* the flow stays: its own client may still complete it */
		json_object_set_new(r, "status", json_string("pending"));
		(void)cr_persist(cr, "oauth_flows", r, false, NULL, NULL);
		cr_reply_error(
		        cr, c->corr, MK_EINVAL, NULL,
		        "the OAuth flow belongs to another MCP client than %.200s",
		        c->client);
	} else if (f != NULL && f->claiming) {
		cr_reply_error(cr, c->corr, MK_EINVAL, NULL,
		               "unknown or already used OAuth state");
	} else if (f == NULL &&
	           (cr_str(r, "client_id") == NULL ||
	            cr_str(r, "mode") == NULL ||
	            cr_str(r, "identity") == NULL ||
	            cr_str(r, "pkce_verifier") == NULL ||
	            cr_str(r, "redirect_uri") == NULL ||
	            (f = flow_new(cr, cr_str(r, "client_id"),
	                          cr_str(r, "mode"), cr_str(r, "identity"),
	                          NULL, cr_str(r, "pkce_verifier"), c->state,
	                          cr_str(r, "redirect_uri"),
	                          json_integer_value(json_object_get(
	                                  r, "expires_at")))) == NULL)) {
		cr_reply_error(cr, c->corr, MK_EPROTO, NULL,
		               "the OAuth flow's row cannot be read");
	} else if ((fc = cr_client(cr, f->client_id)) != NULL &&
	           fc->meta == NULL && fc->disc == NULL &&
	           ask_meta(cr, c, fc)) {
		c = NULL; /* completed once its endpoints are read */
	} else {
		complete_flow(cr, c->corr, f, c->client, c->code, c->iss);
	}
	if (r != NULL) { /* the verifier is a secret */
		json_t *v = json_object_get(r, "pkce_verifier");
		if (json_is_string(v)) {
			OPENSSL_cleanse((char *)json_string_value(v),
			                strlen(json_string_value(v)));
		}
	}
	json_decref(r);
	if (c != NULL) {
		claim_free(c);
	}
}

int
cr_on_complete(kn_actor *self, cr_self *cr, kn_msg *msg, cr_complete_msg *m)
{
	uint64_t corr = kn_defer(msg);
	flow    *f;
	claim   *c;

	if (cr->cluster && cr->ps != NULL && m->state != NULL &&
	    strlen(m->state) == OA_STATE_LEN &&
	    (c = calloc(1, sizeof(*c))) != NULL) {
		json_t *key = json_pack("{s:s}", "state", m->state);
		c->cr       = cr;
		c->corr     = corr;
		snprintf(c->state, sizeof(c->state), "%s", m->state);
		c->code        = m->code != NULL ? strdup(m->code) : NULL;
		c->client      = m->client != NULL ? strdup(m->client) : NULL;
		c->iss         = m->iss != NULL ? strdup(m->iss) : NULL;
		ps_lease_msg q = {.op    = "claim",
		                  .table = "oauth_flows",
		                  .row   = key != NULL
		                            ? json_dumps(key, JSON_COMPACT)
		                            : NULL};
		json_decref(key);
		if (q.row == NULL ||
		    kn_ask_async_msg(cr->self, cr->ps, MSG_PS_LEASE,
		                     CODEC_OF(ps_lease_msg, &q), 30000,
		                     on_claimed, c) != 0) {
			cr_reply_error(cr, corr, MK_ENOMEM, NULL,
			               "out of memory");
			claim_free(c);
		}
		free(q.row);
		return (0);
	}
	f = m->state != NULL ? (flow *)strmap_get(&cr->flows, m->state) : NULL;
	if (f == NULL || f->claiming) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL,
		               "unknown or already used OAuth state");
	} else {
		complete_flow(cr, corr, f, m->client, m->code, m->iss);
	}
	return (0); /* (the kernel cleanses the code) */
}
