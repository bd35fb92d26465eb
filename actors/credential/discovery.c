/*
 * discovery.c - a client's OAuth endpoints (configured, or discovered
 * and registered; restored from the store), and the asks for a flow that
 * wait for them (flow.c has the flows).
 *
 * DESIGN: endpoints are resolved once per client and kept (and stored):
 *   configured authorize_url + token_url      -> used as they are;
 *   otherwise discovery, one step at a time:
 *     probe    the MCP server without a credential: its 401's
 *              WWW-Authenticate gives resource_metadata and scope
 *     prm      RFC 9728 metadata (resource_metadata, else path-based,
 *              then root): the authorization server and scopes
 *     as       RFC 8414 / OpenID configuration of that issuer (with the
 *              issuer-path variants): the endpoints
 *   register   RFC 7591, when no client_id is configured.
 * Scopes: configured, else WWW-Authenticate's, else scopes_supported,
 * else none.  resource (RFC 8707): configured, else the metadata's, else
 * the server URL.  Asks that need the endpoints wait for them.
 *
 * Where discovered URLs may point (url_ok, with oa_url_check): every URL
 * taken from a WWW-Authenticate challenge or from metadata
 * (resource_metadata; authorization_servers, resource; issuer,
 * authorization_endpoint, token_endpoint, registration_endpoint) is
 * checked before it is fetched, stored or shown: https, or http to a
 * loopback host, or http when the MCP server's own URL is http; no user
 * name or password; a literal address (or localhost) only of the MCP
 * server's own class (loopback, private, link-local: see oa_net) or a
 * public one.  The class of the MCP server is its URL's literal host, else
 * the address its probe connected to.  resource_metadata must be on the
 * MCP server's origin (RFC 9728: the metadata of this resource); AS
 * metadata comes from the well-known URLs of the issuer the PRM named,
 * and its issuer must be that one (RFC 8414 section 3.3).  Host names are
 * checked where curl connects (oa_send.guard) for every fetch of a
 * discovered URL, token requests included; what oauth_config names
 * (authorize_url, token_url, registration_url) and the MCP server's URL
 * are trusted as configured.  Errors name the field and what is wrong,
 * never the URL (only the origin of one we built) nor a fetched body.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "codec/text.h"

/* An initiate ask waiting for endpoints. */
typedef struct pend {
	uint64_t     corr;
	char        *mode;
	char        *identity;
	bool         auth;  /* answer mcp_auth_required (a caller's flow) */
	bool         token; /* a client_credentials token, not a flow */
	bool         force; /* and fetched again even if not due */
	struct pend *next;
} pend;

/* A token whose refresh waits for a registration made again. */
typedef struct rewait {
	char          *key; /* the token's (looked up again at the end) */
	struct rewait *next;
} rewait;

struct disc {
	cclient *c;                   /* whose */
	int      step;                /* 0 probe, 1 prm, 2 as, 3 register */
	char     urls[4][OA_URL_MAX]; /* candidates of this step */
	int      nurls;               /* how many */
	int      at;                  /* the one being tried */
	char     scope[512];          /* from WWW-Authenticate */
	char     rm[OA_URL_MAX];      /* resource_metadata */
	oa_rules rules;               /* where discovered URLs may point */
	oa_net   net;                 /* the MCP server's address class */
	char     why[200];            /* why the first candidate failed */
	bool     hard;    /* a candidate of this step failed but for a 4xx */
	bool     legacy;  /* no protected-resource metadata (2025-03-26) */
	json_t  *meta;    /* being built */
	oa_req  *req;     /* in flight */
	pend    *waiting; /* asks for a flow */
	rewait  *tokens;  /* refreshes to resume */
	json_t  *prior;   /* a rediscovery: the meta it may keep */
};

static void        disc_step(disc *d);
static const char *register_method(const disc *d);
static disc       *disc_start(cclient *c);
static disc       *disc_start_held(cclient *c);
static void        issuer_kept(disc *d);

/* Whether oauth_config names url as key (trusted as configured). */
static bool
configured(const cclient *c, const char *key, const char *url)
{
	const char *v = cr_str(c->oauth, key);

	return (v != NULL && url != NULL && strcmp(v, url) == 0);
}

static void
rules_of(const cclient *c, oa_net net, oa_rules *r)
{
	char sch[8] = "";

	if (c->url != NULL) {
		(void)oa_url_check(c->url, &(oa_rules) {.http = true}, sch,
		                   sizeof(sch));
	}
	r->http = strcmp(sch, "http") == 0;
	r->nets = net != OA_NET_PUBLIC ? OA_NET_BIT(net) : 0;
}

