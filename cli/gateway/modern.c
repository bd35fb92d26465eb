/*
 * modern.c - /mcp in the 2026-07-28 revision's stateless form: no
 * initialize and no session; each request carries the protocol version
 * and the client's capabilities in params._meta, and its headers repeat
 * what routing needs (MCP-Protocol-Version, Mcp-Method, Mcp-Name), which
 * the server checks against the body.
 *
 * DESIGN: the same methods as the sessions' era, answered the modern way
 * - every result with resultType and _meta serverInfo, list results with
 * ttlMs and cacheScope ("private": a list depends on the caller's key),
 * server/discover ("public") in place of initialize.  subscriptions/listen
 * is a stream of its own: a pseudo-session (sessions.c) that the change
 * watcher treats as any streaming session, its notifications naming the
 * listen's subscriptionId; it ends when the client closes the stream.
 * The order of checks is the revision's: the _meta fields (-32602), the
 * headers (-32020), the version (-32022), the method (-32601).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gateway/gateway.h"

/* A 2026-07-28 error, with data (taken) or NULL. */
static void
modern_error(req *r, unsigned status, json_t *id, int code, const char *msg,
             json_t *data)
{
	json_t *e = json_pack("{s:i, s:s}", "code", code, "message", msg);

	if (data != NULL) {
		json_object_set_new(e, "data", data);
	}
	answer_json(r, status,
	            json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
	                      id != NULL ? id : json_null(), "error", e));
}

/* The header check of the revision's "Server Validation": header name
 * must be present and equal to want (the body's).  True when it is;
 * else answered -32020. */
static bool
header_is(req *r, json_t *id, const char *name, const char *want)
{
	const char *got = http_header(r, name);
	char        msg[300];

	if (want == NULL || (got != NULL && strcmp(got, want) == 0)) {
		return (true);
	}
	snprintf(msg, sizeof(msg),
	         "Header mismatch: %s %s%.80s%s does not match the body's "
	         "\"%.80s\"",
	         name, got != NULL ? "\"" : "", got != NULL ? got : "(absent)",
	         got != NULL ? "\"" : "", want);
	modern_error(r, 400, id, -32020, msg, NULL);
	return (false);
}

static void
discover(req *r, json_t *id)
{
	gw_result(r, id,
	          json_pack("{s:[s, s, s, s, s], s:o, s:s, s:i, s:s}",
	                    "supportedVersions", GW_VERSION_MODERN,
	                    GW_VERSION_LATEST, "2025-06-18", "2025-03-26",
	                    "2024-11-05", "capabilities", gw_capabilities(),
	                    "instructions", GW_INSTRUCTIONS, "ttlMs",
	                    GW_TTL_DISCOVER_MS, "cacheScope", "public"));
}

/* subscriptions/listen: the stream of the list changes the caller
 * sees, those it asked for. */
