/*
 * authspec_test.c - the MCP authorization spec (2025-11-25) variants,
 * each against test/peers/oauth.mjs serving exactly that variant
 * (POST /admin/variant, /admin/metadata), asserting the requests the
 * runtime made (GET /admin/requests: paths, statuses, parameters, client
 * authentication) and the errors of each unhappy path.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oautil.h"
#include "testutil.h"

static char base[64]; /* http://127.0.0.1:<port> */

/* The peer serves this variant and metadata from now on; its counters
 * and request log start again. */
static void
serve(const char *variant, const char *metadata)
{
	as_admin("/admin/variant", variant);
	as_admin("/admin/metadata", metadata);
	as_admin("/admin/reset", "{}");
}

/* "METHOD path status\n" of each logged request from index from on
 * (malloc'd). */
static char *
trail(size_t from)
{
	json_t *a = as_requests();
	size_t  n = 1, i;
	json_t *e;
	char   *s;

	json_array_foreach(a, i, e)
	{
		n += i >= from ? strlen(json_string_value(
		                         json_object_get(e, "path"))) +
		                24
		               : 0;
	}
	CHECK((s = calloc(1, n)) != NULL);
	json_array_foreach(a, i, e)
	{
		if (i >= from) {
			sprintf(s + strlen(s), "%s %s %lld\n",
			        json_string_value(
			                json_object_get(e, "method")),
			        json_string_value(json_object_get(e, "path")),
			        (long long)json_integer_value(
			                json_object_get(e, "status")));
		}
	}
	json_decref(a);
	return (s);
}

/* The trail from the start is want (printed when not). */
static void
trail_is(const char *want)
{
	char *t = trail(0);

	if (strcmp(t, want) != 0) {
		fprintf(stderr, "requests:\n%swanted:\n%s", t, want);
	}
	CHECK(strcmp(t, want) == 0);
	free(t);
}

/* The k-th (from 0) logged request to path (new reference), or NULL. */
static json_t *
request_to(const char *path, int k)
{
	json_t *a = as_requests(), *e, *found = NULL;
	size_t  i;

	json_array_foreach(a, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "path")),
		           path) == 0 &&
		    k-- == 0) {
			found = json_incref(e);
			break;
		}
	}
	json_decref(a);
	return (found);
}

/* Field key of the k-th token request's object obj ("form", or the
 * entry itself when obj is NULL). */
static const char *
token_field(json_t *e, const char *obj, const char *key)
{
	json_t *o = obj != NULL ? json_object_get(e, obj) : e;

	return (json_string_value(json_object_get(o, key)));
}

/* Starts the admin's flow of name: its authorize URL, or NULL with *err
 * (the caller frees both). */
static char *
initiate(mk_runtime *rt, const char *name, int *rc, char **err)
{
	char *url = NULL, *state = NULL;

	*err = NULL;
	*rc  = mk_client_initiate_verification(rt, name, &url, &state, err);
	mk_free(state);
	return (url);
}

/* Initiating name's flow fails with MK_EUPSTREAM and exactly "OAuth
 * discovery for MCP client <name> failed: <why>"; no authorization
 * starts. */
static void
discovery_refused(mk_runtime *rt, const char *name, const char *why)
{
	char  want[512], *err = NULL;
	int   rc;
	char *url = initiate(rt, name, &rc, &err);

	snprintf(want, sizeof(want),
	         "OAuth discovery for MCP client %s failed: %s", name, why);
	if (rc != MK_EUPSTREAM || err == NULL || strcmp(err, want) != 0) {
		fprintf(stderr, "%s: rc %d: %s\nwanted: %s\n", name, rc,
		        err ? err : "(none)", want);
	}
	CHECK_EQ(rc, MK_EUPSTREAM);
	CHECK(strcmp(err, want) == 0);
	CHECK(url == NULL);
	CHECK(request_to("/register", 0) == NULL);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "authorize"), 0);
	mk_free(err);
}

/* The query of the authorization server's redirect for url (malloc'd). */
static char *
redirect_query(const char *url)
{
	CURL  *e   = curl_easy_init();
	CURLU *u   = curl_url();
	char  *loc = NULL, *q = NULL, *out;

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	CHECK_EQ(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc);
	CHECK(loc != NULL);
	CHECK_EQ(curl_url_set(u, CURLUPART_URL, loc, 0), CURLUE_OK);
	CHECK_EQ(curl_url_get(u, CURLUPART_QUERY, &q, 0), CURLUE_OK);
	out = strdup(q);
	curl_free(q);
	curl_url_cleanup(u);
	curl_easy_cleanup(e);
	return (out);
}

/* ---- 1 protected-resource metadata, in the spec's order ------------- */

static void
prm_order(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "prm.db");
	char        want[1024], *url, *err;
	int         rc;

	/* no resource_metadata in the challenge: the path-based URL, and
	 * on its 404 the root */
	serve("{\"prm_at\": [\"/.well-known/oauth-protected-resource\"], \"www_rm\": false}",
	      "{}");
	CHECK_EQ(add_oauth(rt, "p_root", "{}", false), 0);
	url = initiate(rt, "p_root", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 404\n"
	         "GET /.well-known/oauth-protected-resource 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /register 201\n");
	mk_free(url);

	/* the challenge's resource_metadata, and only it */
	snprintf(want, sizeof(want),
	         "{\"www\": \"%s/.well-known/oauth-protected-resource\"}",
	         base);
	serve("{}", want);
	CHECK_EQ(add_oauth(rt, "p_www", "{}", false), 0);
	url = initiate(rt, "p_www", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /register 201\n");
	mk_free(url);

	/* a 5xx is a failure, not "there is none" (no legacy fallback) */
	serve("{\"www_rm\": false}",
	      "{\"fail\": {\"doc\": \"prm\", \"status\": 500, \"body\": \"down\"}}");
	CHECK_EQ(add_oauth(rt, "p_down", "{}", false), 0);
	snprintf(want, sizeof(want),
	         "no protected-resource metadata at %s: HTTP 500", base);
	url = initiate(rt, "p_down", &rc, &err);
	CHECK_EQ(rc, MK_EUPSTREAM);
	CHECK(strstr(err, want) != NULL);
	CHECK(request_to("/.well-known/oauth-authorization-server", 0) ==
	      NULL);
	mk_free(err);
	close_rt(&rt, &sb);
}

/* ---- 2 authorization-server metadata, in the spec's order ----------- */