const oa_rules *
cr_guard(const cclient *c, const char *key, oa_rules *r)
{
	json_t *n = json_object_get(c->meta, "server_net");

	if (configured(c, key, cr_str(c->meta, key))) {
		return (NULL);
	}
	rules_of(c,
	         json_is_integer(n)       ? (oa_net)json_integer_value(n)
	                 : c->url != NULL ? oa_url_net(c->url)
	                                  : OA_NET_PUBLIC,
	         r);
	return (r);
}

/* Whether url, field of source, may be used; else why (never the URL:
 * it could carry anything). */
static bool
url_ok(const disc *d, const char *url, const char *field, const char *source,
       char *why, size_t len)
{
	char       sch[32];
	oa_verdict v = oa_url_check(url, &d->rules, sch, sizeof(sch));

	if (v == OA_URL_OK && strlen(url) >= OA_URL_MAX) {
		snprintf(why, len, "%s from %s is longer than %d bytes", field,
		         source, OA_URL_MAX - 1);
		return (false);
	}
	switch (v) {
	case OA_URL_OK:
		return (true);
	case OA_URL_SCHEME:
		snprintf(why, len, "%s from %s is not an http(s) URL%s%s%s",
		         field, source, sch[0] ? " (scheme " : "", sch,
		         sch[0] ? ")" : "");
		break;
	case OA_URL_HTTP:
		snprintf(
		        why, len,
		        "%s from %s is plain http to a host that is not loopback while the MCP server is https: not allowed",
		        field, source);
		break;
	case OA_URL_USERINFO:
		snprintf(
		        why, len,
		        "%s from %s carries a user name or password: not allowed",
		        field, source);
		break;
	case OA_URL_ADDRESS:
		snprintf(
		        why, len,
		        "%s from %s points to a %s address: not allowed (only when the MCP server is on one too, or oauth_config names the endpoint)",
		        field, source, oa_net_name(oa_url_net(url)));
		break;
	}
	return (false);
}

/* Why an exchange gave no usable answer: its error (no body in it), or
 * what the answer lacked. */
static const char *
reason(const oa_reply *r, const char *lacks)
{
	return (r->err != NULL ? r->err->message : lacks);
}

void
cr_disc_free(disc *d)
{
	if (d == NULL) {
		return;
	}
	oa_cancel(&d->req);
	json_decref(d->meta);
	json_decref(d->prior);
	while (d->tokens != NULL) {
		rewait *w = d->tokens;
		d->tokens = w->next;
		free(w->key);
		free(w);
	}
	while (d->waiting != NULL) {
		pend *p    = d->waiting;
		d->waiting = p->next;
		cr_reply_error(d->c->cr, p->corr, MK_ECLOSED, NULL,
		               "the client went away");
		free(p->mode);
		free(p->identity);
		free(p);
	}
	free(d);
}

void
cr_meta_store(cclient *c)
{
	char   *text = json_dumps(c->meta, JSON_COMPACT);
	json_t *row  = json_pack("{s:s, s:s, s:s}", "id", c->id, "client_id",
	                         c->id, "config", text != NULL ? text : "{}");

	(void)cr_persist(c->cr, "oauth_configs", row, false, NULL, NULL);
	json_decref(row);
	if (text != NULL) {
		OPENSSL_cleanse(text, strlen(text)); /* a client_secret */
		free(text);
	}
}

/* Ends the discovery: endpoints known (err NULL) or not. */
static void
disc_end(disc *d, const char *err)
{
	cclient *c  = d->c;
	cr_self *cr = c->cr;
	pend    *p;

	c->disc = NULL;
	if (err == NULL) {
		json_decref(c->meta);
		c->meta = json_incref(d->meta);
		json_object_set(c->meta, "configured",
		                c->oauth != NULL ? c->oauth : json_null());
		json_object_set_new(c->meta, "server_net",
		                    json_integer((json_int_t)d->net));
		cr_meta_store(c);
		KN_INFO("credential", "%s: OAuth endpoints resolved", c->name);
	} else {
		KN_WARN("credential", "%s: OAuth discovery failed: %s",
		        c->name, err);
	}
	while ((p = d->waiting) != NULL) {
		d->waiting = p->next;
		if (err == NULL && p->token) {
			cr_cc_get(cr, c, p->force, p->corr);
		} else if (err == NULL) {
			cr_make_flow(cr, c, p->mode, p->identity, p->corr,
			             p->auth);
		} else {
			cr_reply_error(
			        cr, p->corr, MK_EUPSTREAM, NULL,
			        "OAuth discovery for MCP client %s failed: %s",
			        c->name, err);
		}
		free(p->mode);
		free(p->identity);
		free(p);
	}
	while (d->tokens != NULL) {
		rewait     *w = d->tokens;
		strmap_ent *e = strmap_get(&cr->tokens, w->key);
		d->tokens     = w->next;
		if (e != NULL) {
			cr_refresh_resume(cr, (token *)e, err);
		}
		free(w->key);
		free(w);
	}
	json_decref(d->meta);
	json_decref(d->prior);
	d->meta = NULL;
	free(d);
}

