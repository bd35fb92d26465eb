/*
 * discovery.c - a client's OAuth endpoints (configured, or discovered
 * and registered; restored from the store), and the asks for a flow that
 * wait for them (flow.c has the flows; metadata.c says what metadata may
 * say, register.c who the client is and how it authenticates).
 *
 * DESIGN: endpoints are resolved once per client and kept (and stored):
 *   configured authorize_url + token_url      -> used as they are;
 *   otherwise discovery, one step at a time:
 *     probe    an MCP request (POST of a ping) without a credential:
 *              its 401's WWW-Authenticate gives resource_metadata (any
 *              path on the server's origin) and scope
 *     prm      RFC 9728 metadata (resource_metadata, else path-based,
 *              then root): the authorization server and scopes
 *     as       RFC 8414 / OpenID configuration of that issuer (with the
 *              issuer-path variants): the endpoints
 *     legacy   no protected-resource metadata (4xx only): the
 *              2025-03-26 way, AS metadata at the MCP server's origin,
 *              then its /authorize, /token, /register
 *   client     configured, else a client ID metadata document, else
 *              RFC 7591 registration (register.c).
 * Scopes: configured, else WWW-Authenticate's, else scopes_supported,
 * else none.  resource (RFC 8707): configured, else the metadata's, else
 * the server URL.  Asks that need the endpoints wait for them.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/credential/disc_impl.h"
#include "actors/kernel/log.h"
#include "codec/text.h"

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
		cr_pend_free(p);
	}
	free(d);
}

void
cr_pend_free(pend *p)
{
	if (p != NULL) {
		free(p->mode);
		free(p->identity);
		free(p->by);
		free(p);
	}
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
void
cr_disc_end(disc *d, const char *err)
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
			cr_make_flow(cr, c, p->mode, p->identity, p->by,
			             p->corr, p->auth);
		} else {
			cr_reply_error(
			        cr, p->corr, MK_EUPSTREAM, NULL,
			        "OAuth discovery for MCP client %s failed: %s",
			        c->name, err);
		}
		cr_pend_free(p);
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
	    !(d->step == 3 &&
	      cr_configured(d->c, "registration_url", s.url))) {
		s.guard = &d->rules;
	}

	if (d->step == 0) {
		/* an MCP request without a credential (the spec's first
		 * step): a ping, the one request allowed before initialize,
		 * so a server that needs none keeps no session of it */
		s.json = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}";
		s.accept = "application/json, text/event-stream";
	}
	if (d->step == 3) {
		json_t *r = json_pack(
		        "{s:s, s:[s], s:[s,s], s:[s], s:s}", "client_name",
		        "mcpkeep", "redirect_uris", d->c->cr->redirect,
		        "grant_types", "authorization_code", "refresh_token",
		        "response_types", "code", "token_endpoint_auth_method",
		        cr_register_method(d));
		json = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
		json_decref(r);
		s.json = json != NULL ? json : "{}";
	}
	if (oa_fetch(d->c->cr->loop, &s, on_disc, d, &d->req) != 0) {
		free(json);
		cr_disc_end(d, "out of memory");
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
			cr_rules_of(d->c, d->net, &d->rules);
		}
		oa_www_param(r->www_auth, "resource_metadata", d->rm,
		             sizeof(d->rm));
		oa_www_param(r->www_auth, "scope", d->scope, sizeof(d->scope));
		if (d->rm[0] != '\0' &&
		    !cr_url_ok(d, d->rm, "resource_metadata",
		               "the WWW-Authenticate challenge", err,
		               sizeof(err))) {
			cr_disc_end(d, err);
			return;
		}
		if (d->rm[0] != '\0' && !oa_same_origin(d->rm, d->c->url)) {
			cr_disc_end(
			        d,
			        "resource_metadata from the WWW-Authenticate challenge is not on the MCP server's origin: not allowed");
			return;
		}
		d->step = 1;
		cr_disc_step(d);
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
			if (!cr_url_ok(d, json_string_value(as),
			               "authorization_servers",
			               "the protected-resource metadata", err,
			               sizeof(err)) ||
			    !cr_resource_ok(d, cr_meta_str(o, "resource"), err,
			                    sizeof(err))) {
				json_decref(o);
				cr_disc_end(d, err);
				return;
			}
			json_object_set(d->meta, "issuer", as);
			cr_issuer_kept(d);
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
		cr_disc_step(d);
		return;
	case 2:
		if ((o = answer_object(r)) == NULL ||
		    cr_meta_str(o, "authorization_endpoint") == NULL ||
		    cr_meta_str(o, "token_endpoint") == NULL) {
			json_decref(o);
			break;
		}
		if (!cr_as_meta_ok(d, o, err, sizeof(err))) {
			json_decref(o);
			cr_disc_end(d, err);
			return;
		}
		cr_as_meta_keep(d, o);
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
		cr_disc_step(d);
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
			cr_disc_end(d, err);
			return;
		}
		json_object_set(d->meta, "client_id",
		                json_object_get(o, "client_id"));
		if (cr_meta_str(o, "client_secret") != NULL) {
			json_object_set(d->meta, "client_secret",
			                json_object_get(o, "client_secret"));
		}
		json_object_set_new(d->meta, "auth_method",
		                    json_string(cr_granted_method(d, o)));
		json_object_set_new(d->meta, "registered", json_true());
		json_decref(o);
		d->step = 4;
		cr_disc_step(d);
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
	if (!d->hard && cr_legacy_next(d)) {
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
	cr_disc_end(d, err);
}

