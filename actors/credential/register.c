/*
 * register.c - who an OAuth client is at its authorization server and
 * how it authenticates there.
 *
 * DESIGN: the client, in the MCP spec's order: a configured client_id;
 * else a client ID metadata document (oauth_config.client_metadata_url
 * or the host's, when the server takes them); else RFC 7591
 * registration.  A
 * registration the server lost (invalid_client) is made again once
 * (cr_reregister); a reauthorization discovers again and keeps the
 * registration only while the issuer is the same (cr_rediscover).  At
 * the token endpoint (every grant): oauth_config.auth_method, else what
 * registration granted, else from token_endpoint_auth_methods_supported
 * (cr_client_auth); private_key_jwt signs a new assertion each time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/credential/disc_impl.h"
#include "actors/kernel/log.h"
#include "codec/text.h"

/* The token_endpoint_auth_method to register with: none (a public client
 * with PKCE) when the authorization server lists it or lists nothing;
 * else client_secret_basic, or client_secret_post when only that is
 * listed. */
const char *
cr_register_method(const disc *d)
{
	json_t *m = json_object_get(d->meta, "auth_methods");

	if (!json_is_array(m) || cr_listed(m, "none")) {
		return ("none");
	}
	return (cr_listed(m, "client_secret_basic") ||
	                        !cr_listed(m, "client_secret_post")
	                ? "client_secret_basic"
	                : "client_secret_post");
}

/* A client ID metadata document (draft-ietf-oauth-client-id-metadata-
 * document): when the authorization server takes them and the operator
 * hosts one (oauth_config.client_metadata_url, else the host's:
 * mk_options.oauth_client_metadata_url, the daemon's
 * server.client_metadata_url), its URL is the client_id of a public
 * client - before dynamic registration (the MCP spec's order).  The URL must
 * be https with a path (http only to a loopback host, for a daemon on this
 * machine).  Returns 1 (it is the client_id), 0 (not used), or -1 (a bad URL:
 * d ended). */
int
cr_cimd_client(disc *d)
{
	const char *own    = cr_meta_str(d->meta, "client_metadata_url");
	const char *u      = own != NULL ? own : d->c->cr->cimd_url;
	char        sch[8] = "";

	if (u == NULL || !json_is_true(json_object_get(d->meta, "cimd"))) {
		return (0);
	}
	if (oa_url_check(u, &(oa_rules) {.nets = ~0u}, sch, sizeof(sch)) !=
	            OA_URL_OK ||
	    strchr(strstr(u, "://") + 3, '/') == NULL) {
		cr_disc_end(
		        d,
		        own != NULL
		                ? "oauth_config.client_metadata_url must be an https URL with a path (http only to a loopback host)"
		                : "the host's client ID metadata document URL (server.client_metadata_url) must be an https URL with a path (http only to a loopback host)");
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
const char *
cr_configured_method(const disc *d)
{
	json_t *m = json_object_get(d->meta, "auth_methods");

	if (cr_meta_str(d->meta, "client_secret") == NULL) {
		return ("none");
	}
	return (json_is_array(m) && !cr_listed(m, "client_secret_basic") &&
	                        cr_listed(m, "client_secret_post")
	                ? "client_secret_post"
	                : "client_secret_basic");
}

/* The method a registration answer o granted: its
 * token_endpoint_auth_method when it is one we speak, else what we asked
 * for (RFC 7591 section 3.2.1: the server may change it). */
const char *
cr_granted_method(const disc *d, json_t *o)
{
	const char *m = cr_meta_str(o, "token_endpoint_auth_method");

	if (m != NULL &&
	    (strcmp(m, "none") == 0 || strcmp(m, "client_secret_basic") == 0 ||
	     strcmp(m, "client_secret_post") == 0)) {
		return (m);
	}
	return (cr_meta_str(o, "client_secret") != NULL
	                ? "client_secret_basic"
	                : cr_register_method(d));
}

/* A token's refresh waits for d (its key, since the token may go
 * meanwhile).  Returns 0 or MK_ENOMEM. */
int
cr_rewait_add(disc *d, const token *t)
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
	if (c->disc == NULL && cr_disc_start(c) == NULL) {
		return (MK_ENOMEM);
	}
	if (c->disc == NULL) {
		return (0); /* resolved at once: c->meta is set */
	}
	return (cr_rewait_add(c->disc, t));
}

bool
cr_registered(const cclient *c)
{
	return (json_is_true(json_object_get(c->meta, "registered")));
}

int
cr_reregister(cclient *c, const token *t)
{
	static const char *const drop[] = {"client_id", "client_secret",
	                                   "auth_method", "registered"};
	json_t                  *n = json_object_get(c->meta, "server_net");
	disc                    *d;

	if (!cr_registered(c)) {
		return (MK_EINVAL); /* configured: nothing to register */
	}
	if (c->disc != NULL) {
		return (t != NULL ? cr_rewait_add(c->disc, t) : 0);
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
	cr_rules_of(c, d->net, &d->rules);
	if (t != NULL && cr_rewait_add(d, t) != 0) {
		cr_disc_free(d);
		return (MK_ENOMEM);
	}
	KN_WARN("credential",
	        "%s: the authorization server does not know this client's registration (invalid_client): registering again",
	        c->name);
	c->disc = d;
	cr_disc_step(d);
	return (0);
}

/* A rediscovery found its issuer (in d->meta): the same as before keeps
 * the registration; another voids it and the client's tokens. */
void
cr_issuer_kept(disc *d)
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
			if (v != NULL &&
			    json_object_get(d->meta, reg[i]) == NULL &&
			    json_is_true(
			            json_object_get(d->prior, "registered"))) {
				json_object_set(d->meta, reg[i], v);
			}
		}
		return;
	}
	KN_WARN("credential",
	        "%s: the authorization server's issuer changed: its registration and tokens are void",
	        c->name);
	cr_void_tokens(
	        c->cr, c,
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
	if ((d = cr_disc_start_held(c)) == NULL) {
		return (MK_ENOMEM);
	}
	d->prior = json_incref(c->meta);
	cr_disc_step(d);
	return (0);
}

/* private_key_jwt (RFC 7523 section 2.2): a client assertion signed
 * with oauth_config.private_key.  Its audience is the authorization
 * server's issuer identifier, as its metadata names it, when the request
 * goes to that metadata's token endpoint (draft-ietf-oauth-rfc7523bis,
 * the MCP client-credentials extension's RFC 7523); else (configured
 * endpoints, no metadata) the URL it is sent to. */
static int
assertion(const cclient *c, const char *id, char **form, const oa_send *s)
{
	const char *iss = cr_meta_str(c->meta, "as_issuer");
	const char *tok = cr_meta_str(c->meta, "token_url");
	const char *aud =
	        iss != NULL && tok != NULL && strcmp(tok, s->url) == 0
	        ? iss
	        : s->url;
	char *jwt = NULL, why[160];
	int   rv  = oa_client_assertion(cr_meta_str(c->meta, "private_key"),
	                                cr_meta_str(c->meta, "private_key_id"),
	                                id, aud, &jwt, why, sizeof(why));

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