static void
as_order(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "as.db");
	char        m[1024], *url, *err;
	int         rc;

	/* an issuer with a path: three candidates, in order */
	snprintf(
	        m, sizeof(m),
	        "{\"prm\": {\"authorization_servers\": [\"%s/tenant1\"]}, \"as\": {\"issuer\": \"%s/tenant1\"}}",
	        base, base);
	serve("{\"as_at\": [\"/tenant1/.well-known/openid-configuration\"]}",
	      m);
	CHECK_EQ(add_oauth(rt, "a_path", "{}", false), 0);
	url = initiate(rt, "a_path", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server/tenant1 404\n"
	         "GET /.well-known/openid-configuration/tenant1 404\n"
	         "GET /tenant1/.well-known/openid-configuration 200\n"
	         "POST /register 201\n");
	mk_free(url);

	/* without a path: RFC 8414's, then OpenID's */
	serve("{\"as_at\": [\"/.well-known/openid-configuration\"]}", "{}");
	CHECK_EQ(add_oauth(rt, "a_oidc", "{}", false), 0);
	url = initiate(rt, "a_oidc", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server 404\n"
	         "GET /.well-known/openid-configuration 200\n"
	         "POST /register 201\n");
	mk_free(url);

	/* RFC 8414 section 3.3: issuer present and the one fetched for */
	serve("{}", "{\"as\": {\"issuer\": null}}");
	CHECK_EQ(add_oauth(rt, "a_noiss", "{}", false), 0);
	discovery_refused(rt, "a_noiss",
	                  "the authorization server metadata has no issuer");
	snprintf(m, sizeof(m), "{\"as\": {\"issuer\": \"%s/other\"}}", base);
	serve("{}", m);
	CHECK_EQ(add_oauth(rt, "a_wrong", "{}", false), 0);
	discovery_refused(
	        rt, "a_wrong",
	        "issuer from the authorization server metadata is not the authorization server it was fetched for");
	close_rt(&rt, &sb);
}

/* ---- 3 resource validation, 12 PKCE S256 ------------------------- */

static void
resource_and_pkce(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "res.db");
	char        m[512], *url, *err;
	int         rc;

	snprintf(m, sizeof(m), "{\"prm\": {\"resource\": \"%s/other\"}}",
	         base);
	serve("{}", m);
	CHECK_EQ(add_oauth(rt, "r_other", "{}", false), 0);
	discovery_refused(
	        rt, "r_other",
	        "resource from the protected-resource metadata does not name this MCP server's URL: the metadata is another resource's, so no authorization is started");
	snprintf(m, sizeof(m),
	         "{\"prm\": {\"resource\": \"http://127.0.0.2:%d/mcp\"}}",
	         srv.port);
	serve("{}", m);
	CHECK_EQ(add_oauth(rt, "r_host", "{}", false), 0);
	discovery_refused(
	        rt, "r_host",
	        "resource from the protected-resource metadata does not name this MCP server's URL: the metadata is another resource's, so no authorization is started");
	serve("{}", "{\"prm\": {\"resource\": null}}");
	CHECK_EQ(add_oauth(rt, "r_none", "{}", false), 0);
	discovery_refused(rt, "r_none",
	                  "the protected-resource metadata has no resource");

	/* the root's identifier covers the server; the metadata's is the
	 * resource sent */
	snprintf(m, sizeof(m), "{\"prm\": {\"resource\": \"%s/\"}}", base);
	serve("{}", m);
	CHECK_EQ(add_oauth(rt, "r_root", "{}", false), 0);
	url = initiate(rt, "r_root", &rc, &err);
	CHECK_EQ(rc, 0);
	CHECK(strstr(url, "&resource=http%3A%2F%2F127.0.0.1%3A") != NULL);
	mk_free(url);

	/* PKCE: S256 must be advertised */
	serve("{}", "{\"as\": {\"code_challenge_methods_supported\": null}}");
	CHECK_EQ(add_oauth(rt, "k_none", "{}", false), 0);
	discovery_refused(
	        rt, "k_none",
	        "the authorization server metadata does not list S256 in code_challenge_methods_supported: the authorization server does not support PKCE S256, so no authorization is started");
	serve("{}",
	      "{\"as\": {\"code_challenge_methods_supported\": [\"plain\"]}}");
	CHECK_EQ(add_oauth(rt, "k_plain", "{}", false), 0);
	discovery_refused(
	        rt, "k_plain",
	        "the authorization server metadata does not list S256 in code_challenge_methods_supported: the authorization server does not support PKCE S256, so no authorization is started");
	close_rt(&rt, &sb);
}

/* ---- 4 client authentication at the token endpoint ------------------ */

/* The auth of the k-th /token request is how, and its grant grant. */
static void
token_auth_is(int k, const char *grant, const char *how)
{
	json_t *e = request_to("/token", k);

	CHECK(e != NULL);
	CHECK(strcmp(token_field(e, "form", "grant_type"), grant) == 0);
	if (strcmp(token_field(e, NULL, "auth"), how) != 0) {
		fprintf(stderr, "token request %d: auth %s, wanted %s\n", k,
		        token_field(e, NULL, "auth"), how);
	}
	CHECK(strcmp(token_field(e, NULL, "auth"), how) == 0);
	json_decref(e);
}