/* Runs the next step that has something to do. */
void
cr_disc_step(disc *d)
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
				cr_disc_end(d,
				            "no server URL to discover from");
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
				cr_disc_end(d,
				            "the server URL is not http(s)");
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
				cr_disc_end(
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
				cr_disc_end(
				        d,
				        cr_id_jag(c)
				                ? "enterprise-managed authorization (token_exchange.requested_token_type id-jag) needs oauth_config.client_id: the client the MCP server's authorization server knows"
				                : "oauth_config.grant_type client_credentials needs oauth_config.client_id (and client_secret): a client acting on its own behalf is registered by its operator");
				return;
			}
			switch (cr_cimd_client(d)) {
			case 1:
				continue; /* the document's URL is the id */
			case -1:
				return; /* ended */
			}
			if (cr_meta_str(d->meta, "registration_url") == NULL) {
				cr_disc_end(
				        d,
				        "no client_id is configured, the authorization server takes no client ID metadata document (or none is set: server.client_metadata_url, oauth_config.client_metadata_url) and offers no registration: register a client with it and set oauth_config.client_id");
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
				        json_string(cr_configured_method(d)));
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
			cr_disc_end(d, NULL);
			return;
		}
	}
}

/* Starts resolving c's endpoints (the configured parts first). */
disc *
cr_disc_start(cclient *c)
{
	disc *d = cr_disc_start_held(c);

	if (d != NULL) {
		cr_disc_step(d);
	}
	return (d);
}

/* A discovery of c, set up (the configured parts first) and not yet
 * stepped. */
disc *
cr_disc_start_held(cclient *c)
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
	cr_rules_of(c, d->net, &d->rules);
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

	if (p == NULL || (c->disc == NULL && cr_disc_start(c) == NULL)) {
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
            const char *by, uint64_t corr, bool auth)
{
	pend *p;

	if (c->meta != NULL && c->disc == NULL) {
		cr_make_flow(cr, c, mode, identity, by, corr, auth);
	} else if ((p = calloc(1, sizeof(*p))) == NULL ||
	           (p->mode = strdup(mode)) == NULL ||
	           (p->identity = strdup(identity)) == NULL ||
	           (by != NULL && (p->by = strdup(by)) == NULL) ||
	           (c->disc == NULL && cr_disc_start(c) == NULL)) {
		cr_pend_free(p);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
	} else if (c->disc == NULL) {
		/* resolved at once (all configured): c->meta is set */
		cr_pend_free(p);
		cr_make_flow(cr, c, mode, identity, by, corr, auth);
	} else {
		p->corr          = corr;
		p->auth          = auth;
		p->next          = c->disc->waiting;
		c->disc->waiting = p;
	}
}