static void on_disc(void *arg, const oa_reply *r);

static void
disc_fetch(disc *d)
{
	oa_send s    = {.url = d->urls[d->at], .timeout_ms = CR_HTTP_MS};
	char   *json = NULL;

	/* the probe goes to the configured server, as does a configured
	 * registration_url; the rest was discovered */
	if (d->step != 0 &&
	    !(d->step == 3 && configured(d->c, "registration_url", s.url))) {
		s.guard = &d->rules;
	}

	if (d->step == 3) {
		json_t *r = json_pack(
		        "{s:s, s:[s], s:[s,s], s:[s], s:s}", "client_name",
		        "mcpkeep", "redirect_uris", d->c->cr->redirect,
		        "grant_types", "authorization_code", "refresh_token",
		        "response_types", "code", "token_endpoint_auth_method",
		        register_method(d));
		json = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
		json_decref(r);
		s.json = json != NULL ? json : "{}";
	}
	if (oa_fetch(d->c->cr->loop, &s, on_disc, d, &d->req) != 0) {
		free(json);
		disc_end(d, "out of memory");
		return;
	}
	free(json);
}

/* The JSON object of a 2xx answer, or NULL. */
static json_t *
answer_object(const oa_reply *r)
{
	json_t *o;

	if (r->err != NULL) {
		return (NULL);
	}
	o = json_loadb(r->body, r->len, 0, NULL);
	if (!json_is_object(o)) { /* a macro: never give it a call */
		json_decref(o);
		return (NULL);
	}
	return (o);
}

/* Whether the JSON array a holds the string s. */
static bool
listed(const json_t *a, const char *s)
{
	size_t  i;
	json_t *v;

	json_array_foreach(a, i, v)
	{
		if (json_is_string(v) &&
		    strcmp(json_string_value(v), s) == 0) {
			return (true);
		}
	}
	return (false);
}

bool
cr_same_issuer(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);

	na -= na > 0 && a[na - 1] == '/';
	nb -= nb > 0 && b[nb - 1] == '/';
	return (na == nb && strncmp(a, b, na) == 0);
}

/* Whether the URLs of AS metadata o may be used; else why. */
static bool
as_meta_ok(const disc *d, json_t *o, char *why, size_t len)
{
	static const char *fields[] = {"issuer", "authorization_endpoint",
	                               "token_endpoint",
	                               "registration_endpoint"};
	const char        *src      = "the authorization server metadata";
	const char        *iss      = cr_meta_str(d->meta, "issuer");

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *u = cr_meta_str(o, fields[i]);
		if (u != NULL && !url_ok(d, u, fields[i], src, why, len)) {
			return (false);
		}
	}
	if (cr_meta_str(o, "issuer") == NULL) {
		snprintf(why, len, "%s has no issuer", src);
		return (false);
	}
	if (iss != NULL && !cr_same_issuer(cr_meta_str(o, "issuer"), iss)) {
		snprintf(
		        why, len,
		        "issuer from %s is not the authorization server it was fetched for",
		        src);
		return (false);
	}
	if (!cr_client_credentials(d->c) && !cr_id_jag(d->c) &&
	    !listed(json_object_get(o, "code_challenge_methods_supported"),
	            "S256")) {
		snprintf(
		        why, len,
		        "%s does not list S256 in code_challenge_methods_supported: the authorization server does not support PKCE S256, so no authorization is started",
		        src);
		return (false);
	}
	return (true);
}

/* What of AS metadata o the flows need later. */
static void
as_meta_keep(disc *d, json_t *o)
{
	json_t *m =
	        json_object_get(o, "token_endpoint_auth_methods_supported");

	if (json_is_array(m)) {
		json_object_set(d->meta, "auth_methods", m);
	}
	if (json_is_true(json_object_get(
	            o, "authorization_response_iss_parameter_supported"))) {
		json_object_set_new(d->meta, "iss_required", json_true());
	}
	if (json_is_true(json_object_get(
	            o, "client_id_metadata_document_supported"))) {
		json_object_set_new(d->meta, "cimd", json_true());
	}
}

/* Whether the protected-resource metadata's resource names this MCP
 * server (RFC 9728 section 3.3; the MCP authorization spec: MUST); else
 * why. */
static bool
resource_ok(const disc *d, const char *res, char *why, size_t len)
{
	const char *src = "the protected-resource metadata";

	if (res == NULL) {
		snprintf(why, len, "%s has no resource", src);
		return (false);
	}
	if (!url_ok(d, res, "resource", src, why, len)) {
		return (false);
	}
	if (!oa_resource_covers(res, d->c->url)) {
		snprintf(
		        why, len,
		        "resource from %s does not name this MCP server's URL: the metadata is another resource's, so no authorization is started",
		        src);
		return (false);
	}
	return (true);
}