static void
auth_methods(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "auth.db");
	int         at = 0;
	json_t     *e;
	char       *id;

	/* a configured secret, an AS that takes only client_secret_post:
	 * the code and the refresh alike */
	serve("{\"auth_methods\": [\"client_secret_post\"]}",
	      "{\"as\": {\"token_endpoint_auth_methods_supported\": [\"client_secret_post\"]}}");
	CHECK_EQ(
	        add_oauth(
	                rt, "m_post",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	                false),
	        0);
	bootstrap(rt, "m_post", false);
	wait_state(&sb, &at, "m_post", "healthy", NULL);
	id = id_of(&sb, "m_post");
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	free(id);
	token_auth_is(0, "authorization_code", "post");
	token_auth_is(1, "refresh_token", "post");
	e = request_to("/token", 0);
	CHECK(strcmp(token_field(e, "form", "client_id"), "static-client") ==
	      0);
	CHECK(strcmp(token_field(e, "form", "client_secret"), "*") == 0);
	json_decref(e);

	/* the default list: client_secret_basic */
	serve("{\"auth_methods\": [\"client_secret_basic\"]}", "{}");
	CHECK_EQ(
	        add_oauth(
	                rt, "m_basic",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	                false),
	        0);
	bootstrap(rt, "m_basic", false);
	wait_state(&sb, &at, "m_basic", "healthy", NULL);
	token_auth_is(0, "authorization_code", "basic");

	/* registration: an AS that takes no public clients gets asked for
	 * client_secret_basic, and it is used */
	serve("{}",
	      "{\"as\": {\"token_endpoint_auth_methods_supported\": [\"client_secret_basic\"]}}");
	CHECK_EQ(add_oauth(rt, "m_reg", "{}", false), 0);
	bootstrap(rt, "m_reg", false);
	wait_state(&sb, &at, "m_reg", "healthy", NULL);
	e = request_to("/register", 0);
	CHECK(strcmp(json_string_value(
	                     json_object_get(json_object_get(e, "json"),
	                                     "token_endpoint_auth_method")),
	             "client_secret_basic") == 0);
	json_decref(e);
	token_auth_is(0, "authorization_code", "basic");

	/* what registration granted wins over what was asked */
	serve("{\"register_method\": \"client_secret_post\"}", "{}");
	CHECK_EQ(add_oauth(rt, "m_granted", "{}", false), 0);
	bootstrap(rt, "m_granted", false);
	wait_state(&sb, &at, "m_granted", "healthy", NULL);
	e = request_to("/register", 0);
	CHECK(strcmp(json_string_value(
	                     json_object_get(json_object_get(e, "json"),
	                                     "token_endpoint_auth_method")),
	             "none") == 0);
	json_decref(e);
	token_auth_is(0, "authorization_code", "post");

	/* a public client: its client_id in the body, no secret */
	serve("{}", "{}");
	CHECK_EQ(add_oauth(rt, "m_none", "{}", false), 0);
	bootstrap(rt, "m_none", false);
	wait_state(&sb, &at, "m_none", "healthy", NULL);
	token_auth_is(0, "authorization_code", "none");
	e = request_to("/token", 0);
	CHECK(token_field(e, "form", "client_id") != NULL);
	CHECK(token_field(e, "form", "client_secret") == NULL);
	json_decref(e);
	close_rt(&rt, &sb);
}

/* ---- 5 scope step-up -------------------------------------------------- */

/* echo as user (NULL: the shared credential): its status, *res kept. */
static int
echo_as(mk_runtime *rt, const char *client, const char *user, mk_result **res)
{
	mk_call c = {.size      = sizeof(mk_call),
	             .client    = client,
	             .tool      = "echo",
	             .arguments = "{\"message\": \"hi\"}",
	             .user_id   = user};

	*res = NULL;
	return (mk_tool_call(rt, &c, res));
}

/* The scope of the k-th /authorize request. */
static void
authorize_scope_is(int k, const char *want)
{
	json_t     *e = request_to("/authorize", k);
	const char *s;

	CHECK(e != NULL);
	s = json_string_value(
	        json_object_get(json_object_get(e, "query"), "scope"));
	if (s == NULL || strcmp(s, want) != 0) {
		fprintf(stderr, "authorize scope %s, wanted %s\n",
		        s ? s : "(none)", want);
	}
	CHECK(s != NULL && strcmp(s, want) == 0);
	json_decref(e);
}

static void
step_up(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "step.db");
	int         at = 0;
	mk_result  *res;
	json_t     *v, *p;
	const char *want =
	        "the MCP server needs the scopes \"files:write\" (insufficient_scope): reauthorize for \"files:write mcp:tools\"";

	/* an oauth client: needs_reauth naming the scopes; the next
	 * authorization asks for the union, and the call then works */
	serve("{\"scopes_required\": {\"echo\": \"files:write\"}}", "{}");
	CHECK_EQ(add_oauth(rt, "s_oa", "{}", false), 0);
	bootstrap(rt, "s_oa", false);
	wait_state(&sb, &at, "s_oa", "healthy", NULL);
	authorize_scope_is(0, "mcp:tools");
	CHECK_EQ(echo_as(rt, "s_oa", NULL, &res), MK_EUPSTREAM);
	CHECK(strcmp(res->error, want) == 0);
	mk_result_free(&res);
	wait_state(&sb, &at, "s_oa", "needs_reauth", "credential");
	v = view_of(rt, "s_oa");
	CHECK(strcmp(json_string_value(json_object_get(
	                     json_object_get(v, "last_failure"), "message")),
	             want) == 0);
	json_decref(v);
	bootstrap(rt, "s_oa", true);
	wait_state(&sb, &at, "s_oa", "healthy", NULL);
	authorize_scope_is(1, "files:write mcp:tools");
	CHECK_EQ(echo_as(rt, "s_oa", NULL, &res), 0);
	CHECK(strstr(res->result, "hi") != NULL);
	mk_result_free(&res);
	CHECK_EQ(
	        admin(srv.port, "/admin/counters", NULL, "insufficient_scope"),
	        1);

	/* a server that keeps refusing though the scopes were granted:
	 * one more authorization, then refused without another */
	serve("{\"scopes_required\": {\"echo\": \"files:write\"}, \"scopes_always\": true}",
	      "{}");
	CHECK_EQ(echo_as(rt, "s_oa", NULL, &res), MK_EUPSTREAM);
	mk_result_free(&res);
	wait_state(&sb, &at, "s_oa", "needs_reauth", "credential");
	bootstrap(rt, "s_oa", true);
	wait_state(&sb, &at, "s_oa", "healthy", NULL);
	CHECK_EQ(echo_as(rt, "s_oa", NULL, &res), MK_EUPSTREAM);
	CHECK(strcmp(res->error,
	             "the MCP server keeps refusing for the scopes \"files:write\" (insufficient_scope) though they were granted: not authorizing again (2 step-ups)") ==
	      0);
	mk_result_free(&res);
	v = view_of(rt, "s_oa");
	CHECK(strcmp(json_string_value(json_object_get(v, "state")),
	             "healthy") == 0);
	json_decref(v);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "authorize"), 1);

	/* a per-user caller: a new mcp_auth_required for the union */
	serve("{\"scopes_required\": {\"echo\": \"files:write\"}}", "{}");
	CHECK_EQ(
	        add_user(rt, "s_pu", "per_user_oauth", "\"oauth_config\": {}"),
	        0);
	bootstrap(rt, "s_pu", false);
	wait_state(&sb, &at, "s_pu", "healthy", NULL);
	p = auth_required(rt, "s_pu", "alice", NULL);
	authorize_as(rt, p, "alice");
	json_decref(p);
	whoami_as(rt, "s_pu", "alice", NULL, "alice");
	CHECK_EQ(echo_as(rt, "s_pu", "alice", &res), MK_EAUTH);
	CHECK(res->auth_required != NULL);
	CHECK((p = json_loads(res->auth_required, 0, NULL)) != NULL);
	mk_result_free(&res);
	CHECK(strstr(json_string_value(json_object_get(p, "authorize_url")),
	             "scope=files%3Awrite%20mcp%3Atools") != NULL);
	authorize_as(rt, p, "alice");
	json_decref(p);
	CHECK_EQ(echo_as(rt, "s_pu", "alice", &res), 0);
	CHECK(strstr(res->result, "hi") != NULL);
	mk_result_free(&res);
	close_rt(&rt, &sb);
}