static void
listen_open(req *r, const json_t *group, json_t *id, json_t *params)
{
	static const char *const asks[] = {"toolsListChanged",
	                                   "promptsListChanged",
	                                   "resourcesListChanged"};
	json_t  *want  = json_object_get(params, "notifications");
	json_t  *got   = json_object();
	char    *sub   = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
	unsigned kinds = 0;
	char     sid[GW_SID_LEN + 1];
	json_t  *all;
	int      rc;

	for (int i = 0; i < 3; i++) {
		if (json_is_true(json_object_get(want, asks[i]))) {
			/* (resources: their templates too) */
			kinds |= i < 2
			        ? 1u << i
			        : 1u << GW_RESOURCES | 1u << GW_TEMPLATES;
			json_object_set_new(got, asks[i], json_true());
		}
	}
	if (sub == NULL || strlen(sub) >= 72) {
		free(sub);
		json_decref(got);
		modern_error(r, 200, id, -32602,
		             "Invalid params: the listen's id is too long",
		             NULL);
		return;
	}
	if ((rc = gw_listen_new(r, sub, kinds, sid)) != 0) {
		free(sub);
		json_decref(got);
		modern_error(
		        r, 503, id, -32000,
		        rc == MK_EBUSY
		                ? "too many MCP sessions and listens "
		                  "are open (" GW_STR(
		                          GW_SESSIONS_MAX) "); try again later"
		                : "out of memory",
		        NULL);
		return;
	}
	/* what it sees now: a later change is told */
	if ((all = clients_all(false)) != NULL) {
		for (int k = 0; k < GW_KINDS; k++) {
			json_t *items = gw_items(
			        all, (gw_kind)k,
			        r->key != NULL ? r->key->clients : NULL,
			        group);
			unsigned char digest[32];
			gw_digest(items, digest);
			(void)gw_session_seen(sid, (gw_kind)k, digest);
			json_decref(items);
		}
		json_decref(all);
	}
	if (events_open_mcp(r, sid) != 0) {
		(void)gw_session_stream(sid, false); /* (answered; it ends) */
		free(sub);
		json_decref(got);
		return;
	}
	char  ack[400];
	char *honoured = json_dumps(got, JSON_COMPACT);
	snprintf(
	        ack, sizeof(ack),
	        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"" GW_META_SUB
	        "\":%s},\"notifications\":%s}}",
	        sub, honoured != NULL ? honoured : "{}");
	(void)events_notify(sid, ack);
	free(honoured);
	json_decref(got);
	free(sub);
}

void
gw_modern(req *r, const json_t *group, json_t *body)
{
	json_t     *id     = json_object_get(body, "id");
	json_t     *params = json_object_get(body, "params");
	json_t     *meta   = json_object_get(params, "_meta");
	const char *method = http_field(body, "method");
	const char *pv =
	        json_string_value(json_object_get(meta, GW_META_VERSION));
	json_t     *caps = json_object_get(meta, GW_META_CAPS);
	const char *name = NULL;
	char        msg[200];

	r->mcp_modern = true;
	if (!json_is_object(caps)) {
		modern_error(r, 400, id, -32602,
		             "Invalid params: _meta needs " GW_META_VERSION
		             " (a string) and " GW_META_CAPS " (an object)",
		             NULL);
		return;
	}
	if (strcmp(method, "tools/call") == 0 ||
	    strcmp(method, "prompts/get") == 0) {
		name = json_string_value(json_object_get(params, "name"));
	} else if (strcmp(method, "resources/read") == 0) {
		name = json_string_value(json_object_get(params, "uri"));
	}
	if (!header_is(r, id, "MCP-Protocol-Version", pv) ||
	    !header_is(r, id, "Mcp-Method", method) ||
	    !header_is(r, id, "Mcp-Name", name)) {
		return;
	}
	if (strcmp(pv, GW_VERSION_MODERN) != 0) {
		snprintf(msg, sizeof(msg),
		         "Unsupported protocol version %.32s", pv);
		modern_error(r, 400, id, -32022, msg,
		             json_pack("{s:[s], s:s}", "supported",
		                       GW_VERSION_MODERN, "requested", pv));
		return;
	}
	if (id == NULL) {
		answer(r, 202, "application/json", ""); /* a notification */
		return;
	}
	gw_agreed a = {
	        .version = GW_VERSION_MODERN,
	        .url_elicit =
	                json_object_get(json_object_get(caps, "elicitation"),
	                                "url") != NULL,
	        .takes = gw_takes(caps)};
	if (strcmp(method, "server/discover") == 0) {
		discover(r, id);
	} else if (strcmp(method, "ping") == 0) {
		gw_result(r, id, json_object());
	} else if (gw_method(r, group, NULL, &a, id, method, params)) {
		/* (a list or a call, answered) */
	} else if (strcmp(method, "subscriptions/listen") == 0) {
		listen_open(r, group, id, params);
	} else {
		snprintf(msg, sizeof(msg), "Method not found: %.100s", method);
		modern_error(r, 404, id, -32601, msg, NULL);
	}
}