/* A server with no protected-resource metadata speaks the 2025-03-26
 * authorization: its authorization server is at its own origin, and
 * when that has no metadata either, at the default paths /authorize,
 * /token and /register there.  Called when every candidate of a step
 * answered 4xx; returns whether discovery goes on. */
static bool
legacy_next(disc *d)
{
	char origin[OA_URL_MAX];

	if (d->step == 1 && d->rm[0] == '\0' &&
	    oa_origin(d->c->url, origin, sizeof(origin)) == 0) {
		KN_INFO("credential",
		        "%s: no protected-resource metadata: the authorization server is taken to be at the MCP server's origin (2025-03-26)",
		        d->c->name);
		d->legacy = true;
		json_object_set_new(d->meta, "issuer", json_string(origin));
		json_object_set_new(d->meta, "legacy", json_true());
		d->step = 2;
		disc_step(d);
		return (true);
	}
	if (d->step == 2 && d->legacy &&
	    oa_origin(d->c->url, origin, sizeof(origin)) == 0) {
		static const char *const ends[][2] = {
		        {"authorize_url", "/authorize"},
		        {"token_url", "/token"},
		        {"registration_url", "/register"}};
		KN_INFO("credential",
		        "%s: no authorization-server metadata at the MCP server's origin: its default endpoints are used (2025-03-26)",
		        d->c->name);
		for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
			if (json_object_get(d->meta, ends[i][0]) == NULL) {
				char u[OA_URL_MAX];
				snprintf(u, sizeof(u), "%s%s", origin,
				         ends[i][1]);
				json_object_set_new(d->meta, ends[i][0],
				                    json_string(u));
			}
		}
		d->step = 3;
		disc_step(d);
		return (true);
	}
	return (false);
}

/* The token_endpoint_auth_method to register with: none (a public client
 * with PKCE) when the authorization server lists it or lists nothing;
 * else client_secret_basic, or client_secret_post when only that is
 * listed. */
static const char *
register_method(const disc *d)
{
	json_t *m = json_object_get(d->meta, "auth_methods");

	if (!json_is_array(m) || listed(m, "none")) {
		return ("none");
	}
	return (listed(m, "client_secret_basic") ||
	                        !listed(m, "client_secret_post")
	                ? "client_secret_basic"
	                : "client_secret_post");
}

/* A client ID metadata document (draft-ietf-oauth-client-id-metadata-
 * document): when the authorization server takes them and the operator
 * hosts one (oauth_config.client_metadata_url), its URL is the client_id
 * of a public client - before dynamic registration (the MCP spec's
 * order).  The URL must be https with a path (http only to a loopback
 * host, for a daemon on this machine).  Returns 1 (it is the client_id),
 * 0 (not used), or -1 (a bad URL: d ended). */
static int
cimd_client(disc *d)
{
	const char *u      = cr_meta_str(d->meta, "client_metadata_url");
	char        sch[8] = "";

	if (u == NULL || !json_is_true(json_object_get(d->meta, "cimd"))) {
		return (0);
	}
	if (oa_url_check(u, &(oa_rules) {.nets = ~0u}, sch, sizeof(sch)) !=
	            OA_URL_OK ||
	    strchr(strstr(u, "://") + 3, '/') == NULL) {
		disc_end(
		        d,
		        "oauth_config.client_metadata_url must be an https URL with a path (http only to a loopback host)");
		return (-1);
	}
	json_object_set_new(d->meta, "client_id", json_string(u));
	json_object_set_new(d->meta, "auth_method", json_string("none"));
	KN_INFO("credential",
	        "%s: its client ID metadata document is its client_id",
	        d->c->name);
	return (1);
}

/* The method of a configured client: none without a secret; with one,
 * client_secret_basic unless the authorization server lists only
 * client_secret_post of the two (no list: basic, RFC 8414's default). */
static const char *
configured_method(const disc *d)
{
	json_t *m = json_object_get(d->meta, "auth_methods");

	if (cr_meta_str(d->meta, "client_secret") == NULL) {
		return ("none");
	}
	return (json_is_array(m) && !listed(m, "client_secret_basic") &&
	                        listed(m, "client_secret_post")
	                ? "client_secret_post"
	                : "client_secret_basic");
}

/* The method a registration answer o granted: its
 * token_endpoint_auth_method when it is one we speak, else what we asked
 * for (RFC 7591 section 3.2.1: the server may change it). */