/* ---- 4/10 private_key_jwt (RFC 7523) ---------------------------------- */

/* The oauth_config of a private_key_jwt client (a new reference's text:
 * the key inline, since the API takes env. literally). */
static char *
jwt_config(const char *client, const char *grant, const char *pem)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "client_id", client,
	                      "auth_method", "private_key_jwt", "private_key",
	                      pem);
	char   *t;

	if (grant != NULL) {
		json_object_set_new(o, "grant_type", json_string(grant));
	}
	CHECK((t = json_dumps(o, JSON_COMPACT)) != NULL);
	json_decref(o);
	return (t);
}

/* A new private key of openssl's algorithm args in dir/name.pem (its
 * public half in dir/name.pub): the PEM texts, malloc'd. */
static void
new_key(const char *name, const char *args, char **priv, char **pub)
{
	char  cmd[512], path[128];
	FILE *f;
	long  n;

	snprintf(
	        cmd, sizeof(cmd),
	        "openssl genpkey %s -out %s/%s.pem 2>/dev/null && openssl pkey -in %s/%s.pem -pubout -out %s/%s.pub 2>/dev/null",
	        args, dir, name, dir, name, dir, name);
	CHECK_EQ(system(cmd), 0);
	for (int k = 0; k < 2; k++) {
		char **out = k == 0 ? priv : pub;
		snprintf(path, sizeof(path), "%s/%s.%s", dir, name,
		         k == 0 ? "pem" : "pub");
		CHECK((f = fopen(path, "r")) != NULL);
		fseek(f, 0, SEEK_END);
		n = ftell(f);
		rewind(f);
		CHECK((*out = calloc(1, (size_t)n + 1)) != NULL);
		CHECK_EQ(fread(*out, 1, (size_t)n, f), (size_t)n);
		fclose(f);
	}
}

static void
private_key_jwt(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "pkjwt.db");
	int         at = 0;
	char       *ec, *ec_pub, *rsa, *rsa_pub, *v, *id, *cfg, *list = NULL;
	json_t     *e;

	new_key("ec", "-algorithm EC -pkeyopt ec_paramgen_curve:P-256", &ec,
	        &ec_pub);
	new_key("rsa", "-algorithm RSA -pkeyopt rsa_keygen_bits:2048", &rsa,
	        &rsa_pub);
	json_t *var =
	        json_pack("{s:b, s:{s:s, s:s}, s:[s]}", "client_credentials",
	                  1, "jwt_clients", "jwt-ec", ec_pub, "jwt-rsa",
	                  rsa_pub, "auth_methods", "private_key_jwt");
	CHECK((v = json_dumps(var, JSON_COMPACT)) != NULL);
	json_decref(var);

	/* ES256, client credentials: every grant a new assertion (the
	 * server refuses a jti it saw) */
	serve(v, "{}");
	cfg = jwt_config("jwt-ec", "client_credentials", ec);
	CHECK_EQ(add_oauth(rt, "j_ec", cfg, false), 0);
	free(cfg);
	wait_state(&sb, &at, "j_ec", "healthy", NULL);
	whoami_is(rt, "j_ec", "jwt-ec");
	id = id_of(&sb, "j_ec");
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	free(id);
	for (int k = 0; k < 3; k++) {
		token_auth_is(k, "client_credentials", "jwt");
		CHECK((e = request_to("/token", k)) != NULL);
		CHECK_EQ(json_integer_value(json_object_get(e, "status")),
		         200);
		CHECK(strcmp(token_field(e, "form", "client_assertion"),
		             "*") == 0);
		CHECK(strcmp(token_field(e, "form", "client_assertion_type"),
		             "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") ==
		      0);
		json_decref(e);
	}

	/* RS256, the code flow and its refresh */
	serve(v, "{}");
	cfg = jwt_config("jwt-rsa", NULL, rsa);
	CHECK_EQ(add_oauth(rt, "j_rsa", cfg, false), 0);
	free(cfg);
	bootstrap(rt, "j_rsa", false);
	wait_state(&sb, &at, "j_rsa", "healthy", NULL);
	id = id_of(&sb, "j_rsa");
	CHECK_EQ(force(rt, id, "shared", "", NULL), 0);
	free(id);
	token_auth_is(0, "authorization_code", "jwt");
	token_auth_is(1, "refresh_token", "jwt");

	/* another client's key: refused, needs_reauth with why */
	cfg = jwt_config("jwt-rsa", "client_credentials", ec);
	CHECK_EQ(add_oauth(rt, "j_wrong", cfg, false), 0);
	free(cfg);
	wait_state(&sb, &at, "j_wrong", "needs_reauth", "credential");

	/* no private key shows, nor is logged (the log is at debug) */
	CHECK_EQ(mk_clients_json(rt, "{\"limit\": 100}", &list), 0);
	CHECK(strstr(list, "PRIVATE KEY") == NULL);
	mk_free(list);
	char grep[160];
	snprintf(grep, sizeof(grep), "grep -q 'PRIVATE KEY' %s", logpath);
	CHECK(system(grep) != 0);
	free(v);
	free(ec);
	free(ec_pub);
	free(rsa);
	free(rsa_pub);
	close_rt(&rt, &sb);
}

/* ---- 11 enterprise-managed authorization (ID-JAG) -------------------- */

