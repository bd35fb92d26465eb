/*
 * flows.c - the credential flows' handlers: the admin's bootstrap and
 * repair (reauthorize, initiate-verification, complete-oauth,
 * verify-headers, verify-exchange), the OAuth callback, and a caller's
 * own credential (submit-headers, user-oauth).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

/* An authorize URL and its flow's id, or the error. */
static void
answer_flow(req *r, int rc, char *err, char *url, char *state)
{
	answer_api(r, rc, err, 200,
	           rc == 0 ? json_pack("{s:s, s:s}", "authorize_url", url,
	                               "session_id", state)
	                   : NULL);
	mk_free(url);
	mk_free(state);
}

/* reauthorize, initiate-verification */
void
route_authorize(req *r, const char *id, json_t *body)
{
	char *err = NULL, *url = NULL, *state = NULL;
	int   rc = strstr(r->path, "/reauthorize") != NULL
	          ? mk_client_reauthorize(D.rt, id, &url, &state, &err)
	          : mk_client_initiate_verification(D.rt, id, &url, &state,
	                                            &err);

	answer_flow(r, rc, err, url, state);
}

void
route_complete_oauth(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc;

	if (http_field(body, "state") == NULL ||
	    http_field(body, "code") == NULL) {
		answer_error(r, 400, "the body needs state and code");
		return;
	}
	rc = mk_client_complete_oauth(D.rt, id, http_field(body, "state"),
	                              http_field(body, "code"), &err);
	answer_api(r, rc, err, 200, NULL);
}

/* The headers object of body as JSON text (a secret), or NULL. */
static char *
headers_text(json_t *body)
{
	json_t *h = json_object_get(body, "headers");

	return (json_is_object(h) ? json_dumps(h, JSON_COMPACT) : NULL);
}

void
route_verify_headers(req *r, const char *id, json_t *body)
{
	char *err = NULL, *text = headers_text(body);
	int   rc;

	if (text == NULL) {
		answer_error(r, 400, "the body needs headers: an object");
		return;
	}
	rc = mk_client_verify_headers(D.rt, id, text, &err);
	mk_free_secret(text);
	answer_api(r, rc, err, 200, NULL);
}

void
route_verify_exchange(req *r, const char *id, json_t *body)
{
	char *err = NULL;
	int   rc;

	if (http_field(body, "subject_token") == NULL) {
		answer_error(r, 400, "the body needs subject_token");
		return;
	}
	rc = mk_client_verify_exchange(
	        D.rt, id, http_field(body, "subject_token"), &err);
	answer_api(r, rc, err, 200, NULL);
}

void
route_oauth_callback(req *r, const char *id, json_t *body)
{
	char *err = NULL, page[1024];
	int   rc  = mk_oauth_callback(D.rt, r->query, NULL, &err);

	snprintf(
	        page, sizeof(page),
	        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpkeep</title></head><body><h1>%s</h1><p>%s</p></body></html>",
	        rc == 0 ? "Authorized" : "Not authorized",
	        rc == 0 ? "The MCP client is authorized: you may close this window."
	                : "The authorization could not be completed: start it again.");
	mk_free(err);
	answer(r, rc == 0 ? 200 : 400, "text/html; charset=utf-8", page);
}

/* ---- the data plane ----------------------------------------------------- */

void
route_submit_headers(req *r, const char *id, json_t *body)
{
	char       *sid  = mk_query_param(r->query, "session_id");
	char       *text = headers_text(body), *err = NULL;
	const char *mode, *who                      = route_identity(r, &mode);
	int         rc;

	if (sid == NULL || text == NULL) {
		free(sid);
		mk_free_secret(text);
		answer_error(
		        r, 400,
		        "submit-headers needs ?session_id= and a headers object");
		return;
	}
	if (route_key_refuses(r, id, NULL)) {
		free(sid);
		mk_free_secret(text);
		return;
	}
	/* the session is its caller's: the client and the identity of the
	 * call that was told it (another's: 404) */
	rc = mode != NULL
	        ? mk_user_headers_submit(D.rt, id, mode, who, sid, text, &err)
	        : MK_ENOENT;
	if (rc == MK_ENOENT && err == NULL) {
		err = strdup("no such header session for this caller");
	}
	mk_free_secret(text);
	free(sid);
	answer_api(r, rc, err, 200, NULL);
}

void
route_user_oauth(req *r, const char *id, json_t *body)
{
	char       *err = NULL, *url = NULL, *state = NULL;
	const char *mode, *who = route_identity(r, &mode);
	int         rc;

	if (route_key_refuses(r, id, NULL)) {
		return;
	}
	if (mode == NULL) {
		answer_error(
		        r, 400,
		        "user-oauth needs the caller's identity (a virtual key, X-MCP-User-Id or X-MCP-Session-Id)");
		return;
	}
	rc = mk_user_oauth_start(D.rt, id, mode, who, route_requester(r), &url,
	                         &state, &err);
	answer_flow(r, rc, err, url, state);
}