static const char *
granted_method(const disc *d, json_t *o)
{
	const char *m = cr_meta_str(o, "token_endpoint_auth_method");

	if (m != NULL &&
	    (strcmp(m, "none") == 0 || strcmp(m, "client_secret_basic") == 0 ||
	     strcmp(m, "client_secret_post") == 0)) {
		return (m);
	}
	return (cr_meta_str(o, "client_secret") != NULL ? "client_secret_basic"
	                                                : register_method(d));
}

static void
on_disc(void *arg, const oa_reply *r)
{
	disc   *d = arg;
	json_t *o;
	char    err[600];

	d->req = NULL;
	switch (d->step) {
	case 0: /* the probe: any answer will do; a 401 says most */
		if (r->ip[0] != '\0') {
			/* a host name: the class of where it is */
			d->net = oa_net_of(r->ip);
			rules_of(d->c, d->net, &d->rules);
		}
		oa_www_param(r->www_auth, "resource_metadata", d->rm,
		             sizeof(d->rm));
		oa_www_param(r->www_auth, "scope", d->scope, sizeof(d->scope));
		if (d->rm[0] != '\0' &&
		    !url_ok(d, d->rm, "resource_metadata",
		            "the WWW-Authenticate challenge", err,
		            sizeof(err))) {
			disc_end(d, err);
			return;
		}
		if (d->rm[0] != '\0' && !oa_same_origin(d->rm, d->c->url)) {
			disc_end(
			        d,
			        "resource_metadata from the WWW-Authenticate challenge is not on the MCP server's origin: not allowed");
			return;
		}
		d->step = 1;
		disc_step(d);
		return;
	case 1:
		if ((o = answer_object(r)) == NULL) {
			break; /* the next candidate */
		}
		{
			json_t *as = json_array_get(
			        json_object_get(o, "authorization_servers"),
			        0);
			json_t *ss = json_object_get(o, "scopes_supported");
			if (!json_is_string(as)) {
				json_decref(o);
				break;
			}
			if (!url_ok(d, json_string_value(as),
			            "authorization_servers",
			            "the protected-resource metadata", err,
			            sizeof(err)) ||
			    !resource_ok(d, cr_meta_str(o, "resource"), err,
			                 sizeof(err))) {
				json_decref(o);
				disc_end(d, err);
				return;
			}
			json_object_set(d->meta, "issuer", as);
			issuer_kept(d);
			if (json_object_get(d->meta, "resource") == NULL) {
				json_object_set(
				        d->meta, "resource",
				        json_object_get(o, "resource"));
			}
			if (json_is_array(ss) && json_array_size(ss) > 0 &&
			    json_object_get(d->meta, "scope") == NULL &&
			    d->scope[0] == '\0') {
				char    buf[512] = "";
				size_t  i;
				json_t *v;
				json_array_foreach(ss, i, v)
				{
					if (json_is_string(v)) {
						snprintf(buf + strlen(buf),
						         sizeof(buf) -
						                 strlen(buf),
						         "%s%s",
						         buf[0] ? " " : "",
						         json_string_value(v));
					}
				}
				json_object_set_new(d->meta, "scope",
				                    json_string(buf));
			}
			json_decref(o);
		}
		d->step = 2;
		disc_step(d);
		return;
	case 2:
		if ((o = answer_object(r)) == NULL ||
		    cr_meta_str(o, "authorization_endpoint") == NULL ||
		    cr_meta_str(o, "token_endpoint") == NULL) {
			json_decref(o);
			break;
		}
		if (!as_meta_ok(d, o, err, sizeof(err))) {
			json_decref(o);
			disc_end(d, err);
			return;
		}
		as_meta_keep(d, o);
		json_object_set(d->meta, "authorize_url",
		                json_object_get(o, "authorization_endpoint"));
		json_object_set(d->meta, "token_url",
		                json_object_get(o, "token_endpoint"));
		if (cr_meta_str(o, "registration_endpoint") != NULL &&
		    json_object_get(d->meta, "registration_url") == NULL) {
			json_object_set(
			        d->meta, "registration_url",
			        json_object_get(o, "registration_endpoint"));
		}
		json_decref(o);
		d->step = 3;
		disc_step(d);
		return;
	case 3:
		if ((o = answer_object(r)) == NULL ||
		    cr_meta_str(o, "client_id") == NULL) {
			char at[OA_URL_MAX];
			if (oa_origin(d->urls[0], at, sizeof(at)) != 0) {
				snprintf(at, sizeof(at), "?");
			}
			snprintf(
			        err, sizeof(err),
			        "dynamic client registration at %.300s failed: %.200s",
			        at,
			        reason(r,
			               "the answer is not a JSON object with a client_id"));
			json_decref(o);
			disc_end(d, err);
			return;
		}
		json_object_set(d->meta, "client_id",
		                json_object_get(o, "client_id"));
		if (cr_meta_str(o, "client_secret") != NULL) {
			json_object_set(d->meta, "client_secret",
			                json_object_get(o, "client_secret"));
		}
		json_object_set_new(d->meta, "auth_method",
		                    json_string(granted_method(d, o)));
		json_object_set_new(d->meta, "registered", json_true());
		json_decref(o);
		d->step = 4;
		disc_step(d);
		return;
	}
	if (r->status < 400 || r->status >= 500) {
		d->hard = true; /* not an answer that it is not there */
	}
	if (d->at == 0) {
		/* the first candidate is the one the spec names: its
		 * failure says most */
		snprintf(
		        d->why, sizeof(d->why), "%.199s",
		        reason(r,
		               d->step == 1
		                       ? "the answer is not a JSON object with authorization_servers"
		                       : "the answer is not a JSON object with authorization_endpoint and token_endpoint"));
	}
	if (++d->at < d->nurls) {
		disc_fetch(d);
		return;
	}
	if (!d->hard && legacy_next(d)) {
		return;
	}
	{
		char at[OA_URL_MAX];
		if (oa_origin(d->urls[0], at, sizeof(at)) != 0) {
			snprintf(at, sizeof(at), "?");
		}
		snprintf(err, sizeof(err), "%s at %.300s: %s",
		         d->step == 1 ? "no protected-resource metadata"
		                      : "no authorization-server metadata",
		         at, d->why);
	}
	disc_end(d, err);
}