static void
enterprise(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "jag.db");
	int         at = 0;
	char        extra[1024], want[128], *err = NULL;
	json_t     *e, *p;

	/* the test server is the enterprise IdP and the MCP server's
	 * authorization server at once (a real deployment has two) */
	serve("{\"id_jag\": true}", "{}");
	snprintf(
	        extra, sizeof(extra),
	        "\"token_exchange\": {\"token_url\": \"%s/token\", \"client_id\": \"static-client\", \"client_secret\": \"static-secret\", \"requested_token_type\": \"urn:ietf:params:oauth:token-type:id-jag\", \"subject_token_type\": \"urn:ietf:params:oauth:token-type:id_token\", \"scopes\": [\"mcp:tools\"]}, \"oauth_config\": {\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	        base);
	CHECK_EQ(add_user(rt, "e_jag", "token_exchange", extra), 0);
	CHECK_EQ(mk_client_verify_exchange(rt, "e_jag", "user-admin", &err),
	         0);
	wait_state(&sb, &at, "e_jag", "healthy", NULL);
	as_admin("/admin/reset", "{}");
	whoami_as(rt, "e_jag", "erin", "user-erin", "erin");
	trail_is("POST /token 200\n"
	         "POST /token 200\n");
	e = request_to("/token", 0);
	CHECK(strcmp(token_field(e, "form", "grant_type"),
	             "urn:ietf:params:oauth:grant-type:token-exchange") == 0);
	CHECK(strcmp(token_field(e, "form", "requested_token_type"),
	             "urn:ietf:params:oauth:token-type:id-jag") == 0);
	CHECK(strcmp(token_field(e, "form", "subject_token_type"),
	             "urn:ietf:params:oauth:token-type:id_token") == 0);
	CHECK(strcmp(token_field(e, "form", "audience"), base) == 0);
	snprintf(want, sizeof(want), "%s/mcp", base);
	CHECK(strcmp(token_field(e, "form", "resource"), want) == 0);
	json_decref(e);
	e = request_to("/token", 1);
	CHECK(strcmp(token_field(e, "form", "grant_type"),
	             "urn:ietf:params:oauth:grant-type:jwt-bearer") == 0);
	CHECK(strcmp(token_field(e, "form", "assertion"), "*") == 0);
	CHECK(strcmp(token_field(e, NULL, "auth"), "basic") == 0);
	json_decref(e);
	/* cached: no request for the same caller and token */
	whoami_as(rt, "e_jag", "erin", "user-erin", "erin");
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         2);

	/* a subject the IdP refuses: exchange_error, no redemption */
	p = auth_required(rt, "e_jag", "mal", "bad-mal");
	CHECK(strcmp(json_string_value(json_object_get(p, "kind")),
	             "exchange") == 0);
	CHECK(strcmp(json_string_value(json_object_get(p, "exchange_error")),
	             "invalid_grant") == 0);
	json_decref(p);

	/* an IdP that issues no ID-JAGs: it refuses the request type */
	serve("{}", "{}");
	p = auth_required(rt, "e_jag", "finn", "user-finn");
	CHECK(strcmp(json_string_value(json_object_get(p, "exchange_error")),
	             "invalid_request") == 0);
	json_decref(p);
	CHECK(request_to("/token", 1) == NULL); /* nothing redeemed */
	mk_free(err);
	close_rt(&rt, &sb);
}

/* ---- 7 legacy servers (2025-03-26 authorization) --------------------- */

static void
legacy(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "legacy.db");
	int         at = 0, rc;
	char        want[256], *url, *err;

	/* no protected-resource metadata: AS metadata at the origin */
	serve("{\"prm_at\": [], \"www_rm\": false}", "{}");
	CHECK_EQ(add_oauth(rt, "l_meta", "{}", false), 0);
	bootstrap(rt, "l_meta", false);
	wait_state(&sb, &at, "l_meta", "healthy", NULL);
	whoami_is(rt, "l_meta", "admin");
	trail_is("GET /.well-known/oauth-protected-resource/mcp 404\n"
	         "GET /.well-known/oauth-protected-resource 404\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /register 201\n"
	         "GET /authorize 302\n"
	         "POST /token 200\n");

	/* and no AS metadata either: the default endpoints */
	serve("{\"prm_at\": [], \"as_at\": [], \"www_rm\": false}", "{}");
	CHECK_EQ(add_oauth(rt, "l_default", "{}", false), 0);
	url = initiate(rt, "l_default", &rc, &err);
	CHECK_EQ(rc, 0);
	snprintf(want, sizeof(want), "%s/authorize?", base);
	CHECK(strncmp(url, want, strlen(want)) == 0);
	mk_free(url);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 404\n"
	         "GET /.well-known/oauth-protected-resource 404\n"
	         "GET /.well-known/oauth-authorization-server 404\n"
	         "GET /.well-known/openid-configuration 404\n"
	         "POST /register 201\n");
	bootstrap(rt, "l_default", false);
	wait_state(&sb, &at, "l_default", "healthy", NULL);
	whoami_is(rt, "l_default", "admin");
	close_rt(&rt, &sb);
}

/* ---- 8 the authorization response's issuer (RFC 9207) ---------------- */

/* The callback of name's new flow, its query changed by edit (NULL: as
 * the AS sent it): mk_oauth_callback's status, and *err. */
static int
callback(mk_runtime *rt, const char *name, const char *add, bool drop_iss,
         char **err)
{
	char *url, *q, buf[2048];
	int   rc;

	url = initiate(rt, name, &rc, err);
	CHECK_EQ(rc, 0);
	q = redirect_query(url);
	if (drop_iss && strstr(q, "&iss=") != NULL) {
		*strstr(q, "&iss=") = '\0';
	}
	snprintf(buf, sizeof(buf), "%s%s", q, add != NULL ? add : "");
	*err = NULL;
	rc   = mk_oauth_callback(rt, buf, NULL, err);
	free(q);
	mk_free(url);
	return (rc);
}

static void
issuer_check(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "iss.db");
	int         at = 0;
	char        v[256], *err = NULL;
	const char *m =
	        "{\"as\": {\"authorization_response_iss_parameter_supported\": true}}";

	snprintf(v, sizeof(v), "{\"iss\": \"%s\"}", base);
	serve(v, m);
	CHECK_EQ(add_oauth(rt, "i_ok", "{}", false), 0);
	CHECK_EQ(callback(rt, "i_ok", NULL, false, &err), 0);
	wait_state(&sb, &at, "i_ok", "healthy", NULL);
	mk_free(err);

	/* advertised, then missing: refused, and the flow is spent */
	CHECK_EQ(add_oauth(rt, "i_missing", "{}", false), 0);
	CHECK_EQ(callback(rt, "i_missing", NULL, true, &err), MK_EINVAL);
	CHECK(strcmp(err,
	             "the authorization response carries no iss, though the authorization server says it sends one (RFC 9207): refused") ==
	      0);
	mk_free(err);

	/* another issuer's response (a mix-up) */
	serve("{\"iss\": \"https://as.example/\"}", m);
	CHECK_EQ(add_oauth(rt, "i_other", "{}", false), 0);
	CHECK_EQ(callback(rt, "i_other", NULL, false, &err), MK_EINVAL);
	CHECK(strcmp(err,
	             "the authorization response's iss is not this client's authorization server (RFC 9207): refused") ==
	      0);
	mk_free(err);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "token_requests"),
	         0);

	/* an error answer names its code only */
	serve("{}", "{}");
	CHECK_EQ(add_oauth(rt, "i_denied", "{}", false), 0);
	CHECK_EQ(mk_oauth_callback(
	                 rt, "error=access_denied&error_description=%3Cb%3E",
	                 NULL, &err),
	         MK_EINVAL);
	CHECK(strcmp(err,
	             "the authorization server did not authorize: access_denied") ==
	      0);
	mk_free(err);
	close_rt(&rt, &sb);
}

