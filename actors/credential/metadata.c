/*
 * metadata.c - what OAuth metadata may say, checked before anything it
 * says is fetched, stored or shown (discovery.c fetches it).
 *
 * DESIGN:
 * Where discovered URLs may point (cr_url_ok, with oa_url_check): every URL
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
 * and its issuer must be that one (RFC 8414 section 3.3; a 2025-03-26
 * server's, at its origin, that origin compared as URLs, and why not is
 * logged).  Host names are
 * checked where curl connects (oa_send.guard) for every fetch of a
 * discovered URL, token requests included; what oauth_config names
 * (authorize_url, token_url, registration_url) and the MCP server's URL
 * are trusted as configured.  Errors name the field and what is wrong,
 * never the URL (only the origin of one we built) nor a fetched body.
 *
 * The protected-resource metadata's resource must name the MCP server
 * (RFC 9728 section 3.3); the AS metadata must name its issuer and list
 * S256 (no PKCE, no flow).  A server with no protected-resource metadata
 * (every candidate 4xx) is a 2025-03-26 one (cr_legacy_next).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/credential/disc_impl.h"
#include "actors/kernel/log.h"

/* Whether oauth_config names url as key (trusted as configured). */
bool
cr_configured(const cclient *c, const char *key, const char *url)
{
	const char *v = cr_str(c->oauth, key);

	return (v != NULL && url != NULL && strcmp(v, url) == 0);
}

void
cr_rules_of(const cclient *c, oa_net net, oa_rules *r)
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

	if (cr_configured(c, key, cr_str(c->meta, key))) {
		return (NULL);
	}
	cr_rules_of(c,
	            json_is_integer(n)       ? (oa_net)json_integer_value(n)
	                    : c->url != NULL ? oa_url_net(c->url)
	                                     : OA_NET_PUBLIC,
	            r);
	return (r);
}

/* Whether url, field of source, may be used; else why (never the URL:
 * it could carry anything). */
bool
cr_url_ok(const disc *d, const char *url, const char *field,
          const char *source, char *why, size_t len)
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

/* Whether the JSON array a holds the string s. */
bool
cr_listed(const json_t *a, const char *s)
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

/* A 2025-03-26 server's metadata is at its origin (the authorization
 * base URL): the URL the well-known string was inserted into, so the
 * issuer it names must be that origin (RFC 8414 section 3.3), compared
 * as URLs (RFC 3986 section 6.2.3: the host's case, a default port, an
 * empty path or "/" change nothing).  Else why, also logged with the
 * origin built (never the issuer: metadata could say anything). */
static bool
legacy_issuer_ok(const disc *d, const char *issuer, char *why, size_t len)
{
	char        origin[OA_URL_MAX];
	const char *how;

	if (oa_origin(d->c->url, origin, sizeof(origin)) != 0 ||
	    oa_names_origin(issuer, origin)) {
		return (true);
	}
	how = oa_same_origin(issuer, origin)
	        ? "it has a path, a query or a fragment"
	        : "another scheme, host or port";
	snprintf(
	        why, len,
	        "issuer from the authorization server metadata at the MCP server's origin (2025-03-26) is not that origin (%s): RFC 8414 section 3.3 forbids using it",
	        how);
	KN_WARN("credential",
	        "%s: the authorization server metadata at %s (no protected-resource metadata: 2025-03-26) names another issuer (%s): it must name the origin it is served at (RFC 8414 section 3.3), so it is not used",
	        d->c->name, origin, how);
	return (false);
}

/* Whether the URLs of AS metadata o may be used; else why. */
bool
cr_as_meta_ok(const disc *d, json_t *o, char *why, size_t len)
{
	static const char *fields[] = {"issuer", "authorization_endpoint",
	                               "token_endpoint",
	                               "registration_endpoint"};
	const char        *src      = "the authorization server metadata";
	const char        *iss      = cr_meta_str(d->meta, "issuer");

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *u = cr_meta_str(o, fields[i]);
		if (u != NULL && !cr_url_ok(d, u, fields[i], src, why, len)) {
			return (false);
		}
	}
	if (cr_meta_str(o, "issuer") == NULL) {
		snprintf(why, len, "%s has no issuer", src);
		return (false);
	}
	if (d->legacy) {
		return (legacy_issuer_ok(d, cr_meta_str(o, "issuer"), why,
		                         len));
	}
	if (iss != NULL && !cr_same_issuer(cr_meta_str(o, "issuer"), iss)) {
		snprintf(
		        why, len,
		        "issuer from %s is not the authorization server it was fetched for",
		        src);
		return (false);
	}
	if (!cr_client_credentials(d->c) && !cr_id_jag(d->c) &&
	    !cr_listed(json_object_get(o, "code_challenge_methods_supported"),
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
void
cr_as_meta_keep(disc *d, json_t *o)
{
	json_t *m =
	        json_object_get(o, "token_endpoint_auth_methods_supported");

	if (json_is_array(m)) {
		json_object_set(d->meta, "auth_methods", m);
	}
	/* as the server wrote it: a client assertion's audience */
	json_object_set(d->meta, "as_issuer", json_object_get(o, "issuer"));
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
bool
cr_resource_ok(const disc *d, const char *res, char *why, size_t len)
{
	const char *src = "the protected-resource metadata";

	if (res == NULL) {
		snprintf(why, len, "%s has no resource", src);
		return (false);
	}
	if (!cr_url_ok(d, res, "resource", src, why, len)) {
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
bool
cr_legacy_next(disc *d)
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
		cr_disc_step(d);
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
		cr_disc_step(d);
		return (true);
	}
	return (false);
}