/* Runs the next step that has something to do. */
static void
disc_step(disc *d)
{
	cclient *c = d->c;

	d->at   = 0;
	d->hard = false;
	for (;; d->step++) {
		switch (d->step) {
		case 0:
			if (cr_meta_str(d->meta, "authorize_url") != NULL &&
			    cr_meta_str(d->meta, "token_url") != NULL) {
				d->step = 2; /* configured: skip to register */
				continue;
			}
			if (c->url == NULL) {
				disc_end(d, "no server URL to discover from");
				return;
			}
			snprintf(d->urls[0], OA_URL_MAX, "%s", c->url);
			d->nurls = 1;
			disc_fetch(d);
			return;
		case 1:
			if (d->rm[0] != '\0') {
				snprintf(d->urls[0], OA_URL_MAX, "%s", d->rm);
				d->nurls = 1;
			} else {
				d->nurls = oa_prm_urls(c->url, d->urls, 4);
			}
			if (d->nurls == 0) {
				disc_end(d, "the server URL is not http(s)");
				return;
			}
			disc_fetch(d);
			return;
		case 2:
			if (cr_meta_str(d->meta, "authorize_url") != NULL &&
			    cr_meta_str(d->meta, "token_url") != NULL) {
				continue;
			}
			d->nurls = oa_as_meta_urls(
			        cr_meta_str(d->meta, "issuer"), d->urls, 4);
			if (d->nurls == 0) {
				disc_end(
				        d,
				        "the authorization server is not http(s)");
				return;
			}
			disc_fetch(d);
			return;
		case 3:
			if (cr_meta_str(d->meta, "client_id") != NULL) {
				continue;
			}
			if (cr_client_credentials(c) || cr_id_jag(c)) {
				disc_end(
				        d,
				        cr_id_jag(c)
				                ? "enterprise-managed authorization (token_exchange.requested_token_type id-jag) needs oauth_config.client_id: the client the MCP server's authorization server knows"
				                : "oauth_config.grant_type client_credentials needs oauth_config.client_id (and client_secret): a client acting on its own behalf is registered by its operator");
				return;
			}
			switch (cimd_client(d)) {
			case 1:
				continue; /* the document's URL is the id */
			case -1:
				return; /* ended */
			}
			if (cr_meta_str(d->meta, "registration_url") == NULL) {
				disc_end(
				        d,
				        "no client_id is configured, the authorization server takes no client ID metadata document (or oauth_config.client_metadata_url is not set) and offers no registration: register a client with it and set oauth_config.client_id");
				return;
			}
			snprintf(d->urls[0], OA_URL_MAX, "%s",
			         cr_meta_str(d->meta, "registration_url"));
			d->nurls = 1;
			disc_fetch(d);
			return;
		default:
			if (cr_meta_str(d->meta, "client_id") != NULL &&
			    json_object_get(d->meta, "auth_method") == NULL) {
				json_object_set_new(
				        d->meta, "auth_method",
				        json_string(configured_method(d)));
			}
			if (json_object_get(d->meta, "scope") == NULL &&
			    d->scope[0] != '\0') {
				json_object_set_new(d->meta, "scope",
				                    json_string(d->scope));
			}
			if (json_object_get(d->meta, "resource") == NULL &&
			    c->url != NULL) {
				json_object_set_new(d->meta, "resource",
				                    json_string(c->url));
			}
			disc_end(d, NULL);
			return;
		}
	}
}