/* ---- 8 an authorization server that changes issuer -------------------- */

static void
issuer_change(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "moved.db");
	int         at = 0;
	char        m[512];

	serve("{}", "{}");
	CHECK_EQ(add_oauth(rt, "c_moved", "{}", false), 0);
	bootstrap(rt, "c_moved", false);
	wait_state(&sb, &at, "c_moved", "healthy", NULL);

	/* a reauthorization looks again; the same issuer keeps the
	 * registration */
	as_admin("/admin/reset", "{}");
	bootstrap(rt, "c_moved", true);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "GET /authorize 302\n"
	         "POST /token 200\n");

	/* another issuer: the registration and the token are void, the
	 * client registers there, and the authorization goes on */
	snprintf(
	        m, sizeof(m),
	        "{\"prm\": {\"authorization_servers\": [\"%s/tenant2\"]}, \"as\": {\"issuer\": \"%s/tenant2\"}}",
	        base, base);
	serve("{\"as_at\": [\"/.well-known/oauth-authorization-server/tenant2\"]}",
	      m);
	bootstrap(rt, "c_moved", true);
	wait_state(&sb, &at, "c_moved", "needs_reauth", "credential");
	wait_state(&sb, &at, "c_moved", "healthy", NULL);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server/tenant2 200\n"
	         "POST /register 201\n"
	         "GET /authorize 302\n"
	         "POST /token 200\n");
	whoami_is(rt, "c_moved", "admin");
	close_rt(&rt, &sb);
}

/* ---- 9 self-healing registration ------------------------------------ */

static void
self_heal(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "heal.db");
	int         at = 0;
	char       *id, *err = NULL, *q, *url;
	int         rc;
	json_t     *e, *e1;

	serve("{}", "{}");
	CHECK_EQ(add_oauth(rt, "h_oa", "{}", false), 0);
	bootstrap(rt, "h_oa", false);
	wait_state(&sb, &at, "h_oa", "healthy", NULL);
	id = id_of(&sb, "h_oa");

	/* the AS lost its registrations: a refresh is refused with
	 * invalid_client; the client registers again and the refresh is
	 * sent once more under it (refused: the token was the old
	 * client's), so reauthorization - now possible - is asked for */
	as_admin("/admin/forget-clients", "{}");
	as_admin("/admin/reset", "{}");
	CHECK_EQ(force(rt, id, "shared", "", NULL), MK_ESTATE);
	wait_state(&sb, &at, "h_oa", "needs_reauth", "credential");
	trail_is("POST /token 401\n"
	         "POST /register 201\n"
	         "POST /token 400\n");
	e  = request_to("/token", 0);
	e1 = request_to("/token", 1);
	CHECK(strcmp(token_field(e, "form", "client_id"),
	             token_field(e1, "form", "client_id")) != 0);
	json_decref(e);
	json_decref(e1);
	bootstrap(rt, "h_oa", true);
	wait_state(&sb, &at, "h_oa", "healthy", NULL);
	whoami_is(rt, "h_oa", "admin");
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "registrations"), 1);

	/* a code exchange refused with invalid_client: registered again,
	 * and the next authorization works */
	CHECK_EQ(add_oauth(rt, "h_code", "{}", false), 0);
	url = initiate(rt, "h_code", &rc, &err);
	CHECK_EQ(rc, 0);
	q = redirect_query(url);
	mk_free(url);
	as_admin("/admin/forget-clients", "{}");
	as_admin("/admin/reset", "{}");
	rc = mk_oauth_callback(rt, q, NULL, &err);
	free(q);
	CHECK_EQ(rc, MK_EINVAL);
	CHECK(strcmp(err,
	             "the authorization server no longer knows MCP client h_code's registration (invalid_client): it is being registered again; start the authorization again") ==
	      0);
	mk_free(err);
	bootstrap(rt, "h_code", false);
	wait_state(&sb, &at, "h_code", "healthy", NULL);
	whoami_is(rt, "h_code", "admin");
	trail_is("POST /token 401\n"
	         "POST /register 201\n"
	         "GET /authorize 302\n"
	         "POST /token 200\n");
	free(id);
	close_rt(&rt, &sb);
}

/* ---- 10 machine-to-machine: client credentials ------------------------ */

