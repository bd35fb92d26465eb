/*
 * routes.c - the daemon's one routing table (method, path, lane, who may
 * call, handler).  Its handlers: page.c (the page, the probes),
 * clients.c (the list, the admin API's clients), flows.c (credential
 * flows), calls.c (tool calls), metrics.c, events.c (the event stream),
 * gateway/ (/mcp).
 *
 * DESIGN: a route's auth is decided at admission (auth.c) before its
 * body is read;
 * a handler sees only requests its route allows, and narrows what a
 * virtual key may reach (its clients and tools) itself.  Every answer is
 * JSON ({"error": "..."} with a status that fits), never a secret.
 * Without an admin token the API never creates or changes a stdio
 * client: a command line comes from config.json only.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/daemon.h"

/* Every endpoint: its lane, who may call it, its handler, and whether it
 * runs direct (struct route). */
static const route routes[] = {
        {"GET", "/", LANE_INLINE, AUTH_OPEN, route_page, false},
        {"GET", "/healthz", LANE_INLINE, AUTH_OPEN, route_healthz, false},
        {"GET", "/oauth/client-metadata.json", LANE_PROBE, AUTH_OPEN,
         route_client_metadata, false},
        {"GET", "/readyz", LANE_PROBE, AUTH_OPEN, route_readyz, false},
        {"GET", "/metrics", LANE_PROBE, AUTH_METRICS, route_metrics, false},
        {"GET", "/api/events", LANE_INLINE, AUTH_READ, events_open, false},
        {"GET", "/api/oauth/callback", LANE_CALLBACK, AUTH_OPEN,
         route_oauth_callback, false},
        {"GET", "/api/mcp/clients", LANE_ADMIN, AUTH_READ, route_clients_list,
         false},
        {"GET", "/api/status", LANE_ADMIN, AUTH_READ, route_status, false},
        {"GET", "/api/mcp/calls", LANE_ADMIN, AUTH_ADMIN, route_calls, false},
        {"POST", "/api/mcp/client", LANE_ADMIN, AUTH_ADMIN, route_client_write,
         false},
        {"PUT", "/api/mcp/client/*", LANE_ADMIN, AUTH_ADMIN,
         route_client_write, false},
        {"DELETE", "/api/mcp/client/*", LANE_ADMIN, AUTH_ADMIN,
         route_client_remove, false},
        {"POST", "/api/mcp/client/*/reconnect", LANE_ADMIN, AUTH_ADMIN,
         route_lifecycle, false},
        {"POST", "/api/mcp/client/*/disable", LANE_ADMIN, AUTH_ADMIN,
         route_lifecycle, false},
        {"POST", "/api/mcp/client/*/enable", LANE_ADMIN, AUTH_ADMIN,
         route_lifecycle, false},
        {"POST", "/api/mcp/client/*/refresh-tools", LANE_ADMIN, AUTH_ADMIN,
         route_lifecycle, false},
        {"POST", "/api/mcp/client/*/reauthorize", LANE_ADMIN, AUTH_ADMIN,
         route_authorize, false},
        {"POST", "/api/mcp/client/*/initiate-verification", LANE_ADMIN,
         AUTH_ADMIN, route_authorize, false},
        {"POST", "/api/mcp/client/*/complete-oauth", LANE_ADMIN, AUTH_ADMIN,
         route_complete_oauth, false},
        {"POST", "/api/mcp/client/*/verify-headers", LANE_ADMIN, AUTH_ADMIN,
         route_verify_headers, false},
        {"POST", "/api/mcp/client/*/verify-exchange", LANE_ADMIN, AUTH_ADMIN,
         route_verify_exchange, false},
        {"GET", "/api/mcp/client/*/history", LANE_ADMIN, AUTH_READ,
         route_client_history, false},
        {"GET", "/api/mcp/client/*/tools/history", LANE_ADMIN, AUTH_READ,
         route_client_tool_versions, false},
        {"POST", "/api/mcp/client/*/tools/approve", LANE_ADMIN, AUTH_ADMIN,
         route_tools_approve, false},
        {"POST", "/api/mcp/client/*/tools/reject", LANE_ADMIN, AUTH_ADMIN,
         route_tools_reject, false},
        {"GET", "/api/mcp/client/*/elicitations", LANE_ADMIN, AUTH_ADMIN,
         route_inputs_list, false},
        {"POST", "/api/mcp/client/*/elicitation/*", LANE_ADMIN, AUTH_ADMIN,
         route_input_answer, false},
        /* the data plane: a caller's own credential, and tool calls */
        {"POST", "/api/mcp/client/*/submit-headers", LANE_DATA, AUTH_CALL,
         route_submit_headers, false},
        {"POST", "/api/mcp/client/*/user-oauth", LANE_DATA, AUTH_CALL,
         route_user_oauth, false},
        {"POST", "/api/mcp/tool/execute", LANE_DATA, AUTH_CALL,
         route_tool_execute, true},
        /* the gateway: one MCP server of every client a caller reaches */
        {"POST", "/mcp", LANE_DATA, AUTH_MCP, route_mcp, true},
        {"DELETE", "/mcp", LANE_DATA, AUTH_MCP, route_mcp_end, false},
        {"GET", "/mcp", LANE_INLINE, AUTH_MCP, route_mcp_stream, false},
        /* a tool group's (server.tool_groups): the same, its subset */
        {"POST", "/mcp/*", LANE_DATA, AUTH_MCP, route_mcp, true},
        {"DELETE", "/mcp/*", LANE_DATA, AUTH_MCP, route_mcp_end, false},
        {"GET", "/mcp/*", LANE_INLINE, AUTH_MCP, route_mcp_stream, false},
};

/* rest matches tail: equal, or, when tail ends in "*", equal up to it
 * and then one non-empty segment (the handler reads it from the path). */
static bool
tail_matches(const char *tail, const char *rest)
{
	size_t n = strlen(tail);

	if (n == 0 || tail[n - 1] != '*') {
		return (strcmp(tail, rest) == 0);
	}
	return (strncmp(tail, rest, n - 1) == 0 && rest[n - 1] != '\0' &&
	        strchr(rest + n - 1, '/') == NULL);
}

/* path matches pattern ("*": one non-empty segment, the first copied to
 * *id). */
static bool
match(const char *pattern, const char *path, char **id)
{
	const char *star = strchr(pattern, '*');
	size_t      pre  = star != NULL ? (size_t)(star - pattern) : 0;

	if (star == NULL) {
		return (strcmp(pattern, path) == 0);
	}
	if (strncmp(pattern, path, pre) != 0) {
		return (false);
	}
	const char *seg = path + pre;
	size_t      n   = strcspn(seg, "/");
	if (n == 0 || !tail_matches(star + 1, seg + n)) {
		return (false);
	}
	*id = strndup(seg, n);
	return (*id != NULL);
}

const route *
route_find(const char *method, const char *path, char **id, bool *other_method)
{
	*other_method = false;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		char *got = NULL;
		if (!match(routes[i].path, path, &got)) {
			continue;
		}
		if (strcmp(routes[i].method, method) == 0) {
			*id = got;
			return (&routes[i]);
		}
		free(got);
		*other_method = true;
	}
	return (NULL);
}