/* A token's refresh waits for d (its key, since the token may go
 * meanwhile).  Returns 0 or MK_ENOMEM. */
static int
rewait_add(disc *d, const token *t)
{
	rewait *w = calloc(1, sizeof(*w));

	if (w == NULL || (w->key = strdup(t->key)) == NULL) {
		free(w);
		return (MK_ENOMEM);
	}
	w->next   = d->tokens;
	d->tokens = w;
	return (0);
}

int
cr_disc_token(cclient *c, token *t)
{
	if (c->disc == NULL && disc_start(c) == NULL) {
		return (MK_ENOMEM);
	}
	if (c->disc == NULL) {
		return (0); /* resolved at once: c->meta is set */
	}
	if (rewait_add(c->disc, t) != 0) {
		return (MK_ENOMEM);
	}
	t->rewait = true;
	return (0);
}

int
cr_reregister(cclient *c, const token *t)
{
	static const char *const drop[] = {"client_id", "client_secret",
	                                   "auth_method", "registered"};
	json_t                  *n = json_object_get(c->meta, "server_net");
	disc                    *d;

	if (!json_is_true(json_object_get(c->meta, "registered"))) {
		return (MK_EINVAL); /* configured: nothing to register */
	}
	if (c->disc != NULL) {
		return (t != NULL ? rewait_add(c->disc, t) : 0);
	}
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->meta = json_deep_copy(c->meta)) == NULL) {
		free(d);
		return (MK_ENOMEM);
	}
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		json_object_del(d->meta, drop[i]);
	}
	d->c    = c;
	d->net  = json_is_integer(n) ? (oa_net)json_integer_value(n)
	                             : oa_url_net(c->url);
	d->step = 3;
	rules_of(c, d->net, &d->rules);
	if (t != NULL && rewait_add(d, t) != 0) {
		cr_disc_free(d);
		return (MK_ENOMEM);
	}
	KN_WARN("credential",
	        "%s: the authorization server does not know this client's registration (invalid_client): registering again",
	        c->name);
	c->disc = d;
	disc_step(d);
	return (0);
}

/* A rediscovery found its issuer (in d->meta): the same as before keeps
 * the registration; another voids it and the client's tokens. */
static void
issuer_kept(disc *d)
{
	static const char *const reg[] = {"client_id", "client_secret",
	                                  "auth_method", "registered"};
	const char              *was   = cr_meta_str(d->prior, "issuer");
	const char              *now   = cr_meta_str(d->meta, "issuer");
	cclient                 *c     = d->c;

	if (d->prior == NULL || was == NULL || now == NULL) {
		return;
	}
	if (cr_same_issuer(was, now)) {
		/* and the scopes asked for so far (step-ups included) */
		if (json_is_string(json_object_get(d->prior, "scope"))) {
			json_object_set(d->meta, "scope",
			                json_object_get(d->prior, "scope"));
		}
		for (size_t i = 0; i < sizeof(reg) / sizeof(reg[0]); i++) {
			json_t *v = json_object_get(d->prior, reg[i]);
			if (v != NULL && json_object_get(d->meta, reg[i]) == NULL &&
			    json_is_true(json_object_get(d->prior, "registered"))) {
				json_object_set(d->meta, reg[i], v);
			}
		}
		return;
	}
	KN_WARN("credential",
	        "%s: the authorization server's issuer changed: its registration and tokens are void",
	        c->name);
	cr_void_tokens(c->cr, c,
	               "the MCP server's authorization server changed (another issuer): its credentials are void; reauthorize");
}

int
cr_rediscover(cclient *c)
{
	disc *d;

	if (c->meta == NULL || c->disc != NULL ||
	    cr_meta_str(c->meta, "issuer") == NULL) {
		return (0); /* not discovered, or being discovered */
	}
	if ((d = disc_start_held(c)) == NULL) {
		return (MK_ENOMEM);
	}
	d->prior = json_incref(c->meta);
	disc_step(d);
	return (0);
}

/* Starts resolving c's endpoints (the configured parts first). */
static disc *
disc_start(cclient *c)
{
	disc *d = disc_start_held(c);

	if (d != NULL) {
		disc_step(d);
	}
	return (d);
}

/* A discovery of c, set up (the configured parts first) and not yet
 * stepped. */