static void
client_credentials(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "cc.db");
	int         at = 0, rc;
	char        want[256], *url, *err;
	json_t     *e, *v;
	const char *cc =
	        "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\", \"grant_type\": \"client_credentials\", \"scopes\": [\"mcp:tools\"]}";

	/* no browser, no pending_verification: discovered, then one grant */
	serve("{\"client_credentials\": true}", "{}");
	CHECK_EQ(add_oauth(rt, "c_basic", cc, false), 0);
	wait_state(&sb, &at, "c_basic", "healthy", NULL);
	CHECK_EQ(count_states(&sb, "c_basic", "pending_verification"), 0);
	whoami_is(rt, "c_basic", "static-client");
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /token 200\n");
	token_auth_is(0, "client_credentials", "basic");
	e = request_to("/token", 0);
	snprintf(want, sizeof(want), "%s/mcp", base);
	CHECK(strcmp(token_field(e, "form", "scope"), "mcp:tools") == 0);
	CHECK(strcmp(token_field(e, "form", "resource"), want) == 0);
	CHECK(token_field(e, "form", "code_challenge") == NULL);
	json_decref(e);
	CHECK_EQ(admin(srv.port, "/admin/counters", NULL, "authorize"), 0);
	url = initiate(rt, "c_basic", &rc, &err);
	CHECK_EQ(rc, MK_EINVAL);
	CHECK(url == NULL);
	CHECK(strcmp(err,
	             "MCP client c_basic uses the client_credentials grant: it has no authorization flow (its token is fetched by the runtime; after a refusal, reconnect it or fix oauth_config)") ==
	      0);
	mk_free(err);

	/* the grant is an oauth client's: a per_user_oauth client that
	 * names it bootstraps and asks each caller to authorize, as the
	 * client actor expects (the credential actor once took it for a
	 * client_credentials client, and its bootstrap failed) */
	CHECK_EQ(
	        add_user(
	                rt, "c_pu", "per_user_oauth",
	                "\"oauth_config\": {\"client_id\": \"static-client\", \"client_secret\": \"static-secret\", \"grant_type\": \"client_credentials\"}"),
	        0);
	bootstrap(rt, "c_pu", false);
	wait_state(&sb, &at, "c_pu", "healthy", NULL);
	v = auth_required(rt, "c_pu", "ivy", NULL);
	CHECK(strcmp(json_string_value(json_object_get(v, "kind")), "oauth") ==
	      0);
	json_decref(v);
	CHECK_EQ(mk_client_remove(rt, "c_pu", NULL), 0);

	/* fetched again ahead of expiry, with no call asking */
	as_admin("/admin/expires-in", "{\"seconds\": 2}");
	CHECK_EQ(mk_client_remove(rt, "c_basic", NULL), 0);
	serve("{\"client_credentials\": true, \"auth_methods\": [\"client_secret_post\"]}",
	      "{\"as\": {\"token_endpoint_auth_methods_supported\": [\"client_secret_post\"]}}");
	CHECK_EQ(add_oauth(rt, "c_post", cc, true), 0);
	wait_state(&sb, &at, "c_post", "healthy", NULL);
	wait_counter(srv.port, "by_grant.client_credentials", 2);
	token_auth_is(0, "client_credentials", "post");
	token_auth_is(1, "client_credentials", "post");
	as_admin("/admin/expires-in", "{\"seconds\": 3600}");
	CHECK_EQ(mk_client_remove(rt, "c_post", NULL), 0);

	/* a refused secret: needs_reauth, stage credential, and why */
	serve("{\"client_credentials\": true}", "{}");
	CHECK_EQ(
	        add_oauth(
	                rt, "c_bad",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"wrong\", \"grant_type\": \"client_credentials\"}",
	                false),
	        0);
	wait_state(&sb, &at, "c_bad", "needs_reauth", "credential");
	v = view_of(rt, "c_bad");
	CHECK(strstr(json_string_value(json_object_get(
	                     json_object_get(v, "last_failure"), "message")),
	             "the client_credentials grant rejected by the authorization server (HTTP 401 invalid_client)") !=
	      NULL);
	json_decref(v);

	/* no client_id: it cannot register itself */
	CHECK_EQ(add_oauth(rt, "c_anon",
	                   "{\"grant_type\": \"client_credentials\"}", false),
	         0);
	wait_state(&sb, &at, "c_anon", NULL, "credential");
	v = view_of(rt, "c_anon");
	CHECK(strstr(json_string_value(json_object_get(
	                     json_object_get(v, "last_failure"), "message")),
	             "oauth_config.grant_type client_credentials needs oauth_config.client_id") !=
	      NULL);
	json_decref(v);
	close_rt(&rt, &sb);
}

/* ---- 13 discovery starts from the MCP server's own answer ------------ */

static void
challenge_first(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "challenge.db");
	int         at = 0;
	char        m[512];

	/* a server that answers a GET 405 (it offers no stream) and an
	 * MCP request without a credential 401, its resource_metadata on
	 * no well-known path: that URL is the one fetched; a configured
	 * client, so nothing registers */
	snprintf(m, sizeof(m),
	         "{\"www\": \"%s/custom/metadata/location.json\"}", base);
	serve("{\"get_405\": true, \"prm_at\": [\"/custom/metadata/location.json\"], \"www_scope\": null}",
	      m);
	CHECK_EQ(
	        add_oauth(
	                rt, "w_custom",
	                "{\"client_id\": \"static-client\", \"client_secret\": \"static-secret\"}",
	                false),
	        0);
	bootstrap(rt, "w_custom", false);
	wait_state(&sb, &at, "w_custom", "healthy", NULL);
	whoami_is(rt, "w_custom", "admin");
	trail_is("GET /custom/metadata/location.json 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "GET /authorize 302\n"
	         "POST /token 200\n");
	authorize_scope_is(0, "mcp:tools"); /* scopes_supported */
	close_rt(&rt, &sb);
}

static void
challenge_scope(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "scope.db");
	int         at = 0;

	/* the challenge's scope is what the first authorization asks
	 * for, not the metadata's scopes_supported */
	serve("{\"get_405\": true, \"www_scope\": \"files:read\"}", "{}");
	CHECK_EQ(add_oauth(rt, "w_scope", "{}", false), 0);
	bootstrap(rt, "w_scope", false);
	wait_state(&sb, &at, "w_scope", "healthy", NULL);
	authorize_scope_is(0, "files:read");
	close_rt(&rt, &sb);
}

/* ---- 7 a 2025-03-26 server's metadata at its origin ----------------- */

/* Adds an oauth client of the MCP server at url, the port, /mcp. */
static void
add_at(mk_runtime *rt, const char *name, const char *url)
{
	char u[128], *err = NULL;

	snprintf(u, sizeof(u), "%s%d/mcp", url, srv.port);
	if (add(rt, &err,
	        "{\"name\": \"%s\", \"connection_type\": \"http\", \"connection_string\": \"%s\", \"auth_type\": \"oauth\", \"oauth_config\": {}, \"tools_to_execute\": [\"*\"]}",
	        name, u) != 0) {
		fprintf(stderr, "add %s: %s\n", name, err);
		CHECK(0);
	}
	mk_free(err);
}