static disc *
disc_start_held(cclient *c)
{
	disc       *d = calloc(1, sizeof(*d));
	const char *k;
	json_t     *v, *scopes;

	if (d == NULL || (d->meta = json_object()) == NULL) {
		free(d);
		return (NULL);
	}
	d->c   = c;
	d->net = c->url != NULL ? oa_url_net(c->url) : OA_NET_PUBLIC;
	rules_of(c, d->net, &d->rules);
	json_object_foreach(c->oauth, k, v)
	{
		if (json_is_string(v) && *json_string_value(v) != '\0' &&
		    strcmp(k, "scopes") != 0) {
			json_object_set(d->meta, k, v);
		}
	}
	scopes = json_object_get(c->oauth, "scopes");
	if (json_is_array(scopes) && json_array_size(scopes) > 0) {
		char   buf[512] = "";
		size_t i;
		json_array_foreach(scopes, i, v)
		{
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			         "%s%s", buf[0] ? " " : "",
			         json_string_value(v) != NULL
			                 ? json_string_value(v)
			                 : "");
		}
		json_object_set_new(d->meta, "scope", json_string(buf));
	}
	c->disc = d;
	return (d);
}

/* private_key_jwt (RFC 7523 section 2.2): a client assertion signed
 * with oauth_config.private_key, its audience the token endpoint. */
static int
assertion(const cclient *c, const char *id, char **form, const oa_send *s)
{
	char *jwt = NULL, why[160];
	int   rv  = oa_client_assertion(cr_meta_str(c->meta, "private_key"),
	                                cr_meta_str(c->meta, "private_key_id"),
	                                id, s->url, &jwt, why, sizeof(why));

	if (rv != 0) {
		KN_WARN("credential", "%s: %s", c->name, why);
		return (rv);
	}
	if (oa_form_add(form, "client_id", id) != 0 ||
	    oa_form_add(
	            form, "client_assertion_type",
	            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") !=
	            0 ||
	    oa_form_add(form, "client_assertion", jwt) != 0) {
		rv = MK_ENOMEM;
	}
	text_secret_free(jwt);
	return (rv);
}

int
cr_client_auth(const cclient *c, char **form, oa_send *s)
{
	const char *id     = cr_meta_str(c->meta, "client_id");
	const char *secret = cr_meta_str(c->meta, "client_secret");
	const char *method = cr_meta_str(c->meta, "auth_method");

	if (id == NULL) {
		return (0);
	}
	if (method == NULL) {
		method = secret != NULL ? "client_secret_basic" : "none";
	}
	if (secret != NULL && strcmp(method, "client_secret_basic") == 0) {
		s->basic_id   = id;
		s->basic_pass = secret;
		return (0);
	}
	if (strcmp(method, "private_key_jwt") == 0) {
		return (assertion(c, id, form, s));
	}
	if (oa_form_add(form, "client_id", id) != 0 ||
	    (secret != NULL && strcmp(method, "client_secret_post") == 0 &&
	     oa_form_add(form, "client_secret", secret) != 0)) {
		return (MK_ENOMEM);
	}
	return (0);
}

/* Restored endpoint sets wait here until their client registers. */
void
cr_meta_restore(cr_self *cr, json_t *rows)
{
	size_t  i;
	json_t *r;

	json_array_foreach(rows, i, r)
	{
		const char *id   = cr_str(r, "id");
		const char *text = cr_str(r, "config");
		json_t *m = text != NULL ? json_loads(text, 0, NULL) : NULL;

		if (id == NULL || !json_is_object(m)) {
			json_decref(m);
			continue;
		}
		if (cr->saved == NULL) {
			cr->saved = json_object();
		}
		json_object_set_new(cr->saved, id, m);
	}
}

void
cr_disc_wait(cr_self *cr, cclient *c, uint64_t corr, bool force)
{
	pend *p = calloc(1, sizeof(*p));

	if (p == NULL || (c->disc == NULL && disc_start(c) == NULL)) {
		free(p);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	p->corr  = corr;
	p->token = true;
	p->force = force;
	if (c->disc == NULL) {
		free(p); /* resolved at once (all configured) */
		cr_cc_get(cr, c, force, corr);
		return;
	}
	p->next          = c->disc->waiting;
	c->disc->waiting = p;
}

void
cr_flow_for(cr_self *cr, cclient *c, const char *mode, const char *identity,
            uint64_t corr, bool auth)
{
	pend *p;

	if (c->meta != NULL && c->disc == NULL) {
		cr_make_flow(cr, c, mode, identity, corr, auth);
	} else if ((p = calloc(1, sizeof(*p))) == NULL ||
	           (p->mode = strdup(mode)) == NULL ||
	           (p->identity = strdup(identity)) == NULL ||
	           (c->disc == NULL && disc_start(c) == NULL)) {
		if (p != NULL) {
			free(p->mode);
			free(p->identity);
		}
		free(p);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
	} else if (c->disc == NULL) {
		/* resolved at once (all configured): c->meta is set */
		free(p->mode);
		free(p->identity);
		free(p);
		cr_make_flow(cr, c, mode, identity, corr, auth);
	} else {
		p->corr          = corr;
		p->auth          = auth;
		p->next          = c->disc->waiting;
		c->disc->waiting = p;
	}
}