static void
legacy_origin(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "origin.db");
	int         rc;
	char        m[512], grep[512], *url, *err;

	/* the server's URL as an operator wrote it (its host in
	 * capitals); the metadata at its origin names that origin in
	 * lower case, with a "/": the same URL (RFC 3986 section 6.2.3) */
	snprintf(m, sizeof(m),
	         "{\"as\": {\"issuer\": \"http://localhost:%d/\"}}", srv.port);
	serve("{\"prm_at\": [], \"www_rm\": false}", m);
	add_at(rt, "o_case", "http://LocalHost:");
	url = initiate(rt, "o_case", &rc, &err);
	if (rc != 0) {
		fprintf(stderr, "o_case: %s\n", err);
	}
	CHECK_EQ(rc, 0);
	mk_free(url);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 404\n"
	         "GET /.well-known/oauth-protected-resource 404\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /register 201\n");

	/* metadata there that names another issuer is not used (RFC 8414
	 * section 3.3), and the log says why */
	snprintf(m, sizeof(m), "{\"as\": {\"issuer\": \"%s/tenant1\"}}", base);
	serve("{\"prm_at\": [], \"www_rm\": false}", m);
	CHECK_EQ(add_oauth(rt, "o_other", "{}", false), 0);
	discovery_refused(
	        rt, "o_other",
	        "issuer from the authorization server metadata at the MCP server's origin (2025-03-26) is not that origin (it has a path, a query or a fragment): RFC 8414 section 3.3 forbids using it");
	snprintf(
	        grep, sizeof(grep),
	        "grep -q 'o_other: the authorization server metadata at %s (no protected-resource metadata: 2025-03-26) names another issuer (it has a path' %s",
	        base, logpath);
	CHECK_EQ(system(grep), 0);
	close_rt(&rt, &sb);
}

/* ---- 4 private_key_jwt's audience (RFC 7523bis) ----------------------- */

static void
jwt_audience(void)
{
	sub         sb;
	mk_runtime *rt = open_rt(&sb, "aud.db");
	int         at = 0;
	char       *ec, *ec_pub, *v, *cfg, want[128];
	json_t     *e, *o;

	new_key("aud", "-algorithm EC -pkeyopt ec_paramgen_curve:P-256", &ec,
	        &ec_pub);
	json_t *var = json_pack("{s:b, s:b, s:{s:s}}", "client_credentials", 1,
	                        "jwt_aud_issuer", 1, "jwt_clients", "jwt-ec",
	                        ec_pub);
	CHECK((v = json_dumps(var, JSON_COMPACT)) != NULL);
	json_decref(var);

	/* the metadata names its issuer: that is the audience, the only
	 * one an RFC 7523bis server takes */
	serve(v, "{}");
	cfg = jwt_config("jwt-ec", "client_credentials", ec);
	CHECK_EQ(add_oauth(rt, "a_iss", cfg, false), 0);
	free(cfg);
	wait_state(&sb, &at, "a_iss", "healthy", NULL);
	whoami_is(rt, "a_iss", "jwt-ec");
	CHECK((e = request_to("/token", 0)) != NULL);
	CHECK(strcmp(token_field(e, NULL, "aud"), base) == 0);
	json_decref(e);

	/* configured endpoints, no metadata: the token endpoint */
	free(v);
	var = json_pack("{s:b, s:{s:s}}", "client_credentials", 1,
	                "jwt_clients", "jwt-ec", ec_pub);
	CHECK((v = json_dumps(var, JSON_COMPACT)) != NULL);
	json_decref(var);
	serve(v, "{}");
	snprintf(want, sizeof(want), "%s/token", base);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "client_id", "jwt-ec",
	              "auth_method", "private_key_jwt", "private_key", ec,
	              "grant_type", "client_credentials", "token_url", want,
	              "authorize_url", want);
	CHECK((cfg = json_dumps(o, JSON_COMPACT)) != NULL);
	json_decref(o);
	CHECK_EQ(add_oauth(rt, "a_tok", cfg, false), 0);
	free(cfg);
	wait_state(&sb, &at, "a_tok", "healthy", NULL);
	trail_is("POST /token 200\n");
	CHECK((e = request_to("/token", 0)) != NULL);
	CHECK(strcmp(token_field(e, NULL, "aud"), want) == 0);
	json_decref(e);
	free(v);
	free(ec);
	free(ec_pub);
	close_rt(&rt, &sb);
}

/* ---- 6 the server's client ID metadata document, for every client ---- */

static void
cimd_default(void)
{
	sub         sb;
	mk_runtime *rt;
	char        want[256], *url, *err, *q;
	int         rc;

	client_metadata_url = "http://127.0.0.1:9/oauth/client-metadata.json";
	rt                  = open_rt(&sb, "cimd.db");
	client_metadata_url = NULL;

	/* an authorization server that takes such documents: no
	 * registration, the document's URL is the client_id */
	serve("{\"cimd\": true}", "{}");
	CHECK_EQ(add_oauth(rt, "d_doc", "{}", false), 0);
	url = initiate(rt, "d_doc", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n");
	CHECK((q = strstr(url, "client_id=")) != NULL);
	snprintf(want, sizeof(want), "client_id=%s&",
	         "http%3A%2F%2F127.0.0.1%3A9%2Foauth%2Fclient-metadata.json");
	CHECK(strncmp(q, want, strlen(want)) == 0);
	mk_free(url);

	/* a configured client_id is used as it is */
	serve("{\"cimd\": true}", "{}");
	CHECK_EQ(add_oauth(rt, "d_own", "{\"client_id\": \"static-client\"}",
	                   false),
	         0);
	url = initiate(rt, "d_own", &rc, &err);
	CHECK_EQ(rc, 0);
	CHECK(strstr(url, "client_id=static-client&") != NULL);
	mk_free(url);

	/* one that does not: dynamic registration */
	serve("{}", "{}");
	CHECK_EQ(add_oauth(rt, "d_reg", "{}", false), 0);
	url = initiate(rt, "d_reg", &rc, &err);
	CHECK_EQ(rc, 0);
	trail_is("GET /.well-known/oauth-protected-resource/mcp 200\n"
	         "GET /.well-known/oauth-authorization-server 200\n"
	         "POST /register 201\n");
	mk_free(url);
	close_rt(&rt, &sb);
}

int
main(int argc, char **argv)
{
	oauth_suite_begin();
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", srv.port);
	RUN_IF(prm_order);
	RUN_IF(as_order);
	RUN_IF(resource_and_pkce);
	RUN_IF(auth_methods);
	RUN_IF(step_up);
	RUN_IF(legacy);
	RUN_IF(issuer_check);
	RUN_IF(issuer_change);
	RUN_IF(self_heal);
	RUN_IF(client_credentials);
	RUN_IF(private_key_jwt);
	RUN_IF(enterprise);
	RUN_IF(challenge_first);
	RUN_IF(challenge_scope);
	RUN_IF(legacy_origin);
	RUN_IF(jwt_audience);
	RUN_IF(cimd_default);
	oauth_suite_end();
	return (0);
}
